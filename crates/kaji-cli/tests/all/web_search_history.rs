//! The provider's own web search within the conversation, through the
//! binary: when the rules let `WebSearch` run without asking, Anthropic's
//! requests offer the server-side `web_search` tool and the Responses
//! API's its hosted `web_search` (in place of `WebSearch`); the reply's
//! search blocks stay in the history and go back in the next request
//! exactly as they came; `exec --json` and `kaji sessions show` show the
//! search as a `WebSearch` call and its result. When `WebSearch` would ask,
//! no search runs unasked: the requests offer `WebSearch` itself.

use kaji_test_support::{ScriptedModelServer, Turn};
use serde_json::{Value, json};

use crate::common::{Wire, exec_json, kaji, run};

/// A reply that searches, cites the result, and reads a file (so that a
/// second request follows); then the task completes.
fn script() -> kaji_test_support::Script {
    kaji_test_support::Script::new([
        Turn::text("Searching. ")
            .and_server_tool_use("web_search", json!({"query": "kaji release notes"}))
            .and_cited_text("Kaji 1.0 came out in 2026.")
            .and_tool_call("Glob", json!({"pattern": "*.md"})),
        Turn::tool_call("AttemptCompletion", json!({"result": "Done."})),
    ])
}

fn tool_names(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| {
            t["name"]
                .as_str()
                .or(t["type"].as_str())
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

/// Runs the script on `wire` with `flags`: the exec lines and the server.
async fn search(
    wire: Wire,
    flags: &[&str],
) -> (
    Vec<Value>,
    ScriptedModelServer,
    tempfile::TempDir,
    tempfile::TempDir,
) {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    // The scripted server is not the provider's own API.
    crate::web_search_cli::configure_native(home.path());
    let server = ScriptedModelServer::start(script()).await;
    let mut cmd = exec_json(home.path(), work.path(), &server, wire);
    cmd.args(["--no-checkpoints"])
        .args(flags)
        .arg("what is new in kaji?");
    let (code, lines, stderr) = run(cmd).await;
    assert_eq!(code, 0, "{stderr}\n{lines:#?}");
    (lines, server, home, work)
}

/// The `WebSearch` lines of type `kind` (`tool_use`, `tool_result`).
fn search_lines<'a>(lines: &'a [Value], kind: &str) -> Vec<&'a Value> {
    lines
        .iter()
        .filter(|l| l["type"] == kind && l["name"] == "WebSearch")
        .collect()
}

