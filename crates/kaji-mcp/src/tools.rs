//! MCP servers' tools and resources as kaji [`Tool`]s.
//!
//! Each server tool becomes an [`McpTool`] named `mcp__<server>__<tool>`
//! that reaches outside kaji ([`ToolAccess::External`]: it asks for approval
//! like a command). `ListMcpResources` and `ReadMcpResource` only read.
//! These tools never decide about permissions and never print.

use std::sync::Arc;

use crate::model::Tool as McpToolDef;
use async_trait::async_trait;
use kaji_protocol::ToolSpec;
use kaji_tools::{Tool, ToolAccess, ToolContext, ToolError, ToolOutput, parse_input};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::manager::{McpManager, description_of};

impl McpManager {
    /// The tools to offer the model: every tool of every connected server
    /// as `mcp__<server>__<tool>`, then `ListMcpResources` and
    /// `ReadMcpResource` (when any server is enabled). Which server tools
    /// are offered, under which names, the manager decides (`offered_tools`).
    pub fn tools(&self) -> Vec<Arc<dyn Tool>> {
        let mut tools: Vec<Arc<dyn Tool>> = self
            .offered_tools()
            .into_iter()
            .map(|o| {
                Arc::new(McpTool::new(self.clone(), o.server, o.name, &o.def)) as Arc<dyn Tool>
            })
            .collect();
        if self.any_enabled() {
            tools.push(Arc::new(ListMcpResources::new(self.clone())));
            tools.push(Arc::new(ReadMcpResource::new(self.clone())));
        }
        tools
    }
}

/// One tool of one MCP server.
pub struct McpTool {
    manager: McpManager,
    server: String,
    tool: String,
    name: &'static str,
    spec: ToolSpec,
}

impl McpTool {
    pub(crate) fn new(
        manager: McpManager,
        server: String,
        name: &'static str,
        def: &McpToolDef,
    ) -> Self {
        let description = description_of(def);
        let description = if description.trim().is_empty() {
            format!("Tool `{}` of the MCP server `{server}`.", def.name)
        } else {
            description
        };
        let mut input_schema = Value::Object(def.input_schema.clone());
        // Model APIs require an object schema with properties.
        if let Value::Object(map) = &mut input_schema {
            map.entry("type").or_insert_with(|| json!("object"));
            map.entry("properties").or_insert_with(|| json!({}));
        }
        Self {
            spec: ToolSpec {
                name: name.to_string(),
                description,
                input_schema,
            },
            manager,
            server,
            tool: def.name.to_string(),
            name,
        }
    }

    /// The server it belongs to.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// The server's own name for the tool.
    pub fn tool_name(&self) -> &str {
        &self.tool
    }
}

impl std::fmt::Debug for McpTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpTool")
            .field("name", &self.name)
            .field("server", &self.server)
            .field("tool", &self.tool)
            .finish()
    }
}

#[async_trait]
impl Tool for McpTool {
    fn name(&self) -> &'static str {
        self.name
    }

    fn spec(&self) -> ToolSpec {
        self.spec.clone()
    }

    /// The server's tool is unknown to kaji: its name and the first line of
    /// the first commonly named string argument (a path, a query, a URL).
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
        if !(input.is_object() || input.is_null()) {
            return Err(ToolError::InvalidInput {
                tool: self.name.to_string(),
                message: format!("expected a JSON object of arguments, got {input}"),
            });
        }
        let output = self
            .manager
            .call_tool(&self.server, &self.tool, input, &ctx.cancel)
            .await?;
        if output.is_error {
            let text = if output.text.trim().is_empty() {
                format!(
                    "MCP tool `{}` of server `{}` reported an error",
                    self.tool, self.server
                )
            } else {
                output.text
            };
            return Err(ToolError::Refused(text));
        }
        Ok(ToolOutput {
            content: output.text,
            data: output.structured,
            images: output.images,
            ..ToolOutput::default()
        })
    }
}

/// `ListMcpResources {server?}`: the resources of one server, or of every
/// connected server.
#[derive(Debug)]
pub struct ListMcpResources {
    manager: McpManager,
}

impl ListMcpResources {
    /// The tool's name.
    pub const NAME: &'static str = "ListMcpResources";

    pub(crate) fn new(manager: McpManager) -> Self {
        Self { manager }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ListInput {
    #[serde(default)]
    server: Option<String>,
}

#[async_trait]
impl Tool for ListMcpResources {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: Self::NAME.to_string(),
            description: "Lists the resources (files, documents, records) offered by the connected MCP \
                          servers, with their URIs. Give `server` to list only that server's. Read one \
                          with ReadMcpResource."
                .to_string(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "server": {
                        "type": "string",
                        "description": "Name of the MCP server; omit to list every connected server's resources"
                    }
                },
                "additionalProperties": false
            }),
        }
    }

    fn is_read_only(&self) -> bool {
        true
    }

    async fn call(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let input = if input.is_null() { json!({}) } else { input };
        let input: ListInput = parse_input(Self::NAME, input)?;
        let resources = self
            .manager
            .list_resources(input.server.as_deref(), &ctx.cancel)
            .await?;
        if resources.is_empty() {
            let scope = match &input.server {
                Some(server) => format!("MCP server `{server}` offers no resources"),
                None => "no connected MCP server offers resources".to_string(),
            };
            return Ok(ToolOutput::text(scope));
        }
        let mut text = String::new();
        for r in &resources {
            let kind = if r.template { "template " } else { "" };
            text.push_str(&format!("{}: {kind}{} ({})", r.server, r.uri, r.name));
            if let Some(mime) = &r.mime_type {
                text.push_str(&format!(" [{mime}]"));
            }
            if let Some(description) = r.description.as_deref().filter(|d| !d.is_empty()) {
                text.push_str(&format!(
                    " — {}",
                    description.lines().next().unwrap_or_default()
                ));
            }
            text.push('\n');
        }
        Ok(ToolOutput {
            content: text,
            data: serde_json::to_value(&resources).ok(),
            ..ToolOutput::default()
        })
    }
}

/// `ReadMcpResource {server, uri}`: one resource's contents.
#[derive(Debug)]
pub struct ReadMcpResource {
    manager: McpManager,
}

impl ReadMcpResource {
    /// The tool's name.
    pub const NAME: &'static str = "ReadMcpResource";

    pub(crate) fn new(manager: McpManager) -> Self {
        Self { manager }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReadInput {
    server: String,
    uri: String,
}

#[async_trait]
impl Tool for ReadMcpResource {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: Self::NAME.to_string(),
            description:
                "Reads one resource of an MCP server by its URI (see ListMcpResources). Text is \
                          returned as is; binary contents are described by type and size."
                    .to_string(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "server": { "type": "string", "description": "Name of the MCP server" },
                    "uri": { "type": "string", "description": "URI of the resource" }
                },
                "required": ["server", "uri"],
                "additionalProperties": false
            }),
        }
    }

    fn is_read_only(&self) -> bool {
        true
    }

    async fn call(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let input: ReadInput = parse_input(Self::NAME, input)?;
        let text = self
            .manager
            .read_resource(&input.server, &input.uri, &ctx.cancel)
            .await?;
        Ok(ToolOutput::text(text))
    }
}
