//! Checkpoints against real git in temporary directories: restore after a
//! write, an edit, a delete and a rename, and undo of the restore;
//! .gitignore, the size limit, nested repositories, and the user's own
//! `.git` left untouched; restores over files no checkpoint holds (too
//! large, ignored, in the way) and their undo; stale `index.lock` files of
//! a killed git; unreadable files; the time limit and cancellation.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use kaji_core::checkpoints::{CheckpointConfig, CheckpointError, CheckpointStore};
use tokio_util::sync::CancellationToken;

/// Every file (with contents) and directory under `root`; `.git`
/// directories are skipped unless `with_git`.
pub(crate) fn snapshot(root: &Path, with_git: bool) -> BTreeMap<PathBuf, Option<Vec<u8>>> {
    fn walk(root: &Path, dir: &Path, with_git: bool, out: &mut BTreeMap<PathBuf, Option<Vec<u8>>>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .expect("read_dir")
            .map(|e| e.expect("entry"))
            .collect();
        entries.sort_by_key(|e| e.file_name());
        for entry in entries {
            let path = entry.path();
            if !with_git && entry.file_name() == ".git" {
                continue;
            }
            let rel = path.strip_prefix(root).expect("prefix").to_path_buf();
            let kind = entry.file_type().expect("file type");
            if kind.is_dir() {
                out.insert(rel, None);
                walk(root, &path, with_git, out);
            } else {
                out.insert(rel, Some(std::fs::read(&path).expect("read")));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, with_git, &mut out);
    out
}

pub(crate) fn write(root: &Path, rel: &str, contents: &str) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, contents).expect("write");
}

/// Runs the user's git (isolated from this machine's config) in `dir`.
pub(crate) fn user_git(dir: &Path, args: &[&str]) {
    let status = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "user")
        .env("GIT_AUTHOR_EMAIL", "user@example.com")
        .env("GIT_COMMITTER_NAME", "user")
        .env("GIT_COMMITTER_EMAIL", "user@example.com")
        .status()
        .expect("git runs");
    assert!(status.success(), "git {args:?} failed in {}", dir.display());
}

struct Fixture {
    _home: tempfile::TempDir,
    work: tempfile::TempDir,
    store: CheckpointStore,
}

fn fixture(config: CheckpointConfig) -> Fixture {
    let home = tempfile::tempdir().expect("home");
    let work = tempfile::tempdir().expect("work");
    let store = CheckpointStore::open_with(home.path(), work.path(), config).expect("open");
    Fixture {
        _home: home,
        work,
        store,
    }
}

#[tokio::test]
async fn restore_undoes_write_edit_delete_and_rename_and_can_itself_be_undone() {
    let f = fixture(CheckpointConfig::default());
    let root = f.work.path();
    write(root, "a.txt", "alpha\n");
    write(root, "dir/b.txt", "bravo\n");
    write(root, "c.txt", "charlie\n");
    write(root, "with space ü.txt", "unicode\n");
    let start = f
        .store
        .commit("task start")
        .await
        .expect("commit")
        .expect("a first checkpoint");
    let at_start = snapshot(root, false);

    // A write, an edit, a delete and a rename (of a file into a new dir).
    write(root, "new/created.txt", "new\n");
    write(root, "a.txt", "alpha edited\n");
    std::fs::remove_file(root.join("c.txt")).expect("rm");
    std::fs::create_dir_all(root.join("moved")).expect("mkdir");
    std::fs::rename(root.join("dir/b.txt"), root.join("moved/b2.txt")).expect("mv");
    let changed = f
        .store
        .commit("turn 1: Bash")
        .await
        .expect("commit")
        .expect("the changes make a checkpoint");
    let after_changes = snapshot(root, false);
    assert_ne!(at_start, after_changes);

    let outcome = f.store.restore(&start.id).await.expect("restore");
    assert_eq!(
        snapshot(root, false),
        at_start,
        "restore brings the files back exactly"
    );
    assert!(
        !root.join("moved").exists() && !root.join("new").exists(),
        "emptied directories go"
    );
    assert_eq!(
        outcome.before, changed.id,
        "nothing changed after the last checkpoint"
    );

    let undo = f.store.restore(&outcome.before).await.expect("undo");
    // git records files, not directories: the emptied `dir` stays gone.
    let mut expected = after_changes;
    expected.remove(Path::new("dir"));
    assert_eq!(
        snapshot(root, false),
        expected,
        "restoring `before` undoes the restore"
    );
    assert_eq!(undo.before, outcome.after);

    let labels: Vec<String> = f
        .store
        .list()
        .await
        .expect("list")
        .into_iter()
        .map(|c| c.label)
        .collect();
    let start_short = start.id.short().to_string();
    let changed_short = changed.id.short().to_string();
    assert_eq!(
        labels,
        vec![
            format!("restored {changed_short}"),
            format!("restored {start_short}"),
            "turn 1: Bash".to_string(),
            "task start".to_string(),
        ]
    );
}

