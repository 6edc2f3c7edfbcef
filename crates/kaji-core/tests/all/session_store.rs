//! The session store on real files: writing, tolerant loading, the lock,
//! prefixes, removal and the index.

use std::fs;
use std::io::Write;
use std::path::Path;

use kaji_core::storage::index::{IndexEntry, title_of};
use kaji_core::storage::record::SessionRecord;
use kaji_core::storage::replay::{INTERRUPTED_RESULT, replay};
use kaji_core::storage::store::{SessionStore, load_session_file};
use kaji_core::storage::store_error::{LoadWarningKind, StoreError};
use kaji_protocol::{ContentBlock, Message};

use crate::session_support;
use session_support::{assert_valid_history, header, prompt_records, write_all};

fn store() -> (tempfile::TempDir, SessionStore) {
    let home = tempfile::tempdir().expect("temp dir");
    let store = SessionStore::new(home.path());
    (home, store)
}

/// A session of two prompts (3 and 2 tool rounds), closed.
fn two_prompt_session(store: &SessionStore, id: &str) -> Vec<SessionRecord> {
    let writer = store
        .create(&header(id, Path::new("/project")))
        .expect("create");
    let mut records = prompt_records("Fix the bug in the parser", "p1", 3);
    records.push(SessionRecord::Approval {
        rule: "Bash(ls:*)".into(),
    });
    records.extend(prompt_records("Now add a test", "p2", 2));
    write_all(&writer, &records);
    records
}

fn append_raw(path: &Path, bytes: &[u8]) {
    let mut f = fs::OpenOptions::new()
        .append(true)
        .open(path)
        .expect("open");
    f.write_all(bytes).expect("write");
}

#[test]
fn a_session_written_is_read_back_whole() {
    let (_home, store) = store();
    let id = SessionStore::new_session_id();
    let records = two_prompt_session(&store, &id);
    let loaded = store.load(&id).expect("load");
    assert_eq!(loaded.header.session_id, id);
    assert_eq!(loaded.records, records);
    assert!(loaded.warnings.is_empty());
    let restored = replay(&loaded);
    assert_valid_history(&restored.history, "whole");
    assert_eq!(restored.history.len(), 2 * 4 + 2 * 3);
    assert_eq!(restored.prompts.len(), 2);
    assert_eq!(restored.approvals, vec!["Bash(ls:*)"]);
    assert_eq!(restored.turns, 4 + 3);
    assert!(!restored.last_round_interrupted);
    // One JSON object per line, the header first.
    let text = fs::read_to_string(store.path_of(&id)).expect("read");
    assert_eq!(text.lines().count(), records.len() + 1);
    assert!(text.starts_with("{\"type\":\"header\""), "{text}");
}

#[test]
fn session_ids_are_random_uuids() {
    let a = SessionStore::new_session_id();
    let b = SessionStore::new_session_id();
    assert_ne!(a, b);
    assert_eq!(a.len(), 36);
    assert_ne!(a[..8], b[..8]);
}

#[test]
fn a_file_cut_at_any_byte_loads_with_a_valid_history() {
    let (home, store) = store();
    let id = "cut";
    two_prompt_session(&store, id);
    let full = fs::read(store.path_of(id)).expect("read");
    let header_end = full.iter().position(|b| *b == b'\n').expect("header line") + 1;
    let mut previous_len = 0;
    for end in header_end..=full.len() {
        // A new file each time: truncating a file in place makes ext4
        // flush it, which would make this test take half a minute.
        let cut_path = home.path().join(format!("cut-{end}.jsonl"));
        fs::write(&cut_path, &full[..end]).expect("write cut");
        let loaded = load_session_file(&cut_path).unwrap_or_else(|e| panic!("cut at {end}: {e}"));
        // Cut inside a line (a complete record without its newline is kept).
        let torn = end < full.len() && full[end - 1] != b'\n' && full[end] != b'\n';
        assert_eq!(loaded.warnings.len(), usize::from(torn), "cut at {end}");
        if torn {
            assert_eq!(loaded.warnings[0].kind, LoadWarningKind::TornLastLine);
        }
        let restored = replay(&loaded);
        assert_valid_history(&restored.history, &format!("cut at {end}"));
        // Cutting later never loses a message kept by an earlier cut,
        // except the made-up answer to calls still open.
        assert!(restored.history.len() + 1 >= previous_len, "cut at {end}");
        previous_len = restored.history.len();
        fs::remove_file(&cut_path).expect("remove cut");
    }
}

