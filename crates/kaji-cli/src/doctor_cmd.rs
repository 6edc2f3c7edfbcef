//! `kaji doctor [--json]`: what this machine gives kaji.
//!
//! Reports the sandbox layers the kernel supports (found by trying each in
//! a child: Landlock and its ABI, user namespaces, seccomp) and what the
//! sandbox would enforce in the current directory; the settings files
//! found; the provider the settings select, whether its key is set and
//! whether it answers; the MCP servers and their status; which provider
//! keys are set (names only); the git version; and the terminal
//! ([`crate::doctor_checks`]). Exits 0 when every layer the sandbox needs
//! works, else 1.
//!
//! It only looks: it never prints a secret's value, never writes a file and
//! never changes a setting.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use kaji_core::config::KajiConfig;
use kaji_sandbox::{SandboxMode, SandboxPolicy, SandboxSupport};
use kaji_tasks::process;
use serde_json::{Value, json};

/// Arguments of `kaji doctor`.
#[derive(Debug, clap::Args)]
pub struct DoctorArgs {
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Runs `kaji doctor`; returns the exit code.
pub async fn run(args: DoctorArgs) -> i32 {
    let support = tokio::task::spawn_blocking(kaji_sandbox::probe)
        .await
        .unwrap_or_else(|e| SandboxSupport {
            landlock_abi: 0,
            landlock: false,
            user_namespaces: false,
            seccomp: false,
            problems: vec![format!("the probe did not finish: {e}")],
        });
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let home = crate::paths::kaji_home();
    let trusted = kaji_core::trust::is_trusted(&home, &cwd).unwrap_or(false);
    let loaded = KajiConfig::load_with(&home, &cwd, trusted, &crate::paths::claude_sources())
        .map(|(config, _)| config);
    let settings_error = loaded.as_ref().err().map(|e| e.to_string());
    let settings = loaded.ok();
    let servers = settings
        .as_ref()
        .map(|s| s.mcp_servers.clone())
        .unwrap_or_default();
    let (provider, mcp) = tokio::join!(
        checks::provider(settings.as_ref()),
        checks::mcp(servers, &cwd)
    );
    let report = Report {
        settings_error,
        provider,
        mcp,
        lsp: crate::doctor_lsp::check(settings.as_ref(), &home, &cwd),
        terminal: checks::terminal(),
        policy: policy_here(&cwd, &home),
        settings: settings_files(&cwd, &home),
        hooks: settings.as_ref().map(hook_list).unwrap_or_default(),
        claude_warnings: settings
            .as_ref()
            .map(|s| s.claude_warnings.clone())
            .unwrap_or_default(),
        provider_keys: provider_keys(),
        git_version: git_version().await,
        stdout_is_terminal: std::io::stdout().is_terminal(),
        support,
    };
    if args.json {
        println!("{}", report.to_json());
    } else {
        print!("{}", report.to_text());
    }
    if report.broken().is_empty() { 0 } else { 1 }
}

use crate::doctor_checks as checks;

/// What `kaji doctor` found.
struct Report {
    settings_error: Option<String>,
    provider: checks::ProviderCheck,
    mcp: Vec<checks::McpCheck>,
    lsp: crate::doctor_lsp::LspCheck,
    terminal: checks::TerminalCheck,
    support: SandboxSupport,
    policy: SandboxPolicy,
    settings: Vec<(PathBuf, bool)>,
    /// Every hook that would run: event, command, the file it is in.
    hooks: Vec<(String, String, String)>,
    /// What Claude Code's settings files hold that kaji does not use.
    claude_warnings: Vec<String>,
    provider_keys: Vec<String>,
    git_version: Result<String, String>,
    stdout_is_terminal: bool,
}

/// The workspace-write policy a Bash command started here would get.
fn policy_here(cwd: &Path, kaji_home: &Path) -> SandboxPolicy {
    let mut policy = SandboxPolicy::preview(SandboxMode::WorkspaceWrite, cwd);
    policy.writable_roots.push(kaji_home.join("runs"));
    policy.protected_paths.push(kaji_home.to_path_buf());
    policy.deny_read.push(kaji_home.to_path_buf());
    policy
}

/// The user and project settings files, and whether each exists: kaji's
/// own, then Claude Code's.
fn settings_files(cwd: &Path, kaji_home: &Path) -> Vec<(PathBuf, bool)> {
    let user = KajiConfig::user_path(kaji_home);
    let user_found = user.is_file();
    let project = KajiConfig::project_path(cwd);
    let mut files = vec![(user, user_found)];
    match project {
        Some(path) => files.push((path, true)),
        None => files.push((cwd.join(".kaji/config.toml"), false)),
    }
    let root = kaji_core::config::repository_root(cwd).unwrap_or_else(|| cwd.to_path_buf());
    let claude = crate::paths::claude_sources();
    for source in kaji_core::claude_settings::SettingSource::ALL {
        if let Some(path) = claude.path(source, &root) {
            let found = path.is_file();
            files.push((path, found));
        }
    }
    files
}

/// Every configured hook: event, command and the file it comes from.
fn hook_list(settings: &KajiConfig) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    for event in kaji_core::hooks::HookEvent::ALL {
        for hook in settings.hooks.hooks(event) {
            let source = hook
                .source
                .as_ref()
                .map_or_else(String::new, |p| p.display().to_string());
            out.push((event.to_string(), hook.command.clone(), source));
        }
    }
    out
}

