//! Who may run what: the permission modes, the session's rules (settings,
//! flags and "always allow" answers) and its sandbox.
//!
//! A decision goes through `kaji_policy::decide` (deny beats ask beats
//! allow); when no rule decides, the permission mode does, and with the
//! sandbox on a command no rule denies or asks runs confined. This module
//! never asks by itself and never reads settings: the executor turns `Ask`
//! into an `ask` event, the SessionBuilder fills [`SessionApprovals`].

use std::path::{Path, PathBuf};
use std::sync::Arc;

use kaji_policy::{Context, PathTool, PermissionRequest, Reason, Rule, RuleSet, RuleSource};
use kaji_protocol::AskKind;
use kaji_sandbox::{SandboxMode, SandboxPolicy};
use kaji_tools::{ToolAccess, normalize_lexically, real_path};
use serde_json::Value;

/// How much runs without asking.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PermissionMode {
    /// Read-only tools run; edits and commands ask.
    #[default]
    Default,
    /// Edits inside the working directory run too; commands ask.
    AcceptEdits,
    /// Everything runs.
    Yolo,
    /// Only read-only tools run: the task investigates and proposes a plan.
    Plan,
}

impl PermissionMode {
    /// The mode's name on the command line and in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Default => "default",
            Self::AcceptEdits => "accept-edits",
            Self::Yolo => "yolo",
            Self::Plan => "plan",
        }
    }

    /// The mode's name in Claude Code's formats (hook input, the Agent
    /// SDK): `default`, `acceptEdits`, `bypassPermissions`, `plan`.
    pub fn claude_name(self) -> &'static str {
        match self {
            Self::Default => "default",
            Self::AcceptEdits => "acceptEdits",
            Self::Yolo => "bypassPermissions",
            Self::Plan => "plan",
        }
    }
}

impl std::str::FromStr for PermissionMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "default" => Ok(Self::Default),
            "accept-edits" | "acceptEdits" => Ok(Self::AcceptEdits),
            "yolo" | "bypassPermissions" => Ok(Self::Yolo),
            "plan" => Ok(Self::Plan),
            other => Err(format!(
                "unknown permission mode {other:?}: expected default, accept-edits, yolo or plan"
            )),
        }
    }
}

/// The outcome of a permission check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Run it.
    Allow,
    /// Run it, confined in the sandbox, without asking.
    AllowSandboxed,
    /// Ask the user with this kind of ask.
    Ask(AskKind),
    /// Refuse it with this reason (for the model).
    Deny(String),
}

/// A call that was denied because nobody could approve it (`kaji exec`).
#[derive(Debug, Clone, PartialEq)]
pub struct PermissionDenial {
    /// The tool call's id.
    pub tool_use_id: String,
    /// The tool.
    pub tool: String,
    /// Its arguments.
    pub input: Value,
    /// Why it needed an approval.
    pub reason: String,
    /// The rule that would have allowed it (for `--allow`), if one is
    /// narrow enough.
    pub rule: Option<String>,
    /// What the call would have done, for a hint at what would allow it.
    pub action: DeniedAction,
}

/// What a denied call would have done, from its permission requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DeniedAction {
    /// Run a command (the sandbox could have run it confined).
    Command,
    /// Edit or write files (accept-edits allows those inside the project).
    FileChange,
    /// Anything else.
    #[default]
    Other,
}

impl DeniedAction {
    /// The action of a call asking `requests`.
    pub fn of(requests: &[PermissionRequest]) -> Self {
        let edits = |r: &PermissionRequest| {
            matches!(
                r,
                PermissionRequest::Path {
                    tool: PathTool::Edit | PathTool::Write,
                    ..
                }
            )
        };
        if requests
            .iter()
            .any(|r| matches!(r, PermissionRequest::Bash { .. }))
        {
            Self::Command
        } else if requests.iter().any(edits) {
            Self::FileChange
        } else {
            Self::Other
        }
    }
}

