//! `kaji exec` and `kaji demo` through the real binary: JSON lines, exit
//! codes, stdin prompts, signals, and no process left behind.

use std::path::Path;
use std::process::Stdio;

use kaji_test_support::{Fault, Script, ScriptedModelServer, Turn};
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::process::Command;

use crate::common::{Wire, done, json_lines, kaji, kaji_sync, scripted, serve};

/// `kaji exec FLAGS -C WORK PROMPT` against `server` (Anthropic format).
fn exec_in(
    home: &Path,
    work: &Path,
    server: &ScriptedModelServer,
    flags: &[&str],
    prompt: &str,
) -> Command {
    let mut cmd = kaji(home);
    cmd.arg("exec").args(flags).arg("-C").arg(work);
    scripted(&mut cmd, server, Wire::Anthropic);
    cmd.arg(prompt);
    cmd
}

#[tokio::test]
async fn json_lines_schema_and_exit_zero() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    std::fs::write(work.path().join("a.txt"), "alpha\n").unwrap();
    let server = serve([
        Turn::text("Reading.").and_tool_call("Read", json!({"file_path": "a.txt"})),
        Turn::tool_call("Write", json!({"file_path": "b.txt", "content": "beta\n"})),
        done("Wrote b.txt"),
    ])
    .await;
    let mut cmd = kaji(home.path());
    cmd.arg("exec")
        .arg("--json")
        .arg("--permission-mode")
        .arg("accept-edits")
        .arg("-C")
        .arg(work.path());
    scripted(&mut cmd, &server, Wire::Anthropic);
    cmd.arg("copy alpha");
    let out = cmd.output().await.unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines = json_lines(&out.stdout);
    let first = &lines[0];
    assert_eq!(first["type"], "task_started");
    assert_eq!(first["schema_version"], 1);
    assert!(first["task_id"].is_string());
    assert_eq!(first["model"], "scripted");
    assert_eq!(
        first["cwd"],
        work.path().canonicalize().unwrap().to_str().unwrap()
    );
    let last = lines.last().unwrap();
    assert_eq!(last["type"], "result");
    assert_eq!(last["status"], "completed");
    assert_eq!(last["turns"], 3);
    assert_eq!(last["result"], "Wrote b.txt");
    assert!(last["usage"]["input_tokens"].as_u64().unwrap() > 0);
    assert!(last["duration_ms"].is_u64());
    let uses: Vec<&Value> = lines.iter().filter(|l| l["type"] == "tool_use").collect();
    let results: Vec<&Value> = lines
        .iter()
        .filter(|l| l["type"] == "tool_result")
        .collect();
    assert_eq!(uses.len(), 3);
    assert_eq!(results.len(), 3);
    for (u, r) in uses.iter().zip(&results) {
        assert_eq!(u["id"], r["id"]);
        assert_eq!(u["name"], r["name"]);
        assert_eq!(r["is_error"], false);
        assert!(r["output"].is_string());
    }
    assert_eq!(uses[0]["input"], json!({"file_path": "a.txt"}));
    assert!(
        lines.iter().all(|l| l["partial"] != true),
        "no partial messages in --json"
    );
    assert_eq!(
        std::fs::read_to_string(work.path().join("b.txt")).unwrap(),
        "beta\n"
    );
}

#[tokio::test]
async fn prompt_from_stdin_and_transcript() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let server = serve([Turn::text("Hello from the model.")
        .and_tool_call("AttemptCompletion", json!({"result": "greeted"}))])
    .await;
    let mut cmd = kaji(home.path());
    cmd.arg("exec").arg("-C").arg(work.path());
    scripted(&mut cmd, &server, Wire::Anthropic);
    cmd.arg("-").stdin(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"say hello from stdin")
        .await
        .unwrap();
    let out = child.wait_with_output().await.unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Hello from the model."), "{text}");
    assert!(text.contains("greeted"), "{text}");
    let body = server.requests()[0].body.to_string();
    assert!(body.contains("say hello from stdin"));
}

#[tokio::test]
async fn no_model_configured_exits_2_naming_every_way() {
    let home = tempfile::tempdir().unwrap();
    let out = kaji(home.path())
        .args(["exec", "hello"])
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    for needle in [
        "ANTHROPIC_API_KEY",
        "OPENAI_API_KEY",
        "Ollama",
        "--provider",
        "KAJI_PROVIDER",
        "config.toml",
    ] {
        assert!(err.contains(needle), "{needle} missing from: {err}");
    }
}

#[tokio::test]
async fn usage_errors_exit_2() {
    let home = tempfile::tempdir().unwrap();
    let out = kaji(home.path())
        .env("ANTHROPIC_API_KEY", "k")
        .args(["exec", "--permission-mode", "sometimes", "hi"])
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("permission mode"));
    let out = kaji(home.path())
        .env("ANTHROPIC_API_KEY", "k")
        .args(["exec", "-C", "/definitely/not/here", "hi"])
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/definitely/not/here"));
}

