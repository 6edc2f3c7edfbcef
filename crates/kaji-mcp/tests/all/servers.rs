//! kaji-mcp against real MCP servers nobody here wrote
//! (`@modelcontextprotocol/server-everything` and
//! `@modelcontextprotocol/server-filesystem`, pinned in
//! `tests/mcp-servers/package.json`), plus a small faulty server script for
//! the failures those servers cannot be made to produce.
//!
//! Install the servers first: `npm ci --prefix tests/mcp-servers`.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use kaji_mcp::{
    McpError, McpManager, McpManagerOptions, McpServerConfig, McpServerStatus, McpTransportConfig,
};
use kaji_tools::{Tool, ToolAccess, ToolContext, ToolError};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// Generous: only reached when something is broken.
const READY_LIMIT: Duration = Duration::from_secs(60);

/// The installed binary of an npm MCP server; fails the test with the fix
/// when the servers are not installed.
fn server_bin(name: &str) -> String {
    kaji_test_support::fixtures::mcp_server_bin(name)
        .to_string_lossy()
        .into_owned()
}

fn faulty_script() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/faulty_server.js")
        .to_string_lossy()
        .into_owned()
}

fn faulty(fault: &str, state_file: &Path) -> McpServerConfig {
    let mut config = McpServerConfig::stdio("node", [faulty_script()]);
    if let McpTransportConfig::Stdio { env, .. } = &mut config.transport {
        env.insert("FAULT".into(), fault.into());
        env.insert(
            "STATE_FILE".into(),
            state_file.to_string_lossy().into_owned(),
        );
    }
    config
}

fn everything() -> McpServerConfig {
    McpServerConfig::stdio(server_bin("mcp-server-everything"), ["stdio"])
}

fn options() -> McpManagerOptions {
    McpManagerOptions {
        restart_backoff_initial: Duration::ZERO,
        restart_backoff_max: Duration::ZERO,
        kill_grace: Duration::from_millis(500),
        ..McpManagerOptions::default()
    }
}

