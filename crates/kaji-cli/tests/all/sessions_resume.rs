//! Sessions through the real binary: a conversation saved as it goes, and
//! continued with `kaji exec --resume` / `--continue` — the first request
//! after a resume carries exactly the history the session had; a kill -9 at
//! any moment loses nothing written ahead (a call cut off is answered
//! "interrupted", never run again by kaji); a session is open in one
//! process at a time; a fork leaves its original untouched.

use std::path::{Path, PathBuf};

use crate::common::{self, Wire, done, exec_json, run, serve};
use kaji_test_support::{ScriptedModelServer, Turn};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

fn kaji(home: &Path, work: &Path, server: &ScriptedModelServer, wire: Wire) -> Command {
    exec_json(home, work, server, wire)
}

fn session_id(lines: &[Value]) -> String {
    lines[0]["session_id"].as_str().unwrap().to_string()
}

/// The request's messages, without the prompt-cache breakpoints (which
/// move to the end of the conversation every round).
fn messages(body: &Value) -> Vec<Value> {
    fn strip(v: &mut Value) {
        match v {
            Value::Object(map) => {
                map.remove("cache_control");
                map.values_mut().for_each(strip);
            }
            Value::Array(items) => items.iter_mut().for_each(strip),
            _ => {}
        }
    }
    let mut messages = body["messages"].as_array().cloned().unwrap_or_default();
    messages.iter_mut().for_each(strip);
    messages
}

async fn round_trip(wire: Wire) {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    std::fs::write(work.path().join("a.txt"), "alpha\n").unwrap();
    let server = serve([
        Turn::text("Reading.").and_tool_call("Read", json!({"file_path": "a.txt"})),
        done("It says alpha."),
        done("Still alpha."),
    ])
    .await;
    let mut first = kaji(home.path(), work.path(), &server, wire);
    first.arg("what does a.txt say?");
    let (code, out, err) = run(first).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(out[0]["resumed"], false);
    let id = session_id(&out);
    let session_file = home
        .path()
        .join("kaji-home/sessions")
        .join(format!("{id}.jsonl"));
    assert!(
        session_file.is_file(),
        "no session file {}",
        session_file.display()
    );

    // A unique prefix is enough.
    let mut second = kaji(home.path(), work.path(), &server, wire);
    second.args(["--resume", &id[..8], "and now?"]);
    let (code, out, err) = run(second).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(out[0]["resumed"], true);
    assert_eq!(session_id(&out), id, "resume continues the same session");

    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    let before = messages(&requests[1].body);
    let after = messages(&requests[2].body);
    // Message by message, the saved conversation comes back: everything the
    // last request of the first run sent, then that run's last reply (the
    // AttemptCompletion call) and its answered result.
    assert_eq!(&after[..before.len()], &before[..], "{wire:?}");
    let rest = serde_json::to_string(&after[before.len()..]).unwrap();
    assert!(rest.contains("AttemptCompletion"), "{rest}");
    assert!(rest.contains("The user accepted the result."), "{rest}");
    assert!(rest.contains("[TASK RESUMPTION]"), "{rest}");
    assert!(rest.contains("and now?"), "{rest}");
    // Roles alternate as the API needs (OpenAI's tool results are their
    // own role).
    let roles: Vec<&str> = after.iter().map(|m| m["role"].as_str().unwrap()).collect();
    for pair in roles.windows(2) {
        assert!(
            !(pair[0] == pair[1] && pair[0] == "assistant"),
            "two assistant messages in a row: {roles:?}"
        );
    }
}

#[tokio::test]
async fn resume_round_trip_anthropic() {
    round_trip(Wire::Anthropic).await;
}

#[tokio::test]
async fn resume_round_trip_openai() {
    round_trip(Wire::OpenAi).await;
}

/// `--continue` picks the most recent session of the directory; a `-C`
/// other than the session's own directory is a usage error.
#[tokio::test]
async fn continue_takes_the_latest_session_of_this_directory() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let server = serve([done("one"), done("two")]).await;
    let mut first = kaji(home.path(), work.path(), &server, Wire::Anthropic);
    first.arg("first");
    let (code, out, err) = run(first).await;
    assert_eq!(code, 0, "{err}");
    let id = session_id(&out);

    let mut wrong = kaji(home.path(), elsewhere.path(), &server, Wire::Anthropic);
    wrong.args(["--resume", &id, "x"]);
    let (code, _, err) = run(wrong).await;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("belongs to"), "{err}");

    let mut next = kaji(home.path(), work.path(), &server, Wire::Anthropic);
    next.args(["--continue", "second"]);
    let (code, out, err) = run(next).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(session_id(&out), id);
    assert_eq!(out.last().unwrap()["result"], "two");
}

