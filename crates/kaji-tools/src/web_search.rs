//! `WebSearch {query, allowed_domains?, blocked_domains?}`: a web search
//! whose results (title, URL, snippet) come back to the model as text.
//!
//! The tool itself only checks its input, applies the domain filters and
//! renders; the search is done by the session's [`WebSearcher`]: the model
//! provider's own search (the core's, Anthropic's server-side `web_search`
//! tool or the Responses API's), or a configured backend
//! ([`HttpBackend`]: SearXNG, Brave, Tavily). Without one, the call fails
//! with a result saying how to enable search.
//!
//! This module must never decide permissions (the call's access is
//! [`ToolAccess::External`]: rules name `WebSearch`, and the user is asked
//! otherwise), never send an API key anywhere but its backend's URL, and
//! never return more than [`MAX_RESULTS`] results or snippets longer than
//! [`MAX_SNIPPET_CHARS`].

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use kaji_protocol::ToolSpec;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::{Tool, ToolAccess, ToolContext, ToolError, ToolOutput, ToolRegistry, parse_input};

/// The tool's name.
pub const WEB_SEARCH: &str = "WebSearch";
/// At most this many results reach the model.
pub const MAX_RESULTS: usize = 10;
/// A snippet is cut to this many characters.
pub const MAX_SNIPPET_CHARS: usize = 400;
/// A provider's written answer is cut to this many characters.
pub const MAX_SUMMARY_CHARS: usize = 8_000;
/// A backend must answer within this long (`KAJI_WEBSEARCH_TIMEOUT_MS`
/// overrides it).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(20);

/// Adds `WebSearch` to `registry`.
pub(crate) fn register(registry: &mut ToolRegistry) {
    registry.register(Arc::new(WebSearchTool));
}

/// One search, as the model asked for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebSearchQuery {
    /// The search terms.
    pub query: String,
    /// Only results from these domains (and their subdomains).
    pub allowed_domains: Vec<String>,
    /// Never results from these domains (and their subdomains).
    pub blocked_domains: Vec<String>,
}

/// One result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebSearchHit {
    /// The page's title.
    pub title: String,
    /// Its URL.
    pub url: String,
    /// A few lines of it, when the search gives them.
    pub snippet: String,
}

/// What a search found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WebSearchAnswer {
    /// The results, best first.
    pub hits: Vec<WebSearchHit>,
    /// Text the search wrote about them (a provider's model answer), when
    /// there is some.
    pub summary: Option<String>,
}

/// Does the searches of a session.
#[async_trait]
pub trait WebSearcher: Send + Sync + std::fmt::Debug {
    /// What searches, for results and errors (`searxng at http://…`,
    /// `anthropic's web search`).
    fn describe(&self) -> String;

    /// Runs one search. The error text says what failed and where.
    async fn search(&self, query: &WebSearchQuery) -> Result<WebSearchAnswer, String>;
}

/// Which search a session uses (`[web_search] provider`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WebSearchProvider {
    /// The model provider's own search (Anthropic, OpenAI Responses).
    Native,
    /// A SearXNG instance's JSON API (`url` required).
    Searxng,
    /// The Brave Search API (key required).
    Brave,
    /// The Tavily API (key required).
    Tavily,
    /// No web search.
    Off,
}

impl WebSearchProvider {
    /// The name as written in settings.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Native => "native",
            Self::Searxng => "searxng",
            Self::Brave => "brave",
            Self::Tavily => "tavily",
            Self::Off => "off",
        }
    }
}

/// `[web_search]` in `config.toml`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebSearchSettings {
    /// Which search; unset: the provider's own at the provider's own API
    /// (api.anthropic.com, api.openai.com), none elsewhere.
    pub provider: Option<WebSearchProvider>,
    /// The backend's base URL (SearXNG: required; Brave and Tavily: their
    /// public API unless set).
    pub url: Option<String>,
    /// The environment variable holding the backend's API key.
    pub api_key_env: Option<String>,
}

/// A search backend reached over HTTP.
#[derive(Debug, Clone)]
pub struct HttpBackend {
    provider: WebSearchProvider,
    url: String,
    key: Option<String>,
    timeout: Duration,
}

