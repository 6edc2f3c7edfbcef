//! `kaji acp` driven by a client nobody here wrote: the official ACP
//! TypeScript SDK (`tests/acp-client/client.mjs`), against the scripted
//! model server. Also the protocol errors, spoken as raw JSON-RPC lines,
//! and a client that goes away mid-turn.

use std::path::{Path, PathBuf};

use kaji_test_support::{ScriptedModelServer, Turn};
use serde_json::{Value, json};

use crate::common::acp::{Raw, client, client_with, text_of, updates};

use crate::common::{done, serve};

fn canonical(p: &Path) -> PathBuf {
    p.canonicalize().unwrap()
}

#[tokio::test]
async fn a_prompt_asks_permission_and_an_edit_arrives_as_a_diff() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    std::fs::write(work.path().join("a.txt"), "alpha\n").unwrap();
    let server = serve([
        Turn::reasoning("The file says alpha.")
            .and_text("Changing it.")
            .and_tool_call(
                "Edit",
                json!({"file_path": "a.txt", "old_string": "alpha", "new_string": "omega"}),
            ),
        Turn::tool_call("Write", json!({"file_path": "b.txt", "content": "beta\n"})),
        done("Done"),
    ])
    .await;
    let log = client(
        "prompt",
        home.path(),
        work.path(),
        &server,
        &[
            ("ACP_PROMPT", "edit a.txt"),
            ("ACP_ANSWERS", "allow_once,reject_once"),
        ],
    )
    .await;
    let init = &log["responses"]["initialize"];
    assert_eq!(init["agentCapabilities"]["loadSession"], true);
    assert_eq!(
        init["agentCapabilities"]["promptCapabilities"]["embeddedContext"],
        true
    );
    assert_eq!(log["responses"]["new"]["modes"]["currentModeId"], "default");
    assert_eq!(log["responses"]["prompt"]["stopReason"], "end_turn");
    assert_eq!(text_of(&log, "agent_thought_chunk"), "The file says alpha.");
    assert!(text_of(&log, "agent_message_chunk").starts_with("Changing it."));

    let calls = updates(&log, "tool_call");
    let edit = calls
        .iter()
        .find(|c| c["kind"] == "edit" && c["title"].as_str().unwrap().starts_with("Edit"))
        .expect("an edit tool call");
    let a = canonical(work.path()).join("a.txt");
    assert_eq!(edit["locations"][0]["path"], a.to_str().unwrap());
    assert_eq!(edit["content"][0]["type"], "diff");
    assert_eq!(edit["content"][0]["oldText"], "alpha");
    assert_eq!(edit["content"][0]["newText"], "omega");

    // Both calls asked; the first (allowed) ran, the second (rejected) did not.
    let perms = log["permissions"].as_array().unwrap();
    assert_eq!(perms.len(), 2, "{perms:?}");
    assert_eq!(
        perms[0]["request"]["toolCall"]["toolCallId"],
        edit["toolCallId"]
    );
    let options: Vec<&str> = perms[0]["request"]["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["optionId"].as_str().unwrap())
        .collect();
    assert_eq!(options, ["allow_once", "allow_always", "reject_once"]);
    assert_eq!(std::fs::read_to_string(&a).unwrap(), "omega\n");
    assert!(
        !work.path().join("b.txt").exists(),
        "the rejected Write ran"
    );

    let edit_done = updates(&log, "tool_call_update")
        .into_iter()
        .find(|u| u["toolCallId"] == edit["toolCallId"] && u["status"] == "completed")
        .expect("the edit's result");
    assert!(edit_done["content"][0]["content"]["text"].is_string());
}

#[tokio::test]
async fn allow_always_is_remembered_for_the_session() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let server = serve([
        Turn::tool_call("Write", json!({"file_path": "a.txt", "content": "1\n"})),
        // "Always" on an edit remembers that path (issue 11: a path
        // pattern inside the project), so the second write of it runs.
        Turn::tool_call("Write", json!({"file_path": "a.txt", "content": "2\n"})),
        done("Done"),
    ])
    .await;
    let log = client(
        "prompt",
        home.path(),
        work.path(),
        &server,
        &[("ACP_ANSWERS", "allow_always")],
    )
    .await;
    assert_eq!(log["permissions"].as_array().unwrap().len(), 1, "{log}");
    assert_eq!(
        std::fs::read_to_string(work.path().join("a.txt")).unwrap(),
        "2\n"
    );
    let write = updates(&log, "tool_call")[0];
    assert_eq!(write["content"][0]["type"], "diff");
    assert_eq!(write["content"][0]["newText"], "1\n");
}

