//! The task-list operations as SQL, each one transaction.
//!
//! Must never build SQL from values: every value is a parameter.

use std::collections::BTreeSet;

use serde_json::{Map, Value};
use tokio_postgres::{Row, Transaction};

use super::{Fail, PgTaskList, in_tx};
use crate::list::graph::BlocksGraph;
use crate::list::model::{merge_metadata, normalize_owner, now_ms, validate_subject};
use crate::list::{
    ClaimRefusal, ListSnapshot, ListTask, ListTaskPatch, ListTaskStatus, NewListTask,
    TaskListError, UpdateOutcome,
};

/// The columns of a task, with its edges, for [`task_of`] (`select_tasks!()`:
/// the column list alone, for `RETURNING`).
macro_rules! select_tasks {
    () => {
        concat!(
            "t.id, t.subject, t.description, t.active_form, t.owner, t.status, ",
            "t.metadata, t.created_at, t.updated_at, ",
            "ARRAY(SELECT e.blocked FROM kaji_task_edges e WHERE e.list = t.list ",
            "AND e.blocker = t.id ORDER BY 1) AS blocks, ",
            "ARRAY(SELECT e.blocker FROM kaji_task_edges e WHERE e.list = t.list ",
            "AND e.blocked = t.id ORDER BY 1) AS blocked_by"
        )
    };
    ($tail:literal) => {
        concat!("SELECT ", select_tasks!(), " FROM kaji_tasks t ", $tail)
    };
}

/// Open blockers of task `$2` in list `$1`.
const OPEN_BLOCKERS: &str = "SELECT e.blocker FROM kaji_task_edges e \
     JOIN kaji_tasks b ON b.list = e.list AND b.id = e.blocker \
     WHERE e.list = $1 AND e.blocked = $2 AND b.status <> 'completed' ORDER BY 1";

pub(super) fn task_of(row: &Row) -> Result<ListTask, Fail> {
    let status: String = row.try_get("status")?;
    let metadata: Value = row.try_get("metadata")?;
    let ids = |name: &str| -> Result<BTreeSet<u64>, Fail> {
        let v: Vec<i64> = row.try_get(name)?;
        Ok(v.into_iter().map(|i| i as u64).collect())
    };
    Ok(ListTask {
        id: row.try_get::<_, i64>("id")? as u64,
        subject: row.try_get("subject")?,
        description: row.try_get("description")?,
        active_form: row.try_get("active_form")?,
        owner: row.try_get("owner")?,
        status: status.parse()?,
        blocks: ids("blocks")?,
        blocked_by: ids("blocked_by")?,
        metadata: match metadata {
            Value::Object(map) => map,
            _ => Map::new(),
        },
        created_at: row.try_get::<_, i64>("created_at")? as u64,
        updated_at: row.try_get::<_, i64>("updated_at")? as u64,
    })
}

pub(super) use select_tasks;

pub(super) fn sql_id(id: u64) -> Result<i64, TaskListError> {
    i64::try_from(id).map_err(|_| TaskListError::InvalidInput(format!("task id {id} is too large")))
}

pub(super) fn now() -> i64 {
    now_ms() as i64
}

impl PgTaskList {
    /// Makes sure the list row exists (`create`) or reports it missing.
    pub(super) async fn ensure_list(&self, create: bool) -> Result<(), TaskListError> {
        let list = self.list_id.clone();
        in_tx!(self, |tx| {
            async {
                if create {
                    tx.execute(
                        "INSERT INTO kaji_task_lists (name, created_at) VALUES ($1, $2) \
                         ON CONFLICT (name) DO NOTHING",
                        &[&list, &now()],
                    )
                    .await?;
                    self.notify(&tx).await?;
                }
                self.lock_list(&tx).await?;
                Ok::<_, Fail>(())
            }
            .await
        })
    }

    /// Takes the list row's lock (the list lock of the file store) and
    /// returns the high-water mark; a missing list is `ListNotFound`.
    async fn lock_list(&self, tx: &Transaction<'_>) -> Result<u64, Fail> {
        let row = tx
            .query_opt(
                "SELECT highwatermark FROM kaji_task_lists WHERE name = $1 FOR UPDATE",
                &[&self.list_id],
            )
            .await?;
        match row {
            Some(row) => Ok(row.try_get::<_, i64>(0)? as u64),
            None => Err(Fail::List(self.list_not_found())),
        }
    }

