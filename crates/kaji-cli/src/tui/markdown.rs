//! Markdown of the model's replies as styled terminal lines: headings
//! bold, emphasis, lists with bullets or numbers, links, quotes, and code
//! (inline and fenced) in a foreground of its own; fenced code in a known
//! language syntax-highlighted ([`super::highlight`]).
//!
//! A pure function of the text (pulldown-cmark does the parsing): it never
//! draws, wraps or loses text — what it does not know it shows as text.

use pulldown_cmark::{CodeBlockKind, Event, HeadingLevel, Options, Parser, Tag, TagEnd};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};

use super::highlight::CODE;

struct Builder {
    lines: Vec<Line<'static>>,
    current: Vec<Span<'static>>,
    styles: Vec<Style>,
    /// One entry per open list: the next number, or `None` for bullets.
    lists: Vec<Option<u64>>,
    quote: usize,
    in_code: bool,
    /// The open fenced block: its language and the code so far.
    code: Option<(String, String)>,
    link: Option<String>,
    /// The open table: its rows of cell texts so far, and the cell being
    /// read.
    table: Option<(Vec<Vec<String>>, String)>,
}

impl Builder {
    fn style(&self) -> Style {
        self.styles.last().copied().unwrap_or_default()
    }

    fn push_style(&mut self, f: impl FnOnce(Style) -> Style) {
        let s = f(self.style());
        self.styles.push(s);
    }

    fn prefix(&self) -> String {
        let mut p = "│ ".repeat(self.quote);
        p.push_str(&"  ".repeat(self.lists.len().saturating_sub(1)));
        p
    }

    fn flush(&mut self) {
        if !self.current.is_empty() {
            let spans = std::mem::take(&mut self.current);
            self.lines.push(Line::from(spans));
        }
    }

    fn text(&mut self, text: &str) {
        if let Some((_, cell)) = &mut self.table {
            cell.push_str(text);
            return;
        }
        if let Some((_, code)) = &mut self.code {
            code.push_str(text);
            return;
        }
        let style = self.style();
        for (i, part) in text.split('\n').enumerate() {
            if i > 0 {
                self.flush();
                if self.in_code {
                    self.current.push(Span::raw(self.prefix() + "    "));
                }
            }
            if !part.is_empty() {
                self.current.push(Span::styled(part.to_string(), style));
            }
        }
    }

    fn blank(&mut self) {
        self.flush();
        if self.lines.last().is_some_and(|l| !l.spans.is_empty()) {
            self.lines.push(Line::default());
        }
    }
}

/// Renders `text` as lines (no wrapping: the paragraph wraps them).
pub fn render(text: &str) -> Vec<Line<'static>> {
    let mut b = Builder {
        lines: Vec::new(),
        current: Vec::new(),
        styles: Vec::new(),
        lists: Vec::new(),
        quote: 0,
        in_code: false,
        code: None,
        link: None,
        table: None,
    };
    let options =
        Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS | Options::ENABLE_TABLES;
    for event in Parser::new_ext(text, options) {
        match event {
            Event::Start(tag) => start(&mut b, tag),
            Event::End(tag) => end(&mut b, tag),
            Event::Text(t) => b.text(&t),
            Event::Code(t) if b.table.is_some() => b.text(&t),
            Event::Code(t) => b
                .current
                .push(Span::styled(t.to_string(), b.style().fg(CODE))),
            Event::SoftBreak | Event::HardBreak => {
                b.flush();
                let p = b.prefix();
                if !p.is_empty() {
                    b.current.push(Span::raw(p + "  "));
                }
            }
            Event::Rule => {
                b.flush();
                b.lines.push(Line::styled(
                    "────────",
                    Style::default().add_modifier(Modifier::DIM),
                ));
            }
            Event::TaskListMarker(done) => {
                b.current
                    .push(Span::raw(if done { "[x] " } else { "[ ] " }.to_string()));
            }
            Event::Html(t) | Event::InlineHtml(t) => b.text(&t),
            Event::InlineMath(t) | Event::DisplayMath(t) => b.text(&t),
            Event::FootnoteReference(t) => b.text(&format!("[{t}]")),
        }
    }
    b.flush();
    while b.lines.last().is_some_and(|l| l.spans.is_empty()) {
        b.lines.pop();
    }
    b.lines
}

