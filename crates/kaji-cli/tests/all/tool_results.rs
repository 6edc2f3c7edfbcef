//! A tool renders its own result (#25), through the real binary: the exec
//! transcript and `kaji exec --json` show each tool's one-line summary;
//! `kaji sessions show` tells the user's texts from kaji's by their
//! recorded origin (older files by the bracket rule); an ACP approval is
//! matched to its call by id even when another call of the same tool was
//! announced after it.

use std::path::Path;

use kaji_core::storage::index::IndexEntry;
use kaji_core::storage::record::{
    SESSION_FORMAT_VERSION, SessionHeader, SessionKind, SessionRecord,
};
use kaji_core::storage::store::SessionStore;
use kaji_protocol::{ContentBlock, Message, Role};
use kaji_test_support::{Script, ScriptedModelServer, Turn};
use serde_json::{Value, json};

use crate::common::acp::Raw;
use crate::common::{
    Wire, done, home_and_work, json_lines, kaji, kaji_at, output, scripted, serve, tool_results,
    write,
};

/// A Read of three lines, a failing command and a Glob.
fn three_tools() -> Vec<Turn> {
    vec![
        Turn::tool_call("Read", json!({"file_path": "three.txt"})),
        Turn::tool_call("Bash", json!({"command": "echo oops; exit 3"})),
        Turn::tool_call("Glob", json!({"pattern": "*.txt"})),
        done("Looked."),
    ]
}

/// `kaji exec --yolo FLAGS -C WORK "look"` against `server`.
async fn exec(home: &Path, work: &Path, server: &ScriptedModelServer, flags: &[&str]) -> Vec<u8> {
    let mut cmd = kaji(home);
    cmd.args(["exec", "--yolo"]).args(flags).arg("-C").arg(work);
    scripted(&mut cmd, server, Wire::Anthropic);
    let out = cmd.arg("look").output().await.expect("kaji runs");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

#[tokio::test]
async fn the_exec_transcript_shows_each_tools_summary() {
    let (home, work) = home_and_work();
    write(work.path(), "three.txt", "one\ntwo\nthree\n");
    let server = serve(three_tools()).await;
    let out = String::from_utf8(exec(home.path(), work.path(), &server, &[]).await).unwrap();
    for line in [
        "⏺ Read: three.txt\n  ⎿ Read 3 lines\n",
        "⏺ Bash: echo oops; exit 3\n  ⎿ oops · exit 3\n",
        "⏺ Glob: *.txt\n  ⎿ 2 files\n",
    ] {
        assert!(out.contains(line), "{line:?} in:\n{out}");
    }
}

#[tokio::test]
async fn exec_json_carries_the_summary_beside_the_output() {
    let (home, work) = home_and_work();
    write(work.path(), "three.txt", "one\ntwo\nthree\n");
    let server = serve(three_tools()).await;
    let lines = json_lines(&exec(home.path(), work.path(), &server, &["--json"]).await);
    let results = tool_results(&lines);
    let summaries: Vec<&Value> = results.iter().take(3).map(|r| &r["summary"]).collect();
    assert_eq!(summaries, ["Read 3 lines", "oops · exit 3", "2 files"]);
    assert!(results[0]["output"].as_str().unwrap().contains("\tthree"));
}

/// A session file in `home` with these records.
fn session(home: &Path, cwd: &Path, id: &str, records: &[SessionRecord]) {
    let header = SessionHeader {
        format: SESSION_FORMAT_VERSION,
        session_id: id.to_string(),
        kind: SessionKind::Main,
        parent: None,
        cwd: cwd.to_path_buf(),
        created: 1_700_000_000_000,
        kaji_version: "0.1.0".into(),
    };
    let store = SessionStore::new(home);
    let writer = store.create(&header).expect("create");
    for r in records {
        writer.append(r).expect("append");
    }
    store.upsert(&IndexEntry::new(&header)).expect("index");
}

fn prompt(at: u64, prompt: &str, content: Vec<ContentBlock>) -> [SessionRecord; 3] {
    [
        SessionRecord::TaskStarted {
            task_id: format!("t{at}"),
            prompt: prompt.into(),
            at,
        },
        SessionRecord::Message {
            message: Message {
                role: Role::User,
                content,
            },
        },
        SessionRecord::Message {
            message: Message::assistant_text("Done."),
        },
    ]
}

#[test]
fn sessions_show_knows_the_users_texts_by_their_origin() {
    let home = tempfile::tempdir().unwrap();
    let cwd = home.path().canonicalize().unwrap();
    // Written by a kaji that marks the user's texts: a prompt that starts
    // with a bracket is the user's; kaji's context is not, brackets or not.
    let records = prompt(
        1,
        "[x] tick the box",
        vec![
            ContentBlock::text("[SessionStart hook]\nbranch main"),
            ContentBlock::text("Context a hook added"),
            ContentBlock::prompt("[x] tick the box"),
        ],
    );
    session(home.path(), &cwd, "aaaa0000-1", &records);
    // Written before origins: the bracket rule.
    let records = prompt(
        2,
        "Fix the bug",
        vec![
            ContentBlock::text("[kaji: the session was resumed]"),
            ContentBlock::text("Fix the bug"),
        ],
    );
    session(home.path(), &cwd, "bbbb0000-1", &records);

    let (code, out, err) = output(kaji_at(home.path()).args(["sessions", "show", "aaaa"]));
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("> [x] tick the box\n"), "{out}");
    assert!(!out.contains("SessionStart"), "{out}");
    assert!(!out.contains("a hook added"), "{out}");

    let (code, out, err) = output(kaji_at(home.path()).args(["sessions", "show", "bbbb"]));
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("> Fix the bug\n"), "{out}");
    assert!(!out.contains("resumed"), "{out}");
}

