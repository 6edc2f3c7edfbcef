//! Which search `WebSearch` uses in a session, and the provider's own
//! search.
//!
//! `[web_search] provider` chooses: `native` uses the model provider's
//! search when its wire has one (Anthropic's server-side `web_search`
//! tool, the Responses API's hosted `web_search`); unset does so only at
//! the provider's own API ([`OFFICIAL_HOSTS`]), where it is known to work,
//! since a proxy or compatible server that rejects server tools would fail
//! every request that offers one. A server that rejects it anyway (HTTP
//! 400 or 422 naming it, [`rejects_provider_search`]) gets it no more for
//! the rest of the session ([`ProviderSearch::withdraw`]). When the
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
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use futures::StreamExt;
use kaji_llm::{
    LlmError, ModelProvider, ModelRequest, ProviderConfig, ProviderKind, ProviderWebSearch,
};
use kaji_protocol::{Message, StreamEvent, ToolSpec};
use kaji_tools::web_search::{
    HttpBackend, WEB_SEARCH, WebSearchAnswer, WebSearchHit, WebSearchProvider, WebSearchQuery,
    WebSearchSettings, WebSearcher,
};
use serde_json::Value;

/// At most this many searches in one provider request.
const MAX_USES: u32 = 5;

/// The hosts whose search is offered without `provider = "native"`: the
/// providers' own APIs, one for each wire that has a search.
pub const OFFICIAL_HOSTS: [(ProviderKind, &str); 2] = [
    (ProviderKind::Anthropic, "api.anthropic.com"),
    (ProviderKind::OpenAiResponses, "api.openai.com"),
];

/// The session's search setup, from `[web_search]`.
#[derive(Debug, Clone)]
pub enum WebSearchSetup {
    /// The model provider's own search, where it has one; withdrawn once
    /// the server rejected it.
    Native(ProviderSearch),
    /// A configured backend (or one set up wrongly, which says why).
    Backend(Arc<dyn WebSearcher>),
    /// No web search.
    Off,
}

impl WebSearchSetup {
    /// The setup `settings` describe for the model provider `config`; the
    /// backend's key is read from the environment now.
    pub fn from_settings(settings: Option<&WebSearchSettings>, config: &ProviderConfig) -> Self {
        let unset = || {
            if is_official_host(config) {
                Self::Native(ProviderSearch::default())
            } else {
                Self::Off
            }
        };
        let Some(settings) = settings else {
            return unset();
        };
        match settings.provider {
            None => unset(),
            Some(WebSearchProvider::Native) => Self::Native(ProviderSearch::default()),
            Some(WebSearchProvider::Off) => Self::Off,
            Some(_) => match HttpBackend::from_settings(settings) {
                Ok(Some(backend)) => Self::Backend(Arc::new(backend)),
                Ok(None) => unset(),
                Err(message) => Self::Backend(Arc::new(Misconfigured(message))),
            },
        }
    }

    /// The provider's own search a Task using `provider` may offer in its
    /// requests (while it is not withdrawn); `None` when it may not.
    pub fn provider_search(&self, provider: &Arc<dyn ModelProvider>) -> Option<ProviderSearch> {
        match self {
            Self::Native(search) if has_web_search(provider) => Some(search.clone()),
            _ => None,
        }
    }

    /// The searcher of a Task using `provider` and `model`.
    pub fn searcher(
        &self,
        provider: &Arc<dyn ModelProvider>,
        model: &str,
    ) -> Option<Arc<dyn WebSearcher>> {
        match self {
            Self::Native(search) if has_web_search(provider) => Some(Arc::new(NativeWebSearch {
                provider: Arc::clone(provider),
                model: model.to_string(),
                search: search.clone(),
            })),
            Self::Native(_) | Self::Off => None,
            Self::Backend(b) => Some(Arc::clone(b)),
        }
    }
}

/// Whether the session's requests may still offer the provider's search:
/// one switch shared by all its Tasks (sub-agents too). A server that
/// rejected the search tool once is not offered it again.
#[derive(Debug, Clone, Default)]
pub struct ProviderSearch(Arc<AtomicBool>);

impl ProviderSearch {
    /// Whether it was withdrawn.
    pub fn is_withdrawn(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }

    /// Withdraws it for the rest of the session; true the first time.
    pub fn withdraw(&self) -> bool {
        !self.0.swap(true, Ordering::SeqCst)
    }
}

/// Whether `err` is a server refusing the provider's search tool: HTTP 400
/// (or 422, a validating gateway's) whose message names it.
pub fn rejects_provider_search(err: &LlmError) -> bool {
    let LlmError::Http {
        status: 400 | 422,
        message,
        ..
    } = err
    else {
        return false;
    };
    let message = message.to_ascii_lowercase();
    [
        "web_search",
        "web search",
        "websearch",
        "server tool",
        "server_tool",
        "hosted tool",
    ]
    .iter()
    .any(|name| message.contains(name))
}

