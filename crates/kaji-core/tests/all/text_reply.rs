//! `on_text_reply`: a reply with text and no tool ends the turn where a
//! person answers (`finish`), and gets the seed's nudge headless (`nudge`).

use crate::common;

use std::sync::Arc;

use common::{RecordingFrontend, provider_config};
use kaji_core::config::TextReply;
use kaji_core::{Task, TaskConfig, ToolExecutor};
use kaji_llm::ProviderKind;
use kaji_protocol::{AskResponse, TaskStatus};
use kaji_test_support::Turn;

use crate::common::{done, serve};

async fn run(reply: TextReply) -> (kaji_core::TaskOutcome, usize) {
    let dir = tempfile::tempdir().unwrap();
    let server = serve([Turn::text("Which file do you mean?"), done("done")]).await;
    let provider =
        kaji_llm::build_provider(&provider_config(&server, ProviderKind::Anthropic)).unwrap();
    let mut config = TaskConfig::new(dir.path().to_path_buf(), provider, "scripted".into());
    config.on_text_reply = reply;
    config.kaji_home = dir.path().join(".kaji-home");
    let (frontend, _rx) = RecordingFrontend::new(AskResponse::Approve);
    let task = Task::new(
        config,
        ToolExecutor::new(kaji_tools::builtin_tools()),
        frontend as Arc<_>,
    );
    let outcome = task.run("fix it".into()).await;
    (outcome, server.requests().len())
}

#[tokio::test]
async fn finish_ends_the_turn_on_a_text_reply() {
    let (outcome, requests) = run(TextReply::Finish).await;
    assert_eq!(outcome.status, TaskStatus::Completed);
    assert_eq!(outcome.result.as_deref(), Some("Which file do you mean?"));
    assert_eq!(requests, 1, "no nudge, no second request");
}

#[tokio::test]
async fn nudge_asks_for_a_tool_and_goes_on() {
    let (outcome, requests) = run(TextReply::Nudge).await;
    assert_eq!(outcome.status, TaskStatus::Completed);
    assert_eq!(outcome.result.as_deref(), Some("done"));
    assert_eq!(requests, 2);
}
