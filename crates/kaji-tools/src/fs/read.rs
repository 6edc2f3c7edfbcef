//! `Read`: a text file's lines, numbered like `cat -n`.
//!
//! The file is streamed: only the requested lines are kept in memory (each
//! capped at [`MAX_LINE_CHARS`]), so a file of any size, or a single huge
//! line, costs a bounded amount of memory. Only regular files are opened:
//! a FIFO, socket or device is refused from its metadata, so a read can
//! never block on one.

use std::io::{BufRead, BufReader, Read as _};
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use kaji_protocol::ToolSpec;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::kajiignore::KajiIgnore;
use super::target::check_regular;
use super::{failure, input, paths, sniff};
use crate::{Tool, ToolContext, ToolError, ToolOutput, parse_input};

const NAME: &str = "Read";

/// Lines returned when the call gives no `limit`.
pub(super) const DEFAULT_LIMIT: usize = 2000;
/// Characters kept of one line; the rest is replaced by a marker.
pub(super) const MAX_LINE_CHARS: usize = 2000;
/// Overrides the largest image `Read` returns, in bytes.
pub(super) const IMAGE_MAX_BYTES_ENV: &str = "KAJI_READ_IMAGE_MAX_BYTES";
/// The default largest image: 3.75 MiB, whose base64 fits the providers'
/// 5 MiB limit per image.
pub(super) const DEFAULT_IMAGE_MAX_BYTES: u64 = 3_932_160;

/// The widest and tallest image the providers take, in pixels.
pub const MAX_IMAGE_SIDE: u32 = 8000;

/// Checks an image before it goes into a conversation (an editor's prompt,
/// an attachment): a type the providers take, base64 that decodes, at most
/// the size `Read` sends, content that is the declared type, and readable
/// dimensions within [`MAX_IMAGE_SIDE`]. Returns its width and height, or
/// what is wrong.
pub fn validate_image(media_type: &str, base64: &str) -> Result<(u32, u32), String> {
    use base64::Engine as _;
    const TYPES: [&str; 4] = ["image/png", "image/jpeg", "image/gif", "image/webp"];
    if !TYPES.contains(&media_type) {
        return Err(format!(
            "an image of type {media_type:?}: the models take PNG, JPEG, GIF and WebP"
        ));
    }
    let max = image_max_bytes();
    // Four base64 characters per three bytes: refuse before decoding.
    if base64.len() as u64 > max.div_ceil(3) * 4 + 4 {
        return Err(format!(
            "a {media_type} image of about {} bytes, more than the {max} bytes an image may have",
            base64.len() / 4 * 3
        ));
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(base64.trim())
        .map_err(|e| format!("a {media_type} image whose data is not base64 ({e})"))?;
    if bytes.len() as u64 > max {
        return Err(format!(
            "a {media_type} image of {} bytes, more than the {max} bytes an image may have",
            bytes.len()
        ));
    }
    let Some(info) = sniff::image(&bytes) else {
        return Err(format!(
            "data declared {media_type} that is not a PNG, JPEG, GIF or WebP image"
        ));
    };
    if info.kind.mime() != media_type {
        return Err(format!(
            "data declared {media_type} that is a {} image",
            info.kind.name()
        ));
    }
    check_dimensions(info)
}

/// Reads an image file to attach to a prompt (`kaji exec -i`): its media
/// type, from its bytes, and its data in base64, checked like every image
/// ([`validate_image`]). The error says what is wrong, without the path.
pub fn load_image_file(path: &Path) -> Result<(String, String), String> {
    let max = image_max_bytes();
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let meta = file.metadata().map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Err("not a regular file".into());
    }
    let mut bytes = Vec::new();
    file.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| e.to_string())?;
    let Some(info) = sniff::image(&bytes) else {
        return Err("not a PNG, JPEG, GIF or WebP image".into());
    };
    let mime = info.kind.mime().to_string();
    if bytes.len() as u64 > max {
        return Err(format!(
            "a {mime} image of more than the {max} bytes an image may have ({IMAGE_MAX_BYTES_ENV} sets the limit)"
        ));
    }
    use base64::Engine as _;
    let data = base64::engine::general_purpose::STANDARD.encode(&bytes);
    validate_image(&mime, &data)?;
    Ok((mime, data))
}

