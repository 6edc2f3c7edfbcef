//! The part of the Agent Client Protocol (v1) that `kaji acp` speaks, as
//! serde types: what it reads from a client and what it sends.
//!
//! What goes out is written as the protocol's SDK wrote it (field names
//! and order, `sessionUpdate` tags, no `null`s for what is absent); the
//! golden files in `tests/golden/acp/` hold that. What comes in is read
//! leniently: unknown fields are ignored, optional ones may be missing,
//! and content blocks or MCP servers of kinds kaji does not know parse as
//! `Other`. Only types: nothing here does I/O.

use std::path::PathBuf;

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

/// A value that is `T`, or its default when it is anything else.
fn lenient<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: serde::de::DeserializeOwned + Default,
{
    let v = Value::deserialize(d)?;
    Ok(serde_json::from_value(v).unwrap_or_default())
}

/// A list that may be `null` or missing (empty then).
fn list<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: serde::de::DeserializeOwned,
{
    Ok(Option::<Vec<T>>::deserialize(d)?.unwrap_or_default())
}

// ---- initialize ----

/// `initialize`'s params.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeRequest {
    /// The newest protocol version the client speaks.
    pub protocol_version: u16,
    /// What the client offers.
    #[serde(default, deserialize_with = "lenient")]
    pub client_capabilities: ClientCapabilities,
}

/// What the client offers (the part kaji uses).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClientCapabilities {
    /// Its file methods.
    #[serde(default, deserialize_with = "lenient")]
    pub fs: FileSystemCapabilities,
}

/// The client's `fs/*` methods.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileSystemCapabilities {
    /// `fs/read_text_file`.
    #[serde(default, deserialize_with = "lenient")]
    pub read_text_file: bool,
    /// `fs/write_text_file`.
    #[serde(default, deserialize_with = "lenient")]
    pub write_text_file: bool,
}

/// `initialize`'s result.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeResponse {
    /// The version both speak.
    pub protocol_version: u16,
    /// What kaji offers.
    pub agent_capabilities: AgentCapabilities,
    /// Authentication methods (none).
    pub auth_methods: Vec<Value>,
    /// kaji's name and version.
    pub agent_info: Implementation,
}

/// What kaji offers.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentCapabilities {
    /// `session/load`.
    pub load_session: bool,
    /// The content a prompt may hold.
    pub prompt_capabilities: PromptCapabilities,
    /// The MCP transports a client may pass.
    pub mcp_capabilities: McpCapabilities,
    /// More session methods.
    pub session_capabilities: SessionCapabilities,
    /// Authentication (nothing).
    pub auth: Empty,
}

/// The content a prompt may hold besides text and links.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PromptCapabilities {
    /// Images.
    pub image: bool,
    /// Audio.
    pub audio: bool,
    /// Embedded resources.
    pub embedded_context: bool,
}

/// The MCP transports besides stdio.
#[derive(Debug, Clone, Serialize)]
pub struct McpCapabilities {
    /// Streamable HTTP.
    pub http: bool,
    /// SSE.
    pub sse: bool,
}

/// More session methods.
#[derive(Debug, Clone, Serialize)]
pub struct SessionCapabilities {
    /// `session/list`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub list: Option<Empty>,
}

/// An empty object.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Empty {}

/// A program's name and version.
#[derive(Debug, Clone, Serialize)]
pub struct Implementation {
    /// Its name.
    pub name: String,
    /// Its version.
    pub version: String,
}

// ---- sessions ----

/// `session/new`'s params.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NewSessionRequest {
    /// The working directory.
    pub cwd: PathBuf,
    /// The client's MCP servers.
    #[serde(default, deserialize_with = "list")]
    pub mcp_servers: Vec<McpServer>,
}

/// `session/load`'s params.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LoadSessionRequest {
    /// The session to load.
    pub session_id: String,
    /// The working directory.
    pub cwd: PathBuf,
    /// The client's MCP servers.
    #[serde(default, deserialize_with = "list")]
    pub mcp_servers: Vec<McpServer>,
}

