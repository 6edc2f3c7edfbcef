//! Claims as single statements: `claim_next` (and its leased form, which
//! also renews the lease) is one `UPDATE … WHERE id = (SELECT … FOR UPDATE
//! SKIP LOCKED LIMIT 1) RETURNING` over the partial index of available tasks,
//! with the dependency check inside the SQL, sent in one round trip and
//! committed on its own. Many claimers never queue behind one row, and no
//! claim holds a row lock across a round trip.
//!
//! The change is announced by a NOTIFY sent in the same round trip, as a
//! statement of its own behind the claim, so claims never wait for a
//! second round trip nor hold a row while NOTIFY's commit-time lock is
//! taken. This module must never claim a task that is not
//! available, or retry a statement whose outcome is unknown.

use tokio_postgres::Row;
use tokio_postgres::types::{ToSql, Type};

use super::ops::{now, require_owner, select_tasks, task_of};
use super::{Fail, Lease, PgTaskList, is_retryable};
use crate::list::{ListTask, TaskListError};

/// The lowest-id available task of list `$1`, locked, skipping rows other
/// claimers hold.
macro_rules! next_available {
    ($extra_from:literal) => {
        concat!(
            "SELECT t.id FROM kaji_tasks t",
            $extra_from,
            " WHERE t.list = $1 AND t.status = 'pending' AND t.owner IS NULL AND NOT EXISTS (",
            "SELECT 1 FROM kaji_task_edges e JOIN kaji_tasks b ON b.list = e.list AND b.id = e.blocker ",
            "WHERE e.list = t.list AND e.blocked = t.id AND b.status <> 'completed') ",
            "ORDER BY t.id LIMIT 1 FOR UPDATE OF t SKIP LOCKED"
        )
    };
}

/// The notice of a change of list `$1`.
const NOTIFY: &str = "SELECT pg_notify('kaji_tasks', $1)";

/// `$1` list, `$2` owner, `$3` now (ms).
/// The candidate is an uncorrelated scalar subquery, run once (an
/// InitPlan): a subquery in `FROM` could be rescanned per row and claim
/// several tasks.
const CLAIM_NEXT: &str = concat!(
    "UPDATE kaji_tasks t SET owner = $2, status = 'in_progress', ",
    "updated_at = GREATEST(t.updated_at, $3) WHERE t.list = $1 AND t.id = (",
    next_available!(""),
    ") RETURNING ",
    select_tasks!()
);

/// `$1` list, `$2` holder, `$3` now (ms), `$4` lease length (ms), `$5`
/// token. `leased` is 0 when the lease had lapsed (then nothing is
/// claimed); the task columns are NULL when nothing was available.
const CLAIM_NEXT_LEASED: &str = concat!(
    "WITH lease AS (UPDATE kaji_leases SET expires_at = clock_timestamp() + $4 * interval '1 millisecond' ",
    "WHERE list = $1 AND holder = $2 AND token = $5 AND expires_at > clock_timestamp() RETURNING token), ",
    "claimed AS (UPDATE kaji_tasks t SET owner = $2, status = 'in_progress', ",
    "updated_at = GREATEST(t.updated_at, $3) WHERE t.list = $1 AND t.id = (",
    next_available!(", lease"),
    ") RETURNING ",
    select_tasks!(),
    ") SELECT (SELECT count(*) FROM lease) AS leased, c.* FROM (SELECT 1) one LEFT JOIN claimed c ON true"
);

impl PgTaskList {
    /// Claims the lowest-id available task for `owner` in one statement;
    /// `None` when nothing is available.
    pub async fn claim_next(&self, owner: &str) -> Result<Option<ListTask>, TaskListError> {
        let owner = require_owner(owner)?;
        let params: [(&(dyn ToSql + Sync), Type); 3] = [
            (&self.list_id, Type::TEXT),
            (&owner, Type::TEXT),
            (&now(), Type::INT8),
        ];
        let row = self.statement(CLAIM_NEXT, &params).await?;
        match row {
            Some(row) => Ok(Some(task_of(&row).map_err(|f| self.fail(f))?)),
            None => {
                self.highwatermark().await?;
                Ok(None)
            }
        }
    }

    /// Claims the next available task for the lease holder and renews its
    /// lease, in one statement; [`TaskListError::LeaseLost`] (and nothing
    /// claimed) when the lease had lapsed.
    pub async fn claim_next_leased(
        &self,
        lease: &Lease,
    ) -> Result<Option<ListTask>, TaskListError> {
        let length = lease.duration.as_millis() as f64;
        let params: [(&(dyn ToSql + Sync), Type); 5] = [
            (&self.list_id, Type::TEXT),
            (&lease.holder, Type::TEXT),
            (&now(), Type::INT8),
            (&length, Type::FLOAT8),
            (&lease.token, Type::INT8),
        ];
        let Some(row) = self.statement(CLAIM_NEXT_LEASED, &params).await? else {
            return Ok(None);
        };
        let leased: i64 = row.try_get("leased").map_err(|e| self.fail(e.into()))?;
        if leased == 0 {
            return Err(self.lapsed(lease, 0));
        }
        let id: Option<i64> = row.try_get("id").map_err(|e| self.fail(e.into()))?;
        if id.is_none() {
            self.highwatermark().await?;
            return Ok(None);
        }
        Ok(Some(task_of(&row).map_err(|f| self.fail(f))?))
    }

    /// Runs one statement on its own (autocommit) in one round trip. A
    /// statement the server refused with a retryable error (it rolled it
    /// back) is tried again; a lost connection is not, since the change
    /// may have been made.
    async fn statement(
        &self,
        sql: &str,
        params: &[(&(dyn ToSql + Sync), Type)],
    ) -> Result<Option<Row>, TaskListError> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let client = self.take().await?;
            // The claim's NOTIFY goes in the same round trip, right behind
            // it on the wire (its own statement, after the claim's commit):
            // a claim never waits for a second round trip, and never holds
            // its row while NOTIFY's commit-time lock is taken. When
            // nothing was claimed the notice is a spurious wake-up, which
            // watchers take as "read again".
            let notify_params: [&(dyn ToSql + Sync); 1] = [&self.list_id];
            let notify = client.execute(NOTIFY, &notify_params);
            let claim = client.query_typed(sql, params);
            let (result, _) = tokio::join!(claim, notify);
            let closed = client.is_closed();
            self.put_back(client);
            match result {
                Ok(rows) if rows.len() > 1 => {
                    return Err(TaskListError::InvalidInput(format!(
                        "a claim statement changed {} tasks of list {:?} on {}; this is a bug",
                        rows.len(),
                        self.list_id,
                        self.server()
                    )));
                }
                Ok(mut rows) => return Ok(rows.pop()),
                Err(e) if e.as_db_error().is_some() => {
                    let retry = is_retryable(&e, false);
                    if retry && attempt < super::ATTEMPTS {
                        continue;
                    }
                    return Err(self.db_error(Some(e), "the change was not made", retry));
                }
                Err(e) => {
                    let what = if closed {
                        "the connection was lost during the claim: it may or may not have \
                         been made; look with `kaji tasks list` before trying again"
                    } else {
                        "the claim failed"
                    };
                    return Err(self.db_error(Some(e), what, false));
                }
            }
        }
    }

    fn fail(&self, f: Fail) -> TaskListError {
        match f {
            Fail::List(e) => e,
            Fail::Pg(e) | Fail::Commit(e) => self.db_error(Some(e), "cannot read the task", false),
        }
    }
}