#[test]
fn a_crash_mid_tool_gets_an_interrupted_result() {
    let (_home, store) = store();
    let writer = store
        .create(&header("crash", Path::new("/p")))
        .expect("create");
    let records = prompt_records("go", "p", 1);
    // Up to and including the first tool result of the first round.
    let upto = records
        .iter()
        .position(|r| matches!(r, SessionRecord::ToolResult { .. }))
        .expect("a tool result");
    write_all(&writer, &records[..=upto]);
    drop(writer);
    let restored = replay(&store.load("crash").expect("load"));
    assert!(restored.last_round_interrupted);
    assert_valid_history(&restored.history, "crash");
    let last = restored.history.last().expect("a message");
    assert_eq!(
        last.content,
        vec![
            ContentBlock::tool_result("p-0-a", "main.rs\nlib.rs\n", false),
            ContentBlock::tool_result("p-0-b", INTERRUPTED_RESULT, true),
        ]
    );
}

#[test]
fn bad_lines_are_skipped_with_warnings_naming_file_and_line() {
    let (_home, store) = store();
    let writer = store
        .create(&header("bad", Path::new("/p")))
        .expect("create");
    writer
        .append(&SessionRecord::Message {
            message: Message::user_text("one"),
        })
        .expect("append");
    let path = store.path_of("bad");
    append_raw(&path, b"{this is not json\n");
    append_raw(&path, b"{\"type\":\"hologram\",\"x\":1}\n");
    append_raw(&path, b"{\"type\":\"message\",\"message\":42}\n");
    writer
        .append(&SessionRecord::Message {
            message: Message::assistant_text("two"),
        })
        .expect("append");
    append_raw(&path, b"{\"type\":\"mode\",\"mo");
    let loaded = store.load("bad").expect("load");
    assert_eq!(loaded.records.len(), 2, "both good records kept");
    let kinds: Vec<(usize, &LoadWarningKind)> =
        loaded.warnings.iter().map(|w| (w.line, &w.kind)).collect();
    assert_eq!(kinds.len(), 4, "{kinds:?}");
    assert!(matches!(kinds[0], (3, LoadWarningKind::Corrupt { .. })));
    assert_eq!(
        kinds[1],
        (
            4,
            &LoadWarningKind::UnknownType {
                record_type: "hologram".into()
            }
        )
    );
    assert!(matches!(kinds[2], (5, LoadWarningKind::Corrupt { .. })));
    assert_eq!(kinds[3], (7, &LoadWarningKind::TornLastLine));
    let shown = loaded.warnings[1].to_string();
    assert!(
        shown.starts_with(&format!("{}:4: ", path.display())),
        "{shown}"
    );
    assert!(shown.contains("hologram"), "{shown}");
}

#[test]
fn a_missing_or_bad_header_is_an_error_naming_the_file() {
    let (home, _store) = store();
    let path = home.path().join("h.jsonl");
    for content in [
        &b""[..],
        b"{\"type\":\"mode\",\"mode\":\"plan\"}\n",
        b"garbage\n",
        b"{\"type\":\"header\",\"format\":1",
    ] {
        fs::write(&path, content).expect("write");
        let err = load_session_file(&path).expect_err("no header");
        assert!(
            matches!(err, StoreError::BadHeader { line: 1, .. }),
            "{err}"
        );
        assert!(
            err.to_string()
                .starts_with(&format!("{}:1: ", path.display())),
            "{err}"
        );
    }
    let err = load_session_file(&home.path().join("absent.jsonl")).expect_err("absent");
    assert!(err.to_string().contains("absent.jsonl"), "{err}");
}

