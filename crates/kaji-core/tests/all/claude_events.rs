//! Claude Code's hook events through a real Session against the scripted
//! model server: SessionStart (startup, then resume), SubagentStop,
//! Notification, Stop, PreCompact and SessionEnd each fire once, in the
//! order of the moments they stand for, with Claude Code's payload fields;
//! SessionStart's context reaches the model; a Stop hook that blocks keeps
//! the agent working once.

use crate::common;

use std::path::Path;
use std::sync::Arc;

use common::{RecordingFrontend, provider_config};
use kaji_core::{ResumeFrom, Session, SessionBuilder, SessionOptions};
use kaji_llm::ProviderKind;
use kaji_protocol::{AskResponse, TaskStatus};
use kaji_test_support::{Script, ScriptedModelServer, Turn};
use serde_json::{Value, json};

use crate::common::{done, serve};

const GENERAL: &str = "You are the general-purpose sub-agent";

/// `$KAJI_HOME/config.toml` with one hook per event that appends its
/// payload to `events.jsonl`, plus a SessionStart hook that gives context.
fn write_hooks(home: &Path, log: &Path, extra: &str) {
    let log = log.to_str().unwrap();
    let mut config = String::new();
    for event in [
        "SessionStart",
        "SessionEnd",
        "Stop",
        "SubagentStop",
        "Notification",
        "PreCompact",
    ] {
        config.push_str(&format!(
            "[[hooks.{event}]]\ncommand = \"cat >> '{log}'\"\n\n"
        ));
    }
    config.push_str("[[hooks.SessionStart]]\ncommand = \"echo SESSION-CONTEXT-MARKER\"\n\n");
    config.push_str(extra);
    std::fs::write(home.join("config.toml"), config).unwrap();
}

fn events(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

fn names(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| e["hook_event_name"].as_str().unwrap_or("?").to_string())
        .collect()
}

async fn build(
    home: &Path,
    work: &Path,
    server: &ScriptedModelServer,
    resume: Option<ResumeFrom>,
) -> (Arc<Session>, Arc<RecordingFrontend>) {
    let options = SessionOptions {
        cwd: Some(work.to_path_buf()),
        no_checkpoints: true,
        sandbox: Some(kaji_sandbox::SandboxMode::Off),
        resume,
        ..SessionOptions::default()
    };
    let (frontend, _rx) = RecordingFrontend::new(AskResponse::Approve);
    let (session, warnings) = SessionBuilder::new(home, options)
        .provider(provider_config(server, ProviderKind::Anthropic))
        .build(frontend.clone())
        .await
        .expect("session");
    assert!(warnings.is_empty(), "{warnings:?}");
    (session, frontend)
}

