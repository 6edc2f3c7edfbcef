//! Loading and merging the settings files, and the errors for bad ones.

use std::time::Duration;

use kaji_core::PermissionMode;
use kaji_core::config::{ConfigError, KajiConfig};
use kaji_core::hooks::HookEvent;

use crate::common::{Layout, write};

fn invalid(err: ConfigError) -> (std::path::PathBuf, usize, String, String) {
    match err {
        ConfigError::Invalid {
            path,
            line,
            key,
            message,
            ..
        } => (path, line, key, message),
        other => panic!("expected Invalid, got {other:?}"),
    }
}

#[test]
fn no_files_means_defaults() {
    let l = Layout::new();
    let config = KajiConfig::load(&l.home, &l.sub).expect("load");
    assert!(config.sources().is_empty());
    assert!(config.hooks.is_empty());
    assert_eq!(config.model, None);
}

#[test]
fn project_settings_add_to_user_settings() {
    let l = Layout::new();
    let user = l.home.join("config.toml");
    write(
        &user,
        r#"
provider = "anthropic"
model = "user-model"
max_mistakes = 5

[[hooks.PreToolUse]]
command = "echo user"
matcher = "Bash"

[mcp_servers.fs]
command = "user-fs"

[mcp_servers.everything]
command = "npx"
args = ["server-everything"]
"#,
    );
    let project = l.repo.join(".kaji/config.toml");
    write(
        &project,
        r#"
model = "project-model"
permission_mode = "accept-edits"

[[hooks.PreToolUse]]
command = "echo project"
timeout = 5

[[hooks.TaskStart]]
command = "echo start"

[[hooks.SessionStart]]
command = "echo session"

[[hooks.Stop]]
command = "echo stop"

[[hooks.Notification]]
command = "echo note"

[mcp_servers.fs]
url = "http://localhost:1/mcp"
"#,
    );
    let config = KajiConfig::load(&l.home, &l.sub).expect("load");
    assert_eq!(config.sources(), &[user.clone(), project.clone()]);
    assert_eq!(config.provider.as_deref(), Some("anthropic"));
    assert_eq!(config.model.as_deref(), Some("project-model"));
    assert_eq!(config.max_mistakes, Some(5));
    assert_eq!(config.permission_mode, Some(PermissionMode::AcceptEdits));

    let pre = config.hooks.hooks(HookEvent::PreToolUse);
    let commands: Vec<&str> = pre.iter().map(|h| h.command.as_str()).collect();
    assert_eq!(commands, ["echo user", "echo project"]);
    assert_eq!(pre[0].matcher.as_ref().map(|m| m.pattern()), Some("Bash"));
    assert_eq!(pre[0].timeout, Duration::from_secs(60));
    assert_eq!(pre[1].timeout, Duration::from_secs(5));
    assert_eq!(pre[0].source.as_deref(), Some(user.as_path()));
    assert_eq!(pre[1].source.as_deref(), Some(project.as_path()));
    assert_eq!(config.hooks.hooks(HookEvent::TaskStart).len(), 1);
    for event in [
        HookEvent::SessionStart,
        HookEvent::Stop,
        HookEvent::Notification,
    ] {
        assert_eq!(config.hooks.hooks(event).len(), 1, "{event}");
    }

    let fs = &config.mcp_servers["fs"];
    assert!(
        matches!(&fs.transport, kaji_mcp::McpTransportConfig::Http { url, .. } if url == "http://localhost:1/mcp"),
        "the project's table replaces the user's: {fs:?}"
    );
    assert!(config.mcp_servers.contains_key("everything"));
}

#[test]
fn the_nearest_project_file_up_to_the_repository_root_wins() {
    let l = Layout::new();
    write(&l.repo.join(".kaji/config.toml"), "model = \"root\"\n");
    let config = KajiConfig::load(&l.home, &l.sub).expect("load");
    assert_eq!(config.model.as_deref(), Some("root"));

    let nearer = l.repo.join("crates/.kaji/config.toml");
    write(&nearer, "model = \"nearer\"\n");
    let config = KajiConfig::load(&l.home, &l.sub).expect("load");
    assert_eq!(config.model.as_deref(), Some("nearer"));
    assert_eq!(config.sources(), &[nearer]);
}

#[test]
fn files_above_the_repository_root_are_not_project_settings() {
    let l = Layout::new();
    let above = l.repo.parent().expect("parent").join(".kaji/config.toml");
    write(&above, "model = \"outside\"\n");
    let config = KajiConfig::load(&l.home, &l.sub).expect("load");
    assert_eq!(config.model, None);
}