#[test]
fn non_regular_files_are_never_read() {
    let (_home, store) = store();
    fs::create_dir_all(store.dir()).expect("dir");
    std::os::unix::fs::symlink("/dev/zero", store.path_of("zero")).expect("symlink");
    fs::create_dir(store.path_of("adir")).expect("dir");
    for id in ["zero", "adir"] {
        let err = store.load(id).expect_err("refused");
        assert!(matches!(err, StoreError::NotRegularFile { .. }), "{err}");
        let err = store.open_for_append(id).expect_err("refused");
        assert!(matches!(err, StoreError::NotRegularFile { .. }), "{err}");
    }
}

#[test]
fn open_for_append_cuts_a_torn_tail_and_continues() {
    let (_home, store) = store();
    let writer = store
        .create(&header("torn", Path::new("/p")))
        .expect("create");
    writer
        .append(&SessionRecord::Message {
            message: Message::user_text("kept"),
        })
        .expect("append");
    drop(writer);
    append_raw(&store.path_of("torn"), b"{\"type\":\"message\",\"mess");
    let writer = store.open_for_append("torn").expect("reopen");
    writer
        .append(&SessionRecord::Message {
            message: Message::assistant_text("after"),
        })
        .expect("append");
    drop(writer);
    let loaded = store.load("torn").expect("load");
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    assert_eq!(loaded.records.len(), 2);

    // A complete last record without its newline is kept and ended.
    append_raw(
        &store.path_of("torn"),
        b"{\"type\":\"mode\",\"mode\":\"plan\"}",
    );
    let writer = store.open_for_append("torn").expect("reopen");
    writer
        .append(&SessionRecord::Mode {
            mode: "yolo".into(),
        })
        .expect("append");
    let loaded = store.load("torn").expect("load");
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    assert_eq!(loaded.records.len(), 4);
}

#[test]
fn a_session_is_open_in_one_writer_at_a_time() {
    let (_home, store) = store();
    let writer = store
        .create(&header("one", Path::new("/p")))
        .expect("create");
    let err = store.open_for_append("one").expect_err("locked");
    match &err {
        StoreError::Locked { id, holder, .. } => {
            assert_eq!(id, "one");
            assert_eq!(holder.pid, Some(std::process::id()));
            assert!(holder.command.is_some());
        }
        other => panic!("{other}"),
    }
    assert!(
        err.to_string().starts_with(&format!(
            "session one is open in process {} (",
            std::process::id()
        )),
        "{err}"
    );
    let err = store.remove("one").expect_err("locked");
    assert!(matches!(err, StoreError::Locked { .. }), "{err}");
    drop(writer);
    let again = store.open_for_append("one").expect("free after drop");
    drop(again);
    store.remove("one").expect("remove");
    assert!(!store.path_of("one").exists());
    assert!(store.list().expect("list").entries.is_empty());
    assert!(matches!(
        store.remove("one"),
        Err(StoreError::NotFound { .. })
    ));
}

#[test]
fn creating_an_existing_id_fails() {
    let (_home, store) = store();
    drop(
        store
            .create(&header("dup", Path::new("/p")))
            .expect("create"),
    );
    let err = store
        .create(&header("dup", Path::new("/p")))
        .expect_err("exists");
    assert!(matches!(err, StoreError::Exists { .. }), "{err}");
    let err = store
        .create(&header("../x", Path::new("/p")))
        .expect_err("bad id");
    assert!(matches!(err, StoreError::InvalidId { .. }), "{err}");
}

