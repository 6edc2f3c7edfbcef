//! `Grep`: searches file contents with a regular expression, in-process on
//! ripgrep's crates (`grep-regex` for the matcher, `grep-searcher` for the
//! line-oriented search, `ignore` for the walk).
//!
//! The regex syntax is Rust's `regex` crate, as in ripgrep. `^` and `$`
//! match at line boundaries. Without `multiline` a match never spans lines
//! (and a pattern that needs `\n` is refused with a hint); with it, `.` also
//! matches newlines and matches may span lines. Binary files (a NUL byte)
//! are skipped as ripgrep does. Output is always bounded: `head_limit`
//! entries (default [`DEFAULT_HEAD_LIMIT`]), lines cut at
//! [`MAX_OUTPUT_LINE_CHARS`] characters, and [`MAX_OUTPUT_CHARS`] in all.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::SystemTime;

use async_trait::async_trait;
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkMatch};
use ignore::overrides::OverrideBuilder;
use ignore::types::TypesBuilder;
use kaji_protocol::ToolSpec;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::kajiignore::KajiIgnore;
use super::{failure, input, paths, walk};
use crate::{Tool, ToolContext, ToolError, ToolOutput, parse_input};

const NAME: &str = "Grep";

/// Entries returned when `head_limit` is not given.
pub(super) const DEFAULT_HEAD_LIMIT: usize = 250;
/// Characters kept of one output line.
pub(super) const MAX_OUTPUT_LINE_CHARS: usize = 500;
/// Characters of output at most, whatever `head_limit` says.
pub(super) const MAX_OUTPUT_CHARS: usize = 50_000;
/// Memory one file's search may use (matters for `multiline` and for
/// enormous lines); a file needing more is skipped with a note.
const HEAP_LIMIT: usize = 64 * 1024 * 1024;

/// The `Grep` tool.
pub(super) struct GrepTool;

#[derive(Debug, Deserialize, JsonSchema)]
struct GrepInput {
    /// Regular expression to search for.
    pattern: String,
    /// File or directory to search; defaults to the working directory.
    #[serde(default)]
    path: Option<String>,
    /// Only search files whose name matches this glob, e.g. "*.js" or "*.{ts,tsx}".
    #[serde(default)]
    glob: Option<String>,
    /// Only search files of this type (ripgrep's names: rust, py, js, ts, go, java, c, cpp, md, …).
    #[serde(default, rename = "type")]
    file_type: Option<String>,
    /// content: matching lines; files_with_matches (default): file paths; count: matches per file.
    #[serde(default)]
    #[schemars(extend("enum" = ["content", "files_with_matches", "count"]))]
    output_mode: Option<String>,
    /// Case-insensitive search.
    #[serde(default, rename = "-i", deserialize_with = "de_case_insensitive")]
    #[schemars(with = "Option<bool>")]
    case_insensitive: Option<bool>,
    /// Show line numbers in content mode (default true).
    #[serde(default, rename = "-n", deserialize_with = "de_line_numbers")]
    #[schemars(with = "Option<bool>")]
    line_numbers: Option<bool>,
    /// Lines of context after each match (content mode).
    #[serde(default, rename = "-A", deserialize_with = "de_after")]
    #[schemars(with = "Option<u64>")]
    after: Option<usize>,
    /// Lines of context before each match (content mode).
    #[serde(default, rename = "-B", deserialize_with = "de_before")]
    #[schemars(with = "Option<u64>")]
    before: Option<usize>,
    /// Lines of context before and after each match (content mode).
    #[serde(default, rename = "-C", deserialize_with = "de_context")]
    #[schemars(with = "Option<u64>")]
    context: Option<usize>,
    #[serde(default, deserialize_with = "de_head_limit")]
    #[schemars(
        with = "Option<u64>",
        description = format!("Return at most this many lines (content) or entries (other modes); default {DEFAULT_HEAD_LIMIT}, 0 for no limit.")
    )]
    head_limit: Option<usize>,
    /// Allow matches to span lines; `.` then matches newlines too.
    #[serde(default, deserialize_with = "de_multiline")]
    #[schemars(with = "Option<bool>")]
    multiline: Option<bool>,
}

