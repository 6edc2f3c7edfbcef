//! `--max-budget-usd` through the binary, for the requests that are not
//! the main agent's rounds: a compaction's summary request is charged to
//! the run's budget, and the budget is asked again before the request that
//! follows it; an in-process teammate's requests come out of the same
//! budget. (Sub-agents: `nothing_lost`.)

use kaji_test_support::{Script, ScriptedModelServer, Turn};
use serde_json::json;

use crate::common::{
    PRICED_MODEL, Wire, done, exec_json, home_with_settings, input_tokens as input, result_line,
    run,
};

/// Prices of $1 per million tokens and a window of 200,000: the first
/// reply reports 180,000 tokens ($0.18), past the compaction threshold;
/// the summary reports 1,000,000 ($1.00). With `--max-budget-usd 0.5` the
/// run stops after the summary, at $1.18, and sends no request after it.
#[tokio::test]
async fn a_compaction_summary_is_charged_to_the_budget() {
    let (home, work) = home_with_settings(&format!("{PRICED_MODEL}context_window = 200000\n"));
    let script = Script::new([
        Turn::tool_call("Glob", json!({"pattern": "*.md"})).with_usage(input(180_000)),
        Turn::text("SUMMARY-OF-THE-WORK: nothing found.").with_usage(input(1_000_000)),
        done("Done."),
    ])
    .with_route("[COMPACTION]", 1)
    .with_route("[CONVERSATION SUMMARY]", 2);
    let server = ScriptedModelServer::start(script).await;
    let mut cmd = exec_json(home.path(), work.path(), &server, Wire::Anthropic);
    cmd.args([
        "--yolo",
        "--no-checkpoints",
        "--max-budget-usd",
        "0.5",
        "look around",
    ]);
    let (_code, lines, err) = run(cmd).await;
    let last = result_line(&lines);
    assert_eq!(last["stop_reason"], "max_budget_usd", "{last}\n{err}");
    let requests = server.requests();
    assert_eq!(requests.len(), 2, "{err}\n{lines:#?}");
    assert!(
        requests[1].body.to_string().contains("[COMPACTION]"),
        "the second request is the summary"
    );
    let text = last["result"].as_str().unwrap_or_default();
    assert!(text.contains("$1.1800 spent"), "{last}");
}

/// The lead starts the teammate `alice` on a task; its next request and
/// alice's first are held until both have started (each asked the budget
/// with only the lead's first request charged, $0.10 of $0.15). Once they
/// are charged the run has spent $0.30: neither the lead nor alice makes
/// another request, and the run stops at the budget.
#[tokio::test]
async fn an_in_process_teammate_spends_the_runs_budget() {
    let (home, work) = home_with_settings(PRICED_MODEL);
    let glob = || Turn::tool_call("Glob", json!({"pattern": "*"})).with_usage(input(100_000));
    let script = Script::new([
        Turn::tool_call("TaskCreate", json!({"subject": "dig", "description": "x"}))
            .and_tool_call("Agent", json!({"description": "teammate alice", "prompt": "Work the list.", "subagent_type": "general-purpose", "name": "alice"}))
            .with_usage(input(100_000)),
        glob().and_hold(),
        glob(),
        glob(),
    ])
    .with_agent(
        "You are the teammate `alice`",
        Script::new([glob().and_hold(), glob(), glob(), glob()]),
    );
    let server = ScriptedModelServer::start(script).await;
    let mut cmd = exec_json(home.path(), work.path(), &server, Wire::Anthropic);
    cmd.args([
        "--yolo",
        "--no-checkpoints",
        "--max-budget-usd",
        "0.15",
        "work with alice",
    ]);
    let running = tokio::spawn(run(cmd));
    server.wait_for_holds(2).await;
    server.release();
    server.release();
    let (_code, lines, err) = running.await.unwrap();
    let last = result_line(&lines);
    assert_eq!(last["stop_reason"], "max_budget_usd", "{last}\n{err}");
    let requests = server.requests();
    assert_eq!(requests.len(), 3, "{err}\n{lines:#?}");
    let alice = requests
        .iter()
        .filter(|r| r.body.to_string().contains("You are the teammate `alice`"))
        .count();
    assert_eq!(alice, 1, "alice made one request");
}