fn start(
    servers: impl IntoIterator<Item = (&'static str, McpServerConfig)>,
    cwd: &Path,
) -> McpManager {
    let servers: BTreeMap<String, McpServerConfig> = servers
        .into_iter()
        .map(|(n, c)| (n.to_string(), c))
        .collect();
    McpManager::start_with_options(servers, cwd, options())
}

async fn ready(manager: &McpManager) {
    let pending = manager.wait_ready(READY_LIMIT).await;
    assert!(pending.is_empty(), "servers still connecting: {pending:?}");
}

fn tool(manager: &McpManager, name: &str) -> Arc<dyn Tool> {
    let tools = manager.tools();
    let names: Vec<&str> = tools.iter().map(|t| t.name()).collect();
    tools
        .iter()
        .find(|t| t.name() == name)
        .cloned()
        .unwrap_or_else(|| panic!("no tool {name} among {names:?}"))
}

fn status_of(manager: &McpManager, server: &str) -> McpServerStatus {
    manager
        .status()
        .into_iter()
        .find(|r| r.name == server)
        .map(|r| r.status)
        .unwrap_or_else(|| panic!("no server {server}"))
}

#[tokio::test]
async fn everything_server_tools_are_listed_and_called() {
    let dir = tempfile::tempdir().expect("tempdir");
    let manager = start([("everything", everything())], dir.path());
    ready(&manager).await;

    let McpServerStatus::Connected { tools } = status_of(&manager, "everything") else {
        panic!("not connected: {:?}", manager.status());
    };
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    assert!(
        names.contains(&"echo") && names.contains(&"get-sum"),
        "{names:?}"
    );
    let echo_info = tools.iter().find(|t| t.name == "echo").expect("echo");
    assert_eq!(echo_info.qualified_name, "mcp__everything__echo");

    let echo = tool(&manager, "mcp__everything__echo");
    let spec = echo.spec();
    assert_eq!(spec.name, "mcp__everything__echo");
    assert!(
        spec.input_schema["properties"]["message"].is_object(),
        "{}",
        spec.input_schema
    );
    assert!(!echo.is_read_only());
    let ctx = ToolContext::new(dir.path());
    assert_eq!(echo.access(&json!({}), &ctx), ToolAccess::External);

    let out = echo
        .call(json!({"message": "hello kaji"}), &ctx)
        .await
        .expect("echo");
    assert_eq!(out.content, "Echo: hello kaji");

    let sum = tool(&manager, "mcp__everything__get-sum");
    let out = sum
        .call(json!({"a": 2, "b": 40}), &ctx)
        .await
        .expect("get-sum");
    assert!(out.content.contains("42"), "{}", out.content);

    manager.shutdown().await;
    assert_eq!(status_of(&manager, "everything"), McpServerStatus::Stopped);
    let err = echo
        .call(json!({"message": "x"}), &ctx)
        .await
        .expect_err("after shutdown");
    assert!(err.to_string().contains("shut down"), "{err}");
}

#[tokio::test]
async fn images_become_placeholders_and_errors_are_error_results() {
    let dir = tempfile::tempdir().expect("tempdir");
    let manager = start([("everything", everything())], dir.path());
    ready(&manager).await;
    let ctx = ToolContext::new(dir.path());

    let image = tool(&manager, "mcp__everything__get-tiny-image");
    let out = image.call(json!({}), &ctx).await.expect("image");
    let placeholder = out
        .content
        .lines()
        .find(|l| l.starts_with("[image: image/png, "))
        .unwrap_or_else(|| panic!("no image placeholder in {:?}", out.content));
    let bytes: usize = placeholder
        .trim_start_matches("[image: image/png, ")
        .trim_end_matches(" bytes]")
        .parse()
        .expect("a byte count");
    assert!(bytes > 100, "{placeholder}");
    assert_eq!(out.images.len(), 1, "the image passes through as an image");
    assert_eq!(out.images[0].media_type, "image/png");
    assert!(
        out.images[0].data.starts_with("iVBOR"),
        "{:?}",
        out.images[0]
    );
    assert!(
        out.content.contains("Here's the image you requested"),
        "{}",
        out.content
    );
    assert!(
        !out.content.contains("iVBOR"),
        "base64 leaked into the text: {}",
        out.content
    );

    // Arguments that fail the tool's own validation: the server answers
    // with an error result (or a JSON-RPC error); either way a tool error
    // carrying the server's text.
    let echo = tool(&manager, "mcp__everything__echo");
    let err = echo
        .call(json!({"wrong": 1}), &ctx)
        .await
        .expect_err("invalid arguments");
    let ToolError::Refused(text) = &err else {
        panic!("expected a refused error, got {err:?}");
    };
    assert!(text.contains("message"), "{text}");

    manager.shutdown().await;
}

#[tokio::test]
async fn resources_are_listed_and_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    let manager = start([("everything", everything())], dir.path());
    ready(&manager).await;
    let ctx = ToolContext::new(dir.path());

    let list = tool(&manager, "ListMcpResources");
    assert!(list.is_read_only());
    let listed = list
        .call(json!({"server": "everything"}), &ctx)
        .await
        .expect("list");
    assert!(
        listed
            .content
            .contains("everything: demo://resource/static/document/"),
        "{}",
        listed.content
    );
    let all = list.call(json!({}), &ctx).await.expect("list all");
    assert_eq!(all.content, listed.content);

    let data = listed.data.expect("structured listing");
    let uri = data
        .as_array()
        .and_then(|items| {
            items
                .iter()
                .find(|r| r["template"] == json!(false) && r["mime_type"] == json!("text/markdown"))
        })
        .and_then(|r| r["uri"].as_str())
        .expect("a markdown document resource")
        .to_string();

    let read = tool(&manager, "ReadMcpResource");
    assert!(read.is_read_only());
    let out = read
        .call(json!({"server": "everything", "uri": uri}), &ctx)
        .await
        .expect("read");
    assert!(
        out.content
            .starts_with(&format!("[resource: {uri}, text/markdown]\n")),
        "{}",
        out.content
    );
    assert!(out.content.len() > uri.len() + 40, "{}", out.content);

    // A dynamic binary resource: a placeholder with its size.
    let out = read
        .call(
            json!({"server": "everything", "uri": "demo://resource/dynamic/blob/1"}),
            &ctx,
        )
        .await
        .expect("read blob");
    assert!(
        out.content
            .starts_with("[resource: demo://resource/dynamic/blob/1, text/plain, "),
        "{}",
        out.content
    );

    let err = read
        .call(json!({"server": "nope", "uri": uri}), &ctx)
        .await
        .expect_err("unknown server");
    assert!(
        err.to_string().contains("no MCP server named `nope`"),
        "{err}"
    );
    assert!(err.to_string().contains("configured: everything"), "{err}");

    manager.shutdown().await;
}

