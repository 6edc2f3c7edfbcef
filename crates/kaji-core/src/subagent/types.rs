//! Agent types: the built-in `general-purpose`, `Explore` and `Plan`, and
//! the user's and project's own, read from markdown files with Claude
//! Code's YAML front matter (`name`, `description`, `tools`,
//! `disallowedTools`, `model`, `permissionMode`, `maxTurns`, plus kaji's
//! `tokenBudget`; `color` is read and unused); the body is the system
//! prompt.
//!
//! Files are read from `$KAJI_HOME/agents/`, `<project>/.kaji/agents/`,
//! `~/.claude/agents/` and `<project>/.claude/agents/`, subfolders
//! included; on a name clash a
//! `.kaji` file wins over a `.claude` one and a project file over a user
//! one. Unknown keys and unreadable files become warnings, never failures.
//! This module only reads files; it never runs an agent.

use std::path::{Path, PathBuf};

use crate::permissions::PermissionMode;

/// Where an agent type comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AgentSource {
    /// Built into kaji.
    BuiltIn,
    /// A markdown file.
    File(PathBuf),
    /// The program that started kaji (an Agent SDK's `agents` option).
    Program,
}

impl std::fmt::Display for AgentSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::BuiltIn => f.write_str("built-in"),
            Self::File(path) => write!(f, "{}", path.display()),
            Self::Program => f.write_str("the program (Agent SDK)"),
        }
    }
}

/// One agent type.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentDefinition {
    /// Its name, as `subagent_type` gives it (matched case-insensitively).
    pub name: String,
    /// When to use it.
    pub description: String,
    /// The tools it may use; `None`: every tool of its parent.
    pub tools: Option<Vec<String>>,
    /// Tools it may not use.
    pub disallowed_tools: Vec<String>,
    /// Only read-only tools (Explore, Plan).
    pub read_only: bool,
    /// `inherit`, an alias (`sonnet`, `opus`, `haiku`) or a model name;
    /// `None` inherits.
    pub model: Option<String>,
    /// Its permission mode; never wider than its parent's.
    pub permission_mode: Option<PermissionMode>,
    /// Model turns allowed.
    pub max_turns: Option<u32>,
    /// Total tokens (input and output, over every request) allowed.
    pub token_budget: Option<u64>,
    /// Its system prompt.
    pub system_prompt: String,
    /// Where it comes from.
    pub source: AgentSource,
}

/// The built-in types.
pub fn builtin_agents() -> Vec<AgentDefinition> {
    let base = |name: &str, description: &str, read_only: bool, prompt: &str| AgentDefinition {
        name: name.to_string(),
        description: description.to_string(),
        tools: None,
        disallowed_tools: Vec::new(),
        read_only,
        model: None,
        permission_mode: None,
        max_turns: None,
        token_budget: None,
        system_prompt: prompt.to_string(),
        source: AgentSource::BuiltIn,
    };
    vec![
        base(
            "general-purpose",
            "General-purpose agent for researching complex questions, searching for code and executing multi-step tasks.",
            false,
            "You are the general-purpose sub-agent. Do the task you are given completely, then call AttemptCompletion with a concise report of what you found or did: your report is all your parent sees.",
        ),
        base(
            "Explore",
            "Fast read-only agent for exploring codebases: finding files, searching code, answering questions about it.",
            true,
            "You are the Explore sub-agent: you search and read, never change anything. Find what you are asked for, then call AttemptCompletion with the answer, naming files and lines.",
        ),
        base(
            "Plan",
            "Read-only agent that investigates the code and designs an implementation plan.",
            true,
            "You are the Plan sub-agent: investigate with read-only tools and design a concrete, step-by-step implementation plan; report it with AttemptCompletion.",
        ),
    ]
}

/// The agent types of a project, and what was wrong with the files.
#[derive(Debug, Clone, Default)]
pub struct AgentCatalog {
    /// Every type, built-ins first, then by name.
    pub agents: Vec<AgentDefinition>,
    /// Problems with files, each naming the file.
    pub warnings: Vec<String>,
}

