//! A prompt with attachments: the blocks (an image) follow the prompt's
//! text in the user message the model gets, and stay in the history.

use crate::common;

use common::{RecordingFrontend, provider_config};
use kaji_core::{SessionBuilder, SessionOptions};
use kaji_llm::ProviderKind;
use kaji_protocol::{AskResponse, ContentBlock};

use crate::common::{done, serve};

#[tokio::test]
async fn an_attached_image_follows_the_prompt_to_the_model() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let server = serve([done("a dot")]).await;
    let (frontend, _rx) = RecordingFrontend::new(AskResponse::Approve);
    let (session, _) = SessionBuilder::new(
        home.path(),
        SessionOptions {
            cwd: Some(work.path().to_path_buf()),
            no_checkpoints: true,
            persist: false,
            ..SessionOptions::default()
        },
    )
    .provider(provider_config(&server, ProviderKind::Anthropic))
    .build(frontend)
    .await
    .unwrap();
    let image = ContentBlock::image("image/png", "aW1hZ2UtYnl0ZXM=");
    session
        .submit_with_attachments("what is this?".into(), vec![image.clone()])
        .await
        .unwrap();
    let body = &server.requests()[0].body;
    let content = body["messages"][0]["content"].as_array().unwrap().clone();
    let kinds: Vec<&str> = content.iter().filter_map(|b| b["type"].as_str()).collect();
    assert_eq!(kinds, ["text", "image"], "{content:?}");
    assert_eq!(content[1]["source"]["data"], "aW1hZ2UtYnl0ZXM=");
    assert!(session.history()[0].content.contains(&image));
    session.shutdown().await;
}