#[tokio::test]
async fn filesystem_server_reads_a_file_of_a_temp_dir() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().canonicalize().expect("canonical");
    std::fs::write(root.join("notes.txt"), "the answer is 42\n").expect("write");
    let config = McpServerConfig::stdio(
        server_bin("mcp-server-filesystem"),
        [root.to_string_lossy().into_owned()],
    );
    let manager = start([("fs", config)], &root);
    ready(&manager).await;
    let ctx = ToolContext::new(&root);

    let read = tool(&manager, "mcp__fs__read_text_file");
    let path = root.join("notes.txt").to_string_lossy().into_owned();
    let out = read
        .call(json!({"path": path}), &ctx)
        .await
        .expect("read_text_file");
    assert!(out.content.contains("the answer is 42"), "{}", out.content);

    // Outside the allowed directory: the server's refusal comes back as a
    // tool error.
    let err = read
        .call(json!({"path": "/etc/hostname"}), &ctx)
        .await
        .expect_err("outside the root");
    assert!(err.to_string().to_lowercase().contains("denied"), "{err}");

    manager.shutdown().await;
}

#[tokio::test]
async fn a_server_that_exits_during_a_call_is_reported_and_restarted_on_next_use() {
    let dir = tempfile::tempdir().expect("tempdir");
    let state = dir.path().join("crashed");
    let manager = start([("flaky", faulty("crash-once", &state))], dir.path());
    ready(&manager).await;
    let ctx = ToolContext::new(dir.path());
    let work = tool(&manager, "mcp__flaky__work");

    let err = work
        .call(json!({}), &ctx)
        .await
        .expect_err("the server exits");
    let text = err.to_string();
    assert!(
        text.contains("MCP server `flaky` stopped during the call to tool `work`"),
        "{text}"
    );
    assert!(
        text.contains("the server process ended (exit status: 3)"),
        "{text}"
    );
    assert!(text.contains("faulty: crashing on purpose"), "{text}");

    let McpServerStatus::Failed { why, stderr_tail } = status_of(&manager, "flaky") else {
        panic!("not failed: {:?}", manager.status());
    };
    assert!(why.contains("exit status: 3"), "{why}");
    assert!(stderr_tail.contains("crashing on purpose"), "{stderr_tail}");

    // Its tools are still offered, and using one restarts it.
    let work = tool(&manager, "mcp__flaky__work");
    let out = work.call(json!({}), &ctx).await.expect("restarted");
    assert_eq!(out.content, "work done");
    assert!(matches!(
        status_of(&manager, "flaky"),
        McpServerStatus::Connected { .. }
    ));

    manager.shutdown().await;
}

