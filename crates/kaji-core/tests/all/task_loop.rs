//! End-to-end tests of the Task state machine: the real loop, tools and
//! permissions, through a real provider over HTTP/SSE against the scripted
//! model server, for both providers and both tool protocols.

use crate::common;

use common::*;
use kaji_core::{PermissionMode, ToolProtocol};
use kaji_llm::ProviderKind;
use kaji_protocol::{AskKind, AskResponse, SayKind, TaskEvent, TaskStatus};
use kaji_test_support::{Fault, Script, ScriptedModelServer, Turn};
use serde_json::json;
use std::time::Duration;

use crate::common::{done, serve};

fn fix_script(protocol: ToolProtocol) -> Script {
    match protocol {
        ToolProtocol::Native => Script::new([
            Turn::text("Let me find the typo.")
                .and_tool_call("Grep", json!({"pattern": "Helo", "path": "."})),
            Turn::tool_call("Read", json!({"file_path": "greet.sh"})),
            Turn::text("Fixing it.").and_tool_call(
                "Edit",
                json!({"file_path": "greet.sh", "old_string": "Helo", "new_string": "Hello"}),
            ),
            Turn::tool_call("Bash", json!({"command": "sh greet.sh world"})),
            done("Fixed the greeting."),
        ]),
        ToolProtocol::Xml => Script::new([
            Turn::text(
                "Let me find the typo.\n<Grep>\n<pattern>Helo</pattern>\n<path>.</path>\n</Grep>",
            ),
            Turn::text(
                "<thinking>the file is greet.sh</thinking><Read><file_path>greet.sh</file_path></Read>",
            ),
            Turn::text(
                "Fixing it.<Edit><file_path>greet.sh</file_path><old_string>Helo</old_string><new_string>Hello</new_string></Edit>",
            ),
            Turn::text("<Bash><command>sh greet.sh world</command></Bash>"),
            Turn::text(
                "<AttemptCompletion><result>Fixed the greeting.</result></AttemptCompletion>",
            ),
        ]),
    }
}

async fn multi_turn_fix(kind: ProviderKind, protocol: ToolProtocol) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("greet.sh"), "echo \"Helo, $1\"\n").unwrap();
    let server = ScriptedModelServer::start(fix_script(protocol)).await;
    let (frontend, _rx) = RecordingFrontend::new(AskResponse::Approve);
    let task = task(
        &server,
        kind,
        protocol,
        PermissionMode::Default,
        dir.path(),
        frontend.clone(),
    );
    let outcome = task.run("Fix the greeting typo".into()).await;

    assert_eq!(
        outcome.status,
        TaskStatus::Completed,
        "events: {:#?}",
        frontend.events()
    );
    assert_eq!(outcome.result.as_deref(), Some("Fixed the greeting."));
    assert_eq!(outcome.turns, 5);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("greet.sh")).unwrap(),
        "echo \"Hello, $1\"\n"
    );

    let results = frontend.tool_results();
    let names: Vec<&str> = results.iter().map(|r| r.1.as_str()).collect();
    assert_eq!(names, ["Grep", "Read", "Edit", "Bash", "AttemptCompletion"]);
    assert!(results.iter().all(|r| !r.2), "no tool failed: {results:#?}");
    assert!(
        results[3].3.contains("Hello, world"),
        "bash output: {}",
        results[3].3
    );
    // Edit and Bash asked (default mode), Grep and Read did not.
    assert_eq!(
        frontend.ask_kinds(),
        [AskKind::Tool, AskKind::Command, AskKind::CompletionResult]
    );

    let requests = server.requests();
    assert_eq!(requests.len(), 5);
    for (turn, result) in results.iter().take(4).enumerate() {
        let body = &requests[turn + 1].body;
        match protocol {
            ToolProtocol::Native => {
                let sent = last_tool_results(body);
                assert_eq!(sent.len(), 1, "request {}: {body:#}", turn + 1);
                assert_eq!(sent[0].0, result.0, "the result goes back with the call id");
            }
            ToolProtocol::Xml => {
                let text = body.to_string();
                assert!(
                    text.contains(&format!("[{}] Result:", result.1)),
                    "request {}: {text}",
                    turn + 1
                );
            }
        }
    }
    if protocol == ToolProtocol::Xml {
        // No native tools offered; the system prompt describes them.
        let body = &requests[0].body;
        assert!(
            body.get("tools")
                .is_none_or(|t| t.as_array().is_none_or(|a| a.is_empty()))
        );
        assert!(body.to_string().contains("## Edit"));
        assert!(frontend.events().iter().any(|e| matches!(e, TaskEvent::Say { kind: SayKind::Reasoning, text, partial: false, .. } if text == "the file is greet.sh")));
    }
}

