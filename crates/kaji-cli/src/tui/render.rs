//! Drawing the TUI: a pure function from [`App`] to a ratatui frame.
//!
//! Nothing here changes state except the transcript's page height, which
//! paging needs and only the layout knows, and the cache of rendered
//! Markdown. It never reads keys or events.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Wrap};

use super::app::{self, App, EntryStyle};
use super::diff;

fn style_of(style: EntryStyle) -> Style {
    match style {
        EntryStyle::User => Style::default().add_modifier(Modifier::BOLD),
        EntryStyle::Text | EntryStyle::Diff => Style::default(),
        EntryStyle::Reasoning => Style::default()
            .add_modifier(Modifier::DIM)
            .add_modifier(Modifier::ITALIC),
        EntryStyle::Tool => Style::default().fg(Color::Cyan),
        EntryStyle::ToolResult | EntryStyle::Note | EntryStyle::Live => {
            Style::default().add_modifier(Modifier::DIM)
        }
        EntryStyle::ToolError | EntryStyle::Error => Style::default().fg(Color::Red),
        EntryStyle::Completion => Style::default().fg(Color::Green),
    }
}

/// How many of a running command's last lines are shown.
const LIVE_LINES: usize = 8;

/// Brings the Markdown rendering of entry `i` up to date.
fn update_markdown(app: &mut App, i: usize) {
    let text = &app.entries[i].text;
    app.markdown_cache.entry(i).or_default().update(text);
}

/// The lines of entry `i` that are not Markdown.
fn plain_lines(app: &App, i: usize) -> Vec<Line<'static>> {
    let entry = &app.entries[i];
    let style = style_of(entry.style);
    let mut lines = Vec::new();
    if entry.style == EntryStyle::Diff {
        for l in entry.text.split('\n') {
            lines.push(Line::styled(format!("    {l}"), diff::line_style(l)));
        }
        return lines;
    }
    // A running command's output: its last lines, under the call.
    if entry.style == EntryStyle::Live {
        let shown: Vec<&str> = entry.text.lines().collect();
        let from = shown.len().saturating_sub(LIVE_LINES);
        return shown[from..]
            .iter()
            .map(|l| Line::styled(format!("  │ {}", l.replace('\t', "  ")), style))
            .collect();
    }
    // Reasoning is folded to its first line until Ctrl-O opens it.
    if entry.style == EntryStyle::Reasoning && !app.expanded {
        return folded_reasoning(&entry.text, style);
    }
    match (&entry.detail, app.expanded) {
        (Some(detail), true) => {
            let first = entry.text.split('\n').next().unwrap_or("");
            let first = without_fold_count(first);
            lines.push(Line::styled(first.to_string(), style));
            for l in detail.split('\n').skip(1) {
                lines.push(Line::styled(format!("      {l}"), style));
            }
        }
        _ => {
            for l in entry.text.split('\n') {
                lines.push(Line::styled(l.to_string(), style));
            }
        }
    }
    lines
}

/// A folded entry's line without the count of what folding hides at its
/// end (` (+3 lines)`, ` (+3 lines, Ctrl-O)`); a count inside the line (a
/// tool's summary `x (+2 lines) · exit 1`) stays.
fn without_fold_count(line: &str) -> &str {
    match line.rfind(" (+") {
        Some(i) if line.ends_with(" lines)") || line.ends_with(" lines, Ctrl-O)") => &line[..i],
        _ => line,
    }
}

/// Thinking, folded: its first line and how many more there are (Ctrl-O
/// unfolds every entry).
fn folded_reasoning(text: &str, style: Style) -> Vec<Line<'static>> {
    let mut rest = text.trim().lines();
    let first = rest.next().unwrap_or("");
    let more = rest.count();
    let mut lines = vec![Line::styled(format!("✻ {first}"), style)];
    if more > 0 {
        lines.push(Line::styled(
            format!("  … {more} more line(s) of thinking (Ctrl-O)"),
            style,
        ));
    }
    lines
}