#[tokio::test]
async fn restore_first_checkpoints_unsaved_changes() {
    let f = fixture(CheckpointConfig::default());
    let root = f.work.path();
    write(root, "a.txt", "one\n");
    let first = f
        .store
        .commit("first")
        .await
        .expect("commit")
        .expect("checkpoint");
    write(root, "a.txt", "two, never checkpointed\n");
    write(root, "b.txt", "also new\n");
    let unsaved = snapshot(root, false);

    let outcome = f.store.restore(&first.id).await.expect("restore");
    assert_ne!(outcome.before, first.id);
    assert_eq!(
        std::fs::read_to_string(root.join("a.txt")).expect("read"),
        "one\n"
    );
    assert!(!root.join("b.txt").exists());

    f.store.restore(&outcome.before).await.expect("undo");
    assert_eq!(snapshot(root, false), unsaved);
}

#[tokio::test]
async fn nothing_changed_makes_no_checkpoint() {
    let f = fixture(CheckpointConfig::default());
    write(f.work.path(), "a.txt", "a\n");
    assert!(f.store.commit("one").await.expect("commit").is_some());
    assert!(f.store.commit("two").await.expect("commit").is_none());
    let latest = f
        .store
        .latest()
        .await
        .expect("latest")
        .expect("one checkpoint");
    assert_eq!(latest.label, "one");
    assert_eq!(f.store.list().await.expect("list").len(), 1);
}

#[tokio::test]
async fn an_empty_directory_gets_a_first_checkpoint() {
    let f = fixture(CheckpointConfig::default());
    let first = f.store.commit("task start").await.expect("commit");
    assert!(first.is_some(), "the empty tree is a checkpoint too");
    write(f.work.path(), "later.txt", "x");
    f.store
        .restore(&first.expect("checkpoint").id)
        .await
        .expect("restore");
    assert!(snapshot(f.work.path(), false).is_empty());
}

#[tokio::test]
async fn gitignored_files_are_not_checkpointed_and_survive_restore() {
    let f = fixture(CheckpointConfig::default());
    let root = f.work.path();
    write(root, ".gitignore", "*.log\n/target/\n");
    write(root, "src/main.rs", "fn main() {}\n");
    write(root, "src/.gitignore", "generated.rs\n");
    let first = f
        .store
        .commit("start")
        .await
        .expect("commit")
        .expect("checkpoint");

    write(root, "build.log", "log\n");
    write(root, "target/debug/app", "binary\n");
    write(root, "src/generated.rs", "// generated\n");
    assert!(
        f.store
            .commit("ignored only")
            .await
            .expect("commit")
            .is_none(),
        "ignored files do not make a checkpoint"
    );
    write(root, "src/lib.rs", "// new\n");
    f.store
        .commit("lib")
        .await
        .expect("commit")
        .expect("checkpoint");

    f.store.restore(&first.id).await.expect("restore");
    assert!(!root.join("src/lib.rs").exists());
    assert_eq!(
        std::fs::read_to_string(root.join("build.log")).expect("read"),
        "log\n"
    );
    assert!(root.join("target/debug/app").is_file());
    assert!(root.join("src/generated.rs").is_file());
}

