//! `kaji rules` through the real binary: what would be loaded, in order,
//! as text and as JSON; a missing directory is exit code 2.

use std::path::Path;

use serde_json::Value;

use crate::common::kaji_at;

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, text).expect("write");
}

fn kaji_rules(home: &Path, args: &[&str]) -> std::process::Output {
    kaji_at(home)
        .arg("rules")
        .args(args)
        .output()
        .expect("kaji rules runs")
}

#[test]
fn lists_rule_files_in_prompt_order() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let home = tmp.path().join("home");
    let repo = tmp.path().join("repo");
    let sub = repo.join("sub");
    std::fs::create_dir_all(repo.join(".git")).expect("mkdir");
    write(&home.join("rules/global.md"), "be careful");
    write(&repo.join("AGENTS.md"), "root rules");
    write(&repo.join(".clinerules/style.md"), "style");
    write(&sub.join("CLAUDE.md"), "sub rules");
    std::fs::write(sub.join("AGENTS.md"), b"\xff\xfe").expect("write");

    let sub_str = sub.to_str().expect("utf-8 path");
    let text = kaji_rules(&home, &["-C", sub_str]);
    assert_eq!(text.status.code(), Some(0));
    let stdout = String::from_utf8_lossy(&text.stdout);
    let lines: Vec<&str> = stdout.lines().skip(1).collect();
    assert_eq!(lines.len(), 4, "{stdout}");
    assert!(
        lines[0].contains("global") && lines[0].contains("global.md"),
        "{stdout}"
    );
    assert!(
        lines[1].contains("project") && lines[1].ends_with("AGENTS.md (10 bytes)"),
        "{stdout}"
    );
    assert!(lines[2].contains(".clinerules/style.md"), "{stdout}");
    assert!(lines[3].contains("sub/CLAUDE.md"), "{stdout}");
    let stderr = String::from_utf8_lossy(&text.stderr);
    assert!(
        stderr.contains("sub/AGENTS.md") && stderr.contains("UTF-8"),
        "{stderr}"
    );

    let json = kaji_rules(&home, &["-C", sub_str, "--json"]);
    assert_eq!(json.status.code(), Some(0));
    let value: Value = serde_json::from_slice(&json.stdout).expect("json");
    let files = value["files"].as_array().expect("files");
    let scopes: Vec<&str> = files
        .iter()
        .map(|f| f["scope"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(scopes, ["global", "project", "project", "project"]);
    assert_eq!(files[1]["size"], 10);
    assert_eq!(files[1]["truncated"], false);
    assert_eq!(value["warnings"].as_array().map(Vec::len), Some(1));
}

#[test]
fn nothing_found_and_missing_directories() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let home = tmp.path().join("home");
    let empty = tmp.path().join("empty");
    std::fs::create_dir_all(&empty).expect("mkdir");
    let out = kaji_rules(&home, &["-C", empty.to_str().expect("utf-8")]);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("No rule files"));

    let missing = tmp.path().join("missing");
    let out = kaji_rules(&home, &["-C", missing.to_str().expect("utf-8")]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("missing"));
}
