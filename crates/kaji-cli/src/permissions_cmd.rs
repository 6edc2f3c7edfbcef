//! `kaji permissions`: list, add, remove and check permission rules, and
//! `kaji trust`: trust (or stop trusting) a project.
//!
//! A thin layer over `kaji_policy` (the rules and the decision),
//! `kaji_core::config` (where rules are read from) and `kaji_core::trust`
//! (`$KAJI_HOME/trusted.toml`). `add` and `rm` edit one settings file
//! through `kaji_core::rule_files`, which keeps everything else in it and
//! never writes a file that would not load. Nothing here runs a command: `check` only
//! says what kaji would decide.
//!
//! Exit codes: 0 done (for `check`, whatever the decision); 1 `rm` found
//! no such rule; 2 bad arguments, an invalid rule or a settings file that
//! cannot be read or written.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context as _;
use clap::{Subcommand, ValueEnum};
use kaji_core::config::{CONFIG_FILE_NAME, KajiConfig, LOCAL_CONFIG_FILE_NAME};
use kaji_core::trust::{self, TrustStore};
use kaji_policy::{
    Context, Decision, PathTool, PermissionRequest, PolicyDecision, Rule, RuleSet, RuleSource,
};
use serde_json::{Value, json};

/// Arguments of `kaji permissions`.
#[derive(Debug, clap::Args)]
pub struct PermissionsArgs {
    /// The working directory (default: the current one).
    #[arg(short = 'C', value_name = "DIR", global = true)]
    pub dir: Option<PathBuf>,
    #[command(subcommand)]
    pub command: PermissionsCommand,
}

