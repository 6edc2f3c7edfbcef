//! The decision: which rules apply to a request, in what order, and what
//! "always allow" may remember.
//!
//! Deny beats ask beats allow, whatever the rules' sources: a deny rule
//! matching any simple command of a command line denies the whole line;
//! a command is allowed only when every simple command in it is allowed
//! (by a rule or as read-only) and nothing in it is unanalysable. Allow
//! rules from an untrusted source are ignored (and reported); its deny and
//! ask rules still apply, since they only narrow. This module never asks,
//! reads or writes anything: it is a pure function of its inputs.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::context::Context;
use crate::host;
use crate::paths;
use crate::readonly;
use crate::rule::{CommandPattern, PathTool, Rule};
use crate::shell::{self, SimpleCommand};

/// What a tool call asks to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PermissionRequest {
    /// Run a shell command line (the Bash tool).
    Bash {
        /// The command line.
        command: String,
    },
    /// Read, edit or write a file (relative paths start at `ctx.cwd`).
    Path {
        /// Which file tool.
        tool: PathTool,
        /// The file.
        path: PathBuf,
    },
    /// Fetch a URL.
    WebFetch {
        /// The URL.
        url: String,
    },
    /// Use any other tool (an MCP tool `mcp__server__tool`, …).
    Tool {
        /// The tool's name.
        name: String,
    },
}

/// Allow, ask or deny.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Decision {
    /// Run it without asking.
    Allow,
    /// Ask the user.
    Ask,
    /// Refuse it.
    Deny,
}

impl Decision {
    /// `allow`, `ask` or `deny`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allow => "allow",
            Self::Ask => "ask",
            Self::Deny => "deny",
        }
    }
}

impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The list a rule is in.
pub type RuleKind = Decision;

/// Where a rule came from.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum RuleSource {
    /// An "always allow" answered in this session.
    Session,
    /// `--allow` / `--deny` on the command line.
    Flag,
    /// The project-local `.kaji/config.local.toml`.
    Local(PathBuf),
    /// The project's `.kaji/config.toml`.
    Project(PathBuf),
    /// The user's `$KAJI_HOME/config.toml`.
    User(PathBuf),
    /// A custom command's `allowed-tools` (its file), for the one prompt
    /// it sends.
    Command(PathBuf),
}

impl RuleSource {
    /// The settings file, for sources that are one.
    pub fn path(&self) -> Option<&Path> {
        match self {
            Self::Local(p) | Self::Project(p) | Self::User(p) | Self::Command(p) => Some(p),
            Self::Session | Self::Flag => None,
        }
    }

    /// `session`, `flag`, `local`, `project`, `user` or `command`.
    pub fn scope(&self) -> &'static str {
        match self {
            Self::Command(_) => "command",
            Self::Session => "session",
            Self::Flag => "flag",
            Self::Local(_) => "local",
            Self::Project(_) => "project",
            Self::User(_) => "user",
        }
    }
}

impl fmt::Display for RuleSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.path() {
            Some(p) => write!(f, "{}", p.display()),
            None if *self == Self::Flag => f.write_str("the command line"),
            None => f.write_str("this session"),
        }
    }
}

/// One rule in its list, with its source and whether that is trusted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleEntry {
    /// Allow, ask or deny.
    pub kind: RuleKind,
    /// The rule.
    pub rule: Rule,
    /// Where it came from.
    pub source: RuleSource,
    /// Whether its source is trusted; untrusted allow rules are ignored.
    pub trusted: bool,
}

impl RuleEntry {
    fn active(&self) -> bool {
        self.trusted || self.kind != Decision::Allow
    }
}

/// Every rule kaji knows of, from every source.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RuleSet {
    entries: Vec<RuleEntry>,
}

impl RuleSet {
    /// No rules.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one rule.
    pub fn push(&mut self, kind: RuleKind, rule: Rule, source: RuleSource, trusted: bool) {
        self.entries.push(RuleEntry {
            kind,
            rule,
            source,
            trusted,
        });
    }

    /// Removes every rule that came from `source`; how many went.
    pub fn remove_source(&mut self, source: &RuleSource) -> usize {
        let before = self.entries.len();
        self.entries.retain(|e| e.source != *source);
        before - self.entries.len()
    }