#[tokio::test]
async fn unknown_session_is_a_clear_error() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let server = serve([Turn::text("x")]).await;
    let mut cmd = kaji(home.path(), work.path(), &server, Wire::Anthropic);
    cmd.args(["--resume", "nosuchid", "x"]);
    let (code, out, err) = run(cmd).await;
    assert_eq!(code, 1, "{err}");
    assert!(out.is_empty());
    assert!(err.contains("nosuchid"), "{err}");
    assert_eq!(server.requests().len(), 0);
}

/// `--no-session-persistence` writes nothing under `$KAJI_HOME/sessions`.
#[tokio::test]
async fn no_session_persistence_writes_nothing() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let server = serve([done("ok")]).await;
    let mut cmd = kaji(home.path(), work.path(), &server, Wire::Anthropic);
    cmd.args(["--no-session-persistence", "hi"]);
    let (code, _, err) = run(cmd).await;
    assert_eq!(code, 0, "{err}");
    let dir = home.path().join("kaji-home/sessions");
    let files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(
        files
            .iter()
            .all(|f| !f.to_string_lossy().ends_with(".jsonl")
                || f.file_name().is_some_and(|n| n == "index.jsonl")),
        "{files:?}"
    );
}

/// A session is open in one process at a time: while one `kaji exec`
/// holds it, a second `--resume` refuses with exit 1 naming the holder.
#[tokio::test]
async fn a_second_process_cannot_open_a_session_in_use() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let fifo = work.path().join("go.fifo");
    kaji_test_support::fixtures::mkfifo(&fifo);
    let server = serve([
        done("one"),
        Turn::tool_call(
            "Bash",
            json!({"command": "echo held > go.fifo; sleep 1000"}),
        ),
    ])
    .await;
    let mut first = kaji(home.path(), work.path(), &server, Wire::Anthropic);
    first.arg("first");
    let (code, out, err) = run(first).await;
    assert_eq!(code, 0, "{err}");
    let id = session_id(&out);

    let mut holder = kaji(home.path(), work.path(), &server, Wire::Anthropic);
    holder.args(["--yolo", "--resume", &id, "hold it"]);
    let mut holder = holder.spawn().unwrap();
    let holder_pid = holder.id().unwrap();
    tokio::task::spawn_blocking(move || std::fs::read_to_string(fifo).unwrap())
        .await
        .unwrap();

    let mut second = kaji(home.path(), work.path(), &server, Wire::Anthropic);
    second.args(["--resume", &id, "me too"]);
    let (code, _, err) = run(second).await;
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(&holder_pid.to_string()),
        "names the holder: {err}"
    );
    holder.kill().await.unwrap();
}

/// kill -9 at random points of a multi-turn task, then `--resume` until it
/// finishes: no step runs twice, a step cut off by a kill is reported
/// interrupted to the model, and every request's history is valid (each
/// tool use answered).
#[tokio::test]
async fn kill_dash_nine_then_resume_loses_at_most_the_round_in_flight() {
    for seed in kaji_test_support::seeds::seeds("kill -9", &[0x6b69_6c6c], Some("KAJI_KILL_SEED")) {
        kill_and_resume(seed).await;
    }
}