#[tokio::test]
async fn cancel_mid_stream_stops_the_turn() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let server = serve([Turn::text("Thinking hard").and_hold()]).await;
    let log = client("cancel", home.path(), work.path(), &server, &[]).await;
    assert_eq!(log["responses"]["prompt"]["stopReason"], "cancelled");
    server.wait_for_aborted_streams(1).await;
}

#[tokio::test]
async fn a_loaded_session_replays_its_conversation_first() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let server = serve([
        Turn::text("Noted: kiwi.").and_tool_call("AttemptCompletion", json!({"result": "ok"}))
    ])
    .await;
    let first = client(
        "prompt",
        home.path(),
        work.path(),
        &server,
        &[("ACP_PROMPT", "remember the word kiwi")],
    )
    .await;
    let id = first["responses"]["new"]["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    let log = client(
        "load",
        home.path(),
        work.path(),
        &server,
        &[("ACP_SESSION_ID", &id)],
    )
    .await;
    assert_eq!(
        log["updatesBeforeLoad"],
        log["updates"].as_array().unwrap().len()
    );
    assert!(
        text_of(&log, "user_message_chunk").contains("remember the word kiwi"),
        "{log}"
    );
    assert!(
        text_of(&log, "agent_message_chunk").contains("Noted: kiwi."),
        "{log}"
    );
    assert!(
        log["updates"]
            .as_array()
            .unwrap()
            .iter()
            .all(|n| n["sessionId"] == id.as_str())
    );
    assert_eq!(server.requests().len(), 1, "loading asks no model");
}

/// The text of the completed results of tool calls of `kind`.
fn results_of(log: &Value, kind: &str) -> Vec<String> {
    let ids: Vec<&Value> = updates(log, "tool_call")
        .into_iter()
        .filter(|c| c["kind"] == kind)
        .map(|c| &c["toolCallId"])
        .collect();
    updates(log, "tool_call_update")
        .into_iter()
        .filter(|u| ids.contains(&&u["toolCallId"]) && u["status"] == "completed")
        .map(|u| {
            u["content"][0]["content"]["text"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect()
}

#[tokio::test]
async fn file_tools_read_and_write_the_clients_buffers() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let root = canonical(work.path());
    std::fs::write(root.join("a.txt"), "on disk\n").unwrap();
    let a = root.join("a.txt");
    let b = root.join("b.txt");
    let buffers = json!({ a.to_str().unwrap(): "unsaved buffer\n" }).to_string();
    let server = serve([
        Turn::tool_call("Read", json!({"file_path": "a.txt"})),
        // "unsaved" is only in the editor's buffer: the edit works on it.
        Turn::tool_call(
            "Edit",
            json!({"file_path": "a.txt", "old_string": "unsaved", "new_string": "edited"}),
        ),
        Turn::tool_call("Write", json!({"file_path": "b.txt", "content": "beta\n"})),
        done("Done"),
    ])
    .await;
    let log = client(
        "prompt",
        home.path(),
        &root,
        &server,
        &[
            ("ACP_FS", "1"),
            ("ACP_BUFFERS", &buffers),
            ("ACP_ANSWERS", "allow_once,allow_once"),
        ],
    )
    .await;
    let read = results_of(&log, "read");
    assert!(read[0].contains("unsaved buffer"), "{log}");
    assert!(!read[0].contains("on disk"), "{log}");
    assert_eq!(
        log["writes"],
        json!([
            {"path": a, "content": "edited buffer\n"},
            {"path": b, "content": "beta\n"},
        ]),
        "{log}"
    );
    // kaji wrote nothing itself: the disk is as it was.
    assert_eq!(std::fs::read_to_string(&a).unwrap(), "on disk\n");
    assert!(!b.exists());
    // The edit still arrived as a diff, and was asked for.
    assert_eq!(log["permissions"].as_array().unwrap().len(), 2);
    let edit = updates(&log, "tool_call")
        .into_iter()
        .find(|c| c["title"].as_str().unwrap().starts_with("Edit"))
        .unwrap();
    assert_eq!(edit["content"][0]["type"], "diff");
}

#[tokio::test]
async fn without_the_fs_capability_the_disk_is_used() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let root = canonical(work.path());
    let server = serve([
        Turn::tool_call("Write", json!({"file_path": "b.txt", "content": "beta\n"})),
        done("Done"),
    ])
    .await;
    let log = client(
        "prompt",
        home.path(),
        &root,
        &server,
        &[("ACP_ANSWERS", "allow_once")],
    )
    .await;
    assert_eq!(log["writes"], json!([]));
    assert_eq!(
        std::fs::read_to_string(root.join("b.txt")).unwrap(),
        "beta\n"
    );
}

fn everything() -> String {
    kaji_test_support::fixtures::mcp_server_bin("mcp-server-everything")
        .to_str()
        .unwrap()
        .to_string()
}

#[tokio::test]
async fn mcp_servers_the_client_passes_join_the_session() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let mcp =
        json!([{"name": "everything", "command": everything(), "args": ["stdio"], "env": []}])
            .to_string();
    let server = serve([
        Turn::tool_call("mcp__everything__echo", json!({"message": "hi over MCP"})),
        done("echoed"),
    ])
    .await;
    let log = client(
        "prompt",
        home.path(),
        work.path(),
        &server,
        &[("ACP_MCP", &mcp), ("ACP_ANSWERS", "allow_once")],
    )
    .await;
    let init = &log["responses"]["initialize"]["agentCapabilities"];
    assert_eq!(init["mcpCapabilities"]["http"], true, "{init}");
    let tools = server.requests()[0].body["tools"].to_string();
    assert!(tools.contains("mcp__everything__echo"), "{tools}");
    let done = updates(&log, "tool_call_update")
        .into_iter()
        .find(|u| u["status"] == "completed")
        .unwrap_or_else(|| panic!("no completed call: {log}"));
    assert!(
        done["content"][0]["content"]["text"]
            .as_str()
            .unwrap()
            .contains("hi over MCP"),
        "{done}"
    );
}

