//! Which search `WebSearch` uses in a session, and the provider's own
//! search.
//!
//! `[web_search] provider` chooses: unset or `native` uses the model
//! provider's search when it has one (Anthropic's server-side
//! `web_search` tool, the Responses API's hosted `web_search`). When the
//! permission rules let `WebSearch` run without asking, the conversation's
//! own requests offer that tool in place of `WebSearch`
//! ([`provider_search`]): the model searches within its reply, the
//! blocks stay in the history as they came, and [`server_view`] tells the
//! front ends what was searched and found. Otherwise `WebSearch` asks and
//! runs [`NativeWebSearch`]: a request of its own, offering only that
//! tool, whose `server_tool_use`, `web_search_tool_result`,
//! `web_search_call` and `url_citation` blocks become the results and
//! whose text becomes the summary. `searxng`,
//! `brave` and `tavily` use [`kaji_tools::web_search::HttpBackend`];
//! `off` none. A backend that is set up wrongly (no URL, key variable
//! unset) is kept as a searcher that fails with what is wrong, so the
//! model and the user read it.
//!
//! This module must never decide permissions or print; `NativeWebSearch`
//! never sends the conversation to the search, only the query.

use std::sync::Arc;

use async_trait::async_trait;
use futures::StreamExt;
use kaji_llm::{ModelProvider, ModelRequest, ProviderKind, ProviderWebSearch};
use kaji_protocol::{Message, StreamEvent, ToolSpec};
use kaji_tools::web_search::{
    HttpBackend, WEB_SEARCH, WebSearchAnswer, WebSearchHit, WebSearchProvider, WebSearchQuery,
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

    /// Whether a Task using `provider` may offer the provider's own search
    /// in its requests.
    pub fn is_provider_search(&self, provider: &Arc<dyn ModelProvider>) -> bool {
        matches!(self, Self::Native) && has_web_search(provider)
    }

    /// The searcher of a Task using `provider` and `model`.
    pub fn searcher(
        &self,
        provider: &Arc<dyn ModelProvider>,
        model: &str,
    ) -> Option<Arc<dyn WebSearcher>> {
        match self {
            Self::Native if has_web_search(provider) => Some(Arc::new(NativeWebSearch {
                provider: Arc::clone(provider),
                model: model.to_string(),
            })),
            Self::Native | Self::Off => None,
            Self::Backend(b) => Some(Arc::clone(b)),
        }
    }
}

/// Whether `provider`'s wire has a search of its own.
fn has_web_search(provider: &Arc<dyn ModelProvider>) -> bool {
    provider
        .name()
        .parse::<ProviderKind>()
        .is_ok_and(ProviderKind::has_web_search)
}

/// The provider search a request offers in place of `WebSearch`, which is
/// taken out of `specs`; `None` (and `specs` unchanged) when `specs` has
/// no `WebSearch`.
pub fn provider_search(specs: &mut Vec<ToolSpec>) -> Option<ProviderWebSearch> {
    let at = specs.iter().position(|s| s.name == WEB_SEARCH)?;
    specs.remove(at);
    Some(ProviderWebSearch {
        allowed_domains: Vec::new(),
        blocked_domains: Vec::new(),
        max_uses: MAX_USES,
    })
}

/// What a front end shows of one kept provider block.
#[derive(Debug, Clone, PartialEq)]
pub enum ServerView {
    /// A search starts: shown as a `WebSearch` call with this id and input.
    Call {
        /// The search's id (the result names it).
        id: String,
        /// What was searched (`{"query": …}`).
        input: Value,
    },
    /// What a search found, as a `WebSearch` result.
    Result {
        /// The search's id.
        id: String,
        /// The search failed.
        is_error: bool,
        /// The results, one title and URL a line, or the error.
        output: String,
    },
}

