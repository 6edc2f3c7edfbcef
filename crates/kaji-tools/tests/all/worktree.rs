//! `EnterWorktree` / `ExitWorktree` against real git repositories in
//! temporary directories: round trips with keep and remove, the refusals
//! (uncommitted changes, unmerged commits), discard_changes, info/exclude,
//! and the errors outside a repository.

use std::path::{Path, PathBuf};

use kaji_test_support::fixtures::git;
use kaji_tools::{ToolContext, ToolControl, ToolError, ToolOutput, builtin_tools};
use serde_json::{Value, json};

/// A repository with one commit; returns (tempdir, canonical root).
fn repo() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().canonicalize().expect("canonical");
    git(&root, &["init", "-q", "-b", "main"]);
    std::fs::write(root.join("README.md"), "hello\n").expect("write");
    std::fs::create_dir_all(root.join("sub")).expect("mkdir");
    std::fs::write(root.join("sub/lib.rs"), "// lib\n").expect("write");
    git(&root, &["add", "-A"]);
    git(&root, &["commit", "-q", "-m", "initial"]);
    (dir, root)
}

async fn call(tool: &str, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
    let registry = builtin_tools();
    let tool = registry.get(tool).expect("tool registered");
    tool.call(input, ctx).await
}

fn new_dir(out: &ToolOutput) -> PathBuf {
    match &out.control {
        Some(ToolControl::ChangeDirectory { path }) => path.clone(),
        other => panic!("expected ChangeDirectory, got {other:?}"),
    }
}

fn branches(root: &Path) -> String {
    git(root, &["branch", "--list", "--format=%(refname:short)"])
}

/// Enters worktree `name`; returns the context now inside it.
async fn enter(root: &Path, name: &str) -> ToolContext {
    let ctx = ToolContext::new(root);
    let out = call("EnterWorktree", json!({"name": name}), &ctx)
        .await
        .expect("enter");
    let wt = new_dir(&out);
    assert_eq!(wt, root.join(".kaji/worktrees").join(name));
    let mut inside = ctx.clone();
    inside.cwd = wt;
    inside
}

#[tokio::test]
async fn round_trip_with_keep_leaves_the_worktree_and_branch() {
    let (_dir, root) = repo();
    let inside = enter(&root, "feature-1").await;
    assert!(
        inside.cwd.join("README.md").is_file(),
        "the worktree is a checkout of HEAD"
    );
    assert!(branches(&root).lines().any(|b| b == "kaji/feature-1"));
    assert_eq!(
        git(&root, &["status", "--porcelain"]),
        "",
        "the worktree is not an untracked file"
    );

    let out = call("ExitWorktree", json!({"action": "keep"}), &inside)
        .await
        .expect("exit keep");
    assert_eq!(new_dir(&out), root);
    assert!(
        inside.cwd.join("README.md").is_file(),
        "keep leaves the worktree"
    );
    assert!(branches(&root).lines().any(|b| b == "kaji/feature-1"));
}

#[tokio::test]
async fn round_trip_with_remove_deletes_worktree_and_branch() {
    let (_dir, root) = repo();
    let inside = enter(&root, "tmp").await;
    let out = call("ExitWorktree", json!({"action": "remove"}), &inside)
        .await
        .expect("exit remove");
    assert_eq!(new_dir(&out), root);
    assert!(!inside.cwd.exists());
    assert!(!branches(&root).contains("kaji/tmp"));
    assert!(!git(&root, &["worktree", "list"]).contains(".kaji/worktrees/tmp"));
}

