//! Rewinding a session to before one of the user's messages (the history
//! is cut there, saved, and seen on resume; each prompt's task-start
//! checkpoint restores the files as they were), and `!command`: the user's
//! own shell command, through the approvals, whose output joins the
//! conversation.

use crate::common;

use std::sync::Arc;

use common::{RecordingFrontend, provider_config};
use kaji_core::checkpoints::CheckpointStore;
use kaji_core::{SessionBuilder, SessionOptions};
use kaji_llm::ProviderKind;
use kaji_protocol::{AskKind, AskResponse};
use kaji_test_support::Turn;
use serde_json::json;

use crate::common::{done, serve};

fn write_then_done(path: &std::path::Path, content: &str, result: &str) -> Vec<Turn> {
    vec![
        Turn::tool_call(
            "Write",
            json!({"file_path": path.to_str().unwrap(), "content": content}),
        ),
        Turn::tool_call("AttemptCompletion", json!({"result": result})),
    ]
}

#[tokio::test]
async fn rewind_cuts_the_history_before_a_prompt_and_offers_its_checkpoint() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let file = work.path().join("a.txt");
    std::fs::write(&file, "v0\n").unwrap();
    let mut turns = write_then_done(&file, "v1\n", "one");
    turns.extend(write_then_done(&file, "v2\n", "two"));
    turns.push(done("three"));
    let server = serve(turns).await;
    let options = || SessionOptions {
        cwd: Some(work.path().to_path_buf()),
        ..SessionOptions::default()
    };
    let (frontend, _rx) = RecordingFrontend::new(AskResponse::Approve);
    let (session, _) = SessionBuilder::new(home.path(), options())
        .provider(provider_config(&server, ProviderKind::Anthropic))
        .build(frontend.clone())
        .await
        .unwrap();
    session.submit("first prompt".into()).await.unwrap();
    session.submit("second prompt".into()).await.unwrap();
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "v2\n");

    let prompts = session.user_prompts();
    let texts: Vec<&str> = prompts.iter().map(|p| p.text.as_str()).collect();
    assert_eq!(texts, ["first prompt", "second prompt"]);
    let second = prompts[1]
        .checkpoint
        .clone()
        .expect("a task-start checkpoint");
    assert!(prompts[0].checkpoint.is_some());
    assert_ne!(prompts[0].checkpoint, prompts[1].checkpoint);

    let rewound = session.rewind(1).unwrap();
    assert_eq!(rewound.text, "second prompt");
    let history = session
        .history()
        .iter()
        .map(|m| format!("{:?}", m.content))
        .collect::<String>();
    assert!(
        history.contains("first prompt") && !history.contains("second prompt"),
        "{history}"
    );
    assert!(session.rewind(5).is_err());

    // The checkpoint holds the files as they were when it was sent.
    let store = CheckpointStore::open(home.path(), work.path()).unwrap();
    let id = store.resolve(&second).await.unwrap();
    store.restore(&id).await.unwrap();
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "v1\n");

    // The next request carries the rewound conversation.
    session.submit("again".into()).await.unwrap();
    let last = server.requests().last().unwrap().body.to_string();
    assert!(
        last.contains("first prompt") && last.contains("again"),
        "{last}"
    );
    assert!(!last.contains("second prompt"), "{last}");

    // A resume sees it too.
    let expected = session.history();
    let id = session.id().to_string();
    session.shutdown().await;
    drop(session);
    let (frontend, _rx) = RecordingFrontend::new(AskResponse::Approve);
    let (resumed, _) = SessionBuilder::new(
        home.path(),
        SessionOptions {
            resume: Some(kaji_core::ResumeFrom::Id(id)),
            ..options()
        },
    )
    .provider(provider_config(&server, ProviderKind::Anthropic))
    .build(frontend as Arc<_>)
    .await
    .unwrap();
    assert_eq!(resumed.history(), expected);
}

#[tokio::test]
async fn a_shell_command_is_asked_about_and_its_output_reaches_the_model() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let server = serve([done("seen")]).await;
    let (frontend, _rx) = RecordingFrontend::new(AskResponse::Approve);
    let (session, _) = SessionBuilder::new(
        home.path(),
        SessionOptions {
            cwd: Some(work.path().to_path_buf()),
            no_checkpoints: true,
            // Commands are asked about (the sandbox would run them unasked).
            sandbox: Some(kaji_sandbox::SandboxMode::Off),
            ..SessionOptions::default()
        },
    )
    .provider(provider_config(&server, ProviderKind::Anthropic))
    .build(frontend.clone())
    .await
    .unwrap();
    // Denied: nothing runs, nothing joins the conversation.
    frontend.push_answer(common::deny());
    let denied = session.run_shell("echo made > made.txt").await.unwrap();
    assert!(denied.denied, "{denied:?}");
    assert!(!work.path().join("made.txt").exists());
    assert!(session.history().is_empty());
    // Approved: it runs in the project, its output joins the conversation.
    let ran = session
        .run_shell("echo made > made.txt; echo shell-output-1234")
        .await
        .unwrap();
    assert!(!ran.denied && !ran.is_error, "{ran:?}");
    assert!(ran.output.contains("shell-output-1234"), "{ran:?}");
    assert!(work.path().join("made.txt").exists());
    assert!(
        frontend
            .ask_kinds()
            .iter()
            .filter(|k| **k == AskKind::Command)
            .count()
            >= 2,
        "{:?}",
        frontend.ask_kinds()
    );
    assert_eq!(session.user_prompts().len(), 1);
    assert!(
        server.requests().is_empty(),
        "no model request for a shell command"
    );
    session.submit("what did it print?".into()).await.unwrap();
    let body = server.requests()[0].body.to_string();
    assert!(body.contains("shell-output-1234"), "{body}");
    assert!(body.contains("what did it print?"), "{body}");
    session.shutdown().await;
}
