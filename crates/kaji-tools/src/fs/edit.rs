//! `Edit`: replaces an exact piece of text in a file.
//!
//! The match is exact (no regex, no whitespace folding) and must be unique
//! unless `replace_all` is set; a miss or an ambiguous match is an error
//! that says which, with hints to fix the call. One convenience: in a file
//! with CRLF line ends, an `old_string` written with plain `\n` matches (and
//! `new_string` gets CRLF too), since `Read` shows lines without their `\r`.
//! An empty `old_string` creates a missing file (or fills an empty one) with
//! `new_string`, as Claude Code does.

use std::path::{Path, PathBuf};

use async_trait::async_trait;
use kaji_protocol::ToolSpec;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{atomic, diff, failure, input, paths, sniff, target, walk};
use crate::{Tool, ToolAccess, ToolContext, ToolError, ToolOutput, parse_input};

const NAME: &str = "Edit";

/// Files larger than this are not edited in memory.
const MAX_EDIT_BYTES: u64 = 64 * 1024 * 1024;
/// How many match positions a not-unique error lists.
const MAX_LISTED_MATCHES: usize = 10;

/// The `Edit` tool.
pub(super) struct EditTool;

#[derive(Debug, Deserialize, JsonSchema)]
struct EditInput {
    /// Path of the file to change, absolute or relative to the working directory.
    file_path: String,
    /// The exact text to replace.
    old_string: String,
    /// The text to put in its place; must differ from old_string.
    new_string: String,
    /// Replace every occurrence of old_string instead of exactly one.
    #[serde(default, deserialize_with = "replace_all")]
    #[schemars(with = "bool", extend("default" = false))]
    replace_all: Option<bool>,
}

input::named!(fn replace_all: Option<bool> = opt_bool, "replace_all");

#[async_trait]
impl Tool for EditTool {
    fn hook_response(&self, input: &Value, output: &ToolOutput) -> Value {
        let data = output.data.as_ref();
        serde_json::json!({
            "filePath": data.and_then(|d| d.get("path")).cloned().unwrap_or(Value::Null),
            "oldString": input.get("old_string").cloned().unwrap_or(Value::Null),
            "newString": input.get("new_string").cloned().unwrap_or(Value::Null),
            "replaceAll": input.get("replace_all").cloned().unwrap_or(Value::Bool(false)),
            "structuredPatch": [],
            "userModified": false,
        })
    }

    fn name(&self) -> &'static str {
        NAME
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: NAME.to_string(),
            description: "Replaces exact text in a file: old_string becomes new_string.\n\
- Read the file first. old_string must match the file exactly, including indentation and blank lines, \
and must not include Read's line-number prefix (the number and the tab).\n\
- old_string must occur exactly once, unless replace_all is true. If it occurs several times, add \
surrounding lines to make it unique, or set replace_all to change every occurrence (handy for renames).\n\
- An empty old_string creates the file with new_string as its content when the file does not exist yet.\n\
- The result shows the changed region with line numbers."
                .to_string(),
            input_schema: crate::schema::input_schema::<EditInput>(),
        }
    }

    fn kind(&self) -> crate::ToolKind {
        crate::ToolKind::Edit
    }

    fn title(&self, input: &Value) -> String {
        crate::title_with(NAME, input, "file_path")
    }

    fn files(&self, input: &Value) -> crate::ToolFiles {
        crate::ToolFiles::write(input.get("file_path").and_then(Value::as_str))
    }

    /// The result's first sentence (`Edited a.txt: replaced 1
    /// occurrence.`), without the changed region that follows it.
    fn summary(&self, _input: &Value, output: &str) -> Option<String> {
        let first = output.lines().next()?;
        let head = first
            .split_once(" The changed region now reads:")
            .map_or(first, |(head, _)| head);
        Some(head.to_string())
    }

    fn change(&self, input: &Value) -> Option<crate::FileChange> {
        let text = |k: &str| input.get(k).and_then(Value::as_str);
        Some(crate::FileChange {
            path: text("file_path")?.into(),
            old_text: text("old_string").map(str::to_string),
            new_text: text("new_string")?.to_string(),
        })
    }

    /// The diff of the edit as it would be made now, by the same matching
    /// the call does; `None` when the call would fail.
    fn preview(&self, input: &Value, ctx: &ToolContext) -> Option<String> {
        let input: EditInput = serde_json::from_value(input.clone()).ok()?;
        let path = paths::resolve(ctx, &input.file_path);
        let (old, new) = match std::fs::read(&path) {
            Err(_) if input.old_string.is_empty() => (String::new(), input.new_string.clone()),
            Err(_) => return None,
            Ok(bytes) => {
                let file = EditFile {
                    real: path.clone(),
                    path,
                    label: String::new(),
                };
                let change = change(file, bytes, &input).ok()?;
                (change.old, change.new)
            }
        };
        Some(diff::unified(&old, &new, &input.file_path))
    }

    fn is_read_only(&self) -> bool {
        false
    }

    fn access(&self, input: &Value, ctx: &ToolContext) -> ToolAccess {
        paths::file_write_access(input, ctx)
    }

    async fn call(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let input: EditInput = parse_input(NAME, input)?;
        crate::require_text(
            NAME,
            "file_path",
            &input.file_path,
            "give the path of the file to edit",
        )?;
        if input.old_string == input.new_string {
            return Err(ToolError::InvalidInput {
                tool: NAME.to_string(),
                message: "old_string and new_string are identical, so nothing would change; \
give the new text in new_string"
                    .to_string(),
            });
        }
        let path = paths::resolve(ctx, &input.file_path);
        let cwd = paths::cwd(ctx);
        match ctx.services.files.clone().filter(|f| f.writes_text()) {
            None => blocking(move || edit(&cwd, path, input)).await,
            Some(files) => edit_through(cwd, path, input, files.as_ref(), &ctx.cancel).await,
        }
    }
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, ToolError> + Send + 'static,
) -> Result<T, ToolError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| failure(NAME, format!("the edit stopped unexpectedly: {e}")))?
}

