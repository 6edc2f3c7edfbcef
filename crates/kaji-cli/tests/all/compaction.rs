//! Compaction through the real binary against the scripted model server,
//! whose requests past a size get the provider's real context-length
//! error: a task that crosses the limit compacts and completes; a summary
//! request that does not fit drops the oldest rounds; `compaction = "off"`
//! fails clearly; a resumed compacted session sends the compacted history.

use std::path::Path;

use crate::common::{Wire, done, exec_json, run, serve};
use kaji_test_support::{Script, ScriptedModelServer, Turn};
use serde_json::{Value, json};
use tokio::process::Command;

const FILE_BYTES: usize = 40_000;
const PROMPT: &str = "read both files,  then\nsummarise them";

fn kaji(home: &Path, work: &Path, server: &ScriptedModelServer) -> Command {
    let mut cmd = exec_json(home, work, server, Wire::Anthropic);
    cmd.args(["--yolo", "--no-checkpoints"]);
    cmd
}

fn workspace() -> (tempfile::TempDir, tempfile::TempDir) {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    std::fs::write(
        work.path().join("AGENTS.md"),
        "RULE-MARKER: run the tests.\n",
    )
    .unwrap();
    // Lines of 100 bytes: Read shows them whole.
    let file = |c: &str| format!("{}\n", c.repeat(99)).repeat(FILE_BYTES / 100);
    std::fs::write(work.path().join("a.txt"), file("A")).unwrap();
    std::fs::write(work.path().join("b.txt"), file("B")).unwrap();
    (home, work)
}

/// The size of this setup's first request (system prompt, tools, prompt)
/// and of its tool list, measured on a probe run.
async fn baseline(home: &Path, work: &Path) -> (usize, usize) {
    let probe = serve([done("probe")]).await;
    let mut cmd = kaji(home, work, &probe);
    cmd.args(["--no-session-persistence", PROMPT]);
    let (code, _, err) = run(cmd).await;
    assert_eq!(code, 0, "{err}");
    let body = &probe.requests()[0].body;
    (body.to_string().len(), body["tools"].to_string().len())
}

/// Turn 0 reads a.txt (and records a task and a todo), turn 1 reads b.txt;
/// the request after that does not fit. Turn 2 is the summary, turn 3 the
/// completion after it.
fn script(limit: usize) -> Script {
    Script::new([
        Turn::tool_call("TaskCreate", json!({"subject": "Ship the summary", "description": "x"}))
            .and_tool_call(
                "TodoWrite",
                json!({"todos": [{"content": "Compare the files", "status": "in_progress", "activeForm": "Comparing the files"}]}),
            )
            .and_tool_call("Read", json!({"file_path": "a.txt"})),
        Turn::tool_call("Read", json!({"file_path": "b.txt"})),
        Turn::text("SUMMARY-OF-THE-WORK: both files were read."),
        done("compared"),
    ])
    .with_max_request_bytes(limit)
    .with_route("[COMPACTION]", 2)
    .with_route("[CONVERSATION SUMMARY]", 3)
    .with_route("[TASK RESUMPTION]", 3)
}

fn says(lines: &[Value], kind: &str) -> Vec<Value> {
    lines
        .iter()
        .filter(|l| l["type"] == "say" && l["kind"] == kind)
        .cloned()
        .collect()
}

#[tokio::test]
async fn a_task_past_the_window_compacts_and_completes() {
    let (home, work) = workspace();
    let (base, tools) = baseline(home.path(), work.path()).await;
    // The third request (both files) does not fit; the summary request
    // (the same history without the tool list) does.
    let limit = base + 2 * FILE_BYTES - tools / 2;
    let server = ScriptedModelServer::start(script(limit)).await;
    // A PreCompact hook logs its payload.
    let log = home.path().join("precompact.jsonl");
    std::fs::create_dir_all(home.path().join("kaji-home")).unwrap();
    std::fs::write(
        home.path().join("kaji-home/config.toml"),
        format!(
            "[[hooks.PreCompact]]\ncommand = \"cat >> '{}'\"\n",
            log.display()
        ),
    )
    .unwrap();
    let mut cmd = kaji(home.path(), work.path(), &server);
    cmd.arg(PROMPT);
    let (code, lines, err) = run(cmd).await;
    assert_eq!(code, 0, "{err}\n{lines:?}");
    let compacted = says(&lines, "context_compacted");
    assert_eq!(compacted.len(), 1, "{lines:?}");
    assert_eq!(compacted[0]["data"]["dropped_rounds"], 0);
    let hooks: Vec<Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(hooks.len(), 1, "PreCompact ran once: {hooks:?}");
    assert_eq!(hooks[0]["hook_event_name"], "PreCompact");
    assert_eq!(hooks[0]["trigger"], "auto");

    let requests = server.requests();
    let summary_at = requests
        .iter()
        .position(|r| r.body.to_string().contains("[COMPACTION]"))
        .expect("a summary request");
    assert!(
        requests[summary_at].body["tools"]
            .as_array()
            .is_none_or(|t| t.is_empty())
    );
    let after = &requests[summary_at + 1].body;
    let messages = after["messages"].as_array().unwrap();
    assert_eq!(
        messages.len(),
        1,
        "the history is one message: {messages:?}"
    );
    let text = messages[0].to_string();
    let at = |s: &str| {
        text.find(s)
            .unwrap_or_else(|| panic!("{s} missing from {text}"))
    };
    assert!(at("SUMMARY-OF-THE-WORK") < at("Ship the summary"));
    assert!(at("Ship the summary") < at("Compare the files"));
    assert!(at("Compare the files") < at("summarise them"));
    assert!(
        text.contains(&serde_json::to_string(PROMPT).unwrap()[1..PROMPT.len()]),
        "the latest prompt word for word: {text}"
    );
    assert!(
        !text.contains("AAAA"),
        "plain truncation kept the old output"
    );
    // The project's instructions are in front of the history, not in it.
    assert!(after["system"].to_string().contains("RULE-MARKER"));

    // A resumed compacted session continues from the compacted history.
    let id = lines[0]["session_id"].as_str().unwrap().to_string();
    let mut again = kaji(home.path(), work.path(), &server);
    again.args(["--resume", &id, "and then?"]);
    let (code, _, err) = run(again).await;
    assert_eq!(code, 0, "{err}");
    let resumed = server.requests().last().unwrap().body.clone();
    let first = resumed["messages"][0].to_string();
    assert!(first.contains("[CONVERSATION SUMMARY]"), "{first}");
    assert!(!resumed.to_string().contains("AAAA"));
}

