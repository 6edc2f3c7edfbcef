//! A checkpoint costs what changed, through the real binary: an Edit
//! stages only the file it wrote, a command the approval analysis classes
//! read-only takes no checkpoint, any other command still checkpoints the
//! whole directory.
//!
//! Something else changes a file behind the tool's back (a PreToolUse
//! hook, run after the initial checkpoint), so what each checkpoint staged
//! shows in its contents, never in its timing.

use std::path::Path;

use kaji_core::checkpoints::{Checkpoint, CheckpointStore};
use kaji_test_support::{ScriptedModelServer, Turn};
use serde_json::json;

use crate::common::{Wire, done, kaji, model, serve};

/// A hook that rewrites `b.txt` when the call's input holds `MARK`.
fn write_hook(home: &Path, work: &Path) {
    let script = home.join("behind.sh");
    std::fs::write(
        &script,
        format!(
            "input=$(cat)\ncase \"$input\" in *MARK*) echo changed-behind > '{}' ;; esac\n",
            work.join("b.txt").display()
        ),
    )
    .unwrap();
    std::fs::write(
        home.join("kaji-home/config.toml"),
        format!(
            "[[hooks.PreToolUse]]\nmatcher = \"Edit|Bash\"\ncommand = \"sh '{}'\"\n",
            script.display()
        ),
    )
    .unwrap();
}

async fn exec(home: &Path, work: &Path, server: &ScriptedModelServer) {
    exec_url(home, work, &server.anthropic_base_url()).await;
}

async fn exec_url(home: &Path, work: &Path, base_url: &str) {
    let mut cmd = kaji(home);
    // A held-back initial checkpoint must not hit its time limit.
    cmd.env("KAJI_CHECKPOINT_TIMEOUT_MS", "600000").args([
        "exec",
        "--json",
        "--permission-mode",
        "yolo",
        "--sandbox",
        "off",
    ]);
    model(&mut cmd, Wire::Anthropic, base_url);
    let out = cmd.arg("-C").arg(work).arg("go").output().await.unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs `kaji exec` in the background, for a test that acts while it runs.
fn spawn_exec(
    home: &Path,
    work: &Path,
    server: &ScriptedModelServer,
) -> tokio::task::JoinHandle<()> {
    let (home, work) = (home.to_path_buf(), work.to_path_buf());
    let server_url = server.anthropic_base_url();
    tokio::spawn(async move { exec_url(&home, &work, &server_url).await })
}

/// Takes the shadow's lock as another kaji would: no checkpoint of the
/// directory can be written until the returned file is dropped.
fn hold_shadow_lock(store: &CheckpointStore) -> std::fs::File {
    std::fs::create_dir_all(store.git_dir()).unwrap();
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(store.git_dir().join("kaji.lock"))
        .unwrap();
    lock.lock().unwrap();
    lock
}

fn setup() -> (tempfile::TempDir, tempfile::TempDir) {
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join("kaji-home")).unwrap();
    let work = tempfile::tempdir().unwrap();
    std::fs::write(work.path().join("a.txt"), "alpha\n").unwrap();
    std::fs::write(work.path().join("b.txt"), "beta\n").unwrap();
    write_hook(home.path(), work.path());
    (home, work)
}

/// The checkpoints, oldest first.
async fn checkpoints(store: &CheckpointStore) -> Vec<Checkpoint> {
    let mut list = store.list().await.unwrap();
    list.reverse();
    list
}

/// The paths of a unified diff's `+++ b/…` lines.
fn changed_paths(diff: &str) -> Vec<&str> {
    diff.lines()
        .filter_map(|l| l.strip_prefix("+++ b/"))
        .collect()
}

