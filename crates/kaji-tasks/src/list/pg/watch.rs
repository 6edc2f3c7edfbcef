//! Watching a PostgreSQL task list: LISTEN on `kaji_tasks`, or polling
//! where LISTEN is unavailable (and saying so).
//!
//! Must never miss a change silently: when the listening connection goes,
//! the watcher switches to polling and reports why.

use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::mpsc;
use tokio_postgres::{AsyncMessage, Client};

use super::PgTaskList;

/// How a [`ListWatcher`] learns of changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchMode {
    /// NOTIFY from the database, the moment a change commits.
    Notify,
    /// Polling every interval; `reason` says why LISTEN is not used.
    Poll {
        /// Why LISTEN is unavailable.
        reason: String,
    },
}

/// Wakes when the list may have changed.
pub struct ListWatcher {
    rx: Option<mpsc::UnboundedReceiver<()>>,
    mode: WatchMode,
    poll: Duration,
    _client: Option<Client>,
}

impl std::fmt::Debug for ListWatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ListWatcher")
            .field("mode", &self.mode)
            .finish()
    }
}

impl ListWatcher {
    /// How changes are learnt now.
    pub fn mode(&self) -> &WatchMode {
        &self.mode
    }

    /// Waits until the list may have changed: the next notice for this
    /// list, or the next poll tick. Several notices that arrived meanwhile
    /// count as one.
    pub async fn changed(&mut self) {
        if let Some(rx) = &mut self.rx {
            match rx.recv().await {
                Some(()) => {
                    while rx.try_recv().is_ok() {}
                    return;
                }
                None => {
                    self.rx = None;
                    self.mode = WatchMode::Poll {
                        reason: "the listening connection to the database closed".into(),
                    };
                    return;
                }
            }
        }
        tokio::time::sleep(self.poll).await;
    }
}

impl PgTaskList {
    /// A watcher on a connection of its own; polls every `poll` when LISTEN
    /// fails.
    pub async fn watch(&self, poll: Duration) -> ListWatcher {
        match self.listen().await {
            Ok((client, rx)) => ListWatcher {
                rx: Some(rx),
                mode: WatchMode::Notify,
                poll,
                _client: Some(client),
            },
            Err(reason) => ListWatcher {
                rx: None,
                mode: WatchMode::Poll { reason },
                poll,
                _client: None,
            },
        }
    }

    async fn listen(&self) -> Result<(Client, mpsc::UnboundedReceiver<()>), String> {
        let url = &self.shared.url;
        let (client, mut connection) = url
            .config
            .connect(self.shared.tls.clone())
            .await
            .map_err(|e| format!("cannot open a listening connection: {e}"))?;
        let (tx, rx) = mpsc::unbounded_channel();
        let list = self.list_id.clone();
        tokio::spawn(async move {
            let mut messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
            while let Some(Ok(message)) = messages.next().await {
                if let AsyncMessage::Notification(n) = message
                    && n.payload() == list
                    && tx.send(()).is_err()
                {
                    break;
                }
            }
        });
        client
            .batch_execute("LISTEN kaji_tasks")
            .await
            .map_err(|e| format!("LISTEN failed: {e}"))?;
        Ok((client, rx))
    }
}
