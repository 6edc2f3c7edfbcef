//! The MCP types kaji reads and writes as a client: the handshake, tools,
//! tool results with their content blocks, and resources — with MCP's
//! exact field names.
//!
//! Every type accepts fields it does not know and does without the
//! optional ones; a content block or resource of a kind newer than this
//! build is kept as its JSON ([`ContentBlock::Other`],
//! [`ResourceContents::Other`]) rather than failing the whole result. These
//! types must never do I/O or decide anything.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A JSON object, as MCP's schemas and arguments are.
pub type JsonObject = serde_json::Map<String, Value>;

/// The protocol version kaji asks for in `initialize` (what the `rmcp`
/// SDK it replaced asked for, so servers see the same request).
pub const PROTOCOL_VERSION: &str = "2026-07-28";

/// The result of `initialize`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeResult {
    /// The version the server chose.
    #[serde(default)]
    pub protocol_version: String,
    /// What the server offers.
    #[serde(default)]
    pub capabilities: ServerCapabilities,
    /// The server's name and version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_info: Option<Value>,
    /// Its instructions for the model, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
}

/// The capabilities a server announces (only presence matters to kaji).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ServerCapabilities {
    /// Present when the server has tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Value>,
    /// Present when the server has resources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<Value>,
}

/// One tool of a server.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Tool {
    /// Its name, unique on the server.
    pub name: String,
    /// A human-readable title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The JSON schema of its arguments.
    #[serde(default)]
    pub input_schema: JsonObject,
    /// The JSON schema of its structured result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<JsonObject>,
    /// Hints about its behaviour (read-only, destructive…).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Value>,
}

/// The result of `tools/list`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListToolsResult {
    /// This page's tools.
    #[serde(default)]
    pub tools: Vec<Tool>,
    /// Where the next page starts, if there is one.
    #[serde(default)]
    pub next_cursor: Option<String>,
}

/// The result of `tools/call`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CallToolResult {
    /// The content blocks, in order.
    #[serde(default)]
    pub content: Vec<ContentBlock>,
    /// The tool's structured result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured_content: Option<Value>,
    /// Whether the tool failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_error: Option<bool>,
}

/// One block of a tool result: a kind kaji knows, or any other JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ContentBlock {
    /// A kind kaji knows.
    Known(KnownContent),
    /// A kind newer than this build (or malformed), kept as it came.
    Other(Value),
}

/// The content blocks kaji knows, tagged by `type`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum KnownContent {
    /// Text.
    Text {
        /// The text.
        text: String,
    },
    /// A base64 image.
    #[serde(rename_all = "camelCase")]
    Image {
        /// Base64 data.
        data: String,
        /// Its MIME type.
        mime_type: String,
    },
    /// Base64 audio.
    #[serde(rename_all = "camelCase")]
    Audio {
        /// Base64 data.
        data: String,
        /// Its MIME type.
        mime_type: String,
    },
    /// An embedded resource.
    Resource {
        /// Its contents.
        resource: ResourceContents,
    },
    /// A link to a resource.
    #[serde(rename_all = "camelCase")]
    ResourceLink {
        /// Its URI.
        uri: String,
        /// Its name.
        #[serde(default)]
        name: String,
        /// Its MIME type.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mime_type: Option<String>,
        /// Its size in bytes.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        size: Option<u64>,
    },
}

/// The contents of a resource: text, a base64 blob, or any other JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ResourceContents {
    /// Text contents.
    #[serde(rename_all = "camelCase")]
    Text {
        /// The resource's URI.
        uri: String,
        /// Its MIME type.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mime_type: Option<String>,
        /// The text.
        text: String,
    },
    /// Binary contents.
    #[serde(rename_all = "camelCase")]
    Blob {
        /// The resource's URI.
        uri: String,
        /// Its MIME type.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mime_type: Option<String>,
        /// Base64 data.
        blob: String,
    },
    /// Contents of a shape kaji does not know.
    Other(Value),
}

