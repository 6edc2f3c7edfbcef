//! Team tools: `TaskClaim` (take work from the shared task list through the
//! store's claim: list lock, task lock, availability checks, the caller's
//! agent name as owner) and `SendMessage` (a message to a teammate or the
//! lead through the durable mailbox beside the list, delivered at the
//! recipient's next model request). The completion notices the list sends
//! when a task is completed, and the lead's name, are `team_mail.rs`'s
//! (re-exported here).
//!
//! These tools never edit a task but through the store, and never deliver
//! a message themselves.

use std::sync::Arc;

use async_trait::async_trait;
use kaji_protocol::ToolSpec;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::task_list_tools::{TaskIdInput, blocking, shared_task, store_of};
pub use crate::team_mail::{LEAD, notify_completion};
use crate::{
    Tool, ToolAccess, ToolContext, ToolError, ToolOutput, ToolRegistry, parse_input, require_text,
};

/// Adds `TaskClaim` and `SendMessage` to `registry`.
pub(crate) fn register(registry: &mut ToolRegistry) {
    registry.register(Arc::new(TaskClaimTool));
    registry.register(Arc::new(SendMessageTool));
}

/// The `TaskClaim` tool.
#[derive(Debug, Clone, Copy)]
struct TaskClaimTool;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct TaskClaimInput {
    /// The task to claim; leave out to claim the next available one.
    #[serde(default, rename = "taskId")]
    #[schemars(with = "Option<String>")]
    task_id: Option<TaskIdInput>,
}

#[async_trait]
impl Tool for TaskClaimTool {
    fn name(&self) -> &'static str {
        "TaskClaim"
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name().to_string(),
            description: "Claims a task of the shared task list for you: it becomes yours and \
in_progress, only if it is available (pending, no owner, every blocker completed); two agents \
never both get it. Without taskId it claims the next available task (lowest id). Claiming is the \
way to take work; complete it with TaskUpdate status completed."
                .to_string(),
            input_schema: crate::schema::input_schema::<TaskClaimInput>(),
        }
    }

    fn title(&self, input: &Value) -> String {
        crate::title_with("TaskClaim", input, "taskId")
    }

    fn is_read_only(&self) -> bool {
        false
    }

    fn access(&self, _input: &Value, _ctx: &ToolContext) -> ToolAccess {
        ToolAccess::SessionState
    }

    async fn access_checked(&self, input: &Value, ctx: &ToolContext) -> ToolAccess {
        // Claiming takes a task nobody holds: a change of the shared list.
        match serde_json::from_value::<TaskClaimInput>(input.clone()) {
            Ok(TaskClaimInput { task_id: Some(id) }) => shared_task(&id, ctx).await,
            _ => ToolAccess::SharedTask { task_id: None },
        }
    }

    async fn call(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let input: TaskClaimInput = parse_input(self.name(), input)?;
        let id = match &input.task_id {
            Some(id) => Some(id.parse(self.name(), "taskId")?),
            None => None,
        };
        let store = store_of(ctx)?;
        let owner = ctx.owner.clone();
        let claimed = blocking(async {
            match id {
                Some(id) => store.claim(id, &owner).await.map(Some),
                None => store.claim_next(&owner).await,
            }
        })
        .await?;
        let Some(task) = claimed else {
            return Ok(ToolOutput {
                content: "No task is available to claim now (every open task is claimed or \
                          blocked). Wait for a notice, or stop if the work is done."
                    .to_string(),
                data: Some(json!({"claimed": null})),
                ..ToolOutput::default()
            });
        };
        let mut content = format!(
            "Claimed task #{} for {}: {}",
            task.id, ctx.owner, task.subject
        );
        if !task.description.trim().is_empty() {
            content.push_str(&format!("\n\n{}", task.description));
        }
        Ok(ToolOutput {
            content,
            data: Some(json!({"claimed": task.id, "owner": task.owner})),
            ..ToolOutput::default()
        })
    }
}

/// The `SendMessage` tool.
#[derive(Debug, Clone, Copy)]
struct SendMessageTool;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SendMessageInput {
    /// The recipient: a teammate's name, or main (the lead).
    to: String,
    /// What to tell them.
    message: String,
}

#[async_trait]
impl Tool for SendMessageTool {
    fn name(&self) -> &'static str {
        "SendMessage"
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name().to_string(),
            description: "Sends a message to a teammate (by name) or to the lead (\"main\" or \
\"lead\"). It is kept in the team's durable mailbox and reaches the recipient at its next request."
                .to_string(),
            input_schema: crate::schema::input_schema::<SendMessageInput>(),
        }
    }

    fn is_read_only(&self) -> bool {
        false
    }

    fn access(&self, _input: &Value, _ctx: &ToolContext) -> ToolAccess {
        ToolAccess::SessionState
    }

    async fn call(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let input: SendMessageInput = parse_input(self.name(), input)?;
        require_text(self.name(), "to", &input.to, "name a teammate or main")?;
        require_text(self.name(), "message", &input.message, "say something")?;
        let to = match input.to.trim() {
            "lead" => LEAD.to_string(),
            other => other.to_string(),
        };
        let store = store_of(ctx)?;
        let from = ctx.agent.clone();
        let recipient = to.clone();
        blocking(store.post_message(&from, &recipient, &input.message)).await?;
        Ok(ToolOutput {
            content: format!("Message sent to {to}; it reaches them at their next request."),
            data: Some(json!({"to": to})),
            ..ToolOutput::default()
        })
    }
}
