//! A named-paths checkpoint (`commit_paths`, an Edit's or a Write's) stages
//! exactly what a scan of the whole directory would: ignore rules read
//! in-process must agree with git's, whether a rule ignores a path,
//! re-includes it, ignores a directory above it or sits in a deeper
//! `.gitignore`; and the branch it moves as a file is the one git reads.

use std::path::PathBuf;
use std::process::Command;

use kaji_core::checkpoints::CheckpointStore;

use crate::checkpoints::write;

#[tokio::test]
async fn named_paths_stage_what_a_scan_of_the_tree_would() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let root = work.path();
    write(root, ".gitignore", "*.log\n!keep.log\nbuild/\n/top.txt\n");
    write(root, "src/.gitignore", "gen.rs\n!*.log\n");
    write(root, "src/main.rs", "fn main() {}\n");
    let store = CheckpointStore::open(home.path(), root).unwrap();
    let first = store
        .commit("start")
        .await
        .unwrap()
        .expect("first checkpoint");

    let written = [
        ("a.log", "ignored\n"),
        ("keep.log", "re-included\n"),
        ("build/x.o", "ignored directory\n"),
        ("deep/build/y.o", "ignored directory, deeper\n"),
        ("src/gen.rs", "ignored by the deeper file\n"),
        ("src/trace.log", "re-included by the deeper file\n"),
        ("src/main.rs", "fn main() { changed(); }\n"),
        ("top.txt", "anchored rule\n"),
        ("sub/top.txt", "not matched by the anchored rule\n"),
        ("notes.txt", "kept\n"),
    ];
    for (path, text) in written {
        write(root, path, text);
    }
    let paths: Vec<PathBuf> = written.iter().map(|(p, _)| PathBuf::from(p)).collect();
    let named = store
        .commit_paths("Write", &paths)
        .await
        .unwrap()
        .expect("a checkpoint of the written files");
    // Exactly what git's rules keep, no ignored file among them ...
    let diff = store.diff(&first.id, Some(&named.id)).await.unwrap();
    let mut changed: Vec<&str> = diff
        .lines()
        .filter_map(|l| l.strip_prefix("+++ b/"))
        .collect();
    changed.sort_unstable();
    assert_eq!(
        changed,
        [
            "keep.log",
            "notes.txt",
            "src/main.rs",
            "src/trace.log",
            "sub/top.txt"
        ],
        "{diff}"
    );
    // ... and a scan of the whole tree finds nothing more.
    assert_eq!(store.commit("scan").await.unwrap(), None);
    let latest = store.latest().await.unwrap().expect("latest");
    assert_eq!(latest.id, named.id);

    // The branch written as a file is what git itself reads.
    let out = Command::new("git")
        .arg(format!("--git-dir={}", store.git_dir().display()))
        .args(["rev-parse", "refs/heads/checkpoints"])
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        named.id.as_str()
    );
    assert_eq!(store.latest_id().await.unwrap().as_ref(), Some(&named.id));
    let list = store.list().await.unwrap();
    assert_eq!(list.len(), 2, "{list:?}");
}
