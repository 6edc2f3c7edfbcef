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
    let (events, seen, _) = held("Write", first, kind, protocol, "line 2").await;
    assert_eq!(
        std::fs::read_to_string(events.1.join("a.txt")).unwrap(),
        CONTENT
    );
    (events.0, seen)
}

/// Runs a call of `tool` whose stream holds inside its arguments until
/// the streamed text contains `until`; returns every event (and the
/// working directory), the text the front end saw of the call while it
/// was held, and the title its partial ask showed then.
async fn held(
    tool: &str,
    first: Turn,
    kind: ProviderKind,
    protocol: ToolProtocol,
    until: &str,
) -> ((Vec<TaskEvent>, std::path::PathBuf), String, String) {
    let dir = tempfile::tempdir().unwrap().keep();
    std::fs::write(dir.join("a.txt"), "one\ntwo\n").unwrap();
    let server = serve([first, done("ok")]).await;
    let (frontend, mut rx) = RecordingFrontend::new(deny());
    let t = task(
        &server,
        kind,
        protocol,
        PermissionMode::Yolo,
        &dir,
        frontend.clone(),
    );
    let run = tokio::spawn(t.run("write it".into()));
    // The hang guard: without partial asks nothing of the call arrives
    // while the stream is held.
    let seen = tokio::time::timeout(Duration::from_secs(20), async {
        let mut ask = None;
        let mut text = String::new();
        let mut shown = String::new();
        while let Some(event) = rx.recv().await {
            match event {
                TaskEvent::Ask {
                    id,
                    kind: AskKind::Tool,
                    partial: true,
                    text: t,
                    payload:
                        Some(AskPayload::ToolArguments {
                            tool: name, title, ..
                        }),
                } => {
                    assert_eq!(name, tool);
                    assert!(ask.is_none_or(|a| a == id), "a second partial ask");
                    ask = Some(id);
                    // Sent again under a new title: the whole text so far.
                    text = t;
                    shown = title;
                }
                TaskEvent::Delta { id, text: t } if Some(id) == ask => text.push_str(&t),
                TaskEvent::ToolUse { .. } | TaskEvent::ToolResult { .. } => {
                    panic!("the call ran while its arguments were held: {event:?}")
                }
                _ => {}
            }
            if text.contains(until) {
                return (text, shown);
            }
        }
        (text, shown)
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
    ((frontend.events(), dir), seen.0, seen.1)
}

/// The Write's partial ask, its deltas and the `tool` say that ends it
/// share one id, and the streamed text is the rendering (up to where the
/// call was complete: its last piece may come only with the say). The
/// partial ask names the call its result names.
fn check_stream(events: &[TaskEvent], want: &str) {
    let mut ask = None;
    let mut text = String::new();
    let mut closed = false;
    let mut call_ids = Vec::new();
    for e in events {
        match e {
            TaskEvent::Ask {
                id,
                partial: true,
                text: t,
                payload,
                ..
            } if ask.is_none_or(|a| a == *id) => {
                assert!(
                    t.starts_with(&text),
                    "sent again, the text must hold all sent before: {t:?} after {text:?}"
                );
                ask = Some(*id);
                text = t.clone();
                if let Some(AskPayload::ToolArguments { tool_use_id, .. }) = payload {
                    call_ids.push(tool_use_id.clone());
                }
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
    let result_id = events.iter().find_map(|e| match e {
        TaskEvent::ToolResult { id, name, .. } if name == "Write" => Some(id.clone()),
        _ => None,
    });
    assert!(!call_ids.is_empty());
    assert!(
        call_ids.iter().all(|id| Some(id) == result_id.as_ref()),
        "partial asks named {call_ids:?}, the result {result_id:?}"
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

#[tokio::test]
async fn a_streaming_call_is_titled_once_its_path_has_come() {
    // The path is complete, the strings after it are still streaming: the
    // partial ask says which file, as the tool titles it.
    for (kind, protocol, turn) in [
        (
            ProviderKind::Anthropic,
            ToolProtocol::Native,
            Turn::tool_call(
                "Edit",
                json!({"file_path": "a.txt", "new_string": CONTENT, "old_string": "one\n"}),
            )
            .with_chunk_size(7)
            .with_hold_in_arguments(40),
        ),
        (
            ProviderKind::Anthropic,
            ToolProtocol::Xml,
            Turn::text("<Edit>\n<file_path>a.txt</file_path>\n<old_string>one\n</old_string>\n<new_string>line 1\nline 2")
                .with_chunk_size(7)
                .and_hold()
                .and_text(" with \"quotes\"\nline 3\nline 4\nline 5\nline 6\n</new_string>\n</Edit>"),
        ),
    ] {
        let ((events, dir), seen, title) =
            held("Edit", turn, kind, protocol, "_string: ").await;
        assert_eq!(title, "Edit: a.txt", "{protocol:?}: {seen:?}");
        assert!(seen.starts_with("file_path: a.txt\n"), "{seen:?}");
        if protocol == ToolProtocol::Native {
            assert_eq!(
                std::fs::read_to_string(dir.join("a.txt")).unwrap(),
                format!("{CONTENT}two\n")
            );
        }
        // Before the path was whole the title was the tool's name (when the
        // presenter looked that early).
        let titles: Vec<&str> = events
            .iter()
            .filter_map(|e| match e {
                TaskEvent::Ask {
                    payload: Some(AskPayload::ToolArguments { tool, title, .. }),
                    ..
                } if tool == "Edit" => Some(title.as_str()),
                _ => None,
            })
            .collect();
        assert!(
            titles.iter().all(|t| ["Edit", "Edit: a.txt"].contains(t)),
            "{titles:?}"
        );
        assert_eq!(titles.last(), Some(&"Edit: a.txt"), "{titles:?}");
    }
}
