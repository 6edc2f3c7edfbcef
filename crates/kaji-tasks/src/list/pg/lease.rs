//! Leases: a worker on any machine holds a lease (a heartbeat with an
//! expiry, on the database's clock); when it lapses its claims are
//! released, and a fenced change by a holder that lost its lease is
//! refused in the same transaction as the change.
//!
//! Must never let a holder whose lease lapsed change a task it no longer
//! holds.

use std::time::Duration;

use tokio_postgres::Transaction;

use super::{Fail, PgTaskList, in_tx};
use crate::list::{ListTask, ListTaskPatch, TaskListError, UpdateOutcome};

/// The lease duration in milliseconds (setting `lease_ms`); read once
/// at start-up by kaji-core's `StartupEnv`.
pub const LEASE_MS_ENV: &str = "KAJI_LEASE_MS";
/// The default lease: 30 s.
pub const DEFAULT_LEASE_MS: u64 = 30_000;

/// A live lease: renew it well within `duration` (a third is a good
/// heartbeat).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// The holder's name (the owner of the tasks it claims).
    pub holder: String,
    /// The fencing token: grows with every acquisition under this name.
    pub token: i64,
    /// How long the lease lasts after each renewal.
    pub duration: Duration,
}

fn ms(d: Duration) -> f64 {
    d.as_millis() as f64
}

impl PgTaskList {
    /// Takes a lease for `holder`; refused while another live lease of that
    /// name exists.
    pub async fn acquire_lease(
        &self,
        holder: &str,
        duration: Duration,
    ) -> Result<Lease, TaskListError> {
        let holder = holder.trim().to_string();
        if holder.is_empty() {
            return Err(TaskListError::InvalidInput(
                "the holder name must not be empty".into(),
            ));
        }
        let token = in_tx!(self, |tx| {
            async {
                self.require_list(&tx).await?;
                let row = tx
                    .query_opt(
                        "INSERT INTO kaji_leases (list, holder, token, expires_at) \
                         VALUES ($1, $2, 1, clock_timestamp() + $3 * interval '1 millisecond') \
                         ON CONFLICT (list, holder) DO UPDATE SET token = kaji_leases.token + 1, \
                         expires_at = EXCLUDED.expires_at \
                         WHERE kaji_leases.expires_at <= clock_timestamp() RETURNING token",
                        &[&self.list_id, &holder, &ms(duration)],
                    )
                    .await?;
                match row {
                    Some(row) => Ok::<_, Fail>(row.try_get::<_, i64>(0)?),
                    None => Err(Fail::List(TaskListError::LeaseLost {
                        server: self.server().to_string(),
                        list_id: self.list_id.clone(),
                        holder: holder.clone(),
                        id: 0,
                        problem: "another worker holds a live lease under this name".into(),
                    })),
                }
            }
            .await
        })?;
        Ok(Lease {
            holder,
            token,
            duration,
        })
    }

    /// Extends the lease; [`TaskListError::LeaseLost`] when it already
    /// lapsed (its claims are then released or about to be).
    pub async fn renew_lease(&self, lease: &Lease) -> Result<(), TaskListError> {
        in_tx!(self, |tx| { self.renew_in(&tx, lease).await })
    }

    async fn renew_in(&self, tx: &Transaction<'_>, lease: &Lease) -> Result<(), Fail> {
        let n = tx
            .execute(
                "UPDATE kaji_leases SET expires_at = clock_timestamp() + $4 * interval '1 millisecond' \
                 WHERE list = $1 AND holder = $2 AND token = $3 AND expires_at > clock_timestamp()",
                &[&self.list_id, &lease.holder, &lease.token, &ms(lease.duration)],
            )
            .await?;
        if n == 0 {
            return Err(Fail::List(self.lapsed(lease, 0)));
        }
        Ok(())
    }

    pub(super) fn lapsed(&self, lease: &Lease, id: u64) -> TaskListError {
        TaskListError::LeaseLost {
            server: self.server().to_string(),
            list_id: self.list_id.clone(),
            holder: lease.holder.clone(),
            id,
            problem: "its lease lapsed (no heartbeat within the lease time, KAJI_LEASE_MS), so \
                      its claims are released"
                .into(),
        }
    }

    pub(super) fn lease_lost(&self, holder: &str, id: u64, task: &ListTask) -> TaskListError {
        let problem = match &task.owner {
            Some(other) => format!("the task is now held by {other:?}"),
            None => "the task is no longer held by anyone (it was released)".to_string(),
        };
        TaskListError::LeaseLost {
            server: self.server().to_string(),
            list_id: self.list_id.clone(),
            holder: holder.to_string(),
            id,
            problem,
        }
    }

    /// Releases the tasks of every holder whose lease lapsed, and forgets
    /// those leases; returns each holder with the ids released.
    pub async fn release_lapsed(&self) -> Result<Vec<(String, Vec<u64>)>, TaskListError> {
        in_tx!(self, |tx| {
            async {
                let rows = tx
                    .query(
                        "DELETE FROM kaji_leases WHERE list = $1 AND expires_at <= clock_timestamp() \
                         RETURNING holder",
                        &[&self.list_id],
                    )
                    .await?;
                let mut out = Vec::new();
                for row in rows {
                    let holder: String = row.try_get(0)?;
                    let ids = self
                        .release_in(&tx, &holder, Some("its lease lapsed"))
                        .await?;
                    out.push((holder, ids));
                }
                out.sort();
                Ok::<_, Fail>(out)
            }
            .await
        })
    }

    /// Ends the lease and releases the holder's unfinished tasks.
    pub async fn end_lease(&self, lease: &Lease) -> Result<Vec<u64>, TaskListError> {
        in_tx!(self, |tx| {
            async {
                tx.execute(
                    "DELETE FROM kaji_leases WHERE list = $1 AND holder = $2 AND token = $3",
                    &[&self.list_id, &lease.holder, &lease.token],
                )
                .await?;
                self.release_in(&tx, &lease.holder, None).await
            }
            .await
        })
    }

    /// Checks (and renews) the lease inside `tx`, or refuses.
    async fn fence(&self, tx: &Transaction<'_>, lease: &Lease, id: u64) -> Result<(), Fail> {
        match self.renew_in(tx, lease).await {
            Err(Fail::List(_)) => {
                let mut err = self.lapsed(lease, id);
                if id != 0
                    && let Ok(task) = self.fetch(tx, id, false).await
                    && let (TaskListError::LeaseLost { problem, .. }, Some(other)) =
                        (&mut err, &task.owner)
                    && other != &lease.holder
                {
                    problem.push_str(&format!("; the task is now held by {other:?}"));
                }
                Err(Fail::List(err))
            }
            other => other,
        }
    }

    /// Changes task `id` only while the lease is live and the task is the
    /// holder's (the fencing check, in the same transaction).
    pub async fn update_leased(
        &self,
        lease: &Lease,
        id: u64,
        patch: ListTaskPatch,
    ) -> Result<UpdateOutcome, TaskListError> {
        patch.validate()?;
        in_tx!(self, |tx| {
            async {
                self.fence(&tx, lease, id).await?;
                self.update_in(&tx, id, &patch, Some(&lease.holder)).await
            }
            .await
        })
    }
}
