//! Shared harness of the core's end-to-end tests: a recording front end
//! with scripted answers, and a task wired to the scripted model server
//! through a real provider.

#![allow(dead_code)]

use std::collections::VecDeque;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use kaji_core::{
    AskRequest, PermissionMode, Task, TaskConfig, TaskFrontend, ToolExecutor, ToolProtocol,
};
use kaji_llm::{ProviderConfig, ProviderKind};
use kaji_protocol::{AskKind, AskResponse, SessionEvent, TaskEvent};
use kaji_test_support::{Script, ScriptedModelServer, Turn};
use tokio::sync::mpsc;

/// Records every event; answers asks from a queue, then with a default.
pub struct RecordingFrontend {
    pub events: Mutex<Vec<TaskEvent>>,
    pub asks: Mutex<Vec<AskRequest>>,
    answers: Mutex<VecDeque<AskResponse>>,
    default_answer: AskResponse,
    tx: mpsc::UnboundedSender<TaskEvent>,
    /// When set, followup questions are answered only once it is notified.
    pub followup_gate: Mutex<Option<Arc<tokio::sync::Notify>>>,
    /// Asks of this kind are never answered (a user who walked away).
    pub never_answer: Mutex<Option<AskKind>>,
}

impl RecordingFrontend {
    pub fn new(default_answer: AskResponse) -> (Arc<Self>, mpsc::UnboundedReceiver<TaskEvent>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (
            Arc::new(Self {
                events: Mutex::new(Vec::new()),
                asks: Mutex::new(Vec::new()),
                answers: Mutex::new(VecDeque::new()),
                default_answer,
                tx,
                followup_gate: Mutex::new(None),
                never_answer: Mutex::new(None),
            }),
            rx,
        )
    }

    pub fn push_answer(&self, answer: AskResponse) {
        self.answers.lock().unwrap().push_back(answer);
    }

    pub fn events(&self) -> Vec<TaskEvent> {
        self.events.lock().unwrap().clone()
    }

    pub fn ask_kinds(&self) -> Vec<AskKind> {
        self.asks.lock().unwrap().iter().map(|a| a.kind).collect()
    }

    /// The tool results, in order: (id, name, is_error, output).
    pub fn tool_results(&self) -> Vec<(String, String, bool, String)> {
        self.events()
            .into_iter()
            .filter_map(|e| match e {
                TaskEvent::ToolResult {
                    id,
                    name,
                    is_error,
                    output,
                    ..
                } => Some((id, name, is_error, output)),
                _ => None,
            })
            .collect()
    }
}

#[async_trait]
impl TaskFrontend for RecordingFrontend {
    fn emit(&self, event: SessionEvent) {
        let event = event.event;
        self.events.lock().unwrap().push(event.clone());
        let _ = self.tx.send(event);
    }

    async fn answer(&self, ask: &AskRequest) -> AskResponse {
        self.asks.lock().unwrap().push(ask.clone());
        if ask.kind == AskKind::CompletionResult {
            return AskResponse::Approve;
        }
        if *self.never_answer.lock().unwrap() == Some(ask.kind) {
            std::future::pending::<()>().await;
        }
        if ask.kind == AskKind::Followup {
            let gate = self.followup_gate.lock().unwrap().clone();
            if let Some(gate) = gate {
                gate.notified().await;
            }
        }
        let queued = self.answers.lock().unwrap().pop_front();
        queued.unwrap_or_else(|| self.default_answer.clone())
    }
}

/// A denial, as `kaji exec` gives.
pub fn deny() -> AskResponse {
    AskResponse::Deny { feedback: None }
}

/// A provider config pointing at the scripted server, with tiny retry
/// delays.
pub fn provider_config(server: &ScriptedModelServer, kind: ProviderKind) -> ProviderConfig {
    let base = match kind {
        ProviderKind::Anthropic => server.anthropic_base_url(),
        ProviderKind::OpenAi | ProviderKind::OpenAiResponses => server.openai_base_url(),
    };
    let mut cfg = ProviderConfig::new(kind, "scripted-model", base);
    cfg.api_key = Some("test-key".into());
    cfg.retry_base_delay = Duration::from_millis(1);
    cfg.retry_max_delay = Duration::from_millis(5);
    cfg
}