/// The names of the set environment variables that look like provider
/// keys or other secrets (never their values).
fn provider_keys() -> Vec<String> {
    let mut names: Vec<String> = std::env::vars_os()
        .filter(|(_, v)| !v.is_empty())
        .filter_map(|(k, _)| k.into_string().ok())
        .filter(|k| kaji_protocol::redact::is_secret_env_name(k, &[], &[]))
        .collect();
    names.sort();
    names
}

/// `git --version`, or why it could not be run.
async fn git_version() -> Result<String, String> {
    let mut cmd = tokio::process::Command::new("git");
    cmd.arg("--version")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let (mut child, mut reader) =
        process::spawn_with_merged_output(cmd).map_err(|e| format!("git: {e}"))?;
    let mut text = String::new();
    let read = tokio::task::spawn_blocking(move || {
        use std::io::Read;
        reader.read_to_string(&mut text).map(|_| text)
    })
    .await
    .map_err(|e| format!("git: {e}"))?
    .map_err(|e| format!("git: {e}"))?;
    let status = child.wait().await.map_err(|e| format!("git: {e}"))?;
    if !status.success() {
        return Err(format!("git --version failed ({status})"));
    }
    Ok(read.trim().to_string())
}

fn yes_no(b: bool) -> &'static str {
    if b { "yes" } else { "NO" }
}

fn paths_json(paths: &[PathBuf]) -> Value {
    json!(
        paths
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
    )
}

impl Report {
    /// What doctor found broken, one line each: the sandbox, unreadable
    /// settings, the provider, MCP servers that failed.
    fn broken(&self) -> Vec<String> {
        let mut broken = Vec::new();
        if !self.support.is_complete() {
            broken.push("the sandbox is not available: kaji asks before every command".into());
        }
        if let Some(e) = &self.settings_error {
            broken.push(format!("the settings cannot be read: {e}"));
        }
        broken.extend(self.provider.broken());
        for m in self.mcp.iter().filter(|m| m.status == "failed") {
            broken.push(format!("MCP server {} failed: {}", m.name, m.detail));
        }
        broken
    }