#[tokio::test]
async fn an_image_in_the_prompt_reaches_the_model() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let server = serve([done("a red dot")]).await;
    let png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
    let log = client(
        "prompt",
        home.path(),
        work.path(),
        &server,
        &[("ACP_PROMPT", "what is this?"), ("ACP_IMAGE", png)],
    )
    .await;
    let caps = &log["responses"]["initialize"]["agentCapabilities"]["promptCapabilities"];
    assert_eq!(caps["image"], true, "{caps}");
    assert_eq!(caps["embeddedContext"], true, "{caps}");
    let body = &server.requests()[0].body;
    let user = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rfind(|m| m["role"] == "user")
        .unwrap();
    let blocks = user["content"].as_array().unwrap();
    assert!(
        blocks
            .iter()
            .any(|b| b["type"] == "text" && b["text"].as_str().unwrap().contains("what is this?")),
        "{user}"
    );
    let image = blocks
        .iter()
        .find(|b| b["type"] == "image")
        .unwrap_or_else(|| panic!("no image block: {user}"));
    assert_eq!(
        image["source"],
        json!({"type": "base64", "media_type": "image/png", "data": png})
    );
}

/// A project whose settings start an MCP server: a gated setting.
fn gated_project() -> tempfile::TempDir {
    let work = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(work.path().join(".kaji")).unwrap();
    std::fs::write(
        work.path().join(".kaji/config.toml"),
        format!(
            "[mcp_servers.everything]\ncommand = {:?}\nargs = [\"stdio\"]\n",
            everything()
        ),
    )
    .unwrap();
    work
}

