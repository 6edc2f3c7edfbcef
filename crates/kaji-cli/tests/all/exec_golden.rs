//! Golden transcripts of `kaji exec --json`: the public JSON lines, byte for
//! byte, through the real binary against the scripted model server.
//!
//! Each test runs one scripted task and compares its stdout, line by line,
//! with `tests/golden/NAME.jsonl`; a difference fails with a readable diff.
//! `KAJI_BLESS=1 cargo test -p kaji-cli --test exec_golden` rewrites the
//! goldens instead (review the diff before committing it).
//!
//! Only what varies from run to run is normalised (see [`normalise`]); the
//! rest, including key order, must stay exactly the same. These tests must
//! never talk to anything but the scripted server on 127.0.0.1.

use std::path::{Path, PathBuf};

use kaji_protocol::Usage;
use kaji_test_support::{Fault, Script, ScriptedModelServer, Turn};
use regex::Regex;
use serde_json::json;
use tokio::process::Command;

use crate::common::{Wire, done, json_lines, kaji, scripted};

struct Run {
    home: tempfile::TempDir,
    work: tempfile::TempDir,
}

impl Run {
    fn new() -> Self {
        Self {
            home: tempfile::tempdir().unwrap(),
            work: tempfile::tempdir().unwrap(),
        }
    }

    fn write(&self, rel: &str, content: &str) -> &Self {
        let path = self.work.path().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
        self
    }

    /// Runs `kaji exec --json FLAGS PROMPT` against `script` and checks its
    /// normalised stdout against `tests/golden/NAME.jsonl`.
    async fn check(
        &self,
        name: &str,
        wire: Wire,
        script: Script,
        flags: &[&str],
        prompt: &str,
        exit_code: i32,
    ) {
        let server = ScriptedModelServer::start(script).await;
        let out = self
            .command(&server, wire, flags, prompt)
            .output()
            .await
            .unwrap();
        self.compare(name, &server, out, exit_code);
    }

