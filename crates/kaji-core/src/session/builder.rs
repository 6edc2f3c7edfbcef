//! SessionBuilder: settings and flags in, a Session out. This is the one
//! place a conversation's services are assembled — provider, tools and MCP
//! servers, task list, runtime registry, worktree, checkpoints, hooks,
//! todo — so that no front end assembles anything itself.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use kaji_llm::selection::{self, ConfigFile, SelectionFlags};
use kaji_llm::{ModelProvider, ProviderConfig};
use kaji_tools::todo::{TodoState, todo_tool};

use crate::checkpoints::CheckpointStore;
use crate::config::IgnoredSetting;
use crate::config::KajiConfig;
use crate::frontend::TaskFrontend;
use crate::hooks::HookRunner;
use crate::permissions::{PermissionMode, SessionApprovals};

use super::error::SessionError;
use super::options::SessionOptions;
use super::persist::{self, Restored};
use super::record::SessionKind;
use super::{Conversation, Services, Session};

/// Builds a [`Session`] from [`SessionOptions`].
pub struct SessionBuilder {
    kaji_home: PathBuf,
    options: SessionOptions,
    provider: Option<ProviderConfig>,
    parent: Option<String>,
    history: Vec<kaji_protocol::Message>,
}

impl SessionBuilder {
    /// A builder over `$KAJI_HOME` (absolute).
    pub fn new(kaji_home: impl Into<PathBuf>, options: SessionOptions) -> Self {
        Self {
            kaji_home: kaji_home.into(),
            options,
            provider: None,
            parent: None,
            history: Vec::new(),
        }
    }

    /// Uses this provider instead of selecting one from flags, environment
    /// and settings (`kaji demo`, tests).
    pub fn provider(mut self, config: ProviderConfig) -> Self {
        self.provider = Some(config);
        self
    }

    /// Starts the new session with a copy of another's history (a fork).
    pub fn forked_from(mut self, parent: &str, history: Vec<kaji_protocol::Message>) -> Self {
        self.parent = Some(parent.to_string());
        self.history = history;
        self.options.kind = SessionKind::Fork;
        self.options.resume = None;
        self
    }

