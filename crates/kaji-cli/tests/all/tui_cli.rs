//! The command line around the TUI, through the real binary: near-miss
//! subcommands, prompts of several words, `kaji -- WORDS`, print mode
//! (`kaji -p`, `kaji -p -c`) against the scripted model server, and
//! `kaji completions`.

use std::path::Path;
use std::process::Output;

use crate::common::{TEST_KEY, done, kaji_sync, serve, stderr};

fn kaji(home: &Path, args: &[&str]) -> Output {
    kaji_sync(home)
        .env("ANTHROPIC_API_KEY", TEST_KEY)
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn a_near_miss_of_a_subcommand_says_so_and_exits_2() {
    let home = tempfile::tempdir().unwrap();
    let out = kaji(home.path(), &["exce", "--help"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("did you mean `kaji exec`?"),
        "{}",
        stderr(&out)
    );
    // Nothing was started: no session was saved.
    assert!(!home.path().join("kaji-home/sessions").exists());
}

#[test]
fn prompts_of_many_words_and_after_double_dash_open_the_ui() {
    let home = tempfile::tempdir().unwrap();
    // Without a terminal the UI says it needs one: the words reached it
    // as a prompt (no clap error, no near miss).
    for args in [
        &["fix", "the", "bug"][..],
        &["--", "exce"],
        &["--", "exec", "now"],
    ] {
        let out = kaji(home.path(), args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("must be a terminal"),
            "{args:?}: {}",
            stderr(&out)
        );
    }
}

#[test]
fn completions_for_bash_zsh_and_fish() {
    let home = tempfile::tempdir().unwrap();
    for shell in ["bash", "zsh", "fish"] {
        let out = kaji(home.path(), &["completions", shell]);
        assert!(out.status.success(), "{shell}: {}", stderr(&out));
        let script = String::from_utf8_lossy(&out.stdout);
        assert!(script.contains("kaji"), "{shell}: {script}");
        assert!(script.contains("exec"), "{shell}: {script}");
    }
    let out = kaji(home.path(), &["completions", "tcsh"]);
    assert_eq!(out.status.code(), Some(2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn print_mode_is_exec_and_dash_c_continues() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let server = serve([done("first answer"), done("second answer")]).await;
    let base = server.anthropic_base_url();
    let dir = work.path().to_str().unwrap().to_string();
    let common = [
        "--provider",
        "anthropic",
        "--base-url",
        base.as_str(),
        "--model",
        "scripted",
        "-C",
        dir.as_str(),
    ];
    let home_path = home.path().to_path_buf();
    let mut args = vec!["-p"];
    args.extend(common);
    args.extend(["say", "one"]);
    let first = tokio::task::spawn_blocking({
        let home = home_path.clone();
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            kaji(&home, &args)
        }
    })
    .await
    .unwrap();
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));
    assert!(
        String::from_utf8_lossy(&first.stdout).contains("first answer"),
        "{first:?}"
    );
    let mut args = vec!["-p", "-c"];
    args.extend(common);
    args.extend(["say", "two"]);
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    let second = tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        kaji(&home_path, &args)
    })
    .await
    .unwrap();
    assert_eq!(second.status.code(), Some(0), "{}", stderr(&second));
    server.wait_for_requests(2).await;
    let body = server.requests()[1].body.to_string();
    assert!(
        body.contains("say one") && body.contains("say two"),
        "the second prompt continues the first: {body}"
    );
}