impl HttpBackend {
    /// The backend `settings` name, its key read from the environment now.
    /// `Ok(None)` for `native`/`off`/unset; an error says what is missing.
    pub fn from_settings(settings: &WebSearchSettings) -> Result<Option<Self>, String> {
        let Some(provider) = settings.provider else {
            return Ok(None);
        };
        let default_url = match provider {
            WebSearchProvider::Native | WebSearchProvider::Off => return Ok(None),
            WebSearchProvider::Searxng => None,
            WebSearchProvider::Brave => Some("https://api.search.brave.com"),
            WebSearchProvider::Tavily => Some("https://api.tavily.com"),
        };
        let name = provider.as_str();
        let url = match (settings.url.as_deref(), default_url) {
            (Some(u), _) => u.trim().trim_end_matches('/').to_string(),
            (None, Some(d)) => d.to_string(),
            (None, None) => {
                return Err(format!(
                    "[web_search] provider = \"{name}\" needs `url` (the instance's address, e.g. \"http://localhost:8888\")"
                ));
            }
        };
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(format!(
                "[web_search] url {url:?} must start with http:// or https://"
            ));
        }
        let key = match settings.api_key_env.as_deref() {
            Some(var) => match std::env::var(var) {
                Ok(k) if !k.trim().is_empty() => Some(k.trim().to_string()),
                _ => {
                    return Err(format!(
                        "[web_search] api_key_env names {var}, which is not set in the environment"
                    ));
                }
            },
            None => None,
        };
        if key.is_none() && provider != WebSearchProvider::Searxng {
            return Err(format!(
                "[web_search] provider = \"{name}\" needs an API key: set `api_key_env` to the variable holding it"
            ));
        }
        let timeout = std::env::var("KAJI_WEBSEARCH_TIMEOUT_MS")
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .map_or(DEFAULT_TIMEOUT, Duration::from_millis);
        Ok(Some(Self {
            provider,
            url,
            key,
            timeout,
        }))
    }

    fn request(&self, client: &reqwest::Client, q: &WebSearchQuery) -> reqwest::RequestBuilder {
        let key = self.key.clone().unwrap_or_default();
        match self.provider {
            WebSearchProvider::Brave => client
                .get(with_params(
                    &format!("{}/res/v1/web/search", self.url),
                    &[("q", &q.query), ("count", "20")],
                ))
                .header("X-Subscription-Token", key)
                .header(reqwest::header::ACCEPT, "application/json"),
            WebSearchProvider::Tavily => client
                .post(format!("{}/search", self.url))
                .bearer_auth(key)
                .json(&json!({
                    "query": q.query,
                    "max_results": MAX_RESULTS,
                    "include_domains": q.allowed_domains,
                    "exclude_domains": q.blocked_domains,
                })),
            _ => {
                let r = client.get(with_params(
                    &format!("{}/search", self.url),
                    &[("q", &q.query), ("format", "json")],
                ));
                match &self.key {
                    Some(k) => r.bearer_auth(k),
                    None => r,
                }
            }
        }
    }

    /// The hits of a backend's JSON answer.
    fn hits(&self, body: &Value) -> Option<Vec<WebSearchHit>> {
        let (list, snippet_key) = match self.provider {
            WebSearchProvider::Brave => (body.pointer("/web/results")?, "description"),
            _ => (body.get("results")?, "content"),
        };
        let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        Some(
            list.as_array()?
                .iter()
                .filter(|r| r.get("url").is_some_and(Value::is_string))
                .map(|r| WebSearchHit {
                    title: text(r, "title"),
                    url: text(r, "url"),
                    snippet: text(r, snippet_key),
                })
                .collect(),
        )
    }
}

#[async_trait]
impl WebSearcher for HttpBackend {
    fn describe(&self) -> String {
        format!("{} at {}", self.provider.as_str(), self.url)
    }

