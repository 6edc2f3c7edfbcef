//! Permission rules in Claude Code's syntax: parsing, canonical printing
//! and what one rule matches.
//!
//! `Bash(cargo test:*)` (a prefix of words), `Bash(git status)` (exactly
//! those words), `Edit(src/**)`, `Write(docs/**)`, `Read(~/.ssh/**)` (path
//! patterns), `WebFetch(domain:docs.rs)`, `mcp__server__tool` and any bare
//! tool name. A rule is text from a settings file or the command line, so
//! every problem is a [`RuleParseError`]; nothing here reads files or
//! decides anything on its own — [`crate::decide`] does.

use std::fmt;
use std::path::Path;
use std::str::FromStr;

use crate::context::Context;
use crate::paths;
use crate::shell::{self, SimpleCommand};

/// The file tools a path rule can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PathTool {
    /// `Edit(…)`: edits of existing files; also covers `Write`.
    Edit,
    /// `Write(…)`: writing whole files.
    Write,
    /// `Read(…)`: reading files; also covers `Glob` and `Grep`.
    Read,
    /// `Glob(…)`: listing files under a path.
    Glob,
    /// `Grep(…)`: searching files under a path.
    Grep,
}

impl PathTool {
    /// The tool's name in a rule.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Edit => "Edit",
            Self::Write => "Write",
            Self::Read => "Read",
            Self::Glob => "Glob",
            Self::Grep => "Grep",
        }
    }

    /// The rule tool of this name (`Edit`, `Write`, `Read`, `Glob`,
    /// `Grep`).
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "Edit" => Some(Self::Edit),
            "Write" => Some(Self::Write),
            "Read" => Some(Self::Read),
            "Glob" => Some(Self::Glob),
            "Grep" => Some(Self::Grep),
            _ => None,
        }
    }

    /// Whether a rule naming `self` applies to a request of `tool`: an
    /// `Edit` rule covers `Write` too (both change files), a `Read` rule
    /// covers `Glob` and `Grep` (both read files), as in Claude Code.
    pub fn covers(self, tool: PathTool) -> bool {
        self == tool
            || (self == Self::Edit && tool == Self::Write)
            || (self == Self::Read && matches!(tool, Self::Glob | Self::Grep))
    }

    /// Whether requests of this tool only read.
    pub fn reads(self) -> bool {
        matches!(self, Self::Read | Self::Glob | Self::Grep)
    }
}

/// What a `Bash(…)` rule matches, word by word, against one simple command.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum CommandPattern {
    /// `Bash(git status)`: exactly these words.
    Exact(Vec<String>),
    /// `Bash(cargo test:*)` or `Bash(cargo test *)`: these words, then
    /// anything (or nothing).
    Prefix(Vec<String>),
    /// `Bash(git commit*)` (a `*` right after a word, Claude Code's plain
    /// prefix): these words, then a word starting with `partial`, then
    /// anything (`git commit`, `git commit -m x`, `git commit-tree`).
    WordPrefix {
        /// The whole words before.
        words: Vec<String>,
        /// The start of the next word.
        partial: String,
    },
}

impl CommandPattern {
    /// Whether the simple command `cmd` matches. Words of the pattern only
    /// match literal words; after a prefix, any words (expansions too) may
    /// follow.
    pub fn matches(&self, cmd: &SimpleCommand) -> bool {
        let lead_matches = |words: &[String]| {
            words
                .iter()
                .zip(&cmd.words)
                .all(|(want, got)| got.literal() == Some(want.as_str()))
        };
        match self {
            Self::Exact(words) => words.len() == cmd.words.len() && lead_matches(words),
            Self::Prefix(words) => {
                // `npm run test:*` also covers `npm run test:unit`, as in
                // Claude Code's documentation (a script name goes on after
                // a `:`); `cargo test:*` never covers `cargo testx`.
                let Some((last, lead)) = words.split_last() else {
                    return true;
                };
                words.len() <= cmd.words.len()
                    && lead_matches(lead)
                    && cmd.words[lead.len()].literal().is_some_and(|w| {
                        w == last
                            || w.strip_prefix(last.as_str())
                                .is_some_and(|r| r.starts_with(':'))
                    })
            }
            Self::WordPrefix { words, partial } => {
                words.len() < cmd.words.len()
                    && lead_matches(words)
                    && cmd.words[words.len()]
                        .literal()
                        .is_some_and(|w| w.starts_with(partial.as_str()))
            }
        }
    }
}

