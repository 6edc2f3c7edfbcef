//! `kaji login`: says how kaji finds a model and its key. kaji has no
//! account of its own to log in to: keys come from the environment, the
//! rest from flags and settings. It never calls a model and never writes
//! a key anywhere.

use kaji_protocol::redact::is_secret_env_name;

/// Arguments of `kaji login` (none).
#[derive(Debug, clap::Args)]
pub struct LoginArgs {}

/// The variables that carry a provider's key, in the order kaji looks.
const KEY_VARIABLES: &[(&str, &str)] = &[
    ("ANTHROPIC_API_KEY", "Anthropic (sent as x-api-key)"),
    (
        "ANTHROPIC_AUTH_TOKEN",
        "Anthropic, or a proxy that takes a bearer token",
    ),
    (
        "OPENAI_API_KEY",
        "OpenAI, and OpenAI-compatible servers (OpenRouter, vLLM, …)",
    ),
];

/// Prints how keys are configured and which are set now; exit code 0.
pub fn run(_args: LoginArgs) -> i32 {
    let config = crate::paths::kaji_home().join("config.toml");
    let mut out = String::from(
        "kaji has no login: it reads the model provider's key from the environment.\n\n\
         Set one of these (in your shell profile, or a secrets manager):\n",
    );
    for (name, what) in KEY_VARIABLES {
        let set = std::env::var_os(name).is_some_and(|v| !v.is_empty());
        let state = if set { "set" } else { "not set" };
        out.push_str(&format!("  {name:<22} {what} — {state}\n"));
    }
    out.push_str(&format!(
        "\nThe provider, model and server come from flags (--provider, --model, --base-url),\n\
         KAJI_PROVIDER / KAJI_MODEL / ANTHROPIC_BASE_URL / OPENAI_BASE_URL, or the settings file {}\n\
         (provider = \"anthropic\", model = \"…\", base_url = \"…\"). A local Ollama on\n\
         127.0.0.1:11434 is used when nothing else is configured. Keys are never read\n\
         from settings files.\n\n\
         Check the result with `kaji doctor` (it asks the provider whether the key works).\n\
         More: docs/providers.md.\n",
        config.display()
    ));
    let others: Vec<String> = std::env::vars_os()
        .filter(|(_, v)| !v.is_empty())
        .filter_map(|(k, _)| k.into_string().ok())
        .filter(|k| KEY_VARIABLES.iter().all(|(n, _)| n != k))
        .filter(|k| k.ends_with("_API_KEY") && is_secret_env_name(k, &[], &[]))
        .collect();
    if !others.is_empty() {
        out.push_str(&format!(
            "\nOther API keys set here (kaji does not use them): {}\n",
            others.join(", ")
        ));
    }
    print!("{out}");
    0
}