    pub(super) async fn require_list(&self, tx: &Transaction<'_>) -> Result<u64, Fail> {
        let row = tx
            .query_opt(
                "SELECT highwatermark FROM kaji_task_lists WHERE name = $1",
                &[&self.list_id],
            )
            .await?;
        match row {
            Some(row) => Ok(row.try_get::<_, i64>(0)? as u64),
            None => Err(Fail::List(self.list_not_found())),
        }
    }

    pub(super) fn list_not_found(&self) -> TaskListError {
        TaskListError::ListNotFound {
            list_id: self.list_id.clone(),
            path: self.locator(None),
        }
    }

    fn not_found(&self, id: u64) -> TaskListError {
        TaskListError::TaskNotFound {
            list_id: self.list_id.clone(),
            id,
            path: self.locator(Some(id)),
        }
    }

    pub(super) async fn fetch(
        &self,
        tx: &Transaction<'_>,
        id: u64,
        lock: bool,
    ) -> Result<ListTask, Fail> {
        let sql = if lock {
            select_tasks!("WHERE t.list = $1 AND t.id = $2 FOR UPDATE OF t")
        } else {
            select_tasks!("WHERE t.list = $1 AND t.id = $2")
        };
        match tx.query_opt(sql, &[&self.list_id, &sql_id(id)?]).await? {
            Some(row) => task_of(&row),
            None => Err(Fail::List(self.not_found(id))),
        }
    }

    async fn snapshot_in(&self, tx: &Transaction<'_>) -> Result<ListSnapshot, Fail> {
        let highwatermark = self.require_list(tx).await?;
        let rows = tx
            .query(
                select_tasks!("WHERE t.list = $1 ORDER BY t.id"),
                &[&self.list_id],
            )
            .await?;
        let tasks = rows.iter().map(task_of).collect::<Result<Vec<_>, _>>()?;
        Ok(ListSnapshot {
            tasks,
            errors: Vec::new(),
            highwatermark,
        })
    }

    // ----- reading -------------------------------------------------------

    /// Task `id`.
    pub async fn get(&self, id: u64) -> Result<ListTask, TaskListError> {
        in_tx!(self, |tx| { self.fetch(&tx, id, false).await })
    }

    /// Every task, sorted by id, with the high-water mark.
    pub async fn list(&self) -> Result<ListSnapshot, TaskListError> {
        in_tx!(self, |tx| { self.snapshot_in(&tx).await })
    }

    /// The highest id ever assigned in this list.
    pub async fn highwatermark(&self) -> Result<u64, TaskListError> {
        in_tx!(self, |tx| { self.require_list(&tx).await })
    }

    /// The tasks that can be claimed now (pending, no owner, every blocker
    /// completed), by id — as one query over the partial index.
    pub async fn available(&self) -> Result<Vec<ListTask>, TaskListError> {
        self.query_tasks(select_tasks!(
            "WHERE t.list = $1 AND t.status = 'pending' AND t.owner IS NULL AND NOT EXISTS (\
             SELECT 1 FROM kaji_task_edges e JOIN kaji_tasks b ON b.list = e.list AND b.id = e.blocker \
             WHERE e.list = t.list AND e.blocked = t.id AND b.status <> 'completed') ORDER BY t.id"
        ))
        .await
    }

    /// The unfinished tasks that wait for an open blocker, by id.
    pub async fn blocked(&self) -> Result<Vec<ListTask>, TaskListError> {
        self.query_tasks(select_tasks!(
            "WHERE t.list = $1 AND t.status <> 'completed' AND EXISTS (\
             SELECT 1 FROM kaji_task_edges e JOIN kaji_tasks b ON b.list = e.list AND b.id = e.blocker \
             WHERE e.list = t.list AND e.blocked = t.id AND b.status <> 'completed') ORDER BY t.id"
        ))
        .await
    }

