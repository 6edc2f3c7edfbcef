//! Diagnostics from pyright.

use std::time::Duration;

use kaji_lsp::{FileDiagnostics, introduced};

use crate::common::pool;

fn ready(d: FileDiagnostics) -> Vec<kaji_lsp::Diagnostic> {
    match d {
        FileDiagnostics::Ready { diagnostics, .. } => diagnostics,
        other => panic!("no diagnostics: {other:?}"),
    }
}

#[tokio::test]
async fn a_type_error_is_introduced_and_fixed() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let file = root.join("m.py");
    let good = "def f(x: int) -> int:\n    return x\n\nf(1)\n";
    let bad = "def f(x: int) -> int:\n    return x\n\nf(\"one\")\n";
    std::fs::write(&file, good).unwrap();
    let pool = pool(Duration::from_secs(120));
    let before = ready(pool.diagnostics(&file, &root, good).await);
    assert!(before.is_empty(), "{before:?}");
    let after = ready(pool.diagnostics(&file, &root, bad).await);
    let new = introduced(&before, &after);
    assert_eq!(new.len(), 1, "{after:?}");
    assert_eq!((new[0].line, new[0].severity), (4, "error"));
    let fixed = ready(pool.diagnostics(&file, &root, good).await);
    assert!(introduced(&after, &fixed).is_empty());
    pool.shutdown().await;
}