#[tokio::test]
async fn multi_turn_fix_anthropic_native() {
    multi_turn_fix(ProviderKind::Anthropic, ToolProtocol::Native).await;
}

#[tokio::test]
async fn multi_turn_fix_openai_native() {
    multi_turn_fix(ProviderKind::OpenAi, ToolProtocol::Native).await;
}

#[tokio::test]
async fn multi_turn_fix_openai_responses_native() {
    multi_turn_fix(ProviderKind::OpenAiResponses, ToolProtocol::Native).await;
}

#[tokio::test]
async fn multi_turn_fix_openai_responses_xml() {
    multi_turn_fix(ProviderKind::OpenAiResponses, ToolProtocol::Xml).await;
}

#[tokio::test]
async fn multi_turn_fix_anthropic_xml() {
    multi_turn_fix(ProviderKind::Anthropic, ToolProtocol::Xml).await;
}

#[tokio::test]
async fn multi_turn_fix_openai_xml() {
    multi_turn_fix(ProviderKind::OpenAi, ToolProtocol::Xml).await;
}

#[tokio::test]
async fn text_streams_as_partial_say_then_deltas() {
    let dir = tempfile::tempdir().unwrap();
    // The stream holds in the middle of the text: what was sent before the
    // hold must reach the front end as a partial say while it is held, and
    // the rest as deltas after it.
    let server = serve([Turn::text("Hello there, ")
        .with_chunk_size(4)
        .and_hold()
        .and_text("this is a long streamed text.")
        .and_tool_call("AttemptCompletion", json!({"result": "ok"}))])
    .await;
    let (frontend, mut rx) = RecordingFrontend::new(deny());
    let t = task(
        &server,
        ProviderKind::Anthropic,
        ToolProtocol::Native,
        PermissionMode::Default,
        dir.path(),
        frontend.clone(),
    );
    let run = tokio::spawn(t.run("hi".into()));
    // The hang guard: if nothing streams, no partial say comes while held.
    let early = tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(event) = rx.recv().await {
            if let TaskEvent::Say {
                kind: SayKind::Text,
                partial: true,
                text,
                ..
            } = event
            {
                return Some(text);
            }
        }
        None
    })
    .await;
    let early = early.ok().flatten();
    assert!(
        early
            .as_deref()
            .is_some_and(|t| "Hello there, ".starts_with(t) && !t.is_empty()),
        "no partial say while the stream was held: {early:?}"
    );
    server.release();
    let outcome = run.await.unwrap();
    assert_eq!(outcome.status, TaskStatus::Completed);
    let events = frontend.events();
    let mut streamed = String::new();
    let mut id = None;
    let mut deltas = 0;
    for e in &events {
        match e {
            TaskEvent::Say {
                id: i,
                kind: SayKind::Text,
                text,
                partial: true,
                ..
            } => {
                id = Some(*i);
                streamed.push_str(text);
            }
            // (Deltas of other messages: the tool call's partial ask.)
            TaskEvent::Delta { id: i, text } if Some(*i) == id => {
                streamed.push_str(text);
                deltas += 1;
            }
            TaskEvent::Say {
                id: i,
                kind: SayKind::Text,
                text,
                partial: false,
                ..
            } => {
                if let Some(partial_id) = id {
                    assert_eq!(*i, partial_id, "the final message replaces the partial one");
                }
                assert_eq!(text, "Hello there, this is a long streamed text.");
            }
            _ => {}
        }
    }
    assert!(
        id.is_some() && deltas > 0,
        "the text did not stream: {events:?}"
    );
    assert_eq!(streamed, "Hello there, this is a long streamed text.");
}