/// An edit on the local disk.
fn edit(cwd: &Path, path: PathBuf, input: EditInput) -> Result<ToolOutput, ToolError> {
    let change = match start(cwd, path, &input)? {
        Start::Create(change) => change,
        Start::Existing(file) => {
            let bytes = std::fs::read(&file.real)
                .map_err(|e| failure(NAME, format!("cannot read {}: {e}", file.path.display())))?;
            change(file, bytes, &input)?
        }
    };
    atomic::write_file(&change.real, change.new.as_bytes())
        .map_err(|e| failure(NAME, format!("cannot write {}: {e}", change.path.display())))?;
    Ok(output(&change))
}

/// An edit through a [`crate::FileAccess`]: the same checks on the disk,
/// then the text as the file's owner holds it is read, changed and written
/// back through it.
async fn edit_through(
    cwd: PathBuf,
    path: PathBuf,
    input: EditInput,
    files: &dyn crate::FileAccess,
    cancel: &tokio_util::sync::CancellationToken,
) -> Result<ToolOutput, ToolError> {
    let (started, input) = blocking(move || Ok((start(&cwd, path, &input), input))).await?;
    let change = match started? {
        Start::Create(change) => change,
        Start::Existing(file) if !files.reads_text() => {
            let real = file.real.clone();
            let bytes = blocking(move || {
                std::fs::read(&real)
                    .map_err(|e| failure(NAME, format!("cannot read {}: {e}", real.display())))
            })
            .await?;
            change(file, bytes, &input)?
        }
        Start::Existing(file) => {
            let text = tokio::select! {
                r = files.read_text(&file.real) => r.map_err(|e| {
                    failure(NAME, format!("cannot read {}: {e}", file.path.display()))
                })?,
                () = cancel.cancelled() => return Err(ToolError::Cancelled),
            };
            change(file, text.into_bytes(), &input)?
        }
    };
    tokio::select! {
        r = files.write_text(&change.real, &change.new) => r.map_err(|e| {
            failure(NAME, format!("cannot write {}: {e}", change.path.display()))
        })?,
        () = cancel.cancelled() => return Err(ToolError::Cancelled),
    }
    Ok(output(&change))
}

/// The file an edit changes.
struct EditFile {
    /// Where the bytes go (symlinks followed).
    real: PathBuf,
    /// The path as the model gave it, absolute.
    path: PathBuf,
    /// The path as shown in diffs.
    label: String,
}

/// What an edit will write.
struct Change {
    real: PathBuf,
    path: PathBuf,
    label: String,
    old: String,
    new: String,
    replaced: usize,
    created: bool,
}

enum Start {
    /// A missing file created with `new_string` (parents made).
    Create(Change),
    /// An existing file, to be read.
    Existing(EditFile),
}

