//! The durable task list (placeholder until issue 4 lands).

/// Store of one task list on the file system.
#[derive(Debug, Clone)]
pub struct TaskListStore {}