#[tokio::test]
async fn abort_mid_stream_keeps_a_resumable_history() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve([Turn::text("Hello there, this text stalls half way.")
        .with_chunk_size(4)
        .with_fault(Fault::Stall { after_bytes: 1200 })])
    .await;
    let (frontend, mut rx) = RecordingFrontend::new(deny());
    let t = task(
        &server,
        ProviderKind::Anthropic,
        ToolProtocol::Native,
        PermissionMode::Yolo,
        dir.path(),
        frontend.clone(),
    );
    let abort = t.abort_handle();
    let run = tokio::spawn(t.run("go".into()));
    // The partial text arrives while the stream is still open.
    loop {
        match rx.recv().await.expect("events") {
            TaskEvent::Say {
                kind: SayKind::Text,
                partial: true,
                text,
                ..
            } => {
                assert!("Hello there, this text stalls half way.".starts_with(&text));
                break;
            }
            TaskEvent::Finished { .. } => panic!("finished before streaming"),
            _ => {}
        }
    }
    abort.abort();
    let outcome = run.await.unwrap();
    assert_eq!(outcome.status, TaskStatus::Aborted);
    server.wait_for_aborted_streams(1).await;
    let last = outcome.history.last().expect("history");
    assert_eq!(last.role, kaji_protocol::Role::Assistant);
    assert!(
        last.text().contains("[Response interrupted by user]"),
        "{last:?}"
    );
}

#[tokio::test]
async fn no_tool_reply_is_nudged_and_counts_as_mistake_yolo_stops() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve([
        Turn::text("I think it is fine."),
        Turn::text("Still fine."),
        Turn::text("Really."),
        Turn::text("never reached"),
    ])
    .await;
    let (frontend, _rx) = RecordingFrontend::new(deny());
    let t = task(
        &server,
        ProviderKind::Anthropic,
        ToolProtocol::Native,
        PermissionMode::Yolo,
        dir.path(),
        frontend.clone(),
    );
    let outcome = t.run("check".into()).await;
    assert_eq!(outcome.status, TaskStatus::MistakeLimit);
    assert_eq!(server.requests().len(), 3);
    let second = server.requests()[1].body.to_string();
    assert!(second.contains("You did not use a tool"), "{second}");
    assert!(second.contains("AttemptCompletion") && second.contains("AskUser"));
    assert!(frontend.ask_kinds().is_empty(), "yolo never asks");
}

#[tokio::test]
async fn mistake_limit_asks_outside_yolo_and_continue_resets() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve([
        Turn::text("a"),
        Turn::text("b"),
        Turn::text("c"),
        Turn::text("d"),
        done("done"),
    ])
    .await;
    let (frontend, _rx) = RecordingFrontend::new(deny());
    // Go on after the first limit, stop at the second.
    frontend.push_answer(AskResponse::Reply {
        text: "use a tool please".into(),
    });
    let cfg = provider_config(&server, ProviderKind::OpenAi);
    let mut config = kaji_core::TaskConfig::new(
        dir.path().to_path_buf(),
        kaji_llm::build_provider(&cfg).unwrap(),
        "scripted-model".into(),
    );
    config.max_mistakes = 2;
    let t = kaji_core::Task::new(
        config,
        kaji_core::ToolExecutor::new(kaji_tools::builtin_tools()),
        frontend.clone(),
    );
    let outcome = t.run("check".into()).await;
    assert_eq!(outcome.status, TaskStatus::MistakeLimit);
    assert_eq!(
        frontend.ask_kinds(),
        [AskKind::MistakeLimitReached, AskKind::MistakeLimitReached]
    );
    assert_eq!(server.requests().len(), 4);
    assert!(
        server.requests()[2]
            .body
            .to_string()
            .contains("use a tool please")
    );
}

