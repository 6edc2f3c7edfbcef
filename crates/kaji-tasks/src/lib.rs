//! Task management for kaji, seed 002: two mechanisms that share a name.
//!
//! - [`list`]: the durable task list — *what should be done*. One JSON file
//!   per task under `$KAJI_HOME/tasks/<list-id>/`, shared by agents and
//!   processes through OS file locks.
//! - [`runtime`]: the runtime task registry — *who is running now*:
//!   background shells and agents, their output files and how to stop them.
//!
//! The two never change each other: a failed background process does not
//! complete or delete a plan task. This crate knows nothing of models,
//! tools or user interfaces, so scripts and other agents can use it alone.

pub mod git;
pub mod limits;
pub mod list;
pub mod process;
pub mod procfs;
pub mod runtime;
pub mod tls;
pub mod watchdog;

pub use list::TaskListStore;
pub use runtime::RuntimeTaskRegistry;
