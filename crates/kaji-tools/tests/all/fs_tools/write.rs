use kaji_tools::{ToolAccess, builtin_tools};
use serde_json::json;

use super::{err, ok, put, workdir};

#[tokio::test]
async fn creates_file_and_parents() {
    let (_d, root) = workdir();
    let out = ok(
        "Write",
        json!({"file_path": "new/deep/file.txt", "content": "one\ntwo\n"}),
        &root,
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(root.join("new/deep/file.txt")).unwrap(),
        "one\ntwo\n"
    );
    assert!(out.content.starts_with("Created"), "{}", out.content);
    assert!(out.content.contains("2 lines"), "{}", out.content);
    assert!(out.changed_files);
    let data = out.data.unwrap();
    assert_eq!(data["action"], "created");
    assert_eq!(data["lines"], 2);
}

#[tokio::test]
async fn overwrites_and_says_so() {
    let (_d, root) = workdir();
    put(&root, "f.txt", "a\nb\nc\n");
    let out = ok(
        "Write",
        json!({"file_path": "f.txt", "content": "z"}),
        &root,
    )
    .await;
    assert_eq!(std::fs::read_to_string(root.join("f.txt")).unwrap(), "z");
    assert!(out.content.starts_with("Overwrote"), "{}", out.content);
    assert!(
        out.content.contains("1 lines") && out.content.contains("had 3 lines"),
        "{}",
        out.content
    );
    let data = out.data.unwrap();
    assert_eq!(data["action"], "overwritten");
    assert!(data["diff"].as_str().unwrap().contains("-a\n"), "{data}");
    // No temporary file is left behind.
    let names: Vec<_> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from("f.txt")]);
}

#[cfg(unix)]
#[tokio::test]
async fn overwrite_keeps_permissions() {
    use std::os::unix::fs::PermissionsExt as _;
    let (_d, root) = workdir();
    put(&root, "run.sh", "#!/bin/sh\n");
    std::fs::set_permissions(root.join("run.sh"), std::fs::Permissions::from_mode(0o751)).unwrap();
    ok(
        "Write",
        json!({"file_path": "run.sh", "content": "#!/bin/sh\necho hi\n"}),
        &root,
    )
    .await;
    let mode = std::fs::metadata(root.join("run.sh"))
        .unwrap()
        .permissions()
        .mode()
        & 0o7777;
    assert_eq!(mode, 0o751);
}

#[cfg(unix)]
#[tokio::test]
async fn writing_through_a_symlink_keeps_the_link() {
    let (_d, root) = workdir();
    put(&root, "real.txt", "old\n");
    std::os::unix::fs::symlink(root.join("real.txt"), root.join("link.txt")).unwrap();
    ok(
        "Write",
        json!({"file_path": "link.txt", "content": "new\n"}),
        &root,
    )
    .await;
    assert!(
        std::fs::symlink_metadata(root.join("link.txt"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(
        std::fs::read_to_string(root.join("real.txt")).unwrap(),
        "new\n"
    );
}

#[tokio::test]
async fn access_reports_absolute_paths() {
    let (_d, root) = workdir();
    let registry = builtin_tools();
    let tool = registry.get("Write").unwrap();
    assert!(!tool.is_read_only());
    let ctx = kaji_tools::ToolContext::new(&root);
    let access = tool.access(&json!({"file_path": "sub/../x.txt", "content": ""}), &ctx);
    assert_eq!(
        access,
        ToolAccess::Edit {
            paths: vec![root.join("x.txt")]
        }
    );
    let outside = tool.access(
        &json!({"file_path": "../../etc/passwd", "content": ""}),
        &ctx,
    );
    let ToolAccess::Edit { paths } = outside else {
        panic!("{outside:?}")
    };
    assert!(
        paths[0].is_absolute() && !paths[0].starts_with(&root),
        "{paths:?}"
    );
}

#[cfg(unix)]
#[tokio::test]
async fn access_shows_where_a_symlink_leads() {
    let (_d, root) = workdir();
    let (_o, outside) = workdir();
    std::os::unix::fs::symlink(&outside, root.join("escape")).unwrap();
    let registry = builtin_tools();
    let ctx = kaji_tools::ToolContext::new(&root);
    let access = registry
        .get("Write")
        .unwrap()
        .access(&json!({"file_path": "escape/f.txt", "content": ""}), &ctx);
    assert_eq!(
        access,
        ToolAccess::Edit {
            paths: vec![root.join("escape/f.txt"), outside.join("f.txt")]
        }
    );
}

#[tokio::test]
async fn a_directory_cannot_be_written() {
    let (_d, root) = workdir();
    std::fs::create_dir(root.join("dir")).unwrap();
    let e = err("Write", json!({"file_path": "dir", "content": "x"}), &root).await;
    assert!(e.contains("Write") && e.contains("is a directory"), "{e}");
}

#[cfg(unix)]
#[tokio::test]
async fn a_fifo_cannot_be_written() {
    let (_d, root) = workdir();
    super::mkfifo(&root.join("pipe"));
    let e = err("Write", json!({"file_path": "pipe", "content": "x"}), &root).await;
    assert!(e.contains("named pipe"), "{e}");
}

#[tokio::test]
async fn missing_content_is_an_invalid_input() {
    let (_d, root) = workdir();
    let e = err("Write", json!({"file_path": "a.txt"}), &root).await;
    assert!(e.contains("Write") && e.contains("content"), "{e}");
}
