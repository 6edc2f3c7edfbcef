//! `kaji sessions` through the real binary, on session files written by
//! the real store in a temporary `$KAJI_HOME`.

use std::path::{Path, PathBuf};

use kaji_core::storage::index::IndexEntry;
use kaji_core::storage::record::{
    SESSION_FORMAT_VERSION, SessionHeader, SessionKind, SessionRecord,
};
use kaji_core::storage::store::{SessionStore, SessionWriter};
use kaji_protocol::{ContentBlock, Message, Role, Usage};
use serde_json::{Value, json};

use crate::common::{kaji_at, output};

struct Home {
    dir: tempfile::TempDir,
    /// Two project directories (canonical).
    here: PathBuf,
    there: PathBuf,
    _projects: tempfile::TempDir,
}

impl Home {
    fn new() -> Self {
        let projects = tempfile::tempdir().expect("temp dir");
        let root = projects.path().canonicalize().expect("canonical");
        let here = root.join("here");
        let there = root.join("there");
        std::fs::create_dir_all(&here).expect("mkdir");
        std::fs::create_dir_all(&there).expect("mkdir");
        Self {
            dir: tempfile::tempdir().expect("temp dir"),
            here,
            there,
            _projects: projects,
        }
    }

    fn store(&self) -> SessionStore {
        SessionStore::new(self.dir.path())
    }

    /// Runs `kaji sessions ARGS` in `cwd`; returns (exit code, stdout, stderr).
    fn run_in(&self, cwd: &Path, args: &[&str]) -> (i32, String, String) {
        output(
            kaji_at(self.dir.path())
                .current_dir(cwd)
                .arg("sessions")
                .args(args),
        )
    }

    fn run(&self, args: &[&str]) -> (i32, String, String) {
        self.run_in(&self.here, args)
    }

    /// Creates a session and records it in the index as a session does
    /// when a prompt ends.
    fn session(
        &self,
        id: &str,
        kind: SessionKind,
        cwd: &Path,
        title: &str,
        updated: u64,
    ) -> SessionWriter {
        let header = SessionHeader {
            format: SESSION_FORMAT_VERSION,
            session_id: id.to_string(),
            kind,
            parent: (kind != SessionKind::Main).then(|| "parent".to_string()),
            cwd: cwd.to_path_buf(),
            created: updated - 1000,
            kaji_version: "0.1.0".into(),
        };
        let store = self.store();
        let writer = store.create(&header).expect("create");
        let mut entry = IndexEntry::new(&header);
        entry.title = title.to_string();
        entry.updated = updated;
        entry.turns = 2;
        entry.input_tokens = 12_000;
        entry.output_tokens = 345;
        entry.status = "completed".into();
        store.upsert(&entry).expect("upsert");
        writer
    }
}

fn append(writer: &SessionWriter, records: &[SessionRecord]) {
    for r in records {
        writer.append(r).expect("append");
    }
}

/// A prompt with one Bash round and a final answer.
fn one_prompt() -> Vec<SessionRecord> {
    let call = Message {
        role: Role::Assistant,
        content: vec![
            ContentBlock::Reasoning {
                text: "List first.".into(),
                signature: None,
            },
            ContentBlock::text("Let me look."),
            ContentBlock::ToolUse {
                id: "t1".into(),
                name: "Bash".into(),
                input: json!({"command": "ls src"}),
            },
        ],
    };
    let result = ContentBlock::tool_result("t1", "main.rs\nlib.rs", false);
    vec![
        SessionRecord::TaskStarted {
            task_id: "task".into(),
            prompt: "Fix the bug".into(),
            at: 1_700_000_000_000,
        },
        SessionRecord::Message {
            message: Message::user_text("Fix the bug"),
        },
        SessionRecord::Message { message: call },
        SessionRecord::Usage {
            turn: 1,
            usage: Usage {
                input_tokens: 100,
                output_tokens: 10,
                ..Usage::default()
            },
            cost_usd: None,
        },
        SessionRecord::ToolResult {
            block: result.clone(),
            tool_use_id: "t1".into(),
        },
        SessionRecord::Message {
            message: Message {
                role: Role::User,
                content: vec![result],
            },
        },
        SessionRecord::Message {
            message: Message::assistant_text("Fixed it."),
        },
        SessionRecord::Usage {
            turn: 2,
            usage: Usage {
                input_tokens: 200,
                output_tokens: 20,
                ..Usage::default()
            },
            cost_usd: None,
        },
        SessionRecord::TaskEnded {
            task_id: "task".into(),
            status: "completed".into(),
            at: 1_700_000_001_000,
        },
    ]
}

