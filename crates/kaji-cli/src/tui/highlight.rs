//! Syntax highlighting of fenced code blocks, with syntect's bundled
//! syntaxes and themes (pure Rust regexes: no C library).
//!
//! The syntaxes load once, on first use or when [`warm_up`] runs in the
//! background at start. It never fails: an unknown language, or a line
//! syntect cannot parse, comes back in the plain code colour, with all of
//! its text.

use std::sync::OnceLock;

use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Span;
use syntect::easy::HighlightLines;
use syntect::highlighting::{FontStyle, Theme, ThemeSet};
use syntect::parsing::SyntaxSet;
use syntect::util::LinesWithEndings;

/// The foreground of code, inline and fenced, where syntect gives none.
pub const CODE: Color = Color::LightYellow;

/// The theme code blocks are drawn in (one of syntect's defaults, made
/// for a dark background).
const THEME: &str = "base16-ocean.dark";

struct Assets {
    syntaxes: SyntaxSet,
    theme: Option<Theme>,
}

fn assets() -> &'static Assets {
    static ASSETS: OnceLock<Assets> = OnceLock::new();
    ASSETS.get_or_init(|| {
        let mut themes = ThemeSet::load_defaults();
        Assets {
            syntaxes: SyntaxSet::load_defaults_newlines(),
            theme: themes.themes.remove(THEME),
        }
    })
}

/// Loads the syntaxes now (call it off the UI thread at start, so the
/// first code block does not wait for them).
pub fn warm_up() {
    let _ = assets();
}

/// The lines of `code` in `lang` as styled spans (without line breaks);
/// `None` when the language is not known, for the caller's plain colour.
pub fn highlight(lang: &str, code: &str) -> Option<Vec<Vec<Span<'static>>>> {
    let token = lang.split([' ', ',', '{']).next().unwrap_or("").trim();
    if token.is_empty() {
        return None;
    }
    let assets = assets();
    let syntax = assets
        .syntaxes
        .find_syntax_by_token(token)
        .or_else(|| assets.syntaxes.find_syntax_by_extension(token))?;
    let theme = assets.theme.as_ref()?;
    let mut h = HighlightLines::new(syntax, theme);
    let mut out = Vec::new();
    for line in LinesWithEndings::from(code) {
        let text = line.trim_end_matches(['\n', '\r']);
        let spans = match h.highlight_line(line, &assets.syntaxes) {
            Ok(ranges) => ranges
                .into_iter()
                .filter_map(|(style, piece)| {
                    let piece = piece.trim_end_matches(['\n', '\r']);
                    (!piece.is_empty()).then(|| Span::styled(piece.to_string(), convert(style)))
                })
                .collect(),
            Err(_) => vec![Span::styled(text.to_string(), plain())],
        };
        out.push(spans);
    }
    Some(out)
}

/// The colour of code syntect does not colour.
fn plain() -> Style {
    Style::default().fg(CODE)
}

fn convert(style: syntect::highlighting::Style) -> Style {
    let c = style.foreground;
    let mut out = Style::default().fg(Color::Rgb(c.r, c.g, c.b));
    if style.font_style.contains(FontStyle::BOLD) {
        out = out.add_modifier(Modifier::BOLD);
    }
    if style.font_style.contains(FontStyle::ITALIC) {
        out = out.add_modifier(Modifier::ITALIC);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rust_gets_several_colours_and_keeps_its_text() {
        let lines = highlight("rust", "fn main() {\n    let x = \"hi\";\n}\n").unwrap();
        assert_eq!(lines.len(), 3);
        let text: Vec<String> = lines
            .iter()
            .map(|l| l.iter().map(|s| s.content.as_ref()).collect())
            .collect();
        assert_eq!(text, ["fn main() {", "    let x = \"hi\";", "}"]);
        let colours: std::collections::HashSet<_> =
            lines.iter().flatten().filter_map(|s| s.style.fg).collect();
        assert!(colours.len() >= 3, "{colours:?}");
        assert!(!colours.contains(&Color::Reset));
    }

    #[test]
    fn unknown_and_missing_languages_are_left_to_the_caller() {
        assert!(highlight("no-such-language", "x").is_none());
        assert!(highlight("", "x").is_none());
        // An extension works as well as a name; attributes after it do not
        // get in the way.
        assert!(highlight("py", "x = 1\n").is_some());
        assert!(highlight("rust,ignore", "x\n").is_some());
    }
}
