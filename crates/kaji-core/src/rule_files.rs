//! Adds and removes permission rules in one settings file (`[permissions]`
//! `allow`, `ask` and `deny` of a `config.toml` or `config.local.toml`),
//! for `kaji permissions add|rm` and for an "always allow for this
//! project" answer.
//!
//! Edits go through `toml_edit`, so everything else in the file (comments,
//! order, other keys) stays as it was. A file is written only when the
//! edit changed it and the result still loads as settings, through a
//! temporary file renamed into place. Nothing here decides what a rule
//! allows.

use std::path::{Path, PathBuf};

use kaji_policy::{Decision, Rule};

use crate::config::{ConfigError, KajiConfig};

/// A settings file that could not be edited.
#[derive(Debug, thiserror::Error)]
pub enum RuleFileError {
    /// The file could not be read or written.
    #[error("{}: cannot {what}: {source}", path.display())]
    Io {
        /// The file (or its directory).
        path: PathBuf,
        /// `read`, `write` or `create`.
        what: &'static str,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The file does not load as settings, before or after the edit.
    #[error(transparent)]
    Invalid(#[from] ConfigError),
    /// The file is not valid TOML, or `permissions` has the wrong shape.
    #[error("{}: {message}", path.display())]
    Shape {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

/// Adds `rule` to the `kind` list of `path` (a missing file is created);
/// `false` when it was there already.
pub fn add_rule(path: &Path, kind: Decision, rule: &Rule) -> Result<bool, RuleFileError> {
    edit(path, |doc| add_to(doc, kind, rule))
        .map_err(|e| e.with_path(path))
        .map(|n| n > 0)
}

/// Removes `rule` from every list of `path`; how many entries went.
pub fn remove_rule(path: &Path, rule: &Rule) -> Result<usize, RuleFileError> {
    edit(path, |doc| remove_from(doc, rule)).map_err(|e| e.with_path(path))
}

impl RuleFileError {
    fn with_path(self, path: &Path) -> Self {
        match self {
            Self::Shape { message, .. } => Self::Shape {
                path: path.to_path_buf(),
                message,
            },
            other => other,
        }
    }
}

/// Applies `change` (how many entries it changed) and writes the file back
/// when that is more than none and the result still loads.
fn edit(
    path: &Path,
    change: impl FnOnce(&mut toml_edit::DocumentMut) -> Result<usize, RuleFileError>,
) -> Result<usize, RuleFileError> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(source) => {
            return Err(RuleFileError::Io {
                path: path.to_path_buf(),
                what: "read",
                source,
            });
        }
    };
    KajiConfig::from_toml_str(&text, path)?;
    let mut doc: toml_edit::DocumentMut = text
        .parse()
        .map_err(|e| shape(format!("not valid TOML: {e}")))?;
    let changed = change(&mut doc)?;
    if changed == 0 {
        return Ok(0);
    }
    let new_text = doc.to_string();
    KajiConfig::from_toml_str(&new_text, path)?;
    write_atomically(path, &new_text)?;
    Ok(changed)
}

fn shape(message: String) -> RuleFileError {
    RuleFileError::Shape {
        path: PathBuf::new(),
        message,
    }
}

fn write_atomically(path: &Path, text: &str) -> Result<(), RuleFileError> {
    let io = |path: &Path, what, source| RuleFileError::Io {
        path: path.to_path_buf(),
        what,
        source,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| io(dir, "create", e))?;
    }
    let tmp = path.with_extension(format!("toml.{}.tmp", std::process::id()));
    std::fs::write(&tmp, text).map_err(|e| io(&tmp, "write", e))?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        io(path, "write", e)
    })
}

fn add_to(
    doc: &mut toml_edit::DocumentMut,
    kind: Decision,
    rule: &Rule,
) -> Result<usize, RuleFileError> {
    let table = doc
        .entry("permissions")
        .or_insert_with(toml_edit::table)
        .as_table_like_mut()
        .ok_or_else(|| shape("`permissions` is not a table".to_string()))?;
    let list = table
        .entry(kind.as_str())
        .or_insert(toml_edit::value(toml_edit::Array::new()))
        .as_array_mut()
        .ok_or_else(|| shape(format!("`permissions.{}` is not an array", kind.as_str())))?;
    let present = list
        .iter()
        .any(|v| v.as_str().and_then(|s| s.parse::<Rule>().ok()).as_ref() == Some(rule));
    if present {
        return Ok(0);
    }
    list.push(rule.to_string());
    Ok(1)
}

fn remove_from(doc: &mut toml_edit::DocumentMut, rule: &Rule) -> Result<usize, RuleFileError> {
    let Some(table) = doc
        .get_mut("permissions")
        .and_then(|p| p.as_table_like_mut())
    else {
        return Ok(0);
    };
    let mut removed = 0;
    for kind in [Decision::Allow, Decision::Ask, Decision::Deny] {
        let Some(list) = table.get_mut(kind.as_str()).and_then(|l| l.as_array_mut()) else {
            continue;
        };
        let before = list.len();
        list.retain(|v| v.as_str().and_then(|s| s.parse::<Rule>().ok()).as_ref() != Some(rule));
        removed += before - list.len();
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adds_once_keeps_the_rest_and_removes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".kaji/config.local.toml");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, "# mine\nmax_mistakes = 4\n").unwrap();
        let rule: Rule = "Bash(cargo test:*)".parse().unwrap();
        assert!(add_rule(&path, Decision::Allow, &rule).unwrap());
        assert!(!add_rule(&path, Decision::Allow, &rule).unwrap());
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.contains("# mine") && text.contains("max_mistakes = 4"),
            "{text}"
        );
        assert!(text.contains("\"Bash(cargo test:*)\""), "{text}");
        assert_eq!(remove_rule(&path, &rule).unwrap(), 1);
        assert_eq!(remove_rule(&path, &rule).unwrap(), 0);
    }

    #[test]
    fn a_file_that_does_not_load_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        std::fs::write(&path, "permissions = 3\n").unwrap();
        let rule: Rule = "Bash(ls)".parse().unwrap();
        let err = add_rule(&path, Decision::Allow, &rule).unwrap_err();
        assert!(err.to_string().contains("config.toml"), "{err}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "permissions = 3\n");
    }
}