#[tokio::test]
async fn files_over_the_size_limit_are_skipped_and_left_alone() {
    let f = fixture(CheckpointConfig {
        max_file_size: 1000,
        ..CheckpointConfig::default()
    });
    let root = f.work.path();
    write(root, "small.txt", "small\n");
    write(root, "grows.txt", "small for now\n");
    let first = f
        .store
        .commit("start")
        .await
        .expect("commit")
        .expect("checkpoint");

    let big = "x".repeat(2000);
    write(root, "big.bin", &big);
    assert!(
        f.store.commit("big").await.expect("commit").is_none(),
        "a big file is not checkpointed"
    );

    write(root, "grows.txt", &big);
    let second = f
        .store
        .commit("grew")
        .await
        .expect("commit")
        .expect("checkpoint");
    let diff = f
        .store
        .diff(&first.id, Some(&second.id))
        .await
        .expect("diff");
    assert!(
        diff.contains("deleted file mode"),
        "grown file leaves the checkpoint:\n{diff}"
    );

    f.store.restore(&first.id).await.expect("restore");
    assert_eq!(
        std::fs::read_to_string(root.join("big.bin")).expect("read"),
        big
    );
    assert_eq!(
        std::fs::read_to_string(root.join("grows.txt")).expect("read"),
        "small for now\n"
    );
}

#[tokio::test]
async fn files_of_nested_repositories_are_checkpointed_and_restored() {
    let f = fixture(CheckpointConfig::default());
    let root = f.work.path();
    write(root, "top.txt", "top\n");
    write(root, "vendor/lib/x.txt", "x\n");
    write(root, "vendor/lib/deep/y.txt", "y\n");
    user_git(&root.join("vendor/lib"), &["init", "-q"]);
    write(root, "vendor/lib/inner/z.txt", "z\n");
    user_git(&root.join("vendor/lib/inner"), &["init", "-q"]);
    user_git(&root.join("vendor/lib/inner"), &["add", "-A"]);
    user_git(
        &root.join("vendor/lib/inner"),
        &["commit", "-q", "-m", "inner"],
    );
    let git_dirs_before = (
        snapshot(&root.join("vendor/lib/.git"), true),
        snapshot(&root.join("vendor/lib/inner/.git"), true),
    );
    let first = f
        .store
        .commit("start")
        .await
        .expect("commit")
        .expect("checkpoint");
    let at_start = snapshot(root, false);

    write(root, "vendor/lib/x.txt", "x edited\n");
    std::fs::remove_file(root.join("vendor/lib/deep/y.txt")).expect("rm");
    write(root, "vendor/lib/new.txt", "new\n");
    write(root, "vendor/lib/inner/z.txt", "z edited\n");
    let second = f
        .store
        .commit("edits")
        .await
        .expect("commit")
        .expect("nested edits are seen");
    let diff = f
        .store
        .diff(&first.id, Some(&second.id))
        .await
        .expect("diff");
    assert!(diff.contains("vendor/lib/inner/z.txt"), "{diff}");
    assert!(!diff.contains("Subproject"), "no gitlinks: {diff}");

    f.store.restore(&first.id).await.expect("restore");
    assert_eq!(snapshot(root, false), at_start);
    let git_dirs_after = (
        snapshot(&root.join("vendor/lib/.git"), true),
        snapshot(&root.join("vendor/lib/inner/.git"), true),
    );
    assert!(
        git_dirs_before == git_dirs_after,
        "nested .git directories are untouched"
    );
}

#[tokio::test]
async fn the_users_own_git_directory_is_never_changed() {
    let f = fixture(CheckpointConfig::default());
    let root = f.work.path();
    user_git(root, &["init", "-q"]);
    write(root, "tracked.txt", "tracked\n");
    write(root, ".gitignore", "secret.env\n");
    user_git(root, &["add", "-A"]);
    user_git(root, &["commit", "-q", "-m", "user commit"]);
    write(root, "untracked.txt", "untracked\n");
    write(root, "secret.env", "KEY=1\n");
    let before = snapshot(&root.join(".git"), true);

    let first = f
        .store
        .commit("start")
        .await
        .expect("commit")
        .expect("checkpoint");
    write(root, "tracked.txt", "changed\n");
    std::fs::remove_file(root.join("untracked.txt")).expect("rm");
    f.store
        .commit("change")
        .await
        .expect("commit")
        .expect("checkpoint");
    let outcome = f.store.restore(&first.id).await.expect("restore");
    f.store
        .diff(&first.id, None)
        .await
        .expect("diff to present");
    f.store.restore(&outcome.before).await.expect("undo");
    f.store.restore(&first.id).await.expect("restore again");

    assert!(
        before == snapshot(&root.join(".git"), true),
        "the user's .git is byte-for-byte unchanged"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("tracked.txt")).expect("read"),
        "tracked\n"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("secret.env")).expect("read"),
        "KEY=1\n"
    );
    assert!(root.join("untracked.txt").is_file());
}

