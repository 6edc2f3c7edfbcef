//! What a model costs and how much it can read: a table of the common
//! Anthropic and OpenAI models (USD per million tokens, context window),
//! matched by exact name, then by the longest prefix (so dated names such
//! as `claude-sonnet-4-5-20250929` find their family), overridable per
//! model from settings (`[models."<name>"]`).
//!
//! Prices are list prices as published by the providers; a caller shows
//! costs as estimates. This module must never read files or the network:
//! the caller passes the overrides it read from settings.

use std::collections::BTreeMap;

use kaji_protocol::Usage;
use serde::{Deserialize, Serialize};

/// The context window assumed for a model the table does not know and no
/// override names (tokens).
pub const DEFAULT_CONTEXT_WINDOW: u64 = 128_000;

/// Prices in USD per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Prices {
    /// Input tokens not read from or written to the cache.
    pub input: f64,
    /// Output tokens.
    pub output: f64,
    /// Input tokens read from the prompt cache.
    pub cache_read: f64,
    /// Input tokens written to the prompt cache (Anthropic's 5-minute
    /// cache; OpenAI charges nothing extra, so it is the input price).
    pub cache_write: f64,
}

/// What kaji knows about a model.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ModelInfo {
    /// Context window, in tokens.
    pub context_window: u64,
    /// Prices, when known.
    pub prices: Option<Prices>,
}

/// One model's settings (`[models."<name>"]` in the settings file). Every
/// field is optional and replaces the table's value.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelOverride {
    /// Context window, in tokens.
    #[serde(default)]
    pub context_window: Option<u64>,
    /// USD per million input tokens.
    #[serde(default)]
    pub input_price: Option<f64>,
    /// USD per million output tokens.
    #[serde(default)]
    pub output_price: Option<f64>,
    /// USD per million tokens read from the cache.
    #[serde(default)]
    pub cache_read_price: Option<f64>,
    /// USD per million tokens written to the cache.
    #[serde(default)]
    pub cache_write_price: Option<f64>,
}

/// Overrides by exact model name.
pub type ModelOverrides = BTreeMap<String, ModelOverride>;

/// (name, context window, input, output, cache read, cache write).
type Row = (&'static str, u64, f64, f64, f64, f64);

/// The table. Names are matched exactly, then as the longest prefix.
const TABLE: &[Row] = &[
    // Anthropic (cache write: the 5-minute cache, 1.25 × input).
    ("claude-opus-4-5", 200_000, 5.0, 25.0, 0.50, 6.25),
    ("claude-opus-4-1", 200_000, 15.0, 75.0, 1.50, 18.75),
    ("claude-opus-4", 200_000, 15.0, 75.0, 1.50, 18.75),
    ("claude-sonnet-4-5", 200_000, 3.0, 15.0, 0.30, 3.75),
    ("claude-sonnet-4", 200_000, 3.0, 15.0, 0.30, 3.75),
    ("claude-haiku-4-5", 200_000, 1.0, 5.0, 0.10, 1.25),
    ("claude-3-7-sonnet", 200_000, 3.0, 15.0, 0.30, 3.75),
    ("claude-3-5-sonnet", 200_000, 3.0, 15.0, 0.30, 3.75),
    ("claude-3-5-haiku", 200_000, 0.80, 4.0, 0.08, 1.0),
    ("claude-3-opus", 200_000, 15.0, 75.0, 1.50, 18.75),
    ("claude-3-haiku", 200_000, 0.25, 1.25, 0.03, 0.30),
    // OpenAI (cached input is read from the cache; writing costs nothing).
    ("gpt-5", 400_000, 1.25, 10.0, 0.125, 1.25),
    ("gpt-5-mini", 400_000, 0.25, 2.0, 0.025, 0.25),
    ("gpt-5-nano", 400_000, 0.05, 0.40, 0.005, 0.05),
    ("gpt-4.1", 1_047_576, 2.0, 8.0, 0.50, 2.0),
    ("gpt-4.1-mini", 1_047_576, 0.40, 1.60, 0.10, 0.40),
    ("gpt-4.1-nano", 1_047_576, 0.10, 0.40, 0.025, 0.10),
    ("gpt-4o", 128_000, 2.50, 10.0, 1.25, 2.50),
    ("gpt-4o-mini", 128_000, 0.15, 0.60, 0.075, 0.15),
    ("o1", 200_000, 15.0, 60.0, 7.50, 15.0),
    ("o3", 200_000, 2.0, 8.0, 0.50, 2.0),
    ("o3-mini", 200_000, 1.10, 4.40, 0.55, 1.10),
    ("o4-mini", 200_000, 1.10, 4.40, 0.275, 1.10),
];

/// The table's row for `name`: the exact name, else the longest entry that
/// `name` starts with followed by `-`, `@` or `:` (dated and tagged names).
/// A `provider/` prefix (OpenRouter) is ignored.
fn lookup(name: &str) -> Option<&'static Row> {
    let name = name.trim();
    let name = name.rsplit('/').next().unwrap_or(name);
    if let Some(row) = TABLE.iter().find(|r| r.0 == name) {
        return Some(row);
    }
    TABLE
        .iter()
        .filter(|r| {
            name.strip_prefix(r.0)
                .and_then(|rest| rest.chars().next())
                .is_some_and(|c| matches!(c, '-' | '@' | ':'))
        })
        .max_by_key(|r| r.0.len())
}