/// The image's dimensions, when readable and within [`MAX_IMAGE_SIDE`].
fn check_dimensions(info: sniff::ImageInfo) -> Result<(u32, u32), String> {
    let kind = info.kind.name();
    match info.dimensions.filter(|(w, h)| *w > 0 && *h > 0) {
        None => Err(format!(
            "a {kind} image but its header is damaged (no readable size)"
        )),
        Some((w, h)) if w > MAX_IMAGE_SIDE || h > MAX_IMAGE_SIDE => Err(format!(
            "a {kind} image of {w}x{h} pixels, more than the {MAX_IMAGE_SIDE} pixels a side the models take; make a smaller copy"
        )),
        Some(d) => Ok(d),
    }
}

fn image_max_bytes() -> u64 {
    std::env::var(IMAGE_MAX_BYTES_ENV)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(DEFAULT_IMAGE_MAX_BYTES)
}

/// An image file as an image for the model: refused when it is larger than
/// the limit or its header is damaged (no readable dimensions).
fn read_image(
    path: &Path,
    image: sniff::ImageInfo,
    mut bytes: Vec<u8>,
    file: std::fs::File,
    size: u64,
) -> Result<ToolOutput, ToolError> {
    let shown = path.display();
    let kind = image.kind.name();
    let max = image_max_bytes();
    let too_big = |size: u64| {
        failure(
            NAME,
            format!(
                "{shown} is a {kind} image of {size} bytes, more than the {max} bytes Read sends to the model \
({IMAGE_MAX_BYTES_ENV} sets the limit); make a smaller copy (e.g. `convert in.png -resize 50% small.png`) and Read that"
            ),
        )
    };
    if size > max {
        return Err(too_big(size));
    }
    let (width, height) = match check_dimensions(image) {
        Ok(d) => d,
        Err(why) => {
            return Err(failure(
                NAME,
                format!("{shown} is {why}, {size} bytes; it cannot be shown"),
            ));
        }
    };
    file.take(max + 1 - bytes.len().min(max as usize) as u64)
        .read_to_end(&mut bytes)
        .map_err(|e| io_failure(path, "cannot read", &e))?;
    if bytes.len() as u64 > max {
        return Err(too_big(bytes.len() as u64));
    }
    use base64::Engine as _;
    let data = base64::engine::general_purpose::STANDARD.encode(&bytes);
    Ok(ToolOutput {
        content: format!(
            "{shown}: {kind} image, {width}x{height} pixels, {} bytes (attached below).",
            bytes.len()
        ),
        data: Some(json!({
            "path": path,
            "kind": "image",
            "mime_type": image.kind.mime(),
            "width": width,
            "height": height,
            "bytes": bytes.len(),
        })),
        images: vec![crate::ToolImage {
            media_type: image.kind.mime().to_string(),
            data,
        }],
        ..ToolOutput::default()
    })
}

/// The `Read` tool.
pub(super) struct ReadTool;

#[derive(Debug, Deserialize, JsonSchema)]
struct ReadInput {
    /// Path of the file to read, absolute or relative to the working directory.
    file_path: String,
    /// 1-based line number to start reading at. Use it only for files too long to read at once.
    #[serde(default, deserialize_with = "offset")]
    #[schemars(with = "Option<u64>", range(min = 1))]
    offset: Option<usize>,
    #[serde(default, deserialize_with = "limit")]
    #[schemars(
        with = "Option<u64>",
        range(min = 1),
        description = format!("Number of lines to return (default {DEFAULT_LIMIT}).")
    )]
    limit: Option<usize>,
}

input::named!(fn offset: Option<usize> = opt_usize, "offset");
input::named!(fn limit: Option<usize> = opt_usize, "limit");