#[tokio::test]
async fn each_claude_code_event_fires_once_at_its_moment() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let work_dir = work.path().canonicalize().unwrap();
    let log = home.path().join("events.jsonl");
    write_hooks(home.path(), &log, "");
    let sub = Script::new([done("sub done")]);
    let server = ScriptedModelServer::start(
        Script::new([
            Turn::tool_call(
                "Agent",
                json!({"description": "look", "prompt": "look around", "subagent_type": "general-purpose"}),
            ),
            Turn::tool_call("Bash", json!({"command": "touch made-by-bash.txt"})),
            done("done"),
            Turn::text("SUMMARY of the work."),
            done("resumed"),
        ])
        .with_agent(GENERAL, sub),
    )
    .await;

    let (session, frontend) = build(home.path(), &work_dir, &server, None).await;
    // Built: SessionStart only, with source startup.
    let seen = events(&log);
    assert_eq!(names(&seen), ["SessionStart"]);
    assert_eq!(seen[0]["source"], "startup");
    assert_eq!(seen[0]["session_id"], session.id());
    assert_eq!(seen[0]["cwd"], work_dir.to_str().unwrap());
    let transcript = session.session_file().unwrap().to_path_buf();
    assert_eq!(seen[0]["transcript_path"], transcript.to_str().unwrap());
    assert!(seen[0].get("task_id").is_none(), "{}", seen[0]);

    let outcome = session.submit("do the work".into()).await.unwrap();
    assert_eq!(outcome.status, TaskStatus::Completed);
    let seen = events(&log);
    assert_eq!(
        names(&seen),
        [
            "SessionStart",
            "SubagentStop",
            "Notification",
            "Notification",
            "Stop"
        ]
    );
    // The sub-agent's end, in its own session.
    assert_ne!(seen[1]["session_id"], session.id());
    assert_eq!(seen[1]["stop_hook_active"], false);
    // The Bash approval, then the result waiting for acceptance: each
    // announced before the front end was asked.
    assert_eq!(seen[2]["notification_type"], "command");
    assert!(
        seen[2]["message"]
            .as_str()
            .unwrap()
            .contains("made-by-bash"),
        "{}",
        seen[2]
    );
    assert_eq!(seen[3]["notification_type"], "completion_result");
    assert_eq!(frontend.asks.lock().unwrap().len(), 2);
    assert_eq!(seen[4]["session_id"], session.id());
    assert_eq!(seen[4]["transcript_path"], transcript.to_str().unwrap());
    assert_eq!(seen[4]["stop_hook_active"], false);
    assert!(seen[4]["task_id"].is_string());
    // SessionStart's context went to the model with the first prompt.
    let first_main = server
        .requests()
        .into_iter()
        .find(|r| r.agent.is_none())
        .unwrap();
    assert!(
        first_main
            .body
            .to_string()
            .contains("[SessionStart hook]\\nSESSION-CONTEXT-MARKER"),
        "{}",
        first_main.body
    );

    session.compact(None).await.unwrap();
    let seen = events(&log);
    assert_eq!(names(&seen).last().unwrap(), "PreCompact");
    assert_eq!(seen.last().unwrap()["trigger"], "manual");

    session.shutdown().await;
    session.shutdown().await;
    let seen = events(&log);
    assert_eq!(names(&seen).len(), 7, "{:?}", names(&seen));
    assert_eq!(names(&seen)[6], "SessionEnd");
    assert_eq!(seen[6]["reason"], "exit");
    drop(session);

    // Resumed: SessionStart again, with source resume.
    let id = seen[0]["session_id"].as_str().unwrap().to_string();
    let (resumed, _) = build(home.path(), &work_dir, &server, Some(ResumeFrom::Id(id))).await;
    let seen = events(&log);
    assert_eq!(names(&seen).len(), 8);
    assert_eq!(names(&seen)[7], "SessionStart");
    assert_eq!(seen[7]["source"], "resume");
    assert_eq!(seen[7]["session_id"], resumed.id());
    resumed.shutdown().await;
}

#[tokio::test]
async fn a_blocking_stop_hook_keeps_the_agent_working_once() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let log = home.path().join("events.jsonl");
    // Blocks only while it is not already continuing because of itself.
    let script = home.path().join("stop.sh");
    std::fs::write(
        &script,
        "if grep -q '\"stop_hook_active\":false'; then\n  echo '{\"decision\": \"block\", \"reason\": \"RUN-THE-TESTS-FIRST\"}'\nfi\n",
    )
    .unwrap();
    let guard = format!("[[hooks.Stop]]\ncommand = \"sh '{}'\"\n", script.display());
    write_hooks(home.path(), &log, &guard);
    let server = serve([done("first"), done("second")]).await;
    let (session, _frontend) = build(home.path(), work.path(), &server, None).await;
    let outcome = session.submit("go".into()).await.unwrap();
    assert_eq!(outcome.status, TaskStatus::Completed);
    assert_eq!(outcome.result.as_deref(), Some("second"));
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert!(
        requests[1]
            .body
            .to_string()
            .contains("[Stop hook]\\nRUN-THE-TESTS-FIRST"),
        "{}",
        requests[1].body
    );
    let stops: Vec<Value> = events(&log)
        .into_iter()
        .filter(|e| e["hook_event_name"] == "Stop")
        .collect();
    assert_eq!(stops.len(), 2);
    assert_eq!(stops[0]["stop_hook_active"], false);
    assert_eq!(stops[1]["stop_hook_active"], true);
    session.shutdown().await;
}