async fn kill_and_resume(seed: u64) {
    const STEPS: usize = 6;
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let mut turns: Vec<Turn> = (1..=STEPS)
        .map(|k| {
            Turn::text(format!("Step {k}: appending it now."))
                .and_tool_call(
                    "Bash",
                    json!({"command": format!("echo step-{k} >> log.txt")}),
                )
                .with_chunk_size(7)
        })
        .collect();
    // A kill after the completion call was recorded but before it was
    // answered leaves it interrupted: the model completes again.
    for _ in 0..8 {
        turns.push(done("all steps done"));
    }
    // The resume prompt adds no turn of its own: the server counts the
    // assistant messages of the history, so a resumed run asks for the
    // next step.
    let server = serve(turns).await;

    let mut rng = seed;
    let mut next_random = move |n: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % n
    };
    let mut kills = 0;
    let mut id: Option<String> = None;
    let mut finished = false;
    for attempt in 0..20 {
        let mut cmd = kaji(home.path(), work.path(), &server, Wire::Anthropic);
        cmd.arg("--yolo");
        match &id {
            None => cmd.arg("append the steps"),
            Some(id) => cmd.args(["--resume", id, "go on"]),
        };
        let mut child = cmd.spawn().unwrap();
        let stdout = child.stdout.take().unwrap();
        let mut reader = BufReader::new(stdout).lines();
        // Kill after a random number of lines (a line is printed mid-stream,
        // before and after tools, between rounds); the last attempts run
        // to the end.
        let kill_after = if attempt < 8 {
            1 + next_random(12)
        } else {
            u64::MAX
        };
        let mut seen = 0u64;
        let mut result = None;
        while let Some(line) = reader.next_line().await.unwrap() {
            let v: Value = serde_json::from_str(&line).unwrap();
            if v["type"] == "task_started" && id.is_none() {
                id = Some(v["session_id"].as_str().unwrap().to_string());
            }
            if v["type"] == "result" {
                result = Some(v);
                break;
            }
            seen += 1;
            if seen >= kill_after {
                child.start_kill().unwrap();
                kills += 1;
                break;
            }
        }
        let _ = child.wait().await;
        if let Some(r) = result {
            assert_eq!(r["status"], "completed", "{r}");
            finished = true;
            break;
        }
    }
    assert!(finished, "the task never finished after {kills} kills");
    // A step runs at most once: a call cut off by a kill is answered
    // "interrupted" on resume and never run again by kaji (the scripted
    // model goes on to the next step, where a real one would check). So
    // the log is the steps in order, each at most once, one missing at
    // most per kill, and each missing one was reported interrupted.
    let log = std::fs::read_to_string(work.path().join("log.txt")).unwrap_or_default();
    let steps: Vec<usize> = log
        .lines()
        .map(|l| l.trim_start_matches("step-").parse().unwrap())
        .collect();
    assert!(
        steps.windows(2).all(|w| w[0] < w[1]),
        "seed {seed}: a step ran twice or out of order: {log}"
    );
    let missing = STEPS - steps.len();
    assert!(
        missing <= kills,
        "seed {seed}: {missing} steps lost after {kills} kills: {log}"
    );
    if missing > 0 {
        assert!(
            server.requests().iter().any(|r| r
                .body
                .to_string()
                .contains("interrupted — it may have run partly")),
            "seed {seed}: a step is missing and nobody was told: {log}"
        );
    }
    // Every request's history is valid: each tool use has its result.
    for (n, request) in server.requests().iter().enumerate() {
        let msgs = messages(&request.body);
        let text = serde_json::to_string(&msgs).unwrap();
        for m in &msgs {
            for block in m["content"].as_array().into_iter().flatten() {
                if block["type"] == "tool_use" {
                    let id = block["id"].as_str().unwrap();
                    assert!(
                        text.contains(&format!("\"tool_use_id\":\"{id}\"")),
                        "seed {seed}: request {n}: {id} has no result: {}",
                        serde_json::to_string_pretty(&msgs).unwrap()
                    );
                }
            }
        }
    }
}

/// The TaskResume hook runs when a saved session is continued, not when a
/// session starts.
#[tokio::test]
async fn the_task_resume_hook_runs_on_resume() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let kaji_home = home.path().join("kaji-home");
    std::fs::create_dir_all(&kaji_home).unwrap();
    let marker = home.path().join("resumed.txt");
    std::fs::write(
        kaji_home.join("config.toml"),
        format!(
            "[[hooks.TaskResume]]\ncommand = \"cat > {}\"\n",
            marker.display()
        ),
    )
    .unwrap();
    let server = serve([done("one"), done("two")]).await;
    let mut first = kaji(home.path(), work.path(), &server, Wire::Anthropic);
    first.arg("first");
    let (code, out, err) = run(first).await;
    assert_eq!(code, 0, "{err}");
    assert!(!marker.exists(), "TaskResume ran for a new session");
    let mut again = kaji(home.path(), work.path(), &server, Wire::Anthropic);
    again.args(["--resume", &session_id(&out), "second"]);
    let (code, _, err) = run(again).await;
    assert_eq!(code, 0, "{err}");
    let payload = std::fs::read_to_string(&marker).expect("TaskResume did not run");
    assert!(payload.contains("TaskResume"), "{payload}");
}