    fn to_json(&self) -> Value {
        let s = &self.support;
        let broken = self.broken();
        json!({
            "ok": broken.is_empty(),
            "broken": broken,
            "sandbox": {
                "landlock_abi": s.landlock_abi,
                "landlock": s.landlock,
                "user_namespaces": s.user_namespaces,
                "seccomp": s.seccomp,
                "complete": s.is_complete(),
                "problems": s.problems,
            },
            "would_enforce": {
                "mode": self.policy.mode.as_str(),
                "writable_roots": paths_json(&self.policy.writable_roots),
                "protected_paths": paths_json(&self.policy.protected_paths),
                "deny_read": paths_json(&self.policy.deny_read),
                "network": self.policy.network,
            },
            "settings_files": self.settings.iter().map(|(p, found)| json!({
                "path": p.display().to_string(),
                "found": found,
            })).collect::<Vec<_>>(),
            "hooks": self.hooks.iter().map(|(event, command, source)| json!({
                "event": event,
                "command": command,
                "source": source,
            })).collect::<Vec<_>>(),
            "claude_settings_warnings": self.claude_warnings,
            "provider_keys": self.provider_keys,
            "git_version": self.git_version.as_ref().ok(),
            "git_error": self.git_version.as_ref().err(),
            "stdout_is_terminal": self.stdout_is_terminal,
            "settings_error": self.settings_error,
            "provider": self.provider.to_json(),
            "mcp_servers": checks::mcp_json(&self.mcp),
            "terminal": self.terminal.to_json(),
            "language_servers": self.lsp.to_json(),
        })
    }

    fn to_text(&self) -> String {
        let s = &self.support;
        let mut out = String::from("Sandbox (Linux)\n");
        out.push_str(&format!(
            "  Landlock:        {} (ABI {})\n",
            yes_no(s.landlock),
            s.landlock_abi
        ));
        out.push_str(&format!(
            "  user namespaces: {}\n",
            yes_no(s.user_namespaces)
        ));
        out.push_str(&format!("  seccomp:         {}\n", yes_no(s.seccomp)));
        for problem in &s.problems {
            out.push_str(&format!("  problem: {problem}\n"));
        }
        if s.is_complete() {
            out.push_str("  => commands here would run in the workspace-write sandbox:\n");
        } else {
            out.push_str(
                "  => the sandbox is NOT available: kaji will ask before every command.\n     \
                 With it, commands here would get:\n",
            );
        }
        let p = &self.policy;
        let list = |paths: &[PathBuf]| {
            paths
                .iter()
                .map(|p| format!("       {}\n", p.display()))
                .collect::<String>()
        };
        out.push_str(&format!("     writable:\n{}", list(&p.writable_roots)));
        out.push_str(&format!(
            "     read-only inside them:\n{}",
            list(&p.protected_paths)
        ));
        out.push_str(&format!("     unreadable:\n{}", list(&p.deny_read)));
        out.push_str(&format!(
            "     network: {}\n",
            if p.network {
                "allowed"
            } else {
                "Unix sockets only"
            }
        ));
        out.push_str("Settings files\n");
        for (path, found) in &self.settings {
            let state = if *found { "found" } else { "not found" };
            out.push_str(&format!("  {} ({state})\n", path.display()));
        }
        if let Some(e) = &self.settings_error {
            out.push_str(&format!("  cannot be read: {e}\n"));
        }
        for w in &self.claude_warnings {
            out.push_str(&format!("  warning: {w}\n"));
        }
        out.push_str("Hooks\n");
        if self.hooks.is_empty() {
            out.push_str("  none\n");
        }
        for (event, command, source) in &self.hooks {
            out.push_str(&format!("  {event}: {command} (from {source})\n"));
        }
        out.push_str(&self.provider.to_text());
        out.push_str(&checks::mcp_text(&self.mcp));
        out.push_str(&self.lsp.to_text());
        out.push_str("Provider keys and secrets set (names only)\n");
        if self.provider_keys.is_empty() {
            out.push_str("  none\n");
        }
        for name in &self.provider_keys {
            out.push_str(&format!("  {name}\n"));
        }
        match &self.git_version {
            Ok(v) => out.push_str(&format!("git: {v}\n")),
            Err(e) => out.push_str(&format!("git: not usable: {e}\n")),
        }
        out.push_str(&self.terminal.to_text());
        let broken = self.broken();
        if broken.is_empty() {
            out.push_str("Everything kaji checked works.\n");
        } else {
            out.push_str("Broken\n");
            for b in &broken {
                out.push_str(&format!("  {b}\n"));
            }
        }
        out
    }
}
