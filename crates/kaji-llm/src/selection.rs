//! Which provider, model and base URL to use (issue 2, point 3).
//!
//! Sources, strongest first: the flags `--provider`, `--model`,
//! `--base-url`; the environment (`KAJI_PROVIDER`, `KAJI_MODEL`,
//! `ANTHROPIC_BASE_URL` / `OPENAI_BASE_URL`); the keys `provider`, `model`,
//! `base_url` of `$KAJI_HOME/config.toml`. With no provider configured:
//! `ANTHROPIC_API_KEY` (or `ANTHROPIC_AUTH_TOKEN`) picks Anthropic, else
//! `OPENAI_API_KEY` picks OpenAI, else a configured base URL picks OpenAI
//! (a local compatible server), else `ANTHROPIC_BASE_URL` picks Anthropic,
//! else a local Ollama that answers on 127.0.0.1:11434, else
//! [`SelectionError::NothingConfigured`].
//!
//! [`resolve`] is pure: the environment comes in as a lookup function and
//! the Ollama probe's answer as data. Only [`select`] and
//! [`probe_local_ollama`] do I/O, and [`load_config_file`] reads the file.
//! This module must never read the process environment itself.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::config::{OLLAMA_DEFAULT_BASE_URL, ProviderConfig, ProviderKind};

/// Where a local Ollama is looked for (its native API root).
pub const LOCAL_OLLAMA_URL: &str = "http://127.0.0.1:11434";
/// How long the local Ollama probe waits for an answer.
pub const LOCAL_OLLAMA_PROBE_TIMEOUT: Duration = Duration::from_millis(300);

/// Values of the `--provider`, `--model` and `--base-url` flags.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SelectionFlags {
    /// `--provider anthropic|openai|openai-responses`.
    pub provider: Option<String>,
    /// `--model NAME`.
    pub model: Option<String>,
    /// `--base-url URL`.
    pub base_url: Option<String>,
}

/// The provider keys of `$KAJI_HOME/config.toml`. Other keys of the file are
/// ignored here.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfigFile {
    /// Where the file was read from (set by [`load_config_file`]); named in
    /// errors.
    #[serde(skip)]
    pub path: Option<PathBuf>,
    /// `provider = "anthropic" | "openai" | "openai-responses"`.
    #[serde(default)]
    pub provider: Option<String>,
    /// `model = "..."`.
    #[serde(default)]
    pub model: Option<String>,
    /// `base_url = "..."`.
    #[serde(default)]
    pub base_url: Option<String>,
}

/// Everything [`resolve`] decides from.
pub struct SelectionInputs<'a> {
    /// Command-line flags.
    pub flags: SelectionFlags,
    /// Environment lookup; empty values count as unset.
    pub env: &'a dyn Fn(&str) -> Option<String>,
    /// The parsed config file (default when there is none).
    pub file: ConfigFile,
    /// Models of a local Ollama that answered the probe; `None` when it did
    /// not answer or was not probed.
    pub local_ollama: Option<Vec<String>>,
}

