//! `@path` mentions in a prompt: the project's files for fuzzy completion
//! (gitignore- and `.kajiignore`-aware, via the `ignore` crate), and the
//! mentioned files attached to the prompt as the tool that reads files
//! (`Read`, by [`kaji_tools::Tool::mention_input`]) returns them
//! (its caps, its refusals; an image as an image block after the prompt).
//!
//! It never writes anything and never reads a file the `Read` tool would
//! refuse: attaching goes through that tool.

use std::path::Path;

/// At most this many files are indexed for completion.
pub const MAX_FILES: usize = 50_000;

/// The project's files, relative to its root, `/`-separated, sorted.
pub fn scan(root: &Path, limit: usize) -> Vec<String> {
    let kajiignore = kaji_tools::KajiIgnore::load(root);
    let mut files = Vec::new();
    let walk = ignore::WalkBuilder::new(root)
        .hidden(true)
        .git_ignore(true)
        .require_git(false)
        .build();
    for entry in walk.flatten() {
        if files.len() >= limit {
            break;
        }
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        if kajiignore.excludes_entry(entry.path(), false) {
            continue;
        }
        if let Ok(rel) = entry.path().strip_prefix(root) {
            files.push(rel.to_string_lossy().replace('\\', "/"));
        }
    }
    files.sort();
    files
}

/// How well `path` matches `query` (its characters in order, case
/// ignored); lower is better, `None` when it does not match.
fn score(path: &str, query: &str) -> Option<(u8, usize, usize)> {
    let lower = path.to_lowercase();
    let query = query.to_lowercase();
    let name = lower.rsplit('/').next().unwrap_or(&lower);
    let mut gaps = 0;
    let mut rest = lower.chars();
    for q in query.chars() {
        let mut skipped = 0;
        loop {
            match rest.next() {
                Some(c) if c == q => break,
                Some(_) => skipped += 1,
                None => return None,
            }
        }
        if skipped > 0 {
            gaps += 1;
        }
    }
    let tier = if name.starts_with(&query) {
        0
    } else if name.contains(&query) {
        1
    } else if lower.contains(&query) {
        2
    } else {
        3
    };
    Some((tier, gaps, path.len()))
}

/// The best `n` files for `query`, best first.
pub fn matches(files: &[String], query: &str, n: usize) -> Vec<String> {
    let mut scored: Vec<_> = files
        .iter()
        .filter_map(|f| score(f, query).map(|s| (s, f)))
        .collect();
    scored.sort();
    scored.into_iter().take(n).map(|(_, f)| f.clone()).collect()
}

/// The `@` word being typed: the text before the cursor from its last
/// `@` that starts a word, when no space follows it.
pub fn typing(before_cursor: &str) -> Option<&str> {
    let word = before_cursor.rsplit(char::is_whitespace).next()?;
    word.strip_prefix('@')
}

/// The paths a prompt mentions (`@path` words), in order, once each.
pub fn mentioned(prompt: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for word in prompt.split_whitespace() {
        if let Some(path) = word.strip_prefix('@') {
            let path = path.trim_end_matches([',', '.', ';', ':', ')', '?', '!']);
            if !path.is_empty() && !out.iter().any(|p| p == path) {
                out.push(path.to_string());
            }
        }
    }
    out
}

/// The prompt with each mentioned file that exists attached after it, as
/// `Read` returns it; the notes say what was attached or refused.
/// Mentions of things that are not files stay plain text.
pub async fn attach(
    prompt: &str,
    cwd: &Path,
) -> (String, Vec<kaji_protocol::ContentBlock>, Vec<String>) {
    let mut out = prompt.to_string();
    let mut notes = Vec::new();
    let mut images = Vec::new();
    let paths: Vec<String> = mentioned(prompt)
        .into_iter()
        .filter(|p| cwd.join(p).is_file())
        .collect();
    if paths.is_empty() {
        return (out, images, notes);
    }
    let tools = kaji_tools::builtin_tools();
    let ctx = kaji_tools::ToolContext::new(cwd);
    for path in paths {
        // The tool that reads files says how it is called for one.
        let Some((read, input)) = tools.mention_call(&path) else {
            return (out, images, notes);
        };
        match read.call(input, &ctx).await {
            Ok(output) => {
                out.push_str(&format!(
                    "\n\n<file path=\"{path}\">\n{}\n</file>",
                    output.content
                ));
                images.extend(output.images.iter().map(|i| i.block()));
                notes.push(format!("  attached @{path}"));
            }
            Err(e) => notes.push(format!("  @{path} not attached: {e}")),
        }
    }
    (out, images, notes)
}