    /// The unfinished tasks `owner` holds, by id.
    pub async fn held_by(&self, owner: &str) -> Result<Vec<ListTask>, TaskListError> {
        let list = self.list_id.clone();
        let owner = owner.to_string();
        in_tx!(self, |tx| {
            async {
                let rows = tx
                    .query(
                        select_tasks!(
                            "WHERE t.list = $1 AND t.owner = $2 AND t.status <> 'completed' \
                             ORDER BY t.id"
                        ),
                        &[&list, &owner],
                    )
                    .await?;
                rows.iter().map(task_of).collect::<Result<Vec<_>, Fail>>()
            }
            .await
        })
    }

    /// The tasks completing `id` would unblock now: tasks it blocks that
    /// are not completed and whose only open blocker is `id`.
    pub async fn would_unblock(&self, id: u64) -> Result<Vec<u64>, TaskListError> {
        in_tx!(self, |tx| { self.unblocked_in(&tx, id).await })
    }

    async fn unblocked_in(&self, tx: &Transaction<'_>, id: u64) -> Result<Vec<u64>, Fail> {
        let rows = tx
            .query(
                "SELECT t.id FROM kaji_task_edges d JOIN kaji_tasks t ON t.list = d.list AND t.id = d.blocked \
                 WHERE d.list = $1 AND d.blocker = $2 AND t.status <> 'completed' AND NOT EXISTS (\
                 SELECT 1 FROM kaji_task_edges e JOIN kaji_tasks b ON b.list = e.list AND b.id = e.blocker \
                 WHERE e.list = t.list AND e.blocked = t.id AND e.blocker <> $2 AND b.status <> 'completed') \
                 ORDER BY t.id",
                &[&self.list_id, &sql_id(id)?],
            )
            .await?;
        rows.iter()
            .map(|r| Ok(r.try_get::<_, i64>(0)? as u64))
            .collect()
    }

    async fn query_tasks(&self, sql: &'static str) -> Result<Vec<ListTask>, TaskListError> {
        in_tx!(self, |tx| {
            async {
                self.require_list(&tx).await?;
                let rows = tx.query(sql, &[&self.list_id]).await?;
                rows.iter().map(task_of).collect::<Result<Vec<_>, Fail>>()
            }
            .await
        })
    }

    // ----- writing -------------------------------------------------------

    /// Creates a pending task with the next id (never reused); missing
    /// dependency targets and cycles are refused.
    pub async fn create(&self, new: NewListTask) -> Result<ListTask, TaskListError> {
        validate_subject(&new.subject)?;
        let task = in_tx!(self, |tx| { self.create_in(&tx, &new).await })?;
        Ok(task)
    }

    async fn create_in(&self, tx: &Transaction<'_>, new: &NewListTask) -> Result<ListTask, Fail> {
        let hwm = self.lock_list(tx).await?;
        let id = hwm + 1;
        let blocked_by: BTreeSet<u64> = new.blocked_by.iter().copied().collect();
        let blocks: BTreeSet<u64> = new.blocks.iter().copied().collect();
        let mut metadata = Map::new();
        merge_metadata(&mut metadata, &new.metadata);
        let now = now();
        tx.execute(
            "UPDATE kaji_task_lists SET highwatermark = $2 WHERE name = $1",
            &[&self.list_id, &sql_id(id)?],
        )
        .await?;
        tx.execute(
            "INSERT INTO kaji_tasks (list, id, subject, description, active_form, owner, status, \
             metadata, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, NULL, 'pending', $6, $7, $7)",
            &[
                &self.list_id,
                &sql_id(id)?,
                &new.subject,
                &new.description,
                &new.active_form,
                &Value::Object(metadata),
                &now,
            ],
        )
        .await?;
        let edges: Vec<(u64, u64)> = blocked_by
            .iter()
            .map(|&b| (b, id))
            .chain(blocks.iter().map(|&b| (id, b)))
            .collect();
        self.add_edges(tx, id, &edges, true).await?;
        self.notify(tx).await?;
        self.fetch(tx, id, false).await
    }

