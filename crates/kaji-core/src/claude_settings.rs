//! Claude Code's settings files — `~/.claude/settings.json` (user),
//! `.claude/settings.json` (project) and `.claude/settings.local.json`
//! (local) — read for what kaji honours: `permissions` (`allow`, `ask`,
//! `deny`, `defaultMode`, `additionalDirectories`), `hooks` and `env`.
//!
//! Reading never fails a session: a file that is not JSON, a rule that does
//! not parse, a hook without a command, an unknown event or key is one
//! warning naming the file, the line and the key, and the rest of the file
//! is used. Every key kaji does not honour is named in a warning; nothing
//! is dropped silently. This module only reads and parses: it never writes
//! a file, and the trust gating and precedence are [`crate::config`]'s.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use kaji_policy::{Decision, Rule, RuleSource};
use serde_json::Value;

use crate::PermissionMode;
use crate::hooks::{HookEvent, HookSpec, HooksConfig, ToolMatcher};
use crate::permissions::PermissionRule;

/// One of Claude Code's settings sources, as `--setting-sources` names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SettingSource {
    /// `~/.claude/settings.json`.
    User,
    /// `.claude/settings.json` of the project.
    Project,
    /// `.claude/settings.local.json` of the project (not committed).
    Local,
}

impl SettingSource {
    /// All three, in Claude Code's order of precedence (lowest first).
    pub const ALL: [SettingSource; 3] = [Self::User, Self::Project, Self::Local];

    /// `user`, `project` or `local`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::User => "user",
            Self::Project => "project",
            Self::Local => "local",
        }
    }

    /// Parses a comma-separated list (`user,project`); an empty list turns
    /// every source off.
    pub fn parse_list(text: &str) -> Result<Vec<SettingSource>, String> {
        text.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::parse)
            .collect()
    }
}

impl FromStr for SettingSource {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|x| x.as_str() == s)
            .ok_or_else(|| format!("unknown setting source {s:?}: expected user, project or local"))
    }
}

impl fmt::Display for SettingSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which of Claude Code's settings files to read, and where the user's is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaudeSources {
    /// The user's home (`~/.claude/settings.json`); `None`: no user file.
    pub home: Option<PathBuf>,
    /// The sources read (all three unless `claude_setting_sources` or
    /// `--setting-sources` says otherwise).
    pub enabled: Vec<SettingSource>,
}

impl ClaudeSources {
    /// All three sources, the user's under `home`.
    pub fn all(home: Option<PathBuf>) -> Self {
        Self {
            home,
            enabled: SettingSource::ALL.to_vec(),
        }
    }

    /// No source at all.
    pub fn none() -> Self {
        Self {
            home: None,
            enabled: Vec::new(),
        }
    }

    /// The file of `source` for a project rooted at `root`, if enabled.
    pub fn path(&self, source: SettingSource, root: &Path) -> Option<PathBuf> {
        if !self.enabled.contains(&source) {
            return None;
        }
        match source {
            SettingSource::User => self
                .home
                .as_ref()
                .map(|h| h.join(".claude").join("settings.json")),
            SettingSource::Project => Some(root.join(".claude").join("settings.json")),
            SettingSource::Local => Some(root.join(".claude").join("settings.local.json")),
        }
    }
}

/// What kaji took from one settings file.
#[derive(Debug, Clone)]
pub struct ClaudeSettings {
    /// The file.
    pub path: PathBuf,
    /// Which source it is.
    pub source: SettingSource,
    /// `permissions.allow`, `ask` and `deny`, in that order, each tagged
    /// with this file (user, project or local).
    pub permissions: Vec<PermissionRule>,
    /// The line of each rule of [`Self::permissions`] (same order).
    pub rule_lines: Vec<usize>,
    /// `permissions.defaultMode`.
    pub default_mode: Option<PermissionMode>,
    /// `permissions.additionalDirectories`, as written.
    pub additional_directories: Vec<String>,
    /// `hooks`: the command hooks, tagged with this file.
    pub hooks: HooksConfig,
    /// `env`: variables set for every process kaji starts.
    pub env: BTreeMap<String, String>,
    /// Everything read but not honoured, or refused: one line each, naming
    /// the file, the line and the key.
    pub warnings: Vec<String>,
}

