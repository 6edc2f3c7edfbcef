//! MCP servers that live in the program itself (the Agent SDK's
//! `create_sdk_mcp_server` / `createSdkMcpServer`): kaji speaks JSON-RPC to
//! them through `mcp_message` control requests. Each server tool becomes a
//! [`SdkMcpTool`] named `mcp__<server>__<tool>` that asks for approval like
//! any MCP tool. This module never decides about permissions.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use kaji_protocol::ToolSpec;
use kaji_tools::{Tool, ToolAccess, ToolContext, ToolError, ToolOutput};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::control::Control;

/// How long one server message may take (its tools/list at start, or a
/// call).
const MESSAGE_TIMEOUT: Duration = Duration::from_secs(600);

/// The JSON-RPC conversation with one server.
struct Server {
    control: Arc<Control>,
    name: String,
    next_id: std::sync::atomic::AtomicU64,
}

impl Server {
    /// Sends one JSON-RPC message; returns the `result` of its response.
    async fn call(
        &self,
        method: &str,
        params: Value,
        cancel: &CancellationToken,
    ) -> Result<Value, String> {
        let id = self
            .next_id
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let answer = self
            .control
            .request(
                json!({"subtype": "mcp_message", "server_name": self.name, "message": message}),
                MESSAGE_TIMEOUT,
                cancel,
            )
            .await
            .map_err(|e| e.to_string())?;
        let response = answer.get("mcp_response").cloned().unwrap_or(Value::Null);
        if let Some(error) = response.get("error") {
            let text = error
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("(no message)");
            return Err(format!("{method}: {text}"));
        }
        Ok(response.get("result").cloned().unwrap_or(Value::Null))
    }

    async fn notify(&self, method: &str) {
        let message = json!({"jsonrpc": "2.0", "method": method});
        let _ = self
            .control
            .request(
                json!({"subtype": "mcp_message", "server_name": self.name, "message": message}),
                MESSAGE_TIMEOUT,
                &CancellationToken::new(),
            )
            .await;
    }
}

/// Connects to the program's server `name`: initialize, then its tools.
pub async fn connect(control: Arc<Control>, name: &str) -> Result<Vec<Arc<dyn Tool>>, String> {
    let server = Arc::new(Server {
        control,
        name: name.to_string(),
        next_id: std::sync::atomic::AtomicU64::new(0),
    });
    let never = CancellationToken::new();
    server
        .call(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "kaji", "version": env!("CARGO_PKG_VERSION")}}),
            &never,
        )
        .await?;
    server.notify("notifications/initialized").await;
    let listed = server.call("tools/list", json!({}), &never).await?;
    let tools = listed
        .get("tools")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    Ok(tools
        .iter()
        .filter_map(|def| SdkMcpTool::new(Arc::clone(&server), def))
        .map(|t| Arc::new(t) as Arc<dyn Tool>)
        .collect())
}

/// One tool of a program's server.
pub struct SdkMcpTool {
    server: Arc<Server>,
    tool: String,
    name: &'static str,
    spec: ToolSpec,
}

impl SdkMcpTool {
    fn new(server: Arc<Server>, def: &Value) -> Option<Self> {
        let tool = def.get("name")?.as_str()?.to_string();
        let name =
            kaji_mcp::names::intern(&kaji_mcp::names::qualified_tool_name(&server.name, &tool));
        let mut input_schema = def.get("inputSchema").cloned().unwrap_or_else(|| json!({}));
        if let Value::Object(map) = &mut input_schema {
            map.entry("type").or_insert_with(|| json!("object"));
            map.entry("properties").or_insert_with(|| json!({}));
        }
        let description = def
            .get("description")
            .and_then(Value::as_str)
            .filter(|d| !d.trim().is_empty())
            .map(str::to_string)
            .unwrap_or_else(|| format!("Tool `{tool}` of the MCP server `{}`.", server.name));
        Some(Self {
            spec: ToolSpec {
                name: name.to_string(),
                description,
                input_schema,
            },
            server,
            tool,
            name,
        })
    }
}

impl std::fmt::Debug for SdkMcpTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SdkMcpTool")
            .field("name", &self.name)
            .field("server", &self.server.name)
            .finish()
    }
}

/// The text of a `tools/call` result: its text blocks.
fn result_text(result: &Value) -> String {
    result
        .get("content")
        .and_then(Value::as_array)
        .map(|blocks| {
            blocks
                .iter()
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

#[async_trait]
impl Tool for SdkMcpTool {
    fn name(&self) -> &'static str {
        self.name
    }

    fn spec(&self) -> ToolSpec {
        self.spec.clone()
    }

    fn title(&self, input: &Value) -> String {
        kaji_tools::title_from_args(self.name, input)
    }

    fn is_read_only(&self) -> bool {
        false
    }

    fn access(&self, _input: &Value, _ctx: &ToolContext) -> ToolAccess {
        ToolAccess::External
    }

    async fn call(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let arguments = if input.is_null() { json!({}) } else { input };
        let result = self
            .server
            .call(
                "tools/call",
                json!({"name": self.tool, "arguments": arguments}),
                &ctx.cancel,
            )
            .await
            .map_err(ToolError::Refused)?;
        let text = result_text(&result);
        if result.get("isError").and_then(Value::as_bool) == Some(true) {
            return Err(ToolError::Refused(if text.trim().is_empty() {
                format!(
                    "MCP tool `{}` of server `{}` reported an error",
                    self.tool, self.server.name
                )
            } else {
                text
            }));
        }
        Ok(ToolOutput {
            content: text,
            data: result.get("structuredContent").cloned(),
            ..ToolOutput::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn call_results_give_their_text_blocks() {
        let r = json!({"content": [{"type": "text", "text": "a"}, {"type": "image"}, {"type": "text", "text": "b"}]});
        assert_eq!(result_text(&r), "a\nb");
        assert_eq!(result_text(&json!({})), "");
    }
}