/// How the session's sandbox is chosen.
#[derive(Debug, Clone, Default)]
pub struct SandboxSettings {
    /// `--sandbox` or the `sandbox` setting; `None`: by permission mode.
    pub explicit: Option<SandboxMode>,
    /// Whether every sandbox layer works here (`kaji_sandbox::probe`).
    pub available: bool,
    /// `sandbox_network`.
    pub network: bool,
    /// `sandbox_deny_read`.
    pub deny_read: Vec<String>,
    /// `sandbox_allow_unix_sockets`.
    pub allow_unix_sockets: Vec<String>,
    /// `$KAJI_HOME` (unreadable to commands; its run dir writable).
    pub kaji_home: PathBuf,
    /// The session id (for the run dir).
    pub session_id: String,
}

impl SandboxSettings {
    /// The sandbox a command runs in under `mode`: the explicit one, else
    /// workspace-write (read-only in plan mode, off in yolo) where it is
    /// available; off where it is not.
    pub fn mode_for(&self, mode: PermissionMode) -> SandboxMode {
        if !self.available {
            return SandboxMode::Off;
        }
        match (self.explicit, mode) {
            (Some(m), _) => m,
            (None, PermissionMode::Yolo) => SandboxMode::Off,
            (None, PermissionMode::Plan) => SandboxMode::ReadOnly,
            (None, _) => SandboxMode::WorkspaceWrite,
        }
    }
}

/// The session's permission state: every rule (user, project, local,
/// flags, and "always allow" answers), the trust and protection context,
/// the sandbox, and the denials nobody could answer.
#[derive(Debug, Clone, Default)]
pub struct SessionApprovals {
    rules: RuleSet,
    /// Whether the project is trusted (its `.git/config` too).
    pub trusted: bool,
    /// `protected_paths` and the worktree's git paths.
    pub protected_paths: Vec<String>,
    /// Nobody can approve asks (`kaji exec`): denied asks are recorded
    /// and count as mistakes.
    pub headless: bool,
    /// How the sandbox is chosen.
    pub sandbox: SandboxSettings,
    denials: Vec<PermissionDenial>,
}

impl SessionApprovals {
    /// Approvals over these rules.
    pub fn with_rules(rules: RuleSet) -> Self {
        Self {
            rules,
            ..Self::default()
        }
    }

    /// The rules.
    pub fn rules(&self) -> &RuleSet {
        &self.rules
    }

    /// The policy context for a call in `cwd` of the project `project`.
    pub fn context(&self, project: &Path, cwd: &Path) -> Context {
        let mut ctx = Context::new(project, self.trusted);
        ctx.cwd = kaji_policy::paths::normalise(cwd);
        ctx.home = std::env::var_os("HOME").map(PathBuf::from);
        ctx.protected_paths = self.protected_paths.clone();
        ctx.real_path = kaji_policy::RealPath::new(kernel_real_path);
        ctx
    }

    /// Remembers an "always allow" of `request`: stores the exact rule
    /// `kaji_policy::always_rule_for` gives and returns it (for the
    /// session file), or `None` when nothing narrow enough exists (then
    /// the call is approved once).
    pub fn remember(&mut self, request: &PermissionRequest, ctx: &Context) -> Option<String> {
        let rule = kaji_policy::always_rule_for(request, ctx)?;
        let text = rule.to_string();
        self.rules.push(
            kaji_policy::Decision::Allow,
            rule,
            RuleSource::Session,
            true,
        );
        Some(text)
    }

    /// Remembers an "always allow" rule (one [`always_rule_for`] gave) for
    /// the rest of the session.
    ///
    /// [`always_rule_for`]: kaji_policy::always_rule_for
    pub fn remember_rule(&mut self, rule: Rule) {
        self.rules.push(
            kaji_policy::Decision::Allow,
            rule,
            RuleSource::Session,
            true,
        );
    }