#[tokio::test]
async fn a_failed_server_fails_fast_until_its_backoff_has_passed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let state = dir.path().join("crashed");
    let servers = BTreeMap::from([("flaky".to_string(), faulty("crash-once", &state))]);
    let options = McpManagerOptions {
        restart_backoff_initial: Duration::from_secs(3600),
        restart_backoff_max: Duration::from_secs(3600),
        kill_grace: Duration::from_millis(500),
        ..McpManagerOptions::default()
    };
    let manager = McpManager::start_with_options(servers, dir.path(), options);
    ready(&manager).await;
    let cancel = CancellationToken::new();

    manager
        .call_tool("flaky", "work", Value::Null, &cancel)
        .await
        .expect_err("crashes");
    let err = manager
        .call_tool("flaky", "work", Value::Null, &cancel)
        .await
        .expect_err("fails fast");
    let McpError::Unavailable {
        server,
        reason,
        stderr_tail,
        retry_in,
    } = &err
    else {
        panic!("expected unavailable, got {err:?}");
    };
    assert_eq!(server, "flaky");
    assert!(reason.contains("exit status: 3"), "{reason}");
    assert!(stderr_tail.contains("crashing on purpose"), "{stderr_tail}");
    assert!(
        retry_in.is_some_and(|d| d > Duration::from_secs(60)),
        "{retry_in:?}"
    );
    assert!(
        err.to_string().contains("restart on next use after"),
        "{err}"
    );

    manager.shutdown().await;
}

#[tokio::test]
async fn a_hung_call_times_out_and_the_server_is_stopped() {
    let dir = tempfile::tempdir().expect("tempdir");
    let state = dir.path().join("unused");
    let mut config = faulty("hang", &state);
    config.timeout_secs = 1;
    let manager = start([("stuck", config)], dir.path());
    ready(&manager).await;
    let ctx = ToolContext::new(dir.path());

    let err = tool(&manager, "mcp__stuck__work")
        .call(json!({}), &ctx)
        .await
        .expect_err("hangs");
    assert!(matches!(err, ToolError::Timeout { seconds: 1 }), "{err:?}");
    // By the time the call returns, the server has been stopped.
    let McpServerStatus::Failed { why: reason, .. } = status_of(&manager, "stuck") else {
        panic!("not failed: {:?}", manager.status());
    };
    assert!(
        reason.contains("did not answer the call to tool `work` within 1 s"),
        "{reason}"
    );

    manager.shutdown().await;
}

#[tokio::test]
async fn a_missing_command_is_a_failed_server_naming_the_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let manager = start(
        [
            (
                "ghost",
                McpServerConfig::stdio(
                    "/nonexistent/kaji-no-such-mcp-server",
                    Vec::<String>::new(),
                ),
            ),
            (
                "dies",
                McpServerConfig::stdio("sh", ["-c", "echo 'fatal: no config' >&2; exit 7"]),
            ),
        ],
        dir.path(),
    );
    ready(&manager).await;

    let McpServerStatus::Failed { why, .. } = status_of(&manager, "ghost") else {
        panic!("not failed: {:?}", manager.status());
    };
    assert!(
        why.contains("cannot start `/nonexistent/kaji-no-such-mcp-server`"),
        "{why}"
    );
    assert!(why.contains("No such file or directory"), "{why}");

    let McpServerStatus::Failed { why, stderr_tail } = status_of(&manager, "dies") else {
        panic!("not failed: {:?}", manager.status());
    };
    assert!(why.contains("exit status: 7"), "{why}");
    assert_eq!(stderr_tail, "fatal: no config");

    // No tools of theirs; resource tools are still offered.
    let names: Vec<&str> = manager.tools().iter().map(|t| t.name()).collect::<Vec<_>>();
    assert_eq!(names, ["ListMcpResources", "ReadMcpResource"]);

    // A call names the server and why (after one immediate restart attempt).
    let err = manager
        .call_tool("dies", "anything", Value::Null, &CancellationToken::new())
        .await
        .expect_err("down");
    let text = err.to_string();
    assert!(
        text.starts_with("MCP server `dies` is unavailable"),
        "{text}"
    );
    assert!(text.contains("fatal: no config"), "{text}");

    manager.shutdown().await;
}

