//! `kaji tui` through the real binary in a real terminal (tmux), against
//! the scripted model server: type a prompt, approve a command, accept the
//! result, quit, and check the screen, the file the task wrote and the
//! exit status.
//!
//! Every wait polls the pane until the expected text appears; the overall
//! deadline only guards against a hang and fails the test.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use kaji_test_support::{Script, ScriptedModelServer, Turn};
use serde_json::json;

use crate::common::files::Helper;
use crate::common::tmux::{DEADLINE, IDLE, launch, launch_env, launch_with, quit, quote, submit};
use crate::common::{done, kaji_sync, serve};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompt_approve_accept_and_quit_in_a_real_terminal() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let server = serve([
        Turn::text("I will write the file.")
            .and_tool_call("Bash", json!({"command": "echo made-by-kaji > out.txt"})),
        done("Wrote out.txt"),
    ])
    .await;
    let tmux = launch("approve", home.path(), work.path(), &server);

    let screen = tmux.wait_for("Enter sends").await;
    assert!(screen.contains("scripted · default"), "{screen}");
    submit(&tmux, "write the file").await;

    let screen = tmux.wait_for("Run this command?").await;
    assert!(screen.contains("> write the file"), "{screen}");
    assert!(screen.contains("I will write the file."), "{screen}");
    assert!(screen.contains("⏺ Bash"), "{screen}");
    assert!(
        screen.contains("y approve · a always (this session) · p always (this project)"),
        "{screen}"
    );
    // The exact rule "always" would store is shown before it is chosen.
    assert!(
        screen.contains("always stores Bash(echo made-by-kaji)"),
        "{screen}"
    );
    assert!(
        !work.path().join("out.txt").exists(),
        "the command ran before it was approved"
    );
    tmux.send_key("y");

    let screen = tmux.wait_for("Task complete").await;
    assert!(screen.contains("✓ approved"), "{screen}");
    assert!(screen.contains("✓ Wrote out.txt"), "{screen}");
    assert_eq!(
        std::fs::read_to_string(work.path().join("out.txt")).unwrap(),
        "made-by-kaji\n"
    );
    tmux.send_key("Enter");
    tmux.wait_for("[completed] 2 turn(s)").await;
    // The prompt is free again once the session's run has returned.
    tmux.wait_for("Enter sends").await;

    // Ctrl-D on an empty input with no task running quits, cleanly.
    assert_eq!(
        quit(&tmux, home.path()).await,
        "0",
        "exit status of kaji tui"
    );
    // The alternate screen is gone: the pane shows the normal screen again.
    assert!(!tmux.capture().contains("Enter sends"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deny_with_feedback_abort_and_always_allow_across_prompts() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    // The server picks the turn from the history; the second prompt
    // continues the conversation, so it gets turns 2 and 3.
    let server = serve([
        Turn::tool_call("Bash", json!({"command": "sh -c 'echo hi >> log.txt'"})),
        Turn::tool_call("Bash", json!({"command": "sh -c 'sleep 30'"})),
        Turn::tool_call("Bash", json!({"command": "sh -c 'echo hi >> log.txt'"})),
        Turn::tool_call("Bash", json!({"command": "sh -c 'sleep 30'"})),
    ])
    .await;
    let tmux = launch("deny", home.path(), work.path(), &server);
    tmux.wait_for("Enter sends").await;
    submit(&tmux, "first").await;

    // n, feedback, Enter: denied, and the model reads the feedback.
    tmux.wait_for("Run this command?").await;
    tmux.send_key("n");
    tmux.wait_for("Enter to deny").await;
    submit(&tmux, "not that one").await;
    tmux.wait_for("✗ denied: not that one").await;
    server.wait_for_requests(2).await;
    let second = server.requests()[1].body.to_string();
    assert!(second.contains("not that one"), "{second}");
    assert!(!work.path().join("log.txt").exists());

    // a: always allow `sh …`; then Esc aborts the running command.
    tmux.wait_for("sleep 30").await;
    tmux.wait_for("Run this command?").await;
    tmux.send_key("a");
    tmux.wait_for("✓ always allowed Bash(sleep 30) for this session")
        .await;
    tmux.send_key("Escape");
    tmux.wait_for("[aborted]").await;
    tmux.wait_for("Enter sends").await;

    // A new prompt is a new task that continues the conversation. The
    // "always" stored exactly `Bash(sleep 30)` (what `sh -c 'sleep 30'`
    // runs), so the other command asks once more and the sleep does not.
    submit(&tmux, "second").await;
    server.wait_for_requests(3).await;
    let third = server.requests()[2].body.to_string();
    assert!(
        third.contains("first") && third.contains("second"),
        "the conversation goes on: {third}"
    );
    tmux.wait_for("Run this command?").await;
    tmux.send_key("y");
    tmux.wait_until("the second task's sleep", |s| {
        s.matches("⏺ Bash: sh -c 'sleep 30'").count() == 2
    })
    .await;
    // The echo's result: Bash's summary of a command that printed nothing.
    let screen = tmux.wait_for("⎿ no output").await;
    assert!(!screen.contains("Run this command?"), "{screen}");
    assert_eq!(
        std::fs::read_to_string(work.path().join("log.txt")).unwrap(),
        "hi\n"
    );
    tmux.send_key("Escape");
    let screen = tmux
        .wait_until("the second abort", |s| s.matches("[aborted]").count() == 2)
        .await;
    assert!(!screen.contains("Run this command?"), "{screen}");
    // The second sleep ran (and was interrupted) rather than waiting on an
    // approval that the abort then denied.
    // (Whether the first sleep had started when Esc came is a race.)
    let second_prompt = screen.split("> second").nth(1).unwrap_or("");
    assert!(
        second_prompt.contains("the tool was interrupted because the task was aborted"),
        "{screen}"
    );
    assert_eq!(quit(&tmux, home.path()).await, "0");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_the_terminal_kills_the_running_command() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    // A sleep only this test runs (the shell may exec it, so the marker
    // must be in its own arguments), to find it among the processes.
    let marker = format!("sleep 29.{}", std::process::id());
    let server = serve([Turn::tool_call(
        "Bash",
        json!({"command": format!("echo started > started.txt; {marker}")}),
    )])
    .await;
    let tmux = launch("hangup", home.path(), work.path(), &server);
    tmux.wait_for("Enter sends").await;
    submit(&tmux, "run it").await;
    tmux.wait_for("Run this command?").await;
    tmux.send_key("y");
    let start = Instant::now();
    while !work.path().join("started.txt").exists() {
        assert!(start.elapsed() < DEADLINE, "the command never started");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let alive = || {
        Command::new("pgrep")
            .args(["-f", &marker])
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false)
    };
    assert!(alive(), "the command is not running");
    // The terminal goes away: kaji gets SIGHUP.
    drop(tmux);
    let start = Instant::now();
    while alive() {
        assert!(
            start.elapsed() < DEADLINE,
            "the command outlived the closed terminal"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[test]
fn without_a_terminal_it_says_so_and_exits_2() {
    let home = tempfile::tempdir().unwrap();
    let out = kaji_sync(home.path()).arg("tui").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("must be a terminal"), "{stderr}");
    assert!(stderr.contains("kaji exec"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_kaji_with_a_prompt_opens_the_tui_and_runs_it_at_once() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let server = serve([done("Nothing to do")]).await;
    let tmux = launch_with(
        "plain",
        home.path(),
        work.path(),
        &server,
        "",
        &quote("say hello"),
    );
    let screen = tmux.wait_for("Task complete").await;
    assert!(screen.contains("> say hello"), "{screen}");
    assert!(screen.contains("✓ Nothing to do"), "{screen}");
    tmux.send_key("Enter");
    tmux.wait_for("[completed] 1 turn(s)").await;
    assert_eq!(quit(&tmux, home.path()).await, "0");
}

/// Esc aborts only the prompt: the session's runtime registry survives, so
/// a background Bash of the next prompt starts and runs (it used to fail
/// with "the session is shutting down").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_an_abort_the_next_prompt_can_start_background_work() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let server = serve([
        Turn::tool_call("Bash", json!({"command": "sleep 30"})),
        Turn::tool_call(
            "Bash",
            json!({"command": "echo bg-ok > bg.txt", "run_in_background": true}),
        ),
        done("started it"),
    ])
    .await;
    let tmux = launch_with("bg", home.path(), work.path(), &server, "tui", "--yolo");
    tmux.wait_for("Enter sends").await;
    submit(&tmux, "first").await;
    tmux.wait_for("sleep 30").await;
    tmux.send_key("Escape");
    tmux.wait_for("[aborted]").await;

    submit(&tmux, "second").await;
    let screen = tmux.wait_for("Task complete").await;
    assert!(!screen.contains("shutting down"), "{screen}");
    let start = Instant::now();
    while std::fs::read_to_string(work.path().join("bg.txt")).unwrap_or_default() != "bg-ok\n" {
        assert!(
            start.elapsed() < DEADLINE,
            "the background command never ran:\n{}",
            tmux.capture()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tmux.send_key("Enter");
    tmux.wait_for("[completed]").await;
    assert_eq!(quit(&tmux, home.path()).await, "0");
}

/// `/help` and an unknown `/word` are answered by the UI itself: the model
/// is never asked. Typing `/` opens the command menu; Ctrl-J and Alt-Enter
/// put line breaks into the prompt, which is sent whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slash_commands_stay_local_and_the_input_takes_several_lines() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(work.path().join(".kaji/commands")).unwrap();
    std::fs::write(
        work.path().join(".kaji/commands/greet.md"),
        "---\ndescription: Say hello to someone\n---\nSay hello to $ARGUMENTS.\n",
    )
    .unwrap();
    let server = serve([done("said it")]).await;
    let tmux = launch("slash", home.path(), work.path(), &server);
    tmux.wait_for("Enter sends").await;
    tmux.send_text("/he");
    tmux.wait_for("list the commands").await;
    tmux.send_key("Enter");
    // The frame may be caught half drawn: wait for its last part.
    let screen = tmux.wait_for("Say hello to someone").await;
    assert!(screen.contains("Commands (handled here"), "{screen}");
    assert!(screen.contains("/greet"), "{screen}");
    assert!(screen.contains("Say hello to someone"), "{screen}");
    submit(&tmux, "/frobnicate").await;
    tmux.wait_for("unknown command /frobnicate").await;
    assert!(
        server.requests().is_empty(),
        "a slash command reached the model"
    );

    // Two line breaks, one with Ctrl-J, one with Alt-Enter.
    tmux.send_text("/greet Ada");
    tmux.send_key("C-j");
    tmux.send_text("and Bob");
    tmux.send_key("M-Enter");
    tmux.send_text("too");
    tmux.wait_for("  too").await;
    tmux.send_key("Enter");
    tmux.wait_for("Task complete").await;
    server.wait_for_requests(1).await;
    let body = server.requests()[0].body.to_string();
    assert!(body.contains("Say hello to Ada\\nand Bob\\ntoo."), "{body}");
    tmux.send_key("Enter");
    tmux.wait_for("[completed]").await;
    assert_eq!(quit(&tmux, home.path()).await, "0");
}

/// A prompt typed while a task runs waits, and runs when that task ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_typed_while_a_task_runs_is_sent_when_it_ends() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let server = serve([
        Turn::tool_call(
            "Bash",
            json!({"command": "while [ ! -f go ]; do sleep 0.05; done; echo went"}),
        ),
        done("first done"),
        done("second done"),
    ])
    .await;
    let tmux = launch_with("queue", home.path(), work.path(), &server, "tui", "--yolo");
    tmux.wait_for("Enter sends").await;
    submit(&tmux, "first").await;
    tmux.wait_for("Enter queues").await;
    submit(&tmux, "the queued one").await;
    tmux.wait_for("queued (sent when this task ends): the queued one")
        .await;
    // The first prompt's command waits for `go`: nothing more is asked
    // of the model until then.
    server.wait_for_requests(1).await;
    assert_eq!(server.requests().len(), 1);
    std::fs::write(work.path().join("go"), "").unwrap();
    tmux.wait_for("✓ first done").await;
    tmux.send_key("Enter");
    let screen = tmux.wait_for("✓ second done").await;
    assert!(screen.contains("> the queued one"), "{screen}");
    server.wait_for_requests(3).await;
    assert!(
        server.requests()[2]
            .body
            .to_string()
            .contains("the queued one")
    );
    tmux.send_key("Enter");
    tmux.wait_until("two completed tasks", |s| {
        s.matches("[completed]").count() == 2
    })
    .await;
    assert_eq!(quit(&tmux, home.path()).await, "0");
}

