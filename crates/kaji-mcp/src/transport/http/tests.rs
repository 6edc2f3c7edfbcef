//! The streamable HTTP transport against a tiny in-process HTTP/1.1 server
//! (one request a connection, answered by a script): headers, session ids,
//! JSON and event-stream replies, 202s, error statuses and broken streams.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

use super::connect;
use crate::jsonrpc::RequestError;
use crate::transport::Link;

/// One request the fake server received.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    headers: HashMap<String, String>,
    body: Value,
}

/// One reply: status, content type, extra headers, body bytes.
struct Reply {
    status: u16,
    content_type: &'static str,
    headers: Vec<(&'static str, String)>,
    body: Vec<u8>,
}

fn json_reply(body: Value) -> Reply {
    Reply {
        status: 200,
        content_type: "application/json",
        headers: Vec::new(),
        body: body.to_string().into_bytes(),
    }
}

fn sse_reply(events: &[Value]) -> Reply {
    let body: String = events
        .iter()
        .map(|e| format!("event: message\ndata: {e}\n\n"))
        .collect();
    Reply {
        status: 200,
        content_type: "text/event-stream",
        headers: Vec::new(),
        body: body.into_bytes(),
    }
}

fn status_reply(status: u16, content_type: &'static str, body: &str) -> Reply {
    Reply {
        status,
        content_type,
        headers: Vec::new(),
        body: body.as_bytes().to_vec(),
    }
}

type Script = Arc<dyn Fn(&Seen) -> Reply + Send + Sync>;

/// Serves `script` on a free local port; returns the URL and the requests
/// as they arrive.
async fn serve(script: Script) -> (String, mpsc::UnboundedReceiver<Seen>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let (seen, log) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let (script, seen) = (script.clone(), seen.clone());
            tokio::spawn(async move {
                let _ = answer_one(stream, &script, &seen).await;
            });
        }
    });
    (url, log)
}

async fn answer_one(
    stream: tokio::net::TcpStream,
    script: &Script,
    log: &mpsc::UnboundedSender<Seen>,
) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).await?;
    let method = line.split_whitespace().next().unwrap_or("").to_string();
    let mut headers = HashMap::new();
    loop {
        line.clear();
        reader.read_line(&mut line).await?;
        let Some((name, value)) = line.trim_end().split_once(':') else {
            break;
        };
        headers.insert(name.to_ascii_lowercase(), value.trim().to_string());
    }
    let length: usize = headers
        .get("content-length")
        .and_then(|l| l.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; length];
    reader.read_exact(&mut body).await?;
    let seen = Seen {
        method,
        headers,
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
    };
    let _ = log.send(seen.clone());
    let reply = script(&seen);
    let mut head = format!(
        "HTTP/1.1 {} X\r\ncontent-type: {}\r\ncontent-length: {}\r\nconnection: close\r\n",
        reply.status,
        reply.content_type,
        reply.body.len()
    );
    for (name, value) in &reply.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    let mut stream = reader.into_inner();
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(&reply.body).await?;
    stream.shutdown().await
}

fn result_for(seen: &Seen, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": seen.body["id"], "result": result})
}

fn link(url: &str) -> Link {
    let headers = BTreeMap::from([("X-Team".to_string(), "kaji".to_string())]);
    connect("remote", url, &headers).unwrap()
}

/// A server with a session: `initialize` answers JSON with a session id,
/// notifications 202, `tools/list` an event stream with a notification
/// and a ping before the response.
fn session_server() -> Script {
    Arc::new(|seen: &Seen| match seen.body["method"].as_str() {
        Some("initialize") => {
            let mut reply = json_reply(result_for(
                seen,
                json!({
                "protocolVersion": "2025-06-18", "capabilities": {"tools": {}}}),
            ));
            reply
                .headers
                .push(("mcp-session-id", "sess-42".to_string()));
            reply
        }
        Some("tools/list") => sse_reply(&[
            json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}),
            json!({"jsonrpc": "2.0", "id": "srv-1", "method": "ping"}),
            result_for(seen, json!({"tools": [{"name": "echo"}]})),
        ]),
        _ if seen.method == "DELETE" => status_reply(200, "text/plain", ""),
        _ => status_reply(202, "text/plain", ""),
    })
}

#[tokio::test]
async fn a_session_is_kept_and_an_event_stream_reply_is_read() {
    let (url, mut log) = serve(session_server()).await;
    let mut link = link(&url);
    let info = link.peer.initialize().await.unwrap();
    let http = link.http.clone().unwrap();
    http.set_protocol_version(&info.protocol_version);
    assert_eq!(http.session_id().as_deref(), Some("sess-42"));
    let tools = link.peer.list_all_tools().await.unwrap();
    assert_eq!(tools[0].name, "echo");
    let mut notifications = link.notifications.take().unwrap();
    let notification = notifications.recv().await.unwrap();
    assert_eq!(notification.method, "notifications/tools/list_changed");
    let mut seen = Vec::new();
    for _ in 0..4 {
        seen.push(log.recv().await.unwrap());
    }
    // The ping's answer is posted by a task of its own, after the listing.
    assert_eq!(
        seen[3].body,
        json!({"jsonrpc": "2.0", "id": "srv-1", "result": {}})
    );
    link.close("done", std::time::Duration::from_secs(60)).await;
    let delete = log.recv().await.unwrap();
    assert_eq!(delete.method, "DELETE");
    assert_eq!(delete.headers["mcp-session-id"], "sess-42");
    let methods: Vec<&str> = seen[..3]
        .iter()
        .map(|s| s.body["method"].as_str().unwrap())
        .collect();
    assert_eq!(
        methods,
        ["initialize", "notifications/initialized", "tools/list"]
    );
    let init = &seen[0];
    assert_eq!(
        init.headers["accept"],
        "application/json, text/event-stream"
    );
    assert_eq!(init.headers["content-type"], "application/json");
    assert_eq!(init.headers["x-team"], "kaji");
    assert!(!init.headers.contains_key("mcp-session-id"), "{init:?}");
    assert!(
        !init.headers.contains_key("mcp-protocol-version"),
        "{init:?}"
    );
    for later in &seen[1..] {
        assert_eq!(later.headers["mcp-session-id"], "sess-42", "{later:?}");
        assert_eq!(later.headers["x-team"], "kaji", "{later:?}");
    }
    assert_eq!(seen[2].headers["mcp-protocol-version"], "2025-06-18");
}