    async fn search(&self, query: &WebSearchQuery) -> Result<WebSearchAnswer, String> {
        let who = self.describe();
        kaji_tasks::tls::install_crypto_provider();
        let client = reqwest::Client::builder()
            .timeout(self.timeout)
            .user_agent(concat!("kaji/", env!("CARGO_PKG_VERSION"), " (WebSearch)"))
            .build()
            .map_err(|e| format!("cannot set up the HTTP client: {e}"))?;
        let response = self.request(&client, query).send().await.map_err(|e| {
            if e.is_timeout() {
                format!(
                    "{who} did not answer within {} ms (KAJI_WEBSEARCH_TIMEOUT_MS sets the limit)",
                    self.timeout.as_millis()
                )
            } else if e.is_connect() {
                format!("cannot connect to {who}: it is down or refuses connections ({e})")
            } else {
                format!("the request to {who} failed: {e}")
            }
        })?;
        let status = response.status();
        let body = response
            .bytes()
            .await
            .map_err(|e| format!("reading the answer of {who} failed: {e}"))?;
        if !status.is_success() {
            let text = String::from_utf8_lossy(&body);
            let excerpt: String = text.chars().take(200).collect();
            return Err(format!("{who} answered HTTP {status}: {excerpt}"));
        }
        let json: Value = serde_json::from_slice(&body)
            .map_err(|e| format!("{who} did not answer with JSON ({e})"))?;
        let hits = self
            .hits(&json)
            .ok_or_else(|| format!("{who} answered JSON without a list of results"))?;
        Ok(WebSearchAnswer {
            hits,
            summary: None,
        })
    }
}

/// `base` with `params` as its query string (`base` was checked to be an
/// http(s) URL; one that still does not parse is sent as it is and fails).
fn with_params(base: &str, params: &[(&str, &str)]) -> String {
    reqwest::Url::parse_with_params(base, params)
        .map_or_else(|_| base.to_string(), |u| u.to_string())
}

/// The `WebSearch` tool.
struct WebSearchTool;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct WebSearchInput {
    /// What to search for.
    #[schemars(length(min = 2))]
    query: String,
    /// Keep only results from these domains (and their subdomains).
    #[serde(default)]
    allowed_domains: Option<Vec<String>>,
    /// Drop results from these domains (and their subdomains).
    #[serde(default)]
    blocked_domains: Option<Vec<String>>,
}

/// A domain as written in a filter, bare and in lower case
/// (`https://Docs.rs/` → `docs.rs`).
fn bare_domain(d: &str) -> String {
    let d = d.trim().to_ascii_lowercase();
    let d = d
        .strip_prefix("https://")
        .or_else(|| d.strip_prefix("http://"))
        .unwrap_or(&d);
    let d = d.split('/').next().unwrap_or("");
    d.trim_start_matches("*.")
        .trim_start_matches("www.")
        .to_string()
}

/// Whether `url`'s host is `domain` or under it.
fn in_domain(url: &str, domain: &str) -> bool {
    let host = crate::web_fetch::url_domain(url);
    let host = host.trim_start_matches("www.");
    host == domain || host.ends_with(&format!(".{domain}"))
}

/// Keeps the hits the filters let through.
pub fn filter_hits(hits: Vec<WebSearchHit>, q: &WebSearchQuery) -> Vec<WebSearchHit> {
    let allowed: Vec<String> = q.allowed_domains.iter().map(|d| bare_domain(d)).collect();
    let blocked: Vec<String> = q.blocked_domains.iter().map(|d| bare_domain(d)).collect();
    hits.into_iter()
        .filter(|h| allowed.is_empty() || allowed.iter().any(|d| in_domain(&h.url, d)))
        .filter(|h| !blocked.iter().any(|d| in_domain(&h.url, d)))
        .collect()
}

fn cut(text: &str, max: usize) -> String {
    let text = text.trim();
    match text.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_string(),
    }
}