/// Why no provider could be selected. The CLI exits 2 with this message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectionError {
    /// Nothing at all is configured and no local Ollama answered.
    #[error(
        "no model provider is configured. Configure one of these ways:\n\
         \x20 - set ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN) to use Anthropic\n\
         \x20 - set OPENAI_API_KEY to use OpenAI; add OPENAI_BASE_URL for a compatible server (vLLM, llama.cpp, LM Studio, OpenRouter)\n\
         \x20 - run Ollama locally so that it answers on 127.0.0.1:11434\n\
         \x20 - pass --provider anthropic|openai|openai-responses, --model NAME and --base-url URL\n\
         \x20 - set KAJI_PROVIDER and KAJI_MODEL\n\
         \x20 - write provider, model and base_url into {config}"
    )]
    NothingConfigured {
        /// The config file that was consulted (or where it would be).
        config: String,
    },
    /// A provider name is not `anthropic`, `openai` or `openai-responses`.
    #[error("{source_name} is {value:?}: expected `anthropic`, `openai` or `openai-responses`")]
    UnknownProvider {
        /// Where it came from: `--provider`, `KAJI_PROVIDER` or `FILE: key provider`.
        source_name: String,
        /// The value found.
        value: String,
    },
    /// The chosen provider needs a credential that is not set.
    #[error("the {provider} provider at {base_url} needs an API key: set {env_var}")]
    MissingCredential {
        /// Provider name.
        provider: String,
        /// The base URL it would talk to.
        base_url: String,
        /// The variable(s) to set.
        env_var: String,
    },
    /// A local Ollama answered but has no model and none is configured.
    #[error(
        "a local Ollama answers on 127.0.0.1:11434 but has no model: run `ollama pull MODEL`, or set KAJI_MODEL / --model"
    )]
    OllamaWithoutModels,
    /// An environment variable holds a value that is not what it needs.
    #[error("{var} is {value:?}: {expected}")]
    InvalidEnv {
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
        /// What it must be.
        expected: &'static str,
    },
    /// The config file could not be read or parsed.
    #[error("{path}: {message}")]
    ConfigFile {
        /// The file.
        path: String,
        /// What is wrong, with line and column or key where known.
        message: String,
    },
}

/// Reads the provider keys of a config file. A missing file is an empty
/// configuration; an unreadable or malformed one is an error naming the
/// file and, where TOML says, the line, column and key.
pub fn load_config_file(path: &Path) -> Result<ConfigFile, SelectionError> {
    let error = |message: String| SelectionError::ConfigFile {
        path: path.display().to_string(),
        message,
    };
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(ConfigFile {
                path: Some(path.to_path_buf()),
                ..ConfigFile::default()
            });
        }
        Err(e) => return Err(error(format!("cannot be read: {e}"))),
    };
    let mut file: ConfigFile =
        toml::from_str(&text).map_err(|e| error(e.to_string().trim_end().to_string()))?;
    file.path = Some(path.to_path_buf());
    if let Some(provider) = &file.provider
        && provider.parse::<ProviderKind>().is_err()
    {
        return Err(error(format!(
            "key `provider` is {provider:?}: expected \"anthropic\", \"openai\" or \"openai-responses\""
        )));
    }
    Ok(file)
}

/// Whether [`resolve`] would fall back to a local Ollama, i.e. whether
/// [`probe_local_ollama`] is worth calling.
pub fn needs_local_probe(inputs: &SelectionInputs<'_>) -> bool {
    let env = |k: &str| lookup(inputs.env, k);
    provider_source(inputs).is_none()
        && env("ANTHROPIC_API_KEY").is_none()
        && env("ANTHROPIC_AUTH_TOKEN").is_none()
        && env("OPENAI_API_KEY").is_none()
        && inputs.flags.base_url.is_none()
        && inputs.file.base_url.is_none()
        && env("OPENAI_BASE_URL").is_none()
        && env("ANTHROPIC_BASE_URL").is_none()
}

