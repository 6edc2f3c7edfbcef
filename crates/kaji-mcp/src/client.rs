//! The MCP methods kaji calls as a client, on top of a [`Peer`]: the
//! handshake (`initialize`, then `notifications/initialized`), `tools/list`
//! and the resource listings with all their pages, `tools/call` and
//! `resources/read`.
//!
//! kaji declares no client capabilities (no sampling, roots or
//! elicitation). Nothing here knows the transport, and nothing here may
//! loop forever on a server's cursors.

use std::collections::HashSet;

use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::jsonrpc::{Peer, RequestError};
use crate::model::{
    CallToolResult, InitializeResult, JsonObject, ListResourceTemplatesResult, ListResourcesResult,
    ListToolsResult, PROTOCOL_VERSION, Page, ReadResourceResult, Resource, ResourceTemplate, Tool,
};

/// The `initialize` request's params.
pub(crate) fn initialize_params() -> Value {
    json!({
        "protocolVersion": PROTOCOL_VERSION,
        "capabilities": {},
        "clientInfo": {"name": "kaji", "version": env!("CARGO_PKG_VERSION")},
    })
}

impl Peer {
    /// The handshake: `initialize`, then the `notifications/initialized`
    /// notification. Returns what the server said about itself.
    pub async fn initialize(&self) -> Result<InitializeResult, RequestError> {
        let result: InitializeResult = self.request("initialize", initialize_params()).await?;
        self.notify("notifications/initialized").await?;
        Ok(result)
    }

    /// Every tool, following `nextCursor` to the last page.
    pub async fn list_all_tools(&self) -> Result<Vec<Tool>, RequestError> {
        self.list_all::<ListToolsResult>("tools/list").await
    }

    /// Every resource, following `nextCursor` to the last page.
    pub async fn list_all_resources(&self) -> Result<Vec<Resource>, RequestError> {
        self.list_all::<ListResourcesResult>("resources/list").await
    }

    /// Every resource template, following `nextCursor` to the last page.
    pub async fn list_all_resource_templates(&self) -> Result<Vec<ResourceTemplate>, RequestError> {
        self.list_all::<ListResourceTemplatesResult>("resources/templates/list")
            .await
    }

    /// Calls tool `name` with `arguments` (none: no `arguments` field).
    pub async fn call_tool(
        &self,
        name: &str,
        arguments: Option<JsonObject>,
    ) -> Result<CallToolResult, RequestError> {
        let mut params = json!({"name": name});
        if let (Some(arguments), Value::Object(map)) = (arguments, &mut params) {
            map.insert("arguments".to_string(), Value::Object(arguments));
        }
        self.request("tools/call", params).await
    }

    /// Reads the resource `uri`.
    pub async fn read_resource(&self, uri: &str) -> Result<ReadResourceResult, RequestError> {
        self.request("resources/read", json!({"uri": uri})).await
    }

    /// All pages of a listing. A cursor the server gave before ends it
    /// with an error (a server that would otherwise be asked forever).
    async fn list_all<P: Page + DeserializeOwned>(
        &self,
        method: &'static str,
    ) -> Result<Vec<P::Item>, RequestError> {
        let mut items = Vec::new();
        let mut seen = HashSet::new();
        let mut cursor: Option<String> = None;
        loop {
            let params = match &cursor {
                Some(cursor) => json!({"cursor": cursor}),
                None => json!({}),
            };
            let (page, next) = self.request::<P>(method, params).await?.into_parts();
            items.extend(page);
            match next {
                None => return Ok(items),
                Some(next) if !seen.insert(next.clone()) => {
                    return Err(RequestError::Invalid {
                        method,
                        error: format!("the server gave the cursor `{next}` a second time"),
                    });
                }
                Some(next) => cursor = Some(next),
            }
        }
    }
}