/// The transcript's last lines, enough to fill `rows` rows of `width`
/// columns (an over-estimate: wrapped lines may take more), oldest first,
/// and whether they reach back to its start. A blank line goes before
/// each user message. Only what is collected is cloned, so a frame costs
/// what is on screen, not the whole transcript.
pub fn transcript_tail(app: &mut App, width: u16, rows: usize) -> (Vec<Line<'static>>, bool) {
    let width = width.max(1) as usize;
    let mut out: Vec<Line<'static>> = Vec::new();
    let mut height = 0usize;
    let cost = |l: &Line<'_>| {
        let w = l.width();
        w.div_ceil(width).max(1) + usize::from(w > width)
    };
    for i in (0..app.entries.len()).rev() {
        if app.entries[i].style == EntryStyle::Text {
            update_markdown(app, i);
            if let Some(md) = app.markdown_cache.get(&i) {
                for j in (0..md.len()).rev() {
                    let line = md.line(j);
                    height += cost(line);
                    out.push(line.clone());
                    if height >= rows {
                        break;
                    }
                }
            }
        } else {
            for line in plain_lines(app, i).into_iter().rev() {
                height += cost(&line);
                out.push(line);
                if height >= rows {
                    break;
                }
            }
        }
        if app.entries[i].style == EntryStyle::User && i > 0 {
            out.push(Line::default());
            height += 1;
        }
        if height >= rows {
            out.reverse();
            return (out, i == 0 && height < rows);
        }
    }
    out.reverse();
    (out, true)
}

/// The checklist panel's lines: the todo list and the task list while any
/// item is open, and the running background tasks.
pub fn panel_lines(app: &App) -> Vec<Line<'static>> {
    let mut lines = Vec::new();
    let mark = |text: String, open: bool, active: bool| {
        let style = if active {
            Style::default().fg(Color::Yellow)
        } else if open {
            Style::default()
        } else {
            Style::default()
                .fg(Color::Green)
                .add_modifier(Modifier::DIM)
        };
        Line::styled(text, style)
    };
    if app.todo.iter().any(|t| t.is_open()) {
        for t in &app.todo {
            let active = t.status == kaji_protocol::TodoStatus::InProgress;
            lines.push(mark(app::todo_line(t), t.is_open(), active));
        }
    }
    if app.task_list.iter().any(|t| t.status != "completed") {
        for t in &app.task_list {
            let open = t.status != "completed";
            lines.push(mark(app::task_line(t), open, t.status == "in_progress"));
        }
    }
    for b in app.background.iter().filter(|b| b.status == "running") {
        lines.push(mark(app::background_line(b), true, true));
    }
    lines
}

