//! Agent types: the built-in `general-purpose`, `Explore` and `Plan`, and
//! the user's and project's own, read from markdown files with Claude
//! Code's front matter (`name`, `description`, `tools`, `disallowedTools`,
//! `model`, `permissionMode`, `maxTurns`, plus kaji's `tokenBudget`); the
//! body is the system prompt.
//!
//! Files are read from `$KAJI_HOME/agents/`, `<project>/.kaji/agents/`,
//! `~/.claude/agents/` and `<project>/.claude/agents/`; on a name clash a
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
}

impl std::fmt::Display for AgentSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::BuiltIn => f.write_str("built-in"),
            Self::File(path) => write!(f, "{}", path.display()),
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
        catalog
    }

    fn read_dir(&mut self, dir: &Path) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        let mut paths: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "md"))
            .collect();
        paths.sort();
        for path in paths {
            let text = match std::fs::read_to_string(&path) {
                Ok(text) => text,
                Err(e) => {
                    self.warnings
                        .push(format!("{}: cannot read: {e}", path.display()));
                    continue;
                }
            };
            match parse_agent_file(&text, &path) {
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

/// A front-matter value: text or a list.
#[derive(Debug, Clone, PartialEq)]
enum Value {
    Text(String),
    List(Vec<String>),
}

/// Parses one agent file: front matter between `---` lines, then the body.
/// Returns the definition and warnings (unknown keys, bad values); fails
/// only when there is no front matter or no `name`.
pub fn parse_agent_file(text: &str, path: &Path) -> Result<(AgentDefinition, Vec<String>), String> {
    let where_ = path.display();
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.lines();
    if lines.next().map(str::trim_end) != Some("---") {
        return Err(format!(
            "{where_}: not an agent file: it must start with a `---` line and front matter"
        ));
    }
    let mut front: Vec<(String, Value)> = Vec::new();
    let mut closed = false;
    let mut body_lines = Vec::new();
    for line in lines.by_ref() {
        if line.trim_end() == "---" {
            closed = true;
            break;
        }
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        if let Some(item) = trimmed.strip_prefix("- ") {
            if let Some((_, Value::List(items))) = front.last_mut() {
                items.push(unquote(item));
            } else if let Some((_, v @ Value::Text(_))) = front.last_mut()
                && *v == Value::Text(String::new())
            {
                *v = Value::List(vec![unquote(item)]);
            }
            continue;
        }
        if let Some((key, value)) = trimmed.split_once(':') {
            let value = value.trim();
            let value =
                if let Some(inner) = value.strip_prefix('[').and_then(|v| v.strip_suffix(']')) {
                    Value::List(split_list(inner))
                } else {
                    Value::Text(unquote(value))
                };
            front.push((key.trim().to_string(), value));
        }
    }
    if !closed {
        return Err(format!(
            "{where_}: the front matter has no closing `---` line"
        ));
    }
    body_lines.extend(lines);
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
        system_prompt: body_lines.join("\n").trim().to_string(),
        source: AgentSource::File(path.to_path_buf()),
    };
    for (key, value) in front {
        let text = match &value {
            Value::Text(t) => t.clone(),
            Value::List(items) => items.join(", "),
        };
        let list = || match &value {
            Value::Text(t) => split_list(t),
            Value::List(items) => items.clone(),
        };
        match key.as_str() {
            "name" => def.name = text,
            "description" => def.description = text,
            "tools" => def.tools = Some(list()),
            "disallowedTools" => def.disallowed_tools = list(),
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

fn unquote(text: &str) -> String {
    let t = text.trim();
    for q in ['"', '\''] {
        if let Some(inner) = t.strip_prefix(q).and_then(|t| t.strip_suffix(q)) {
            return inner.to_string();
        }
    }
    t.to_string()
}

fn split_list(text: &str) -> Vec<String> {
    text.split(',')
        .map(unquote)
        .filter(|s| !s.is_empty())
        .collect()
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
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].contains("color"), "{warnings:?}");
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
}
