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
    /// Adds another request's usage to this total.
    pub fn add(&mut self, other: &Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cache_read_input_tokens += other.cache_read_input_tokens;
        self.cache_creation_input_tokens += other.cache_creation_input_tokens;
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
    /// The output token limit was reached.
    MaxTokens,
    /// A stop sequence matched.
    StopSequence,
    /// The provider refused or filtered the content.
    Refusal,
    /// Anything else, as the provider named it.
    Other(String),
}
