//! Jupyter notebooks (nbformat 4): `NotebookEdit`, and what `Read` shows of
//! an `.ipynb`.
//!
//! `Read` shows each cell with its id, type and source, then its outputs:
//! text (streams, `text/plain` results, errors without their colour codes)
//! cut to [`MAX_OUTPUT_CHARS`] a cell, PNG/JPEG/GIF/WebP images as images
//! (validated like every image).
//!
//! `NotebookEdit` replaces, inserts or deletes one cell. It never
//! re-serializes the notebook: the bytes of the cell it changes (or the
//! cell it adds) are spliced into the file as it was, so the metadata and
//! every other cell stay byte for byte what they were. The changed cell is
//! written in the file's own indentation with sorted keys, as nbformat and
//! Jupyter write it. Writes go through the same checks as `Write`
//! (`.kajiignore`, a regular file, atomic replacement); permissions are the
//! core's, from [`Tool::access`]. This module must never write a notebook
//! it could not parse, nor change a cell other than the one named.

use std::path::{Path, PathBuf};

use async_trait::async_trait;
use kaji_protocol::ToolSpec;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::{atomic, failure, paths, target, walk};
use crate::{Tool, ToolAccess, ToolContext, ToolError, ToolOutput, parse_input};

const NAME: &str = "NotebookEdit";
/// A cell's outputs are cut to this many characters of text.
pub const MAX_OUTPUT_CHARS: usize = 4_000;
/// Notebooks larger than this are refused.
const MAX_NOTEBOOK_BYTES: u64 = 32 * 1024 * 1024;

/// Whether `path` names a notebook (`.ipynb`).
pub(super) fn is_notebook(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("ipynb"))
}

/// The `NotebookEdit` tool.
pub(super) struct NotebookEditTool;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum CellType {
    Code,
    Markdown,
}