/// How a kept provider block shows: Anthropic's `server_tool_use` is a
/// call and its `web_search_tool_result` the result; a Responses
/// `web_search_call` item is both. Other blocks (citations) show nothing.
pub fn server_view(block: &Value) -> Vec<ServerView> {
    let id = |key: &str| text(block, key);
    match block.get("type").and_then(Value::as_str).unwrap_or("") {
        "server_tool_use" => vec![ServerView::Call {
            id: id("id"),
            input: block.get("input").cloned().unwrap_or(Value::Null),
        }],
        "web_search_tool_result" => vec![result_view(id("tool_use_id"), block)],
        "web_search_call" => {
            let query = block
                .pointer("/action/query")
                .cloned()
                .unwrap_or(Value::Null);
            vec![
                ServerView::Call {
                    id: id("id"),
                    input: serde_json::json!({ "query": query }),
                },
                result_view(id("id"), block),
            ]
        }
        _ => Vec::new(),
    }
}

fn result_view(id: String, block: &Value) -> ServerView {
    let mut hits = Vec::new();
    let (is_error, output) = match add_block(block, &mut hits) {
        Err(e) => (true, format!("WebSearch failed: {e}")),
        Ok(()) if hits.is_empty() => (false, "No results.".to_string()),
        Ok(()) => (
            false,
            hits.iter()
                .map(|h| {
                    if h.title == h.url {
                        h.url.clone()
                    } else {
                        format!("{} — {}", h.title, h.url)
                    }
                })
                .collect::<Vec<_>>()
                .join("\n"),
        ),
    };
    ServerView::Result {
        id,
        is_error,
        output,
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
            web_search: Some(ProviderWebSearch {
                allowed_domains: query.allowed_domains.clone(),
                blocked_domains: query.blocked_domains.clone(),
                max_uses: MAX_USES,
            }),
            wire_cache: None,
        };
        let who = self.describe();
        if !has_web_search(&self.provider) {
            return Err(format!(
                "{} has no web search of its own",
                self.provider.name()
            ));
        }
        let mut stream = self.provider.stream(request);
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn server_blocks_show_as_a_call_and_its_result() {
        let call = json!({"type": "server_tool_use", "id": "s1", "name": "web_search", "input": {"query": "q"}});
        assert_eq!(
            server_view(&call),
            vec![ServerView::Call {
                id: "s1".into(),
                input: json!({"query": "q"})
            }]
        );
        let found = json!({"type": "web_search_tool_result", "tool_use_id": "s1",
            "content": [{"type": "web_search_result", "url": "https://a.example/", "title": "A"}]});
        assert_eq!(
            server_view(&found),
            vec![ServerView::Result {
                id: "s1".into(),
                is_error: false,
                output: "A — https://a.example/".into()
            }]
        );
        let failed = json!({"type": "web_search_tool_result", "tool_use_id": "s1",
            "content": {"type": "web_search_tool_result_error", "error_code": "max_uses_exceeded"}});
        assert!(matches!(
            &server_view(&failed)[..],
            [ServerView::Result { is_error: true, output, .. }] if output.contains("max_uses_exceeded")
        ));
        let item = json!({"type": "web_search_call", "id": "ws1", "status": "completed",
            "action": {"type": "search", "query": "q", "sources": [{"type": "url", "url": "https://a.example/"}]}});
        let views = server_view(&item);
        assert_eq!(views.len(), 2);
        assert_eq!(
            views[0],
            ServerView::Call {
                id: "ws1".into(),
                input: json!({"query": "q"})
            }
        );
        assert!(server_view(&json!({"type": "url_citation"})).is_empty());
    }

    #[test]
    fn the_provider_search_replaces_web_search_in_the_specs() {
        let spec = |name: &str| ToolSpec {
            name: name.into(),
            description: String::new(),
            input_schema: json!({}),
        };
        let mut specs = vec![spec("Read"), spec(WEB_SEARCH)];
        let search = provider_search(&mut specs).unwrap();
        assert_eq!(search.max_uses, MAX_USES);
        assert_eq!(specs, vec![spec("Read")]);
        assert!(provider_search(&mut specs).is_none());
    }
}