/// Quitting prints the session and how to resume it on the normal screen;
/// `kaji -c` then shows the conversation and continues it (issue 10).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_summary_on_quit_and_kaji_c_continuing_the_conversation() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let server = serve([done("noted the kiwi"), done("it was kiwi")]).await;
    let tmux = launch("summary", home.path(), work.path(), &server);
    tmux.wait_for("Enter sends").await;
    submit(&tmux, "remember the word kiwi").await;
    tmux.wait_for("✓ noted the kiwi").await;
    tmux.send_key("Enter");
    tmux.wait_for("[completed]").await;
    assert_eq!(quit(&tmux, home.path()).await, "0");
    let screen = tmux.capture_all();
    assert!(screen.contains("kaji: session "), "{screen}");
    assert!(screen.contains("`kaji -c`"), "{screen}");
    assert!(screen.contains("kaji resume "), "{screen}");
    assert!(screen.contains("output tokens"), "{screen}");
    drop(tmux);

    std::fs::remove_file(home.path().join("exit-code")).unwrap();
    let tmux = launch_with("continue", home.path(), work.path(), &server, "", "-c");
    let screen = tmux.wait_for("Enter sends").await;
    assert!(screen.contains("> remember the word kiwi"), "{screen}");
    assert!(screen.contains("resumed"), "{screen}");
    // The status line keeps the context it had (#32).
    assert!(screen.contains(" · context "), "{screen}");
    submit(&tmux, "what was the word").await;
    tmux.wait_for("✓ it was kiwi").await;
    server.wait_for_requests(2).await;
    let body = server.requests()[1].body.to_string();
    assert!(
        body.contains("remember the word kiwi") && body.contains("what was the word"),
        "{body}"
    );
    tmux.send_key("Enter");
    tmux.wait_for("[completed]").await;
    assert_eq!(quit(&tmux, home.path()).await, "0");
}

