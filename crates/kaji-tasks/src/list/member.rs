//! What a teammate process (`kaji worker`) and a watcher need of a list on
//! either backend: membership while it lives (the file store's liveness
//! lock, or a database lease kept alive by a heartbeat), releasing the
//! claims of members that are gone, fenced claims and changes, the
//! mailbox, and a watcher that wakes when the list changes.
//!
//! Must never let a member whose lease lapsed change a task it lost, and
//! never hold a lock across an await.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::pg::{Lease, ListWatcher, PgTaskList, WatchMode};
use super::{
    ListSnapshot, ListTask, ListTaskPatch, LivenessLock, MailMessage, TaskList, TaskListError,
    UpdateOutcome,
};

/// A member's hold on a list; dropping it ends the hold (and stops the
/// heartbeat of a lease, which then lapses).
#[derive(Debug)]
pub struct Member {
    name: String,
    hold: Hold,
}

#[derive(Debug)]
enum Hold {
    Files(#[allow(dead_code)] LivenessLock),
    Pg {
        lease: Lease,
        lost: Arc<Mutex<Option<TaskListError>>>,
        _stop: tokio_util::sync::DropGuard,
    },
}

impl Member {
    /// The member's name (the owner of the tasks it claims).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The lease, on a database list.
    pub fn lease(&self) -> Option<&Lease> {
        match &self.hold {
            Hold::Pg { lease, .. } => Some(lease),
            Hold::Files(_) => None,
        }
    }

    /// Why the hold was lost (the heartbeat found the lease lapsed), if it
    /// was.
    pub fn lost(&self) -> Option<String> {
        match &self.hold {
            Hold::Pg { lost, .. } => lost.lock().ok()?.as_ref().map(|e| e.to_string()),
            Hold::Files(_) => None,
        }
    }
}

/// Renews `lease` every third of its length until stopped or lost.
fn heartbeat(
    list: PgTaskList,
    lease: Lease,
    lost: Arc<Mutex<Option<TaskListError>>>,
    stop: CancellationToken,
) {
    let every = (lease.duration / 3).max(Duration::from_millis(10));
    tokio::spawn(async move {
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(every) => {}
            }
            match list.renew_lease(&lease).await {
                Ok(()) => {}
                Err(e @ TaskListError::LeaseLost { .. }) => {
                    if let Ok(mut slot) = lost.lock() {
                        *slot = Some(e);
                    }
                    return;
                }
                // The database is away for now: try again next beat.
                Err(_) => {}
            }
        }
    });
}

impl TaskList {
    /// Joins the list as `name` for as long as the returned [`Member`]
    /// lives: the liveness lock on files, a lease of `lease` (renewed by a
    /// heartbeat) on a database. `Ok(None)` when a live member of that name
    /// exists.
    pub async fn join(&self, name: &str, lease: Duration) -> Result<Option<Member>, TaskListError> {
        let name = name.trim().to_string();
        match self {
            Self::Files(store) => {
                let store = store.clone();
                let who = name.clone();
                let lock = tokio::task::spawn_blocking(move || store.hold_liveness(&who))
                    .await
                    .map_err(|e| {
                        TaskListError::InvalidInput(format!("task-list worker failed: {e}"))
                    })??;
                Ok(lock.map(|lock| Member {
                    name,
                    hold: Hold::Files(lock),
                }))
            }
            Self::Pg(list) => {
                let lease = match list.acquire_lease(&name, lease).await {
                    Ok(lease) => lease,
                    Err(TaskListError::LeaseLost { id: 0, .. }) => return Ok(None),
                    Err(e) => return Err(e),
                };
                let lost = Arc::new(Mutex::new(None));
                let stop = CancellationToken::new();
                heartbeat(list.clone(), lease.clone(), Arc::clone(&lost), stop.clone());
                Ok(Some(Member {
                    name,
                    hold: Hold::Pg {
                        lease,
                        lost,
                        _stop: stop.drop_guard(),
                    },
                }))
            }
        }
    }

    /// Releases the unfinished tasks of members that are gone: owners
    /// whose liveness lock is free (files), holders whose lease lapsed
    /// (database). Returns each owner with the ids released.
    pub async fn release_departed(&self) -> Result<Vec<(String, Vec<u64>)>, TaskListError> {
        match self {
            Self::Files(store) => {
                let store = store.clone();
                tokio::task::spawn_blocking(move || store.release_departed())
                    .await
                    .map_err(|e| {
                        TaskListError::InvalidInput(format!("task-list worker failed: {e}"))
                    })?
            }
            Self::Pg(list) => list.release_lapsed().await,
        }
    }

