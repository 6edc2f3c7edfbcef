//! SessionBuilder: settings and flags in, a Session out. This is the one
//! place a conversation's services are assembled — provider, tools and MCP
//! servers, task list, runtime registry, worktree, checkpoints, hooks,
//! todo — so that no front end assembles anything itself.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use kaji_llm::selection::{self, ConfigFile, SelectionFlags};
use kaji_llm::{ModelProvider, ProviderConfig};
use kaji_tools::todo::{TodoState, todo_tool};

use crate::config::IgnoredSetting;
use crate::config::KajiConfig;
use crate::env::StartupEnv;
use crate::frontend::TaskFrontend;
use crate::hooks::HookRunner;
use crate::permissions::{PermissionMode, SessionApprovals};

use super::error::SessionError;
use super::options::SessionOptions;
use super::services::{SessionLimits, SessionServices};
use super::{Conversation, Session};
use crate::storage::persist::{self, Restored};
use crate::storage::record::SessionKind;

/// What a build's first steps settle: where the session works, with
/// which settings, as which session, in which mode.
struct Base {
    project_dir: PathBuf,
    /// The saved session, when resuming.
    restored: Option<Restored>,
    settings: KajiConfig,
    /// The project is trusted (its settings all apply).
    trusted: bool,
    session_id: String,
    mode: PermissionMode,
}

/// What the session works with ([`SessionBuilder::build`]'s second step).
struct Workspace {
    approvals: SessionApprovals,
    task_list: kaji_tasks::list::TaskList,
    runtime: Arc<kaji_tasks::RuntimeTaskRegistry>,
    /// Where it works (a worktree, maybe).
    work_dir: PathBuf,
    /// It takes checkpoints.
    checkpoints: bool,
    todo: TodoState,
    tools: kaji_tools::ToolRegistry,
    /// The system prompt's section listing the skills.
    skills_section: String,
}

