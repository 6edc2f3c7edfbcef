//! `WebFetch {url, prompt?}`: an HTTP(S) GET whose page comes back to the
//! model as markdown.
//!
//! HTML (and XHTML) is converted with `htmd`; other text types (plain
//! text, JSON, XML, CSV, JavaScript, …) pass through as they are; binary
//! types are refused. There is no second model call: the `prompt` is
//! echoed above the page so that the model reads the page with its
//! question in front of it.
//!
//! Limits, each overridable from the environment: the body is read in
//! chunks and refused as soon as it passes `KAJI_WEBFETCH_MAX_BYTES`
//! (default 10 MiB; a declared `Content-Length` over it is refused before
//! any of the body is read), at most `KAJI_WEBFETCH_MAX_REDIRECTS`
//! redirects (default 10; a loop is named as one), and the whole request
//! must end within `KAJI_WEBFETCH_TIMEOUT_MS` (default 30 s).
//!
//! Every hop is held to what was decided: a redirect is followed only to
//! the same canonical host (`kaji_policy::host`: the parsed address, not
//! the text); one to another host is not followed, and the model is told
//! to fetch that URL itself, which the core then decides like any URL. A
//! name that is not itself local must not resolve to an address on this
//! machine or a private network (those are asked for by address).
//!
//! This tool must never read a body whole before checking its size, never
//! follow a redirect to a scheme other than http or https or to another
//! host, and never decide permissions: [`Tool::access`] returns
//! [`ToolAccess::Network`] with the URL's canonical host, and the core
//! asks per domain.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use kaji_protocol::ToolSpec;
use reqwest::Url;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::{Tool, ToolAccess, ToolContext, ToolError, ToolOutput, ToolRegistry, parse_input};

/// The tool's name.
pub const WEB_FETCH: &str = "WebFetch";
/// Overrides the body size limit, in bytes.
pub const MAX_BYTES_ENV: &str = "KAJI_WEBFETCH_MAX_BYTES";
/// Overrides the redirect limit.
pub const MAX_REDIRECTS_ENV: &str = "KAJI_WEBFETCH_MAX_REDIRECTS";
/// Overrides the request timeout, in milliseconds.
pub const TIMEOUT_ENV: &str = "KAJI_WEBFETCH_TIMEOUT_MS";
/// The default body size limit: 10 MiB.
pub const DEFAULT_MAX_BYTES: u64 = 10 * 1024 * 1024;
/// The default redirect limit.
pub const DEFAULT_MAX_REDIRECTS: usize = 10;
/// The default request timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// Adds `WebFetch` to `registry`.
pub(crate) fn register(registry: &mut ToolRegistry) {
    registry.register(Arc::new(WebFetchTool));
}

fn env_number(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok())
}

/// The limits of one fetch.
#[derive(Debug, Clone, Copy)]
struct Limits {
    max_bytes: u64,
    max_redirects: usize,
    timeout: Duration,
}

impl Limits {
    fn from_env() -> Self {
        Self {
            max_bytes: env_number(MAX_BYTES_ENV).unwrap_or(DEFAULT_MAX_BYTES),
            max_redirects: env_number(MAX_REDIRECTS_ENV)
                .map_or(DEFAULT_MAX_REDIRECTS, |n| n as usize),
            timeout: env_number(TIMEOUT_ENV).map_or(DEFAULT_TIMEOUT, Duration::from_millis),
        }
    }
}

/// The `WebFetch` tool.
struct WebFetchTool;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct WebFetchInput {
    /// The absolute http:// or https:// URL to fetch.
    url: String,
    /// What to look for in the page.
    #[serde(default)]
    prompt: Option<String>,
}

fn refused(message: impl std::fmt::Display) -> ToolError {
    ToolError::Refused(format!("{WEB_FETCH}: {message}"))
}