#[tokio::test]
async fn mistake_limit_and_failure_exit_1() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    // A text answer ends an exec run (#32) unless the seed's nudge is
    // asked for.
    std::fs::create_dir_all(home.path().join("kaji-home")).unwrap();
    std::fs::write(
        home.path().join("kaji-home/config.toml"),
        "on_text_reply = \"nudge\"\n",
    )
    .unwrap();
    let server = serve([Turn::text("no tools"), Turn::text("still none")]).await;
    let mut cmd = exec_in(
        home.path(),
        work.path(),
        &server,
        &["--json", "--yolo", "--max-mistakes", "2"],
        "hi",
    );
    let out = cmd.output().await.unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        json_lines(&out.stdout).last().unwrap()["status"],
        "mistake_limit"
    );

    let server = serve([Turn::text("x").with_faults([Fault::status(401)])]).await;
    let mut cmd = exec_in(home.path(), work.path(), &server, &["--json"], "hi");
    let out = cmd.output().await.unwrap();
    assert_eq!(out.status.code(), Some(1));
    let last = json_lines(&out.stdout).last().unwrap().clone();
    assert_eq!(last["status"], "failed");
    assert!(last["result"].as_str().unwrap().contains("401"), "{last}");
    assert_eq!(server.requests().len(), 1, "401 is not retried");
}

#[tokio::test]
async fn sigterm_mid_command_exits_130_and_kills_the_command() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let fifo = work.path().join("started.fifo");
    kaji_test_support::fixtures::mkfifo(&fifo);
    let server = serve([Turn::tool_call(
        "Bash",
        json!({"command": "sleep 1000 & echo $! > started.fifo; wait"}),
    )])
    .await;
    let mut cmd = exec_in(
        home.path(),
        work.path(),
        &server,
        &["--json", "--yolo"],
        "hang",
    );
    let child = cmd.spawn().unwrap();
    let pid_of_kaji = child.id().unwrap() as i32;
    // The command tells us its grandchild's pid once it runs.
    let fifo2 = fifo.clone();
    let sleeper: i32 = tokio::task::spawn_blocking(move || {
        std::fs::read_to_string(fifo2)
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(!kaji_tasks::process::is_gone(sleeper));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid_of_kaji),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let out = child.wait_with_output().await.unwrap();
    assert_eq!(
        out.status.code(),
        Some(130),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let last = json_lines(&out.stdout).last().unwrap().clone();
    assert_eq!(last["status"], "aborted");
    assert!(
        kaji_tasks::process::is_gone(sleeper),
        "the command's process group died with the task"
    );
}

#[tokio::test]
async fn background_shell_does_not_outlive_exec() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let server = serve([
        Turn::tool_call(
            "Bash",
            json!({"command": "echo $$ > bg.pid; exec sleep 1000", "run_in_background": true}),
        ),
        // The scripted command waits (inside the shell) until the background
        // one has written its pid.
        Turn::tool_call(
            "Bash",
            json!({"command": "while [ ! -s bg.pid ]; do sleep 0.01; done; cat bg.pid"}),
        ),
        done("left it running"),
    ])
    .await;
    let mut cmd = exec_in(
        home.path(),
        work.path(),
        &server,
        &["--json", "--yolo"],
        "background",
    );
    let out = cmd.output().await.unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pid: i32 = std::fs::read_to_string(work.path().join("bg.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        kaji_tasks::process::is_gone(pid),
        "background process {pid} outlived kaji exec"
    );
}

#[tokio::test]
async fn demo_runs_offline_and_says_it_is_scripted() {
    let home = tempfile::tempdir().unwrap();
    let out = kaji(home.path()).arg("demo").output().await.unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("scripted replay"));
    assert!(
        text.contains("+  printf '%s\\n' \"$1\" | tr ' ' '-' | tr '[:upper:]' '[:lower:]'"),
        "{text}"
    );
    assert!(text.contains("ok: 'Hello World' -> 'hello-world'"));
}

#[tokio::test]
async fn rules_land_in_the_system_prompt_and_kajiignore_refuses() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    std::fs::create_dir(work.path().join(".git")).unwrap();
    std::fs::write(
        work.path().join("AGENTS.md"),
        "Always run `make check` before finishing.\n",
    )
    .unwrap();
    std::fs::create_dir_all(home.path().join("kaji-home/rules")).unwrap();
    std::fs::write(
        home.path().join("kaji-home/rules/style.md"),
        "Prefer small commits.\n",
    )
    .unwrap();
    std::fs::write(work.path().join(".kajiignore"), "secrets/\n").unwrap();
    std::fs::create_dir(work.path().join("secrets")).unwrap();
    std::fs::write(work.path().join("secrets/key.txt"), "s3cr3t\n").unwrap();
    let server = serve([
        Turn::tool_call("Read", json!({"file_path": "secrets/key.txt"})),
        done("done"),
    ])
    .await;
    let mut cmd = exec_in(
        home.path(),
        work.path(),
        &server,
        &["--json"],
        "read the key",
    );
    let out = cmd.output().await.unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let system = server.requests()[0].body["system"].to_string();
    assert!(
        system.contains("Always run `make check` before finishing."),
        "{system}"
    );
    assert!(
        system.contains("AGENTS.md"),
        "each rule under its path: {system}"
    );
    assert!(system.contains("Prefer small commits."));
    let result = json_lines(&out.stdout)
        .into_iter()
        .find(|l| l["type"] == "tool_result")
        .unwrap();
    assert_eq!(result["is_error"], true);
    let output = result["output"].as_str().unwrap();
    assert!(
        output.contains(".kajiignore") && output.contains("secrets/"),
        "{output}"
    );
    assert!(!output.contains("s3cr3t"));
}

#[tokio::test]
async fn malformed_settings_exit_2_naming_file_and_line() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(work.path().join(".kaji")).unwrap();
    std::fs::write(
        work.path().join(".kaji/config.toml"),
        "model = \"x\"\n[hooks\n",
    )
    .unwrap();
    let out = kaji(home.path())
        .env("ANTHROPIC_API_KEY", "k")
        .args(["exec", "-C"])
        .arg(work.path())
        .arg("hi")
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(".kaji/config.toml") && err.contains(":2"),
        "{err}"
    );
}