#[tokio::test]
async fn remove_is_refused_with_uncommitted_changes_unless_discarded() {
    let (_dir, root) = repo();
    let inside = enter(&root, "dirty").await;
    std::fs::write(inside.cwd.join("scratch.txt"), "work in progress\n").expect("write");
    std::fs::write(inside.cwd.join("README.md"), "changed\n").expect("write");

    let err = call("ExitWorktree", json!({"action": "remove"}), &inside)
        .await
        .expect_err("refused");
    let msg = err.to_string();
    assert!(matches!(err, ToolError::Refused(_)), "{msg}");
    assert!(msg.contains("uncommitted changes (2)"), "{msg}");
    assert!(
        msg.contains("scratch.txt") && msg.contains("README.md"),
        "{msg}"
    );
    assert!(
        inside.cwd.join("scratch.txt").is_file(),
        "nothing was deleted"
    );

    let out = call(
        "ExitWorktree",
        json!({"action": "remove", "discard_changes": true}),
        &inside,
    )
    .await
    .expect("discard");
    assert!(
        out.content.contains("Discarded 2 uncommitted"),
        "{}",
        out.content
    );
    assert!(!inside.cwd.exists());
    assert!(!branches(&root).contains("kaji/dirty"));
}

#[tokio::test]
async fn remove_is_refused_with_commits_not_on_the_original_branch() {
    let (_dir, root) = repo();
    let inside = enter(&root, "work").await;
    std::fs::write(inside.cwd.join("feature.rs"), "// feature\n").expect("write");
    git(&inside.cwd, &["add", "-A"]);
    git(&inside.cwd, &["commit", "-q", "-m", "add the feature"]);

    let err = call("ExitWorktree", json!({"action": "remove"}), &inside)
        .await
        .expect_err("refused");
    let msg = err.to_string();
    assert!(msg.contains("not on the original branch (1)"), "{msg}");
    assert!(msg.contains("add the feature"), "{msg}");
    assert!(!msg.contains("uncommitted"), "{msg}");

    // Once merged into the original branch, nothing is lost.
    git(&root, &["merge", "-q", "--ff-only", "kaji/work"]);
    call("ExitWorktree", json!({"action": "remove"}), &inside)
        .await
        .expect("remove after merge");
    assert!(!inside.cwd.exists());
    assert!(root.join("feature.rs").is_file());
}

#[tokio::test]
async fn info_exclude_lists_the_worktrees_once() {
    let (_dir, root) = repo();
    std::fs::write(root.join(".git/info/exclude"), "*.tmp").expect("write");
    let first = enter(&root, "a").await;
    call("ExitWorktree", json!({"action": "keep"}), &first)
        .await
        .expect("keep");
    enter(&root, "b").await;
    let exclude = std::fs::read_to_string(root.join(".git/info/exclude")).expect("read");
    assert!(
        exclude.starts_with("*.tmp\n"),
        "existing lines are kept: {exclude:?}"
    );
    assert_eq!(
        exclude
            .lines()
            .filter(|l| *l == "/.kaji/worktrees/")
            .count(),
        1,
        "{exclude:?}"
    );
    assert_eq!(
        git(&root, &["status", "--porcelain", "--untracked-files=all"]),
        ""
    );
}

#[tokio::test]
async fn a_name_is_generated_when_missing_and_subdirectories_map_over() {
    let (_dir, root) = repo();
    let ctx = ToolContext::new(root.join("sub"));
    let out = call("EnterWorktree", json!({}), &ctx).await.expect("enter");
    let name = out
        .data
        .as_ref()
        .and_then(|d| d["name"].as_str())
        .expect("name")
        .to_string();
    assert!(name.starts_with("wt-"), "{name}");
    assert_eq!(
        new_dir(&out),
        root.join(".kaji/worktrees").join(&name).join("sub")
    );
    assert!(branches(&root).lines().any(|b| b == format!("kaji/{name}")));

    let mut inside = ctx.clone();
    inside.cwd = new_dir(&out);
    let err = call("EnterWorktree", json!({"name": "again"}), &inside)
        .await
        .expect_err("nested enter");
    assert!(err.to_string().contains("already in worktree"), "{err}");
    let back = call("ExitWorktree", json!({"action": "remove"}), &inside)
        .await
        .expect("remove");
    assert_eq!(new_dir(&back), root.join("sub"));
}

