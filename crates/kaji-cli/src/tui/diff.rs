//! The change an Edit, MultiEdit or Write call makes, as unified-diff
//! text for the ask panel and the transcript, and the colours of its lines.
//!
//! Pure: it reads neither files nor the session; what it cannot show as a
//! diff it leaves to the caller (`None`).

use ratatui::style::{Color, Modifier, Style};
use serde_json::Value;

/// At most this many diff lines are shown; the rest is counted.
const MAX_LINES: usize = 60;

/// The diff of a tool call: the ask's `preview` when it has one, else
/// built from the input (`old_string`/`new_string`, `edits`, `content`).
pub fn of_call(tool: &str, input: &Value, preview: Option<&str>) -> Option<String> {
    if let Some(p) = preview.filter(|p| looks_like_diff(p)) {
        return Some(cap(p));
    }
    let path = input
        .get("file_path")
        .or_else(|| input.get("path"))
        .and_then(Value::as_str)
        .unwrap_or("");
    let body = match tool {
        "Edit" => pair(input)?,
        "MultiEdit" => {
            let edits = input.get("edits")?.as_array()?;
            let parts: Vec<String> = edits.iter().filter_map(pair).collect();
            if parts.is_empty() {
                return None;
            }
            parts.join("")
        }
        "Write" => {
            let content = input.get("content")?.as_str()?;
            let mut out = format!("@@ -0,0 +1,{} @@\n", content.lines().count());
            for l in content.lines() {
                out.push_str(&format!("+{l}\n"));
            }
            out
        }
        _ => return None,
    };
    Some(cap(&format!("--- {path}\n+++ {path}\n{body}")))
}

fn pair(edit: &Value) -> Option<String> {
    let old = edit.get("old_string")?.as_str()?;
    let new = edit.get("new_string")?.as_str()?;
    let diff = similar::TextDiff::from_lines(old, new);
    let mut out = String::new();
    for hunk in diff.unified_diff().context_radius(2).iter_hunks() {
        out.push_str(&hunk.to_string());
    }
    if !out.ends_with('\n') {
        out.push('\n');
    }
    Some(out)
}

fn looks_like_diff(text: &str) -> bool {
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
    use serde_json::json;

    #[test]
    fn edit_write_and_preview_become_diffs() {
        let d = of_call(
            "Edit",
            &json!({"file_path": "a.rs", "old_string": "a\nb\n", "new_string": "a\nc\n"}),
            None,
        )
        .unwrap();
        assert!(d.contains("--- a.rs"), "{d}");
        assert!(d.contains("\n-b"), "{d}");
        assert!(d.contains("\n+c"), "{d}");
        let w = of_call(
            "Write",
            &json!({"file_path": "n.txt", "content": "x\ny"}),
            None,
        )
        .unwrap();
        assert!(w.contains("+x\n+y"), "{w}");
        let p = of_call(
            "Edit",
            &json!({}),
            Some("--- f\n+++ f\n@@ -1 +1 @@\n-o\n+n"),
        )
        .unwrap();
        assert!(p.ends_with("+n"), "{p}");
        assert!(of_call("Bash", &json!({"command": "ls"}), None).is_none());
        assert_eq!(line_style("+x").fg, Some(Color::Green));
        assert_eq!(line_style("-x").fg, Some(Color::Red));
    }
}