    /// Every rule, in the order added.
    pub fn entries(&self) -> &[RuleEntry] {
        &self.entries
    }

    fn first(&self, kind: RuleKind, pred: impl Fn(&Rule) -> bool) -> Option<&RuleEntry> {
        self.entries
            .iter()
            .find(|e| e.kind == kind && e.active() && pred(&e.rule))
    }

    fn ignored(&self, pred: impl Fn(&Rule) -> bool) -> Vec<(Rule, RuleSource)> {
        self.entries
            .iter()
            .filter(|e| !e.active() && pred(&e.rule))
            .map(|e| (e.rule.clone(), e.source.clone()))
            .collect()
    }
}

/// Why the decision is what it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reason {
    /// A rule decided (it is in [`PolicyDecision::rule`]).
    Rule,
    /// Every simple command is a known read-only command.
    ReadOnly,
    /// No rule applies: the permission mode decides.
    NoRule,
    /// The path is protected: it always asks.
    Protected(PathBuf),
    /// The command cannot be analysed.
    Unanalysable(String),
    /// This simple command is allowed by no rule and is not read-only.
    NotAllowed {
        /// The simple command.
        command: String,
        /// Why it is not read-only.
        why: String,
    },
    /// There is no command at all.
    Empty,
    /// The fetch goes to this machine or a private network (the canonical
    /// host): it asks unless a `WebFetch(domain:…)` rule names the host,
    /// in every mode.
    LocalAddress(String),
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Rule => f.write_str("a rule matches"),
            Self::ReadOnly => f.write_str("every command in it is read-only"),
            Self::NoRule => f.write_str("no rule matches; the permission mode decides"),
            Self::Protected(p) => write!(
                f,
                "{} is a protected path: changing it always asks",
                p.display()
            ),
            Self::Unanalysable(why) => write!(f, "the command {why}, so it is never auto-allowed"),
            Self::NotAllowed { command, why } => {
                write!(f, "no rule allows `{command}` ({why})")
            }
            Self::Empty => f.write_str("there is no command"),
            Self::LocalAddress(host) => write!(
                f,
                "{host} is on this machine or a private network: fetching it always asks"
            ),
        }
    }
}

/// The outcome of [`decide`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyDecision {
    /// Allow, ask or deny.
    pub decision: Decision,
    /// The rule that decided, and where it came from.
    pub rule: Option<(Rule, RuleSource)>,
    /// Why.
    pub reason: Reason,
    /// Allow rules that would have matched but were ignored because their
    /// source is not trusted.
    pub ignored: Vec<(Rule, RuleSource)>,
}

impl PolicyDecision {
    fn new(decision: Decision, reason: Reason) -> Self {
        Self {
            decision,
            rule: None,
            reason,
            ignored: Vec::new(),
        }
    }

    fn by(entry: &RuleEntry) -> Self {
        Self {
            decision: entry.kind,
            rule: Some((entry.rule.clone(), entry.source.clone())),
            reason: Reason::Rule,
            ignored: Vec::new(),
        }
    }

    /// Whether no rule and no protection decided, so the permission mode
    /// should (read-only tools run, accept-edits edits inside the project…).
    pub fn is_default(&self) -> bool {
        self.reason == Reason::NoRule
    }
}

/// Decides a request against the rules. Pure: never asks, reads or writes.
pub fn decide(rules: &RuleSet, request: &PermissionRequest, ctx: &Context) -> PolicyDecision {
    match request {
        PermissionRequest::Bash { command } => decide_command(rules, command, ctx),
        PermissionRequest::Path { tool, path } => decide_path(rules, *tool, path, ctx),
        PermissionRequest::WebFetch { url } => decide_fetch(rules, url),
        PermissionRequest::Tool { name } => decide_simple(rules, |r| r.matches_tool(name)),
    }
}