#[tokio::test]
async fn task_list_is_shared_with_kaji_tasks() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let server = serve([
        Turn::tool_call(
            "TaskCreate",
            json!({"subject": "Write the parser", "description": "incremental"}),
        ),
        done("planned"),
    ])
    .await;
    let mut cmd = exec_in(
        home.path(),
        work.path(),
        &server,
        &["--json", "--task-list", "team-a"],
        "plan",
    );
    let out = cmd.output().await.unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let listed = kaji(home.path())
        .args(["tasks", "--list", "team-a", "--json", "list"])
        .output()
        .await
        .unwrap();
    assert_eq!(listed.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&listed.stdout).contains("Write the parser"));
}

#[tokio::test]
async fn mcp_tool_called_end_to_end_through_a_scripted_task() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(work.path().join(".kaji")).unwrap();
    std::fs::write(
        work.path().join(".kaji/config.toml"),
        format!(
            "[mcp_servers.everything]\ncommand = {:?}\nargs = [\"stdio\"]\n",
            kaji_test_support::fixtures::mcp_server_bin("mcp-server-everything")
                .to_str()
                .unwrap()
        ),
    )
    .unwrap();
    let server = serve([
        Turn::tool_call(
            "mcp__everything__echo",
            json!({"message": "hello over MCP"}),
        ),
        done("echoed"),
    ])
    .await;
    let mut cmd = exec_in(
        home.path(),
        work.path(),
        &server,
        // The MCP server is the project's: it starts only when trusted.
        &["--json", "--yolo", "--trust"],
        "echo something",
    );
    let out = cmd.output().await.unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The server's tools were offered with their schemas.
    let tools = server.requests()[0].body["tools"].to_string();
    assert!(tools.contains("mcp__everything__echo"), "{tools}");
    let result = json_lines(&out.stdout)
        .into_iter()
        .find(|l| l["type"] == "tool_result")
        .unwrap();
    assert_eq!(result["is_error"], false, "{result}");
    assert!(
        result["output"]
            .as_str()
            .unwrap()
            .contains("hello over MCP"),
        "{result}"
    );
}

#[tokio::test]
async fn mcp_tool_asks_like_a_command_and_exec_denies_it() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(work.path().join(".kaji")).unwrap();
    std::fs::write(
        work.path().join(".kaji/config.toml"),
        format!(
            "[mcp_servers.everything]\ncommand = {:?}\nargs = [\"stdio\"]\n",
            kaji_test_support::fixtures::mcp_server_bin("mcp-server-everything")
                .to_str()
                .unwrap()
        ),
    )
    .unwrap();
    let server = serve([
        Turn::tool_call("mcp__everything__echo", json!({"message": "hi"})),
        done("denied"),
    ])
    .await;
    let mut cmd = exec_in(
        home.path(),
        work.path(),
        &server,
        &["--json", "--trust"],
        "echo",
    );
    let out = cmd.output().await.unwrap();
    assert_eq!(out.status.code(), Some(0));
    let result = json_lines(&out.stdout)
        .into_iter()
        .find(|l| l["type"] == "tool_result")
        .unwrap();
    assert_eq!(result["is_error"], true);
    assert!(result["output"].as_str().unwrap().contains("denied"));
}

#[tokio::test]
async fn exec_in_a_worktree_leaves_the_checkout_alone_and_checkpoints_it() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    kaji_test_support::fixtures::git(work.path(), &["init", "-q", "-b", "main"]);
    std::fs::write(work.path().join("a.txt"), "alpha\n").unwrap();
    kaji_test_support::fixtures::git(work.path(), &["add", "."]);
    kaji_test_support::fixtures::git(work.path(), &["commit", "-q", "-m", "init"]);
    let server = serve([
        Turn::tool_call(
            "Write",
            json!({"file_path": "a.txt", "content": "changed\n"}),
        ),
        done("done"),
    ])
    .await;
    let mut cmd = exec_in(
        home.path(),
        work.path(),
        &server,
        &["--json", "--yolo", "--worktree", "fix-1"],
        "change a",
    );
    let out = cmd.output().await.unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(work.path().join("a.txt")).unwrap(),
        "alpha\n"
    );
    let wt = work.path().join(".kaji/worktrees/fix-1/a.txt");
    assert_eq!(std::fs::read_to_string(&wt).unwrap(), "changed\n");
    // `git status` of the checkout stays clean: worktrees are excluded.
    let status = std::process::Command::new("git")
        .args(["status", "--porcelain"])
        .current_dir(work.path())
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&status.stdout), "");
    // The worktree was checkpointed at start and after the write.
    let list = kaji(home.path())
        .args(["checkpoints", "-C"])
        .arg(work.path().join(".kaji/worktrees/fix-1"))
        .args(["list", "--json"])
        .output()
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&list.stdout);
    assert!(
        text.contains("task start") && text.contains("turn 1: Write"),
        "{text}\n{}",
        String::from_utf8_lossy(&list.stderr)
    );
}

