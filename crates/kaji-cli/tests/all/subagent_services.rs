//! A sub-agent runs on its session's services, through the real binary
//! (`kaji exec --json`) against the scripted model server: it compacts
//! past its own threshold, its usage carries cost, its results are capped
//! by `tool_result_max_chars`, its edits are checkpointed and restorable,
//! and a plain text answer ends it, even when its agent file's `tools:`
//! list leaves out the finishing tool.

use std::path::Path;

use crate::common::{Wire, done, exec_json, json_lines, kaji_sync};
use kaji_protocol::Usage;
use kaji_test_support::{Script, ScriptedModelServer, Turn};
use serde_json::{Value, json};
use tokio::process::Command;

/// In the writer agent's system prompt: routes its requests to its script.
const WRITER: &str = "WRITER-AGENT-MARKER";

fn usage(input: u64, output: u64) -> Usage {
    Usage {
        input_tokens: input,
        output_tokens: output,
        ..Usage::default()
    }
}

/// A project with the `writer` agent type (whose `tools:` list has no
/// finishing tool) and settings: a 10,000-token window for `scripted`,
/// compaction past half of it, prices, and results capped at 2,000
/// characters.
fn workspace() -> (tempfile::TempDir, tempfile::TempDir) {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let agents = work.path().join(".kaji/agents");
    std::fs::create_dir_all(&agents).unwrap();
    std::fs::write(
        agents.join("writer.md"),
        format!(
            "---\nname: writer\ndescription: Writes files\ntools: Read, Write\n---\n{WRITER}: write what you are asked to.\n"
        ),
    )
    .unwrap();
    std::fs::create_dir_all(home.path().join("kaji-home")).unwrap();
    std::fs::write(
        home.path().join("kaji-home/config.toml"),
        "tool_result_max_chars = 2000\nauto_compact_threshold = 0.5\n\n[models.\"scripted\"]\ncontext_window = 10000\ninput_price = 3.0\noutput_price = 15.0\n",
    )
    .unwrap();
    std::fs::write(work.path().join("big.txt"), "0123456789".repeat(1000)).unwrap();
    (home, work)
}

fn kaji(home: &Path, work: &Path, server: &ScriptedModelServer) -> Command {
    let mut cmd = exec_json(home, work, server, Wire::Anthropic);
    cmd.arg("--yolo");
    cmd
}

/// The main agent: starts the writer, then finishes; `more` turns after
/// those two answer routed requests.
fn main_script(writer: Script, more: Vec<Turn>) -> Script {
    let mut turns = vec![
        Turn::tool_call(
            "Agent",
            json!({"description": "write out.txt", "prompt": "Write out.txt and read big.txt", "subagent_type": "writer"}),
        )
        .with_usage(usage(10, 1)),
        done("done").with_usage(usage(10, 1)),
    ];
    turns.extend(more);
    Script::new(turns).with_agent(WRITER, writer)
}

async fn run(home: &Path, work: &Path, server: &ScriptedModelServer) -> Vec<Value> {
    let mut cmd = kaji(home, work, server);
    cmd.arg("have the writer do it");
    let out = cmd.output().await.unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    json_lines(&out.stdout)
}

/// The text of every tool result in a request.
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

/// The records of the sub-agents' session files.
fn subagent_records(home: &Path) -> Vec<Value> {
    let dir = home.join("kaji-home/sessions");
    let mut records = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap().flatten() {
        let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
        let lines: Vec<Value> = text
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        if lines.first().is_some_and(|h| h["kind"] == "subagent") {
            records.extend(lines);
        }
    }
    records
}

fn checkpoints(home: &Path, work: &Path, args: &[&str]) -> std::process::Output {
    kaji_sync(home)
        .arg("checkpoints")
        .arg("-C")
        .arg(work)
        .args(args)
        .output()
        .unwrap()
}