    /// Builds the session: loads settings, selects the provider, opens the
    /// task list and the runtime registry, enters the worktree, starts the
    /// MCP servers, and creates (or reopens, when resuming) the session
    /// file. Warnings for the user come back beside it.
    pub async fn build(
        self,
        frontend: Arc<dyn TaskFrontend>,
    ) -> Result<(Arc<Session>, Vec<String>), SessionError> {
        let mut warnings = Vec::new();
        let cwd = working_dir(self.options.cwd.as_deref())?;
        let restored = match &self.options.resume {
            Some(from) => Some(persist::open_for_resume(&self.kaji_home, from, &cwd)?),
            None => None,
        };
        if let Some(r) = &restored {
            warnings.extend(r.warnings.iter().cloned());
            if !r.project_dir.is_dir() {
                return Err(SessionError::Store(format!(
                    "session {} worked in {}, which no longer exists; nothing was changed (`kaji sessions show {}` still shows it)",
                    r.session_id,
                    r.project_dir.display(),
                    r.session_id
                )));
            }
            if self.options.cwd.is_some() && r.project_dir != cwd {
                return Err(SessionError::Usage(format!(
                    "session {} belongs to {}, not {}: resume it from its own directory (or leave out -C)",
                    r.session_id,
                    r.project_dir.display(),
                    cwd.display()
                )));
            }
        }
        // A resumed session continues in its own project directory.
        let project_dir = match &restored {
            Some(r) => r.project_dir.clone(),
            None => cwd,
        };
        let trusted = self.options.trust
            || crate::trust::is_trusted(&self.kaji_home, &project_dir)
                .map_err(|e| SessionError::Usage(e.to_string()))?;
        let (settings, ignored) = KajiConfig::load_gated(&self.kaji_home, &project_dir, trusted)
            .map_err(|e| SessionError::Usage(e.to_string()))?;
        if !ignored.is_empty() {
            warnings.push(untrusted_warning(&ignored));
        }
        kaji_tasks::process::set_env_policy(kaji_tasks::process::EnvPolicy {
            secret_env: settings.secret_env.clone(),
            env_passthrough: settings.env_passthrough.clone(),
        });
        let provider_config = match self.provider.clone() {
            Some(p) => p,
            None => self.select_provider(&settings).await?,
        };
        let provider: Arc<dyn ModelProvider> = kaji_llm::build_provider(&provider_config)
            .map_err(|e| SessionError::Usage(e.to_string()))?;

        let session_id = match &restored {
            Some(r) => r.session_id.clone(),
            None => persist::new_session_id(),
        };
        let mode = self.mode(&settings, restored.as_ref());
        let approvals = self
            .approvals(
                &settings,
                trusted,
                &project_dir,
                &session_id,
                mode,
                &mut warnings,
            )
            .await?;
        let list_id = self.task_list_id(&session_id, restored.as_ref());
        let task_list = kaji_tasks::TaskListStore::open(&self.kaji_home, &list_id)
            .map_err(|e| SessionError::Usage(format!("--task-list {list_id:?}: {e}")))?;
        let runtime = kaji_tasks::RuntimeTaskRegistry::new(
            &self.kaji_home,
            &session_id,
            kaji_tasks::runtime::RuntimeConfig::default(),
        )
        .map_err(|e| {
            SessionError::Setup(format!("cannot set up the session's runtime tasks: {e}"))
        })?;

        let work_dir = self
            .work_dir(&project_dir, restored.as_ref(), &mut warnings)
            .await?;
        let checkpoints = !self.options.no_checkpoints && checkpoints_make_sense(&work_dir);
        let todo = TodoState::new();
        if let Some(r) = &restored
            && let Err(e) = todo.replace(r.state.todo.clone())
        {
            warnings.push(format!("the saved todo list was not restored: {e}"));
        }
        let mut tools = kaji_tools::builtin_tools();
        tools.register(todo_tool(todo.clone()));
        let servers = settings.mcp_servers.clone();
        let mcp = (!servers.is_empty()).then(|| kaji_mcp::McpManager::start(servers, &project_dir));
        let hooks = (!settings.hooks.is_empty()).then(|| HookRunner::new(settings.hooks.clone()));

        let model_info = kaji_llm::pricing::model_info(&provider_config.model, &settings.models);
        let services = Services {
            kaji_home: self.kaji_home.clone(),
            project_dir: project_dir.clone(),
            provider,
            provider_config,
            tools,
            mcp,
            task_list,
            list_id,
            runtime: Arc::new(runtime),
            todo,
            hooks,
            checkpoints,
            tool_protocol: self.options.tool_protocol,
            max_mistakes: self
                .options
                .max_mistakes
                .or(settings.max_mistakes)
                .unwrap_or(3)
                .max(1),
            max_turns: self.options.max_turns,
            tool_result_max_chars: settings
                .tool_result_max_chars
                .unwrap_or(crate::executor::DEFAULT_TOOL_RESULT_MAX_CHARS),
            model_info,
            compaction: settings.compaction.unwrap_or_default(),
            compact_threshold: settings.auto_compact_threshold.unwrap_or(0.85),
            on_text_reply: settings
                .on_text_reply
                .unwrap_or(self.options.text_reply_default),
            subagents: self.options.subagents.clone(),
            persist: self.options.persist,
            live_output: self.options.live_output,
        };
        let (conversation, files) = match restored {
            Some(r) => {
                // The answer the replay built for calls cut off by a crash
                // goes to the file first, so the next records follow a
                // valid history.
                if r.state.answer_built
                    && let (Some(files), Some(message)) = (&r.files, r.state.history.last())
                {
                    files
                        .recorder
                        .record_synced(super::record::SessionRecord::Message {
                            message: message.clone(),
                        });
                }
                let conversation = Conversation::restored(&r, mode, work_dir);
                (conversation, r.files)
            }
            None => {
                let files = if self.options.persist {
                    Some(persist::create(
                        &self.kaji_home,
                        &session_id,
                        self.options.kind,
                        self.parent.as_deref(),
                        &project_dir,
                    )?)
                } else {
                    None
                };
                // A fork starts from a copy of its original's history.
                if let Some(files) = &files
                    && !self.history.is_empty()
                {
                    files
                        .recorder
                        .record_synced(super::record::SessionRecord::HistoryReplaced {
                            history: self.history.clone(),
                            reason: "fork".into(),
                            tokens_before: None,
                            tokens_after: None,
                        });
                }
                let conversation = Conversation::new(self.history, mode, work_dir);
                (conversation, files)
            }
        };
        let session = Session::assemble(
            session_id,
            services,
            conversation,
            files,
            frontend,
            approvals,
        );
        Ok((session, warnings))
    }

