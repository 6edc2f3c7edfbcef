//! `Glob`: files whose path matches a glob pattern, newest first.
//!
//! Standard glob syntax on paths relative to the search directory: `*` and
//! `?` stay within one path component, `**` crosses directories, `[abc]` and
//! `{a,b}` work. The pattern's leading literal directories narrow the walk
//! (`src/**/*.rs` only walks `src`), and an absolute pattern is split the
//! same way. The walk is the shared one of [`super::walk`]: gitignore-aware,
//! dot-files included, `.kajiignore` respected.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::SystemTime;

use async_trait::async_trait;
use globset::GlobBuilder;
use kaji_protocol::ToolSpec;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::kajiignore::KajiIgnore;
use super::{failure, paths, walk};
use crate::{Tool, ToolContext, ToolError, ToolOutput, parse_input};

const NAME: &str = "Glob";

/// Most paths returned by one call.
pub(super) const MAX_RESULTS: usize = 100;

/// The `Glob` tool.
pub(super) struct GlobTool;

#[derive(Debug, Deserialize, JsonSchema)]
struct GlobInput {
    /// The glob pattern to match file paths against, relative to path.
    pattern: String,
    /// Directory to search in; defaults to the working directory.
    #[serde(default)]
    path: Option<String>,
}

#[async_trait]
impl Tool for GlobTool {
    fn name(&self) -> &'static str {
        NAME
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: NAME.to_string(),
            description: format!(
                "Finds files by name with a glob pattern, such as \"**/*.rs\", \"src/**/*.{{ts,tsx}}\" or \
\"*.md\". `*` matches within one directory level and `**` across levels, so \"*.md\" only looks in the \
search directory itself while \"**/*.md\" looks everywhere below it.\n\
- Returns matching file paths, most recently modified first, at most {MAX_RESULTS}.\n\
- Files ignored by .gitignore or .kajiignore, and the .git directory, are skipped; other dot-files are \
included.\n\
- path: the directory to search (default: the working directory). Leave it out rather than passing an \
empty value.\n\
- To search file contents use Grep; to list a directory use pattern \"*\" with that path."
            ),
            input_schema: crate::schema::input_schema::<GlobInput>(),
        }
    }

    fn kind(&self) -> crate::ToolKind {
        crate::ToolKind::Search
    }

    fn title(&self, input: &Value) -> String {
        crate::title_with(NAME, input, "pattern")
    }

    fn files(&self, input: &Value) -> crate::ToolFiles {
        crate::ToolFiles::read(input.get("path").and_then(Value::as_str))
    }

    fn summary(&self, _input: &Value, output: &str) -> Option<String> {
        glob_summary(output)
    }

    fn is_read_only(&self) -> bool {
        true
    }

    async fn call(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let input: GlobInput = parse_input(NAME, input)?;
        let search = GlobSearch::new(ctx, &input)?;
        tokio::task::spawn_blocking(move || search.run())
            .await
            .map_err(|e| failure(NAME, format!("the search stopped unexpectedly: {e}")))?
    }
}

struct GlobSearch {
    cwd: PathBuf,
    /// Directory given in `path`, checked to exist.
    path: PathBuf,
    /// Where the walk starts: `path` plus the pattern's literal directories.
    base: PathBuf,
    /// The pattern as given, for messages.
    pattern: String,
    /// The part of the pattern matched below `base`.
    rest: String,
    matcher: globset::GlobMatcher,
    cancel: CancellationToken,
    hidden: Option<crate::ReadFilter>,
}

impl GlobSearch {
    fn new(ctx: &ToolContext, input: &GlobInput) -> Result<Self, ToolError> {
        let pattern = input.pattern.trim();
        crate::require_text(NAME, "pattern", pattern, "give a glob such as \"**/*.rs\"")?;
        let path = walk::search_root(ctx, input.path.as_deref());
        let (prefix, rest) = split_literal_prefix(pattern);
        let base = paths::normalize_lexically(&path.join(prefix));
        let matcher = GlobBuilder::new(&rest)
            .literal_separator(true)
            .backslash_escape(true)
            .build()
            .map_err(|e| failure(NAME, format!("invalid glob pattern `{pattern}`: {e}")))?
            .compile_matcher();
        Ok(Self {
            cwd: paths::cwd(ctx),
            path,
            base,
            pattern: pattern.to_string(),
            rest,
            matcher,
            cancel: ctx.cancel.clone(),
            hidden: ctx.hidden.clone(),
        })
    }