/// `kaji permissions` subcommands.
#[derive(Debug, Subcommand)]
pub enum PermissionsCommand {
    /// Every rule from every settings file, and whether it counts.
    List {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Add a rule (to the allow list unless --ask or --deny).
    Add {
        /// The rule, e.g. 'Bash(cargo test:*)'.
        rule: String,
        /// Which settings file: local (.kaji/config.local.toml), project
        /// (.kaji/config.toml) or user ($KAJI_HOME/config.toml).
        #[arg(long, value_enum, default_value_t = Scope::Local)]
        scope: Scope,
        /// Add it to the ask list.
        #[arg(long, conflicts_with = "deny")]
        ask: bool,
        /// Add it to the deny list.
        #[arg(long)]
        deny: bool,
    },
    /// Remove a rule from every list of the settings files (or of one).
    Rm {
        /// The rule, as added.
        rule: String,
        /// Only this settings file.
        #[arg(long, value_enum)]
        scope: Option<Scope>,
    },
    /// What kaji would decide for a command (or, with --tool, another
    /// request), and which rule decided.
    Check {
        /// The command line (a path for Edit, Write and Read; a URL for
        /// WebFetch).
        request: String,
        /// The tool asked for: Bash (default), Edit, Write, Read,
        /// WebFetch or any other tool name.
        #[arg(long, default_value = "Bash")]
        tool: String,
        /// Ask about this permission mode (default: the `permission_mode`
        /// setting, else `default`).
        #[arg(long, value_name = "MODE")]
        permission_mode: Option<String>,
        /// Ask about this sandbox: read-only, workspace-write or off
        /// (default: the `sandbox` setting, else by permission mode, where
        /// the kernel supports it).
        #[arg(long, value_name = "MODE")]
        sandbox: Option<String>,
        /// Print {decision, rule, source, …} as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Which settings file a rule goes into.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Scope {
    /// `.kaji/config.local.toml` (not committed).
    Local,
    /// `.kaji/config.toml`.
    Project,
    /// `$KAJI_HOME/config.toml`.
    User,
}

/// Arguments of `kaji trust`.
#[derive(Debug, clap::Args)]
pub struct TrustArgs {
    /// The project directory (default: the current one).
    pub dir: Option<PathBuf>,
    /// Stop trusting it.
    #[arg(long)]
    pub revoke: bool,
}

/// Where kaji is working: the directories and the trust answer.
struct Place {
    cwd: PathBuf,
    kaji_home: PathBuf,
    project: PathBuf,
    trusted: bool,
}

impl Place {
    fn find(dir: Option<PathBuf>) -> anyhow::Result<Self> {
        let dir = match dir {
            Some(dir) => dir,
            None => std::env::current_dir().context("cannot read the current directory")?,
        };
        let cwd = dir
            .canonicalize()
            .with_context(|| format!("{}: no such directory", dir.display()))?;
        let kaji_home = crate::paths::kaji_home();
        let project = trust::project_dir(&cwd)?;
        let trusted = trust::is_trusted(&kaji_home, &cwd)?;
        Ok(Self {
            cwd,
            kaji_home,
            project,
            trusted,
        })
    }

    fn file(&self, scope: Scope) -> PathBuf {
        match scope {
            Scope::Local => self.project.join(".kaji").join(LOCAL_CONFIG_FILE_NAME),
            Scope::Project => self.project.join(".kaji").join(CONFIG_FILE_NAME),
            Scope::User => KajiConfig::user_path(&self.kaji_home),
        }
    }

    fn context(&self) -> Context {
        let mut ctx = Context::new(&self.project, self.trusted);
        ctx.cwd = self.cwd.clone();
        ctx.home = std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .map(PathBuf::from);
        ctx.protected_paths = trust::git_protected_patterns(&self.project);
        // Redirections are judged where they really lead, as in a session.
        ctx.real_path = kaji_policy::RealPath::new(kaji_core::permissions::kernel_real_path);
        ctx
    }

    fn rules(&self) -> anyhow::Result<RuleSet> {
        let (config, _) = KajiConfig::load_with(
            &self.kaji_home,
            &self.cwd,
            true,
            &crate::paths::claude_sources(),
        )?;
        let mut set = RuleSet::new();
        for r in config.permissions {
            let trusted = matches!(r.source, RuleSource::User(_)) || self.trusted;
            set.push(r.kind, r.rule, r.source, trusted);
        }
        Ok(set)
    }
}

/// Runs `kaji permissions`; returns the exit code.
pub fn run(args: PermissionsArgs) -> i32 {
    let result = Place::find(args.dir).and_then(|place| match args.command {
        PermissionsCommand::List { json } => list(&place, json),
        PermissionsCommand::Add {
            rule,
            scope,
            ask,
            deny,
        } => {
            let kind = if deny {
                Decision::Deny
            } else if ask {
                Decision::Ask
            } else {
                Decision::Allow
            };
            add(&place, &rule, scope, kind)
        }
        PermissionsCommand::Rm { rule, scope } => rm(&place, &rule, scope),
        PermissionsCommand::Check {
            request,
            tool,
            permission_mode,
            sandbox,
            json,
        } => check(
            &place,
            &request,
            &tool,
            (permission_mode.as_deref(), sandbox.as_deref()),
            json,
        ),
    });
    finish("kaji permissions", result)
}

/// Runs `kaji trust`; returns the exit code.
pub fn run_trust(args: TrustArgs) -> i32 {
    let result = (|| {
        let place = Place::find(args.dir)?;
        kaji_core::trust::record(&place.kaji_home, &place.project, !args.revoke)?;
        let store = TrustStore::load(&place.kaji_home)?;
        let verb = if args.revoke {
            "No longer trusting"
        } else {
            "Trusting"
        };
        println!("{verb} {}", place.project.display());
        println!("(recorded in {})", store.path().display());
        Ok(0)
    })();
    finish("kaji trust", result)
}

fn finish(name: &str, result: anyhow::Result<i32>) -> i32 {
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("{name}: {e:#}");
            2
        }
    }
}

fn ignored_note(source: &RuleSource, trusted: bool, kind: Decision) -> Option<&'static str> {
    let from_project = matches!(source, RuleSource::Project(_) | RuleSource::Local(_));
    (from_project && !trusted && kind == Decision::Allow)
        .then_some("ignored: the project is not trusted; `kaji trust` trusts it")
}

