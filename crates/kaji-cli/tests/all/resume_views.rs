//! #32, in a real terminal (tmux): what a continued, resumed or forked
//! session shows. `/model` survives `kaji -c` (status line and requests);
//! after `/compact`, `/fork` and `/resume` show the conversation from before
//! the compaction, dimmed, above the summary.

use std::path::Path;

use kaji_test_support::{Script, ScriptedModelServer, Turn};

use crate::common::tmux::{Tmux, quit, quote, submit};

/// `kaji ARGS` (the model left to the caller) in a private tmux server;
/// the shell around it writes kaji's exit status to `<home>/exit-code`.
fn launch(name: &str, home: &Path, work: &Path, server: &ScriptedModelServer, args: &str) -> Tmux {
    let _ = std::fs::remove_file(home.join("exit-code"));
    let tmux = Tmux::start(home, name).expect("tmux is needed for this test");
    let command = format!(
        "{} {args} --provider anthropic --base-url {} -C {} --sandbox off; echo $? > {}",
        quote(env!("CARGO_BIN_EXE_kaji")),
        quote(&server.anthropic_base_url()),
        quote(work.to_str().unwrap()),
        quote(home.join("exit-code").to_str().unwrap()),
    );
    let out = tmux
        .run(&["respawn-pane", "-k", "-t", "main", &command])
        .unwrap();
    assert!(out.status.success(), "respawn-pane: {out:?}");
    tmux
}

/// The ids of the saved sessions, oldest first.
fn session_ids(home: &Path) -> Vec<String> {
    let dir = home.join("kaji-home/sessions");
    let mut files: Vec<(std::time::SystemTime, String)> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let id = name
                .strip_suffix(".jsonl")
                .filter(|id| *id != "index")?
                .to_string();
            Some((e.metadata().ok()?.created().ok()?, id))
        })
        .collect();
    files.sort();
    files.into_iter().map(|(_, id)| id).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_chosen_with_slash_model_survives_kaji_c() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let server = ScriptedModelServer::start(Script::new([
        Turn::text("first answer"),
        Turn::text("second answer"),
    ]))
    .await;
    let tmux = launch(
        "model1",
        home.path(),
        work.path(),
        &server,
        "tui --model scripted",
    );
    tmux.wait_for("Enter sends").await;
    submit(&tmux, "a first question").await;
    tmux.wait_for("first answer").await;
    submit(&tmux, "/model picked-model").await;
    tmux.wait_for("model: picked-model from the next prompt on")
        .await;
    assert_eq!(quit(&tmux, home.path()).await, "0");
    drop(tmux);

    // Continued without --model: the status line and the next request
    // carry the model /model chose.
    let tmux = launch("model2", home.path(), work.path(), &server, "-c");
    let screen = tmux.wait_for("Enter sends").await;
    assert!(screen.contains("picked-model"), "{screen}");
    submit(&tmux, "a second question").await;
    tmux.wait_for("second answer").await;
    assert_eq!(server.requests()[1].body["model"], "picked-model");
    assert_eq!(quit(&tmux, home.path()).await, "0");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_compact_fork_and_resume_show_the_earlier_conversation() {
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
    let tmux = launch(
        "forked",
        home.path(),
        work.path(),
        &server,
        "tui --model scripted",
    );
    tmux.wait_for("Enter sends").await;
    submit(&tmux, "the first question").await;
    tmux.wait_for("[completed]").await;
    submit(&tmux, "/compact").await;
    server.wait_for_requests(2).await;
    tmux.wait_for("Context compacted").await;
    tmux.wait_until("compaction done", |s| !s.contains("working…"))
        .await;
    let original = session_ids(home.path()).pop().unwrap();

    let shows_it_all = |screen: &str| {
        screen.contains("earlier conversation, before it was compacted")
            && screen.contains("the first question")
            && screen.contains("the-first-answer")
            && screen.contains("SUMMARY-OF-IT-ALL")
    };
    submit(&tmux, "/fork").await;
    tmux.wait_for("forked into session").await;
    let screen = tmux.capture_all();
    assert!(shows_it_all(&screen), "{screen}");

    submit(&tmux, &format!("/resume {original}")).await;
    tmux.wait_for("resumed session").await;
    let screen = tmux.capture_all();
    assert!(shows_it_all(&screen), "{screen}");
    assert_eq!(quit(&tmux, home.path()).await, "0");
    drop(tmux);

    // The fork, resumed later, still has what came before, and the model
    // its original chose.
    let fork = session_ids(home.path())
        .into_iter()
        .find(|id| *id != original)
        .unwrap();
    let tmux = launch(
        "forked2",
        home.path(),
        work.path(),
        &server,
        &format!("resume {fork}"),
    );
    let screen = tmux.wait_for("Enter sends").await;
    assert!(screen.contains("scripted"), "{screen}");
    let screen = if shows_it_all(&screen) {
        screen
    } else {
        tmux.capture_all()
    };
    assert!(shows_it_all(&screen), "{screen}");
    assert_eq!(quit(&tmux, home.path()).await, "0");
}
