//! A tool call's arguments reach the front end while they stream: a
//! partial `ask` (kind `tool`) and deltas, before the call is complete,
//! then the call's `tool` say with the same id. The scripted server holds
//! the stream inside the arguments until the test releases it, so the
//! partial ask must arrive while the call cannot be complete yet.

use crate::common;

use std::time::Duration;

use common::{RecordingFrontend, deny, task};
use kaji_core::{PermissionMode, ToolProtocol};
use kaji_llm::ProviderKind;
use kaji_protocol::{AskKind, AskPayload, SayKind, TaskEvent, TaskStatus};
use kaji_test_support::Turn;
use serde_json::json;

use crate::common::{done, serve};

const CONTENT: &str = "line 1\nline 2 with \"quotes\"\nline 3\nline 4\nline 5\nline 6\n";

/// Runs a Write whose stream holds inside its arguments; returns every
/// event and the text the front end saw of the call while it was held.
async fn write_held(
    first: Turn,
    kind: ProviderKind,
    protocol: ToolProtocol,
) -> (Vec<TaskEvent>, String) {
    let dir = tempfile::tempdir().unwrap();
    let server = serve([first, done("ok")]).await;
    let (frontend, mut rx) = RecordingFrontend::new(deny());
    let t = task(
        &server,
        kind,
        protocol,
        PermissionMode::Yolo,
        dir.path(),
        frontend.clone(),
    );
    let run = tokio::spawn(t.run("write it".into()));
    // The hang guard: without partial asks nothing of the call arrives
    // while the stream is held.
    let seen = tokio::time::timeout(Duration::from_secs(20), async {
        let mut ask = None;
        let mut text = String::new();
        while let Some(event) = rx.recv().await {
            match event {
                TaskEvent::Ask {
                    id,
                    kind: AskKind::Tool,
                    partial: true,
                    text: t,
                    payload: Some(AskPayload::ToolApproval { tool, .. }),
                } => {
                    assert_eq!(tool, "Write");
                    ask = Some(id);
                    text.push_str(&t);
                }
                TaskEvent::Delta { id, text: t } if Some(id) == ask => text.push_str(&t),
                TaskEvent::ToolUse { .. } | TaskEvent::ToolResult { .. } => {
                    panic!("the call ran while its arguments were held: {event:?}")
                }
                _ => {}
            }
            if text.contains("line 2") {
                return text;
            }
        }
        text
    })
    .await
    .unwrap_or_else(|_| panic!("{kind:?} {protocol:?}: no partial ask while the call streamed"));
    server.release();
    let outcome = run.await.unwrap();
    assert_eq!(
        outcome.status,
        TaskStatus::Completed,
        "{kind:?} {protocol:?}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("a.txt")).unwrap(),
        CONTENT
    );
    (frontend.events(), seen)
}

/// The Write's partial ask, its deltas and the `tool` say that ends it
/// share one id, and the streamed text is the rendering (up to where the
/// call was complete: its last piece may come only with the say).
fn check_stream(events: &[TaskEvent], want: &str) {
    let mut ask = None;
    let mut text = String::new();
    let mut closed = false;
    for e in events {
        match e {
            TaskEvent::Ask {
                id,
                partial: true,
                text: t,
                ..
            } if ask.is_none() => {
                ask = Some(*id);
                text.push_str(t);
            }
            TaskEvent::Delta { id, text: t } if Some(*id) == ask => {
                assert!(!closed, "a delta after the message was complete");
                text.push_str(t);
            }
            TaskEvent::Say {
                id,
                kind: SayKind::Tool,
                partial: false,
                ..
            } if Some(*id) == ask => closed = true,
            _ => {}
        }
    }
    assert!(
        closed,
        "the tool say did not replace the partial ask: {events:?}"
    );
    assert!(
        want.starts_with(&text) && text.contains("line 6"),
        "streamed {text:?}, want {want:?}"
    );
}

fn native_turn() -> Turn {
    // `content` first, whether or not serde_json keeps insertion order (the
    // workspace build turns `preserve_order` on): the hold comes inside it.
    Turn::tool_call("Write", json!({"content": CONTENT, "file_path": "a.txt"}))
        .with_chunk_size(7)
        .with_hold_in_arguments(40)
}

#[tokio::test]
async fn a_write_streams_as_a_partial_ask_anthropic() {
    let (events, seen) =
        write_held(native_turn(), ProviderKind::Anthropic, ToolProtocol::Native).await;
    assert!(seen.starts_with("content: line 1\nline 2"), "{seen:?}");
    check_stream(&events, &format!("content: {CONTENT}\nfile_path: a.txt"));
}

#[tokio::test]
async fn a_write_streams_as_a_partial_ask_openai() {
    let (events, seen) =
        write_held(native_turn(), ProviderKind::OpenAi, ToolProtocol::Native).await;
    assert!(seen.starts_with("content: line 1\nline 2"), "{seen:?}");
    check_stream(&events, &format!("content: {CONTENT}\nfile_path: a.txt"));
}

#[tokio::test]
async fn a_write_streams_as_a_partial_ask_xml() {
    let (head, tail) = CONTENT.split_at(20);
    let turn = Turn::text(format!(
        "<Write>\n<file_path>a.txt</file_path>\n<content>{head}"
    ))
    .with_chunk_size(7)
    .and_hold()
    .and_text(format!("{tail}</content>\n</Write>"));
    let (events, seen) = write_held(turn, ProviderKind::Anthropic, ToolProtocol::Xml).await;
    assert!(
        seen.starts_with("file_path: a.txt\ncontent: line 1\nline 2"),
        "{seen:?}"
    );
    check_stream(&events, &format!("file_path: a.txt\ncontent: {CONTENT}"));
}

#[tokio::test]
async fn one_request_in_flight_while_a_held_reply_runs_its_tools() {
    // The call is complete before the hold, so it runs while the reply is
    // still open; the next request must wait until that reply has ended.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "alpha\n").unwrap();
    let server = serve([
        Turn::tool_call("Read", json!({"file_path": "a.txt"})).and_hold(),
        done("ok"),
    ])
    .await;
    let (frontend, mut rx) = RecordingFrontend::new(deny());
    let t = task(
        &server,
        ProviderKind::Anthropic,
        ToolProtocol::Native,
        PermissionMode::Default,
        dir.path(),
        frontend,
    );
    let run = tokio::spawn(t.run("read".into()));
    while let Some(event) = rx.recv().await {
        if matches!(event, TaskEvent::ToolResult { .. }) {
            break;
        }
    }
    server.release();
    let outcome = run.await.unwrap();
    assert_eq!(outcome.status, TaskStatus::Completed);
    assert_eq!(server.requests().len(), 2);
    assert_eq!(server.max_requests_in_flight(), 1);
}
