//! `Write`: creates a file or replaces its whole content.
//!
//! Parent directories are created. An existing file is replaced atomically
//! and keeps its permission bits; writing through a symlink updates the
//! link's target and leaves the link in place.

use std::path::PathBuf;

use async_trait::async_trait;
use kaji_protocol::ToolSpec;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{atomic, diff, failure, paths, target, walk};
use crate::{Tool, ToolAccess, ToolContext, ToolError, ToolOutput, parse_input};

const NAME: &str = "Write";

/// Old content larger than this is not diffed for front ends.
const MAX_DIFF_BYTES: u64 = 1024 * 1024;

/// The `Write` tool.
pub(super) struct WriteTool;

#[derive(Debug, Deserialize, JsonSchema)]
struct WriteInput {
    /// Path of the file to write, absolute or relative to the working directory.
    file_path: String,
    /// The complete new content of the file.
    content: String,
}

#[async_trait]
impl Tool for WriteTool {
    fn hook_response(&self, input: &Value, output: &ToolOutput) -> Value {
        let data = output.data.as_ref();
        let created = data.and_then(|d| d.get("action")).and_then(Value::as_str) == Some("created");
        serde_json::json!({
            "type": if created { "create" } else { "update" },
            "filePath": data.and_then(|d| d.get("path")).cloned().unwrap_or(Value::Null),
            "content": input.get("content").cloned().unwrap_or(Value::Null),
            "structuredPatch": [],
        })
    }

    fn name(&self) -> &'static str {
        NAME
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: NAME.to_string(),
            description:
                "Writes a file with exactly the given content, creating it (and any missing parent \
directories) or replacing everything it held.\n\
- file_path: absolute, or relative to the working directory.\n\
- To change part of an existing file, prefer Edit: it sends only the change. Read an existing file \
before replacing it, so nothing in it is lost by accident.\n\
- The result says whether the file was created or overwritten and how many lines it now has."
                    .to_string(),
            input_schema: crate::schema::input_schema::<WriteInput>(),
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

    fn change(&self, input: &Value) -> Option<crate::FileChange> {
        let text = |k: &str| input.get(k).and_then(Value::as_str);
        Some(crate::FileChange {
            path: text("file_path")?.into(),
            old_text: None,
            new_text: text("content")?.to_string(),
        })
    }

    fn preview(&self, input: &Value, ctx: &ToolContext) -> Option<String> {
        let input: WriteInput = serde_json::from_value(input.clone()).ok()?;
        let old = std::fs::read_to_string(ctx.resolve(&input.file_path)).unwrap_or_default();
        Some(diff::unified(&old, &input.content, &input.file_path))
    }

    fn is_read_only(&self) -> bool {
        false
    }

    fn access(&self, input: &Value, ctx: &ToolContext) -> ToolAccess {
        paths::file_write_access(input, ctx)
    }

    async fn call(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let input: WriteInput = parse_input(NAME, input)?;
        crate::require_text(
            NAME,
            "file_path",
            &input.file_path,
            "give the path of the file to write",
        )?;
        let path = paths::resolve(ctx, &input.file_path);
        let cwd = paths::cwd(ctx);
        match ctx.services.files.clone().filter(|f| f.writes_text()) {
            None => blocking(move || write(&cwd, path, &input.content)).await,
            Some(files) => {
                write_through(cwd, path, input.content, files.as_ref(), &ctx.cancel).await
            }
        }
    }
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, ToolError> + Send + 'static,
) -> Result<T, ToolError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| failure(NAME, format!("the write stopped unexpectedly: {e}")))?
}

/// A file about to be written, checked.
struct Prepared {
    /// The path as the model gave it, absolute.
    path: PathBuf,
    /// Where the bytes go (symlinks followed).
    real: PathBuf,
    /// The path as shown in diffs.
    label: String,
    /// Whether the file exists.
    existed: bool,
    /// Its text, when it exists, is text and is small enough to diff.
    old: Option<String>,
}

/// The checks (`.kajiignore`, the kind of file), the old text for the
/// diff, the parent directories.
fn prepare(cwd: &std::path::Path, path: PathBuf) -> Result<Prepared, ToolError> {
    let label = walk::display_path(cwd, &path);
    let target = target::prepare(NAME, cwd, &path)?;
    let old = match &target.existing {
        Some(meta) if meta.len() <= MAX_DIFF_BYTES => std::fs::read(&target.real)
            .ok()
            .and_then(|b| String::from_utf8(b).ok()),
        _ => None,
    };
    target::create_parents(NAME, &target.real)?;
    Ok(Prepared {
        path,
        real: target.real,
        label,
        existed: target.existing.is_some(),
        old,
    })
}

/// A write to the local disk.
fn write(cwd: &std::path::Path, path: PathBuf, content: &str) -> Result<ToolOutput, ToolError> {
    let mut p = prepare(cwd, path)?;
    p.existed = atomic::write_file(&p.real, content.as_bytes())
        .map_err(|e| failure(NAME, format!("cannot write {}: {e}", p.path.display())))?;
    Ok(output(&p, content))
}

/// A write through a [`crate::FileAccess`]: the same checks on the disk;
/// the old text (for the diff) is the one its owner holds.
async fn write_through(
    cwd: PathBuf,
    path: PathBuf,
    content: String,
    files: &dyn crate::FileAccess,
    cancel: &tokio_util::sync::CancellationToken,
) -> Result<ToolOutput, ToolError> {
    let mut p = blocking(move || prepare(&cwd, path)).await?;
    let io = async {
        if p.existed
            && files.reads_text()
            && let Ok(old) = files.read_text(&p.real).await
            && old.len() as u64 <= MAX_DIFF_BYTES
        {
            p.old = Some(old);
        }
        files.write_text(&p.real, &content).await
    };
    tokio::select! {
        r = io => r.map_err(|e| failure(NAME, format!("cannot write {}: {e}", p.path.display())))?,
        () = cancel.cancelled() => return Err(ToolError::Cancelled),
    }
    Ok(output(&p, &content))
}

fn output(p: &Prepared, content: &str) -> ToolOutput {
    let shown = p.path.display().to_string();
    let (old, existed) = (&p.old, p.existed);
    let lines = target::count_lines(content);
    let bytes = content.len();
    let (message, action) = if existed {
        let was = old
            .as_deref()
            .map(|o| format!("; it had {} lines before", target::count_lines(o)))
            .unwrap_or_default();
        (
            format!("Overwrote {shown} ({lines} lines, {bytes} bytes{was})."),
            "overwritten",
        )
    } else {
        (
            format!("Created {shown} ({lines} lines, {bytes} bytes)."),
            "created",
        )
    };
    let diff = match (old, existed) {
        (Some(old), true) => Some(diff::unified(old, content, &p.label)),
        (_, false) => Some(diff::unified("", content, &p.label)),
        _ => None,
    };
    ToolOutput {
        content: message,
        update: None,
        data: Some(json!({
            "path": p.path,
            "action": action,
            "lines": lines,
            "bytes": bytes,
            "diff": diff,
        })),
        control: None,
        changed_files: true,
        images: Vec::new(),
    }
}
