//! Hostile input of every kind gives an error (or a harmless result), never
//! a panic or a hang.

use serde_json::json;

use super::{put, run, workdir};

#[tokio::test]
async fn nul_bytes_and_odd_paths_never_panic() {
    let (_d, root) = workdir();
    put(&root, "a.txt", "x\n");
    let long = "x/".repeat(3000);
    // Read, Edit and Glob on paths in and out of the working directory
    // (Glob's "*.none" only looks one level deep, so "/" stays cheap).
    let paths = [
        "a\0b",
        "",
        "/",
        "..",
        "../../../../..",
        &long,
        "/proc/self/mem",
        "/dev/null",
    ];
    for path in paths {
        for (tool, input) in [
            ("Read", json!({"file_path": path})),
            (
                "Edit",
                json!({"file_path": path, "old_string": "x", "new_string": "y"}),
            ),
            ("Glob", json!({"pattern": "*.none", "path": path})),
        ] {
            // Only errors or results; any panic fails the test.
            let _ = run(tool, input, &root).await;
        }
    }
    // Write and Grep only where the test may write and walk.
    for path in [
        "a\0b",
        "",
        "a.txt/below",
        &long,
        "/proc/self/mem",
        "/dev/null",
    ] {
        let _ = run("Write", json!({"file_path": path, "content": "x"}), &root).await;
        let _ = run("Grep", json!({"pattern": "zzz", "path": path}), &root).await;
    }
    assert_eq!(std::fs::read_to_string(root.join("a.txt")).unwrap(), "x\n");
    for pattern in ["\0", "**/\0", "[", "{", "a/**/**/b", "/"] {
        let _ = run("Glob", json!({"pattern": pattern}), &root).await;
        let _ = run("Grep", json!({"pattern": pattern}), &root).await;
    }
}

#[tokio::test]
async fn wrong_json_types_are_invalid_input() {
    let (_d, root) = workdir();
    for (tool, input) in [
        ("Read", json!({"file_path": 7})),
        ("Read", json!("a.txt")),
        ("Write", json!({"file_path": "a", "content": null})),
        (
            "Edit",
            json!({"file_path": "a", "old_string": ["x"], "new_string": "y"}),
        ),
        (
            "Edit",
            json!({"file_path": "a", "old_string": "x", "new_string": "y", "replace_all": "maybe"}),
        ),
        ("Glob", json!({"pattern": {"a": 1}})),
        ("Grep", json!({"pattern": "x", "head_limit": 1.5})),
        ("Grep", json!({"pattern": "x", "multiline": 3})),
    ] {
        let e = run(tool, input.clone(), &root)
            .await
            .expect_err(&format!("{tool} {input}"));
        assert!(e.to_string().contains(tool), "{tool}: {e}");
    }
    let e = run(
        "Edit",
        json!({"file_path": "a", "old_string": "x", "new_string": "y", "replace_all": "maybe"}),
        &root,
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(e.contains("replace_all"), "{e}");
}
