use std::time::{Duration, SystemTime};

use serde_json::json;

use super::{err, ok, put, workdir};

/// Sets a file's modification time `secs_ago` seconds in the past.
fn age(path: &std::path::Path, secs_ago: u64) {
    let file = std::fs::File::options().write(true).open(path).unwrap();
    file.set_modified(SystemTime::now() - Duration::from_secs(secs_ago))
        .unwrap();
}

fn tree() -> (tempfile::TempDir, std::path::PathBuf) {
    let (d, root) = workdir();
    std::fs::create_dir(root.join(".git")).unwrap();
    put(&root, ".git/config", "[core]\n");
    put(&root, ".gitignore", "target/\n*.log\n");
    put(&root, "target/debug/out.rs", "// build output\n");
    put(&root, "app.log", "log\n");
    put(&root, "src/main.rs", "fn main() {}\n");
    put(&root, "src/util/mod.rs", "pub fn util() {}\n");
    put(&root, "README.md", "# readme\n");
    put(&root, ".github/workflows/ci.yml", "on: push\n");
    age(&root.join("src/util/mod.rs"), 300);
    age(&root.join("src/main.rs"), 200);
    age(&root.join("README.md"), 100);
    (d, root)
}

#[tokio::test]
async fn finds_files_newest_first_and_skips_ignored() {
    let (_d, root) = tree();
    let out = ok("Glob", json!({"pattern": "**/*.rs"}), &root).await;
    assert_eq!(out.content, "src/main.rs\nsrc/util/mod.rs");
    let out = ok("Glob", json!({"pattern": "**/*"}), &root).await;
    let files: Vec<&str> = out.content.lines().collect();
    assert!(
        files.contains(&".github/workflows/ci.yml"),
        "dot-dirs are searched: {files:?}"
    );
    assert!(files.contains(&".gitignore"), "{files:?}");
    assert!(
        !files.iter().any(|f| f.starts_with(".git/")),
        ".git is skipped: {files:?}"
    );
    assert!(
        !files
            .iter()
            .any(|f| f.starts_with("target/") || f.ends_with(".log")),
        "{files:?}"
    );
    // README.md (100 s old) comes before src/main.rs (200 s) and mod.rs (300 s).
    let pos = |name: &str| files.iter().position(|f| *f == name).unwrap();
    assert!(pos("README.md") < pos("src/main.rs") && pos("src/main.rs") < pos("src/util/mod.rs"));
}

#[tokio::test]
async fn star_stays_in_one_directory() {
    let (_d, root) = tree();
    let out = ok("Glob", json!({"pattern": "*.md"}), &root).await;
    assert_eq!(out.content, "README.md");
    let out = ok("Glob", json!({"pattern": "*.rs", "path": "src"}), &root).await;
    assert_eq!(out.content, "src/main.rs");
    let out = ok("Glob", json!({"pattern": "src/*/*.rs"}), &root).await;
    assert_eq!(out.content, "src/util/mod.rs");
}

#[tokio::test]
async fn absolute_patterns_and_paths_work() {
    let (_d, root) = tree();
    let pattern = format!("{}/src/**/*.rs", root.display());
    let out = ok("Glob", json!({"pattern": pattern}), &root).await;
    assert_eq!(out.content, "src/main.rs\nsrc/util/mod.rs");
    let (_o, other) = workdir();
    put(&other, "x.txt", "");
    let out = ok("Glob", json!({"pattern": "*.txt", "path": other}), &root).await;
    assert_eq!(out.content, other.join("x.txt").to_string_lossy());
}

#[tokio::test]
async fn no_match_is_a_message_not_an_error() {
    let (_d, root) = tree();
    let out = ok("Glob", json!({"pattern": "**/*.java"}), &root).await;
    assert!(out.content.starts_with("No files found"), "{}", out.content);
    let out = ok("Glob", json!({"pattern": "nowhere/**/*.rs"}), &root).await;
    assert!(out.content.starts_with("No files found"), "{}", out.content);
}

#[tokio::test]
async fn results_are_capped_with_a_note() {
    let (_d, root) = workdir();
    for i in 0..130 {
        put(&root, &format!("many/f{i:03}.txt"), "");
    }
    let out = ok("Glob", json!({"pattern": "many/*.txt"}), &root).await;
    assert_eq!(
        out.content
            .lines()
            .filter(|l| l.starts_with("many/"))
            .count(),
        100
    );
    assert!(
        out.content.contains("100 most recently modified of 130"),
        "{}",
        out.content
    );
    assert_eq!(out.data.unwrap()["total"], 130);
}

#[tokio::test]
async fn bad_input_is_a_clear_error() {
    let (_d, root) = tree();
    let e = err("Glob", json!({"pattern": "src/[a-"}), &root).await;
    assert!(e.contains("Glob") && e.contains("invalid glob"), "{e}");
    let e = err(
        "Glob",
        json!({"pattern": "*.rs", "path": "missing-dir"}),
        &root,
    )
    .await;
    assert!(
        e.contains("does not exist") && e.contains("missing-dir"),
        "{e}"
    );
    let e = err("Glob", json!({"pattern": ""}), &root).await;
    assert!(e.contains("pattern is empty"), "{e}");
    let e = err("Glob", json!({"path": "src"}), &root).await;
    assert!(e.contains("pattern"), "{e}");
}

#[tokio::test]
async fn kajiignore_hides_files() {
    let (_d, root) = tree();
    put(&root, ".kajiignore", "src/util/\n");
    let out = ok("Glob", json!({"pattern": "**/*.rs"}), &root).await;
    assert_eq!(out.content, "src/main.rs");
    let e = err(
        "Glob",
        json!({"pattern": "*.rs", "path": "src/util"}),
        &root,
    )
    .await;
    assert!(
        e.contains("rule `src/util/`") && e.contains(".kajiignore"),
        "{e}"
    );
}

#[cfg(unix)]
#[tokio::test]
async fn fifos_are_not_listed_or_opened() {
    let (_d, root) = workdir();
    super::mkfifo(&root.join("pipe.txt"));
    put(&root, "real.txt", "x");
    let out = ok("Glob", json!({"pattern": "*.txt"}), &root).await;
    assert_eq!(out.content, "real.txt");
}
