//! Idle CPU of the real `kaji tui`: starts the binary in a private tmux
//! server (120×40), waits until the UI is drawn and has settled, then reads
//! the process's CPU time (`/proc/PID/stat`, user + system, all threads)
//! over a window of 10 s with nothing happening. Target: under 1% of a core.
//!
//! It needs `tmux`; without it the measurement is skipped with a note. It
//! never talks to a model (the provider's address is a closed port and no
//! prompt is sent) and kills its tmux server when done.

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// How long the idle window lasts (`KAJI_BENCH_IDLE_SECS` overrides).
fn window() -> Duration {
    let secs = std::env::var("KAJI_BENCH_IDLE_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10);
    Duration::from_secs(secs)
}

struct Tmux {
    socket: String,
    home: std::path::PathBuf,
}

impl Tmux {
    fn run(&self, args: &[&str]) -> Option<Output> {
        Command::new("tmux")
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", &self.home)
            .env("KAJI_HOME", self.home.join("kaji-home"))
            .env("ANTHROPIC_API_KEY", "bench-key")
            .env("TERM", "xterm-256color")
            .args(["-L", &self.socket, "-f", "/dev/null"])
            .args(args)
            .output()
            .ok()
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.run(&["kill-server"]);
    }
}

/// User + system CPU time of process `pid` so far, all its threads.
fn cpu_time(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name, which is in parentheses.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 here,
    // in USER_HZ (100 per second on Linux).
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 10))
}

/// Measures and prints the idle CPU of `kaji tui` (the binary at `kaji`).
pub fn measure(kaji: &Path) {
    let dir = match tempfile::tempdir() {
        Ok(d) => d,
        Err(e) => return println!("idle CPU: skipped (no temporary directory: {e})"),
    };
    let work = dir.path().join("work");
    if std::fs::create_dir_all(&work).is_err() {
        return println!("idle CPU: skipped (cannot create {})", work.display());
    }
    let tmux = Tmux {
        socket: format!("kaji-bench-idle-{}", std::process::id()),
        home: dir.path().to_path_buf(),
    };
    let command = format!(
        "exec '{}' tui --provider anthropic --base-url http://127.0.0.1:9 --model scripted --sandbox off -C '{}'",
        kaji.display(),
        work.display()
    );
    let started = tmux.run(&[
        "new-session",
        "-d",
        "-s",
        "main",
        "-x",
        "120",
        "-y",
        "40",
        &command,
    ]);
    if !started.is_some_and(|o| o.status.success()) {
        return println!("idle CPU: skipped (tmux could not be run)");
    }
    let start = Instant::now();
    loop {
        let screen = tmux
            .run(&["capture-pane", "-p", "-t", "main"])
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        if screen.contains("Enter sends") {
            break;
        }
        if start.elapsed() > Duration::from_secs(30) {
            return println!("idle CPU: skipped (the UI never showed; the pane shows:\n{screen})");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let pid = tmux
        .run(&["display-message", "-p", "-t", "main", "#{pane_pid}"])
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .trim()
                .parse::<u32>()
                .ok()
        });
    let Some(pid) = pid else {
        return println!("idle CPU: skipped (no pane pid)");
    };
    // Start-up work (the file scan, loading the syntaxes) ends first.
    std::thread::sleep(Duration::from_secs(2));
    let (Some(before), t0) = (cpu_time(pid), Instant::now()) else {
        return println!("idle CPU: skipped (cannot read /proc/{pid}/stat)");
    };
    std::thread::sleep(window());
    let (Some(after), wall) = (cpu_time(pid), t0.elapsed()) else {
        return println!("idle CPU: skipped (kaji {pid} went away)");
    };
    let used = after.saturating_sub(before);
    println!(
        "idle CPU of kaji tui over {:.1} s: {} ms of CPU = {:.3}% of a core (target < 1%)",
        wall.as_secs_f64(),
        used.as_millis(),
        100.0 * used.as_secs_f64() / wall.as_secs_f64()
    );
}
