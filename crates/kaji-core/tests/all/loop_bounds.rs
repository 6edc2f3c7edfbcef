//! The loop's boundaries against the scripted model server, both wires:
//! a stream that always breaks after its first content is ended by the
//! mistake limit (it used to be continued forever); a refusal ends the
//! task at once with its explanation and no retry; a reply cut off by the
//! output limit mid-call tells the model; the same call with the same
//! result five times in a row reaches the mistake limit; a typed reply to
//! a failed request reaches the model.

use crate::common;

use common::{RecordingFrontend, deny, task};
use kaji_core::{PermissionMode, ToolProtocol};
use kaji_llm::ProviderKind;
use kaji_protocol::{AskKind, AskResponse, TaskStatus};
use kaji_test_support::{Fault, Script, ScriptedModelServer, Turn};
use serde_json::json;

use crate::common::{done, serve};

const WIRES: [ProviderKind; 2] = [ProviderKind::Anthropic, ProviderKind::OpenAi];

#[tokio::test]
async fn a_stream_that_always_breaks_is_bounded_by_the_mistake_limit() {
    for kind in WIRES {
        let dir = tempfile::tempdir().unwrap();
        let server = ScriptedModelServer::start(
            Script::new([Turn::text(
                "I will now explain at great length what I am going to do next.",
            )])
            .with_fault_on_every_request(Fault::BreakAfterFirstContent),
        )
        .await;
        let (frontend, _rx) = RecordingFrontend::new(deny());
        let t = task(
            &server,
            kind,
            ToolProtocol::Native,
            PermissionMode::Yolo,
            dir.path(),
            frontend,
        );
        let outcome = t.run("go".into()).await;
        assert_eq!(outcome.status, TaskStatus::MistakeLimit, "{kind:?}");
        let requests = server.requests().len();
        assert!(requests <= 4, "{kind:?}: {requests} requests");
    }
}

#[tokio::test]
async fn a_refusal_ends_the_task_at_once_with_its_explanation() {
    for kind in WIRES {
        let dir = tempfile::tempdir().unwrap();
        let server = serve([Turn::refusal("I can't help with that request.")]).await;
        let (frontend, _rx) = RecordingFrontend::new(deny());
        let t = task(
            &server,
            kind,
            ToolProtocol::Native,
            PermissionMode::Default,
            dir.path(),
            frontend,
        );
        let outcome = t.run("do something bad".into()).await;
        assert_eq!(outcome.status, TaskStatus::Failed, "{kind:?}");
        assert_eq!(outcome.stop_reason.as_deref(), Some("refusal"));
        assert!(
            outcome
                .result
                .as_deref()
                .unwrap_or("")
                .contains("can't help"),
            "{kind:?}: {:?}",
            outcome.result
        );
        assert_eq!(
            server.requests().len(),
            1,
            "{kind:?}: a refusal is not retried"
        );
    }
}

#[tokio::test]
async fn a_call_cut_off_by_the_output_limit_is_explained_to_the_model() {
    for kind in WIRES {
        let dir = tempfile::tempdir().unwrap();
        let server = serve([
            Turn::cut_off_in_tool_call("Write", r#"{"file_path": "big.txt", "content": "aaaa"#),
            done("ok"),
        ])
        .await;
        let (frontend, _rx) = RecordingFrontend::new(deny());
        let t = task(
            &server,
            kind,
            ToolProtocol::Native,
            PermissionMode::Yolo,
            dir.path(),
            frontend,
        );
        let outcome = t.run("write it".into()).await;
        assert_eq!(outcome.status, TaskStatus::Completed, "{kind:?}");
        assert!(
            !dir.path().join("big.txt").exists(),
            "{kind:?}: the cut call ran"
        );
        let second = server.requests()[1].body.to_string();
        assert!(second.contains("output token limit"), "{kind:?}: {second}");
    }
}

#[tokio::test]
async fn the_same_call_with_the_same_result_five_times_reaches_the_mistake_limit() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "same\n").unwrap();
    let turns = (0..8).map(|_| Turn::tool_call("Read", json!({"file_path": "a.txt"})));
    let server = serve(turns).await;
    let (frontend, _rx) = RecordingFrontend::new(deny());
    let t = task(
        &server,
        ProviderKind::Anthropic,
        ToolProtocol::Native,
        PermissionMode::Yolo,
        dir.path(),
        frontend.clone(),
    );
    let outcome = t.run("read".into()).await;
    assert_eq!(outcome.status, TaskStatus::MistakeLimit);
    assert_eq!(server.requests().len(), 5);
    let results = frontend.tool_results();
    assert!(!results[1].3.contains("times in a row"), "{:?}", results[1]);
    assert!(
        results[2].3.contains("3 times in a row"),
        "{:?}",
        results[2]
    );
}