#[test]
fn syntax_errors_name_file_and_line() {
    let l = Layout::new();
    let user = l.home.join("config.toml");
    write(&user, "provider = \"anthropic\"\nmodel = \"unterminated\n");
    let err = KajiConfig::load(&l.home, &l.sub).expect_err("malformed");
    let shown = err.to_string();
    let (path, line, key, _) = invalid(err);
    assert_eq!(path, user);
    assert_eq!(line, 2);
    assert_eq!(key, "model");
    assert!(
        shown.starts_with(&format!("{}:2:", user.display())),
        "{shown}"
    );
}

#[test]
fn wrong_types_name_the_key() {
    let l = Layout::new();
    let project = l.repo.join(".kaji/config.toml");
    write(
        &project,
        "model = \"m\"\n\n[[hooks.PreToolUse]]\ncommand = \"true\"\ntimeout = \"ten\"\n",
    );
    let err = KajiConfig::load(&l.home, &l.sub).expect_err("wrong type");
    let shown = err.to_string();
    let (path, line, key, message) = invalid(err);
    assert_eq!(path, project);
    assert_eq!(line, 5);
    assert_eq!(key, "hooks.PreToolUse[0].timeout");
    assert!(message.contains("invalid type"), "{message}");
    assert!(
        shown.contains("key `hooks.PreToolUse[0].timeout`"),
        "{shown}"
    );

    write(&project, "max_mistakes = -3\n");
    let (_, line, key, _) = invalid(KajiConfig::load(&l.home, &l.sub).expect_err("negative"));
    assert_eq!((line, key.as_str()), (1, "max_mistakes"));
}

#[test]
fn unknown_keys_are_errors_naming_the_key() {
    let l = Layout::new();
    let user = l.home.join("config.toml");
    write(&user, "model = \"m\"\nmodle = \"typo\"\n");
    let err = KajiConfig::load(&l.home, &l.sub).expect_err("unknown key");
    let shown = err.to_string();
    let (path, line, key, message) = invalid(err);
    assert_eq!(path, user);
    assert_eq!(line, 2);
    assert_eq!(key, "modle");
    assert!(message.contains("unknown field `modle`"), "{message}");
    assert!(shown.contains(&user.display().to_string()), "{shown}");

    write(&user, "[[hooks.PreTool]]\ncommand = \"true\"\n");
    let (_, line, key, _) = invalid(KajiConfig::load(&l.home, &l.sub).expect_err("unknown event"));
    assert_eq!((line, key.as_str()), (1, "hooks.PreTool"));

    write(
        &user,
        "[[hooks.TaskStart]]\ncommand = \"true\"\ncomand = \"x\"\n",
    );
    let (_, line, key, _) =
        invalid(KajiConfig::load(&l.home, &l.sub).expect_err("unknown hook key"));
    assert_eq!((line, key.as_str()), (3, "hooks.TaskStart[0].comand"));
}

#[test]
fn invalid_matchers_name_file_and_event() {
    let l = Layout::new();
    let user = l.home.join("config.toml");
    write(
        &user,
        "[[hooks.PostToolUse]]\ncommand = \"true\"\nmatcher = \"Edit(\"\n",
    );
    let err = KajiConfig::load(&l.home, &l.sub).expect_err("bad regex");
    let shown = err.to_string();
    let (path, line, key, message) = invalid(err);
    assert_eq!(path, user);
    assert_eq!(line, 3);
    assert_eq!(key, "hooks.PostToolUse[0].matcher");
    assert!(message.contains("PostToolUse"), "{message}");
    assert!(shown.contains("regular expression"), "{shown}");

    write(
        &user,
        "[[hooks.TaskStart]]\ncommand = \"true\"\nmatcher = \"Bash\"\n",
    );
    let (_, _, key, message) =
        invalid(KajiConfig::load(&l.home, &l.sub).expect_err("matcher on task event"));
    assert_eq!(key, "hooks.TaskStart[0].matcher");
    assert!(message.contains("nothing to match"), "{message}");

    // Claude Code's `"matcher": ""` (and `*`) is fine on any event, and
    // its `type`, `statusMessage` and `async` keys are accepted.
    write(
        &user,
        "[[hooks.Stop]]\ncommand = \"true\"\nmatcher = \"\"\ntype = \"command\"\nstatusMessage = \"s\"\nasync = false\n",
    );
    assert!(KajiConfig::load(&l.home, &l.sub).is_ok());
}