/// Parses and checks the URL: absolute, http or https, with a host.
fn parse_url(raw: &str) -> Result<Url, ToolError> {
    let raw = raw.trim();
    let url = Url::parse(raw).map_err(|e| {
        refused(format!(
            "{raw:?} is not a valid URL ({e}); give an absolute http:// or https:// URL"
        ))
    })?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(refused(format!(
            "{raw:?} uses the {}: scheme; only http and https URLs can be fetched",
            url.scheme()
        )));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(refused(format!("{raw:?} has no host")));
    }
    Ok(url)
}

/// The lower-case host of a URL the model gave, or "" when it has none.
pub fn url_domain(raw: &str) -> String {
    Url::parse(raw.trim())
        .ok()
        .and_then(|u| {
            u.host_str()
                .and_then(kaji_policy::host::canonical_host_name)
        })
        .unwrap_or_default()
}

/// Why the redirect policy stopped.
#[derive(Debug)]
struct RedirectStop(String);

impl std::fmt::Display for RedirectStop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for RedirectStop {}

fn redirect_policy(max: usize) -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(move |attempt| {
        let next = attempt.url().clone();
        if !matches!(next.scheme(), "http" | "https") {
            let why = format!("a redirect leads to {next}, which is not http or https");
            return attempt.error(RedirectStop(why));
        }
        if attempt.previous().contains(&next) {
            let chain: Vec<String> = attempt.previous().iter().map(Url::to_string).collect();
            let why = format!(
                "redirect loop: {} redirects back to {next}",
                chain.join(" -> ")
            );
            return attempt.error(RedirectStop(why));
        }
        // Another host needs its own decision: the model is told where the
        // page went and fetches it as a new URL (checked, and asked for,
        // like any other).
        let first = attempt.previous().first().cloned();
        if let Some(first) = first
            && canonical(&first) != canonical(&next)
        {
            let why = format!(
                "{first} redirects to {next}, on another host; WebFetch follows redirects only \
                 within one host: to read it, call WebFetch with {next} (a new host is checked, \
                 and may ask, like any URL)"
            );
            return attempt.error(RedirectStop(why));
        }
        if attempt.previous().len() > max {
            let why = format!("more than {max} redirects (the last one to {next})");
            return attempt.error(RedirectStop(why));
        }
        attempt.follow()
    })
}

/// A URL's canonical host (`kaji_policy::host`), what rules are matched on.
fn canonical(url: &Url) -> Option<String> {
    url.host_str()
        .and_then(kaji_policy::host::canonical_host_name)
}

/// Resolves names for WebFetch: a name that is not itself local
/// (`localhost`) must not resolve to an address on this machine or a
/// private network — the decision was made on the name, so such an
/// address would not have been asked for. IP literals never come here.
struct PublicResolver;

