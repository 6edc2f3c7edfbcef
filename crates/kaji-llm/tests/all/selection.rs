//! Provider selection: flags beat environment beat config file, and the
//! fallbacks when nothing is configured.

use std::collections::HashMap;
use std::time::Duration;

use kaji_llm::selection::{
    ConfigFile, SelectionError, SelectionFlags, SelectionInputs, load_config_file,
    needs_local_probe, probe_local_ollama, resolve,
};
use kaji_llm::{ProviderConfig, ProviderKind};

struct Case {
    flags: SelectionFlags,
    env: HashMap<&'static str, &'static str>,
    file: ConfigFile,
    ollama: Option<Vec<String>>,
}

impl Case {
    fn new() -> Self {
        Self {
            flags: SelectionFlags::default(),
            env: HashMap::new(),
            file: ConfigFile::default(),
            ollama: None,
        }
    }
    fn env(mut self, k: &'static str, v: &'static str) -> Self {
        self.env.insert(k, v);
        self
    }
    fn flags(
        mut self,
        provider: Option<&str>,
        model: Option<&str>,
        base_url: Option<&str>,
    ) -> Self {
        self.flags = SelectionFlags {
            provider: provider.map(String::from),
            model: model.map(String::from),
            base_url: base_url.map(String::from),
        };
        self
    }
    fn file(mut self, provider: Option<&str>, model: Option<&str>, base_url: Option<&str>) -> Self {
        self.file = ConfigFile {
            path: Some("/home/u/.kaji/config.toml".into()),
            provider: provider.map(String::from),
            model: model.map(String::from),
            base_url: base_url.map(String::from),
        };
        self
    }
    fn ollama(mut self, models: &[&str]) -> Self {
        self.ollama = Some(models.iter().map(|m| m.to_string()).collect());
        self
    }
    fn run(&self) -> Result<ProviderConfig, SelectionError> {
        let env = |k: &str| self.env.get(k).map(|v| v.to_string());
        resolve(&self.inputs(&env))
    }
    fn needs_probe(&self) -> bool {
        let env = |k: &str| self.env.get(k).map(|v| v.to_string());
        needs_local_probe(&self.inputs(&env))
    }
    fn inputs<'a>(&self, env: &'a dyn Fn(&str) -> Option<String>) -> SelectionInputs<'a> {
        SelectionInputs {
            flags: self.flags.clone(),
            env,
            file: self.file.clone(),
            local_ollama: self.ollama.clone(),
        }
    }
}

#[test]
fn anthropic_key_alone() {
    let cfg = Case::new().env("ANTHROPIC_API_KEY", "k").run().unwrap();
    assert_eq!(cfg.kind, ProviderKind::Anthropic);
    assert_eq!(cfg.model, "claude-sonnet-4-5");
    assert_eq!(cfg.base_url, "https://api.anthropic.com");
    assert_eq!(cfg.api_key.as_deref(), Some("k"));
    assert_eq!(cfg.max_attempts, 3);
    assert_eq!(cfg.idle_timeout, Duration::from_secs(120));
}

#[test]
fn anthropic_key_beats_openai_key() {
    let cfg = Case::new()
        .env("OPENAI_API_KEY", "o")
        .env("ANTHROPIC_API_KEY", "a")
        .run()
        .unwrap();
    assert_eq!(cfg.kind, ProviderKind::Anthropic);
}

#[test]
fn auth_token_selects_anthropic() {
    let cfg = Case::new().env("ANTHROPIC_AUTH_TOKEN", "t").run().unwrap();
    assert_eq!(cfg.kind, ProviderKind::Anthropic);
    assert_eq!(cfg.auth_token.as_deref(), Some("t"));
    assert_eq!(cfg.api_key, None);
}

