//! `kaji tasks` (placeholder until issue 4 lands).

/// Arguments of `kaji tasks`.
#[derive(Debug, clap::Args)]
pub struct TasksArgs {}

/// Runs `kaji tasks`; returns the exit code.
pub fn run(_args: TasksArgs) -> i32 {
    eprintln!("kaji tasks: not implemented yet");
    2
}