    async fn select_provider(&self, settings: &KajiConfig) -> Result<ProviderConfig, SessionError> {
        let file = ConfigFile {
            path: settings.sources().last().cloned(),
            provider: settings.provider.clone(),
            model: settings.model.clone(),
            base_url: settings.base_url.clone(),
        };
        let flags = SelectionFlags {
            provider: self.options.provider.clone(),
            model: self.options.model.clone(),
            base_url: self.options.base_url.clone(),
        };
        let env = |k: &str| std::env::var(k).ok();
        selection::select(flags, &env, file)
            .await
            .map_err(|e| SessionError::Usage(e.to_string()))
    }

    /// The session's permission state: the settings' rules (a project's
    /// allow rules count only when it is trusted), `--allow`/`--deny`,
    /// the protected paths and the sandbox (probed unless it is off).
    async fn approvals(
        &self,
        settings: &KajiConfig,
        trusted: bool,
        project_dir: &Path,
        session_id: &str,
        mode: PermissionMode,
        warnings: &mut Vec<String>,
    ) -> Result<SessionApprovals, SessionError> {
        use kaji_policy::{Decision, Rule, RuleSet, RuleSource};
        use kaji_sandbox::SandboxMode;
        let mut rules = RuleSet::new();
        for r in &settings.permissions {
            let from_user = matches!(r.source, RuleSource::User(_));
            rules.push(
                r.kind,
                r.rule.clone(),
                r.source.clone(),
                from_user || trusted,
            );
        }
        let flags = [
            (Decision::Allow, "--allow", &self.options.allow),
            (Decision::Deny, "--deny", &self.options.deny),
        ];
        for (kind, flag, list) in flags {
            for text in list {
                let rule = text
                    .parse::<Rule>()
                    .map_err(|e| SessionError::Usage(format!("{flag} {text:?}: {e}")))?;
                rules.push(kind, rule, RuleSource::Flag, true);
            }
        }
        let mut approvals = SessionApprovals::with_rules(rules);
        approvals.trusted = trusted;
        approvals.headless = self.options.headless;
        approvals.protected_paths = settings.protected_paths.clone();
        approvals
            .protected_paths
            .extend(crate::trust::git_protected_patterns(project_dir));
        let explicit = self.options.sandbox.or(settings.sandbox);
        let sandbox = &mut approvals.sandbox;
        sandbox.explicit = explicit;
        sandbox.network = settings.sandbox_network.unwrap_or(false);
        sandbox.deny_read = settings.sandbox_deny_read.clone();
        sandbox.kaji_home = self.kaji_home.clone();
        sandbox.session_id = session_id.to_string();
        if explicit != Some(SandboxMode::Off) {
            let support = tokio::task::spawn_blocking(kaji_sandbox::probe)
                .await
                .map_err(|e| SessionError::Setup(format!("the sandbox probe failed: {e}")))?;
            sandbox.available = support.is_complete();
            let wanted = explicit.is_some() || mode != PermissionMode::Yolo;
            if !sandbox.available && wanted {
                warnings.push(format!(
                    "the sandbox is not available here ({}): commands are not confined and ask for approval as without it (`kaji doctor` shows what is missing)",
                    support.problems.join("; ")
                ));
            }
        }
        Ok(approvals)
    }