#[test]
fn list_shows_this_directorys_sessions_newest_first() {
    let home = Home::new();
    let (here, there) = (home.here.clone(), home.there.clone());
    drop(home.session(
        "aaaaaaaa-1111",
        SessionKind::Main,
        &here,
        "Fix the bug",
        1_700_000_000_000,
    ));
    drop(home.session(
        "bbbbbbbb-2222",
        SessionKind::Fork,
        &here,
        "Fork of it",
        1_700_000_600_000,
    ));
    drop(home.session(
        "cccccccc-3333",
        SessionKind::Main,
        &there,
        "Elsewhere",
        1_700_000_300_000,
    ));
    drop(home.session(
        "dddddddd-4444",
        SessionKind::Subagent,
        &here,
        "A helper",
        1_700_000_900_000,
    ));

    let (code, out, err) = home.run(&["list"]);
    assert_eq!(code, 0, "{err}");
    let expected = "\
ID        UPDATED           TURNS  TOKENS  STATUS     TITLE
bbbbbbbb  2023-11-14 22:23  2      12.3k   completed  Fork of it
aaaaaaaa  2023-11-14 22:13  2      12.3k   completed  Fix the bug
";
    assert_eq!(out, expected);
    // -C names the directory instead of the current one.
    let there_arg = there.to_str().expect("utf-8");
    let (code, out, _) = home.run(&["list", "-C", there_arg]);
    assert_eq!(code, 0);
    assert_eq!(out.lines().count(), 2, "{out}");
    assert!(out.contains("cccccccc  "), "{out}");

    let (code, out, _) = home.run(&["list", "--all"]);
    assert_eq!(code, 0);
    let ids: Vec<&str> = out.lines().skip(1).map(|l| &l[..8]).collect();
    assert_eq!(ids, ["dddddddd", "bbbbbbbb", "cccccccc", "aaaaaaaa"]);

    let (code, out, _) = home.run(&["list", "--json"]);
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(&out).expect("json");
    let entries = v.as_array().expect("array");
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[0]["id"], "bbbbbbbb-2222");
    assert_eq!(entries[0]["kind"], "fork");
    assert_eq!(entries[0]["parent"], "parent");
    assert_eq!(entries[0]["cwd"], json!(here));
    assert_eq!(entries[0]["title"], "Fork of it");
    assert_eq!(entries[0]["updated"], 1_700_000_600_000u64);
    assert_eq!(entries[0]["status"], "completed");
    assert_eq!(entries[0]["turns"], 2);
    assert_eq!(entries[0]["input_tokens"], 12_000);
    assert_eq!(entries[0]["output_tokens"], 345);
    assert_eq!(entries[0]["cost_usd"], 0.0);

    let (code, _, err) = home.run(&["list", "-C", "/no/such/dir"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("/no/such/dir"), "{err}");
}

