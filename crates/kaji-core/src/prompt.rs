//! The system prompt: who kaji is, how it works, the environment, the tool
//! protocol, and any extra sections (rule files) — assembled in one
//! documented order.

use std::path::Path;

use kaji_protocol::ToolSpec;
use serde_json::Value;

use crate::parser::ToolProtocol;
use crate::permissions::PermissionMode;

/// Inputs of the system prompt.
#[derive(Debug)]
pub struct PromptInputs<'a> {
    /// The working directory.
    pub cwd: &'a Path,
    /// The tool protocol.
    pub protocol: ToolProtocol,
    /// The tools offered.
    pub tools: &'a [ToolSpec],
    /// The permission mode.
    pub mode: PermissionMode,
    /// Extra sections, appended in order (rule files, each under its path).
    pub extra_sections: &'a [String],
    /// Replaces kaji's introduction (who it is, how it works): an Agent
    /// SDK program's `--system-prompt`.
    pub intro: Option<&'a str>,
}

const INTRO: &str = "You are kaji, a coding agent working in the user's terminal. You read, change and test code in the working directory with the tools you are given, one step at a time, and you check your work (build, tests) before you say you are done.

# How to work
- Use tools for every action; look before you change (Read, Grep, Glob), change with Edit or Write, verify with Bash.
- Keep going until the task is done, then call AttemptCompletion with a short summary of what you did. Never end a reply without a tool call.
- If you cannot go on without information only the user has, call AskUser.
- If the user denies a tool call, do not retry it unchanged: adjust to their feedback.
- Paths may be absolute or relative to the working directory.";

/// Builds the system prompt.
pub fn system_prompt(inputs: &PromptInputs<'_>) -> String {
    let mut out = String::with_capacity(4096);
    out.push_str(inputs.intro.unwrap_or(INTRO));
    out.push_str("\n\n# Environment\n");
    out.push_str(&format!("- Working directory: {}\n", inputs.cwd.display()));
    out.push_str(&format!(
        "- Operating system: {} ({})\n",
        std::env::consts::OS,
        std::env::consts::ARCH
    ));
    if let Ok(shell) = std::env::var("SHELL") {
        out.push_str(&format!("- Shell: {shell}\n"));
    }
    out.push_str(&format!(
        "- Git repository: {}\n",
        if is_git_repo(inputs.cwd) { "yes" } else { "no" }
    ));
    out.push_str(&format!("- Permission mode: {}\n", inputs.mode.as_str()));
    if inputs.mode == PermissionMode::Plan {
        out.push_str(
            "\n# Plan mode\nYou are in plan mode: only read-only tools run. Investigate the code, then present a concrete, step-by-step plan with ExitPlanMode for the user to approve. Do not try to change files or run commands until the plan is approved.\n",
        );
    }
    if inputs.protocol == ToolProtocol::Xml {
        out.push_str(&xml_tool_section(inputs.tools));
    }
    for section in inputs.extra_sections {
        out.push_str("\n\n");
        out.push_str(section);
    }
    out
}

fn is_git_repo(cwd: &Path) -> bool {
    cwd.ancestors().any(|d| d.join(".git").exists())
}

/// The tool-use section for the xml protocol: the format, then each tool
/// with its parameters.
fn xml_tool_section(tools: &[ToolSpec]) -> String {
    let mut out = String::from(
        "\n# Tool use\nCall a tool by writing it in your reply as XML: the tool name as the outer tag and each parameter as an inner tag. String parameters hold raw text, with no escaping; other parameters hold JSON. Example:\n\n<Read>\n<file_path>src/main.rs</file_path>\n<offset>1</offset>\n</Read>\n\nYou may write text before a call. Use one tool per reply and wait for its result, which comes back in the next message. You may think inside <thinking>…</thinking> first.\n\n# Tools\n",
    );
    for t in tools {
        out.push_str(&format!(
            "\n## {}\n{}\nParameters:\n",
            t.name,
            t.description.trim()
        ));
        let required: Vec<&str> = t
            .input_schema
            .get("required")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        match t.input_schema.get("properties").and_then(Value::as_object) {
            Some(props) if !props.is_empty() => {
                for (name, schema) in props {
                    let ty = schema.get("type").and_then(Value::as_str).unwrap_or("json");
                    let desc = schema
                        .get("description")
                        .and_then(Value::as_str)
                        .unwrap_or("");
                    let req = if required.contains(&name.as_str()) {
                        "required"
                    } else {
                        "optional"
                    };
                    out.push_str(&format!("- {name} ({ty}, {req}): {desc}\n"));
                }
            }
            _ => out.push_str("- (none)\n"),
        }
    }
    out
}