    /// Like [`Run::check`], but sends SIGTERM to kaji once something in the
    /// task has written a line to the fifo `fifo` in the working directory.
    async fn check_with_sigterm(
        &self,
        name: &str,
        script: Script,
        flags: &[&str],
        prompt: &str,
        fifo: &str,
    ) {
        let fifo = self.work.path().join(fifo);
        kaji_test_support::fixtures::mkfifo(&fifo);
        let server = ScriptedModelServer::start(script).await;
        let child = self
            .command(&server, Wire::Anthropic, flags, prompt)
            .spawn()
            .unwrap();
        let pid = nix::unistd::Pid::from_raw(child.id().unwrap() as i32);
        tokio::task::spawn_blocking(move || std::fs::read_to_string(fifo).unwrap())
            .await
            .unwrap();
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
        let mut out = child.wait_with_output().await.unwrap();
        // The aborted round's usage is kaji's estimate from the request's
        // size, which the temporary paths in it vary: only its presence is
        // golden.
        let tokens = regex::Regex::new(r#""(input|output|context)_tokens":\d+"#).unwrap();
        out.stdout = tokens
            .replace_all(
                &String::from_utf8_lossy(&out.stdout),
                r#""${1}_tokens":"<N>""#,
            )
            .into_owned()
            .into_bytes();
        self.compare(name, &server, out, 130);
    }

    fn command(
        &self,
        server: &ScriptedModelServer,
        wire: Wire,
        flags: &[&str],
        prompt: &str,
    ) -> Command {
        let mut cmd = kaji(self.home.path());
        cmd.args(["exec", "--json"])
            .args(flags)
            .arg("-C")
            .arg(self.work.path());
        scripted(&mut cmd, server, wire).arg(prompt);
        cmd
    }

    fn compare(
        &self,
        name: &str,
        server: &ScriptedModelServer,
        out: std::process::Output,
        exit_code: i32,
    ) {
        let stdout = String::from_utf8(out.stdout).expect("stdout is UTF-8");
        assert_eq!(
            out.status.code(),
            Some(exit_code),
            "exit code of {name}\nstdout:\n{stdout}\nstderr:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let paths = [self.work.path(), self.home.path()];
        let actual = normalise(&stdout, &paths, server.addr().port());
        compare_with_golden(name, &actual);
    }
}

/// The same usage for every reply, so token counts do not depend on the
/// length of the temporary directory's name in the system prompt.
fn fixed(turn: Turn) -> Turn {
    turn.with_usage(Usage {
        input_tokens: 100,
        output_tokens: 10,
        cache_read_input_tokens: 0,
        cache_creation_input_tokens: 0,
    })
}

fn script(turns: impl IntoIterator<Item = Turn>) -> Script {
    Script::new(turns.into_iter().map(fixed).collect::<Vec<_>>())
}

/// Replaces what varies from run to run, and nothing else:
///
/// - the `task_id` and `session_id` of the `task_started` line, wherever
///   they occur, by `<TASK_ID>` and `<SESSION_ID>` (they hold the time and
///   the process id);
/// - the temporary working directory and home (as given and canonical) by
///   `<WORK>` and `<HOME>`;
/// - the scripted server's port by `<PORT>`;
/// - checkpoint commit ids (they hold the commit time) by `<CHECKPOINT_n>`,
///   numbered in order of appearance, the short form in the text by
///   `<CHECKPOINT_n_SHORT>`;
/// - the value of `duration_ms` by `0`, and the seconds a command took in a
///   Bash result (`[exit code 0, 0.01 s]`) by `<SECS>`.
fn normalise(stdout: &str, paths: &[&Path], port: u16) -> String {
    let mut replacements: Vec<(String, String)> = Vec::new();
    let lines = json_lines(stdout.as_bytes());
    if let Some(first) = lines.first().filter(|l| l["type"] == "task_started") {
        for (key, tag) in [("task_id", "<TASK_ID>"), ("session_id", "<SESSION_ID>")] {
            if let Some(id) = first[key].as_str() {
                replacements.push((id.to_string(), tag.to_string()));
            }
        }
    }
    let short = Regex::new(r"^checkpoint ([0-9a-f]+) \(").unwrap();
    let mut n = 0;
    for line in &lines {
        if let Some(full) = line["data"]["checkpoint"].as_str() {
            n += 1;
            replacements.push((full.to_string(), format!("<CHECKPOINT_{n}>")));
            if let Some(c) = line["text"].as_str().and_then(|t| short.captures(t)) {
                replacements.push((c[1].to_string(), format!("<CHECKPOINT_{n}_SHORT>")));
            }
        }
    }
    let mut tagged: Vec<(PathBuf, &str)> = Vec::new();
    for (path, tag) in paths.iter().zip(["<WORK>", "<HOME>"]) {
        if let Ok(canonical) = path.canonicalize() {
            tagged.push((canonical, tag));
        }
        tagged.push((path.to_path_buf(), tag));
    }
    for (path, tag) in tagged {
        replacements.push((path.to_string_lossy().into_owned(), tag.to_string()));
    }
    replacements.push((format!("127.0.0.1:{port}"), "127.0.0.1:<PORT>".to_string()));
    // Longest first, so that a path is never cut by a shorter one in it.
    replacements.sort_by_key(|(from, _)| std::cmp::Reverse(from.len()));
    let mut text = stdout.to_string();
    for (from, to) in &replacements {
        text = text.replace(from.as_str(), to);
    }
    let duration = Regex::new(r#""duration_ms":\d+"#).unwrap();
    let text = duration.replace_all(&text, r#""duration_ms":0"#);
    let secs =
        Regex::new(r"(\[(?:exit code -?\d+|killed by signal \d+|ended), )\d+\.\d+ s\]").unwrap();
    secs.replace_all(&text, "${1}<SECS> s]").into_owned()
}

fn golden_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(format!("{name}.jsonl"))
}

/// Compares with the golden, or rewrites it under `KAJI_BLESS=1`.
fn compare_with_golden(name: &str, actual: &str) {
    let path = golden_path(name);
    if std::env::var_os("KAJI_BLESS").is_some_and(|v| v == "1") {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "cannot read the golden {}: {e}\nrecord it with KAJI_BLESS=1",
            path.display()
        )
    });
    if expected != actual {
        let diff = similar::TextDiff::from_lines(expected.as_str(), actual);
        let mut report = String::new();
        for op in diff.ops() {
            for change in diff.iter_changes(op) {
                let (sign, line) = match change.tag() {
                    similar::ChangeTag::Equal => continue,
                    similar::ChangeTag::Delete => ("-", change.old_index()),
                    similar::ChangeTag::Insert => ("+", change.new_index()),
                };
                let at = line.map(|i| i + 1).unwrap_or(0);
                report.push_str(&format!("{sign} line {at}: {}", change.value()));
                if change.missing_newline() {
                    report.push('\n');
                }
            }
        }
        panic!(
            "kaji exec --json differs from {} (- golden, + now):\n{report}\nIf the change is intended, rerun with KAJI_BLESS=1 and review the golden's diff.",
            path.display()
        );
    }
}

/// Every say kind of an ordinary task: user_feedback, api_req_started,
/// api_req_retried, reasoning, text, tool, info (a checkpoint), todo,
/// task_list, completion_result, and the completion_result ask.
fn say_kinds_script() -> Script {
    script([
        Turn::reasoning("The user wants a copy.")
            .and_text("Reading a.txt first.")
            .and_tool_call("Read", json!({"file_path": "a.txt"}))
            .with_fault(Fault::rate_limited_ms(5)),
        Turn::text("Writing it.")
            .and_tool_call("Write", json!({"file_path": "b.txt", "content": "alpha\n"})),
        Turn::tool_call("Bash", json!({"command": "cat b.txt"})),
        Turn::tool_call(
            "TodoWrite",
            json!({"todos": [
                {"content": "Copy a.txt", "status": "completed", "activeForm": "Copying a.txt"},
                {"content": "Check b.txt", "status": "in_progress", "activeForm": "Checking b.txt"}
            ]}),
        ),
        Turn::tool_call(
            "TaskCreate",
            json!({"subject": "Review the copy", "description": "by hand"}),
        ),
        done("Copied a.txt to b.txt"),
    ])
}

#[tokio::test]
async fn say_kinds_anthropic() {
    let run = Run::new();
    run.write("a.txt", "alpha\n");
    run.check(
        "say_kinds_anthropic",
        Wire::Anthropic,
        say_kinds_script(),
        &["--yolo"],
        "copy a.txt to b.txt",
        0,
    )
    .await;
}

#[tokio::test]
async fn say_kinds_openai() {
    let run = Run::new();
    run.write("a.txt", "alpha\n");
    run.check(
        "say_kinds_openai",
        Wire::OpenAi,
        say_kinds_script(),
        &["--yolo"],
        "copy a.txt to b.txt",
        0,
    )
    .await;
}

/// The tool, command and followup asks, each denied by exec (and the
/// denial's tool results).
///
/// The denied turns send no usage: a denial stops reading the reply, and
/// whether its usage (which comes after the tool call on the wire) was
/// read by then is a race in today's core, not part of the schema.
#[tokio::test]
async fn asks_denied() {
    let run = Run::new();
    // `echo` is a read-only command, which runs unasked: an ask rule in
    // the user's settings makes it ask again.
    let settings = run.home.path().join("kaji-home/config.toml");
    std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
    std::fs::write(&settings, "[permissions]\nask = [\"Bash(echo:*)\"]\n").unwrap();
    run.check(
        "asks_denied",
        Wire::Anthropic,
        script([
            Turn::tool_call("Write", json!({"file_path": "b.txt", "content": "beta\n"}))
                .without_usage(),
            Turn::tool_call("Bash", json!({"command": "echo hello"})).without_usage(),
            Turn::tool_call(
                "AskUser",
                json!({"question": "Which file?", "options": ["a.txt", "b.txt"]}),
            ),
            done("nothing was allowed"),
        ]),
        &[],
        "write b.txt",
        0,
    )
    .await;
}

/// The mistake_limit_reached ask (outside yolo), denied: status
/// mistake_limit.
#[tokio::test]
async fn ask_mistake_limit_reached() {
    let run = Run::new();
    // A text answer ends an exec run (#32); the seed's nudge is asked for.
    run.write(".kaji/config.toml", "on_text_reply = \"nudge\"\n");
    run.check(
        "ask_mistake_limit_reached",
        Wire::Anthropic,
        script([Turn::text("I will not use a tool.")]),
        &["--max-mistakes", "1"],
        "do something",
        1,
    )
    .await;
}

/// A request that fails in a way a retry may fix (a proxy's error page):
/// the error say and the api_req_failed ask, denied: status failed. (A
/// refused key, which no retry fixes, is not asked about: what_runs.rs.)
#[tokio::test]
async fn ask_api_req_failed() {
    let run = Run::new();
    run.check(
        "ask_api_req_failed",
        Wire::Anthropic,
        script(
            [Turn::text("never sent").with_fault(Fault::status_with_body(
                200,
                "<html><body>502 Bad Gateway</body></html>",
            ))],
        ),
        &[],
        "hello",
        1,
    )
    .await;
}

/// The plan ask in plan mode, denied without --approve-plan: the plan is
/// the result.
#[tokio::test]
async fn ask_plan() {
    let run = Run::new();
    run.check(
        "ask_plan",
        Wire::Anthropic,
        script([Turn::tool_call(
            "ExitPlanMode",
            json!({"plan": "# Plan\n1. write x.txt"}),
        )]),
        &["--permission-mode", "plan"],
        "plan it",
        0,
    )
    .await;
}

/// Hook output (info: hook warnings of a failing PreToolUse and
/// PostToolUse hook) and the error say of the turn limit: status
/// max_turns.
#[tokio::test]
async fn hook_info_and_max_turns() {
    let run = Run::new();
    run.write(
        ".kaji/config.toml",
        "[[hooks.PreToolUse]]\ncommand = \"echo pre failed >&2; exit 1\"\n\n\
         [[hooks.PostToolUse]]\ncommand = \"echo post failed >&2; exit 3\"\n",
    );
    run.write("a.txt", "alpha\n");
    run.check(
        "hook_info_and_max_turns",
        Wire::Anthropic,
        script([
            Turn::tool_call("Read", json!({"file_path": "a.txt"})),
            Turn::tool_call("Read", json!({"file_path": "a.txt"})),
        ]),
        // The hooks are the project's: they run only in a trusted one.
        &["--max-turns", "1", "--trust"],
        "read a.txt",
        1,
    )
    .await;
}

/// Tool calls written as XML in the reply text (`--tool-protocol xml`):
/// kaji's own call ids, and the text around the calls.
#[tokio::test]
async fn xml_tool_protocol() {
    let run = Run::new();
    run.write("a.txt", "alpha\n");
    run.check(
        "xml_tool_protocol",
        Wire::OpenAi,
        script([
            Turn::text("Reading it.\n<Read>\n<file_path>a.txt</file_path>\n</Read>"),
            Turn::text(
                "<AttemptCompletion>\n<result>It says alpha.</result>\n</AttemptCompletion>",
            ),
        ]),
        &["--tool-protocol", "xml"],
        "what does a.txt say?",
        0,
    )
    .await;
}

/// A TaskStart hook that blocks (exit 2): the error say, no request, status
/// failed.
#[tokio::test]
async fn hook_blocks_task_start() {
    let run = Run::new();
    run.write(
        ".kaji/config.toml",
        "[[hooks.TaskStart]]\ncommand = \"echo not today >&2; exit 2\"\n",
    );
    run.check(
        "hook_blocks_task_start",
        Wire::Anthropic,
        script([Turn::text("never asked")]),
        // The hook is the project's: it runs only in a trusted one.
        &["--trust"],
        "start",
        1,
    )
    .await;
}

/// SIGTERM while a command runs: the interrupted tool's result, the error
/// say of the abort, status aborted (exit 130).
///
/// The turn sends no usage: the command runs before the rest of the reply
/// (and its usage) is read, so whether the usage was read by the abort is
/// a race. The aborted round gets kaji's estimate instead (its request was
/// paid for), a `usage` line whose numbers are normalised.
#[tokio::test]
async fn aborted_by_sigterm() {
    let run = Run::new();
    run.check_with_sigterm(
        "aborted_by_sigterm",
        script([Turn::tool_call(
            "Bash",
            json!({"command": "echo started > started.fifo; sleep 1000"}),
        )
        .without_usage()]),
        &["--yolo"],
        "hang",
        "started.fifo",
    )
    .await;
}