/// `@` completes project files (Tab takes the best match) and a mentioned
/// file's content goes to the model with the prompt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_mentions_complete_and_attach_the_file() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(work.path().join("docs")).unwrap();
    std::fs::write(work.path().join("docs/notes.txt"), "the-content-of-notes\n").unwrap();
    std::fs::write(work.path().join("other.txt"), "not this one\n").unwrap();
    let server = serve([done("summarised")]).await;
    let tmux = launch("mention", home.path(), work.path(), &server);
    tmux.wait_for("Enter sends").await;
    tmux.send_text("summarise @nots");
    tmux.wait_for("@docs/notes.txt").await;
    tmux.send_key("Tab");
    tmux.wait_for("› summarise @docs/notes.txt ").await;
    tmux.send_key("Enter");
    let screen = tmux.wait_for("✓ summarised").await;
    assert!(screen.contains("attached @docs/notes.txt"), "{screen}");
    // The transcript shows what was typed and the attachment as one line
    // (#32), not the file's content.
    assert!(screen.contains("> summarise @docs/notes.txt"), "{screen}");
    assert!(
        screen.contains("⎿ Read docs/notes.txt (1 lines)"),
        "{screen}"
    );
    assert!(!screen.contains("the-content-of-notes"), "{screen}");
    server.wait_for_requests(1).await;
    let body = server.requests()[0].body.to_string();
    assert!(body.contains("the-content-of-notes"), "{body}");
    assert!(!body.contains("not this one"), "{body}");
    tmux.send_key("Enter");
    tmux.wait_for("[completed]").await;
    // Esc Esc puts back what was typed, not the attached file; once the
    // session's run has returned (the prompt's title says Ctrl-D quits).
    tmux.wait_for(IDLE).await;
    tmux.send_key("Escape");
    tmux.wait_for("Esc again").await;
    tmux.send_key("Escape");
    tmux.wait_until("the picker", |s| s.lines().any(|l| l.contains("› 1.")))
        .await;
    tmux.send_key("Enter");
    let screen = tmux.wait_for("rewound to before").await;
    if screen.contains("restore files?") {
        tmux.send_key("n");
    }
    let screen = tmux.wait_for("› summarise @docs/notes.txt").await;
    assert!(!screen.contains("<file"), "{screen}");
    assert!(!screen.contains("the-content-of-notes"), "{screen}");
    tmux.send_key("C-c"); // clears the input
    assert_eq!(quit(&tmux, home.path()).await, "0");
}

