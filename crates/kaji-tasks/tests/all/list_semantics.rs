//! Behaviour of `TaskListStore` seen from one process: ids, dependencies,
//! claims, release, deletion, reset and corrupt files.

use std::fs;

use kaji_tasks::list::{
    ClaimRefusal, ListTaskPatch, ListTaskStatus, NewListTask, TaskListError, TaskListErrorKind,
    TaskListStore, sanitize_list_id,
};
use serde_json::json;

fn store() -> (tempfile::TempDir, TaskListStore) {
    let home = tempfile::tempdir().expect("temp dir");
    let store = TaskListStore::open(home.path(), "test").expect("open");
    (home, store)
}

fn create(store: &TaskListStore, subject: &str, blocked_by: &[u64]) -> u64 {
    let mut new = NewListTask::new(subject);
    new.blocked_by = blocked_by.to_vec();
    store.create(new).expect("create").id
}

fn complete(store: &TaskListStore, id: u64) -> Vec<u64> {
    let patch = ListTaskPatch {
        status: Some(ListTaskStatus::Completed),
        ..ListTaskPatch::default()
    };
    store.update(id, patch).expect("complete").unblocked
}

#[test]
fn list_ids_are_sanitised() {
    assert_eq!(sanitize_list_id("my list/../x").unwrap(), "my-list----x");
    assert_eq!(sanitize_list_id(" a_B-9 ").unwrap(), "a_B-9");
    assert!(matches!(
        sanitize_list_id("  "),
        Err(TaskListError::InvalidListId { .. })
    ));
    let home = tempfile::tempdir().unwrap();
    let store = TaskListStore::open(home.path(), "../../etc").unwrap();
    assert_eq!(store.dir(), home.path().join("tasks").join("------etc"));
}

#[test]
fn ids_start_at_one_and_are_never_reused() {
    let (home, store) = store();
    assert_eq!(create(&store, "a", &[]), 1);
    assert_eq!(create(&store, "b", &[]), 2);
    store.delete(2).unwrap();
    assert_eq!(create(&store, "c", &[]), 3);
    store.reset().unwrap();
    assert!(store.list().unwrap().tasks.is_empty());
    assert_eq!(create(&store, "d", &[]), 4);
    // Another store on the same directory sees the same list.
    let other = TaskListStore::open_existing(home.path(), "test").unwrap();
    assert_eq!(other.get(4).unwrap().subject, "d");
    assert_eq!(other.highwatermark().unwrap(), 4);
}

#[test]
fn missing_list_and_task_are_named() {
    let home = tempfile::tempdir().unwrap();
    let err = TaskListStore::open_existing(home.path(), "nope").unwrap_err();
    assert_eq!(err.kind(), TaskListErrorKind::NotFound);
    assert!(err.to_string().contains("nope"), "{err}");
    let (_home, store) = store();
    let err = store.get(7).unwrap_err();
    assert!(err.to_string().contains("7.json"), "{err}");
    let err = store.update(7, ListTaskPatch::default()).unwrap_err();
    assert_eq!(err.kind(), TaskListErrorKind::NotFound);
    assert!(!store.dir().join("7.lock").exists(), "no stray lock file");
}

#[test]
fn edges_stay_symmetric_and_refuse_missing_tasks_and_cycles() {
    let (_home, store) = store();
    let a = create(&store, "a", &[]);
    let b = create(&store, "b", &[a]);
    let c = create(&store, "c", &[b]);
    assert_eq!(
        store
            .get(a)
            .unwrap()
            .blocks
            .iter()
            .copied()
            .collect::<Vec<_>>(),
        vec![b]
    );
    assert_eq!(
        store
            .get(b)
            .unwrap()
            .blocks
            .iter()
            .copied()
            .collect::<Vec<_>>(),
        vec![c]
    );

    let err = store
        .update(
            a,
            ListTaskPatch {
                add_blocked_by: vec![c],
                ..ListTaskPatch::default()
            },
        )
        .unwrap_err();
    match &err {
        TaskListError::Cycle { cycle } => assert_eq!(cycle, &vec![c, a, b, c]),
        other => panic!("expected a cycle, got {other}"),
    }
    assert!(
        err.to_string().contains("#3 blocks #1 blocks #2 blocks #3"),
        "{err}"
    );

    let err = store
        .update(
            a,
            ListTaskPatch {
                add_blocks: vec![99],
                ..ListTaskPatch::default()
            },
        )
        .unwrap_err();
    assert!(
        matches!(err, TaskListError::EdgeToMissingTask { to: 99, .. }),
        "{err}"
    );
    let err = store
        .create(NewListTask {
            subject: "x".into(),
            blocked_by: vec![42],
            ..NewListTask::default()
        })
        .unwrap_err();
    assert!(err.to_string().contains("42.json"), "{err}");

    store
        .update(
            c,
            ListTaskPatch {
                remove_blocked_by: vec![b],
                add_blocked_by: vec![a],
                ..ListTaskPatch::default()
            },
        )
        .unwrap();
    assert!(store.get(b).unwrap().blocks.is_empty());
    assert!(store.get(a).unwrap().blocks.contains(&c));

    store.delete(a).unwrap();
    for task in store.list().unwrap().tasks {
        assert!(!task.blocks.contains(&a) && !task.blocked_by.contains(&a));
    }
}

