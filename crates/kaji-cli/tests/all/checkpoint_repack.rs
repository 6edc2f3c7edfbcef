//! The copy of the objects a new shadow borrowed from the user's checkout
//! finishes even when every session is short, through the real binary: it
//! runs detached and outlives the session that started it, a session
//! that starts while it runs does not start a second one, the next
//! session completes it, and a copy that was killed leaves the shadow
//! usable and is started again.
//!
//! What git was asked is seen through a `git` earlier on `PATH` that logs
//! its arguments; its `repack` can be held (while a file exists) or
//! killed. Waiting for the copy is waiting for its lock, never a clock.

use std::path::{Path, PathBuf};

use kaji_core::checkpoints::CheckpointStore;
use kaji_test_support::{Script, ScriptedModelServer, Turn};
use serde_json::json;

use crate::common::checkpoints::{oldest_first, real_git};
use crate::common::{Wire, exec_json, run};

/// A `git` that appends its arguments to `log`, then runs the real one;
/// after a `repack` has run it waits while `<home>/hold` exists, then
/// kills itself when `<home>/kill` exists (so the copy is done but never
/// said to be).
fn controlled_git(home: &Path, log: &Path) -> PathBuf {
    let bin = home.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let script = bin.join("git");
    let (hold, kill) = (home.join("hold"), home.join("kill"));
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nprintf '%s\\n' \"$*\" >> '{log}'\ncase \" $* \" in *' repack '*)\n  \
             '{real}' \"$@\"; status=$?\n  \
             while [ -e '{hold}' ]; do sleep 0.01; done\n  \
             if [ -e '{kill}' ]; then kill -9 $$; fi\n  exit $status ;;\nesac\n\
             exec '{real}' \"$@\"\n",
            log = log.display(),
            hold = hold.display(),
            kill = kill.display(),
            real = real_git().display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    bin
}

/// A committed checkout: its shadow borrows its objects. `old` is a blob
/// of its history only.
fn checkout(work: &Path) {
    use kaji_test_support::fixtures::git;
    git(work, &["init", "-q", "-b", "main"]);
    std::fs::write(work.join("a.txt"), "old\n").unwrap();
    git(work, &["add", "."]);
    git(work, &["commit", "-q", "-m", "zero"]);
    std::fs::write(work.join("a.txt"), "alpha\n").unwrap();
    std::fs::write(work.join("b.txt"), "bravo\n").unwrap();
    git(work, &["add", "."]);
    git(work, &["commit", "-q", "-m", "one"]);
}

struct Setup {
    home: tempfile::TempDir,
    work: tempfile::TempDir,
    log: PathBuf,
    bin: PathBuf,
}

impl Setup {
    fn new() -> Self {
        let home = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(home.path().join("kaji-home")).unwrap();
        let work = tempfile::tempdir().unwrap();
        checkout(work.path());
        let log = home.path().join("git.log");
        let bin = controlled_git(home.path(), &log);
        Self {
            home,
            work,
            log,
            bin,
        }
    }

    /// One session whose task writes `a.txt` (so it waits for the task's
    /// initial checkpoint, and with it for the start of the copy).
    async fn session(&self, text: &str) {
        let server = ScriptedModelServer::start(Script::new([
            Turn::tool_call(
                "Write",
                json!({"file_path": "a.txt", "content": format!("{text}\n")}),
            ),
            Turn::tool_call("AttemptCompletion", json!({"result": "done"})),
        ]))
        .await;
        let mut cmd = exec_json(self.home.path(), self.work.path(), &server, Wire::Anthropic);
        let path = std::env::join_paths(
            std::iter::once(self.bin.clone())
                .chain(std::env::split_paths(&std::env::var_os("PATH").unwrap())),
        )
        .unwrap();
        cmd.env("PATH", path)
            .env("KAJI_CHECKPOINT_TIMEOUT_MS", "600000")
            .args(["--permission-mode", "yolo", "--sandbox", "off", "go"]);
        let (code, _, stderr) = run(cmd).await;
        assert_eq!(code, 0, "{stderr}");
    }

    fn store(&self) -> CheckpointStore {
        CheckpointStore::open(&self.home.path().join("kaji-home"), self.work.path()).unwrap()
    }