fn start(b: &mut Builder, tag: Tag<'_>) {
    match tag {
        Tag::Table(_) => {
            b.blank();
            b.table = Some((Vec::new(), String::new()));
        }
        Tag::TableHead | Tag::TableRow => {
            if let Some((rows, _)) = &mut b.table {
                rows.push(Vec::new());
            }
        }
        Tag::TableCell => {
            if let Some((_, cell)) = &mut b.table {
                cell.clear();
            }
        }
        Tag::Heading { level, .. } => {
            b.blank();
            b.push_style(|s| {
                let s = s.add_modifier(Modifier::BOLD);
                if level == HeadingLevel::H1 {
                    s.add_modifier(Modifier::UNDERLINED)
                } else {
                    s
                }
            });
        }
        Tag::Paragraph => {
            if b.lists.is_empty() {
                b.blank();
            }
            if b.quote > 0 && b.current.is_empty() {
                b.current.push(Span::raw(b.prefix()));
            }
        }
        Tag::BlockQuote(_) => {
            b.blank();
            b.quote += 1;
            b.push_style(|s| s.add_modifier(Modifier::ITALIC));
        }
        Tag::CodeBlock(kind) => {
            b.blank();
            if let CodeBlockKind::Fenced(lang) = &kind
                && !lang.is_empty()
            {
                b.lines.push(Line::styled(
                    format!("{}  {lang}", b.prefix()),
                    Style::default().add_modifier(Modifier::DIM),
                ));
            }
            b.in_code = true;
            let lang = match &kind {
                CodeBlockKind::Fenced(lang) => lang.to_string(),
                CodeBlockKind::Indented => String::new(),
            };
            b.code = Some((lang, String::new()));
            b.push_style(|_| Style::default().fg(CODE));
        }
        Tag::List(first) => {
            if b.lists.is_empty() {
                b.blank();
            }
            b.flush();
            b.lists.push(first);
        }
        Tag::Item => {
            b.flush();
            let marker = match b.lists.last_mut() {
                Some(Some(n)) => {
                    *n += 1;
                    format!("{}. ", *n - 1)
                }
                _ => "• ".to_string(),
            };
            b.current.push(Span::raw(b.prefix() + &marker));
        }
        Tag::Emphasis => b.push_style(|s| s.add_modifier(Modifier::ITALIC)),
        Tag::Strong => b.push_style(|s| s.add_modifier(Modifier::BOLD)),
        Tag::Strikethrough => b.push_style(|s| s.add_modifier(Modifier::CROSSED_OUT)),
        Tag::Link { dest_url, .. } => {
            b.link = Some(dest_url.to_string());
            b.push_style(|s| s.fg(Color::Blue).add_modifier(Modifier::UNDERLINED));
        }
        _ => b.push_style(|s| s),
    }
}

fn end(b: &mut Builder, tag: TagEnd) {
    match tag {
        TagEnd::TableHead | TagEnd::TableRow => {}
        TagEnd::TableCell => {
            if let Some((rows, cell)) = &mut b.table
                && let Some(row) = rows.last_mut()
            {
                row.push(std::mem::take(cell).trim().to_string());
            }
        }
        TagEnd::Table => {
            if let Some((rows, _)) = b.table.take() {
                table_lines(b, &rows);
            }
        }
        TagEnd::Heading(_) | TagEnd::Emphasis | TagEnd::Strong | TagEnd::Strikethrough => {
            b.styles.pop();
            if matches!(tag, TagEnd::Heading(_)) {
                b.flush();
            }
        }
        TagEnd::Paragraph | TagEnd::Item => b.flush(),
        TagEnd::BlockQuote(_) => {
            b.styles.pop();
            b.flush();
            b.quote = b.quote.saturating_sub(1);
        }
        TagEnd::CodeBlock => {
            b.styles.pop();
            b.in_code = false;
            if let Some((lang, code)) = b.code.take() {
                code_lines(b, &lang, &code);
            }
        }
        TagEnd::List(_) => {
            b.flush();
            b.lists.pop();
        }
        TagEnd::Link => {
            b.styles.pop();
            if let Some(url) = b.link.take() {
                b.current.push(Span::styled(
                    format!(" ({url})"),
                    Style::default().add_modifier(Modifier::DIM),
                ));
            }
        }
        _ => {
            b.styles.pop();
        }
    }
}