#[tokio::test]
async fn plan_mode_in_exec_ends_with_the_plan_unless_approved() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let script = || {
        Script::new([
            Turn::tool_call("ExitPlanMode", json!({"plan": "# Plan\n1. write x.txt"})),
            Turn::tool_call("Write", json!({"file_path": "x.txt", "content": "x"})),
            done("wrote x"),
        ])
    };
    let server = ScriptedModelServer::start(script()).await;
    let mut cmd = exec_in(
        home.path(),
        work.path(),
        &server,
        &["--json", "--permission-mode", "plan"],
        "plan it",
    );
    let out = cmd.output().await.unwrap();
    assert_eq!(out.status.code(), Some(0));
    let last = json_lines(&out.stdout).last().unwrap().clone();
    assert_eq!(last["status"], "completed");
    assert_eq!(last["result"], "# Plan\n1. write x.txt");
    assert!(!work.path().join("x.txt").exists());

    let server = ScriptedModelServer::start(script()).await;
    let mut cmd = kaji(home.path());
    cmd.args([
        "exec",
        "--json",
        "--permission-mode",
        "plan",
        "--approve-plan",
        "-C",
    ])
    .arg(work.path());
    scripted(&mut cmd, &server, Wire::Anthropic);
    cmd.arg("plan it");
    let out = cmd.output().await.unwrap();
    assert_eq!(out.status.code(), Some(0));
    let last = json_lines(&out.stdout).last().unwrap().clone();
    assert_eq!(last["result"], "wrote x");
    // A task that started in plan mode carries the approved plan out with
    // edits accepted.
    assert_eq!(
        std::fs::read_to_string(work.path().join("x.txt")).unwrap(),
        "x"
    );
    assert!(
        !work.path().join(".kaji/plans").exists(),
        "no plan in the repository"
    );
    let projects: Vec<_> = std::fs::read_dir(home.path().join("kaji-home/plans"))
        .unwrap()
        .collect();
    assert_eq!(projects.len(), 1);
}

/// Stop always stops: a TaskCancel hook that would take a minute does not
/// keep `kaji exec` alive past its grace period after SIGTERM; it exits
/// 130 with an `aborted` result line.
#[tokio::test]
async fn sigterm_exits_130_even_when_a_cancel_hook_hangs() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let kaji_home = home.path().join("kaji-home");
    std::fs::create_dir_all(&kaji_home).unwrap();
    std::fs::write(
        kaji_home.join("config.toml"),
        "[[hooks.TaskCancel]]\ncommand = \"sleep 120\"\ntimeout = 300\n",
    )
    .unwrap();
    let fifo = work.path().join("started.fifo");
    kaji_test_support::fixtures::mkfifo(&fifo);
    let server = serve([Turn::tool_call(
        "Bash",
        json!({"command": "echo go > started.fifo; sleep 1000"}),
    )])
    .await;
    let mut cmd = exec_in(
        home.path(),
        work.path(),
        &server,
        &["--json", "--yolo"],
        "hang",
    );
    cmd.env("KAJI_EXIT_GRACE_MS", "200");
    let child = cmd.spawn().unwrap();
    let pid_of_kaji = child.id().unwrap() as i32;
    tokio::task::spawn_blocking(move || std::fs::read_to_string(fifo).unwrap())
        .await
        .unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid_of_kaji),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let out = tokio::time::timeout(std::time::Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("kaji exec still runs a minute after SIGTERM")
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(130),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let last = json_lines(&out.stdout).pop().unwrap();
    assert_eq!(last["type"], "result");
    assert_eq!(last["status"], "aborted");
}

/// A usage line after every round; a server that reports no usage gets an
/// estimate marked as such, and the result's totals include it.
#[tokio::test]
async fn usage_lines_every_round_and_an_estimate_without_server_usage() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let server = serve([
        Turn::tool_call("Read", json!({"file_path": "missing.txt"})).without_usage(),
        done("done"),
    ])
    .await;
    let mut cmd = exec_in(home.path(), work.path(), &server, &["--json"], "look");
    let out = cmd.output().await.unwrap();
    assert_eq!(out.status.code(), Some(0));
    let lines = json_lines(&out.stdout);
    let usage: Vec<&Value> = lines.iter().filter(|l| l["type"] == "usage").collect();
    assert_eq!(usage.len(), 2, "{lines:?}");
    assert_eq!(usage[0]["turn"], 1);
    assert_eq!(usage[0]["estimated"], true);
    let estimated_in = usage[0]["input_tokens"].as_u64().unwrap();
    assert!(estimated_in > 0, "{:?}", usage[0]);
    assert_eq!(
        usage[0]["context_tokens"].as_u64().unwrap(),
        estimated_in + usage[0]["output_tokens"].as_u64().unwrap()
    );
    assert_eq!(usage[1]["turn"], 2);
    assert_eq!(usage[1]["estimated"], false);
    let result = lines.last().unwrap();
    assert_eq!(
        result["usage"]["input_tokens"].as_u64().unwrap(),
        estimated_in + usage[1]["input_tokens"].as_u64().unwrap()
    );
}

/// Nothing fails silently: background work still running when `kaji exec`
/// ends is stopped and reported (a JSON line, a transcript line).
#[tokio::test]
async fn background_work_stopped_at_exit_is_reported() {
    for json in [true, false] {
        let home = tempfile::tempdir().unwrap();
        let work = tempfile::tempdir().unwrap();
        let server = serve([
            Turn::tool_call(
                "Bash",
                json!({"command": "sleep 300", "run_in_background": true, "description": "a long sleep"}),
            ),
            done("started"),
        ])
        .await;
        let flags: &[&str] = if json {
            &["--json", "--yolo"]
        } else {
            &["--yolo"]
        };
        let mut cmd = exec_in(home.path(), work.path(), &server, flags, "start it");
        cmd.env("KAJI_KILL_GRACE_MS", "200");
        let out = cmd.output().await.unwrap();
        assert_eq!(out.status.code(), Some(0));
        let stdout = String::from_utf8_lossy(&out.stdout);
        if json {
            let stopped: Vec<Value> = json_lines(&out.stdout)
                .into_iter()
                .filter(|l| l["type"] == "background_stopped")
                .collect();
            assert_eq!(stopped.len(), 1, "{stdout}");
            assert_eq!(stopped[0]["tasks"][0]["description"], "a long sleep");
        } else {
            assert!(stdout.contains("stopped background task"), "{stdout}");
        }
    }
}

