//! Who may run what: the permission modes and the session's "always allow"
//! memory.
//!
//! A decision is a pure function of the mode, what the call would touch
//! ([`ToolAccess`]), the working directory and what the user already
//! allowed; it never asks by itself. The executor turns `Ask` into an
//! `ask` event, and remembers "always allow" answers here.

use std::collections::HashSet;
use std::path::Path;

use kaji_protocol::AskKind;
use kaji_tools::{ToolAccess, normalize_lexically, real_path};

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
    /// Ask the user with this kind of ask.
    Ask(AskKind),
    /// Refuse it with this reason (for the model).
    Deny(String),
}

/// Approvals the user gave "for the rest of the session".
#[derive(Debug, Default, Clone)]
pub struct SessionApprovals {
    tools: HashSet<String>,
    command_prefixes: HashSet<String>,
    /// Hosts `WebFetch` may read (`WebFetch(domain:<host>)`).
    domains: HashSet<String>,
}

impl SessionApprovals {
    /// Remembers an "always allow" for this call; returns the rule it
    /// stored, in the permission-rule syntax (`Bash(cargo test:*)`, or the
    /// tool's name), for the session file.
    pub fn remember(&mut self, tool: &str, access: &ToolAccess) -> String {
        match access {
            ToolAccess::Execute { command } => {
                let prefix = command_prefix(command);
                let rule = format!("Bash({prefix}:*)");
                self.command_prefixes.insert(prefix);
                rule
            }
            ToolAccess::Network { domain, .. } if !domain.is_empty() => {
                self.domains.insert(domain.clone());
                format!("{tool}(domain:{domain})")
            }
            _ => {
                self.tools.insert(tool.to_string());
                tool.to_string()
            }
        }
    }

    /// Restores an approval from a rule that [`SessionApprovals::remember`]
    /// returned (a resumed session).
    pub fn restore(&mut self, rule: &str) {
        if let Some(domain) = rule
            .split_once("(domain:")
            .and_then(|(_, d)| d.strip_suffix(')'))
        {
            self.domains.insert(domain.to_string());
            return;
        }
        match rule
            .strip_prefix("Bash(")
            .and_then(|r| r.strip_suffix(":*)"))
        {
            Some(prefix) => {
                self.command_prefixes.insert(prefix.to_string());
            }
            None => {
                self.tools.insert(rule.to_string());
            }
        }
    }

    fn allows(&self, tool: &str, access: &ToolAccess) -> bool {
        match access {
            ToolAccess::Execute { command } => {
                self.command_prefixes.contains(&command_prefix(command))
            }
            ToolAccess::Network { domain, .. } => self.domains.contains(domain),
            _ => self.tools.contains(tool),
        }
    }
}

/// The one approval memory of a session, shared by its Tasks' executors.
pub type SharedApprovals = std::sync::Arc<std::sync::Mutex<SessionApprovals>>;

/// The prefix "always allow" remembers for a command: its first word, and
/// the second too when it is a subcommand (`git status`, `cargo test`).
pub fn command_prefix(command: &str) -> String {
    let mut words = command.split_whitespace();
    let first = words.next().unwrap_or("");
    match words.next() {
        Some(second)
            if second
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
                && !second.starts_with('-') =>
        {
            format!("{first} {second}")
        }
        _ => first.to_string(),
    }
}

/// Decides whether a call runs, asks or is refused.
pub fn decide(
    mode: PermissionMode,
    tool: &str,
    access: &ToolAccess,
    cwd: &Path,
    approvals: &SessionApprovals,
) -> Decision {
    match access {
        ToolAccess::ReadOnly | ToolAccess::Interaction => return Decision::Allow,
        // Reading the web is research: plan mode asks for it as well.
        ToolAccess::Network { .. } if mode == PermissionMode::Plan => {}
        _ if mode == PermissionMode::Plan => {
            return Decision::Deny(format!(
                "{tool} is not allowed in plan mode: only read-only tools run until the plan is approved. Investigate with read-only tools, then present your plan with ExitPlanMode."
            ));
        }
        _ if mode == PermissionMode::Yolo => return Decision::Allow,
        _ => {}
    }
    if approvals.allows(tool, access) {
        return Decision::Allow;
    }
    match access {
        ToolAccess::Edit { paths } => {
            let inside = paths.iter().all(|p| is_inside(p, cwd));
            if inside && mode == PermissionMode::AcceptEdits {
                Decision::Allow
            } else {
                Decision::Ask(AskKind::Tool)
            }
        }
        ToolAccess::Execute { .. } => Decision::Ask(AskKind::Command),
        ToolAccess::SessionState => Decision::Allow,
        ToolAccess::External | ToolAccess::Network { .. } => Decision::Ask(AskKind::Tool),
        ToolAccess::ReadOnly | ToolAccess::Interaction => Decision::Allow,
    }
}

