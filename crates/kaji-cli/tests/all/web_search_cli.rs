//! `WebSearch` through the binary: the provider's own search (Anthropic's
//! server-side tool, the Responses API's hosted tool) spoken by the
//! scripted model server, a configured SearXNG backend (a local fake, and
//! one that is down), no search at all, and a deny rule.

use std::path::Path;
use std::sync::{Arc, Mutex};

use kaji_test_support::{AgentScript, Script, ScriptedModelServer, Turn};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;

use crate::common::{self, Wire, done, exec_json, serve, tool_results};

fn exec(home: &Path, work: &Path, server: &ScriptedModelServer, wire: Wire) -> Command {
    let mut cmd = exec_json(home, work, server, wire);
    cmd.args(["--no-checkpoints", "--yolo", "search the web"]);
    cmd
}

/// Runs `cmd`; the exit code and the `tool_result` lines of `WebSearch`.
async fn run(cmd: Command) -> (i32, Vec<Value>, String) {
    let (code, lines, stderr) = common::run(cmd).await;
    let results = tool_results(&lines)
        .into_iter()
        .filter(|l| l["name"] == "WebSearch")
        .collect();
    (code, results, stderr)
}

fn search_turns() -> Script {
    let mut script = Script::new([
        Turn::tool_call("WebSearch", json!({"query": "kaji release notes"})),
        done("Done."),
    ]);
    // The provider's search request (its own system prompt): it searches,
    // then writes.
    script.agents.push(AgentScript {
        marker: "You perform web searches".into(),
        script: Script::new([Turn::text("Searching. ")
            .and_server_tool_use("web_search", json!({"query": "kaji release notes"}))
            .and_text("Kaji 1.0 came out in 2026.")]),
    });
    script
}

fn content(result: &Value) -> String {
    result["output"]
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| result.to_string())
}

async fn native(wire: Wire, tool: Value) {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    // The scripted server is not the provider's own API: its search is
    // used when the settings say so.
    configure_native(home.path());
    let server = ScriptedModelServer::start(search_turns()).await;
    let (code, results, stderr) = run(exec(home.path(), work.path(), &server, wire)).await;
    assert_eq!(code, 0, "{stderr}");
    let requests = server.requests();
    let summary: Vec<String> = requests
        .iter()
        .map(|r| {
            let last = r
                .messages()
                .last()
                .map(|m| m.to_string())
                .unwrap_or_default();
            format!("turn {:?}: {}", r.turn, &last[..last.len().min(300)])
        })
        .collect();
    assert_eq!(requests.len(), 3, "{summary:#?}");
    // The search request offers only the provider's tool, and not the
    // conversation: only the query.
    assert_eq!(requests[1].body["tools"], json!([tool]));
    let asked = requests[1].messages().to_vec();
    assert_eq!(asked.len(), 1, "{asked:#?}");
    assert!(
        asked[0].to_string().contains("kaji release notes"),
        "{asked:#?}"
    );
    assert_eq!(results.len(), 1, "{results:#?}");
    let text = content(&results[0]);
    assert!(text.contains("https://example.com/"), "{text}");
    assert!(text.contains("Kaji 1.0 came out in 2026."), "{text}");
    // The model's next request carries the result.
    let last = requests[2].messages().last().unwrap().to_string();
    assert!(last.contains("https://example.com/"), "{last}");
}

#[tokio::test]
async fn anthropic_server_side_search() {
    native(
        Wire::Anthropic,
        json!({"type": "web_search_20250305", "name": "web_search", "max_uses": 5}),
    )
    .await;
}

#[tokio::test]
async fn responses_hosted_search() {
    native(Wire::Responses, json!({"type": "web_search"})).await;
}

#[tokio::test]
async fn no_search_says_how_to_enable_it() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let server = serve([
        Turn::tool_call("WebSearch", json!({"query": "kaji release notes"})),
        done("Done."),
    ])
    .await;
    let (code, results, stderr) = run(exec(home.path(), work.path(), &server, Wire::OpenAi)).await;
    assert_eq!(code, 0, "{stderr}");
    let text = content(&results[0]);
    assert!(
        text.contains("[web_search]") && text.contains("provider = \"searxng\""),
        "{text}"
    );
    assert_eq!(server.requests().len(), 2);
}