#[test]
fn openai_key_alone() {
    let cfg = Case::new().env("OPENAI_API_KEY", "o").run().unwrap();
    assert_eq!(cfg.kind, ProviderKind::OpenAi);
    assert_eq!(cfg.model, "gpt-4.1");
    assert_eq!(cfg.base_url, "https://api.openai.com/v1");
}

#[test]
fn env_base_urls_are_used() {
    let cfg = Case::new()
        .env("ANTHROPIC_API_KEY", "a")
        .env("ANTHROPIC_BASE_URL", "http://proxy:8080")
        .run()
        .unwrap();
    assert_eq!(cfg.base_url, "http://proxy:8080");
    let cfg = Case::new()
        .env("OPENAI_BASE_URL", "http://127.0.0.1:8000/v1")
        .run()
        .unwrap();
    assert_eq!(
        (cfg.kind, cfg.base_url.as_str(), cfg.api_key),
        (ProviderKind::OpenAi, "http://127.0.0.1:8000/v1", None)
    );
}

#[test]
fn flags_beat_env_beat_file() {
    let full = Case::new()
        .env("ANTHROPIC_API_KEY", "a")
        .env("OPENAI_API_KEY", "o")
        .env("KAJI_PROVIDER", "anthropic")
        .env("KAJI_MODEL", "env-model")
        .env("OPENAI_BASE_URL", "http://env/v1")
        .env("ANTHROPIC_BASE_URL", "http://env-anthropic")
        .file(Some("anthropic"), Some("file-model"), Some("http://file"));

    // File only.
    let cfg = Case::new()
        .env("OPENAI_API_KEY", "o")
        .file(Some("openai"), Some("file-model"), Some("http://file/v1"))
        .run()
        .unwrap();
    assert_eq!(
        (cfg.kind, cfg.model.as_str(), cfg.base_url.as_str()),
        (ProviderKind::OpenAi, "file-model", "http://file/v1")
    );

    // Env beats file.
    let cfg = full.run().unwrap();
    assert_eq!(
        (cfg.kind, cfg.model.as_str(), cfg.base_url.as_str()),
        (ProviderKind::Anthropic, "env-model", "http://env-anthropic")
    );

    // Flags beat env.
    let cfg = Case {
        flags: SelectionFlags::default(),
        ..full
    }
    .flags(Some("openai"), Some("flag-model"), Some("http://flag/v1"))
    .run()
    .unwrap();
    assert_eq!(
        (cfg.kind, cfg.model.as_str(), cfg.base_url.as_str()),
        (ProviderKind::OpenAi, "flag-model", "http://flag/v1")
    );
    assert_eq!(cfg.api_key.as_deref(), Some("o"));
}

#[test]
fn provider_from_file_beats_key_inference() {
    let cfg = Case::new()
        .env("ANTHROPIC_API_KEY", "a")
        .env("OPENAI_API_KEY", "o")
        .file(Some("openai"), None, None)
        .run()
        .unwrap();
    assert_eq!(cfg.kind, ProviderKind::OpenAi);
    assert_eq!(cfg.model, "gpt-4.1");
}

#[test]
fn base_url_flag_alone_means_a_local_openai_compatible_server() {
    let cfg = Case::new()
        .flags(None, Some("qwen"), Some("http://127.0.0.1:8080/v1"))
        .run()
        .unwrap();
    assert_eq!(
        (cfg.kind, cfg.model.as_str(), cfg.api_key),
        (ProviderKind::OpenAi, "qwen", None)
    );
}

#[test]
fn local_ollama_is_the_last_fallback() {
    let case = Case::new().ollama(&["llama3.2:latest", "qwen3"]);
    assert!(case.needs_probe());
    let cfg = case.run().unwrap();
    assert_eq!(
        (cfg.kind, cfg.model.as_str(), cfg.base_url.as_str()),
        (
            ProviderKind::OpenAi,
            "llama3.2:latest",
            "http://127.0.0.1:11434/v1"
        )
    );
    let cfg = Case::new()
        .env("KAJI_MODEL", "qwen3")
        .ollama(&["llama3.2:latest", "qwen3"])
        .run()
        .unwrap();
    assert_eq!(cfg.model, "qwen3");
    assert_eq!(
        Case::new().ollama(&[]).run().unwrap_err(),
        SelectionError::OllamaWithoutModels
    );
    assert!(!Case::new().env("OPENAI_API_KEY", "o").needs_probe());
    assert!(!Case::new().env("KAJI_PROVIDER", "openai").needs_probe());
}