#[tokio::test]
async fn unknown_tool_and_bad_arguments_are_error_results_and_mistakes() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve([
        Turn::tool_call("NoSuchTool", json!({})),
        Turn::new().and_raw_tool_call("c-bad", "Read", "{not json"),
        Turn::tool_call("Read", json!({"wrong_param": 1})),
        done("never"),
    ])
    .await;
    let (frontend, _rx) = RecordingFrontend::new(deny());
    let t = task(
        &server,
        ProviderKind::Anthropic,
        ToolProtocol::Native,
        PermissionMode::Yolo,
        dir.path(),
        frontend.clone(),
    );
    let outcome = t.run("go".into()).await;
    assert_eq!(
        outcome.status,
        TaskStatus::MistakeLimit,
        "three mistakes in a row stop a yolo task"
    );
    let results = frontend.tool_results();
    assert_eq!(results.len(), 3);
    assert!(results.iter().all(|r| r.2));
    assert!(
        results[0].3.contains("unknown tool \"NoSuchTool\"") && results[0].3.contains("Read"),
        "{}",
        results[0].3
    );
    assert!(
        results[1].3.contains("c-bad") || results[1].3.contains("JSON"),
        "{}",
        results[1].3
    );
    assert!(results[2].3.contains("file_path"), "{}", results[2].3);
    // Each error went back to the model under its call id.
    let third = &server.requests()[2].body;
    assert_eq!(last_tool_results(third)[0].0, "c-bad");
}

#[tokio::test]
async fn rejected_tool_skips_the_rest_of_the_reply() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "a\n").unwrap();
    let server = serve([
        Turn::text("Writing then reading.")
            .and_tool_call_with_id("w1", "Write", json!({"file_path": "b.txt", "content": "b"}))
            .and_tool_call_with_id("r1", "Read", json!({"file_path": "a.txt"})),
        done("ok"),
    ])
    .await;
    let (frontend, _rx) = RecordingFrontend::new(AskResponse::Deny {
        feedback: Some("do not create files".into()),
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
    assert!(!dir.path().join("b.txt").exists());
    let results = frontend.tool_results();
    assert_eq!(results[0].0, "w1");
    assert!(results[0].3.contains("denied") && results[0].3.contains("do not create files"));
    // The Read after the rejected Write never runs: either the stream was
    // cut before it arrived, or it is answered as skipped.
    if let Some(r1) = results.iter().find(|r| r.0 == "r1") {
        assert!(r1.2 && r1.3.contains("was not run"), "{r1:?}");
    }
    let second = &server.requests()[1].body;
    assert!(
        second
            .to_string()
            .contains("[Response interrupted by user feedback]")
    );
    // Every tool use of the recorded assistant message has its result.
    let messages = second["messages"].as_array().unwrap();
    let assistant = &messages[messages.len() - 2];
    let used: Vec<String> = assistant["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["type"] == "tool_use")
        .map(|b| b["id"].as_str().unwrap().to_string())
        .collect();
    let sent: Vec<String> = last_tool_results(second).into_iter().map(|r| r.0).collect();
    assert_eq!(sent, used, "every tool use has a result");
    assert_eq!(used[0], "w1");
}

#[tokio::test]
async fn empty_replies_are_retried_then_fail_when_nobody_answers() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve([Turn::text("never").with_faults([
        Fault::Empty,
        Fault::Empty,
        Fault::Empty,
        Fault::Empty,
    ])])
    .await;
    let (frontend, _rx) = RecordingFrontend::new(deny());
    let t = task(
        &server,
        ProviderKind::Anthropic,
        ToolProtocol::Native,
        PermissionMode::Yolo,
        dir.path(),
        frontend.clone(),
    );
    let outcome = t.run("go".into()).await;
    assert_eq!(outcome.status, TaskStatus::Failed);
    assert_eq!(
        server.requests().len(),
        4,
        "the first try and three retries"
    );
    assert_eq!(frontend.ask_kinds(), [AskKind::ApiReqFailed]);
}

#[tokio::test]
async fn empty_reply_then_success() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve([done("fine").with_faults([Fault::Empty, Fault::Empty])]).await;
    let (frontend, _rx) = RecordingFrontend::new(deny());
    let t = task(
        &server,
        ProviderKind::OpenAi,
        ToolProtocol::Native,
        PermissionMode::Yolo,
        dir.path(),
        frontend.clone(),
    );
    let outcome = t.run("go".into()).await;
    assert_eq!(outcome.status, TaskStatus::Completed);
    assert_eq!(outcome.turns, 1);
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn max_turns_stops_the_task() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "a\n").unwrap();
    let server =
        serve((0..5).map(|_| Turn::tool_call("Read", json!({"file_path": "a.txt"})))).await;
    let (frontend, _rx) = RecordingFrontend::new(deny());
    let cfg = provider_config(&server, ProviderKind::Anthropic);
    let mut config = kaji_core::TaskConfig::new(
        dir.path().to_path_buf(),
        kaji_llm::build_provider(&cfg).unwrap(),
        "scripted-model".into(),
    );
    config.max_turns = Some(2);
    let t = kaji_core::Task::new(
        config,
        kaji_core::ToolExecutor::new(kaji_tools::builtin_tools()),
        frontend.clone(),
    );
    let outcome = t.run("loop".into()).await;
    assert_eq!(outcome.status, TaskStatus::MaxTurns);
    assert_eq!(outcome.turns, 2);
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn server_garbage_fails_the_task_with_a_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve([Turn::text("x").with_faults([
        Fault::HtmlErrorPage,
        Fault::HtmlErrorPage,
        Fault::HtmlErrorPage,
        Fault::HtmlErrorPage,
    ])])
    .await;
    let (frontend, _rx) = RecordingFrontend::new(deny());
    let t = task(
        &server,
        ProviderKind::Anthropic,
        ToolProtocol::Native,
        PermissionMode::Yolo,
        dir.path(),
        frontend.clone(),
    );
    let outcome = t.run("go".into()).await;
    assert_eq!(outcome.status, TaskStatus::Failed);
    let msg = outcome.result.unwrap_or_default();
    assert!(
        msg.contains("anthropic") || msg.contains("127.0.0.1"),
        "names the provider or URL: {msg}"
    );
}