    /// Allows what `rules` match (Claude Code syntax) until
    /// [`SessionApprovals::drop_source`] of the same `source`: a custom
    /// command's `allowed-tools` for its prompt. A rule that does not
    /// parse is an error naming it; nothing is added then.
    pub fn allow_from(
        &mut self,
        rules: &[String],
        source: RuleSource,
    ) -> Result<(), kaji_policy::RuleParseError> {
        let parsed: Vec<Rule> = rules
            .iter()
            .map(|r| r.parse::<Rule>())
            .collect::<Result<_, _>>()?;
        for rule in parsed {
            self.rules
                .push(kaji_policy::Decision::Allow, rule, source.clone(), true);
        }
        Ok(())
    }

    /// Forgets the rules [`SessionApprovals::allow_from`] added for `source`.
    pub fn drop_source(&mut self, source: &RuleSource) {
        self.rules.remove_source(source);
    }

    /// Restores an approval from a rule that [`SessionApprovals::remember`]
    /// returned (a resumed session). A rule that no longer parses is
    /// dropped.
    pub fn restore(&mut self, rule: &str) {
        if let Ok(rule) = rule.parse::<Rule>() {
            self.rules.push(
                kaji_policy::Decision::Allow,
                rule,
                RuleSource::Session,
                true,
            );
        }
    }

    /// Records a denial nobody could answer.
    pub fn record_denial(&mut self, denial: PermissionDenial) {
        self.denials.push(denial);
    }

    /// The denials nobody could answer, in order.
    pub fn denials(&self) -> &[PermissionDenial] {
        &self.denials
    }

    /// The sandbox policy for commands in `cwd` under `mode`, or `None`
    /// when the sandbox is off.
    pub fn sandbox_for(&self, mode: PermissionMode, cwd: &Path) -> Option<Arc<SandboxPolicy>> {
        let sandbox_mode = self.sandbox.mode_for(mode);
        if sandbox_mode == SandboxMode::Off {
            return None;
        }
        let s = &self.sandbox;
        let run_dir = s.kaji_home.join("runs").join(&s.session_id);
        let mut policy = SandboxPolicy::for_session(
            sandbox_mode,
            cwd,
            &s.kaji_home,
            Some(&run_dir),
            &s.deny_read,
            s.network,
        );
        let home = std::env::var_os("HOME").map(PathBuf::from);
        policy.allow_unix_sockets = s
            .allow_unix_sockets
            .iter()
            .map(|p| kaji_sandbox::expand_home(p, home.as_deref()))
            .collect();
        Some(Arc::new(policy))
    }
}

/// The one approval memory of a session, shared by its Tasks' executors.
pub type SharedApprovals = std::sync::Arc<std::sync::Mutex<SessionApprovals>>;

/// The files a `Read` deny rule covers, for the reading tools (Grep and
/// Glob leave them out); `None` when no deny rule could cover a file.
pub fn read_filter(
    approvals: &SharedApprovals,
    project: &Path,
    cwd: &Path,
) -> Option<kaji_tools::ReadFilter> {
    let (rules, ctx) = {
        let a = approvals.lock().unwrap_or_else(|e| e.into_inner());
        let any_deny = a
            .rules
            .entries()
            .iter()
            .any(|e| e.kind == kaji_policy::Decision::Deny);
        if !any_deny {
            return None;
        }
        (a.rules.clone(), a.context(project, cwd))
    };
    Some(kaji_tools::ReadFilter::new(move |path| {
        let request = PermissionRequest::Path {
            tool: PathTool::Read,
            path: path.to_path_buf(),
        };
        kaji_policy::decide(&rules, &request, &ctx).decision == kaji_policy::Decision::Deny
    }))
}

/// The sandbox policy of `approvals` for a call in `cwd` under `mode`.
pub fn sandbox_for(
    approvals: &SharedApprovals,
    mode: PermissionMode,
    cwd: &Path,
) -> Option<Arc<SandboxPolicy>> {
    approvals
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .sandbox_for(mode, cwd)
}

