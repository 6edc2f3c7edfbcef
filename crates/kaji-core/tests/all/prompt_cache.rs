//! Prompt caching on the recorded requests of a 50-round task: Anthropic
//! breakpoints cover at least 90% of every request's prefix after the first
//! round, and for both providers the system prompt and the tool list are
//! byte-identical from round to round (so OpenAI's automatic prefix cache
//! works too).

use crate::cache_run;
use crate::common;

use common::RecordingFrontend;
use kaji_llm::ProviderKind;
use kaji_protocol::AskResponse;
use kaji_test_support::cache;
use serde_json::Value;

async fn fifty_rounds(kind: ProviderKind) -> Vec<Value> {
    let (frontend, _rx) = RecordingFrontend::new(AskResponse::Approve);
    cache_run::fifty_rounds(kind, frontend).await
}

#[tokio::test]
async fn anthropic_breakpoints_cover_ninety_percent_of_every_later_request() {
    let bodies = fifty_rounds(ProviderKind::Anthropic).await;
    let report = cache::report(&bodies);
    for (i, share) in report.covered.iter().enumerate().skip(1) {
        assert!(
            *share >= 0.9,
            "request {i}: only {:.1}% covered",
            share * 100.0
        );
    }
    assert!(
        report.tokens_with < report.tokens_without * 0.5,
        "{report:?}"
    );
    let first = &bodies[0];
    for (i, body) in bodies.iter().enumerate() {
        let strip = |v: &Value| {
            let mut v = v.clone();
            cache_free(&mut v);
            v
        };
        assert_eq!(
            strip(&body["system"]),
            strip(&first["system"]),
            "system prompt of request {i}"
        );
        assert_eq!(
            strip(&body["tools"]),
            strip(&first["tools"]),
            "tools of request {i}"
        );
    }
}

#[tokio::test]
async fn openai_system_prompt_and_tools_are_byte_identical_every_round() {
    let bodies = fifty_rounds(ProviderKind::OpenAi).await;
    let first = &bodies[0];
    for (i, body) in bodies.iter().enumerate() {
        assert_eq!(
            body["messages"][0].to_string(),
            first["messages"][0].to_string(),
            "system message of request {i}"
        );
        assert_eq!(
            body["tools"].to_string(),
            first["tools"].to_string(),
            "tools of request {i}"
        );
    }
}

fn cache_free(v: &mut Value) {
    match v {
        Value::Object(map) => {
            map.remove("cache_control");
            map.values_mut().for_each(cache_free);
        }
        Value::Array(items) => items.iter_mut().for_each(cache_free),
        _ => {}
    }
}