/// Decides the provider configuration from `inputs` (see the module docs
/// for the rules). Retry and timeout settings are left at their defaults.
pub fn resolve(inputs: &SelectionInputs<'_>) -> Result<ProviderConfig, SelectionError> {
    let env = |k: &str| lookup(inputs.env, k);
    let flags = &inputs.flags;
    let file = &inputs.file;
    let file_name = file
        .path
        .as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "$KAJI_HOME/config.toml".to_string());

    let configured_model = non_empty(&flags.model)
        .or_else(|| env("KAJI_MODEL"))
        .or_else(|| non_empty(&file.model));
    let configured_base = non_empty(&flags.base_url);
    let file_base = non_empty(&file.base_url);

    let kind = match provider_source(inputs) {
        Some((source_name, value)) => {
            value
                .parse::<ProviderKind>()
                .map_err(|_| SelectionError::UnknownProvider {
                    source_name: if source_name == "file" {
                        format!("{file_name}: key `provider`")
                    } else {
                        source_name.to_string()
                    },
                    value: value.clone(),
                })?
        }
        None => {
            if env("ANTHROPIC_API_KEY").is_some() || env("ANTHROPIC_AUTH_TOKEN").is_some() {
                ProviderKind::Anthropic
            } else if env("OPENAI_API_KEY").is_some()
                || configured_base.is_some()
                || file_base.is_some()
                || env("OPENAI_BASE_URL").is_some()
            {
                ProviderKind::OpenAi
            } else if env("ANTHROPIC_BASE_URL").is_some() {
                ProviderKind::Anthropic
            } else if let Some(models) = &inputs.local_ollama {
                let model = match configured_model.or_else(|| models.first().cloned()) {
                    Some(model) => model,
                    None => return Err(SelectionError::OllamaWithoutModels),
                };
                return Ok(ProviderConfig::new(
                    ProviderKind::OpenAi,
                    model,
                    OLLAMA_DEFAULT_BASE_URL,
                ));
            } else {
                return Err(SelectionError::NothingConfigured { config: file_name });
            }
        }
    };

    let (env_base, key_vars) = match kind {
        ProviderKind::Anthropic => (
            "ANTHROPIC_BASE_URL",
            "ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN",
        ),
        ProviderKind::OpenAi | ProviderKind::OpenAiResponses => {
            ("OPENAI_BASE_URL", "OPENAI_API_KEY")
        }
    };
    let explicit_base = configured_base.or_else(|| env(env_base)).or(file_base);
    let base_url = explicit_base
        .clone()
        .unwrap_or_else(|| kind.default_base_url().to_string());
    let model = configured_model.unwrap_or_else(|| kind.default_model().to_string());
    let kind = if kind == ProviderKind::OpenAi
        && base_url.trim_end_matches('/') == kind.default_base_url()
        && needs_responses_api(&model)
    {
        ProviderKind::OpenAiResponses
    } else {
        kind
    };
    let mut cfg = ProviderConfig::new(kind, model, base_url.clone());
    match kind {
        ProviderKind::Anthropic => {
            cfg.api_key = env("ANTHROPIC_API_KEY");
            cfg.auth_token = env("ANTHROPIC_AUTH_TOKEN");
        }
        ProviderKind::OpenAi | ProviderKind::OpenAiResponses => cfg.api_key = env("OPENAI_API_KEY"),
    }
    apply_limits_from_env(&mut cfg, &env)?;
    // The public APIs always need a key; a local or proxy server may not.
    let is_public_default = base_url.trim_end_matches('/') == kind.default_base_url();
    if cfg.api_key.is_none() && cfg.auth_token.is_none() && is_public_default {
        return Err(SelectionError::MissingCredential {
            provider: kind.as_str().to_string(),
            base_url,
            env_var: key_vars.to_string(),
        });
    }
    Ok(cfg)
}

/// Whether OpenAI serves `model` only through the Responses API: the
/// codex-tuned models (`gpt-5-codex`, `gpt-5.1-codex-max`,
/// `codex-mini-latest`, …) and the `-pro` reasoning models (`o1-pro`,
/// `o3-pro`, `gpt-5-pro`). [`resolve`] switches `openai` to
/// `openai-responses` for them when the base URL is OpenAI's own
/// (compatible servers such as OpenRouter serve them over Chat Completions).
pub fn needs_responses_api(model: &str) -> bool {
    let name = model.trim().to_ascii_lowercase();
    let name = name.strip_prefix("openai/").unwrap_or(&name);
    name.starts_with("codex-")
        || (name.starts_with("gpt-") && name.contains("-codex"))
        || [
            "o1-pro",
            "o3-pro",
            "gpt-5-pro",
            "o3-deep-research",
            "o4-mini-deep-research",
        ]
        .iter()
        .any(|p| name.starts_with(p))
        || (name.starts_with("gpt-5.") && name.contains("-pro"))
}