#[tokio::test]
async fn retries_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve([done("ok").with_faults([Fault::rate_limited_ms(1)])]).await;
    let (frontend, _rx) = RecordingFrontend::new(deny());
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
    assert!(frontend.events().iter().any(|e| matches!(
        e,
        TaskEvent::Say {
            kind: SayKind::ApiReqRetried,
            ..
        }
    )));
}

#[tokio::test]
async fn exec_style_denial_tells_the_model_why() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve([
        Turn::tool_call("Bash", json!({"command": "touch created"})),
        done("could not"),
    ])
    .await;
    let (frontend, _rx) = RecordingFrontend::new(AskResponse::Deny {
        feedback: Some("no user to approve in exec".into()),
    });
    let t = task(
        &server,
        ProviderKind::OpenAi,
        ToolProtocol::Native,
        PermissionMode::Default,
        dir.path(),
        frontend.clone(),
    );
    let outcome = t.run("go".into()).await;
    assert_eq!(outcome.status, TaskStatus::Completed);
    assert!(!dir.path().join("created").exists());
    let sent = last_tool_results(&server.requests()[1].body);
    assert!(sent[0].1.contains("no user to approve in exec"), "{sent:?}");
}

#[tokio::test]
async fn plan_mode_refuses_writes_and_commands_but_reads() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "alpha\n").unwrap();
    let server = serve([
        Turn::tool_call("Write", json!({"file_path": "b.txt", "content": "b"})),
        Turn::tool_call("Bash", json!({"command": "touch c"})),
        Turn::tool_call("Grep", json!({"pattern": "alpha"})),
        Turn::tool_call("Read", json!({"file_path": "a.txt"})),
        done("plan"),
    ])
    .await;
    let (frontend, _rx) = RecordingFrontend::new(AskResponse::Approve);
    let t = task(
        &server,
        ProviderKind::Anthropic,
        ToolProtocol::Native,
        PermissionMode::Plan,
        dir.path(),
        frontend.clone(),
    );
    let outcome = t.run("go".into()).await;
    assert_eq!(outcome.status, TaskStatus::Completed);
    let r = frontend.tool_results();
    assert!(r[0].2 && r[0].3.contains("plan mode"), "{:?}", r[0]);
    assert!(r[1].2 && r[1].3.contains("plan mode"), "{:?}", r[1]);
    assert!(!r[2].2 && !r[3].2);
    assert!(!dir.path().join("b.txt").exists() && !dir.path().join("c").exists());
    assert!(server.requests()[0].body.to_string().contains("plan mode"));
}

