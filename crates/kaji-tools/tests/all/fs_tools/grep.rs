use serde_json::json;

use super::{err, ok, put, workdir};

fn tree() -> (tempfile::TempDir, std::path::PathBuf) {
    let (d, root) = workdir();
    std::fs::create_dir(root.join(".git")).unwrap();
    put(&root, ".git/HEAD", "needle in git\n");
    put(&root, ".gitignore", "build/\n");
    put(&root, "build/gen.rs", "needle generated\n");
    put(&root, "src/a.rs", "fn a() {\n    // needle one\n}\n");
    put(&root, "src/b.py", "NEEDLE = 2\nneedle = 3\n");
    put(&root, ".github/ci.yml", "run: needle\n");
    put(&root, "bin.dat", b"needle\0binary\0");
    (d, root)
}

#[tokio::test]
async fn files_with_matches_is_the_default() {
    let (_d, root) = tree();
    let out = ok("Grep", json!({"pattern": "needle"}), &root).await;
    let lines: Vec<&str> = out.content.lines().collect();
    assert_eq!(lines[0], "3 files with matches:", "{}", out.content);
    let mut files = lines[1..].to_vec();
    files.sort();
    // .git, gitignored build/ and the binary file are skipped; .github is searched.
    assert_eq!(files, vec![".github/ci.yml", "src/a.rs", "src/b.py"]);
}

#[tokio::test]
async fn content_mode_shows_numbered_lines() {
    let (_d, root) = tree();
    let out = ok(
        "Grep",
        json!({"pattern": "needle", "output_mode": "content", "path": "src"}),
        &root,
    )
    .await;
    assert_eq!(
        out.content,
        "src/a.rs:2:    // needle one\nsrc/b.py:2:needle = 3"
    );
    let out = ok(
        "Grep",
        json!({"pattern": "needle", "output_mode": "content", "path": "src", "-n": false, "-i": true}),
        &root,
    )
    .await;
    assert_eq!(
        out.content,
        "src/a.rs:    // needle one\nsrc/b.py:NEEDLE = 2\nsrc/b.py:needle = 3"
    );
}

#[tokio::test]
async fn context_lines() {
    let (_d, root) = workdir();
    let text: String = (1..=12)
        .map(|i| {
            if i == 3 || i == 10 {
                format!("hit {i}\n")
            } else {
                format!("line {i}\n")
            }
        })
        .collect();
    put(&root, "f.txt", &text);
    let out = ok(
        "Grep",
        json!({"pattern": "hit", "output_mode": "content", "-C": 1}),
        &root,
    )
    .await;
    assert_eq!(
        out.content,
        "f.txt-2-line 2\nf.txt:3:hit 3\nf.txt-4-line 4\n--\nf.txt-9-line 9\nf.txt:10:hit 10\nf.txt-11-line 11"
    );
    let out = ok(
        "Grep",
        json!({"pattern": "hit 10", "output_mode": "content", "-A": 2, "-B": 0}),
        &root,
    )
    .await;
    assert_eq!(
        out.content,
        "f.txt:10:hit 10\nf.txt-11-line 11\nf.txt-12-line 12"
    );
    let out = ok(
        "Grep",
        json!({"pattern": "hit 3", "output_mode": "content", "-B": "2"}),
        &root,
    )
    .await;
    assert_eq!(out.content, "f.txt-1-line 1\nf.txt-2-line 2\nf.txt:3:hit 3");
}

#[tokio::test]
async fn count_mode() {
    let (_d, root) = tree();
    let out = ok(
        "Grep",
        json!({"pattern": "needle", "output_mode": "count", "-i": true, "path": "src"}),
        &root,
    )
    .await;
    assert_eq!(
        out.content,
        "src/a.rs:1\nsrc/b.py:2\n3 matching lines in 2 files."
    );
}