/// The policy requests a call makes: one per path of an edit, one for a
/// command, a read of the file it names or another tool; none for calls no
/// rule governs (interaction, session state). `reads` are the files the
/// tool says the call reads. Path rules name their tools (`Read(…)`,
/// `Edit(…)`, `Write(…)`): a call's path requests take the rule tool of
/// its name, edits by any other tool count as `Edit`.
pub fn requests_for(tool: &str, access: &ToolAccess, reads: &[PathBuf]) -> Vec<PermissionRequest> {
    let rule_tool = PathTool::from_name(tool);
    match access {
        ToolAccess::Execute { command } => vec![PermissionRequest::Bash {
            command: command.clone(),
        }],
        ToolAccess::Edit { paths } => {
            let path_tool = match rule_tool {
                Some(PathTool::Write) => PathTool::Write,
                _ => PathTool::Edit,
            };
            paths
                .iter()
                .map(|p| PermissionRequest::Path {
                    tool: path_tool,
                    path: p.clone(),
                })
                .collect()
        }
        ToolAccess::ReadOnly => match (rule_tool, reads.first()) {
            (Some(t), Some(path)) if t.reads() => vec![PermissionRequest::Path {
                tool: t,
                path: path.clone(),
            }],
            _ => vec![PermissionRequest::Tool {
                name: tool.to_string(),
            }],
        },
        ToolAccess::External => vec![PermissionRequest::Tool {
            name: tool.to_string(),
        }],
        ToolAccess::Network { url, .. } => vec![PermissionRequest::WebFetch { url: url.clone() }],
        ToolAccess::Interaction
        | ToolAccess::SessionState
        | ToolAccess::TakeOver { .. }
        | ToolAccess::SharedTask { .. } => Vec::new(),
    }
}

/// Decides whether a call runs, asks or is refused: the rules first (deny
/// beats ask beats allow; protected paths ask), then the permission mode.
pub fn decide(
    mode: PermissionMode,
    tool: &str,
    access: &ToolAccess,
    reads: &[PathBuf],
    ctx: &Context,
    approvals: &SessionApprovals,
) -> Decision {
    if let Some(decision) = decide_shared_task(mode, tool, access) {
        return decision;
    }
    let mut worst = Decision::Allow;
    for request in &requests_for(tool, access, reads) {
        let d = decide_one(mode, tool, access, request, ctx, approvals);
        worst = match (&worst, &d) {
            (Decision::Deny(_), _) => worst,
            (_, Decision::Deny(_)) => d,
            (Decision::Ask(_), _) => worst,
            (_, Decision::Ask(_)) => d,
            (Decision::AllowSandboxed, _) => worst,
            _ => d,
        };
    }
    worst
}

/// The decision on a change of a task of the shared list the caller does
/// not hold. Taking over another owner's task: the user decides, in every
/// mode but yolo (no rule covers it). Plan mode plans: it adds tasks and
/// changes the ones it holds, never the list's others.
fn decide_shared_task(mode: PermissionMode, tool: &str, access: &ToolAccess) -> Option<Decision> {
    let task_id = match access {
        ToolAccess::TakeOver { task_id, .. } => Some(*task_id),
        ToolAccess::SharedTask { task_id } => *task_id,
        _ => return None,
    };
    match (access, mode) {
        (_, PermissionMode::Plan) => {
            let which = task_id.map_or_else(|| "a task".to_string(), |id| format!("task #{id}"));
            Some(Decision::Deny(format!(
                "{tool} is not allowed in plan mode on {which}: you do not hold it, and plan mode \
                 may only create tasks and change the ones you hold. Present your plan with \
                 ExitPlanMode first."
            )))
        }
        (ToolAccess::TakeOver { .. }, PermissionMode::Yolo) => Some(Decision::Allow),
        (ToolAccess::TakeOver { .. }, _) => Some(Decision::Ask(AskKind::Tool)),
        _ => Some(Decision::Allow),
    }
}