#[tokio::test]
async fn diff_shows_changes_between_checkpoints_and_to_the_present() {
    let f = fixture(CheckpointConfig::default());
    let root = f.work.path();
    write(root, "a.txt", "old line\n");
    let first = f
        .store
        .commit("one")
        .await
        .expect("commit")
        .expect("checkpoint");
    write(root, "a.txt", "new line\n");
    let second = f
        .store
        .commit("two")
        .await
        .expect("commit")
        .expect("checkpoint");
    write(root, "b.txt", "uncommitted\n");

    let between = f
        .store
        .diff(&first.id, Some(&second.id))
        .await
        .expect("diff");
    assert!(
        between.contains("-old line") && between.contains("+new line"),
        "{between}"
    );
    assert!(!between.contains("b.txt"));
    let to_present = f.store.diff(&second.id, None).await.expect("diff");
    assert!(to_present.contains("+uncommitted"), "{to_present}");
    assert!(!to_present.contains("a.txt"));
}

#[tokio::test]
async fn ids_resolve_by_prefix_and_unknown_ids_are_clear_errors() {
    let f = fixture(CheckpointConfig::default());
    write(f.work.path(), "a.txt", "a");
    assert!(
        matches!(
            f.store.resolve("abcd").await,
            Err(CheckpointError::UnknownCheckpoint { .. })
        ),
        "no shadow repository yet"
    );
    let first = f
        .store
        .commit("one")
        .await
        .expect("commit")
        .expect("checkpoint");
    let resolved = f
        .store
        .resolve(first.id.short())
        .await
        .expect("prefix resolves");
    assert_eq!(resolved, first.id);
    for bad in ["zzzz", "ab", "HEAD", "--all", "0000000000", "one"] {
        let err = f.store.resolve(bad).await.expect_err(bad);
        assert!(
            matches!(err, CheckpointError::UnknownCheckpoint { .. }),
            "{bad}: {err}"
        );
        assert!(err.to_string().contains("kaji checkpoints list"), "{err}");
    }
    // A tree id is an object of the shadow, but not a checkpoint.
    let tree = Command::new("git")
        .arg(format!("--git-dir={}", f.store.git_dir().display()))
        .args(["rev-parse", &format!("{}^{{tree}}", first.id)])
        .output()
        .expect("git");
    let tree = String::from_utf8_lossy(&tree.stdout).trim().to_string();
    assert!(f.store.resolve(&tree).await.is_err());
}

#[tokio::test]
async fn a_missing_directory_is_a_clear_error() {
    let home = tempfile::tempdir().expect("home");
    let err =
        CheckpointStore::open(home.path(), &home.path().join("nope")).expect_err("missing dir");
    assert!(err.to_string().contains("nope"), "{err}");
}

#[tokio::test]
async fn two_stores_on_one_directory_take_turns() {
    let f = fixture(CheckpointConfig::default());
    let other = CheckpointStore::open(f._home.path(), f.work.path()).expect("open");
    write(f.work.path(), "a.txt", "a");
    write(f.work.path(), "b.txt", "b");
    let (x, y) = tokio::join!(f.store.commit("x"), other.commit("y"));
    let made = [x.expect("x"), y.expect("y")]
        .iter()
        .filter(|c| c.is_some())
        .count();
    assert_eq!(made, 1, "the second sees nothing new");
    assert_eq!(f.store.list().await.expect("list").len(), 1);
}

#[tokio::test]
async fn a_kaji_home_inside_the_directory_is_not_checkpointed() {
    let work = tempfile::tempdir().expect("work");
    let home = work.path().join("my [kaji] home");
    let store = CheckpointStore::open(&home, work.path()).expect("open");
    write(work.path(), "a.txt", "a\n");
    let first = store
        .commit("one")
        .await
        .expect("commit")
        .expect("checkpoint");
    assert!(
        store.commit("two").await.expect("commit").is_none(),
        "the shadow's own objects are not a change"
    );
    write(work.path(), "b.txt", "b\n");
    store
        .commit("three")
        .await
        .expect("commit")
        .expect("checkpoint");
    store.restore(&first.id).await.expect("restore");
    assert!(
        store.git_dir().join("HEAD").is_file(),
        "the shadow survives a restore"
    );
    assert_eq!(
        store.list().await.expect("list").len(),
        3,
        "one, three, restored"
    );
}

