//! The language-server side of the tools: the read-only `LSP` tool (Claude
//! Code's name, operations and parameters) and the diagnostics appended
//! to the result of a call that wrote files ([`EditDiagnostics`]).
//!
//! Both use the session's [`kaji_lsp::LspPool`] from the
//! [`ToolContext`]; without one (no session, or servers switched off) the
//! tool says so and edits get nothing appended. Nothing here may fail an
//! edit: diagnostics are a note on a result, never its error.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use kaji_lsp::{FileDiagnostics, LspPool, uri::uri_to_path};
use kaji_protocol::ToolSpec;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::{Tool, ToolContext, ToolError, ToolOutput, ToolRegistry, parse_input};

/// The tool's name.
pub const LSP: &str = "LSP";
/// How long one `LSP` call may take (a server's first start included).
const CALL_LIMIT: Duration = Duration::from_secs(60);
/// The most locations or symbols listed.
const MAX_ITEMS: usize = 100;

/// Adds `LSP` to `registry`.
pub(crate) fn register(registry: &mut ToolRegistry) {
    registry.register(Arc::new(LspTool));
}

/// The `LSP` tool.
struct LspTool;

/// What to ask the file's language server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
enum Operation {
    GoToDefinition,
    FindReferences,
    Hover,
    DocumentSymbol,
    WorkspaceSymbol,
    GoToImplementation,
    PrepareCallHierarchy,
    IncomingCalls,
    OutgoingCalls,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct LspInput {
    /// The operation: goToDefinition, findReferences, hover, documentSymbol, workspaceSymbol (the symbol at the position is the query), goToImplementation, prepareCallHierarchy, incomingCalls or outgoingCalls.
    operation: Operation,
    /// The file, absolute or relative to the working directory.
    #[serde(rename = "filePath")]
    file_path: String,
    /// The line, counted from 1 as editors show it.
    #[schemars(range(min = 1))]
    line: u32,
    /// The column, counted from 1 as editors show it.
    #[schemars(range(min = 1))]
    character: u32,
}

impl Operation {
    fn method(self) -> &'static str {
        match self {
            Self::GoToDefinition => "textDocument/definition",
            Self::FindReferences => "textDocument/references",
            Self::Hover => "textDocument/hover",
            Self::DocumentSymbol => "textDocument/documentSymbol",
            Self::WorkspaceSymbol => "workspace/symbol",
            Self::GoToImplementation => "textDocument/implementation",
            Self::PrepareCallHierarchy | Self::IncomingCalls | Self::OutgoingCalls => {
                "textDocument/prepareCallHierarchy"
            }
        }
    }
}

fn refused(message: impl std::fmt::Display) -> ToolError {
    ToolError::Refused(format!("{LSP}: {message}"))
}

/// The workspace root a file is served in: the working directory or the
/// project when it is under one, else its own directory.
fn root_of(path: &Path, ctx: &ToolContext) -> PathBuf {
    [&ctx.cwd, &ctx.project_dir]
        .into_iter()
        .find(|dir| path.starts_with(dir))
        .cloned()
        .or_else(|| path.parent().map(Path::to_path_buf))
        .unwrap_or_else(|| ctx.cwd.clone())
}

/// A file's text, through the session's file access when it has one.
async fn read_text(path: &Path, ctx: &ToolContext) -> Option<String> {
    match ctx.services.files.as_ref().filter(|f| f.reads_text()) {
        Some(files) => files.read_text(path).await.ok(),
        None => tokio::fs::read_to_string(path).await.ok(),
    }
}

/// The UTF-16 column of the `character`-th (1-based) character of `line`
/// (1-based) of `text`, as LSP counts positions.
fn position(text: &str, line: u32, character: u32) -> Value {
    let line0 = line.saturating_sub(1);
    let units: usize = text
        .lines()
        .nth(line0 as usize)
        .unwrap_or("")
        .chars()
        .take(character.saturating_sub(1) as usize)
        .map(char::len_utf16)
        .sum();
    json!({"line": line0, "character": units})
}