/// The result of `resources/read`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ReadResourceResult {
    /// The resource's contents (one or more).
    #[serde(default)]
    pub contents: Vec<ResourceContents>,
}

/// One resource a server offers.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Resource {
    /// Its URI.
    pub uri: String,
    /// Its name.
    #[serde(default)]
    pub name: String,
    /// What it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Its MIME type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
}

/// One resource template a server offers.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceTemplate {
    /// Its URI template (RFC 6570).
    pub uri_template: String,
    /// Its name.
    #[serde(default)]
    pub name: String,
    /// What it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The MIME type of what it names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
}

/// The result of `resources/list`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListResourcesResult {
    /// This page's resources.
    #[serde(default)]
    pub resources: Vec<Resource>,
    /// Where the next page starts, if there is one.
    #[serde(default)]
    pub next_cursor: Option<String>,
}

/// The result of `resources/templates/list`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListResourceTemplatesResult {
    /// This page's templates.
    #[serde(default)]
    pub resource_templates: Vec<ResourceTemplate>,
    /// Where the next page starts, if there is one.
    #[serde(default)]
    pub next_cursor: Option<String>,
}

/// A result with pages: its items and the next cursor.
pub(crate) trait Page {
    /// One item.
    type Item;
    /// Splits the page.
    fn into_parts(self) -> (Vec<Self::Item>, Option<String>);
}

impl Page for ListToolsResult {
    type Item = Tool;
    fn into_parts(self) -> (Vec<Tool>, Option<String>) {
        (self.tools, self.next_cursor)
    }
}

impl Page for ListResourcesResult {
    type Item = Resource;
    fn into_parts(self) -> (Vec<Resource>, Option<String>) {
        (self.resources, self.next_cursor)
    }
}

impl Page for ListResourceTemplatesResult {
    type Item = ResourceTemplate;
    fn into_parts(self) -> (Vec<ResourceTemplate>, Option<String>) {
        (self.resource_templates, self.next_cursor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tools_tolerate_unknown_and_missing_fields() {
        let list: ListToolsResult = serde_json::from_value(json!({
            "tools": [
                {"name": "a", "inputSchema": {"type": "object"}, "icons": [], "_meta": {}},
                {"name": "b", "title": "B", "annotations": {"readOnlyHint": true}},
            ],
            "nextCursor": "2",
        }))
        .unwrap();
        assert_eq!(list.tools[0].input_schema["type"], "object");
        assert_eq!(list.tools[1].title.as_deref(), Some("B"));
        assert!(list.tools[1].input_schema.is_empty());
        assert_eq!(list.next_cursor.as_deref(), Some("2"));
    }

    #[test]
    fn content_blocks_round_trip_with_mcp_names() {
        let blocks = json!([
            {"type": "text", "text": "hi"},
            {"type": "image", "data": "QQ==", "mimeType": "image/png"},
            {"type": "audio", "data": "QQ==", "mimeType": "audio/wav"},
            {"type": "resource", "resource": {"uri": "x://t", "mimeType": "text/plain", "text": "t"}},
            {"type": "resource", "resource": {"uri": "x://b", "blob": "QQ=="}},
            {"type": "resource_link", "uri": "x://l", "name": "l", "size": 3},
            {"type": "hologram", "depth": 3},
        ]);
        let result: CallToolResult = serde_json::from_value(json!({
            "content": blocks, "structuredContent": {"a": 1}, "isError": true
        }))
        .unwrap();
        assert!(matches!(result.content[6], ContentBlock::Other(_)));
        assert!(matches!(
            result.content[4],
            ContentBlock::Known(KnownContent::Resource {
                resource: ResourceContents::Blob { .. }
            })
        ));
        let back = serde_json::to_value(&result).unwrap();
        assert_eq!(back["content"], blocks);
        assert_eq!(back["isError"], json!(true));
        assert_eq!(back["structuredContent"], json!({"a": 1}));
    }
}
