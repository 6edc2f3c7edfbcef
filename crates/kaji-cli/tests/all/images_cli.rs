//! `kaji exec -i FILE` / `--image FILE` and `kaji -p -i FILE`: images
//! attached to the prompt reach the model in each wire format, checked
//! like every image (a bad one is refused before anything is sent).

use std::path::Path;

use kaji_test_support::{ScriptedModelServer, Turn};
use tokio::process::Command;

use crate::common::{self, Wire, done, scripted, serve};

/// A 1x1 PNG.
const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";
/// A 1x1 GIF.
const GIF: &str = "R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7";

fn kaji(
    home: &Path,
    server: &ScriptedModelServer,
    wire: Wire,
    first: &[&str],
    rest: &[&str],
) -> Command {
    let mut cmd = common::kaji(home);
    cmd.args(first);
    scripted(&mut cmd, server, wire).args(rest);
    cmd
}

const PNG_BYTES: &[u8] = &[
    137, 80, 78, 71, 13, 10, 26, 10, 0, 0, 0, 13, 73, 72, 68, 82, 0, 0, 0, 1, 0, 0, 0, 1, 8, 6, 0,
    0, 0, 31, 21, 196, 137, 0, 0, 0, 13, 73, 68, 65, 84, 120, 218, 99, 100, 96, 248, 95, 15, 0, 2,
    135, 1, 128, 235, 71, 186, 146, 0, 0, 0, 0, 73, 69, 78, 68, 174, 66, 96, 130,
];
/// [`GIF`]'s bytes.
const GIF_BYTES: &[u8] = &[
    71, 73, 70, 56, 57, 97, 1, 0, 1, 0, 128, 0, 0, 0, 0, 0, 255, 255, 255, 33, 249, 4, 1, 0, 0, 0,
    0, 44, 0, 0, 0, 0, 1, 0, 1, 0, 0, 2, 1, 68, 0, 59,
];

fn write_images(dir: &Path) {
    std::fs::write(dir.join("shot.png"), PNG_BYTES).unwrap();
    std::fs::write(dir.join("anim.gif"), GIF_BYTES).unwrap();
}

/// The image blocks of the first request's messages, as the wire
/// format writes them: (media type, base64 data).
fn sent_images(server: &ScriptedModelServer, wire: Wire) -> Vec<(String, String)> {
    let requests = server.requests();
    let parts: Vec<serde_json::Value> = requests[0]
        .messages()
        .iter()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .collect();
    parts
        .iter()
        .filter_map(|p| match wire {
            Wire::Anthropic if p["type"] == "image" => Some((
                p["source"]["media_type"].as_str()?.to_string(),
                p["source"]["data"].as_str()?.to_string(),
            )),
            Wire::OpenAi if p["type"] == "image_url" => data_url(p["image_url"]["url"].as_str()?),
            Wire::Responses if p["type"] == "input_image" => data_url(p["image_url"].as_str()?),
            _ => None,
        })
        .collect()
}

fn data_url(url: &str) -> Option<(String, String)> {
    let rest = url.strip_prefix("data:")?;
    let (mime, data) = rest.split_once(";base64,")?;
    Some((mime.to_string(), data.to_string()))
}

#[tokio::test]
async fn exec_attaches_images_on_every_wire_format() {
    for wire in [Wire::Anthropic, Wire::OpenAi, Wire::Responses] {
        let home = tempfile::tempdir().unwrap();
        let work = tempfile::tempdir().unwrap();
        write_images(work.path());
        let server = serve([done("A red dot.")]).await;
        let mut cmd = kaji(
            home.path(),
            &server,
            wire,
            &["exec", "-i", "shot.png", "--image", "anim.gif"],
            &["what is this?"],
        );
        cmd.current_dir(work.path());
        let out = cmd.output().await.unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{wire:?}: {stderr}");
        assert_eq!(
            sent_images(&server, wire),
            vec![
                ("image/png".to_string(), PNG.to_string()),
                ("image/gif".to_string(), GIF.to_string())
            ],
            "{wire:?}: {:#?}",
            server.requests()[0].body
        );
    }
}

#[tokio::test]
async fn print_mode_takes_images_too() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    write_images(work.path());
    let server = serve([done("A dot.")]).await;
    let mut cmd = kaji(
        home.path(),
        &server,
        Wire::Anthropic,
        &["-p", "-i", "shot.png"],
        &["describe it"],
    );
    cmd.current_dir(work.path());
    let out = cmd.output().await.unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(sent_images(&server, Wire::Anthropic).len(), 1);
    assert!(String::from_utf8_lossy(&out.stdout).contains("A dot."));
}

#[tokio::test]
async fn bad_images_are_refused_before_anything_is_sent() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    std::fs::write(work.path().join("notes.png"), "not an image at all").unwrap();
    // A PNG header claiming 100000x1 pixels.
    let mut huge = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
    huge.extend_from_slice(&100_000u32.to_be_bytes());
    huge.extend_from_slice(&1u32.to_be_bytes());
    huge.extend_from_slice(&[8, 2, 0, 0, 0, 0, 0, 0, 0]);
    std::fs::write(work.path().join("wide.png"), huge).unwrap();
    let server = serve([Turn::text("never")]).await;
    for (file, why) in [
        ("notes.png", "not a PNG, JPEG, GIF or WebP image"),
        ("wide.png", "pixels a side"),
        ("missing.png", "No such file"),
    ] {
        let mut cmd = kaji(
            home.path(),
            &server,
            Wire::Anthropic,
            &["exec", "--image", file],
            &["look"],
        );
        cmd.current_dir(work.path());
        let out = cmd.output().await.unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{file}: {stderr}");
        assert!(
            stderr.contains(&format!("--image {file}")) && stderr.contains(why),
            "{file}: {stderr}"
        );
    }
    assert!(server.requests().is_empty());
}