#[tokio::test]
async fn an_edit_checkpoint_stages_only_the_file_it_wrote() {
    let (home, work) = setup();
    let server = serve([
        // A write waits for the initial checkpoint: after it, the hook's
        // change is one the task-start checkpoint does not hold.
        Turn::tool_call("Bash", json!({"command": "touch c.txt"})),
        Turn::tool_call(
            "Edit",
            json!({"file_path": "a.txt", "old_string": "alpha", "new_string": "ALPHA MARK"}),
        ),
        done("done"),
    ])
    .await;
    exec(home.path(), work.path(), &server).await;

    let store = CheckpointStore::open(&home.path().join("kaji-home"), work.path()).unwrap();
    let list = checkpoints(&store).await;
    let labels: Vec<&str> = list.iter().map(|c| c.label.as_str()).collect();
    assert_eq!(
        labels,
        ["task start: go", "turn 1: Bash", "turn 2: Edit"],
        "{list:?}"
    );
    let diff = store.diff(&list[1].id, Some(&list[2].id)).await.unwrap();
    assert_eq!(changed_paths(&diff), ["a.txt"], "{diff}");
    // The change made behind the Edit's back is not lost: the next
    // checkpoint of the whole directory holds it.
    let present = store.diff(&list[2].id, None).await.unwrap();
    assert_eq!(changed_paths(&present), ["b.txt"], "{present}");
}

#[tokio::test]
async fn a_read_only_command_takes_no_checkpoint_and_others_do() {
    let (home, work) = setup();
    let server = serve([
        Turn::tool_call("Bash", json!({"command": "touch c.txt"})),
        Turn::tool_call("Bash", json!({"command": "echo MARK"})),
        Turn::tool_call("Bash", json!({"command": "rm a.txt && mv c.txt d.txt"})),
        done("done"),
    ])
    .await;
    exec(home.path(), work.path(), &server).await;

    let store = CheckpointStore::open(&home.path().join("kaji-home"), work.path()).unwrap();
    let list = checkpoints(&store).await;
    let labels: Vec<&str> = list.iter().map(|c| c.label.as_str()).collect();
    // `echo MARK` changed nothing itself: no "turn 2: Bash", although its
    // hook rewrote b.txt.
    assert_eq!(
        labels,
        ["task start: go", "turn 1: Bash", "turn 3: Bash"],
        "{list:?}"
    );
    let diff = store.diff(&list[1].id, Some(&list[2].id)).await.unwrap();
    assert!(
        diff.contains("deleted file mode") && diff.contains("a.txt"),
        "{diff}"
    );
    assert!(
        diff.contains("d.txt") && diff.contains("+changed-behind"),
        "{diff}"
    );

    // Restoring the task start brings the directory back exactly.
    store.restore(&list[0].id).await.unwrap();
    let mut names: Vec<String> = std::fs::read_dir(work.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["a.txt", "b.txt"]);
    assert_eq!(
        std::fs::read_to_string(work.path().join("b.txt")).unwrap(),
        "beta\n"
    );
}

/// A write does not wait for a slow initial checkpoint: it saves the file
/// as it was and goes ahead, and "task start" still holds the file as the
/// task found it. The initial checkpoint is held back by taking the
/// shadow's lock; a PostToolUse hook says (through a FIFO) when the Edit
/// has run, and only then is the lock let go.
#[tokio::test]
async fn a_write_does_not_wait_for_a_slow_initial_checkpoint() {
    let (home, work) = setup();
    let fifo = home.path().join("edited.fifo");
    kaji_test_support::fixtures::mkfifo(&fifo);
    std::fs::write(
        home.path().join("kaji-home/config.toml"),
        format!(
            "[[hooks.PostToolUse]]\nmatcher = \"Edit\"\ncommand = \"echo edited > '{}'\"\n",
            fifo.display()
        ),
    )
    .unwrap();
    let store = CheckpointStore::open(&home.path().join("kaji-home"), work.path()).unwrap();
    let lock = hold_shadow_lock(&store);

    let server = serve([
        Turn::tool_call(
            "Edit",
            json!({"file_path": "a.txt", "old_string": "alpha", "new_string": "ALPHA"}),
        ),
        done("done"),
    ])
    .await;
    let run = spawn_exec(home.path(), work.path(), &server);
    let reader = tokio::task::spawn_blocking(move || std::fs::read_to_string(fifo));
    // Only a broken build waits here for long: the Edit never runs while
    // the initial checkpoint holds it back.
    let heard = tokio::time::timeout(std::time::Duration::from_secs(120), reader)
        .await
        .expect("the Edit ran while the initial checkpoint was still waiting")
        .unwrap()
        .unwrap();
    assert_eq!(heard.trim(), "edited");
    assert_eq!(
        std::fs::read_to_string(work.path().join("a.txt")).unwrap(),
        "ALPHA\n"
    );
    drop(lock);
    run.await.unwrap();

    let list = checkpoints(&store).await;
    let labels: Vec<&str> = list.iter().map(|c| c.label.as_str()).collect();
    assert_eq!(labels, ["task start: go", "turn 1: Edit"], "{list:?}");
    let diff = store.diff(&list[0].id, Some(&list[1].id)).await.unwrap();
    assert!(diff.contains("-alpha") && diff.contains("+ALPHA"), "{diff}");
    store.restore(&list[0].id).await.unwrap();
    assert_eq!(
        std::fs::read_to_string(work.path().join("a.txt")).unwrap(),
        "alpha\n"
    );
}

