//! `kaji-scripted-model --script FILE.json [--port N]`: the scripted model
//! server as a stand-alone process. Prints its base URL on the first line of
//! standard output, then serves until interrupted.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;
use kaji_test_support::{Script, ScriptedModelServer};

/// Serve a scripted model over the Anthropic and OpenAI streaming APIs on 127.0.0.1.
#[derive(Parser)]
#[command(version)]
struct Args {
    /// The script: JSON `{"turns": [...]}` (see docs/scripted-model-server.md).
    #[arg(long, value_name = "FILE.json")]
    script: PathBuf,
    /// Port on 127.0.0.1 (default: any free port).
    #[arg(long, default_value_t = 0)]
    port: u16,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let script = Script::load(&args.script)?;
    let server = ScriptedModelServer::bind(script, args.port)
        .await
        .with_context(|| format!("cannot listen on 127.0.0.1:{}", args.port))?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}", server.base_url())?;
    writeln!(
        out,
        "anthropic base URL: {}  (POST /v1/messages)",
        server.anthropic_base_url()
    )?;
    writeln!(
        out,
        "openai base URL:    {}  (POST /v1/chat/completions)",
        server.openai_base_url()
    )?;
    out.flush()?;
    drop(out);
    tokio::signal::ctrl_c()
        .await
        .context("waiting for Ctrl-C")?;
    Ok(())
}
