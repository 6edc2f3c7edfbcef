//! A fork is a new session with a copy of its original's history: what it
//! does next never touches the original's file.

use crate::common;

use std::sync::Arc;

use common::{RecordingFrontend, provider_config};
use kaji_core::storage::record::SessionKind;
use kaji_core::{SessionBuilder, SessionOptions};
use kaji_llm::ProviderKind;
use kaji_protocol::AskResponse;

use crate::common::{done, serve};

#[tokio::test]
async fn a_fork_leaves_the_original_unchanged() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let server = serve([done("one"), done("two")]).await;
    let options = || SessionOptions {
        cwd: Some(work.path().to_path_buf()),
        no_checkpoints: true,
        ..SessionOptions::default()
    };
    let (frontend, _rx) = RecordingFrontend::new(AskResponse::Approve);
    let (original, _) = SessionBuilder::new(home.path(), options())
        .provider(provider_config(&server, ProviderKind::Anthropic))
        .build(frontend.clone())
        .await
        .unwrap();
    original.submit("first".into()).await.unwrap();
    let original_file = original.session_file().unwrap().to_path_buf();
    let before = std::fs::read(&original_file).unwrap();

    let (fork, _) = SessionBuilder::new(home.path(), options())
        .provider(provider_config(&server, ProviderKind::Anthropic))
        .forked_from(original.id(), original.history())
        .build(frontend as Arc<_>)
        .await
        .unwrap();
    assert_ne!(fork.id(), original.id());
    assert_eq!(fork.history(), original.history());
    let outcome = fork.submit("second".into()).await.unwrap();
    assert_eq!(outcome.result.as_deref(), Some("two"));
    // The fork's request carried the original's conversation.
    let requests = server.requests();
    assert!(requests[1].body.to_string().contains("first"));

    assert_eq!(
        std::fs::read(&original_file).unwrap(),
        before,
        "the original changed"
    );
    let fork_text = std::fs::read_to_string(fork.session_file().unwrap()).unwrap();
    let header: serde_json::Value =
        serde_json::from_str(fork_text.lines().next().unwrap()).unwrap();
    assert_eq!(header["kind"], SessionKind::Fork.as_str());
    assert_eq!(header["parent"], original.id());
    fork.shutdown().await;
    original.shutdown().await;
    // The fork resumes with the history it was given and what it did next.
    let fork_id = fork.id().to_string();
    let fork_history = fork.history();
    drop(fork);
    let (frontend, _rx) = RecordingFrontend::new(AskResponse::Approve);
    let (resumed, _) = SessionBuilder::new(
        home.path(),
        SessionOptions {
            resume: Some(kaji_core::ResumeFrom::Id(fork_id)),
            ..options()
        },
    )
    .provider(provider_config(&server, ProviderKind::Anthropic))
    .build(frontend)
    .await
    .unwrap();
    assert_eq!(resumed.history(), fork_history);
}

/// Rule files are read again for every prompt: an edited AGENTS.md applies
/// from the next one.
#[tokio::test]
async fn an_edited_agents_md_applies_from_the_next_prompt() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    std::fs::write(work.path().join("AGENTS.md"), "RULE-VERSION-ONE\n").unwrap();
    let server = serve([done("one"), done("two")]).await;
    let (frontend, _rx) = RecordingFrontend::new(AskResponse::Approve);
    let options = SessionOptions {
        cwd: Some(work.path().to_path_buf()),
        no_checkpoints: true,
        persist: false,
        ..SessionOptions::default()
    };
    let (session, _) = SessionBuilder::new(home.path(), options)
        .provider(provider_config(&server, ProviderKind::Anthropic))
        .build(frontend)
        .await
        .unwrap();
    session.submit("first".into()).await.unwrap();
    std::fs::write(work.path().join("AGENTS.md"), "RULE-VERSION-TWO\n").unwrap();
    session.submit("second".into()).await.unwrap();
    let requests = server.requests();
    assert!(
        requests[0].body["system"]
            .to_string()
            .contains("RULE-VERSION-ONE")
    );
    let second = requests[1].body["system"].to_string();
    assert!(second.contains("RULE-VERSION-TWO"), "{second}");
    assert!(!second.contains("RULE-VERSION-ONE"));
    session.shutdown().await;
}