/// An Edit's checkpoint holds back neither its result nor the next command:
/// it is written from the file as the Edit left it, while a command already
/// changes that file. The checkpoint is held back by the shadow's lock,
/// taken by this test once the Edit has run (a PostToolUse hook says so
/// through one FIFO and waits on another); the command says through a third
/// FIFO that it ran. The command's checkpoint and the task's end wait for
/// the Edit's, which holds the Edit, not the command's change.
#[tokio::test]
async fn an_edits_checkpoint_holds_back_neither_the_next_request_nor_the_next_command() {
    let (home, work) = setup();
    let fifo = |name: &str| {
        let path = home.path().join(name);
        kaji_test_support::fixtures::mkfifo(&path);
        path
    };
    let (edited, go_on, ran) = (fifo("edited.fifo"), fifo("go-on.fifo"), fifo("ran.fifo"));
    std::fs::write(
        home.path().join("kaji-home/config.toml"),
        format!(
            "[[hooks.PostToolUse]]\nmatcher = \"Edit\"\ncommand = \"echo edited > '{}'; cat '{}' > /dev/null\"\n",
            edited.display(),
            go_on.display()
        ),
    )
    .unwrap();
    let store = CheckpointStore::open(&home.path().join("kaji-home"), work.path()).unwrap();
    let server = serve([
        Turn::tool_call(
            "Edit",
            json!({"file_path": "a.txt", "old_string": "alpha", "new_string": "ALPHA"}),
        ),
        Turn::tool_call(
            "Bash",
            json!({"command": format!("echo changed > a.txt && echo ran > '{}'", ran.display())}),
        ),
        done("done"),
    ])
    .await;
    let run = spawn_exec(home.path(), work.path(), &server);
    let read = |path: std::path::PathBuf| {
        tokio::task::spawn_blocking(move || std::fs::read_to_string(path))
    };
    assert_eq!(read(edited).await.unwrap().unwrap().trim(), "edited");
    // The initial checkpoint is done (the Edit waited for it): from now
    // on no checkpoint can be written until the lock is let go.
    let lock = hold_shadow_lock(&store);
    tokio::task::spawn_blocking(move || std::fs::write(go_on, "go\n"))
        .await
        .unwrap()
        .unwrap();
    // Only a broken build waits here for long: the Edit's result, or the
    // command, waits for a checkpoint that cannot be written.
    let heard = tokio::time::timeout(std::time::Duration::from_secs(120), read(ran))
        .await
        .expect("the command after the Edit ran while the Edit's checkpoint was held back");
    assert_eq!(heard.unwrap().unwrap().trim(), "ran");
    assert_eq!(server.requests().len(), 2);
    drop(lock);
    run.await.unwrap();

    let list = checkpoints(&store).await;
    let labels: Vec<&str> = list.iter().map(|c| c.label.as_str()).collect();
    assert_eq!(
        labels,
        ["task start: go", "turn 1: Edit", "turn 2: Bash"],
        "{list:?}"
    );
    let diff = store.diff(&list[0].id, Some(&list[1].id)).await.unwrap();
    assert!(diff.contains("-alpha") && diff.contains("+ALPHA"), "{diff}");
    let diff = store.diff(&list[1].id, Some(&list[2].id)).await.unwrap();
    assert!(
        diff.contains("-ALPHA") && diff.contains("+changed"),
        "{diff}"
    );
}
