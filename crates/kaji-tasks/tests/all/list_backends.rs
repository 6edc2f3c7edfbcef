//! The task list's semantics, run against both backends (files and a
//! throwaway PostgreSQL from kaji-test-support), plus the database's own
//! faults: a cut connection, a wrong password, a server that is down, a
//! newer schema, leases and their fencing, LISTEN/NOTIFY, and two groups
//! of claimers on one database.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use kaji_tasks::list::pg::{PgTaskList, PgUrl, WatchMode};
use kaji_tasks::list::{
    ClaimRefusal, ListTarget, ListTaskPatch, ListTaskStatus, NewListTask, TaskList, TaskListError,
};
use kaji_test_support::pg::{CutProxy, PG_PASSWORD, PgServer, url_at};

static NEXT: AtomicU64 = AtomicU64::new(0);

fn unique(name: &str) -> String {
    format!(
        "{name}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::SeqCst)
    )
}

fn server() -> &'static PgServer {
    match PgServer::shared() {
        Ok(s) => s,
        Err(e) => panic!("the PostgreSQL fixture did not start: {e}"),
    }
}

async fn pg_list(name: &str) -> PgTaskList {
    let url = PgUrl::parse(&server().url(name)).unwrap();
    PgTaskList::open(&url, name).await.unwrap()
}

