//! The scripted model server over raw HTTP: framing of both wire formats,
//! recording, bad requests, and the stand-alone binary.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a failed expectation is a test failure"
)]

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use kaji_test_support::{Fault, Script, ScriptedModelServer, Turn, WireFormat};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Sends one HTTP/1.1 request and returns (status line, headers+body text).
async fn http(
    addr: std::net::SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String) {
    let mut socket = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut request = format!(
        "{method} {path} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\ncontent-length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        request.push_str(&format!("{k}: {v}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(body);
    socket.write_all(request.as_bytes()).await.unwrap();
    let mut response = Vec::new();
    socket.read_to_end(&mut response).await.unwrap();
    let text = String::from_utf8_lossy(&response).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, text)
}

/// The `data:` payloads of an SSE body.
fn data_lines(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(String::from)
        .collect()
}

#[tokio::test]
async fn anthropic_framing() {
    let server =
        ScriptedModelServer::start(Turn::text("Hi there").and_tool_call("Read", json!({"a": 1})))
            .await;
    let body =
        json!({"model": "m", "stream": true, "messages": [{"role": "user", "content": "x"}]});
    let (status, text) = http(
        server.addr(),
        "POST",
        "/v1/messages",
        &[
            ("x-api-key", "secret"),
            ("content-type", "application/json"),
        ],
        &body.to_string(),
    )
    .await;
    assert_eq!(status, 200);
    assert!(
        text.to_ascii_lowercase()
            .contains("content-type: text/event-stream")
    );
    let events: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("event: "))
        .collect();
    assert_eq!(events.first(), Some(&"message_start"));
    assert!(events.contains(&"ping"));
    assert_eq!(
        &events[events.len() - 2..],
        &["message_delta", "message_stop"]
    );
    assert!(text.contains("\"stop_reason\":\"tool_use\""));
    assert!(text.contains("input_json_delta"));
    let r = &server.requests()[0];
    assert_eq!(r.header("x-api-key"), Some("[redacted]"));
    assert!(!format!("{r:?}").contains("secret"));
    assert_eq!(r.format, Some(WireFormat::Anthropic));
}