#[test]
fn nothing_configured_names_every_way() {
    let err = Case::new().run().unwrap_err();
    let message = err.to_string();
    for needle in [
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "Ollama",
        "127.0.0.1:11434",
        "--provider",
        "--model",
        "--base-url",
        "KAJI_PROVIDER",
        "KAJI_MODEL",
        "config.toml",
    ] {
        assert!(message.contains(needle), "{message} lacks {needle}");
    }
    // Empty variables count as unset.
    assert!(Case::new().env("ANTHROPIC_API_KEY", "").run().is_err());
}

#[test]
fn unknown_provider_names_its_source() {
    let err = Case::new()
        .flags(Some("gemini"), None, None)
        .run()
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("--provider") && err.contains("gemini"),
        "{err}"
    );
    let err = Case::new()
        .env("KAJI_PROVIDER", "x")
        .run()
        .unwrap_err()
        .to_string();
    assert!(err.contains("KAJI_PROVIDER"), "{err}");
    let err = Case::new()
        .file(Some("y"), None, None)
        .run()
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("/home/u/.kaji/config.toml") && err.contains("provider"),
        "{err}"
    );
}

#[test]
fn missing_key_for_public_api() {
    let err = Case::new()
        .flags(Some("anthropic"), None, None)
        .run()
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("ANTHROPIC_API_KEY") && err.contains("https://api.anthropic.com"),
        "{err}"
    );
    let err = Case::new()
        .env("KAJI_PROVIDER", "openai")
        .run()
        .unwrap_err()
        .to_string();
    assert!(err.contains("OPENAI_API_KEY"), "{err}");
    // A local server needs none.
    assert!(
        Case::new()
            .flags(Some("openai"), None, Some("http://127.0.0.1:11434/v1"))
            .run()
            .is_ok()
    );
}

#[test]
fn config_file_loading() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.toml");
    let missing = load_config_file(&path).unwrap();
    assert_eq!((missing.provider, missing.model), (None, None));

    std::fs::write(
        &path,
        "provider = \"openai\"\nmodel = \"m\"\nbase_url = \"http://x/v1\"\n[other]\nkey = 1\n",
    )
    .unwrap();
    let file = load_config_file(&path).unwrap();
    assert_eq!(file.provider.as_deref(), Some("openai"));
    assert_eq!(file.model.as_deref(), Some("m"));
    assert_eq!(file.base_url.as_deref(), Some("http://x/v1"));
    assert_eq!(file.path.as_deref(), Some(path.as_path()));

    std::fs::write(&path, "model = \"m\"\nprovider = 3\n").unwrap();
    let err = load_config_file(&path).unwrap_err().to_string();
    assert!(
        err.contains("config.toml") && err.contains("line 2") && err.contains("provider"),
        "{err}"
    );

    std::fs::write(&path, "provider = \"bard\"\n").unwrap();
    let err = load_config_file(&path).unwrap_err().to_string();
    assert!(err.contains("config.toml") && err.contains("bard"), "{err}");

    std::fs::write(&path, "provider = [unclosed\n").unwrap();
    let err = load_config_file(&path).unwrap_err().to_string();
    assert!(err.contains("line 1"), "{err}");
}

#[tokio::test]
async fn probe_finds_nothing_on_a_closed_port() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    assert_eq!(
        probe_local_ollama(&format!("http://127.0.0.1:{port}"), Duration::from_secs(5)).await,
        None
    );
}

