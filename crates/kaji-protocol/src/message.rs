//! Conversation history: messages made of content blocks.
//!
//! The block set is the union of what the Anthropic Messages API and the
//! OpenAI Chat Completions API can carry; providers translate to and from
//! their wire formats and must not invent blocks of their own.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Who wrote a message. System prompts are not messages: they travel beside
/// the history in a model request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The user, or the runtime speaking for the user (tool results, nudges).
    User,
    /// The model.
    Assistant,
}

/// One message of the conversation history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Author of the message.
    pub role: Role,
    /// Its content, in order.
    pub content: Vec<ContentBlock>,
}

impl Message {
    /// A user message holding a single text block.
    pub fn user_text(text: impl Into<String>) -> Self {
        Self {
            role: Role::User,
            content: vec![ContentBlock::text(text)],
        }
    }

    /// An assistant message holding a single text block.
    pub fn assistant_text(text: impl Into<String>) -> Self {
        Self {
            role: Role::Assistant,
            content: vec![ContentBlock::text(text)],
        }
    }

    /// The concatenation of the message's text blocks.
    pub fn text(&self) -> String {
        self.content
            .iter()
            .filter_map(|b| match b {
                ContentBlock::Text { text, .. } => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }

    /// The tool uses of this message, in order.
    pub fn tool_uses(&self) -> impl Iterator<Item = (&str, &str, &Value)> {
        self.content.iter().filter_map(|b| match b {
            ContentBlock::ToolUse { id, name, input } => Some((id.as_str(), name.as_str(), input)),
            _ => None,
        })
    }
}

/// A piece of a message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentBlock {
    /// Plain text.
    Text {
        /// The text.
        text: String,
        /// Who put it there, where kaji needs to know (providers send
        /// every text alike). Left out of JSON when unmarked.
        #[serde(default, skip_serializing_if = "TextOrigin::is_unmarked")]
        origin: TextOrigin,
    },
    /// The model's reasoning ("thinking"). Anthropic signs thinking blocks;
    /// the signature must be sent back unchanged with the block.
    Reasoning {
        /// The reasoning text.
        text: String,
        /// Provider signature, when the provider gives one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signature: Option<String>,
    },
    /// Reasoning the provider returned encrypted; it is only replayed.
    RedactedReasoning {
        /// Opaque provider data.
        data: String,
    },
    /// A tool call by the model.
    ToolUse {
        /// Call id, unique within the conversation.
        id: String,
        /// Tool name.
        name: String,
        /// Arguments, a JSON object.
        input: Value,
    },
    /// The result of a tool call, sent back in a user message.
    ToolResult {
        /// Id of the [`ContentBlock::ToolUse`] this answers.
        tool_use_id: String,
        /// The result as text.
        content: String,
        /// Whether the tool failed or was refused.
        #[serde(default)]
        is_error: bool,
    },
    /// An image, base64-encoded. In a user message right after a
    /// [`ContentBlock::ToolResult`] (before any text) it belongs to that
    /// result: Anthropic gets it inside the `tool_result`, OpenAI-compatible
    /// servers (whose tool messages carry only text) in a user message after
    /// the tool messages. Elsewhere it is an image the user attached.
    Image {
        /// `image/png`, `image/jpeg`, `image/gif` or `image/webp`.
        media_type: String,
        /// The image bytes, standard base64 with padding.
        data: String,
    },
    /// A block of a tool the provider ran itself (its web search), in an
    /// assistant message, kept exactly as the wire gave it: Anthropic
    /// `server_tool_use` and `web_search_tool_result` blocks and text
    /// blocks carrying `citations` (each right after the
    /// [`ContentBlock::Text`] whose end is its text, which it stands for on
    /// that wire), Responses `web_search_call` items and `url_citation`
    /// annotations. Each wire sends back the kinds it knows, unchanged, and
    /// leaves out the others; front ends show the searches.
    Server {
        /// The block's JSON, as received.
        block: Value,
    },
}

/// Who put a text block into the conversation, where kaji needs to know:
/// the rewind picker lists only what the user sent (prompts, answers and
/// `!` commands).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TextOrigin {
    /// Not marked: the model's text, and what kaji itself adds to a user
    /// message (hook context, reminders, nudges, `[interrupted]` notes,
    /// the resumption notice, compaction summaries, replies to its
    /// questions, results in the xml protocol).
    #[default]
    Unmarked,
    /// A prompt the user sent, as sent (with the files it attaches).
    Prompt,
    /// A command the user ran with `!`, with its output.
    Shell,
    /// What the user typed in answer to one of kaji's questions (a failed
    /// request, the mistake limit), after `The user says:`.
    Reply,
}

impl TextOrigin {
    /// Whether this is [`TextOrigin::Unmarked`].
    pub fn is_unmarked(&self) -> bool {
        *self == Self::Unmarked
    }
}

impl ContentBlock {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text {
            text: text.into(),
            origin: TextOrigin::Unmarked,
        }
    }

    /// A prompt the user sent ([`TextOrigin::Prompt`]).
    pub fn prompt(text: impl Into<String>) -> Self {
        Self::Text {
            text: text.into(),
            origin: TextOrigin::Prompt,
        }
    }

    /// An image block from a media type and base64 data.
    pub fn image(media_type: impl Into<String>, data: impl Into<String>) -> Self {
        Self::Image {
            media_type: media_type.into(),
            data: data.into(),
        }
    }

    /// A tool result block.
    pub fn tool_result(
        tool_use_id: impl Into<String>,
        content: impl Into<String>,
        is_error: bool,
    ) -> Self {
        Self::ToolResult {
            tool_use_id: tool_use_id.into(),
            content: content.into(),
            is_error,
        }
    }
}