/// `session/list`'s params.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListSessionsRequest {
    /// Only the sessions of this directory.
    #[serde(default)]
    pub cwd: Option<PathBuf>,
}

/// `session/prompt`'s params.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PromptRequest {
    /// The session.
    pub session_id: String,
    /// The user's message.
    pub prompt: Vec<ContentBlock>,
}

/// `session/set_mode`'s params.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SetSessionModeRequest {
    /// The session.
    pub session_id: String,
    /// The mode to switch to.
    pub mode_id: String,
}

/// `session/cancel`'s params.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CancelNotification {
    /// The session whose turn to cancel.
    pub session_id: String,
}

/// `session/new`'s result.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NewSessionResponse {
    /// The new session's id.
    pub session_id: String,
    /// Its modes.
    pub modes: SessionModeState,
}

/// `session/load`'s result.
#[derive(Debug, Clone, Serialize)]
pub struct LoadSessionResponse {
    /// The session's modes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub modes: Option<SessionModeState>,
}

/// The modes of a session and the current one.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionModeState {
    /// The current mode's id.
    pub current_mode_id: String,
    /// Every mode.
    pub available_modes: Vec<SessionMode>,
}

/// One mode.
#[derive(Debug, Clone, Serialize)]
pub struct SessionMode {
    /// Its id (kaji's permission mode).
    pub id: String,
    /// Its name.
    pub name: String,
    /// What it does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// `session/list`'s result (one page).
#[derive(Debug, Clone, Serialize)]
pub struct ListSessionsResponse {
    /// The sessions.
    pub sessions: Vec<SessionInfo>,
}

/// One saved session.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionInfo {
    /// Its id.
    pub session_id: String,
    /// Its working directory.
    pub cwd: PathBuf,
    /// Its title.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// When it last changed (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<String>,
}

/// `session/prompt`'s result.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PromptResponse {
    /// Why the turn ended.
    pub stop_reason: StopReason,
}

/// Why a turn ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// It finished.
    EndTurn,
    /// The client cancelled it.
    Cancelled,
    /// It reached the turn limit.
    MaxTurnRequests,
}

// ---- MCP servers ----

/// An MCP server the client passes.
#[derive(Debug, Clone)]
pub enum McpServer {
    /// A local process.
    Stdio(McpServerStdio),
    /// Streamable HTTP.
    Http(McpServerHttp),
    /// SSE (which kaji does not speak).
    Sse(McpServerHttp),
    /// A kind kaji does not know.
    Other,
}

impl<'de> Deserialize<'de> for McpServer {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let v = Value::deserialize(d)?;
        // A stdio server has no `type` (the SDK's untagged variant).
        let kind = match v.get("type") {
            None => "stdio".to_string(),
            Some(t) => t.as_str().unwrap_or("").to_string(),
        };
        let server = match kind.as_str() {
            "stdio" => serde_json::from_value(v).map(McpServer::Stdio),
            "http" => serde_json::from_value(v).map(McpServer::Http),
            "sse" => serde_json::from_value(v).map(McpServer::Sse),
            _ => return Ok(McpServer::Other),
        };
        server.map_err(|e| D::Error::custom(format!("MCP server ({kind}): {e}")))
    }
}

/// A local MCP server.
#[derive(Debug, Clone, Deserialize)]
pub struct McpServerStdio {
    /// Its name.
    pub name: String,
    /// The program.
    pub command: PathBuf,
    /// Its arguments.
    #[serde(default, deserialize_with = "list")]
    pub args: Vec<String>,
    /// Its environment.
    #[serde(default, deserialize_with = "list")]
    pub env: Vec<NameValue>,
}

/// A remote MCP server.
#[derive(Debug, Clone, Deserialize)]
pub struct McpServerHttp {
    /// Its name.
    pub name: String,
    /// Its URL.
    pub url: String,
    /// Headers to send.
    #[serde(default, deserialize_with = "list")]
    pub headers: Vec<NameValue>,
}

/// An environment variable or an HTTP header.
#[derive(Debug, Clone, Deserialize)]
pub struct NameValue {
    /// Its name.
    pub name: String,
    /// Its value.
    pub value: String,
}

