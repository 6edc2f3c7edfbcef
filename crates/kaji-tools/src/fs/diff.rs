//! Showing what a write changed: a unified diff for front ends and a short
//! numbered snippet of the new text for the model. Both come from the
//! `similar` crate's line diff.

use similar::TextDiff;

/// Lines of context around each change.
const CONTEXT: usize = 3;
/// Most lines a snippet shows before it stops with a note.
const MAX_SNIPPET_LINES: usize = 80;

/// A unified diff of `old` to `new`. `path` is how the file is shown: a
/// relative path gets git's `a/` and `b/` header prefixes, an absolute one
/// is used as it is. Empty when nothing changed.
pub(super) fn unified(old: &str, new: &str, path: &str) -> String {
    let (a, b) = if path.starts_with('/') {
        (path.to_string(), path.to_string())
    } else {
        (format!("a/{path}"), format!("b/{path}"))
    };
    TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(CONTEXT)
        .header(&a, &b)
        .to_string()
}

/// The lines of `new` around each change, numbered like `Read`'s output,
/// with `...` between separate regions.
pub(super) fn snippet(old: &str, new: &str) -> String {
    let diff = TextDiff::from_lines(old, new);
    let new_lines: Vec<&str> = new.lines().collect();
    let groups = diff.grouped_ops(CONTEXT);
    let mut out = String::new();
    let mut shown = 0usize;
    for (i, group) in groups.iter().enumerate() {
        let (Some(first), Some(last)) = (group.first(), group.last()) else {
            continue;
        };
        let start = first.new_range().start;
        let end = last.new_range().end.min(new_lines.len());
        if i > 0 {
            out.push_str("...\n");
        }
        for (n, line) in new_lines.iter().enumerate().take(end).skip(start) {
            if shown == MAX_SNIPPET_LINES {
                out.push_str(&format!(
                    "(snippet stops after {MAX_SNIPPET_LINES} lines; Read the file to see the rest)\n"
                ));
                return out;
            }
            out.push_str(&format!("{:>6}\t{line}\n", n + 1));
            shown += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snippet_numbers_new_lines() {
        let old = "a\nb\nc\nd\ne\nf\ng\nh\ni\n";
        let new = "a\nb\nc\nd\nE\nf\ng\nh\ni\n";
        let s = snippet(old, new);
        assert_eq!(
            s,
            "     2\tb\n     3\tc\n     4\td\n     5\tE\n     6\tf\n     7\tg\n     8\th\n"
        );
        assert!(unified(old, new, "x.txt").contains("-e\n+E\n"));
    }
}
