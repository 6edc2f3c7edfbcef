//! A driver that hammers one task list from its own process, for the
//! multi-process and crash tests and the throughput benchmark of
//! `kaji_tasks::list`. Not a user tool: kaji never runs it.
//!
//! ```text
//! task-list-worker stress KAJI_HOME LIST WORKER OPS SEED   random ops, then a JSON summary line
//! task-list-worker crash  KAJI_HOME LIST WORKER SEED       random ops forever, "begin N" before each
//! task-list-worker bench  KAJI_HOME LIST KIND WORKER WORKERS OPS
//!                                    KIND: create | update | claim
//! task-list-worker hold   KAJI_HOME LIST   takes the list lock, prints "held",
//!                                          keeps it until stdin ends
//! ```
//!
//! It must never hide a broken guarantee: anything the store should not do
//! (a lost task, a release of a task it never held, an unreadable file)
//! ends it with exit code 1 and a message on stderr.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use kaji_tasks::list::{
    ListTarget, ListTask, ListTaskPatch, ListTaskStatus, NewListTask, TaskList, TaskListError,
    TaskListStore, UpdateOutcome,
};
use serde_json::{Map, Value, json};

/// xorshift64*: deterministic per seed, good enough to pick operations.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `0..n` (`n > 0`).
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> Option<T> {
        if items.is_empty() {
            None
        } else {
            Some(items[self.below(items.len() as u64) as usize])
        }
    }
}

/// What one stress worker believes it did; checked by the test afterwards.
#[derive(Default)]
struct Beliefs {
    created: Vec<u64>,
    deleted: BTreeSet<u64>,
    subjects: BTreeMap<u64, String>,
    meta: BTreeMap<u64, u64>,
    held: BTreeSet<u64>,
    completed: BTreeSet<u64>,
}

type Outcome = Result<(), String>;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("stress") if args.len() == 6 => stress(&args[1..]),
        Some("crash") if args.len() == 5 => crash(&args[1..]),
        Some("bench") if args.len() == 7 => bench(&args[1..]),
        Some("hold") if args.len() == 3 => hold(&args[1..]),
        _ => Err("usage: see the module documentation of task-list-worker".to_string()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("task-list-worker: {message}");
            ExitCode::FAILURE
        }
    }
}

/// Holds the list lock until stdin reaches its end (or the process dies).
fn hold(args: &[String]) -> Outcome {
    let store = open(&args[0], &args[1])?;
    let _lock = store.lock().map_err(|e| e.to_string())?;
    println!("held");
    std::io::stdout().flush().map_err(|e| e.to_string())?;
    let mut sink = Vec::new();
    let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut sink);
    Ok(())
}

fn num(s: &str) -> Result<u64, String> {
    s.parse().map_err(|_| format!("not a number: {s:?}"))
}

/// The list on either backend: PostgreSQL when `KAJI_TASK_LIST_URL` is
/// set (LIST then names the database list), else the file store. Every
/// call blocks on a runtime of its own.
struct Store {
    list: TaskList,
    rt: tokio::runtime::Runtime,
}

impl Store {
    fn run<T>(
        &self,
        f: impl std::future::Future<Output = Result<T, TaskListError>>,
    ) -> Result<T, TaskListError> {
        self.rt.block_on(f)
    }
    fn lock(&self) -> Result<kaji_tasks::list::ListLock, TaskListError> {
        match &self.list {
            TaskList::Files(store) => store.lock(),
            TaskList::Pg(_) => Err(TaskListError::InvalidInput(
                "no list lock on a database".into(),
            )),
        }
    }
    fn highwatermark(&self) -> Result<u64, TaskListError> {
        self.run(self.list.highwatermark())
    }
    fn get(&self, id: u64) -> Result<ListTask, TaskListError> {
        self.run(self.list.get(id))
    }
    fn create(&self, new: NewListTask) -> Result<ListTask, TaskListError> {
        self.run(self.list.create(new))
    }
    fn update(&self, id: u64, patch: ListTaskPatch) -> Result<UpdateOutcome, TaskListError> {
        self.run(self.list.update(id, patch))
    }
    fn claim(&self, id: u64, owner: &str) -> Result<ListTask, TaskListError> {
        self.run(self.list.claim(id, owner))
    }
    fn claim_next(&self, owner: &str) -> Result<Option<ListTask>, TaskListError> {
        self.run(self.list.claim_next(owner))
    }
    fn release(&self, owner: &str) -> Result<Vec<u64>, TaskListError> {
        self.run(self.list.release(owner))
    }
    fn delete(&self, id: u64) -> Result<ListTask, TaskListError> {
        self.run(self.list.delete(id))
    }
}

