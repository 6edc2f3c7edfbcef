//! The file tools through a [`FileAccess`] (an editor's buffers): the text
//! comes from and goes to it, never the disk, while `.kajiignore` and the
//! checks on what is on disk still apply.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use kaji_tools::{FileAccess, FileAccessError, ToolContext, ToolError, ToolOutput, builtin_tools};
use serde_json::{Value, json};

/// Buffers held in memory; records the writes.
#[derive(Debug, Default)]
struct Buffers {
    texts: Mutex<BTreeMap<PathBuf, String>>,
    writes: Mutex<Vec<(PathBuf, String)>>,
}

#[async_trait]
impl FileAccess for Buffers {
    async fn read_text(&self, path: &Path) -> Result<String, FileAccessError> {
        let texts = self.texts.lock().unwrap();
        texts
            .get(path)
            .cloned()
            .ok_or_else(|| FileAccessError::Refused {
                owner: "the test editor".into(),
                message: format!("no buffer for {}", path.display()),
            })
    }

    async fn write_text(&self, path: &Path, content: &str) -> Result<(), FileAccessError> {
        self.texts
            .lock()
            .unwrap()
            .insert(path.to_path_buf(), content.to_string());
        self.writes
            .lock()
            .unwrap()
            .push((path.to_path_buf(), content.to_string()));
        Ok(())
    }
}

async fn run(
    name: &str,
    input: Value,
    cwd: &Path,
    files: &Arc<Buffers>,
) -> Result<ToolOutput, ToolError> {
    let registry = builtin_tools();
    let tool = registry.get(name).unwrap();
    let mut ctx = ToolContext::new(cwd);
    ctx.services_mut().files = Some(files.clone());
    tool.call(input, &ctx).await
}

fn setup() -> (tempfile::TempDir, PathBuf, Arc<Buffers>) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::write(root.join("a.txt"), "on disk\n").unwrap();
    let files = Arc::new(Buffers::default());
    files
        .texts
        .lock()
        .unwrap()
        .insert(root.join("a.txt"), "unsaved one\nunsaved two\n".into());
    (dir, root, files)
}

#[tokio::test]
async fn read_returns_the_buffer() {
    let (_dir, root, files) = setup();
    let out = run("Read", json!({"file_path": "a.txt"}), &root, &files)
        .await
        .unwrap();
    assert!(
        out.content.contains("     1\tunsaved one"),
        "{}",
        out.content
    );
    assert!(
        out.content.contains("     2\tunsaved two"),
        "{}",
        out.content
    );
    assert!(!out.content.contains("on disk"));
    let out = run(
        "Read",
        json!({"file_path": "a.txt", "offset": 2}),
        &root,
        &files,
    )
    .await
    .unwrap();
    assert!(
        out.content.starts_with("     2\tunsaved two"),
        "{}",
        out.content
    );
}

#[tokio::test]
async fn edit_and_write_go_to_the_buffer_not_the_disk() {
    let (_dir, root, files) = setup();
    let out = run(
        "Edit",
        json!({"file_path": "a.txt", "old_string": "one", "new_string": "1"}),
        &root,
        &files,
    )
    .await
    .unwrap();
    let diff = out.data.unwrap()["diff"].as_str().unwrap().to_string();
    assert!(
        diff.contains("-unsaved one") && diff.contains("+unsaved 1"),
        "{diff}"
    );
    run(
        "Write",
        json!({"file_path": "sub/new.txt", "content": "fresh\n"}),
        &root,
        &files,
    )
    .await
    .unwrap();
    let writes = files.writes.lock().unwrap().clone();
    assert_eq!(
        writes,
        [
            (root.join("a.txt"), "unsaved 1\nunsaved two\n".to_string()),
            (root.join("sub/new.txt"), "fresh\n".to_string()),
        ]
    );
    assert_eq!(
        std::fs::read_to_string(root.join("a.txt")).unwrap(),
        "on disk\n"
    );
    assert!(!root.join("sub/new.txt").exists());
}

#[tokio::test]
async fn kajiignore_and_the_disk_checks_still_apply() {
    let (_dir, root, files) = setup();
    std::fs::write(root.join(".kajiignore"), "secret.txt\n").unwrap();
    std::fs::write(root.join("secret.txt"), "s\n").unwrap();
    files
        .texts
        .lock()
        .unwrap()
        .insert(root.join("secret.txt"), "s\n".into());
    for (tool, input) in [
        ("Read", json!({"file_path": "secret.txt"})),
        ("Write", json!({"file_path": "secret.txt", "content": "x"})),
        (
            "Edit",
            json!({"file_path": "secret.txt", "old_string": "s", "new_string": "x"}),
        ),
    ] {
        let err = run(tool, input, &root, &files).await.unwrap_err();
        assert!(err.to_string().contains(".kajiignore"), "{tool}: {err}");
    }
    std::fs::create_dir(root.join("d")).unwrap();
    let err = run("Read", json!({"file_path": "d"}), &root, &files)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("is a directory"), "{err}");
    // A buffer the editor cannot give is the tool's error, naming the file.
    std::fs::write(root.join("b.txt"), "b\n").unwrap();
    let err = run("Read", json!({"file_path": "b.txt"}), &root, &files)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("no buffer for"), "{err}");
    assert!(files.writes.lock().unwrap().is_empty());
}

/// A notebook of one code cell `a` whose source is `source`.
fn notebook(source: &str) -> String {
    json!({"cells": [{"cell_type": "code", "execution_count": null, "id": "a", "metadata": {},
        "outputs": [], "source": [source]}], "metadata": {}, "nbformat": 4, "nbformat_minor": 5})
    .to_string()
}

#[tokio::test]
async fn notebook_edit_goes_to_the_buffer_not_the_disk() {
    let (_dir, root, files) = setup();
    let nb = root.join("n.ipynb");
    std::fs::write(&nb, notebook("on_disk = 1")).unwrap();
    files
        .texts
        .lock()
        .unwrap()
        .insert(nb.clone(), notebook("unsaved = 1"));
    let out = run(
        "NotebookEdit",
        json!({"notebook_path": "n.ipynb", "cell_id": "a", "new_source": "edited = 2"}),
        &root,
        &files,
    )
    .await
    .unwrap();
    assert!(out.changed_files, "{}", out.content);
    let writes = files.writes.lock().unwrap().clone();
    assert_eq!(writes.len(), 1, "{writes:?}");
    assert_eq!(writes[0].0, nb);
    assert!(writes[0].1.contains("edited = 2"), "{}", writes[0].1);
    assert_eq!(
        std::fs::read_to_string(&nb).unwrap(),
        notebook("on_disk = 1")
    );
    // A buffer that is not a notebook is the tool's error, and nothing is
    // written.
    files
        .texts
        .lock()
        .unwrap()
        .insert(nb.clone(), "not json".into());
    let err = run(
        "NotebookEdit",
        json!({"notebook_path": "n.ipynb", "cell_id": "a", "new_source": "x"}),
        &root,
        &files,
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("not JSON"), "{err}");
    assert_eq!(files.writes.lock().unwrap().len(), 1);
}