input::named!(fn de_case_insensitive: Option<bool> = opt_bool, "-i");
input::named!(fn de_line_numbers: Option<bool> = opt_bool, "-n");
input::named!(fn de_after: Option<usize> = opt_usize, "-A");
input::named!(fn de_before: Option<usize> = opt_usize, "-B");
input::named!(fn de_context: Option<usize> = opt_usize, "-C");
input::named!(fn de_head_limit: Option<usize> = opt_usize, "head_limit");
input::named!(fn de_multiline: Option<bool> = opt_bool, "multiline");

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Content,
    FilesWithMatches,
    Count,
}

#[async_trait]
impl Tool for GrepTool {
    fn name(&self) -> &'static str {
        NAME
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: NAME.to_string(),
            description: format!(
                "Searches file contents with a regular expression (ripgrep's engine and syntax, run \
in-process). Use it instead of running grep or rg through Bash.\n\
- pattern: a Rust/ripgrep regex, e.g. \"fn\\s+main\" or \"TODO|FIXME\". Escape literal braces and \
parentheses (\"Vec<String>\\\\(\" style), e.g. \"interface\\\\{{\\\\}}\" to find `interface{{}}`.\n\
- Narrow the files with path (a directory or a single file; default: the working directory), glob \
(e.g. \"*.rs\", \"*.{{ts,tsx}}\") or type (a ripgrep file type such as rust, py, js, go, java).\n\
- output_mode: \"files_with_matches\" (default) lists matching files, most recently modified first; \
\"content\" shows matching lines as path:line:text, with -A/-B/-C context lines and -n line numbers \
(on by default); \"count\" gives matching lines per file.\n\
- -i: ignore case. multiline: let a match span lines and `.` match newlines.\n\
- head_limit: at most this many output lines or entries (default {DEFAULT_HEAD_LIMIT}; 0 for no limit \
apart from a {MAX_OUTPUT_CHARS}-character cap).\n\
- Files ignored by .gitignore or .kajiignore, the .git directory and binary files are skipped; other \
dot-files are searched."
            ),
            input_schema: crate::schema::input_schema::<GrepInput>(),
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

    fn is_read_only(&self) -> bool {
        true
    }

    async fn call(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let input: GrepInput = parse_input(NAME, input)?;
        let search = GrepSearch::new(ctx, input)?;
        tokio::task::spawn_blocking(move || search.run())
            .await
            .map_err(|e| failure(NAME, format!("the search stopped unexpectedly: {e}")))?
    }
}

struct GrepSearch {
    cwd: PathBuf,
    root: PathBuf,
    pattern: String,
    matcher: RegexMatcher,
    mode: Mode,
    line_numbers: bool,
    before: usize,
    after: usize,
    limit: usize,
    multiline: bool,
    glob: Option<String>,
    file_type: Option<String>,
    cancel: CancellationToken,
    hidden: Option<crate::ReadFilter>,
}