/// A project whose settings need trust: `permission_mode = "yolo"`.
fn untrusted_project() -> tempfile::TempDir {
    let work = tempfile::tempdir().unwrap();
    std::fs::create_dir(work.path().join(".kaji")).unwrap();
    std::fs::write(
        work.path().join(".kaji/config.toml"),
        "permission_mode = \"yolo\"\n",
    )
    .unwrap();
    work
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_project_asks_do_you_trust_this_folder_and_yes_applies_its_settings() {
    let home = tempfile::tempdir().unwrap();
    let work = untrusted_project();
    let server = serve([]).await;
    let tmux = launch("trust-yes", home.path(), work.path(), &server);
    let screen = tmux.wait_for("Trust this folder? [y/N]").await;
    assert!(screen.contains("Do you trust this folder?"), "{screen}");
    assert!(screen.contains("permission_mode"), "{screen}");
    tmux.send_text("y");
    tmux.send_key("Enter");
    // Trusted: the project's yolo applies.
    let screen = tmux.wait_for("Enter sends").await;
    assert!(screen.contains("scripted · yolo"), "{screen}");
    let file = std::fs::read_to_string(home.path().join("kaji-home/trusted.toml")).unwrap();
    assert!(file.contains("trusted = true"), "{file}");
    assert_eq!(quit(&tmux, home.path()).await, "0");

    // Answered once: the next start does not ask again.
    let tmux = launch("trust-again", home.path(), work.path(), &server);
    let screen = tmux.wait_for("Enter sends").await;
    assert!(!screen.contains("Do you trust"), "{screen}");
    assert_eq!(quit(&tmux, home.path()).await, "0");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_to_do_you_trust_this_folder_goes_on_without_its_settings() {
    let home = tempfile::tempdir().unwrap();
    let work = untrusted_project();
    let server = serve([]).await;
    let tmux = launch("trust-no", home.path(), work.path(), &server);
    tmux.wait_for("Trust this folder? [y/N]").await;
    tmux.send_text("n");
    tmux.send_key("Enter");
    let screen = tmux.wait_for("Enter sends").await;
    assert!(screen.contains("scripted · default"), "{screen}");
    assert!(screen.contains("not trusted"), "{screen}");
    let file = std::fs::read_to_string(home.path().join("kaji-home/trusted.toml")).unwrap();
    assert!(file.contains("trusted = false"), "{file}");
    assert_eq!(quit(&tmux, home.path()).await, "0");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn always_for_this_project_writes_the_exact_rule_to_config_local_toml() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let server = serve([
        Turn::tool_call("Bash", json!({"command": "cargo test -q"})),
        done("tested"),
    ])
    .await;
    let tmux = launch("always-project", home.path(), work.path(), &server);
    tmux.wait_for("Enter sends").await;
    submit(&tmux, "test it").await;
    let screen = tmux.wait_for("Run this command?").await;
    assert!(
        screen.contains("always stores Bash(cargo test:*)"),
        "{screen}"
    );
    tmux.send_key("p");
    tmux.wait_for("✓ always allowed Bash(cargo test:*) for this project")
        .await;
    tmux.wait_for("Task complete").await;
    let local = std::fs::read_to_string(work.path().join(".kaji/config.local.toml")).unwrap();
    assert!(local.contains("[permissions]"), "{local}");
    assert!(local.contains("\"Bash(cargo test:*)\""), "{local}");
    tmux.send_key("Enter");
    tmux.wait_for("[completed]").await;
    assert_eq!(quit(&tmux, home.path()).await, "0");
}

/// `!command` runs through the approvals without the model and its output
/// reaches the next request; Esc Esc goes back to an earlier prompt, puts
/// it into the input, offers the files' checkpoint, and the edited prompt
/// continues from before it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bang_commands_and_esc_esc_rewind() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    // The script answers by the number of assistant messages in the
    // request: after the rewind the conversation has none again, so the
    // same turn answers.
    let server = serve([done("result-one-xyz")]).await;
    let tmux = launch("rewind", home.path(), work.path(), &server);
    tmux.wait_for("Enter sends").await;
    submit(&tmux, "!echo bang-output-77 > bang.txt; cat bang.txt").await;
    tmux.wait_for("Run this command?").await;
    assert!(!work.path().join("bang.txt").exists());
    tmux.send_key("y");
    tmux.wait_for("output are in the conversation").await;
    assert!(tmux.capture().contains("⎿ bang-output-77"));
    assert!(work.path().join("bang.txt").exists());
    assert!(server.requests().is_empty(), "a !command reached the model");

    submit(&tmux, "first prompt").await;
    tmux.wait_for("Task complete").await;
    tmux.send_key("Enter");
    tmux.wait_for("[completed]").await;
    let first = server.requests()[0].body.to_string();
    assert!(first.contains("bang-output-77"), "{first}");

    tmux.wait_for(IDLE).await;
    tmux.send_key("Escape");
    tmux.wait_for("Esc again").await;
    tmux.send_key("Escape");
    // What the user sent is listed, a `!command` as typed.
    let screen = tmux
        .wait_until("the picker on `first prompt`", |s| {
            s.lines()
                .any(|l| l.contains("› 2.") && l.contains("first prompt"))
        })
        .await;
    assert!(
        screen
            .lines()
            .any(|l| l.contains("1.") && l.contains("!echo bang-output-77")),
        "{screen}"
    );
    tmux.send_key("Enter");
    let screen = tmux.wait_for("rewound to before: first prompt").await;
    assert!(!screen.contains("result-one-xyz"), "{screen}");
    assert!(screen.contains("restore files?"), "{screen}");
    tmux.send_key("n");
    tmux.wait_for("the files were left as they are").await;
    let screen = tmux.wait_for("› first prompt").await;
    assert!(screen.contains("bang-output-77"), "{screen}");
    tmux.send_text(" again");
    tmux.wait_for("› first prompt again").await;
    tmux.send_key("Enter");
    tmux.wait_for("✓ result-one-xyz").await;
    server.wait_for_requests(2).await;
    let second = server.requests()[1].body.to_string();
    assert!(second.contains("first prompt again"), "{second}");
    assert!(second.contains("bang-output-77"), "{second}");
    assert!(!second.contains("result-one-xyz"), "{second}");
    tmux.send_key("Enter");
    tmux.wait_for("[completed]").await;
    assert_eq!(quit(&tmux, home.path()).await, "0");
}

/// In the UI a reply with text and no tool ends the turn: no nudge, no
/// mistake, no second request (`on_text_reply = "finish"`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_text_only_reply_ends_the_turn() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let server = serve([Turn::text("Just a plain answer, no tool.")]).await;
    let tmux = launch("textreply", home.path(), work.path(), &server);
    tmux.wait_for("Enter sends").await;
    submit(&tmux, "what is this project?").await;
    let screen = tmux.wait_for("[completed]").await;
    assert!(screen.contains("Just a plain answer, no tool."), "{screen}");
    assert!(!screen.to_lowercase().contains("mistake"), "{screen}");
    assert_eq!(server.requests().len(), 1, "a nudge was sent");
    assert_eq!(quit(&tmux, home.path()).await, "0");
}

