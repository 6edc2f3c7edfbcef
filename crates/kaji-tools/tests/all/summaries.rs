//! Each tool's one-line summary of its result (`Tool::summary`, through
//! `kaji_tools::result_summary`), on the results the tools really return
//! for real files and processes, and the first-line fallback for errors,
//! tools without a summary and tools kaji does not have.

use kaji_tools::web_search::{WebSearchAnswer, WebSearchHit, WebSearchQuery, WebSearcher};
use kaji_tools::{ToolContext, builtin_tools, result_summary};
use serde_json::{Value, json};

/// Runs `tool` with `input` in `dir`; its summary and its output.
async fn summary_of(dir: &std::path::Path, tool: &str, input: Value) -> (String, String) {
    let registry = builtin_tools();
    let tool = registry.get(tool).expect("registered");
    let out = tool
        .call(input.clone(), &ToolContext::new(dir))
        .await
        .expect("the call succeeds");
    let summary = result_summary(Some(tool.as_ref()), &input, &out.content, false);
    (summary, out.content)
}

fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("a.txt"), "one\ntwo\nthree\n").expect("write");
    std::fs::write(dir.path().join("b.txt"), "two\n").expect("write");
    std::fs::write(dir.path().join("c.md"), "none\n").expect("write");
    dir
}

#[tokio::test]
async fn read_counts_the_lines_it_returned() {
    let dir = workspace();
    let (s, _) = summary_of(dir.path(), "Read", json!({"file_path": "a.txt"})).await;
    assert_eq!(s, "Read 3 lines");
    let (s, _) = summary_of(dir.path(), "Read", json!({"file_path": "b.txt"})).await;
    assert_eq!(s, "Read 1 line");
    let input = json!({"file_path": "a.txt", "offset": 2, "limit": 1});
    let (s, _) = summary_of(dir.path(), "Read", input).await;
    assert_eq!(s, "Read 1 line from line 2");
    // An empty file says so in its first line.
    std::fs::write(dir.path().join("empty.txt"), "").expect("write");
    let (s, out) = summary_of(dir.path(), "Read", json!({"file_path": "empty.txt"})).await;
    assert_eq!(s, out.lines().next().unwrap());
}

#[tokio::test]
async fn bash_shows_its_first_line_and_how_it_ended() {
    let dir = workspace();
    let (s, _) = summary_of(
        dir.path(),
        "Bash",
        json!({"command": "printf 'x\\ny\\nz\\n'"}),
    )
    .await;
    assert_eq!(s, "x (+2 lines)");
    let (s, _) = summary_of(dir.path(), "Bash", json!({"command": "echo oops; exit 3"})).await;
    assert_eq!(s, "oops · exit 3");
    let (s, _) = summary_of(dir.path(), "Bash", json!({"command": "exit 2"})).await;
    assert_eq!(s, "exit 2");
    let (s, _) = summary_of(dir.path(), "Bash", json!({"command": "true"})).await;
    assert_eq!(s, "no output");
}

#[tokio::test]
async fn searches_count_what_they_found() {
    let dir = workspace();
    let (s, _) = summary_of(dir.path(), "Glob", json!({"pattern": "*.txt"})).await;
    assert_eq!(s, "2 files");
    let (s, _) = summary_of(dir.path(), "Glob", json!({"pattern": "*.rs"})).await;
    assert_eq!(s, "No files found");
    let (s, _) = summary_of(dir.path(), "Grep", json!({"pattern": "two"})).await;
    assert_eq!(s, "2 files with matches");
    let input = json!({"pattern": "t", "output_mode": "content"});
    let (s, _) = summary_of(dir.path(), "Grep", input).await;
    assert_eq!(s, "3 matching lines");
    let input = json!({"pattern": "two", "output_mode": "count"});
    let (s, _) = summary_of(dir.path(), "Grep", input).await;
    assert_eq!(s, "2 matching lines in 2 files");
    let (s, _) = summary_of(dir.path(), "Grep", json!({"pattern": "zebra"})).await;
    assert_eq!(s, "No matches");
}

/// A search that finds `n` pages.
#[derive(Debug)]
struct Pages(usize);

#[async_trait::async_trait]
impl WebSearcher for Pages {
    fn describe(&self) -> String {
        "a test search".into()
    }

    async fn search(&self, _query: &WebSearchQuery) -> Result<WebSearchAnswer, String> {
        let hits = (1..=self.0)
            .map(|i| WebSearchHit {
                title: format!("Page {i}"),
                url: format!("https://site{i}.example/"),
                snippet: format!("what page {i} says"),
            })
            .collect();
        Ok(WebSearchAnswer {
            hits,
            summary: None,
        })
    }
}

#[tokio::test]
async fn a_web_search_counts_its_results() {
    let dir = workspace();
    let registry = builtin_tools();
    let tool = registry.get("WebSearch").expect("registered");
    for (pages, input, want) in [
        (5, json!({"query": "rust"}), "5 results"),
        (1, json!({"query": "rust"}), "1 result"),
        (
            2,
            json!({"query": "rust", "blocked_domains": ["site1.example", "site2.example"]}),
            "No results",
        ),
    ] {
        let mut ctx = ToolContext::new(dir.path());
        ctx.web_search = Some(std::sync::Arc::new(Pages(pages)));
        let out = tool.call(input.clone(), &ctx).await.expect("searched");
        let s = result_summary(Some(tool.as_ref()), &input, &out.content, false);
        assert_eq!(s, want, "{}", out.content);
    }
}

#[tokio::test]
async fn an_edit_says_what_it_replaced_without_the_region() {
    let dir = workspace();
    let input = json!({"file_path": "a.txt", "old_string": "two", "new_string": "2"});
    let (s, out) = summary_of(dir.path(), "Edit", input).await;
    assert!(out.contains("The changed region now reads:"), "{out}");
    assert!(s.starts_with("Edited "), "{s}");
    assert!(s.ends_with("a.txt: replaced 1 occurrence."), "{s}");
}

#[test]
fn errors_and_unknown_tools_show_their_first_line() {
    let registry = builtin_tools();
    let read = registry.get("Read").expect("registered");
    let input = json!({"file_path": "a.txt"});
    // An error is never summarised by the tool, even when it looks like
    // the tool's result.
    let s = result_summary(Some(read.as_ref()), &input, "     1\tx\nmore", true);
    assert_eq!(s, "     1\tx (+1 lines)");
    assert_eq!(result_summary(None, &input, "done", false), "done");
    assert_eq!(result_summary(None, &input, "", false), "");
    // A summary never fails on text it does not know.
    let bash = registry.get("Bash").expect("registered");
    let s = result_summary(Some(bash.as_ref()), &json!({}), "[exit code", false);
    assert_eq!(s, "[exit code");
}

#[test]
fn the_mention_tool_reads_a_file() {
    let registry = builtin_tools();
    let (tool, input) = registry.mention_call("src/a.rs").expect("a reading tool");
    assert_eq!(tool.name(), "Read");
    assert_eq!(input, json!({"file_path": "src/a.rs"}));
}