impl GrepSearch {
    fn new(ctx: &ToolContext, input: GrepInput) -> Result<Self, ToolError> {
        let invalid = |message: String| ToolError::InvalidInput {
            tool: NAME.to_string(),
            message,
        };
        if input.pattern.is_empty() {
            return Err(invalid(
                "pattern is empty; give a regular expression to search for".to_string(),
            ));
        }
        let mode = match input.output_mode.as_deref().map(str::trim) {
            None | Some("" | "files_with_matches") => Mode::FilesWithMatches,
            Some("content") => Mode::Content,
            Some("count") => Mode::Count,
            Some(other) => {
                return Err(invalid(format!(
                    "output_mode \"{other}\" is not one of \"content\", \"files_with_matches\", \"count\""
                )));
            }
        };
        let multiline = input.multiline.unwrap_or(false);
        let matcher = build_matcher(
            &input.pattern,
            input.case_insensitive.unwrap_or(false),
            multiline,
        )?;
        let context = input.context.unwrap_or(0);
        let (before, after) = if mode == Mode::Content {
            (
                input.before.unwrap_or(context),
                input.after.unwrap_or(context),
            )
        } else {
            (0, 0)
        };
        let limit = match input.head_limit {
            None => DEFAULT_HEAD_LIMIT,
            Some(0) => usize::MAX,
            Some(n) => n,
        };
        let non_empty =
            |s: Option<String>| s.map(|s| s.trim().to_string()).filter(|s| !s.is_empty());
        Ok(Self {
            cwd: paths::cwd(ctx),
            root: walk::search_root(ctx, input.path.as_deref()),
            pattern: input.pattern,
            matcher,
            mode,
            line_numbers: input.line_numbers.unwrap_or(true),
            before,
            after,
            limit,
            multiline,
            glob: non_empty(input.glob),
            file_type: non_empty(input.file_type),
            cancel: ctx.cancel.clone(),
            hidden: ctx.hidden.clone(),
        })
    }

    fn run(self) -> Result<ToolOutput, ToolError> {
        let ignore = Arc::new(KajiIgnore::load(&self.cwd));
        let root_is_dir = walk::check_root(NAME, &self.root, &ignore)?;
        let mut builder = walk::builder(&self.root, ignore.clone());
        if let Some(name) = &self.file_type {
            builder.types(file_types(name)?);
        }
        if let Some(glob) = &self.glob {
            let base = if root_is_dir {
                self.root.as_path()
            } else {
                self.root.parent().unwrap_or(&self.root)
            };
            let mut overrides = OverrideBuilder::new(base);
            overrides
                .add(glob)
                .map_err(|e| failure(NAME, format!("invalid glob `{glob}`: {e}")))?;
            builder.overrides(
                overrides
                    .build()
                    .map_err(|e| failure(NAME, format!("invalid glob `{glob}`: {e}")))?,
            );
        }
        let mut searcher = SearcherBuilder::new();
        searcher
            // Lines are only counted where they are shown.
            .line_number(self.mode == Mode::Content && self.line_numbers)
            .multi_line(self.multiline)
            .before_context(self.before)
            .after_context(self.after)
            .binary_detection(BinaryDetection::quit(b'\x00'))
            .heap_limit(Some(HEAP_LIMIT));
        let found = walk::for_each_file(
            &builder,
            &self.cancel,
            || searcher.build(),
            |searcher, entry| {
                // A file a `Read` deny rule covers is left out, as if absent.
                let hidden = entry
                    .as_ref()
                    .is_ok_and(|e| self.hidden.as_ref().is_some_and(|h| h.hides(e.path())));
                if hidden {
                    return None;
                }
                self.search_file(searcher, entry)
            },
        )?;

        let mut out = Output::new(self.limit);
        let mut files: Vec<(SystemTime, PathBuf)> = Vec::new();
        let mut counts: Vec<(PathBuf, u64)> = Vec::new();
        let mut total_matches = 0u64;
        let mut skipped: Vec<String> = Vec::new();
        let mut hits: Vec<FileHit> = Vec::new();
        for result in found {
            match result {
                Err(why) => skipped.push(why),
                Ok(hit) => hits.push(hit),
            }
        }
        // The order of a sorted walk: by path, component by component.
        // Only files with matches (or errors) are here, so this sort is
        // as long as the results, not as the tree.
        hits.sort_by(|a, b| a.path.cmp(&b.path));
        for hit in hits {
            if let Some(why) = hit.error {
                skipped.push(why);
            }
            if hit.count == 0 && hit.lines.is_empty() {
                continue;
            }
            total_matches += hit.count;
            match self.mode {
                Mode::Content => {
                    if out.full() {
                        continue;
                    }
                    if (self.before > 0 || self.after > 0) && !out.lines.is_empty() {
                        out.push("--".to_string());
                    }
                    for line in hit.lines {
                        out.push(line);
                    }
                    if hit.truncated {
                        out.truncated = true;
                    }
                }
                Mode::Count => counts.push((hit.path, hit.count)),
                Mode::FilesWithMatches => files.push((hit.modified, hit.path)),
            }
        }
        skipped.sort();

        let notes = self.notes(&skipped, &ignore);
        let (content, data) = match self.mode {
            Mode::Content => {
                if out.lines.is_empty() {
                    return Ok(self.no_matches(&notes));
                }
                let shown = out.lines.len();
                let mut content = out.lines.join("\n");
                if out.truncated {
                    content.push_str(&format!(
                        "\n(Output stopped after {shown} lines; more matches exist. Narrow the search with path, glob or type, or raise head_limit.)"
                    ));
                }
                (
                    content,
                    json!({"mode": "content", "lines": shown, "truncated": out.truncated}),
                )
            }
            Mode::FilesWithMatches => {
                if files.is_empty() {
                    return Ok(self.no_matches(&notes));
                }
                files.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
                let total = files.len();
                let listed: Vec<String> = files
                    .iter()
                    .take(self.limit)
                    .map(|(_, p)| walk::display_path(&self.cwd, p))
                    .collect();
                let mut content = format!(
                    "{total} file{} with matches:\n{}",
                    if total == 1 { "" } else { "s" },
                    listed.join("\n")
                );
                if total > listed.len() {
                    content.push_str(&format!(
                        "\n(Showing the {} most recently modified of {total} files. Narrow the search or raise head_limit.)",
                        listed.len()
                    ));
                }
                (
                    content,
                    json!({"mode": "files_with_matches", "files": listed, "total": total}),
                )
            }
            Mode::Count => {
                if counts.is_empty() {
                    return Ok(self.no_matches(&notes));
                }
                let total_files = counts.len();
                let lines: Vec<String> = counts
                    .iter()
                    .take(self.limit)
                    .map(|(p, n)| format!("{}:{n}", walk::display_path(&self.cwd, p)))
                    .collect();
                let mut content = lines.join("\n");
                content.push_str(&format!(
                    "\n{total_matches} matching line{} in {total_files} file{}.",
                    if total_matches == 1 { "" } else { "s" },
                    if total_files == 1 { "" } else { "s" }
                ));
                if total_files > lines.len() {
                    content.push_str(&format!(
                        "\n(Listed {} of {total_files} files; raise head_limit to see all.)",
                        lines.len()
                    ));
                }
                (
                    content,
                    json!({"mode": "count", "matches": total_matches, "files": total_files}),
                )
            }
        };
        Ok(ToolOutput {
            content: format!("{content}{notes}"),
            data: Some(data),
            ..ToolOutput::default()
        })
    }