/// Draws the whole screen.
pub fn draw(frame: &mut Frame<'_>, app: &mut App) {
    let area = frame.area();
    // The ask panel: the question (wrapped, at most 8 lines of it, or 20
    // for a diff), then the keys, under a top border; at most half the
    // screen, and the keys line always shows.
    let ask = app.ask_prompt().map(|(text, keys)| {
        let lines: Vec<Line> = text
            .lines()
            .take(24)
            .enumerate()
            .map(|(i, l)| {
                let style = if i == 0 {
                    Style::default()
                        .fg(Color::Yellow)
                        .add_modifier(Modifier::BOLD)
                } else if i > 1 {
                    diff::line_style(l).remove_modifier(Modifier::DIM)
                } else {
                    Style::default()
                };
                Line::styled(l.to_string(), style)
            })
            .collect();
        let question = Paragraph::new(lines).wrap(Wrap { trim: false });
        let height = question.line_count(area.width) as u16;
        (question, height, keys)
    });
    let ask_height = match &ask {
        Some((_, height, _)) => (height + 2).min(area.height / 2),
        None => 0,
    };
    let panel = panel_lines(app);
    let panel_height = if panel.is_empty() || area.height < 16 {
        0
    } else {
        panel.len().min(8) as u16 + 1
    };
    let mut menu = app.rewind_menu().unwrap_or_else(|| app.menu());
    if menu.is_empty() {
        menu = app
            .file_menu()
            .into_iter()
            .map(|f| (format!("@{f}"), String::new()))
            .collect();
    }
    let menu_height = menu.len().min(8) as u16 + u16::from(menu.len() > 8);
    let input_rows = app.input.text().split('\n').count().clamp(1, 6) as u16;
    let [
        transcript_area,
        panel_area,
        ask_area,
        menu_area,
        status_area,
        input_area,
    ] = Layout::vertical([
        Constraint::Min(1),
        Constraint::Length(panel_height),
        Constraint::Length(ask_height),
        Constraint::Length(menu_height),
        Constraint::Length(1),
        Constraint::Length(input_rows + 2),
    ])
    .areas(area);

    draw_transcript(frame, app, transcript_area);
    if panel_height > 0 {
        let block = Block::default()
            .borders(Borders::TOP)
            .title(" todo · tasks ")
            .border_style(Style::default().add_modifier(Modifier::DIM));
        frame.render_widget(Paragraph::new(panel).block(block), panel_area);
    }
    if let Some((question, _, keys)) = ask {
        let block = Block::default()
            .borders(Borders::TOP)
            .border_style(Style::default().fg(Color::Yellow));
        let inner = block.inner(ask_area);
        frame.render_widget(block, ask_area);
        let [question_area, keys_area] =
            Layout::vertical([Constraint::Min(0), Constraint::Length(1)]).areas(inner);
        frame.render_widget(question, question_area);
        frame.render_widget(
            Paragraph::new(Line::styled(
                keys,
                Style::default().add_modifier(Modifier::DIM),
            )),
            keys_area,
        );
    }
    if menu_height > 0 {
        let lines: Vec<Line> = menu
            .iter()
            .take(8)
            .enumerate()
            .map(|(i, (name, what))| {
                let name_style = if i == 0 {
                    Style::default()
                        .fg(Color::Cyan)
                        .add_modifier(Modifier::BOLD)
                } else {
                    Style::default().fg(Color::Cyan)
                };
                Line::from(vec![
                    Span::styled(format!("  {name:<14}"), name_style),
                    Span::styled(what.clone(), Style::default().add_modifier(Modifier::DIM)),
                ])
            })
            .collect();
        let mut lines = lines;
        if menu.len() > 8 {
            lines.push(Line::styled(
                format!(
                    "  … {} more (type to narrow, Tab completes)",
                    menu.len() - 8
                ),
                Style::default().add_modifier(Modifier::DIM),
            ));
        }
        frame.render_widget(Paragraph::new(lines), menu_area);
    }
    frame.render_widget(
        Paragraph::new(status_line(app, status_area.width)),
        status_area,
    );
    draw_input(frame, app, input_area, input_rows);
}

fn draw_input(frame: &mut Frame<'_>, app: &App, area: Rect, rows: u16) {
    let title = match app.pending.as_ref() {
        Some(_) => " answer ".to_string(),
        None if app.search.is_some() => {
            let query = app.search.as_ref().map(|s| s.query.as_str()).unwrap_or("");
            format!(" history search: {query} (Ctrl-R older · Enter takes · Esc) ")
        }
        None if app.running && !app.queued.is_empty() => {
            format!(" task running · {} queued (Esc aborts) ", app.queued.len())
        }
        None if app.running => " task running: Enter queues, Esc aborts ".to_string(),
        None => " prompt (Enter sends, Shift-Enter newline, Ctrl-D quits) ".to_string(),
    };
    // A narrow terminal gets the title's first word, not a cut sentence.
    let title = if title.chars().count() + 2 > area.width as usize {
        let word = title
            .split([' ', ':'])
            .find(|w| !w.is_empty())
            .unwrap_or("");
        format!(" {word} ")
    } else {
        title
    };
    // Long lines scroll sideways, many lines up, so the cursor stays
    // visible.
    let room = area.width.saturating_sub(5).max(1) as usize;
    let (row, col) = app.input.row_col();
    let skip = col.saturating_sub(room);
    let top = row.saturating_sub(rows as usize - 1);
    let searched = app
        .search
        .as_ref()
        .map(|_| app.search_match().unwrap_or(""));
    let lines: Vec<Line> = searched
        .unwrap_or(app.input.text())
        .split('\n')
        .enumerate()
        .skip(top)
        .take(rows as usize)
        .map(|(i, l)| {
            let shown: String = l.chars().skip(skip).take(room + 1).collect();
            let lead = if i == 0 { "› " } else { "  " };
            Line::raw(format!("{lead}{shown}"))
        })
        .collect();
    let input = Paragraph::new(lines).block(Block::default().borders(Borders::ALL).title(title));
    frame.render_widget(input, area);
    frame.set_cursor_position((
        area.x + 3 + (col - skip) as u16,
        area.y + 1 + (row - top) as u16,
    ));
}

