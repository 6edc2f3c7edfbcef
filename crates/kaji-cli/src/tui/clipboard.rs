//! Ctrl+V / Alt+V: what the system clipboard holds, through `wl-paste`
//! (Wayland, when `WAYLAND_DISPLAY` is set) or `xclip` (X11, when
//! `DISPLAY` is set). An image (PNG, JPEG, GIF, WebP) is checked like
//! every image and saved under the session's run directory
//! (`$KAJI_HOME/runs/<session-id>/images/image-N.<ext>`); the prompt gets
//! `[Image #N]`, which attaches it when sent. Text is pasted as text.
//!
//! It never writes to the clipboard and never runs anything but those two
//! programs, each bounded by a timeout.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long a clipboard program may take.
const TIMEOUT: Duration = Duration::from_secs(5);
/// The image types taken, best first.
const IMAGE_TYPES: [&str; 4] = ["image/png", "image/jpeg", "image/gif", "image/webp"];

/// What the clipboard holds.
#[derive(Debug, PartialEq, Eq)]
pub enum Clip {
    /// An image and its type.
    Image {
        /// `image/png`, …
        mime: String,
        /// The bytes.
        bytes: Vec<u8>,
    },
    /// Text.
    Text(String),
    /// Nothing usable.
    Empty,
}

/// Why the clipboard could not be read.
#[derive(Debug, PartialEq, Eq)]
pub enum ClipError {
    /// No clipboard program for this display (said once a session).
    NoTool(String),
    /// The program failed.
    Failed(String),
}

/// The program that reads the clipboard here, from the environment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tool {
    WlPaste,
    Xclip,
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
}

fn tool() -> Result<Tool, ClipError> {
    let wayland = std::env::var_os("WAYLAND_DISPLAY").is_some_and(|v| !v.is_empty());
    let x11 = std::env::var_os("DISPLAY").is_some_and(|v| !v.is_empty());
    if wayland && on_path("wl-paste") {
        return Ok(Tool::WlPaste);
    }
    if x11 && on_path("xclip") {
        return Ok(Tool::Xclip);
    }
    let why = match (wayland, x11) {
        (true, _) => "wl-paste is not installed (package wl-clipboard)",
        (false, true) => "xclip is not installed (package xclip)",
        (false, false) => "there is no display (neither WAYLAND_DISPLAY nor DISPLAY is set)",
    };
    Err(ClipError::NoTool(format!(
        "cannot read the clipboard: {why}; paste text with your terminal's paste key, attach an image with @path"
    )))
}

async fn output(program: &str, args: &[&str]) -> Result<Vec<u8>, ClipError> {
    let run = tokio::process::Command::new(program)
        .args(args)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(TIMEOUT, run)
        .await
        .map_err(|_| ClipError::Failed(format!("{program} did not answer within 5 s")))?
        .map_err(|e| ClipError::Failed(format!("cannot run {program}: {e}")))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(ClipError::Failed(format!(
            "{program} failed: {}",
            err.trim()
        )));
    }
    Ok(out.stdout)
}

/// Reads the clipboard: an image if it offers one, else its text.
pub async fn read() -> Result<Clip, ClipError> {
    let tool = tool()?;
    let (program, list, image_args, text_args): (&str, Vec<&str>, Vec<&str>, Vec<&str>) = match tool
    {
        Tool::WlPaste => (
            "wl-paste",
            vec!["--list-types"],
            vec!["--no-newline", "--type"],
            vec!["--no-newline"],
        ),
        Tool::Xclip => (
            "xclip",
            vec!["-selection", "clipboard", "-t", "TARGETS", "-o"],
            vec!["-selection", "clipboard", "-o", "-t"],
            vec!["-selection", "clipboard", "-o"],
        ),
    };
    // An empty clipboard makes xclip fail on TARGETS: nothing to paste.
    let Ok(types) = output(program, &list).await else {
        return Ok(Clip::Empty);
    };
    let types = String::from_utf8_lossy(&types);
    let offered: Vec<&str> = types.lines().map(str::trim).collect();
    if let Some(mime) = IMAGE_TYPES.iter().find(|t| offered.contains(t)) {
        let mut args = image_args.clone();
        args.push(mime);
        let bytes = output(program, &args).await?;
        return Ok(Clip::Image {
            mime: (*mime).to_string(),
            bytes,
        });
    }
    let text = String::from_utf8_lossy(&output(program, &text_args).await?).into_owned();
    Ok(if text.is_empty() {
        Clip::Empty
    } else {
        Clip::Text(text)
    })
}

/// Saves an image from the clipboard as image `n` under `run_dir` and
/// checks it like every image (a bad one is removed again); its path.
pub fn save_image(run_dir: &Path, n: usize, mime: &str, bytes: &[u8]) -> Result<PathBuf, String> {
    let ext = mime.strip_prefix("image/").unwrap_or("png");
    let dir = run_dir.join("images");
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let path = dir.join(format!("image-{n}.{ext}"));
    std::fs::write(&path, bytes).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    if let Err(why) = kaji_tools::load_image_file(&path) {
        let _ = std::fs::remove_file(&path);
        return Err(format!("the clipboard's image was not attached: {why}"));
    }
    Ok(path)
}

/// The numbers of the `[Image #N]` markers in `prompt`, in order, each once.
pub fn markers(prompt: &str) -> Vec<usize> {
    let mut found = Vec::new();
    let mut rest = prompt;
    while let Some(at) = rest.find("[Image #") {
        rest = &rest[at + 8..];
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        if rest[digits.len()..].starts_with(']')
            && let Ok(n) = digits.parse::<usize>()
            && !found.contains(&n)
        {
            found.push(n);
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_are_found_once_each() {
        assert_eq!(
            markers("see [Image #2] and [Image #1], again [Image #2]; not [Image #x]"),
            vec![2, 1]
        );
    }
}