    /// Searches one file of the walk (or notes a walk error). A file
    /// without matches or errors leaves nothing behind (`None`): in a
    /// large tree almost every file is one of those, and nothing is
    /// allocated for them.
    fn search_file(
        &self,
        searcher: &mut Searcher,
        entry: Result<ignore::DirEntry, ignore::Error>,
    ) -> Option<Result<FileHit, String>> {
        let entry = match entry {
            Ok(entry) => entry,
            Err(e) => return Some(Err(e.to_string())),
        };
        let path = entry.path();
        let mut hit = FileHit {
            path: PathBuf::new(),
            lines: Vec::new(),
            truncated: false,
            count: 0,
            modified: SystemTime::UNIX_EPOCH,
            error: None,
        };
        let result = match self.mode {
            Mode::Content => {
                let shown = walk::display_path(&self.cwd, path);
                let mut out = Output::new(self.limit);
                let mut sink = ContentSink {
                    out: &mut out,
                    path: &shown,
                    line_numbers: self.line_numbers,
                    context: false,
                    first: true,
                };
                let result = searcher.search_path(&self.matcher, path, &mut sink);
                hit.truncated = out.truncated;
                hit.lines = out.lines;
                result
            }
            Mode::FilesWithMatches | Mode::Count => {
                let mut sink = CountSink {
                    count: 0,
                    stop_at_first: self.mode == Mode::FilesWithMatches,
                };
                let result = searcher.search_path(&self.matcher, path, &mut sink);
                hit.count = sink.count;
                if sink.count > 0 && self.mode == Mode::FilesWithMatches {
                    hit.modified = entry
                        .metadata()
                        .ok()
                        .and_then(|m| m.modified().ok())
                        .unwrap_or(SystemTime::UNIX_EPOCH);
                }
                result
            }
        };
        if let Err(e) = result {
            hit.error = Some(format!("{}: {e}", walk::display_path(&self.cwd, path)));
        }
        if hit.count == 0 && hit.lines.is_empty() && hit.error.is_none() {
            return None;
        }
        hit.path = entry.into_path();
        Some(Ok(hit))
    }

