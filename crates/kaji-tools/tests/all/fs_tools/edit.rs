use kaji_tools::ToolAccess;
use serde_json::json;

use super::{err, ok, put, workdir};

const CODE: &str = "fn main() {\n    let x = 1;\n    println!(\"{x}\");\n}\n";

#[tokio::test]
async fn replaces_a_unique_match_and_shows_the_lines() {
    let (_d, root) = workdir();
    put(&root, "main.rs", CODE);
    let out = ok(
        "Edit",
        json!({"file_path": "main.rs", "old_string": "let x = 1;", "new_string": "let x = 2;"}),
        &root,
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(root.join("main.rs")).unwrap(),
        CODE.replace("let x = 1;", "let x = 2;")
    );
    assert!(
        out.content.contains("replaced 1 occurrence"),
        "{}",
        out.content
    );
    assert!(
        out.content.contains("     2\t    let x = 2;"),
        "{}",
        out.content
    );
    assert!(out.changed_files);
    let diff = out.data.unwrap()["diff"].as_str().unwrap().to_string();
    assert!(
        diff.contains("-    let x = 1;\n+    let x = 2;\n"),
        "{diff}"
    );
    assert!(diff.contains("@@"), "{diff}");
    assert!(diff.starts_with("--- a/main.rs\n+++ b/main.rs\n"), "{diff}");
}

#[tokio::test]
async fn not_found_says_so_and_hints_at_whitespace() {
    let (_d, root) = workdir();
    put(&root, "main.rs", CODE);
    let e = err(
        "Edit",
        json!({"file_path": "main.rs", "old_string": "let x = 1;\nprintln!(\"{x}\");", "new_string": "y"}),
        &root,
    )
    .await;
    assert!(
        e.contains("Edit") && e.contains("main.rs") && e.contains("not found"),
        "{e}"
    );
    assert!(e.contains("line 2"), "{e}");
    let e = err(
        "Edit",
        json!({"file_path": "main.rs", "old_string": "nothing like it", "new_string": "y"}),
        &root,
    )
    .await;
    assert!(e.contains("not found"), "{e}");
    let e = err(
        "Edit",
        json!({"file_path": "main.rs", "old_string": "     2\t    let x = 1;", "new_string": "y"}),
        &root,
    )
    .await;
    assert!(e.contains("line-number prefix"), "{e}");
    assert_eq!(std::fs::read_to_string(root.join("main.rs")).unwrap(), CODE);
}

#[tokio::test]
async fn not_unique_gives_the_count_and_the_ways_out() {
    let (_d, root) = workdir();
    put(&root, "t.txt", "foo\nbar foo\n\nfoo\n");
    let e = err(
        "Edit",
        json!({"file_path": "t.txt", "old_string": "foo", "new_string": "baz"}),
        &root,
    )
    .await;
    assert!(e.contains("not unique") && e.contains("3 times"), "{e}");
    assert!(e.contains("lines 1, 2, 4"), "{e}");
    assert!(e.contains("replace_all") && e.contains("context"), "{e}");
    assert_eq!(
        std::fs::read_to_string(root.join("t.txt")).unwrap(),
        "foo\nbar foo\n\nfoo\n"
    );
}

#[tokio::test]
async fn replace_all_changes_every_occurrence() {
    let (_d, root) = workdir();
    put(&root, "t.txt", "foo\nbar foo\n\nfoo\n");
    let out = ok(
        "Edit",
        json!({"file_path": "t.txt", "old_string": "foo", "new_string": "baz", "replace_all": true}),
        &root,
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(root.join("t.txt")).unwrap(),
        "baz\nbar baz\n\nbaz\n"
    );
    assert!(
        out.content.contains("replaced 3 occurrences"),
        "{}",
        out.content
    );
}

#[tokio::test]
async fn identical_strings_are_refused() {
    let (_d, root) = workdir();
    put(&root, "t.txt", "a\n");
    let e = err(
        "Edit",
        json!({"file_path": "t.txt", "old_string": "a", "new_string": "a"}),
        &root,
    )
    .await;
    assert!(e.contains("identical"), "{e}");
}

#[tokio::test]
async fn empty_old_string_creates_a_missing_file() {
    let (_d, root) = workdir();
    let out = ok(
        "Edit",
        json!({"file_path": "n/new.txt", "old_string": "", "new_string": "hi\n"}),
        &root,
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(root.join("n/new.txt")).unwrap(),
        "hi\n"
    );
    assert!(out.content.starts_with("Created"), "{}", out.content);
    let e = err(
        "Edit",
        json!({"file_path": "n/new.txt", "old_string": "", "new_string": "again"}),
        &root,
    )
    .await;
    assert!(
        e.contains("already has content") && e.contains("Write"),
        "{e}"
    );
}

#[tokio::test]
async fn a_missing_file_is_a_clear_error() {
    let (_d, root) = workdir();
    let e = err(
        "Edit",
        json!({"file_path": "ghost.rs", "old_string": "a", "new_string": "b"}),
        &root,
    )
    .await;
    assert!(
        e.contains("ghost.rs") && e.contains("does not exist"),
        "{e}"
    );
}

#[tokio::test]
async fn binary_and_invalid_utf8_files_are_refused() {
    let (_d, root) = workdir();
    put(&root, "b.bin", b"ab\0cd");
    let e = err(
        "Edit",
        json!({"file_path": "b.bin", "old_string": "ab", "new_string": "x"}),
        &root,
    )
    .await;
    assert!(e.contains("binary"), "{e}");
    put(&root, "l.txt", b"ok\ncaf\xe9\n");
    let e = err(
        "Edit",
        json!({"file_path": "l.txt", "old_string": "ok", "new_string": "x"}),
        &root,
    )
    .await;
    assert!(e.contains("not valid UTF-8") && e.contains("line 2"), "{e}");
    assert_eq!(std::fs::read(root.join("l.txt")).unwrap(), b"ok\ncaf\xe9\n");
}

#[tokio::test]
async fn crlf_files_accept_lf_old_strings() {
    let (_d, root) = workdir();
    put(&root, "w.txt", "one\r\ntwo\r\nthree\r\n");
    ok(
        "Edit",
        json!({"file_path": "w.txt", "old_string": "one\ntwo", "new_string": "1\n2"}),
        &root,
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(root.join("w.txt")).unwrap(),
        "1\r\n2\r\nthree\r\n"
    );
}

#[cfg(unix)]
#[tokio::test]
async fn edit_keeps_permissions() {
    use std::os::unix::fs::PermissionsExt as _;
    let (_d, root) = workdir();
    put(&root, "x.sh", "echo a\n");
    std::fs::set_permissions(root.join("x.sh"), std::fs::Permissions::from_mode(0o700)).unwrap();
    ok(
        "Edit",
        json!({"file_path": "x.sh", "old_string": "a", "new_string": "b"}),
        &root,
    )
    .await;
    assert_eq!(
        std::fs::metadata(root.join("x.sh"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o700
    );
}

#[tokio::test]
async fn access_is_an_edit_of_the_absolute_path() {
    let (_d, root) = workdir();
    let registry = kaji_tools::builtin_tools();
    let tool = registry.get("Edit").unwrap();
    assert!(!tool.is_read_only());
    let ctx = kaji_tools::ToolContext::new(&root);
    let access = tool.access(
        &json!({"file_path": "src/lib.rs", "old_string": "a", "new_string": "b"}),
        &ctx,
    );
    assert_eq!(
        access,
        ToolAccess::Edit {
            paths: vec![root.join("src/lib.rs")]
        }
    );
}