#[tokio::test]
async fn an_untrusted_project_is_put_to_the_client_once_and_trusted_on_allow() {
    let home = tempfile::tempdir().unwrap();
    let work = gated_project();
    let server = serve([
        Turn::tool_call("mcp__everything__echo", json!({"message": "trusted"})),
        done("ok"),
    ])
    .await;
    let log = client(
        "prompt",
        home.path(),
        work.path(),
        &server,
        &[("ACP_ANSWERS", "trust,allow_once")],
    )
    .await;
    let perms = log["permissions"].as_array().unwrap();
    assert_eq!(perms.len(), 2, "{log}");
    let ask = &perms[0]["request"];
    let options: Vec<&str> = ask["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["optionId"].as_str().unwrap())
        .collect();
    assert_eq!(options, ["trust", "dont_trust"]);
    assert!(ask["toolCall"].to_string().contains("mcp_servers"), "{ask}");
    // Trusted: the project's MCP server runs, and the session keeps its id.
    let tools = server.requests()[0].body["tools"].to_string();
    assert!(tools.contains("mcp__everything__echo"), "{tools}");
    let id = log["responses"]["new"]["sessionId"].as_str().unwrap();
    assert!(
        log["updates"]
            .as_array()
            .unwrap()
            .iter()
            .all(|n| n["sessionId"] == id)
    );
    assert_eq!(log["responses"]["prompt"]["stopReason"], "end_turn");
    // Not recorded for good: trusted.toml is untouched.
    assert!(!home.path().join("kaji-home/trusted.toml").exists());
}

#[tokio::test]
async fn an_untrusted_project_rejected_by_the_client_keeps_its_settings_ignored() {
    let home = tempfile::tempdir().unwrap();
    let work = gated_project();
    let server = serve([done("ok")]).await;
    let log = client(
        "prompt",
        home.path(),
        work.path(),
        &server,
        &[("ACP_ANSWERS", "dont_trust")],
    )
    .await;
    assert_eq!(log["permissions"].as_array().unwrap().len(), 1, "{log}");
    let tools = server.requests()[0].body["tools"].to_string();
    assert!(!tools.contains("mcp__everything"), "{tools}");
    let said = text_of(&log, "agent_message_chunk");
    assert!(
        said.contains("not trusted") && said.contains("mcp_servers"),
        "{said}"
    );
}

#[tokio::test]
async fn with_trust_the_client_is_not_asked() {
    let home = tempfile::tempdir().unwrap();
    let work = gated_project();
    let server = serve([done("ok")]).await;
    let log = client_with(
        "prompt",
        home.path(),
        work.path(),
        &server,
        &[],
        &["--trust"],
    )
    .await;
    assert_eq!(log["permissions"], json!([]), "{log}");
    let tools = server.requests()[0].body["tools"].to_string();
    assert!(tools.contains("mcp__everything__echo"), "{tools}");
}

#[tokio::test]
async fn the_todo_arrives_as_a_plan_and_set_mode_switches_the_permission_mode() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let todos = json!({"todos": [
        {"content": "Write b.txt", "activeForm": "Writing b.txt", "status": "in_progress"},
        {"content": "Check it", "activeForm": "Checking it", "status": "pending"},
    ]});
    let server = serve([
        Turn::tool_call("TodoWrite", todos),
        Turn::tool_call("Write", json!({"file_path": "b.txt", "content": "beta\n"})),
        done("Done"),
    ])
    .await;
    let log = client(
        "prompt",
        home.path(),
        work.path(),
        &server,
        &[("ACP_MODE", "yolo")],
    )
    .await;
    let plans = updates(&log, "plan");
    assert_eq!(plans.len(), 1, "{log}");
    assert_eq!(
        plans[0]["entries"],
        json!([
            {"content": "Write b.txt", "priority": "medium", "status": "in_progress"},
            {"content": "Check it", "priority": "medium", "status": "pending"},
        ])
    );
    // In yolo mode the Write ran without asking.
    assert_eq!(log["permissions"], json!([]), "{log}");
    assert_eq!(
        std::fs::read_to_string(work.path().join("b.txt")).unwrap(),
        "beta\n"
    );
}

