//! Agent Skills: folders holding a `SKILL.md` whose front matter gives the
//! skill's `name` and `description`, as Claude Code and Codex have them.
//!
//! [`discover_skills`] looks in, strongest first: `<project>/.kaji/skills/`,
//! `$KAJI_HOME/skills/`, `<project>/.claude/skills/`, `~/.claude/skills/`;
//! each direct subfolder with a `SKILL.md` is one skill, and the first
//! skill of a name wins. [`skills_prompt_section`] lists every skill's name
//! and description for the system prompt; the `Skill` tool
//! ([`skill_tool`]) returns one skill's instructions (the file without its
//! front matter) and its folder, read when the model asks for it.
//!
//! Front matter is the block between a first line `---` and the next
//! `---`, with `key: value` lines (values may be quoted; `|` and `>` block
//! values take the indented lines that follow). Other keys are ignored.
//! This module must never run anything a skill contains, and never write.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use kaji_protocol::ToolSpec;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::{Tool, ToolContext, ToolError, ToolOutput, ToolRegistry, parse_input, require_text};

/// The tool's name.
pub const SKILL_TOOL: &str = "Skill";

/// The file that makes a folder a skill.
pub const SKILL_FILE: &str = "SKILL.md";

/// Where skills are looked for, strongest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillRoots {
    /// The directories, in order.
    pub dirs: Vec<PathBuf>,
}

impl SkillRoots {
    /// The standard places for a project, `$KAJI_HOME` and the user's home
    /// directory (`None`: no `~/.claude/skills/`).
    pub fn standard(project_dir: &Path, kaji_home: &Path, home: Option<&Path>) -> Self {
        let mut dirs = vec![
            project_dir.join(".kaji/skills"),
            kaji_home.join("skills"),
            project_dir.join(".claude/skills"),
        ];
        if let Some(home) = home {
            dirs.push(home.join(".claude/skills"));
        }
        Self { dirs }
    }
}

/// One discovered skill.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skill {
    /// `name` from the front matter.
    pub name: String,
    /// `description` from the front matter.
    pub description: String,
    /// The skill's folder.
    pub dir: PathBuf,
}

impl Skill {
    /// The skill's `SKILL.md`.
    pub fn file(&self) -> PathBuf {
        self.dir.join(SKILL_FILE)
    }
}

/// A `SKILL.md` that could not be used (the skill is skipped).
#[derive(Debug, thiserror::Error)]
pub enum SkillError {
    /// The file exists but cannot be read.
    #[error("{}: cannot be read: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The front matter is missing or lacks a key.
    #[error("{}: {message}", path.display())]
    FrontMatter {
        /// The file.
        path: PathBuf,
        /// What is wrong, naming the key.
        message: String,
    },
}

/// What discovery found.
#[derive(Debug, Default)]
pub struct Discovered {
    /// Usable skills, sorted by name.
    pub skills: Vec<Skill>,
    /// Skill files that were skipped, each naming the file.
    pub warnings: Vec<SkillError>,
}

/// Finds the skills under `roots` (missing directories are skipped).
pub fn discover_skills(roots: &SkillRoots) -> Discovered {
    let mut found = Discovered::default();
    for root in &roots.dirs {
        let Ok(entries) = std::fs::read_dir(root) else {
            continue;
        };
        let mut dirs: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
        dirs.sort();
        for dir in dirs {
            let file = dir.join(SKILL_FILE);
            if !file.is_file() {
                continue;
            }
            match read_skill(&dir) {
                Ok((skill, _)) => {
                    if !found.skills.iter().any(|s| s.name == skill.name) {
                        found.skills.push(skill);
                    }
                }
                Err(e) => found.warnings.push(e),
            }
        }
    }
    found.skills.sort_by(|a, b| a.name.cmp(&b.name));
    found
}