#[test]
fn completing_reports_what_it_unblocked() {
    let (_home, store) = store();
    let a = create(&store, "a", &[]);
    let b = create(&store, "b", &[]);
    let c = create(&store, "c", &[a, b]);
    let d = create(&store, "d", &[a]);
    assert_eq!(complete(&store, a), vec![d]);
    assert_eq!(complete(&store, b), vec![c]);
    assert_eq!(complete(&store, b), Vec::<u64>::new(), "already completed");
}

#[test]
fn claims_say_why_they_fail() {
    let (_home, store) = store();
    let a = create(&store, "a", &[]);
    let b = create(&store, "b", &[a]);
    let refusal = |r: Result<_, TaskListError>| match r {
        Err(TaskListError::ClaimRefused { reason, .. }) => reason,
        other => panic!("expected a refusal, got {other:?}"),
    };
    assert_eq!(refusal(store.claim(9, "x")), ClaimRefusal::NotFound);
    assert_eq!(
        refusal(store.claim(b, "x")),
        ClaimRefusal::Blocked { by: vec![a] }
    );
    let claimed = store.claim(a, "x").unwrap();
    assert_eq!(
        (claimed.owner.as_deref(), claimed.status),
        (Some("x"), ListTaskStatus::InProgress)
    );
    assert_eq!(
        refusal(store.claim(a, "y")),
        ClaimRefusal::AlreadyClaimed {
            owner: Some("x".into())
        }
    );
    complete(&store, a);
    assert_eq!(refusal(store.claim(a, "y")), ClaimRefusal::AlreadyCompleted);
    assert_eq!(store.claim_next("y").unwrap().map(|t| t.id), Some(b));
    assert_eq!(store.claim_next("y").unwrap(), None);
    assert_eq!(store.release("y").unwrap(), vec![b]);
    assert_eq!(
        store.release("x").unwrap(),
        Vec::<u64>::new(),
        "completed tasks keep their owner"
    );
    let task = store.get(b).unwrap();
    assert_eq!((task.owner, task.status), (None, ListTaskStatus::Pending));
    assert_eq!(
        store
            .available()
            .unwrap()
            .iter()
            .map(|t| t.id)
            .collect::<Vec<_>>(),
        vec![b]
    );
}

#[test]
fn metadata_is_merged_and_null_removes() {
    let (_home, store) = store();
    let a = create(&store, "a", &[]);
    let meta = |v: serde_json::Value| ListTaskPatch {
        metadata: v.as_object().cloned(),
        ..ListTaskPatch::default()
    };
    store.update(a, meta(json!({"x": 1, "y": 2}))).unwrap();
    let task = store
        .update(a, meta(json!({"x": null, "z": 3})))
        .unwrap()
        .task;
    assert_eq!(
        serde_json::Value::Object(task.metadata),
        json!({"y": 2, "z": 3})
    );
}