/// The agent panel: `/agents` lists a running background agent with its
/// status, `/agents show ID` prints its transcript, `/agents stop ID`
/// stops it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_lists_shows_and_stops_a_background_agent() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let explore = Script::new([Turn::text("looking around the tree").and_hold()]);
    let server = ScriptedModelServer::start(
        Script::new([
            Turn::tool_call(
                "Agent",
                json!({"description": "scan", "prompt": "Scan it", "subagent_type": "Explore", "run_in_background": true}),
            ),
            done("started it"),
        ])
        .with_agent("You are the Explore sub-agent", explore),
    )
    .await;
    let tmux = launch("agents", home.path(), work.path(), &server);
    tmux.wait_for("Enter sends").await;
    submit(&tmux, "start an agent").await;
    tmux.wait_for("Task complete").await;
    tmux.send_key("Enter");
    tmux.wait_for("[completed]").await;
    server.wait_for_holds(1).await;
    submit(&tmux, "/agents").await;
    let screen = tmux.wait_for("— running · scan").await;
    let re = regex::Regex::new(r"⚙ (a[0-9a-z]+) Explore-").unwrap();
    let id = re
        .captures(&screen)
        .map(|c| c[1].to_string())
        .unwrap_or_else(|| panic!("no agent id on screen:\n{screen}"));
    submit(&tmux, &format!("/agents show {id}")).await;
    tmux.wait_for("looking around the tree").await;
    submit(&tmux, &format!("/agents stop {id}")).await;
    tmux.wait_for(&format!("⚙ {id} Explore")).await;
    tmux.wait_until("the agent killed", |s| s.contains("— killed"))
        .await;
    server.release();
    assert_eq!(quit(&tmux, home.path()).await, "0");
}

