//! The durable task list: *what should be done*, shared by every agent and
//! process that opens the same list.
//!
//! One JSON file per task under `$KAJI_HOME/tasks/<list-id>/`, so that
//! concurrent writers collide only on a single task. Every write is atomic
//! and durable (temp file, fsync, rename, fsync of the directory), and
//! locks are OS file locks that die with their holder. The format and the
//! locking protocol are documented in `docs/task-list.md`.
//!
//! This module must never write a task file in place, hold a lock across
//! anything but file I/O, or lose a readable task because another file is
//! corrupt. It knows nothing of models, tools or terminals.

mod backend;
mod error;
mod fsio;
mod graph;
mod liveness;
mod lock;
mod mailbox;
mod member;
mod model;
pub mod pg;
mod repair;
mod store;

pub use backend::{ListTarget, TASK_LIST_ID_ENV, TaskList, normalize_import, resolve_target};
pub use error::{ClaimRefusal, TaskListError, TaskListErrorKind};
pub use fsio::{DEFAULT_MAX_FILE_BYTES, MAX_FILE_BYTES_ENV, max_file_bytes_from_env};
pub use liveness::LivenessLock;
pub use lock::{
    DEFAULT_LOCK_TIMEOUT, LOCK_NOTICE_AFTER, LOCK_TIMEOUT_ENV, LockHolder, LockObserver, LockWait,
    lock_timeout_from_env,
};
pub use mailbox::MailMessage;
pub use member::{Member, TaskListWatcher};
pub use model::{
    CorruptFile, ListSnapshot, ListTask, ListTaskFilter, ListTaskPatch, ListTaskStatus,
    NewListTask, UpdateOutcome,
};
pub use repair::{LockNote, RepairReport};
pub use store::{DEFAULT_LIST_ID, ListLock, TaskListStore, lists_root, sanitize_list_id};