/// A prompt as the user typed it, and the files [`attach`] added to it
/// (path, number of lines): what the transcript shows and what a rewind
/// puts back into the input box.
pub fn split_attachments(prompt: &str) -> (&str, Vec<(String, usize)>) {
    const OPEN: &str = "\n\n<file path=\"";
    let Some(start) = prompt.find(OPEN) else {
        return (prompt, Vec::new());
    };
    let mut files = Vec::new();
    let mut rest = &prompt[start..];
    while let Some(after) = rest.strip_prefix(OPEN) {
        let Some((path, body)) = after.split_once("\">\n") else {
            return (prompt, Vec::new());
        };
        let Some((content, tail)) = body.split_once("\n</file>") else {
            return (prompt, Vec::new());
        };
        files.push((path.to_string(), content.lines().count()));
        rest = tail;
    }
    if !rest.trim().is_empty() {
        // Not only attachments after the typed text: show it all.
        return (prompt, Vec::new());
    }
    (&prompt[..start], files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attachments_split_off_the_typed_prompt() {
        let typed = "explain @src/a.rs please";
        let full =
            format!("{typed}\n\n<file path=\"src/a.rs\">\n1\tfn a() {{}}\n2\tfn b() {{}}\n</file>");
        assert_eq!(
            split_attachments(&full),
            (typed, vec![("src/a.rs".to_string(), 2)])
        );
        assert_eq!(split_attachments(typed), (typed, Vec::new()));
    }

    #[test]
    fn scans_without_ignored_files_and_matches_fuzzily() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("src/tui")).unwrap();
        std::fs::create_dir_all(root.join("target")).unwrap();
        std::fs::write(root.join(".gitignore"), "target/\n").unwrap();
        std::fs::write(root.join(".kajiignore"), "secret.txt\n").unwrap();
        std::fs::write(root.join("src/tui/render.rs"), "").unwrap();
        std::fs::write(root.join("src/main.rs"), "").unwrap();
        std::fs::write(root.join("README.md"), "").unwrap();
        std::fs::write(root.join("secret.txt"), "").unwrap();
        std::fs::write(root.join("target/out.rs"), "").unwrap();
        let files = scan(root, MAX_FILES);
        assert_eq!(files, ["README.md", "src/main.rs", "src/tui/render.rs"]);
        assert_eq!(matches(&files, "rend", 5), ["src/tui/render.rs"]);
        assert_eq!(matches(&files, "str", 5), ["src/tui/render.rs"]);
        assert_eq!(matches(&files, "main", 5)[0], "src/main.rs");
        assert!(matches(&files, "zzz", 5).is_empty());
        assert_eq!(scan(root, 1).len(), 1);
    }

    #[test]
    fn mentions_are_found_while_typing_and_in_the_prompt() {
        assert_eq!(typing("look at @src/ma"), Some("src/ma"));
        assert_eq!(typing("look at @src/main.rs "), None);
        assert_eq!(typing("mail me@"), None);
        assert_eq!(
            mentioned("see @a.rs, and @b/c.md. and @a.rs again, not me@x"),
            ["a.rs", "b/c.md"]
        );
    }

    #[tokio::test]
    async fn attaches_files_as_read_returns_them() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("notes.txt"), "alpha\nbeta\n").unwrap();
        let (prompt, images, notes) =
            attach("summarise @notes.txt and @missing.txt", dir.path()).await;
        assert!(images.is_empty());
        assert!(
            prompt
                .starts_with("summarise @notes.txt and @missing.txt\n\n<file path=\"notes.txt\">")
        );
        assert!(
            prompt.contains("alpha") && prompt.contains("beta"),
            "{prompt}"
        );
        assert!(!prompt.contains("missing.txt\">"), "{prompt}");
        assert_eq!(notes, ["  attached @notes.txt"]);
    }

    #[tokio::test]
    async fn an_image_is_attached_as_an_image() {
        // A 1×1 PNG.
        const PNG: &[u8] = &[
            0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 0x0d, 0x49, 0x48, 0x44, 0x52,
            0, 0, 0, 1, 0, 0, 0, 1, 8, 6, 0, 0, 0, 0x1f, 0x15, 0xc4, 0x89, 0, 0, 0, 0x0d, 0x49,
            0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0xf8, 0xcf, 0xc0, 0xf0, 0x1f, 0, 0x05, 0, 0x01,
            0xff, 0x89, 0x99, 0x3d, 0x1d, 0, 0, 0, 0, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60,
            0x82,
        ];
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("shot.png"), PNG).unwrap();
        let (prompt, images, notes) = attach("what is in @shot.png", dir.path()).await;
        assert_eq!(notes, ["  attached @shot.png"], "{prompt}");
        assert!(prompt.contains("1x1 pixels"), "{prompt}");
        match images.as_slice() {
            [kaji_protocol::ContentBlock::Image { media_type, data }] => {
                assert_eq!(media_type, "image/png");
                assert!(!data.is_empty());
            }
            other => panic!("{other:?}"),
        }
    }
}
