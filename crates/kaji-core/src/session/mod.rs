//! The Session: one conversation, and everything that lives as long as it.
//!
//! A session owns the services a conversation needs (provider, tools and
//! MCP servers, task list, runtime registry, todo, hooks, checkpoints), the
//! permission mode, the working directory, the approvals granted so far,
//! the history and the usage. It runs one main-agent [`crate::Task`] per
//! prompt — created for the prompt, dropped when it ends, never two at once
//! — and writes itself to disk as it goes ([`record`]: what a session file
//! holds). Front ends build one with [`SessionBuilder`] and hold no agent
//! state of their own. It never prints.

pub mod builder;
pub mod error;
pub mod options;
pub mod rewind;
pub mod services;
pub mod shell;
pub mod transcript;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use kaji_llm::{ModelProvider, ProviderConfig};
use kaji_protocol::{BackgroundTask, ContentBlock, Message, Role, Usage};

use crate::permissions::{PermissionDenial, PermissionMode};
use crate::rules::RuleFiles;
use crate::task::{AbortHandle, Task, TaskOutcome};
use services::{SessionServices, TaskSpec, ToolGrant};

pub use crate::storage::persist::{Restored, RestoredState, ResumeFrom, SessionFiles};
use crate::storage::record::SessionRecord;
use crate::storage::recorder::Recorder;
pub use builder::SessionBuilder;
pub use error::SessionError;
pub use options::{CustomPrompt, FrontendTools, SessionOptions};
pub use rewind::UserPrompt;
pub use shell::ShellOutcome;

/// What a prompt may carry besides its text ([`Session::submit_with_options`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PromptOptions {
    /// Blocks sent after the prompt's text (images).
    pub attachments: Vec<ContentBlock>,
    /// A model (or an alias of `[model_aliases]`) for this prompt only.
    pub model: Option<String>,
    /// Rules (Claude Code syntax: `Bash(git add:*)`) that allow without
    /// asking while this prompt runs: a custom command's `allowed-tools`.
    pub allow: Vec<String>,
    /// Where `allow` comes from (the command's file); `None`: `allow` is
    /// not applied.
    pub allow_source: Option<kaji_policy::RuleSource>,
}

/// The conversation's state between prompts.
#[derive(Debug, Default)]
pub(crate) struct Conversation {
    history: Vec<Message>,
    mode: PermissionMode,
    mode_before_plan: PermissionMode,
    /// The working directory now (a worktree, maybe).
    cwd: PathBuf,
    usage: Usage,
    turns: u32,
    /// For the first prompt after a resume: the notice the model gets.
    resume_notice: Option<String>,
    approvals: Vec<String>,
    /// What SessionStart hooks said, for the next prompt.
    session_context: Vec<String>,
    /// The model chosen with `--model` or `/model` (also when a resume
    /// restored it); `None`: the settings' model.
    pub(crate) model: Option<String>,
}

impl Conversation {
    pub(crate) fn new(history: Vec<Message>, mode: PermissionMode, cwd: PathBuf) -> Self {
        Self {
            history,
            mode,
            mode_before_plan: mode,
            cwd,
            ..Self::default()
        }
    }

    pub(crate) fn restored(r: &Restored, mode: PermissionMode, cwd: PathBuf) -> Self {
        Self {
            history: merge_user_turns(r.state.history.clone()),
            mode,
            mode_before_plan: mode,
            cwd: cwd.clone(),
            usage: r.state.usage,
            turns: r.state.turns,
            resume_notice: Some(resumption_notice(&r.state, &cwd)),
            approvals: r.state.approvals.clone(),
            session_context: Vec::new(),
            model: None,
        }
    }
}

/// One conversation. Shared as `Arc<Session>` between a front end's loop
/// (which aborts) and the prompt it runs.
pub struct Session {
    id: String,
    /// Shared by every Task, sub-agent and tool call of the session.
    services: Arc<SessionServices>,
    state: Mutex<Conversation>,
    recorder: Recorder,
    files: Option<SessionFiles>,
    busy: AtomicBool,
    running: Mutex<Option<AbortHandle>>,
    /// The provider requests go to now and its reasoning level
    /// (`/reasoning` replaces both).
    live: Mutex<(Arc<dyn ModelProvider>, kaji_llm::Reasoning)>,
    /// SessionEnd has run.
    ended: AtomicBool,
    /// The task-start checkpoints of the prompts this process ran, by the
    /// number of the user message each prompt is ([`rewind`]).
    start_slots: Mutex<Vec<(usize, rewind::CheckpointSlot)>>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("id", &self.id)
            .field("project_dir", &self.services.project_dir)
            .finish_non_exhaustive()
    }
}