/// A table as aligned columns, its header bold and ruled off.
fn table_lines(b: &mut Builder, rows: &[Vec<String>]) {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let width = |c: usize| {
        rows.iter()
            .filter_map(|r| r.get(c))
            .map(|t| t.chars().count())
            .max()
            .unwrap_or(0)
    };
    let widths: Vec<usize> = (0..columns).map(width).collect();
    let prefix = b.prefix();
    for (i, row) in rows.iter().enumerate() {
        let cells: Vec<String> = (0..columns)
            .map(|c| {
                let text = row.get(c).map(String::as_str).unwrap_or("");
                let pad = widths[c].saturating_sub(text.chars().count());
                format!("{text}{}", " ".repeat(pad))
            })
            .collect();
        let style = if i == 0 {
            Style::default().add_modifier(Modifier::BOLD)
        } else {
            Style::default()
        };
        b.lines.push(Line::from(vec![
            Span::raw(prefix.clone()),
            Span::styled(cells.join(" │ ").trim_end().to_string(), style),
        ]));
        if i == 0 {
            let rule: Vec<String> = widths.iter().map(|w| "─".repeat(*w)).collect();
            b.lines.push(Line::styled(
                format!("{prefix}{}", rule.join("─┼─")),
                Style::default().add_modifier(Modifier::DIM),
            ));
        }
    }
}

/// A fenced block's lines, indented: highlighted when its language is
/// known, else in the code colour.
fn code_lines(b: &mut Builder, lang: &str, code: &str) {
    let indent = b.prefix() + "    ";
    let lines = super::highlight::highlight(lang, code).unwrap_or_else(|| {
        code.lines()
            .map(|l| vec![Span::styled(l.to_string(), Style::default().fg(CODE))])
            .collect()
    });
    for spans in lines {
        let mut line = vec![Span::raw(indent.clone())];
        line.extend(spans);
        b.lines.push(Line::from(line));
    }
}

/// The rendering of a text that only grows (a streamed reply), kept in
/// two parts: the blocks before the last blank line outside a code fence,
/// rendered once, and the rest, rendered again on each change. Appending
/// costs the new bytes, not the whole text.
#[derive(Debug, Default, Clone)]
pub struct Incremental {
    /// Bytes of the text rendered into `stable`.
    stable_len: usize,
    /// The lines of the text's first `stable_len` bytes (it only ends
    /// at a blank line outside a code fence).
    stable: Vec<Line<'static>>,
    /// The tail's lines and the text length they were made for.
    tail: Vec<Line<'static>>,
    tail_for: usize,
    /// Where the scan for a split point resumes, and whether a fence is
    /// open there.
    scanned: usize,
    in_fence: bool,
}

impl Incremental {
    /// Brings the rendering up to `text`, which must extend the text of
    /// the previous call (else start with a new `Incremental`).
    pub fn update(&mut self, text: &str) {
        if text.len() == self.tail_for {
            return;
        }
        if text.len() < self.scanned || !text.is_char_boundary(self.scanned) {
            *self = Self::default();
        }
        // Find the last blank line outside a fence in the new part.
        let mut split = None;
        let mut pos = self.scanned;
        for line in text[self.scanned..].split_inclusive('\n') {
            if !line.ends_with('\n') {
                break;
            }
            let trimmed = line.trim_start();
            if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
                self.in_fence = !self.in_fence;
            }
            pos += line.len();
            if !self.in_fence && line.trim().is_empty() {
                split = Some(pos);
            }
        }
        self.scanned = pos;
        if let Some(split) = split
            && split > self.stable_len
        {
            let block = render(&text[self.stable_len..split]);
            if !block.is_empty() {
                if !self.stable.is_empty() {
                    self.stable.push(Line::default());
                }
                self.stable.extend(block);
            }
            self.stable_len = split;
        }
        self.tail = render(&text[self.stable_len..]);
        if !self.tail.is_empty() && !self.stable.is_empty() {
            self.tail.insert(0, Line::default());
        }
        self.tail_for = text.len();
    }

    /// How many lines there are.
    pub fn len(&self) -> usize {
        self.stable.len() + self.tail.len()
    }

    /// Line `i`.
    pub fn line(&self, i: usize) -> &Line<'static> {
        if i < self.stable.len() {
            &self.stable[i]
        } else {
            &self.tail[i - self.stable.len()]
        }
    }
}