/// A 1x1 PNG.
const PNG_BYTES: &[u8] = &[
    137, 80, 78, 71, 13, 10, 26, 10, 0, 0, 0, 13, 73, 72, 68, 82, 0, 0, 0, 1, 0, 0, 0, 1, 8, 6, 0,
    0, 0, 31, 21, 196, 137, 0, 0, 0, 13, 73, 68, 65, 84, 120, 218, 99, 100, 96, 248, 95, 15, 0, 2,
    135, 1, 128, 235, 71, 186, 146, 0, 0, 0, 0, 73, 69, 78, 68, 174, 66, 96, 130,
];

/// A fake `xclip` in `dir/bin` answering from `dir`: `targets` for
/// `-t TARGETS`, `image.png` for `-t image/png`, `text` otherwise. (No X
/// server or real xclip is needed: kaji runs whatever `xclip` is on PATH
/// when `DISPLAY` is set.) The `env` words for [`launch_env`].
fn fake_xclip(dir: &Path, targets: &str, text: &str) -> String {
    use std::os::unix::fs::PermissionsExt as _;
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::write(dir.join("targets"), targets).unwrap();
    std::fs::write(dir.join("text"), text).unwrap();
    std::fs::write(dir.join("image.png"), PNG_BYTES).unwrap();
    let d = dir.to_str().unwrap();
    let script = format!(
        "#!/bin/sh\necho \"$*\" >> '{d}/calls'\ncase \"$*\" in\n  *TARGETS*) cat '{d}/targets' ;;\n  *image/png*) cat '{d}/image.png' ;;\n  *) cat '{d}/text' ;;\nesac\n"
    );
    let xclip = bin.join("xclip");
    std::fs::write(&xclip, script).unwrap();
    std::fs::set_permissions(&xclip, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    format!("DISPLAY=:99 {}", quote(&format!("PATH={path}")))
}

/// Ctrl+V with an image on the clipboard saves it under the session's run
/// directory, inserts `[Image #1]`, and the prompt carries the image;
/// Alt+V with text pastes the text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_v_pastes_an_image_and_alt_v_text_from_the_clipboard() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let clip = tempfile::tempdir().unwrap();
    let env = fake_xclip(clip.path(), "TARGETS\nUTF8_STRING\nimage/png\n", "unused");
    let server = serve([done("a red dot"), done("got the text")]).await;
    let tmux = launch_env("clip", home.path(), work.path(), &server, &env);
    tmux.wait_for("Enter sends").await;
    tmux.send_text("what is ");
    tmux.send_key("C-v");
    tmux.wait_for("› what is [Image #1]").await;
    tmux.send_key("Enter");
    tmux.wait_for("✓ a red dot").await;
    server.wait_for_requests(1).await;
    let body = server.requests()[0].body.to_string();
    assert!(
        body.contains("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJ") && body.contains("image/png"),
        "{body}"
    );
    let runs = home.path().join("kaji-home/runs");
    let saved: Vec<_> = std::fs::read_dir(&runs)
        .unwrap()
        .flatten()
        .map(|e| e.path().join("images/image-1.png"))
        .filter(|p| p.is_file())
        .collect();
    assert_eq!(saved.len(), 1, "no image-1.png under {}", runs.display());
    assert_eq!(std::fs::read(&saved[0]).unwrap(), PNG_BYTES);
    tmux.send_key("Enter");
    tmux.wait_for("[completed]").await;

    std::fs::write(clip.path().join("targets"), "TARGETS\nUTF8_STRING\n").unwrap();
    std::fs::write(clip.path().join("text"), "pasted words").unwrap();
    tmux.send_key("M-v");
    tmux.wait_for("› pasted words").await;
    tmux.send_key("Enter");
    tmux.wait_for("✓ got the text").await;
    tmux.send_key("Enter");
    tmux.wait_until("the second task's end", |s| {
        s.matches("[completed]").count() == 2
    })
    .await;
    assert_eq!(quit(&tmux, home.path()).await, "0");
}

/// Without a clipboard program Ctrl+V says so, once a session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_clipboard_program_is_said_once() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let empty = tempfile::tempdir().unwrap();
    let server = serve([Turn::text("unused")]).await;
    // A display, and a PATH without xclip (sh and env are found by path).
    let env = format!(
        "DISPLAY=:99 {}",
        quote(&format!("PATH={}", empty.path().display()))
    );
    let tmux = launch_env(
        "noclip",
        home.path(),
        work.path(),
        &server,
        &format!("-u WAYLAND_DISPLAY {env}"),
    );
    tmux.wait_for("Enter sends").await;
    tmux.send_key("C-v");
    tmux.wait_for("xclip is not installed").await;
    tmux.send_key("C-v");
    tmux.send_text("still here");
    let screen = tmux.wait_for("› still here").await;
    assert_eq!(
        screen.matches("xclip is not installed").count(),
        1,
        "{screen}"
    );
    // Ctrl-C empties the input; then Ctrl-D quits.
    tmux.send_key("C-c");
    tmux.wait_until("an empty input", |s| !s.contains("› still here"))
        .await;
    assert_eq!(quit(&tmux, home.path()).await, "0");
}