/// A fetch is decided on its canonical host (`crate::host`), never on the
/// URL's text. A host on this machine or a private network asks unless a
/// `WebFetch(domain:…)` rule names it: a bare `WebFetch` allow does not
/// reach it.
fn decide_fetch(rules: &RuleSet, url: &str) -> PolicyDecision {
    let host = host::canonical_host(url).unwrap_or_default();
    let decided = decide_simple(rules, |r| r.matches_host(&host));
    let open = decided.decision == Decision::Allow || decided.reason == Reason::NoRule;
    if !open || !host::is_local_host(&host) {
        return decided;
    }
    let named = |r: &Rule| matches!(r, Rule::WebFetch { .. }) && r.matches_host(&host);
    match rules.first(Decision::Allow, named) {
        Some(entry) => PolicyDecision::by(entry),
        None => PolicyDecision::new(Decision::Ask, Reason::LocalAddress(host)),
    }
}

fn decide_simple(rules: &RuleSet, pred: impl Fn(&Rule) -> bool) -> PolicyDecision {
    for kind in [Decision::Deny, Decision::Ask, Decision::Allow] {
        if let Some(entry) = rules.first(kind, &pred) {
            return PolicyDecision::by(entry);
        }
    }
    let mut decision = PolicyDecision::new(Decision::Ask, Reason::NoRule);
    decision.ignored = rules.ignored(&pred);
    decision
}

fn decide_path(rules: &RuleSet, tool: PathTool, path: &Path, ctx: &Context) -> PolicyDecision {
    let abs = paths::normalise(&ctx.cwd.join(path));
    let denied =
        |r: &Rule| r.matches_path(tool, &abs, ctx) || r.matches_path(PathTool::Read, &abs, ctx);
    if let Some(entry) = rules.first(Decision::Deny, denied) {
        return PolicyDecision::by(entry);
    }
    let applies = |r: &Rule| r.matches_path(tool, &abs, ctx);
    if let Some(entry) = rules.first(Decision::Ask, applies) {
        return PolicyDecision::by(entry);
    }
    if !tool.reads() && paths::is_protected(&abs, ctx) {
        return PolicyDecision::new(Decision::Ask, Reason::Protected(abs));
    }
    decide_simple(rules, applies)
}

fn decide_command(rules: &RuleSet, command: &str, ctx: &Context) -> PolicyDecision {
    let analysis = shell::analyse(command, ctx);
    let bash = Rule::Tool("Bash".into());
    for kind in [Decision::Deny, Decision::Ask] {
        let hit = analysis
            .commands
            .iter()
            .flat_map(unwrapped)
            .find_map(|cmd| rules.first(kind, |r| r.matches_command(&cmd)))
            .or_else(|| rules.first(kind, |r| *r == bash));
        if let Some(entry) = hit {
            return PolicyDecision::by(entry);
        }
    }
    let ignored = |cmd: &SimpleCommand| rules.ignored(|r| r.matches_command(cmd));
    if let Some(why) = analysis.unanalysable.first() {
        let mut decision = PolicyDecision::new(Decision::Ask, Reason::Unanalysable(why.clone()));
        decision.ignored = analysis.commands.iter().flat_map(ignored).collect();
        return decision;
    }
    if analysis.commands.is_empty() {
        return PolicyDecision::new(Decision::Ask, Reason::Empty);
    }
    let mut first_rule = None;
    for cmd in &analysis.commands {
        if let Some(entry) = rules.first(Decision::Allow, |r| r.matches_command(cmd)) {
            first_rule.get_or_insert(entry);
        } else if let Err(why) = readonly::check(cmd, ctx.trusted) {
            let reason = Reason::NotAllowed {
                command: cmd.text.clone(),
                why,
            };
            let mut decision = PolicyDecision::new(Decision::Ask, reason);
            decision.ignored = ignored(cmd);
            return decision;
        }
    }
    match first_rule {
        Some(entry) => PolicyDecision::by(entry),
        None => PolicyDecision::new(Decision::Allow, Reason::ReadOnly),
    }
}

