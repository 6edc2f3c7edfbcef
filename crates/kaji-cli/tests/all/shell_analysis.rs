//! Issue 27 through the real binary: every way bash runs a program is seen
//! by the shell analysis, or the command asks. Each class is one test: the
//! scripted model asks `kaji exec` (default mode, sandbox off, headless, so
//! an ask is a denial) to run commands made of an allowed part and a
//! hidden `touch MARKER`; no marker may appear. A control in each class
//! shows that the same shape with only allowed parts still runs unasked.
//! A PreToolUse hook's `allow` never covers a protected path or a write
//! outside the project.

use std::path::{Path, PathBuf};

use kaji_test_support::Turn;
use serde_json::{Value, json};

use crate::common::{Wire, done, json_lines, kaji, scripted, serve, tool_results};

/// A home, a project and a directory outside it, with links from the
/// project leading out.
struct World {
    _dirs: (tempfile::TempDir, tempfile::TempDir),
    home: PathBuf,
    work: PathBuf,
    outside: PathBuf,
}

impl World {
    fn new() -> World {
        let home_dir = tempfile::tempdir().unwrap();
        let root_dir = tempfile::tempdir().unwrap();
        let home = home_dir.path().to_path_buf();
        std::fs::create_dir_all(home.join("kaji-home")).unwrap();
        let root = root_dir.path().canonicalize().unwrap();
        let work = root.join("proj");
        let outside = root.join("outside");
        std::fs::create_dir_all(outside.join("deep")).unwrap();
        std::fs::create_dir_all(work.join(".git")).unwrap();
        std::fs::write(work.join(".git/config"), "[core]\n").unwrap();
        std::fs::write(work.join("a.txt"), "alpha\n").unwrap();
        std::fs::write(work.join("evil.sh"), "touch sourced-marker\n").unwrap();
        let link = |target: &str, name: &str| {
            std::os::unix::fs::symlink(target, work.join(name)).unwrap();
        };
        link("../outside", "link_out");
        link("../outside/deep", "deep_link");
        link("../outside/missing", "dangling");
        World {
            _dirs: (home_dir, root_dir),
            home,
            work,
            outside,
        }
    }

    /// `kaji exec --json` in the project with the sandbox off, in the
    /// default mode, running `turns` then finishing.
    async fn exec(&self, turns: Vec<Turn>, extra: &[&str]) -> Vec<Value> {
        let mut turns = turns;
        turns.push(done("done"));
        let server = serve(turns).await;
        let mut cmd = kaji(&self.home);
        cmd.env("EVIL", "a[$(touch env-marker)]")
            .args(["exec", "--json", "--no-checkpoints", "--sandbox", "off"])
            .args(["--max-mistakes", "100"]);
        scripted(&mut cmd, &server, Wire::Anthropic)
            .arg("-C")
            .arg(&self.work)
            .args(extra)
            .arg("go");
        let out = cmd.output().await.unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{stderr}");
        tool_results(&json_lines(&out.stdout))
    }

    /// Every marker file that appeared, in the project or outside it.
    fn markers(&self) -> Vec<String> {
        let mut found = Vec::new();
        for dir in [&self.work, &self.outside, &self.outside.join("deep")] {
            for entry in std::fs::read_dir(dir).unwrap().flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                if name.contains("marker") || name.contains("escaped") {
                    found.push(name);
                }
            }
        }
        found.sort();
        found
    }
}

fn bash(command: &str) -> Turn {
    Turn::tool_call("Bash", json!({"command": command}))
}

/// Runs each of `hidden` (which must ask, so never run) and each of
/// `controls` (only allowed parts: they must run unasked and print
/// `CONTROL-OK`), with `Bash(echo:*)` allowed.
async fn never_runs_unasked(hidden: &[&str], controls: &[&str]) {
    let world = World::new();
    let turns = hidden.iter().chain(controls).map(|c| bash(c)).collect();
    let results = world.exec(turns, &["--allow", "Bash(echo:*)"]).await;
    assert_eq!(
        results.len(),
        hidden.len() + controls.len() + 1,
        "{results:?}"
    );
    for (command, result) in hidden.iter().zip(&results) {
        assert_eq!(result["is_error"], true, "{command:?} ran: {result}");
    }
    for (command, result) in controls.iter().zip(&results[hidden.len()..]) {
        assert_eq!(result["is_error"], false, "{command:?} asked: {result}");
        let output = result["output"].as_str().unwrap_or_default();
        assert!(output.contains("CONTROL-OK"), "{command:?}: {output}");
    }
    assert_eq!(world.markers(), Vec::<String>::new());
}

#[tokio::test]
async fn substitutions_in_heredoc_bodies_are_seen() {
    never_runs_unasked(
        &[
            "cat <<EOF\n`touch heredoc-backtick-marker`\nEOF",
            "cat <<EOF\n$(touch heredoc-dollar-marker)\nEOF",
            "cat <<-EOF\n\t${UNSET:-`touch heredoc-default-marker`}\n\tEOF",
            "cat <<EOF | cat\n`echo \\`touch heredoc-nested-marker\\``\nEOF",
        ],
        &[
            "cat <<EOF\n`echo CONTROL-OK`\nEOF",
            "cat <<'EOF'\nCONTROL-OK `touch quoted-heredoc-marker`\nEOF",
        ],
    )
    .await;
}