    /// Claims the next available task for `member` (on a database, also
    /// renewing its lease; refused once the lease lapsed).
    pub async fn claim_next_as(&self, member: &Member) -> Result<Option<ListTask>, TaskListError> {
        match (self, member.lease()) {
            (Self::Pg(list), Some(lease)) => list.claim_next_leased(lease).await,
            _ => self.claim_next(member.name()).await,
        }
    }

    /// Changes task `id` on behalf of `member`. On a database this is
    /// fenced: refused with [`TaskListError::LeaseLost`] (and nothing
    /// changed) when the lease lapsed or the task is no longer the
    /// member's.
    pub async fn update_as(
        &self,
        member: &Member,
        id: u64,
        patch: ListTaskPatch,
    ) -> Result<UpdateOutcome, TaskListError> {
        match (self, member.lease()) {
            (Self::Pg(list), Some(lease)) => list.update_leased(lease, id, patch).await,
            _ => self.update(id, patch).await,
        }
    }

    /// Ends `member`'s hold and releases its unfinished tasks.
    pub async fn leave(&self, member: Member) -> Result<Vec<u64>, TaskListError> {
        match (self, member.lease()) {
            (Self::Pg(list), Some(lease)) => list.end_lease(lease).await,
            _ => self.release(member.name()).await,
        }
    }

    /// Gives back every unfinished task `owner` holds, noting why.
    pub async fn release_with_note(
        &self,
        owner: &str,
        why: &str,
    ) -> Result<Vec<u64>, TaskListError> {
        match self {
            Self::Files(store) => {
                let (store, owner, why) = (store.clone(), owner.to_string(), why.to_string());
                tokio::task::spawn_blocking(move || store.release_with_note(&owner, &why))
                    .await
                    .map_err(|e| {
                        TaskListError::InvalidInput(format!("task-list worker failed: {e}"))
                    })?
            }
            Self::Pg(list) => list.release_with_note(owner, why).await,
        }
    }

    /// Appends a message to `to`'s mailbox (files beside the list, or the
    /// database's `kaji_mail`).
    pub async fn post_message(
        &self,
        from: &str,
        to: &str,
        text: &str,
    ) -> Result<(), TaskListError> {
        match self {
            Self::Files(store) => {
                let store = store.clone();
                let (from, to, text) = (from.to_string(), to.to_string(), text.to_string());
                tokio::task::spawn_blocking(move || store.post_message(&from, &to, &text))
                    .await
                    .map_err(|e| {
                        TaskListError::InvalidInput(format!("task-list worker failed: {e}"))
                    })?
            }
            Self::Pg(list) => list.post_message(from, to, text).await,
        }
    }

    /// Takes every message waiting for `name`, oldest first.
    pub async fn take_messages(&self, name: &str) -> Result<Vec<MailMessage>, TaskListError> {
        match self {
            Self::Files(store) => {
                let (store, name) = (store.clone(), name.to_string());
                tokio::task::spawn_blocking(move || store.take_messages(&name))
                    .await
                    .map_err(|e| {
                        TaskListError::InvalidInput(format!("task-list worker failed: {e}"))
                    })?
            }
            Self::Pg(list) => list.take_messages(name).await,
        }
    }

    /// A watcher that wakes when the list may have changed: NOTIFY on a
    /// database (polling every `poll` where LISTEN fails), polling the
    /// files every `poll` otherwise.
    pub async fn watch(&self, poll: Duration) -> TaskListWatcher {
        let inner = match self {
            Self::Files(_) => Watch::Files {
                list: self.clone(),
                last: None,
            },
            Self::Pg(list) => Watch::Pg(list.watch(poll).await),
        };
        TaskListWatcher { inner, poll }
    }
}

/// Wakes when a task list may have changed (see [`TaskList::watch`]).
#[derive(Debug)]
pub struct TaskListWatcher {
    inner: Watch,
    poll: Duration,
}

#[derive(Debug)]
enum Watch {
    Files {
        list: TaskList,
        last: Option<ListSnapshot>,
    },
    Pg(ListWatcher),
}

impl TaskListWatcher {
    /// How changes are learnt: [`WatchMode::Notify`] on a database that
    /// LISTENs, else polling with the reason.
    pub fn mode(&self) -> WatchMode {
        match &self.inner {
            Watch::Files { .. } => WatchMode::Poll {
                reason: "a file list is polled".to_string(),
            },
            Watch::Pg(w) => w.mode().clone(),
        }
    }

    /// Waits until the list may have changed. On files, the first call
    /// returns at once (with nothing seen before, everything is new).
    pub async fn changed(&mut self) {
        match &mut self.inner {
            Watch::Pg(w) => w.changed().await,
            Watch::Files { list, last } => loop {
                if let Ok(now) = list.list().await
                    && last.as_ref() != Some(&now)
                {
                    *last = Some(now);
                    return;
                }
                tokio::time::sleep(self.poll).await;
            },
        }
    }
}
