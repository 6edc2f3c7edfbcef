//! Sub-agents through the `Agent` tool, end to end: a Session against the
//! scripted model server, which answers each agent from its own script
//! (routed by a marker in the agent's system prompt).

use crate::common;

use std::path::Path;

use common::{RecordingFrontend, provider_config};
use kaji_core::storage::record::SessionKind;
use kaji_core::subagent::limits::SubagentLimits;
use kaji_core::{SessionBuilder, SessionOptions};
use kaji_llm::ProviderKind;
use kaji_protocol::{AskResponse, Usage};
use kaji_test_support::{Script, ScriptedModelServer, Turn};
use kaji_tools::{ToolContext, builtin_tools};
use serde_json::{Value, json};

use crate::common::done;

const EXPLORE: &str = "You are the Explore sub-agent";
const GENERAL: &str = "You are the general-purpose sub-agent";

fn usage(input: u64, output: u64) -> Usage {
    Usage {
        input_tokens: input,
        output_tokens: output,
        ..Usage::default()
    }
}

async fn session(
    home: &Path,
    work: &Path,
    server: &ScriptedModelServer,
    limits: SubagentLimits,
) -> std::sync::Arc<kaji_core::Session> {
    let options = SessionOptions {
        cwd: Some(work.to_path_buf()),
        no_checkpoints: true,
        subagents: limits,
        ..SessionOptions::default()
    };
    let (frontend, _rx) = RecordingFrontend::new(AskResponse::Approve);
    let (session, _) = SessionBuilder::new(home, options)
        .provider(provider_config(server, ProviderKind::Anthropic))
        .build(frontend)
        .await
        .expect("session");
    session
}