/// The answer as the model reads it.
fn render(q: &WebSearchQuery, who: &str, answer: &WebSearchAnswer) -> String {
    let mut out = format!(
        "Web search results for query: {:?} (via {who})\n\n",
        q.query
    );
    if answer.hits.is_empty() {
        out.push_str("No results");
        if !q.allowed_domains.is_empty() || !q.blocked_domains.is_empty() {
            out.push_str(" (after the domain filters)");
        }
        out.push_str(".\n");
    }
    for (i, hit) in answer.hits.iter().take(MAX_RESULTS).enumerate() {
        let _ = writeln!(out, "{}. {}\n   {}", i + 1, cut(&hit.title, 200), hit.url);
        if !hit.snippet.trim().is_empty() {
            let _ = writeln!(out, "   {}", cut(&hit.snippet, MAX_SNIPPET_CHARS));
        }
    }
    if let Some(summary) = answer.summary.as_deref().filter(|s| !s.trim().is_empty()) {
        let _ = write!(out, "\n{}\n", cut(summary, MAX_SUMMARY_CHARS));
    }
    out.push_str("\nCite the sources you use from these results as markdown links in your answer.");
    out
}

/// How many results a search returned (`5 results`, `No results`): read
/// from the answer as the tool renders it (numbered hits, each with its
/// URL on the next line), or from a provider's own search as the core
/// shows it (one title and URL a line, or `No results.`).
fn web_search_summary(output: &str) -> String {
    let found = if output.starts_with("Web search results for query:") {
        let lines: Vec<&str> = output.lines().collect();
        // Hits are numbered from 1 in order; a summary's own numbered
        // list, after them, has no URL line under each item.
        let mut next = 1;
        for pair in lines.windows(2) {
            if next <= MAX_RESULTS
                && pair[0].starts_with(&format!("{next}. "))
                && pair[1].starts_with("   ")
            {
                next += 1;
            }
        }
        next - 1
    } else if output.trim_end() == "No results." {
        0
    } else {
        output.lines().filter(|l| !l.trim().is_empty()).count()
    };
    match found {
        0 => "No results".to_string(),
        n => crate::count_of(n, "result"),
    }
}

/// What the result says when no search is set up.
pub const NOT_CONFIGURED: &str = "WebSearch is not available in this session: the model provider \
has no web search of its own that kaji can use, and no search backend is configured. To enable it, \
add a backend to ~/.kaji/config.toml, for example:\n\n[web_search]\nprovider = \"searxng\"   # or \
\"brave\", \"tavily\"\nurl = \"http://localhost:8888\"   # the SearXNG instance (Brave and Tavily \
need none)\napi_key_env = \"SEARCH_API_KEY\"   # Brave and Tavily: the variable holding the key\n\n\
With provider = \"anthropic\" or \"openai-responses\" at the provider's own API the provider's own \
search is used unless [web_search] says otherwise; for another server of those formats that runs it, \
set provider = \"native\". Until then, use WebFetch on a URL you know.";