#[tokio::test]
async fn head_limit_bounds_output() {
    let (_d, root) = workdir();
    let text: String = (1..=40).map(|i| format!("match {i}\n")).collect();
    put(&root, "m.txt", &text);
    let out = ok(
        "Grep",
        json!({"pattern": "match", "output_mode": "content", "head_limit": 5}),
        &root,
    )
    .await;
    let lines: Vec<&str> = out.content.lines().collect();
    assert_eq!(
        &lines[..5],
        &[
            "m.txt:1:match 1",
            "m.txt:2:match 2",
            "m.txt:3:match 3",
            "m.txt:4:match 4",
            "m.txt:5:match 5"
        ]
    );
    assert!(
        out.content.contains("Output stopped after 5 lines"),
        "{}",
        out.content
    );
    // Exactly at the limit: no truncation note.
    let out = ok(
        "Grep",
        json!({"pattern": "match 4\\d", "output_mode": "content", "head_limit": 1}),
        &root,
    )
    .await;
    assert_eq!(out.content, "m.txt:40:match 40");
    for i in 0..6 {
        put(&root, &format!("d/f{i}.txt"), "match\n");
    }
    let out = ok(
        "Grep",
        json!({"pattern": "match", "path": "d", "head_limit": 2}),
        &root,
    )
    .await;
    assert!(
        out.content.starts_with("6 files with matches:"),
        "{}",
        out.content
    );
    assert_eq!(
        out.content.lines().filter(|l| l.starts_with("d/")).count(),
        2
    );
    assert!(
        out.content.contains("2 most recently modified of 6"),
        "{}",
        out.content
    );
}

#[tokio::test]
async fn multiline_matches_span_lines() {
    let (_d, root) = workdir();
    put(&root, "s.rs", "struct A {\n    x: u8,\n}\nstruct B;\n");
    let e = err(
        "Grep",
        json!({"pattern": "A \\{\\n    x", "output_mode": "content"}),
        &root,
    )
    .await;
    assert!(e.contains("multiline"), "{e}");
    let out = ok(
        "Grep",
        json!({"pattern": "struct A \\{.*?\\}", "output_mode": "content", "multiline": true}),
        &root,
    )
    .await;
    assert_eq!(
        out.content,
        "s.rs:1:struct A {\ns.rs:2:    x: u8,\ns.rs:3:}"
    );
}

#[tokio::test]
async fn glob_and_type_filters() {
    let (_d, root) = tree();
    let out = ok(
        "Grep",
        json!({"pattern": "needle", "glob": "*.py", "-i": true}),
        &root,
    )
    .await;
    assert_eq!(out.content, "1 file with matches:\nsrc/b.py");
    let out = ok("Grep", json!({"pattern": "needle", "type": "rust"}), &root).await;
    assert_eq!(out.content, "1 file with matches:\nsrc/a.rs");
    let out = ok(
        "Grep",
        json!({"pattern": "needle", "glob": "*.{rs,yml}"}),
        &root,
    )
    .await;
    assert!(
        out.content.starts_with("2 files with matches:"),
        "{}",
        out.content
    );
}

#[tokio::test]
async fn a_single_file_can_be_searched() {
    let (_d, root) = tree();
    let out = ok(
        "Grep",
        json!({"pattern": "needle", "path": "src/b.py", "output_mode": "content"}),
        &root,
    )
    .await;
    assert_eq!(out.content, "src/b.py:2:needle = 3");
}

#[tokio::test]
async fn no_matches_is_a_message() {
    let (_d, root) = tree();
    let out = ok("Grep", json!({"pattern": "haystack"}), &root).await;
    assert!(
        out.content.starts_with("No matches for `haystack`"),
        "{}",
        out.content
    );
}

/// A file that cannot be read is named in a note even though it has no
/// matches: files without matches leave nothing behind in the walk, files
/// with errors must. (`/proc/self/mem` is a regular file whose first page
/// cannot be read: EIO, even for root.)
#[tokio::test]
async fn an_unreadable_file_without_matches_is_noted() {
    let (_d, root) = tree();
    for mode in ["files_with_matches", "content", "count"] {
        let out = ok(
            "Grep",
            json!({"pattern": "needle", "path": "/proc/self/mem", "output_mode": mode}),
            &root,
        )
        .await;
        assert!(
            out.content.starts_with("No matches for `needle`")
                && out
                    .content
                    .contains("1 file(s) or directories could not be searched: /proc/self/mem:"),
            "{mode}: {}",
            out.content
        );
    }
}