impl AgentCatalog {
    /// Reads the built-ins and every agent file for `project_dir`
    /// (`home`: the user's home directory, for `~/.claude/agents/`).
    pub fn discover(kaji_home: &Path, project_dir: &Path, home: Option<&Path>) -> Self {
        let mut catalog = Self {
            agents: builtin_agents(),
            warnings: Vec::new(),
        };
        // Lowest precedence first: a later directory replaces a name.
        let mut dirs: Vec<PathBuf> = Vec::new();
        if let Some(home) = home {
            dirs.push(home.join(".claude").join("agents"));
        }
        dirs.push(kaji_home.join("agents"));
        dirs.push(project_dir.join(".claude").join("agents"));
        dirs.push(project_dir.join(".kaji").join("agents"));
        for dir in dirs {
            catalog.read_dir(&dir);
        }
        catalog.sort();
        catalog
    }

    /// Adds the types a program defined (they replace files' and
    /// built-ins' of the same name, as in Claude Code).
    pub fn with_program_agents(mut self, defs: &[AgentDefinition]) -> Self {
        for def in defs {
            self.agents
                .retain(|a| !a.name.eq_ignore_ascii_case(&def.name));
            self.agents.push(def.clone());
        }
        self.sort();
        self
    }

    fn read_dir(&mut self, dir: &Path) {
        for path in agent_files(dir) {
            match read_agent_file(&path) {
                Ok((def, warnings)) => {
                    self.warnings.extend(warnings);
                    self.agents
                        .retain(|a| !a.name.eq_ignore_ascii_case(&def.name));
                    self.agents.push(def);
                }
                Err(e) => self.warnings.push(e),
            }
        }
    }

    /// Built-ins first, in their order, then the others by name: the
    /// order the model sees them in, the same on every request.
    fn sort(&mut self) {
        let (mut builtin, mut custom): (Vec<_>, Vec<_>) = std::mem::take(&mut self.agents)
            .into_iter()
            .partition(|a| a.source == AgentSource::BuiltIn);
        custom.sort_by(|a, b| {
            a.name
                .to_lowercase()
                .cmp(&b.name.to_lowercase())
                .then(a.name.cmp(&b.name))
        });
        builtin.append(&mut custom);
        self.agents = builtin;
    }

    /// One warning naming every tool that agent types list but `known`
    /// lacks (MCP tools, `mcp__…`, are left to the servers), with the
    /// types that list it; `None` when there is none.
    pub fn unknown_tools_warning(&self, known: &[&str]) -> Option<String> {
        let mut unknown: std::collections::BTreeMap<&str, Vec<&str>> = Default::default();
        for def in &self.agents {
            for tool in def.tools.iter().flatten() {
                let base = tool.split('(').next().unwrap_or(tool).trim();
                if base.starts_with("mcp__") || known.contains(&base) {
                    continue;
                }
                unknown.entry(base).or_default().push(&def.name);
            }
        }
        if unknown.is_empty() {
            return None;
        }
        let parts: Vec<String> = unknown
            .iter()
            .map(|(tool, agents)| format!("{tool} ({})", agents.join(", ")))
            .collect();
        Some(format!(
            "agent types list tools kaji does not have; those agents run without them: {}",
            parts.join("; ")
        ))
    }