#[cfg(test)]
mod table_tests {
    use super::*;

    fn plain(lines: &[Line<'_>]) -> Vec<String> {
        lines.iter().map(|l| l.to_string()).collect()
    }

    #[test]
    fn a_table_is_aligned_columns_not_pipes() {
        let text =
            "Before.\n\n| name | size |\n|---|---:|\n| a.rs | 12 |\n| longer.rs | 3 |\n\nAfter.";
        let lines = plain(&render(text));
        assert!(lines.contains(&"name      │ size".to_string()), "{lines:?}");
        assert!(lines.contains(&"──────────┼─────".to_string()), "{lines:?}");
        assert!(lines.contains(&"a.rs      │ 12".to_string()), "{lines:?}");
        assert!(lines.contains(&"longer.rs │ 3".to_string()), "{lines:?}");
        assert!(lines.iter().all(|l| !l.contains("|---")), "{lines:?}");
        assert_eq!(lines.last().map(String::as_str), Some("After."));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(lines: &[Line<'_>]) -> Vec<String> {
        lines.iter().map(|l| l.to_string()).collect()
    }

    #[test]
    fn headings_lists_code_and_emphasis() {
        let lines = render(
            "# Title\n\nSome *em* and **strong** and `code`.\n\n- one\n- two\n  1. sub\n\n```rust\nfn main() {}\n```\n\n> quoted\n\n[kaji](https://x.y)",
        );
        let text = plain(&lines);
        assert_eq!(text[0], "Title");
        assert!(text.iter().all(|l| !l.contains('#')), "{text:?}");
        assert!(text.contains(&"• one".to_string()), "{text:?}");
        assert!(text.contains(&"  1. sub".to_string()), "{text:?}");
        assert!(text.contains(&"    fn main() {}".to_string()), "{text:?}");
        assert!(text.contains(&"│ quoted".to_string()), "{text:?}");
        assert!(text.contains(&"kaji (https://x.y)".to_string()), "{text:?}");
        assert!(
            lines[0].spans[0]
                .style
                .add_modifier
                .contains(Modifier::BOLD)
        );
        let code_line = lines
            .iter()
            .find(|l| l.to_string().contains("fn main"))
            .unwrap();
        // Highlighted: coloured, in more than one colour.
        let colours: std::collections::HashSet<_> = code_line
            .spans
            .iter()
            .filter(|s| !s.content.trim().is_empty())
            .map(|s| s.style.fg)
            .collect();
        assert!(colours.len() >= 2, "{code_line:?}");
        assert!(!colours.contains(&None) && !colours.contains(&Some(Color::Reset)));
        // Without a known language: the code colour.
        let plain_code = render(
            "```
some code
```",
        );
        assert_eq!(plain(&plain_code), ["    some code"]);
        assert_eq!(plain_code[0].spans[1].style.fg, Some(CODE));
        let em = lines[2].spans.iter().find(|s| s.content == "em").unwrap();
        assert!(em.style.add_modifier.contains(Modifier::ITALIC));
    }

    #[test]
    fn plain_text_and_unclosed_fences_lose_nothing() {
        assert_eq!(plain(&render("just text")), ["just text"]);
        let text = plain(&render("```\npartial code\nmore"));
        assert!(text.iter().any(|l| l.contains("partial code")), "{text:?}");
        assert!(text.iter().any(|l| l.contains("more")), "{text:?}");
    }

    #[test]
    fn incremental_rendering_matches_rendering_the_whole() {
        let text = "# Head\n\npara one\nstill one\n\n```\ncode\n\nmore code\n```\n\n- a\n- b\n\nlast *words*";
        let mut inc = Incremental::default();
        // Streamed in small pieces.
        let mut end = 0;
        while end < text.len() {
            end = (end + 3).min(text.len());
            while !text.is_char_boundary(end) {
                end += 1;
            }
            inc.update(&text[..end]);
        }
        let whole = plain(&render(text));
        let parts: Vec<String> = (0..inc.len()).map(|i| inc.line(i).to_string()).collect();
        assert_eq!(parts, whole);
    }
}