fn decide_one(
    mode: PermissionMode,
    tool: &str,
    access: &ToolAccess,
    request: &PermissionRequest,
    ctx: &Context,
    approvals: &SessionApprovals,
) -> Decision {
    use kaji_policy::Decision as P;
    let policy = kaji_policy::decide(&approvals.rules, request, ctx);
    if policy.decision == P::Deny {
        let by = policy
            .rule
            .as_ref()
            .map(|(r, s)| format!(" by the rule {r} ({s})"))
            .unwrap_or_default();
        return Decision::Deny(format!("{tool} is denied{by}."));
    }
    // A rule's ask, and a fetch from this machine or a private network,
    // ask in every mode.
    let asked_by_rule = policy.decision == P::Ask
        && matches!(policy.reason, Reason::Rule | Reason::LocalAddress(_));
    let kind = match access {
        ToolAccess::Execute { .. } => AskKind::Command,
        _ => AskKind::Tool,
    };
    match (request, mode) {
        // Reads run unless a rule denies them.
        (PermissionRequest::Path { tool, .. }, _) if tool.reads() => Decision::Allow,
        (PermissionRequest::Tool { .. }, _) if matches!(access, ToolAccess::ReadOnly) => {
            Decision::Allow
        }
        (PermissionRequest::Bash { command }, PermissionMode::Plan) => {
            if kaji_policy::is_read_only_command(command, ctx) {
                Decision::Allow
            } else {
                Decision::Deny(format!(
                    "{tool} is not allowed in plan mode: only read-only commands (ls, cat, rg, git status, …) run until the plan is approved. Investigate with read-only tools, then present your plan with ExitPlanMode."
                ))
            }
        }
        (_, PermissionMode::Plan) => Decision::Deny(format!(
            "{tool} is not allowed in plan mode: only read-only tools run until the plan is approved. Investigate with read-only tools, then present your plan with ExitPlanMode."
        )),
        _ if asked_by_rule => Decision::Ask(kind),
        (_, PermissionMode::Yolo) => Decision::Allow,
        _ if policy.decision == P::Allow => Decision::Allow,
        (PermissionRequest::Bash { .. }, _) => {
            // A workspace holding the home directory could create a
            // shell's start-up file: no command runs there unasked.
            if approvals.sandbox.mode_for(mode) != SandboxMode::Off
                && !kaji_sandbox::holds_home(&ctx.cwd, ctx.home.as_deref())
            {
                Decision::AllowSandboxed
            } else {
                Decision::Ask(kind)
            }
        }
        (PermissionRequest::Path { path, .. }, PermissionMode::AcceptEdits)
            if !matches!(policy.reason, Reason::Protected(_))
                && is_inside(&ctx.cwd.join(path), &ctx.cwd) =>
        {
            Decision::Allow
        }
        _ => Decision::Ask(kind),
    }
}

/// Where the absolute `path` really leads, resolved as the kernel resolves
/// it: each symlink followed (dangling ones too), `..` applied to where a
/// link led. Components that do not exist are kept as they are.
pub fn kernel_real_path(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::from("/");
    let mut todo: Vec<PathBuf> = components_reversed(path);
    let mut hops = 0;
    while let Some(part) = todo.pop() {
        match part.components().next() {
            Some(Component::RootDir) => out = PathBuf::from("/"),
            Some(Component::ParentDir) => {
                out.pop();
            }
            Some(Component::Normal(name)) => {
                let next = out.join(name);
                match std::fs::read_link(&next) {
                    // 40 hops, as the kernel's ELOOP limit.
                    Ok(target) if hops < 40 => {
                        hops += 1;
                        todo.extend(components_reversed(&target));
                    }
                    _ => out = next,
                }
            }
            _ => {}
        }
    }
    out
}

fn components_reversed(path: &Path) -> Vec<PathBuf> {
    path.components()
        .rev()
        .map(|c| PathBuf::from(c.as_os_str()))
        .collect()
}

/// The first path the call would write that is protected or outside the
/// project, through symlinks or not: what a PreToolUse hook's `allow` never
/// covers (it still asks). Only writes the call declares count: the
/// paths of an edit, the redirections of a command.
pub fn guarded_write(access: &ToolAccess, ctx: &Context) -> Option<PathBuf> {
    match access {
        ToolAccess::Execute { command } => kaji_policy::shell::analyse(command, ctx)
            .guarded_writes
            .into_iter()
            .next(),
        ToolAccess::Edit { paths } => paths
            .iter()
            .map(|p| kaji_policy::paths::normalise(&ctx.cwd.join(p)))
            .find(|abs| is_guarded(abs, ctx)),
        _ => None,
    }
}