/// Builds a [`Session`] from [`SessionOptions`].
pub struct SessionBuilder {
    kaji_home: PathBuf,
    options: SessionOptions,
    provider: Option<ProviderConfig>,
    parent: Option<String>,
    history: Vec<kaji_protocol::Message>,
    files: Option<Arc<dyn kaji_tools::FileAccess>>,
    /// The environment's overrides, read once.
    env: StartupEnv,
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
            files: None,
            env: StartupEnv::read(),
        }
    }

    /// Uses this environment instead of the process's (read by
    /// [`SessionBuilder::new`]).
    pub fn startup_env(mut self, env: StartupEnv) -> Self {
        self.env = env;
        self
    }

    /// The file tools read and write text through `files` (an editor's
    /// buffers, `kaji acp`) instead of the local disk.
    pub fn file_access(mut self, files: Arc<dyn kaji_tools::FileAccess>) -> Self {
        self.files = Some(files);
        self
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
        let (project_dir, restored) = self.project(&mut warnings)?;
        let (settings, trusted) = self.settings(&project_dir, &mut warnings)?;
        // `--model`, else the model the saved session chose.
        let chosen_model = self
            .options
            .model
            .clone()
            .or_else(|| restored.as_ref().and_then(|r| r.state.model.clone()));
        let provider_config = self
            .provider_config(&settings, chosen_model.clone())
            .await?;
        let started_model = provider_config.model.clone();
        let provider: Arc<dyn ModelProvider> = kaji_llm::build_provider(&provider_config)?;
        let session_id = match (&restored, &self.options.session_id) {
            (Some(r), _) => r.session_id.clone(),
            (None, Some(id)) => id.clone(),
            (None, None) => persist::new_session_id(),
        };
        let mode = self.mode(&settings, restored.as_ref());
        let base = Base {
            project_dir,
            restored,
            settings,
            trusted,
            session_id,
            mode,
        };
        let workspace = self.workspace(&base, &mut warnings).await?;
        let work_dir = workspace.work_dir.clone();
        let services = self.services(&base, workspace, provider_config, frontend, &mut warnings)?;
        let Base {
            project_dir,
            restored,
            ..
        } = base;
        let source = if restored.is_some() {
            "resume"
        } else {
            "startup"
        };
        let (conversation, files) =
            self.conversation(restored, &services.session_id, &project_dir, mode, work_dir)?;
        let conversation = Conversation {
            model: chosen_model.map(|_| started_model),
            ..conversation
        };
        let session = Session::assemble(services, provider, conversation, files);
        warnings.extend(session.session_start(source).await);
        Ok((session, warnings))
    }

    /// Where the session works and with what: its approvals, task list
    /// and runtime registry, working directory (a worktree entered),
    /// whether it checkpoints, its todo list, tools and skills.
    async fn workspace(
        &self,
        base: &Base,
        warnings: &mut Vec<String>,
    ) -> Result<Workspace, SessionError> {
        let (settings, restored) = (&base.settings, base.restored.as_ref());
        let approvals = self
            .approvals(
                settings,
                base.trusted,
                &base.project_dir,
                &base.session_id,
                base.mode,
                warnings,
            )
            .await?;
        let (task_list, runtime) = self
            .stores(settings, restored, &base.session_id, warnings)
            .await?;
        let work_dir = self.work_dir(&base.project_dir, restored, warnings).await?;
        let checkpoints = !self.options.no_checkpoints
            && checkpoints_make_sense(&work_dir, self.env.home.as_deref());
        let todo = restored_todo(restored, warnings);
        let (tools, skills_section) = self.tools(&base.project_dir, &todo, warnings);
        // Rule files are read again for every prompt; what was skipped
        // (a link out of the project, an unreadable file) is said once.
        warnings.extend(
            crate::rules::RuleFiles::discover_with_home(
                &self.kaji_home,
                &work_dir,
                self.env.home.as_deref(),
            )
            .warnings,
        );
        Ok(Workspace {
            approvals,
            task_list,
            runtime,
            work_dir,
            checkpoints,
            todo,
            tools,
            skills_section,
        })
    }

    /// The session's services: the workspace's, with the MCP and language
    /// servers started, the hooks, the limits and the web search.
    fn services(
        &self,
        base: &Base,
        workspace: Workspace,
        provider_config: ProviderConfig,
        frontend: Arc<dyn TaskFrontend>,
        warnings: &mut Vec<String>,
    ) -> Result<SessionServices, SessionError> {
        let settings = &base.settings;
        // The child-process environment policy of this session only: it
        // travels with every spawn (hooks, MCP servers, tools' commands).
        let env_policy = Arc::new(kaji_tasks::process::EnvPolicy {
            secret_env: settings.secret_env.clone(),
            env_passthrough: settings.env_passthrough.clone(),
            set: settings.claude_env.clone().into_iter().collect(),
        });
        let mcp = self.mcp(settings, &base.project_dir, &env_policy, warnings);
        let (lsp_servers, lsp_warnings) =
            crate::lsp::servers(settings, &base.project_dir, base.trusted);
        warnings.extend(lsp_warnings);
        let lsp = crate::lsp::pool(
            lsp_servers,
            settings,
            self.env.path.clone(),
            Arc::clone(&env_policy),
        );
        let hooks = self.hooks(settings, &env_policy);
        let limits = self.limits(settings, &provider_config, workspace.checkpoints, warnings)?;
        let web_search = crate::web_search::WebSearchSetup::from_settings(
            settings.web_search.as_ref(),
            &provider_config,
        );
        let Workspace {
            approvals,
            task_list,
            runtime,
            todo,
            tools,
            skills_section,
            ..
        } = workspace;
        let agent_name = self.options.agent_name.as_deref();
        Ok(SessionServices {
            owner: owner_name(
                agent_name.or(self.env.agent_name.as_deref()),
                &base.session_id,
            ),
            user_home: self.env.home.clone(),
            session_id: base.session_id.clone(),
            kaji_home: self.kaji_home.clone(),
            project_dir: base.project_dir.clone(),
            provider_config,
            models: settings.models.clone(),
            tools,
            mcp,
            web_search,
            tool_services: SessionServices::tool_view(
                &task_list,
                &runtime,
                env_policy,
                self.files.clone(),
                lsp,
            ),
            task_list,
            runtime,
            todo,
            hooks,
            approvals: Arc::new(std::sync::Mutex::new(approvals)),
            frontend,
            message_ids: Arc::default(),
            subagent_usage: Arc::default(),
            limits,
            skills_section,
            role: self.options.role,
            program_agents: self.options.agents.clone(),
            system_prompt: self.options.system_prompt.clone(),
            live_output: self.options.live_output,
            max_turns: self.options.max_turns,
            on_text_reply: settings
                .on_text_reply
                .unwrap_or(self.options.text_reply_default),
        })
    }

    /// The project directory, and the saved session when resuming (its
    /// load warnings go to `warnings`). A resumed session continues in its
    /// own project directory, which must still exist and be the one `-C`
    /// names, if it names one.
    fn project(
        &self,
        warnings: &mut Vec<String>,
    ) -> Result<(PathBuf, Option<Restored>), SessionError> {
        let cwd = working_dir(self.options.cwd.as_deref())?;
        let Some(from) = &self.options.resume else {
            return Ok((cwd, None));
        };
        let r = persist::open_for_resume(&self.kaji_home, from, &cwd)?;
        warnings.extend(r.warnings.iter().cloned());
        if !r.project_dir.is_dir() {
            return Err(SessionError::ProjectGone {
                session_id: r.session_id.clone(),
                project_dir: r.project_dir.clone(),
            });
        }
        if self.options.cwd.is_some() && r.project_dir != cwd {
            return Err(SessionError::OtherProject {
                session_id: r.session_id.clone(),
                project_dir: r.project_dir.clone(),
                cwd,
            });
        }
        Ok((r.project_dir.clone(), Some(r)))
    }

    /// The project's settings and whether it is trusted; what was ignored
    /// or skipped in them goes to `warnings`.
    fn settings(
        &self,
        project_dir: &Path,
        warnings: &mut Vec<String>,
    ) -> Result<(KajiConfig, bool), SessionError> {
        let trusted = self.options.trust || crate::trust::is_trusted(&self.kaji_home, project_dir)?;
        let (settings, ignored) = KajiConfig::load_with(
            &self.kaji_home,
            project_dir,
            trusted,
            &self.claude_sources(),
        )?;
        if !ignored.is_empty() {
            warnings.push(untrusted_warning(&ignored));
        }
        warnings.extend(settings.mcp_json_skipped.iter().cloned());
        warnings.extend(
            settings
                .claude_warnings
                .iter()
                .map(|w| format!("Claude Code settings: {w}")),
        );
        warnings.extend(crate::claude_settings::user_hooks_notice(
            &self.kaji_home,
            self.env.home.as_deref(),
            &settings.hooks,
        ));
        Ok((settings, trusted))
    }

    /// The provider given to the builder, else the one the flags,
    /// environment and settings select; with the reasoning level of
    /// `--reasoning` or the settings.
    async fn provider_config(
        &self,
        settings: &KajiConfig,
        chosen_model: Option<String>,
    ) -> Result<ProviderConfig, SessionError> {
        let mut provider_config = match self.provider.clone() {
            Some(p) => p,
            None => self.select_provider(settings, chosen_model).await?,
        };
        if let Some(level) = self.options.reasoning.or(settings.reasoning) {
            provider_config.reasoning = level;
        }
        Ok(provider_config)
    }

    /// The session's task list (the saved session's, else one named after
    /// the session, unless something names another) and its runtime task
    /// registry.
    async fn stores(
        &self,
        settings: &KajiConfig,
        restored: Option<&Restored>,
        session_id: &str,
        warnings: &mut Vec<String>,
    ) -> Result<
        (
            kaji_tasks::list::TaskList,
            Arc<kaji_tasks::RuntimeTaskRegistry>,
        ),
        SessionError,
    > {
        let default_list = restored
            .and_then(|r| r.state.task_list.clone())
            .unwrap_or_else(|| session_id.to_string());
        let task_list = self.open_list(settings, &default_list).await?;
        if let kaji_tasks::list::TaskList::Pg(pg) = &task_list
            && let Some(note) = pg.migrate_note()
        {
            warnings.push(note);
        }
        let runtime = kaji_tasks::RuntimeTaskRegistry::new(
            &self.kaji_home,
            session_id,
            kaji_tasks::runtime::RuntimeConfig::default(),
        )
        .map(Arc::new)
        .map_err(SessionError::RuntimeTasks)?;
        Ok((task_list, runtime))
    }

    /// The session's tools: the built-ins, the todo tool, the front end's
    /// own tools and the skills; with the system prompt's skills section.
    fn tools(
        &self,
        project_dir: &Path,
        todo: &TodoState,
        warnings: &mut Vec<String>,
    ) -> (kaji_tools::ToolRegistry, String) {
        let mut tools = kaji_tools::builtin_tools();
        tools.register(todo_tool(todo.clone()));
        for tool in &self.options.tools.0 {
            tools.register(Arc::clone(tool));
        }
        let skills_section = self.skills(project_dir, &mut tools, warnings);
        warnings.extend(agent_warnings(
            &self.kaji_home,
            project_dir,
            self.env.home.as_deref(),
            &tools,
        ));
        (tools, skills_section)
    }

    /// Starts the MCP servers of the settings and of the front end (the
    /// settings' one wins a name both use), if there are any.
    fn mcp(
        &self,
        settings: &KajiConfig,
        project_dir: &Path,
        env_policy: &Arc<kaji_tasks::process::EnvPolicy>,
        warnings: &mut Vec<String>,
    ) -> Option<kaji_mcp::McpManager> {
        let mut servers = settings.mcp_servers.clone();
        for (name, server) in &self.options.mcp_servers {
            if servers.contains_key(name) {
                warnings.push(format!(
                    "MCP server {name:?} is configured in the settings too; the settings' one is used"
                ));
            } else {
                servers.insert(name.clone(), server.clone());
            }
        }
        let mcp_options = kaji_mcp::McpManagerOptions {
            env_policy: Arc::clone(env_policy),
            ..kaji_mcp::McpManagerOptions::default()
        };
        (!servers.is_empty())
            .then(|| kaji_mcp::McpManager::start_with_options(servers, project_dir, mcp_options))
    }

    /// The hooks of the settings and of the front end's program, if any.
    fn hooks(
        &self,
        settings: &KajiConfig,
        env_policy: &Arc<kaji_tasks::process::EnvPolicy>,
    ) -> Option<HookRunner> {
        let program_hooks = self.options.program_hooks.clone();
        (!settings.hooks.is_empty() || program_hooks.is_some()).then(|| {
            HookRunner::new(settings.hooks.clone())
                .with_env_policy(Arc::clone(env_policy))
                .with_program(program_hooks)
        })
    }

    /// The session's limits and switches: the flags, else the settings,
    /// else the defaults.
    fn limits(
        &self,
        settings: &KajiConfig,
        provider_config: &ProviderConfig,
        checkpoints: bool,
        warnings: &mut Vec<String>,
    ) -> Result<SessionLimits, SessionError> {
        Ok(SessionLimits {
            tool_protocol: self.options.tool_protocol,
            max_mistakes: self
                .options
                .max_mistakes
                .or(settings.max_mistakes)
                .unwrap_or(3)
                .max(1),
            budget: run_budget(
                &self.options,
                settings,
                &kaji_llm::pricing::model_info(&provider_config.model, &settings.models),
                warnings,
            )?,
            tool_result_max_chars: settings
                .tool_result_max_chars
                .unwrap_or(crate::config::DEFAULT_TOOL_RESULT_MAX_CHARS),
            compaction: settings.compaction.unwrap_or_default(),
            compact_threshold: settings.auto_compact_threshold.unwrap_or(0.85),
            checkpoints,
            subagents: subagent_limits(&self.options.subagents, settings),
            persist: self.options.persist,
        })
    }

    /// The conversation and its session files: the saved session's, or a
    /// new file (a fork's starting with its original's history). Where the
    /// session works goes to its file when it is not where the file says
    /// (a `--worktree` at the start, or a directory gone): a resume then
    /// knows the worktree, and that it is gone.
    fn conversation(
        self,
        restored: Option<Restored>,
        session_id: &str,
        project_dir: &Path,
        mode: PermissionMode,
        work_dir: PathBuf,
    ) -> Result<(Conversation, Option<persist::SessionFiles>), SessionError> {
        let cwd_changed = match &restored {
            Some(r) => r.state.cwd.as_ref() != Some(&work_dir),
            None => work_dir != project_dir,
        };
        let started_in = work_dir.clone();
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
                        .record_synced(crate::storage::record::SessionRecord::Message {
                            message: message.clone(),
                        });
                }
                let conversation = Conversation::restored(&r, mode, work_dir);
                (conversation, r.files)
            }
            None => {
                let files = self.new_files(session_id, project_dir)?;
                let conversation = Conversation::new(self.history, mode, work_dir);
                (conversation, files)
            }
        };
        if cwd_changed && let Some(files) = &files {
            files
                .recorder
                .record_synced(crate::storage::record::SessionRecord::Cwd { cwd: started_in });
        }
        Ok((conversation, files))
    }

    /// A new session's files (none when it is not persisted). A fork's
    /// start from a copy of its original's history, after what its
    /// original said before a compaction (shown, dimmed, never sent again).
    fn new_files(
        &self,
        session_id: &str,
        project_dir: &Path,
    ) -> Result<Option<persist::SessionFiles>, SessionError> {
        if !self.options.persist {
            return Ok(None);
        }
        let files = persist::create(
            &self.kaji_home,
            session_id,
            self.options.kind,
            self.parent.as_deref(),
            project_dir,
        )?;
        if !self.history.is_empty() {
            if let Some(parent) = &self.parent {
                for record in crate::storage::persist::records_through_last_compaction(
                    &self.kaji_home,
                    parent,
                ) {
                    files.recorder.record(record);
                }
            }
            files
                .recorder
                .record_synced(crate::storage::record::SessionRecord::HistoryReplaced {
                    history: self.history.clone(),
                    reason: "fork".into(),
                    tokens_before: None,
                    tokens_after: None,
                });
        }
        Ok(Some(files))
    }

    /// Finds the Agent Skills (`.kaji/skills/`, `$KAJI_HOME/skills/`,
    /// `.claude/skills/`, `~/.claude/skills/`), registers the `Skill` tool
    /// for them and returns the system prompt's section listing them.
    fn skills(
        &self,
        project_dir: &Path,
        tools: &mut kaji_tools::ToolRegistry,
        warnings: &mut Vec<String>,
    ) -> String {
        use kaji_tools::skill::{
            SkillRoots, discover_skills, register_skills, skills_prompt_section,
        };
        let roots = SkillRoots::standard(project_dir, &self.kaji_home, self.env.home.as_deref());
        let found = discover_skills(&roots);
        warnings.extend(found.warnings.iter().map(|e| format!("skill skipped: {e}")));
        let section = skills_prompt_section(&found.skills);
        register_skills(tools, found.skills);
        section
    }

    async fn select_provider(
        &self,
        settings: &KajiConfig,
        model: Option<String>,
    ) -> Result<ProviderConfig, SessionError> {
        let file = ConfigFile {
            path: settings.sources().last().cloned(),
            provider: settings.provider.clone(),
            model: settings.model.clone(),
            base_url: settings.base_url.clone(),
        };
        let flags = SelectionFlags {
            provider: self.options.provider.clone(),
            model,
            base_url: self.options.base_url.clone(),
        };
        let env = |k: &str| std::env::var(k).ok();
        selection::select(flags, &env, file)
            .await
            .map_err(SessionError::from)
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
                let rule = text.parse::<Rule>().map_err(|source| SessionError::Rule {
                    flag,
                    text: text.clone(),
                    source,
                })?;
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
        sandbox.allow_unix_sockets = settings.sandbox_allow_unix_sockets.clone();
        sandbox.kaji_home = self.kaji_home.clone();
        sandbox.session_id = session_id.to_string();
        if explicit != Some(SandboxMode::Off) {
            let support = tokio::task::spawn_blocking(kaji_sandbox::probe)
                .await
                .map_err(SessionError::SandboxProbe)?;
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

    /// Which of Claude Code's settings files to read: all three (the
    /// user's under the home read at start) unless `--setting-sources`
    /// names fewer.
    fn claude_sources(&self) -> crate::claude_settings::ClaudeSources {
        let mut sources = crate::claude_settings::ClaudeSources::all(self.env.home.clone());
        if let Some(only) = &self.options.setting_sources {
            sources.enabled.retain(|s| only.contains(s));
        }
        sources
    }

    /// Flags win over the saved session, which wins over the settings.
    fn mode(&self, settings: &KajiConfig, restored: Option<&Restored>) -> PermissionMode {
        self.options
            .permission_mode
            .or_else(|| restored.and_then(|r| r.state.mode))
            .or(settings.permission_mode)
            .unwrap_or_default()
    }

    /// Opens the task list: the backend from `KAJI_TASK_LIST_URL`, else
    /// the `task_list_url` setting (unset: files); the name from
    /// `--task-list`, `KAJI_TASK_LIST_ID`, the URL's `?list=`, then
    /// `default_list`. A bad URL or list name is a usage error; a database
    /// that cannot be used is a setup error naming server and list.
    async fn open_list(
        &self,
        settings: &KajiConfig,
        default_list: &str,
    ) -> Result<kaji_tasks::list::TaskList, SessionError> {
        let nonempty = |v: String| (!v.trim().is_empty()).then_some(v);
        let env_list = self.env.task_list_id.clone();
        let url = self
            .env
            .task_list_url
            .clone()
            .or_else(|| settings.task_list_url.clone().and_then(nonempty));
        let flag = self.options.task_list.clone().and_then(nonempty);
        let target = kaji_tasks::list::resolve_target(
            flag.as_deref(),
            env_list.as_deref(),
            url.as_deref(),
            default_list,
        )
        .map_err(SessionError::TaskListName)?;
        kaji_tasks::list::TaskList::open(&self.kaji_home, &target)
            .await
            .map_err(SessionError::task_list)
    }

    /// The task list and lease length a session of these options would
    /// use, for commands that work a list without one (`kaji worker`):
    /// settings of the working directory (trust as for a session), the
    /// list named as [`open_list`](Self::open_list) says, `default_list`
    /// when nothing names one. The lease is `KAJI_LEASE_MS`, else the
    /// `lease_ms` setting, else 30 s.
    pub async fn task_list(
        &self,
        default_list: &str,
    ) -> Result<(kaji_tasks::list::TaskList, std::time::Duration), SessionError> {
        let cwd = working_dir(self.options.cwd.as_deref())?;
        let trusted = self.options.trust || crate::trust::is_trusted(&self.kaji_home, &cwd)?;
        let (settings, _) = KajiConfig::load_gated(&self.kaji_home, &cwd, trusted)?;
        let list = self.open_list(&settings, default_list).await?;
        Ok((list, self.env.lease(settings.lease_ms)))
    }

    /// Where the first Task works: `--worktree` (created, or entered again
    /// when it exists), else the saved session's
    /// directory (when it still exists), else the project directory.
    async fn work_dir(
        &self,
        project_dir: &Path,
        restored: Option<&Restored>,
        warnings: &mut Vec<String>,
    ) -> Result<PathBuf, SessionError> {
        if let Some(name) = &self.options.worktree {
            // An existing worktree of that name is entered again.
            let (worktree, _created) =
                kaji_tools::worktree::open_or_create_worktree(project_dir, name)
                    .await
                    .map_err(|source| SessionError::Worktree {
                        name: name.clone(),
                        source,
                    })?;
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

/// The todo checklist, with the saved session's items when resuming (a
/// list that cannot be restored is said in `warnings`).
fn restored_todo(restored: Option<&Restored>, warnings: &mut Vec<String>) -> TodoState {
    let todo = TodoState::new();
    if let Some(r) = restored
        && let Err(e) = todo.replace(r.state.todo.clone())
    {
        warnings.push(format!("the saved todo list was not restored: {e}"));
    }
    todo
}

/// The run's budget: the flags, else the settings. A cost limit on a model
/// without known prices cannot stop anything: it is kept, with a warning.
fn run_budget(
    options: &super::SessionOptions,
    settings: &KajiConfig,
    model_info: &kaji_llm::pricing::ModelInfo,
    warnings: &mut Vec<String>,
) -> Result<Arc<crate::budget::RunBudget>, SessionError> {
    let max_requests = options.max_requests.or(settings.max_requests);
    let max_usd = options.max_budget_usd.or(settings.max_budget_usd);
    if let Some(usd) = max_usd
        && !(usd.is_finite() && usd > 0.0)
    {
        return Err(SessionError::BudgetUsd(usd));
    }
    if max_requests == Some(0) {
        return Err(SessionError::ZeroMaxRequests);
    }
    let price = crate::budget::pricing(model_info);
    let budget = crate::budget::RunBudget::new(max_requests, max_usd, price);
    if budget.cost_limit_unenforceable() {
        warnings.push(
            "--max-budget-usd: the model's prices are not known (set them under [models.\"NAME\"] in config.toml), so the cost is not counted and the budget will not stop the run".to_string(),
        );
    }
    Ok(Arc::new(budget))
}

/// The sub-agents' limits: the session's options, filled in from the
/// settings (`[model_aliases]`, `token_budget`, `max_agent_depth`) where
/// the options leave the defaults.
fn subagent_limits(
    options: &crate::subagent::limits::SubagentLimits,
    settings: &KajiConfig,
) -> crate::subagent::limits::SubagentLimits {
    let mut limits = options.clone();
    for (alias, model) in &settings.model_aliases {
        limits
            .model_aliases
            .entry(alias.clone())
            .or_insert_with(|| model.clone());
    }
    if limits.token_budget.is_none() {
        limits.token_budget = settings.token_budget;
    }
    if limits.max_depth == crate::subagent::limits::DEFAULT_MAX_DEPTH
        && let Some(depth) = settings.max_agent_depth
    {
        limits.max_depth = depth;
    }
    limits
}

/// The main agent's owner name on the task list: the name it was given
/// (`kaji worker --name`, else `KAJI_AGENT_NAME`), else the session id.
fn owner_name(given: Option<&str>, session_id: &str) -> String {
    given
        .map(|n| n.trim().to_string())
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| session_id.to_string())
}

/// What is wrong with the agent files, and one warning naming the tools
/// agent types list that this session lacks.
fn agent_warnings(
    kaji_home: &Path,
    project_dir: &Path,
    home: Option<&Path>,
    tools: &kaji_tools::ToolRegistry,
) -> Vec<String> {
    let catalog = crate::subagent::types::AgentCatalog::discover(kaji_home, project_dir, home);
    let mut warnings: Vec<String> = catalog
        .warnings
        .iter()
        .map(|w| format!("agent file: {w}"))
        .collect();
    warnings.extend(catalog.unknown_tools_warning(&tools.names()));
    warnings
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
        None => std::env::current_dir().map_err(SessionError::CurrentDir)?,
    };
    let dir = dir
        .canonicalize()
        .map_err(|source| SessionError::WorkingDir {
            dir: dir.clone(),
            source,
        })?;
    if !dir.is_dir() {
        return Err(SessionError::NotADirectory(dir));
    }
    Ok(dir)
}

/// Checkpoints snapshot the whole working directory: not for `/` or the
/// home directory itself.
fn checkpoints_make_sense(dir: &Path, home: Option<&Path>) -> bool {
    dir.parent().is_some() && home != Some(dir)
}