/// A task over `dir` against `server`.
pub fn task(
    server: &ScriptedModelServer,
    kind: ProviderKind,
    protocol: ToolProtocol,
    mode: PermissionMode,
    dir: &Path,
    frontend: Arc<RecordingFrontend>,
) -> Task {
    let cfg = provider_config(server, kind);
    let provider = kaji_llm::build_provider(&cfg).expect("provider");
    let mut config = TaskConfig::new(dir.to_path_buf(), provider, "scripted-model".into());
    config.tool_protocol = protocol;
    config.permission_mode = mode;
    config.empty_reply_backoff = Duration::from_millis(1);
    config.kaji_home = dir.join(".kaji-home");
    Task::new(
        config,
        ToolExecutor::new(kaji_tools::builtin_tools()),
        frontend,
    )
}

/// The tool_result blocks of a recorded request's last user message, in
/// any wire format: (tool_use_id, content).
pub fn last_tool_results(body: &serde_json::Value) -> Vec<(String, String)> {
    // Responses: trailing function_call_output items of `input`.
    if let Some(input) = body["input"].as_array() {
        let mut out = Vec::new();
        for item in input.iter().rev() {
            if item["type"] == "function_call_output" {
                let id = item["call_id"].as_str().unwrap_or("").to_string();
                let output = item["output"].as_str().unwrap_or("").to_string();
                out.insert(0, (id, output));
            } else if !out.is_empty() || item["role"] != "user" {
                break;
            }
        }
        return out;
    }
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let mut out = Vec::new();
    // Anthropic: blocks of the last user message.
    if let Some(last) = messages.last()
        && let Some(blocks) = last["content"].as_array()
    {
        for b in blocks {
            if b["type"] == "tool_result" {
                let content = match &b["content"] {
                    serde_json::Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                out.push((b["tool_use_id"].as_str().unwrap_or("").to_string(), content));
            }
        }
    }
    // OpenAI: trailing role=tool messages.
    for m in messages.iter().rev() {
        if m["role"] == "tool" {
            out.insert(
                0,
                (
                    m["tool_call_id"].as_str().unwrap_or("").to_string(),
                    m["content"].as_str().unwrap_or("").to_string(),
                ),
            );
        } else if !out.is_empty() || m["role"] != "user" {
            break;
        }
    }
    out
}

/// A task configuration over `dir` against `server` (Anthropic wire, the
/// model `scripted`) in `mode`, with its kaji home in `dir/.kaji-home`.
pub fn task_config(server: &ScriptedModelServer, dir: &Path, mode: PermissionMode) -> TaskConfig {
    let cfg = provider_config(server, ProviderKind::Anthropic);
    let mut config = TaskConfig::new(
        dir.to_path_buf(),
        kaji_llm::build_provider(&cfg).unwrap(),
        "scripted".into(),
    );
    config.permission_mode = mode;
    config.kaji_home = dir.join(".kaji-home");
    config
}

/// The scripted model server playing `turns`.
pub async fn serve(turns: impl IntoIterator<Item = Turn>) -> ScriptedModelServer {
    ScriptedModelServer::start(Script::new(turns)).await
}

/// The model's `AttemptCompletion` with `result`.
pub fn done(result: &str) -> Turn {
    Turn::tool_call("AttemptCompletion", serde_json::json!({"result": result}))
}

/// Writes `text` to `path`, making its directories.
pub fn write(path: &Path, text: impl AsRef<[u8]>) {
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, text).expect("write");
}

/// A `$KAJI_HOME` and a repository with a subdirectory to work in.
pub struct Layout {
    _tmp: tempfile::TempDir,
    pub home: std::path::PathBuf,
    pub repo: std::path::PathBuf,
    pub sub: std::path::PathBuf,
}

impl Layout {
    /// The three directories in a new temporary one (`repo` has `.git`).
    pub fn new() -> Self {
        let tmp = tempfile::tempdir().expect("tempdir");
        let home = tmp.path().join("home");
        let repo = tmp.path().join("repo");
        let sub = repo.join("crates").join("app");
        std::fs::create_dir_all(&home).expect("mkdir");
        std::fs::create_dir_all(repo.join(".git")).expect("mkdir");
        std::fs::create_dir_all(&sub).expect("mkdir");
        Self {
            _tmp: tmp,
            home,
            repo,
            sub,
        }
    }
}