/// Nothing fails silently: an MCP server that cannot start is named, with
/// why, in `kaji exec`'s output.
#[tokio::test]
async fn an_mcp_server_that_cannot_start_is_warned_about() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let kaji_home = home.path().join("kaji-home");
    std::fs::create_dir_all(&kaji_home).unwrap();
    std::fs::write(
        kaji_home.join("config.toml"),
        "[mcp_servers.ghost]\ncommand = \"/nonexistent/mcp-server-ghost\"\n",
    )
    .unwrap();
    let server = serve([done("ok")]).await;
    let mut cmd = exec_in(home.path(), work.path(), &server, &["--json"], "hi");
    cmd.env("KAJI_MCP_CONNECT_WAIT_MS", "5000");
    let out = cmd.output().await.unwrap();
    assert_eq!(out.status.code(), Some(0));
    let warned = json_lines(&out.stdout).into_iter().any(|l| {
        l["type"] == "say"
            && l["kind"] == "error"
            && l["text"]
                .as_str()
                .is_some_and(|t| t.contains("MCP server ghost"))
    });
    assert!(warned, "{}", String::from_utf8_lossy(&out.stdout));
}

/// The directories under `dir` that hold no file at any depth.
fn empty_dirs(dir: &Path) -> Vec<std::path::PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<std::path::PathBuf>) -> bool {
        let mut has_file = false;
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                has_file |= walk(&path, out);
            } else {
                has_file = true;
            }
        }
        if !has_file {
            out.push(dir.to_path_buf());
        }
        has_file
    }
    let mut out = Vec::new();
    if dir.is_dir() {
        walk(dir, &mut out);
    }
    out
}

#[tokio::test]
async fn tasks_latest_uses_the_list_of_this_directorys_last_session() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let other = tempfile::tempdir().unwrap();
    let kaji_home = home.path().join("kaji-home");
    // A run that never touches its task list leaves no empty list or run
    // directory behind.
    let server = ScriptedModelServer::start(done("nothing to do")).await;
    let out = exec_in(home.path(), work.path(), &server, &["--json"], "idle")
        .output()
        .await
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for dir in ["tasks", "runs"] {
        let empty = empty_dirs(&kaji_home.join(dir));
        assert!(empty.is_empty(), "empty directories left: {empty:?}");
    }
    // Two sessions in `work`, one in `other`: --latest takes the newest of
    // the directory it runs in.
    let mut sessions = Vec::new();
    for (dir, subject) in [
        (work.path(), "older"),
        (other.path(), "elsewhere"),
        (work.path(), "newest"),
    ] {
        let server = serve([
            Turn::tool_call("TaskCreate", json!({"subject": subject})),
            done("planned"),
        ])
        .await;
        let out = exec_in(home.path(), dir, &server, &["--json"], "plan")
            .output()
            .await
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        sessions.push(
            json_lines(&out.stdout)[0]["session_id"]
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    let tasks = |args: &[&str], cwd: &Path| {
        let mut cmd = kaji_sync(home.path());
        cmd.env("KAJI_HOME", &kaji_home)
            .current_dir(cwd)
            .arg("tasks")
            .args(args);
        cmd.output().unwrap()
    };
    let listed = tasks(&["list", "--latest", "--json"], work.path());
    assert_eq!(
        listed.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&listed.stderr)
    );
    let listed: Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(listed["listId"], json!(sessions[2]), "{listed}");
    assert_eq!(listed["tasks"][0]["subject"], "newest", "{listed}");
    // Without --latest, `default` as always (nobody wrote to it here: an
    // empty list).
    assert_eq!(tasks(&["list"], work.path()).status.code(), Some(0));
    // A directory without sessions: a clear usage error.
    let empty = tempfile::tempdir().unwrap();
    let none = tasks(&["list", "--latest"], empty.path());
    assert_eq!(none.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&none.stderr).contains("no saved session in"),
        "{}",
        String::from_utf8_lossy(&none.stderr)
    );
    // `lists` shows every list with the sessions that use it.
    let lists = tasks(&["lists", "--json"], work.path());
    let lists: Value = serde_json::from_slice(&lists.stdout).unwrap();
    let ids: Vec<&str> = lists
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["listId"].as_str().unwrap())
        .collect();
    let mut want: Vec<&str> = sessions.iter().map(String::as_str).collect();
    want.sort();
    assert_eq!(ids, want, "only the lists that hold tasks: {lists}");
    assert!(
        lists
            .as_array()
            .unwrap()
            .iter()
            .all(|l| l["sessions"] == 1 && l["tasks"] == 1)
    );
}