fn draw_transcript(frame: &mut Frame<'_>, app: &mut App, area: Rect) {
    app.page_height = area.height.saturating_sub(1).max(1);
    let rows = area.height as usize + app.scroll_up as usize;
    let (lines, whole) = transcript_tail(app, area.width, rows);
    let paragraph = Paragraph::new(lines).wrap(Wrap { trim: false });
    let total = paragraph.line_count(area.width).min(u16::MAX as usize) as u16;
    let bottom = total.saturating_sub(area.height);
    // Scrolling stops at the top only when the lines reach back to it.
    if whole {
        app.scroll_up = app.scroll_up.min(bottom);
    }
    let top = bottom.saturating_sub(app.scroll_up);
    frame.render_widget(paragraph.scroll((top, 0)), area);
}

/// Short token counts: `950`, `12.3k`, `1.2M`.
fn tokens(n: u64) -> String {
    match n {
        n if n >= 1_000_000 => format!("{:.1}M", n as f64 / 1e6),
        n if n >= 10_000 => format!("{}k", n / 1000),
        n if n >= 1_000 => format!("{:.1}k", n as f64 / 1e3),
        n => n.to_string(),
    }
}

/// The status line in at most `width` columns: model · mode · tokens ·
/// context % · cost · turn · directory · activity; what does not fit goes,
/// the least useful first (directory, turn, cost, context, tokens).
pub fn status_line(app: &App, width: u16) -> Line<'static> {
    let dim = Style::default().add_modifier(Modifier::DIM);
    let yellow = Style::default().fg(Color::Yellow);
    // (priority: lower stays longer, text, style)
    let mut parts: Vec<(u8, String, Style)> = vec![
        (
            0,
            app.status.model.clone(),
            Style::default().fg(Color::Cyan),
        ),
        (1, app.status.permission_mode.clone(), Style::default()),
        (
            3,
            format!(
                "{}↑ {}↓ tokens",
                tokens(app.input_tokens),
                tokens(app.output_tokens)
            ),
            dim,
        ),
    ];
    if !app.status.sandbox.is_empty() {
        parts.insert(2, (2, app.status.sandbox.clone(), Style::default()));
    }
    if let Some(window) = app.context_window.filter(|w| *w > 0) {
        let pct = app.context_tokens.saturating_mul(100) / window;
        parts.push((4, format!("context {pct}%"), dim));
    }
    if let Some(cost) = app.cost_usd {
        parts.push((5, format!("${cost:.2}"), dim));
    }
    parts.push((6, format!("turn {}", app.turns), dim));
    parts.push((7, app.status.cwd.clone(), dim));
    if app.scroll_up > 0 {
        parts.push((2, "scrolled (PageDown)".into(), dim));
    }
    if let Some(notice) = &app.notice {
        parts.push((0, notice.clone(), yellow));
    } else if app.pending.is_some() {
        parts.push((0, "waiting for you".into(), yellow));
    } else if app.running {
        let secs = app.started_at.map(|t| t.elapsed().as_secs()).unwrap_or(0);
        parts.push((0, format!("working… {secs}s"), yellow));
    }
    let fits = |parts: &[(u8, String, Style)]| {
        let len: usize = parts.iter().map(|p| p.1.chars().count() + 3).sum();
        len.saturating_sub(3) <= width as usize
    };
    while !fits(&parts) {
        let Some(worst) = parts.iter().map(|p| p.0).max().filter(|w| *w > 0) else {
            break;
        };
        let i = parts.iter().rposition(|p| p.0 == worst).unwrap_or(0);
        parts.remove(i);
    }
    let mut spans = Vec::new();
    for (i, (_, text, style)) in parts.into_iter().enumerate() {
        if i > 0 {
            spans.push(Span::styled(" · ", dim));
        }
        spans.push(Span::styled(text, style));
    }
    Line::from(spans)
}