/// The checks before the file is read: `.kajiignore`, the kind of file,
/// its size; a missing file is created when `old_string` is empty.
fn start(cwd: &Path, path: PathBuf, input: &EditInput) -> Result<Start, ToolError> {
    let shown = path.display().to_string();
    let label = walk::display_path(cwd, &path);
    let target = target::prepare(NAME, cwd, &path)?;
    let Some(meta) = &target.existing else {
        if input.old_string.is_empty() {
            target::create_parents(NAME, &target.real)?;
            return Ok(Start::Create(Change {
                real: target.real,
                path,
                label,
                old: String::new(),
                new: input.new_string.clone(),
                replaced: 0,
                created: true,
            }));
        }
        return Err(failure(
            NAME,
            format!(
                "{shown} does not exist. Check the path (Glob finds files by name); to create a new file \
use Write, or Edit with an empty old_string."
            ),
        ));
    };
    if meta.len() > MAX_EDIT_BYTES {
        return Err(failure(
            NAME,
            format!(
                "{shown} is too large to edit ({} bytes; the limit is {MAX_EDIT_BYTES}). Use Bash (sed, a script) instead.",
                meta.len()
            ),
        ));
    }
    Ok(Start::Existing(EditFile {
        real: target.real,
        path,
        label,
    }))
}

/// The change `input` makes to the file's `bytes`.
fn change(file: EditFile, bytes: Vec<u8>, input: &EditInput) -> Result<Change, ToolError> {
    let shown = file.path.display().to_string();
    if sniff::has_nul(&bytes[..bytes.len().min(sniff::SNIFF_LEN)]) || sniff::image(&bytes).is_some()
    {
        return Err(failure(
            NAME,
            format!("{shown} is a binary file; Edit only changes text files."),
        ));
    }
    let content = String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let line = 1 + e.as_bytes()[..at].iter().filter(|&&b| b == b'\n').count();
        failure(
            NAME,
            format!(
                "{shown} is not valid UTF-8 (first bad byte at offset {at}, line {line}); Edit only changes \
UTF-8 text. Use Write to replace the whole file, or Bash."
            ),
        )
    })?;
    let done = |old: String, new: String, replaced: usize| Change {
        real: file.real.clone(),
        path: file.path.clone(),
        label: file.label.clone(),
        old,
        new,
        replaced,
        created: false,
    };

    if input.old_string.is_empty() {
        if content.is_empty() {
            return Ok(done(String::new(), input.new_string.clone(), 0));
        }
        return Err(failure(
            NAME,
            format!(
                "old_string is empty, but {shown} already has content. Give the exact text to replace, \
or use Write to replace the whole file."
            ),
        ));
    }

    let (old, new) = match_line_ends(&content, &input.old_string, &input.new_string);
    let positions: Vec<usize> = content
        .match_indices(old.as_str())
        .map(|(i, _)| i)
        .collect();
    let replace_all = input.replace_all.unwrap_or(false);
    match positions.len() {
        0 => return Err(not_found(&shown, &content, &input.old_string)),
        1 => {}
        n if !replace_all => {
            let lines = line_numbers(&content, &positions);
            let listed: Vec<String> = lines
                .iter()
                .take(MAX_LISTED_MATCHES)
                .map(usize::to_string)
                .collect();
            let more = if n > MAX_LISTED_MATCHES { ", …" } else { "" };
            return Err(failure(
                NAME,
                format!(
                    "old_string is not unique in {shown}: it matches {n} times (starting on lines {}{more}). \
Add more surrounding context to old_string so it matches exactly one place, or set replace_all to true \
to replace all {n}.",
                    listed.join(", ")
                ),
            ));
        }
        _ => {}
    }
    let updated = if replace_all {
        content.replace(old.as_str(), &new)
    } else {
        content.replacen(old.as_str(), &new, 1)
    };
    Ok(done(content, updated, positions.len()))
}

/// In a CRLF file, `old` and `new` written with bare `\n` are converted to
/// CRLF when that is what makes `old` match.
fn match_line_ends(content: &str, old: &str, new: &str) -> (String, String) {
    let bare_lf = |s: &str| s.contains('\n') && !s.contains("\r\n");
    if bare_lf(old) && content.contains("\r\n") && !content.contains(old) {
        let crlf_old = old.replace('\n', "\r\n");
        if content.contains(&crlf_old) {
            return (crlf_old, new.replace("\r\n", "\n").replace('\n', "\r\n"));
        }
    }
    (old.to_string(), new.to_string())
}

