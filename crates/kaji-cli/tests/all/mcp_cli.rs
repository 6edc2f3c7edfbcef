//! `kaji mcp list` through the real binary, against the real
//! `@modelcontextprotocol/server-everything` (install the test servers with
//! `npm ci --prefix tests/mcp-servers`): user and project configuration
//! merged, a connected server with its tools, a failed one with why, a
//! disabled one, and a malformed configuration file.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::common::kaji_at;

/// A `$KAJI_HOME` and a project directory with the given config files.
fn setup(user_config: &str, project_config: &str) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path().join("home");
    let project = dir.path().join("project");
    std::fs::create_dir_all(&home).expect("mkdir home");
    std::fs::create_dir_all(project.join(".kaji")).expect("mkdir project");
    std::fs::write(home.join("config.toml"), user_config).expect("write user config");
    std::fs::write(project.join(".kaji/config.toml"), project_config)
        .expect("write project config");
    (dir, home, project)
}

fn kaji_mcp_list(home: &Path, project: &Path, json: bool) -> std::process::Output {
    let mut cmd = kaji_at(home);
    cmd.current_dir(project).args(["mcp", "list"]);
    if json {
        cmd.arg("--json");
    }
    cmd.output().expect("kaji mcp list runs")
}

fn configs() -> (String, String) {
    let bin = kaji_test_support::fixtures::mcp_server_bin("mcp-server-everything");
    let user = format!(
        "[mcp_servers.everything]\ncommand = {:?}\nargs = [\"stdio\"]\n\n\
         [mcp_servers.ghost]\ncommand = \"/nonexistent/kaji-no-such-mcp-server\"\n",
        bin.to_string_lossy()
    );
    let project =
        "[mcp_servers.off]\ncommand = \"/nonexistent/never-run\"\nenabled = false\n".to_string();
    (user, project)
}

#[test]
fn lists_servers_status_and_tools_as_json() {
    let (user, project_config) = configs();
    let (_dir, home, project) = setup(&user, &project_config);
    let output = kaji_mcp_list(&home, &project, true);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        output.status.code(),
        Some(3),
        "a failed server (ghost) makes the exit code 3; stderr: {stderr}"
    );
    let reports: Value = serde_json::from_slice(&output.stdout).expect("JSON on stdout");
    let reports = reports.as_array().expect("an array");
    let names: Vec<&str> = reports.iter().filter_map(|r| r["name"].as_str()).collect();
    assert_eq!(names, ["everything", "ghost", "off"]);

    let everything = &reports[0];
    assert_eq!(everything["transport"], "stdio");
    assert_eq!(everything["status"]["state"], "connected");
    let tools: Vec<&str> = everything["status"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["qualified_name"].as_str())
        .collect();
    assert!(tools.contains(&"mcp__everything__echo"), "{tools:?}");

    let ghost = &reports[1];
    assert_eq!(ghost["status"]["state"], "failed");
    let why = ghost["status"]["why"].as_str().expect("why");
    assert!(
        why.contains("cannot start `/nonexistent/kaji-no-such-mcp-server`"),
        "{why}"
    );

    assert_eq!(reports[2]["status"]["state"], "disabled");
}

#[test]
fn lists_servers_as_a_table() {
    let (user, project_config) = configs();
    let (_dir, home, project) = setup(&user, &project_config);
    let output = kaji_mcp_list(&home, &project, false);
    assert_eq!(output.status.code(), Some(3), "{output:?}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line_of = |name: &str| {
        stdout
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no line for {name} in:\n{stdout}"))
            .to_string()
    };
    assert!(line_of("everything").contains("connected ("), "{stdout}");
    assert!(stdout.contains("    mcp__everything__echo"), "{stdout}");
    assert!(
        line_of("ghost").contains("failed: cannot start"),
        "{stdout}"
    );
    assert!(line_of("off").ends_with("disabled"), "{stdout}");
}

#[test]
fn a_malformed_config_is_an_error_naming_file_line_and_key() {
    let (_dir, home, project) = setup(
        "",
        "[mcp_servers.x]\ncommand = \"a\"\nurll = \"http://h\"\n",
    );
    let output = kaji_mcp_list(&home, &project, false);
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains(".kaji/config.toml"), "{stderr}");
    assert!(stderr.contains("config.toml:3:"), "{stderr}");
    assert!(stderr.contains("urll"), "{stderr}");
}

#[test]
fn no_servers_is_not_an_error() {
    let (_dir, home, project) = setup("", "");
    let output = kaji_mcp_list(&home, &project, true);
    assert!(output.status.success(), "{output:?}");
    let reports: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(reports, Value::Array(Vec::new()));
}

#[test]
fn exit_code_is_0_only_when_every_enabled_server_connected() {
    let bin = kaji_test_support::fixtures::mcp_server_bin("mcp-server-everything");
    let user = format!(
        "[mcp_servers.everything]\ncommand = {:?}\nargs = [\"stdio\"]\n",
        bin.to_string_lossy()
    );
    let disabled = "[mcp_servers.off]\ncommand = \"/nonexistent/never-run\"\nenabled = false\n";
    let (_dir, home, project) = setup(&user, disabled);
    let output = kaji_mcp_list(&home, &project, false);
    assert_eq!(output.status.code(), Some(0), "{output:?}");

    let dies = "[mcp_servers.dies]\ncommand = \"sh\"\nargs = [\"-c\", \"exit 2\"]\n";
    let (_dir, home, project) = setup(&user, dies);
    let output = kaji_mcp_list(&home, &project, true);
    assert_eq!(output.status.code(), Some(3), "{output:?}");
    let reports: Value = serde_json::from_slice(&output.stdout).expect("JSON still printed");
    assert_eq!(reports[0]["name"], "dies");
    assert_eq!(reports[0]["status"]["state"], "failed");
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("not connected: dies"),
        "{output:?}"
    );
}