/// Both backends, each with a fresh list.
async fn backends(name: &str) -> (tempfile::TempDir, Vec<(&'static str, TaskList)>) {
    let home = tempfile::tempdir().unwrap();
    let name = unique(name);
    let files = TaskList::open(home.path(), &ListTarget::Files(name.clone()))
        .await
        .unwrap();
    let pg = TaskList::Pg(pg_list(&name).await);
    (home, vec![("files", files), ("pg", pg)])
}

fn new(subject: &str, blocked_by: &[u64]) -> NewListTask {
    NewListTask {
        blocked_by: blocked_by.to_vec(),
        ..NewListTask::new(subject)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ids_are_never_reused_after_delete() {
    let (_home, lists) = backends("ids").await;
    for (name, list) in lists {
        let a = list.create(new("a", &[])).await.unwrap();
        let b = list.create(new("b", &[])).await.unwrap();
        list.delete(b.id).await.unwrap();
        list.reset().await.unwrap();
        let c = list.create(new("c", &[])).await.unwrap();
        assert_eq!((a.id, b.id, c.id), (1, 2, 3), "{name}");
        assert_eq!(list.list().await.unwrap().highwatermark, 3, "{name}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dependencies_are_symmetric_and_cycles_refused() {
    let (_home, lists) = backends("deps").await;
    for (name, list) in lists {
        let a = list.create(new("a", &[])).await.unwrap();
        let b = list.create(new("b", &[a.id])).await.unwrap();
        let c = list.create(new("c", &[b.id])).await.unwrap();
        assert_eq!(
            list.get(a.id).await.unwrap().blocks,
            BTreeSet::from([b.id]),
            "{name}"
        );
        let patch = ListTaskPatch {
            add_blocked_by: vec![c.id],
            ..ListTaskPatch::default()
        };
        match list.update(a.id, patch).await {
            Err(TaskListError::Cycle { cycle }) => assert_eq!(cycle, vec![3, 1, 2, 3], "{name}"),
            other => panic!("{name}: expected a cycle, got {other:?}"),
        }
        // Nothing of the refused change was written.
        assert!(
            list.get(a.id).await.unwrap().blocked_by.is_empty(),
            "{name}"
        );
        let patch = ListTaskPatch {
            add_blocked_by: vec![99],
            ..ListTaskPatch::default()
        };
        assert!(
            matches!(
                list.update(a.id, patch).await,
                Err(TaskListError::EdgeToMissingTask { to: 99, .. })
            ),
            "{name}"
        );
        list.delete(b.id).await.unwrap();
        assert!(
            list.get(c.id).await.unwrap().blocked_by.is_empty(),
            "{name}"
        );
        assert!(list.get(a.id).await.unwrap().blocks.is_empty(), "{name}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_follow_availability_and_completion_unblocks() {
    let (_home, lists) = backends("claims").await;
    for (name, list) in lists {
        let a = list.create(new("a", &[])).await.unwrap();
        let b = list.create(new("b", &[a.id])).await.unwrap();
        match list.claim(b.id, "x").await {
            Err(TaskListError::ClaimRefused {
                reason: ClaimRefusal::Blocked { by },
                ..
            }) => {
                assert_eq!(by, vec![a.id], "{name}")
            }
            other => panic!("{name}: {other:?}"),
        }
        assert!(matches!(
            list.claim(42, "x").await,
            Err(TaskListError::ClaimRefused {
                reason: ClaimRefusal::NotFound,
                ..
            })
        ));
        let got = list.claim_next("x").await.unwrap().unwrap();
        assert_eq!(
            (got.id, got.status, got.owner.as_deref()),
            (a.id, ListTaskStatus::InProgress, Some("x")),
            "{name}"
        );
        assert!(list.claim_next("y").await.unwrap().is_none(), "{name}");
        assert!(matches!(
            list.claim(a.id, "y").await,
            Err(TaskListError::ClaimRefused {
                reason: ClaimRefusal::AlreadyClaimed { .. },
                ..
            })
        ));
        let done = ListTaskPatch {
            status: Some(ListTaskStatus::Completed),
            ..ListTaskPatch::default()
        };
        let outcome = list.update(a.id, done).await.unwrap();
        assert_eq!(outcome.unblocked, vec![b.id], "{name}");
        assert_eq!(
            list.available()
                .await
                .unwrap()
                .iter()
                .map(|t| t.id)
                .collect::<Vec<_>>(),
            vec![b.id],
            "{name}"
        );
        list.claim(b.id, "y").await.unwrap();
        assert_eq!(list.release("y").await.unwrap(), vec![b.id], "{name}");
        assert!(
            list.release("x").await.unwrap().is_empty(),
            "{name}: completed tasks keep their owner"
        );
        let b = list.get(b.id).await.unwrap();
        assert_eq!(
            (b.status, b.owner),
            (ListTaskStatus::Pending, None),
            "{name}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_merges_and_null_deletes() {
    let (_home, lists) = backends("meta").await;
    for (name, list) in lists {
        let t = list.create(new("m", &[])).await.unwrap();
        let m = |v: serde_json::Value| ListTaskPatch {
            metadata: v.as_object().cloned(),
            ..ListTaskPatch::default()
        };
        list.update(t.id, m(serde_json::json!({"a": 1, "b": 2})))
            .await
            .unwrap();
        let out = list
            .update(t.id, m(serde_json::json!({"a": null, "c": "x"})))
            .await
            .unwrap();
        assert_eq!(
            serde_json::Value::Object(out.task.metadata),
            serde_json::json!({"b": 2, "c": "x"}),
            "{name}"
        );
        let owner = ListTaskPatch {
            owner: Some(Some("  ".into())),
            active_form: Some(Some("Doing".into())),
            ..ListTaskPatch::default()
        };
        let out = list.update(t.id, owner).await.unwrap();
        assert_eq!(
            (out.task.owner, out.task.active_form.as_deref()),
            (None, Some("Doing")),
            "{name}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_list_is_reported_with_server_and_name() {
    let name = unique("missing");
    let url = PgUrl::parse(&server().url(&name)).unwrap();
    let err = PgTaskList::open_existing(&url, &name).await.unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, TaskListError::ListNotFound { .. }), "{text}");
    assert!(
        text.contains(&name) && text.contains("127.0.0.1:"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_password_and_down_server_name_the_server_never_the_password() {
    let url = format!(
        "postgres://kaji:wrong-secret@127.0.0.1:{}/postgres?sslmode=disable",
        server().port()
    );
    let err = PgTaskList::open(&PgUrl::parse(&url).unwrap(), "x")
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("password") && err.contains(&format!("127.0.0.1:{}", server().port())),
        "{err}"
    );
    assert!(!err.contains("wrong-secret"), "{err}");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let err = PgTaskList::open(&PgUrl::parse(&url_at(port, "x")).unwrap(), "x")
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, TaskListError::Database { .. }), "{text}");
    assert!(
        text.contains(&format!("127.0.0.1:{port}")) && !text.contains(PG_PASSWORD),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schema_from_a_newer_kaji_is_refused() {
    // A database of its own, so the shared one keeps its schema.
    let list = pg_list(&unique("schema")).await;
    let db = unique("newer").replace('-', "_");
    let admin = PgUrl::parse(&server().url("x")).unwrap();
    let (client, conn) = admin.config.connect(tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    client
        .batch_execute(&format!("CREATE DATABASE {db}"))
        .await
        .unwrap();
    let url = format!(
        "postgres://kaji:{PG_PASSWORD}@127.0.0.1:{}/{db}?sslmode=disable",
        server().port()
    );
    let fresh = PgTaskList::open(&PgUrl::parse(&url).unwrap(), "l")
        .await
        .unwrap();
    assert!(
        fresh
            .migrate_note()
            .unwrap()
            .contains("created the task-list schema")
    );
    let mut cfg = PgUrl::parse(&url).unwrap().config;
    cfg.dbname(&db);
    let (c2, conn2) = cfg.connect(tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn2);
    c2.batch_execute("UPDATE kaji_schema SET version = 99")
        .await
        .unwrap();
    let err = PgTaskList::open(&PgUrl::parse(&url).unwrap(), "l")
        .await
        .unwrap_err();
    assert!(
        matches!(err, TaskListError::SchemaTooNew { found: 99, .. }),
        "{err}"
    );
    drop(list);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_cut_at_any_byte_leaves_nothing_half_written() {
    let name = unique("cut");
    let direct = pg_list(&name).await;
    let a = direct.create(new("a", &[])).await.unwrap();
    let target = format!("127.0.0.1:{}", server().port()).parse().unwrap();
    let proxy = CutProxy::start(target).await.unwrap();
    let mut failures = 0;
    for cut in (200..3000).step_by(97) {
        proxy.cut_after(cut);
        let url = PgUrl::parse(&url_at(proxy.port(), &name)).unwrap();
        let Ok(via) = PgTaskList::connect(&url, &name).await else {
            failures += 1;
            continue;
        };
        if via.create(new("b", &[a.id])).await.is_err() {
            failures += 1;
        }
        // Every task is whole and every edge has both sides.
        let snap = direct.list().await.unwrap();
        for t in &snap.tasks {
            assert!(t.id <= snap.highwatermark);
            for b in &t.blocked_by {
                assert!(
                    snap.get(*b).unwrap().blocks.contains(&t.id),
                    "cut {cut}: {snap:?}"
                );
            }
            if t.subject == "b" {
                assert_eq!(t.blocked_by, BTreeSet::from([a.id]), "cut {cut}");
            }
        }
    }
    assert!(failures > 0, "no cut ever hit a transaction");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_groups_of_claimers_finish_a_list_with_dependencies_exactly_once() {
    let name = unique("groups");
    let list = pg_list(&name).await;
    let mut ids = Vec::new();
    for i in 0..40u64 {
        let deps: Vec<u64> = if i >= 4 {
            vec![ids[(i - 4) as usize]]
        } else {
            vec![]
        };
        ids.push(list.create(new(&format!("t{i}"), &deps)).await.unwrap().id);
    }
    let mut workers = Vec::new();
    for group in 0..2 {
        // Each group is its own "machine": its own handle and pool.
        let url = PgUrl::parse(&server().url(&name)).unwrap();
        let machine = PgTaskList::open_existing(&url, &name).await.unwrap();
        for w in 0..4 {
            let list = machine.clone();
            workers.push(tokio::spawn(async move {
                let owner = format!("g{group}w{w}");
                let mut done = Vec::new();
                loop {
                    match list.claim_next(&owner).await.unwrap() {
                        Some(task) => {
                            let snap = list.list().await.unwrap();
                            assert!(snap.open_blockers(snap.get(task.id).unwrap()).is_empty());
                            let patch = ListTaskPatch {
                                status: Some(ListTaskStatus::Completed),
                                ..ListTaskPatch::default()
                            };
                            list.update(task.id, patch).await.unwrap();
                            done.push(task.id);
                        }
                        None if list
                            .list()
                            .await
                            .unwrap()
                            .tasks
                            .iter()
                            .all(|t| t.status == ListTaskStatus::Completed) =>
                        {
                            break;
                        }
                        None => tokio::task::yield_now().await,
                    }
                }
                done
            }));
        }
    }
    let mut all = Vec::new();
    for w in workers {
        all.extend(w.await.unwrap());
    }
    all.sort_unstable();
    assert_eq!(all, ids, "every task completed exactly once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lapsed_lease_releases_claims_and_fences_the_old_holder() {
    let list = pg_list(&unique("lease")).await;
    let t = list.create(new("work", &[])).await.unwrap();
    let old = list
        .acquire_lease("w1", Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(
        list.claim_next_leased(&old).await.unwrap().map(|t| t.id),
        Some(t.id)
    );
    assert!(
        list.release_lapsed().await.unwrap().is_empty(),
        "a live lease keeps its claims"
    );
    // The heartbeat stops: put the expiry in the past on the database's clock.
    let url = PgUrl::parse(&server().url("x")).unwrap();
    let (client, conn) = url.config.connect(tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    client
        .execute(
            "UPDATE kaji_leases SET expires_at = now() - interval '1 second' WHERE list = $1 AND holder = 'w1'",
            &[&list.list_id()],
        )
        .await
        .unwrap();
    let released = list.release_lapsed().await.unwrap();
    assert_eq!(released, vec![("w1".to_string(), vec![t.id])]);
    let new_holder = list
        .acquire_lease("w2", Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(
        list.claim_next_leased(&new_holder)
            .await
            .unwrap()
            .map(|t| t.id),
        Some(t.id)
    );
    let done = ListTaskPatch {
        status: Some(ListTaskStatus::Completed),
        ..ListTaskPatch::default()
    };
    let err = list
        .update_leased(&old, t.id, done.clone())
        .await
        .unwrap_err();
    assert!(matches!(err, TaskListError::LeaseLost { .. }), "{err}");
    assert!(
        err.to_string().contains("w1") && err.to_string().contains("now held by \"w2\""),
        "{err}"
    );
    assert_eq!(
        list.get(t.id).await.unwrap().status,
        ListTaskStatus::InProgress
    );
    list.update_leased(&new_holder, t.id, done).await.unwrap();
    assert_eq!(
        list.get(t.id).await.unwrap().status,
        ListTaskStatus::Completed
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watcher_hears_a_change_through_notify() {
    let list = pg_list(&unique("watch")).await;
    let mut watcher = list.watch(Duration::from_secs(3600)).await;
    assert_eq!(watcher.mode(), &WatchMode::Notify);
    let other = list.clone();
    let writer = tokio::spawn(async move { other.create(new("ping", &[])).await.unwrap() });
    // With an hour's poll interval only a notice can wake the watcher.
    watcher.changed().await;
    writer.await.unwrap();
    assert_eq!(list.list().await.unwrap().tasks.len(), 1);
}
