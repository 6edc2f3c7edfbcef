//! The stdio transport against an in-process fake server on a duplex pipe:
//! the handshake it sends, pagination, lines that are not messages, the
//! server's own requests, and a server that goes away mid-call.

use serde_json::{Value, json};
use tokio::io::{
    AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, Lines, ReadHalf, WriteHalf,
};

use super::{Line, connect, read_line};
use crate::jsonrpc::RequestError;
use crate::transport::Link;

/// The server's end of the pipe.
struct FakeServer {
    lines: Lines<BufReader<ReadHalf<DuplexStream>>>,
    out: WriteHalf<DuplexStream>,
}

impl FakeServer {
    async fn recv(&mut self) -> Value {
        let line = self
            .lines
            .next_line()
            .await
            .unwrap()
            .expect("a message from kaji");
        serde_json::from_str(&line).unwrap()
    }

    async fn send_line(&mut self, line: &str) {
        self.out
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
    }

    async fn answer(&mut self, request: &Value, result: Value) {
        let reply = json!({"jsonrpc": "2.0", "id": request["id"], "result": result});
        self.send_line(&reply.to_string()).await;
    }
}

fn pipe() -> (Link, FakeServer) {
    let (kaji, server) = tokio::io::duplex(64 * 1024);
    let (kaji_read, kaji_write) = tokio::io::split(kaji);
    let (server_read, server_write) = tokio::io::split(server);
    let link = connect("fake", kaji_read, kaji_write);
    let server = FakeServer {
        lines: BufReader::new(server_read).lines(),
        out: server_write,
    };
    (link, server)
}

#[tokio::test]
async fn the_handshake_announces_kaji_and_no_capabilities() {
    let (link, mut server) = pipe();
    let peer = link.peer.clone();
    let handshake = tokio::spawn(async move { peer.initialize().await });
    let init = server.recv().await;
    assert_eq!(init["method"], "initialize");
    assert_eq!(init["params"]["protocolVersion"], "2026-07-28");
    assert_eq!(init["params"]["capabilities"], json!({}));
    assert_eq!(init["params"]["clientInfo"]["name"], "kaji");
    assert_eq!(
        init["params"]["clientInfo"]["version"],
        env!("CARGO_PKG_VERSION")
    );
    let result = json!({"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
        "serverInfo": {"name": "fake", "version": "1"}});
    server.answer(&init, result).await;
    let initialized = server.recv().await;
    assert_eq!(
        initialized,
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
    );
    let info = handshake.await.unwrap().unwrap();
    assert!(info.capabilities.tools.is_some());
    assert!(info.capabilities.resources.is_none());
}

#[tokio::test]
async fn tools_are_listed_across_pages_past_lines_that_are_not_messages() {
    let (link, mut server) = pipe();
    let peer = link.peer.clone();
    let listing = tokio::spawn(async move { peer.list_all_tools().await });
    let first = server.recv().await;
    assert_eq!(first["params"], json!({}));
    server.send_line("npm WARN this is not JSON").await;
    server
        .answer(
            &first,
            json!({"tools": [{"name": "a", "inputSchema": {}}], "nextCursor": "p2"}),
        )
        .await;
    let second = server.recv().await;
    assert_eq!(second["method"], "tools/list");
    assert_eq!(second["params"], json!({"cursor": "p2"}));
    server
        .answer(&second, json!({"tools": [{"name": "b"}]}))
        .await;
    let tools = listing.await.unwrap().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["a", "b"]);
}

#[tokio::test]
async fn a_cursor_given_twice_ends_the_listing() {
    let (link, mut server) = pipe();
    let peer = link.peer.clone();
    let listing = tokio::spawn(async move { peer.list_all_resources().await });
    for _ in 0..2 {
        let request = server.recv().await;
        server
            .answer(&request, json!({"resources": [], "nextCursor": "same"}))
            .await;
    }
    let err = listing.await.unwrap().unwrap_err().to_string();
    assert!(
        err.contains("`resources/list`") && err.contains("`same` a second time"),
        "{err}"
    );
}

#[tokio::test]
async fn a_ping_from_the_server_is_answered_during_a_call() {
    let (link, mut server) = pipe();
    let peer = link.peer.clone();
    let call = tokio::spawn(async move { peer.call_tool("echo", None).await });
    let request = server.recv().await;
    assert_eq!(request["params"], json!({"name": "echo"}));
    server
        .send_line(r#"{"jsonrpc":"2.0","id":"s1","method":"ping"}"#)
        .await;
    assert_eq!(
        server.recv().await,
        json!({"jsonrpc": "2.0", "id": "s1", "result": {}})
    );
    server
        .answer(
            &request,
            json!({"content": [{"type": "text", "text": "hi"}], "isError": false}),
        )
        .await;
    let result = call.await.unwrap().unwrap();
    assert_eq!(result.is_error, Some(false));
    assert_eq!(result.content.len(), 1);
}

#[tokio::test]
async fn a_server_that_dies_mid_call_fails_the_call_and_closes_the_link() {
    let (link, mut server) = pipe();
    let peer = link.peer.clone();
    let call =
        tokio::spawn(async move { peer.call_tool("work", Some(serde_json::Map::new())).await });
    let request = server.recv().await;
    assert_eq!(request["params"]["arguments"], json!({}));
    drop(server);
    let err = call.await.unwrap().unwrap_err();
    assert!(
        matches!(&err, RequestError::Closed(why) if why == "the server closed its stdout"),
        "{err:?}"
    );
    assert!(link.peer.is_closed());
    let err = link.peer.read_resource("x://y").await.unwrap_err();
    assert!(err.to_string().contains("closed"), "{err}");
}

#[tokio::test]
async fn a_line_over_the_limit_is_dropped_and_the_next_one_read() {
    let input: &[u8] = b"0123456789abcdef\n{\"ok\":1}\nunfinished";
    let mut reader = BufReader::with_capacity(4, input);
    let mut line = Vec::new();
    assert_eq!(
        read_line(&mut reader, &mut line, 10).await.unwrap(),
        Line::TooLong
    );
    assert!(line.is_empty());
    assert_eq!(
        read_line(&mut reader, &mut line, 10).await.unwrap(),
        Line::Complete
    );
    assert_eq!(line, b"{\"ok\":1}\n");
    assert_eq!(
        read_line(&mut reader, &mut line, 10).await.unwrap(),
        Line::End
    );
}
