use serde_json::json;

use super::{err, ok, put, workdir};

fn setup() -> (tempfile::TempDir, std::path::PathBuf) {
    let (d, root) = workdir();
    std::fs::create_dir(root.join(".git")).unwrap();
    put(
        &root,
        ".kajiignore",
        "# keep secrets away\nsecrets/\n*.pem\n",
    );
    put(&root, "secrets/api.txt", "token\n");
    put(&root, "key.pem", "-----BEGIN-----\n");
    put(&root, "src/lib.rs", "pub fn f() {}\n");
    (d, root)
}

fn assert_names_rule(e: &str, rule: &str, file: &std::path::Path) {
    assert!(e.contains(&format!("rule `{rule}`")), "{e}");
    assert!(e.contains(&*file.to_string_lossy()), "{e}");
    assert!(e.contains("excluded"), "{e}");
}

#[tokio::test]
async fn read_write_edit_refuse_ignored_paths() {
    let (_d, root) = setup();
    let ignore_file = root.join(".kajiignore");
    let e = err("Read", json!({"file_path": "secrets/api.txt"}), &root).await;
    assert_names_rule(&e, "secrets/", &ignore_file);
    assert!(e.contains("line 2"), "{e}");
    let e = err("Read", json!({"file_path": "key.pem"}), &root).await;
    assert_names_rule(&e, "*.pem", &ignore_file);
    let e = err(
        "Write",
        json!({"file_path": "secrets/new.txt", "content": "x"}),
        &root,
    )
    .await;
    assert_names_rule(&e, "secrets/", &ignore_file);
    assert!(!root.join("secrets/new.txt").exists());
    let e = err(
        "Edit",
        json!({"file_path": "key.pem", "old_string": "BEGIN", "new_string": "END"}),
        &root,
    )
    .await;
    assert_names_rule(&e, "*.pem", &ignore_file);
    assert_eq!(
        std::fs::read_to_string(root.join("key.pem")).unwrap(),
        "-----BEGIN-----\n"
    );
    // Other files are untouched by the rules.
    ok("Read", json!({"file_path": "src/lib.rs"}), &root).await;
}

#[tokio::test]
async fn repository_root_file_applies_in_subdirectories() {
    let (_d, root) = setup();
    let sub = root.join("src");
    let e = err("Read", json!({"file_path": "../secrets/api.txt"}), &sub).await;
    assert_names_rule(&e, "secrets/", &root.join(".kajiignore"));
    put(&sub, "nested/key.pem", "x");
    let e = err("Read", json!({"file_path": "nested/key.pem"}), &sub).await;
    assert_names_rule(&e, "*.pem", &root.join(".kajiignore"));
}

#[cfg(unix)]
#[tokio::test]
async fn a_symlink_does_not_smuggle_an_ignored_file() {
    let (_d, root) = setup();
    std::os::unix::fs::symlink(root.join("secrets/api.txt"), root.join("innocent.txt")).unwrap();
    let e = err("Read", json!({"file_path": "innocent.txt"}), &root).await;
    assert_names_rule(&e, "secrets/", &root.join(".kajiignore"));
}

#[tokio::test]
async fn a_hard_link_to_an_ignored_file_is_refused_by_read_edit_and_grep() {
    let (_d, root) = setup();
    std::fs::hard_link(root.join("secrets/api.txt"), root.join("src/notes.txt")).unwrap();
    let e = err("Read", json!({"file_path": "src/notes.txt"}), &root).await;
    assert_names_rule(&e, "secrets/", &root.join(".kajiignore"));
    let e = err(
        "Edit",
        json!({"file_path": "src/notes.txt", "old_string": "token", "new_string": "x"}),
        &root,
    )
    .await;
    assert!(e.contains("excluded"), "{e}");
    assert_eq!(
        std::fs::read_to_string(root.join("secrets/api.txt")).unwrap(),
        "token\n"
    );
    let out = ok(
        "Grep",
        json!({"pattern": "token", "output_mode": "content"}),
        &root,
    )
    .await
    .content;
    assert!(out.starts_with("No matches"), "{out}");
    assert!(!out.contains("notes.txt"), "{out}");
}
