//! `live_output`: a foreground command's output reaches the front end
//! while it runs, as a partial `command_output` say and its deltas; off by
//! default.

use crate::common;

use common::{RecordingFrontend, provider_config};
use kaji_core::{SessionBuilder, SessionOptions};
use kaji_llm::ProviderKind;
use kaji_protocol::{AskResponse, SayKind, TaskEvent};
use kaji_test_support::Turn;
use serde_json::json;

use crate::common::{done, serve};

/// The live output the front end saw: the say's text and its deltas.
async fn live_output(live: bool) -> Option<String> {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let server = serve([
        Turn::tool_call(
            "Bash",
            json!({"command": "printf 'one\\ntwo\\n'; echo three-é"}),
        ),
        done("done"),
    ])
    .await;
    let (frontend, _rx) = RecordingFrontend::new(AskResponse::Approve);
    let (session, _) = SessionBuilder::new(
        home.path(),
        SessionOptions {
            cwd: Some(work.path().to_path_buf()),
            no_checkpoints: true,
            persist: false,
            live_output: live,
            ..SessionOptions::default()
        },
    )
    .provider(provider_config(&server, ProviderKind::Anthropic))
    .build(frontend.clone())
    .await
    .unwrap();
    session.submit("run it".into()).await.unwrap();
    session.shutdown().await;
    let events = frontend.events();
    let id = events.iter().find_map(|e| match e {
        TaskEvent::Say {
            id,
            kind: SayKind::CommandOutput,
            partial: true,
            ..
        } => Some(*id),
        _ => None,
    })?;
    let mut text = String::new();
    for e in &events {
        match e {
            TaskEvent::Say { id: i, text: t, .. } if *i == id => text.push_str(t),
            TaskEvent::Delta { id: i, text: t } if *i == id => text.push_str(t),
            _ => {}
        }
    }
    Some(text)
}

#[tokio::test]
async fn a_commands_output_is_sent_as_it_comes_when_asked_for() {
    assert_eq!(
        live_output(true).await.as_deref(),
        Some("one\ntwo\nthree-é\n")
    );
    assert_eq!(live_output(false).await, None);
}
