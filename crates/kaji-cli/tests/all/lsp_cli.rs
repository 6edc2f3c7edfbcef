//! Issue 35 through the real binary and the scripted model server:
//! diagnostics after Edit and Write from a real pyright (installed by
//! `.ci/run` into `tests/lsp-servers`), the `LSP` tool across files, and
//! servers that are missing, hang, exit mid-request, write garbage or
//! flood, none of which may cost the edit.

use std::path::{Path, PathBuf};

use kaji_test_support::Turn;
use serde_json::{Value, json};

use crate::common::{Wire, done, json_lines, kaji, scripted, serve, tool_results};

/// `tests/lsp-servers/node_modules/.bin` of the repository.
fn servers_bin() -> PathBuf {
    let dir =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/lsp-servers/node_modules/.bin");
    assert!(
        dir.join("pyright-langserver").exists(),
        "the test language servers are missing: run `npm ci --prefix tests/lsp-servers` in the repository root"
    );
    dir
}

fn fake_server() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/all/lsp/fake_server.py")
}

/// Runs `kaji exec` in `work` with `config` as the user's settings, the
/// test servers first on PATH, answering with `turns`; the tool results.
async fn run(work: &Path, config: &str, turns: Vec<Turn>) -> Vec<Value> {
    let home = tempfile::tempdir().unwrap();
    let kaji_home = home.path().join("kaji-home");
    std::fs::create_dir_all(&kaji_home).unwrap();
    std::fs::write(kaji_home.join("config.toml"), config).unwrap();
    let mut turns = turns;
    turns.push(done("done"));
    let server = serve(turns).await;
    let path = std::env::join_paths(std::iter::once(servers_bin()).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))
    .unwrap();
    let mut cmd = kaji(home.path());
    cmd.env("PATH", path)
        .env("KAJI_HOME", &kaji_home)
        .args([
            "exec",
            "--json",
            "--no-checkpoints",
            "--sandbox",
            "off",
            "--yolo",
            "-C",
        ])
        .arg(work);
    scripted(&mut cmd, &server, Wire::Anthropic).arg("go");
    let out = cmd.output().await.unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    tool_results(&json_lines(&out.stdout))
}

fn output(result: &Value) -> &str {
    result["output"].as_str().unwrap()
}

fn edit(file: &str, old: &str, new: &str) -> Turn {
    Turn::tool_call(
        "Edit",
        json!({"file_path": file, "old_string": old, "new_string": new}),
    )
}

/// The real servers wait as long as they need: the wait is a ceiling that
/// only a broken server reaches, never what a test depends on.
const PATIENT: &str = "lsp_wait_ms = 300000\n";

#[tokio::test]
async fn pyright_reports_what_an_edit_introduced_and_nothing_else() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    std::fs::write(
        w.join("m.py"),
        "def f(x: int) -> int:\n    return x\n\nf(1)\n",
    )
    .unwrap();
    std::fs::write(w.join("old.py"), "y: int = \"already wrong\"\nz = 1\n").unwrap();
    std::fs::write(w.join("b.py"), "def helper() -> int:\n    return 2\n").unwrap();
    std::fs::write(w.join("a.py"), "from b import helper\n\nprint(helper())\n").unwrap();
    std::fs::write(w.join("notes.txt"), "plain text\n").unwrap();
    let results = run(
        w,
        PATIENT,
        vec![
            edit("m.py", "f(1)", "f(\"one\")"),
            edit("m.py", "f(\"one\")", "f(2)"),
            edit("old.py", "z = 1", "z = 2"),
            edit("old.py", "z = 2", "q: str = 3"),
            Turn::tool_call(
                "Write",
                json!({"file_path": "new.py", "content": "from m import f\n\nf(None)\n"}),
            ),
            Turn::tool_call(
                "LSP",
                json!({"operation": "goToDefinition", "filePath": "a.py", "line": 3, "character": 7}),
            ),
            Turn::tool_call(
                "LSP",
                json!({"operation": "hover", "filePath": "notes.txt", "line": 1, "character": 1}),
            ),
        ],
    )
    .await;
    assert_eq!(results.len(), 8, "{results:#?}");
    for r in &results[..6] {
        assert_eq!(r["is_error"], false, "{r:#}");
    }
    // An introduced type error, with its place, in the same round.
    let introduced = output(&results[0]);
    assert!(
        introduced.contains("This edit introduced diagnostics (pyright):"),
        "{introduced}"
    );
    assert!(introduced.contains("m.py:4:3: error: "), "{introduced}");
    // Fixing it reports nothing.
    assert!(
        !output(&results[1]).contains("diagnostics"),
        "{}",
        output(&results[1])
    );
    // A pre-existing error is not repeated, alone or beside a new one.
    assert!(
        !output(&results[2]).contains("diagnostics"),
        "{}",
        output(&results[2])
    );
    let beside = output(&results[3]);
    assert!(beside.contains("old.py:2:"), "{beside}");
    assert!(!beside.contains("old.py:1:"), "{beside}");
    // A new file: every error it has is new.
    assert!(
        output(&results[4]).contains("new.py:3:3: error: "),
        "{}",
        output(&results[4])
    );
    // The LSP tool goes to the definition in the other file.
    assert_eq!(output(&results[5]), "b.py:1:5");
    // A file no server serves: an error that says so.
    assert_eq!(results[6]["is_error"], true);
    let refused = output(&results[6]);
    assert!(
        refused.starts_with("LSP: no language server is configured for "),
        "{refused}"
    );
    // The edits themselves happened.
    assert!(
        std::fs::read_to_string(w.join("old.py"))
            .unwrap()
            .contains("q: str = 3")
    );
}