#[tokio::test]
async fn exec_worktree_prints_its_path_and_branch_and_is_entered_again() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    kaji_test_support::fixtures::git(work.path(), &["init", "-q", "-b", "main"]);
    std::fs::write(work.path().join("a.txt"), "alpha\n").unwrap();
    kaji_test_support::fixtures::git(work.path(), &["add", "."]);
    kaji_test_support::fixtures::git(work.path(), &["commit", "-q", "-m", "init"]);
    let wt = work
        .path()
        .canonicalize()
        .unwrap()
        .join(".kaji/worktrees/fix-2");
    // First run, text mode: created, path and branch on stderr.
    let server = serve([
        Turn::tool_call(
            "Write",
            json!({"file_path": "a.txt", "content": "changed\n"}),
        ),
        done("done"),
    ])
    .await;
    let out = exec_in(
        home.path(),
        work.path(),
        &server,
        &["--yolo", "--worktree", "fix-2"],
        "change a",
    )
    .output()
    .await
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "kaji exec: worktree fix-2: {} (branch kaji/fix-2)",
            wt.display()
        )),
        "{stderr}"
    );
    // Second run, --json: the same worktree is entered again (its change
    // is there), and task_started names it.
    let server = serve([
        Turn::tool_call("Read", json!({"file_path": "a.txt"})),
        done("read"),
    ])
    .await;
    let out = exec_in(
        home.path(),
        work.path(),
        &server,
        &["--json", "--worktree", "fix-2"],
        "read a",
    )
    .output()
    .await
    .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines = json_lines(&out.stdout);
    assert_eq!(
        lines[0]["worktree"],
        json!({"name": "fix-2", "path": wt.to_string_lossy(), "branch": "kaji/fix-2"})
    );
    let read = lines
        .iter()
        .find(|l| l["type"] == "tool_result" && l["name"] == "Read")
        .expect("a Read result");
    assert!(
        read["output"].as_str().unwrap().contains("changed"),
        "{read}"
    );
    // A directory of that name that is not the worktree is refused.
    std::fs::create_dir_all(work.path().join(".kaji/worktrees/stray")).unwrap();
    let out = exec_in(
        home.path(),
        work.path(),
        &server,
        &["--json", "--worktree", "stray"],
        "x",
    )
    .output()
    .await
    .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("is not a git worktree"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The MCP wait's timeout path: a server that never answers `initialize`
/// does not hold the first request past the wait
/// (`KAJI_MCP_CONNECT_WAIT_MS`); the task goes on without it and says so.
#[tokio::test]
async fn an_mcp_server_that_never_initializes_does_not_hold_the_task() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let kaji_home = home.path().join("kaji-home");
    std::fs::create_dir_all(&kaji_home).unwrap();
    // It keeps its pipes open and never writes a byte.
    std::fs::write(
        kaji_home.join("config.toml"),
        "[mcp_servers.mute]\ncommand = \"sleep\"\nargs = [\"1000\"]\n",
    )
    .unwrap();
    let server = serve([done("ok")]).await;
    let mut cmd = exec_in(home.path(), work.path(), &server, &["--json"], "hi");
    cmd.env("KAJI_MCP_CONNECT_WAIT_MS", "300");
    // The hang guard: without the timeout the task would wait for the
    // server for ever.
    let out = tokio::time::timeout(std::time::Duration::from_secs(60), cmd.output())
        .await
        .expect("kaji exec waited for an MCP server that never initializes")
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines = json_lines(&out.stdout);
    let said = lines.iter().any(|l| {
        l["type"] == "say"
            && l["kind"] == "info"
            && l["text"].as_str().is_some_and(|t| {
                t.contains("MCP servers still connecting, going on without them for now: mute")
            })
    });
    assert!(said, "{lines:?}");
    assert_eq!(server.requests().len(), 1);
}

/// The MCP wait's other path: a server that takes a while to answer
/// `initialize` is waited for, so its tools are in the very first request.
/// Without the wait the first request goes out before the server is ready
/// and this fails.
#[tokio::test]
async fn the_first_request_waits_for_an_mcp_server_that_is_slow_to_start() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let kaji_home = home.path().join("kaji-home");
    std::fs::create_dir_all(&kaji_home).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../kaji-mcp/tests/fixtures/faulty_server.js")
        .canonicalize()
        .unwrap();
    std::fs::write(
        kaji_home.join("config.toml"),
        format!(
            "[mcp_servers.slow]\ncommand = \"node\"\nargs = [{:?}]\nenv = {{ FAULT = \"slow-init\", INIT_DELAY_MS = \"1500\" }}\n",
            script.display().to_string()
        ),
    )
    .unwrap();
    let server = serve([done("ok")]).await;
    let mut cmd = exec_in(home.path(), work.path(), &server, &["--json"], "hi");
    // Long enough that only a broken wait can miss the server.
    cmd.env("KAJI_MCP_CONNECT_WAIT_MS", "120000");
    let out = tokio::time::timeout(std::time::Duration::from_secs(300), cmd.output())
        .await
        .expect("kaji exec hung")
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let first = server.requests()[0].body["tools"].to_string();
    assert!(
        first.contains("mcp__slow__work"),
        "the first request went out without the slow server's tool: {first}"
    );
}

/// After an abort, background work that goes on running is named: a
/// background shell is started, then a foreground command holds the task
/// until the test sends SIGTERM; the `info` say lists the background task
/// with its description before the result line.
#[tokio::test]
async fn an_abort_names_the_background_work_still_running() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let fifo = work.path().join("started.fifo");
    kaji_test_support::fixtures::mkfifo(&fifo);
    let server = serve([
        Turn::tool_call(
            "Bash",
            json!({"command": "sleep 300", "run_in_background": true, "description": "a long sleep"}),
        ),
        Turn::tool_call(
            "Bash",
            json!({"command": "echo started > started.fifo; sleep 1000"}),
        )
        .without_usage(),
    ])
    .await;
    let mut cmd = exec_in(
        home.path(),
        work.path(),
        &server,
        &["--json", "--yolo"],
        "go",
    );
    cmd.env("KAJI_KILL_GRACE_MS", "200").kill_on_drop(true);
    let child = cmd.spawn().unwrap();
    let pid = nix::unistd::Pid::from_raw(child.id().unwrap() as i32);
    // The hang guard: the foreground command never started.
    let started = tokio::task::spawn_blocking(move || std::fs::read_to_string(fifo).unwrap());
    tokio::time::timeout(std::time::Duration::from_secs(120), started)
        .await
        .expect("the foreground command never started")
        .unwrap();
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    let out = child.wait_with_output().await.unwrap();
    assert_eq!(out.status.code(), Some(130));
    let lines = json_lines(&out.stdout);
    let still: Vec<&Value> = lines
        .iter()
        .filter(|l| l["type"] == "say" && l["kind"] == "info" && l["data"].is_array())
        .collect();
    assert_eq!(still.len(), 1, "{lines:?}");
    assert_eq!(still[0]["data"][0]["description"], "a long sleep");
    let result = lines.iter().position(|l| l["type"] == "result").unwrap();
    let said = lines
        .iter()
        .position(|l| std::ptr::eq(l, still[0]))
        .unwrap();
    assert!(said < result, "{lines:?}");
}

