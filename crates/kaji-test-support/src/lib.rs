//! Test support for every kaji crate, and the model behind `kaji demo`: the
//! scripted model server.
//!
//! [`ScriptedModelServer`] is a real HTTP server on 127.0.0.1 that speaks
//! the Anthropic Messages, OpenAI Chat Completions and OpenAI Responses
//! streaming formats,
//! answers from a [`Script`] of [`Turn`]s, records every request, and
//! injects [`Fault`]s on demand. Tests point a real provider at it, so
//! everything but the model is real.
//!
//! Base URLs: give the Anthropic provider [`ScriptedModelServer::base_url`]
//! (`http://127.0.0.1:PORT`, it posts to `/v1/messages`) and the OpenAI
//! provider [`ScriptedModelServer::openai_base_url`]
//! (`http://127.0.0.1:PORT/v1`, it posts to `/v1/chat/completions`); the
//! Responses provider takes the same base URL and posts to `/v1/responses`.
//!
//! This crate depends on kaji-protocol only (never on kaji-llm: it must
//! test the providers, not share their code), must never listen beyond the
//! loopback interface, and must never panic on what a client sends.

pub mod cache;
pub mod fixtures;
mod http;
pub mod pg;
mod request_scan;
pub mod script;
pub mod seeds;
pub mod server;
pub mod wire;
mod wire_parts;
mod wire_responses;

pub use script::{AgentScript, DEFAULT_CHUNK_SIZE, Fault, Part, Script, ScriptError, Turn};
pub use server::{RecordedRequest, ScriptedModelServer};
pub use wire::WireFormat;
