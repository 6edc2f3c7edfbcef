//! Checkpoint tests through the real binary: what git was asked, seen
//! through a `git` earlier on `PATH` that logs its arguments and runs the
//! real one, and the checkpoints a run left. Never more than the shadow
//! repository's own commands are looked at.

use std::path::{Path, PathBuf};

use kaji_core::checkpoints::{Checkpoint, CheckpointStore};
use kaji_test_support::ScriptedModelServer;
use tokio::process::Command;

use super::Wire;
use super::exec::exec_json;

/// The real git on `PATH`.
pub fn real_git() -> PathBuf {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join("git"))
        .find(|p| p.is_file())
        .expect("git on PATH")
}

/// A directory holding a `git` that appends its arguments to `log`.
pub fn logging_git(home: &Path, log: &Path) -> PathBuf {
    let bin = home.join("bin");
    std::fs::create_dir_all(&bin).expect("mkdir");
    let script = bin.join("git");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nprintf '%s\\n' \"$*\" >> '{}'\nexec '{}' \"$@\"\n",
            log.display(),
            real_git().display()
        ),
    )
    .expect("write");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    bin
}

/// `kaji exec --json` (Anthropic wire, yolo, no sandbox, the prompt `go`)
/// whose git logs its arguments to `home/git.log` (returned), with a
/// checkpoint limit no test reaches.
pub fn exec_logging_git(
    home: &Path,
    work: &Path,
    server: &ScriptedModelServer,
) -> (Command, PathBuf) {
    let log = home.join("git.log");
    let bin = logging_git(home, &log);
    let mut cmd = exec_json(home, work, server, Wire::Anthropic);
    let path = std::env::join_paths(std::iter::once(bin).chain(std::env::split_paths(
        &std::env::var_os("PATH").expect("PATH"),
    )))
    .expect("PATH");
    cmd.env("PATH", path)
        .env("KAJI_CHECKPOINT_TIMEOUT_MS", "600000")
        .args(["--permission-mode", "yolo", "--sandbox", "off", "go"]);
    (cmd, log)
}

/// The checkpoints of `store`, oldest first.
pub async fn oldest_first(store: &CheckpointStore) -> Vec<Checkpoint> {
    let mut list = store.list().await.expect("list");
    list.reverse();
    list
}
