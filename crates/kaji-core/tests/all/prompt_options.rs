//! A custom command's prompt options through a real Session: its model
//! for that prompt only, and its `allowed-tools` allowing without asking
//! while that prompt runs (and not after).

use crate::common;

use common::{RecordingFrontend, provider_config};
use kaji_core::{PromptOptions, SessionBuilder, SessionOptions};
use kaji_llm::ProviderKind;
use kaji_protocol::{AskKind, AskResponse};
use kaji_test_support::Turn;
use serde_json::json;

use crate::common::{done, serve};

#[tokio::test]
async fn allowed_tools_and_model_apply_to_the_commands_prompt_only() {
    let home = tempfile::tempdir().expect("home");
    let work = tempfile::tempdir().expect("work");
    let bash = || Turn::tool_call("Bash", json!({"command": "echo ran >> log.txt"}));
    let done = || done("ok");
    let server = serve([bash(), done(), bash(), done()]).await;
    let options = SessionOptions {
        cwd: Some(work.path().to_path_buf()),
        no_checkpoints: true,
        sandbox: Some(kaji_sandbox::SandboxMode::Off),
        ..SessionOptions::default()
    };
    // Nobody approves: a command that asks is denied.
    let (frontend, _rx) = RecordingFrontend::new(AskResponse::Deny { feedback: None });
    let (session, _) = SessionBuilder::new(home.path(), options)
        .provider(provider_config(&server, ProviderKind::Anthropic))
        .build(frontend.clone())
        .await
        .expect("session");
    let command = PromptOptions {
        model: Some("small-model".into()),
        allow: vec!["Bash(echo ran:*)".into()],
        allow_source: Some(kaji_policy::RuleSource::Command(
            work.path().join(".kaji/commands/log.md"),
        )),
        ..PromptOptions::default()
    };
    session
        .submit_with_options("t1".into(), "log it".into(), command)
        .await
        .expect("submit");
    assert_eq!(
        std::fs::read_to_string(work.path().join("log.txt")).unwrap(),
        "ran\n",
        "allowed by the command's allowed-tools"
    );
    assert!(!frontend.ask_kinds().contains(&AskKind::Command));
    assert_eq!(server.requests()[0].body["model"], "small-model");

    // The next prompt has neither.
    session.submit("log it again".into()).await.expect("submit");
    assert_eq!(
        std::fs::read_to_string(work.path().join("log.txt")).unwrap(),
        "ran\n",
        "the rule outlived the command's prompt"
    );
    assert!(frontend.ask_kinds().contains(&AskKind::Command));
    let last = server.requests().last().cloned().expect("requests");
    assert_eq!(last.body["model"], "scripted-model");
    session.shutdown().await;
}

#[tokio::test]
async fn a_bad_allowed_tools_rule_is_a_usage_error_and_nothing_runs() {
    let home = tempfile::tempdir().expect("home");
    let work = tempfile::tempdir().expect("work");
    let server = serve([]).await;
    let options = SessionOptions {
        cwd: Some(work.path().to_path_buf()),
        no_checkpoints: true,
        ..SessionOptions::default()
    };
    let (frontend, _rx) = RecordingFrontend::new(AskResponse::Approve);
    let (session, _) = SessionBuilder::new(home.path(), options)
        .provider(provider_config(&server, ProviderKind::Anthropic))
        .build(frontend)
        .await
        .expect("session");
    let command = PromptOptions {
        allow: vec!["Bash(unclosed".into()],
        allow_source: Some(kaji_policy::RuleSource::Command(work.path().join("c.md"))),
        ..PromptOptions::default()
    };
    let err = session
        .submit_with_options("t1".into(), "x".into(), command)
        .await
        .expect_err("refused");
    assert!(err.to_string().contains("Bash(unclosed"), "{err}");
    assert!(server.requests().is_empty());
    session.shutdown().await;
}
