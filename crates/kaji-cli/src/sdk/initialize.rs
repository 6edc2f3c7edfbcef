//! The SDK's `initialize` request, read before the session is built: the
//! agent types the program defines and its in-process MCP servers.
//! Translation only; the session decides what they do.

use kaji_core::PermissionMode;
use kaji_core::subagent::types::{AgentDefinition, AgentSource};
use serde_json::Value;

/// The agent types of `initialize`'s `agents` (`{name: definition}`), and
/// a warning for each definition that is not usable.
pub fn agents(request: &Value) -> (Vec<AgentDefinition>, Vec<String>) {
    let mut defs = Vec::new();
    let mut warnings = Vec::new();
    let Some(map) = request.get("agents").and_then(Value::as_object) else {
        return (defs, warnings);
    };
    for (name, def) in map {
        match agent(name, def) {
            Ok(d) => defs.push(d),
            Err(e) => warnings.push(format!("initialize: agent {name:?} was skipped: {e}")),
        }
    }
    (defs, warnings)
}

fn strings(def: &Value, field: &str) -> Result<Option<Vec<String>>, String> {
    match def.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(items)) => items
            .iter()
            .map(|i| {
                i.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| format!("`{field}` holds a non-string: {i}"))
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(other) => Err(format!("`{field}` is not a list: {other}")),
    }
}

fn agent(name: &str, def: &Value) -> Result<AgentDefinition, String> {
    let text = |field: &str| def.get(field).and_then(Value::as_str).map(str::to_string);
    let description = text("description").ok_or("it has no `description`")?;
    let prompt = text("prompt").ok_or("it has no `prompt`")?;
    let permission_mode = match text("permissionMode") {
        Some(m) => {
            let kaji = if m == "dontAsk" {
                "default"
            } else {
                m.as_str()
            };
            Some(kaji.parse::<PermissionMode>()?)
        }
        None => None,
    };
    Ok(AgentDefinition {
        name: name.to_string(),
        description,
        tools: strings(def, "tools")?,
        disallowed_tools: strings(def, "disallowedTools")?.unwrap_or_default(),
        read_only: false,
        model: text("model").filter(|m| m != "inherit"),
        permission_mode,
        max_turns: def
            .get("maxTurns")
            .and_then(Value::as_u64)
            .map(|n| n.min(u32::MAX as u64) as u32),
        token_budget: None,
        system_prompt: prompt,
        source: AgentSource::Program,
    })
}

/// `initialize`'s `systemPrompt` (a string or a list of strings) and
/// `appendSystemPrompt` (the TypeScript SDK's), over what the flags said.
pub fn custom_prompt(request: &Value, prompt: &mut kaji_core::CustomPrompt) {
    let text = |v: &Value| match v {
        Value::String(s) => Some(s.clone()),
        Value::Array(parts) => Some(
            parts
                .iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join("\n\n"),
        ),
        _ => None,
    };
    if let Some(replace) = request.get("systemPrompt").and_then(text)
        && !replace.trim().is_empty()
    {
        prompt.replace = Some(replace);
    }
    if let Some(append) = request.get("appendSystemPrompt").and_then(text)
        && !append.trim().is_empty()
    {
        prompt.append = Some(append);
    }
}

/// The names of the program's own MCP servers: `initialize`'s
/// `sdkMcpServers` (TypeScript) and the `type: "sdk"` entries of
/// `--mcp-config` (Python), each once, in order.
pub fn sdk_servers(request: &Value, from_flags: &[String]) -> Vec<String> {
    let mut names: Vec<String> = from_flags.to_vec();
    for n in request
        .get("sdkMcpServers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        if !names.iter().any(|m| m == n) {
            names.push(n.to_string());
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn agents_of_initialize_become_agent_types() {
        let request = json!({"agents": {
            "reviewer": {"description": "Reviews.", "prompt": "You review.", "tools": ["Read"], "model": "inherit", "maxTurns": 3},
            "broken": {"prompt": "x"},
        }});
        let (defs, warnings) = agents(&request);
        assert_eq!(defs.len(), 1);
        assert_eq!(defs[0].name, "reviewer");
        assert_eq!(defs[0].tools.as_deref(), Some(&["Read".to_string()][..]));
        assert_eq!(defs[0].model, None);
        assert_eq!(defs[0].max_turns, Some(3));
        assert_eq!(defs[0].source, AgentSource::Program);
        assert!(warnings[0].contains("broken"), "{warnings:?}");
    }

    #[test]
    fn sdk_servers_come_from_both_places() {
        let request = json!({"sdkMcpServers": ["a", "b"]});
        assert_eq!(
            sdk_servers(&request, &["b".into(), "c".into()]),
            ["b", "c", "a"]
        );
    }
}