fn open(home: &str, list: &str) -> Result<Store, String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let url = std::env::var(kaji_tasks::list::pg::TASK_LIST_URL_ENV).ok();
    let target = kaji_tasks::list::resolve_target(Some(list), None, url.as_deref(), list)
        .map_err(|e| e.to_string())?;
    let list = match &target {
        ListTarget::Files(id) => {
            TaskList::Files(TaskListStore::open(Path::new(home), id).map_err(|e| e.to_string())?)
        }
        target => rt
            .block_on(TaskList::open(Path::new(home), target))
            .map_err(|e| e.to_string())?,
    };
    Ok(Store { list, rt })
}

/// Errors that random operations are allowed to meet.
fn expected(e: &TaskListError) -> bool {
    matches!(
        e,
        TaskListError::TaskNotFound { .. }
            | TaskListError::EdgeToMissingTask { .. }
            | TaskListError::Cycle { .. }
            | TaskListError::ClaimRefused { .. }
    )
}

fn stress(args: &[String]) -> Outcome {
    let store = open(&args[0], &args[1])?;
    let worker = num(&args[2])?;
    let ops = num(&args[3])?;
    let mut rng = Rng::new(num(&args[4])?);
    let owner = format!("w{worker}");
    let mut me = Beliefs::default();
    for step in 0..ops {
        let roll = rng.below(100);
        one_op(&store, &owner, step, roll, &mut rng, &mut me)
            .map_err(|e| format!("{owner} op {step}: {e}"))?;
    }
    let summary = json!({
        "worker": worker,
        "created": me.created,
        "deleted": me.deleted,
        "subjects": me.subjects.iter().map(|(k, v)| (k.to_string(), json!(v))).collect::<Map<_, _>>(),
        "meta": me.meta.iter().map(|(k, v)| (k.to_string(), json!(v))).collect::<Map<_, _>>(),
        "held": me.held,
        "completed": me.completed,
    });
    println!("{summary}");
    Ok(())
}

fn crash(args: &[String]) -> Outcome {
    let store = open(&args[0], &args[1])?;
    let worker = num(&args[2])?;
    let mut rng = Rng::new(num(&args[3])?);
    let owner = format!("w{worker}");
    let mut me = Beliefs::default();
    let mut stdout = std::io::stdout();
    for step in 0.. {
        // Announced before it starts, so that a kill after reading the
        // line lands inside the operation.
        writeln!(stdout, "begin {step}")
            .and_then(|()| stdout.flush())
            .map_err(|e| e.to_string())?;
        // Half of the operations change dependencies or delete: the
        // multi-task changes that a kill can cut in two.
        let roll = match rng.below(4) {
            0 => 55 + rng.below(15),
            1 => 96 + rng.below(4),
            _ => rng.below(100),
        };
        one_op(&store, &owner, step, roll, &mut rng, &mut me)?;
    }
    Ok(())
}