/// A session whose directory is gone cannot be resumed, and says so.
#[tokio::test]
async fn a_session_whose_directory_is_gone_is_refused_clearly() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let gone = work.path().join("project");
    std::fs::create_dir(&gone).unwrap();
    let server = serve([done("one")]).await;
    let mut first = kaji(home.path(), &gone, &server, Wire::Anthropic);
    first.arg("first");
    let (code, out, err) = run(first).await;
    assert_eq!(code, 0, "{err}");
    std::fs::remove_dir_all(&gone).unwrap();
    let mut cmd = common::kaji(home.path());
    cmd.env("ANTHROPIC_API_KEY", "k")
        .current_dir(work.path())
        .args(["exec", "--provider", "anthropic", "--base-url"])
        .arg(server.anthropic_base_url())
        .args(["--resume", &session_id(&out), "again"]);
    let out = cmd.output().await.unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("no longer exists"), "{err}");
}

/// Write ahead: a kill -9 while a tool runs leaves its call in the session
/// file, so `--resume` answers it as interrupted ("it may have run partly")
/// and the model, not kaji, decides what comes next: the command ran once.
/// The tool blocks on a FIFO the test holds open, so the kill lands while
/// it runs, whatever the machine's load.
#[tokio::test]
async fn kill_dash_nine_mid_tool_then_resume_never_runs_the_call_again() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let started = work.path().join("started.fifo");
    let hold = work.path().join("hold.fifo");
    for fifo in [&started, &hold] {
        kaji_test_support::fixtures::mkfifo(fifo);
    }
    // Read-write: opening never blocks, and the tool's `cat` reads until
    // the test lets go of it.
    let holder = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&hold)
        .unwrap();
    let server = serve([
        Turn::text("Migrating.").and_tool_call(
            "Bash",
            json!({"command": "echo ran >> ran.txt; echo started > started.fifo; cat hold.fifo"}),
        ),
        done("checked"),
    ])
    .await;
    let mut cmd = kaji(home.path(), work.path(), &server, Wire::Anthropic);
    cmd.args(["--yolo", "migrate"]);
    let mut child = cmd.spawn().unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut reader = BufReader::new(stdout).lines();
    let first = reader.next_line().await.unwrap().unwrap();
    let first: Value = serde_json::from_str(&first).unwrap();
    let id = first["session_id"].as_str().unwrap().to_string();
    // The tool is running: it wrote to the FIFO.
    tokio::task::spawn_blocking(move || std::fs::read_to_string(started).unwrap())
        .await
        .unwrap();
    child.start_kill().unwrap();
    let _ = child.wait().await;
    drop(holder);
    // Were the command run again, it would finish at once.
    std::fs::remove_file(work.path().join("started.fifo")).unwrap();
    std::fs::remove_file(&hold).unwrap();

    let mut again = kaji(home.path(), work.path(), &server, Wire::Anthropic);
    again.args(["--yolo", "--resume", &id, "go on"]);
    let (code, out, err) = run(again).await;
    assert_eq!(code, 0, "{err}");
    let result = out.iter().find(|l| l["type"] == "result").unwrap();
    assert_eq!(result["status"], "completed", "{result}");
    let ran = std::fs::read_to_string(work.path().join("ran.txt")).unwrap();
    assert_eq!(ran, "ran\n", "the command ran again after the resume");
    let last = server.requests().last().unwrap().body.clone();
    let text = serde_json::to_string(&messages(&last)).unwrap();
    assert!(
        text.contains("interrupted — it may have run partly; check before running it again"),
        "{text}"
    );
    assert!(text.contains("Migrating."), "the reply's text kept: {text}");
}

/// A session whose file is a FIFO is refused on resume, as `sessions show`
/// refuses it, instead of blocking on its open (the guard only turns a hang
/// into a failure).
#[tokio::test]
async fn resuming_a_session_whose_file_is_a_fifo_is_refused() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let server = serve([done("one")]).await;
    let mut first = kaji(home.path(), work.path(), &server, Wire::Anthropic);
    first.arg("first");
    let (code, out, err) = run(first).await;
    assert_eq!(code, 0, "{err}");
    let id = session_id(&out);
    let file = home
        .path()
        .join("kaji-home/sessions")
        .join(format!("{id}.jsonl"));
    std::fs::remove_file(&file).unwrap();
    kaji_test_support::fixtures::mkfifo(&file);
    let mut again = kaji(home.path(), work.path(), &server, Wire::Anthropic);
    again.args(["--resume", &id, "again"]);
    let (code, _, err) = tokio::time::timeout(std::time::Duration::from_secs(60), run(again))
        .await
        .expect("the resume blocked on the FIFO");
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("not a regular file"), "{err}");
}