impl reqwest::dns::Resolve for PublicResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let host = name.as_str().to_string();
        Box::pin(async move {
            let addrs: Vec<std::net::SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let local_name = kaji_policy::host::canonical_host_name(&host)
                .is_some_and(|h| kaji_policy::host::is_local_host(&h));
            if !local_name
                && let Some(local) = addrs
                    .iter()
                    .find(|a| kaji_policy::host::is_local_ip(a.ip()))
            {
                let why = format!(
                    "{host} resolves to {}, an address on this machine or a private network; \
                     WebFetch fetches such an address only by its own address (which asks)",
                    local.ip()
                );
                return Err(Box::new(RedirectStop(why)) as Box<dyn std::error::Error + Send + Sync>);
            }
            Ok(Box::new(addrs.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// The whole chain of an error's causes, one clause each.
fn causes(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = vec![e.to_string()];
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        source = s.source();
    }
    parts.join(": ")
}

fn request_error(url: &Url, e: &reqwest::Error, limits: Limits) -> ToolError {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = source {
        if let Some(stop) = s.downcast_ref::<RedirectStop>() {
            return refused(format!("cannot fetch {url}: {stop}"));
        }
        source = s.source();
    }
    if e.is_timeout() {
        return refused(format!(
            "{url} did not answer within {} ms ({TIMEOUT_ENV} sets the limit)",
            limits.timeout.as_millis()
        ));
    }
    if e.is_connect() {
        return refused(format!(
            "cannot connect to {} ({}): the host is down, unknown or refuses connections; check the URL",
            url.host_str().unwrap_or("?"),
            causes(e)
        ));
    }
    refused(format!("fetching {url} failed: {}", causes(e)))
}

/// What the body is, from its `Content-Type` (and, without one, its first
/// bytes).
#[derive(Debug, PartialEq, Eq)]
enum BodyKind {
    Html,
    Text,
    Binary,
}

fn body_kind(content_type: Option<&str>, first: &[u8]) -> BodyKind {
    let Some(ct) = content_type else {
        let head = &first[..first.len().min(1024)];
        let lower = String::from_utf8_lossy(head).to_ascii_lowercase();
        return if head.contains(&0) {
            BodyKind::Binary
        } else if lower.contains("<html") || lower.contains("<!doctype html") {
            BodyKind::Html
        } else {
            BodyKind::Text
        };
    };
    let essence = ct
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    match essence.as_str() {
        "text/html" | "application/xhtml+xml" => BodyKind::Html,
        e if e.starts_with("text/") => BodyKind::Text,
        "application/json"
        | "application/xml"
        | "application/javascript"
        | "application/x-javascript"
        | "application/ecmascript"
        | "application/toml"
        | "application/yaml"
        | "application/x-yaml"
        | "application/x-sh"
        | "application/sql"
        | "application/graphql" => BodyKind::Text,
        e if e.ends_with("+json") || e.ends_with("+xml") => BodyKind::Text,
        _ => BodyKind::Binary,
    }
}

/// A fetched page.
struct Page {
    final_url: Url,
    status: u16,
    content_type: String,
    body: Vec<u8>,
}

async fn fetch(url: &Url, limits: Limits) -> Result<Page, ToolError> {
    kaji_tasks::tls::install_crypto_provider();
    let client = reqwest::Client::builder()
        .redirect(redirect_policy(limits.max_redirects))
        .dns_resolver(std::sync::Arc::new(PublicResolver))
        .timeout(limits.timeout)
        .user_agent(concat!("kaji/", env!("CARGO_PKG_VERSION"), " (WebFetch)"))
        .build()
        .map_err(|e| refused(format!("cannot set up the HTTP client: {}", causes(&e))))?;
    let mut response = client
        .get(url.clone())
        .header(
            reqwest::header::ACCEPT,
            "text/html, text/markdown, text/plain, application/json;q=0.9, */*;q=0.5",
        )
        .send()
        .await
        .map_err(|e| request_error(url, &e, limits))?;
    let final_url = response.url().clone();
    let status = response.status();
    if !status.is_success() {
        return Err(refused(format!(
            "{final_url} answered HTTP {status}; check the URL (nothing was read)"
        )));
    }
    let content_type = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    if let Some(ct) = &content_type
        && body_kind(Some(ct), &[]) == BodyKind::Binary
    {
        return Err(refused(format!(
            "{final_url} is {ct}, not text: WebFetch reads web pages and text, not binary files"
        )));
    }
    let too_big = |what: String| {
        refused(format!(
            "{final_url} is {what}, more than the {} bytes WebFetch reads ({MAX_BYTES_ENV} sets the limit); fetch a smaller page or a raw text version",
            limits.max_bytes
        ))
    };
    if let Some(len) = response.content_length()
        && len > limits.max_bytes
    {
        return Err(too_big(format!("{len} bytes long")));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| request_error(&final_url, &e, limits))?
    {
        if body.len() as u64 + chunk.len() as u64 > limits.max_bytes {
            return Err(too_big("longer than that (the rest was not read)".into()));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Page {
        final_url,
        status: status.as_u16(),
        content_type: content_type.unwrap_or_default(),
        body,
    })
}

/// The page as the model reads it.
fn render(page: &Page) -> Result<(BodyKind, String), ToolError> {
    let kind = body_kind(
        Some(page.content_type.as_str()).filter(|c| !c.is_empty()),
        &page.body,
    );
    let text = String::from_utf8_lossy(&page.body);
    match kind {
        BodyKind::Binary => Err(refused(format!(
            "{} is binary data, not text: WebFetch reads web pages and text",
            page.final_url
        ))),
        BodyKind::Text => Ok((kind, text.into_owned())),
        BodyKind::Html => {
            let converter = htmd::HtmlToMarkdown::builder()
                .skip_tags(vec![
                    "script", "style", "noscript", "template", "svg", "head",
                ])
                .build();
            // The converter recurses per level: deep nesting is cut first.
            let text = crate::html_depth::limit_depth(&text, crate::html_depth::MAX_DEPTH);
            let markdown = converter.convert(&text).map_err(|e| {
                refused(format!(
                    "cannot convert the HTML of {} to markdown: {e}",
                    page.final_url
                ))
            })?;
            Ok((kind, markdown))
        }
    }
}

#[async_trait]
impl Tool for WebFetchTool {
    fn name(&self) -> &'static str {
        WEB_FETCH
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: WEB_FETCH.to_string(),
            description: "Fetches a web page or text file over HTTP(S) and returns its content: HTML is \
converted to markdown, other text (plain text, JSON, XML, …) comes back as it is, binary files are refused. \
Use it to read documentation, issues or API references the user points to. `prompt` is what you want to \
learn from the page; it is shown above the page to keep you focused. Pages larger than the size limit are \
refused; redirects are followed (a few), and the result names the final URL. Read-only; the user may be \
asked to allow each new domain."
                .to_string(),
            input_schema: crate::schema::input_schema::<WebFetchInput>(),
        }
    }

    fn kind(&self) -> crate::ToolKind {
        crate::ToolKind::Fetch
    }

    fn title(&self, input: &Value) -> String {
        crate::title_with(WEB_FETCH, input, "url")
    }

    fn is_read_only(&self) -> bool {
        true
    }

    fn access(&self, input: &Value, _ctx: &ToolContext) -> ToolAccess {
        let url = input
            .get("url")
            .and_then(Value::as_str)
            .unwrap_or("")
            .trim()
            .to_string();
        ToolAccess::Network {
            domain: url_domain(&url),
            url,
        }
    }

    async fn call(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let input: WebFetchInput = parse_input(WEB_FETCH, input)?;
        let url = parse_url(&input.url)?;
        let limits = Limits::from_env();
        let page = tokio::select! {
            page = fetch(&url, limits) => page?,
            _ = ctx.cancel.cancelled() => return Err(ToolError::Cancelled),
        };
        let (kind, text) = render(&page)?;
        let mut content = String::new();
        if let Some(prompt) = input
            .prompt
            .as_deref()
            .map(str::trim)
            .filter(|p| !p.is_empty())
        {
            content.push_str(&format!("Prompt: {prompt}\n\n"));
        }
        content.push_str(&format!("Content of {}", page.final_url));
        if page.final_url != url {
            content.push_str(&format!(" (redirected from {url})"));
        }
        if !page.content_type.is_empty() {
            content.push_str(&format!(" ({})", page.content_type));
        }
        content.push_str(":\n\n");
        content.push_str(text.trim());
        Ok(ToolOutput {
            content,
            data: Some(json!({
                "url": url.as_str(),
                "finalUrl": page.final_url.as_str(),
                "status": page.status,
                "contentType": page.content_type,
                "bytes": page.body.len(),
                "html": kind == BodyKind::Html,
            })),
            ..ToolOutput::default()
        })
    }
}
