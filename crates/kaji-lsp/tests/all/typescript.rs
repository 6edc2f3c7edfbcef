//! typescript-language-server (with the pinned typescript): a definition
//! in another file, and hover. Its diagnostics carry no version, so when
//! they are complete is a matter of time (docs/lsp.md): CI's diagnostics
//! tests use pyright, which versions them.

use std::time::Duration;

use serde_json::json;

use crate::common::pool;

#[tokio::test]
async fn typescript_finds_a_definition_in_another_file() {
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
    let text = "import { helper } from \"./b\";\n\nhelper(1);\n";
    std::fs::write(&file, text).unwrap();
    let pool = pool(Duration::from_secs(300));
    // Positions 0-based here: the call of `helper`.
    let ask = |method: &'static str, line: u32, character: u32| {
        pool.request(
            &file,
            &root,
            text,
            method,
            json!({"position": {"line": line, "character": character}}),
            Duration::from_secs(300),
        )
    };
    let definition = ask("textDocument/definition", 2, 1).await.unwrap();
    let first = definition
        .as_array()
        .and_then(|a| a.first())
        .cloned()
        .unwrap_or(definition.clone());
    let uri = first
        .get("uri")
        .or_else(|| first.get("targetUri"))
        .unwrap()
        .as_str()
        .unwrap();
    assert!(uri.ends_with("/b.ts"), "{definition}");
    let hover = ask("textDocument/hover", 2, 1).await.unwrap().to_string();
    assert!(hover.contains("helper(n: number): number"), "{hover}");
    pool.shutdown().await;
}
