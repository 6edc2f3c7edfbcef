//! Throughput of reply-stream decoding: SSE framing alone, and full decoding
//! (framing + JSON + mapping to `StreamEvent`s) of Anthropic and OpenAI
//! replies made of many small text deltas, the worst case per byte.
//! Target: at least 100 MB/s, so decoding is never the bottleneck.
//! Results are recorded in docs/benchmarks.md.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "benchmark setup: a failed step aborts the measurement"
)]

use divan::counter::BytesCount;
use kaji_llm::ProviderKind;
use kaji_llm::sse::SseDecoder;
use serde_json::json;

fn main() {
    divan::main();
}

/// About 1 MiB of reply body.
const TARGET_BYTES: usize = 1 << 20;
/// Network-sized reads.
const READ_SIZE: usize = 16 * 1024;

const WORDS: &[&str] = &[
    "the ",
    "model ",
    "streams ",
    "text ",
    "in ",
    "small ",
    "deltas, ",
    "\"quoted\" ",
    "ünïcode ",
    "and\n",
];

fn delta_text(i: usize) -> String {
    (0..4).map(|k| WORDS[(i * 7 + k) % WORDS.len()]).collect()
}

fn anthropic_body() -> Vec<u8> {
    let mut body = String::new();
    body.push_str("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\",\"content\":[],\"usage\":{\"input_tokens\":10,\"output_tokens\":1}}}\n\n");
    body.push_str("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n");
    let mut i = 0;
    while body.len() < TARGET_BYTES {
        let data = json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": delta_text(i)}});
        body.push_str(&format!("event: content_block_delta\ndata: {data}\n\n"));
        i += 1;
    }
    body.push_str(
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
    );
    body.push_str("event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":500}}\n\n");
    body.push_str("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n");
    body.into_bytes()
}

fn openai_body() -> Vec<u8> {
    let mut body = String::new();
    let mut i = 0;
    while body.len() < TARGET_BYTES {
        let data = json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0, "model": "m",
                          "choices": [{"index": 0, "delta": {"content": delta_text(i)}, "finish_reason": null}]});
        body.push_str(&format!("data: {data}\n\n"));
        i += 1;
    }
    body.push_str(
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
    );
    body.push_str("data: [DONE]\n\n");
    body.into_bytes()
}

#[divan::bench]
fn sse_framing_only(bencher: divan::Bencher) {
    let body = anthropic_body();
    bencher.counter(BytesCount::new(body.len())).bench(|| {
        let mut decoder = SseDecoder::new();
        let mut events = Vec::new();
        let mut count = 0;
        for chunk in divan::black_box(&body).chunks(READ_SIZE) {
            decoder.decode(chunk, &mut events).unwrap();
            count += events.len();
            events.clear();
        }
        count
    });
}

#[divan::bench]
fn sse_framing_one_byte_reads(bencher: divan::Bencher) {
    let body = anthropic_body();
    let body = &body[..64 * 1024];
    bencher.counter(BytesCount::new(body.len())).bench(|| {
        let mut decoder = SseDecoder::new();
        let mut events = Vec::new();
        for chunk in divan::black_box(body).chunks(1) {
            decoder.decode(chunk, &mut events).unwrap();
        }
        events.len()
    });
}

#[divan::bench]
fn anthropic_full_decode(bencher: divan::Bencher) {
    let body = anthropic_body();
    bencher.counter(BytesCount::new(body.len())).bench(|| {
        kaji_llm::decode_reply_body(ProviderKind::Anthropic, divan::black_box(&body))
            .unwrap()
            .len()
    });
}

#[divan::bench]
fn openai_full_decode(bencher: divan::Bencher) {
    let body = openai_body();
    bencher.counter(BytesCount::new(body.len())).bench(|| {
        kaji_llm::decode_reply_body(ProviderKind::OpenAi, divan::black_box(&body))
            .unwrap()
            .len()
    });
}