/// `cmd` and, when it starts with wrappers that run the rest of their
/// words (`sudo`, `timeout 5`, `nice -n 5`, `xargs -0`, …), the command
/// they run: deny and ask rules are matched against each, so `Bash(rm:*)`
/// also denies `sudo rm -rf x`. Never used for allow rules.
fn unwrapped(cmd: &SimpleCommand) -> Vec<SimpleCommand> {
    const STRIP: &[&str] = &[
        "sudo", "doas", "nohup", "time", "nice", "timeout", "xargs", "stdbuf", "ionice", "setsid",
    ];
    let mut out = vec![cmd.clone()];
    let mut words = cmd.words.as_slice();
    while let Some(program) = words.first().and_then(|w| w.literal()) {
        if !STRIP.contains(&program) {
            break;
        }
        let mut rest = &words[1..];
        while rest
            .first()
            .is_some_and(|w| w.literal().is_none_or(|w| w.starts_with('-')))
        {
            let takes_value = matches!(rest[0].literal(), Some("-n" | "-u" | "-I" | "-s" | "-k"));
            rest = &rest[if takes_value { 2 } else { 1 }.min(rest.len())..];
        }
        if program == "timeout" && !rest.is_empty() {
            rest = &rest[1..];
        }
        if rest.is_empty() || rest.len() == words.len() {
            break;
        }
        words = rest;
        out.push(SimpleCommand {
            words: words.to_vec(),
            text: cmd.text.clone(),
            writes_file: cmd.writes_file,
        });
    }
    out
}

/// Whether every simple command of `command` is a known read-only command
/// and nothing in it is unanalysable (what plan mode may run).
pub fn is_read_only_command(command: &str, ctx: &Context) -> bool {
    let analysis = shell::analyse(command, ctx);
    analysis.is_analysable()
        && !analysis.commands.is_empty()
        && analysis
            .commands
            .iter()
            .all(|c| readonly::check(c, ctx.trusted).is_ok())
}

/// Programs that run code given to them: "always" never remembers one of
/// these as a prefix (`python3:*` would allow `python3 -c …`).
const INTERPRETERS: &[&str] = &[
    "python",
    "python2",
    "python3",
    "node",
    "nodejs",
    "deno",
    "bun",
    "ruby",
    "perl",
    "php",
    "lua",
    "luajit",
    "bash",
    "sh",
    "zsh",
    "dash",
    "ksh",
    "fish",
    "pwsh",
    "rscript",
    "julia",
    "awk",
    "gawk",
    "mawk",
    "sed",
    "tclsh",
    "expect",
    "java",
    "irb",
    "osascript",
    "make",
];

/// Programs that run another program named in their arguments.
const WRAPPERS: &[&str] = &[
    "sudo", "doas", "su", "xargs", "timeout", "nice", "nohup", "time", "watch", "env", "exec",
    "command", "builtin", "stdbuf", "ionice", "chroot", "unshare", "nsenter", "setsid", "flock",
    "strace", "ltrace", "gdb", "valgrind", "parallel", "npx", "uvx", "bunx", "pnpx",
];

/// Programs whose second word is a subcommand (`cargo test`): only these
/// are remembered as a prefix; anything else as the exact command.
const SUBCOMMAND_TOOLS: &[&str] = &[
    "cargo",
    "git",
    "npm",
    "pnpm",
    "yarn",
    "go",
    "docker",
    "podman",
    "kubectl",
    "rustup",
    "pip",
    "pip3",
    "uv",
    "poetry",
    "gh",
    "just",
    "bazel",
    "mvn",
    "gradle",
    "dotnet",
    "terraform",
    "helm",
    "cmake",
    "meson",
    "composer",
    "mix",
    "stack",
    "cabal",
    "swift",
    "zig",
    "flutter",
    "dart",
    "tox",
    "nox",
    "pdm",
    "hatch",
    "conda",
    "brew",
    "nix",
    "cargo-nextest",
];

/// Subcommands that run a program named after them (`uv run python …`).
const RUNNER_SUBCOMMANDS: &[(&str, &str)] = &[
    ("uv", "run"),
    ("uv", "tool"),
    ("poetry", "run"),
    ("pipx", "run"),
    ("pdm", "run"),
    ("hatch", "run"),
    ("bundle", "exec"),
    ("npm", "exec"),
    ("pnpm", "exec"),
    ("pnpm", "dlx"),
    ("yarn", "exec"),
    ("yarn", "dlx"),
    ("docker", "run"),
    ("docker", "exec"),
    ("podman", "run"),
    ("podman", "exec"),
    ("kubectl", "exec"),
    ("git", "submodule"),
    ("nix", "run"),
    ("nix", "shell"),
    ("conda", "run"),
];