/// Reads the skill in `dir`: the skill and the file's body (after the
/// front matter).
pub fn read_skill(dir: &Path) -> Result<(Skill, String), SkillError> {
    let path = dir.join(SKILL_FILE);
    let text = std::fs::read_to_string(&path).map_err(|source| SkillError::Read {
        path: path.clone(),
        source,
    })?;
    let bad = |message: String| SkillError::FrontMatter {
        path: path.clone(),
        message,
    };
    let (fields, body) = front_matter(&text).ok_or_else(|| {
        bad(
            "no front matter: the file must start with `---`, `name: …`, `description: …`, `---`"
                .into(),
        )
    })?;
    let get = |key: &str| {
        fields
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    let name =
        get("name").ok_or_else(|| bad("front matter key `name` is missing or empty".into()))?;
    let description = get("description")
        .ok_or_else(|| bad("front matter key `description` is missing or empty".into()))?;
    let skill = Skill {
        name,
        description,
        dir: dir.to_path_buf(),
    };
    Ok((skill, body.to_string()))
}

/// Splits `text` into its front matter's `key: value` pairs and the body.
fn front_matter(text: &str) -> Option<(Vec<(String, String)>, &str)> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.split_inclusive('\n');
    if lines.next()?.trim_end() != "---" {
        return None;
    }
    let mut consumed = text.find('\n')? + 1;
    let mut fields: Vec<(String, String)> = Vec::new();
    let mut block: Option<bool> = None;
    for line in lines {
        consumed += line.len();
        let trimmed = line.trim_end();
        if trimmed == "---" {
            return Some((fields, &text[consumed..]));
        }
        if let Some(folded) = block
            && (line.starts_with(' ') || line.starts_with('\t') || trimmed.is_empty())
        {
            if let Some((_, value)) = fields.last_mut() {
                if !value.is_empty() {
                    value.push(if folded { ' ' } else { '\n' });
                }
                value.push_str(trimmed.trim_start());
            }
            continue;
        }
        block = None;
        let Some((key, value)) = trimmed.split_once(':') else {
            continue;
        };
        let value = value.trim();
        if matches!(value.chars().next(), Some('|' | '>')) {
            block = Some(value.starts_with('>'));
            fields.push((key.trim().to_string(), String::new()));
            continue;
        }
        fields.push((key.trim().to_string(), unquote(value)));
    }
    None
}

fn unquote(value: &str) -> String {
    for q in ['"', '\''] {
        if value.len() >= 2 && value.starts_with(q) && value.ends_with(q) {
            return value[1..value.len() - 1].to_string();
        }
    }
    value.to_string()
}

/// The system prompt's section listing the skills; empty when there are
/// none.
pub fn skills_prompt_section(skills: &[Skill]) -> String {
    if skills.is_empty() {
        return String::new();
    }
    let mut text = String::from(
        "# Skills\n\nThese skills hold instructions for particular kinds of work. When a task \
matches a skill's description, call the Skill tool with its name before you start, and follow \
what it says.\n\n",
    );
    for skill in skills {
        text.push_str(&format!("- {}: {}\n", skill.name, skill.description));
    }
    text
}

/// Adds the `Skill` tool for `skills` to `registry` (nothing when there
/// are none).
pub fn register_skills(registry: &mut ToolRegistry, skills: Vec<Skill>) {
    if !skills.is_empty() {
        registry.register(skill_tool(skills));
    }
}

/// The `Skill` tool offering `skills`.
pub fn skill_tool(skills: Vec<Skill>) -> Arc<dyn Tool> {
    Arc::new(SkillTool { skills })
}

struct SkillTool {
    skills: Vec<Skill>,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct SkillInput {
    /// The skill's name.
    skill: String,
}

#[async_trait]
impl Tool for SkillTool {
    fn name(&self) -> &'static str {
        SKILL_TOOL
    }

    fn spec(&self) -> ToolSpec {
        let names: Vec<&str> = self.skills.iter().map(|s| s.name.as_str()).collect();
        ToolSpec {
            name: SKILL_TOOL.into(),
            description:
                "Loads a skill: returns its instructions and the folder its files are in. \
Use it when the task matches one of the skills listed in the system prompt."
                    .into(),
            input_schema: {
                let mut schema = crate::schema::input_schema::<SkillInput>();
                let names = names.into_iter().map(Value::from).collect();
                crate::schema::set_enum(&mut schema, "skill", names);
                schema
            },
        }
    }

    fn is_read_only(&self) -> bool {
        true
    }

    async fn call(&self, input: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let input: SkillInput = parse_input(SKILL_TOOL, input)?;
        require_text(
            SKILL_TOOL,
            "skill",
            &input.skill,
            "give one of the skills' names",
        )?;
        let wanted = input.skill.trim();
        let Some(skill) = self.skills.iter().find(|s| s.name == wanted) else {
            let names: Vec<&str> = self.skills.iter().map(|s| s.name.as_str()).collect();
            return Err(ToolError::InvalidInput {
                tool: SKILL_TOOL.into(),
                message: format!(
                    "there is no skill {wanted:?}; the skills are: {}",
                    names.join(", ")
                ),
            });
        };
        let (_, body) = read_skill(&skill.dir).map_err(|e| ToolError::Refused(e.to_string()))?;
        let content = format!(
            "Skill `{}` (folder: {}). Paths in it are relative to that folder.\n\n{}",
            skill.name,
            skill.dir.display(),
            body.trim_start_matches('\n')
        );
        Ok(ToolOutput {
            content,
            data: Some(json!({"skill": skill.name, "dir": skill.dir, "file": skill.file()})),
            ..ToolOutput::default()
        })
    }
}