    fn no_matches(&self, notes: &str) -> ToolOutput {
        ToolOutput {
            content: format!(
                "No matches for `{}` in {}. (Files ignored by .gitignore or .kajiignore and binary files are not searched.){notes}",
                self.pattern,
                self.root.display()
            ),
            data: Some(json!({"mode": self.mode_name(), "total": 0})),
            ..ToolOutput::default()
        }
    }

    fn mode_name(&self) -> &'static str {
        match self.mode {
            Mode::Content => "content",
            Mode::FilesWithMatches => "files_with_matches",
            Mode::Count => "count",
        }
    }

    fn notes(&self, skipped: &[String], ignore: &KajiIgnore) -> String {
        let mut notes = walk::ignore_notes(ignore);
        if !skipped.is_empty() {
            let first: Vec<&str> = skipped.iter().take(3).map(String::as_str).collect();
            notes.push_str(&format!(
                "\n(Note: {} file(s) or directories could not be searched: {}{}.)",
                skipped.len(),
                first.join("; "),
                if skipped.len() > 3 { "; …" } else { "" }
            ));
        }
        notes
    }
}

fn build_matcher(
    pattern: &str,
    case_insensitive: bool,
    multiline: bool,
) -> Result<RegexMatcher, ToolError> {
    let mut builder = RegexMatcherBuilder::new();
    builder.case_insensitive(case_insensitive).multi_line(true);
    if multiline {
        builder.dot_matches_new_line(true);
    } else {
        builder.line_terminator(Some(b'\n'));
    }
    builder.build(pattern).map_err(|e| {
        let hint = if !multiline && (pattern.contains("\\n") || pattern.contains('\n')) {
            " To match across lines, set multiline to true."
        } else {
            " Grep uses ripgrep's (Rust regex) syntax: escape literal ( ) [ ] { } . * + ? | \\ with a backslash."
        };
        failure(NAME, format!("invalid regular expression `{pattern}`: {e}.{hint}"))
    })
}

fn file_types(name: &str) -> Result<ignore::types::Types, ToolError> {
    let mut builder = TypesBuilder::new();
    builder.add_defaults();
    if !builder.definitions().iter().any(|d| d.name() == name) {
        return Err(failure(
            NAME,
            format!(
                "unknown file type \"{name}\". Use one of ripgrep's type names (rust, py, js, ts, go, java, c, cpp, \
md, json, yaml, toml, sh, …), or the glob parameter instead (e.g. glob \"*.{name}\")."
            ),
        ));
    }
    builder.select(name);
    builder
        .build()
        .map_err(|e| failure(NAME, format!("file type \"{name}\" cannot be used: {e}")))
}

/// What the search of one file found.
struct FileHit {
    path: PathBuf,
    /// Content mode: its lines (no `--` before the first).
    lines: Vec<String>,
    /// Content mode: more lines than the output can take.
    truncated: bool,
    /// Other modes: its matching lines (1 at most in files_with_matches).
    count: u64,
    /// files_with_matches: when it was last modified.
    modified: SystemTime,
    /// Why it could not be searched (wholly or in part).
    error: Option<String>,
}

/// Bounded collected output of content mode.
struct Output {
    lines: Vec<String>,
    chars: usize,
    limit: usize,
    /// Something was left out.
    truncated: bool,
}