/// Top-level keys kaji reads without a warning: `$schema` is a reference
/// for editors, not a setting.
const SILENT_KEYS: &[&str] = &["$schema"];

/// Reads one settings file. `Ok(None)` when it does not exist; `Err` is a
/// warning when nothing of it can be used (unreadable, not JSON, not an
/// object), naming the file and the line.
pub fn read(path: &Path, source: SettingSource) -> Result<Option<ClaudeSettings>, String> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: cannot read: {e}; not used", path.display())),
    };
    parse(&text, path, source).map(Some)
}

/// Parses the text of one settings file (see [`read`]).
pub fn parse(text: &str, path: &Path, source: SettingSource) -> Result<ClaudeSettings, String> {
    let value: Value = serde_json::from_str(text).map_err(|e| {
        format!(
            "{}:{}:{}: not valid JSON ({e}); nothing of this file is used",
            path.display(),
            e.line(),
            e.column()
        )
    })?;
    let Value::Object(top) = value else {
        return Err(format!(
            "{}:1:1: a settings file is one JSON object; nothing of this file is used",
            path.display()
        ));
    };
    let mut out = ClaudeSettings {
        path: path.to_path_buf(),
        source,
        permissions: Vec::new(),
        rule_lines: Vec::new(),
        default_mode: None,
        additional_directories: Vec::new(),
        hooks: HooksConfig::new(),
        env: BTreeMap::new(),
        warnings: Vec::new(),
    };
    let at = Locator { text, path };
    for (key, value) in &top {
        match key.as_str() {
            "permissions" => read_permissions(value, &at, &mut out),
            "hooks" => read_hooks(value, &at, &mut out),
            "env" => read_env(value, &at, &mut out),
            k if SILENT_KEYS.contains(&k) => {}
            other => {
                out.warnings
                    .push(at.warn(&[other], other, "not supported by kaji; ignored".into()))
            }
        }
    }
    Ok(out)
}

/// Finds where a key or value is written, for messages.
struct Locator<'a> {
    text: &'a str,
    path: &'a Path,
}

impl Locator<'_> {
    /// The 1-based line of the first place after each of `anchors` in turn
    /// (JSON-quoted keys or values), best effort.
    fn line(&self, anchors: &[&str]) -> usize {
        let mut from = 0;
        for anchor in anchors {
            let quoted = serde_json::to_string(anchor).unwrap_or_default();
            if let Some(i) = self.text[from..].find(&quoted) {
                from += i;
            }
        }
        self.text[..from].matches('\n').count() + 1
    }

    fn warn(&self, anchors: &[&str], key: &str, message: String) -> String {
        format!(
            "{}:{}: key `{key}`: {message}",
            self.path.display(),
            self.line(anchors)
        )
    }
}