    /// Checks and inserts edges (the list lock is held): each peer must
    /// exist and no edge may close a cycle. While `creating` task `id`, an
    /// edge to `id` itself names a task that did not exist yet (as on
    /// files).
    async fn add_edges(
        &self,
        tx: &Transaction<'_>,
        id: u64,
        edges: &[(u64, u64)],
        creating: bool,
    ) -> Result<(), Fail> {
        if edges.is_empty() {
            return Ok(());
        }
        let mut graph = self.graph(tx).await?;
        for &(blocker, blocked) in edges {
            let peer = if blocker == id { blocked } else { blocker };
            let exists = tx
                .query_opt(
                    "SELECT 1 FROM kaji_tasks WHERE list = $1 AND id = $2 FOR UPDATE",
                    &[&self.list_id, &sql_id(peer)?],
                )
                .await?
                .is_some();
            if (!exists && peer != id) || (creating && peer == id) {
                return Err(Fail::List(TaskListError::EdgeToMissingTask {
                    from: id,
                    to: peer,
                    path: self.locator(Some(peer)),
                }));
            }
            if let Some(cycle) = graph.cycle_if_added(blocker, blocked) {
                return Err(Fail::List(TaskListError::Cycle { cycle }));
            }
            graph.add(blocker, blocked);
            tx.execute(
                "INSERT INTO kaji_task_edges (list, blocker, blocked) VALUES ($1, $2, $3) \
                 ON CONFLICT DO NOTHING",
                &[&self.list_id, &sql_id(blocker)?, &sql_id(blocked)?],
            )
            .await?;
        }
        Ok(())
    }

    async fn graph(&self, tx: &Transaction<'_>) -> Result<BlocksGraph, Fail> {
        let rows = tx
            .query(
                "SELECT blocker, blocked FROM kaji_task_edges WHERE list = $1",
                &[&self.list_id],
            )
            .await?;
        let mut graph = BlocksGraph::default();
        for row in rows {
            graph.add(
                row.try_get::<_, i64>(0)? as u64,
                row.try_get::<_, i64>(1)? as u64,
            );
        }
        Ok(graph)
    }

    /// Changes task `id` in one transaction; completing it reports the
    /// tasks it unblocked.
    pub async fn update(
        &self,
        id: u64,
        patch: ListTaskPatch,
    ) -> Result<UpdateOutcome, TaskListError> {
        patch.validate()?;
        in_tx!(self, |tx| { self.update_in(&tx, id, &patch, None).await })
    }

    /// The body of an update; `fence` is a lease holder that must own the
    /// task and hold a live lease (checked by the caller in `tx`).
    pub(super) async fn update_in(
        &self,
        tx: &Transaction<'_>,
        id: u64,
        patch: &ListTaskPatch,
        fence: Option<&str>,
    ) -> Result<UpdateOutcome, Fail> {
        if patch.changes_edges() {
            self.lock_list(tx).await?;
        } else {
            self.require_list(tx).await?;
        }
        let mut task = self.fetch(tx, id, true).await?;
        if let Some(holder) = fence
            && task.owner.as_deref() != Some(holder)
        {
            return Err(Fail::List(self.lease_lost(holder, id, &task)));
        }
        let before = task.status;
        for &b in &patch.remove_blocks {
            self.remove_edge(tx, id, b).await?;
        }
        for &b in &patch.remove_blocked_by {
            self.remove_edge(tx, b, id).await?;
        }
        let adds: Vec<(u64, u64)> = patch
            .add_blocks
            .iter()
            .map(|&b| (id, b))
            .chain(patch.add_blocked_by.iter().map(|&b| (b, id)))
            .collect();
        self.add_edges(tx, id, &adds, false).await?;
        if !patch.is_empty() {
            patch.apply_fields(&mut task);
            task.owner = normalize_owner(task.owner.as_deref());
            tx.execute(
                "UPDATE kaji_tasks SET subject = $3, description = $4, active_form = $5, \
                 owner = $6, status = $7, metadata = $8, updated_at = GREATEST(updated_at, $9) \
                 WHERE list = $1 AND id = $2",
                &[
                    &self.list_id,
                    &sql_id(id)?,
                    &task.subject,
                    &task.description,
                    &task.active_form,
                    &task.owner,
                    &task.status.as_str(),
                    &Value::Object(task.metadata.clone()),
                    &now(),
                ],
            )
            .await?;
            self.notify(tx).await?;
        }
        let task = self.fetch(tx, id, false).await?;
        let unblocked =
            if before != ListTaskStatus::Completed && task.status == ListTaskStatus::Completed {
                self.unblocked_in(tx, id).await?
            } else {
                Vec::new()
            };
        Ok(UpdateOutcome { task, unblocked })
    }

