//! Model providers: turn a [`ModelRequest`] into a stream of
//! [`StreamEvent`]s over a provider's real wire format.
//!
//! Two providers cover what users run: the Anthropic Messages API and the
//! OpenAI Chat Completions API (with every server that copies it: Ollama,
//! vLLM, llama.cpp, LM Studio, OpenRouter). Retries of failed requests
//! happen inside the stream, reported as [`StreamEvent::Retrying`] before
//! any content. This crate must never print, read the task's state or
//! decide what to do with a reply: it only speaks HTTP.

use std::pin::Pin;

use futures::Stream;
use kaji_protocol::{Message, StreamEvent, ToolSpec};

/// One request to a model.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelRequest {
    /// Model name as the provider knows it.
    pub model: String,
    /// The system prompt.
    pub system: String,
    /// The conversation so far; the last message is the user's.
    pub messages: Vec<Message>,
    /// Tools offered with native tool calling; empty for none.
    pub tools: Vec<ToolSpec>,
    /// Output token limit.
    pub max_tokens: u32,
    /// Sampling temperature, when set.
    pub temperature: Option<f32>,
}

/// A reply stream. Dropping it drops the connection at once.
pub type ModelStream = Pin<Box<dyn Stream<Item = Result<StreamEvent, LlmError>> + Send>>;

/// A model provider.
pub trait ModelProvider: Send + Sync {
    /// The provider's name (`anthropic`, `openai`).
    fn name(&self) -> &str;

    /// Starts a request and returns its reply stream. Connection, retries
    /// and decoding all happen as the stream is polled.
    fn stream(&self, request: ModelRequest) -> ModelStream;
}

/// Why a model request failed (placeholder until issue 2 lands).
#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    /// Anything.
    #[error("{0}")]
    Other(String),
}