#[tokio::test]
async fn probe_reads_model_names() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut buf = vec![0u8; 4096];
        let mut seen = Vec::new();
        while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = socket.read(&mut buf).await.unwrap();
            if n == 0 {
                break;
            }
            seen.extend_from_slice(&buf[..n]);
        }
        let body = r#"{"models":[{"name":"llama3.2:latest"},{"name":"qwen3:8b"}]}"#;
        let response = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        socket.write_all(response.as_bytes()).await.unwrap();
        String::from_utf8_lossy(&seen).into_owned()
    });
    let models = probe_local_ollama(&format!("http://{addr}"), Duration::from_secs(5)).await;
    assert_eq!(
        models,
        Some(vec!["llama3.2:latest".to_string(), "qwen3:8b".to_string()])
    );
    let request = server.await.unwrap();
    assert!(request.starts_with("GET /api/tags "), "{request}");
}

#[test]
fn idle_timeout_and_reply_cap_from_the_environment() {
    let cfg = Case::new().env("ANTHROPIC_API_KEY", "k").run().unwrap();
    assert_eq!(cfg.max_reply_bytes, 32 * 1024 * 1024);
    let cfg = Case::new()
        .env("ANTHROPIC_API_KEY", "k")
        .env("KAJI_IDLE_TIMEOUT_MS", "250")
        .env("KAJI_MAX_REPLY_BYTES", " 4096 ")
        .run()
        .unwrap();
    assert_eq!(cfg.idle_timeout, Duration::from_millis(250));
    assert_eq!(cfg.max_reply_bytes, 4096);
    for (var, value) in [
        ("KAJI_IDLE_TIMEOUT_MS", "soon"),
        ("KAJI_IDLE_TIMEOUT_MS", "0"),
        ("KAJI_MAX_REPLY_BYTES", "-1"),
    ] {
        let err = Case::new()
            .env("OPENAI_API_KEY", "k")
            .env(var, value)
            .run()
            .unwrap_err();
        assert!(matches!(err, SelectionError::InvalidEnv { .. }), "{err:?}");
        let text = err.to_string();
        assert!(text.contains(var) && text.contains(value), "{text}");
    }
}

#[test]
fn openai_responses_is_selectable_and_chosen_for_codex_models() {
    let cfg = Case::new()
        .env("OPENAI_API_KEY", "sk")
        .flags(Some("openai-responses"), None, None)
        .run()
        .unwrap();
    assert_eq!(cfg.kind, ProviderKind::OpenAiResponses);
    assert_eq!(cfg.model, "gpt-5-codex");
    assert_eq!(cfg.base_url, "https://api.openai.com/v1");
    assert_eq!(cfg.api_key.as_deref(), Some("sk"));
    for model in [
        "gpt-5-codex",
        "gpt-5.1-codex-max",
        "codex-mini-latest",
        "o3-pro",
    ] {
        let case = Case::new()
            .env("OPENAI_API_KEY", "sk")
            .flags(None, Some(model), None);
        assert_eq!(
            case.run().unwrap().kind,
            ProviderKind::OpenAiResponses,
            "{model}"
        );
    }
    // Chat models stay on Chat Completions; a compatible server keeps what it was given.
    let case = Case::new()
        .env("OPENAI_API_KEY", "sk")
        .flags(None, Some("gpt-4.1"), None);
    assert_eq!(case.run().unwrap().kind, ProviderKind::OpenAi);
    let case = Case::new().env("OPENAI_API_KEY", "sk").flags(
        None,
        Some("gpt-5-codex"),
        Some("https://openrouter.ai/api/v1"),
    );
    assert_eq!(case.run().unwrap().kind, ProviderKind::OpenAi);
    let err = Case::new()
        .flags(Some("responses"), None, None)
        .run()
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("openai-responses") && err.contains("--provider"),
        "{err}"
    );
    assert!(!kaji_llm::selection::needs_responses_api("gpt-5"));
}