/// One permission rule.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Rule {
    /// A bare tool name (`Bash`, `Edit`, `mcp__server__tool`, or
    /// `mcp__server` for every tool of that server): every use of it.
    Tool(String),
    /// `Bash(…)`: commands.
    Command(CommandPattern),
    /// `Edit(…)`, `Write(…)`, `Read(…)`: a gitignore-style path pattern,
    /// kept as written and anchored when matched (see [`crate::paths`]).
    Path {
        /// The tool named.
        tool: PathTool,
        /// The pattern as written.
        pattern: String,
    },
    /// `WebFetch(domain:docs.rs)`: fetches from that host (`*.docs.rs`
    /// for its subdomains).
    WebFetch {
        /// The host.
        domain: String,
    },
}

impl Rule {
    /// Whether this rule applies to a path request of `tool` for the
    /// absolute, normalised `path`.
    pub fn matches_path(&self, tool: PathTool, path: &Path, ctx: &Context) -> bool {
        match self {
            Rule::Tool(name) => PathTool::from_name(name).is_some_and(|t| t.covers(tool)),
            Rule::Path { tool: t, pattern } => {
                t.covers(tool) && paths::pattern_matches(pattern, path, ctx)
            }
            _ => false,
        }
    }

    /// Whether this rule applies to a fetch from `host`.
    pub fn matches_host(&self, host: &str) -> bool {
        match self {
            Rule::Tool(name) => name == "WebFetch",
            Rule::WebFetch { domain } => match domain.strip_prefix("*.") {
                Some(parent) => host
                    .strip_suffix(parent)
                    .is_some_and(|sub| sub.ends_with('.') && sub.len() > 1),
                // Both sides canonical: `domain:127.0.0.1` is also
                // `2130706433`, `[::ffff:127.0.0.1]`, `127.1`.
                None => {
                    host.eq_ignore_ascii_case(domain)
                        || crate::host::canonical_host_name(domain)
                            .is_some_and(|d| crate::host::canonical_host_name(host) == Some(d))
                }
            },
            _ => false,
        }
    }

    /// Whether this rule applies to any use of the tool `name` (bare
    /// rules only; `mcp__server` covers `mcp__server__*`).
    pub fn matches_tool(&self, name: &str) -> bool {
        match self {
            Rule::Tool(rule) if rule.ends_with("__*") => {
                name.starts_with(&rule[..rule.len() - 1]) && name.len() > rule.len() - 1
            }
            Rule::Tool(rule) => {
                rule == name
                    || (rule.starts_with("mcp__")
                        && rule.matches("__").count() == 1
                        && name.starts_with(rule.as_str())
                        && name[rule.len()..].starts_with("__"))
            }
            _ => false,
        }
    }

    /// Whether this rule applies to the simple command `cmd`.
    pub fn matches_command(&self, cmd: &SimpleCommand) -> bool {
        match self {
            Rule::Tool(name) => name == "Bash",
            Rule::Command(pattern) => pattern.matches(cmd),
            _ => false,
        }
    }
}

/// Why a rule's text is not a rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuleParseError {
    /// Nothing was written.
    #[error("empty rule")]
    Empty,
    /// The tool name has characters a tool name cannot have.
    #[error("invalid tool name {0:?} in rule (a tool name is letters, digits, `_` and `-`)")]
    InvalidToolName(String),
    /// `Tool(` without a closing `)` at the end.
    #[error("rule {0:?} has an opening `(` without a closing `)` at its end")]
    Unclosed(String),
    /// `Tool()`.
    #[error("rule {0:?} has nothing between its parentheses")]
    EmptySpecifier(String),
    /// A specifier on a tool that takes none.
    #[error(
        "rule {rule:?}: {tool} takes no specifier (only Bash, Edit, Write, Read, Glob, Grep and WebFetch do)"
    )]
    UnsupportedSpecifier {
        /// The rule as written.
        rule: String,
        /// The tool named.
        tool: String,
    },
    /// A `*` elsewhere than at the end of a `Bash(…)` rule.
    #[error(
        "rule {0:?}: a Bash rule may only end in `:*`, ` *` or `*`; a `*` anywhere else is not supported"
    )]
    Wildcard(String),
    /// The command in `Bash(…)` is not one plain command of literal words.
    #[error("rule {rule:?}: {reason}")]
    Command {
        /// The rule as written.
        rule: String,
        /// What is wrong with the command.
        reason: String,
    },
    /// `WebFetch(…)` without `domain:`.
    #[error("rule {0:?}: WebFetch takes `domain:HOST`, e.g. WebFetch(domain:docs.rs)")]
    WebFetch(String),
}

