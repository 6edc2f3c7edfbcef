//! A project's own `.claude/commands/review.md` (common in Claude Code
//! setups; here a real one from the corpus) runs for `/review`, through
//! the binary: `kaji exec "/review …"` sends its expansion, while
//! `kaji review` stays kaji's built-in review.

use std::path::{Path, PathBuf};

use kaji_test_support::{Script, ScriptedModelServer, Turn};
use serde_json::json;

use crate::common::{Wire, exec_json, kaji, run};

/// A real Claude Code review command (model, `$ARGUMENTS`).
fn corpus_review_md() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/corpus/claude-code/wshobson+commands/tools/ai-review.md")
}

fn git(dir: &Path, args: &[&str]) {
    let out = std::process::Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

/// A repository with a change to review and the corpus file as its
/// `.claude/commands/review.md`.
fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("model.py"), "seed = 1\n").unwrap();
    git(dir.path(), &["init", "-q", "-b", "main"]);
    git(dir.path(), &["add", "."]);
    git(dir.path(), &["commit", "-q", "-m", "init"]);
    std::fs::write(dir.path().join("model.py"), "seed = None\n").unwrap();
    let commands = dir.path().join(".claude/commands");
    std::fs::create_dir_all(&commands).unwrap();
    let text = std::fs::read_to_string(corpus_review_md()).unwrap();
    std::fs::write(commands.join("review.md"), text).unwrap();
    dir
}

fn done() -> Script {
    Script::new([Turn::tool_call(
        "AttemptCompletion",
        json!({"result": "```json\n{\"findings\": []}\n```"}),
    )])
}

#[tokio::test]
async fn the_projects_review_md_runs_for_slash_review() {
    let home = tempfile::tempdir().unwrap();
    let work = project();
    let server = ScriptedModelServer::start(done()).await;
    let mut cmd = exec_json(home.path(), work.path(), &server, Wire::Anthropic);
    cmd.args(["--no-checkpoints", "/review model.py"]);
    let (code, _lines, stderr) = run(cmd).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(!stderr.contains("no custom command"), "{stderr}");
    let requests = server.requests();
    let prompt = requests[0].messages().last().unwrap().to_string();
    assert!(
        prompt.contains("Perform a specialized AI/ML code review for: model.py"),
        "{prompt}"
    );
    // Its front matter's model applies.
    assert_eq!(requests[0].body["model"], "claude-sonnet-4-0");
}

#[tokio::test]
async fn kaji_review_stays_the_builtin_review() {
    let home = tempfile::tempdir().unwrap();
    let work = project();
    let server = ScriptedModelServer::start(done()).await;
    let mut cmd = kaji(home.path());
    cmd.env("ANTHROPIC_API_KEY", "test-key")
        .args(["review", "--json", "-C"])
        .arg(work.path())
        .args(["--provider", "anthropic", "--base-url"])
        .arg(server.anthropic_base_url())
        .args(["--model", "scripted", "--no-checkpoints"]);
    let out = cmd.output().await.unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let prompt = server.requests()[0].messages().last().unwrap().to_string();
    assert!(!prompt.contains("AI/ML Code Review"), "{prompt}");
    assert!(prompt.contains("seed = None"), "{prompt}");
}