/// Whether writing the absolute, normalised `abs` leaves the project or
/// touches a protected path, lexically or where it really leads.
fn is_guarded(abs: &Path, ctx: &Context) -> bool {
    use kaji_policy::paths::{is_protected, normalise};
    let real = normalise(&ctx.real_path.resolve(abs));
    let real_root = normalise(&ctx.real_path.resolve(&ctx.project_root));
    let rebased = real
        .strip_prefix(&real_root)
        .ok()
        .map(|rel| ctx.project_root.join(rel));
    !abs.starts_with(&ctx.project_root)
        || rebased.is_none() && !real.starts_with(&ctx.project_root)
        || is_protected(abs, ctx)
        || is_protected(&real, ctx)
        || rebased.is_some_and(|p| is_protected(&p, ctx))
}

/// Whether `path` lies inside `dir`, judged on the normalised paths
/// (`..` resolved lexically, symlinks of existing parents followed).
pub fn is_inside(path: &Path, dir: &Path) -> bool {
    let dir = real_path(&normalize_lexically(dir));
    let path = real_path(&normalize_lexically(path));
    path.starts_with(&dir)
}

/// One rule of a `[permissions]` list, with the file it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PermissionRule {
    /// The list it is in: `allow`, `ask` or `deny`.
    pub kind: kaji_policy::Decision,
    /// The rule.
    pub rule: Rule,
    /// The settings file, tagged user, project or local.
    pub source: RuleSource,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bash(c: &str) -> ToolAccess {
        ToolAccess::Execute { command: c.into() }
    }

    fn edit(p: &str) -> ToolAccess {
        ToolAccess::Edit {
            paths: vec![PathBuf::from(p)],
        }
    }

    fn check(
        mode: PermissionMode,
        tool: &str,
        access: &ToolAccess,
        a: &SessionApprovals,
    ) -> Decision {
        let ctx = a.context(Path::new("/work/proj"), Path::new("/work/proj"));
        decide(mode, tool, access, &[], &ctx, a)
    }

    #[test]
    fn modes_and_rules() {
        use PermissionMode::*;
        let mut a = SessionApprovals {
            trusted: true,
            ..SessionApprovals::default()
        };
        assert_eq!(
            check(Default, "Read", &ToolAccess::ReadOnly, &a),
            Decision::Allow
        );
        assert_eq!(
            check(Default, "Write", &edit("/work/proj/a"), &a),
            Decision::Ask(AskKind::Tool)
        );
        assert_eq!(
            check(AcceptEdits, "Write", &edit("/work/proj/a"), &a),
            Decision::Allow
        );
        assert_eq!(
            check(AcceptEdits, "Write", &edit("/work/x"), &a),
            Decision::Ask(AskKind::Tool)
        );
        // Protected paths ask in accept-edits, not in yolo.
        assert_eq!(
            check(AcceptEdits, "Edit", &edit("/work/proj/.git/config"), &a),
            Decision::Ask(AskKind::Tool)
        );
        assert_eq!(
            check(Yolo, "Edit", &edit("/work/proj/.git/config"), &a),
            Decision::Allow
        );
        // Read-only commands run; others ask; plan allows only read-only.
        assert_eq!(
            check(Default, "Bash", &bash("ls -la | wc -l"), &a),
            Decision::Allow
        );
        assert_eq!(
            check(Default, "Bash", &bash("touch x"), &a),
            Decision::Ask(AskKind::Command)
        );
        assert_eq!(check(Plan, "Bash", &bash("cat a"), &a), Decision::Allow);
        assert!(matches!(
            check(Plan, "Bash", &bash("touch x"), &a),
            Decision::Deny(_)
        ));
        assert!(matches!(
            check(Plan, "Write", &edit("/work/proj/a"), &a),
            Decision::Deny(_)
        ));
        // The sandbox runs what no rule asks or denies.
        a.sandbox.available = true;
        assert_eq!(
            check(Default, "Bash", &bash("touch x"), &a),
            Decision::AllowSandboxed
        );
        assert_eq!(check(Yolo, "Bash", &bash("touch x"), &a), Decision::Allow);
        let mut rules = RuleSet::new();
        rules.push(
            kaji_policy::Decision::Deny,
            "Bash(rm:*)".parse().unwrap(),
            RuleSource::Flag,
            true,
        );
        a.rules = rules;
        assert!(matches!(
            check(Yolo, "Bash", &bash("ls; rm -rf x"), &a),
            Decision::Deny(_)
        ));
    }

    #[test]
    fn real_paths_follow_symlinks_as_the_kernel_does() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let project = root.join("proj");
        std::fs::create_dir_all(project.join("src")).unwrap();
        std::fs::create_dir_all(root.join("outside/deep")).unwrap();
        let link = |target: &str, name: &str| {
            std::os::unix::fs::symlink(target, project.join(name)).unwrap();
        };
        link("../outside", "out");
        link("../outside/deep", "deep");
        link("../outside/missing/f", "dangling");
        link("src", "inner");
        assert_eq!(
            kernel_real_path(&project.join("out/x")),
            root.join("outside/x")
        );
        // `link/..` is the parent of where the link leads, not the project.
        assert_eq!(
            kernel_real_path(&project.join("deep/../y")),
            root.join("outside/y")
        );
        assert_eq!(
            kernel_real_path(&project.join("dangling")),
            root.join("outside/missing/f")
        );
        assert_eq!(
            kernel_real_path(&project.join("inner/a.rs")),
            project.join("src/a.rs")
        );

        let a = SessionApprovals {
            trusted: true,
            ..SessionApprovals::default()
        };
        let ctx = a.context(&project, &project);
        let guarded = |c: &str| guarded_write(&bash(c), &ctx);
        assert_eq!(guarded("echo x > out/x"), Some(root.join("outside/x")));
        assert_eq!(guarded("echo x > deep/../y"), Some(root.join("outside/y")));
        assert!(guarded("echo x > dangling").is_some());
        assert!(guarded("echo x > .git/config").is_some());
        assert!(guarded("echo x > ../elsewhere").is_some());
        assert_eq!(guarded("echo x > inner/a.rs"), None);
        assert_eq!(guarded("cargo test > out.txt"), None);
        let write = |p: &Path| guarded_write(&edit(&p.display().to_string()), &ctx);
        assert!(write(&project.join(".kaji/config.toml")).is_some());
        assert!(write(&project.join("out/x")).is_some());
        assert!(write(&root.join("other")).is_some());
        assert_eq!(write(&project.join("src/a.rs")), None);
    }

    #[test]
    fn always_stores_the_exact_rule() {
        let mut a = SessionApprovals {
            trusted: true,
            ..SessionApprovals::default()
        };
        let ctx = a.context(Path::new("/work/proj"), Path::new("/work/proj"));
        let req = PermissionRequest::Bash {
            command: "python3 -m unittest -v".into(),
        };
        assert_eq!(
            a.remember(&req, &ctx).as_deref(),
            Some("Bash(python3 -m unittest -v)")
        );
        let d = PermissionMode::Default;
        assert_eq!(
            check(d, "Bash", &bash("python3 -m unittest -v"), &a),
            Decision::Allow
        );
        assert_eq!(
            check(
                d,
                "Bash",
                &bash("python3 -m unittest -v; touch INJECTED"),
                &a
            ),
            Decision::Ask(AskKind::Command)
        );
        assert_eq!(
            check(d, "Bash", &bash("python3 -c 'import os'"), &a),
            Decision::Ask(AskKind::Command)
        );
        // Nothing outside the project is remembered.
        let outside = PermissionRequest::Path {
            tool: PathTool::Edit,
            path: "/home/u/.bashrc".into(),
        };
        assert_eq!(a.remember(&outside, &ctx), None);
        let mut restored = SessionApprovals::default();
        restored.restore("Bash(python3 -m unittest -v)");
        assert_eq!(restored.rules().entries().len(), 1);
    }
}
