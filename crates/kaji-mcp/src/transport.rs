//! The two ways kaji reaches an MCP server: [`stdio`] (newline-delimited
//! JSON-RPC over a child process's stdin and stdout) and [`http`]
//! (streamable HTTP). Each turns its framing into whole messages for the
//! [`Inbox`] and sends what the [`Peer`] gives it; [`Link`] is what a
//! started transport leaves behind.
//!
//! A transport must never outlive its [`Link`] (dropping it ends every
//! task it started), never block on a server that stopped reading, and
//! never decide anything about MCP beyond its framing.

pub(crate) mod http;
pub(crate) mod sse;
pub(crate) mod stdio;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::DropGuard;

use crate::jsonrpc::{Inbox, Notification, Peer, Received};

/// A started transport: its peer, the server's notifications, and the
/// tasks that carry its messages.
pub(crate) struct Link {
    /// Sends requests to the server.
    pub peer: Peer,
    /// Ends the connection.
    pub inbox: Inbox,
    /// The server's notifications, in order (taken by whoever follows them).
    pub notifications: Option<mpsc::UnboundedReceiver<Notification>>,
    /// The streamable HTTP session, for HTTP servers.
    pub http: Option<Arc<http::HttpOutbox>>,
    tasks: Vec<JoinHandle<()>>,
    _close_on_drop: DropGuard,
}

impl Link {
    fn new(
        peer: Peer,
        inbox: Inbox,
        notifications: mpsc::UnboundedReceiver<Notification>,
        tasks: Vec<JoinHandle<()>>,
    ) -> Self {
        let guard = inbox.closed().clone().drop_guard();
        Self {
            peer,
            inbox,
            notifications: Some(notifications),
            http: None,
            tasks,
            _close_on_drop: guard,
        }
    }

    /// Adds a task that ends with the connection.
    pub fn add_task(&mut self, task: JoinHandle<()>) {
        self.tasks.push(task);
    }

    /// Ends the connection with `reason`: pending requests fail, an HTTP
    /// session is ended (`DELETE`), and the transport's tasks are awaited,
    /// all within `limit`.
    pub async fn close(self, reason: &str, limit: Duration) {
        self.inbox.close(reason);
        let http = self.http.clone();
        let tasks = self.tasks;
        let finish = async move {
            if let Some(http) = http {
                http.end_session().await;
            }
            futures::future::join_all(tasks).await;
        };
        if tokio::time::timeout(limit, finish).await.is_err() {
            tracing::debug!("an MCP transport did not finish closing within {limit:?}");
        }
    }
}

/// Passes one message to `inbox` and logs what it could not use; returns
/// the answer to send back, if the message was a request of the server.
pub(crate) fn receive(
    server: &str,
    inbox: &Inbox,
    text: &str,
    source: &str,
) -> Option<serde_json::Value> {
    match inbox.receive(text) {
        Received::Handled => None,
        Received::Reply(reply) => Some(reply),
        Received::Ignored(why) => {
            tracing::warn!(server = %server, "MCP server `{server}` sent {why} on {source}; ignored");
            None
        }
    }
}
