//! What every command that runs an agent shares: the model and permission
//! options, provider selection, and building a [`TaskConfig`].

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use kaji_core::checkpoints::CheckpointStore;
use kaji_core::config::KajiConfig;
use kaji_core::hooks::HookRunner;
use kaji_core::rules::RuleFiles;
use kaji_core::{PermissionMode, TaskConfig, ToolExecutor, ToolProtocol};
use kaji_llm::selection::{self, ConfigFile, SelectionFlags};
use kaji_llm::{ModelProvider, ProviderConfig};
use kaji_tools::todo::{TodoState, todo_tool};

/// Options of the agent commands (`exec`, the TUI).
#[derive(Debug, Clone, clap::Args)]
pub struct AgentArgs {
    /// Working directory of the task.
    #[arg(short = 'C', long = "cd", value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// Model provider: anthropic or openai (any OpenAI-compatible server).
    #[arg(long, value_name = "NAME")]
    pub provider: Option<String>,
    /// Model name.
    #[arg(long, short = 'm', value_name = "MODEL")]
    pub model: Option<String>,
    /// Base URL of the provider's API.
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// default | accept-edits | yolo | plan (default: `permission_mode` in
    /// config.toml, else default).
    #[arg(long, value_name = "MODE")]
    pub permission_mode: Option<String>,
    /// Run every tool without asking (same as --permission-mode yolo).
    #[arg(long)]
    pub yolo: bool,
    /// Consecutive mistakes before the task stops (yolo) or asks (default:
    /// `max_mistakes` in config.toml, else 3).
    #[arg(long, value_name = "N")]
    pub max_mistakes: Option<u32>,
    /// Stop after this many model turns.
    #[arg(long, value_name = "N")]
    pub max_turns: Option<u32>,
    /// How the model calls tools: native (the provider's tool calling) or
    /// xml (calls written in the reply text, for servers without tools).
    #[arg(long, value_name = "PROTOCOL", default_value = "native")]
    pub tool_protocol: String,
    /// Work in git worktree NAME (`.kaji/worktrees/NAME` on branch
    /// `kaji/NAME`, created from HEAD) instead of the checkout itself.
    #[arg(long, value_name = "NAME")]
    pub worktree: Option<String>,
    /// Take no checkpoints of the working directory.
    #[arg(long)]
    pub no_checkpoints: bool,
    /// Share this task list with other sessions and processes (default:
    /// one list per session). Also KAJI_TASK_LIST_ID.
    #[arg(long, value_name = "ID")]
    pub task_list: Option<String>,
}

/// Everything resolved from [`AgentArgs`] and the environment.
pub struct AgentSetup {
    pub config: TaskConfig,
    pub executor: ToolExecutor,
    pub provider_config: ProviderConfig,
    /// The MCP servers, started in the background.
    pub mcp: Option<kaji_mcp::McpManager>,
}

/// An error of the command line or the configuration (exit code 2).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

impl AgentArgs {
    fn permission_mode(&self, settings: &KajiConfig) -> Result<PermissionMode> {
        if self.yolo {
            return Ok(PermissionMode::Yolo);
        }
        match &self.permission_mode {
            Some(mode) => mode
                .parse()
                .map_err(|e: String| UsageError(format!("--permission-mode: {e}")).into()),
            None => Ok(settings.permission_mode.unwrap_or_default()),
        }
    }

    /// Resolves the working directory.
    pub fn working_dir(&self) -> Result<PathBuf> {
        let dir = match &self.cwd {
            Some(d) => d.clone(),
            None => std::env::current_dir().context("cannot read the current directory")?,
        };
        let dir = dir
            .canonicalize()
            .map_err(|e| UsageError(format!("working directory {}: {e}", dir.display())))?;
        if !dir.is_dir() {
            return Err(UsageError(format!(
                "working directory {} is not a directory",
                dir.display()
            ))
            .into());
        }
        Ok(dir)
    }

    /// Selects the provider: flags, then env, then the settings files.
    pub async fn provider_config(&self, settings: &KajiConfig) -> Result<ProviderConfig> {
        let file = ConfigFile {
            path: settings.sources().last().cloned(),
            provider: settings.provider.clone(),
            model: settings.model.clone(),
            base_url: settings.base_url.clone(),
        };
        let flags = SelectionFlags {
            provider: self.provider.clone(),
            model: self.model.clone(),
            base_url: self.base_url.clone(),
        };
        let env = |k: &str| std::env::var(k).ok();
        selection::select(flags, &env, file)
            .await
            .map_err(|e| UsageError(e.to_string()).into())
    }