    fn run(self) -> Result<ToolOutput, ToolError> {
        let ignore = Arc::new(KajiIgnore::load(&self.cwd));
        walk::check_root(NAME, &self.path, &ignore)?;
        let notes = walk::ignore_notes(&ignore);
        if !self.base.is_dir() {
            return Ok(ToolOutput::text(format!(
                "No files found: {} is not a directory, so nothing matches `{}`.{notes}",
                self.base.display(),
                self.pattern
            )));
        }
        if let Some(rule) = ignore.excluded(&self.base, true) {
            return Err(failure(
                NAME,
                format!(
                    "{} is excluded by {rule}; kaji's tools may not search it.",
                    self.base.display()
                ),
            ));
        }

        let mut builder = walk::builder(&self.base, ignore.clone());
        // Without `**` a pattern can only match at a fixed depth: do not
        // walk below it (matters for patterns like `/*.txt`).
        if !self.rest.contains("**") {
            builder.max_depth(Some(self.rest.split('/').count()));
        }
        let mut found: Vec<(SystemTime, PathBuf)> = walk::for_each_file(
            &builder,
            &self.cancel,
            || (),
            |(), entry| {
                let entry = entry.ok()?;
                let relative = entry.path().strip_prefix(&self.base).ok()?;
                if !self.matcher.is_match(relative)
                    || self.hidden.as_ref().is_some_and(|h| h.hides(entry.path()))
                {
                    return None;
                }
                let modified = entry
                    .metadata()
                    .ok()
                    .and_then(|m| m.modified().ok())
                    .unwrap_or(SystemTime::UNIX_EPOCH);
                Some((modified, entry.into_path()))
            },
        )?;

        if found.is_empty() {
            return Ok(ToolOutput {
                content: format!(
                    "No files found matching `{}` in {}. (Files ignored by .gitignore or .kajiignore are not listed.){notes}",
                    self.pattern,
                    self.base.display()
                ),
                data: Some(json!({"files": [], "total": 0, "truncated": false})),
                ..ToolOutput::default()
            });
        }
        found.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        let total = found.len();
        let shown: Vec<String> = found
            .iter()
            .take(MAX_RESULTS)
            .map(|(_, p)| walk::display_path(&self.cwd, p))
            .collect();
        let mut content = shown.join("\n");
        if total > MAX_RESULTS {
            content.push_str(&format!(
                "\n(Showing the {MAX_RESULTS} most recently modified of {total} matching files. Use a more specific pattern or path to see the others.)"
            ));
        }
        content.push_str(&notes);
        Ok(ToolOutput {
            content,
            data: Some(json!({"files": shown, "total": total, "truncated": total > MAX_RESULTS})),
            ..ToolOutput::default()
        })
    }
}

/// Splits a pattern into its leading directories without glob syntax and
/// the rest: `src/**/*.rs` → (`src`, `**/*.rs`); `/abs/dir/*.rs` →
/// (`/abs/dir`, `*.rs`). The last component always stays in the pattern.
fn split_literal_prefix(pattern: &str) -> (PathBuf, String) {
    let pattern = pattern.strip_prefix("./").unwrap_or(pattern);
    let is_meta = |c: char| matches!(c, '*' | '?' | '[' | ']' | '{' | '}' | '\\');
    let parts: Vec<&str> = pattern.split('/').collect();
    let mut prefix = PathBuf::new();
    if pattern.starts_with('/') {
        prefix.push("/");
    }
    let mut used = 0;
    for (i, part) in parts.iter().enumerate() {
        if i + 1 == parts.len() || part.contains(is_meta) {
            break;
        }
        if !part.is_empty() {
            prefix.push(part);
        }
        used = i + 1;
    }
    (prefix, parts[used..].join("/"))
}

/// `No files found`, `3 files` (of all that matched when the list was
/// cut), from the result's own lines.
fn glob_summary(output: &str) -> Option<String> {
    if output.starts_with("No files found") {
        return Some("No files found".to_string());
    }
    let total = output.lines().find_map(|l| {
        let rest = l.strip_prefix("(Showing the ")?;
        let (_, rest) = rest.split_once(" of ")?;
        rest.split(' ').next()?.parse::<usize>().ok()
    });
    let listed = output
        .lines()
        .take_while(|l| !l.is_empty() && !l.starts_with('('))
        .count();
    Some(crate::count_of(total.unwrap_or(listed), "file"))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    #[test]
    fn literal_prefix_is_split_off() {
        let s = |p: &str| {
            let (a, b) = split_literal_prefix(p);
            (a.to_string_lossy().into_owned(), b)
        };
        assert_eq!(s("src/**/*.rs"), ("src".into(), "**/*.rs".into()));
        assert_eq!(s("**/*.rs"), ("".into(), "**/*.rs".into()));
        assert_eq!(s("/abs/dir/*.rs"), ("/abs/dir".into(), "*.rs".into()));
        assert_eq!(s("./a/b/c.txt"), ("a/b".into(), "c.txt".into()));
        assert_eq!(s("../x/*"), ("../x".into(), "*".into()));
        assert_eq!(s("*.md"), ("".into(), "*.md".into()));
        assert_eq!(s("a/{b,c}/d"), ("a".into(), "{b,c}/d".into()));
    }

    #[test]
    fn relative_paths_match_like_globs() {
        let m = |p: &str, path: &str| {
            GlobBuilder::new(p)
                .literal_separator(true)
                .build()
                .unwrap()
                .compile_matcher()
                .is_match(Path::new(path))
        };
        assert!(m("**/*.rs", "a.rs"));
        assert!(m("**/*.rs", "x/y/a.rs"));
        assert!(!m("*.rs", "x/a.rs"));
        assert!(m("*.{ts,tsx}", "a.tsx"));
    }
}