#[tokio::test]
async fn abort_while_an_approval_is_pending() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve([Turn::tool_call("Bash", json!({"command": "touch never"}))]).await;
    let (frontend, mut rx) = RecordingFrontend::new(deny());
    *frontend.never_answer.lock().unwrap() = Some(AskKind::Command);
    let t = task(
        &server,
        ProviderKind::Anthropic,
        ToolProtocol::Native,
        PermissionMode::Default,
        dir.path(),
        frontend.clone(),
    );
    let abort = t.abort_handle();
    let run = tokio::spawn(t.run("go".into()));
    loop {
        if let TaskEvent::Ask {
            kind: AskKind::Command,
            ..
        } = rx.recv().await.unwrap()
        {
            break;
        }
    }
    abort.abort();
    let outcome = run.await.unwrap();
    assert_eq!(outcome.status, TaskStatus::Aborted);
    assert!(!dir.path().join("never").exists());
}

#[tokio::test]
async fn a_task_continues_an_earlier_conversation() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "alpha\n").unwrap();
    for kind in [ProviderKind::Anthropic, ProviderKind::OpenAi] {
        let server = serve([
            Turn::tool_call("Read", json!({"file_path": "a.txt"})),
            done("it says alpha"),
            done("it said alpha, as I read before"),
        ])
        .await;
        let (frontend, _rx) = RecordingFrontend::new(deny());
        let first = task(
            &server,
            kind,
            ToolProtocol::Native,
            PermissionMode::Default,
            dir.path(),
            frontend.clone(),
        )
        .run("what is in a.txt?".into())
        .await;
        assert_eq!(first.status, TaskStatus::Completed);
        let cfg = provider_config(&server, kind);
        let mut config = kaji_core::TaskConfig::new(
            dir.path().to_path_buf(),
            kaji_llm::build_provider(&cfg).unwrap(),
            "scripted-model".into(),
        );
        config.history = first.history.clone();
        let second = kaji_core::Task::new(
            config,
            kaji_core::ToolExecutor::new(kaji_tools::builtin_tools()),
            frontend,
        )
        .run("and what did it say?".into())
        .await;
        assert_eq!(second.status, TaskStatus::Completed, "{kind:?}");
        assert_eq!(
            second.result.as_deref(),
            Some("it said alpha, as I read before")
        );
        let body = server.requests()[2].body.to_string();
        assert!(
            body.contains("what is in a.txt?") && body.contains("and what did it say?"),
            "{body}"
        );
        // Roles still alternate: the new prompt joined the last user message.
        let roles: Vec<String> = server.requests()[2].body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["role"].as_str().unwrap().to_string())
            .collect();
        for pair in roles.windows(2) {
            // OpenAI puts `tool` messages after an assistant message, so
            // assistant follows tool; never two user messages in a row.
            assert!(
                !(pair[0] == "user" && pair[1] == "user"),
                "{kind:?}: {roles:?}"
            );
            if kind == ProviderKind::Anthropic {
                assert_ne!(pair[0], pair[1], "{kind:?}: {roles:?}");
            }
        }
    }
}