/// The tool results the request carries, as text.
fn results_text(body: &Value) -> String {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .filter(|b| b["type"] == "tool_result")
        .map(|b| b["content"].to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Session files of sub-agents, as (header, path).
fn subagent_headers(home: &Path) -> Vec<Value> {
    let mut found = Vec::new();
    let mut dirs = vec![home.join("sessions")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if let Ok(text) = std::fs::read_to_string(&path)
                && let Some(first) = text.lines().next()
                && let Ok(header) = serde_json::from_str::<Value>(first)
                && header["kind"] == SessionKind::Subagent.as_str()
            {
                found.push(header);
            }
        }
    }
    found
}

#[tokio::test]
async fn a_foreground_sub_agent_returns_its_result_and_usage_to_the_parent() {
    let home = tempfile::tempdir().expect("tempdir");
    let work = tempfile::tempdir().expect("tempdir");
    let explore = Script::new([done("the parser is in src/parse.rs").with_usage(usage(100, 7))]);
    let main = Script::new([
        Turn::tool_call(
            "Agent",
            json!({"description": "find the parser", "prompt": "Where is the parser?", "subagent_type": "explore"}),
        )
        .with_usage(usage(10, 1)),
        done("done").with_usage(usage(10, 1)),
    ])
    .with_agent(EXPLORE, explore);
    let server = ScriptedModelServer::start(main).await;
    let session = session(home.path(), work.path(), &server, SubagentLimits::default()).await;
    let outcome = session.submit("find it".into()).await.expect("submit");
    assert_eq!(outcome.result.as_deref(), Some("done"));

    let requests = server.requests();
    let child: Vec<_> = requests
        .iter()
        .filter(|r| r.agent.as_deref() == Some(EXPLORE))
        .collect();
    assert_eq!(child.len(), 1, "the sub-agent made one request");
    // The child has its own history: only its prompt.
    assert!(child[0].body.to_string().contains("Where is the parser?"));
    assert!(!child[0].body.to_string().contains("find it"));
    // Explore offers read-only tools only.
    let tools: Vec<String> = child[0].body["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_string))
        .collect();
    assert!(tools.contains(&"Read".to_string()), "{tools:?}");
    assert!(!tools.contains(&"Write".to_string()), "{tools:?}");
    assert!(!tools.contains(&"Bash".to_string()), "{tools:?}");

    let last_main = requests.iter().rfind(|r| r.agent.is_none()).expect("main");
    let results = results_text(&last_main.body);
    assert!(
        results.contains("the parser is in src/parse.rs"),
        "{results}"
    );
    assert!(
        results.contains("100 input and 7 output tokens"),
        "{results}"
    );
    // Rolled into the parent's totals.
    assert_eq!(session.usage().input_tokens, 120);
    assert_eq!(session.usage().output_tokens, 9);
    // Saved as a child session of the parent's.
    let headers = subagent_headers(home.path());
    assert_eq!(headers.len(), 1, "{headers:?}");
    assert_eq!(headers[0]["parent"], session.id());
    session.shutdown().await;
}

#[tokio::test]
async fn a_sub_agent_at_its_turn_budget_returns_a_partial_result() {
    let home = tempfile::tempdir().expect("tempdir");
    let work = tempfile::tempdir().expect("tempdir");
    std::fs::write(work.path().join("notes.txt"), "alpha\n").expect("write");
    let agents = work.path().join(".kaji").join("agents");
    std::fs::create_dir_all(&agents).expect("mkdir");
    std::fs::write(
        agents.join("limited.md"),
        "---\nname: limited\ndescription: has one turn\ntools: Read, Grep\nmaxTurns: 1\n---\nLIMITED-AGENT-MARKER\n",
    )
    .expect("write");
    let limited = Script::new([
        Turn::text("I read notes.txt; next I must check the tests")
            .and_tool_call("Read", json!({"file_path": "notes.txt"})),
        done("never reached"),
    ]);
    let main = Script::new([
        Turn::tool_call(
            "Agent",
            json!({"description": "check", "prompt": "Check the notes and the tests", "subagent_type": "Limited"}),
        ),
        done("done"),
    ])
    .with_agent("LIMITED-AGENT-MARKER", limited);
    let server = ScriptedModelServer::start(main).await;
    let session = session(home.path(), work.path(), &server, SubagentLimits::default()).await;
    session.submit("go".into()).await.expect("submit");
    let requests = server.requests();
    let last_main = requests.iter().rfind(|r| r.agent.is_none()).expect("main");
    let results = results_text(&last_main.body);
    assert!(results.contains("did NOT finish"), "{results}");
    assert!(results.contains("turn budget (maxTurns 1)"), "{results}");
    assert!(results.contains("next I must check the tests"), "{results}");
    assert!(results.contains("Read"), "{results}");
    assert!(!results.contains("never reached"), "{results}");
    session.shutdown().await;
}

#[tokio::test]
async fn the_depth_limit_refuses_a_sub_agent_of_a_sub_agent() {
    let home = tempfile::tempdir().expect("tempdir");
    let work = tempfile::tempdir().expect("tempdir");
    let general = Script::new([
        Turn::tool_call(
            "Agent",
            json!({"description": "deeper", "prompt": "go deeper", "subagent_type": "general-purpose"}),
        ),
        done("could not go deeper"),
    ]);
    let main = Script::new([
        Turn::tool_call(
            "Agent",
            json!({"description": "nest", "prompt": "nest please", "subagent_type": "GENERAL-PURPOSE"}),
        ),
        done("done"),
    ])
    .with_agent(GENERAL, general);
    let server = ScriptedModelServer::start(main).await;
    let limits = SubagentLimits {
        max_depth: 1,
        ..SubagentLimits::default()
    };
    let session = session(home.path(), work.path(), &server, limits).await;
    session.submit("go".into()).await.expect("submit");
    let requests = server.requests();
    let child: Vec<_> = requests
        .iter()
        .filter(|r| r.agent.as_deref() == Some(GENERAL))
        .collect();
    assert_eq!(
        child.len(),
        2,
        "the nested Agent call never became a request of its own"
    );
    let refused = results_text(&child[1].body);
    assert!(refused.contains("depth limit (1)"), "{refused}");
    let last_main = requests.iter().rfind(|r| r.agent.is_none()).expect("main");
    assert!(results_text(&last_main.body).contains("could not go deeper"));
    session.shutdown().await;
}

#[tokio::test]
async fn a_background_sub_agent_is_read_with_task_output_and_stopped_with_task_stop() {
    let home = tempfile::tempdir().expect("tempdir");
    let work = tempfile::tempdir().expect("tempdir");
    std::fs::write(work.path().join("a.txt"), "x\n").expect("write");
    let explore = Script::new([
        Turn::text("looking around").and_tool_call("Glob", json!({"pattern": "*.txt"})),
        Turn::text("still thinking")
            .and_hold()
            .and_text(" and more"),
    ]);
    let main = Script::new([
        Turn::tool_call(
            "Agent",
            json!({"description": "scan", "prompt": "Scan the files", "subagent_type": "Explore", "run_in_background": true}),
        ),
        done("started"),
    ])
    .with_agent(EXPLORE, explore);
    let server = ScriptedModelServer::start(main).await;
    let session = session(home.path(), work.path(), &server, SubagentLimits::default()).await;
    let outcome = session
        .submit("scan in the background".into())
        .await
        .expect("submit");
    assert_eq!(outcome.result.as_deref(), Some("started"));
    let agent = session
        .background_tasks()
        .into_iter()
        .find(|t| t.id.starts_with('a'))
        .expect("a running local_agent");

    // The sub-agent is inside its second request now.
    server.wait_for_holds(1).await;
    let mut ctx = ToolContext::new(work.path());
    ctx.session_id = session.id().to_string();
    ctx.services_mut().runtime = Some(session.runtime().clone());
    let tools = builtin_tools();
    let output = tools.get("TaskOutput").expect("TaskOutput");
    let first = output
        .call(json!({"task_id": agent.id, "block": false}), &ctx)
        .await
        .expect("read");
    assert!(
        first.content.contains("looking around"),
        "{}",
        first.content
    );
    assert!(first.content.contains("Glob"), "{}", first.content);
    assert_eq!(first.data.as_ref().expect("data")["status"], "running");
    let again = output
        .call(json!({"task_id": agent.id, "block": false}), &ctx)
        .await
        .expect("read");
    assert!(again.content.contains("no new output"), "{}", again.content);

    let stop = tools.get("TaskStop").expect("TaskStop");
    let stopped = stop
        .call(json!({"task_id": agent.id}), &ctx)
        .await
        .expect("stop");
    assert!(stopped.content.contains("killed"), "{}", stopped.content);
    assert!(
        stopped.content.contains("did NOT finish"),
        "{}",
        stopped.content
    );
    assert!(
        stopped.content.contains("stopped before finishing"),
        "{}",
        stopped.content
    );
    assert!(session.background_tasks().is_empty());
    server.release();
    session.shutdown().await;
}

#[tokio::test]
async fn model_aliases_and_the_depth_limit_come_from_the_settings() {
    let home = tempfile::tempdir().expect("tempdir");
    let work = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        home.path().join("config.toml"),
        "max_agent_depth = 1\ntoken_budget = 100000\n\n[model_aliases]\nhaiku = \"scripted-small\"\n",
    )
    .expect("settings");
    // The general-purpose sub-agent (model haiku) tries a sub-agent of its
    // own, which the depth limit of 1 refuses.
    let general = Script::new([
        Turn::tool_call(
            "Agent",
            json!({"description": "deeper", "prompt": "go deeper", "subagent_type": "Explore"}),
        ),
        done("refused, as it should"),
    ]);
    let main = Script::new([
        Turn::tool_call(
            "Agent",
            json!({"description": "look", "prompt": "Look around", "subagent_type": "general-purpose", "model": "haiku"}),
        ),
        done("done"),
    ])
    .with_agent(GENERAL, general);
    let server = ScriptedModelServer::start(main).await;
    let session = session(home.path(), work.path(), &server, SubagentLimits::default()).await;
    session.submit("look".into()).await.expect("submit");
    let requests = server.requests();
    let child: Vec<_> = requests
        .iter()
        .filter(|r| r.agent.as_deref() == Some(GENERAL))
        .collect();
    assert_eq!(
        child[0].body["model"], "scripted-small",
        "the alias maps haiku"
    );
    let refused = results_text(&child[1].body);
    assert!(refused.contains("depth limit (1)"), "{refused}");
}