    /// The system prompt's list of agent types for the `Agent` tool, as
    /// Claude Code's Agent tool lists them: `- name: description (Tools:
    /// …)`, built-ins first, then by name. Each description is cut at
    /// [`AGENT_DESCRIPTION_CAP`] characters; once the list reaches
    /// [`AGENT_LIST_CAP_BYTES`] the remaining types are named without a
    /// description (and past twice the cap only counted), so the prompt
    /// stays small and the same for every request.
    pub fn prompt_section(&self) -> String {
        let mut out = String::from(
            "# Agent types\n\nThe Agent tool's `subagent_type` is one of these types \
(name: when to use it (Tools: what it may use)). Use a type whose description fits the task, \
and do so on your own when a description says to use it proactively.\n",
        );
        let mut names_only = Vec::new();
        for def in &self.agents {
            let tools = match &def.tools {
                None if def.read_only => "read-only tools".to_string(),
                None => "*".to_string(),
                Some(list) => list.join(", "),
            };
            let line = format!(
                "- {}: {} (Tools: {tools})\n",
                def.name,
                cut_chars(&one_line(&def.description), AGENT_DESCRIPTION_CAP)
            );
            if names_only.is_empty() && out.len() + line.len() <= AGENT_LIST_CAP_BYTES {
                out.push_str(&line);
            } else {
                names_only.push(def.name.as_str());
            }
        }
        if !names_only.is_empty() {
            out.push_str("\nMore types (the list is capped; names only):");
            let mut shown = 0;
            for name in &names_only {
                if out.len() + name.len() + 2 > 2 * AGENT_LIST_CAP_BYTES {
                    break;
                }
                out.push_str(if shown == 0 { " " } else { ", " });
                out.push_str(name);
                shown += 1;
            }
            if shown < names_only.len() {
                out.push_str(&format!(
                    " and {} more (`kaji agents` lists them all)",
                    names_only.len() - shown
                ));
            }
            out.push('\n');
        }
        out
    }

    /// The type called `name`, matched case-insensitively.
    pub fn find(&self, name: &str) -> Option<&AgentDefinition> {
        let name = name.trim();
        self.agents
            .iter()
            .find(|a| a.name.eq_ignore_ascii_case(name))
    }

    /// The names on offer, comma separated.
    pub fn names(&self) -> String {
        self.agents
            .iter()
            .map(|a| a.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The most of one description the agent list shows, in characters.
pub const AGENT_DESCRIPTION_CAP: usize = 600;

/// The size of the agent list in the system prompt past which types are
/// named without their description: 24 KiB.
pub const AGENT_LIST_CAP_BYTES: usize = 24 * 1024;

/// Front matter keys Claude Code defines that kaji reads but does not use
/// (the TUI's colour for an agent).
const DISPLAY_ONLY_KEYS: [&str; 1] = ["color"];

/// The `*.md` files under `dir` and its subfolders (Claude Code reads
/// `.claude/agents/` recursively), sorted by path.
pub fn agent_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    collect_md(dir, &mut out, 0);
    out.sort();
    out
}

fn collect_md(dir: &Path, out: &mut Vec<PathBuf>, depth: usize) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for path in entries.flatten().map(|e| e.path()) {
        if path.is_dir() {
            if depth < 8 {
                collect_md(&path, out, depth + 1);
            }
        } else if path.extension().is_some_and(|e| e == "md") {
            out.push(path);
        }
    }
}

/// Reads and parses one agent file (see [`parse_agent_file`]).
pub fn read_agent_file(path: &Path) -> Result<(AgentDefinition, Vec<String>), String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
    parse_agent_file(&text, path)
}

/// Parses one agent file: YAML front matter between `---` lines, then the
/// body. Returns the definition and warnings (unknown keys, bad values);
/// fails only when there is no front matter, it is not YAML, or it has no
/// `name`.
pub fn parse_agent_file(text: &str, path: &Path) -> Result<(AgentDefinition, Vec<String>), String> {
    use crate::front_matter::{self as fm};
    let where_ = path.display();
    let front = match fm::parse(text) {
        Ok(Some(front)) => front,
        Ok(None) => {
            return Err(format!(
                "{where_}: not an agent file: it must start with a `---` line and front matter"
            ));
        }
        Err(e) => return Err(format!("{where_}: {e}")),
    };
    let mut warnings = Vec::new();
    let mut def = AgentDefinition {
        name: String::new(),
        description: String::new(),
        tools: None,
        disallowed_tools: Vec::new(),
        read_only: false,
        model: None,
        permission_mode: None,
        max_turns: None,
        token_budget: None,
        system_prompt: front.body.trim().to_string(),
        source: AgentSource::File(path.to_path_buf()),
    };
    for (key, value) in &front.fields {
        let key = fm::text(key).unwrap_or_default();
        let text = fm::text(value).unwrap_or_default();
        match key.as_str() {
            "name" => def.name = text,
            "description" => def.description = text,
            "tools" => def.tools = Some(fm::list(value)),
            "disallowedTools" => def.disallowed_tools = fm::list(value),
            "model" => def.model = (!text.is_empty()).then_some(text),
            "permissionMode" => match parse_mode(&text) {
                Some(mode) => def.permission_mode = Some(mode),
                None => warnings.push(format!(
                    "{where_}: permissionMode `{text}` is not one of default, acceptEdits, plan, bypassPermissions; ignored"
                )),
            },
            "maxTurns" => match text.parse::<u32>() {
                Ok(n) if n > 0 => def.max_turns = Some(n),
                _ => warnings.push(format!(
                    "{where_}: maxTurns `{text}` is not a positive whole number; ignored"
                )),
            },
            "tokenBudget" | "token_budget" => match text.parse::<u64>() {
                Ok(n) if n > 0 => def.token_budget = Some(n),
                _ => warnings.push(format!(
                    "{where_}: tokenBudget `{text}` is not a positive whole number; ignored"
                )),
            },
            k if DISPLAY_ONLY_KEYS.contains(&k) => {}
            other => warnings.push(format!("{where_}: unknown key `{other}` ignored")),
        }
    }
    if def.name.trim().is_empty() {
        return Err(format!("{where_}: the front matter has no `name`"));
    }
    Ok((def, warnings))
}

