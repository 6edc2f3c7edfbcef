//! typescript-language-server (with the pinned typescript): a type error
//! introduced and fixed, and a definition in another file.

use std::time::Duration;

use kaji_lsp::{FileDiagnostics, introduced};
use serde_json::json;

use crate::common::pool;

fn ready(d: FileDiagnostics) -> Vec<kaji_lsp::Diagnostic> {
    match d {
        FileDiagnostics::Ready { diagnostics, .. } => diagnostics,
        other => panic!("no diagnostics: {other:?}"),
    }
}

#[tokio::test]
async fn typescript_diagnostics_and_a_definition_across_files() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::write(
        root.join("tsconfig.json"),
        r#"{"compilerOptions": {"strict": true}}"#,
    )
    .unwrap();
    std::fs::write(
        root.join("b.ts"),
        "export function helper(n: number): number {\n  return n;\n}\n",
    )
    .unwrap();
    let file = root.join("a.ts");
    let good = "import { helper } from \"./b\";\n\nhelper(1);\n";
    let bad = "import { helper } from \"./b\";\n\nhelper(\"one\");\n";
    std::fs::write(&file, good).unwrap();
    let pool = pool(Duration::from_secs(120));
    let before = ready(pool.diagnostics(&file, &root, good).await);
    assert!(before.is_empty(), "{before:?}");
    let after = ready(pool.diagnostics(&file, &root, bad).await);
    let new = introduced(&before, &after);
    assert_eq!(new.len(), 1, "{after:?}");
    assert_eq!(
        (new[0].line, new[0].column, new[0].severity),
        (3, 8, "error")
    );
    let fixed = ready(pool.diagnostics(&file, &root, good).await);
    assert!(introduced(&after, &fixed).is_empty(), "{fixed:?}");

    let answer = pool
        .request(
            &file,
            &root,
            good,
            "textDocument/definition",
            json!({"position": {"line": 2, "character": 1}}),
            Duration::from_secs(120),
        )
        .await
        .unwrap();
    let text = answer.to_string();
    assert!(text.contains("b.ts"), "{text}");
    pool.shutdown().await;
}