/// Probes `base` (normally [`LOCAL_OLLAMA_URL`]) for a running Ollama:
/// `GET {base}/api/tags`. Returns its model names when it answers 200
/// within `timeout`, `None` otherwise. Never fails.
pub async fn probe_local_ollama(base: &str, timeout: Duration) -> Option<Vec<String>> {
    #[derive(Deserialize)]
    struct Tags {
        #[serde(default)]
        models: Vec<Tag>,
    }
    #[derive(Deserialize)]
    struct Tag {
        name: String,
    }
    let client = crate::tls::client_builder().timeout(timeout).build().ok()?;
    let url = format!("{}/api/tags", base.trim_end_matches('/'));
    let response = tokio::time::timeout(timeout, client.get(url).send())
        .await
        .ok()?
        .ok()?;
    if !response.status().is_success() {
        return None;
    }
    let body = tokio::time::timeout(timeout, response.bytes())
        .await
        .ok()?
        .ok()?;
    let tags: Tags = serde_json::from_slice(&body).unwrap_or(Tags { models: Vec::new() });
    Some(tags.models.into_iter().map(|t| t.name).collect())
}

/// [`resolve`], probing the local Ollama first when nothing else is
/// configured.
pub async fn select(
    flags: SelectionFlags,
    env: &(dyn Fn(&str) -> Option<String> + Sync),
    file: ConfigFile,
) -> Result<ProviderConfig, SelectionError> {
    let mut inputs = SelectionInputs {
        flags,
        env,
        file,
        local_ollama: None,
    };
    if needs_local_probe(&inputs) {
        inputs.local_ollama =
            probe_local_ollama(LOCAL_OLLAMA_URL, LOCAL_OLLAMA_PROBE_TIMEOUT).await;
    }
    resolve(&inputs)
}

/// `KAJI_IDLE_TIMEOUT_MS` (milliseconds, at least 1) and
/// `KAJI_MAX_REPLY_BYTES` (bytes, at least 1) override the idle timeout and
/// the reply size cap.
fn apply_limits_from_env(
    cfg: &mut ProviderConfig,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(), SelectionError> {
    let positive =
        |var: &'static str, expected: &'static str| -> Result<Option<u64>, SelectionError> {
            match env(var) {
                None => Ok(None),
                Some(value) => match value.trim().parse::<u64>() {
                    Ok(n) if n > 0 => Ok(Some(n)),
                    _ => Err(SelectionError::InvalidEnv {
                        var,
                        value,
                        expected,
                    }),
                },
            }
        };
    if let Some(ms) = positive(
        "KAJI_IDLE_TIMEOUT_MS",
        "expected the idle timeout in milliseconds, a whole number of at least 1",
    )? {
        cfg.idle_timeout = Duration::from_millis(ms);
    }
    if let Some(bytes) = positive(
        "KAJI_MAX_REPLY_BYTES",
        "expected the reply size cap in bytes, a whole number of at least 1",
    )? {
        cfg.max_reply_bytes = bytes;
    }
    Ok(())
}

fn lookup(env: &dyn Fn(&str) -> Option<String>, key: &str) -> Option<String> {
    env(key).filter(|v| !v.trim().is_empty())
}

fn non_empty(value: &Option<String>) -> Option<String> {
    value.clone().filter(|v| !v.trim().is_empty())
}

/// The configured provider name and where it came from.
fn provider_source(inputs: &SelectionInputs<'_>) -> Option<(&'static str, String)> {
    non_empty(&inputs.flags.provider)
        .map(|v| ("--provider", v))
        .or_else(|| lookup(inputs.env, "KAJI_PROVIDER").map(|v| ("KAJI_PROVIDER", v)))
        .or_else(|| non_empty(&inputs.file.provider).map(|v| ("file", v)))
}
