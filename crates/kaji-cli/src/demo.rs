//! `kaji demo`: the real loop, tools and permissions, offline.
//!
//! It copies a small scratch repository with a bug into a temporary
//! directory, starts the scripted model server on 127.0.0.1 and runs a
//! task against it through the real Anthropic provider over HTTP/SSE. The
//! model is a scripted replay — the demo says so — but every tool call is
//! real: the test really fails, the file really changes, the test really
//! passes. At the end it shows the diff.
//!
//! The scripted model server is test code: it is linked only with the
//! `demo` feature (on by default, so that `cargo install` gives a working
//! `kaji demo`); without it the command says how to get it.

/// Arguments of `kaji demo`.
#[derive(Debug, clap::Args)]
pub struct DemoArgs {
    /// Keep the scratch repository instead of deleting it at the end.
    #[arg(long)]
    pub keep: bool,
}

#[cfg(feature = "demo")]
mod replay;
#[cfg(feature = "demo")]
use replay::run_inner;

/// Runs `kaji demo`; returns the exit code.
pub async fn run(args: DemoArgs) -> i32 {
    match run_inner(args).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("kaji demo: {e:#}");
            1
        }
    }
}

/// Without the `demo` feature there is no scripted model server to run.
#[cfg(not(feature = "demo"))]
async fn run_inner(_args: DemoArgs) -> anyhow::Result<i32> {
    anyhow::bail!(
        "this kaji was built without the `demo` feature (the scripted model server); build it with default features to have the demo"
    )
}