/// One random operation, recording what it did in `me`.
fn one_op(
    store: &Store,
    owner: &str,
    step: u64,
    roll: u64,
    rng: &mut Rng,
    me: &mut Beliefs,
) -> Outcome {
    let hwm = store.highwatermark().map_err(|e| e.to_string())?;
    let any_id = |rng: &mut Rng| 1 + rng.below(hwm.max(1));
    let live: Vec<u64> = me
        .created
        .iter()
        .copied()
        .filter(|id| !me.deleted.contains(id))
        .collect();
    let tolerate = |r: Result<(), TaskListError>| match r {
        Err(e) if !expected(&e) => Err(e.to_string()),
        _ => Ok(()),
    };
    match roll {
        0..=19 => {
            let subject = format!("{owner} task {step}");
            let mut new = NewListTask::new(subject.clone());
            if rng.below(4) == 0 && hwm > 0 {
                new.blocked_by = vec![any_id(rng)];
            }
            match store.create(new) {
                Ok(task) => {
                    me.created.push(task.id);
                    me.subjects.insert(task.id, subject);
                }
                Err(e) => tolerate(Err(e))?,
            }
        }
        20..=34 => {
            if let Some(id) = rng.pick(&live) {
                check_own_writes(store, owner, id, me)?;
                let subject = format!("{owner} subject {step}");
                let patch = ListTaskPatch {
                    subject: Some(subject.clone()),
                    description: Some(format!("changed at step {step}")),
                    ..ListTaskPatch::default()
                };
                store
                    .update(id, patch)
                    .map_err(|e| format!("update of my own task #{id}: {e}"))?;
                me.subjects.insert(id, subject);
            }
        }
        35..=54 => {
            // Mostly the newest tasks, so that processes collide on them.
            let id = if rng.below(4) == 0 {
                any_id(rng)
            } else {
                hwm.saturating_sub(rng.below(hwm.min(6)))
            };
            check_own_writes(store, owner, id, me)?;
            let mut metadata = Map::new();
            metadata.insert(owner.to_string(), json!(step));
            let patch = ListTaskPatch {
                metadata: Some(metadata),
                ..ListTaskPatch::default()
            };
            match store.update(id, patch) {
                Ok(_) => {
                    me.meta.insert(id, step);
                }
                Err(e) => tolerate(Err(e))?,
            }
        }
        55..=64 => {
            let patch = ListTaskPatch {
                add_blocked_by: vec![any_id(rng)],
                ..ListTaskPatch::default()
            };
            tolerate(store.update(any_id(rng), patch).map(drop))?;
        }
        65..=69 => {
            let patch = ListTaskPatch {
                remove_blocked_by: vec![any_id(rng)],
                ..ListTaskPatch::default()
            };
            tolerate(store.update(any_id(rng), patch).map(drop))?;
        }
        70..=76 => {
            if let Some(task) = store.claim_next(owner).map_err(|e| e.to_string())? {
                me.held.insert(task.id);
            }
        }
        77..=81 => match store.claim(any_id(rng), owner) {
            Ok(task) => {
                me.held.insert(task.id);
            }
            Err(e) => tolerate(Err(e))?,
        },
        82..=91 => {
            let open: Vec<u64> = me.held.difference(&me.completed).copied().collect();
            if let Some(id) = rng.pick(&open) {
                let patch = ListTaskPatch {
                    status: Some(ListTaskStatus::Completed),
                    ..ListTaskPatch::default()
                };
                match store.update(id, patch) {
                    Ok(_) => {
                        me.completed.insert(id);
                    }
                    // Its creator deleted it.
                    Err(TaskListError::TaskNotFound { .. }) => {
                        me.held.remove(&id);
                    }
                    Err(e) => return Err(e.to_string()),
                }
            }
        }
        92..=95 => {
            let released = store.release(owner).map_err(|e| e.to_string())?;
            for id in released {
                if !me.held.remove(&id) || me.completed.contains(&id) {
                    return Err(format!(
                        "release gave back #{id}, which {owner} did not hold open"
                    ));
                }
            }
        }
        _ => {
            if let Some(id) = rng.pick(&live) {
                store
                    .delete(id)
                    .map_err(|e| format!("delete of my own task #{id}: {e}"))?;
                me.deleted.insert(id);
                me.held.remove(&id);
                me.completed.remove(&id);
            }
        }
    }
    Ok(())
}

/// Checks that what this process last wrote to task `id` is still there:
/// only this process writes its metadata key and the subjects of the
/// tasks it created, and only it releases what it claimed.
fn check_own_writes(store: &Store, owner: &str, id: u64, me: &Beliefs) -> Outcome {
    let task = match store.get(id) {
        Ok(task) => task,
        Err(TaskListError::TaskNotFound { .. }) => return Ok(()),
        Err(e) => return Err(e.to_string()),
    };
    if let Some(step) = me.meta.get(&id)
        && task.metadata.get(owner) != Some(&json!(step))
    {
        return Err(format!(
            "lost update: #{id} metadata {owner:?} is {:?}, {owner} last wrote {step}",
            task.metadata.get(owner)
        ));
    }
    if let Some(subject) = me.subjects.get(&id)
        && &task.subject != subject
    {
        return Err(format!(
            "lost update: #{id} subject is {:?}, {owner} last wrote {subject:?}",
            task.subject
        ));
    }
    if me.held.contains(&id) && task.owner.as_deref() != Some(owner) {
        return Err(format!(
            "#{id} claimed by {owner} is now owned by {:?}",
            task.owner
        ));
    }
    Ok(())
}

/// `bench KAJI_HOME LIST KIND WORKER WORKERS OPS`: `OPS` operations of one
/// kind. `update` changes task `WORKER + 1` (set up by the benchmark);
/// `claim` claims tasks `WORKER + 1`, `WORKER + 1 + WORKERS`, ….
fn bench(args: &[String]) -> Outcome {
    let store = open(&args[0], &args[1])?;
    let kind = args[2].as_str();
    let worker = num(&args[3])?;
    let workers = num(&args[4])?;
    let ops = num(&args[5])?;
    let owner = format!("w{worker}");
    for step in 0..ops {
        let result = match kind {
            "create" => store
                .create(NewListTask::new(format!("{owner} {step}")))
                .map(drop),
            "update" => {
                let mut metadata = Map::new();
                metadata.insert("step".to_string(), Value::from(step));
                let patch = ListTaskPatch {
                    metadata: Some(metadata),
                    ..ListTaskPatch::default()
                };
                store.update(worker + 1, patch).map(drop)
            }
            "claim" => store.claim(worker + 1 + step * workers, &owner).map(drop),
            other => return Err(format!("unknown benchmark kind {other:?}")),
        };
        result.map_err(|e| format!("{owner} {kind} {step}: {e}"))?;
    }
    Ok(())
}
