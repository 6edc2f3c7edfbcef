//! `NotebookEdit` and `Read` of notebooks on real nbformat-4 notebooks
//! (written as nbformat writes them: one-space indent, sorted keys). Each
//! expected file is what Python's `json.dumps` (nbformat's writer) gives
//! for the edited notebook, so an edit that is byte-equal to it changed
//! only the one cell and left the metadata and other cells as they were.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::{err, ok};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/notebooks")
        .join(name)
}

/// Copies fixture `name` into a temporary directory; its path there.
fn copy(dir: &Path, name: &str) -> PathBuf {
    let to = dir.join(name);
    std::fs::copy(fixture(name), &to).unwrap();
    to
}

async fn edit_matches(notebook: &str, input: Value, expected: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = copy(dir.path(), notebook);
    let mut input = input;
    input["notebook_path"] = json!(path.to_str().unwrap());
    let out = ok("NotebookEdit", input, dir.path()).await;
    assert!(out.changed_files);
    let got = std::fs::read_to_string(&path).unwrap();
    let want = std::fs::read_to_string(fixture(expected)).unwrap();
    assert!(
        got == want,
        "{notebook} edited is not {expected}:\n--- got\n{got}\n--- want\n{want}"
    );
    out.content
}

#[tokio::test]
async fn replace_clears_outputs_and_keeps_everything_else() {
    let msg = edit_matches(
        "analysis.ipynb",
        json!({"cell_id": "total", "new_source": "df[\"amount\"].mean()\nprint('ok')"}),
        "analysis.replace_total.ipynb",
    )
    .await;
    assert!(msg.contains("total"), "{msg}");
}

#[tokio::test]
async fn insert_after_a_cell_gets_a_fresh_id() {
    edit_matches(
        "analysis.ipynb",
        json!({"cell_id": "imports", "new_source": "## Totals", "cell_type": "markdown", "edit_mode": "insert"}),
        "analysis.insert_after_imports.ipynb",
    )
    .await;
}

#[tokio::test]
async fn delete_a_middle_and_the_last_cell() {
    edit_matches(
        "analysis.ipynb",
        json!({"cell_id": "broken", "new_source": "", "edit_mode": "delete"}),
        "analysis.delete_broken.ipynb",
    )
    .await;
    edit_matches(
        "analysis.ipynb",
        json!({"cell_id": "raw-notes", "new_source": "", "edit_mode": "delete"}),
        "analysis.delete_last.ipynb",
    )
    .await;
}

#[tokio::test]
async fn notebooks_without_ids_take_cell_n() {
    edit_matches(
        "no_ids.ipynb",
        json!({"new_source": "import os\n\n", "cell_type": "code", "edit_mode": "insert"}),
        "no_ids.insert_first.ipynb",
    )
    .await;
    edit_matches(
        "no_ids.ipynb",
        json!({"cell_id": "cell-1", "new_source": "y = 2", "cell_type": "code"}),
        "no_ids.cell1_to_code.ipynb",
    )
    .await;
}

#[tokio::test]
async fn insert_into_an_empty_notebook() {
    edit_matches(
        "empty.ipynb",
        json!({"new_source": "Hello", "cell_type": "markdown", "edit_mode": "insert"}),
        "empty.insert.ipynb",
    )
    .await;
}

#[tokio::test]
async fn bad_notebooks_and_ids_are_clear_errors_that_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = copy(dir.path(), "analysis.ipynb");
    let before = std::fs::read(&path).unwrap();
    let p = path.to_str().unwrap();
    let e = err(
        "NotebookEdit",
        json!({"notebook_path": p, "cell_id": "nope", "new_source": "x"}),
        dir.path(),
    )
    .await;
    assert!(
        e.contains("no cell has the id \"nope\"") && e.contains("intro, imports"),
        "{e}"
    );
    let e = err(
        "NotebookEdit",
        json!({"notebook_path": p, "new_source": "x", "edit_mode": "insert"}),
        dir.path(),
    )
    .await;
    assert!(e.contains("needs cell_type"), "{e}");
    let e = err(
        "NotebookEdit",
        json!({"notebook_path": p, "new_source": "x"}),
        dir.path(),
    )
    .await;
    assert!(e.contains("needs cell_id"), "{e}");
    assert_eq!(std::fs::read(&path).unwrap(), before);

    let broken = dir.path().join("broken.ipynb");
    std::fs::write(&broken, "{\"cells\": [ {\"cell_type\": ").unwrap();
    let e = err(
        "NotebookEdit",
        json!({"notebook_path": broken.to_str().unwrap(), "cell_id": "cell-0", "new_source": "x"}),
        dir.path(),
    )
    .await;
    assert!(
        e.contains("broken.ipynb is not a valid notebook: it is not JSON"),
        "{e}"
    );
    let e = err(
        "Read",
        json!({"file_path": broken.to_str().unwrap()}),
        dir.path(),
    )
    .await;
    assert!(e.contains("not JSON"), "{e}");
    assert_eq!(
        std::fs::read_to_string(&broken).unwrap(),
        "{\"cells\": [ {\"cell_type\": "
    );
}

