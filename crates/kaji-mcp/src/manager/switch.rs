//! Restarting one server and turning one on or off while the session runs
//! (the Agent SDK's `mcp_reconnect` and `mcp_toggle`). A server turned off
//! offers no tools and refuses calls until it is turned on again; nothing
//! here changes its configuration file.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::{McpManager, Phase, Server};
use crate::error::McpError;

/// How long a reconnect waits beyond the server's startup timeout for its
/// attempt to report.
const REPORT_MARGIN: Duration = Duration::from_secs(5);

impl McpManager {
    /// Stops `name` if it runs and starts it again; returns once it is
    /// connected, or why it is not. A server turned off is not started.
    pub async fn reconnect(&self, name: &str) -> Result<(), McpError> {
        let server = self.inner.server(name)?;
        {
            let mut state = server.lock();
            match &state.phase {
                Phase::Stopped => return Err(McpError::ShutDown),
                Phase::Disabled => {
                    return Err(McpError::Disabled {
                        server: name.to_string(),
                    });
                }
                Phase::Connected(conn) => conn.stop.cancel(),
                Phase::Connecting | Phase::Failed { .. } => {}
            }
            state.failures = 0;
            self.inner.spawn_connect(&server, &mut state);
        }
        self.inner.notify();
        self.settled(&server).await
    }

    /// Turns `name` on (started, and its tools offered again) or off
    /// (stopped, its tools no longer offered); returns once a server
    /// turned on is connected, or why it is not.
    pub async fn set_enabled(&self, name: &str, enabled: bool) -> Result<(), McpError> {
        let server = self.inner.server(name)?;
        {
            let mut state = server.lock();
            if matches!(state.phase, Phase::Stopped) {
                return Err(McpError::ShutDown);
            }
            if !enabled {
                let old = std::mem::replace(&mut state.phase, Phase::Disabled);
                if let Phase::Connected(conn) = old {
                    conn.stop.cancel();
                }
                // A later attempt of the old generation must not revive it.
                state.generation += 1;
            } else if matches!(state.phase, Phase::Disabled) {
                state.failures = 0;
                self.inner.spawn_connect(&server, &mut state);
            }
        }
        self.inner.notify();
        if enabled {
            self.settled(&server).await
        } else {
            Ok(())
        }
    }

    /// Waits until `server` is no longer connecting (bounded by its
    /// startup timeout): `Ok` when connected, else why not.
    async fn settled(&self, server: &Arc<Server>) -> Result<(), McpError> {
        let deadline = Instant::now() + server.config.startup_timeout() + REPORT_MARGIN;
        loop {
            let mut changed = self.inner.changed.subscribe();
            {
                let state = server.lock();
                match &state.phase {
                    Phase::Connected(_) => return Ok(()),
                    Phase::Connecting => {}
                    Phase::Disabled => {
                        return Err(McpError::Disabled {
                            server: server.name.clone(),
                        });
                    }
                    Phase::Stopped => return Err(McpError::ShutDown),
                    Phase::Failed {
                        why, stderr_tail, ..
                    } => {
                        return Err(McpError::Unavailable {
                            server: server.name.clone(),
                            reason: why.clone(),
                            stderr_tail: stderr_tail.clone(),
                            retry_in: None,
                        });
                    }
                }
            }
            tokio::select! {
                _ = changed.changed() => {}
                _ = tokio::time::sleep_until(deadline) => {
                    return Err(McpError::StillConnecting { server: server.name.clone() });
                }
            }
        }
    }
}