impl Session {
    pub(crate) fn assemble(
        services: SessionServices,
        provider: Arc<dyn ModelProvider>,
        conversation: Conversation,
        files: Option<SessionFiles>,
    ) -> Arc<Self> {
        {
            let mut a = services.approvals.lock().unwrap_or_else(|e| e.into_inner());
            for rule in &conversation.approvals {
                a.restore(rule);
            }
        }
        let recorder = files
            .as_ref()
            .map(|f| f.recorder.clone())
            .unwrap_or_else(Recorder::disabled);
        recorder.record(SessionRecord::TaskList {
            id: services.list_id().to_string(),
        });
        if let Some(model) = &conversation.model {
            recorder.record(SessionRecord::Model {
                model: model.clone(),
            });
        }
        recorder.record_synced(SessionRecord::Mode {
            mode: conversation.mode.as_str().to_string(),
        });
        let live = Mutex::new((provider, services.provider_config.reasoning));
        Arc::new(Self {
            live,
            ended: AtomicBool::new(false),
            id: services.session_id.clone(),
            services: Arc::new(services),
            state: Mutex::new(conversation),
            recorder,
            files,
            busy: AtomicBool::new(false),
            running: Mutex::new(None),
            start_slots: Mutex::new(Vec::new()),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Conversation> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The session id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The names of the tools the main agent gets (built-in, skills, MCP).
    pub fn tool_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .services
            .tools
            .names()
            .into_iter()
            .map(str::to_string)
            .collect();
        if let Some(mcp) = &self.services.mcp {
            names.extend(mcp.tools().iter().map(|t| t.name().to_string()));
        }
        names
    }

    /// The provider's configuration (kind, model, base URL).
    pub fn provider_config(&self) -> &ProviderConfig {
        &self.services.provider_config
    }

    /// The model chosen for this conversation with `--model` or `/model`
    /// (kept across a resume); `None` when it runs the settings' model.
    /// A fork goes on with it.
    pub fn chosen_model(&self) -> Option<String> {
        self.lock().model.clone()
    }

    /// The main model's context window and prices (`[models]` settings,
    /// else kaji's table).
    pub fn model_info(&self) -> kaji_llm::pricing::ModelInfo {
        kaji_llm::pricing::model_info(&self.services.provider_config.model, &self.services.models)
    }

    /// How hard the model is asked to think now (`reasoning`,
    /// `--reasoning`, `/reasoning`).
    pub fn reasoning(&self) -> kaji_llm::Reasoning {
        self.live.lock().unwrap_or_else(|e| e.into_inner()).1
    }

    /// Changes the reasoning level from the next prompt on (`/reasoning`):
    /// the provider is rebuilt with it.
    pub fn set_reasoning(&self, level: kaji_llm::Reasoning) -> Result<(), SessionError> {
        let mut config = self.services.provider_config.clone();
        config.reasoning = level;
        let provider = kaji_llm::build_provider(&config)?;
        *self.live.lock().unwrap_or_else(|e| e.into_inner()) = (provider, level);
        Ok(())
    }

    fn provider(&self) -> Arc<dyn ModelProvider> {
        Arc::clone(&self.live.lock().unwrap_or_else(|e| e.into_inner()).0)
    }

    /// A payload for the session's own hooks (SessionStart, SessionEnd).
    fn session_hook_payload(&self) -> crate::hooks::HookPayload {
        let (cwd, mode) = {
            let st = self.lock();
            (st.cwd.clone(), st.mode)
        };
        crate::hooks::HookPayload::task(String::new(), cwd, mode)
            .with_session(self.id.clone(), self.session_file().map(Path::to_path_buf))
    }

    /// Runs the SessionStart hooks (`source`: `startup` or `resume`); their
    /// context goes before the next prompt. Returns their warnings.
    pub(crate) async fn session_start(&self, source: &str) -> Vec<String> {
        use crate::hooks::HookEvent;
        let Some(hooks) = self
            .services
            .hooks
            .as_ref()
            .filter(|h| h.has_hooks(HookEvent::SessionStart))
        else {
            return Vec::new();
        };
        let payload = self.session_hook_payload().with_field("source", source);
        let outcome = hooks
            .run(
                HookEvent::SessionStart,
                payload,
                &tokio_util::sync::CancellationToken::new(),
            )
            .await;
        self.lock().session_context.extend(outcome.context);
        outcome
            .warnings
            .into_iter()
            .map(|w| format!("hook warning: {w}"))
            .collect()
    }

    /// Runs the SessionEnd hooks once (`reason: "exit"`).
    async fn session_end(&self) {
        use crate::hooks::HookEvent;
        if self.ended.swap(true, Ordering::SeqCst) {
            return;
        }
        let Some(hooks) = self
            .services
            .hooks
            .as_ref()
            .filter(|h| h.has_hooks(HookEvent::SessionEnd))
        else {
            return;
        };
        let payload = self.session_hook_payload().with_field("reason", "exit");
        hooks
            .run(
                HookEvent::SessionEnd,
                payload,
                &tokio_util::sync::CancellationToken::new(),
            )
            .await;
    }

    /// The user's checkout, where the session started.
    pub fn project_dir(&self) -> &Path {
        &self.services.project_dir
    }

    /// The working directory now (a worktree, maybe).
    pub fn cwd(&self) -> PathBuf {
        self.lock().cwd.clone()
    }

    /// The permission mode now.
    pub fn permission_mode(&self) -> PermissionMode {
        self.lock().mode
    }

    /// The sandbox a command of the main agent runs in under `mode`: the
    /// one that mode gets, `Off` where the kernel cannot confine it.
    pub fn sandbox_mode_for(&self, mode: PermissionMode) -> kaji_sandbox::SandboxMode {
        self.services
            .approvals
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .sandbox
            .mode_for(mode)
    }

    /// The conversation so far.
    pub fn history(&self) -> Vec<Message> {
        self.lock().history.clone()
    }

    /// Tokens used so far, over every prompt, sub-agents included.
    pub fn usage(&self) -> Usage {
        let mut usage = self.lock().usage;
        usage.add(&self.subagent_usage());
        usage
    }

    /// Tokens the session's sub-agents used so far (part of
    /// [`Session::usage`]).
    pub fn subagent_usage(&self) -> Usage {
        *self
            .services
            .subagent_usage
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Model turns so far, over every prompt.
    pub fn turns(&self) -> u32 {
        self.lock().turns
    }

    /// The task list's id.
    pub fn task_list_id(&self) -> &str {
        self.services.list_id()
    }

    /// The session's task list (the file store or PostgreSQL).
    pub fn task_list(&self) -> &kaji_tasks::list::TaskList {
        &self.services.task_list
    }

    /// Sends the whole task list to the front end (a `task_list` say)
    /// whenever it changes anywhere — in this process, another process, or
    /// on a database, another machine (LISTEN/NOTIFY; polling every `poll`
    /// where LISTEN is unavailable, and on files) — until `cancel`. For
    /// the UI's task panel. It never changes the list.
    pub fn watch_task_list(
        &self,
        poll: std::time::Duration,
        cancel: tokio_util::sync::CancellationToken,
    ) -> tokio::task::JoinHandle<()> {
        let list = self.services.task_list.clone();
        let emitter = crate::emitter::Emitter::new(
            Arc::clone(&self.services.frontend),
            Arc::clone(&self.services.message_ids),
            &self.id,
            "task-list",
            "main",
        );
        tokio::spawn(async move {
            let mut watcher = list.watch(poll).await;
            loop {
                tokio::select! {
                    () = cancel.cancelled() => return,
                    () = watcher.changed() => {}
                }
                if let Ok(snapshot) = list.list().await {
                    let update = kaji_tools::task_list_update(&snapshot);
                    crate::executor::say_update(&emitter, &update);
                }
            }
        })
    }

    /// The session file, when the session is saved.
    pub fn session_file(&self) -> Option<&Path> {
        self.files.as_ref().map(|f| f.path.as_path())
    }

    /// Whether the conversation was loaded from disk and its first prompt
    /// has not run yet.
    pub fn is_resuming(&self) -> bool {
        self.lock().resume_notice.is_some()
    }

    /// Starts the next prompt as a fresh one, not as the continuation of a
    /// resumed session (no resumption notice, no TaskResume hook): for a
    /// front end that reopened a session that had no prompt yet.
    pub fn forget_resumption(&self) {
        self.lock().resume_notice = None;
    }

    /// The calls denied so far because nobody could approve them
    /// (headless sessions: `kaji exec`).
    pub fn permission_denials(&self) -> Vec<PermissionDenial> {
        self.services
            .approvals
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .denials()
            .to_vec()
    }

    /// The MCP servers, if any are configured.
    pub fn mcp(&self) -> Option<&kaji_mcp::McpManager> {
        self.services.mcp.as_ref()
    }

    /// Runs one prompt as a new main-agent Task that continues the
    /// conversation, and keeps what it changed. Refused while another
    /// prompt runs.
    pub async fn submit(&self, prompt: String) -> Result<TaskOutcome, SessionError> {
        self.submit_as(crate::task::new_task_id(), prompt).await
    }

    /// As [`Session::submit`], with the Task's id chosen by the caller
    /// (who may announce it before the Task starts).
    pub async fn submit_as(
        &self,
        task_id: String,
        prompt: String,
    ) -> Result<TaskOutcome, SessionError> {
        self.submit_with(task_id, prompt, Vec::new()).await
    }

    /// As [`Session::submit`], with blocks the user attached after the
    /// prompt's text (images: `ContentBlock::Image`).
    pub async fn submit_with_attachments(
        &self,
        prompt: String,
        attachments: Vec<ContentBlock>,
    ) -> Result<TaskOutcome, SessionError> {
        self.submit_with(crate::task::new_task_id(), prompt, attachments)
            .await
    }

    /// As [`Session::submit_as`], with blocks the user attached (images,
    /// [`kaji_protocol::ContentBlock::Image`]) sent after the prompt.
    pub async fn submit_with(
        &self,
        task_id: String,
        prompt: String,
        attachments: Vec<ContentBlock>,
    ) -> Result<TaskOutcome, SessionError> {
        let options = PromptOptions {
            attachments,
            ..PromptOptions::default()
        };
        self.submit_with_options(task_id, prompt, options).await
    }

    /// As [`Session::submit_as`], with what a custom command adds to its
    /// prompt: attachments, a model for this prompt only, and rules that
    /// allow without asking while it runs. A rule that does not parse is
    /// [`SessionError::AllowedTools`], and nothing runs.
    pub async fn submit_with_options(
        &self,
        task_id: String,
        prompt: String,
        options: PromptOptions,
    ) -> Result<TaskOutcome, SessionError> {
        let source = options.allow_source.clone();
        if let Some(source) = &source {
            self.services
                .approvals
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .allow_from(&options.allow, source.clone())
                .map_err(SessionError::AllowedTools)?;
        }
        let outcome = self.run_prompt(task_id, prompt, options).await;
        if let Some(source) = &source {
            self.services
                .approvals
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .drop_source(source);
        }
        outcome
    }

    async fn run_prompt(
        &self,
        task_id: String,
        prompt: String,
        options: PromptOptions,
    ) -> Result<TaskOutcome, SessionError> {
        if self.busy.swap(true, Ordering::SeqCst) {
            return Err(SessionError::Busy);
        }
        let index = transcript::user_texts(&self.history()).len();
        let slot = self.new_start_slot(index);
        let mut task = self.new_task(task_id, Some(slot));
        if let Some(model) = &options.model {
            task.set_model(self.model_for(model));
        }
        *self.running.lock().unwrap_or_else(|e| e.into_inner()) = Some(task.abort_handle());
        if let Some(files) = &self.files {
            files.prompt_started(&prompt);
        }
        let (outcome, final_event) = task.run_held(prompt, options.attachments).await;
        if let Some(files) = &self.files {
            files.prompt_ended(outcome.status.as_str(), outcome.turns, &outcome.usage);
        }
        *self.running.lock().unwrap_or_else(|e| e.into_inner()) = None;
        {
            let mut st = self.lock();
            st.history = outcome.history.clone();
            st.mode = outcome.mode;
            st.mode_before_plan = outcome.mode_before_plan;
            st.cwd = outcome.cwd.clone();
            st.usage.add(&outcome.usage);
            st.turns += outcome.turns;
        }
        self.busy.store(false, Ordering::SeqCst);
        // Last: a front end that reacts to the task's end finds the
        // session holding it, and free for the next prompt.
        final_event.send();
        Ok(outcome)
    }

    /// What a model name or alias (`haiku`, from `[model_aliases]`) means.
    fn model_for(&self, name: &str) -> String {
        match self.services.limits.subagents.model_aliases.get(name) {
            Some(model) => model.clone(),
            None if matches!(name, "inherit" | "") => self.services.provider_config.model.clone(),
            None => name.to_string(),
        }
    }

    /// The Task for the next prompt: the session's services, the
    /// conversation as it stands, the rule files as they are now.
    fn new_task(&self, task_id: String, start_checkpoint: Option<rewind::CheckpointSlot>) -> Task {
        let spec = self.main_spec(task_id, start_checkpoint);
        self.services.task(spec)
    }

    /// The spec of the main agent's Task for the next prompt (with the
    /// spawner of its sub-agents).
    fn main_spec(
        &self,
        task_id: String,
        start_checkpoint: Option<rewind::CheckpointSlot>,
    ) -> TaskSpec {
        let s = &self.services;
        let (history, mode, mode_before_plan, cwd, resumed, session_context) = {
            let mut st = self.lock();
            (
                st.history.clone(),
                st.mode,
                st.mode_before_plan,
                st.cwd.clone(),
                st.resume_notice.take(),
                std::mem::take(&mut st.session_context),
            )
        };
        // Rule files are read for every prompt: an edited AGENTS.md applies
        // from the next one.
        let rules = RuleFiles::discover_with_home(&s.kaji_home, &cwd, s.user_home.as_deref());
        let mut system_sections: Vec<String> = rules.to_system_section().into_iter().collect();
        if !s.skills_section.is_empty() {
            system_sections.push(s.skills_section.clone());
        }
        // Every agent type the model may delegate to, listed as Claude
        // Code's Agent tool lists them (read for every prompt too).
        let catalog = Arc::new(self.agent_catalog());
        system_sections.push(catalog.prompt_section());
        if let Some(append) = &s.system_prompt.append {
            system_sections.push(append.clone());
        }
        let mut spec = TaskSpec {
            task_id: Some(task_id),
            session_id: self.id.clone(),
            agent: "main".into(),
            owner: s.owner.clone(),
            role: s.role,
            provider: self.provider(),
            model: s.provider_config.model.clone(),
            history,
            mode,
            mode_before_plan: Some(mode_before_plan),
            cwd,
            tools: ToolGrant::All,
            max_turns: s.max_turns,
            on_text_reply: s.on_text_reply,
            system_sections,
            recorder: self.recorder.clone(),
            transcript_path: self.session_file().map(Path::to_path_buf),
            todo_reminders: true,
            live_output: s.live_output,
            resumed,
            session_context,
            start_checkpoint,
            frontend: Arc::clone(&s.frontend),
            agents: None,
        };
        spec.agents = Some(Arc::new(self.subagent_spawner(&spec, catalog)));
        spec
    }

    /// The session's services and the main agent's next spec (for the
    /// settings walk test).
    #[cfg(test)]
    pub(crate) fn services_and_main_spec(&self) -> (Arc<SessionServices>, TaskSpec) {
        let spec = self.main_spec(crate::task::new_task_id(), None);
        (Arc::clone(&self.services), spec)
    }

    /// `/compact [instructions]`: compacts the conversation now (the
    /// model writes a summary). Refused while a prompt runs.
    pub async fn compact(&self, instructions: Option<String>) -> Result<(), SessionError> {
        if self.busy.swap(true, Ordering::SeqCst) {
            return Err(SessionError::Busy);
        }
        let task = self.new_task(crate::task::new_task_id(), None);
        let result = task.compact_now(instructions).await;
        if let Ok(outcome) = &result {
            self.lock().history = outcome.history.clone();
        }
        self.busy.store(false, Ordering::SeqCst);
        result.map(|_| ()).map_err(SessionError::from)
    }

    /// The spawner of the main agent's sub-agents for one prompt: the
    /// session's services, the agent types as the files say now.
    fn subagent_spawner(
        &self,
        parent: &TaskSpec,
        catalog: Arc<crate::subagent::types::AgentCatalog>,
    ) -> crate::subagent::SubagentSpawner {
        crate::subagent::SubagentSpawner::new(
            Arc::clone(&self.services),
            parent.clone(),
            catalog,
            self.files.is_some(),
        )
    }

    /// The agent types as the files say now (read for every prompt, so an
    /// edited agent file applies from the next one), and the program's.
    pub fn agent_catalog(&self) -> crate::subagent::types::AgentCatalog {
        let s = &self.services;
        crate::subagent::types::AgentCatalog::discover(
            &s.kaji_home,
            &s.project_dir,
            s.user_home.as_deref(),
        )
        .with_program_agents(&s.program_agents)
    }

    /// Aborts the running prompt, if any: its model request, its
    /// foreground command and its hooks. Background work goes on.
    pub fn abort(&self) {
        if let Some(handle) = self
            .running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
        {
            handle.abort();
        }
    }

    /// Whether a prompt is running.
    pub fn is_busy(&self) -> bool {
        self.busy.load(Ordering::SeqCst)
    }

    /// Forgets the conversation (`/clear`); the session file records it.
    pub fn clear(&self) {
        self.lock().history.clear();
        self.recorder.record_synced(SessionRecord::HistoryReplaced {
            history: Vec::new(),
            reason: "clear".into(),
            tokens_before: None,
            tokens_after: None,
        });
    }

    /// Changes the permission mode for the next prompt.
    pub fn set_permission_mode(&self, mode: PermissionMode) {
        {
            let mut st = self.lock();
            st.mode = mode;
            st.mode_before_plan = mode;
        }
        self.recorder.record_synced(SessionRecord::Mode {
            mode: mode.as_str().to_string(),
        });
    }

    /// The session's runtime task registry (background shells and agents).
    pub fn runtime(&self) -> &Arc<kaji_tasks::RuntimeTaskRegistry> {
        &self.services.runtime
    }

    /// The background tasks (shells, agents) still running.
    pub fn background_tasks(&self) -> Vec<BackgroundTask> {
        running_background(&self.services.runtime)
    }

    /// The first error writing the session file, once.
    pub fn take_persistence_error(&self) -> Option<String> {
        self.recorder.take_error()
    }

    /// Ends the session: aborts a running prompt, stops every background
    /// task and MCP server it started, and returns the background tasks
    /// that were still running (so the front end can say they were
    /// stopped).
    pub async fn shutdown(&self) -> Vec<BackgroundTask> {
        self.abort();
        self.session_end().await;
        let stopped = self
            .services
            .runtime
            .shutdown()
            .await
            .into_iter()
            .map(|t| BackgroundTask {
                id: t.id.as_str().to_string(),
                description: t.description,
                status: t.status_before.as_str().to_string(),
            })
            .collect();
        if let Some(mcp) = &self.services.mcp {
            mcp.shutdown().await;
        }
        if let Some(lsp) = &self.services.tool_services.lsp {
            lsp.shutdown().await;
        }
        // The session's own list, never written, leaves no empty directory
        // behind (a list shared by name may be in use elsewhere: kept).
        if self.task_list_id() == self.id() {
            self.services.task_list.remove_if_empty();
        }
        self.recorder.sync();
        stopped
    }
}

fn running_background(runtime: &kaji_tasks::RuntimeTaskRegistry) -> Vec<BackgroundTask> {
    runtime
        .list()
        .into_iter()
        .filter(|t| !t.status.is_terminal())
        .map(|t| BackgroundTask {
            id: t.id.as_str().to_string(),
            description: t.description.clone(),
            status: t.status.as_str().to_string(),
        })
        .collect()
}

/// A history as the Task keeps it: a prompt that follows a finished
/// prompt's last results joins that user message.
fn merge_user_turns(history: Vec<Message>) -> Vec<Message> {
    let mut out: Vec<Message> = Vec::with_capacity(history.len());
    for message in history {
        match out.last_mut() {
            Some(last) if last.role == Role::User && message.role == Role::User => {
                last.content.extend(message.content);
            }
            _ => out.push(message),
        }
    }
    out
}

/// The model's first words after a resume (the seed's
/// "[TASK RESUMPTION]").
fn resumption_notice(state: &RestoredState, cwd: &Path) -> String {
    let ago = crate::storage::recorder::now_millis().saturating_sub(state.stopped_at) / 1000;
    let ago = match ago {
        s if s < 120 => format!("{s} seconds"),
        s if s < 7200 => format!("{} minutes", s / 60),
        s if s < 172_800 => format!("{} hours", s / 3600),
        s => format!("{} days", s / 86_400),
    };
    let interrupted = if state.last_round_interrupted {
        " Its last round was interrupted before it finished: a reply or a tool call may not have completed, and calls marked as interrupted did not return."
    } else {
        ""
    };
    format!(
        "[TASK RESUMPTION] This conversation is being resumed; it stopped {ago} ago.{interrupted} The project may have changed since then, so check the current state before relying on earlier results. The working directory is {}.",
        cwd.display()
    )
}

/// Text of a user message, for titles and transcripts.
pub fn first_text(content: &[ContentBlock]) -> Option<&str> {
    content.iter().find_map(|b| match b {
        ContentBlock::Text { text, .. } => Some(text.as_str()),
        _ => None,
    })
}
