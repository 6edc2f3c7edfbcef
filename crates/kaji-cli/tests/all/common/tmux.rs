//! A real terminal for the TUI tests: a private tmux server per test,
//! killed when the test ends (also on failure), with `kaji` respawned in
//! its one pane. Every wait polls the pane until the expected text
//! appears; the deadline only guards against a hang and fails the test.
//! It never attaches to the user's tmux server (its socket is private).

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use kaji_test_support::ScriptedModelServer;

use super::{KAJI, TEST_KEY, clean_env};

/// How long a wait may take before the test fails as hung.
pub const DEADLINE: Duration = Duration::from_secs(20);

/// The prompt's title when no task runs (and nothing is asked): keys that
/// act only then (Ctrl-D, Esc Esc) wait for it. `/help` also says
/// "Ctrl-D quits", so the whole title is matched.
pub const IDLE: &str = "prompt (Enter sends, Shift-Enter newline, Ctrl-D quits)";

/// A private tmux server, killed when the test ends (also on failure).
pub struct Tmux {
    socket: String,
    home: std::path::PathBuf,
}

impl Tmux {
    pub fn start(home: &Path, name: &str) -> Option<Self> {
        let tmux = Self {
            socket: format!("kaji-test-{}-{name}", std::process::id()),
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

    pub fn run(&self, args: &[&str]) -> Option<Output> {
        let mut cmd = Command::new("tmux");
        clean_env(&mut cmd, &self.home);
        cmd.env("ANTHROPIC_API_KEY", TEST_KEY)
            .env("TERM", "xterm-256color")
            .args(["-L", &self.socket, "-f", "/dev/null"])
            .args(args)
            .output()
            .ok()
    }

    pub fn capture(&self) -> String {
        let out = self
            .run(&["capture-pane", "-p", "-t", "main"])
            .expect("tmux capture-pane");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The pane with its scrollback.
    pub fn capture_all(&self) -> String {
        let out = self
            .run(&["capture-pane", "-p", "-S", "-200", "-t", "main"])
            .expect("tmux capture-pane");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub fn send_text(&self, text: &str) {
        let out = self
            .run(&["send-keys", "-t", "main", "-l", text])
            .expect("tmux send-keys");
        assert!(out.status.success());
    }

    pub fn send_key(&self, key: &str) {
        let out = self
            .run(&["send-keys", "-t", "main", key])
            .expect("tmux send-keys");
        assert!(out.status.success());
    }

    /// Polls the pane until it shows `needle`; fails at the deadline.
    pub async fn wait_for(&self, needle: &str) -> String {
        self.wait_until(needle, |s| s.contains(needle)).await
    }

    /// Polls the pane until `ready` holds for its text; fails at the
    /// deadline, saying what it waited for.
    pub async fn wait_until(&self, what: &str, ready: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let screen = self.capture();
            if ready(&screen) {
                return screen;
            }
            assert!(
                start.elapsed() < DEADLINE,
                "the pane never showed {what:?}; it shows:\n{screen}"
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

/// `s` quoted for the shell.
pub fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Starts `kaji tui` in a private tmux server; the shell around it
/// writes kaji's exit status to `<home>/exit-code` (tmux's own
/// `pane_dead_status` is filled in racily).
/// Commands ask (the sandbox, which would run them unasked, is off).
pub fn launch(name: &str, home: &Path, work: &Path, server: &ScriptedModelServer) -> Tmux {
    launch_with(name, home, work, server, "tui", "--sandbox off")
}

/// [`launch`] with another subcommand (`""`: plain `kaji`) and extra
/// (already quoted) arguments.
pub fn launch_with(
    name: &str,
    home: &Path,
    work: &Path,
    server: &ScriptedModelServer,
    subcommand: &str,
    extra: &str,
) -> Tmux {
    respawn(
        name,
        home,
        work,
        server,
        "",
        &format!("{subcommand} "),
        extra,
    )
}

/// [`launch`] with `env` (already quoted `NAME=value` words) put before
/// kaji on its command line.
pub fn launch_env(
    name: &str,
    home: &Path,
    work: &Path,
    server: &ScriptedModelServer,
    env: &str,
) -> Tmux {
    respawn(
        name,
        home,
        work,
        server,
        &format!("env {env} "),
        "tui ",
        "--sandbox off",
    )
}

/// Starts a private tmux server and respawns its pane with
/// `PREFIX kaji SUBCOMMAND --provider … -C WORK EXTRA; echo $? > HOME/exit-code`.
fn respawn(
    name: &str,
    home: &Path,
    work: &Path,
    server: &ScriptedModelServer,
    prefix: &str,
    subcommand: &str,
    extra: &str,
) -> Tmux {
    let Some(tmux) = Tmux::start(home, name) else {
        panic!("tmux is needed for this test and could not be run");
    };
    let command = format!(
        "{prefix}{} {subcommand}--provider anthropic --base-url {} --model scripted -C {} {extra}; echo $? > {}",
        quote(KAJI),
        quote(&server.anthropic_base_url()),
        quote(work.to_str().unwrap()),
        quote(home.join("exit-code").to_str().unwrap()),
    );
    let out = tmux
        .run(&["respawn-pane", "-k", "-t", "main", &command])
        .unwrap();
    assert!(out.status.success(), "respawn-pane: {out:?}");
    tmux
}

/// Types a prompt and sends it.
pub async fn submit(tmux: &Tmux, prompt: &str) {
    tmux.send_text(prompt);
    tmux.wait_for(&format!("› {prompt}")).await;
    tmux.send_key("Enter");
}

/// Quits with Ctrl-D and returns kaji's exit status.
pub async fn quit(tmux: &Tmux, home: &Path) -> String {
    // Ctrl-D quits only when no task runs; the prompt's title says so once
    // the task has ended (an answer's text shows before the task ends:
    // under load, a Ctrl-D sent then was ignored and the test waited out
    // its deadline).
    tmux.wait_for(IDLE).await;
    tmux.send_key("C-d");
    let start = Instant::now();
    loop {
        let status = std::fs::read_to_string(home.join("exit-code")).unwrap_or_default();
        if status.ends_with('\n') {
            return status.trim().to_string();
        }
        assert!(
            start.elapsed() < DEADLINE,
            "kaji tui did not quit on Ctrl-D:\n{}",
            tmux.capture()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
