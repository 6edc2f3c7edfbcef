//! Turning MCP results into the text a model reads.
//!
//! Text is passed through unchanged. Anything the model cannot read as text
//! (images, audio, binary resources) becomes a one-line placeholder naming
//! its type and size, e.g. `[image: image/png, 1234 bytes]`; nothing is
//! silently dropped. Images of the types models read (PNG, JPEG, GIF,
//! WebP) are also passed on as images ([`call_result_images`]).

use crate::model::{
    CallToolResult, ContentBlock, KnownContent, ReadResourceResult, ResourceContents,
};

/// The decoded size of base64 `data` in bytes (whitespace ignored).
pub fn base64_decoded_len(data: &str) -> usize {
    let significant = data.bytes().filter(|b| !b.is_ascii_whitespace()).count();
    let padding = data
        .trim_end()
        .bytes()
        .rev()
        .take_while(|&b| b == b'=')
        .count()
        .min(2);
    (significant * 3 / 4).saturating_sub(padding)
}

/// One content block as text.
pub fn block_text(block: &ContentBlock) -> String {
    match block {
        ContentBlock::Known(KnownContent::Text { text }) => text.clone(),
        ContentBlock::Known(KnownContent::Image { data, mime_type }) => {
            format!("[image: {mime_type}, {} bytes]", base64_decoded_len(data))
        }
        ContentBlock::Known(KnownContent::Audio { data, mime_type }) => {
            format!("[audio: {mime_type}, {} bytes]", base64_decoded_len(data))
        }
        ContentBlock::Known(KnownContent::Resource { resource }) => {
            resource_contents_text(resource)
        }
        ContentBlock::Known(KnownContent::ResourceLink {
            uri,
            name,
            mime_type,
            size,
        }) => {
            let mut text = format!("[resource link: {uri}");
            if !name.is_empty() && name != uri {
                text.push_str(&format!(" ({name})"));
            }
            if let Some(mime) = mime_type {
                text.push_str(&format!(", {mime}"));
            }
            if let Some(size) = size {
                text.push_str(&format!(", {size} bytes"));
            }
            text.push(']');
            text
        }
        ContentBlock::Other(json) => {
            // A content kind newer than this build: name it, keep its size.
            let kind = json
                .get("type")
                .and_then(|t| t.as_str())
                .unwrap_or("unknown");
            format!("[{kind} content, {} bytes of JSON]", json.to_string().len())
        }
    }
}

/// One resource's contents as text: text resources as a header line and
/// the text, binary ones as a placeholder.
pub fn resource_contents_text(contents: &ResourceContents) -> String {
    match contents {
        ResourceContents::Text {
            uri,
            mime_type,
            text,
        } => match mime_type {
            Some(mime) => format!("[resource: {uri}, {mime}]\n{text}"),
            None => format!("[resource: {uri}]\n{text}"),
        },
        ResourceContents::Blob {
            uri,
            mime_type,
            blob,
        } => format!(
            "[resource: {uri}, {}, {} bytes]",
            mime_type.as_deref().unwrap_or("application/octet-stream"),
            base64_decoded_len(blob)
        ),
        ResourceContents::Other(json) => {
            let uri = json.get("uri").and_then(|u| u.as_str()).unwrap_or("?");
            format!(
                "[resource: {uri}, {} bytes of JSON]",
                json.to_string().len()
            )
        }
    }
}

/// A tool result as text: the blocks in order, separated by newlines. A
/// result with no content but structured content shows the structured
/// content as JSON.
pub fn call_result_text(result: &CallToolResult) -> String {
    if result.content.is_empty() {
        return match &result.structured_content {
            Some(value) => value.to_string(),
            None => String::new(),
        };
    }
    result
        .content
        .iter()
        .map(block_text)
        .collect::<Vec<_>>()
        .join("\n")
}

/// The images of a tool result that a model can see: PNG, JPEG, GIF and
/// WebP, with their base64 data as the server sent it (white space
/// removed).
pub fn call_result_images(result: &CallToolResult) -> Vec<kaji_tools::ToolImage> {
    result
        .content
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Known(KnownContent::Image { data, mime_type })
                if matches!(
                    mime_type.as_str(),
                    "image/png" | "image/jpeg" | "image/gif" | "image/webp"
                ) =>
            {
                Some(kaji_tools::ToolImage {
                    media_type: mime_type.clone(),
                    data: data.split_whitespace().collect(),
                })
            }
            _ => None,
        })
        .collect()
}

/// A resource read as text: each of its contents, separated by blank lines.
pub fn read_result_text(result: &ReadResourceResult) -> String {
    result
        .contents
        .iter()
        .map(resource_contents_text)
        .collect::<Vec<_>>()
        .join("\n\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn base64_sizes() {
        assert_eq!(base64_decoded_len(""), 0);
        assert_eq!(base64_decoded_len("QQ=="), 1);
        assert_eq!(base64_decoded_len("QUI="), 2);
        assert_eq!(base64_decoded_len("QUJD"), 3);
        assert_eq!(base64_decoded_len("QUJD\nREVG"), 6);
    }

    fn block(value: serde_json::Value) -> ContentBlock {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn placeholders_name_type_and_size() {
        assert_eq!(
            block_text(&block(
                json!({"type": "image", "data": "QUJD", "mimeType": "image/png"})
            )),
            "[image: image/png, 3 bytes]"
        );
        assert_eq!(
            block_text(&block(
                json!({"type": "audio", "data": "QQ==", "mimeType": "audio/wav"})
            )),
            "[audio: audio/wav, 1 bytes]"
        );
        assert_eq!(
            block_text(&block(
                json!({"type": "resource", "resource": {"uri": "x://b", "blob": "QUI="}})
            )),
            "[resource: x://b, application/octet-stream, 2 bytes]"
        );
        assert_eq!(
            block_text(&block(json!({"type": "resource", "resource":
                {"uri": "x://t", "mimeType": "text/plain", "text": "hello"}}))),
            "[resource: x://t, text/plain]\nhello"
        );
        assert_eq!(
            block_text(&block(
                json!({"type": "resource_link", "uri": "x://l", "name": "L",
                "mimeType": "text/csv", "size": 9})
            )),
            "[resource link: x://l (L), text/csv, 9 bytes]"
        );
        assert_eq!(
            block_text(&block(json!({"type": "hologram", "depth": 3}))),
            "[hologram content, 29 bytes of JSON]"
        );
    }

    #[test]
    fn empty_content_shows_structured_content() {
        let result = CallToolResult {
            structured_content: Some(json!({"a": 1})),
            ..CallToolResult::default()
        };
        assert_eq!(call_result_text(&result), r#"{"a":1}"#);
    }
}
