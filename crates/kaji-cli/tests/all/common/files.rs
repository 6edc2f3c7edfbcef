//! Workspaces of a test: a home (with its `kaji-home`) and a working
//! directory in temporary directories, files written below a root, and
//! the scripted turn that ends a task. Never outside a temporary directory.

use std::path::Path;

use kaji_test_support::{Script, ScriptedModelServer, Turn};
use serde_json::json;

/// A temporary home with its `kaji-home` made, and a working directory
/// holding `a.txt` ("alpha").
pub fn home_and_work() -> (tempfile::TempDir, tempfile::TempDir) {
    let home = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(home.path().join("kaji-home")).expect("mkdir");
    let work = tempfile::tempdir().expect("tempdir");
    std::fs::write(work.path().join("a.txt"), "alpha\n").expect("write");
    (home, work)
}

/// Settings that price the scripted model at $1 per million tokens, in
/// and out (a run's cost is then its tokens over a million).
pub const PRICED_MODEL: &str = "[models.\"scripted\"]\ninput_price = 1.0\noutput_price = 1.0\n";

/// A temporary home whose `kaji-home/config.toml` holds `settings` (no
/// file when they are empty), and an empty working directory.
pub fn home_with_settings(settings: &str) -> (tempfile::TempDir, tempfile::TempDir) {
    let home = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(home.path().join("kaji-home")).expect("mkdir");
    if !settings.is_empty() {
        std::fs::write(home.path().join("kaji-home/config.toml"), settings).expect("write");
    }
    let work = tempfile::tempdir().expect("tempdir");
    (home, work)
}

/// What a model request reports using: `tokens` input tokens.
pub fn input_tokens(tokens: u64) -> kaji_protocol::Usage {
    kaji_protocol::Usage {
        input_tokens: tokens,
        ..kaji_protocol::Usage::default()
    }
}

/// Writes `text` to `root/rel`, making its directories.
pub fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, text).expect("write");
}

/// The model's `AttemptCompletion` with `result`.
pub fn done(result: &str) -> Turn {
    Turn::tool_call("AttemptCompletion", json!({"result": result}))
}

/// The scripted model server playing `turns`.
pub async fn serve(turns: impl IntoIterator<Item = Turn>) -> ScriptedModelServer {
    ScriptedModelServer::start(Script::new(turns)).await
}

/// The model of worker tests: every task's one request holds until the
/// test releases it (`release`), then completes the task.
pub async fn serve_held_tasks() -> ScriptedModelServer {
    serve([Turn::text("working on it")
        .and_hold()
        .and_tool_call("AttemptCompletion", json!({"result": "done"}))])
    .await
}

/// The sub-agent `helper` and a main agent that calls it once.
pub struct Helper<'a> {
    /// A marker in the helper's prompt: the scripted server routes on it.
    pub marker: &'a str,
    /// The `description` of the `Agent` call.
    pub description: &'a str,
    /// The `prompt` of the `Agent` call.
    pub prompt: &'a str,
    /// What the helper says after running `echo from-the-helper`.
    pub says: &'a str,
    /// What the main agent says once the helper is done.
    pub then: &'a str,
}

impl Helper<'_> {
    /// Writes `work/.kaji/agents/helper.md` (tools Read and Bash) and
    /// returns the main agent's script, the helper's own routed to it.
    pub fn install(&self, work: &Path) -> Script {
        write(
            work,
            ".kaji/agents/helper.md",
            &format!(
                "---\nname: helper\ndescription: Helps\ntools: Read, Bash\n---\n{}\n",
                self.marker
            ),
        );
        let helper = Script::new([
            Turn::tool_call("Bash", json!({"command": "echo from-the-helper"})),
            Turn::text(self.says),
        ]);
        Script::new([
            Turn::tool_call(
                "Agent",
                json!({"description": self.description, "prompt": self.prompt, "subagent_type": "helper"}),
            ),
            Turn::text(self.then),
        ])
        .with_agent(self.marker, helper)
    }
}