/// The next line from `kaji acp`, kept in `seen`; a line that does not
/// come fails the test with the lines before it (a guard, not timing).
async fn recv(raw: &mut Raw, seen: &mut Vec<Value>) -> Value {
    match tokio::time::timeout(std::time::Duration::from_secs(60), raw.recv()).await {
        Ok(v) => {
            seen.push(v.clone());
            v
        }
        Err(_) => panic!("kaji acp went silent; it said:\n{seen:#?}"),
    }
}

/// The id and `file_path` of a `tool_call` update, if `v` is one.
fn announced_file(v: &Value) -> Option<(&str, &str)> {
    let u = &v["params"]["update"];
    (v["method"] == "session/update" && u["sessionUpdate"] == "tool_call").then_some(())?;
    Some((
        u["toolCallId"].as_str()?,
        u["rawInput"]["file_path"].as_str()?,
    ))
}

/// A FIFO at `path`: opening it blocks until the other end is opened,
/// which orders two processes without any timing.
fn fifo(path: &Path) {
    let status = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap();
    assert!(status.success());
}

/// Writes to the FIFO `path` in the background (the write waits for its
/// reader).
fn open_fifo(path: &Path) {
    let path = path.to_path_buf();
    tokio::task::spawn_blocking(move || std::fs::write(path, b"go\n"));
}

/// The request's `file_path`, if `v` is a permission request.
fn asked_file(v: &Value) -> Option<&str> {
    (v["method"] == "session/request_permission").then_some(())?;
    v["params"]["toolCall"]["rawInput"]["file_path"].as_str()
}

