//! #32: the model a session chose (`--model`, `/model`) is part of the
//! session. `kaji exec --resume` and `-c` go on with it instead of the
//! settings' model, a new `--model` replaces it, and a session that never
//! chose one (as every session file written before this record existed)
//! keeps using the settings' model. The UI's side is in `resume_views`.

use std::path::Path;

use crate::common::{TEST_KEY, json_lines, kaji};
use kaji_test_support::{Script, ScriptedModelServer, Turn};
use tokio::process::Command;

/// `kaji exec --json` against `server`, the model left to the settings
/// unless `flags` name one.
fn exec(home: &Path, work: &Path, server: &ScriptedModelServer, flags: &[&str]) -> Command {
    let mut cmd = kaji(home);
    cmd.env("ANTHROPIC_API_KEY", TEST_KEY)
        .args(["exec", "--json", "--no-checkpoints", "-C"])
        .arg(work)
        .args(["--provider", "anthropic", "--base-url"])
        .arg(server.anthropic_base_url())
        .args(flags);
    cmd
}

/// Runs `cmd`; its session id.
async fn session_of(mut cmd: Command) -> String {
    let out = cmd.output().await.unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    json_lines(&out.stdout)[0]["session_id"]
        .as_str()
        .unwrap()
        .to_string()
}

/// The model of every request the server got, in order.
fn models(server: &ScriptedModelServer) -> Vec<String> {
    server
        .requests()
        .iter()
        .map(|r| r.body["model"].as_str().unwrap_or("").to_string())
        .collect()
}

#[tokio::test]
async fn a_resumed_session_goes_on_with_the_model_it_chose() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let kaji_home = home.path().join("kaji-home");
    std::fs::create_dir_all(&kaji_home).unwrap();
    std::fs::write(
        kaji_home.join("config.toml"),
        "model = \"settings-model\"\n",
    )
    .unwrap();
    // A turn per answer the history holds: a resume asks for the next.
    let server = ScriptedModelServer::start(Script::new((0..4).map(|_| Turn::text("ok")))).await;

    // Chosen with --model: the resume keeps it, without naming it again.
    let id = session_of(exec(
        home.path(),
        work.path(),
        &server,
        &["--model", "chosen-model", "first"],
    ))
    .await;
    session_of(exec(
        home.path(),
        work.path(),
        &server,
        &["--resume", &id, "second"],
    ))
    .await;
    // A new --model replaces it, and `-c` keeps the new one.
    session_of(exec(
        home.path(),
        work.path(),
        &server,
        &["--resume", &id, "--model", "other-model", "third"],
    ))
    .await;
    session_of(exec(home.path(), work.path(), &server, &["-c", "fourth"])).await;
    // Never chosen (also every older session file): the settings' model.
    let plain = session_of(exec(home.path(), work.path(), &server, &["fifth"])).await;
    session_of(exec(
        home.path(),
        work.path(),
        &server,
        &["--resume", &plain, "sixth"],
    ))
    .await;

    assert_eq!(
        models(&server),
        [
            "chosen-model",
            "chosen-model",
            "other-model",
            "other-model",
            "settings-model",
            "settings-model"
        ]
    );
}