impl FromStr for Rule {
    type Err = RuleParseError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let text = text.trim();
        if text.is_empty() {
            return Err(RuleParseError::Empty);
        }
        let Some(open) = text.find('(') else {
            check_tool_name(text)?;
            return Ok(Rule::Tool(text.to_string()));
        };
        let tool = &text[..open];
        check_tool_name(tool)?;
        let inner = text[open + 1..]
            .strip_suffix(')')
            .ok_or_else(|| RuleParseError::Unclosed(text.to_string()))?
            .trim();
        if inner.is_empty() {
            return Err(RuleParseError::EmptySpecifier(text.to_string()));
        }
        if tool == "Bash" {
            return parse_command(text, inner);
        }
        if tool == "WebFetch" {
            if inner == "domain:*" {
                return Ok(Rule::Tool("WebFetch".into()));
            }
            let domain = inner
                .strip_prefix("domain:")
                .map(str::trim)
                .filter(|d| !d.is_empty() && !d.contains(['/', ' ']))
                .ok_or_else(|| RuleParseError::WebFetch(text.to_string()))?;
            return Ok(Rule::WebFetch {
                domain: domain.to_ascii_lowercase(),
            });
        }
        match PathTool::from_name(tool) {
            Some(tool) => Ok(Rule::Path {
                tool,
                pattern: inner.to_string(),
            }),
            None => Err(RuleParseError::UnsupportedSpecifier {
                rule: text.to_string(),
                tool: tool.to_string(),
            }),
        }
    }
}

fn check_tool_name(name: &str) -> Result<(), RuleParseError> {
    let mut chars = name.chars();
    let ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '*');
    let star_ok = !name.contains('*') || (name.ends_with("__*") && name.matches('*').count() == 1);
    if ok && star_ok {
        Ok(())
    } else {
        Err(RuleParseError::InvalidToolName(name.to_string()))
    }
}

fn parse_command(rule: &str, inner: &str) -> Result<Rule, RuleParseError> {
    if inner == "*" {
        return Ok(Rule::Tool("Bash".into()));
    }
    let (body, prefix) = match inner.strip_suffix(":*") {
        Some(body) => (body, true),
        None => match inner.strip_suffix(" *") {
            Some(body) => (body, true),
            None => (inner, false),
        },
    };
    if !prefix
        && let Some(body) = inner.strip_suffix('*')
        && !body.contains('*')
    {
        let mut words = shell::literal_words(body).map_err(|reason| RuleParseError::Command {
            rule: rule.to_string(),
            reason,
        })?;
        let partial = words.pop().unwrap_or_default();
        return Ok(Rule::Command(CommandPattern::WordPrefix { words, partial }));
    }
    if body.contains('*') {
        return Err(RuleParseError::Wildcard(rule.to_string()));
    }
    let words = shell::literal_words(body).map_err(|reason| RuleParseError::Command {
        rule: rule.to_string(),
        reason,
    })?;
    Ok(Rule::Command(if prefix {
        CommandPattern::Prefix(words)
    } else {
        CommandPattern::Exact(words)
    }))
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rule::Tool(name) => f.write_str(name),
            Rule::Command(CommandPattern::Exact(words)) => write!(f, "Bash({})", quote(words)),
            Rule::Command(CommandPattern::Prefix(words)) => write!(f, "Bash({}:*)", quote(words)),
            Rule::Command(CommandPattern::WordPrefix { words, partial }) => {
                let mut all = words.clone();
                all.push(partial.clone());
                write!(f, "Bash({}*)", quote(&all))
            }
            Rule::Path { tool, pattern } => write!(f, "{}({pattern})", tool.as_str()),
            Rule::WebFetch { domain } => write!(f, "WebFetch(domain:{domain})"),
        }
    }
}

