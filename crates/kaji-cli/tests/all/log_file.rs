//! The log of the libraries' warnings, through the binary: a warning
//! (`KAJI_HOOK_TIMEOUT_MS` that is not a number, read as the settings are
//! loaded) lands in `$KAJI_HOME/logs/kaji.log` and never on the terminal;
//! `KAJI_LOG` sets the level (`off`, `error`: no line for it); a log that
//! cannot be opened does not stop kaji (docs/configuration.md, "Log").

use std::path::Path;

use kaji_test_support::ScriptedModelServer;

use crate::common::{Wire, done, exec_json, run, serve};

/// A user setting with a hook without a timeout: its default timeout is
/// read from `KAJI_HOOK_TIMEOUT_MS` when the settings are loaded.
fn hook_setting(home: &Path) {
    let dir = home.join("kaji-home");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("config.toml"),
        "[[hooks.PreToolUse]]\nmatcher = \"Bash\"\ncommand = \"true\"\n",
    )
    .unwrap();
}

/// Runs one task with `KAJI_HOOK_TIMEOUT_MS=soon` and `KAJI_LOG=level`
/// (unset for `None`): stdout and stderr together.
async fn warn_once(home: &Path, level: Option<&str>, server: &ScriptedModelServer) -> String {
    let work = tempfile::tempdir().unwrap();
    let mut cmd = exec_json(home, work.path(), server, Wire::Anthropic);
    cmd.env("KAJI_HOOK_TIMEOUT_MS", "soon");
    if let Some(level) = level {
        cmd.env("KAJI_LOG", level);
    }
    cmd.args(["--no-checkpoints", "--yolo", "finish"]);
    let (code, lines, stderr) = run(cmd).await;
    assert_eq!(code, 0, "{stderr}\n{lines:#?}");
    format!("{lines:?}\n{stderr}")
}

fn log_path(home: &Path) -> std::path::PathBuf {
    home.join("kaji-home/logs/kaji.log")
}

#[tokio::test]
async fn a_warning_lands_in_the_log_file_and_not_on_the_terminal() {
    let home = tempfile::tempdir().unwrap();
    hook_setting(home.path());
    let server = serve([done("Done.")]).await;
    let terminal = warn_once(home.path(), None, &server).await;
    assert!(!terminal.contains("KAJI_HOOK_TIMEOUT_MS"), "{terminal}");
    let log = std::fs::read_to_string(log_path(home.path())).expect("the log file");
    let line = log
        .lines()
        .find(|l| l.contains("KAJI_HOOK_TIMEOUT_MS=\"soon\" is not a number"))
        .unwrap_or_else(|| panic!("no warning in {log}"));
    assert!(line.contains(" WARN kaji_core::env: "), "{line}");
}

#[tokio::test]
async fn kaji_log_sets_the_level() {
    for level in ["off", "error"] {
        let home = tempfile::tempdir().unwrap();
        hook_setting(home.path());
        let server = serve([done("Done.")]).await;
        warn_once(home.path(), Some(level), &server).await;
        let log = std::fs::read_to_string(log_path(home.path())).unwrap_or_default();
        assert!(!log.contains("KAJI_HOOK_TIMEOUT_MS"), "{level}: {log}");
    }
}

#[tokio::test]
async fn a_log_that_cannot_be_opened_does_not_stop_kaji() {
    let home = tempfile::tempdir().unwrap();
    hook_setting(home.path());
    // A file where the log's directory should be.
    std::fs::write(home.path().join("kaji-home/logs"), "").unwrap();
    let server = serve([done("Done.")]).await;
    let terminal = warn_once(home.path(), None, &server).await;
    assert!(!terminal.contains("KAJI_HOOK_TIMEOUT_MS"), "{terminal}");
}