#[tokio::test]
async fn a_disabled_server_is_listed_but_never_started() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = McpServerConfig::stdio("/nonexistent/never-run", Vec::<String>::new());
    config.enabled = false;
    let manager = start([("off", config)], dir.path());
    assert!(manager.wait_ready(Duration::ZERO).await.is_empty());
    assert_eq!(status_of(&manager, "off"), McpServerStatus::Disabled);
    assert!(manager.tools().is_empty());
    let err = manager
        .read_resource("off", "x://y", &CancellationToken::new())
        .await
        .expect_err("disabled");
    assert!(err.to_string().contains("`off` is disabled"), "{err}");
    manager.shutdown().await;
}

#[tokio::test]
async fn shutdown_kills_the_whole_process_group() {
    let dir = tempfile::tempdir().expect("tempdir");
    let state = dir.path().join("pids");
    let manager = start([("parent", faulty("grandchild", &state))], dir.path());
    ready(&manager).await;
    let pids = std::fs::read_to_string(&state).expect("pid file");
    let pids: Vec<i32> = pids
        .split_whitespace()
        .map(|p| p.parse().expect("pid"))
        .collect();
    assert_eq!(pids.len(), 2);
    for &pid in &pids {
        assert!(
            !kaji_tasks::process::is_gone(pid),
            "{pid} not running before shutdown"
        );
    }
    manager.shutdown().await;
    for &pid in &pids {
        assert!(
            kaji_tasks::process::is_gone(pid),
            "{pid} still running after shutdown"
        );
    }
}

#[tokio::test]
async fn dropping_the_manager_kills_the_whole_process_group() {
    let dir = tempfile::tempdir().expect("tempdir");
    let state = dir.path().join("pids");
    let manager = start([("parent", faulty("grandchild", &state))], dir.path());
    ready(&manager).await;
    let tools = manager.tools();
    let pids = std::fs::read_to_string(&state).expect("pid file");
    let exits: Vec<_> = pids
        .split_whitespace()
        .map(|p| process_exit(p.parse().expect("pid")))
        .collect();
    assert_eq!(exits.len(), 2);
    drop(tools);
    drop(manager);
    // Only a guard against hanging forever: the processes die right away.
    tokio::time::timeout(Duration::from_secs(60), join_all(exits))
        .await
        .expect("the server and its grandchild died after the manager was dropped");
}

async fn join_all(futures: Vec<std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>>) {
    for future in futures {
        future.await;
    }
}

/// A future that completes when `pid` exits (through a pidfd, so no
/// polling).
fn process_exit(pid: i32) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> {
    use std::os::fd::{FromRawFd, OwnedFd};
    // SAFETY: pidfd_open takes two integers and returns a new fd or -1.
    let rc = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    assert!(
        rc >= 0,
        "pidfd_open({pid}): {}",
        std::io::Error::last_os_error()
    );
    // SAFETY: the kernel just returned this fd and nobody else owns it.
    let fd = unsafe { OwnedFd::from_raw_fd(rc as i32) };
    // SAFETY: the AsyncFd takes ownership of the OwnedFd, which stays open
    // and unchanged for its whole lifetime.
    let fd = unsafe {
        tokio::io::unix::AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE)
    }
    .expect("register pidfd");
    Box::pin(async move {
        let _ = fd.readable().await.expect("pidfd readable");
    })
}