#[cfg(test)]
mod tests {
    use super::app::StatusInfo;
    use super::*;
    use kaji_protocol::{SayKind, TaskEvent};
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;

    fn buffer(app: &mut App, width: u16, height: u16) -> ratatui::buffer::Buffer {
        let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
        terminal.draw(|f| draw(f, app)).unwrap();
        terminal.backend().buffer().clone()
    }

    /// Rows of the buffer as text.
    fn rows(buffer: &ratatui::buffer::Buffer) -> Vec<String> {
        let area = buffer.area;
        (0..area.height)
            .map(|y| (0..area.width).map(|x| buffer[(x, y)].symbol()).collect())
            .collect()
    }

    /// The cells of the first row containing `needle`, from its column.
    fn cells_of<'a>(
        buffer: &'a ratatui::buffer::Buffer,
        needle: &str,
    ) -> Vec<&'a ratatui::buffer::Cell> {
        let rows = rows(buffer);
        let (y, row) = rows
            .iter()
            .enumerate()
            .find(|(_, r)| r.contains(needle))
            .unwrap_or_else(|| panic!("no row shows {needle:?}:\n{}", rows.join("\n")));
        let x = row[..row.find(needle).unwrap()].chars().count();
        (x..x + needle.chars().count())
            .map(|x| &buffer[(x as u16, y as u16)])
            .collect()
    }

    fn text_app(text: &str) -> App {
        let mut app = App::new(StatusInfo::default());
        app.on_event(TaskEvent::Say {
            id: 1,
            kind: SayKind::Text,
            text: text.into(),
            partial: false,
            payload: None,
        });
        app
    }

    fn screen(app: &mut App, width: u16, height: u16) -> String {
        let buffer = buffer(app, width, height);
        let mut out = String::new();
        for y in 0..height {
            for x in 0..width {
                out.push_str(buffer[(x, y)].symbol());
            }
            out.push('\n');
        }
        out
    }

    #[test]
    fn thinking_is_folded_until_ctrl_o() {
        let mut app = App::new(StatusInfo::default());
        app.on_event(TaskEvent::Say {
            id: 1,
            kind: SayKind::Reasoning,
            text: "First I read the file.\nTHEN-THE-SECOND-LINE\nand a third".into(),
            partial: false,
            payload: None,
        });
        let folded = screen(&mut app, 60, 12);
        assert!(folded.contains("First I read the file."), "{folded}");
        assert!(!folded.contains("THEN-THE-SECOND-LINE"), "{folded}");
        assert!(folded.contains("2 more line(s) of thinking"), "{folded}");
        app.expanded = true;
        let open = screen(&mut app, 60, 12);
        assert!(open.contains("THEN-THE-SECOND-LINE"), "{open}");
    }

    #[test]
    fn a_long_ask_keeps_its_keys_on_screen() {
        let mut app = App::new(StatusInfo::default());
        app.task_started();
        let (tx, _rx) = tokio::sync::oneshot::channel();
        app.on_ask(
            kaji_core::AskRequest {
                id: 1,
                kind: kaji_protocol::AskKind::Command,
                text: format!("Bash: {}", "x ".repeat(800)),
                payload: Some(kaji_protocol::AskPayload::ToolApproval {
                    tool: "Bash".into(),
                    input: serde_json::json!({}),
                    preview: None,
                    always: vec!["Bash(x:*)".into()],
                    tool_use_id: None,
                }),
                agent: "main".into(),
            },
            tx,
        );
        let s = screen(&mut app, 80, 16);
        assert!(s.contains("Run this command?"), "{s}");
        assert!(s.contains("y approve · a always"), "{s}");
        assert!(s.contains("waiting for you"), "{s}");
    }

    #[test]
    fn an_ask_with_nothing_to_remember_offers_no_always() {
        // A retry outside the sandbox stores no rule: only yes or no.
        let mut app = App::new(StatusInfo::default());
        app.task_started();
        let (tx, _rx) = tokio::sync::oneshot::channel();
        app.on_ask(
            kaji_core::AskRequest {
                id: 1,
                kind: kaji_protocol::AskKind::Command,
                text: "Bash: make failed in the sandbox (write denied). Run it again outside the sandbox?".into(),
                payload: Some(kaji_protocol::AskPayload::ToolApproval {
                    tool: "Bash".into(),
                    input: serde_json::json!({}),
                    preview: None,
                    always: Vec::new(),
                    tool_use_id: None,
                }),
                agent: "main".into(),
            },
            tx,
        );
        let s = screen(&mut app, 100, 16);
        assert!(s.contains("y approve this once · n deny"), "{s}");
        assert!(!s.contains("always"), "{s}");
        app.on_key(crossterm::event::KeyEvent::from(
            crossterm::event::KeyCode::Char('a'),
        ));
        assert!(
            app.pending.is_some(),
            "`a` stores nothing here and answers nothing"
        );
    }

    #[test]
    fn shows_transcript_status_and_follows_the_end() {
        let mut app = App::new(StatusInfo {
            model: "scripted".into(),
            permission_mode: "default".into(),
            cwd: "/w".into(),
            ..StatusInfo::default()
        });
        app.task_started();
        for i in 0..50 {
            app.on_event(TaskEvent::Say {
                id: i,
                kind: SayKind::Text,
                text: format!("line {i}"),
                partial: false,
                payload: None,
            });
        }
        let s = screen(&mut app, 60, 20);
        assert!(s.contains("line 49"), "{s}");
        assert!(!s.contains("line 10\n"), "{s}");
        assert!(s.contains("scripted · default · 0↑ 0↓ tokens"), "{s}");
        assert!(s.contains("working…"), "{s}");
        // Scrolling up a page shows older lines.
        app.scroll_up = app.page_height;
        let s = screen(&mut app, 60, 20);
        assert!(!s.contains("line 49"), "{s}");
        assert!(s.contains("line 30 "), "{s}");
    }

    #[test]
    fn markdown_headings_are_bold_never_raw_and_code_has_its_colour() {
        let mut app = text_app("# Title\n\nSome **bold** text.\n\n```rust\nlet x = 1;\n```\n");
        let b = buffer(&mut app, 60, 20);
        let screen = rows(&b).join("\n");
        assert!(!screen.contains("# Title"), "{screen}");
        assert!(!screen.contains("```"), "{screen}");
        assert!(!screen.contains("**"), "{screen}");
        for cell in cells_of(&b, "Title") {
            assert!(cell.modifier.contains(Modifier::BOLD), "{cell:?}");
        }
        for cell in cells_of(&b, "let x = 1;") {
            assert_ne!(cell.fg, Color::Reset, "{cell:?}");
        }
        for cell in cells_of(&b, "bold") {
            assert!(cell.modifier.contains(Modifier::BOLD), "{cell:?}");
        }
    }

    #[test]
    fn an_edit_is_a_coloured_diff_in_the_transcript_and_in_the_ask() {
        let input = serde_json::json!({
            "file_path": "src/a.rs", "old_string": "old line\n", "new_string": "new line\n"
        });
        let mut app = App::new(StatusInfo::default());
        app.task_started();
        app.on_event(TaskEvent::Say {
            id: 1,
            kind: SayKind::Tool,
            text: "Edit: src/a.rs".into(),
            partial: false,
            payload: Some(kaji_protocol::SayPayload::Tool {
                id: "t1".into(),
                tool: "Edit".into(),
                input: input.clone(),
                view: kaji_core::executor::recorded_view("Edit", &input),
            }),
        });
        let b = buffer(&mut app, 60, 20);
        for cell in cells_of(&b, "+new line") {
            assert_eq!(cell.fg, Color::Green, "{cell:?}");
        }
        for cell in cells_of(&b, "-old line") {
            assert_eq!(cell.fg, Color::Red, "{cell:?}");
        }
        // The ask shows the preview's diff, numbered and coloured too.
        let (tx, _rx) = tokio::sync::oneshot::channel();
        app.on_ask(
            kaji_core::AskRequest {
                id: 2,
                kind: kaji_protocol::AskKind::Tool,
                text: "Edit: src/a.rs".into(),
                payload: Some(kaji_protocol::AskPayload::ToolApproval {
                    tool: "Edit".into(),
                    input,
                    preview: Some("--- a.rs\n+++ a.rs\n@@ -1 +1 @@\n-before\n+after".into()),
                    always: vec!["Edit(/src/**)".into()],
                    tool_use_id: None,
                }),
                agent: "main".into(),
            },
            tx,
        );
        let b = buffer(&mut app, 60, 30);
        for cell in cells_of(&b, "+    1 after") {
            assert_eq!(cell.fg, Color::Green, "{cell:?}");
        }
    }

    #[test]
    fn the_status_line_fits_narrow_and_wide_terminals() {
        let mut app = App::new(StatusInfo {
            model: "claude-sonnet-4-5".into(),
            permission_mode: "accept-edits".into(),
            cwd: "/home/someone/projects/a-long-project-name".into(),
            ..StatusInfo::default()
        });
        app.task_started();
        app.input_tokens = 123_456;
        app.output_tokens = 7_890;
        app.context_tokens = 50_000;
        app.context_window = Some(200_000);
        app.cost_usd = Some(1.234);
        for width in [40u16, 200] {
            let line = status_line(&app, width);
            let text = line.to_string();
            assert!(
                text.chars().count() <= width as usize,
                "{width}: {text:?} is {} wide",
                text.chars().count()
            );
            assert!(text.starts_with("claude-sonnet-4-5 · "), "{text}");
            assert!(text.contains("working…"), "{text}");
        }
        let wide = status_line(&app, 200).to_string();
        assert!(
            wide.starts_with("claude-sonnet-4-5 · accept-edits"),
            "{wide}"
        );
        for part in [
            "123k↑ 7.9k↓ tokens",
            "context 25%",
            "$1.23",
            "turn 0",
            "a-long-project-name",
        ] {
            assert!(wide.contains(part), "{part}: {wide}");
        }
        let narrow = status_line(&app, 40).to_string();
        assert!(!narrow.contains("a-long-project-name"), "{narrow}");
        // Drawn, too: the row holds it whole.
        let b = buffer(&mut app, 40, 12);
        assert!(
            rows(&b).iter().any(|r| r.contains("working…")),
            "{:?}",
            rows(&b)
        );
    }

    #[test]
    fn typing_a_slash_opens_the_command_menu_and_tab_completes() {
        let mut app = App::new(StatusInfo::default());
        app.custom = vec![super::super::commands::parse(
            "review",
            "---\ndescription: Review the diff\n---\nReview it",
            Default::default(),
        )];
        app.on_paste("/");
        let s = screen(&mut app, 70, 24);
        assert!(s.contains("/help"), "{s}");
        assert!(s.contains("list the commands"), "{s}");
        assert!(s.contains("more (type to narrow"), "{s}");
        app.on_paste("r");
        let s = screen(&mut app, 70, 24);
        assert!(s.contains("/resume"), "{s}");
        assert!(s.contains("/review"), "{s}");
        assert!(s.contains("Review the diff (custom)"), "{s}");
        app.input.set("/mo");
        let s = screen(&mut app, 70, 24);
        assert!(s.contains("/model"), "{s}");
        assert!(!s.contains("/help"), "{s}");
        app.on_key(crossterm::event::KeyEvent::new(
            crossterm::event::KeyCode::Tab,
            crossterm::event::KeyModifiers::NONE,
        ));
        assert_eq!(app.input.text(), "/model ");
        // With a space typed the menu closes.
        let s = screen(&mut app, 70, 24);
        assert!(!s.contains("use this model"), "{s}");
    }

    #[test]
    fn todo_and_task_list_are_a_checklist_updated_in_place() {
        use kaji_protocol::{SayPayload, StateUpdate, TodoItem, TodoStatus};
        let mut app = App::new(StatusInfo::default());
        let todo = |status: TodoStatus| TodoItem {
            content: "Run the tests".into(),
            status,
            active_form: "Running the tests".into(),
        };
        for (id, status) in [(1, TodoStatus::Pending), (2, TodoStatus::InProgress)] {
            app.on_event(TaskEvent::Say {
                id,
                kind: SayKind::Todo,
                text: "[{\"content\":\"raw json\"}]".into(),
                partial: false,
                payload: Some(SayPayload::Update(StateUpdate::Todo {
                    items: vec![
                        todo(status),
                        TodoItem {
                            content: "Write docs".into(),
                            status: TodoStatus::Pending,
                            active_form: "Writing docs".into(),
                        },
                    ],
                })),
            });
        }
        let s = screen(&mut app, 60, 24);
        assert!(!s.contains("raw json"), "{s}");
        assert!(s.contains("◐ Running the tests"), "{s}");
        assert!(s.contains("☐ Write docs"), "{s}");
        assert_eq!(s.matches("Write docs").count(), 1, "{s}");
    }

    #[test]
    fn a_tools_summary_is_the_line_and_the_output_opens_under_it() {
        let mut app = App::new(StatusInfo::default());
        app.on_event(TaskEvent::ToolResult {
            id: "t".into(),
            name: "Read".into(),
            is_error: false,
            output: "     1\talpha\n     2\tbeta\n".into(),
            summary: Some("Read 2 lines".into()),
        });
        app.on_event(TaskEvent::ToolResult {
            id: "u".into(),
            name: "Bash".into(),
            is_error: false,
            output: "x\ny\n[exit code 3, 0.01 s]".into(),
            summary: Some("x (+1 lines) · exit 3".into()),
        });
        let s = screen(&mut app, 60, 16);
        assert!(s.contains("⎿ Read 2 lines"), "{s}");
        assert!(s.contains("⎿ x (+1 lines) · exit 3"), "{s}");
        assert!(!s.contains("alpha"), "{s}");
        app.on_key(crossterm::event::KeyEvent::new(
            crossterm::event::KeyCode::Char('o'),
            crossterm::event::KeyModifiers::CONTROL,
        ));
        let s = screen(&mut app, 60, 16);
        assert!(s.contains("⎿ Read 2 lines"), "{s}");
        assert!(s.contains("1  alpha") && s.contains("2  beta"), "{s}");
        // A count inside the summary is part of it, not a fold's.
        assert!(s.contains("⎿ x (+1 lines) · exit 3"), "{s}");
        assert!(s.contains("[exit code 3"), "{s}");
    }

    #[test]
    fn tool_results_are_one_line_until_opened() {
        let mut app = App::new(StatusInfo::default());
        app.on_event(TaskEvent::ToolResult {
            id: "t".into(),
            name: "Bash".into(),
            is_error: false,
            output: "first\nsecond\nthird".into(),
            summary: None,
        });
        let s = screen(&mut app, 60, 16);
        assert!(s.contains("⎿ first (+2 lines)"), "{s}");
        assert!(!s.contains("third"), "{s}");
        app.on_key(crossterm::event::KeyEvent::new(
            crossterm::event::KeyCode::Char('o'),
            crossterm::event::KeyModifiers::CONTROL,
        ));
        let s = screen(&mut app, 60, 16);
        assert!(s.contains("second"), "{s}");
        assert!(s.contains("third"), "{s}");
        assert!(!s.contains("(+2 lines)"), "{s}");
    }
}