/// The identifier at a 1-based position (the query of workspaceSymbol).
fn word_at(text: &str, line: u32, character: u32) -> String {
    let chars: Vec<char> = text
        .lines()
        .nth(line.saturating_sub(1) as usize)
        .unwrap_or("")
        .chars()
        .collect();
    let at = (character.saturating_sub(1) as usize).min(chars.len());
    let is_word = |c: &char| c.is_alphanumeric() || *c == '_';
    let start = chars[..at].iter().rev().take_while(|c| is_word(c)).count();
    let end = chars[at..].iter().take_while(|c| is_word(c)).count();
    chars[at - start..at + end].iter().collect()
}

#[async_trait]
impl Tool for LspTool {
    fn name(&self) -> &'static str {
        LSP
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: LSP.to_string(),
            description: "Asks the file's language server (the same ones that check your edits) about code: \
goToDefinition, findReferences, hover (type and documentation), documentSymbol (the file's outline), \
workspaceSymbol (symbols named like the one at the position, across the project), goToImplementation, and the \
call hierarchy (prepareCallHierarchy, incomingCalls, outgoingCalls). Give the file and a position on the \
symbol, line and character counted from 1. Read-only. Fails when no language server serves the file's \
language."
                .to_string(),
            input_schema: crate::schema::input_schema::<LspInput>(),
        }
    }

    fn kind(&self) -> crate::ToolKind {
        crate::ToolKind::Search
    }

    fn title(&self, input: &Value) -> String {
        let op = input.get("operation").and_then(Value::as_str).unwrap_or("");
        match input.get("filePath").and_then(Value::as_str) {
            Some(f) => format!("{LSP}: {op} {f}"),
            None => LSP.to_string(),
        }
    }

    fn files(&self, input: &Value) -> crate::ToolFiles {
        crate::ToolFiles::read(input.get("filePath").and_then(Value::as_str))
    }

    fn is_read_only(&self) -> bool {
        true
    }

    async fn call(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let input: LspInput = parse_input(LSP, input)?;
        let pool = ctx
            .services
            .lsp
            .as_ref()
            .ok_or_else(|| refused("language servers are not available in this session"))?;
        let path = crate::normalize_lexically(&ctx.resolve(&input.file_path));
        let text = read_text(&path, ctx)
            .await
            .ok_or_else(|| refused(format!("{} cannot be read as text", input.file_path)))?;
        let root = root_of(&path, ctx);
        let pos = position(&text, input.line, input.character);
        let params = match input.operation {
            Operation::DocumentSymbol => json!({}),
            Operation::WorkspaceSymbol => {
                json!({"query": word_at(&text, input.line, input.character)})
            }
            Operation::FindReferences => {
                json!({"position": pos, "context": {"includeDeclaration": true}})
            }
            _ => json!({"position": pos}),
        };
        let result = pool
            .request(
                &path,
                &root,
                &text,
                input.operation.method(),
                params,
                CALL_LIMIT,
            )
            .await
            .map_err(refused)?;
        let result = match input.operation {
            Operation::IncomingCalls | Operation::OutgoingCalls => {
                follow_calls(pool, &path, &root, input.operation, result).await?
            }
            _ => result,
        };
        Ok(ToolOutput::text(render(input.operation, &result, &ctx.cwd)))
    }
}

/// incomingCalls/outgoingCalls of the first item prepareCallHierarchy gave.
async fn follow_calls(
    pool: &LspPool,
    path: &Path,
    root: &Path,
    op: Operation,
    prepared: Value,
) -> Result<Value, ToolError> {
    let Some(item) = prepared.as_array().and_then(|a| a.first()).cloned() else {
        return Ok(Value::Array(Vec::new()));
    };
    let method = if op == Operation::IncomingCalls {
        "callHierarchy/incomingCalls"
    } else {
        "callHierarchy/outgoingCalls"
    };
    pool.follow_up(path, root, method, json!({"item": item}), CALL_LIMIT)
        .await
        .map_err(refused)
}