#[tokio::test]
async fn a_sub_agent_is_capped_priced_checkpointed_and_ends_on_a_text_answer() {
    let (home, work) = workspace();
    let writer = Script::new([
        Turn::tool_call(
            "Write",
            json!({"file_path": "out.txt", "content": "from the sub-agent\n"}),
        )
        .with_usage(usage(100, 10)),
        Turn::tool_call("Read", json!({"file_path": "big.txt"})).with_usage(usage(100, 10)),
        Turn::text("WRITER-ANSWER: out.txt is written").with_usage(usage(100, 10)),
    ]);
    let server = ScriptedModelServer::start(main_script(writer, Vec::new())).await;
    run(home.path(), work.path(), &server).await;
    let requests = server.requests();

    // A text answer ends it, and its parent gets the answer as its result.
    let last_main = requests.iter().rfind(|r| r.agent.is_none()).unwrap();
    let results = results_text(&last_main.body);
    assert!(results.contains("finished"), "{results}");
    assert!(results.contains("WRITER-ANSWER"), "{results}");
    assert!(!results.contains("did NOT finish"), "{results}");
    let writer: Vec<_> = requests
        .iter()
        .filter(|r| r.agent.as_deref() == Some(WRITER))
        .collect();
    assert_eq!(writer.len(), 3, "no nudge after the text answer");
    // Its finishing tool is granted, although its `tools:` list lacks it.
    let tools = writer[0].body["tools"].to_string();
    assert!(tools.contains("AttemptCompletion"), "{tools}");

    // Its results are capped by `tool_result_max_chars`.
    let read = results_text(&writer[2].body);
    assert!(read.contains("0123456789"), "{read}");
    assert!(
        read.len() < 4000,
        "the result of Read was not capped: {} characters",
        read.len()
    );

    // Its usage carries cost.
    let records = subagent_records(home.path());
    let costs: Vec<f64> = records
        .iter()
        .filter(|r| r["type"] == "usage")
        .filter_map(|r| r["cost_usd"].as_f64())
        .collect();
    assert_eq!(costs.len(), 3, "{records:?}");
    assert!(costs.iter().all(|c| *c > 0.0), "{costs:?}");

    // Its edit is checkpointed, and restorable.
    let list = checkpoints(home.path(), work.path(), &["list", "--json"]);
    assert_eq!(list.status.code(), Some(0));
    let items: Value = serde_json::from_slice(&list.stdout).unwrap();
    let write = items
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["label"].as_str().is_some_and(|l| l.ends_with(": Write")))
        .unwrap_or_else(|| panic!("no checkpoint after the sub-agent's Write: {items}"));
    let out = work.path().join("out.txt");
    std::fs::write(&out, "changed later\n").unwrap();
    let restored = checkpoints(
        home.path(),
        work.path(),
        &["restore", write["id"].as_str().unwrap()],
    );
    assert_eq!(
        restored.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&restored.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(&out).unwrap(),
        "from the sub-agent\n"
    );
}

#[tokio::test]
async fn a_sub_agent_compacts_past_its_own_threshold() {
    let (home, work) = workspace();
    // Its first round fills 6,000 of its 10,000 tokens: past the threshold
    // (0.5), its next request is preceded by a summary request (which has
    // a system prompt of its own: the main script answers it).
    let writer = Script::new([
        Turn::tool_call("Read", json!({"file_path": "big.txt"})).with_usage(usage(6000, 10)),
        Turn::text("WRITER-ANSWER: done after compacting").with_usage(usage(100, 10)),
    ]);
    let summary = Turn::text("WRITER-SUMMARY: big.txt was read").with_usage(usage(100, 10));
    let main = main_script(writer, vec![summary])
        .with_route("[COMPACTION]", 2)
        .with_route("[CONVERSATION SUMMARY]", 1);
    let server = ScriptedModelServer::start(main).await;
    run(home.path(), work.path(), &server).await;
    let requests = server.requests();
    let summaries: Vec<_> = requests
        .iter()
        .filter(|r| r.body.to_string().contains("[COMPACTION]"))
        .collect();
    assert_eq!(summaries.len(), 1, "one compaction: {requests:?}");
    // It is the sub-agent's history that is summarised.
    let summarised = summaries[0].body["messages"].to_string();
    assert!(
        summarised.contains("Write out.txt and read big.txt"),
        "{summarised}"
    );
    assert!(
        !summarised.contains("have the writer do it"),
        "{summarised}"
    );
    let writer: Vec<_> = requests
        .iter()
        .filter(|r| r.agent.as_deref() == Some(WRITER))
        .collect();
    assert_eq!(writer.len(), 2, "{writer:?}");
    let after = writer[1].body["messages"].to_string();
    assert!(after.contains("WRITER-SUMMARY"), "{after}");
    assert!(!after.contains("0123456789"), "{after}");
    let last_main = requests.iter().rfind(|r| r.agent.is_none()).unwrap();
    let results = results_text(&last_main.body);
    assert!(results.contains("done after compacting"), "{results}");
}