#[async_trait]
impl Tool for ReadTool {
    fn name(&self) -> &'static str {
        NAME
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: NAME.to_string(),
            description: format!(
                "Reads a text file and returns its lines numbered like `cat -n`: the line number, a tab, \
then the line. The number and tab are not part of the file; leave them out of Edit's old_string.\n\
- file_path: absolute, or relative to the working directory.\n\
- Without offset/limit it returns the first {DEFAULT_LIMIT} lines. For longer files pass offset (the 1-based \
line to start at) and limit (how many lines) to read the next part.\n\
- Lines longer than {MAX_LINE_CHARS} characters are cut, with a marker.\n\
- A Jupyter notebook (.ipynb) is shown as its cells, each with its id, and their outputs.\n\
- PNG, JPEG, GIF and WebP images are returned as images you can see (up to {DEFAULT_IMAGE_MAX_BYTES} bytes). Other binary \
files, directories and special files (pipes, devices) are refused: use Glob to list a directory and Grep \
to search many files.\n\
- Read a file before you Edit it, so that old_string matches its current text exactly."
            ),
            input_schema: crate::schema::input_schema::<ReadInput>(),
        }
    }

    fn kind(&self) -> crate::ToolKind {
        crate::ToolKind::Read
    }

    fn title(&self, input: &Value) -> String {
        crate::title_with(NAME, input, "file_path")
    }

    fn files(&self, input: &Value) -> crate::ToolFiles {
        crate::ToolFiles::read(input.get("file_path").and_then(Value::as_str))
    }

    fn is_read_only(&self) -> bool {
        true
    }

    async fn call(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let input: ReadInput = parse_input(NAME, input)?;
        crate::require_text(
            NAME,
            "file_path",
            &input.file_path,
            "give the path of a file to read",
        )?;
        if input.limit == Some(0) {
            return Err(ToolError::InvalidInput {
                tool: NAME.to_string(),
                message: "limit must be at least 1 (or left out)".to_string(),
            });
        }
        let path = paths::resolve(ctx, &input.file_path);
        if super::notebook::is_notebook(&path) && path.is_file() {
            let cwd = paths::cwd(ctx);
            return blocking(move || super::notebook::render_for_read(NAME, &cwd, &path)).await;
        }
        let request = ReadRequest {
            path,
            cwd: paths::cwd(ctx),
            offset: input.offset.unwrap_or(1).max(1),
            limit: input.limit.unwrap_or(DEFAULT_LIMIT),
            cancel: ctx.cancel.clone(),
        };
        match ctx.services.files.clone().filter(|f| f.reads_text()) {
            None => blocking(move || request.run()).await,
            Some(files) => read_through(request, files.as_ref()).await,
        }
    }
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, ToolError> + Send + 'static,
) -> Result<T, ToolError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| failure(NAME, format!("the read stopped unexpectedly: {e}")))?
}

/// A read through a [`crate::FileAccess`]: the same checks on the disk
/// (`.kajiignore`, the kind of file; images and binary files are read
/// from the disk), then the text as the file's owner holds it.
async fn read_through(
    request: ReadRequest,
    files: &dyn crate::FileAccess,
) -> Result<ToolOutput, ToolError> {
    let (request, opened) = blocking(move || {
        let opened = request.open();
        Ok((request, opened))
    })
    .await?;
    if let Opened::Done(out) = opened? {
        return Ok(out);
    }
    let text = tokio::select! {
        r = files.read_text(&request.path) => r.map_err(|e| {
            failure(NAME, format!("cannot read {}: {e}", request.path.display()))
        })?,
        () = request.cancel.cancelled() => return Err(ToolError::Cancelled),
    };
    let size = text.len() as u64;
    blocking(move || request.text(text.into_bytes(), std::io::empty(), size)).await
}

/// A file that passed the checks.
enum Opened {
    /// Nothing more to read (an image, returned whole).
    Done(ToolOutput),
    /// A text file: its first bytes and the rest.
    Text {
        head: Vec<u8>,
        file: std::fs::File,
        size: u64,
    },
}

struct ReadRequest {
    path: PathBuf,
    cwd: PathBuf,
    offset: usize,
    limit: usize,
    cancel: CancellationToken,
}

impl ReadRequest {
    fn run(self) -> Result<ToolOutput, ToolError> {
        match self.open()? {
            Opened::Done(out) => Ok(out),
            Opened::Text { head, file, size } => self.text(head, file, size),
        }
    }

