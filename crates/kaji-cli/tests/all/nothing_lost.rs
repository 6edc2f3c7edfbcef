//! Issue 31 ("nothing lost, nothing stuck") through the real binary, for
//! the findings that were tested only inside their crates: a call cut off
//! by the output limit, a deeply nested page fetched, an image `Read`
//! cannot send, the run's budget across sub-agents (`--max-budget-usd` and
//! the `max_requests` setting), `--max-turns` against a sub-agent's own
//! `maxTurns`, and a worker whose model answers in text.

use kaji_test_support::{Script, ScriptedModelServer, Turn};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::common::{
    PRICED_MODEL, Wire, exec_json, home_with_settings, input_tokens, result_line, run,
};

/// A `tool_use` cut off by the output limit is not run (its input is not
/// whole), and the next request tells the model so; on every wire.
#[tokio::test]
async fn a_call_cut_off_by_the_output_limit_is_not_run_and_the_model_is_told() {
    for wire in Wire::ALL {
        let (home, work) = home_with_settings("");
        let server = ScriptedModelServer::start(Script::new([
            Turn::cut_off_in_tool_call("Write", r#"{"file_path": "big.txt", "content": "aaaa"#),
            Turn::tool_call("AttemptCompletion", json!({"result": "ok"})),
        ]))
        .await;
        let mut cmd = exec_json(home.path(), work.path(), &server, wire);
        cmd.args(["--no-checkpoints", "--sandbox", "off", "--yolo", "write it"]);
        let (code, lines, err) = run(cmd).await;
        assert_eq!(code, 0, "{wire:?}: {err}");
        assert_eq!(
            result_line(&lines)["status"],
            "completed",
            "{wire:?}: {lines:?}"
        );
        assert!(
            !work.path().join("big.txt").exists(),
            "{wire:?}: the cut-off call ran"
        );
        let requests = server.requests();
        assert_eq!(requests.len(), 2, "{wire:?}");
        let second = requests[1].body.to_string();
        assert!(
            second.contains("output token limit"),
            "{wire:?}: the model is not told: {second}"
        );
    }
}

/// Serves `body` as `text/html` to every connection on 127.0.0.1.
async fn html_server(body: String) -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let body = std::sync::Arc::new(body);
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let body = std::sync::Arc::clone(&body);
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = sock.read(&mut buf).await;
                let head = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = sock.write_all(head.as_bytes()).await;
                let _ = sock.write_all(body.as_bytes()).await;
            });
        }
    });
    port
}

/// WebFetch of a page of about 110 KB of elements nested in each other
/// (which overflowed the converter's stack and aborted kaji, exit 134)
/// ends normally: the text after the nesting reaches the model.
#[tokio::test]
async fn webfetch_of_a_deeply_nested_page_does_not_end_the_session() {
    let (home, work) = home_with_settings("");
    let mut page = String::from("<!doctype html><html><body>");
    while page.len() < 110_000 {
        page.push_str("<div>");
    }
    page.push_str("DEEP-TEXT-AT-THE-BOTTOM");
    let port = html_server(page).await;
    let server = ScriptedModelServer::start(Script::new([
        Turn::tool_call(
            "WebFetch",
            json!({"url": format!("http://127.0.0.1:{port}/deep"), "prompt": "read"}),
        ),
        Turn::tool_call("AttemptCompletion", json!({"result": "read"})),
    ]))
    .await;
    let mut cmd = exec_json(home.path(), work.path(), &server, Wire::Anthropic);
    cmd.args(["--no-checkpoints", "--sandbox", "off", "--yolo"])
        .args(["--allow", "WebFetch(domain:127.0.0.1)", "fetch it"]);
    let (code, lines, err) = run(cmd).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(result_line(&lines)["status"], "completed", "{lines:?}");
    let requests = server.requests();
    assert_eq!(requests.len(), 2, "{err}");
    let second = requests[1].body.to_string();
    assert!(second.contains("DEEP-TEXT-AT-THE-BOTTOM"), "{second}");
}