#[tokio::test]
async fn a_typed_answer_to_a_failed_request_reaches_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve([done("ok")
        // A proxy's error page: a retry may help, so the user is asked (a
        // refused key is not: no retry fixes it).
        .with_fault(Fault::status_with_body(
            200,
            "<html><body>502 Bad Gateway</body></html>",
        ))])
    .await;
    let (frontend, _rx) = RecordingFrontend::new(deny());
    frontend.push_answer(AskResponse::Reply {
        text: "use the staging key".into(),
    });
    let t = task(
        &server,
        ProviderKind::Anthropic,
        ToolProtocol::Native,
        PermissionMode::Yolo,
        dir.path(),
        frontend.clone(),
    );
    let outcome = t.run("go".into()).await;
    assert_eq!(outcome.status, TaskStatus::Completed);
    assert!(frontend.ask_kinds().contains(&AskKind::ApiReqFailed));
    let last = server.requests().last().unwrap().body.to_string();
    assert!(last.contains("use the staging key"), "{last}");
}

#[tokio::test]
async fn the_same_call_with_a_different_result_each_time_is_no_loop() {
    let dir = tempfile::tempdir().unwrap();
    // The same command six times; its output counts up, so no two results
    // are the same.
    let count = json!({"command": "n=$(cat n 2>/dev/null || echo 0); echo $((n+1)) > n; cat n"});
    let mut turns: Vec<Turn> = (0..6)
        .map(|_| Turn::tool_call("Bash", count.clone()))
        .collect();
    turns.push(done("counted"));
    let server = serve(turns).await;
    let (frontend, _rx) = RecordingFrontend::new(deny());
    let t = task(
        &server,
        ProviderKind::Anthropic,
        ToolProtocol::Native,
        PermissionMode::Yolo,
        dir.path(),
        frontend.clone(),
    );
    let outcome = t.run("count".into()).await;
    assert_eq!(outcome.status, TaskStatus::Completed);
    let results = frontend.tool_results();
    assert_eq!(results.len(), 7);
    assert!(
        results.iter().all(|r| !r.3.contains("times in a row")),
        "{results:?}"
    );
}

#[tokio::test]
async fn a_typed_answer_to_the_mistake_limit_reaches_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let mut turns: Vec<Turn> = (0..3)
        .map(|_| Turn::tool_call("NoSuchTool", json!({})))
        .collect();
    turns.push(done("ok"));
    let server = serve(turns).await;
    let (frontend, _rx) = RecordingFrontend::new(deny());
    frontend.push_answer(AskResponse::Reply {
        text: "the tool is called Read".into(),
    });
    let t = task(
        &server,
        ProviderKind::Anthropic,
        ToolProtocol::Native,
        PermissionMode::Default,
        dir.path(),
        frontend.clone(),
    );
    let outcome = t.run("go".into()).await;
    assert_eq!(outcome.status, TaskStatus::Completed);
    assert!(frontend.ask_kinds().contains(&AskKind::MistakeLimitReached));
    let last = server.requests().last().unwrap().body.to_string();
    assert!(last.contains("the tool is called Read"), "{last}");
}