#[test]
fn corrupt_files_are_named_and_do_not_spoil_the_rest() {
    let (_home, store) = store();
    let a = create(&store, "a", &[]);
    let b = create(&store, "b", &[]);
    fs::write(store.task_path(b), "{ not json").unwrap();
    fs::write(
        store.dir().join("5.json"),
        r#"{"id":5,"subject":"s","status":"later"}"#,
    )
    .unwrap();
    fs::write(
        store.dir().join("6.json"),
        r#"{"id":7,"subject":"s","status":"pending"}"#,
    )
    .unwrap();
    fs::write(store.dir().join("notes.txt"), "ignored").unwrap();

    let snapshot = store.list().unwrap();
    assert_eq!(
        snapshot.tasks.iter().map(|t| t.id).collect::<Vec<_>>(),
        vec![a]
    );
    let problems: Vec<String> = snapshot
        .errors
        .iter()
        .map(|e| format!("{}: {}", e.path.display(), e.problem))
        .collect();
    assert_eq!(problems.len(), 3, "{problems:?}");
    assert!(problems[0].contains("2.json") && problems[0].contains("not a valid task"));
    assert!(problems[1].contains("5.json") && problems[1].contains("unknown variant `later`"));
    assert!(problems[2].contains("6.json") && problems[2].contains("holds id 7"));

    // The rest stays writable; ids skip past the corrupt files.
    store
        .update(
            a,
            ListTaskPatch {
                subject: Some("a2".into()),
                ..ListTaskPatch::default()
            },
        )
        .unwrap();
    assert_eq!(create(&store, "c", &[]), 7);
    let err = store.get(b).unwrap_err();
    assert_eq!(err.kind(), TaskListErrorKind::Corrupt);
    assert!(err.to_string().contains("2.json"), "{err}");
    let err = store
        .update(
            a,
            ListTaskPatch {
                add_blocks: vec![b],
                ..ListTaskPatch::default()
            },
        )
        .unwrap_err();
    assert!(err.to_string().contains("2.json"), "{err}");
    assert!(
        store.delete(b).is_err(),
        "an unreadable task is not deleted blindly"
    );

    fs::write(store.dir().join(".highwatermark"), "lots").unwrap();
    let err = store.create(NewListTask::new("d")).unwrap_err();
    assert!(err.to_string().contains(".highwatermark"), "{err}");
}

#[test]
fn an_unfinished_change_is_finished_by_the_next_opener() {
    let (home, store) = store();
    let a = create(&store, "a", &[]);
    let b = create(&store, "b", &[]);
    // Simulate a writer killed after the journal and one side of the edge.
    fs::write(
        store.dir().join(".journal.json"),
        format!(r#"{{"ops":[{{"op":"addEdge","blocker":{a},"blocked":{b}}}]}}"#),
    )
    .unwrap();
    let mut half = store.get(a).unwrap();
    half.blocks.insert(b);
    fs::write(store.task_path(a), serde_json::to_vec(&half).unwrap()).unwrap();

    let reopened = TaskListStore::open(home.path(), "test").unwrap();
    assert!(reopened.get(b).unwrap().blocked_by.contains(&a));
    assert!(!store.dir().join(".journal.json").exists());
}

#[test]
fn filters_and_what_completing_would_unblock() {
    use kaji_tasks::list::ListTaskFilter;
    let (_home, store) = store();
    let a = create(&store, "a", &[]);
    let b = create(&store, "b", &[a]);
    let c = create(&store, "c", &[]);
    let d = create(&store, "d", &[a, c]);
    store.claim(c, "alice").expect("claim");
    let snap = store.list().expect("list");
    let ids = |f: &ListTaskFilter| snap.filtered(f).iter().map(|t| t.id).collect::<Vec<_>>();
    assert_eq!(ids(&ListTaskFilter::default()), vec![a, b, c, d]);
    let available = ListTaskFilter {
        available: true,
        ..ListTaskFilter::default()
    };
    assert_eq!(ids(&available), vec![a]);
    let blocked = ListTaskFilter {
        blocked: true,
        ..ListTaskFilter::default()
    };
    assert_eq!(ids(&blocked), vec![b, d]);
    let alice = ListTaskFilter {
        owner: Some("alice".into()),
        ..ListTaskFilter::default()
    };
    assert_eq!(ids(&alice), vec![c]);
    let unowned_pending = ListTaskFilter {
        owner: Some(String::new()),
        status: Some(ListTaskStatus::Pending),
        ..ListTaskFilter::default()
    };
    assert_eq!(ids(&unowned_pending), vec![a, b, d]);
    // d still waits for c, so completing a unblocks only b.
    let task_a = snap.get(a).expect("a");
    assert_eq!(snap.would_unblock(task_a), vec![b]);
    assert_eq!(complete(&store, a), vec![b]);
    let snap = store.list().expect("list");
    assert_eq!(snap.would_unblock(snap.get(c).expect("c")), vec![d]);
}