/// Whether `config` is the provider's own API ([`OFFICIAL_HOSTS`]), over
/// https.
fn is_official_host(config: &ProviderConfig) -> bool {
    let Some(rest) = config.base_url.trim().strip_prefix("https://") else {
        return false;
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = authority.rsplit('@').next().unwrap_or("");
    let host = host.split(':').next().unwrap_or("").trim_end_matches('.');
    OFFICIAL_HOSTS
        .iter()
        .any(|(kind, official)| *kind == config.kind && host.eq_ignore_ascii_case(official))
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
    /// The session's switch: a rejected search is not sent again.
    search: ProviderSearch,
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
        if self.search.is_withdrawn() {
            return Err(format!("{WITHDRAWN} {SET_A_BACKEND}"));
        }
        let mut stream = self.provider.stream(request);
        let mut answer = WebSearchAnswer::default();
        let mut summary = String::new();
        while let Some(event) = stream.next().await {
            let event = event.map_err(|e| {
                if rejects_provider_search(&e) {
                    self.search.withdraw();
                }
                format!("{who} failed: {e}")
            })?;
            match event {
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

/// Why the provider's search is no longer used.
const WITHDRAWN: &str =
    "The model server rejected the provider's web search tool earlier in this session.";

/// What to do about a server without the provider's search.
pub const SET_A_BACKEND: &str = "To search anyway, set a backend in [web_search] (provider = \"searxng\", \"brave\" or \"tavily\"); provider = \"off\" turns search off.";

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
        // Its result line counts what the search found.
        let registry = kaji_tools::builtin_tools();
        let tool = registry.get(kaji_tools::web_search::WEB_SEARCH).unwrap();
        let summary = |view: &ServerView| match view {
            ServerView::Result { output, .. } => {
                kaji_tools::result_summary(Some(tool.as_ref()), &Value::Null, output, false)
            }
            ServerView::Call { .. } => panic!("not a result"),
        };
        assert_eq!(summary(&server_view(&found)[0]), "1 result");
        let none = json!({"type": "web_search_tool_result", "tool_use_id": "s1", "content": []});
        assert_eq!(summary(&server_view(&none)[0]), "No results");
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
    fn only_the_providers_own_hosts_get_the_search_unasked() {
        let official = |kind, url: &str| is_official_host(&ProviderConfig::new(kind, "m", url));
        assert!(official(
            ProviderKind::Anthropic,
            "https://api.anthropic.com"
        ));
        assert!(official(
            ProviderKind::Anthropic,
            "https://API.anthropic.com./"
        ));
        assert!(official(
            ProviderKind::OpenAiResponses,
            "https://api.openai.com/v1"
        ));
        assert!(official(
            ProviderKind::OpenAiResponses,
            "https://api.openai.com:443/v1"
        ));
        for (kind, url) in [
            (ProviderKind::Anthropic, "http://api.anthropic.com"),
            (ProviderKind::Anthropic, "https://api.openai.com/v1"),
            (ProviderKind::Anthropic, "https://litellm.internal:4000"),
            (
                ProviderKind::Anthropic,
                "https://api.anthropic.com.evil.example",
            ),
            (
                ProviderKind::Anthropic,
                "https://api.anthropic.com@proxy.example",
            ),
            (
                ProviderKind::OpenAiResponses,
                "https://x.openai.azure.com/openai",
            ),
            (ProviderKind::OpenAi, "https://api.openai.com/v1"),
        ] {
            assert!(!official(kind, url), "{kind} {url}");
        }
        let local = ProviderConfig::new(ProviderKind::Anthropic, "m", "http://127.0.0.1:9/");
        assert!(matches!(
            WebSearchSetup::from_settings(None, &local),
            WebSearchSetup::Off
        ));
        let native = WebSearchSettings {
            provider: Some(WebSearchProvider::Native),
            ..WebSearchSettings::default()
        };
        assert!(matches!(
            WebSearchSetup::from_settings(Some(&native), &local),
            WebSearchSetup::Native(_)
        ));
        let api = ProviderConfig::new(ProviderKind::Anthropic, "m", "https://api.anthropic.com");
        assert!(matches!(
            WebSearchSetup::from_settings(None, &api),
            WebSearchSetup::Native(_)
        ));
    }

    #[test]
    fn a_400_naming_the_search_tool_is_a_rejection_of_it() {
        let http = |status, message: &str| LlmError::Http {
            provider: "anthropic",
            url: "http://x/v1/messages".into(),
            status,
            message: message.into(),
        };
        assert!(rejects_provider_search(&http(
            400,
            "tools.0: Input tag 'web_search_20250305' found using 'type' does not match"
        )));
        assert!(rejects_provider_search(&http(
            422,
            "Hosted tool 'web_search' is not supported"
        )));
        assert!(!rejects_provider_search(&http(
            400,
            "max_tokens: too large"
        )));
        assert!(!rejects_provider_search(&http(
            500,
            "web_search backend down"
        )));
        let search = ProviderSearch::default();
        assert!(!search.is_withdrawn());
        assert!(search.clone().withdraw());
        assert!(!search.withdraw());
        assert!(search.is_withdrawn());
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