#[tokio::test]
async fn kajiignore_guards_notebooks() {
    let dir = tempfile::tempdir().unwrap();
    let path = copy(dir.path(), "analysis.ipynb");
    std::fs::write(dir.path().join(".kajiignore"), "*.ipynb\n").unwrap();
    let p = path.to_str().unwrap();
    let e = err(
        "NotebookEdit",
        json!({"notebook_path": p, "cell_id": "total", "new_source": "x"}),
        dir.path(),
    )
    .await;
    assert!(e.contains(".kajiignore"), "{e}");
    let e = err("Read", json!({"file_path": p}), dir.path()).await;
    assert!(e.contains(".kajiignore"), "{e}");
}

#[tokio::test]
async fn read_shows_cells_ids_outputs_and_images() {
    let dir = tempfile::tempdir().unwrap();
    let path = copy(dir.path(), "analysis.ipynb");
    let out = ok(
        "Read",
        json!({"file_path": path.to_str().unwrap()}),
        dir.path(),
    )
    .await;
    let text = &out.content;
    for want in [
        "Jupyter notebook, 6 cells, language python",
        "<cell id=\"intro\" type=\"markdown\">\n# Sales analysis\n\nDonnées naïves — 2026.\n</cell>",
        "<cell id=\"imports\" type=\"code\" execution_count=\"1\">",
        "<output cell=\"imports\">\nloaded 3 rows\n</output>",
        "<output cell=\"total\">\n42.5\n</output>",
        "[image/png image, 1x1, attached below]",
        "KeyError: 'price'",
        "<cell id=\"raw-notes\" type=\"raw\">",
    ] {
        assert!(text.contains(want), "missing {want:?} in:\n{text}");
    }
    assert!(!text.contains('\u{1b}'), "colour codes left in:\n{text}");
    assert_eq!(out.images.len(), 1);
    assert_eq!(out.images[0].media_type, "image/png");

    let ids = ok(
        "Read",
        json!({"file_path": copy(dir.path(), "no_ids.ipynb").to_str().unwrap()}),
        dir.path(),
    )
    .await;
    assert!(
        ids.content
            .contains("<cell id=\"cell-1\" type=\"markdown\">"),
        "{}",
        ids.content
    );
}

#[tokio::test]
async fn long_outputs_are_cut() {
    let dir = tempfile::tempdir().unwrap();
    let long = "x".repeat(10_000);
    let nb = json!({"cells": [{"cell_type": "code", "execution_count": 1, "id": "a", "metadata": {},
        "outputs": [{"name": "stdout", "output_type": "stream", "text": long}], "source": "print()"}],
        "metadata": {}, "nbformat": 4, "nbformat_minor": 5});
    let path = dir.path().join("long.ipynb");
    std::fs::write(&path, nb.to_string()).unwrap();
    let out = ok(
        "Read",
        json!({"file_path": path.to_str().unwrap()}),
        dir.path(),
    )
    .await;
    assert!(
        out.content.contains("[… 6000 more characters of output]"),
        "{}",
        out.content
    );
    assert!(out.content.len() < 5_000);
}

#[tokio::test]
async fn the_approval_preview_is_the_edit_as_a_diff() {
    let dir = tempfile::tempdir().unwrap();
    let path = copy(dir.path(), "analysis.ipynb");
    let before = std::fs::read(&path).unwrap();
    let registry = kaji_tools::builtin_tools();
    let tool = registry.get("NotebookEdit").unwrap();
    let input = json!({"notebook_path": path.to_str().unwrap(), "cell_id": "total",
        "new_source": "df[\"amount\"].mean()"});
    let preview = tool
        .preview(&input, &kaji_tools::ToolContext::new(dir.path()))
        .unwrap();
    assert!(
        preview.contains("+    \"df[\\\"amount\\\"].mean()\"")
            && preview.contains("-    \"df[\\\"amount\\\"].sum()\""),
        "{preview}"
    );
    // A preview changes nothing.
    assert_eq!(std::fs::read(&path).unwrap(), before);
}