/// `Read` of an image whose dimensions providers refuse is a tool error
/// naming why, and no image enters the history (where the provider would
/// refuse every later request).
#[tokio::test]
async fn read_refuses_an_image_providers_would_refuse() {
    let (home, work) = home_with_settings("");
    // A PNG header claiming 100000x1 pixels.
    let mut huge = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
    huge.extend_from_slice(&100_000u32.to_be_bytes());
    huge.extend_from_slice(&1u32.to_be_bytes());
    huge.extend_from_slice(&[8, 2, 0, 0, 0, 0, 0, 0, 0]);
    std::fs::write(work.path().join("wide.png"), huge).unwrap();
    let server = ScriptedModelServer::start(Script::new([
        Turn::tool_call("Read", json!({"file_path": "wide.png"})),
        Turn::tool_call("AttemptCompletion", json!({"result": "looked"})),
    ]))
    .await;
    let mut cmd = exec_json(home.path(), work.path(), &server, Wire::Anthropic);
    cmd.args(["--no-checkpoints", "--sandbox", "off", "--yolo", "look"]);
    let (code, lines, err) = run(cmd).await;
    assert_eq!(code, 0, "{err}");
    let requests = server.requests();
    assert_eq!(requests.len(), 2, "{lines:?}");
    let second = requests[1].body.to_string();
    assert!(second.contains("pixels a side"), "the reason: {second}");
    assert!(
        !second.contains(r#""type":"image""#),
        "an image entered the history: {second}"
    );
}

/// A priced run: every request reports 100,000 input tokens at $1 per
/// million, so each costs $0.10, and each agent delegates to a sub-agent
/// (two levels deep; the deepest cannot delegate and keeps asking).
/// `--max-budget-usd 0.25` stops the whole run with its sub-agents: a
/// request is charged as its stream ends, before its tools run, so the
/// main agent's request and the sub-agent's count before the deepest
/// agent asks for room. The deepest agent's first request ($0.20 spent
/// before) is the last: $0.30 in all, the budget passed by less than the
/// one request in flight when it was reached (docs/exec-json.md). On
/// every wire (Chat Completions and Responses report usage only at the
/// end of the stream).
#[tokio::test]
async fn max_budget_usd_bounds_the_whole_run_with_its_sub_agents() {
    for wire in Wire::ALL {
        budget_run_with_sub_agents(wire).await;
    }
}

/// A run in which every agent delegates to a sub-agent, every request
/// reporting `usage` if given: `kaji exec` with `settings` and `flags`
/// (30 turns at most) against a scripted server. Returns the server, the
/// JSON lines and stderr.
async fn delegating_run(
    settings: &str,
    usage: Option<kaji_protocol::Usage>,
    wire: Wire,
    flags: &[&str],
) -> (ScriptedModelServer, Vec<Value>, String) {
    let (home, work) = home_with_settings(settings);
    let delegate = || {
        let turn = Turn::tool_call(
            "Agent",
            json!({"description": "delegate", "prompt": "Delegate it again.", "subagent_type": "general-purpose"}),
        );
        match usage {
            Some(usage) => turn.with_usage(usage),
            None => turn,
        }
    };
    let server = ScriptedModelServer::start(Script::new((0..40).map(|_| delegate()))).await;
    let mut cmd = exec_json(home.path(), work.path(), &server, wire);
    cmd.args([
        "--no-checkpoints",
        "--sandbox",
        "off",
        "--yolo",
        "--max-turns",
        "30",
    ]);
    cmd.args(flags).arg("keep delegating");
    let (_code, lines, err) = run(cmd).await;
    (server, lines, err)
}

async fn budget_run_with_sub_agents(wire: Wire) {
    let usage = Some(input_tokens(100_000));
    let flags = ["--max-budget-usd", "0.25"];
    let (server, lines, err) = delegating_run(PRICED_MODEL, usage, wire, &flags).await;
    let last = result_line(&lines);
    assert_eq!(
        last["stop_reason"], "max_budget_usd",
        "{wire:?}: {last}\n{err}"
    );
    let requests = server.requests();
    // main 1, sub-agent 1, the deepest 1: within the budget and one
    // request.
    assert_eq!(requests.len(), 3, "{wire:?}: {err}\n{lines:#?}");
    assert!(
        last["result"]
            .as_str()
            .unwrap_or("")
            .contains("$0.3000 spent"),
        "{wire:?}: {last}"
    );
    assert!(
        requests
            .iter()
            .any(|r| r.body.to_string().contains("Delegate it again.")),
        "a sub-agent ran"
    );
}

/// The setting `max_requests` bounds the run as `--max-requests` does.
#[tokio::test]
async fn the_max_requests_setting_bounds_the_whole_run() {
    let (server, lines, err) =
        delegating_run("max_requests = 4\n", None, Wire::Anthropic, &[]).await;
    let last = result_line(&lines);
    assert_eq!(last["stop_reason"], "max_requests", "{last}\n{err}");
    assert_eq!(server.requests().len(), 4, "{err}");
}

/// `--max-turns` counts the main agent's turns only, and a sub-agent is
/// bounded by its own `maxTurns`: the main agent's two turns fit
/// `--max-turns 2` although its sub-agent made requests in between, and
/// the sub-agent (`maxTurns: 1`) stops after its one turn.
#[tokio::test]
async fn max_turns_is_the_main_agents_and_a_sub_agent_keeps_its_own() {
    let (home, work) = home_with_settings("");
    std::fs::create_dir_all(home.path().join("kaji-home/agents")).unwrap();
    std::fs::write(
        home.path().join("kaji-home/agents/stepper.md"),
        "---\nname: stepper\ndescription: Takes one step\nmaxTurns: 1\n---\nSTEPPER-AGENT-PROMPT\n",
    )
    .unwrap();
    std::fs::write(work.path().join("a.txt"), "alpha\n").unwrap();
    let step = || Turn::tool_call("Read", json!({"file_path": "a.txt"}));
    let script = Script::new([
        Turn::tool_call(
            "Agent",
            json!({"description": "step", "prompt": "Take a step.", "subagent_type": "stepper"}),
        ),
        Turn::tool_call("AttemptCompletion", json!({"result": "done"})),
    ])
    .with_agent("STEPPER-AGENT-PROMPT", Script::new((0..5).map(|_| step())));
    let server = ScriptedModelServer::start(script).await;
    let mut cmd = exec_json(home.path(), work.path(), &server, Wire::Anthropic);
    cmd.args([
        "--no-checkpoints",
        "--sandbox",
        "off",
        "--yolo",
        "--max-turns",
        "2",
        "delegate one step",
    ]);
    let (code, lines, err) = run(cmd).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        result_line(&lines)["status"],
        "completed",
        "{lines:?}\n{err}"
    );
    let requests = server.requests();
    let sub = requests
        .iter()
        .filter(|r| r.agent.as_deref() == Some("STEPPER-AGENT-PROMPT"))
        .count();
    assert_eq!(sub, 1, "the sub-agent's own maxTurns: {err}");
    assert_eq!(requests.len() - sub, 2, "the main agent's turns");
}