/// The big file and the ignored file a restore overwrites are saved in its
/// "before" checkpoint, and the undo brings the directory back byte for
/// byte.
#[tokio::test]
async fn restore_over_an_oversized_and_an_ignored_file_is_undone_byte_for_byte() {
    let f = fixture(CheckpointConfig {
        max_file_size: 1000,
        ..CheckpointConfig::default()
    });
    let root = f.work.path();
    write(root, "grows.txt", "small for now\n");
    write(root, "build.txt", "checkpointed build\n");
    write(root, "keep.txt", "keep\n");
    let first = f
        .store
        .commit("start")
        .await
        .expect("commit")
        .expect("checkpoint");

    // grows.txt grows past the limit; build.txt is deleted, then made
    // again as an ignored file.
    write(root, "grows.txt", &"x".repeat(5000));
    std::fs::remove_file(root.join("build.txt")).expect("rm");
    write(root, ".gitignore", "build.txt\n");
    f.store
        .commit("turn 1")
        .await
        .expect("commit")
        .expect("checkpoint");
    write(root, "build.txt", "ignored, made after the checkpoint\n");
    let before_restore = snapshot(root, false);

    let outcome = f.store.restore(&first.id).await.expect("restore");
    assert_eq!(
        std::fs::read_to_string(root.join("grows.txt")).expect("read"),
        "small for now\n"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("build.txt")).expect("read"),
        "checkpointed build\n"
    );
    assert!(!root.join(".gitignore").exists());

    f.store.restore(&outcome.before).await.expect("undo");
    assert_eq!(
        snapshot(root, false),
        before_restore,
        "the undo brings back the big and the ignored file"
    );

    // Afterwards both are left out of checkpoints again.
    write(root, "keep.txt", "changed\n");
    let next = f
        .store
        .commit("turn 2")
        .await
        .expect("commit")
        .expect("checkpoint");
    let diff = f.store.diff(&first.id, Some(&next.id)).await.expect("diff");
    assert!(
        !diff.contains("xxxx") && !diff.contains("ignored, made"),
        "{diff}"
    );
}

/// An ignored file where the checkpoint has a directory, and an ignored
/// directory where it has a file: both in the way, both saved.
#[tokio::test]
async fn restore_saves_ignored_files_in_the_way_of_the_target() {
    let f = fixture(CheckpointConfig::default());
    let root = f.work.path();
    write(root, "out/a.txt", "a\n");
    write(root, "cache", "cache file\n");
    let first = f
        .store
        .commit("start")
        .await
        .expect("commit")
        .expect("checkpoint");
    std::fs::remove_dir_all(root.join("out")).expect("rm out");
    std::fs::remove_file(root.join("cache")).expect("rm cache");
    write(root, ".gitignore", "/out\n/cache/\n");
    f.store
        .commit("turn 1")
        .await
        .expect("commit")
        .expect("checkpoint");
    write(root, "out", "an ignored file named out\n");
    write(root, "cache/deep/blob.bin", "ignored cache\n");
    let before_restore = snapshot(root, false);

    let outcome = f.store.restore(&first.id).await.expect("restore");
    assert_eq!(
        std::fs::read_to_string(root.join("out/a.txt")).expect("read"),
        "a\n"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("cache")).expect("read"),
        "cache file\n"
    );
    f.store.restore(&outcome.before).await.expect("undo");
    assert_eq!(snapshot(root, false), before_restore);
}

/// What cannot be saved (a FIFO where the checkpoint has a file) makes the
/// restore refuse, naming it, with nothing changed.
#[cfg(unix)]
#[tokio::test]
async fn restore_refuses_to_replace_what_it_cannot_save() {
    let f = fixture(CheckpointConfig::default());
    let root = f.work.path();
    write(root, "pipe", "a file once\n");
    write(root, "other.txt", "first\n");
    let first = f
        .store
        .commit("start")
        .await
        .expect("commit")
        .expect("checkpoint");
    std::fs::remove_file(root.join("pipe")).expect("rm");
    write(root, "other.txt", "second\n");
    f.store
        .commit("turn 1")
        .await
        .expect("commit")
        .expect("checkpoint");
    kaji_test_support::fixtures::mkfifo(&root.join("pipe"));

    let err = f
        .store
        .restore(&first.id)
        .await
        .expect_err("a FIFO cannot be saved");
    match &err {
        CheckpointError::RestoreWouldLose { paths, .. } => {
            assert_eq!(paths.len(), 1, "{err}");
            assert_eq!(paths[0].path, "pipe", "{err}");
            assert!(paths[0].reason.contains("FIFO"), "{err}");
        }
        other => panic!("expected RestoreWouldLose, got {other}"),
    }
    assert!(err.to_string().contains("nothing was changed"), "{err}");
    assert_eq!(
        std::fs::read_to_string(root.join("other.txt")).expect("read"),
        "second\n",
        "nothing changed"
    );
    use std::os::unix::fs::FileTypeExt;
    assert!(
        std::fs::symlink_metadata(root.join("pipe"))
            .expect("stat")
            .file_type()
            .is_fifo()
    );
}