#[tokio::test]
async fn error_statuses_say_what_the_server_said() {
    let script: Script = Arc::new(|seen: &Seen| match seen.body["params"]["name"].as_str() {
        Some("rpc") => status_reply(
            400,
            "application/json",
            &json!({"jsonrpc": "2.0", "id": seen.body["id"],
                "error": {"code": -32602, "message": "bad arguments"}})
            .to_string(),
        ),
        Some("html") => status_reply(502, "text/html", "<h1>Bad Gateway</h1>"),
        Some("anonymous") => status_reply(
            400,
            "application/json",
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"No valid session ID"}}"#,
        ),
        _ => status_reply(404, "text/plain", ""),
    });
    let (url, _log) = serve(script).await;
    let link = link(&url);
    let err = link.peer.call_tool("rpc", None).await.unwrap_err();
    assert!(
        matches!(&err, RequestError::Server { code: -32602, message } if message == "bad arguments"),
        "{err:?}"
    );
    let err = link
        .peer
        .call_tool("html", None)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(&format!("the server answered POST {url} with HTTP 502")),
        "{err}"
    );
    assert!(err.contains("<h1>Bad Gateway</h1>"), "{err}");
    let err = link
        .peer
        .call_tool("anonymous", None)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("HTTP 400 Bad Request: No valid session ID"),
        "{err}"
    );
    // No session yet: a 404 is an error, not the end of the connection.
    let err = link
        .peer
        .call_tool("missing", None)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("HTTP 404"), "{err}");
    assert!(!link.peer.is_closed());
}

#[tokio::test]
async fn broken_and_answerless_event_streams_are_errors() {
    let script: Script = Arc::new(|seen: &Seen| match seen.body["params"]["name"].as_str() {
        Some("garbled") => Reply {
            status: 200,
            content_type: "text/event-stream",
            headers: Vec::new(),
            body: b"data: \xff\xfe\n\n".to_vec(),
        },
        Some("silent") => {
            sse_reply(&[json!({"jsonrpc": "2.0", "method": "notifications/progress"})])
        }
        Some("text") => status_reply(200, "text/plain", "hello"),
        _ => sse_reply(&[result_for(seen, json!({"content": []}))]),
    });
    let (url, _log) = serve(script).await;
    let link = link(&url);
    let err = link
        .peer
        .call_tool("garbled", None)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("malformed event stream") && err.contains("not UTF-8"),
        "{err}"
    );
    let err = link
        .peer
        .call_tool("silent", None)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("ended without the answer"), "{err}");
    let err = link
        .peer
        .call_tool("text", None)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("with `text/plain` instead of JSON or an event stream"),
        "{err}"
    );
    let ok = link.peer.call_tool("fine", None).await.unwrap();
    assert!(ok.content.is_empty());
}

#[tokio::test]
async fn reserved_and_invalid_headers_are_refused_up_front() {
    let headers = BTreeMap::from([("Mcp-Session-Id".to_string(), "x".to_string())]);
    let Err(err) = connect("remote", "http://127.0.0.1:9/mcp", &headers) else {
        panic!("a reserved header was accepted");
    };
    assert!(
        err.contains("`Mcp-Session-Id` is set by the MCP transport itself"),
        "{err}"
    );
    let headers = BTreeMap::from([("Bad Name".to_string(), "x".to_string())]);
    let Err(err) = connect("remote", "http://127.0.0.1:9/mcp", &headers) else {
        panic!("an invalid header was accepted");
    };
    assert!(err.contains("invalid header name `Bad Name`"), "{err}");
}

#[tokio::test]
async fn an_expired_session_ends_the_connection() {
    let script: Script = Arc::new(|seen: &Seen| match seen.body["method"].as_str() {
        Some("initialize") => {
            let mut reply = json_reply(result_for(seen, json!({"capabilities": {}})));
            reply.headers.push(("mcp-session-id", "old".to_string()));
            reply
        }
        Some("notifications/initialized") => status_reply(202, "text/plain", ""),
        _ => status_reply(
            404,
            "application/json",
            r#"{"error":{"message":"Session not found"}}"#,
        ),
    });
    let (url, _log) = serve(script).await;
    let link = link(&url);
    link.peer.initialize().await.unwrap();
    let err = link
        .peer
        .call_tool("x", None)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("Session not found"), "{err}");
    assert!(link.peer.is_closed());
    let err = link
        .peer
        .call_tool("x", None)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("the server ended the HTTP session (HTTP 404 Not Found: Session not found)"),
        "{err}"
    );
}