    /// Builds the task configuration and executor.
    pub async fn setup(&self, kaji_home: &Path, session_id: &str) -> Result<AgentSetup> {
        let cwd = self.working_dir()?;
        let settings = KajiConfig::load(kaji_home, &cwd).map_err(|e| UsageError(e.to_string()))?;
        let mode = self.permission_mode(&settings)?;
        let protocol: ToolProtocol = self
            .tool_protocol
            .parse()
            .map_err(|e: String| UsageError(format!("--tool-protocol: {e}")))?;
        let provider_config = self.provider_config(&settings).await?;
        let provider: Arc<dyn ModelProvider> =
            kaji_llm::build_provider(&provider_config).map_err(|e| UsageError(e.to_string()))?;
        let list_id = self
            .task_list
            .clone()
            .or_else(|| {
                std::env::var("KAJI_TASK_LIST_ID")
                    .ok()
                    .filter(|v| !v.is_empty())
            })
            .unwrap_or_else(|| session_id.to_string());
        let task_list = kaji_tasks::TaskListStore::open(kaji_home, &list_id)
            .map_err(|e| UsageError(format!("--task-list {list_id:?}: {e}")))?;

        let runtime = kaji_tasks::RuntimeTaskRegistry::new(
            kaji_home,
            session_id,
            kaji_tasks::runtime::RuntimeConfig::default(),
        )
        .map_err(|e| anyhow::anyhow!("cannot set up the session's runtime tasks: {e}"))?;

        let mut config = TaskConfig::new(cwd, provider, provider_config.model.clone());
        config.runtime = Some(Arc::new(runtime));
        config.tool_protocol = protocol;
        config.permission_mode = mode;
        config.max_mistakes = self
            .max_mistakes
            .or(settings.max_mistakes)
            .unwrap_or(3)
            .max(1);
        config.max_turns = self.max_turns;
        config.session_id = session_id.to_string();
        config.kaji_home = kaji_home.to_path_buf();
        config.task_list = Some(task_list);
        if let Some(name) = &self.worktree {
            let worktree = kaji_tools::worktree::create_worktree(&config.cwd, Some(name))
                .await
                .map_err(|e| UsageError(format!("--worktree {name}: {e}")))?;
            config.start_dir = Some(worktree.cwd.clone());
        }
        let work_dir = config
            .start_dir
            .clone()
            .unwrap_or_else(|| config.cwd.clone());
        if !self.no_checkpoints && checkpoints_make_sense(&work_dir) {
            config.checkpoints = Some(
                CheckpointStore::open(kaji_home, &work_dir)
                    .map_err(|e| anyhow::anyhow!("cannot set up checkpoints: {e}"))?,
            );
        }
        let rules = RuleFiles::discover(kaji_home, &work_dir);
        for warning in &rules.warnings {
            eprintln!("kaji: {warning}");
        }
        config.extra_system_sections = rules.to_system_section().into_iter().collect();
        if !settings.hooks.is_empty() {
            config.hooks = Some(HookRunner::new(settings.hooks.clone()));
        }
        let todo = TodoState::new();
        config.todo = Some(todo.clone());
        let mut tools = kaji_tools::builtin_tools();
        tools.register(todo_tool(todo));
        let mut executor = ToolExecutor::new(tools);
        let servers = settings.mcp_servers.clone();
        let mcp = (!servers.is_empty()).then(|| kaji_mcp::McpManager::start(servers, &config.cwd));
        if let Some(mcp) = &mcp {
            executor.set_mcp(mcp.clone());
        }
        Ok(AgentSetup {
            config,
            executor,
            provider_config,
            mcp,
        })
    }
}

/// Checkpoints snapshot the whole working directory: not for `/` or the
/// home directory itself.
fn checkpoints_make_sense(dir: &Path) -> bool {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    dir.parent().is_some() && home.as_deref() != Some(dir)
}

/// A new session id: time-ordered and unique enough for file names.
pub fn new_session_id() -> String {
    use std::time::{SystemTime, UNIX_EPOCH};
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    format!("s{}-{}", now.as_secs(), std::process::id())
}