/// The single state lock under concurrency: one reply with 24 tool calls
/// whose tools start while the reply streams and finish in any order;
/// the next request answers every call exactly once, in call order, each
/// with its own file's content.
#[tokio::test]
async fn many_concurrent_tool_results_are_each_recorded_once_in_order() {
    const CALLS: usize = 24;
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let mut turn = Turn::new();
    for i in 0..CALLS {
        std::fs::write(
            work.path().join(format!("f{i}.txt")),
            format!("content-{i}\n"),
        )
        .unwrap();
        turn = turn.and_tool_call("Read", json!({"file_path": format!("f{i}.txt")}));
    }
    let server = serve([turn.with_chunk_size(5), done("read them")]).await;
    let out = exec_in(home.path(), work.path(), &server, &["--json"], "read all")
        .output()
        .await
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let requests = server.requests();
    let calls: Vec<String> = requests[1].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .filter(|b| b["type"] == "tool_use")
        .map(|b| b["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(calls.len(), CALLS);
    let last = requests[1].body["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    let results: Vec<&Value> = last["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["type"] == "tool_result")
        .collect();
    let ids: Vec<&str> = results
        .iter()
        .map(|b| b["tool_use_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, calls.iter().map(String::as_str).collect::<Vec<_>>());
    for (i, result) in results.iter().enumerate() {
        assert!(
            result["content"]
                .to_string()
                .contains(&format!("content-{i}")),
            "result {i}: {result}"
        );
    }
}

/// The wire's edge cases through the binary: SSE lines without a colon are
/// ignored (the SSE spec), and of a multi-choice Chat Completions stream
/// only the first choice is the reply.
#[tokio::test]
async fn colonless_sse_lines_are_ignored_and_only_the_first_choice_is_used() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    for (provider, fault) in [
        ("anthropic", Fault::ColonlessLines),
        ("openai", Fault::ColonlessLines),
        ("openai", Fault::ExtraChoices),
    ] {
        let server = serve([
            Turn::text("Writing it.")
                .and_tool_call("Write", json!({"file_path": "b.txt", "content": "beta\n"}))
                .with_fault(fault.clone()),
            done("done"),
        ])
        .await;
        let mut cmd = kaji(home.path());
        cmd.args(["exec", "--json", "--yolo", "-C"])
            .arg(work.path());
        let base = if provider == "anthropic" {
            cmd.env("ANTHROPIC_API_KEY", "k");
            server.anthropic_base_url()
        } else {
            cmd.env("OPENAI_API_KEY", "k");
            server.openai_base_url()
        };
        cmd.args([
            "--provider",
            provider,
            "--base-url",
            &base,
            "--model",
            "scripted",
        ])
        .arg("write b");
        let out = cmd.output().await.unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{provider} {fault:?}: {err}");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(!stdout.contains("OTHER CHOICE"), "{fault:?}: {stdout}");
        let second = server.requests()[1].body.to_string();
        assert!(second.contains("Writing it."), "{second}");
        assert!(!second.contains("OTHER CHOICE"), "{fault:?}: {second}");
        assert_eq!(
            std::fs::read_to_string(work.path().join("b.txt")).unwrap(),
            "beta\n"
        );
        std::fs::remove_file(work.path().join("b.txt")).unwrap();
    }
}

/// One budget for the whole run: `--max-requests` bounds the requests of
/// the main agent and of every sub-agent together, whatever the turns of
/// each (a model that keeps delegating).
#[tokio::test]
async fn max_requests_bounds_the_whole_run_with_its_sub_agents() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let delegate = || {
        Turn::tool_call(
            "Agent",
            json!({"description": "delegate", "prompt": "Delegate it again.", "subagent_type": "general-purpose"}),
        )
    };
    let server = serve((0..40).map(|_| delegate())).await;
    let mut cmd = exec_in(
        home.path(),
        work.path(),
        &server,
        &[
            "--json",
            "--yolo",
            "--max-turns",
            "30",
            "--max-requests",
            "6",
        ],
        "keep delegating",
    );
    let out = cmd.output().await.unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let last = json_lines(&out.stdout).last().unwrap().clone();
    assert_eq!(last["type"], "result", "{last}\n{err}");
    assert_eq!(last["status"], "max_turns", "{last}");
    assert_eq!(last["stop_reason"], "max_requests", "{last}");
    let n = server.requests().len();
    assert!(n <= 6, "{n} requests were made: {err}");
    assert!(
        server
            .requests()
            .iter()
            .any(|r| r.body.to_string().contains("Delegate it again.")),
        "a sub-agent ran"
    );
}

/// `--max-budget-usd` stops the run once its cost reaches the budget; with
/// no price known it warns at the start and does not stop.
#[tokio::test]
async fn max_budget_usd_stops_a_priced_run_and_warns_on_an_unpriced_one() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    std::fs::write(work.path().join("a.txt"), "alpha\n").unwrap();
    let turns = || {
        Script::new([
            Turn::tool_call("Read", json!({"file_path": "a.txt"})),
            done("done"),
        ])
    };
    // Unpriced: a warning, and the run goes to its end.
    let server = ScriptedModelServer::start(turns()).await;
    let mut cmd = exec_in(
        home.path(),
        work.path(),
        &server,
        &["--json", "--yolo", "--max-budget-usd", "0.01"],
        "read it",
    );
    let out = cmd.output().await.unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("prices are not known"), "{err}");
    assert_eq!(server.requests().len(), 2);

    // Priced at a dollar a token: the first request spends the budget.
    let kaji_home = home.path().join("kaji-home");
    std::fs::create_dir_all(&kaji_home).unwrap();
    std::fs::write(
        kaji_home.join("config.toml"),
        "[models.\"scripted\"]\ninput_price = 1000000.0\noutput_price = 1000000.0\n",
    )
    .unwrap();
    let server = ScriptedModelServer::start(turns()).await;
    let mut cmd = exec_in(
        home.path(),
        work.path(),
        &server,
        &["--json", "--yolo", "--max-budget-usd", "0.5"],
        "read it",
    );
    let out = cmd.output().await.unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let last = json_lines(&out.stdout).last().unwrap().clone();
    assert_eq!(last["status"], "max_turns", "{last}\n{err}");
    assert_eq!(last["stop_reason"], "max_budget_usd", "{last}");
    assert_eq!(server.requests().len(), 1);
}

