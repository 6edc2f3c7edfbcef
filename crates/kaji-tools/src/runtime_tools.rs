//! `TaskOutput` and `TaskStop`: the model's handles on runtime tasks
//! (background shells started by `Bash` with `run_in_background`).
//!
//! Both go through the session's
//! [`RuntimeTaskRegistry`](kaji_tasks::RuntimeTaskRegistry); the reading
//! position of `TaskOutput` belongs to the caller, keyed by
//! [`ToolContext::session_id`], so a sub-agent with its own session id reads
//! independently of the main agent. These tools never touch the task list:
//! an all-digit id is a plan task's and is refused with a message that says
//! so.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use kaji_protocol::ToolSpec;
use kaji_tasks::RuntimeTaskRegistry;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::{Tool, ToolAccess, ToolContext, ToolError, ToolOutput, ToolRegistry, parse_input};

/// Default wait of a blocking `TaskOutput`: 30,000 ms.
pub const DEFAULT_OUTPUT_TIMEOUT_MS: u64 = 30_000;
/// Longest wait a `TaskOutput` call may ask for: 600,000 ms.
pub const MAX_OUTPUT_TIMEOUT_MS: u64 = 600_000;

/// Adds `TaskOutput` and `TaskStop` to `registry`.
pub(crate) fn register(registry: &mut ToolRegistry) {
    registry.register(Arc::new(TaskOutputTool));
    registry.register(Arc::new(TaskStopTool));
}

fn runtime<'a>(tool: &str, ctx: &'a ToolContext) -> Result<&'a RuntimeTaskRegistry, ToolError> {
    ctx.services.runtime.as_deref().ok_or_else(|| {
        ToolError::Refused(format!(
            "{tool}: this session has no runtime tasks (no background commands can run here)"
        ))
    })
}

/// The `TaskOutput` tool.
#[derive(Debug, Clone, Copy)]
struct TaskOutputTool;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct TaskOutputInput {
    /// The runtime task id, e.g. b9x4k2m1p.
    task_id: String,
    /// Wait until the task has ended or the timeout passed (default true); false returns at once.
    #[serde(default)]
    block: Option<bool>,
    /// Longest wait in milliseconds (default 30000, at most 600000).
    #[serde(default, deserialize_with = "crate::bash::deserialize_millis")]
    #[schemars(with = "Option<f64>")]
    timeout: Option<u64>,
}

#[async_trait]
impl Tool for TaskOutputTool {
    fn name(&self) -> &'static str {
        "TaskOutput"
    }

    fn polls(&self) -> bool {
        true
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name().to_string(),
            description:
                "Returns the output a background task (a Bash command with run_in_background, or \
a background Agent's transcript) wrote since your previous TaskOutput call for it, with its status \
and, once it has ended, its exit code. With block (the default) it waits until the task has ended \
or the timeout passes, then returns all the output you have not read; with block false it returns \
at once. A long reply keeps the newest 30000 characters and says where the full output file is. \
Task ids look like b9x4k2m1p; all-digit ids belong to the task list, not to this tool."
                    .to_string(),
            input_schema: crate::schema::input_schema::<TaskOutputInput>(),
        }
    }

    fn kind(&self) -> crate::ToolKind {
        crate::ToolKind::Execute
    }

    fn title(&self, input: &Value) -> String {
        crate::title_with("TaskOutput", input, "task_id")
    }

    fn is_read_only(&self) -> bool {
        true
    }

    fn access(&self, _input: &Value, _ctx: &ToolContext) -> ToolAccess {
        ToolAccess::ReadOnly
    }

    async fn call(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let input: TaskOutputInput = parse_input(self.name(), input)?;
        let timeout_ms = input.timeout.unwrap_or(DEFAULT_OUTPUT_TIMEOUT_MS);
        if timeout_ms > MAX_OUTPUT_TIMEOUT_MS {
            return Err(ToolError::InvalidInput {
                tool: self.name().to_string(),
                message: format!(
                    "timeout {timeout_ms} ms is above the maximum of {MAX_OUTPUT_TIMEOUT_MS} ms"
                ),
            });
        }
        let registry = runtime(self.name(), ctx)?;
        let read = registry.read_since_last(
            &ctx.session_id,
            &input.task_id,
            input.block.unwrap_or(true),
            Duration::from_millis(timeout_ms),
        );
        let read = tokio::select! {
            read = read => read.map_err(|e| ToolError::Refused(format!("TaskOutput: {e}")))?,
            _ = ctx.cancel.cancelled() => return Err(ToolError::Cancelled),
        };
        let task = &read.task;
        Ok(ToolOutput {
            content: read.to_prompt_text(),
            update: None,
            data: Some(json!({
                "task_id": task.id.as_str(),
                "status": task.status.as_str(),
                "exit_code": task.exit_code,
                "output_path": task.output_path,
                "start_offset": read.start_offset,
                "end_offset": read.end_offset,
                "dropped_bytes": read.dropped_bytes,
                "skipped_bytes": read.skipped_bytes,
                "timed_out": read.timed_out,
            })),
            control: None,
            changed_files: false,
            images: Vec::new(),
        })
    }
}

/// The `TaskStop` tool.
#[derive(Debug, Clone, Copy)]
struct TaskStopTool;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct TaskStopInput {
    /// The runtime task id, e.g. b9x4k2m1p.
    task_id: String,
}

#[async_trait]
impl Tool for TaskStopTool {
    fn name(&self) -> &'static str {
        "TaskStop"
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name().to_string(),
            description:
                "Stops a running background task. A Bash command (run_in_background) gets \
SIGTERM to its whole process group, SIGKILL after a grace period, so everything it started stops \
too; a background Agent is cancelled (its model request and its commands) and ends with what it \
had done. Its status becomes killed. Unknown ids, tasks that already ended and task-list (all-digit) \
ids are refused."
                    .to_string(),
            input_schema: crate::schema::input_schema::<TaskStopInput>(),
        }
    }

    fn kind(&self) -> crate::ToolKind {
        crate::ToolKind::Execute
    }

    fn title(&self, input: &Value) -> String {
        crate::title_with("TaskStop", input, "task_id")
    }

    fn is_read_only(&self) -> bool {
        false
    }

    fn access(&self, _input: &Value, _ctx: &ToolContext) -> ToolAccess {
        ToolAccess::SessionState
    }

    async fn call(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let input: TaskStopInput = parse_input(self.name(), input)?;
        let registry = runtime(self.name(), ctx)?;
        // Not raced against cancellation: a stop must finish, or the group
        // would be left half-killed.
        let info = registry
            .stop(&input.task_id)
            .await
            .map_err(|e| ToolError::Refused(format!("TaskStop: {e}")))?;
        let mut content = format!(
            "Stopped background task {} ({}): status {}. {} bytes of output in total; the file is {}.",
            info.id,
            info.description,
            info.status,
            info.output_bytes,
            info.output_path.display()
        );
        if info.task_type.is_agent()
            && let Ok(read) = registry
                .read_since_last(&ctx.session_id, info.id.as_str(), false, Duration::ZERO)
                .await
            && !read.output.is_empty()
        {
            content.push_str("\nWhat it had done (the transcript you had not read):\n");
            content.push_str(&read.text());
        }
        Ok(ToolOutput {
            content,
            update: None,
            data: Some(json!({
                "task_id": info.id.as_str(),
                "status": info.status.as_str(),
                "exit_code": info.exit_code,
                "output_path": info.output_path,
            })),
            control: None,
            changed_files: false,
            images: Vec::new(),
        })
    }
}