/// server-everything on streamable HTTP, on a free port; returned once it
/// says it is listening.
async fn http_everything() -> (kaji_tasks::process::GroupChild, String) {
    use tokio::io::AsyncBufReadExt;
    let port = free_port();
    let mut cmd = tokio::process::Command::new(server_bin("mcp-server-everything"));
    cmd.arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    let mut child = kaji_tasks::process::spawn_in_group(cmd).expect("spawn the HTTP server");
    let stderr = child.child_mut().stderr.take().expect("stderr");
    let mut lines = tokio::io::BufReader::new(stderr).lines();
    let mut seen = Vec::new();
    loop {
        match lines.next_line().await {
            Ok(Some(line)) if line.contains("listening on port") => break,
            Ok(Some(line)) => seen.push(line),
            other => panic!("the HTTP server did not start ({other:?}); it said: {seen:?}"),
        }
    }
    // Keep draining its stderr so it never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, format!("http://127.0.0.1:{port}/mcp"))
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr").port()
}

#[tokio::test]
async fn streamable_http_server_tools_are_called() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut server, url) = http_everything().await;
    let mut config = McpServerConfig::http(&url);
    if let McpTransportConfig::Http { headers, .. } = &mut config.transport {
        headers.insert("X-Kaji-Test".into(), "1".into());
    }
    let manager = start(
        [
            ("remote", config),
            (
                "closed",
                McpServerConfig::http(format!("http://127.0.0.1:{}/mcp", free_port())),
            ),
        ],
        dir.path(),
    );
    ready(&manager).await;
    let ctx = ToolContext::new(dir.path());

    let out = tool(&manager, "mcp__remote__echo")
        .call(json!({"message": "over http"}), &ctx)
        .await
        .expect("echo over HTTP");
    assert_eq!(out.content, "Echo: over http");

    let McpServerStatus::Failed { why, stderr_tail } = status_of(&manager, "closed") else {
        panic!("not failed: {:?}", manager.status());
    };
    assert!(why.contains("cannot connect to http://127.0.0.1:"), "{why}");
    assert!(why.contains("Connection refused"), "{why}");
    assert_eq!(stderr_tail, "");

    manager.shutdown().await;
    server.kill_now().await.expect("stop the HTTP server");
}

#[tokio::test]
async fn failures_name_the_servers_that_did_not_start_and_why() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut off = McpServerConfig::stdio("/nonexistent/never-run", Vec::<String>::new());
    off.enabled = false;
    let manager = start(
        [
            ("everything", everything()),
            (
                "ghost",
                McpServerConfig::stdio("/nonexistent/kaji-ghost", Vec::<String>::new()),
            ),
            (
                "dies",
                McpServerConfig::stdio("sh", ["-c", "echo fatal: bad token >&2; exit 2"]),
            ),
            ("off", off),
        ],
        dir.path(),
    );
    ready(&manager).await;
    let failures = manager.failures();
    let names: Vec<&str> = failures.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["dies", "ghost"], "{failures:?}");
    assert!(
        failures[1]
            .why
            .contains("cannot start `/nonexistent/kaji-ghost`"),
        "{failures:?}"
    );
    assert!(
        failures[0].stderr_tail.contains("fatal: bad token"),
        "{failures:?}"
    );
    manager.shutdown().await;
}

#[tokio::test]
async fn a_project_mcp_json_server_is_called() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mcp_json = json!({"mcpServers": {"proj": {
        "command": server_bin("mcp-server-everything"),
        "args": ["stdio"],
        "env": {"KAJI_MCP_JSON_TEST": "${KAJI_MCP_JSON_TEST_UNSET:-1}"},
    }}});
    std::fs::write(dir.path().join(".mcp.json"), mcp_json.to_string()).expect("write");
    let servers = kaji_mcp::load_mcp_json(dir.path()).expect(".mcp.json");
    assert_eq!(servers.len(), 1);
    let manager = McpManager::start_with_options(servers, dir.path(), options());
    ready(&manager).await;
    let ctx = ToolContext::new(dir.path());
    let out = tool(&manager, "mcp__proj__echo")
        .call(json!({"message": "from .mcp.json"}), &ctx)
        .await
        .expect("echo");
    assert_eq!(out.content, "Echo: from .mcp.json");
    manager.shutdown().await;
}
