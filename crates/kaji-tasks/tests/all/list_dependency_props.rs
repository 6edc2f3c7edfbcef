//! Property test (on both backends: files and PostgreSQL): the dependency
//! rules of the task list against a small
//! in-memory model. Random sequences of create / link / unlink / delete /
//! complete / claim must give the same outcomes and the same graph as the
//! model, whose rules are written out plainly here.
//!
//! The lists live on tmpfs when there is one (see `list_support`).

use std::collections::{BTreeMap, BTreeSet};

use kaji_tasks::list::{ClaimRefusal, ListTaskPatch, ListTaskStatus, NewListTask, TaskListError};
use proptest::prelude::*;

use crate::list_support;

use list_support::{Backend, Fixture};

#[derive(Debug, Clone)]
enum Op {
    Create(Vec<u8>),
    /// `a` blocks `b`, added from `b`'s side or from `a`'s side.
    Link(u8, u8, bool),
    Unlink(u8, u8),
    Delete(u8),
    Complete(u8),
    Claim(u8),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => prop::collection::vec(any::<u8>(), 0..3).prop_map(Op::Create),
        4 => (any::<u8>(), any::<u8>(), any::<bool>()).prop_map(|(a, b, s)| Op::Link(a, b, s)),
        1 => (any::<u8>(), any::<u8>()).prop_map(|(a, b)| Op::Unlink(a, b)),
        1 => any::<u8>().prop_map(Op::Delete),
        2 => any::<u8>().prop_map(Op::Complete),
        2 => any::<u8>().prop_map(Op::Claim),
    ]
}

#[derive(Debug, Clone, PartialEq)]
struct ModelTask {
    blocked_by: BTreeSet<u64>,
    status: ListTaskStatus,
    owner: Option<String>,
}

#[derive(Debug, Default)]
struct Model {
    highest: u64,
    tasks: BTreeMap<u64, ModelTask>,
}

impl Model {
    /// Maps a random byte to an id: mostly existing ones, sometimes one
    /// that was deleted or never existed.
    fn id(&self, byte: u8) -> u64 {
        1 + u64::from(byte) % (self.highest + 2)
    }

    fn blocks(&self, id: u64) -> BTreeSet<u64> {
        self.tasks
            .iter()
            .filter(|(_, t)| t.blocked_by.contains(&id))
            .map(|(k, _)| *k)
            .collect()
    }

    /// Whether `to` can be reached from `from` along `blocks`.
    fn reaches(&self, from: u64, to: u64) -> bool {
        let mut stack = vec![from];
        let mut seen = BTreeSet::new();
        while let Some(n) = stack.pop() {
            if n == to {
                return true;
            }
            if seen.insert(n) {
                stack.extend(self.blocks(n));
            }
        }
        false
    }

    fn open_blockers(&self, id: u64) -> Vec<u64> {
        self.tasks[&id]
            .blocked_by
            .iter()
            .copied()
            .filter(|b| self.tasks[b].status != ListTaskStatus::Completed)
            .collect()
    }
}

/// Asserts that `cycle` is a real cycle once `new` is added to the model's
/// graph.
fn assert_cycle(model: &Model, cycle: &[u64], new: (u64, u64)) {
    assert!(
        cycle.len() >= 2 && cycle.first() == cycle.last(),
        "{cycle:?}"
    );
    for pair in cycle.windows(2) {
        let edge = (pair[0], pair[1]);
        assert!(
            edge == new || model.blocks(pair[0]).contains(&pair[1]),
            "{cycle:?}: {} does not block {}",
            pair[0],
            pair[1]
        );
    }
}

