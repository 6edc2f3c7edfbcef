//! `kaji tui` through the real binary in a real terminal (tmux), against
//! the scripted model server: type a prompt, approve a command, accept the
//! result, quit, and check the screen, the file the task wrote and the
//! exit status.
//!
//! Every wait polls the pane until the expected text appears; the overall
//! deadline only guards against a hang and fails the test.

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use kaji_test_support::{Script, ScriptedModelServer, Turn};
use serde_json::json;

const DEADLINE: Duration = Duration::from_secs(20);

/// A private tmux server, killed when the test ends (also on failure).
struct Tmux {
    socket: String,
    home: std::path::PathBuf,
}

impl Tmux {
    fn start(home: &Path) -> Option<Self> {
        let tmux = Self {
            socket: format!("kaji-test-{}", std::process::id()),
            home: home.to_path_buf(),
        };
        // A placeholder pane that waits; the real command is respawned in
        // it once remain-on-exit is on, so the pane stays for inspection.
        let out = tmux.run(&[
            "new-session",
            "-d",
            "-s",
            "main",
            "-x",
            "120",
            "-y",
            "40",
            "sh -c 'read line'",
        ])?;
        assert!(out.status.success(), "tmux new-session: {out:?}");
        let out = tmux.run(&["set-option", "-t", "main", "remain-on-exit", "on"])?;
        assert!(out.status.success(), "tmux set-option: {out:?}");
        Some(tmux)
    }

    fn run(&self, args: &[&str]) -> Option<Output> {
        Command::new("tmux")
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", &self.home)
            .env("KAJI_HOME", self.home.join("kaji-home"))
            .env("ANTHROPIC_API_KEY", "test-key")
            .env("TERM", "xterm-256color")
            .args(["-L", &self.socket, "-f", "/dev/null"])
            .args(args)
            .output()
            .ok()
    }

    fn capture(&self) -> String {
        let out = self
            .run(&["capture-pane", "-p", "-t", "main"])
            .expect("tmux capture-pane");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn send_text(&self, text: &str) {
        let out = self
            .run(&["send-keys", "-t", "main", "-l", text])
            .expect("tmux send-keys");
        assert!(out.status.success());
    }

    fn send_key(&self, key: &str) {
        let out = self
            .run(&["send-keys", "-t", "main", key])
            .expect("tmux send-keys");
        assert!(out.status.success());
    }

    /// Polls the pane until it shows `needle`; fails at the deadline.
    async fn wait_for(&self, needle: &str) -> String {
        let start = Instant::now();
        loop {
            let screen = self.capture();
            if screen.contains(needle) {
                return screen;
            }
            assert!(
                start.elapsed() < DEADLINE,
                "the pane never showed {needle:?}; it shows:\n{screen}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.run(&["kill-server"]);
    }
}

fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompt_approve_accept_and_quit_in_a_real_terminal() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let server = ScriptedModelServer::start(Script::new([
        Turn::text("I will write the file.")
            .and_tool_call("Bash", json!({"command": "echo made-by-kaji > out.txt"})),
        Turn::tool_call("AttemptCompletion", json!({"result": "Wrote out.txt"})),
    ]))
    .await;
    let Some(tmux) = Tmux::start(home.path()) else {
        panic!("tmux is needed for this test and could not be run");
    };
    let code_file = home.path().join("exit-code");
    let command = format!(
        "{} tui --provider anthropic --base-url {} --model scripted -C {}; echo $? > {}",
        quote(env!("CARGO_BIN_EXE_kaji")),
        quote(&server.anthropic_base_url()),
        quote(work.path().to_str().unwrap()),
        quote(code_file.to_str().unwrap()),
    );
    let out = tmux
        .run(&["respawn-pane", "-k", "-t", "main", &command])
        .unwrap();
    assert!(out.status.success(), "respawn-pane: {out:?}");

    let screen = tmux.wait_for("Enter sends").await;
    assert!(screen.contains("scripted · default"), "{screen}");
    tmux.send_text("write the file");
    tmux.wait_for("› write the file").await;
    tmux.send_key("Enter");

    let screen = tmux.wait_for("Run this command?").await;
    assert!(screen.contains("> write the file"), "{screen}");
    assert!(screen.contains("I will write the file."), "{screen}");
    assert!(screen.contains("⏺ Bash"), "{screen}");
    assert!(screen.contains("y approve · a always allow"), "{screen}");
    assert!(
        !work.path().join("out.txt").exists(),
        "the command ran before it was approved"
    );
    tmux.send_key("y");

    let screen = tmux.wait_for("Task complete").await;
    assert!(screen.contains("✓ approved"), "{screen}");
    assert!(screen.contains("✓ Wrote out.txt"), "{screen}");
    assert_eq!(
        std::fs::read_to_string(work.path().join("out.txt")).unwrap(),
        "made-by-kaji\n"
    );
    tmux.send_key("Enter");
    let screen = tmux.wait_for("[completed] 2 turn(s)").await;
    assert!(screen.contains("Enter sends"), "{screen}");

    // Ctrl-D on an empty input with no task running quits, cleanly.
    tmux.send_key("C-d");
    // The shell around kaji writes its exit status to a file (tmux's own
    // `pane_dead_status` is filled in racily).
    let start = Instant::now();
    let status = loop {
        let status = std::fs::read_to_string(&code_file).unwrap_or_default();
        if status.ends_with('\n') {
            break status.trim().to_string();
        }
        assert!(
            start.elapsed() < DEADLINE,
            "kaji tui did not quit on Ctrl-D:\n{}",
            tmux.capture()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(status, "0", "exit status of kaji tui");
    // The alternate screen is gone: the pane shows the normal screen again.
    assert!(!tmux.capture().contains("Enter sends"));
}
