//! Which search `WebSearch` uses in a session, and the provider's own
//! search.
//!
//! `[web_search] provider` chooses: unset or `native` uses the model
//! provider's search when it has one (Anthropic's server-side
//! `web_search` tool, the Responses API's hosted `web_search`): a request
//! of its own, offering only that tool, whose `server_tool_use`,
//! `web_search_tool_result`, `web_search_call` and `url_citation` blocks
//! become the results and whose text becomes the summary. `searxng`,
//! `brave` and `tavily` use [`kaji_tools::web_search::HttpBackend`];
//! `off` none. A backend that is set up wrongly (no URL, key variable
//! unset) is kept as a searcher that fails with what is wrong, so the
//! model and the user read it.
//!
//! This module must never decide permissions or print; it never sends the
//! conversation to the search, only the query.

use std::sync::Arc;

use async_trait::async_trait;
use futures::StreamExt;
use kaji_llm::{ModelProvider, ModelRequest, ProviderWebSearch};
use kaji_protocol::{Message, StreamEvent};
use kaji_tools::web_search::{
    HttpBackend, WebSearchAnswer, WebSearchHit, WebSearchProvider, WebSearchQuery,
    WebSearchSettings, WebSearcher,
};
use serde_json::Value;

/// At most this many searches in one provider request.
const MAX_USES: u32 = 5;

/// The session's search setup, from `[web_search]`.
#[derive(Debug, Clone)]
pub enum WebSearchSetup {
    /// The model provider's own search, where it has one.
    Native,
    /// A configured backend (or one set up wrongly, which says why).
    Backend(Arc<dyn WebSearcher>),
    /// No web search.
    Off,
}

impl WebSearchSetup {
    /// The setup `settings` describe; the backend's key is read from the
    /// environment now.
    pub fn from_settings(settings: Option<&WebSearchSettings>) -> Self {
        let Some(settings) = settings else {
            return Self::Native;
        };
        match settings.provider {
            None | Some(WebSearchProvider::Native) => Self::Native,
            Some(WebSearchProvider::Off) => Self::Off,
            Some(_) => match HttpBackend::from_settings(settings) {
                Ok(Some(backend)) => Self::Backend(Arc::new(backend)),
                Ok(None) => Self::Native,
                Err(message) => Self::Backend(Arc::new(Misconfigured(message))),
            },
        }
    }

    /// The searcher of a Task using `provider` and `model`.
    pub fn searcher(
        &self,
        provider: &Arc<dyn ModelProvider>,
        model: &str,
    ) -> Option<Arc<dyn WebSearcher>> {
        match self {
            Self::Native if provider.has_web_search() => Some(Arc::new(NativeWebSearch {
                provider: Arc::clone(provider),
                model: model.to_string(),
            })),
            Self::Native | Self::Off => None,
            Self::Backend(b) => Some(Arc::clone(b)),
        }
    }
}

/// A backend set up wrongly: every search fails with what is wrong.
#[derive(Debug)]
struct Misconfigured(String);

#[async_trait]
impl WebSearcher for Misconfigured {
    fn describe(&self) -> String {
        "the configured search backend".into()
    }

    async fn search(&self, _query: &WebSearchQuery) -> Result<WebSearchAnswer, String> {
        Err(format!(
            "the search backend is not set up correctly: {}",
            self.0
        ))
    }
}

/// The provider's own search: one request offering only its search tool.
pub struct NativeWebSearch {
    provider: Arc<dyn ModelProvider>,
    model: String,
}

impl std::fmt::Debug for NativeWebSearch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "NativeWebSearch({})", self.provider.name())
    }
}

#[async_trait]
impl WebSearcher for NativeWebSearch {
    fn describe(&self) -> String {
        format!("{}'s web search", self.provider.name())
    }

    async fn search(&self, query: &WebSearchQuery) -> Result<WebSearchAnswer, String> {
        let request = ModelRequest {
            model: self.model.clone(),
            system: "You perform web searches for a coding agent. Search for the query, then \
                     summarize what the results say, citing their URLs."
                .into(),
            messages: Arc::new(vec![Message::user_text(format!(
                "Perform a web search for the query: {}",
                query.query
            ))]),
            tools: Vec::new(),
            max_tokens: 4096,
            temperature: None,
        };
        let search = ProviderWebSearch {
            allowed_domains: query.allowed_domains.clone(),
            blocked_domains: query.blocked_domains.clone(),
            max_uses: MAX_USES,
        };
        let who = self.describe();
        let mut stream = self
            .provider
            .web_search(request, &search)
            .ok_or_else(|| format!("{} has no web search of its own", self.provider.name()))?;
        let mut answer = WebSearchAnswer::default();
        let mut summary = String::new();
        while let Some(event) = stream.next().await {
            match event.map_err(|e| format!("{who} failed: {e}"))? {
                StreamEvent::TextDelta { text } => summary.push_str(&text),
                StreamEvent::ServerBlock { block } => add_block(&block, &mut answer.hits)?,
                _ => {}
            }
        }
        if !summary.trim().is_empty() {
            answer.summary = Some(summary.trim().to_string());
        }
        Ok(answer)
    }
}

fn text(v: &Value, key: &str) -> String {
    v.get(key).and_then(Value::as_str).unwrap_or("").to_string()
}

fn push_hit(hits: &mut Vec<WebSearchHit>, url: String, title: String) {
    if url.is_empty() {
        return;
    }
    match hits.iter_mut().find(|h| h.url == url) {
        Some(h) if h.title.is_empty() || h.title == h.url => h.title = title,
        Some(_) => {}
        None => hits.push(WebSearchHit {
            title: if title.is_empty() { url.clone() } else { title },
            url,
            snippet: String::new(),
        }),
    }
}

/// Adds what one server block found; a search error block is an error.
fn add_block(block: &Value, hits: &mut Vec<WebSearchHit>) -> Result<(), String> {
    match block.get("type").and_then(Value::as_str).unwrap_or("") {
        "web_search_tool_result" => match block.get("content") {
            Some(Value::Array(results)) => {
                for r in results {
                    push_hit(hits, text(r, "url"), text(r, "title"));
                }
            }
            Some(error) => {
                let code = error
                    .get("error_code")
                    .and_then(Value::as_str)
                    .unwrap_or("unknown");
                return Err(format!("the provider's search failed ({code})"));
            }
            None => {}
        },
        "web_search_call" => {
            let sources = block.pointer("/action/sources").and_then(Value::as_array);
            for s in sources.into_iter().flatten() {
                push_hit(hits, text(s, "url"), text(s, "title"));
            }
        }
        "url_citation" => push_hit(hits, text(block, "url"), text(block, "title")),
        _ => {}
    }
    Ok(())
}
