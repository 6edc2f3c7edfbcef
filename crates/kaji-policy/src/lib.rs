//! kaji's permission policy: rules in Claude Code's syntax, shell analysis
//! of commands, the read-only commands, protected paths, and the decision
//! allow / ask / deny for one tool call.
//!
//! A pure library: everything it knows about the world comes in through
//! [`Context`] and [`RuleSet`]. It must never read or write a file, run a
//! process, ask the user or look at the environment — the CLI and the
//! executor load settings, resolve trust and act on the decision.
//!
//! - [`rule`]: [`Rule`] parsing (`Bash(cargo test:*)`, `Edit(src/**)`, …)
//!   and printing;
//! - [`shell`]: a command line split into simple commands with
//!   tree-sitter-bash, and what cannot be analysed;
//! - [`readonly`]: the known read-only commands, checked argument by
//!   argument;
//! - [`paths`]: path pattern anchoring and the protected paths;
//! - [`host`]: a fetch's canonical host and whether it is local;
//! - [`decide()`] and [`always_rule_for`]: the decision and what "always
//!   allow" may remember.

mod context;
pub mod decide;
pub mod host;
pub mod paths;
pub mod readonly;
pub mod rule;
pub mod shell;

pub use context::{Context, RealPath};
pub use decide::{
    Decision, PermissionRequest, PolicyDecision, Reason, RuleEntry, RuleKind, RuleSet, RuleSource,
    always_rule_for, decide, is_read_only_command,
};
pub use host::host_of;
pub use paths::PROTECTED_PATHS;
pub use rule::{CommandPattern, PathTool, Rule, RuleParseError};