/// A path for the model: relative to `cwd` when under it.
fn shown(uri: &str, cwd: &Path) -> String {
    let Some(path) = uri_to_path(uri) else {
        return uri.to_string();
    };
    path.strip_prefix(cwd)
        .unwrap_or(&path)
        .display()
        .to_string()
}

/// `path:line:col` of an LSP `Location` or `LocationLink`.
fn location(v: &Value, cwd: &Path) -> Option<String> {
    let uri = v.get("uri").or_else(|| v.get("targetUri"))?.as_str()?;
    let range = v.get("range").or_else(|| v.get("targetSelectionRange"))?;
    let line = range.pointer("/start/line")?.as_u64()? + 1;
    let col = range.pointer("/start/character")?.as_u64()? + 1;
    Some(format!("{}:{line}:{col}", shown(uri, cwd)))
}

fn as_list(v: &Value) -> Vec<Value> {
    match v {
        Value::Array(a) => a.clone(),
        Value::Null => Vec::new(),
        other => vec![other.clone()],
    }
}

fn symbol_kind(n: u64) -> &'static str {
    const KINDS: [&str; 26] = [
        "file",
        "module",
        "namespace",
        "package",
        "class",
        "method",
        "property",
        "field",
        "constructor",
        "enum",
        "interface",
        "function",
        "variable",
        "constant",
        "string",
        "number",
        "boolean",
        "array",
        "object",
        "key",
        "null",
        "enum member",
        "struct",
        "event",
        "operator",
        "type parameter",
    ];
    KINDS
        .get((n as usize).wrapping_sub(1))
        .copied()
        .unwrap_or("symbol")
}

/// The server's answer as lines for the model.
fn render(op: Operation, result: &Value, cwd: &Path) -> String {
    let mut out = String::new();
    match op {
        Operation::Hover => {
            out = hover_text(result.get("contents").unwrap_or(&Value::Null));
        }
        Operation::DocumentSymbol => symbols(&as_list(result), 0, cwd, &mut out),
        Operation::WorkspaceSymbol => symbols(&as_list(result), 0, cwd, &mut out),
        Operation::PrepareCallHierarchy => call_items(&as_list(result), None, cwd, &mut out),
        Operation::IncomingCalls => call_items(&as_list(result), Some("from"), cwd, &mut out),
        Operation::OutgoingCalls => call_items(&as_list(result), Some("to"), cwd, &mut out),
        _ => {
            let list = as_list(result);
            for loc in list.iter().take(MAX_ITEMS).filter_map(|l| location(l, cwd)) {
                let _ = writeln!(out, "{loc}");
            }
            if list.len() > MAX_ITEMS {
                let _ = writeln!(out, "… and {} more", list.len() - MAX_ITEMS);
            }
        }
    }
    let out = out.trim_end().to_string();
    if out.is_empty() {
        "No results.".to_string()
    } else {
        out
    }
}

fn hover_text(contents: &Value) -> String {
    match contents {
        Value::String(s) => s.clone(),
        Value::Array(a) => a.iter().map(hover_text).collect::<Vec<_>>().join("\n"),
        Value::Object(o) => o
            .get("value")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        _ => String::new(),
    }
}

fn symbols(list: &[Value], depth: usize, cwd: &Path, out: &mut String) {
    for s in list.iter().take(MAX_ITEMS) {
        let name = s.get("name").and_then(Value::as_str).unwrap_or("?");
        let kind = symbol_kind(s.get("kind").and_then(Value::as_u64).unwrap_or(0));
        let place = match s.get("location") {
            Some(loc) => location(loc, cwd).unwrap_or_default(),
            None => s
                .pointer("/selectionRange/start/line")
                .and_then(Value::as_u64)
                .map(|l| format!("line {}", l + 1))
                .unwrap_or_default(),
        };
        let _ = writeln!(out, "{}{name} ({kind}) {place}", "  ".repeat(depth));
        if let Some(children) = s.get("children").and_then(Value::as_array) {
            symbols(children, depth + 1, cwd, out);
        }
    }
}