#[tokio::test]
async fn protocol_errors_are_answered_and_the_connection_survives() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let server = serve([Turn::text("hi")]).await;
    let mut raw = Raw::start(home.path(), &server);
    let id = raw.init_and_session(work.path()).await;

    raw.send("{this is not json").await;
    assert_eq!(raw.recv().await["error"]["code"], -32700);

    raw.send(r#"{"jsonrpc":"2.0","id":3,"method":"session/fly","params":{}}"#)
        .await;
    assert_eq!(raw.response(3).await["error"]["code"], -32601);

    raw.send(r#"{"jsonrpc":"2.0","id":4,"method":"session/prompt","params":{"sessionId":"nope","prompt":[{"type":"text","text":"x"}]}}"#).await;
    let r = raw.response(4).await;
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert!(
        r["error"]["message"].as_str().unwrap().contains("nope"),
        "{r}"
    );

    let set = json!({"jsonrpc":"2.0","id":5,"method":"session/set_mode","params":{"sessionId": id, "modeId": "warp"}});
    raw.send(&set.to_string()).await;
    assert_eq!(raw.response(5).await["error"]["code"], -32602);
    let set = json!({"jsonrpc":"2.0","id":6,"method":"session/set_mode","params":{"sessionId": id, "modeId": "yolo"}});
    raw.send(&set.to_string()).await;
    assert!(raw.response(6).await["result"].is_object());

    raw.stdin.take();
    let status = raw.child.wait().await.unwrap();
    assert_eq!(status.code(), Some(0));
}

#[tokio::test]
async fn a_client_gone_mid_turn_aborts_it_and_the_session_is_saved() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let server = serve([Turn::text("Working").and_hold()]).await;
    let mut raw = Raw::start(home.path(), &server);
    let id = raw.init_and_session(work.path()).await;
    let prompt = json!({"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId": id, "prompt":[{"type":"text","text":"go"}]}});
    raw.send(&prompt.to_string()).await;
    server.wait_for_holds(1).await;
    raw.stdin.take();
    let status = raw.child.wait().await.unwrap();
    assert_eq!(status.code(), Some(0));
    server.wait_for_aborted_streams(1).await;
    let file = home
        .path()
        .join("kaji-home/sessions")
        .join(format!("{id}.jsonl"));
    let text = std::fs::read_to_string(&file).unwrap();
    let ended = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|r| r.to_string().contains("task_ended"))
        .unwrap_or_else(|| panic!("no task_ended in {text}"));
    assert!(ended.to_string().contains("aborted"), "{ended}");
}

/// The text of every tool result in a request's messages.
fn tool_results_of(request: &kaji_test_support::RecordedRequest) -> String {
    request
        .messages()
        .iter()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .filter(|b| b["type"] == "tool_result")
        .map(|b| b["content"].to_string())
        .collect()
}

#[tokio::test]
async fn two_sessions_in_one_process_each_keep_their_own_secret_env() {
    let home = tempfile::tempdir().unwrap();
    let (alpha, beta) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    for (dir, secret) in [(&alpha, "KAJI_TEST_ALPHA"), (&beta, "KAJI_TEST_BETA")] {
        std::fs::create_dir_all(dir.path().join(".kaji")).unwrap();
        std::fs::write(
            dir.path().join(".kaji/config.toml"),
            format!("secret_env = [\"{secret}\"]\n"),
        )
        .unwrap();
    }
    let probe = json!({"command": "echo \"alpha=[$KAJI_TEST_ALPHA] beta=[$KAJI_TEST_BETA]\""});
    let server = serve([
        Turn::tool_call("Bash", probe.clone()),
        Turn::text("done"),
        Turn::tool_call("Bash", probe),
        Turn::text("done"),
    ])
    .await;
    let vars = [
        ("KAJI_TEST_ALPHA", "a-value"),
        ("KAJI_TEST_BETA", "b-value"),
    ];
    let mut raw = Raw::start_with(home.path(), &server, &vars);
    // Both sessions exist before either runs a command: the second one's
    // settings must not replace the first one's policy.
    let first = raw.init_and_session(alpha.path()).await;
    let second = raw.new_session(3, beta.path()).await;
    let mut id = 10;
    for session in [&first, &second] {
        let set = json!({"jsonrpc":"2.0","id":id,"method":"session/set_mode","params":{"sessionId": session, "modeId": "yolo"}});
        raw.send(&set.to_string()).await;
        assert!(raw.response(id).await["result"].is_object());
        let prompt = json!({"jsonrpc":"2.0","id":id + 1,"method":"session/prompt","params":{"sessionId": session, "prompt":[{"type":"text","text":"probe"}]}});
        raw.send(&prompt.to_string()).await;
        let r = raw.response(id + 1).await;
        assert!(r["result"].is_object(), "{r}");
        id += 2;
    }
    let requests = server.requests();
    assert_eq!(requests.len(), 4, "{requests:?}");
    let in_alpha = tool_results_of(&requests[1]);
    let in_beta = tool_results_of(&requests[3]);
    assert!(
        in_alpha.contains("alpha=[] beta=[b-value]"),
        "the first session's command: {in_alpha}"
    );
    assert!(
        in_beta.contains("alpha=[a-value] beta=[]"),
        "the second session's command: {in_beta}"
    );
    raw.stdin.take();
    assert_eq!(raw.child.wait().await.unwrap().code(), Some(0));
}