/// `/review` sends the diff in plan mode and comes back to the mode it
/// was in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slash_review_reviews_the_diff_read_only() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let git = |args: &[&str]| {
        kaji_test_support::fixtures::git(work.path(), args);
    };
    std::fs::write(
        work.path().join("lib.rs"),
        "fn f(x: &[i32]) -> i32 { x[0] }\n",
    )
    .unwrap();
    git(&["init", "-q"]);
    git(&["add", "."]);
    git(&["commit", "-q", "-m", "init"]);
    std::fs::write(
        work.path().join("lib.rs"),
        "fn f(x: &[i32]) -> i32 { x[x.len() - 1] }\n",
    )
    .unwrap();
    let server = serve([
        Turn::tool_call("Write", json!({"file_path": "lib.rs", "content": "oops"})),
        Turn::text("lib.rs:1 [high] panics on an empty slice"),
    ])
    .await;
    let tmux = launch("review", home.path(), work.path(), &server);
    tmux.wait_for("scripted · default").await;
    submit(&tmux, "/review").await;
    tmux.wait_for("lib.rs:1 [high] panics on an empty slice")
        .await;
    let screen = tmux.wait_for("scripted · default").await;
    assert!(
        screen.contains("reviewing the working tree against HEAD"),
        "{screen}"
    );
    let first = server.requests()[0].messages()[0].to_string();
    assert!(
        first.contains("+fn f(x: &[i32]) -> i32 { x[x.len() - 1] }"),
        "{first}"
    );
    // Plan mode refused the write without asking.
    assert_eq!(
        std::fs::read_to_string(work.path().join("lib.rs")).unwrap(),
        "fn f(x: &[i32]) -> i32 { x[x.len() - 1] }\n"
    );
    assert_eq!(quit(&tmux, home.path()).await, "0");
}

/// #32: a long command that ran without an ask is folded under its line
/// and shown whole with Ctrl-O, its last line included; the status line
/// and `/status` say which sandbox commands run in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_command_that_ran_unasked_is_visible_whole() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let mut command = String::from("cat > notes.txt <<'EOF'\n");
    for i in 1..=38 {
        command.push_str(&format!("note {i}\n"));
    }
    command.push_str("EOF\nrm -f the-destructive-last-line.txt");
    assert_eq!(command.lines().count(), 41);
    let server = serve([
        Turn::tool_call("Bash", json!({"command": command})),
        Turn::text("Wrote the notes."),
    ])
    .await;
    let sandboxed = kaji_sandbox::probe().is_complete();
    // Unasked: in the sandbox where the kernel has one, else in yolo.
    let extra = if sandboxed { "" } else { "--yolo" };
    let tmux = launch_with("longcmd", home.path(), work.path(), &server, "tui", extra);
    let screen = tmux.wait_for("Enter sends").await;
    if sandboxed {
        assert!(
            screen.contains("default · sandbox: workspace-write"),
            "{screen}"
        );
    } else {
        assert!(screen.contains("yolo · sandbox off"), "{screen}");
    }
    submit(&tmux, "write notes").await;
    let screen = tmux.wait_for("[completed]").await;
    assert!(!screen.contains("Run this command?"), "{screen}");
    assert!(screen.contains("(+40 lines, Ctrl-O)"), "{screen}");
    assert!(!screen.contains("the-destructive-last-line"), "{screen}");
    assert_eq!(
        std::fs::read_to_string(work.path().join("notes.txt"))
            .unwrap()
            .lines()
            .count(),
        38
    );
    tmux.send_key("C-o");
    let screen = tmux.wait_for("rm -f the-destructive-last-line.txt").await;
    assert!(screen.contains("note 38"), "{screen}");
    tmux.send_key("C-o");

    tmux.send_text("/status");
    tmux.send_key("Enter");
    let screen = tmux.wait_for("permission mode:").await;
    if sandboxed {
        assert!(
            screen.contains("sandbox: workspace-write — commands run without asking"),
            "{screen}"
        );
    } else {
        assert!(screen.contains("sandbox off"), "{screen}");
    }
    assert_eq!(quit(&tmux, home.path()).await, "0");
}

/// #32: a sub-agent's run folds under its `Agent` call (its prompt is not
/// shown as the user's, its end is not the task's), opens with Ctrl-O, and
/// `/agents` lists it once it has finished.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sub_agent_is_folded_under_its_agent_call() {
    const HELPER: &str = "TUI-HELPER-AGENT-MARKER";
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let script = Helper {
        marker: HELPER,
        description: "look",
        prompt: "sub-agent-prompt-text",
        says: "The helper found it.",
        then: "All done here.",
    }
    .install(work.path());
    let server = ScriptedModelServer::start(script).await;
    let tmux = launch_with("nest", home.path(), work.path(), &server, "tui", "--yolo");
    tmux.wait_for("Enter sends").await;
    submit(&tmux, "use the helper").await;
    let screen = tmux.wait_for("All done here.").await;
    assert!(screen.contains("agent helper-"), "{screen}");
    assert!(screen.contains("1 tool use(s)"), "{screen}");
    assert!(screen.contains("completed after 2 turn(s)"), "{screen}");
    assert!(!screen.contains("sub-agent-prompt-text"), "{screen}");
    assert!(!screen.contains("from-the-helper"), "{screen}");
    let screen = tmux.wait_for("[completed]").await;
    assert_eq!(screen.matches("[completed]").count(), 1, "{screen}");

    tmux.send_key("C-o");
    let screen = tmux.wait_for("prompt: sub-agent-prompt-text").await;
    assert!(screen.contains("Bash: echo from-the-helper"), "{screen}");
    tmux.send_key("C-o");

    tmux.send_text("/agents");
    tmux.send_key("Enter");
    tmux.wait_for("✓ agent helper-").await;
    assert_eq!(quit(&tmux, home.path()).await, "0");
}