/// A worker's turn ends whatever the model ends it with: a text reply is
/// nudged (the worker's `on_text_reply`) and the task completes at the
/// completion call that follows; then the worker, its list empty, leaves.
#[tokio::test]
async fn a_worker_whose_model_answers_in_text_completes_its_task() {
    use kaji_tasks::TaskListStore;
    use kaji_tasks::list::{ListTaskStatus, NewListTask};

    let (home, work) = home_with_settings("");
    let store = TaskListStore::open(&home.path().join("kaji-home"), "team").unwrap();
    let id = store.create(NewListTask::new("say it")).unwrap().id;
    let server = ScriptedModelServer::start(Script::new([
        Turn::text("I did it."),
        Turn::tool_call("AttemptCompletion", json!({"result": "said"})),
    ]))
    .await;
    let mut cmd = crate::common::kaji(home.path());
    cmd.env("KAJI_WORKER_POLL_MS", "20")
        .env("ANTHROPIC_API_KEY", crate::common::TEST_KEY)
        .args(["worker", "--task-list", "team", "--name", "w1"])
        .args(["--provider", "anthropic", "--base-url"])
        .arg(server.anthropic_base_url())
        .args(["--model", "scripted", "--no-checkpoints"])
        .args(["--no-session-persistence", "-C"])
        .arg(work.path());
    let out = cmd.output().await.unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains(&format!("completed #{id}")), "{stdout}");
    assert_eq!(store.get(id).unwrap().status, ListTaskStatus::Completed);
    assert_eq!(server.requests().len(), 2, "{stderr}");
}

