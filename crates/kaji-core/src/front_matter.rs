//! Front matter of Claude Code's markdown files (agent types, custom
//! commands): the YAML block between a first line `---` and the next line
//! `---`, read by a real YAML parser (`serde_yaml_ng`), so block scalars
//! (`description: >`), quoted strings, comments and YAML lists work as
//! Claude Code reads them.
//!
//! Claude Code also accepts front matter that is not strictly YAML (an
//! unquoted value holding `: `, as in `description: Use it when: …`); when
//! the block does not parse, each top-level `key: value` line's value is
//! taken as a string and the block is parsed again, and only if that fails
//! too is it an error. This module is pure: it never reads a file.

use serde_yaml_ng::{Mapping, Value};

/// A parsed front matter block and the body after it.
#[derive(Debug, Clone, PartialEq)]
pub struct FrontMatter {
    /// The keys and values, in file order.
    pub fields: Mapping,
    /// The text after the closing `---` line.
    pub body: String,
}

/// Why a front matter block could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrontMatterError {
    /// A first `---` line but no closing one.
    #[error("the front matter has no closing `---` line")]
    Unclosed,
    /// The block is not YAML.
    #[error("the front matter is not valid YAML: {0}")]
    Yaml(String),
    /// The block is YAML but not a mapping of keys.
    #[error("the front matter is not a list of `key: value` lines")]
    NotMapping,
}

/// Splits `text` into its front matter block and body; `None` when the
/// text does not start with a `---` line.
pub fn split(text: &str) -> Option<Result<(&str, &str), FrontMatterError>> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let first_end = text.find('\n').unwrap_or(text.len());
    if text[..first_end].trim_end() != "---" {
        return None;
    }
    let rest = &text[(first_end + 1).min(text.len())..];
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end() == "---" {
            let block = &rest[..offset];
            let body = &rest[offset + line.len()..];
            return Some(Ok((block, body)));
        }
        offset += line.len();
    }
    Some(Err(FrontMatterError::Unclosed))
}

/// Parses `text`'s front matter; `Ok(None)` when there is none.
pub fn parse(text: &str) -> Result<Option<FrontMatter>, FrontMatterError> {
    let Some(split) = split(text) else {
        return Ok(None);
    };
    let (block, body) = split?;
    let fields = parse_block(block)?;
    Ok(Some(FrontMatter {
        fields,
        body: body.to_string(),
    }))
}

fn parse_block(block: &str) -> Result<Mapping, FrontMatterError> {
    if block.trim().is_empty() {
        return Ok(Mapping::new());
    }
    let strict = serde_yaml_ng::from_str::<Value>(block);
    let value = match strict {
        Ok(value) => value,
        Err(first) => serde_yaml_ng::from_str::<Value>(&quote_plain_values(block))
            .map_err(|_| FrontMatterError::Yaml(first.to_string()))?,
    };
    match value {
        Value::Mapping(map) => Ok(map),
        Value::Null => Ok(Mapping::new()),
        _ => Err(FrontMatterError::NotMapping),
    }
}

/// The block with every top-level `key: value` whose value is plain text
/// (not quoted, not a flow list or block scalar) turned into a
/// single-quoted YAML string.
fn quote_plain_values(block: &str) -> String {
    let mut out = String::new();
    for line in block.lines() {
        let top = !line.starts_with([' ', '\t', '-', '#']);
        match line.split_once(':') {
            Some((key, value)) if top && !key.trim().is_empty() && !value.trim().is_empty() => {
                let value = value.trim();
                let structured = value.starts_with(['"', '\'', '[', '{', '|', '>', '&', '*']);
                if structured {
                    out.push_str(line);
                } else {
                    out.push_str(&format!("{key}: '{}'", value.replace('\'', "''")));
                }
            }
            _ => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

/// The value of `key`, if present.
pub fn get<'a>(fields: &'a Mapping, key: &str) -> Option<&'a Value> {
    fields.get(key)
}

/// A scalar as text (strings, numbers, booleans); a list joined with
/// `, `; `None` for null, mappings and tagged values.
pub fn text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.trim().to_string()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Sequence(items) => {
            Some(items.iter().filter_map(text).collect::<Vec<_>>().join(", "))
        }
        _ => None,
    }
}

/// A list: a YAML sequence item by item, or a string split at commas and
/// spaces outside parentheses (`Bash(git add:*), Read`), as Claude Code
/// writes `tools` and `allowed-tools`.
pub fn list(value: &Value) -> Vec<String> {
    match value {
        Value::Sequence(items) => items
            .iter()
            .filter_map(text)
            .filter(|s| !s.is_empty())
            .collect(),
        Value::Null => Vec::new(),
        other => text(other).map(|t| split_rules(&t)).unwrap_or_default(),
    }
}

/// Splits a comma-separated line of tool names or rules; commas and spaces
/// inside parentheses belong to the rule.
pub fn split_rules(text: &str) -> Vec<String> {
    let mut rules = Vec::new();
    let mut depth = 0usize;
    let mut current = String::new();
    for c in text.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' | ' ' if depth == 0 => {
                if !current.trim().is_empty() {
                    rules.push(current.trim().to_string());
                }
                current.clear();
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    if !current.trim().is_empty() {
        rules.push(current.trim().to_string());
    }
    rules
}

/// The keys as strings, in file order (non-string keys as YAML text).
pub fn keys(fields: &Mapping) -> Vec<String> {
    fields
        .keys()
        .map(|k| text(k).unwrap_or_else(|| format!("{k:?}")))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_scalars_lists_and_comments_are_read_as_yaml() {
        let text = "---\nname: x\ndescription: >\n  Use it\n  PROACTIVELY.\ntools:\n  - Read\n  - Bash(git add:*)\nallowed-tools: Read, Grep  # comment\n---\nBody\n";
        let fm = parse(text).expect("parses").expect("has front matter");
        assert_eq!(
            text_of(&fm, "description").as_deref(),
            Some("Use it PROACTIVELY.")
        );
        assert_eq!(
            list(get(&fm.fields, "tools").expect("tools")),
            vec!["Read", "Bash(git add:*)"]
        );
        assert_eq!(
            list(get(&fm.fields, "allowed-tools").expect("allowed")),
            vec!["Read", "Grep"]
        );
        assert_eq!(fm.body, "Body\n");
    }

    #[test]
    fn an_unquoted_colon_is_read_as_claude_code_reads_it() {
        let text = "---\nname: x\ndescription: Use it when: the user asks\n---\n";
        let fm = parse(text).expect("parses").expect("has front matter");
        assert_eq!(
            text_of(&fm, "description").as_deref(),
            Some("Use it when: the user asks")
        );
    }

    #[test]
    fn no_front_matter_unclosed_and_bad_yaml() {
        assert_eq!(parse("# Title\n"), Ok(None));
        assert_eq!(parse("---\nname: x\n"), Err(FrontMatterError::Unclosed));
        assert!(matches!(
            parse("---\nname: [a\n---\n"),
            Err(FrontMatterError::Yaml(_))
        ));
        assert_eq!(parse("---\n- a\n---\n"), Err(FrontMatterError::NotMapping));
    }

    fn text_of(fm: &FrontMatter, key: &str) -> Option<String> {
        get(&fm.fields, key).and_then(text)
    }
}