#[tokio::test]
async fn bad_input_is_a_clear_error() {
    let (_d, root) = tree();
    let e = err("Grep", json!({"pattern": "fn ("}), &root).await;
    assert!(
        e.contains("Grep") && e.contains("invalid regular expression") && e.contains("escape"),
        "{e}"
    );
    let e = err("Grep", json!({"pattern": "x", "type": "klingon"}), &root).await;
    assert!(e.contains("unknown file type") && e.contains("glob"), "{e}");
    let e = err("Grep", json!({"pattern": "x", "glob": "{a,"}), &root).await;
    assert!(e.contains("invalid glob"), "{e}");
    let e = err(
        "Grep",
        json!({"pattern": "x", "output_mode": "lines"}),
        &root,
    )
    .await;
    assert!(e.contains("output_mode"), "{e}");
    let e = err("Grep", json!({"pattern": "x", "path": "nope"}), &root).await;
    assert!(e.contains("does not exist"), "{e}");
    let e = err("Grep", json!({"pattern": "x", "-A": -1}), &root).await;
    assert!(e.contains("-A"), "{e}");
}

#[tokio::test]
async fn kajiignore_files_are_skipped() {
    let (_d, root) = tree();
    put(&root, ".kajiignore", "*.py\n");
    let out = ok("Grep", json!({"pattern": "needle"}), &root).await;
    assert!(!out.content.contains("b.py"), "{}", out.content);
    assert!(out.content.contains("src/a.rs"), "{}", out.content);
    let e = err(
        "Grep",
        json!({"pattern": "needle", "path": "src/b.py"}),
        &root,
    )
    .await;
    assert!(e.contains("rule `*.py`"), "{e}");
}

#[cfg(unix)]
#[tokio::test]
async fn a_fifo_in_the_tree_does_not_block() {
    let (_d, root) = workdir();
    super::mkfifo(&root.join("pipe"));
    put(&root, "a.txt", "needle\n");
    let out = tokio::time::timeout(
        std::time::Duration::from_secs(60),
        ok("Grep", json!({"pattern": "needle"}), &root),
    )
    .await
    .expect("Grep blocked on a FIFO");
    assert_eq!(out.content, "1 file with matches:\na.txt");
    let e = err("Grep", json!({"pattern": "needle", "path": "pipe"}), &root).await;
    assert!(e.contains("neither a directory nor a regular file"), "{e}");
}

/// The walk runs on every core; the output is still in the order of a
/// walk sorted by name, file by file, with `--` between files' groups and
/// `head_limit` counted in that order.
#[tokio::test]
async fn content_from_many_files_is_in_path_order() {
    let (_d, root) = workdir();
    let mut expected = Vec::new();
    // Names whose creation order is not their sorted order.
    for d in [7, 2, 9, 0, 5] {
        for f in [3, 1, 4, 0, 2] {
            put(&root, &format!("d{d}/f{f}.txt"), "x\nhit\n");
        }
    }
    put(&root, "d2/sub/z.txt", "hit\n");
    for d in [0, 2, 5, 7, 9] {
        for f in 0..5 {
            expected.push(format!("d{d}/f{f}.txt-1-x\nd{d}/f{f}.txt:2:hit"));
        }
        if d == 2 {
            expected.push("d2/sub/z.txt:1:hit".to_string());
        }
    }
    let out = ok(
        "Grep",
        json!({"pattern": "hit", "output_mode": "content", "-B": 1}),
        &root,
    )
    .await;
    assert_eq!(out.content, expected.join("\n--\n"));
    let out = ok(
        "Grep",
        json!({"pattern": "hit", "output_mode": "count"}),
        &root,
    )
    .await;
    let first: Vec<&str> = out.content.lines().take(7).collect();
    assert_eq!(
        first,
        [
            "d0/f0.txt:1",
            "d0/f1.txt:1",
            "d0/f2.txt:1",
            "d0/f3.txt:1",
            "d0/f4.txt:1",
            "d2/f0.txt:1",
            "d2/f1.txt:1"
        ]
    );
    let out = ok(
        "Grep",
        json!({"pattern": "hit", "output_mode": "content", "head_limit": 3}),
        &root,
    )
    .await;
    assert!(
        out.content
            .starts_with("d0/f0.txt:2:hit\nd0/f1.txt:2:hit\nd0/f2.txt:2:hit\n(Output stopped"),
        "{}",
        out.content
    );
}