fn list(place: &Place, json: bool) -> anyhow::Result<i32> {
    let rules = place.rules()?;
    let mut out = std::io::stdout().lock();
    if json {
        let entries: Vec<Value> = rules
            .entries()
            .iter()
            .map(|e| {
                json!({
                    "kind": e.kind.as_str(),
                    "rule": e.rule.to_string(),
                    "scope": e.source.scope(),
                    "source": e.source.to_string(),
                    "ignored": ignored_note(&e.source, place.trusted, e.kind).is_some(),
                })
            })
            .collect();
        let value = json!({
            "project": place.project,
            "trusted": place.trusted,
            "rules": entries,
        });
        writeln!(out, "{value:#}")?;
        return Ok(0);
    }
    let trust = if place.trusted {
        "trusted"
    } else {
        "not trusted"
    };
    writeln!(out, "Project {} ({trust})", place.project.display())?;
    if rules.entries().is_empty() {
        writeln!(out, "No permission rules.")?;
    }
    for e in rules.entries() {
        let note = ignored_note(&e.source, place.trusted, e.kind)
            .map(|n| format!("  ({n})"))
            .unwrap_or_default();
        writeln!(
            out,
            "{:<5}  {:<32}  {:<7}  {}{note}",
            e.kind.as_str(),
            e.rule.to_string(),
            e.source.scope(),
            e.source
        )?;
    }
    Ok(0)
}

use kaji_core::PermissionMode;
use kaji_core::permissions::{Decision as CoreDecision, SessionApprovals};
use kaji_sandbox::SandboxMode;
use kaji_tools::ToolAccess;

fn request_for(tool: &str, request: &str) -> PermissionRequest {
    let path = |tool| PermissionRequest::Path {
        tool,
        path: PathBuf::from(request),
    };
    match tool {
        "Bash" => PermissionRequest::Bash {
            command: request.to_string(),
        },
        "Edit" => path(PathTool::Edit),
        "Write" => path(PathTool::Write),
        "Read" => path(PathTool::Read),
        "WebFetch" => PermissionRequest::WebFetch {
            url: request.to_string(),
        },
        other => PermissionRequest::Tool {
            name: other.to_string(),
        },
    }
}

/// The access a call of `tool` on `request` has, as the session sees it.
fn access_for(place: &Place, tool: &str, request: &str) -> (ToolAccess, Vec<PathBuf>) {
    let abs = || place.cwd.join(request);
    match tool {
        "Bash" => (
            ToolAccess::Execute {
                command: request.to_string(),
            },
            Vec::new(),
        ),
        "Edit" | "Write" => (ToolAccess::Edit { paths: vec![abs()] }, Vec::new()),
        "Read" => (ToolAccess::ReadOnly, vec![abs()]),
        "WebFetch" => (
            ToolAccess::Network {
                url: request.to_string(),
                domain: String::new(),
            },
            Vec::new(),
        ),
        _ => (ToolAccess::External, Vec::new()),
    }
}

/// What a session here would do with the call: the rules, then the
/// permission mode and the sandbox, as `kaji_core::permissions::decide`
/// decides in a session.
fn session_decision(
    place: &Place,
    rules: RuleSet,
    tool: &str,
    request: &str,
    (mode, sandbox): (Option<&str>, Option<&str>),
) -> anyhow::Result<(CoreDecision, PermissionMode, SandboxMode)> {
    let config = KajiConfig::load(&place.kaji_home, &place.cwd)?;
    let mode = match mode {
        Some(m) => m
            .parse::<PermissionMode>()
            .map_err(|e| anyhow::anyhow!("--permission-mode: {e}"))?,
        None => config
            .permission_mode
            .filter(|_| place.trusted)
            .unwrap_or_default(),
    };
    let explicit = match sandbox {
        Some(s) => Some(
            s.parse::<SandboxMode>()
                .map_err(|e| anyhow::anyhow!("--sandbox: {e}"))?,
        ),
        None => config.sandbox,
    };
    let mut approvals = SessionApprovals::with_rules(rules);
    approvals.trusted = place.trusted;
    approvals.protected_paths = config.protected_paths.clone();
    approvals.sandbox.explicit = explicit;
    approvals.sandbox.available =
        explicit == Some(SandboxMode::Off) || kaji_sandbox::probe().is_complete();
    approvals.sandbox.kaji_home = place.kaji_home.clone();
    let mut ctx = place.context();
    ctx.protected_paths.extend(config.protected_paths);
    let (access, reads) = access_for(place, tool, request);
    let decision = kaji_core::permissions::decide(mode, tool, &access, &reads, &ctx, &approvals);
    Ok((decision, mode, approvals.sandbox.mode_for(mode)))
}

