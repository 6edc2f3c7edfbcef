//! `AskUser` and `AttemptCompletion`: the tools through which the model
//! talks to the user or ends the task.
//!
//! Neither does anything itself. Each returns a [`ToolControl`] that the
//! core's executor carries out (asking the user and using the answer as the
//! tool result, or ending the task as completed). They must never block,
//! print or read input here.

use std::sync::Arc;

use async_trait::async_trait;
use kaji_protocol::ToolSpec;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::{
    Tool, ToolAccess, ToolContext, ToolControl, ToolError, ToolOutput, ToolRegistry, parse_input,
};

/// Adds `AskUser` and `AttemptCompletion` to `registry`.
pub(crate) fn register(registry: &mut ToolRegistry) {
    registry.register(Arc::new(AskUserTool));
    registry.register(Arc::new(AttemptCompletionTool));
}

/// The tool through which an agent declares its task done
/// (`AttemptCompletion`): granted to every sub-agent whatever its `tools:`
/// list says, so that it can always finish.
pub fn finishing_tool() -> Arc<dyn Tool> {
    Arc::new(AttemptCompletionTool)
}

const ASK_USER: &str = "AskUser";
const ATTEMPT_COMPLETION: &str = "AttemptCompletion";

/// The `AskUser` tool: a question for the user, answered through the
/// executor.
struct AskUserTool;

#[derive(Debug, Deserialize)]
struct AskUserInput {
    question: String,
    #[serde(default)]
    options: Option<Vec<String>>,
}

#[async_trait]
impl Tool for AskUserTool {
    fn name(&self) -> &'static str {
        ASK_USER
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: ASK_USER.to_string(),
            description: "Asks the user a question and waits for the answer, which comes back as this tool's \
result. Use it when you cannot go on without information only the user has: a choice between \
approaches, a missing detail, a confirmation of intent. Do not use it for things you can find out with \
the other tools (read the code, search, run a command). Ask one clear, specific question; when the likely \
answers are known, list them in options so the user can pick one (they may still answer freely)."
                .to_string(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "question": {
                        "type": "string",
                        "description": "The question to ask, complete and specific."
                    },
                    "options": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": "Suggested answers the user can choose from (2 to 5 short ones work best)."
                    }
                },
                "required": ["question"],
                "additionalProperties": false
            }),
        }
    }

    fn is_read_only(&self) -> bool {
        true
    }

    fn access(&self, _input: &Value, _ctx: &ToolContext) -> ToolAccess {
        ToolAccess::Interaction
    }

    async fn call(&self, input: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let input: AskUserInput = parse_input(ASK_USER, input)?;
        let question = input.question.trim().to_string();
        crate::require_text(
            ASK_USER,
            "question",
            &question,
            "write the question you want the user to answer",
        )?;
        let options: Vec<String> = input
            .options
            .unwrap_or_default()
            .into_iter()
            .map(|o| o.trim().to_string())
            .filter(|o| !o.is_empty())
            .collect();
        Ok(ToolOutput {
            content: format!("Asked the user: {question}"),
            update: None,
            data: Some(json!({"question": question, "options": options})),
            control: Some(ToolControl::AskUser { question, options }),
            changed_files: false,
            images: Vec::new(),
        })
    }
}

/// The `AttemptCompletion` tool: the model's declaration that the task is
/// done.
struct AttemptCompletionTool;

#[derive(Debug, Deserialize)]
struct AttemptCompletionInput {
    result: String,
}

#[async_trait]
impl Tool for AttemptCompletionTool {
    fn name(&self) -> &'static str {
        ATTEMPT_COMPLETION
    }

    fn finishes_task(&self) -> bool {
        true
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: ATTEMPT_COMPLETION.to_string(),
            description: "Finishes the task and presents the outcome to the user. Call it once the work is \
done and checked (for example: tests pass, the change builds); this is the only way to end the task. \
In result, state what you did and what the user should know, as a final statement: do not end with a \
question or an offer of more help. If you need information to go on, use AskUser instead."
                .to_string(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "result": {
                        "type": "string",
                        "description": "The final outcome of the task, shown to the user."
                    }
                },
                "required": ["result"],
                "additionalProperties": false
            }),
        }
    }

    fn is_read_only(&self) -> bool {
        true
    }

    fn access(&self, _input: &Value, _ctx: &ToolContext) -> ToolAccess {
        ToolAccess::Interaction
    }

    async fn call(&self, input: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let input: AttemptCompletionInput = parse_input(ATTEMPT_COMPLETION, input)?;
        let result = input.result.trim().to_string();
        crate::require_text(
            ATTEMPT_COMPLETION,
            "result",
            &result,
            "describe what was done",
        )?;
        Ok(ToolOutput {
            content: "The task is marked as completed.".to_string(),
            update: None,
            data: Some(json!({"result": result})),
            control: Some(ToolControl::Complete { result }),
            changed_files: false,
            images: Vec::new(),
        })
    }
}