// ---- content ----

/// A block of content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentBlock {
    /// Text.
    Text(TextContent),
    /// An image.
    Image(ImageContent),
    /// A link to a resource.
    ResourceLink(ResourceLink),
    /// An embedded resource.
    Resource(EmbeddedResource),
    /// A kind kaji does not read (audio, or one newer than kaji).
    #[serde(other)]
    Other,
}

impl ContentBlock {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        ContentBlock::Text(TextContent { text: text.into() })
    }
}

/// Text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TextContent {
    /// The text.
    pub text: String,
}

/// An image, base64.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageContent {
    /// The data.
    pub data: String,
    /// Its type.
    pub mime_type: String,
}

/// A link to a resource.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResourceLink {
    /// Its URI.
    pub uri: String,
}

/// A resource with its contents.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EmbeddedResource {
    /// The contents.
    pub resource: EmbeddedResourceResource,
}

/// A resource's contents.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum EmbeddedResourceResource {
    /// Text.
    Text(TextResourceContents),
    /// Binary, base64.
    Blob(BlobResourceContents),
    /// Something else.
    Other(Value),
}

/// A text resource.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TextResourceContents {
    /// The text.
    pub text: String,
    /// Its URI.
    pub uri: String,
}

/// A binary resource.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BlobResourceContents {
    /// The data, base64.
    pub blob: String,
    /// Its type.
    #[serde(default, deserialize_with = "lenient")]
    pub mime_type: Option<String>,
    /// Its URI.
    pub uri: String,
}

// ---- session/update ----

/// `session/update`'s params.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionNotification {
    /// The session.
    pub session_id: String,
    /// What changed.
    pub update: SessionUpdate,
}

/// What changed in a session.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "sessionUpdate", rename_all = "snake_case")]
pub enum SessionUpdate {
    /// A piece of the user's message (a replayed one).
    UserMessageChunk(ContentChunk),
    /// A piece of kaji's message.
    AgentMessageChunk(ContentChunk),
    /// A piece of kaji's reasoning.
    AgentThoughtChunk(ContentChunk),
    /// A new tool call.
    ToolCall(ToolCall),
    /// A change to a tool call.
    ToolCallUpdate(ToolCallUpdate),
    /// The plan (kaji's todo).
    Plan(Plan),
}

/// A piece of a message.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ContentChunk {
    /// The content.
    pub content: ContentBlock,
}

/// A tool call.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCall {
    /// Its id.
    pub tool_call_id: String,
    /// What it does.
    pub title: String,
    /// Its kind (`other`, the default, is left out).
    #[serde(skip_serializing_if = "ToolKind::is_other")]
    pub kind: ToolKind,
    /// Its status (`pending`, the default, is left out).
    #[serde(skip_serializing_if = "ToolCallStatus::is_pending")]
    pub status: ToolCallStatus,
    /// What it shows.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub content: Vec<ToolCallContent>,
    /// The files it touches.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub locations: Vec<ToolCallLocation>,
    /// Its input.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub raw_input: Option<Value>,
    /// Its output.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub raw_output: Option<Value>,
}

/// A change to a tool call.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallUpdate {
    /// The call.
    pub tool_call_id: String,
    /// What changed.
    #[serde(flatten)]
    pub fields: ToolCallUpdateFields,
}

/// What changed in a tool call (`None`: unchanged).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallUpdateFields {
    /// Its kind.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<ToolKind>,
    /// Its status.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<ToolCallStatus>,
    /// Its title.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What it shows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<Vec<ToolCallContent>>,
    /// The files it touches.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub locations: Option<Vec<ToolCallLocation>>,
    /// Its input.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub raw_input: Option<Value>,
    /// Its output.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub raw_output: Option<Value>,
}

impl From<ToolCall> for ToolCallUpdate {
    /// The whole call as an update (every field set).
    fn from(call: ToolCall) -> Self {
        ToolCallUpdate {
            tool_call_id: call.tool_call_id,
            fields: ToolCallUpdateFields {
                kind: Some(call.kind),
                status: Some(call.status),
                title: Some(call.title),
                content: Some(call.content),
                locations: Some(call.locations),
                raw_input: call.raw_input,
                raw_output: call.raw_output,
            },
        }
    }
}

