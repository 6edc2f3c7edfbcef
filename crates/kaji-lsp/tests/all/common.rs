//! Where the test servers are, and a pool over them.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use kaji_lsp::{LspPool, LspSettings, config::builtin_servers};

/// `tests/lsp-servers/node_modules/.bin` of the repository.
pub fn servers_bin() -> PathBuf {
    let dir =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/lsp-servers/node_modules/.bin");
    assert!(
        dir.join("pyright-langserver").exists(),
        "the test language servers are missing: run `npm ci --prefix tests/lsp-servers` (see docs/testing.md)"
    );
    dir
}

/// A pool with the built-in servers, programs looked up in the test
/// servers' directory and the system's, waiting up to `wait`.
pub fn pool(wait: Duration) -> LspPool {
    let path = std::env::join_paths(std::iter::once(servers_bin()).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))
    .unwrap();
    LspPool::new(
        LspSettings {
            servers: builtin_servers(),
            wait,
            path: Some(path),
        },
        Arc::default(),
    )
}