/// The rule an "always allow" of `request` would store, or `None` when
/// nothing narrow enough exists (an unanalysable command, a path outside
/// the project or a protected one).
pub fn always_rule_for(request: &PermissionRequest, ctx: &Context) -> Option<Rule> {
    match request {
        PermissionRequest::Bash { command } => command_rule(command, ctx),
        PermissionRequest::Path { tool, path } => path_rule(*tool, path, ctx),
        PermissionRequest::WebFetch { url } => {
            host::canonical_host(url).map(|domain| Rule::WebFetch { domain })
        }
        PermissionRequest::Tool { name } => Some(Rule::Tool(name.clone())),
    }
}

fn path_rule(tool: PathTool, path: &Path, ctx: &Context) -> Option<Rule> {
    let abs = paths::normalise(&ctx.cwd.join(path));
    let rel = abs.strip_prefix(&ctx.project_root).ok()?;
    if rel.as_os_str().is_empty() || paths::is_protected(&abs, ctx) {
        return None;
    }
    let text = |p: &Path| paths::escape(&p.to_string_lossy());
    let pattern = match rel.parent().filter(|p| !p.as_os_str().is_empty()) {
        Some(dir) => format!("/{}/**", text(dir)),
        None => format!("/{}", text(rel)),
    };
    Some(Rule::Path { tool, pattern })
}

fn command_rule(command: &str, ctx: &Context) -> Option<Rule> {
    let analysis = shell::analyse(command, ctx);
    if !analysis.is_analysable() {
        return None;
    }
    let needing: Vec<&SimpleCommand> = analysis
        .commands
        .iter()
        .filter(|c| readonly::check(c, ctx.trusted).is_err())
        .collect();
    let (first, rest) = needing.split_first()?;
    let head = subcommand_head(first).filter(|h| h.len() >= 2);
    if let Some(head) = head
        && rest
            .iter()
            .all(|c| subcommand_head(c).is_some_and(|h| h.starts_with(&head)))
    {
        return Some(Rule::Command(CommandPattern::Prefix(head)));
    }
    if rest.is_empty() {
        return first
            .literal_words()
            .map(|w| Rule::Command(CommandPattern::Exact(w)));
    }
    None
}