#[tokio::test]
async fn nested_and_escaped_backticks_are_seen() {
    never_runs_unasked(
        &[
            "echo \"`echo \\`touch nested-quoted-marker\\``\"",
            "echo `echo \\`touch nested-unquoted-marker\\``",
            "echo `echo \\`echo \\\\\\`touch nested-triple-marker\\\\\\`\\``",
            "echo \"`echo \\\"\\`touch nested-dquote-marker\\`\\\"`\"",
        ],
        &[
            "echo `echo \\`echo CONTROL-OK\\``",
            "echo \\`touch escaped-literal-marker\\` CONTROL-OK",
        ],
    )
    .await;
}

#[tokio::test]
async fn process_substitution_is_seen() {
    never_runs_unasked(
        &[
            "cat <(touch procsub-in-marker)",
            "echo hi > >(touch procsub-out-marker)",
            "cat <(echo ok; touch procsub-list-marker)",
        ],
        &["cat <(echo CONTROL-OK)"],
    )
    .await;
}

#[tokio::test]
async fn arithmetic_and_parameter_expansions_that_run_code_ask() {
    never_runs_unasked(
        &[
            "echo $(( $(touch arith-subst-marker) + 1 ))",
            "echo $((EVIL))",
            "echo $[EVIL]",
            "echo ${UNSET:-`touch param-backtick-marker`}",
            "echo \"${UNSET:-$(touch param-dollar-marker)}\"",
            "echo ${A[EVIL]}",
            "echo ${HOME:EVIL:1}",
            "echo ${!EVIL}",
            "[[ EVIL -eq 1 ]] || echo x",
            "[[ -v $EVIL ]] || echo x",
        ],
        &["echo $((1 + 2)) ${UNSET:-CONTROL-OK}"],
    )
    .await;
}

#[tokio::test]
async fn builtins_that_run_code_ask() {
    never_runs_unasked(
        &[
            "eval 'touch eval-marker'",
            "source ./evil.sh",
            ". ./evil.sh",
            "trap 'touch trap-marker' EXIT",
            "command touch command-marker",
            "exec touch exec-marker",
            "builtin eval 'touch builtin-marker'",
            "f() { touch function-marker; }; f",
            "function g { touch function2-marker; }; g",
            "shopt -s expand_aliases\nalias e='touch alias-marker'\ne",
        ],
        &["echo CONTROL-OK"],
    )
    .await;
}

#[tokio::test]
async fn redirections_through_symlinks_out_of_the_project_ask() {
    never_runs_unasked(
        &[
            "echo x > link_out/escaped-file",
            "echo x > deep_link/../escaped-parent",
            "echo x > dangling",
            "echo x >> .git/config",
        ],
        &["echo CONTROL-OK > inside.txt && cat inside.txt"],
    )
    .await;
    // `dangling` would have created outside/missing.
}

#[tokio::test]
async fn a_pipeline_then_a_redirected_line_is_two_commands() {
    never_runs_unasked(
        &[
            "cat a.txt | cat | echo a\ntouch pipeline-marker > out.txt",
            "cat a.txt | cat | echo a ; touch pipeline2-marker > out.txt",
        ],
        &["cat a.txt | cat | cat\necho CONTROL-OK > out.txt; cat out.txt"],
    )
    .await;
}

/// A PreToolUse hook answering `allow` to everything.
fn allow_everything_hook(home: &Path) {
    let script = home.join("allow.sh");
    std::fs::write(
        &script,
        "cat >/dev/null\necho '{\"hookSpecificOutput\": {\"hookEventName\": \"PreToolUse\", \"permissionDecision\": \"allow\"}}'\n",
    )
    .unwrap();
    std::fs::write(
        home.join("kaji-home/config.toml"),
        format!(
            "[[hooks.PreToolUse]]\nmatcher = \"Bash|Write|Edit\"\ncommand = \"sh '{}'\"\n",
            script.display()
        ),
    )
    .unwrap();
}

#[tokio::test]
async fn a_hook_allow_never_covers_a_protected_path_or_a_write_outside() {
    let world = World::new();
    allow_everything_hook(&world.home);
    let outside_file = world.outside.join("hook-escaped.txt");
    let write = |path: &str| Turn::tool_call("Write", json!({"file_path": path, "content": "x\n"}));
    let turns = vec![
        bash("echo pwned >> .git/config"),
        write(".kaji/config.toml"),
        write(&outside_file.display().to_string()),
        write("link_out/hook-link-escaped.txt"),
        bash("echo x > link_out/hook-bash-escaped.txt"),
        // Controls: the hook's allow still covers ordinary writes.
        write("inside.txt"),
        bash("touch hook-allowed.txt"),
    ];
    let results = world.exec(turns, &[]).await;
    for result in &results[..5] {
        assert_eq!(result["is_error"], true, "{result}");
    }
    assert_eq!(results[5]["is_error"], false, "{}", results[5]);
    assert_eq!(results[6]["is_error"], false, "{}", results[6]);
    assert_eq!(
        std::fs::read_to_string(world.work.join(".git/config")).unwrap(),
        "[core]\n"
    );
    assert!(!world.work.join(".kaji/config.toml").exists());
    assert!(!outside_file.exists());
    assert!(!world.outside.join("hook-link-escaped.txt").exists());
    assert!(!world.outside.join("hook-bash-escaped.txt").exists());
    assert!(world.work.join("inside.txt").exists());
    assert!(world.work.join("hook-allowed.txt").exists());
}
