//! The session store across real processes: eight processes creating
//! sessions at once lose no index entry, and a session's lock refuses a
//! second process, names the holder, and is released when the holder is
//! killed. The processes are this test executable run again with
//! `KAJI_SESSION_WORKER` set (see [`worker`]).

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdout, Command, Stdio};

use kaji_core::storage::index::IndexEntry;
use kaji_core::storage::store::SessionStore;
use kaji_core::storage::store_error::StoreError;

use crate::session_support;
use session_support::header;

const ROLE: &str = "KAJI_SESSION_WORKER";
/// Marks the worker's protocol lines (libtest prints on stdout too).
const MARK: &str = "@@ ";

/// Not a test of its own: the body of a worker process. `create HOME N`
/// waits for "go" on stdin, then creates N sessions, updates each four
/// times and lists the index after each, printing every id; `hold HOME ID`
/// creates a session and holds it until stdin closes.
#[test]
fn worker() {
    let Ok(role) = std::env::var(ROLE) else {
        return;
    };
    let args: Vec<&str> = role.split('\t').collect();
    let store = SessionStore::new(Path::new(args[1]));
    let mut stdin = std::io::stdin().lock();
    match args[0] {
        "create" => {
            println!("{MARK}ready");
            let mut line = String::new();
            stdin.read_line(&mut line).expect("go");
            let n: usize = args[2].parse().expect("count");
            for _ in 0..n {
                let id = SessionStore::new_session_id();
                let h = header(&id, Path::new("/project"));
                let writer = store.create(&h).expect("create");
                let mut entry = IndexEntry::new(&h);
                entry.status = "completed".into();
                // Several updates per session, and a listing after each
                // session: the index grows past its compaction threshold
                // and is rewritten while the others append.
                for turn in 1..=4 {
                    entry.turns = turn;
                    store.upsert(&entry).expect("upsert");
                }
                drop(writer);
                store.list().expect("list");
                println!("{MARK}{id}");
            }
        }
        "hold" => {
            let _writer = store
                .create(&header(args[2], Path::new("/project")))
                .expect("create");
            println!("{MARK}locked");
            let mut rest = String::new();
            let _ = std::io::Read::read_to_string(&mut stdin, &mut rest);
        }
        other => panic!("unknown worker role {other}"),
    }
}

fn spawn(role: &[&str]) -> Child {
    Command::new(std::env::current_exe().expect("test executable"))
        .args([
            "--exact",
            "session_multiprocess::worker",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(ROLE, role.join("\t"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn worker")
}

/// The next protocol line of a worker, or `None` at its end.
fn next_line(out: &mut BufReader<ChildStdout>) -> Option<String> {
    loop {
        let mut line = String::new();
        if out.read_line(&mut line).expect("read worker") == 0 {
            return None;
        }
        // libtest may print "test worker ... " before it on the line.
        if let Some(at) = line.find(MARK) {
            return Some(line[at + MARK.len()..].trim_end().to_string());
        }
    }
}

#[test]
fn eight_processes_creating_sessions_at_once_lose_no_entry() {
    const WORKERS: usize = 8;
    const EACH: usize = 25;
    let home = tempfile::tempdir().expect("temp dir");
    let home_arg = home.path().to_str().expect("utf-8 path");
    let each = EACH.to_string();
    let mut children: Vec<(Child, BufReader<ChildStdout>)> = (0..WORKERS)
        .map(|_| {
            let mut child = spawn(&["create", home_arg, &each]);
            let out = BufReader::new(child.stdout.take().expect("stdout"));
            (child, out)
        })
        .collect();
    for (_, out) in &mut children {
        assert_eq!(next_line(out).as_deref(), Some("ready"));
    }
    for (child, _) in &mut children {
        let stdin = child.stdin.as_mut().expect("stdin");
        stdin.write_all(b"go\n").expect("go");
        stdin.flush().expect("flush");
    }
    let mut created = BTreeSet::new();
    for (mut child, mut out) in children {
        while let Some(id) = next_line(&mut out) {
            assert!(created.insert(id), "an id was handed out twice");
        }
        assert!(child.wait().expect("wait").success(), "a worker failed");
    }
    assert_eq!(created.len(), WORKERS * EACH);

    let store = SessionStore::new(home.path());
    let list = store.list().expect("list");
    assert!(!list.rebuilt, "the index was damaged and had to be rebuilt");
    let listed: BTreeSet<String> = list.entries.iter().map(|e| e.id.clone()).collect();
    let lost: Vec<&String> = created.difference(&listed).collect();
    assert!(
        lost.is_empty(),
        "{} index entries lost: {lost:?}",
        lost.len()
    );
    assert_eq!(listed.len(), created.len(), "entries nobody created");
    assert!(list.entries.iter().all(|e| e.turns == 4), "updates lost");
    // Every line of the index is whole.
    let text = std::fs::read_to_string(store.dir().join("index.jsonl")).expect("index");
    for line in text.lines() {
        serde_json::from_str::<IndexEntry>(line).expect("a whole index line");
    }
}

#[test]
fn a_second_process_is_refused_until_the_holder_dies() {
    let home = tempfile::tempdir().expect("temp dir");
    let home_arg = home.path().to_str().expect("utf-8 path");
    let mut child = spawn(&["hold", home_arg, "held"]);
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    assert_eq!(next_line(&mut out).as_deref(), Some("locked"));

    let store = SessionStore::new(home.path());
    let err = store.open_for_append("held").expect_err("refused");
    match &err {
        StoreError::Locked { holder, .. } => {
            assert_eq!(holder.pid, Some(child.id()));
            let command = holder.command.as_deref().unwrap_or("");
            assert!(
                command.contains("--exact session_multiprocess::worker"),
                "{command}"
            );
        }
        other => panic!("{other}"),
    }
    assert!(
        err.to_string()
            .contains(&format!("session held is open in process {}", child.id())),
        "{err}"
    );
    assert!(matches!(
        store.remove("held"),
        Err(StoreError::Locked { .. })
    ));

    // kill -9: the OS releases the lock.
    child.kill().expect("SIGKILL the holder");
    child.wait().expect("reap the holder");
    let writer = store
        .open_for_append("held")
        .expect("free once the holder died");
    drop(writer);
    store.remove("held").expect("remove");
}
