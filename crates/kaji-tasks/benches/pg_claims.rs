//! The PostgreSQL task list: store claims per second with 1, 16 and 64
//! concurrent claimers (each its own connection, one statement per
//! claim), the same for worker-sized claims that also renew a lease, and
//! the latency from a change to a watcher's notice.
//!
//! Each sample imports `TASKS` pending tasks into a fresh list (one
//! transaction, not timed) and lets the claimers take them all; double
//! claims are counted and must be 0. The server is the throwaway one of
//! kaji-test-support (fsync off). Numbers are in docs/benchmarks.md.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "benchmark setup: a failed step aborts the measurement"
)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use divan::Bencher;
use divan::counter::ItemsCount;
use kaji_tasks::list::pg::{PgTaskList, PgUrl};
use kaji_tasks::list::{ListSnapshot, ListTask, ListTaskStatus, NewListTask};
use kaji_test_support::pg::PgServer;

const TASKS: u64 = 2048;
static LISTS: AtomicU64 = AtomicU64::new(0);

fn main() {
    divan::main();
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

fn url() -> PgUrl {
    let server = PgServer::shared().expect("PostgreSQL fixture");
    PgUrl::parse(&server.url("bench")).expect("url")
}

fn pending(id: u64) -> ListTask {
    ListTask {
        id,
        subject: format!("task {id}"),
        description: String::new(),
        active_form: None,
        owner: None,
        status: ListTaskStatus::Pending,
        blocks: Default::default(),
        blocked_by: Default::default(),
        metadata: Default::default(),
        created_at: 0,
        updated_at: 0,
    }
}

/// `n` claimers, each with a connection of its own.
async fn claimers(n: usize) -> Vec<PgTaskList> {
    let url = url();
    let mut out = Vec::new();
    for _ in 0..n {
        out.push(PgTaskList::open(&url, "bench").await.expect("connect"));
    }
    out
}

async fn fresh_list(first: &PgTaskList) -> String {
    let name = format!(
        "bench-{}-{}",
        std::process::id(),
        LISTS.fetch_add(1, Ordering::SeqCst)
    );
    let list = first.with_list(&name).expect("name");
    list.create_list().await.expect("create the list");
    let snapshot = ListSnapshot {
        tasks: (1..=TASKS).map(pending).collect(),
        errors: Vec::new(),
        highwatermark: 0,
    };
    list.import(&snapshot).await.expect("import");
    name
}

async fn claim_all(claimers: &[PgTaskList], name: &str, leased: bool) -> u64 {
    let mut handles = Vec::new();
    for (i, c) in claimers.iter().enumerate() {
        let list = c.with_list(name).expect("name");
        handles.push(tokio::spawn(async move {
            let owner = format!("c{i}");
            let lease = if leased {
                Some(
                    list.acquire_lease(&owner, Duration::from_secs(60))
                        .await
                        .expect("lease"),
                )
            } else {
                None
            };
            let mut got = 0u64;
            loop {
                let next = match &lease {
                    Some(lease) => list.claim_next_leased(lease).await,
                    None => list.claim_next(&owner).await,
                };
                match next.expect("claim") {
                    Some(_) => got += 1,
                    None => break got,
                }
            }
        }));
    }
    let mut total = 0;
    for h in handles {
        total += h.await.expect("claimer");
    }
    total
}

fn bench_claims(bencher: Bencher, n: usize, leased: bool) {
    let rt = runtime();
    let cs = rt.block_on(claimers(n));
    bencher
        .counter(ItemsCount::new(TASKS))
        .with_inputs(|| rt.block_on(fresh_list(&cs[0])))
        .bench_local_values(|name| {
            let claimed = rt.block_on(claim_all(&cs, &name, leased));
            assert_eq!(claimed, TASKS, "double or missed claims");
        });
}

/// Store claims: one `claim_next` statement per claim.
#[divan::bench(args = [1, 16, 64], sample_count = 5, sample_size = 1)]
fn store_claims(bencher: Bencher, claimers: usize) {
    bench_claims(bencher, claimers, false);
}

/// Worker-sized claims: each claim also checks and renews the lease.
#[divan::bench(args = [1, 16, 64], sample_count = 5, sample_size = 1)]
fn leased_claims(bencher: Bencher, claimers: usize) {
    bench_claims(bencher, claimers, true);
}

/// From the start of a change to the watcher's wake-up (NOTIFY).
#[divan::bench(sample_count = 50)]
fn notice_latency(bencher: Bencher) {
    let rt = runtime();
    let list = rt.block_on(claimers(1)).remove(0);
    let mut watcher = rt.block_on(list.watch(Duration::from_secs(3600)));
    bencher.bench_local(|| {
        rt.block_on(async {
            list.create(NewListTask::new("ping")).await.expect("create");
            watcher.changed().await;
        })
    });
}