fn parse_mode(text: &str) -> Option<PermissionMode> {
    match text {
        "bypassPermissions" => Some(PermissionMode::Yolo),
        other => other.parse().ok(),
    }
}

/// `text` on one line: runs of whitespace (newlines too) as one space.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// At most `cap` characters of `text`, with `…` when cut.
fn cut_chars(text: &str, cap: usize) -> String {
    match text.char_indices().nth(cap) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

/// How wide a mode is: plan < default < accept-edits < yolo.
pub fn mode_rank(mode: PermissionMode) -> u8 {
    match mode {
        PermissionMode::Plan => 0,
        PermissionMode::Default => 1,
        PermissionMode::AcceptEdits => 2,
        PermissionMode::Yolo => 3,
    }
}

/// The mode a sub-agent runs in: its type's, but never wider than its
/// parent's.
pub fn narrower_mode(parent: PermissionMode, wanted: Option<PermissionMode>) -> PermissionMode {
    match wanted {
        Some(w) if mode_rank(w) < mode_rank(parent) => w,
        _ => parent,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_code_front_matter_is_read() {
        let text = "---\nname: reviewer\ndescription: Reviews code\ntools: Read, Grep, Glob\nmodel: sonnet\npermissionMode: acceptEdits\nmaxTurns: 5\ncolor: blue\n---\nYou review code.\n";
        let (def, warnings) = parse_agent_file(text, Path::new("/a/reviewer.md")).expect("parse");
        assert_eq!(def.name, "reviewer");
        assert_eq!(
            def.tools,
            Some(vec!["Read".into(), "Grep".into(), "Glob".into()])
        );
        assert_eq!(def.model.as_deref(), Some("sonnet"));
        assert_eq!(def.permission_mode, Some(PermissionMode::AcceptEdits));
        assert_eq!(def.max_turns, Some(5));
        assert_eq!(def.system_prompt, "You review code.");
        assert!(warnings.is_empty(), "{warnings:?}");
    }

    #[test]
    fn yaml_lists_work_for_tools() {
        let text = "---\nname: x\ntools:\n  - Read\n  - Bash\ndisallowedTools: [Write]\n---\nbody";
        let (def, warnings) = parse_agent_file(text, Path::new("x.md")).expect("parse");
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(def.tools, Some(vec!["Read".into(), "Bash".into()]));
        assert_eq!(def.disallowed_tools, vec!["Write".to_string()]);
    }

    #[test]
    fn files_without_front_matter_or_name_are_refused_with_the_path() {
        let err = parse_agent_file("hello", Path::new("/p/a.md")).expect_err("no front matter");
        assert!(err.contains("/p/a.md"), "{err}");
        let err = parse_agent_file("---\ndescription: d\n---\n", Path::new("/p/b.md"))
            .expect_err("no name");
        assert!(err.contains("name"), "{err}");
    }

    #[test]
    fn modes_only_narrow() {
        use PermissionMode::*;
        assert_eq!(narrower_mode(Default, Some(Yolo)), Default);
        assert_eq!(narrower_mode(Yolo, Some(Plan)), Plan);
        assert_eq!(narrower_mode(AcceptEdits, None), AcceptEdits);
        assert_eq!(narrower_mode(Plan, Some(AcceptEdits)), Plan);
    }

    #[test]
    fn kaji_files_win_a_name_clash_and_names_match_case_insensitively() {
        let home = tempfile::tempdir().expect("tempdir");
        let project = tempfile::tempdir().expect("tempdir");
        for (dir, body) in [(".claude", "from claude"), (".kaji", "from kaji")] {
            let d = project.path().join(dir).join("agents");
            std::fs::create_dir_all(&d).expect("mkdir");
            std::fs::write(
                d.join("r.md"),
                format!("---\nname: Reviewer\n---\n{body}\n"),
            )
            .expect("write");
        }
        let catalog = AgentCatalog::discover(home.path(), project.path(), None);
        let def = catalog.find("reviewer").expect("found");
        assert_eq!(def.system_prompt, "from kaji");
        assert!(catalog.find("explore").is_some());
        assert!(catalog.find("GENERAL-PURPOSE").is_some());
    }

    #[test]
    fn subfolders_block_scalars_sorted_listing_and_unknown_tools() {
        let home = tempfile::tempdir().expect("tempdir");
        let project = tempfile::tempdir().expect("tempdir");
        let dir = project.path().join(".claude/agents/02-lang");
        std::fs::create_dir_all(&dir).expect("mkdir");
        std::fs::write(
            dir.join("zed.md"),
            "---\nname: zed\ndescription: >\n  Use PROACTIVELY\n  for Zed.\nallowed-tools: x\ntools:\n  - Read\n  - WebSearch\n---\nbody\n",
        )
        .expect("write");
        std::fs::write(
            project.path().join(".claude/agents/alpha.md"),
            "---\nname: Alpha\ndescription: \"First\"\n---\nbody\n",
        )
        .expect("write");
        let catalog = AgentCatalog::discover(home.path(), project.path(), None);
        let names: Vec<&str> = catalog.agents.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(
            names,
            ["general-purpose", "Explore", "Plan", "Alpha", "zed"]
        );
        let zed = catalog.find("zed").expect("zed");
        assert_eq!(zed.description, "Use PROACTIVELY for Zed.");
        let section = catalog.prompt_section();
        assert!(
            section.contains("- zed: Use PROACTIVELY for Zed. (Tools: Read, WebSearch)"),
            "{section}"
        );
        assert!(section.contains("- Alpha: First (Tools: *)"), "{section}");
        assert_eq!(section, catalog.prompt_section());
        let warning = catalog
            .unknown_tools_warning(&["Read", "Bash"])
            .expect("a warning");
        assert!(warning.ends_with("WebSearch (zed)"), "{warning}");
        assert_eq!(catalog.warnings.len(), 1, "{:?}", catalog.warnings);
        assert!(
            catalog.warnings[0].contains("allowed-tools"),
            "{:?}",
            catalog.warnings
        );
    }

    #[test]
    fn past_the_cap_types_are_named_then_counted() {
        let agent = |n: usize| AgentDefinition {
            name: format!("agent-{n:04}"),
            description: "d".repeat(2000),
            tools: None,
            disallowed_tools: Vec::new(),
            read_only: false,
            model: None,
            permission_mode: None,
            max_turns: None,
            token_budget: None,
            system_prompt: String::new(),
            source: AgentSource::File(PathBuf::from("x.md")),
        };
        let catalog = AgentCatalog {
            agents: (0..5000).map(agent).collect(),
            warnings: Vec::new(),
        };
        let section = catalog.prompt_section();
        assert!(
            section.len() <= 2 * AGENT_LIST_CAP_BYTES + 100,
            "{}",
            section.len()
        );
        assert!(
            section.contains("- agent-0000: ddd"),
            "cut descriptions listed"
        );
        assert!(section.contains("names only): agent-00"), "then names");
        assert!(
            section.contains("more (`kaji agents` lists them all)"),
            "then a count"
        );
    }
}