    fn shadow(&self, name: &str) -> PathBuf {
        self.store().git_dir().join(name)
    }

    /// Waits until no copy holds the shadow's borrow lock.
    async fn copy_ended(&self) {
        let lock = self.shadow("kaji-borrow.lock");
        tokio::task::spawn_blocking(move || {
            let file = std::fs::File::options().write(true).open(&lock).unwrap();
            file.lock().unwrap();
        })
        .await
        .unwrap();
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The log's `repack` lines: full copies, and completions that keep
    /// the packs a copy made.
    fn repacks(&self) -> (usize, usize) {
        let log = self.log();
        let repacks: Vec<&str> = log.lines().filter(|l| l.contains(" repack ")).collect();
        let keeping = repacks
            .iter()
            .filter(|l| l.contains("--keep-pack="))
            .count();
        (repacks.len() - keeping, keeping)
    }
}

#[tokio::test]
async fn the_copy_outlives_its_session_runs_once_and_the_next_session_completes_it() {
    let s = Setup::new();
    std::fs::write(s.home.path().join("hold"), "").unwrap();
    s.session("one").await;
    assert!(s.shadow("objects/info/alternates").is_file());
    // The copy is still held: a second session does not start another.
    // Its checkpoint uses a blob the shadow borrows and the copy (made
    // before) lacks.
    s.session("old").await;
    std::fs::remove_file(s.home.path().join("hold")).unwrap();
    s.copy_ended().await;
    assert_eq!(s.repacks(), (1, 0), "{}", s.log());
    // It finished after its session ended, and said so.
    assert!(s.shadow("kaji-borrow-packed").is_file(), "{}", s.log());
    assert!(s.shadow("objects/info/alternates").is_file());

    // The next session copies only what checkpoints used since, and stops
    // borrowing before its first write.
    s.session("three").await;
    assert_eq!(s.repacks(), (1, 1), "{}", s.log());
    assert!(!s.shadow("objects/info/alternates").exists());
    assert!(!s.shadow("kaji-borrow-packed").exists());
    s.session("four").await;
    assert_eq!(s.repacks(), (1, 1), "{}", s.log());

    // Every checkpoint is whole without the user's objects.
    let store = s.store();
    let list = oldest_first(&store).await;
    let labels: Vec<&str> = list.iter().map(|c| c.label.as_str()).collect();
    // Later sessions start from what the one before left: no new "task
    // start" checkpoint.
    assert_eq!(
        labels,
        [
            "task start: go",
            "turn 1: Write",
            "turn 1: Write",
            "turn 1: Write",
            "turn 1: Write"
        ],
        "{list:?}"
    );
    store.restore(&list[0].id).await.unwrap();
    assert_eq!(
        std::fs::read_to_string(s.work.path().join("a.txt")).unwrap(),
        "alpha\n"
    );
    let objects = s.work.path().join(".git/objects");
    std::fs::rename(&objects, s.work.path().join(".git/objects-gone")).unwrap();
    store.restore(&list[2].id).await.unwrap();
    assert_eq!(
        std::fs::read_to_string(s.work.path().join("a.txt")).unwrap(),
        "old\n"
    );
}

#[tokio::test]
async fn a_killed_copy_leaves_the_shadow_usable_and_is_started_again() {
    let s = Setup::new();
    std::fs::write(s.home.path().join("kill"), "").unwrap();
    s.session("one").await;
    s.copy_ended().await;
    assert_eq!(s.repacks(), (1, 0), "{}", s.log());
    // Killed: still borrowing, nothing claimed.
    assert!(s.shadow("objects/info/alternates").is_file());
    assert!(!s.shadow("kaji-borrow-packed").exists());

    std::fs::remove_file(s.home.path().join("kill")).unwrap();
    s.session("two").await;
    let store = s.store();
    let list = oldest_first(&store).await;
    assert_eq!(list.len(), 3, "{list:?}");
    store.restore(&list[0].id).await.unwrap();
    assert_eq!(
        std::fs::read_to_string(s.work.path().join("a.txt")).unwrap(),
        "alpha\n"
    );
    // The second session started the copy again; the restore completed it.
    assert_eq!(s.repacks().0, 2, "{}", s.log());
    assert!(!s.shadow("objects/info/alternates").exists());
}
