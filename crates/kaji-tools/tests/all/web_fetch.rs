//! `WebFetch` against a local axum server on 127.0.0.1 (never the
//! internet): HTML becomes markdown, text passes, binary is refused, the
//! prompt is echoed, and the bad cases — a dead host, a redirect loop, too
//! many redirects, a 1 GB body with and without a declared length, an HTTP
//! error — are clear errors.

use axum::Router;
use axum::body::Body;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use kaji_tools::{ToolAccess, ToolContext, ToolError, ToolOutput, builtin_tools};
use serde_json::{Value, json};

const PAGE: &str = "<!doctype html><html><head><title>T</title><script>steal()</script>\
<style>p{}</style></head><body><h1>Hello</h1><p>A <a href=\"/x\">link</a> and <b>bold</b>.</p>\
<ul><li>one</li><li>two</li></ul></body></html>";

/// A body of `total` bytes made lazily, 64 KiB at a time.
fn huge(total: u64) -> Body {
    let chunk = bytes::Bytes::from(vec![b'a'; 64 * 1024]);
    let n = total / chunk.len() as u64;
    Body::from_stream(futures::stream::iter(
        (0..n).map(move |_| Ok::<_, std::io::Error>(chunk.clone())),
    ))
}

fn app() -> Router {
    Router::new()
        .route(
            "/page",
            get(|| async { ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], PAGE) }),
        )
        .route("/text", get(|| async { "plain body\nline 2\n" }))
        .route(
            "/json",
            get(|| async { ([(header::CONTENT_TYPE, "application/json")], "{\"a\": 1}") }),
        )
        .route(
            "/png",
            get(|| async {
                (
                    [(header::CONTENT_TYPE, "image/png")],
                    vec![0x89u8, b'P', b'N', b'G', 0, 0],
                )
            }),
        )
        .route("/moved", get(|| async { Redirect::temporary("/text") }))
        .route(
            "/elsewhere",
            get(|| async { Redirect::temporary("http://169.254.169.254/latest/meta-data/") }),
        )
        .route("/loop-a", get(|| async { Redirect::temporary("/loop-b") }))
        .route("/loop-b", get(|| async { Redirect::temporary("/loop-a") }))
        .route(
            "/chain/{n}",
            get(
                |axum::extract::Path(n): axum::extract::Path<u32>| async move {
                    Redirect::temporary(&format!("/chain/{}", n + 1))
                },
            ),
        )
        .route(
            "/nested/{seed}/{bytes}",
            get(
                |axum::extract::Path((seed, bytes)): axum::extract::Path<(u64, usize)>| async move {
                    (
                        [(header::CONTENT_TYPE, "text/html")],
                        nested_page(seed, bytes),
                    )
                },
            ),
        )
        .route(
            "/missing",
            get(|| async { (StatusCode::NOT_FOUND, "no such page") }),
        )
        .route(
            "/huge-streamed",
            get(|| async {
                Response::builder()
                    .header(header::CONTENT_TYPE, "text/plain")
                    .body(huge(1 << 30))
                    .map_or_else(
                        |_| StatusCode::INTERNAL_SERVER_ERROR.into_response(),
                        IntoResponse::into_response,
                    )
            }),
        )
        .route(
            "/huge-declared",
            get(|| async {
                Response::builder()
                    .header(header::CONTENT_TYPE, "text/plain")
                    .header(header::CONTENT_LENGTH, (1u64 << 30).to_string())
                    .body(huge(1 << 30))
                    .map_or_else(
                        |_| StatusCode::INTERNAL_SERVER_ERROR.into_response(),
                        IntoResponse::into_response,
                    )
            }),
        )
}

/// A page of `bytes` bytes of elements nested in each other (seed 0: one
/// `<div>` in the other; other seeds: a mix of tags, some unclosed, with
/// text between them, chosen by a xorshift of the seed).
fn nested_page(seed: u64, bytes: usize) -> String {
    const TAGS: [&str; 10] = [
        "<div>",
        "<span>",
        "<b>",
        "<i>",
        "<ul><li>",
        "<table><tr><td>",
        "<a href=x>",
        "<p>",
        "<section class='a>b'>",
        "<blockquote>",
    ];
    let mut page = String::from("<!doctype html><html><body>");
    let mut x = seed.max(1);
    while page.len() < bytes {
        if seed == 0 {
            page.push_str("<div>");
            continue;
        }
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        page.push_str(TAGS[(x % TAGS.len() as u64) as usize]);
        if x.is_multiple_of(7) {
            page.push_str("text ");
        }
    }
    page
}

/// Serves [`app`] on 127.0.0.1; returns its base URL.
async fn serve() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        let _ = axum::serve(listener, app()).await;
    });
    format!("http://{addr}")
}

async fn fetch(input: Value) -> Result<ToolOutput, ToolError> {
    let registry = builtin_tools();
    let tool = registry.get("WebFetch").expect("registered");
    let dir = tempfile::tempdir().expect("tempdir");
    tool.call(input, &ToolContext::new(dir.path())).await
}

async fn fetch_err(url: String) -> String {
    match fetch(json!({ "url": url })).await {
        Err(ToolError::Refused(message)) => message,
        other => panic!("expected a refusal for {url}, got {other:?}"),
    }
}