    /// Checks the file (`.kajiignore`, a regular file, not binary) and
    /// opens it; an image is read whole.
    fn open(&self) -> Result<Opened, ToolError> {
        let path = &self.path;
        let shown = path.display();
        let meta = std::fs::metadata(path);
        let is_dir = meta.as_ref().is_ok_and(|m| m.is_dir());
        let ignore = KajiIgnore::load(&self.cwd);
        if let Some(rule) = ignore.excluded(path, is_dir) {
            return Err(failure(
                NAME,
                format!(
                    "{shown} is excluded by {rule}; kaji's tools may not read it. Do not try to reach it another way."
                ),
            ));
        }
        let meta = meta.map_err(|e| missing_or_io(path, &e))?;
        check_regular(NAME, path, &meta)?;

        let mut file = std::fs::File::open(path).map_err(|e| missing_or_io(path, &e))?;
        // The path may have been swapped since the metadata call.
        let meta = file
            .metadata()
            .map_err(|e| io_failure(path, "cannot read", &e))?;
        check_regular(NAME, path, &meta)?;
        let size = meta.len();

        let mut head = Vec::with_capacity(
            sniff::SNIFF_LEN.min(usize::try_from(size).unwrap_or(usize::MAX)) + 1,
        );
        (&mut file)
            .take(sniff::SNIFF_LEN as u64)
            .read_to_end(&mut head)
            .map_err(|e| io_failure(path, "cannot read", &e))?;

        if let Some(image) = sniff::image(&head) {
            return read_image(path, image, head, file, size).map(Opened::Done);
        }
        if let Some(format) = sniff::binary_format(&head) {
            return Err(failure(
                NAME,
                format!(
                    "{shown} is a binary file ({format}, {size} bytes); Read only shows text files."
                ),
            ));
        }
        if sniff::has_nul(&head) {
            return Err(failure(
                NAME,
                format!(
                    "{shown} is a binary file (it contains NUL bytes; {size} bytes); Read only shows text files. \
If it is UTF-16 text, convert it first."
                ),
            ));
        }
        Ok(Opened::Text { head, file, size })
    }

    /// The numbered lines of a text that starts with `head`.
    fn text(
        &self,
        head: Vec<u8>,
        rest: impl std::io::Read,
        size: u64,
    ) -> Result<ToolOutput, ToolError> {
        let path = &self.path;
        let shown = path.display();
        // Files in /proc and /sys report size 0 yet have content: judge by
        // what was read.
        if head.is_empty() {
            return Ok(ToolOutput {
                content: format!("{shown} exists but is empty (0 lines)."),
                data: Some(
                    json!({"path": path, "kind": "text", "start_line": 1, "lines": 0, "bytes": 0}),
                ),
                ..ToolOutput::default()
            });
        }

        let mut reader =
            BufReader::with_capacity(64 * 1024, std::io::Cursor::new(head).chain(rest));
        self.numbered_lines(&mut reader, size)
    }

    fn numbered_lines(
        &self,
        reader: &mut impl BufRead,
        size: u64,
    ) -> Result<ToolOutput, ToolError> {
        let path = &self.path;
        let shown = path.display();
        let mut buf = Vec::new();
        let mut line_no = 0usize;
        // Skip the lines before `offset` without keeping them.
        while line_no + 1 < self.offset {
            if line_no.is_multiple_of(4096) && self.cancel.is_cancelled() {
                return Err(ToolError::Cancelled);
            }
            match next_line(reader, 0, &mut buf).map_err(|e| io_failure(path, "cannot read", &e))? {
                Some(_) => line_no += 1,
                None => {
                    return Ok(ToolOutput {
                        content: format!(
                            "{shown} has only {line_no} lines, so offset {} is past the end. \
Call Read with an offset from 1 to {line_no}.",
                            self.offset
                        ),
                        data: Some(
                            json!({"path": path, "kind": "text", "start_line": self.offset, "lines": 0, "total_lines": line_no}),
                        ),
                        ..ToolOutput::default()
                    });
                }
            }
        }

        let mut out = String::new();
        let mut lossy = false;
        let mut cut = 0usize;
        let mut shown_lines = 0usize;
        let keep = MAX_LINE_CHARS * 4;
        while shown_lines < self.limit {
            let Some(overflow) = next_line(reader, keep, &mut buf)
                .map_err(|e| io_failure(path, "cannot read", &e))?
            else {
                break;
            };
            line_no += 1;
            shown_lines += 1;
            if buf.last() == Some(&b'\r') {
                buf.pop();
            }
            let (text, was_lossy) = decode(&buf, overflow);
            lossy |= was_lossy;
            out.push_str(&format!("{line_no:>6}\t"));
            let mut chars = text.char_indices();
            match chars.nth(MAX_LINE_CHARS) {
                Some((end, _)) => {
                    out.push_str(&text[..end]);
                    out.push_str(&format!(" … [line cut at {MAX_LINE_CHARS} characters]"));
                    cut += 1;
                }
                None if overflow => {
                    out.push_str(&text);
                    out.push_str(&format!(" … [line cut at {MAX_LINE_CHARS} characters]"));
                    cut += 1;
                }
                None => out.push_str(&text),
            }
            out.push('\n');
        }
        let more = match reader.fill_buf() {
            Ok(rest) => !rest.is_empty(),
            Err(e) => return Err(io_failure(path, "cannot read", &e)),
        };
        if more {
            out.push_str(&format!(
                "\n(Showing lines {}-{line_no}; the file goes on{}. \
Call Read with offset {} to read more.)\n",
                self.offset,
                if size > 0 {
                    format!(" ({size} bytes in all)")
                } else {
                    String::new()
                },
                line_no + 1
            ));
        }
        if cut > 0 {
            out.push_str(&format!(
                "\n({cut} line(s) longer than {MAX_LINE_CHARS} characters were cut; use Grep to find text in them.)\n"
            ));
        }
        if lossy {
            out.push_str(
                "\n(The file is not valid UTF-8: bytes that are not UTF-8 are shown as \u{FFFD}. \
Edit cannot change this file; use Write or Bash instead.)\n",
            );
        }
        Ok(ToolOutput {
            content: out,
            data: Some(json!({
                "path": path,
                "kind": "text",
                "start_line": self.offset,
                "lines": shown_lines,
                "more": more,
                "bytes": size,
            })),
            ..ToolOutput::default()
        })
    }
}