#[test]
fn an_empty_home_lists_nothing() {
    let home = Home::new();
    let (code, out, err) = home.run(&["list"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "ID  UPDATED  TURNS  TOKENS  STATUS  TITLE\n");
    let (code, out, _) = home.run(&["list", "--json"]);
    assert_eq!(code, 0);
    assert_eq!(out.trim(), "[]");
}

#[test]
fn a_lost_index_is_rebuilt_by_list() {
    let home = Home::new();
    let here = home.here.clone();
    let writer = home.session(
        "eeee0000-1",
        SessionKind::Main,
        &here,
        "ignored",
        1_700_000_000_000,
    );
    append(&writer, &one_prompt());
    drop(writer);
    std::fs::remove_file(home.store().dir().join("index.jsonl")).expect("rm index");
    let (code, out, err) = home.run(&["list"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("rebuilt"), "{err}");
    let row = out.lines().nth(1).expect("a row");
    assert!(row.starts_with("eeee0000  "), "{row}");
    assert!(
        row.ends_with("  2      330     completed  Fix the bug"),
        "{row}"
    );
}

#[test]
fn show_prints_the_transcript_as_exec_does() {
    let home = Home::new();
    let here = home.here.clone();
    let writer = home.session(
        "f00d1234-5678",
        SessionKind::Main,
        &here,
        "Fix the bug",
        1_700_000_000_000,
    );
    append(&writer, &one_prompt());
    drop(writer);
    let (code, out, err) = home.run(&["show", "f00d"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(err, "");
    let expected = "\
> Fix the bug

~ List first.
Let me look.
⏺ Bash: ls src
  ⎿ main.rs (+1 lines)
Fixed it.
  (prompt ended: completed)

[completed] 2 turn(s), 300 input / 30 output tokens
";
    assert_eq!(out, expected);
}

#[test]
fn show_answers_a_call_cut_off_by_a_crash() {
    let home = Home::new();
    let here = home.here.clone();
    let writer = home.session(
        "cafe0000-1",
        SessionKind::Main,
        &here,
        "Fix the bug",
        1_700_000_000_000,
    );
    append(&writer, &one_prompt()[..4]);
    drop(writer);
    let (code, out, err) = home.run(&["show", "cafe"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("⏺ Bash: ls src\n  ⎿ error: interrupted — it may have run partly"),
        "{out}"
    );
    assert!(
        out.ends_with("[interrupted] 1 turn(s), 100 input / 10 output tokens\n"),
        "{out}"
    );
}

#[test]
fn show_json_prints_the_records() {
    let home = Home::new();
    let here = home.here.clone();
    let writer = home.session(
        "beef0000-1",
        SessionKind::Main,
        &here,
        "Fix the bug",
        1_700_000_000_000,
    );
    append(&writer, &one_prompt());
    let path = writer.path().to_path_buf();
    drop(writer);
    let (code, out, err) = home.run(&["show", "beef0000-1", "--json"]);
    assert_eq!(code, 0, "{err}");
    let file = std::fs::read_to_string(path).expect("read");
    assert_eq!(out, file);
    let first: Value = serde_json::from_str(out.lines().next().expect("a line")).expect("json");
    assert_eq!(first["type"], "header");
    assert_eq!(first["session_id"], "beef0000-1");
}

#[test]
fn show_warns_about_bad_lines_and_shows_the_rest() {
    let home = Home::new();
    let here = home.here.clone();
    let writer = home.session(
        "dead0000-1",
        SessionKind::Main,
        &here,
        "Fix the bug",
        1_700_000_000_000,
    );
    append(&writer, &one_prompt()[..2]);
    let path = writer.path().to_path_buf();
    drop(writer);
    let mut text = std::fs::read_to_string(&path).expect("read");
    text.push_str("{\"type\":\"hologram\"}\n{\"type\":\"message\",\"mess");
    std::fs::write(&path, text).expect("write");
    let (code, out, err) = home.run(&["show", "dead"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("> Fix the bug\n"), "{out}");
    let file = path.display().to_string();
    assert!(
        err.contains(&format!("{file}:4: unknown record type \"hologram\"")),
        "{err}"
    );
    assert!(
        err.contains(&format!("{file}:5: the last line is cut off")),
        "{err}"
    );
}

#[test]
fn unknown_and_ambiguous_ids_are_errors() {
    let home = Home::new();
    let here = home.here.clone();
    drop(home.session("abc-1", SessionKind::Main, &here, "one", 1_700_000_000_000));
    drop(home.session("abc-2", SessionKind::Main, &here, "two", 1_700_000_000_000));
    for cmd in ["show", "rm"] {
        let (code, _, err) = home.run(&[cmd, "zzz"]);
        assert_eq!(code, 1, "{cmd}: {err}");
        assert!(err.contains("no session matches \"zzz\""), "{cmd}: {err}");
        let (code, _, err) = home.run(&[cmd, "abc"]);
        assert_eq!(code, 1, "{cmd}: {err}");
        assert!(
            err.contains("\"abc\" matches 2 sessions: abc-1, abc-2"),
            "{cmd}: {err}"
        );
    }
}

#[test]
fn rm_deletes_a_session_unless_it_is_open() {
    let home = Home::new();
    let here = home.here.clone();
    drop(home.session(
        "1234abcd-1",
        SessionKind::Main,
        &here,
        "one",
        1_700_000_000_000,
    ));
    let open = home.session(
        "5678abcd-2",
        SessionKind::Main,
        &here,
        "two",
        1_700_000_000_000,
    );

    let (code, _, err) = home.run(&["rm", "5678"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(&format!(
            "session 5678abcd-2 is open in process {} (",
            std::process::id()
        )),
        "{err}"
    );
    assert!(open.path().exists());

    let (code, out, err) = home.run(&["rm", "1234"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "removed session 1234abcd-1\n");
    assert!(!home.store().path_of("1234abcd-1").exists());
    let (_, out, _) = home.run(&["list"]);
    assert!(!out.contains("1234abcd"), "{out}");
    assert!(out.contains("5678abcd"), "{out}");
    let (code, _, _) = home.run(&["rm", "1234"]);
    assert_eq!(code, 1);
    drop(open);
}
