//! `kaji permissions` and `kaji trust` through the real binary: rules added
//! to the right file without disturbing the rest of it, decisions with the
//! rule and file that made them, untrusted project rules marked ignored,
//! and bad input refused without touching anything.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::common::{kaji_sync, output};

struct Env {
    _tmp: tempfile::TempDir,
    home: PathBuf,
    kaji_home: PathBuf,
    repo: PathBuf,
}

fn env() -> Env {
    let tmp = tempfile::tempdir().expect("tempdir");
    let home = tmp.path().join("home");
    let kaji_home = home.join(".kaji");
    let repo = tmp.path().join("repo");
    std::fs::create_dir_all(repo.join(".git")).expect("mkdir");
    std::fs::create_dir_all(repo.join("src")).expect("mkdir");
    std::fs::create_dir_all(&kaji_home).expect("mkdir");
    let repo = repo.canonicalize().expect("canonical");
    Env {
        _tmp: tmp,
        home,
        kaji_home,
        repo,
    }
}

impl Env {
    fn kaji(&self, args: &[&str]) -> (i32, String, String) {
        output(
            kaji_sync(&self.home)
                .env("KAJI_HOME", &self.kaji_home)
                .current_dir(self.repo.join("src"))
                .args(args),
        )
    }

    fn check_json(&self, command: &str) -> Value {
        let (code, stdout, stderr) = self.kaji(&["permissions", "check", "--json", command]);
        assert_eq!(code, 0, "{stderr}");
        serde_json::from_str(&stdout).expect("check --json prints JSON")
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

#[test]
fn add_list_check_rm_with_the_file_each_rule_came_from() {
    let e = env();
    let local = e.repo.join(".kaji/config.local.toml");
    let (code, stdout, stderr) = e.kaji(&["permissions", "add", "Bash(cargo test *)"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("Bash(cargo test:*)"), "{stdout}");
    assert!(
        read(&local).contains("\"Bash(cargo test:*)\""),
        "{}",
        read(&local)
    );
    let (code, _, stderr) = e.kaji(&[
        "permissions",
        "add",
        "Bash(rm:*)",
        "--deny",
        "--scope",
        "user",
    ]);
    assert_eq!(code, 0, "{stderr}");

    // Untrusted: the local allow rule is reported but ignored.
    let d = e.check_json("cargo test --all");
    assert_eq!(d["rules_decision"], "ask", "{d}");
    assert_eq!(d["rule"], Value::Null);
    assert_eq!(d["ignored"][0]["rule"], "Bash(cargo test:*)", "{d}");
    // Without the sandbox the session asks (with it, the command would
    // run confined: `allow (sandboxed)`).
    let (_, text, _) = e.kaji(&["permissions", "check", "cargo test", "--sandbox", "off"]);
    assert!(text.starts_with("ask\n"), "{text}");
    assert!(text.contains("ignored: Bash(cargo test:*)"), "{text}");
    assert!(text.contains("config.local.toml"), "{text}");
    let (_, listing, _) = e.kaji(&["permissions", "list"]);
    assert!(listing.contains("not trusted"), "{listing}");
    assert!(listing.contains("ignored"), "{listing}");

    // Deny rules count either way, and beat allow rules anywhere in the line.
    let d = e.check_json("cargo test; rm -rf target");
    assert_eq!(d["rules_decision"], "deny", "{d}");
    assert_eq!(d["rule"], "Bash(rm:*)");
    assert!(
        d["source"].as_str().unwrap_or("").ends_with("config.toml"),
        "{d}"
    );

    let (code, stdout, stderr) = e.kaji(&["trust"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains(&e.repo.display().to_string()), "{stdout}");
    let d = e.check_json("cargo test --all");
    assert_eq!(d["rules_decision"], "allow", "{d}");
    assert_eq!(d["rule"], "Bash(cargo test:*)");
    assert_eq!(d["scope"], "local");
    assert!(
        d["source"]
            .as_str()
            .unwrap_or("")
            .ends_with(".kaji/config.local.toml"),
        "{d}"
    );
    assert_eq!(
        e.check_json("cargo test && touch X")["rules_decision"],
        "ask"
    );
    assert_eq!(
        e.check_json("cargo test > /tmp/outside")["rules_decision"],
        "ask"
    );
    assert_eq!(e.check_json("git status && ls")["rules_decision"], "allow");

    let (code, stdout, _) = e.kaji(&["permissions", "rm", "Bash(cargo test:*)"]);
    assert_eq!(code, 0);
    assert!(stdout.contains("Removed"), "{stdout}");
    assert_eq!(e.check_json("cargo test")["rules_decision"], "ask");
    let (code, _, stderr) = e.kaji(&["permissions", "rm", "Bash(cargo test:*)"]);
    assert_eq!(code, 1, "{stderr}");
}

#[test]
fn add_keeps_the_rest_of_the_file_and_bad_input_changes_nothing() {
    let e = env();
    let project = e.repo.join(".kaji/config.toml");
    let original = "# the team's settings\nmodel = \"m\" # pinned\n\n[permissions]\nallow = [\"Bash(make check)\"]\n";
    std::fs::create_dir_all(project.parent().expect("parent")).expect("mkdir");
    std::fs::write(&project, original).expect("write");
    let (code, _, stderr) = e.kaji(&["permissions", "add", "Edit(src/**)", "--scope", "project"]);
    assert_eq!(code, 0, "{stderr}");
    let now = read(&project);
    assert!(
        now.starts_with("# the team's settings\nmodel = \"m\" # pinned\n"),
        "{now}"
    );
    assert!(
        now.contains("\"Bash(make check)\", \"Edit(src/**)\""),
        "{now}"
    );
    let (code, stdout, _) = e.kaji(&["permissions", "add", "Edit(src/**)", "--scope", "project"]);
    assert_eq!(code, 0);
    assert!(stdout.contains("already"), "{stdout}");

    let (code, _, stderr) = e.kaji(&[
        "permissions",
        "add",
        "Bash(git * main)",
        "--scope",
        "project",
    ]);
    assert_eq!(code, 2);
    assert!(stderr.contains("Bash(git * main)"), "{stderr}");
    assert_eq!(read(&project), now);

    let user = e.kaji_home.join("config.toml");
    std::fs::write(&user, "permission_mode = \"nope\"\n").expect("write");
    let (code, _, stderr) = e.kaji(&["permissions", "add", "Bash(ls)", "--scope", "user"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("permission_mode"), "{stderr}");
    assert_eq!(read(&user), "permission_mode = \"nope\"\n");
}

#[test]
fn protected_paths_ask_and_always_is_narrow() {
    let e = env();
    e.kaji(&["trust"]);
    let (_, _, stderr) = e.kaji(&["permissions", "add", "Edit"]);
    assert!(stderr.is_empty(), "{stderr}");
    for protected in ["../.git/config", "../.kaji/config.toml", "../.kajiignore"] {
        let (code, stdout, _) = e.kaji(&["permissions", "check", "--tool", "Edit", protected]);
        assert_eq!(code, 0);
        assert!(stdout.starts_with("ask\n"), "{protected}: {stdout}");
        assert!(stdout.contains("protected"), "{stdout}");
    }
    let (_, stdout, _) = e.kaji(&["permissions", "check", "--tool", "Edit", "main.rs"]);
    assert!(stdout.starts_with("allow\n"), "{stdout}");

    e.kaji(&["permissions", "add", "Bash(python3 -m unittest -v)"]);
    assert_eq!(
        e.check_json("python3 -m unittest -v")["rules_decision"],
        "allow"
    );
    assert_eq!(
        e.check_json("python3 -m unittest -v; touch INJECTED")["rules_decision"],
        "ask"
    );
    assert_eq!(
        e.check_json("python3 -c 'import os; os.system(\"x\")'")["rules_decision"],
        "ask"
    );
}

#[test]
fn trust_and_revoke_record_the_project_directory() {
    let e = env();
    let (code, _, stderr) = e.kaji(&["trust", e.repo.join("src").to_str().expect("utf-8")]);
    assert_eq!(code, 0, "{stderr}");
    let file = read(&e.kaji_home.join("trusted.toml"));
    assert!(file.contains("[[project]]"), "{file}");
    assert!(
        file.contains(&format!("path = \"{}\"", e.repo.display())),
        "{file}"
    );
    assert!(file.contains("trusted = true"), "{file}");
    assert!(file.contains("at = \""), "{file}");
    assert_eq!(e.check_json("git status")["rules_decision"], "allow");

    let (code, _, _) = e.kaji(&["trust", "--revoke"]);
    assert_eq!(code, 0);
    let file = read(&e.kaji_home.join("trusted.toml"));
    assert!(file.contains("trusted = false"), "{file}");
    assert_eq!(file.matches("[[project]]").count(), 1, "{file}");
    let d = e.check_json("git status");
    assert_eq!(d["rules_decision"], "ask", "{d}");
    assert!(
        d["reason"].as_str().unwrap_or("").contains("trusted"),
        "{d}"
    );

    let (code, _, stderr) = e.kaji(&["trust", "/no/such/dir"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("/no/such/dir"), "{stderr}");
}