    async fn remove_edge(
        &self,
        tx: &Transaction<'_>,
        blocker: u64,
        blocked: u64,
    ) -> Result<(), Fail> {
        tx.execute(
            "DELETE FROM kaji_task_edges WHERE list = $1 AND blocker = $2 AND blocked = $3",
            &[&self.list_id, &sql_id(blocker)?, &sql_id(blocked)?],
        )
        .await?;
        Ok(())
    }

    /// Deletes task `id` (its edges go with it); returns it as it was.
    pub async fn delete(&self, id: u64) -> Result<ListTask, TaskListError> {
        in_tx!(self, |tx| {
            async {
                self.lock_list(&tx).await?;
                let task = self.fetch(&tx, id, true).await?;
                tx.execute(
                    "DELETE FROM kaji_tasks WHERE list = $1 AND id = $2",
                    &[&self.list_id, &sql_id(id)?],
                )
                .await?;
                self.notify(&tx).await?;
                Ok::<_, Fail>(task)
            }
            .await
        })
    }

    /// Deletes every task, keeping the high-water mark.
    pub async fn reset(&self) -> Result<Vec<u64>, TaskListError> {
        in_tx!(self, |tx| {
            async {
                self.lock_list(&tx).await?;
                let rows = tx
                    .query(
                        "DELETE FROM kaji_tasks WHERE list = $1 RETURNING id",
                        &[&self.list_id],
                    )
                    .await?;
                self.notify(&tx).await?;
                let mut ids = rows
                    .iter()
                    .map(|r| Ok(r.try_get::<_, i64>(0)? as u64))
                    .collect::<Result<Vec<_>, Fail>>()?;
                ids.sort_unstable();
                Ok::<_, Fail>(ids)
            }
            .await
        })
    }

    /// Gives task `id` to `owner` if it is available.
    pub async fn claim(&self, id: u64, owner: &str) -> Result<ListTask, TaskListError> {
        let owner = require_owner(owner)?;
        in_tx!(self, |tx| { self.claim_in(&tx, id, &owner).await })
    }

    pub(super) async fn claim_in(
        &self,
        tx: &Transaction<'_>,
        id: u64,
        owner: &str,
    ) -> Result<ListTask, Fail> {
        self.require_list(tx).await?;
        let task = match self.fetch(tx, id, true).await {
            Ok(task) => task,
            Err(Fail::List(TaskListError::TaskNotFound { .. })) => {
                return Err(refused(id, ClaimRefusal::NotFound));
            }
            Err(e) => return Err(e),
        };
        if task.status == ListTaskStatus::Completed {
            return Err(refused(id, ClaimRefusal::AlreadyCompleted));
        }
        if task.owner.is_some() || task.status == ListTaskStatus::InProgress {
            return Err(refused(
                id,
                ClaimRefusal::AlreadyClaimed { owner: task.owner },
            ));
        }
        let open = tx
            .query(OPEN_BLOCKERS, &[&self.list_id, &sql_id(id)?])
            .await?;
        if !open.is_empty() {
            let by = open
                .iter()
                .map(|r| Ok(r.try_get::<_, i64>(0)? as u64))
                .collect::<Result<Vec<_>, Fail>>()?;
            return Err(refused(id, ClaimRefusal::Blocked { by }));
        }
        tx.execute(
            "UPDATE kaji_tasks SET owner = $3, status = 'in_progress', \
             updated_at = GREATEST(updated_at, $4) WHERE list = $1 AND id = $2",
            &[&self.list_id, &sql_id(id)?, &owner, &now()],
        )
        .await?;
        self.notify(tx).await?;
        self.fetch(tx, id, false).await
    }

    /// Gives back every unfinished task `owner` holds.
    pub async fn release(&self, owner: &str) -> Result<Vec<u64>, TaskListError> {
        let owner = require_owner(owner)?;
        in_tx!(self, |tx| { self.release_in(&tx, &owner, None).await })
    }