#[tokio::test]
async fn openai_framing_and_usage_on_request() {
    let server = ScriptedModelServer::start([Turn::text("Hello"), Turn::text("again")]).await;
    let body =
        json!({"model": "m", "stream": true, "messages": [{"role": "user", "content": "x"}]});
    let (_, text) = http(
        server.addr(),
        "POST",
        "/v1/chat/completions",
        &[("authorization", "Bearer sk-1")],
        &body.to_string(),
    )
    .await;
    let data = data_lines(&text);
    assert_eq!(data.last().map(String::as_str), Some("[DONE]"));
    assert!(!text.contains("\"usage\""), "no usage unless asked for");
    let chunks: Vec<Value> = data[..data.len() - 1]
        .iter()
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    let content: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(content, "Hello");

    let body = json!({"model": "m", "stream": true, "stream_options": {"include_usage": true},
                      "messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "Hello"}, {"role": "user", "content": "y"}]});
    let (_, text) = http(
        server.addr(),
        "POST",
        "/v1/chat/completions",
        &[],
        &body.to_string(),
    )
    .await;
    assert!(text.contains("\"usage\""));
    assert!(text.contains("again"));
    let requests = server.requests();
    assert_eq!(
        requests[0].header("authorization"),
        Some("Bearer [redacted]")
    );
    assert_eq!(
        requests.iter().map(|r| r.turn).collect::<Vec<_>>(),
        vec![Some(0), Some(1)]
    );
}

#[tokio::test]
async fn bad_requests_get_clear_errors_and_are_recorded() {
    let server = ScriptedModelServer::start(Turn::text("x")).await;
    let (status, text) = http(server.addr(), "POST", "/v1/messages", &[], "{not json").await;
    assert_eq!(status, 400);
    assert!(text.contains("not JSON"), "{text}");
    let (status, text) = http(server.addr(), "POST", "/v1/messages", &[], "{\"model\": 1}").await;
    assert_eq!(status, 400);
    assert!(text.contains("messages"), "{text}");
    let (status, text) = http(server.addr(), "GET", "/v1/models", &[], "").await;
    assert_eq!(status, 404);
    assert!(text.contains("no route GET /v1/models"), "{text}");
    server.wait_for_requests(3).await;
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(requests[0].body, json!("{not json"));
    assert_eq!(requests[2].format, None);
}

#[tokio::test]
async fn faults_are_served_per_turn_in_order() {
    let server = ScriptedModelServer::start(
        Turn::text("ok").with_faults([Fault::status(429), Fault::HtmlErrorPage]),
    )
    .await;
    let body = json!({"messages": [{"role": "user", "content": "x"}]}).to_string();
    let (s1, _) = http(server.addr(), "POST", "/v1/messages", &[], &body).await;
    let (s2, t2) = http(server.addr(), "POST", "/v1/messages", &[], &body).await;
    let (s3, t3) = http(server.addr(), "POST", "/v1/messages", &[], &body).await;
    assert_eq!((s1, s2, s3), (429, 200, 200));
    assert!(t2.contains("text/html"));
    assert!(t3.contains("text/event-stream"));
    assert_eq!(
        server
            .requests()
            .iter()
            .map(|r| r.attempt)
            .collect::<Vec<_>>(),
        vec![1, 2, 3]
    );
}

#[tokio::test]
async fn wait_for_requests_wakes_on_arrival() {
    let server = ScriptedModelServer::start(Turn::text("x")).await;
    let addr = server.addr();
    let waiter = server.wait_for_requests(1);
    let client = tokio::spawn(async move {
        http(
            addr,
            "POST",
            "/v1/messages",
            &[],
            &json!({"messages": []}).to_string(),
        )
        .await
    });
    waiter.await;
    assert_eq!(server.requests().len(), 1);
    client.await.unwrap();
}

#[test]
fn standalone_binary_serves_a_script_file() {
    let dir = tempfile::tempdir().unwrap();
    let script_path = dir.path().join("script.json");
    let script = Script::new([Turn::text("from the binary")]);
    std::fs::write(&script_path, serde_json::to_string(&script).unwrap()).unwrap();

    let mut child = Command::new(env!("CARGO_BIN_EXE_kaji-scripted-model"))
        .arg("--script")
        .arg(&script_path)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    stdout.read_line(&mut first).unwrap();
    let base = first.trim().to_string();
    assert!(base.starts_with("http://127.0.0.1:"), "{base:?}");
    let addr: std::net::SocketAddr = base.trim_start_matches("http://").parse().unwrap();

    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (status, text) = runtime.block_on(http(
        addr,
        "POST",
        "/v1/chat/completions",
        &[],
        &json!({"messages": [{"role": "user", "content": "x"}]}).to_string(),
    ));
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(status, 200);
    let content: String = data_lines(&text)
        .iter()
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter_map(|c| {
            c["choices"][0]["delta"]["content"]
                .as_str()
                .map(String::from)
        })
        .collect();
    assert_eq!(content, "from the binary");
}

#[test]
fn standalone_binary_rejects_a_bad_script() {
    let dir = tempfile::tempdir().unwrap();
    let script_path = dir.path().join("bad.json");
    std::fs::write(&script_path, "{\"turns\": [{\"parts\": 5}]}").unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_kaji-scripted-model"))
        .arg("--script")
        .arg(&script_path)
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("bad.json") && stderr.contains("line 1"),
        "{stderr}"
    );
}

fn anthropic_body(assistant_turns: usize) -> String {
    let mut messages = vec![json!({"role": "user", "content": "x"})];
    for _ in 0..assistant_turns {
        messages.push(json!({"role": "assistant", "content": "a"}));
        messages.push(json!({"role": "user", "content": "u"}));
    }
    json!({"model": "m", "stream": true, "messages": messages}).to_string()
}

#[tokio::test]
async fn fixtures_on_the_wire() {
    let mut refusal = Turn::refusal("Not this.");
    refusal.refusal_category = Some("cyber".into());
    let server = ScriptedModelServer::start([
        Turn::text("hi").with_extra_fields(),
        refusal,
        Turn::text("a")
            .and_server_tool_use("web_search", json!({"q": 1}))
            .out_of_order(),
    ])
    .await;
    let (_, text) = http(
        server.addr(),
        "POST",
        "/v1/messages",
        &[],
        &anthropic_body(0),
    )
    .await;
    let data = data_lines(&text);
    assert!(data.len() > 5);
    for line in &data {
        assert!(line.contains("kaji_unknown_field"), "{line}");
    }
    // Inside the delta object too (whatever order serde_json keeps keys in).
    assert!(
        data.iter()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .any(|v| v["delta"].get("kaji_unknown_field").is_some()),
        "{text}"
    );
    let (_, text) = http(
        server.addr(),
        "POST",
        "/v1/messages",
        &[],
        &anthropic_body(1),
    )
    .await;
    assert!(
        data_lines(&text)
            .iter()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .any(|v| v["delta"]["stop_details"]
                == json!({"category": "cyber", "explanation": "Not this.", "type": "refusal"})),
        "{text}"
    );
    let (_, text) = http(
        server.addr(),
        "POST",
        "/v1/messages",
        &[],
        &anthropic_body(2),
    )
    .await;
    assert!(text.contains(r#""type":"server_tool_use""#), "{text}");
    assert!(
        text.contains(r#""type":"web_search_tool_result""#),
        "{text}"
    );
    assert!(
        !text.contains(r#""index":0"#),
        "out of order starts above 0: {text}"
    );
    let (_, text) = http(
        server.addr(),
        "POST",
        "/v1/chat/completions",
        &[],
        &anthropic_body(1),
    )
    .await;
    assert!(text.contains(r#""refusal":"Not this""#), "{text}");
    assert!(text.contains(r#""finish_reason":"stop""#), "{text}");
}

#[tokio::test]
async fn faults_on_every_request_and_context_limits() {
    let script = Script::new([Turn::text("only turn")])
        .with_fault_on_every_request(Fault::BreakAfterFirstContent)
        .with_max_request_bytes(400);
    let server = ScriptedModelServer::start(script).await;
    // Past the last turn: still the fault, not "script exhausted".
    let (status, text) = http(
        server.addr(),
        "POST",
        "/v1/messages",
        &[],
        &anthropic_body(3),
    )
    .await;
    assert_eq!(status, 200, "{text}");
    assert!(
        text.contains("text_delta") && !text.contains("message_stop"),
        "{text}"
    );
    let big = json!({"model": "m", "messages": [{"role": "user", "content": "y".repeat(1000)}]});
    let (status, text) = http(server.addr(), "POST", "/v1/messages", &[], &big.to_string()).await;
    assert_eq!(status, 400);
    assert!(text.contains("prompt is too long: 2"), "{text}");
    assert!(text.contains("tokens > 100 maximum"), "{text}");
    let (status, text) = http(
        server.addr(),
        "POST",
        "/v1/chat/completions",
        &[],
        &big.to_string(),
    )
    .await;
    assert_eq!(status, 400);
    assert!(text.contains("context_length_exceeded"), "{text}");
    assert_eq!(server.requests().len(), 3);
    assert_eq!(server.requests()[2].turn, None);
}

#[tokio::test]
async fn a_hold_waits_for_release() {
    let server =
        ScriptedModelServer::start(Turn::text("before").and_hold().and_text("after")).await;
    let addr = server.addr();
    let reader =
        tokio::spawn(
            async move { http(addr, "POST", "/v1/messages", &[], &anthropic_body(0)).await },
        );
    server.wait_for_holds(1).await;
    assert!(!reader.is_finished());
    server.release();
    let (_, text) = reader.await.unwrap();
    assert!(text.contains("before") && text.contains("after") && text.contains("message_stop"));
}

#[tokio::test]
async fn many_data_lines_make_one_event() {
    let server = ScriptedModelServer::start(Turn::text("x").with_fault(Fault::ManyDataLines {
        lines: 50,
        line_bytes: 10,
    }))
    .await;
    let (_, text) = http(
        server.addr(),
        "POST",
        "/v1/chat/completions",
        &[],
        &anthropic_body(0),
    )
    .await;
    assert_eq!(text.matches("\ndata: ").count(), 50 + 4, "{text}");
    assert!(text.contains("data: {\"choices\": [],\n"));
}

#[tokio::test]
async fn overlapping_requests_are_counted() {
    let server =
        ScriptedModelServer::start(Turn::text("before").and_hold().and_text("after")).await;
    let addr = server.addr();
    let post =
        move || async move { http(addr, "POST", "/v1/messages", &[], &anthropic_body(0)).await };
    // One after the other: never more than one in flight.
    server.release();
    server.release();
    post().await;
    post().await;
    assert_eq!(server.max_requests_in_flight(), 1);
    // A second request while the first is held: two at once.
    let first = tokio::spawn(post());
    server.wait_for_holds(3).await;
    let second = tokio::spawn(post());
    server.wait_for_holds(4).await;
    assert_eq!(server.max_requests_in_flight(), 2);
    server.release();
    server.release();
    first.await.unwrap();
    second.await.unwrap();
}

#[tokio::test]
async fn a_hold_inside_tool_arguments() {
    let turn = Turn::tool_call(
        "Write",
        json!({"file_path": "a.txt", "content": "x".repeat(200)}),
    )
    .with_chunk_size(10)
    .with_hold_in_arguments(50);
    for path in ["/v1/messages", "/v1/chat/completions"] {
        let server = ScriptedModelServer::start(turn.clone()).await;
        let addr = server.addr();
        let reader =
            tokio::spawn(async move { http(addr, "POST", path, &[], &anthropic_body(0)).await });
        server.wait_for_holds(1).await;
        assert!(!reader.is_finished(), "{path}");
        server.release();
        let (_, text) = reader.await.unwrap();
        assert!(text.contains(&"x".repeat(10)), "{path}: {text}");
        assert_eq!(server.holds_reached(), 1, "{path}");
    }
}