/// A `[lsp.fake]` server for `.py` files that behaves as `mode` says.
/// A server that never answers gets a short wait (the edit must not wait
/// longer); one that fails by a protocol event (it exits, it writes
/// garbage) a patient one, so that the failure seen is that event.
fn fake_config(mode: &str) -> String {
    let wait = if matches!(mode, "hang" | "flood") {
        300
    } else {
        300_000
    };
    format!(
        "lsp_wait_ms = {wait}\n[lsp.pyright]\ndisabled = true\n[lsp.fake]\ncommand = \"python3\"\nargs = [{:?}, {mode:?}]\nextensions = [\"py\"]\n",
        fake_server().display().to_string()
    )
}

async fn edit_with(config: &str) -> (tempfile::TempDir, String) {
    let work = tempfile::tempdir().unwrap();
    std::fs::write(work.path().join("m.py"), "x = 1\n").unwrap();
    let results = run(work.path(), config, vec![edit("m.py", "x = 1", "x = 2")]).await;
    assert_eq!(results[0]["is_error"], false, "{:#}", results[0]);
    assert_eq!(
        std::fs::read_to_string(work.path().join("m.py")).unwrap(),
        "x = 2\n"
    );
    (work, output(&results[0]).to_string())
}

#[tokio::test]
async fn a_missing_server_leaves_the_edit_intact() {
    let config = "[lsp.pyright]\ndisabled = true\n[lsp.gone]\ncommand = \"/nonexistent/ls\"\nextensions = [\"py\"]\n";
    let (_w, out) = edit_with(config).await;
    assert!(
        out.contains(
            "LSP diagnostics for m.py are unavailable (gone: its program is not installed"
        ),
        "{out}"
    );
}

#[tokio::test]
async fn a_hanging_server_costs_only_the_wait() {
    let (_w, out) = edit_with(&fake_config("hang")).await;
    assert!(
        out.contains("LSP diagnostics for m.py are unavailable (fake:"),
        "{out}"
    );
}

#[tokio::test]
async fn a_server_exiting_mid_request_leaves_the_edit_intact() {
    let (_w, out) = edit_with(&fake_config("exit")).await;
    assert!(
        out.contains("LSP diagnostics for m.py are unavailable (fake: the server exited)"),
        "{out}"
    );
}

#[tokio::test]
async fn a_server_writing_garbage_leaves_the_edit_intact() {
    let (_w, out) = edit_with(&fake_config("garbage")).await;
    assert!(out.contains("the server wrote garbage"), "{out}");
}

#[tokio::test]
async fn a_flooding_server_leaves_the_edit_intact() {
    let (_w, out) = edit_with(&fake_config("flood")).await;
    assert!(
        out.contains("LSP diagnostics for m.py are unavailable (fake:"),
        "{out}"
    );
    assert!(!out.contains("flood"), "{out}");
}