fn call_items(list: &[Value], key: Option<&str>, cwd: &Path, out: &mut String) {
    for entry in list.iter().take(MAX_ITEMS) {
        let item = key.and_then(|k| entry.get(k)).unwrap_or(entry);
        let name = item.get("name").and_then(Value::as_str).unwrap_or("?");
        let kind = symbol_kind(item.get("kind").and_then(Value::as_u64).unwrap_or(0));
        let place = item
            .get("uri")
            .and_then(|uri| {
                location(
                    &json!({"uri": uri, "range": item.get("selectionRange")}),
                    cwd,
                )
            })
            .unwrap_or_default();
        let _ = writeln!(out, "{name} ({kind}) {place}");
    }
}

/// The diagnostics baseline of a call that writes files, taken before it
/// runs; [`EditDiagnostics::after`] says what the call introduced.
#[derive(Debug)]
pub struct EditDiagnostics {
    files: Vec<(String, PathBuf, PathBuf, FileDiagnostics)>,
}

impl EditDiagnostics {
    /// The baseline of every file `tool` says this call writes that a
    /// language server serves; `None` when there is none (or no pool).
    pub async fn before(tool: &dyn Tool, input: &Value, ctx: &ToolContext) -> Option<Self> {
        let pool = ctx.services.lsp.as_ref()?;
        let mut files = Vec::new();
        for shown in tool.files(input).writes {
            let path = crate::normalize_lexically(&ctx.resolve(&shown));
            if pool.serves(&path).is_none() {
                continue;
            }
            let root = root_of(&path, ctx);
            let baseline = match read_text(&path, ctx).await {
                Some(text) => pool.diagnostics(&path, &root, &text).await,
                // A new file had nothing wrong with it.
                None if !path.exists() => FileDiagnostics::Ready {
                    server: String::new(),
                    diagnostics: Vec::new(),
                },
                None => continue,
            };
            files.push((shown, path, root, baseline));
        }
        (!files.is_empty()).then_some(Self { files })
    }

    /// What to append to the call's result: the diagnostics the call
    /// introduced, or why there are none to give; empty when it
    /// introduced none.
    pub async fn after(self, ctx: &ToolContext) -> String {
        let Some(pool) = ctx.services.lsp.as_ref() else {
            return String::new();
        };
        let mut out = String::new();
        for (shown, path, root, baseline) in self.files {
            let Some(text) = read_text(&path, ctx).await else {
                continue;
            };
            let note = match (pool.diagnostics(&path, &root, &text).await, baseline) {
                (FileDiagnostics::NoServer, _) => continue,
                (FileDiagnostics::Unavailable { server, reason }, _) => {
                    format!("LSP diagnostics for {shown} are unavailable ({server}: {reason}).")
                }
                (
                    FileDiagnostics::Ready {
                        server,
                        diagnostics,
                    },
                    FileDiagnostics::Ready {
                        diagnostics: before,
                        ..
                    },
                ) => {
                    let new = kaji_lsp::introduced(&before, &diagnostics);
                    if new.is_empty() {
                        continue;
                    }
                    format!(
                        "This edit introduced diagnostics ({server}):\n{}",
                        kaji_lsp::report(&shown, &new)
                    )
                }
                (
                    FileDiagnostics::Ready {
                        server,
                        diagnostics,
                    },
                    _,
                ) => {
                    let all = kaji_lsp::introduced(&[], &diagnostics);
                    if all.is_empty() {
                        continue;
                    }
                    format!(
                        "Diagnostics of {shown} after this edit ({server}; none were available before it, so some may be older):\n{}",
                        kaji_lsp::report(&shown, &all)
                    )
                }
            };
            out.push_str("\n\n");
            out.push_str(&note);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_count_utf16_and_words() {
        let text = "x = 1\nnäme😀 = foo_bar(x)\n";
        // n, ä, m, e: one unit each; 😀 two; the space one.
        assert_eq!(position(text, 2, 7), json!({"line": 1, "character": 7}));
        assert_eq!(word_at(text, 2, 12), "foo_bar");
        assert_eq!(word_at(text, 9, 1), "");
    }
}