/// What kaji knows about `name`: the table's entry, then the override for
/// exactly that name field by field. A model the table does not know has a
/// context window of [`DEFAULT_CONTEXT_WINDOW`] and no prices, unless its
/// override gives `input_price` and `output_price` (the cache prices then
/// default to the input price).
pub fn model_info(name: &str, overrides: &ModelOverrides) -> ModelInfo {
    let row = lookup(name);
    let mut info = ModelInfo {
        context_window: row.map_or(DEFAULT_CONTEXT_WINDOW, |r| r.1),
        prices: row.map(|r| Prices {
            input: r.2,
            output: r.3,
            cache_read: r.4,
            cache_write: r.5,
        }),
    };
    let Some(o) = overrides.get(name.trim()) else {
        return info;
    };
    if let Some(window) = o.context_window {
        info.context_window = window;
    }
    info.prices = match info.prices {
        Some(p) => Some(Prices {
            input: o.input_price.unwrap_or(p.input),
            output: o.output_price.unwrap_or(p.output),
            cache_read: o.cache_read_price.unwrap_or(p.cache_read),
            cache_write: o.cache_write_price.unwrap_or(p.cache_write),
        }),
        None => match (o.input_price, o.output_price) {
            (Some(input), Some(output)) => Some(Prices {
                input,
                output,
                cache_read: o.cache_read_price.unwrap_or(input),
                cache_write: o.cache_write_price.unwrap_or(input),
            }),
            _ => None,
        },
    };
    info
}

/// The cost of `usage` in USD. `usage.input_tokens` excludes cache reads
/// and writes (as both providers report it through kaji).
pub fn cost_usd(usage: &Usage, prices: &Prices) -> f64 {
    let per = |tokens: u64, price: f64| tokens as f64 * price / 1_000_000.0;
    per(usage.input_tokens, prices.input)
        + per(usage.output_tokens, prices.output)
        + per(usage.cache_read_input_tokens, prices.cache_read)
        + per(usage.cache_creation_input_tokens, prices.cache_write)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn none() -> ModelOverrides {
        ModelOverrides::new()
    }

    #[test]
    fn exact_then_longest_prefix() {
        let sonnet = model_info("claude-sonnet-4-5", &none());
        assert_eq!(sonnet.context_window, 200_000);
        assert_eq!(sonnet.prices.unwrap().input, 3.0);
        let dated = model_info("claude-sonnet-4-5-20250929", &none());
        assert_eq!(dated, sonnet);
        assert_eq!(
            model_info("claude-opus-4-1-20250805", &none())
                .prices
                .unwrap()
                .input,
            15.0
        );
        assert_eq!(
            model_info("claude-opus-4-5-20251101", &none())
                .prices
                .unwrap()
                .input,
            5.0
        );
        assert_eq!(
            model_info("gpt-4.1-mini-2025-04-14", &none())
                .prices
                .unwrap()
                .input,
            0.40
        );
        assert_eq!(
            model_info("gpt-4o-2024-08-06", &none())
                .prices
                .unwrap()
                .output,
            10.0
        );
        assert_eq!(
            model_info("openai/gpt-4o-mini", &none())
                .prices
                .unwrap()
                .input,
            0.15
        );
        assert_eq!(model_info("o3-mini", &none()).prices.unwrap().input, 1.10);
        // A prefix must end at a separator: gpt-4.10 is not gpt-4.1.
        assert_eq!(model_info("gpt-4.10", &none()).prices, None);
    }

    #[test]
    fn unknown_models_and_overrides() {
        let unknown = model_info("qwen3:8b", &none());
        assert_eq!(unknown.context_window, DEFAULT_CONTEXT_WINDOW);
        assert_eq!(unknown.prices, None);

        let mut overrides = ModelOverrides::new();
        overrides.insert(
            "qwen3:8b".into(),
            ModelOverride {
                context_window: Some(32_768),
                ..Default::default()
            },
        );
        overrides.insert(
            "my-model".into(),
            ModelOverride {
                input_price: Some(1.0),
                output_price: Some(2.0),
                ..Default::default()
            },
        );
        overrides.insert(
            "claude-sonnet-4-5".into(),
            ModelOverride {
                cache_read_price: Some(0.25),
                ..Default::default()
            },
        );
        let qwen = model_info("qwen3:8b", &overrides);
        assert_eq!((qwen.context_window, qwen.prices), (32_768, None));
        let mine = model_info("my-model", &overrides).prices.unwrap();
        assert_eq!((mine.input, mine.output, mine.cache_read), (1.0, 2.0, 1.0));
        let sonnet = model_info("claude-sonnet-4-5", &overrides).prices.unwrap();
        assert_eq!((sonnet.input, sonnet.cache_read), (3.0, 0.25));
    }

    #[test]
    fn overrides_parse_from_toml_and_reject_unknown_keys() {
        #[derive(Deserialize)]
        struct Settings {
            models: ModelOverrides,
        }
        let s: Settings = toml::from_str(
            "[models.\"claude-sonnet-4-5\"]\ncontext_window = 1000000\ninput_price = 6.0\n",
        )
        .unwrap();
        let o = &s.models["claude-sonnet-4-5"];
        assert_eq!(
            (o.context_window, o.input_price),
            (Some(1_000_000), Some(6.0))
        );
        let err = toml::from_str::<Settings>("[models.m]\ninput_prize = 1.0\n")
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("input_prize"), "{err}");
    }

    #[test]
    fn cost() {
        let prices = model_info("claude-sonnet-4-5", &none()).prices.unwrap();
        let usage = Usage {
            input_tokens: 1_000_000,
            output_tokens: 100_000,
            cache_read_input_tokens: 2_000_000,
            cache_creation_input_tokens: 400_000,
        };
        let cost = cost_usd(&usage, &prices);
        assert!((cost - (3.0 + 1.5 + 0.6 + 1.5)).abs() < 1e-9, "{cost}");
        assert_eq!(cost_usd(&Usage::default(), &prices), 0.0);
    }
}