#[test]
fn bad_values_are_errors() {
    let l = Layout::new();
    let user = l.home.join("config.toml");
    write(&user, "permission_mode = \"reckless\"\n");
    let (_, line, key, message) = invalid(KajiConfig::load(&l.home, &l.sub).expect_err("bad mode"));
    assert_eq!((line, key.as_str()), (1, "permission_mode"));
    assert!(message.contains("reckless"), "{message}");

    write(&user, "[[hooks.TaskStart]]\ncommand = \"  \"\n");
    let (_, line, key, _) = invalid(KajiConfig::load(&l.home, &l.sub).expect_err("empty command"));
    assert_eq!((line, key.as_str()), (2, "hooks.TaskStart[0].command"));

    write(
        &user,
        "[[hooks.TaskStart]]\ncommand = \"true\"\ntimeout = 0\n",
    );
    let (_, line, key, _) = invalid(KajiConfig::load(&l.home, &l.sub).expect_err("zero timeout"));
    assert_eq!((line, key.as_str()), (3, "hooks.TaskStart[0].timeout"));

    write(&user, "[[hooks.TaskStart]]\ntimeout = 3\n");
    let (_, _, key, message) =
        invalid(KajiConfig::load(&l.home, &l.sub).expect_err("missing command"));
    assert!(message.contains("command"), "{key}: {message}");

    write(&user, "mcp_servers = 3\n");
    let (_, line, key, _) =
        invalid(KajiConfig::load(&l.home, &l.sub).expect_err("mcp not a table"));
    assert_eq!((line, key.as_str()), (1, "mcp_servers"));
}

#[test]
fn unreadable_settings_are_an_error_naming_the_file() {
    let l = Layout::new();
    // A directory where the file should be cannot be read as a file.
    std::fs::create_dir_all(l.home.join("config.toml")).expect("mkdir");
    let err = KajiConfig::load(&l.home, &l.sub).expect_err("unreadable");
    assert!(matches!(err, ConfigError::Read { .. }), "{err:?}");
    assert!(err.to_string().contains("config.toml"), "{err}");
}

#[test]
fn kaji_home_inside_the_project_is_read_once() {
    let l = Layout::new();
    // $KAJI_HOME is the project's .kaji directory itself.
    let home = l.repo.join(".kaji");
    write(
        &home.join("config.toml"),
        "[[hooks.TaskStart]]\ncommand = \"true\"\n",
    );
    let config = KajiConfig::load(&home, &l.repo).expect("load");
    assert_eq!(config.sources().len(), 1);
    assert_eq!(config.hooks.hooks(HookEvent::TaskStart).len(), 1);
}

#[test]
fn reasoning_is_read_and_a_bad_level_names_file_line_and_key() {
    let l = Layout::new();
    std::fs::write(l.home.join("config.toml"), "reasoning = \"high\"\n").expect("write");
    let config = KajiConfig::load(&l.home, &l.sub).expect("load");
    assert_eq!(config.reasoning, Some(kaji_llm::Reasoning::High));
    std::fs::write(
        l.home.join("config.toml"),
        "model = \"m\"\nreasoning = \"loud\"\n",
    )
    .expect("write");
    let (path, line, key, message) =
        invalid(KajiConfig::load(&l.home, &l.sub).expect_err("a bad level"));
    assert_eq!(path, l.home.join("config.toml"));
    assert_eq!((line, key.as_str()), (2, "reasoning"));
    assert!(message.contains("off"), "{message}");
}

#[test]
fn a_mcp_json_at_the_repository_root_counts_only_when_trusted() {
    let l = Layout::new();
    std::fs::write(
        l.repo.join(".mcp.json"),
        r#"{"mcpServers": {"files": {"command": "srv", "args": ["-x"]}, "mine": {"type": "http", "url": "http://127.0.0.1:1/mcp"}}}"#,
    )
    .expect("write");
    std::fs::create_dir_all(l.repo.join(".kaji")).expect("mkdir");
    std::fs::write(
        l.repo.join(".kaji/config.toml"),
        "[mcp_servers.mine]\ncommand = \"kaji-own\"\n",
    )
    .expect("write");
    let (trusted, ignored) = KajiConfig::load_gated(&l.home, &l.sub, true).expect("load");
    assert!(ignored.is_empty(), "{ignored:?}");
    let names: Vec<&str> = trusted.mcp_servers.keys().map(String::as_str).collect();
    assert_eq!(names, ["files", "mine"]);
    // The table wins over the .mcp.json entry of the same name.
    assert!(format!("{:?}", trusted.mcp_servers["mine"]).contains("kaji-own"));

    let (untrusted, ignored) = KajiConfig::load_gated(&l.home, &l.sub, false).expect("load");
    assert!(untrusted.mcp_servers.is_empty());
    assert!(
        ignored
            .iter()
            .any(|i| i.key == "mcpServers" && i.path == l.repo.join(".mcp.json")),
        "{ignored:?}"
    );

    // A file kaji cannot use is a warning naming it; the rest loads.
    std::fs::write(l.repo.join(".mcp.json"), "{\"mcpServers\": 3}").expect("write");
    let (config, _) = KajiConfig::load_gated(&l.home, &l.sub, true).expect("bad file warned");
    let warning = config.mcp_json_skipped.join("\n");
    assert!(warning.contains(".mcp.json"), "{warning}");
    assert!(warning.contains("mcpServers"), "{warning}");
    assert_eq!(config.mcp_servers.keys().collect::<Vec<_>>(), ["mine"]);
    // Untrusted, the broken file is not even read.
    assert!(KajiConfig::load_gated(&l.home, &l.sub, false).is_ok());
}

