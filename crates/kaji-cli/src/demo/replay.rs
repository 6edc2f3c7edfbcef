//! The demo itself: a scratch repository with a bug, the scripted model
//! server replaying a fix, and the real loop and tools running it. Only
//! built with the `demo` feature; nothing else in the binary uses it.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use kaji_core::{PermissionMode, SessionBuilder, SessionOptions};
use kaji_llm::{ProviderConfig, ProviderKind};
use kaji_test_support::{Script, ScriptedModelServer, Turn};
use serde_json::json;

use crate::exec::ExecFrontend;

use super::DemoArgs;

const SLUGIFY: &str = r#"#!/bin/sh
# Turns a title into a URL slug: "Hello World" -> "hello-world".
slugify() {
  printf '%s\n' "$1" | tr ' ' '-'
}
slugify "$1"
"#;

const TEST: &str = r#"#!/bin/sh
# Runs the slug checks; exits 1 when one fails.
fail=0
check() {
  got=$(sh slugify.sh "$1")
  if [ "$got" = "$2" ]; then echo "ok: '$1' -> '$got'"; else echo "FAIL: '$1' -> '$got' (want '$2')"; fail=1; fi
}
check "Hello World" "hello-world"
check "kaji" "kaji"
exit $fail
"#;

fn script() -> Script {
    Script::new([
        Turn::reasoning("The user wants the failing test fixed. Run the tests first.")
            .and_text("I'll run the tests first to see what fails.")
            .and_tool_call(
                "Bash",
                json!({"command": "sh test.sh", "description": "Run the slug tests"}),
            ),
        Turn::text("'Hello World' keeps its capitals. Let me look at slugify.sh.")
            .and_tool_call("Read", json!({"file_path": "slugify.sh"})),
        Turn::text("It only replaces spaces; it must lowercase the title too.").and_tool_call(
            "Edit",
            json!({
                "file_path": "slugify.sh",
                "old_string": "tr ' ' '-'",
                "new_string": "tr ' ' '-' | tr '[:upper:]' '[:lower:]'"
            }),
        ),
        Turn::text("Running the tests again.").and_tool_call(
            "Bash",
            json!({"command": "sh test.sh", "description": "Run the slug tests"}),
        ),
        Turn::tool_call(
            "AttemptCompletion",
            json!({"result": "Fixed slugify.sh: it now lowercases the title after joining words with dashes. Both checks in test.sh pass."}),
        ),
    ])
}

pub(super) async fn run_inner(args: DemoArgs) -> Result<i32> {
    let dir = tempfile::Builder::new()
        .prefix("kaji-demo-")
        .tempdir()
        .context("cannot create a scratch directory")?;
    let root = dir.path().canonicalize().context("scratch directory")?;
    write(&root.join("slugify.sh"), SLUGIFY)?;
    write(&root.join("test.sh"), TEST)?;

    let server = ScriptedModelServer::bind(script(), 0)
        .await
        .context("cannot start the scripted model server on 127.0.0.1")?;
    let mut provider_config = ProviderConfig::new(
        ProviderKind::Anthropic,
        "kaji-demo-scripted",
        server.anthropic_base_url(),
    );
    provider_config.api_key = Some("demo".into());
    provider_config.idle_timeout = Duration::from_secs(30);

    println!("kaji demo — a scripted replay: no model is called and no key is needed.");
    println!(
        "The replies come from kaji's scripted model server on {}, streamed over the real",
        server.base_url()
    );
    println!("Anthropic wire format; the tools, permissions and loop are the real ones.");
    println!("Scratch repository: {}\n", root.display());

    // A session like any other, only over the scratch directory, its own
    // $KAJI_HOME and the scripted provider; nothing of it is saved.
    let options = SessionOptions {
        cwd: Some(root.clone()),
        permission_mode: Some(PermissionMode::AcceptEdits),
        no_checkpoints: true,
        persist: false,
        ..SessionOptions::default()
    };
    let frontend = Arc::new(DemoFrontend(ExecFrontend::new(false, "accept-edits")));
    let (session, _warnings) = SessionBuilder::new(root.join(".kaji-demo-home"), options)
        .provider(provider_config)
        .build(frontend)
        .await
        .map_err(anyhow::Error::new)?;
    let outcome = session
        .submit("The slug test fails. Find out why and fix it.".into())
        .await
        .map_err(anyhow::Error::new)?;
    session.shutdown().await;

    let after = std::fs::read_to_string(root.join("slugify.sh")).unwrap_or_default();
    println!("\nThe change kaji made:\n");
    let diff = similar::TextDiff::from_lines(SLUGIFY, &after);
    print!(
        "{}",
        diff.unified_diff()
            .context_radius(3)
            .header("a/slugify.sh", "b/slugify.sh")
    );
    println!(
        "\nStatus: {} after {} turns.",
        outcome.status.as_str(),
        outcome.turns
    );
    if args.keep {
        let kept = dir.keep();
        println!("Kept the scratch repository at {}.", kept.display());
    }
    println!(
        "Next: point kaji at a real model (see README.md) and run `kaji exec \"…\"` in your project."
    );
    Ok(outcome.status.exit_code())
}

fn write(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}

/// The demo's front end: prints like `kaji exec` and approves commands,
/// since they run in the scratch repository and are part of the replay.
struct DemoFrontend(ExecFrontend);

#[async_trait::async_trait]
impl kaji_core::TaskFrontend for DemoFrontend {
    fn emit(&self, event: kaji_protocol::SessionEvent) {
        self.0.emit(event);
    }

    async fn answer(&self, ask: &kaji_core::AskRequest) -> kaji_protocol::AskResponse {
        match ask.kind {
            kaji_protocol::AskKind::Command => {
                println!("  (demo: approving the command on your behalf)");
                kaji_protocol::AskResponse::Approve
            }
            _ => self.0.answer(ask).await,
        }
    }
}