fn read_permissions(value: &Value, at: &Locator, out: &mut ClaudeSettings) {
    let Value::Object(map) = value else {
        out.warnings.push(at.warn(
            &["permissions"],
            "permissions",
            "expected an object; ignored".into(),
        ));
        return;
    };
    for (key, value) in map {
        match key.as_str() {
            "allow" => read_rules(Decision::Allow, key, value, at, out),
            "ask" => read_rules(Decision::Ask, key, value, at, out),
            "deny" => read_rules(Decision::Deny, key, value, at, out),
            "defaultMode" => match value.as_str().map(str::parse::<PermissionMode>) {
                Some(Ok(mode)) => out.default_mode = Some(mode),
                Some(Err(e)) => out.warnings.push(at.warn(
                    &["permissions", "defaultMode"],
                    "permissions.defaultMode",
                    format!("{e}; ignored"),
                )),
                None => out.warnings.push(at.warn(
                    &["permissions", "defaultMode"],
                    "permissions.defaultMode",
                    "expected a string; ignored".into(),
                )),
            },
            "additionalDirectories" => {
                out.additional_directories = strings(value);
                if !out.additional_directories.is_empty() {
                    out.warnings.push(at.warn(
                        &["permissions", "additionalDirectories"],
                        "permissions.additionalDirectories",
                        format!(
                            "not supported by kaji yet ({}); the tools stay in the project",
                            out.additional_directories.join(", ")
                        ),
                    ));
                }
            }
            other => out.warnings.push(at.warn(
                &["permissions", other],
                &format!("permissions.{other}"),
                "not supported by kaji; ignored".into(),
            )),
        }
    }
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

fn read_rules(kind: Decision, key: &str, value: &Value, at: &Locator, out: &mut ClaudeSettings) {
    let Some(list) = value.as_array() else {
        out.warnings.push(at.warn(
            &["permissions", key],
            &format!("permissions.{key}"),
            "expected a list of rules; ignored".into(),
        ));
        return;
    };
    let tag = match out.source {
        SettingSource::User => RuleSource::User as fn(PathBuf) -> RuleSource,
        SettingSource::Project => RuleSource::Project,
        SettingSource::Local => RuleSource::Local,
    };
    for (index, item) in list.iter().enumerate() {
        let name = format!("permissions.{key}[{index}]");
        let Some(text) = item.as_str() else {
            out.warnings.push(at.warn(
                &["permissions", key],
                &name,
                "a rule is a string; ignored".into(),
            ));
            continue;
        };
        let line = at.line(&["permissions", key, text]);
        match text.parse::<Rule>() {
            Ok(rule) => {
                out.permissions.push(PermissionRule {
                    kind,
                    rule,
                    source: tag(out.path.clone()),
                });
                out.rule_lines.push(line);
            }
            Err(e) => out.warnings.push(format!(
                "{}:{line}: key `{name}`: {e}; this rule is not used",
                at.path.display()
            )),
        }
    }
}

fn read_env(value: &Value, at: &Locator, out: &mut ClaudeSettings) {
    let Value::Object(map) = value else {
        out.warnings
            .push(at.warn(&["env"], "env", "expected an object; ignored".into()));
        return;
    };
    for (name, value) in map {
        let text = match value {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            Value::Bool(b) => b.to_string(),
            _ => {
                out.warnings.push(at.warn(
                    &["env", name],
                    &format!("env.{name}"),
                    "expected a string; ignored".into(),
                ));
                continue;
            }
        };
        out.env.insert(name.clone(), text);
    }
}

fn read_hooks(value: &Value, at: &Locator, out: &mut ClaudeSettings) {
    let Value::Object(events) = value else {
        out.warnings
            .push(at.warn(&["hooks"], "hooks", "expected an object; ignored".into()));
        return;
    };
    for (name, groups) in events {
        let Ok(event) = name.parse::<HookEvent>() else {
            out.warnings.push(at.warn(
                &["hooks", name],
                &format!("hooks.{name}"),
                "an event kaji does not fire; its hooks are skipped".into(),
            ));
            continue;
        };
        let Some(groups) = groups.as_array() else {
            out.warnings.push(at.warn(
                &["hooks", name],
                &format!("hooks.{name}"),
                "expected a list of matcher groups; skipped".into(),
            ));
            continue;
        };
        for (gi, group) in groups.iter().enumerate() {
            read_group(event, &format!("hooks.{name}[{gi}]"), group, at, out);
        }
    }
}

fn read_group(event: HookEvent, key: &str, group: &Value, at: &Locator, out: &mut ClaudeSettings) {
    let anchors = ["hooks", event.as_str()];
    let Some(group) = group.as_object() else {
        out.warnings.push(at.warn(
            &anchors,
            key,
            "expected an object with `hooks`; skipped".into(),
        ));
        return;
    };
    let mut matcher = None;
    for (k, v) in group {
        match k.as_str() {
            "hooks" => {}
            "matcher" => match v.as_str().map(|p| (p, ToolMatcher::new(p))) {
                Some((p, Ok(m))) => {
                    if !p.trim().is_empty() && p.trim() != "*" && !event.has_matcher() {
                        out.warnings.push(at.warn(
                            &anchors,
                            &format!("{key}.matcher"),
                            format!("{event} hooks have nothing to match; the matcher is ignored"),
                        ));
                    } else {
                        matcher = Some(m);
                    }
                }
                Some((_, Err(e))) => {
                    out.warnings.push(at.warn(
                        &anchors,
                        &format!("{key}.matcher"),
                        format!("invalid regular expression: {e}; this group is skipped"),
                    ));
                    return;
                }
                None => {
                    out.warnings.push(at.warn(
                        &anchors,
                        &format!("{key}.matcher"),
                        "expected a string; this group is skipped".into(),
                    ));
                    return;
                }
            },
            other => out.warnings.push(at.warn(
                &anchors,
                &format!("{key}.{other}"),
                "not a key of a matcher group; ignored".into(),
            )),
        }
    }
    let Some(hooks) = group.get("hooks").and_then(Value::as_array) else {
        out.warnings.push(at.warn(
            &anchors,
            &format!("{key}.hooks"),
            "missing or not a list; this group is skipped".into(),
        ));
        return;
    };
    for (hi, hook) in hooks.iter().enumerate() {
        let key = format!("{key}.hooks[{hi}]");
        if let Some(spec) = read_hook(&key, hook, &anchors, matcher.clone(), at, &mut out.warnings)
        {
            out.hooks.push(event, spec);
        }
    }
}

fn read_hook(
    key: &str,
    hook: &Value,
    anchors: &[&str],
    matcher: Option<ToolMatcher>,
    at: &Locator,
    warnings: &mut Vec<String>,
) -> Option<HookSpec> {
    let Some(map) = hook.as_object() else {
        warnings.push(at.warn(anchors, key, "expected an object; skipped".into()));
        return None;
    };
    let command = map.get("command").and_then(Value::as_str).unwrap_or("");
    let mut anchors: Vec<&str> = anchors.to_vec();
    if !command.is_empty() {
        anchors.push(command);
    }
    let ty = map.get("type").and_then(Value::as_str).unwrap_or("command");
    if ty != "command" {
        warnings.push(at.warn(
            &anchors,
            &format!("{key}.type"),
            format!("{ty:?} hooks are not supported by kaji (only \"command\"); skipped"),
        ));
        return None;
    }
    if command.trim().is_empty() {
        warnings.push(at.warn(
            &anchors,
            &format!("{key}.command"),
            "the command is empty; skipped".into(),
        ));
        return None;
    }
    let mut spec = HookSpec::new(command.trim());
    spec.matcher = matcher;
    spec.source = Some(at.path.to_path_buf());
    for (k, v) in map {
        match k.as_str() {
            "type" | "command" => {}
            "timeout" => match v.as_f64() {
                Some(secs) if secs > 0.0 && secs.is_finite() => {
                    spec.timeout = Duration::from_secs_f64(secs.min(86_400.0));
                }
                _ => warnings.push(at.warn(
                    &anchors,
                    &format!("{key}.timeout"),
                    "expected a positive number of seconds; the default is used".into(),
                )),
            },
            "statusMessage" => spec.status_message = v.as_str().map(str::to_string),
            "async" => spec.run_async = v.as_bool().unwrap_or(false),
            other => warnings.push(at.warn(
                &anchors,
                &format!("{key}.{other}"),
                "not a key of a command hook; ignored".into(),
            )),
        }
    }
    Some(spec)
}

/// The file in `$KAJI_HOME` that records which hooks of the user's
/// `~/.claude/settings.json` were last announced.
pub const SEEN_USER_HOOKS_FILE: &str = "claude-user-hooks.seen";

/// The hooks of `hooks` that come from the user's `~/.claude/settings.json`
/// under `home`, one line each: `Event: command`.
pub fn user_hooks(home: Option<&Path>, hooks: &HooksConfig) -> Vec<String> {
    let Some(file) =
        ClaudeSources::all(home.map(Path::to_path_buf)).path(SettingSource::User, Path::new(""))
    else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for event in HookEvent::ALL {
        for hook in hooks.hooks(event) {
            if hook.source.as_deref() == Some(file.as_path()) {
                out.push(format!("{event}: {}", hook.command));
            }
        }
    }
    out
}

/// The first time (and whenever they change) that hooks of the user's
/// `~/.claude/settings.json` will run in kaji: a notice naming each, and
/// the list recorded in `kaji_home` so the next run says nothing. A
/// record that cannot be written only means the notice comes again.
pub fn user_hooks_notice(
    kaji_home: &Path,
    home: Option<&Path>,
    hooks: &HooksConfig,
) -> Option<String> {
    let list = user_hooks(home, hooks);
    if list.is_empty() {
        return None;
    }
    let record = kaji_home.join(SEEN_USER_HOOKS_FILE);
    let text = list.join("\n") + "\n";
    if std::fs::read_to_string(&record).ok().as_deref() == Some(text.as_str()) {
        return None;
    }
    let _ = std::fs::create_dir_all(kaji_home);
    let _ = std::fs::write(&record, &text);
    Some(format!(
        "the hooks of your Claude Code settings ({}) run in kaji too: {}. Turn that source off with `claude_setting_sources = [\"project\", \"local\"]` in kaji's settings or `--setting-sources project,local`; `kaji doctor` lists every hook",
        home.map(|h| h.join(".claude/settings.json").display().to_string())
            .unwrap_or_default(),
        list.join("; ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_ok(text: &str) -> ClaudeSettings {
        parse(
            text,
            Path::new("/p/.claude/settings.json"),
            SettingSource::Project,
        )
        .expect("parses")
    }

    #[test]
    fn bad_json_names_the_line() {
        for (text, line) in [
            ("{\n  // c\n}", 2),
            ("{\n \"env\": {\"A\": \"1\",}\n}", 2),
            ("{\n \"env\": {", 2),
        ] {
            let e = parse(text, Path::new("/x.json"), SettingSource::User).expect_err(text);
            assert!(e.starts_with(&format!("/x.json:{line}:")), "{e}");
        }
    }

    #[test]
    fn reads_rules_hooks_env_and_names_the_rest() {
        let s = parse_ok(
            r#"{
  "permissions": {"allow": ["Bash(ls:*)"], "deny": ["Read(./.env)", "Bash(ls && x)"],
                  "defaultMode": "acceptEdits"},
  "hooks": {"Stop": [{"matcher": "", "hooks": [{"type": "command", "command": "true",
     "statusMessage": "s", "async": false, "timeout": 5}]}],
            "Nope": [], "PreToolUse": [{"hooks": [{"command": " "}]}]},
  "env": {"A": "1"},
  "model": "x"
}"#,
        );
        assert_eq!(s.permissions.len(), 2);
        assert_eq!(s.rule_lines, vec![2, 2]);
        assert_eq!(s.default_mode, Some(PermissionMode::AcceptEdits));
        assert_eq!(s.hooks.hooks(HookEvent::Stop).len(), 1);
        assert_eq!(
            s.hooks.hooks(HookEvent::Stop)[0].timeout,
            Duration::from_secs(5)
        );
        assert_eq!(s.env.get("A").map(String::as_str), Some("1"));
        let w = s.warnings.join("\n");
        assert!(w.contains("key `permissions.deny[1]`"), "{w}");
        assert!(w.contains("key `hooks.Nope`"), "{w}");
        assert!(
            w.contains("key `hooks.PreToolUse[0].hooks[0].command`"),
            "{w}"
        );
        assert!(w.contains(":8: key `model`"), "{w}");
        assert_eq!(s.warnings.len(), 4, "{w}");
    }
}