#[tokio::test]
async fn html_becomes_markdown_with_the_prompt_above_it() {
    let base = serve().await;
    let out = fetch(json!({"url": format!("{base}/page"), "prompt": "What does it say?"}))
        .await
        .expect("fetched");
    let text = &out.content;
    assert!(text.starts_with("Prompt: What does it say?\n\n"), "{text}");
    assert!(text.contains(&format!("Content of {base}/page")), "{text}");
    assert!(text.contains("# Hello"), "{text}");
    assert!(text.contains("[link](/x)"), "{text}");
    assert!(text.contains("**bold**"), "{text}");
    assert!(!text.contains("steal()"), "scripts are dropped: {text}");
    assert!(!text.contains("<p>"), "{text}");
    assert_eq!(out.data.expect("data")["html"], true);
}

#[tokio::test]
async fn text_passes_through_and_redirects_name_the_final_url() {
    let base = serve().await;
    let out = fetch(json!({"url": format!("{base}/json")}))
        .await
        .expect("json");
    assert!(out.content.ends_with("{\"a\": 1}"), "{}", out.content);
    let out = fetch(json!({"url": format!("{base}/moved")}))
        .await
        .expect("moved");
    assert!(
        out.content.contains(&format!(
            "Content of {base}/text (redirected from {base}/moved)"
        )),
        "{}",
        out.content
    );
    assert!(
        out.content.ends_with("plain body\nline 2"),
        "{}",
        out.content
    );
}

#[tokio::test]
async fn binary_types_and_http_errors_are_refused() {
    let base = serve().await;
    let msg = fetch_err(format!("{base}/png")).await;
    assert!(msg.contains("image/png, not text"), "{msg}");
    let msg = fetch_err(format!("{base}/missing")).await;
    assert!(msg.contains("HTTP 404"), "{msg}");
}

#[tokio::test]
async fn redirect_loops_and_long_chains_are_clear_errors() {
    let base = serve().await;
    let msg = fetch_err(format!("{base}/loop-a")).await;
    assert!(msg.contains("redirect loop"), "{msg}");
    assert!(msg.contains("/loop-a"), "{msg}");
    let msg = fetch_err(format!("{base}/chain/0")).await;
    assert!(msg.contains("more than 10 redirects"), "{msg}");
}

#[tokio::test]
async fn a_gigabyte_body_is_refused_without_reading_it_whole() {
    let base = serve().await;
    let msg = fetch_err(format!("{base}/huge-declared")).await;
    assert!(msg.contains("1073741824 bytes long"), "{msg}");
    assert!(msg.contains("KAJI_WEBFETCH_MAX_BYTES"), "{msg}");
    let msg = fetch_err(format!("{base}/huge-streamed")).await;
    assert!(msg.contains("the rest was not read"), "{msg}");
}

#[tokio::test]
async fn a_dead_host_and_bad_urls_are_clear_errors() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    drop(listener);
    let msg = fetch_err(format!("http://127.0.0.1:{port}/")).await;
    assert!(msg.contains("cannot connect to 127.0.0.1"), "{msg}");
    let msg = fetch_err("file:///etc/passwd".into()).await;
    assert!(msg.contains("only http and https"), "{msg}");
    let msg = fetch_err("not a url".into()).await;
    assert!(msg.contains("not a valid URL"), "{msg}");
}

#[test]
fn access_names_the_domain_and_the_tool_only_reads() {
    let registry = builtin_tools();
    let tool = registry.get("WebFetch").expect("registered");
    assert!(tool.is_read_only());
    let ctx = ToolContext::new(".");
    assert_eq!(
        tool.access(&json!({"url": " https://Docs.RS/tokio "}), &ctx),
        ToolAccess::Network {
            url: "https://Docs.RS/tokio".into(),
            domain: "docs.rs".into()
        }
    );
}

#[tokio::test]
async fn a_redirect_to_another_host_is_not_followed_but_named() {
    let base = serve().await;
    let msg = fetch_err(format!("{base}/elsewhere")).await;
    assert!(
        msg.contains("redirects to http://169.254.169.254/latest/meta-data/, on another host"),
        "{msg}"
    );
    assert!(msg.contains("call WebFetch with"), "{msg}");
    // The same address spelled otherwise is the same host: followed.
    let port = base.rsplit(':').next().unwrap_or_default();
    let out = fetch(json!({ "url": format!("http://2130706433:{port}/moved") }))
        .await
        .expect("same host");
    assert!(out.content.contains("plain body"), "{}", out.content);
}

/// No page crashes kaji: deeply nested elements (a page of ~110 KB of
/// them aborted kaji with a stack overflow) up to the body cap convert,
/// their text kept. Fixed seeds unless `KAJI_TEST_SEED` asks otherwise.
#[tokio::test]
async fn deeply_nested_pages_up_to_the_body_cap_convert() {
    let base = serve().await;
    let mut cases: Vec<(u64, usize)> = vec![(0, 110_000), (2, 1_000_000)];
    for seed in kaji_test_support::seeds::seeds("nested pages", &[1, 3], None) {
        cases.push((seed, 300_000));
    }
    // The largest page the body cap lets through.
    cases.push((0, kaji_tools::web_fetch::DEFAULT_MAX_BYTES as usize - 64));
    for (seed, bytes) in cases {
        let out = fetch(json!({"url": format!("{base}/nested/{seed}/{bytes}")}))
            .await
            .unwrap_or_else(|e| panic!("seed {seed}, {bytes} bytes: {e:?}"));
        if seed != 0 {
            assert!(
                out.content.contains("text"),
                "seed {seed}: the text was lost"
            );
        }
    }
}
