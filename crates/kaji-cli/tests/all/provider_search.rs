//! The provider's own web search only where it is known to work, through
//! the binary: a server at another base URL than the provider's own API
//! is never offered the server tool unless `[web_search] provider =
//! "native"` says so, and a server that rejects the tool (HTTP 400 naming
//! it) gets the request once more without it, and never again in the
//! session, with a warning; the task goes on. (The provider's own API,
//! where it is offered unasked, is decided by host in
//! `kaji_core::web_search`'s unit tests; the offer itself is what
//! `web_search_cli` and `web_search_history` test, with `native` set.)

use kaji_test_support::{Fault, Script, ScriptedModelServer, Turn};
use serde_json::{Value, json};

use crate::common::{Wire, exec_json, run};

/// Whether `body`'s `tools` hold the provider's search tool.
fn offers_server_search(body: &Value) -> bool {
    body["tools"].as_array().into_iter().flatten().any(|t| {
        t["type"]
            .as_str()
            .is_some_and(|kind| kind.starts_with("web_search"))
    })
}

/// Whether `body`'s `tools` hold kaji's own `WebSearch`.
fn offers_web_search_tool(body: &Value) -> bool {
    body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|t| t["name"] == "WebSearch" || t["function"]["name"] == "WebSearch")
}

#[tokio::test]
async fn a_custom_base_url_gets_no_server_search_tool() {
    for wire in [Wire::Anthropic, Wire::Responses] {
        let home = tempfile::tempdir().unwrap();
        let work = tempfile::tempdir().unwrap();
        let server = ScriptedModelServer::start(Script::new([
            Turn::tool_call("WebSearch", json!({"query": "kaji release notes"})),
            Turn::tool_call("AttemptCompletion", json!({"result": "Done."})),
        ]))
        .await;
        let mut cmd = exec_json(home.path(), work.path(), &server, wire);
        cmd.args(["--no-checkpoints", "--yolo", "search the web"]);
        let (code, lines, stderr) = run(cmd).await;
        assert_eq!(code, 0, "{wire:?}: {stderr}");
        let requests = server.requests();
        assert_eq!(requests.len(), 2, "{wire:?}: no search request of its own");
        for r in &requests {
            assert!(!offers_server_search(&r.body), "{wire:?}: {}", r.body);
            assert!(offers_web_search_tool(&r.body), "{wire:?}: {}", r.body);
        }
        // The call says how to turn the provider's search on.
        let result = lines
            .iter()
            .find(|l| l["type"] == "tool_result" && l["name"] == "WebSearch")
            .unwrap_or_else(|| panic!("{wire:?}: no WebSearch result in {lines:#?}"));
        let output = result["output"].as_str().unwrap_or_default();
        assert!(output.contains("provider = \"native\""), "{output}");
    }
}

/// The error each wire's server gives for a tool type it does not know.
fn rejection(wire: Wire) -> String {
    let message = "tools.0: Input tag 'web_search_20250305' found using 'type' does not match any of the expected tags: 'custom'";
    match wire {
        Wire::Anthropic => json!({"type": "error", "error": {"type": "invalid_request_error", "message": message}}),
        _ => json!({"error": {"message": "Hosted tool 'web_search' is not supported with this model.", "type": "invalid_request_error", "code": null}}),
    }
    .to_string()
}

#[tokio::test]
async fn a_server_that_rejects_the_search_tool_gets_one_retry_without_it() {
    for wire in [Wire::Anthropic, Wire::Responses] {
        let home = tempfile::tempdir().unwrap();
        let work = tempfile::tempdir().unwrap();
        std::fs::write(work.path().join("notes.md"), "notes\n").unwrap();
        crate::web_search_cli::configure_native(home.path());
        let server = ScriptedModelServer::start(Script::new([
            Turn::tool_call("Glob", json!({"pattern": "*.md"}))
                .with_fault(Fault::status_with_body(400, rejection(wire))),
            Turn::tool_call("AttemptCompletion", json!({"result": "Done."})),
        ]))
        .await;
        let mut cmd = exec_json(home.path(), work.path(), &server, wire);
        cmd.args(["--no-checkpoints", "--yolo", "look around"]);
        let (code, lines, stderr) = run(cmd).await;
        assert_eq!(code, 0, "{wire:?}: {stderr}\n{lines:#?}");
        let last = lines.iter().rev().find(|l| l["type"] == "result").unwrap();
        assert_eq!(last["status"], "completed", "{wire:?}: {last}");
        let requests = server.requests();
        // The rejected request, the same request without the tool, and
        // the next one, which does not offer it either.
        assert_eq!(requests.len(), 3, "{wire:?}");
        assert!(offers_server_search(&requests[0].body), "{wire:?}");
        assert_eq!(requests[1].turn, requests[0].turn, "{wire:?}: a retry");
        for r in &requests[1..] {
            assert!(!offers_server_search(&r.body), "{wire:?}: {}", r.body);
            assert!(offers_web_search_tool(&r.body), "{wire:?}: {}", r.body);
        }
        let warnings: Vec<&Value> = lines
            .iter()
            .filter(|l| {
                l.to_string()
                    .contains("rejected the provider's web search tool")
            })
            .collect();
        assert_eq!(warnings.len(), 1, "{wire:?}: {lines:#?}");
    }
}