/// Two calls of `Write` are pending at once: a background sub-agent's,
/// held by a PreToolUse hook between its announcement and its ask, and
/// the main agent's, announced after it (the main agent's `cat` of a FIFO
/// waits for the helper's announcement). Each permission request names its
/// own call (the ask's `tool_use_id`), not the last one announced.
#[tokio::test]
async fn an_acp_approval_names_its_own_call_among_two_of_one_tool() {
    let (home, work) = home_and_work();
    let hold_helper = home.path().join("hold-helper");
    let hold_main = home.path().join("hold-main");
    fifo(&hold_helper);
    fifo(&hold_main);
    let hook = home.path().join("hook.sh");
    std::fs::write(
        &hook,
        format!(
            "input=$(cat)\ncase \"$input\" in *helper.txt*) cat '{}' >/dev/null ;; esac\nexit 0\n",
            hold_helper.display()
        ),
    )
    .unwrap();
    std::fs::write(
        home.path().join("kaji-home/config.toml"),
        format!(
            "[[hooks.PreToolUse]]\nmatcher = \"Write\"\ncommand = \"sh '{}'\"\n",
            hook.display()
        ),
    )
    .unwrap();
    // A user-level agent type: nothing of the project's needs trust.
    write(
        home.path(),
        "kaji-home/agents/helper.md",
        "---\nname: helper\ndescription: Helps\ntools: Write\n---\nHELPER-MARKER\n",
    );
    // Ids are unique in a session, as a provider's are (the scripted
    // server numbers each agent's calls from 0).
    let helper = Script::new([
        Turn::text("Writing.").and_tool_call_with_id(
            "toolu_helper_write",
            "Write",
            json!({"file_path": "helper.txt", "content": "h\n"}),
        ),
        Turn::text("helped"),
    ]);
    let wait = format!("cat '{}'", hold_main.display());
    let script = Script::new([
        Turn::tool_call(
            "Agent",
            json!({"description": "help", "prompt": "help", "subagent_type": "helper", "run_in_background": true}),
        ),
        Turn::tool_call("Bash", json!({"command": wait})),
        Turn::tool_call("Write", json!({"file_path": "main.txt", "content": "m\n"})),
        Turn::text("done"),
    ])
    .with_agent("HELPER-MARKER", helper);
    let server = ScriptedModelServer::start(script).await;
    let mut raw = Raw::start(home.path(), &server);
    let session = raw.init_and_session(work.path()).await;
    let prompt = json!({"jsonrpc":"2.0","id":10,"method":"session/prompt","params":{"sessionId": session, "prompt":[{"type":"text","text":"go"}]}});
    raw.send(&prompt.to_string()).await;

    let mut seen = Vec::new();
    let mut calls = std::collections::HashMap::new();
    let mut asks = std::collections::HashMap::new();
    while asks.len() < 2 {
        let v = recv(&mut raw, &mut seen).await;
        if let Some((id, file)) = announced_file(&v) {
            calls.insert(file.to_string(), id.to_string());
            match file {
                // The helper waits in its hook: the main agent goes on.
                "helper.txt" => open_fifo(&hold_main),
                // Both calls wait: the helper goes on to its ask.
                "main.txt" => open_fifo(&hold_helper),
                _ => {}
            }
        }
        match asked_file(&v) {
            Some(file) => {
                asks.insert(file.to_string(), v);
            }
            // Anything else asked (the main agent's `cat`) runs.
            None if v["method"] == "session/request_permission" => {
                let reply = json!({"jsonrpc":"2.0","id":v["id"],"result":{"outcome":{"outcome":"selected","optionId":"allow_once"}}});
                raw.send(&reply.to_string()).await;
            }
            None => {}
        }
    }
    let ids: Vec<&Value> = seen
        .iter()
        .filter_map(|v| announced_file(v).map(|_| &v["params"]["update"]["toolCallId"]))
        .collect();
    assert_eq!(ids.len(), 2, "the helper's call, then the main agent's");
    for file in ["helper.txt", "main.txt"] {
        let ask = &asks[file];
        assert_eq!(
            ask["params"]["toolCall"]["toolCallId"],
            calls[file].as_str(),
            "the ask about {file}: {ask}"
        );
    }
    assert_ne!(calls["helper.txt"], calls["main.txt"]);
    for ask in asks.values() {
        let reply = json!({"jsonrpc":"2.0","id":ask["id"],"result":{"outcome":{"outcome":"selected","optionId":"reject_once"}}});
        raw.send(&reply.to_string()).await;
    }
    let answer = raw.response(10).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    raw.stdin.take();
    assert_eq!(raw.child.wait().await.unwrap().code(), Some(0));
}