/// Every turn ends: 50 prompts in a row, each an Edit the client approves
/// then a completion call or a text reply, from a client that declares no
/// file system and no terminal. Each `session/prompt` is answered (the
/// guard only turns a hang into a failure).
#[tokio::test]
async fn fifty_edit_turns_in_a_row_all_end() {
    const ROUNDS: usize = 50;
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    std::fs::write(work.path().join("a.txt"), "v0\n").unwrap();
    let mut turns = Vec::new();
    for k in 0..ROUNDS {
        turns.push(Turn::tool_call(
            "Edit",
            json!({"file_path": "a.txt", "old_string": format!("v{k}\n"), "new_string": format!("v{}\n", k + 1)}),
        ));
        turns.push(if k % 2 == 0 {
            Turn::tool_call(
                "AttemptCompletion",
                json!({"result": format!("edit {k} done")}),
            )
        } else {
            Turn::text(format!("Edit {k} done."))
        });
    }
    let server = serve(turns).await;
    let mut raw = Raw::start(home.path(), &server);
    let id = raw.init_and_session(work.path()).await;
    for k in 0..ROUNDS {
        let rid = 100 + k as u64;
        let prompt = json!({"jsonrpc":"2.0","id":rid,"method":"session/prompt","params":{"sessionId": id, "prompt":[{"type":"text","text":format!("edit {k}")}]}});
        raw.send(&prompt.to_string()).await;
        let mut asked = 0;
        let answer = tokio::time::timeout(std::time::Duration::from_secs(120), async {
            loop {
                let v = raw.recv().await;
                if v["method"] == "session/request_permission" {
                    asked += 1;
                    let reply = json!({"jsonrpc":"2.0","id":v["id"],"result":{"outcome":{"outcome":"selected","optionId":"allow_once"}}});
                    raw.send(&reply.to_string()).await;
                } else if v["id"] == rid && v.get("method").is_none() {
                    return v;
                }
            }
        })
        .await
        .unwrap_or_else(|_| panic!("prompt {k} was never answered"));
        assert_eq!(
            answer["result"]["stopReason"], "end_turn",
            "prompt {k}: {answer}"
        );
        assert_eq!(asked, 1, "prompt {k}");
    }
    assert_eq!(
        std::fs::read_to_string(work.path().join("a.txt")).unwrap(),
        format!("v{ROUNDS}\n")
    );
    raw.stdin.take();
    let status = raw.child.wait().await.unwrap();
    assert_eq!(status.code(), Some(0));
}