/// The kind of a tool call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolKind {
    /// Reads.
    Read,
    /// Edits.
    Edit,
    /// Searches.
    Search,
    /// Runs a command.
    Execute,
    /// Thinks.
    Think,
    /// Fetches.
    Fetch,
    /// Switches the mode.
    SwitchMode,
    /// Anything else.
    Other,
}

impl ToolKind {
    fn is_other(&self) -> bool {
        *self == ToolKind::Other
    }
}

/// Where a tool call is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolCallStatus {
    /// Not started.
    Pending,
    /// Running.
    InProgress,
    /// Done.
    Completed,
    /// Failed.
    Failed,
}

impl ToolCallStatus {
    fn is_pending(&self) -> bool {
        *self == ToolCallStatus::Pending
    }
}

/// What a tool call shows.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToolCallContent {
    /// Content.
    Content {
        /// It.
        content: ContentBlock,
    },
    /// A change to a file.
    Diff(Diff),
}

impl ToolCallContent {
    /// Text.
    pub fn text(text: impl Into<String>) -> Self {
        ToolCallContent::Content {
            content: ContentBlock::text(text),
        }
    }
}

/// A change to a file.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Diff {
    /// The file.
    pub path: PathBuf,
    /// What it held (`None`: a new file).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub old_text: Option<String>,
    /// What it holds after.
    pub new_text: String,
}

/// A file a tool call touches.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolCallLocation {
    /// The file.
    pub path: PathBuf,
}

/// The plan.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Plan {
    /// Its entries.
    pub entries: Vec<PlanEntry>,
}

/// One step of the plan.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlanEntry {
    /// What to do.
    pub content: String,
    /// How much it matters (kaji: always `medium`).
    pub priority: PlanEntryPriority,
    /// Where it is.
    pub status: PlanEntryStatus,
}

/// How much a step matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanEntryPriority {
    /// Medium.
    Medium,
}

/// Where a step is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanEntryStatus {
    /// Not started.
    Pending,
    /// Under way.
    InProgress,
    /// Done.
    Completed,
}

// ---- requests to the client ----

/// `session/request_permission`'s params.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestPermissionRequest {
    /// The session.
    pub session_id: String,
    /// The call it is about.
    pub tool_call: ToolCallUpdate,
    /// The answers offered.
    pub options: Vec<PermissionOption>,
}

/// An answer offered.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PermissionOption {
    /// Its id.
    pub option_id: String,
    /// What it says.
    pub name: String,
    /// What it does.
    pub kind: PermissionOptionKind,
}

impl PermissionOption {
    /// An option.
    pub fn new(id: &str, name: impl Into<String>, kind: PermissionOptionKind) -> Self {
        Self {
            option_id: id.to_string(),
            name: name.into(),
            kind,
        }
    }
}

/// What an answer does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PermissionOptionKind {
    /// Allows this once.
    AllowOnce,
    /// Allows it from now on.
    AllowAlways,
    /// Rejects this once.
    RejectOnce,
}

/// `session/request_permission`'s result.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct RequestPermissionResponse {
    /// The user's answer.
    pub outcome: RequestPermissionOutcome,
}

/// The user's answer.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum RequestPermissionOutcome {
    /// The prompt was cancelled.
    Cancelled,
    /// An option was chosen.
    #[serde(rename_all = "camelCase")]
    Selected {
        /// Its id.
        option_id: String,
    },
}

/// `fs/read_text_file`'s params.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReadTextFileRequest {
    /// The session.
    pub session_id: String,
    /// The file.
    pub path: PathBuf,
}

/// `fs/read_text_file`'s result.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ReadTextFileResponse {
    /// The text.
    pub content: String,
}

/// `fs/write_text_file`'s params.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WriteTextFileRequest {
    /// The session.
    pub session_id: String,
    /// The file.
    pub path: PathBuf,
    /// The text to write.
    pub content: String,
}