/// The program and the subcommand words after it (`cargo test`, `npm run
/// build`; at most three), or `None` when the program is not known to take
/// subcommands or runs code given to it (an interpreter, a wrapper, `uv
/// run`), so that no prefix is safe.
fn subcommand_head(cmd: &SimpleCommand) -> Option<Vec<String>> {
    let words = cmd.literal_words()?;
    let program = words.first()?;
    let is_runner = |w: &str| {
        let base = w.rsplit('/').next().unwrap_or(w).to_ascii_lowercase();
        let stem = base.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
        INTERPRETERS.contains(&base.as_str())
            || INTERPRETERS.contains(&stem)
            || WRAPPERS.contains(&base.as_str())
    };
    if is_runner(program) || !SUBCOMMAND_TOOLS.contains(&program.as_str()) {
        return None;
    }
    let mut head = vec![program.clone()];
    for word in words.iter().skip(1).take(2) {
        let subcommand = word.starts_with(|c: char| c.is_ascii_lowercase())
            && word
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
        if !subcommand {
            break;
        }
        let pair = (program.as_str(), word.as_str());
        if is_runner(word) || RUNNER_SUBCOMMANDS.contains(&pair) {
            return None;
        }
        head.push(word.clone());
    }
    Some(head)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx() -> Context {
        let mut ctx = Context::new("/proj", true);
        ctx.home = Some(PathBuf::from("/home/u"));
        ctx
    }

    fn rules(allow: &[&str], ask: &[&str], deny: &[&str]) -> RuleSet {
        let mut set = RuleSet::new();
        for (kind, list) in [
            (Decision::Allow, allow),
            (Decision::Ask, ask),
            (Decision::Deny, deny),
        ] {
            for r in list {
                set.push(kind, r.parse().unwrap(), RuleSource::Session, true);
            }
        }
        set
    }

    fn bash(set: &RuleSet, command: &str) -> Decision {
        let request = PermissionRequest::Bash {
            command: command.into(),
        };
        decide(set, &request, &ctx()).decision
    }

    #[test]
    fn claude_codes_rule_forms_mean_what_they_mean_there() {
        let set = rules(
            &["Bash(npm run test:*)", "WebFetch(domain:*)"],
            &["Bash(git commit*)", "Bash(git checkout -- *)"],
            &["Read(./.env)", "Grep(vendor/**)"],
        );
        // `*` right after a word: a plain prefix of that word.
        assert_eq!(bash(&set, "git commit"), Decision::Ask);
        assert_eq!(bash(&set, "git commit -m x"), Decision::Ask);
        assert_eq!(bash(&set, "git commit-tree x"), Decision::Ask);
        assert_eq!(bash(&set, "git status && git commit -am x"), Decision::Ask);
        assert_eq!(bash(&set, "git checkout -- a.txt"), Decision::Ask);
        assert_eq!(bash(&set, "npm run test:unit"), Decision::Allow);
        assert_eq!(bash(&set, "npm run test"), Decision::Allow);
        // A Read deny covers Glob and Grep; a Grep rule only Grep.
        for tool in [PathTool::Read, PathTool::Glob, PathTool::Grep] {
            assert_eq!(path(&set, tool, "/proj/.env").decision, Decision::Deny);
        }
        assert_eq!(
            path(&set, PathTool::Grep, "vendor/a").decision,
            Decision::Deny
        );
        assert_ne!(
            path(&set, PathTool::Glob, "vendor/a").decision,
            Decision::Deny
        );
        // `domain:*` is every host.
        let fetch = PermissionRequest::WebFetch {
            url: "https://docs.rs/x".into(),
        };
        assert_eq!(decide(&set, &fetch, &ctx()).decision, Decision::Allow);
    }

    #[test]
    fn every_simple_command_must_be_allowed() {
        let set = rules(&["Bash(cargo test:*)", "Bash(git push)"], &[], &[]);
        assert_eq!(bash(&set, "cargo test --all"), Decision::Allow);
        assert_eq!(bash(&set, "cargo test && git push"), Decision::Allow);
        assert_eq!(bash(&set, "cargo test | tail -5"), Decision::Allow);
        assert_eq!(bash(&set, "cargo test; touch X"), Decision::Ask);
        assert_eq!(bash(&set, "cargo test $(touch X)"), Decision::Ask);
        assert_eq!(bash(&set, "git push --force"), Decision::Ask);
        assert_eq!(bash(&set, "cargo testx"), Decision::Ask);
        assert_eq!(bash(&set, "eval cargo test"), Decision::Ask);
        assert_eq!(bash(&set, "cargo test > /tmp/out"), Decision::Ask);
        assert_eq!(bash(&set, "cargo test > out"), Decision::Allow);
    }

    #[test]
    fn deny_beats_ask_beats_allow() {
        let set = rules(
            &["Bash(git:*)", "Bash"],
            &["Bash(git push:*)"],
            &["Bash(rm:*)"],
        );
        assert_eq!(bash(&set, "git status"), Decision::Allow);
        assert_eq!(bash(&set, "git push origin"), Decision::Ask);
        assert_eq!(bash(&set, "git status; rm -rf /"), Decision::Deny);
        assert_eq!(bash(&set, "eval x; rm -rf /"), Decision::Deny);
        assert_eq!(bash(&set, "echo $(rm x)"), Decision::Deny);
        assert_eq!(bash(&set, "eval x"), Decision::Ask);
        assert_eq!(bash(&set, "sudo rm -rf /"), Decision::Deny);
        assert_eq!(bash(&set, "timeout 5 nice -n 3 rm x"), Decision::Deny);
        assert_eq!(bash(&set, "find . | xargs -0 rm"), Decision::Deny);
    }

    #[test]
    fn untrusted_allow_rules_are_ignored_and_reported() {
        let mut set = RuleSet::new();
        let project = RuleSource::Project("/proj/.kaji/config.toml".into());
        set.push(
            Decision::Allow,
            "Bash(make:*)".parse().unwrap(),
            project.clone(),
            false,
        );
        set.push(
            Decision::Deny,
            "Bash(curl:*)".parse().unwrap(),
            project,
            false,
        );
        let d = decide(
            &set,
            &PermissionRequest::Bash {
                command: "make all".into(),
            },
            &ctx(),
        );
        assert_eq!(d.decision, Decision::Ask);
        assert_eq!(d.ignored.len(), 1);
        assert_eq!(bash(&set, "curl x"), Decision::Deny);
    }

    #[test]
    fn read_only_commands_run_and_git_needs_trust() {
        let set = RuleSet::new();
        assert_eq!(bash(&set, "ls -la && cat x | wc -l"), Decision::Allow);
        assert_eq!(bash(&set, "git status"), Decision::Allow);
        let untrusted = Context::new("/proj", false);
        let request = PermissionRequest::Bash {
            command: "git status".into(),
        };
        assert_eq!(decide(&set, &request, &untrusted).decision, Decision::Ask);
        assert_eq!(bash(&set, "PAGER=x git log"), Decision::Ask);
        assert_eq!(bash(&set, "ls > x"), Decision::Ask);
        assert!(is_read_only_command("rg foo | head", &ctx()));
        assert!(!is_read_only_command("rg foo; touch x", &ctx()));
    }

    fn path(set: &RuleSet, tool: PathTool, p: &str) -> PolicyDecision {
        let request = PermissionRequest::Path {
            tool,
            path: p.into(),
        };
        decide(set, &request, &ctx())
    }

    #[test]
    fn path_rules_and_protected_paths() {
        let set = rules(&["Edit(/src/**)", "Edit"], &[], &["Read(~/.ssh/**)"]);
        assert_eq!(
            path(&set, PathTool::Edit, "src/a.rs").decision,
            Decision::Allow
        );
        assert_eq!(
            path(&set, PathTool::Write, "/proj/src/a.rs").decision,
            Decision::Allow
        );
        let protected = path(&set, PathTool::Edit, ".git/config");
        assert_eq!(protected.decision, Decision::Ask);
        assert!(matches!(protected.reason, Reason::Protected(_)));
        assert_eq!(
            path(&set, PathTool::Read, "/home/u/.ssh/id_rsa").decision,
            Decision::Deny
        );
        assert_eq!(
            path(&set, PathTool::Edit, "/home/u/.ssh/authorized_keys").decision,
            Decision::Deny
        );
        let none = RuleSet::new();
        assert!(path(&none, PathTool::Edit, "src/a.rs").is_default());
    }

    #[test]
    fn other_tools_and_hosts() {
        let set = rules(&["WebFetch(domain:docs.rs)", "mcp__git"], &[], &[]);
        let fetch = |url: &str| {
            decide(
                &set,
                &PermissionRequest::WebFetch { url: url.into() },
                &ctx(),
            )
            .decision
        };
        assert_eq!(fetch("https://docs.rs/tokio"), Decision::Allow);
        assert_eq!(fetch("https://docs.rs.evil.com/"), Decision::Ask);
        assert_eq!(fetch("https://docs.rs@evil.com/"), Decision::Ask);
        let tool = |name: &str| {
            decide(&set, &PermissionRequest::Tool { name: name.into() }, &ctx()).decision
        };
        assert_eq!(tool("mcp__git__log"), Decision::Allow);
        assert_eq!(tool("mcp__other__log"), Decision::Ask);
    }

    #[test]
    fn fetch_rules_apply_to_the_address_not_its_spelling() {
        let set = rules(
            &["WebFetch", "WebFetch(domain:10.0.0.7)"],
            &[],
            &["WebFetch(domain:169.254.169.254)"],
        );
        let fetch = |url: &str| {
            decide(
                &set,
                &PermissionRequest::WebFetch { url: url.into() },
                &ctx(),
            )
        };
        for url in [
            "http://169.254.169.254/",
            "http://2852039166/",
            "http://0xa9.0xfe.0xa9.0xfe/",
            "http://[::ffff:169.254.169.254]/",
            "http://169.254.169.254./",
        ] {
            assert_eq!(fetch(url).decision, Decision::Deny, "{url}");
        }
        // A bare WebFetch allow does not reach this machine or a private
        // network; a rule naming the address does.
        for url in [
            "http://127.1:8080/",
            "http://localhost/",
            "http://[::1]/",
            "http://192.168.1.1/",
        ] {
            let d = fetch(url);
            assert_eq!(d.decision, Decision::Ask, "{url}");
            assert!(
                matches!(d.reason, Reason::LocalAddress(_)),
                "{url}: {:?}",
                d.reason
            );
        }
        assert_eq!(fetch("http://012.0.0.7/").decision, Decision::Allow);
        assert_eq!(fetch("https://docs.rs/").decision, Decision::Allow);
        // What "always" remembers is the address too.
        let rule = always_rule_for(
            &PermissionRequest::WebFetch {
                url: "http://0x7f.1/".into(),
            },
            &ctx(),
        );
        assert_eq!(
            rule.map(|r| r.to_string()).as_deref(),
            Some("WebFetch(domain:127.0.0.1)")
        );
        // A backslash ends the host as a browser reads it.
        assert_eq!(
            host::host_of("http://evil.com\\@127.0.0.1/").as_deref(),
            Some("evil.com")
        );
    }

    fn always(command: &str) -> Option<String> {
        always_rule_for(
            &PermissionRequest::Bash {
                command: command.into(),
            },
            &ctx(),
        )
        .map(|r| r.to_string())
    }

    #[test]
    fn always_remembers_no_more_than_was_asked() {
        assert_eq!(
            always("python3 -m unittest -v").as_deref(),
            Some("Bash(python3 -m unittest -v)")
        );
        assert_eq!(
            always("cargo test --all").as_deref(),
            Some("Bash(cargo test:*)")
        );
        assert_eq!(
            always("cargo test -q && cargo test --doc").as_deref(),
            Some("Bash(cargo test:*)")
        );
        assert_eq!(
            always("cargo test 2>&1 | tail -20").as_deref(),
            Some("Bash(cargo test:*)")
        );
        assert_eq!(
            always("npm run build").as_deref(),
            Some("Bash(npm run build:*)")
        );
        assert_eq!(
            always("uv run python -c x").as_deref(),
            Some("Bash(uv run python -c x)")
        );
        assert_eq!(always("bash -c \"$x\""), None);
        assert_eq!(always("cargo build && touch x"), None);
        assert_eq!(always("touch x").as_deref(), Some("Bash(touch x)"));

        let rule: Rule = always("python3 -m unittest -v").unwrap().parse().unwrap();
        let mut set = RuleSet::new();
        set.push(Decision::Allow, rule, RuleSource::Session, true);
        assert_eq!(bash(&set, "python3 -m unittest -v"), Decision::Allow);
        assert_eq!(bash(&set, "python3 -m unittest -v; touch X"), Decision::Ask);
        assert_eq!(bash(&set, "python3 -c 'import os'"), Decision::Ask);
    }

    #[test]
    fn always_for_paths_stays_inside_the_project() {
        let rule = |tool, p: &str| {
            always_rule_for(
                &PermissionRequest::Path {
                    tool,
                    path: p.into(),
                },
                &ctx(),
            )
            .map(|r| r.to_string())
        };
        assert_eq!(
            rule(PathTool::Edit, "src/x/a.rs").as_deref(),
            Some("Edit(/src/x/**)")
        );
        assert_eq!(
            rule(PathTool::Write, "README.md").as_deref(),
            Some("Write(/README.md)")
        );
        assert_eq!(rule(PathTool::Edit, "/home/u/.bashrc"), None);
        assert_eq!(rule(PathTool::Edit, "../other/x"), None);
        assert_eq!(rule(PathTool::Edit, ".git/config"), None);
        assert_eq!(rule(PathTool::Edit, ".kaji/config.toml"), None);
        let stored: Rule = rule(PathTool::Edit, "src/a.rs").unwrap().parse().unwrap();
        let mut set = RuleSet::new();
        set.push(Decision::Allow, stored, RuleSource::Session, true);
        assert_eq!(
            path(&set, PathTool::Edit, "/home/u/.bashrc").decision,
            Decision::Ask
        );
        assert_eq!(
            path(&set, PathTool::Edit, "src/b.rs").decision,
            Decision::Allow
        );
    }
}