/// 1-based line numbers of byte offsets (sorted ascending) in `content`.
fn line_numbers(content: &str, positions: &[usize]) -> Vec<usize> {
    let mut out = Vec::with_capacity(positions.len());
    let mut line = 1;
    let mut from = 0;
    for &pos in positions {
        line += content.as_bytes()[from..pos]
            .iter()
            .filter(|&&b| b == b'\n')
            .count();
        from = pos;
        out.push(line);
    }
    out
}

/// The not-found error, with a hint when the text is there apart from
/// whitespace, or when old_string carries Read's line-number prefixes.
fn not_found(shown: &str, content: &str, old: &str) -> ToolError {
    let mut hint = String::new();
    if let Some(line) = whitespace_insensitive_match(content, old) {
        hint = format!(
            " Text matching it apart from indentation or trailing spaces starts at line {line}: \
Read that part again and copy it exactly."
        );
    } else if old.lines().next().is_some_and(looks_like_numbered_line) {
        hint =
            " old_string seems to include Read's line-number prefix (spaces, a number and a tab); \
leave the prefix out."
                .to_string();
    }
    failure(
        NAME,
        format!(
            "old_string was not found in {shown}. It must match the file exactly, including whitespace and \
line breaks.{hint} Read the file again if it may have changed."
        ),
    )
}

fn looks_like_numbered_line(line: &str) -> bool {
    let trimmed = line.trim_start();
    let digits = trimmed.chars().take_while(char::is_ascii_digit).count();
    digits > 0 && trimmed[digits..].starts_with('\t')
}

/// The line where `old` matches `content` when every line is compared with
/// its surrounding whitespace removed. Bounded work: skipped for very large
/// inputs.
fn whitespace_insensitive_match(content: &str, old: &str) -> Option<usize> {
    let wanted: Vec<&str> = old.lines().map(str::trim).collect();
    let first = wanted.iter().position(|l| !l.is_empty())?;
    let lines: Vec<&str> = content.lines().map(str::trim).collect();
    if wanted.len() > 500 || lines.len().saturating_mul(wanted.len()) > 50_000_000 {
        return None;
    }
    (0..lines.len().checked_sub(wanted.len())? + 1)
        .find(|&start| {
            lines[start + first] == wanted[first]
                && lines[start..start + wanted.len()] == wanted[..]
        })
        .map(|start| start + 1)
}

/// The result of a change that was written.
fn output(c: &Change) -> ToolOutput {
    let shown = c.path.display().to_string();
    let (old, new, replaced) = (c.old.as_str(), c.new.as_str(), c.replaced);
    let head = if c.created {
        format!(
            "Created {shown} with new_string as its content ({} lines).",
            target::count_lines(new)
        )
    } else if old.is_empty() {
        format!(
            "Filled the empty file {shown} ({} lines).",
            target::count_lines(new)
        )
    } else if replaced == 1 {
        format!("Edited {shown}: replaced 1 occurrence.")
    } else {
        format!("Edited {shown}: replaced {replaced} occurrences.")
    };
    let snippet = diff::snippet(old, new);
    let content = if snippet.is_empty() {
        head
    } else {
        format!("{head} The changed region now reads:\n{snippet}")
    };
    ToolOutput {
        content,
        update: None,
        data: Some(json!({
            "path": c.path,
            "action": if c.created { "created" } else { "edited" },
            "replacements": replaced,
            "diff": diff::unified(old, new, &c.label),
        })),
        control: None,
        changed_files: true,
        images: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crlf_files_match_lf_old_string() {
        let (old, new) = match_line_ends("a\r\nb\r\nc\r\n", "a\nb", "x\ny");
        assert_eq!((old.as_str(), new.as_str()), ("a\r\nb", "x\r\ny"));
        let (old, _) = match_line_ends("a\nb\n", "a\nb", "x");
        assert_eq!(old, "a\nb");
    }

    #[test]
    fn whitespace_hint_finds_line() {
        let content = "fn main() {\n    let x = 1;\n    let y = 2;\n}\n";
        assert_eq!(
            whitespace_insensitive_match(content, "let x = 1;\nlet y = 2;"),
            Some(2)
        );
        assert_eq!(whitespace_insensitive_match(content, "let z = 1;"), None);
        assert!(looks_like_numbered_line("     2\tlet x"));
        assert!(!looks_like_numbered_line("let x"));
    }

    #[test]
    fn line_numbers_of_offsets() {
        assert_eq!(line_numbers("a\nb a\n\na", &[0, 4, 8]), vec![1, 2, 4]);
    }
}
