//! `get_context_usage`: the main agent's context as Claude Code's
//! `/context` data (`categories`, `totalTokens`, `maxTokens`,
//! `percentage`, …), from what the session's last round reported.
//! Translation only; kaji counts no category it does not know, so the
//! conversation is one `messages` row and the rest is free space.

use serde_json::{Value, json};

/// The answer for `tokens` in the context of a `window`-token model.
pub fn usage(tokens: u64, window: u64, model: &str, agents: &[(String, String)]) -> Value {
    let free = window.saturating_sub(tokens);
    let percentage = if window == 0 {
        0.0
    } else {
        (tokens as f64 / window as f64 * 1000.0).round() / 10.0
    };
    json!({
        "categories": [
            {"id": "messages", "name": "Messages", "tokens": tokens, "color": "purple", "kind": "used"},
            {"id": "free_space", "name": "Free space", "tokens": free, "color": "promptBorder", "kind": "free"},
        ],
        "totalTokens": tokens,
        "maxTokens": window,
        "rawMaxTokens": window,
        "percentage": percentage,
        "gridRows": [],
        "model": model,
        "memoryFiles": [],
        "mcpTools": [],
        "agents": agents
            .iter()
            .map(|(name, source)| json!({"agentType": name, "source": source, "tokens": 0}))
            .collect::<Vec<_>>(),
        "isAutoCompactEnabled": true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_has_the_sdks_fields() {
        let u = usage(
            50_000,
            200_000,
            "m",
            &[("reviewer".into(), "program".into())],
        );
        assert_eq!(u["totalTokens"], 50_000);
        assert_eq!(u["maxTokens"], 200_000);
        assert_eq!(u["percentage"], 25.0);
        assert_eq!(u["categories"][1]["tokens"], 150_000);
        assert_eq!(u["agents"][0]["agentType"], "reviewer");
        assert_eq!(usage(10, 0, "m", &[])["percentage"], 0.0);
    }
}