/// A PNG header of 9000x10 pixels (past the providers' side limit), base64.
const WIDE_PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAIygAAAAKCAYAAAAAAAAA";
/// A PNG header of 10x10 pixels, base64.
const SMALL_PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAoAAAAKCAYAAAAAAAAA";

/// Over ACP, an image an editor attaches as an `@` mention (an embedded
/// resource with a blob) is checked like an image block: data that is
/// not base64 and dimensions past the providers' limit are that prompt's
/// error (-32602), nothing reaches the model, and a good one does.
#[tokio::test]
async fn acp_mentioned_images_are_checked_before_they_enter_the_history() {
    use tokio::io::AsyncBufReadExt;

    let (home, work) = home_with_settings("");
    let server = ScriptedModelServer::start(Script::new([Turn::text("fine")])).await;
    let mut cmd = crate::common::kaji(home.path());
    cmd.env("ANTHROPIC_API_KEY", crate::common::TEST_KEY)
        .arg("acp")
        .args(["--provider", "anthropic", "--base-url"])
        .arg(server.anthropic_base_url())
        .args(["--model", "scripted"])
        .stdin(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let mut ask = async |stdin: &mut tokio::process::ChildStdin, msg: Value| {
        let id = msg["id"].clone();
        stdin
            .write_all(format!("{msg}\n").as_bytes())
            .await
            .unwrap();
        loop {
            let line = lines.next_line().await.unwrap().expect("kaji acp ended");
            let v: Value = serde_json::from_str(&line).unwrap();
            if v["id"] == id && v.get("method").is_none() {
                return v;
            }
        }
    };
    let init = json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}});
    assert!(ask(&mut stdin, init).await["result"].is_object());
    let new = json!({"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd": work.path(), "mcpServers": []}});
    let session = ask(&mut stdin, new).await["result"]["sessionId"].clone();
    let mention = |data: &str| json!({"type":"resource","resource":{"uri":"file:///shot.png","mimeType":"image/png","blob":data}});
    for (n, (data, says)) in [("not base64!", "base64"), (WIDE_PNG, "pixels")]
        .into_iter()
        .enumerate()
    {
        let prompt = json!({"jsonrpc":"2.0","id":10 + n,"method":"session/prompt","params":{"sessionId": session, "prompt":[{"type":"text","text":"look"}, mention(data)]}});
        let v = ask(&mut stdin, prompt).await;
        assert_eq!(v["error"]["code"], -32602, "{v}");
        let message = v["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(says), "{v}");
    }
    assert!(
        server.requests().is_empty(),
        "a bad image reached the model"
    );
    let prompt = json!({"jsonrpc":"2.0","id":20,"method":"session/prompt","params":{"sessionId": session, "prompt":[{"type":"text","text":"look"}, mention(SMALL_PNG)]}});
    let v = ask(&mut stdin, prompt).await;
    assert_eq!(v["result"]["stopReason"], "end_turn", "{v}");
    let sent = server.requests()[0].body.to_string();
    assert!(sent.contains(r#""type":"image""#), "{sent}");
    drop(stdin);
    assert_eq!(child.wait().await.unwrap().code(), Some(0));
}