/// A fake SearXNG: answers every request with `body` (status 200) and
/// records the request lines.
async fn fake_searxng(body: Value) -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let mut buf = vec![0u8; 8192];
            let mut got = Vec::new();
            while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                match sock.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                }
            }
            let head = String::from_utf8_lossy(&got);
            log.lock()
                .unwrap()
                .push(head.lines().next().unwrap_or("").to_string());
            let body = body.to_string();
            let reply = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = sock.write_all(reply.as_bytes()).await;
        }
    });
    (url, seen)
}

/// `[web_search] provider = "native"` in the user's settings.
pub fn configure_native(home: &Path) {
    let dir = home.join("kaji-home");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("config.toml"),
        "[web_search]\nprovider = \"native\"\n",
    )
    .unwrap();
}

fn configure(home: &Path, url: &str) {
    let dir = home.join("kaji-home");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("config.toml"),
        format!("[web_search]\nprovider = \"searxng\"\nurl = \"{url}\"\n"),
    )
    .unwrap();
}

#[tokio::test]
async fn searxng_backend_with_domain_filters() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let (url, seen) = fake_searxng(json!({"results": [
        {"url": "https://docs.rs/tokio", "title": "tokio - Rust", "content": "An async runtime."},
        {"url": "https://spam.example/tokio", "title": "Spam", "content": "Buy now."},
        {"url": "https://blog.docs.rs/x", "title": "Blocked", "content": "No."}
    ]}))
    .await;
    configure(home.path(), &url);
    let server = serve([
        Turn::tool_call(
            "WebSearch",
            json!({"query": "tokio runtime", "allowed_domains": ["docs.rs"], "blocked_domains": ["blog.docs.rs"]}),
        ),
        done("Done."),
    ])
    .await;
    // Anthropic has a search of its own; the configured backend wins.
    let (code, results, stderr) =
        run(exec(home.path(), work.path(), &server, Wire::Anthropic)).await;
    assert_eq!(code, 0, "{stderr}");
    let text = content(&results[0]);
    assert!(
        text.contains("https://docs.rs/tokio") && text.contains("An async runtime."),
        "{text}"
    );
    assert!(!text.contains("spam.example"), "{text}");
    assert!(!text.contains("blog.docs.rs"), "{text}");
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert!(
        seen[0].starts_with("GET /search?q=tokio+runtime&format=json"),
        "{seen:?}"
    );
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn a_backend_that_is_down_is_a_clear_tool_error() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    // A port nothing listens on: bound, then closed.
    let url = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    configure(home.path(), &url);
    let server = serve([
        Turn::tool_call("WebSearch", json!({"query": "tokio runtime"})),
        done("Done."),
    ])
    .await;
    let (code, results, stderr) = run(exec(home.path(), work.path(), &server, Wire::OpenAi)).await;
    assert_eq!(code, 0, "{stderr}");
    let text = content(&results[0]);
    assert!(
        text.contains("WebSearch failed") && text.contains("cannot connect") && text.contains(&url),
        "{text}"
    );
}

#[tokio::test]
async fn a_deny_rule_refuses_the_search() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let (url, seen) = fake_searxng(json!({"results": []})).await;
    configure(home.path(), &url);
    let config = home.path().join("kaji-home/config.toml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str("\n[permissions]\ndeny = [\"WebSearch\"]\n");
    std::fs::write(&config, text).unwrap();
    let server = serve([
        Turn::tool_call("WebSearch", json!({"query": "tokio runtime"})),
        done("Done."),
    ])
    .await;
    let (code, results, stderr) = run(exec(home.path(), work.path(), &server, Wire::OpenAi)).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(results[0]["is_error"], json!(true), "{results:#?}");
    assert!(seen.lock().unwrap().is_empty());
}