/// Bad input is that line's error, never the connection's: a line of
/// invalid UTF-8 and malformed JSON get -32700, a batch and a deeply nested
/// request are answered, `session/load` of an unknown id is -32602; the
/// session goes on working after each.
#[tokio::test]
async fn bad_lines_are_answered_and_the_session_goes_on() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let server = serve([Turn::text("hi")]).await;
    let mut raw = Raw::start(home.path(), &server);
    let id = raw.init_and_session(work.path()).await;
    let mut next = 10u64;
    let still_works = async |raw: &mut Raw, n: u64| {
        let set = json!({"jsonrpc":"2.0","id":n,"method":"session/set_mode","params":{"sessionId": id, "modeId": "plan"}});
        raw.send(&set.to_string()).await;
        assert!(
            raw.response(n).await["result"].is_object(),
            "after line {n}"
        );
    };

    raw.send_bytes(b"{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"x\xff\xfe\"}\n")
        .await;
    let v = raw.recv().await;
    assert_eq!(v["error"]["code"], -32700, "{v}");
    still_works(&mut raw, next).await;
    next += 1;

    raw.send("{\"jsonrpc\":\"2.0\",\"id\":4,").await;
    assert_eq!(raw.recv().await["error"]["code"], -32700);
    still_works(&mut raw, next).await;
    next += 1;

    raw.send(r#"[{"jsonrpc":"2.0","id":5,"method":"session/set_mode","params":{}}]"#)
        .await;
    let v = raw.recv().await;
    assert!(v.get("error").is_some() || v.is_array(), "{v}");
    still_works(&mut raw, next).await;
    next += 1;

    let deep = format!(
        r#"{{"jsonrpc":"2.0","id":6,"method":"session/prompt","params":{{"sessionId":"{id}","prompt":{}1{}}}}}"#,
        "[".repeat(2000),
        "]".repeat(2000)
    );
    raw.send(&deep).await;
    let v = raw.response(6).await;
    assert!(v["error"]["code"].is_i64(), "{v}");
    still_works(&mut raw, next).await;
    next += 1;

    let load = json!({"jsonrpc":"2.0","id":7,"method":"session/load","params":{"sessionId": "no-such-session", "cwd": work.path(), "mcpServers": []}});
    raw.send(&load.to_string()).await;
    let v = raw.response(7).await;
    assert_eq!(v["error"]["code"], -32602, "{v}");
    still_works(&mut raw, next).await;

    raw.stdin.take();
    let status = raw.child.wait().await.unwrap();
    assert_eq!(status.code(), Some(0));
}

/// A PNG header of `w`x`h` pixels, base64.
fn png_b64(w: u32, h: u32) -> String {
    let mut png = b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR".to_vec();
    png.extend(w.to_be_bytes());
    png.extend(h.to_be_bytes());
    png.extend([8, 6, 0, 0, 0, 0, 0, 0, 0]);
    const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in png.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(B64[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Images are checked before they enter the history: data that is not
/// base64, content of another type than declared, and dimensions past the
/// providers' limit are that prompt's error (-32602, saying what is
/// wrong), no request is made, and the next prompt of the session works.
#[tokio::test]
async fn bad_prompt_images_are_refused_before_they_enter_the_history() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let server = serve([Turn::text("fine")]).await;
    let mut raw = Raw::start(home.path(), &server);
    let id = raw.init_and_session(work.path()).await;
    let cases = [
        ("image/png", "this is not base64!".to_string(), "not base64"),
        ("image/jpeg", png_b64(10, 10), "PNG"),
        ("image/png", png_b64(9000, 10), "pixels"),
    ];
    for (n, (mime, data, says)) in cases.iter().enumerate() {
        let rid = 20 + n as u64;
        let prompt = json!({"jsonrpc":"2.0","id":rid,"method":"session/prompt","params":{"sessionId": id, "prompt":[{"type":"text","text":"look"},{"type":"image","mimeType":mime,"data":data}]}});
        raw.send(&prompt.to_string()).await;
        let v = raw.response(rid).await;
        assert_eq!(v["error"]["code"], -32602, "{v}");
        assert!(
            v["error"]["message"].as_str().unwrap().contains(says),
            "{v}"
        );
    }
    assert!(
        server.requests().is_empty(),
        "a bad image reached the model"
    );
    let prompt = json!({"jsonrpc":"2.0","id":30,"method":"session/prompt","params":{"sessionId": id, "prompt":[{"type":"text","text":"hello"},{"type":"image","mimeType":"image/png","data":png_b64(10, 10)}]}});
    raw.send(&prompt.to_string()).await;
    let v = raw.response(30).await;
    assert_eq!(v["result"]["stopReason"], "end_turn", "{v}");
    assert_eq!(server.requests().len(), 1);
}

/// #32: a permission request shows what it is about (title, kind, the
/// diff or the whole command), each option says what it stores, and the
/// call is not in progress before the answer.
#[tokio::test]
async fn a_permission_request_says_what_runs_and_what_each_answer_stores() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    std::fs::write(work.path().join("a.txt"), "alpha\n").unwrap();
    let command = "printf 'one\\n'\nprintf 'two\\n'\nrm -rf build-output";
    let server = serve([
        Turn::tool_call(
            "Edit",
            json!({"file_path": "a.txt", "old_string": "alpha", "new_string": "omega"}),
        ),
        Turn::tool_call("Bash", json!({"command": command})),
        Turn::text("Done."),
    ])
    .await;
    let log = client_with(
        "prompt",
        home.path(),
        work.path(),
        &server,
        &[("ACP_ANSWERS", "allow_once,reject_once")],
        &["--sandbox", "off"],
    )
    .await;
    let perms = log["permissions"].as_array().unwrap();
    assert_eq!(perms.len(), 2, "{perms:?}");
    let edit = &perms[0]["request"]["toolCall"];
    assert!(
        edit["title"].as_str().is_some_and(|t| t.contains("a.txt")),
        "{edit}"
    );
    assert_eq!(edit["kind"], "edit");
    assert_eq!(edit["content"][0]["type"], "diff", "{edit}");
    assert_eq!(edit["content"][0]["newText"], "omega");
    let bash = &perms[1]["request"]["toolCall"];
    assert_eq!(bash["kind"], "execute", "{bash}");
    assert_eq!(bash["content"][0]["content"]["text"], command, "{bash}");
    for p in perms {
        for o in p["request"]["options"].as_array().unwrap() {
            let name = o["name"].as_str().unwrap();
            match o["optionId"].as_str().unwrap() {
                "allow_always" => assert!(
                    name.contains("in this session") && name.contains('('),
                    "{name}"
                ),
                _ => assert!(name.contains("nothing is remembered"), "{name}"),
            }
        }
        // Nothing about the call said "in progress" before the answer.
        let id = &p["request"]["toolCall"]["toolCallId"];
        let before = p["updatesBefore"].as_u64().unwrap() as usize;
        let early = log["updates"].as_array().unwrap()[..before]
            .iter()
            .map(|n| &n["update"])
            .any(|u| u["toolCallId"] == *id && u["status"] == "in_progress");
        assert!(!early, "in_progress before permission: {log}");
    }
    let ran = updates(&log, "tool_call_update")
        .into_iter()
        .any(|u| u["toolCallId"] == edit["toolCallId"] && u["status"] == "in_progress");
    assert!(ran, "the allowed call goes in progress after the answer");
}

/// #32: the modes say what runs without asking, sandbox included.
#[tokio::test]
async fn mode_descriptions_say_the_truth_about_commands() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let server = serve([Turn::text("Hi.")]).await;
    let log = client("prompt", home.path(), work.path(), &server, &[]).await;
    let modes = log["responses"]["new"]["modes"]["availableModes"]
        .as_array()
        .unwrap();
    let default = modes.iter().find(|m| m["id"] == "default").unwrap();
    let what = default["description"].as_str().unwrap();
    if kaji_sandbox::probe().is_complete() {
        assert!(
            what.contains("sandbox: workspace-write — commands run without asking"),
            "{what}"
        );
    } else {
        assert!(what.contains("sandbox off — commands ask"), "{what}");
    }
}