fn check(
    place: &Place,
    request: &str,
    tool: &str,
    session: (Option<&str>, Option<&str>),
    json: bool,
) -> anyhow::Result<i32> {
    let rules = place.rules()?;
    let ctx = place.context();
    let decision = kaji_policy::decide(&rules, &request_for(tool, request), &ctx);
    let (what, mode, sandbox) = session_decision(place, rules, tool, request, session)?;
    let answer = match &what {
        CoreDecision::Allow => "allow",
        CoreDecision::AllowSandboxed => "allow (sandboxed)",
        CoreDecision::Ask(_) => "ask",
        CoreDecision::Deny(_) => "deny",
    };
    let mut out = std::io::stdout().lock();
    if json {
        let mut value = check_json(&decision, place.trusted);
        value["decision"] = json!(answer.split(' ').next().unwrap_or(answer));
        value["sandboxed"] = json!(matches!(what, CoreDecision::AllowSandboxed));
        value["rules_decision"] = json!(decision.decision.as_str());
        value["permission_mode"] = json!(mode.as_str());
        value["sandbox"] = json!(sandbox.as_str());
        writeln!(out, "{value}")?;
        return Ok(0);
    }
    writeln!(out, "{answer}")?;
    writeln!(
        out,
        "mode:   {} · {}",
        mode.as_str(),
        crate::policy_text::sandbox_line(mode, sandbox)
    )?;
    if let CoreDecision::Deny(why) = &what {
        writeln!(out, "why:    {why}")?;
    }
    match &decision.rule {
        Some((rule, source)) => writeln!(out, "rule:   {rule} (from {source})")?,
        None => writeln!(out, "rule:   none")?,
    }
    writeln!(out, "reason: {}", decision.reason)?;
    for (rule, source) in &decision.ignored {
        writeln!(
            out,
            "ignored: {rule} (from {source}): the project is not trusted; `kaji trust` trusts it"
        )?;
    }
    Ok(0)
}

fn check_json(decision: &PolicyDecision, trusted: bool) -> Value {
    let (rule, source, scope) = match &decision.rule {
        Some((rule, source)) => (
            json!(rule.to_string()),
            json!(source.to_string()),
            json!(source.scope()),
        ),
        None => (Value::Null, Value::Null, Value::Null),
    };
    let ignored: Vec<Value> = decision
        .ignored
        .iter()
        .map(|(rule, source)| json!({"rule": rule.to_string(), "source": source.to_string()}))
        .collect();
    json!({
        "decision": decision.decision.as_str(),
        "rule": rule,
        "source": source,
        "scope": scope,
        "reason": decision.reason.to_string(),
        "trusted": trusted,
        "ignored": ignored,
    })
}

fn parse_rule(text: &str) -> anyhow::Result<Rule> {
    text.parse::<Rule>().map_err(anyhow::Error::from)
}

fn add(place: &Place, text: &str, scope: Scope, kind: Decision) -> anyhow::Result<i32> {
    let rule = parse_rule(text)?;
    let path = place.file(scope);
    let added = kaji_core::rule_files::add_rule(&path, kind, &rule)?;
    if added {
        println!("Added {rule} to {} in {}", kind.as_str(), path.display());
    } else {
        println!(
            "{rule} is already in {} in {}",
            kind.as_str(),
            path.display()
        );
    }
    Ok(0)
}

fn rm(place: &Place, text: &str, scope: Option<Scope>) -> anyhow::Result<i32> {
    let rule = parse_rule(text)?;
    let scopes = match scope {
        Some(scope) => vec![scope],
        None => vec![Scope::Local, Scope::Project, Scope::User],
    };
    let mut removed = 0;
    for scope in scopes {
        let path = place.file(scope);
        if !path.is_file() {
            continue;
        }
        let n = kaji_core::rule_files::remove_rule(&path, &rule)?;
        if n > 0 {
            println!("Removed {rule} from {}", path.display());
        }
        removed += n;
    }
    if removed == 0 {
        eprintln!("kaji permissions: {rule} is in no settings file");
        return Ok(1);
    }
    Ok(0)
}