impl CellType {
    fn as_str(self) -> &'static str {
        match self {
            Self::Code => "code",
            Self::Markdown => "markdown",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum EditMode {
    #[default]
    Replace,
    Insert,
    Delete,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct NotebookEditInput {
    /// Path of the .ipynb notebook to change, absolute or relative to the working directory.
    notebook_path: String,
    /// The cell to change or delete, as Read shows it (its id, or cell-N); with insert, the new cell goes after it (first when left out).
    #[serde(default)]
    cell_id: Option<String>,
    /// The cell's new source (not used by delete).
    new_source: String,
    /// code or markdown: the type the cell gets (default: the type it has); required with insert.
    #[serde(default)]
    cell_type: Option<CellType>,
    /// replace (the default), insert or delete.
    #[serde(default)]
    edit_mode: Option<EditMode>,
}

#[async_trait]
impl Tool for NotebookEditTool {
    fn name(&self) -> &'static str {
        NAME
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: NAME.to_string(),
            description: "Changes one cell of a Jupyter notebook (.ipynb): replaces its source \
(edit_mode=replace, the default), inserts a new cell after the cell cell_id names, or at the \
beginning without one (edit_mode=insert; cell_type required), or deletes it (edit_mode=delete). \
cell_id is the id Read shows for each cell (`cell-N`, the N-th cell counted from 0, works for \
notebooks without ids). Replacing a code cell clears its outputs. The rest of the notebook is left \
exactly as it was. Read the notebook first."
                .to_string(),
            input_schema: crate::schema::input_schema::<NotebookEditInput>(),
        }
    }

    fn kind(&self) -> crate::ToolKind {
        crate::ToolKind::Edit
    }

    fn title(&self, input: &Value) -> String {
        crate::title_with(NAME, input, "notebook_path")
    }

    fn files(&self, input: &Value) -> crate::ToolFiles {
        crate::ToolFiles::write(input.get("notebook_path").and_then(Value::as_str))
    }

    fn is_read_only(&self) -> bool {
        false
    }

    /// The approval shows the notebook's text diff, as the edit would
    /// write it.
    fn preview(&self, input: &Value, ctx: &ToolContext) -> Option<String> {
        let input: NotebookEditInput = serde_json::from_value(input.clone()).ok()?;
        let path = paths::resolve(ctx, &input.notebook_path);
        if std::fs::metadata(&path).ok()?.len() > MAX_NOTEBOOK_BYTES {
            return None;
        }
        let text = std::fs::read_to_string(&path).ok()?;
        let nb: Value = serde_json::from_str(&text).ok()?;
        let (new_text, _) = apply(&nb, &text, &input).ok()?;
        Some(super::diff::unified(&text, &new_text, &input.notebook_path))
    }

    fn access(&self, input: &Value, ctx: &ToolContext) -> ToolAccess {
        ToolAccess::Edit {
            paths: input
                .get("notebook_path")
                .and_then(Value::as_str)
                .filter(|p| !p.trim().is_empty())
                .map(|p| paths::write_targets(&paths::resolve(ctx, p)))
                .unwrap_or_default(),
        }
    }

    async fn call(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let input: NotebookEditInput = parse_input(NAME, input)?;
        crate::require_text(
            NAME,
            "notebook_path",
            &input.notebook_path,
            "give the path of the .ipynb file to edit",
        )?;
        let path = paths::resolve(ctx, &input.notebook_path);
        let cwd = paths::cwd(ctx);
        match ctx.services.files.clone().filter(|f| f.writes_text()) {
            None => tokio::task::spawn_blocking(move || edit_file(&cwd, path, &input))
                .await
                .map_err(|e| failure(NAME, format!("the edit stopped unexpectedly: {e}")))?,
            Some(files) => edit_through(cwd, path, input, files.as_ref(), &ctx.cancel).await,
        }
    }
}

/// An edit through a [`crate::FileAccess`] (an editor holding the file):
/// the same checks on the disk, then the notebook's text as the editor
/// holds it is changed and written back through it, never to the disk.
async fn edit_through(
    cwd: PathBuf,
    path: PathBuf,
    input: NotebookEditInput,
    files: &dyn crate::FileAccess,
    cancel: &tokio_util::sync::CancellationToken,
) -> Result<ToolOutput, ToolError> {
    let (checked, cwd, path, input) = tokio::task::spawn_blocking(move || {
        let checked = read_notebook(NAME, &cwd, &path);
        (checked, cwd, path, input)
    })
    .await
    .map_err(|e| failure(NAME, format!("the edit stopped unexpectedly: {e}")))?;
    let (real, mut text) = checked?;
    if files.reads_text() {
        text = tokio::select! {
            r = files.read_text(&real) => r.map_err(|e| {
                failure(NAME, format!("cannot read {}: {e}", path.display()))
            })?,
            () = cancel.cancelled() => return Err(ToolError::Cancelled),
        };
    }
    let nb = parse(NAME, &path, &text)?;
    let (new_text, message) =
        apply(&nb, &text, &input).map_err(|m| failure(NAME, format!("{}: {m}", path.display())))?;
    tokio::select! {
        r = files.write_text(&real, &new_text) => r.map_err(|e| {
            failure(NAME, format!("cannot write {}: {e}", path.display()))
        })?,
        () = cancel.cancelled() => return Err(ToolError::Cancelled),
    }
    Ok(edited(&cwd, &path, &input, message))
}

/// Reads the notebook at `path` as text, checked like a file `Write` may
/// replace; a missing file is an error.
fn read_notebook(tool: &str, cwd: &Path, path: &Path) -> Result<(PathBuf, String), ToolError> {
    let shown = path.display();
    if !is_notebook(path) {
        return Err(failure(
            tool,
            format!("{shown} is not a Jupyter notebook (.ipynb); use Edit for other files"),
        ));
    }
    let target = target::prepare(tool, cwd, path)?;
    let Some(meta) = target.existing else {
        return Err(ToolError::NotFound {
            path: path.to_path_buf(),
        });
    };
    if meta.len() > MAX_NOTEBOOK_BYTES {
        return Err(failure(
            tool,
            format!(
                "{shown} is {} bytes, more than the {MAX_NOTEBOOK_BYTES} bytes kaji edits",
                meta.len()
            ),
        ));
    }
    let bytes = std::fs::read(&target.real)
        .map_err(|e| failure(tool, format!("cannot read {shown}: {e}")))?;
    let text = String::from_utf8(bytes).map_err(|_| {
        failure(
            tool,
            format!("{shown} is not UTF-8 text, so not a notebook"),
        )
    })?;
    Ok((target.real, text))
}

/// Parses a notebook's text: JSON with a `cells` array.
fn parse(tool: &str, path: &Path, text: &str) -> Result<Value, ToolError> {
    let shown = path.display();
    let nb: Value = serde_json::from_str(text).map_err(|e| {
        failure(
            tool,
            format!("{shown} is not a valid notebook: it is not JSON ({e})"),
        )
    })?;
    if !nb.get("cells").is_some_and(Value::is_array) {
        return Err(failure(
            tool,
            format!("{shown} is not an nbformat 4 notebook: it has no `cells` list"),
        ));
    }
    Ok(nb)
}

fn edit_file(
    cwd: &Path,
    path: PathBuf,
    input: &NotebookEditInput,
) -> Result<ToolOutput, ToolError> {
    let (real, text) = read_notebook(NAME, cwd, &path)?;
    let nb = parse(NAME, &path, &text)?;
    let (new_text, message) =
        apply(&nb, &text, input).map_err(|m| failure(NAME, format!("{}: {m}", path.display())))?;
    atomic::write_file(&real, new_text.as_bytes())
        .map_err(|e| failure(NAME, format!("cannot write {}: {e}", path.display())))?;
    Ok(edited(cwd, &path, input, message))
}

/// The result of an edit that was written.
fn edited(cwd: &Path, path: &Path, input: &NotebookEditInput, message: String) -> ToolOutput {
    ToolOutput {
        content: format!("{message} in {}.", walk::display_path(cwd, path)),
        data: Some(
            json!({"path": path, "edit_mode": format!("{:?}", input.edit_mode.unwrap_or_default()).to_lowercase()}),
        ),
        changed_files: true,
        ..ToolOutput::default()
    }
}

/// The index of the cell `id` names: its `id`, else `cell-N`.
fn find_cell(cells: &[Value], id: &str) -> Result<usize, String> {
    if let Some(i) = cells
        .iter()
        .position(|c| c.get("id").and_then(Value::as_str) == Some(id))
    {
        return Ok(i);
    }
    if let Some(i) = id
        .strip_prefix("cell-")
        .and_then(|n| n.parse::<usize>().ok())
        .filter(|i| *i < cells.len())
    {
        return Ok(i);
    }
    let known: Vec<String> = cells
        .iter()
        .enumerate()
        .map(|(i, c)| cell_label(c, i))
        .collect();
    Err(format!(
        "no cell has the id {id:?}; its cells are {} (Read the notebook to see them)",
        if known.is_empty() {
            "none".to_string()
        } else {
            known.join(", ")
        }
    ))
}

/// A cell's id as `Read` shows it: its own, else `cell-N`.
fn cell_label(cell: &Value, index: usize) -> String {
    cell.get("id")
        .and_then(Value::as_str)
        .map_or_else(|| format!("cell-{index}"), str::to_string)
}

/// Source text as nbformat stores it: a list of lines, each but the last
/// keeping its `\n`.
fn source_lines(source: &str) -> Value {
    Value::Array(
        source
            .split_inclusive('\n')
            .map(|l| Value::String(l.to_string()))
            .collect(),
    )
}

/// Whether the notebook's cells carry ids (nbformat 4.5 and later).
fn has_ids(nb: &Value) -> bool {
    let major = nb.get("nbformat").and_then(Value::as_u64).unwrap_or(4);
    let minor = nb
        .get("nbformat_minor")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    major > 4 || minor >= 5
}

/// An id no cell of `cells` has.
fn new_id(cells: &[Value]) -> String {
    (cells.len()..)
        .map(|n| format!("kaji-{n}"))
        .find(|id| {
            !cells
                .iter()
                .any(|c| c.get("id").and_then(Value::as_str) == Some(id))
        })
        .unwrap_or_else(|| "kaji".into())
}

/// The cell as it is after the edit: source set, type changed if asked,
/// a code cell's outputs cleared.
fn edited_cell(old: &Value, source: &str, kind: Option<CellType>) -> Value {
    let mut cell = old.as_object().cloned().unwrap_or_default();
    let kind = kind.unwrap_or(
        if cell.get("cell_type").and_then(Value::as_str) == Some("markdown") {
            CellType::Markdown
        } else {
            CellType::Code
        },
    );
    cell.insert("cell_type".into(), json!(kind.as_str()));
    cell.insert("source".into(), source_lines(source));
    match kind {
        CellType::Code => {
            cell.insert("execution_count".into(), Value::Null);
            cell.insert("outputs".into(), json!([]));
        }
        CellType::Markdown => {
            cell.remove("execution_count");
            cell.remove("outputs");
        }
    }
    cell.entry("metadata").or_insert_with(|| json!({}));
    // Keys in nbformat's order (sorted), whatever order the map keeps
    // (serde_json's `preserve_order` is on when the workspace is built
    // together: the ACP crates ask for it).
    let sorted: std::collections::BTreeMap<String, Value> = cell.into_iter().collect();
    Value::Object(sorted.into_iter().collect())
}

fn new_cell(nb: &Value, cells: &[Value], source: &str, kind: CellType) -> Value {
    let mut cell = Map::new();
    if has_ids(nb) {
        cell.insert("id".into(), json!(new_id(cells)));
    }
    cell.insert("metadata".into(), json!({}));
    edited_cell(&Value::Object(cell), source, Some(kind))
}

/// The edited notebook text and what was done.
fn apply(nb: &Value, text: &str, input: &NotebookEditInput) -> Result<(String, String), String> {
    let cells = nb["cells"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    let spans = Spans::scan(text).ok_or("its `cells` list could not be located in the text")?;
    if spans.cells.len() != cells.len() {
        return Err("its `cells` list could not be located in the text".into());
    }
    let mode = input.edit_mode.unwrap_or_default();
    let target = input.cell_id.as_deref().filter(|s| !s.trim().is_empty());
    let layout = Layout::of(text, &spans);
    match mode {
        EditMode::Replace | EditMode::Delete => {
            let id = target.ok_or_else(|| {
                format!(
                    "edit_mode={} needs cell_id (Read the notebook to see the ids)",
                    if mode == EditMode::Delete {
                        "delete"
                    } else {
                        "replace"
                    }
                )
            })?;
            let i = find_cell(cells, id)?;
            let label = cell_label(&cells[i], i);
            if mode == EditMode::Delete {
                let (start, end) = spans.removal(i);
                let out = format!("{}{}", &text[..start], &text[end..]);
                return Ok((out, format!("Deleted cell {label}")));
            }
            let cell = edited_cell(&cells[i], &input.new_source, input.cell_type);
            let (start, end) = spans.cells[i];
            let body = layout.render(&cell);
            let kind = cell["cell_type"].as_str().unwrap_or("code");
            let out = format!("{}{body}{}", &text[..start], &text[end..]);
            Ok((out, format!("Replaced the source of {kind} cell {label}")))
        }
        EditMode::Insert => {
            let kind = input
                .cell_type
                .ok_or("edit_mode=insert needs cell_type (code or markdown) for the new cell")?;
            let after = target.map(|id| find_cell(cells, id)).transpose()?;
            let cell = new_cell(nb, cells, &input.new_source, kind);
            let label = cell_label(&cell, after.map_or(0, |i| i + 1));
            let body = layout.render(&cell);
            let ind = &layout.cell_indent;
            let nl = if layout.unit.is_empty() { "" } else { "\n" };
            let (at, piece) = match (after, spans.cells.first()) {
                (Some(i), _) => (spans.cells[i].1, format!(",{nl}{ind}{body}")),
                (None, Some(_)) => (spans.open + 1, format!("{nl}{ind}{body},")),
                (None, None) => {
                    let close = &layout.array_indent;
                    // `[]` (or `[ ]`): the new cell replaces what is inside.
                    let out = format!(
                        "{}{nl}{ind}{body}{nl}{close}{}",
                        &text[..=spans.open],
                        &text[spans.close..]
                    );
                    return Ok((out, format!("Inserted {} cell {label}", kind.as_str())));
                }
            };
            let out = format!("{}{piece}{}", &text[..at], &text[at..]);
            let place = after.map_or_else(
                || "at the beginning".to_string(),
                |i| format!("after cell {}", cell_label(&cells[i], i)),
            );
            Ok((
                out,
                format!("Inserted {} cell {label} {place}", kind.as_str()),
            ))
        }
    }
}

/// Where the `cells` array and each cell are in the text (byte offsets:
/// `open` of `[`, `close` of `]`, each cell from its `{` to after its `}`).
struct Spans {
    open: usize,
    close: usize,
    cells: Vec<(usize, usize)>,
}

impl Spans {
    /// Finds them in a text that parsed as JSON.
    fn scan(text: &str) -> Option<Self> {
        let b = text.as_bytes();
        let mut i = skip_ws(b, 0);
        if b.get(i) != Some(&b'{') {
            return None;
        }
        i += 1;
        loop {
            i = skip_ws(b, i);
            if b.get(i) == Some(&b'}') {
                return None;
            }
            let key_end = skip_value(b, i)?;
            let key: String = serde_json::from_str(&text[i..key_end]).ok()?;
            i = skip_ws(b, key_end);
            if b.get(i) != Some(&b':') {
                return None;
            }
            i = skip_ws(b, i + 1);
            if key == "cells" && b.get(i) == Some(&b'[') {
                return Self::cells(b, i);
            }
            i = skip_ws(b, skip_value(b, i)?);
            if b.get(i) != Some(&b',') {
                return None;
            }
            i += 1;
        }
    }

    fn cells(b: &[u8], open: usize) -> Option<Self> {
        let mut cells = Vec::new();
        let mut i = skip_ws(b, open + 1);
        if b.get(i) == Some(&b']') {
            return Some(Self {
                open,
                close: i,
                cells,
            });
        }
        loop {
            let end = skip_value(b, i)?;
            cells.push((i, end));
            i = skip_ws(b, end);
            match b.get(i) {
                Some(b',') => i = skip_ws(b, i + 1),
                Some(b']') => {
                    return Some(Self {
                        open,
                        close: i,
                        cells,
                    });
                }
                _ => return None,
            }
        }
    }

    /// The bytes to cut to delete cell `i` with its separator.
    fn removal(&self, i: usize) -> (usize, usize) {
        match (self.cells.get(i + 1), i.checked_sub(1)) {
            (Some(next), _) => (self.cells[i].0, next.0),
            (None, Some(prev)) => (self.cells[prev].1, self.cells[i].1),
            (None, None) => (self.open + 1, self.close),
        }
    }
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while b.get(i).is_some_and(u8::is_ascii_whitespace) {
        i += 1;
    }
    i
}

/// The end of the JSON value starting at `i` (valid JSON assumed).
fn skip_value(b: &[u8], i: usize) -> Option<usize> {
    match b.get(i)? {
        b'"' => {
            let mut j = i + 1;
            loop {
                match b.get(j)? {
                    b'\\' => j += 2,
                    b'"' => return Some(j + 1),
                    _ => j += 1,
                }
            }
        }
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut j = i;
            loop {
                match b.get(j)? {
                    b'"' => {
                        j = skip_value(b, j)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(j + 1);
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
        }
        _ => {
            let mut j = i;
            while b
                .get(j)
                .is_some_and(|c| !matches!(c, b',' | b'}' | b']') && !c.is_ascii_whitespace())
            {
                j += 1;
            }
            Some(j)
        }
    }
}

/// How the file is indented: one level, a cell's indentation and the
/// `cells` array's closing bracket's.
struct Layout {
    unit: String,
    cell_indent: String,
    array_indent: String,
}

impl Layout {
    fn of(text: &str, spans: &Spans) -> Self {
        let indent_before = |at: usize| -> String {
            let line_start = text[..at].rfind('\n').map_or(0, |n| n + 1);
            text[line_start..at]
                .chars()
                .take_while(|c| *c == ' ' || *c == '\t')
                .collect()
        };
        // One level: the indentation of the first key of the top object.
        let first_key = text.find('"').unwrap_or(0);
        let unit = if text[..first_key].contains('\n') {
            indent_before(first_key)
        } else {
            String::new()
        };
        let array_indent =
            indent_before(text[..spans.open].rfind("\"cells\"").unwrap_or(spans.open));
        let cell_indent = match spans.cells.first() {
            Some((start, _)) => indent_before(*start),
            None => format!("{array_indent}{unit}"),
        };
        Self {
            unit,
            cell_indent,
            array_indent,
        }
    }

    /// A cell's JSON in this layout, its first line unindented.
    fn render(&self, cell: &Value) -> String {
        if self.unit.is_empty() {
            return cell.to_string();
        }
        let mut buf = Vec::new();
        let fmt = serde_json::ser::PrettyFormatter::with_indent(self.unit.as_bytes());
        let mut ser = serde_json::Serializer::with_formatter(&mut buf, fmt);
        if serde::Serialize::serialize(cell, &mut ser).is_err() {
            return cell.to_string();
        }
        let pretty = String::from_utf8(buf).unwrap_or_default();
        pretty
            .lines()
            .enumerate()
            .map(|(n, l)| {
                if n == 0 {
                    l.to_string()
                } else {
                    format!("{}{l}", self.cell_indent)
                }
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// A notebook as `Read` shows it.
pub(super) fn render_for_read(
    tool: &str,
    cwd: &Path,
    path: &Path,
) -> Result<ToolOutput, ToolError> {
    let ignore = super::kajiignore::KajiIgnore::load(cwd);
    if let Some(rule) = ignore.excluded(path, false) {
        return Err(failure(
            tool,
            format!(
                "{} is excluded by {rule}; kaji's tools may not read it. Do not try to reach it another way.",
                path.display()
            ),
        ));
    }
    let (_, text) = read_notebook(tool, cwd, path)?;
    let nb = parse(tool, path, &text)?;
    let cells = nb["cells"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    let language = nb
        .pointer("/metadata/kernelspec/language")
        .or_else(|| nb.pointer("/metadata/language_info/name"))
        .and_then(Value::as_str)
        .unwrap_or("unknown");
    let mut out = format!(
        "{}: Jupyter notebook, {} cells, language {language}. Cell ids are what NotebookEdit's cell_id takes.\n\n",
        path.display(),
        cells.len()
    );
    let mut images = Vec::new();
    for (i, cell) in cells.iter().enumerate() {
        render_cell(cell, i, &mut out, &mut images);
    }
    Ok(ToolOutput {
        content: out,
        data: Some(
            json!({"path": path, "kind": "notebook", "cells": cells.len(), "images": images.len()}),
        ),
        images,
        ..ToolOutput::default()
    })
}

/// A string or a list of strings, joined (nbformat's multiline strings).
fn multiline(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts.iter().filter_map(Value::as_str).collect(),
        _ => String::new(),
    }
}

fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' && chars.peek() == Some(&'[') {
            chars.next();
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn render_cell(cell: &Value, i: usize, out: &mut String, images: &mut Vec<crate::ToolImage>) {
    use std::fmt::Write as _;
    let kind = cell.get("cell_type").and_then(Value::as_str).unwrap_or("?");
    let label = cell_label(cell, i);
    let count = match cell.get("execution_count") {
        Some(Value::Number(n)) => format!(" execution_count=\"{n}\""),
        _ => String::new(),
    };
    let source = multiline(cell.get("source"));
    let _ = writeln!(
        out,
        "<cell id=\"{label}\" type=\"{kind}\"{count}>\n{}\n</cell>",
        source.trim_end_matches('\n')
    );
    let outputs = cell.get("outputs").and_then(Value::as_array);
    let mut text = String::new();
    for o in outputs.into_iter().flatten() {
        match o.get("output_type").and_then(Value::as_str).unwrap_or("") {
            "stream" => text.push_str(&multiline(o.get("text"))),
            "error" => {
                let trace: Vec<String> = o
                    .get("traceback")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .map(strip_ansi)
                    .collect();
                if trace.is_empty() {
                    let name = o.get("ename").and_then(Value::as_str).unwrap_or("Error");
                    let value = o.get("evalue").and_then(Value::as_str).unwrap_or("");
                    let _ = writeln!(text, "{name}: {value}");
                } else {
                    text.push_str(&trace.join("\n"));
                    text.push('\n');
                }
            }
            _ => {
                let data = o.get("data");
                let mut shown = false;
                for mime in ["image/png", "image/jpeg", "image/gif", "image/webp"] {
                    let b64: String = multiline(data.and_then(|d| d.get(mime)))
                        .chars()
                        .filter(|c| !c.is_whitespace())
                        .collect();
                    if b64.is_empty() {
                        continue;
                    }
                    shown = true;
                    match crate::validate_image(mime, &b64) {
                        Ok((w, h)) => {
                            let _ = writeln!(text, "[{mime} image, {w}x{h}, attached below]");
                            images.push(crate::ToolImage {
                                media_type: mime.to_string(),
                                data: b64,
                            });
                        }
                        Err(why) => {
                            let _ = writeln!(text, "[an image output left out: {why}]");
                        }
                    }
                }
                let plain = multiline(data.and_then(|d| d.get("text/plain")));
                if !plain.is_empty() && !shown {
                    text.push_str(&plain);
                    text.push('\n');
                } else if !shown && data.is_some_and(|d| d.get("text/html").is_some()) {
                    text.push_str("[HTML output]\n");
                }
            }
        }
    }
    if text.trim().is_empty() {
        return;
    }
    let total = text.chars().count();
    let shown: String = text.chars().take(MAX_OUTPUT_CHARS).collect();
    let _ = write!(out, "<output cell=\"{label}\">\n{}", shown.trim_end());
    if total > MAX_OUTPUT_CHARS {
        let _ = write!(
            out,
            "\n[… {} more characters of output]",
            total - MAX_OUTPUT_CHARS
        );
    }
    out.push_str("\n</output>\n");
}