#[test]
fn an_untrusted_project_may_only_narrow_limits_and_never_choose_models() {
    let l = Layout::new();
    std::fs::write(l.home.join("config.toml"), "tool_result_max_chars = 1000\n").expect("write");
    std::fs::create_dir_all(l.repo.join(".kaji")).expect("mkdir");
    std::fs::write(
        l.repo.join(".kaji/config.toml"),
        "max_agent_depth = 50\ntool_result_max_chars = 500\ntoken_budget = 9000\n\
         max_mistakes = 99\nreasoning = \"high\"\n\
         [model_aliases]\nhaiku = \"their-model\"\n",
    )
    .expect("write");
    let (untrusted, ignored) = KajiConfig::load_gated(&l.home, &l.sub, false).expect("load");
    let keys: Vec<&str> = ignored.iter().map(|i| i.key).collect();
    for key in [
        "max_agent_depth",
        "max_mistakes",
        "model_aliases",
        "reasoning",
    ] {
        assert!(keys.contains(&key), "{key} not listed in {keys:?}");
    }
    assert_eq!(untrusted.max_agent_depth, None);
    assert_eq!(untrusted.max_mistakes, None);
    assert!(untrusted.model_aliases.is_empty());
    assert_eq!(untrusted.reasoning, None);
    // Narrowing is fine: a smaller cap, a budget where there was none.
    assert_eq!(untrusted.tool_result_max_chars, Some(500));
    assert_eq!(untrusted.token_budget, Some(9000));

    let (trusted, ignored) = KajiConfig::load_gated(&l.home, &l.sub, true).expect("load");
    assert!(ignored.is_empty(), "{ignored:?}");
    assert_eq!(trusted.max_agent_depth, Some(50));
    assert_eq!(trusted.model_aliases["haiku"], "their-model");
}

#[test]
fn project_language_servers_count_only_when_trusted() {
    let l = Layout::new();
    std::fs::write(
        l.home.join("config.toml"),
        "[lsp.mine]\ncommand = \"my-ls\"\nextensions = [\"m\"]\n",
    )
    .expect("write");
    std::fs::create_dir_all(l.repo.join(".kaji")).expect("mkdir");
    std::fs::write(
        l.repo.join(".kaji/config.toml"),
        "lsp_wait_ms = 10\n[lsp.theirs]\ncommand = \"their-ls\"\nextensions = [\"t\"]\n",
    )
    .expect("write");
    let (trusted, ignored) = KajiConfig::load_gated(&l.home, &l.sub, true).expect("load");
    assert!(ignored.is_empty(), "{ignored:?}");
    assert_eq!(trusted.lsp.keys().collect::<Vec<_>>(), ["mine", "theirs"]);
    assert_eq!(trusted.lsp_wait_ms, Some(10));

    let (untrusted, ignored) = KajiConfig::load_gated(&l.home, &l.sub, false).expect("load");
    assert_eq!(untrusted.lsp.keys().collect::<Vec<_>>(), ["mine"]);
    assert!(ignored.iter().any(|i| i.key == "lsp"), "{ignored:?}");

    // Unknown keys of a server are errors naming the file.
    std::fs::write(l.home.join("config.toml"), "[lsp.mine]\ncomand = \"x\"\n").expect("write");
    let err = KajiConfig::load(&l.home, &l.sub)
        .expect_err("unknown key")
        .to_string();
    assert!(
        err.contains("config.toml") && err.contains("comand"),
        "{err}"
    );
}

#[test]
fn a_lsp_json_is_read_only_in_trusted_projects() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join(".lsp.json"),
        r#"{"go": {"command": "gopls", "args": ["serve"], "extensionToLanguage": {".go": "go"}}}"#,
    )
    .expect("write");
    let settings = KajiConfig::default();
    let (servers, warnings) = kaji_core::lsp::servers(&settings, dir.path(), true);
    assert!(warnings.is_empty(), "{warnings:?}");
    let go = servers.iter().find(|s| s.name == "go").expect("go");
    assert_eq!(
        (go.command.as_str(), go.args.as_slice()),
        ("gopls", &["serve".to_string()][..])
    );
    let (servers, _) = kaji_core::lsp::servers(&settings, dir.path(), false);
    assert!(!servers.iter().any(|s| s.name == "go"));

    std::fs::write(dir.path().join(".lsp.json"), "[1, 2]").expect("write");
    let (_, warnings) = kaji_core::lsp::servers(&settings, dir.path(), true);
    assert!(
        warnings.iter().any(|w| w.contains(".lsp.json")),
        "{warnings:?}"
    );
}
