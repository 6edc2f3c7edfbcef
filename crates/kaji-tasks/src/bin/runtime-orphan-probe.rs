//! A kaji-like process for the no-orphans tests of `kaji_tasks`: it
//! creates a runtime registry, starts a background shell with
//! grandchildren through it, and a foreground shell with grandchildren
//! through `kaji_tasks::process` (as the Bash tool does), prints
//! `ready <background pgid> <foreground pgid>` once every process runs,
//! and waits forever — for the test to `SIGKILL` it. Not a user tool:
//! kaji never runs it.
//!
//! ```text
//! runtime-orphan-probe KAJI_HOME SESSION_ID
//! runtime-orphan-probe --killed-by-its-child PID_FILE
//! ```
//!
//! The second form spawns one shell (through `kaji_tasks::process`) whose
//! first act is to start a grandchild, write both pids to `PID_FILE` and
//! `SIGKILL` the probe — before the probe's `spawn` can have returned and
//! recorded anything.
//!
//! It must never end its children itself: the test checks that they die
//! with it anyway.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use kaji_tasks::RuntimeTaskRegistry;
use kaji_tasks::process;
use kaji_tasks::runtime::{MAIN_CALLER, ReadWait, RuntimeConfig};

const SCRIPT: &str = "sleep 1000 & (sleep 1000 &) ; echo started; wait";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [flag, pid_file] = args.as_slice()
        && flag == "--killed-by-its-child"
    {
        return killed_by_its_child(pid_file);
    }
    let [home, session] = args.as_slice() else {
        eprintln!("usage: runtime-orphan-probe KAJI_HOME SESSION_ID");
        return ExitCode::from(2);
    };
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("runtime-orphan-probe: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(Path::new(home), session)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("runtime-orphan-probe: {message}");
            ExitCode::FAILURE
        }
    }
}

async fn run(home: &Path, session: &str) -> Result<(), String> {
    let registry = RuntimeTaskRegistry::new(home, session, RuntimeConfig::default())
        .map_err(|e| e.to_string())?;
    let background = registry
        .start_local_bash(SCRIPT, "probe background", home, MAIN_CALLER)
        .await
        .map_err(|e| e.to_string())?;
    let mut seen = String::new();
    while !seen.contains("started") {
        let read = registry
            .read_waiting(
                "probe",
                background.id.as_str(),
                ReadWait::NewOutput,
                Duration::from_secs(60),
            )
            .await
            .map_err(|e| e.to_string())?;
        if read.task.status.is_terminal() {
            return Err(format!("the background shell ended: {}", read.text()));
        }
        seen.push_str(&read.text());
    }
    let (foreground, reader) = process::spawn_with_merged_output(process::shell_command(SCRIPT))
        .map_err(|e| e.to_string())?;
    let mut line = String::new();
    BufReader::new(reader)
        .read_line(&mut line)
        .map_err(|e| e.to_string())?;
    let bg_pgid = background.pid.ok_or("the background task has no pid")?;
    let mut stdout = std::io::stdout();
    writeln!(stdout, "ready {bg_pgid} {}", foreground.pid()).map_err(|e| e.to_string())?;
    stdout.flush().map_err(|e| e.to_string())?;
    std::future::pending::<()>().await;
    drop((foreground, registry));
    Ok(())
}

/// Spawns a shell that kills this process as soon as it runs; waits.
fn killed_by_its_child(pid_file: &str) -> ExitCode {
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("runtime-orphan-probe: {e}");
            return ExitCode::FAILURE;
        }
    };
    let script = format!(
        "sleep 1000 & echo \"$$ $!\" > '{pid_file}.tmp' && mv '{pid_file}.tmp' '{pid_file}'; \
         kill -9 $PPID; wait"
    );
    runtime.block_on(async {
        match process::spawn_in_group(process::shell_command(&script)) {
            Ok(child) => {
                std::future::pending::<()>().await;
                drop(child);
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("runtime-orphan-probe: {e}");
                ExitCode::FAILURE
            }
        }
    })
}
