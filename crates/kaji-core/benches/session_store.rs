//! Speed of the session store: appending a round of about 2 KB (a user
//! message, an assistant message with a tool_use, a tool result) with and
//! without fsync; loading and replaying a session of 10,000 such rounds
//! (about 20 MB; target under 200 ms); listing an index of 10,000 sessions
//! (target under 50 ms). Results are recorded in docs/benchmarks.md.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "benchmark setup: a failed step aborts the measurement"
)]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use kaji_core::session::index::{IndexEntry, title_of};
use kaji_core::session::record::{
    SESSION_FORMAT_VERSION, SessionHeader, SessionKind, SessionRecord,
};
use kaji_core::session::replay::replay;
use kaji_core::session::store::{SessionStore, SessionWriter, load_session_file};
use kaji_protocol::{ContentBlock, Message, Role, Usage};
use serde_json::json;

fn main() {
    divan::main();
}

const ROUNDS: usize = 10_000;
const SESSIONS: usize = 10_000;

fn header(id: &str) -> SessionHeader {
    SessionHeader {
        format: SESSION_FORMAT_VERSION,
        session_id: id.to_string(),
        kind: SessionKind::Main,
        parent: None,
        cwd: PathBuf::from("/home/user/project"),
        created: 1_700_000_000_000,
        kaji_version: "0.1.0".into(),
    }
}

/// One round of about 2 KB as a session writes it: the user message (the
/// previous round's tool result), the assistant's reply calling a tool,
/// the request's usage and the tool's result.
fn round(n: usize) -> [SessionRecord; 4] {
    let id = format!("toolu_{n:08}");
    let output = format!("line {n} of the output of ls -la src/, a directory listing\n").repeat(13);
    let user = if n == 0 {
        Message::user_text("Find the bug in the parser and fix it, then run the tests.")
    } else {
        Message {
            role: Role::User,
            content: vec![ContentBlock::tool_result(
                format!("toolu_{:08}", n - 1),
                output.clone(),
                false,
            )],
        }
    };
    let assistant = Message {
        role: Role::Assistant,
        content: vec![
            ContentBlock::text("Let me look at the source directory to find the parser module."),
            ContentBlock::ToolUse {
                id: id.clone(),
                name: "Bash".into(),
                input: json!({"command": "ls -la src/", "description": "List the sources"}),
            },
        ],
    };
    [
        SessionRecord::Message { message: user },
        SessionRecord::Message { message: assistant },
        SessionRecord::Usage {
            turn: n as u32 + 1,
            usage: Usage {
                input_tokens: 1200,
                output_tokens: 80,
                ..Usage::default()
            },
            cost_usd: Some(0.004),
        },
        SessionRecord::ToolResult {
            block: ContentBlock::tool_result(id.clone(), output, false),
            tool_use_id: id,
        },
    ]
}

fn writer_in(dir: &Path) -> (SessionStore, SessionWriter) {
    let store = SessionStore::new(dir);
    let writer = store
        .create(&header(&SessionStore::new_session_id()))
        .expect("create");
    (store, writer)
}

#[divan::bench]
fn append_round_no_fsync(bencher: divan::Bencher) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_store, writer) = writer_in(dir.path());
    let records = round(1);
    bencher.bench_local(|| {
        for r in &records {
            writer.append(r).expect("append");
        }
    });
}

#[divan::bench]
fn append_round_fsync(bencher: divan::Bencher) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_store, writer) = writer_in(dir.path());
    let records = round(1);
    bencher.bench_local(|| {
        // As a session does: fsync after the tool result and at the
        // round's end.
        writer.append(&records[0]).expect("append");
        writer.append(&records[1]).expect("append");
        writer.append(&records[2]).expect("append");
        writer.sync().expect("sync");
        writer.append(&records[3]).expect("append");
        writer.sync().expect("sync");
    });
}

/// A session file of [`ROUNDS`] rounds, written once per bench run.
fn big_session() -> &'static Path {
    static FILE: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    &FILE
        .get_or_init(|| {
            let dir = tempfile::tempdir().expect("tempdir");
            let (_store, writer) = writer_in(dir.path());
            for n in 0..ROUNDS {
                for r in round(n) {
                    writer.append(&r).expect("append");
                }
            }
            writer.sync().expect("sync");
            let path = writer.path().to_path_buf();
            let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
            eprintln!("session file: {ROUNDS} rounds, {} MB", size / 1_000_000);
            (dir, path)
        })
        .1
}

#[divan::bench(sample_count = 20)]
fn load_and_replay_10k_rounds(bencher: divan::Bencher) {
    let path = big_session();
    bencher.bench_local(|| {
        let loaded = load_session_file(path).expect("load");
        let restored = replay(&loaded);
        assert_eq!(restored.history.len(), 2 * ROUNDS + 1);
        restored
    });
}

/// An index of [`SESSIONS`] sessions (one line each), made once.
fn big_index() -> &'static SessionStore {
    static STORE: OnceLock<(tempfile::TempDir, SessionStore)> = OnceLock::new();
    &STORE
        .get_or_init(|| {
            let dir = tempfile::tempdir().expect("tempdir");
            let store = SessionStore::new(dir.path());
            let mut lines = String::new();
            for n in 0..SESSIONS {
                let mut entry = IndexEntry::new(&header(&SessionStore::new_session_id()));
                entry.title = title_of(&format!(
                    "Session {n}: find the bug in the parser and fix it, then run the whole test suite"
                ));
                entry.updated = 1_700_000_000_000 + n as u64;
                entry.status = "completed".into();
                entry.turns = 12;
                entry.input_tokens = 120_000;
                entry.output_tokens = 8_000;
                entry.cost_usd = 0.42;
                lines.push_str(&serde_json::to_string(&entry).expect("json"));
                lines.push('\n');
            }
            std::fs::create_dir_all(store.dir()).expect("mkdir");
            std::fs::write(store.dir().join("index.jsonl"), lines).expect("write index");
            (dir, store)
        })
        .1
}

#[divan::bench(sample_count = 50)]
fn list_10k_sessions(bencher: divan::Bencher) {
    let store = big_index();
    bencher.bench_local(|| {
        let list = store.list().expect("list");
        assert_eq!(list.entries.len(), SESSIONS);
        assert!(!list.rebuilt);
        list
    });
}