#[tokio::test]
async fn bad_names_and_taken_names_are_refused() {
    let (_dir, root) = repo();
    let ctx = ToolContext::new(&root);
    for bad in [
        "../escape",
        "a/b",
        "-x",
        ".hidden",
        "a..b",
        "x.lock",
        "sp ace",
        "ü",
    ] {
        let err = call("EnterWorktree", json!({"name": bad}), &ctx)
            .await
            .expect_err(bad);
        assert!(
            matches!(err, ToolError::InvalidInput { .. }),
            "{bad}: {err}"
        );
    }
    assert!(!root.join(".kaji").exists(), "nothing was created");
    enter(&root, "same").await;
    let err = call("EnterWorktree", json!({"name": "same"}), &ctx)
        .await
        .expect_err("taken");
    assert!(err.to_string().contains("already exists"), "{err}");
}

#[tokio::test]
async fn outside_a_repository_and_outside_a_worktree_are_clear_errors() {
    let plain = tempfile::tempdir().expect("tempdir");
    let ctx = ToolContext::new(plain.path());
    let err = call("EnterWorktree", json!({"name": "x"}), &ctx)
        .await
        .expect_err("no repo");
    assert!(
        err.to_string().contains("not inside a git repository"),
        "{err}"
    );
    let err = call("ExitWorktree", json!({"action": "keep"}), &ctx)
        .await
        .expect_err("no repo");
    assert!(
        err.to_string().contains("not inside a git repository"),
        "{err}"
    );

    let (_dir, root) = repo();
    let ctx = ToolContext::new(&root);
    let err = call("ExitWorktree", json!({"action": "remove"}), &ctx)
        .await
        .expect_err("not in one");
    assert!(err.to_string().contains("not in a worktree"), "{err}");
    let err = call("ExitWorktree", json!({"action": "drop"}), &ctx)
        .await
        .expect_err("bad action");
    assert!(matches!(err, ToolError::InvalidInput { .. }), "{err}");
}

#[tokio::test]
async fn a_repository_without_commits_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    git(dir.path(), &["init", "-q"]);
    let err = kaji_tools::worktree::create_worktree(dir.path(), Some("x"))
        .await
        .expect_err("no HEAD");
    assert!(err.to_string().contains("no commits yet"), "{err}");
}

#[tokio::test]
async fn access_names_the_worktree_and_keep_is_not_an_edit() {
    let (_dir, root) = repo();
    let registry = builtin_tools();
    let ctx = ToolContext::new(&root);
    let enter = registry.get("EnterWorktree").expect("tool");
    assert!(!enter.is_read_only());
    assert_eq!(
        enter.access(&json!({"name": "n"}), &ctx),
        kaji_tools::ToolAccess::Edit {
            paths: vec![root.join(".kaji/worktrees/n")]
        }
    );
    let exit = registry.get("ExitWorktree").expect("tool");
    let mut inside = ctx.clone();
    inside.cwd = root.join(".kaji/worktrees/n/sub");
    assert_eq!(
        exit.access(&json!({"action": "keep"}), &inside),
        kaji_tools::ToolAccess::SessionState
    );
    assert_eq!(
        exit.access(&json!({"action": "remove"}), &inside),
        kaji_tools::ToolAccess::Edit {
            paths: vec![root.join(".kaji/worktrees/n")]
        }
    );
}

/// Gives the repository an identity so that merge commits can be made.
fn identity(root: &Path) {
    git(root, &["config", "user.name", "kaji-test"]);
    git(root, &["config", "user.email", "kaji-test@example.com"]);
}

fn commit_in(dir: &Path, file: &str, text: &str, message: &str) {
    std::fs::write(dir.join(file), text).expect("write");
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", message]);
}

