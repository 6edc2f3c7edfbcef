//! What a model provider's stream yields, independent of the wire format.
//!
//! A provider turns Anthropic SSE events or OpenAI chunks into this one
//! sequence. Tool calls are identified by their call id from start to end,
//! so a consumer can run a tool as soon as its [`StreamEvent::ToolCallEnd`]
//! arrives, before the rest of the reply.

use serde::{Deserialize, Serialize};

/// One event of a model reply stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum StreamEvent {
    /// The provider is about to retry the request after a retryable failure.
    /// Only emitted before any content of the reply has been yielded.
    Retrying {
        /// The attempt that is about to start (2 for the first retry).
        attempt: u32,
        /// Total attempts allowed.
        max_attempts: u32,
        /// How long the provider waits before it.
        delay_ms: u64,
        /// Why the previous attempt failed.
        reason: String,
    },
    /// A fragment of reply text.
    TextDelta {
        /// The fragment.
        text: String,
    },
    /// A fragment of reasoning text.
    ReasoningDelta {
        /// The fragment.
        text: String,
    },
    /// The signature of the current reasoning block (Anthropic).
    ReasoningSignature {
        /// The signature.
        signature: String,
    },
    /// Encrypted reasoning to be replayed as is (Anthropic `redacted_thinking`).
    RedactedReasoning {
        /// Opaque data.
        data: String,
    },
    /// A tool call begins.
    ToolCallStart {
        /// Call id.
        id: String,
        /// Tool name.
        name: String,
    },
    /// A fragment of a tool call's JSON arguments.
    ToolCallDelta {
        /// Call id.
        id: String,
        /// The fragment.
        arguments: String,
    },
    /// A tool call is complete: its arguments are all there.
    ToolCallEnd {
        /// Call id.
        id: String,
    },
    /// A block of a tool the provider runs itself, complete (Anthropic
    /// `server_tool_use` with its input and `web_search_tool_result`; a
    /// Responses `web_search_call` item and `url_citation` annotations),
    /// as the wire gave it. Only requests that offer such a tool get them.
    ServerBlock {
        /// The block's JSON.
        block: serde_json::Value,
    },
    /// Token usage, possibly partial; later reports supersede earlier ones
    /// field by field.
    Usage(Usage),
    /// Why the model stopped. The last content event of a reply.
    Stop {
        /// The reason.
        reason: StopReason,
    },
}

/// Token counts of one request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Input (prompt) tokens.
    pub input_tokens: u64,
    /// Output (completion) tokens.
    pub output_tokens: u64,
    /// Input tokens read from the provider's prompt cache.
    #[serde(default)]
    pub cache_read_input_tokens: u64,
    /// Input tokens written to the provider's prompt cache.
    #[serde(default)]
    pub cache_creation_input_tokens: u64,
}

impl Usage {
    /// Adds another request's usage to this total. Saturates at
    /// `u64::MAX` instead of wrapping (a server may report anything).
    pub fn add(&mut self, other: &Usage) {
        self.input_tokens = self.input_tokens.saturating_add(other.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(other.output_tokens);
        self.cache_read_input_tokens = self
            .cache_read_input_tokens
            .saturating_add(other.cache_read_input_tokens);
        self.cache_creation_input_tokens = self
            .cache_creation_input_tokens
            .saturating_add(other.cache_creation_input_tokens);
    }
}

/// Why a reply ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The model finished its turn.
    EndTurn,
    /// The model stopped to have tools run.
    ToolUse,
    /// The output token limit was reached. A tool call the limit cut off
    /// has a [`StreamEvent::ToolCallStart`] but no
    /// [`StreamEvent::ToolCallEnd`]: its arguments are incomplete and it
    /// must not be run.
    MaxTokens,
    /// A stop sequence matched.
    StopSequence,
    /// The provider refused or filtered the content (Anthropic
    /// `stop_reason: "refusal"`, OpenAI `finish_reason: "content_filter"`
    /// or a `refusal` message). Retrying the same request is pointless.
    Refusal {
        /// The provider's category, when it gives one (Anthropic
        /// `stop_details.category`, e.g. `cyber`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        category: Option<String>,
        /// The provider's explanation, when it gives one (Anthropic
        /// `stop_details.explanation`, OpenAI `delta.refusal`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        explanation: Option<String>,
    },
    /// Anything else, as the provider named it.
    Other(String),
}

impl StopReason {
    /// A refusal without category or explanation.
    pub fn refusal() -> Self {
        StopReason::Refusal {
            category: None,
            explanation: None,
        }
    }

    /// The reason's name as written in JSON lines: `end_turn`, `tool_use`,
    /// `max_tokens`, `stop_sequence`, `refusal`, or the provider's own word.
    pub fn as_str(&self) -> &str {
        match self {
            StopReason::EndTurn => "end_turn",
            StopReason::ToolUse => "tool_use",
            StopReason::MaxTokens => "max_tokens",
            StopReason::StopSequence => "stop_sequence",
            StopReason::Refusal { .. } => "refusal",
            StopReason::Other(other) => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_add_saturates() {
        let mut total = Usage {
            input_tokens: u64::MAX - 1,
            output_tokens: 5,
            cache_read_input_tokens: u64::MAX,
            cache_creation_input_tokens: 1,
        };
        total.add(&Usage {
            input_tokens: 10,
            output_tokens: 5,
            cache_read_input_tokens: 1,
            cache_creation_input_tokens: u64::MAX,
        });
        assert_eq!(total.input_tokens, u64::MAX);
        assert_eq!(total.output_tokens, 10);
        assert_eq!(total.cache_read_input_tokens, u64::MAX);
        assert_eq!(total.cache_creation_input_tokens, u64::MAX);
    }

    #[test]
    fn stop_reason_names() {
        assert_eq!(StopReason::refusal().as_str(), "refusal");
        assert_eq!(StopReason::MaxTokens.as_str(), "max_tokens");
        assert_eq!(
            serde_json::to_value(StopReason::EndTurn).unwrap(),
            serde_json::json!("end_turn")
        );
    }
}