/// Whether `path` lies inside `dir`, judged on the normalised paths
/// (`..` resolved lexically, symlinks of existing parents followed).
pub fn is_inside(path: &Path, dir: &Path) -> bool {
    let dir = real_path(&normalize_lexically(dir));
    let path = real_path(&normalize_lexically(path));
    path.starts_with(&dir)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn edit(p: &str) -> ToolAccess {
        ToolAccess::Edit {
            paths: vec![PathBuf::from(p)],
        }
    }

    #[test]
    fn modes() {
        let cwd = Path::new("/work/proj");
        let a = SessionApprovals::default();
        let cmd = ToolAccess::Execute {
            command: "ls".into(),
        };
        use PermissionMode::*;
        assert_eq!(
            decide(Default, "Read", &ToolAccess::ReadOnly, cwd, &a),
            Decision::Allow
        );
        assert_eq!(
            decide(Default, "Write", &edit("/work/proj/a"), cwd, &a),
            Decision::Ask(AskKind::Tool)
        );
        assert_eq!(
            decide(AcceptEdits, "Write", &edit("/work/proj/a"), cwd, &a),
            Decision::Allow
        );
        assert_eq!(
            decide(AcceptEdits, "Write", &edit("/work/proj/../x"), cwd, &a),
            Decision::Ask(AskKind::Tool)
        );
        assert_eq!(
            decide(AcceptEdits, "Bash", &cmd, cwd, &a),
            Decision::Ask(AskKind::Command)
        );
        assert_eq!(
            decide(Yolo, "Write", &edit("/etc/passwd"), cwd, &a),
            Decision::Allow
        );
        assert!(matches!(
            decide(Plan, "Write", &edit("/work/proj/a"), cwd, &a),
            Decision::Deny(_)
        ));
        assert!(matches!(
            decide(Plan, "Bash", &cmd, cwd, &a),
            Decision::Deny(_)
        ));
        assert_eq!(
            decide(Plan, "Grep", &ToolAccess::ReadOnly, cwd, &a),
            Decision::Allow
        );
    }

    #[test]
    fn always_allow_is_per_tool_and_per_command_prefix() {
        let cwd = Path::new("/p");
        let mut a = SessionApprovals::default();
        a.remember(
            "Bash",
            &ToolAccess::Execute {
                command: "cargo test -p x".into(),
            },
        );
        let ok = ToolAccess::Execute {
            command: "cargo test --all".into(),
        };
        let other = ToolAccess::Execute {
            command: "cargo publish".into(),
        };
        assert_eq!(
            decide(PermissionMode::Default, "Bash", &ok, cwd, &a),
            Decision::Allow
        );
        assert_eq!(
            decide(PermissionMode::Default, "Bash", &other, cwd, &a),
            Decision::Ask(AskKind::Command)
        );
        a.remember("Write", &edit("/p/a"));
        assert_eq!(
            decide(PermissionMode::Default, "Write", &edit("/p/b"), cwd, &a),
            Decision::Allow
        );
    }

    #[test]
    fn web_fetch_asks_per_domain_and_is_allowed_in_plan_mode_to_ask() {
        let cwd = Path::new("/p");
        let fetch = |url: &str, domain: &str| ToolAccess::Network {
            url: url.into(),
            domain: domain.into(),
        };
        let docs = fetch("https://docs.rs/x", "docs.rs");
        let other = fetch("https://example.com/", "example.com");
        let mut a = SessionApprovals::default();
        use PermissionMode::*;
        assert_eq!(
            decide(Default, "WebFetch", &docs, cwd, &a),
            Decision::Ask(AskKind::Tool)
        );
        assert_eq!(
            decide(Plan, "WebFetch", &docs, cwd, &a),
            Decision::Ask(AskKind::Tool)
        );
        assert_eq!(decide(Yolo, "WebFetch", &docs, cwd, &a), Decision::Allow);
        assert_eq!(a.remember("WebFetch", &docs), "WebFetch(domain:docs.rs)");
        assert_eq!(decide(Default, "WebFetch", &docs, cwd, &a), Decision::Allow);
        assert_eq!(
            decide(Default, "WebFetch", &other, cwd, &a),
            Decision::Ask(AskKind::Tool)
        );
        let mut restored = SessionApprovals::default();
        restored.restore("WebFetch(domain:example.com)");
        assert_eq!(
            decide(Default, "WebFetch", &other, cwd, &restored),
            Decision::Allow
        );
    }
}