/// A reply stopped at the reply cap keeps only part of its text, and the
/// usage estimate (a server that reports none) counts that part: it never
/// forces a compaction the next request does not need.
#[tokio::test]
async fn a_reply_cut_at_the_cap_does_not_inflate_the_usage_estimate() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let kaji_home = home.path().join("kaji-home");
    std::fs::create_dir_all(&kaji_home).unwrap();
    std::fs::write(
        kaji_home.join("config.toml"),
        "[models.\"scripted\"]\ncontext_window = 200000\n",
    )
    .unwrap();
    let server = serve([Turn::text("x").with_fault(Fault::Endless), done("done")]).await;
    let mut cmd = kaji(home.path());
    cmd.env("KAJI_MAX_REPLY_BYTES", "2000000")
        .env("OPENAI_API_KEY", "k")
        .args(["exec", "--json", "--yolo", "-C"])
        .arg(work.path())
        .args(["--provider", "openai", "--base-url"])
        .arg(server.openai_base_url())
        .args(["--model", "scripted", "go"]);
    let out = cmd.output().await.unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let all = json_lines(&out.stdout);
    assert!(
        !all.iter().any(|l| l["kind"] == "context_compacted"),
        "a compaction was forced"
    );
    assert!(
        !server
            .requests()
            .iter()
            .any(|r| r.body.to_string().contains("[COMPACTION]")),
        "a summary was requested"
    );
}

/// A tool of an MCP server still connecting is not an unknown tool: the
/// model is told the server is on its way, and it is no mistake.
#[tokio::test]
async fn a_tool_of_a_server_still_connecting_is_not_unknown() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let kaji_home = home.path().join("kaji-home");
    std::fs::create_dir_all(&kaji_home).unwrap();
    std::fs::write(
        kaji_home.join("config.toml"),
        "[mcp_servers.mute]\ncommand = \"sleep\"\nargs = [\"1000\"]\n",
    )
    .unwrap();
    let server = serve([
        Turn::tool_call("mcp__mute__echo", json!({"text": "hi"})),
        done("ok"),
    ])
    .await;
    let mut cmd = exec_in(
        home.path(),
        work.path(),
        &server,
        &["--json", "--yolo"],
        "hi",
    );
    cmd.env("KAJI_MCP_CONNECT_WAIT_MS", "300");
    let out = tokio::time::timeout(std::time::Duration::from_secs(60), cmd.output())
        .await
        .expect("hang guard")
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let second = server.requests()[1].body.to_string();
    assert!(second.contains("still connecting"), "{second}");
    assert!(!second.contains("unknown tool"), "{second}");
}

/// A resumed session whose worktree was deleted says so (and where it goes
/// on) instead of going on silently in the main checkout.
#[tokio::test]
async fn resuming_a_session_whose_worktree_was_deleted_says_so() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    kaji_test_support::fixtures::git(work.path(), &["init", "-q", "-b", "main"]);
    std::fs::write(work.path().join("a.txt"), "alpha\n").unwrap();
    kaji_test_support::fixtures::git(work.path(), &["add", "."]);
    kaji_test_support::fixtures::git(work.path(), &["commit", "-q", "-m", "init"]);
    let server = serve([done("one"), done("two")]).await;
    let out = exec_in(
        home.path(),
        work.path(),
        &server,
        &["--json", "--worktree", "gone"],
        "first",
    )
    .output()
    .await
    .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let id = json_lines(&out.stdout)[0]["session_id"]
        .as_str()
        .unwrap()
        .to_string();
    kaji_test_support::fixtures::git(
        work.path(),
        &["worktree", "remove", "--force", ".kaji/worktrees/gone"],
    );
    let out = exec_in(
        home.path(),
        work.path(),
        &server,
        &["--json", "--resume", &id],
        "again",
    )
    .output()
    .await
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("which no longer exists"), "{stderr}");
    assert!(stderr.contains("gone"), "{stderr}");
}
