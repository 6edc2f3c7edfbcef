//! A built-in default whose program is there but cannot start (rustup's
//! `rust-analyzer` proxy without the component) is taken as not
//! installed; a server one configured that cannot start is reported.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;
use std::time::Duration;

use kaji_lsp::config::{ServerSettings, apply_settings, builtin_servers};
use kaji_lsp::{FileDiagnostics, LspPool, LspSettings};

#[tokio::test]
async fn a_builtin_that_cannot_start_is_no_server_and_a_configured_one_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let proxy = bin.join("rust-analyzer");
    std::fs::write(
        &proxy,
        "#!/bin/sh\necho 'error: Unknown binary' >&2\nexit 1\n",
    )
    .unwrap();
    std::fs::set_permissions(&proxy, std::fs::Permissions::from_mode(0o755)).unwrap();
    let file = dir.path().join("main.rs");
    std::fs::write(&file, "fn main() {}\n").unwrap();
    let pool = |servers| {
        let settings = LspSettings {
            servers,
            wait: Duration::from_secs(300),
            path: Some(bin.clone().into_os_string()),
        };
        LspPool::new(settings, Arc::default())
    };
    let builtin = pool(builtin_servers());
    assert_eq!(
        builtin
            .diagnostics(&file, dir.path(), "fn main() {}\n")
            .await,
        FileDiagnostics::NoServer
    );

    let mut servers = builtin_servers();
    let mine = ServerSettings {
        command: Some(proxy.display().to_string()),
        extensions: Some(vec!["rs".into()]),
        ..ServerSettings::default()
    };
    apply_settings(&mut servers, &BTreeMap::from([("mine".to_string(), mine)]));
    let configured = pool(servers);
    match configured
        .diagnostics(&file, dir.path(), "fn main() {}\n")
        .await
    {
        FileDiagnostics::Unavailable { server, reason } => {
            assert_eq!(server, "mine");
            assert!(reason.contains("exited"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
}