/// Reads one line (without its `\n`) into `out`, keeping at most `keep`
/// bytes of it and skipping the rest. Returns `None` at the end of the
/// input, else whether bytes were skipped.
pub(super) fn next_line(
    reader: &mut impl BufRead,
    keep: usize,
    out: &mut Vec<u8>,
) -> std::io::Result<Option<bool>> {
    out.clear();
    let mut any = false;
    let mut overflow = false;
    loop {
        let buf = match reader.fill_buf() {
            Ok(buf) => buf,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if buf.is_empty() {
            return Ok(any.then_some(overflow));
        }
        any = true;
        let newline = buf.iter().position(|&b| b == b'\n');
        let chunk = &buf[..newline.unwrap_or(buf.len())];
        let room = keep.saturating_sub(out.len());
        if chunk.len() > room {
            overflow = true;
        }
        out.extend_from_slice(&chunk[..chunk.len().min(room)]);
        let used = newline.map_or(buf.len(), |i| i + 1);
        reader.consume(used);
        if newline.is_some() {
            return Ok(Some(overflow));
        }
    }
}

/// Decodes a line, replacing invalid UTF-8. A multi-byte character split by
/// the line cap is dropped silently rather than reported as invalid.
fn decode(bytes: &[u8], overflow: bool) -> (String, bool) {
    match std::str::from_utf8(bytes) {
        Ok(s) => (s.to_string(), false),
        Err(e) if overflow && e.error_len().is_none() => {
            let valid = &bytes[..e.valid_up_to()];
            (String::from_utf8_lossy(valid).into_owned(), false)
        }
        Err(_) => (String::from_utf8_lossy(bytes).into_owned(), true),
    }
}

fn missing_or_io(path: &Path, e: &std::io::Error) -> ToolError {
    if e.kind() == std::io::ErrorKind::NotFound {
        failure(
            NAME,
            format!(
                "{} does not exist. Check the path; Glob can find files by name.",
                path.display()
            ),
        )
    } else {
        io_failure(path, "cannot read", e)
    }
}

fn io_failure(path: &Path, what: &str, e: &std::io::Error) -> ToolError {
    failure(NAME, format!("{what} {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_line_caps_and_skips() {
        let data = b"short\nabcdefghij\nlast";
        let mut r = BufReader::with_capacity(3, &data[..]);
        let mut buf = Vec::new();
        assert_eq!(next_line(&mut r, 4, &mut buf).unwrap(), Some(true));
        assert_eq!(buf, b"shor");
        assert_eq!(next_line(&mut r, 100, &mut buf).unwrap(), Some(false));
        assert_eq!(buf, b"abcdefghij");
        assert_eq!(next_line(&mut r, 100, &mut buf).unwrap(), Some(false));
        assert_eq!(buf, b"last");
        assert_eq!(next_line(&mut r, 100, &mut buf).unwrap(), None);
    }

    #[test]
    fn decode_drops_split_char_only_when_cut() {
        let bytes = "aé".as_bytes();
        assert_eq!(decode(&bytes[..2], true), ("a".to_string(), false));
        assert!(decode(&bytes[..2], false).1);
    }
}