#[tokio::test]
async fn merge_merges_into_the_recorded_branch_and_removes_the_worktree() {
    let (_dir, root) = repo();
    identity(&root);
    let inside = enter(&root, "feat").await;
    assert_eq!(
        git(&root, &["config", "--get", "branch.kaji/feat.kajiBase"]).trim(),
        "main"
    );
    commit_in(&inside.cwd, "new.txt", "from the worktree\n", "add new.txt");
    let out = call("ExitWorktree", json!({"action": "merge"}), &inside)
        .await
        .expect("merge");
    assert_eq!(new_dir(&out), root);
    assert_eq!(out.data.as_ref().expect("data")["into"], "main");
    assert_eq!(
        std::fs::read_to_string(root.join("new.txt")).expect("merged file"),
        "from the worktree\n"
    );
    let parents = git(&root, &["rev-list", "--parents", "-n", "1", "HEAD"]);
    assert_eq!(
        parents.split_whitespace().count(),
        3,
        "a --no-ff merge commit"
    );
    assert!(!inside.cwd.exists(), "the worktree is removed");
    assert!(
        !branches(&root).contains("kaji/feat"),
        "{}",
        branches(&root)
    );
}

#[tokio::test]
async fn merge_is_refused_on_dirty_worktree_other_branch_or_staged_changes() {
    let (_dir, root) = repo();
    identity(&root);
    let inside = enter(&root, "feat").await;
    commit_in(&inside.cwd, "new.txt", "x\n", "add");
    std::fs::write(inside.cwd.join("dirty.txt"), "uncommitted").expect("write");
    let err = call("ExitWorktree", json!({"action": "merge"}), &inside)
        .await
        .expect_err("dirty worktree");
    assert!(err.to_string().contains("uncommitted changes (1)"), "{err}");
    assert!(err.to_string().contains("dirty.txt"), "{err}");
    std::fs::remove_file(inside.cwd.join("dirty.txt")).expect("rm");

    git(&root, &["switch", "-q", "-c", "other"]);
    let err = call("ExitWorktree", json!({"action": "merge"}), &inside)
        .await
        .expect_err("other branch");
    assert!(
        err.to_string().contains("is on other, not on main"),
        "{err}"
    );
    git(&root, &["switch", "-q", "main"]);

    std::fs::write(root.join("README.md"), "staged\n").expect("write");
    git(&root, &["add", "README.md"]);
    let err = call("ExitWorktree", json!({"action": "merge"}), &inside)
        .await
        .expect_err("staged");
    assert!(err.to_string().contains("staged changes"), "{err}");
    assert!(err.to_string().contains("README.md"), "{err}");
    assert!(inside.cwd.is_dir(), "nothing was removed");
    assert!(branches(&root).contains("kaji/feat"));
}

#[tokio::test]
async fn a_merge_with_conflicts_is_aborted_and_names_the_files() {
    let (_dir, root) = repo();
    identity(&root);
    let inside = enter(&root, "feat").await;
    commit_in(&inside.cwd, "README.md", "worktree version\n", "wt");
    commit_in(&root, "README.md", "main version\n", "main");
    let head_before = git(&root, &["rev-parse", "HEAD"]);
    let err = call("ExitWorktree", json!({"action": "merge"}), &inside)
        .await
        .expect_err("conflict");
    let text = err.to_string();
    assert!(text.contains("conflicts in 1 file(s)"), "{text}");
    assert!(text.contains("README.md"), "{text}");
    assert!(text.contains("merge was aborted"), "{text}");
    assert_eq!(git(&root, &["rev-parse", "HEAD"]), head_before);
    assert_eq!(
        git(&root, &["status", "--porcelain"]),
        "",
        "no merge in progress"
    );
    assert!(!root.join(".git/MERGE_HEAD").exists());
    assert!(inside.cwd.is_dir(), "the worktree stays");
    assert!(branches(&root).contains("kaji/feat"));
}
