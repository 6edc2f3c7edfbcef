//! `kaji agents list` through the real binary: built-in, user, project and
//! Claude Code agent files, where each comes from, warnings for unknown
//! keys, `.kaji` winning a name clash.

use std::path::Path;

use serde_json::Value;

use crate::common::{kaji_at, kaji_sync};

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, text).expect("write");
}

#[test]
fn lists_every_agent_type_and_its_source() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let home = tmp.path().join("kaji-home");
    let user_home = tmp.path().join("user");
    let repo = tmp.path().join("repo");
    write(
        &home.join("agents/tester.md"),
        "---\nname: tester\ndescription: Runs tests\n---\nTest.\n",
    );
    write(
        &user_home.join(".claude/agents/old.md"),
        "---\nname: old-claude\ndescription: From Claude Code\ncolor: red\nmemory: user\n---\nOld.\n",
    );
    write(
        &repo.join(".claude/agents/rev.md"),
        "---\nname: reviewer\ndescription: claude version\n---\nC.\n",
    );
    write(
        &repo.join(".claude/agents/web/researcher.md"),
        "---\nname: researcher\ndescription: >\n  Searches\n  the web\ntools: [Read, WebSearch, BrowseTheWeb]\n---\nR.\n",
    );
    write(
        &repo.join(".kaji/agents/rev.md"),
        "---\nname: reviewer\ndescription: kaji version\ntools: Read, Grep\nmaxTurns: 4\n---\nK.\n",
    );
    let run = |json: bool| {
        let mut cmd = kaji_sync(&user_home);
        cmd.env("KAJI_HOME", &home)
            .args(["agents", "list", "-C"])
            .arg(&repo);
        if json {
            cmd.arg("--json");
        }
        cmd.output().expect("runs")
    };
    let out = run(true);
    assert_eq!(out.status.code(), Some(0));
    let value: Value = serde_json::from_slice(&out.stdout).expect("json");
    let agents = value["agents"].as_array().expect("agents");
    let names: Vec<&str> = agents.iter().filter_map(|a| a["name"].as_str()).collect();
    for name in [
        "general-purpose",
        "Explore",
        "Plan",
        "tester",
        "old-claude",
        "reviewer",
        "researcher",
    ] {
        assert!(names.contains(&name), "{name} missing from {names:?}");
    }
    let reviewer = agents
        .iter()
        .find(|a| a["name"] == "reviewer")
        .expect("reviewer");
    assert_eq!(reviewer["description"], "kaji version");
    assert_eq!(reviewer["max_turns"], 4);
    assert!(
        reviewer["source"]
            .as_str()
            .unwrap_or("")
            .contains(".kaji/agents/rev.md")
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    // `color` is Claude Code's display colour: read and unused, no warning.
    assert!(stderr.contains("unknown key `memory`"), "{stderr}");
    assert!(!stderr.contains("`color`"), "{stderr}");
    assert!(stderr.contains("BrowseTheWeb (researcher)"), "{stderr}");
    assert!(!stderr.contains("WebSearch (researcher)"), "{stderr}");
    let researcher = agents
        .iter()
        .find(|a| a["name"] == "researcher")
        .expect("researcher in a subfolder");
    assert_eq!(researcher["description"], "Searches the web");

    let text = run(false);
    let stdout = String::from_utf8_lossy(&text.stdout);
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("Explore") && l.contains("built-in")),
        "{stdout}"
    );
}

#[test]
fn a_missing_directory_is_exit_code_2() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = kaji_at(tmp.path())
        .args(["agents", "list", "-C"])
        .arg(tmp.path().join("nope"))
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
}