    pub(super) async fn release_in(
        &self,
        tx: &Transaction<'_>,
        owner: &str,
        note: Option<&str>,
    ) -> Result<Vec<u64>, Fail> {
        self.require_list(tx).await?;
        let note = match note {
            Some(text) => serde_json::json!({ "releasedFrom": owner, "releaseNote": text }),
            None => serde_json::json!({}),
        };
        let rows = tx
            .query(
                "UPDATE kaji_tasks SET owner = NULL, status = 'pending', metadata = metadata || $3, \
                 updated_at = GREATEST(updated_at, $4) \
                 WHERE list = $1 AND owner = $2 AND status <> 'completed' RETURNING id",
                &[&self.list_id, &owner, &note, &now()],
            )
            .await?;
        let mut ids = rows
            .iter()
            .map(|r| Ok(r.try_get::<_, i64>(0)? as u64))
            .collect::<Result<Vec<_>, Fail>>()?;
        ids.sort_unstable();
        if !ids.is_empty() {
            self.notify(tx).await?;
        }
        Ok(ids)
    }

    /// Announces a change of this list to every `LISTEN kaji_tasks`
    /// (delivered at commit, never for a rolled-back change).
    pub(super) async fn notify(&self, tx: &Transaction<'_>) -> Result<(), Fail> {
        tx.execute("SELECT pg_notify('kaji_tasks', $1)", &[&self.list_id])
            .await?;
        Ok(())
    }

    /// Puts `tasks` into this list as they are (ids, edges and all), for
    /// `kaji tasks import`; refused unless the list is empty. The
    /// high-water mark becomes at least `highwatermark`.
    pub async fn import(&self, snapshot: &ListSnapshot) -> Result<usize, TaskListError> {
        in_tx!(self, |tx| { self.import_in(&tx, snapshot).await })
    }

    async fn import_in(
        &self,
        tx: &Transaction<'_>,
        snapshot: &ListSnapshot,
    ) -> Result<usize, Fail> {
        let hwm = self.lock_list(tx).await?;
        let count: i64 = tx
            .query_one(
                "SELECT count(*) FROM kaji_tasks WHERE list = $1",
                &[&self.list_id],
            )
            .await?
            .try_get(0)?;
        if count > 0 {
            return Err(Fail::List(TaskListError::InvalidInput(format!(
                "list {:?} on {} is not empty ({count} tasks); import only into an empty list",
                self.list_id,
                self.server()
            ))));
        }
        let max_id = snapshot.tasks.iter().map(|t| t.id).max().unwrap_or(0);
        let new_hwm = hwm.max(snapshot.highwatermark).max(max_id);
        for t in &snapshot.tasks {
            validate_subject(&t.subject)?;
            tx.execute(
                "INSERT INTO kaji_tasks (list, id, subject, description, active_form, owner, status, \
                 metadata, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
                &[
                    &self.list_id,
                    &sql_id(t.id)?,
                    &t.subject,
                    &t.description,
                    &t.active_form,
                    &t.owner,
                    &t.status.as_str(),
                    &Value::Object(t.metadata.clone()),
                    &(t.created_at as i64),
                    &(t.updated_at as i64),
                ],
            )
            .await?;
        }
        let mut graph = BlocksGraph::default();
        for t in &snapshot.tasks {
            for &b in &t.blocks {
                if snapshot.get(b).is_none() {
                    continue;
                }
                if let Some(cycle) = graph.cycle_if_added(t.id, b) {
                    return Err(Fail::List(TaskListError::Cycle { cycle }));
                }
                graph.add(t.id, b);
                tx.execute(
                    "INSERT INTO kaji_task_edges (list, blocker, blocked) VALUES ($1, $2, $3) \
                     ON CONFLICT DO NOTHING",
                    &[&self.list_id, &sql_id(t.id)?, &sql_id(b)?],
                )
                .await?;
            }
        }
        tx.execute(
            "UPDATE kaji_task_lists SET highwatermark = $2 WHERE name = $1",
            &[&self.list_id, &sql_id(new_hwm)?],
        )
        .await?;
        self.notify(tx).await?;
        Ok(snapshot.tasks.len())
    }
}

fn refused(id: u64, reason: ClaimRefusal) -> Fail {
    Fail::List(TaskListError::ClaimRefused { id, reason })
}

pub(super) fn require_owner(owner: &str) -> Result<String, TaskListError> {
    normalize_owner(Some(owner))
        .ok_or_else(|| TaskListError::InvalidInput("the owner name must not be empty".to_string()))
}