/// #32: a session continued after `/compact` shows its earlier
/// conversation (dimmed) and the summary, not an empty screen.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compacted_session_continued_shows_the_summary_and_what_came_before() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let server = ScriptedModelServer::start(
        Script::new([
            // Long enough that its summary is shorter (compaction only
            // shrinks).
            Turn::text(format!("the-first-answer {}", "padding ".repeat(200))),
            Turn::text("SUMMARY-OF-IT-ALL: a question was answered."),
        ])
        .with_route("[COMPACTION]", 1),
    )
    .await;
    let tmux = launch("compacted", home.path(), work.path(), &server);
    tmux.wait_for("Enter sends").await;
    submit(&tmux, "the first question").await;
    tmux.wait_for("[completed]").await;
    submit(&tmux, "/compact").await;
    server.wait_for_requests(2).await;
    tmux.wait_for("Context compacted").await;
    tmux.wait_until("compaction done", |s| !s.contains("working…"))
        .await;
    assert_eq!(quit(&tmux, home.path()).await, "0");
    drop(tmux);

    std::fs::remove_file(home.path().join("exit-code")).unwrap();
    let tmux = launch_with("compacted2", home.path(), work.path(), &server, "", "-c");
    let screen = tmux.wait_for("Enter sends").await;
    assert!(
        screen.contains("earlier conversation, before it was compacted"),
        "{screen}"
    );
    assert!(screen.contains("the first question"), "{screen}");
    assert!(screen.contains("the-first-answer"), "{screen}");
    assert!(screen.contains("SUMMARY-OF-IT-ALL"), "{screen}");
    assert_eq!(quit(&tmux, home.path()).await, "0");
}

/// A fake `wl-paste` in `dir/bin` answering from `dir`: `types` for
/// `--list-types`, `image.png` for `--type image/png`, `text` otherwise.
/// (No compositor is needed: kaji runs whatever `wl-paste` is on PATH when
/// `WAYLAND_DISPLAY` is set.) The `env` words for [`launch_env`].
fn fake_wl_paste(dir: &Path, types: &str, text: &str) -> String {
    use std::os::unix::fs::PermissionsExt as _;
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::write(dir.join("types"), types).unwrap();
    std::fs::write(dir.join("text"), text).unwrap();
    std::fs::write(dir.join("image.png"), PNG_BYTES).unwrap();
    let d = dir.to_str().unwrap();
    let script = format!(
        "#!/bin/sh\necho \"$*\" >> '{d}/calls'\ncase \"$*\" in\n  *--list-types*) cat '{d}/types' ;;\n  *image/png*) cat '{d}/image.png' ;;\n  *) cat '{d}/text' ;;\nesac\n"
    );
    let wl_paste = bin.join("wl-paste");
    std::fs::write(&wl_paste, script).unwrap();
    std::fs::set_permissions(&wl_paste, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    format!(
        "-u DISPLAY WAYLAND_DISPLAY=wayland-test {}",
        quote(&format!("PATH={path}"))
    )
}

/// Under Wayland, Ctrl+V reads the clipboard with `wl-paste`: an image is
/// attached as `[Image #1]`, text is pasted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_v_reads_a_wayland_clipboard_with_wl_paste() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let clip = tempfile::tempdir().unwrap();
    let env = fake_wl_paste(clip.path(), "text/plain\nimage/png\n", "unused");
    let server = ScriptedModelServer::start(Script::new([
        Turn::tool_call("AttemptCompletion", json!({"result": "a red dot"})),
        Turn::tool_call("AttemptCompletion", json!({"result": "got the text"})),
    ]))
    .await;
    let tmux = launch_env("wlclip", home.path(), work.path(), &server, &env);
    tmux.wait_for("Enter sends").await;
    tmux.send_text("what is ");
    tmux.send_key("C-v");
    tmux.wait_for("› what is [Image #1]").await;
    tmux.send_key("Enter");
    tmux.wait_for("✓ a red dot").await;
    server.wait_for_requests(1).await;
    let body = server.requests()[0].body.to_string();
    assert!(
        body.contains("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJ") && body.contains("image/png"),
        "{body}"
    );
    let calls = std::fs::read_to_string(clip.path().join("calls")).unwrap();
    assert!(
        calls.contains("--list-types") && calls.contains("--no-newline --type image/png"),
        "{calls}"
    );
    tmux.send_key("Enter");
    tmux.wait_for("[completed]").await;

    std::fs::write(clip.path().join("types"), "text/plain;charset=utf-8\n").unwrap();
    std::fs::write(clip.path().join("text"), "wayland words").unwrap();
    tmux.send_key("C-v");
    tmux.wait_for("› wayland words").await;
    tmux.send_key("Enter");
    tmux.wait_for("✓ got the text").await;
    tmux.send_key("Enter");
    tmux.wait_until("the second task's end", |s| {
        s.matches("[completed]").count() == 2
    })
    .await;
    assert_eq!(quit(&tmux, home.path()).await, "0");
}