/// Waits until `path` exists (a condition, not a time): at most `limit`
/// checks of the file system, with short pauses between them.
async fn wait_for_file(path: &Path) {
    for _ in 0..6000 {
        if path.exists() {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("{} never appeared", path.display());
}

/// A real git holding the shadow's index.lock keeps it (checkpoints say
/// who holds it); once that git is killed with SIGKILL, the lock it left
/// is removed and checkpoints work again.
#[tokio::test]
async fn an_index_lock_left_by_a_killed_git_is_removed() {
    let f = fixture(CheckpointConfig::default());
    let root = f.work.path();
    write(root, "a.txt", "a\n");
    f.store.init().await.expect("init");
    let git_dir = f.store.git_dir().to_path_buf();
    let lock = git_dir.join("index.lock");
    // update-index takes index.lock, then waits for paths on stdin.
    let mut git = tokio::process::Command::new("git")
        .arg(format!("--git-dir={}", git_dir.display()))
        .arg(format!("--work-tree={}", root.display()))
        .args(["update-index", "--add", "-z", "--stdin"])
        .stdin(std::process::Stdio::piped())
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .kill_on_drop(true)
        .spawn()
        .expect("git starts");
    wait_for_file(&lock).await;

    let err = f.store.commit("while git runs").await.expect_err("busy");
    let pid = git.id().and_then(|p| i32::try_from(p).ok());
    assert!(
        matches!(&err, CheckpointError::ShadowBusy { pid: busy, .. } if *busy == pid),
        "{err}"
    );
    assert!(lock.exists(), "a live owner's lock stays");

    git.start_kill().expect("SIGKILL");
    let status = git.wait().await.expect("wait");
    assert!(!status.success());
    assert!(lock.exists(), "a killed git leaves its lock behind");

    f.store
        .commit("after the kill")
        .await
        .expect("checkpoints work again")
        .expect("checkpoint");
    assert!(!lock.exists());
}

/// Lock files nobody owns (index, branch) do not disable checkpoints.
#[tokio::test]
async fn planted_lock_files_with_no_owner_are_removed() {
    let f = fixture(CheckpointConfig::default());
    write(f.work.path(), "a.txt", "a\n");
    let first = f
        .store
        .commit("one")
        .await
        .expect("commit")
        .expect("checkpoint");
    let git_dir = f.store.git_dir();
    std::fs::write(git_dir.join("index.lock"), "").expect("plant");
    std::fs::write(git_dir.join("refs/heads/checkpoints.lock"), "").expect("plant");
    write(f.work.path(), "a.txt", "b\n");
    let second = f
        .store
        .commit("two")
        .await
        .expect("commit despite the locks")
        .expect("checkpoint");
    assert_ne!(first.id, second.id);
    f.store.restore(&first.id).await.expect("restore");
    assert!(!git_dir.join("index.lock").exists());
}

/// A file git cannot read is left out with a note; the rest is
/// checkpointed. A FIFO where a tracked file was fails git as root too.
#[cfg(unix)]
#[tokio::test]
async fn unreadable_files_are_skipped_with_a_note() {
    let f = fixture(CheckpointConfig::default());
    let root = f.work.path();
    write(root, "data", "tracked\n");
    write(root, "a.txt", "a\n");
    let first = f
        .store
        .commit("one")
        .await
        .expect("commit")
        .expect("checkpoint");
    assert!(first.skipped.is_empty());
    std::fs::remove_file(root.join("data")).expect("rm");
    kaji_test_support::fixtures::mkfifo(&root.join("data"));
    write(root, "a.txt", "changed\n");
    let second = f
        .store
        .commit("two")
        .await
        .expect("the FIFO does not fail the checkpoint")
        .expect("checkpoint");
    assert_eq!(second.skipped.len(), 1, "{:?}", second.skipped);
    assert_eq!(second.skipped[0].path, "data");
    assert!(second.skipped[0].reason.contains("FIFO"));
    let listed = f.store.list().await.expect("list");
    assert_eq!(listed[0].skipped, second.skipped, "the note is kept");
    let diff = f
        .store
        .diff(&first.id, Some(&second.id))
        .await
        .expect("diff");
    assert!(diff.contains("+changed"), "{diff}");
}

/// As a normal user, a file without read permission is skipped (root
/// reads every file, so this case is skipped there; the FIFO case above
/// covers root).
#[cfg(unix)]
#[tokio::test]
async fn a_file_without_read_permission_is_skipped_with_a_note() {
    use std::os::unix::fs::PermissionsExt;
    let f = fixture(CheckpointConfig::default());
    let root = f.work.path();
    write(root, "secret", "no\n");
    std::fs::set_permissions(root.join("secret"), std::fs::Permissions::from_mode(0o000))
        .expect("chmod");
    if std::fs::File::open(root.join("secret")).is_ok() {
        eprintln!("skipped: running as root, which reads files without read permission");
        return;
    }
    write(root, "a.txt", "a\n");
    let first = f
        .store
        .commit("one")
        .await
        .expect("commit")
        .expect("checkpoint");
    assert_eq!(first.skipped.len(), 1);
    assert_eq!(first.skipped[0].path, "secret");
    assert!(
        first.skipped[0].reason.contains("ermission"),
        "{:?}",
        first.skipped
    );
}

/// The time limit stops a checkpoint that cannot go on (here: another
/// process holds the shadow's lock) with a distinct error.
#[tokio::test]
async fn commit_within_gives_up_after_its_timeout() {
    let f = fixture(CheckpointConfig::default());
    write(f.work.path(), "a.txt", "a\n");
    f.store.init().await.expect("init");
    let held = std::fs::File::options()
        .write(true)
        .open(f.store.git_dir().join("kaji.lock"))
        .expect("open lock");
    held.lock().expect("hold the lock");
    let err = f
        .store
        .commit_within("task start", std::time::Duration::from_millis(50))
        .await
        .expect_err("times out");
    assert!(
        matches!(err, CheckpointError::Timeout { after } if after.as_millis() == 50),
        "{err}"
    );
    drop(held);
    f.store
        .commit_within("task start", std::time::Duration::from_secs(600))
        .await
        .expect("within the limit")
        .expect("checkpoint");
}

/// Cancelling a checkpoint while git holds index.lock kills git's whole
/// process group and leaves no lock file and no process behind.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_cancelled_checkpoint_kills_git_and_leaves_no_lock() {
    let bin = tempfile::tempdir().expect("bin");
    let wrapper = bin.path().join("slow-git");
    // Runs the real git; update-index gets its paths, then a stdin that
    // never ends, so git holds index.lock until killed.
    std::fs::write(
        &wrapper,
        "#!/bin/sh\ncase \" $* \" in\n  *\" update-index \"*) { cat; exec sleep 100000; } | git \"$@\" ;;\n  *) exec git \"$@\" ;;\nesac\n",
    )
    .expect("write wrapper");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let f = fixture(CheckpointConfig {
        git_program: wrapper,
        ..CheckpointConfig::default()
    });
    write(f.work.path(), "a.txt", "a\n");
    let lock = f.store.git_dir().join("index.lock");
    let cancel = CancellationToken::new();
    let store = f.store.clone();
    let token = cancel.clone();
    let commit = tokio::spawn(async move { store.commit_cancellable("task start", &token).await });
    wait_for_file(&lock).await;
    cancel.cancel();
    let result = commit.await.expect("joined");
    assert!(
        matches!(result, Err(CheckpointError::Cancelled)),
        "{result:?}"
    );
    assert!(!lock.exists(), "no index.lock left behind");
    let shadow_arg = format!("--git-dir={}", f.store.git_dir().display());
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        assert!(
            !cmdline
                .split(|&b| b == 0)
                .any(|a| a == shadow_arg.as_bytes()),
            "a git of the shadow still runs: {}",
            String::from_utf8_lossy(&cmdline)
        );
    }
}