/// The words joined by spaces, each single-quoted when the shell would
/// otherwise read it differently.
pub fn quote(words: &[String]) -> String {
    words
        .iter()
        .map(|w| quote_word(w))
        .collect::<Vec<_>>()
        .join(" ")
}

fn quote_word(word: &str) -> String {
    let plain = !word.is_empty()
        && !word.starts_with('~')
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-./=:@%+,^".contains(c));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(text: &str) -> String {
        text.parse::<Rule>()
            .unwrap_or_else(|e| panic!("{text}: {e}"))
            .to_string()
    }

    #[test]
    fn rules_print_back_canonically() {
        assert_eq!(round_trip("Bash(cargo test:*)"), "Bash(cargo test:*)");
        assert_eq!(round_trip("Bash(cargo test *)"), "Bash(cargo test:*)");
        assert_eq!(round_trip("Bash(git   status)"), "Bash(git status)");
        assert_eq!(round_trip("Bash(grep \"a b\" f)"), "Bash(grep 'a b' f)");
        assert_eq!(round_trip("Edit(src/**)"), "Edit(src/**)");
        assert_eq!(round_trip("Read(~/.ssh/**)"), "Read(~/.ssh/**)");
        assert_eq!(
            round_trip("WebFetch(domain:Docs.rs)"),
            "WebFetch(domain:docs.rs)"
        );
        assert_eq!(round_trip("mcp__server__tool"), "mcp__server__tool");
        assert_eq!(round_trip("Bash(*)"), "Bash");
        assert_eq!(round_trip("Bash(git commit*)"), "Bash(git commit*)");
        assert_eq!(round_trip("Grep(src/**)"), "Grep(src/**)");
        assert_eq!(round_trip("Glob(./x)"), "Glob(./x)");
        assert_eq!(round_trip("WebFetch(domain:*)"), "WebFetch");
        let quoted = round_trip("Bash('it'\\''s' x:*)");
        assert_eq!(round_trip(&quoted), quoted);
    }

    #[test]
    fn bad_rules_say_what_is_wrong() {
        assert_eq!("".parse::<Rule>(), Err(RuleParseError::Empty));
        assert!(matches!(
            "Bash(ls".parse::<Rule>(),
            Err(RuleParseError::Unclosed(_))
        ));
        assert!(matches!(
            "Bash()".parse::<Rule>(),
            Err(RuleParseError::EmptySpecifier(_))
        ));
        assert!(matches!(
            "Task(foo)".parse::<Rule>(),
            Err(RuleParseError::UnsupportedSpecifier { .. })
        ));
        assert!(matches!(
            "Bash(git * main)".parse::<Rule>(),
            Err(RuleParseError::Wildcard(_))
        ));
        assert!(matches!(
            "Bash(ls && rm x)".parse::<Rule>(),
            Err(RuleParseError::Command { .. })
        ));
        assert!(matches!(
            "Bash($X)".parse::<Rule>(),
            Err(RuleParseError::Command { .. })
        ));
        assert!(matches!(
            "WebFetch(docs.rs)".parse::<Rule>(),
            Err(RuleParseError::WebFetch(_))
        ));
        assert!(matches!(
            "Ba sh".parse::<Rule>(),
            Err(RuleParseError::InvalidToolName(_))
        ));
    }

    #[test]
    fn mcp_server_rules_cover_the_server_tools() {
        let rule: Rule = "mcp__git".parse().unwrap();
        assert!(rule.matches_tool("mcp__git__status"));
        assert!(!rule.matches_tool("mcp__github__status"));
        let exact: Rule = "mcp__git__status".parse().unwrap();
        assert!(exact.matches_tool("mcp__git__status"));
        assert!(!exact.matches_tool("mcp__git__status2"));
    }

    #[test]
    fn webfetch_domains_match_hosts() {
        let rule: Rule = "WebFetch(domain:docs.rs)".parse().unwrap();
        assert!(rule.matches_host("docs.rs"));
        assert!(!rule.matches_host("evildocs.rs"));
        let sub: Rule = "WebFetch(domain:*.docs.rs)".parse().unwrap();
        assert!(sub.matches_host("a.docs.rs"));
        assert!(!sub.matches_host("evildocs.rs"));
    }
}