impl Output {
    fn new(limit: usize) -> Self {
        Self {
            lines: Vec::new(),
            chars: 0,
            limit,
            truncated: false,
        }
    }

    fn full(&self) -> bool {
        self.truncated
    }

    fn push(&mut self, line: String) {
        if self.truncated {
            return;
        }
        if self.lines.len() >= self.limit || self.chars + line.len() > MAX_OUTPUT_CHARS {
            self.truncated = true;
            return;
        }
        self.chars += line.len() + 1;
        self.lines.push(line);
    }
}

/// Writes content-mode lines: `path:line:text` for matches, `path-line-text`
/// for context, `--` between separate groups.
struct ContentSink<'a> {
    out: &'a mut Output,
    path: &'a str,
    line_numbers: bool,
    context: bool,
    first: bool,
}

impl ContentSink<'_> {
    fn push(&mut self, line_number: Option<u64>, sep: char, bytes: &[u8]) {
        if self.first {
            self.first = false;
            if self.context && !self.out.lines.is_empty() {
                self.out.push("--".to_string());
            }
        }
        let mut number = line_number;
        for line in split_lines(bytes) {
            let text = cut(&String::from_utf8_lossy(line));
            let entry = match number.filter(|_| self.line_numbers) {
                Some(n) => format!("{}{sep}{n}{sep}{text}", self.path),
                None => format!("{}{sep}{text}", self.path),
            };
            self.out.push(entry);
            number = number.map(|n| n + 1);
        }
    }
}

impl Sink for ContentSink<'_> {
    type Error = std::io::Error;

    fn matched(&mut self, _: &Searcher, mat: &SinkMatch<'_>) -> Result<bool, std::io::Error> {
        self.push(mat.line_number(), ':', mat.bytes());
        Ok(!self.out.full())
    }

    fn context(&mut self, _: &Searcher, ctx: &SinkContext<'_>) -> Result<bool, std::io::Error> {
        self.push(ctx.line_number(), '-', ctx.bytes());
        Ok(!self.out.full())
    }

    fn context_break(&mut self, _: &Searcher) -> Result<bool, std::io::Error> {
        self.out.push("--".to_string());
        Ok(!self.out.full())
    }
}

/// Counts matching lines, or stops at the first one.
struct CountSink {
    count: u64,
    stop_at_first: bool,
}

impl Sink for CountSink {
    type Error = std::io::Error;

    fn matched(&mut self, _: &Searcher, mat: &SinkMatch<'_>) -> Result<bool, std::io::Error> {
        self.count += split_lines(mat.bytes()).count().max(1) as u64;
        Ok(!self.stop_at_first)
    }
}

/// The lines of a match or context block, without their line ends.
fn split_lines(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    let bytes = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    bytes
        .split(|&b| b == b'\n')
        .map(|l| l.strip_suffix(b"\r").unwrap_or(l))
}

/// A line cut to [`MAX_OUTPUT_LINE_CHARS`] characters, with a marker.
fn cut(line: &str) -> String {
    match line.char_indices().nth(MAX_OUTPUT_LINE_CHARS) {
        Some((end, _)) => format!("{} … [line cut]", &line[..end]),
        None => line.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_lines_drops_line_ends() {
        let lines: Vec<&[u8]> = split_lines(b"a\r\nb\n").collect();
        assert_eq!(lines, vec![&b"a"[..], &b"b"[..]]);
        assert_eq!(split_lines(b"x").count(), 1);
    }

    #[test]
    fn newline_in_pattern_without_multiline_is_explained() {
        let e = build_matcher("a\\nb", false, false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("multiline"), "{e}");
        assert!(build_matcher("a\\nb", false, true).is_ok());
    }

    #[test]
    fn output_is_bounded() {
        let mut out = Output::new(2);
        out.push("a".into());
        out.push("b".into());
        assert!(!out.full());
        out.push("c".into());
        assert!(out.full());
        assert_eq!(out.lines, vec!["a", "b"]);
    }
}