#[test]
fn prefixes_resolve_to_one_session() {
    let (_home, store) = store();
    for id in ["abc1", "abc2", "abd", "ab"] {
        drop(store.create(&header(id, Path::new("/p"))).expect("create"));
    }
    assert_eq!(store.resolve("abd").expect("exact"), "abd");
    assert_eq!(store.resolve("abc1").expect("exact"), "abc1");
    assert_eq!(store.resolve("ab").expect("an exact id wins"), "ab");
    match store.resolve("abc") {
        Err(StoreError::Ambiguous { candidates, .. }) => {
            assert_eq!(candidates, vec!["abc1", "abc2"])
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        store.resolve("zz"),
        Err(StoreError::NotFound { .. })
    ));
    assert!(matches!(
        store.resolve("../"),
        Err(StoreError::NotFound { .. })
    ));
    assert!(matches!(
        store.resolve("index"),
        Err(StoreError::NotFound { .. })
    ));
}

#[test]
fn the_index_keeps_the_last_entry_per_session() {
    let (_home, store) = store();
    drop(store.create(&header("a", Path::new("/p"))).expect("create"));
    drop(store.create(&header("b", Path::new("/q"))).expect("create"));
    let mut entry = IndexEntry::new(&header("a", Path::new("/p")));
    entry.title = title_of("Fix it");
    entry.updated = 1_800_000_000_000;
    entry.turns = 3;
    entry.status = "completed".into();
    store.upsert(&entry).expect("upsert");
    let list = store.list().expect("list");
    assert!(!list.rebuilt);
    assert_eq!(list.entries.len(), 2);
    assert_eq!(list.entries[0], entry, "newest first, last line wins");
    assert_eq!(list.entries[1].id, "b");
    assert_eq!(list.entries[1].status, "new");
}

#[test]
fn titles_are_one_line_cut_on_a_char_boundary() {
    assert_eq!(title_of("  fix\n the   bug "), "fix the bug");
    let long = "é".repeat(100);
    let t = title_of(&long);
    assert_eq!(t.chars().count(), 81);
    assert!(t.ends_with('…'));
}

#[test]
fn a_missing_torn_or_corrupt_index_is_rebuilt_from_the_files() {
    let (_home, store) = store();
    two_prompt_session(&store, "full");
    drop(
        store
            .create(&header("empty", Path::new("/e")))
            .expect("create"),
    );
    let index = store.dir().join("index.jsonl");
    let good = store.list().expect("list").entries;
    assert_eq!(good.len(), 2);
    let damages: [&dyn Fn(); 3] = [
        &|| fs::remove_file(&index).expect("rm"),
        &|| append_raw(&index, b"{\"id\":\"x\",\"ki"),
        &|| {
            let text = fs::read_to_string(&index).expect("read");
            fs::write(&index, format!("garbage\n{text}")).expect("write")
        },
    ];
    for (n, damage) in damages.iter().enumerate() {
        damage();
        let list = store.list().expect("list");
        assert!(list.rebuilt, "damage {n}");
        assert!(list.skipped.is_empty());
        let ids: Vec<&str> = list.entries.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(ids.len(), 2, "damage {n}: {ids:?}");
        let full = list.entries.iter().find(|e| e.id == "full").expect("full");
        assert_eq!(full.title, "Fix the bug in the parser");
        assert_eq!(full.turns, 7);
        assert_eq!(full.input_tokens, 700);
        assert_eq!(full.output_tokens, 140);
        assert_eq!(full.status, "completed");
        assert!((full.cost_usd - 0.007).abs() < 1e-9);
        // The rebuilt index reads back as it is.
        assert!(!store.list().expect("list").rebuilt, "damage {n}");
    }
}

#[test]
fn an_index_with_many_more_lines_than_sessions_is_compacted() {
    let (_home, store) = store();
    drop(store.create(&header("a", Path::new("/p"))).expect("create"));
    let mut entry = IndexEntry::new(&header("a", Path::new("/p")));
    for turn in 0..200 {
        entry.turns = turn;
        store.upsert(&entry).expect("upsert");
    }
    let index = store.dir().join("index.jsonl");
    let lines = || fs::read_to_string(&index).expect("read").lines().count();
    assert_eq!(lines(), 201);
    let list = store.list().expect("list");
    assert_eq!(list.entries, vec![entry.clone()]);
    assert_eq!(lines(), 1, "compacted");
    assert_eq!(store.list().expect("list").entries, vec![entry]);
}