    /// Flags win over the saved session, which wins over the settings.
    fn mode(&self, settings: &KajiConfig, restored: Option<&Restored>) -> PermissionMode {
        self.options
            .permission_mode
            .or_else(|| restored.and_then(|r| r.state.mode))
            .or(settings.permission_mode)
            .unwrap_or_default()
    }

    fn task_list_id(&self, session_id: &str, restored: Option<&Restored>) -> String {
        self.options
            .task_list
            .clone()
            .or_else(|| {
                std::env::var("KAJI_TASK_LIST_ID")
                    .ok()
                    .filter(|v| !v.is_empty())
            })
            .or_else(|| restored.and_then(|r| r.state.task_list.clone()))
            .unwrap_or_else(|| session_id.to_string())
    }

    /// Where the first Task works: `--worktree`, else the saved session's
    /// directory (when it still exists), else the project directory.
    async fn work_dir(
        &self,
        project_dir: &Path,
        restored: Option<&Restored>,
        warnings: &mut Vec<String>,
    ) -> Result<PathBuf, SessionError> {
        if let Some(name) = &self.options.worktree {
            let worktree = kaji_tools::worktree::create_worktree(project_dir, Some(name))
                .await
                .map_err(|e| SessionError::Usage(format!("--worktree {name}: {e}")))?;
            return Ok(worktree.cwd);
        }
        if let Some(saved) = restored.and_then(|r| r.state.cwd.clone()) {
            if saved.is_dir() {
                return Ok(saved);
            }
            warnings.push(format!(
                "the session worked in {}, which no longer exists; continuing in {}",
                saved.display(),
                project_dir.display()
            ));
        }
        Ok(project_dir.to_path_buf())
    }
}

/// The warning for project settings ignored because the project is not
/// trusted: each file and its keys, and how to trust it.
fn untrusted_warning(ignored: &[IgnoredSetting]) -> String {
    let mut files: Vec<(&Path, Vec<&str>)> = Vec::new();
    for i in ignored {
        match files.iter_mut().find(|(p, _)| *p == i.path.as_path()) {
            Some((_, keys)) => keys.push(i.key),
            None => files.push((i.path.as_path(), vec![i.key])),
        }
    }
    let list: Vec<String> = files
        .iter()
        .map(|(p, keys)| format!("{} in {}", keys.join(", "), p.display()))
        .collect();
    format!(
        "this project is not trusted, so kaji ignored its settings that run code, widen permissions or redirect traffic: {}. If you trust it, run `kaji trust` (or pass --trust to kaji exec).",
        list.join("; ")
    )
}

/// The canonical working directory.
fn working_dir(cwd: Option<&Path>) -> Result<PathBuf, SessionError> {
    let dir = match cwd {
        Some(d) => d.to_path_buf(),
        None => std::env::current_dir()
            .map_err(|e| SessionError::Setup(format!("cannot read the current directory: {e}")))?,
    };
    let dir = dir
        .canonicalize()
        .map_err(|e| SessionError::Usage(format!("working directory {}: {e}", dir.display())))?;
    if !dir.is_dir() {
        return Err(SessionError::Usage(format!(
            "working directory {} is not a directory",
            dir.display()
        )));
    }
    Ok(dir)
}

/// Checkpoints snapshot the whole working directory: not for `/` or the
/// home directory itself.
fn checkpoints_make_sense(dir: &Path) -> bool {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    dir.parent().is_some() && home.as_deref() != Some(dir)
}

/// Opens the checkpoint store of `dir`, if checkpoints are on.
pub(crate) fn open_checkpoints(
    enabled: bool,
    kaji_home: &Path,
    dir: &Path,
) -> Result<Option<CheckpointStore>, String> {
    if !enabled {
        return Ok(None);
    }
    CheckpointStore::open(kaji_home, dir)
        .map(Some)
        .map_err(|e| format!("cannot set up checkpoints: {e}"))
}