/// #32: agent text of separate turns does not run together, and
/// `session/list` answers with the session.
#[tokio::test]
async fn turns_are_separated_and_sessions_are_listed() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let server = serve([Turn::text("First answer."), Turn::text("Second answer.")]).await;
    let log = client(
        "twoTurns",
        home.path(),
        work.path(),
        &server,
        &[("ACP_PROMPT", "the first question")],
    )
    .await;
    let text = text_of(&log, "agent_message_chunk");
    assert!(text.contains("First answer.\n\nSecond answer."), "{text:?}");

    let log = client(
        "list",
        home.path(),
        work.path(),
        &server_for_list().await,
        &[("ACP_PROMPT", "list me")],
    )
    .await;
    assert!(
        log["responses"]["initialize"]["agentCapabilities"]["sessionCapabilities"]["list"]
            .is_object(),
        "{log}"
    );
    let id = &log["responses"]["new"]["sessionId"];
    for key in ["list", "listAll"] {
        let sessions = log["responses"][key]["sessions"].as_array().unwrap();
        let me = sessions
            .iter()
            .find(|s| s["sessionId"] == *id)
            .unwrap_or_else(|| panic!("{key}: {sessions:?}"));
        assert_eq!(me["cwd"], canonical(work.path()).to_str().unwrap());
        assert!(
            me["title"].as_str().is_some_and(|t| t.contains("list me")),
            "{me}"
        );
        assert!(me["updatedAt"].is_string(), "{me}");
    }
}

async fn server_for_list() -> ScriptedModelServer {
    serve([Turn::text("Listed.")]).await
}