#[tokio::test]
async fn anthropic_search_blocks_go_back_byte_for_byte() {
    let (lines, server, home, work) = search(Wire::Anthropic, &["--allow", "WebSearch"]).await;
    let requests = server.requests();
    assert_eq!(requests.len(), 2, "{requests:#?}");
    // The first request offers the server tool in place of WebSearch.
    let tools = tool_names(&requests[0].body);
    assert!(tools.contains(&"web_search".to_string()), "{tools:?}");
    assert!(!tools.contains(&"WebSearch".to_string()), "{tools:?}");
    assert_eq!(
        requests[0].body["tools"][0],
        json!({"type": "web_search_20250305", "name": "web_search", "max_uses": 5})
    );
    // The second carries the reply's blocks as the server sent them: the
    // search (its input assembled from the deltas), its result, and the
    // text citing it, in their order.
    let raw = &requests[1].raw_body;
    let blocks = [
        r#"{"type":"text","text":"Searching. "}"#,
        r#"{"type":"server_tool_use","id":"srvtoolu_scripted_0_1","name":"web_search","input":{"query":"kaji release notes"}}"#,
        r#"{"type":"web_search_tool_result","tool_use_id":"srvtoolu_scripted_0_1","content":[{"type":"web_search_result","url":"https://example.com/","title":"Example","encrypted_content":"c2NyaXB0ZWQ=","page_age":null}]}"#,
        r#"{"type":"text","text":"Kaji 1.0 came out in 2026.","citations":[{"type":"web_search_result_location","url":"https://example.com/","title":"Example","encrypted_index":"aW5kZXg=","cited_text":"Kaji 1.0 came out in 2026."}]}"#,
    ];
    let mut at = 0;
    for block in blocks {
        let found = raw[at..]
            .find(block)
            .unwrap_or_else(|| panic!("{block}\nnot in order in\n{raw}"));
        at += found + block.len();
    }
    // exec --json shows the search as a WebSearch call and its result.
    let uses = search_lines(&lines, "tool_use");
    assert_eq!(uses.len(), 1, "{lines:#?}");
    assert_eq!(uses[0]["id"], "srvtoolu_scripted_0_1");
    assert_eq!(uses[0]["input"], json!({"query": "kaji release notes"}));
    let results = search_lines(&lines, "tool_result");
    assert_eq!(results.len(), 1, "{lines:#?}");
    assert_eq!(results[0]["id"], "srvtoolu_scripted_0_1");
    assert_eq!(results[0]["is_error"], false);
    let output = results[0]["output"].as_str().unwrap_or_default();
    assert!(
        output.contains("Example — https://example.com/"),
        "{output}"
    );
    // So does the saved session: the call and its result, summarised
    // (one hit: example.com's).
    let session = lines[0]["session_id"].as_str().unwrap_or_default();
    let out = kaji(home.path())
        .current_dir(work.path())
        .args(["sessions", "show", session])
        .output()
        .await
        .unwrap();
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(
        shown.contains("kaji release notes") && shown.contains("⎿ 1 result"),
        "{shown}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test]
async fn responses_search_items_go_back_as_they_came() {
    let (lines, server, _home, _work) = search(Wire::Responses, &["--yolo"]).await;
    let requests = server.requests();
    assert_eq!(requests.len(), 2, "{requests:#?}");
    let tools = &requests[0].body["tools"];
    assert!(
        tools
            .as_array()
            .is_some_and(|t| t.contains(&json!({"type": "web_search"}))),
        "{tools}"
    );
    assert!(!tool_names(&requests[0].body).contains(&"WebSearch".to_string()));
    assert_eq!(
        requests[0].body["include"],
        json!([
            "reasoning.encrypted_content",
            "web_search_call.action.sources"
        ])
    );
    // The item as the server sent it, less its id (stateless requests
    // cannot name stored items), after the text before it.
    let raw = &requests[1].raw_body;
    let item = r#"{"type":"web_search_call","status":"completed","action":{"type":"search","query":"kaji release notes","sources":[{"type":"url","url":"https://example.com/"}]}}"#;
    let text = r#"{"role":"assistant","content":"Searching. "}"#;
    let (Some(t), Some(i)) = (raw.find(text), raw.find(item)) else {
        panic!("{item}\nor\n{text}\nnot in\n{raw}");
    };
    assert!(t < i, "{raw}");
    assert!(!raw.contains("ws_scripted_0_1"), "{raw}");
    let uses = search_lines(&lines, "tool_use");
    assert_eq!(uses.len(), 1, "{lines:#?}");
    assert_eq!(uses[0]["input"], json!({"query": "kaji release notes"}));
    let results = search_lines(&lines, "tool_result");
    assert_eq!(results.len(), 1, "{lines:#?}");
    let output = results[0]["output"].as_str().unwrap_or_default();
    assert!(output.contains("https://example.com/"), "{output}");
}

#[tokio::test]
async fn a_search_that_would_ask_is_not_offered_to_the_provider() {
    // No rule allows WebSearch: exec cannot ask, so no search may run
    // unasked; the request offers WebSearch itself.
    let (_lines, server, _home, _work) = search(Wire::Anthropic, &[]).await;
    let tools = tool_names(&server.requests()[0].body);
    assert!(tools.contains(&"WebSearch".to_string()), "{tools:?}");
    assert!(!tools.contains(&"web_search".to_string()), "{tools:?}");
    assert!(server.requests()[0].body["tools"][0]["type"].is_null());
}

#[tokio::test]
async fn chat_completions_have_no_provider_search() {
    let (_lines, server, _home, _work) = search(Wire::OpenAi, &["--yolo"]).await;
    let body = &server.requests()[0].body;
    let tools: Vec<&str> = body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    assert!(tools.contains(&"WebSearch"), "{tools:?}");
    assert!(!body.to_string().contains("web_search_20250305"));
}