#[tokio::test]
async fn a_summary_request_that_does_not_fit_drops_the_oldest_rounds() {
    let (home, work) = workspace();
    let (base, tools) = baseline(home.path(), work.path()).await;
    // Not even the summary of both files fits; one file's does.
    let limit = base + 2 * FILE_BYTES - tools - 2_000;
    assert!(
        base + FILE_BYTES < limit,
        "the setup needs a tool list under {FILE_BYTES} bytes"
    );
    let server = ScriptedModelServer::start(script(limit)).await;
    let mut cmd = kaji(home.path(), work.path(), &server);
    cmd.arg(PROMPT);
    let (code, lines, err) = run(cmd).await;
    assert_eq!(code, 0, "{err}\n{lines:?}");
    let compacted = says(&lines, "context_compacted");
    assert_eq!(compacted.len(), 1, "{lines:?}");
    assert!(compacted[0]["data"]["dropped_rounds"].as_u64().unwrap() >= 1);
    assert!(compacted[0]["text"].as_str().unwrap().contains("dropped"));
}

#[tokio::test]
async fn with_compaction_off_an_overflow_fails_naming_the_setting() {
    let (home, work) = workspace();
    let (base, tools) = baseline(home.path(), work.path()).await;
    let kaji_home = home.path().join("kaji-home");
    std::fs::create_dir_all(&kaji_home).unwrap();
    std::fs::write(kaji_home.join("config.toml"), "compaction = \"off\"\n").unwrap();
    let server = ScriptedModelServer::start(script(base + 2 * FILE_BYTES - tools / 2)).await;
    let mut cmd = kaji(home.path(), work.path(), &server);
    cmd.arg(PROMPT);
    let (code, lines, err) = run(cmd).await;
    assert_eq!(code, 1, "{err}");
    let result = lines.last().unwrap();
    assert_eq!(result["status"], "failed");
    assert!(
        result["result"]
            .as_str()
            .unwrap()
            .contains("compaction = \"off\""),
        "{result}"
    );
    assert!(
        !server
            .requests()
            .iter()
            .any(|r| r.body.to_string().contains("[COMPACTION]"))
    );
}

/// Compaction only shrinks: a summary larger than the history it would
/// replace is rejected, the oldest rounds are dropped instead (the model is
/// told), and the task goes on — one summary request, never a loop.
#[tokio::test]
async fn a_summary_larger_than_the_history_is_rejected_and_rounds_dropped() {
    let (home, work) = workspace();
    let (base, tools) = baseline(home.path(), work.path()).await;
    let limit = base + 2 * FILE_BYTES - tools / 2;
    let huge = "HUGE-SUMMARY ".repeat(3 * FILE_BYTES / 13);
    let script = Script::new([
        Turn::tool_call("Read", json!({"file_path": "a.txt"})),
        Turn::tool_call("Read", json!({"file_path": "b.txt"})),
        Turn::text(huge),
        done("compared"),
    ])
    .with_max_request_bytes(limit)
    .with_route("[COMPACTION]", 2)
    .with_route("[EARLIER ROUNDS DROPPED]", 3);
    let server = ScriptedModelServer::start(script).await;
    let mut cmd = kaji(home.path(), work.path(), &server);
    cmd.arg(PROMPT);
    let (code, lines, err) = run(cmd).await;
    assert_eq!(code, 0, "{err}\n{lines:?}");
    let compacted = says(&lines, "context_compacted");
    assert_eq!(compacted.len(), 1, "{lines:?}");
    assert!(compacted[0]["data"]["dropped_rounds"].as_u64().unwrap() >= 1);
    let before = compacted[0]["data"]["tokens_before"].as_u64().unwrap();
    let after = compacted[0]["data"]["tokens_after"].as_u64().unwrap();
    assert!(after < before, "{before} -> {after}");
    let requests = server.requests();
    let summaries = requests
        .iter()
        .filter(|r| r.body.to_string().contains("[COMPACTION]"))
        .count();
    assert_eq!(summaries, 1);
    let last = requests.last().unwrap().body.to_string();
    assert!(!last.contains("HUGE-SUMMARY"), "the summary was kept");
}