fn run(backend: Backend, ops: Vec<Op>) {
    let fixture = Fixture::new(backend, "props", true);
    let store = fixture.open();
    let mut model = Model::default();
    for op in ops {
        match op {
            Op::Create(blockers) => {
                let ids: Vec<u64> = blockers.iter().map(|b| model.id(*b)).collect();
                let new = NewListTask {
                    subject: "t".into(),
                    blocked_by: ids.clone(),
                    ..NewListTask::default()
                };
                let result = store.create(new);
                // The store checks blockers in ascending order.
                if let Some(missing) = ids.iter().filter(|i| !model.tasks.contains_key(i)).min() {
                    match result {
                        Err(TaskListError::EdgeToMissingTask { to, .. }) => {
                            assert_eq!(to, *missing)
                        }
                        other => panic!("create blocked by missing #{missing}: {other:?}"),
                    }
                } else {
                    let task = result.expect("create");
                    model.highest += 1;
                    assert_eq!(
                        task.id, model.highest,
                        "ids are consecutive and never reused"
                    );
                    model.tasks.insert(
                        task.id,
                        ModelTask {
                            blocked_by: ids.into_iter().collect(),
                            status: ListTaskStatus::Pending,
                            owner: None,
                        },
                    );
                }
            }
            Op::Link(a, b, from_blocked_side) => {
                let (a, b) = (model.id(a), model.id(b));
                let (target, patch) = if from_blocked_side {
                    let patch = ListTaskPatch {
                        add_blocked_by: vec![a],
                        ..ListTaskPatch::default()
                    };
                    (b, patch)
                } else {
                    let patch = ListTaskPatch {
                        add_blocks: vec![b],
                        ..ListTaskPatch::default()
                    };
                    (a, patch)
                };
                let peer = if from_blocked_side { a } else { b };
                let result = store.update(target, patch);
                if !model.tasks.contains_key(&target) {
                    assert!(
                        matches!(result, Err(TaskListError::TaskNotFound { .. })),
                        "{result:?}"
                    );
                } else if !model.tasks.contains_key(&peer) {
                    assert!(
                        matches!(result, Err(TaskListError::EdgeToMissingTask { .. })),
                        "{result:?}"
                    );
                } else if model.reaches(b, a) {
                    match result {
                        Err(TaskListError::Cycle { cycle }) => assert_cycle(&model, &cycle, (a, b)),
                        other => panic!("#{a} blocks #{b} closes a cycle: {other:?}"),
                    }
                } else {
                    result.expect("link");
                    model.tasks.get_mut(&b).expect("b").blocked_by.insert(a);
                }
            }
            Op::Unlink(a, b) => {
                let (a, b) = (model.id(a), model.id(b));
                let patch = ListTaskPatch {
                    remove_blocked_by: vec![a],
                    ..ListTaskPatch::default()
                };
                let result = store.update(b, patch);
                match model.tasks.get_mut(&b) {
                    Some(task) => {
                        result.expect("unlink");
                        task.blocked_by.remove(&a);
                    }
                    None => assert!(result.is_err()),
                }
            }
            Op::Delete(a) => {
                let a = model.id(a);
                let result = store.delete(a);
                if model.tasks.remove(&a).is_some() {
                    result.expect("delete");
                    for task in model.tasks.values_mut() {
                        task.blocked_by.remove(&a);
                    }
                } else {
                    assert!(
                        matches!(result, Err(TaskListError::TaskNotFound { .. })),
                        "{result:?}"
                    );
                }
            }
            Op::Complete(a) => {
                let a = model.id(a);
                let patch = ListTaskPatch {
                    status: Some(ListTaskStatus::Completed),
                    ..ListTaskPatch::default()
                };
                let result = store.update(a, patch);
                let Some(was) = model.tasks.get(&a).map(|t| t.status) else {
                    assert!(result.is_err());
                    continue;
                };
                model.tasks.get_mut(&a).expect("a").status = ListTaskStatus::Completed;
                let expected: Vec<u64> = if was == ListTaskStatus::Completed {
                    Vec::new()
                } else {
                    model
                        .blocks(a)
                        .into_iter()
                        .filter(|x| {
                            model.tasks[x].status != ListTaskStatus::Completed
                                && model.open_blockers(*x).is_empty()
                        })
                        .collect()
                };
                assert_eq!(result.expect("complete").unblocked, expected);
            }
            Op::Claim(a) => {
                let a = model.id(a);
                let result = store.claim(a, "p");
                let expected = match model.tasks.get(&a) {
                    None => Some(ClaimRefusal::NotFound),
                    Some(t) if t.status == ListTaskStatus::Completed => {
                        Some(ClaimRefusal::AlreadyCompleted)
                    }
                    Some(t) if t.owner.is_some() || t.status == ListTaskStatus::InProgress => {
                        Some(ClaimRefusal::AlreadyClaimed {
                            owner: t.owner.clone(),
                        })
                    }
                    Some(_) if !model.open_blockers(a).is_empty() => Some(ClaimRefusal::Blocked {
                        by: model.open_blockers(a),
                    }),
                    Some(_) => None,
                };
                match (expected, result) {
                    (None, Ok(task)) => {
                        assert_eq!(task.status, ListTaskStatus::InProgress);
                        let t = model.tasks.get_mut(&a).expect("a");
                        t.status = ListTaskStatus::InProgress;
                        t.owner = Some("p".into());
                    }
                    (Some(reason), Err(TaskListError::ClaimRefused { reason: got, .. })) => {
                        assert_eq!(got, reason)
                    }
                    (expected, got) => panic!("claim #{a}: expected {expected:?}, got {got:?}"),
                }
            }
        }

        // The files say exactly what the model says.
        let snapshot = store.list().expect("list");
        assert!(snapshot.errors.is_empty(), "{:?}", snapshot.errors);
        let ids: Vec<u64> = snapshot.tasks.iter().map(|t| t.id).collect();
        assert_eq!(ids, model.tasks.keys().copied().collect::<Vec<_>>());
        for task in &snapshot.tasks {
            let m = &model.tasks[&task.id];
            assert_eq!(task.blocked_by, m.blocked_by, "#{} blockedBy", task.id);
            assert_eq!(task.blocks, model.blocks(task.id), "#{} blocks", task.id);
            assert_eq!(
                (task.status, &task.owner),
                (m.status, &m.owner),
                "#{}",
                task.id
            );
        }
        let available: Vec<u64> = snapshot.available().iter().map(|t| t.id).collect();
        let expected: Vec<u64> = model
            .tasks
            .iter()
            .filter(|(id, t)| {
                t.status == ListTaskStatus::Pending
                    && t.owner.is_none()
                    && model.open_blockers(**id).is_empty()
            })
            .map(|(id, _)| *id)
            .collect();
        assert_eq!(available, expected, "available tasks");
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 48,
        failure_persistence: None,
        rng_seed: proptest::test_runner::RngSeed::Fixed(
            kaji_test_support::seeds::seeds("dependency props", &[0xdeb5], None)[0],
        ),
        ..ProptestConfig::default()
    })]

    #[test]
    fn dependency_rules_match_the_model(ops in prop::collection::vec(op(), 1..40)) {
        run(Backend::Files, ops);
    }
}

// The same rules on PostgreSQL: fewer cases, since the model is the same and
// each operation there is a round trip (about four times the files' cost);
// what this adds is the SQL, which 16 sequences of up to 40 operations cover.
proptest! {
    #![proptest_config(ProptestConfig {
        cases: 16,
        failure_persistence: None,
        rng_seed: proptest::test_runner::RngSeed::Fixed(
            kaji_test_support::seeds::seeds("dependency props on postgres", &[0xdeb5], None)[0],
        ),
        ..ProptestConfig::default()
    })]

    #[test]
    fn dependency_rules_match_the_model_on_postgres(ops in prop::collection::vec(op(), 1..40)) {
        run(Backend::Pg, ops);
    }
}
