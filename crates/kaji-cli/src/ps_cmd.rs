//! `kaji ps` (placeholder until issue 5 lands).

/// Arguments of `kaji ps`.
#[derive(Debug, clap::Args)]
pub struct PsArgs {}

/// Runs `kaji ps`; returns the exit code.
pub fn run(_args: PsArgs) -> i32 {
    eprintln!("kaji ps: not implemented yet");
    2
}
