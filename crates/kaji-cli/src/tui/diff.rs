//! The change a call makes to a file, as unified-diff text for the ask
//! panel and the transcript, and the colours of its lines.
//!
//! Pure: it reads neither files nor the session, and knows no tool: the
//! tool's own view of the call (its [`FileChange`]) or the approval's
//! preview is all it shows; what it cannot show as a diff it leaves to the
//! caller (`None`).

use kaji_protocol::{FileChange, ToolView};
use ratatui::style::{Color, Modifier, Style};

/// At most this many diff lines are shown; the rest is counted.
const MAX_LINES: usize = 60;

/// The diff of a tool call: the ask's `preview` when it is a diff, else
/// the change the tool says the call makes.
pub fn of_call(view: Option<&ToolView>, preview: Option<&str>) -> Option<String> {
    if let Some(p) = preview.filter(|p| looks_like_diff(p)) {
        return Some(cap(&numbered(p)));
    }
    view?.change.as_ref().map(of_change)
}

/// A unified diff with each line's number in front (the new file's for
/// added and unchanged lines, the old file's for removed ones), without
/// `\ No newline at end of file` markers.
pub fn numbered(diff: &str) -> String {
    let (mut old, mut new) = (0u64, 0u64);
    let mut out = Vec::new();
    for line in diff.lines() {
        if line.starts_with("--- ") || line.starts_with("+++ ") {
            out.push(line.to_string());
        } else if let Some(rest) = line.strip_prefix("@@ ") {
            let mut parts = rest.split_whitespace();
            let start = |p: Option<&str>| {
                p.and_then(|p| p[1..].split(',').next()?.parse::<u64>().ok())
                    .unwrap_or(1)
            };
            old = start(parts.next());
            new = start(parts.next());
            out.push(line.to_string());
        } else if line.starts_with('\\') {
            continue;
        } else if let Some(text) = line.strip_prefix('+') {
            out.push(format!("+{new:>5} {text}"));
            new += 1;
        } else if let Some(text) = line.strip_prefix('-') {
            out.push(format!("-{old:>5} {text}"));
            old += 1;
        } else {
            let text = line.strip_prefix(' ').unwrap_or(line);
            out.push(format!(" {new:>5} {text}"));
            old += 1;
            new += 1;
        }
    }
    out.join("\n")
}

/// A change as diff text: the replaced text against its replacement, or
/// every line of a whole new content added.
fn of_change(change: &FileChange) -> String {
    let path = change.path.display();
    let body = match &change.old_text {
        Some(old) => pair(old, &change.new_text),
        None => {
            let content = &change.new_text;
            let mut out = format!("@@ -0,0 +1,{} @@\n", content.lines().count());
            for l in content.lines() {
                out.push_str(&format!("+{l}\n"));
            }
            out
        }
    };
    cap(&format!("--- {path}\n+++ {path}\n{body}"))
}

fn pair(old: &str, new: &str) -> String {
    let diff = similar::TextDiff::from_lines(old, new);
    let mut out = String::new();
    for hunk in diff.unified_diff().context_radius(2).iter_hunks() {
        out.push_str(&hunk.to_string());
    }
    if !out.ends_with('\n') {
        out.push('\n');
    }
    out
}

/// Whether `text` is a unified diff (a preview of an edit).
pub fn looks_like_diff(text: &str) -> bool {
    text.lines()
        .any(|l| l.starts_with("@@") || l.starts_with("+++") || l.starts_with("--- "))
}

fn cap(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = lines
        .iter()
        .take(MAX_LINES)
        .copied()
        .collect::<Vec<_>>()
        .join("\n");
    if lines.len() > MAX_LINES {
        out.push_str(&format!("\n… {} more diff lines", lines.len() - MAX_LINES));
    }
    out
}

/// The style of one diff line: `+` green, `-` red, `@@` cyan, headers bold.
pub fn line_style(line: &str) -> Style {
    if line.starts_with("+++") || line.starts_with("---") {
        Style::default().add_modifier(Modifier::BOLD)
    } else if line.starts_with('+') {
        Style::default().fg(Color::Green)
    } else if line.starts_with('-') {
        Style::default().fg(Color::Red)
    } else if line.starts_with("@@") {
        Style::default().fg(Color::Cyan)
    } else {
        Style::default().add_modifier(Modifier::DIM)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(path: &str, old: Option<&str>, new: &str) -> ToolView {
        ToolView {
            change: Some(FileChange {
                path: path.into(),
                old_text: old.map(str::to_string),
                new_text: new.into(),
            }),
            ..ToolView::default()
        }
    }

    #[test]
    fn changes_and_previews_become_diffs() {
        let d = of_call(Some(&change("a.rs", Some("a\nb\n"), "a\nc\n")), None).unwrap();
        assert!(d.contains("--- a.rs"), "{d}");
        assert!(d.contains("\n-b"), "{d}");
        assert!(d.contains("\n+c"), "{d}");
        let w = of_call(Some(&change("n.txt", None, "x\ny")), None).unwrap();
        assert!(w.contains("+x\n+y"), "{w}");
        let p = of_call(None, Some("--- f\n+++ f\n@@ -1 +1 @@\n-o\n+n")).unwrap();
        assert!(p.ends_with("+    1 n"), "{p}");
        let n = numbered(
            "--- f\n+++ f\n@@ -10,3 +10,3 @@\n a\n-b\n+c\n d\n\\ No newline at end of file",
        );
        assert_eq!(
            n,
            "--- f\n+++ f\n@@ -10,3 +10,3 @@\n    10 a\n-   11 b\n+   11 c\n    12 d"
        );
        // A call without a change (a command) and a preview that is no
        // diff show nothing here.
        assert!(of_call(Some(&ToolView::default()), Some("ls")).is_none());
        assert_eq!(line_style("+x").fg, Some(Color::Green));
        assert_eq!(line_style("-x").fg, Some(Color::Red));
    }
}