#[async_trait]
impl Tool for WebSearchTool {
    fn name(&self) -> &'static str {
        WEB_SEARCH
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: WEB_SEARCH.to_string(),
            description: "Searches the web and returns the results (title, URL and a snippet each), \
for information beyond your training data: current documentation, releases, error messages, news. \
`allowed_domains` keeps only results from those domains, `blocked_domains` drops results from them. \
Search with the current year where it matters. Cite the sources you use as markdown links. Read-only; \
the user may be asked to allow it."
                .to_string(),
            input_schema: crate::schema::input_schema::<WebSearchInput>(),
        }
    }

    fn kind(&self) -> crate::ToolKind {
        crate::ToolKind::Fetch
    }

    fn title(&self, input: &Value) -> String {
        crate::title_with(WEB_SEARCH, input, "query")
    }

    fn is_read_only(&self) -> bool {
        true
    }

    fn summary(&self, _input: &Value, output: &str) -> Option<String> {
        Some(web_search_summary(output))
    }

    fn access(&self, _input: &Value, _ctx: &ToolContext) -> ToolAccess {
        // The query leaves the machine: asked for (rule `WebSearch`) like
        // any tool that reaches outside.
        ToolAccess::External
    }

    async fn call(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let input: WebSearchInput = parse_input(WEB_SEARCH, input)?;
        if input.query.trim().chars().count() < 2 {
            return Err(ToolError::InvalidInput {
                tool: WEB_SEARCH.into(),
                message: "query must be at least 2 characters".into(),
            });
        }
        let query = WebSearchQuery {
            query: input.query.trim().to_string(),
            allowed_domains: input.allowed_domains.unwrap_or_default(),
            blocked_domains: input.blocked_domains.unwrap_or_default(),
        };
        let Some(searcher) = ctx.web_search.as_ref() else {
            return Err(ToolError::Refused(NOT_CONFIGURED.to_string()));
        };
        let who = searcher.describe();
        let answer = tokio::select! {
            a = searcher.search(&query) => a,
            _ = ctx.cancel.cancelled() => return Err(ToolError::Cancelled),
        }
        .map_err(|e| {
            ToolError::Refused(format!(
                "WebSearch failed: {e}. Try again later, or use WebFetch on a URL you know."
            ))
        })?;
        let found = answer.hits.len();
        let answer = WebSearchAnswer {
            hits: filter_hits(answer.hits, &query),
            summary: answer.summary,
        };
        let content = render(&query, &who, &answer);
        let urls: Vec<&str> = answer.hits.iter().map(|h| h.url.as_str()).collect();
        Ok(ToolOutput {
            content,
            data: Some(json!({"query": query.query, "via": who, "found": found, "urls": urls})),
            ..ToolOutput::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hit(url: &str) -> WebSearchHit {
        WebSearchHit {
            title: "t".into(),
            url: url.into(),
            snippet: String::new(),
        }
    }

    #[test]
    fn domain_filters_match_subdomains_only() {
        let q = WebSearchQuery {
            query: "x".into(),
            allowed_domains: vec!["https://Docs.rs/".into(), "rust-lang.org".into()],
            blocked_domains: vec!["blog.rust-lang.org".into()],
        };
        let hits = vec![
            hit("https://docs.rs/tokio"),
            hit("https://notdocs.rs/x"),
            hit("https://doc.rust-lang.org/std"),
            hit("https://blog.rust-lang.org/2026"),
            hit("https://example.com/"),
        ];
        let urls: Vec<String> = filter_hits(hits, &q).into_iter().map(|h| h.url).collect();
        assert_eq!(
            urls,
            ["https://docs.rs/tokio", "https://doc.rust-lang.org/std"]
        );
    }

    #[test]
    fn the_summary_counts_the_results() {
        let q = WebSearchQuery {
            query: "rust".into(),
            allowed_domains: Vec::new(),
            blocked_domains: vec!["example.com".into()],
        };
        let mut answer = WebSearchAnswer {
            hits: vec![hit("https://docs.rs/a"), hit("https://docs.rs/b")],
            // A written answer with a list of its own is no result.
            summary: Some("1. first\n2. second\n3. third".into()),
        };
        answer.hits[1].snippet = "a snippet".into();
        let rendered = render(&q, "searxng", &answer);
        assert_eq!(web_search_summary(&rendered), "2 results");
        answer.hits.truncate(1);
        assert_eq!(
            web_search_summary(&render(&q, "searxng", &answer)),
            "1 result"
        );
        answer.hits.clear();
        assert_eq!(
            web_search_summary(&render(&q, "searxng", &answer)),
            "No results"
        );
        // A provider's own search, as the core shows it.
        assert_eq!(
            web_search_summary("A — https://a.example/\nhttps://b.example/"),
            "2 results"
        );
        assert_eq!(web_search_summary("No results."), "No results");
    }

    #[test]
    fn backends_say_what_is_missing() {
        let s = WebSearchSettings {
            provider: Some(WebSearchProvider::Searxng),
            ..Default::default()
        };
        assert!(
            HttpBackend::from_settings(&s)
                .unwrap_err()
                .contains("needs `url`")
        );
        let s = WebSearchSettings {
            provider: Some(WebSearchProvider::Brave),
            ..Default::default()
        };
        assert!(
            HttpBackend::from_settings(&s)
                .unwrap_err()
                .contains("api_key_env")
        );
        let s = WebSearchSettings {
            provider: Some(WebSearchProvider::Tavily),
            api_key_env: Some("KAJI_TEST_SURELY_UNSET_VAR".into()),
            ..Default::default()
        };
        assert!(
            HttpBackend::from_settings(&s)
                .unwrap_err()
                .contains("not set")
        );
    }
}
