//! Sub-agents: the core's side of the `Agent` tool.
//!
//! A [`SubagentSpawner`] runs a child [`Task`] for one `Agent` call: its
//! own history and session id (saved as a child session,
//! [`SessionKind::Subagent`], of its parent's), the tool set of its type
//! ([`types`]), a permission mode no wider than its parent's, and the
//! parent's provider, MCP servers, task list, runtime registry, approvals
//! and front end (its asks reach the user labelled with its name; its own
//! AttemptCompletion is accepted here, for its parent to judge). In the
//! foreground the call returns its result and usage; in the background it
//! is a `local_agent` runtime task whose output is its transcript, stopped
//! by `TaskStop`, and whose result reaches the parent as a notice. At a
//! budget (`maxTurns`, the token budget), on abort and on error it returns
//! what it has: a partial result naming what is unfinished. Sub-agents
//! nest up to a depth limit.
//!
//! This module must never print, decide about permissions (the child's
//! executor does) or hold a lock across an await.

pub mod limits;
mod teammate;
pub mod types;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use async_trait::async_trait;
use kaji_protocol::{
    AskKind, AskResponse, ContentBlock, Role, SessionEvent, TaskEvent, TaskStatus, Usage,
};
use kaji_tasks::runtime::{AgentEnd, AgentStart, AgentTaskHandle, RuntimeTaskType};
use kaji_tools::agent_tools::{AgentRequest, AgentSpawner};
use kaji_tools::{ToolContext, ToolError, ToolOutput, ToolRegistry};
use serde_json::json;

use crate::config::TextReply;
use crate::frontend::{AskRequest, TaskFrontend};
use crate::session::services::{ChildChanges, SessionServices, TaskSpec, ToolGrant};
use crate::storage::persist;
use crate::storage::record::SessionKind;
use crate::storage::recorder::Recorder;
use crate::task::{AbortHandle, Task, TaskOutcome};
use types::{AgentCatalog, AgentDefinition};

/// Runs sub-agents at one depth; see the module docs.
#[derive(Clone)]
pub struct SubagentSpawner {
    /// The session's services, shared by reference with every child.
    services: Arc<SessionServices>,
    /// The spec of the Task whose sub-agents this spawner runs; a child's
    /// is derived from it ([`TaskSpec::child`]).
    parent: Arc<TaskSpec>,
    /// The agent types.
    catalog: Arc<AgentCatalog>,
    /// Save each sub-agent's conversation as a child session.
    persist: bool,
    depth: u32,
}

impl std::fmt::Debug for SubagentSpawner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SubagentSpawner")
            .field("depth", &self.depth)
            .finish_non_exhaustive()
    }
}

/// Who a child Task runs as.
struct Identity {
    /// Its agent (and owner) name.
    agent: String,
    role: kaji_tools::AgentRole,
    /// Its section of the system prompt.
    system_section: String,
    /// Its first prompt.
    prompt: String,
    /// Where it works, when not where its caller works (a worktree).
    start_dir: Option<PathBuf>,
    /// What its text-only reply does.
    on_text_reply: TextReply,
}

/// One prepared sub-agent run.
struct Prepared {
    task: Task,
    frontend: Arc<SubagentFrontend>,
    agent: String,
    prompt: String,
    max_turns: Option<u32>,
    budget: Option<u64>,
}

impl SubagentSpawner {
    /// The spawner of the sub-agents of the Task of `parent` (the main
    /// agent's: depth 0). `persist`: children are saved as child sessions.
    pub(crate) fn new(
        services: Arc<SessionServices>,
        mut parent: TaskSpec,
        catalog: Arc<AgentCatalog>,
        persist: bool,
    ) -> Self {
        // A child starts with a history of its own: the parent's is not
        // kept here.
        parent.history = Vec::new();
        parent.agents = None;
        Self {
            services,
            parent: Arc::new(parent),
            catalog,
            persist,
            depth: 0,
        }
    }

    fn resolve_model(&self, def: &AgentDefinition, asked: Option<&str>) -> String {
        let wanted = asked.or(def.model.as_deref()).map(str::trim);
        let parent = &self.parent.model;
        match wanted {
            None | Some("") | Some("inherit") => parent.clone(),
            Some(name) => match self.services.limits.subagents.model_aliases.get(name) {
                Some(model) => model.clone(),
                // An alias the settings do not map keeps the parent's model
                // rather than asking the provider for a name it lacks.
                None if matches!(name, "sonnet" | "opus" | "haiku") => parent.clone(),
                None => name.to_string(),
            },
        }
    }

    /// The tools of an agent of type `def`: its `tools:` list (all when
    /// it has none) less `disallowedTools` (and the tools that write, for
    /// a read-only type), and always the finishing tool, so that it can
    /// declare its work done whatever its list says.
    fn tools_for(&self, def: &AgentDefinition) -> ToolGrant {
        let all = &self.services.tools;
        let mut tools = ToolRegistry::new();
        for name in all.names() {
            let Some(tool) = all.get(name) else {
                continue;
            };
            let listed = def
                .tools
                .as_ref()
                .is_none_or(|list| list.iter().any(|t| t == name));
            let refused = def.disallowed_tools.iter().any(|t| t == name);
            // The finishing tool is how a sub-agent hands back its result:
            // granted whatever its type's `tools:` list says.
            if tool.finishes_task()
                || (listed && !refused && (!def.read_only || tool.is_read_only()))
            {
                tools.register(Arc::clone(tool));
            }
        }
        tools.register(kaji_tools::finishing_tool());
        ToolGrant::Only {
            tools,
            mcp: def.tools.is_none() && !def.read_only,
        }
    }

    /// The agent type `request` names, once the depth limit allows
    /// another level.
    fn definition(&self, request: &AgentRequest) -> Result<&AgentDefinition, ToolError> {
        let max_depth = self.services.limits.subagents.max_depth;
        if self.depth >= max_depth {
            return Err(ToolError::Refused(format!(
                "Agent: the sub-agent depth limit ({max_depth}) is reached: this agent cannot start sub-agents; do the work yourself"
            )));
        }
        self.catalog.find(&request.subagent_type).ok_or_else(|| {
            ToolError::Refused(format!(
                "Agent: there is no agent type `{}`; the types are: {}",
                request.subagent_type,
                self.catalog.names()
            ))
        })
    }

    /// The child Task of a sub-agent call; with `isolation: "worktree"` it
    /// works in a worktree named after it.
    async fn prepare(
        &self,
        request: &AgentRequest,
        caller: &ToolContext,
    ) -> Result<Prepared, ToolError> {
        let def = self.definition(request)?;
        let child_id = persist::new_session_id();
        let short: String = child_id.chars().rev().take(6).collect();
        let agent = format!("{}-{short}", def.name);
        let start_dir = match request.isolation {
            Some(kaji_tools::agent_tools::Isolation::Worktree) => {
                Some(self.worktree_for(&agent, caller).await?)
            }
            None => None,
        };
        let section = format!(
            "# Sub-agent\nYou are the sub-agent `{agent}` (type {}), started by `{}` for: {}. Your parent sees only your final AttemptCompletion result.\n\n{}",
            def.name, caller.agent, request.description, def.system_prompt
        );
        let identity = Identity {
            agent,
            role: kaji_tools::AgentRole::Subagent,
            system_section: section,
            prompt: request.prompt.clone(),
            start_dir,
            // A sub-agent's text answer is its result (docs/configuration.md).
            on_text_reply: TextReply::Finish,
        };
        self.prepare_as(def, child_id, identity, request, caller)
    }

    /// A child Task of type `def` for `identity` (a sub-agent, or one task
    /// of a teammate).
    fn prepare_as(
        &self,
        def: &AgentDefinition,
        child_id: String,
        identity: Identity,
        request: &AgentRequest,
        caller: &ToolContext,
    ) -> Result<Prepared, ToolError> {
        let services = &self.services;
        let Identity {
            agent,
            role,
            system_section,
            prompt,
            start_dir,
            on_text_reply,
        } = identity;
        let (recorder, transcript_path) = if self.persist {
            persist::create(
                &services.kaji_home,
                &child_id,
                SessionKind::Subagent,
                Some(&caller.session_id),
                &services.project_dir,
            )
            .map(|f| (f.recorder, Some(f.path)))
            .unwrap_or_else(|_| (Recorder::disabled(), None))
        } else {
            (Recorder::disabled(), None)
        };
        let budget = def.token_budget.or(services.limits.subagents.token_budget);
        let frontend = Arc::new(SubagentFrontend {
            inner: Arc::clone(&services.frontend),
            transcript: OnceLock::new(),
            tokens: AtomicU64::new(0),
            budget,
            abort: OnceLock::new(),
            budget_hit: AtomicBool::new(false),
            tools_used: Mutex::new(Vec::new()),
            parent_call: caller.call_id.clone(),
        });
        let mut spec = self.parent.child(ChildChanges {
            session_id: child_id,
            agent: agent.clone(),
            role,
            model: self.resolve_model(def, request.model.as_deref()),
            mode: def.permission_mode,
            tools: self.tools_for(def),
            max_turns: def.max_turns,
            on_text_reply,
            system_section,
            cwd: Some(start_dir.unwrap_or_else(|| caller.cwd.clone())),
            recorder,
            transcript_path,
            frontend: Arc::clone(&frontend) as Arc<dyn TaskFrontend>,
            agents: None,
        });
        spec.agents = Some(Arc::new(Self {
            services: Arc::clone(&self.services),
            parent: Arc::new(spec.clone()),
            catalog: Arc::clone(&self.catalog),
            persist: self.persist,
            depth: self.depth + 1,
        }));
        let task = services.task(spec);
        let _ = frontend.abort.set(task.abort_handle());
        Ok(Prepared {
            task,
            frontend,
            agent,
            prompt,
            max_turns: def.max_turns,
            budget,
        })
    }

    fn add_usage(&self, usage: &Usage) {
        self.services.add_subagent_usage(usage);
    }
}

#[async_trait]
impl AgentSpawner for SubagentSpawner {
    async fn spawn(
        &self,
        request: AgentRequest,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        if request.name.is_some() {
            return self.spawn_teammate(request, ctx).await;
        }
        let prepared = self.prepare(&request, ctx).await?;
        if request.in_background() {
            return self.spawn_background(prepared, &request, ctx);
        }
        let abort = prepared.task.abort_handle();
        let cancel = ctx.cancel.clone();
        let watcher = tokio::spawn(async move {
            cancel.cancelled().await;
            abort.abort();
        });
        let Prepared {
            task,
            frontend,
            agent,
            prompt,
            max_turns,
            budget,
        } = prepared;
        let (outcome, final_event) = task.run_held(prompt, Vec::new()).await;
        watcher.abort();
        self.add_usage(&outcome.usage);
        self.services.runtime.stop_owned_by(&agent).await;
        final_event.send();
        let report = Report::new(&outcome, &frontend, max_turns, budget);
        Ok(ToolOutput {
            content: report.text(&agent),
            data: Some(json!({
                "agent": agent,
                "status": outcome.status.as_str(),
                "complete": report.complete,
                "turns": outcome.turns,
                "usage": {
                    "input_tokens": outcome.usage.input_tokens,
                    "output_tokens": outcome.usage.output_tokens,
                },
            })),
            ..ToolOutput::default()
        })
    }

    fn describe_types(&self) -> String {
        self.catalog
            .agents
            .iter()
            .map(|a| format!("{}: {}", a.name, a.description))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl SubagentSpawner {
    fn spawn_background(
        &self,
        prepared: Prepared,
        request: &AgentRequest,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let runtime = Arc::clone(&self.services.runtime);
        let handle = runtime
            .start_agent(AgentStart {
                task_type: RuntimeTaskType::LocalAgent,
                description: request.description.clone(),
                agent: prepared.agent.clone(),
                owner: ctx.agent.clone(),
            })
            .map_err(|e| ToolError::Refused(format!("Agent: {e}")))?;
        let handle = Arc::new(handle);
        let _ = prepared.frontend.transcript.set(Arc::clone(&handle));
        let id = handle.id().clone();
        let info = handle.info();
        let spawner = self.clone();
        tokio::spawn(async move {
            let Prepared {
                task,
                frontend,
                agent,
                prompt,
                max_turns,
                budget,
            } = prepared;
            let abort = task.abort_handle();
            let stop = handle.stop_token();
            let watcher = tokio::spawn(async move {
                stop.cancelled().await;
                abort.abort();
            });
            handle.append(&format!("[{agent}] prompt: {prompt}\n"));
            let (outcome, final_event) = task.run_held(prompt, Vec::new()).await;
            watcher.abort();
            spawner.add_usage(&outcome.usage);
            runtime.stop_owned_by(&agent).await;
            final_event.send();
            let report = Report::new(&outcome, &frontend, max_turns, budget);
            let text = report.text(&agent);
            handle.append(&format!("\n{text}\n"));
            handle.set_result(&text);
            drop(frontend);
            let end = if report.complete {
                AgentEnd::Completed
            } else {
                AgentEnd::Failed(report.unfinished.clone())
            };
            if let Ok(handle) = Arc::try_unwrap(handle) {
                handle.finish(end);
            }
        });
        Ok(ToolOutput {
            content: format!(
                "Started sub-agent {} in the background as runtime task {id} ({}). Its result reaches you as a notice when it ends; read its transcript so far with TaskOutput {{\"task_id\": \"{id}\", \"block\": false}}, stop it with TaskStop.",
                info.agent.as_deref().unwrap_or(""),
                info.description
            ),
            data: Some(json!({
                "task_id": id.as_str(),
                "agent": info.agent,
                "output_path": info.output_path,
            })),
            ..ToolOutput::default()
        })
    }
}

/// What a sub-agent's run amounts to.
struct Report {
    complete: bool,
    result: String,
    unfinished: String,
    turns: u32,
    usage: Usage,
    tools_used: Vec<String>,
}

impl Report {
    fn new(
        outcome: &TaskOutcome,
        frontend: &SubagentFrontend,
        max_turns: Option<u32>,
        budget: Option<u64>,
    ) -> Self {
        let complete = outcome.status == TaskStatus::Completed;
        let result = outcome
            .result
            .clone()
            .filter(|_| complete)
            .or_else(|| last_assistant_text(outcome))
            .unwrap_or_default();
        let unfinished = if frontend.budget_hit.load(Ordering::SeqCst) {
            format!(
                "it reached its token budget ({} tokens) before finishing",
                budget.unwrap_or(0)
            )
        } else {
            match outcome.status {
                TaskStatus::Completed => String::new(),
                TaskStatus::MaxTurns => format!(
                    "it reached its turn budget (maxTurns {}) before finishing",
                    max_turns
                        .map(|n| n.to_string())
                        .unwrap_or_else(|| "?".into())
                ),
                TaskStatus::Aborted => "it was stopped before finishing".to_string(),
                TaskStatus::MistakeLimit => {
                    "it made too many mistakes in a row and gave up".to_string()
                }
                TaskStatus::Failed => format!(
                    "it failed: {}",
                    outcome.result.clone().unwrap_or_else(|| "an error".into())
                ),
            }
        };
        Self {
            complete,
            result,
            unfinished,
            turns: outcome.turns,
            usage: outcome.usage,
            tools_used: frontend
                .tools_used
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
        }
    }

    fn text(&self, agent: &str) -> String {
        let usage = format!(
            "({} turns, {} input and {} output tokens)",
            self.turns, self.usage.input_tokens, self.usage.output_tokens
        );
        if self.complete {
            return format!(
                "Sub-agent {agent} finished {usage}. Its result:\n{}",
                self.result
            );
        }
        let mut out = format!(
            "Sub-agent {agent} did NOT finish: {} {usage}. The task is unfinished; this is a partial result.\n",
            self.unfinished
        );
        if !self.tools_used.is_empty() {
            out.push_str(&format!(
                "Tool calls it made: {}.\n",
                self.tools_used.join(", ")
            ));
        }
        if self.result.trim().is_empty() {
            out.push_str("It had reported nothing yet.");
        } else {
            out.push_str(&format!("Its last words:\n{}", self.result));
        }
        out
    }
}

fn last_assistant_text(outcome: &TaskOutcome) -> Option<String> {
    outcome
        .history
        .iter()
        .rev()
        .filter(|m| m.role == Role::Assistant)
        .find_map(|m| {
            let text: Vec<&str> = m
                .content
                .iter()
                .filter_map(|b| match b {
                    ContentBlock::Text { text, .. } => Some(text.as_str()),
                    _ => None,
                })
                .collect();
            (!text.is_empty()).then(|| text.join("\n"))
        })
}

/// The front end of a sub-agent: passes everything on to the parent's,
/// writes the transcript of a background agent, counts tokens against the
/// budget, and accepts the agent's own AttemptCompletion.
struct SubagentFrontend {
    inner: Arc<dyn TaskFrontend>,
    transcript: OnceLock<Arc<AgentTaskHandle>>,
    tokens: AtomicU64,
    budget: Option<u64>,
    abort: OnceLock<AbortHandle>,
    budget_hit: AtomicBool,
    tools_used: Mutex<Vec<String>>,
    /// The `Agent` call that started this sub-agent: stamped on its events
    /// (a grandchild's keep their own).
    parent_call: Option<String>,
}

impl SubagentFrontend {
    fn note(&self, text: &str) {
        if let Some(handle) = self.transcript.get() {
            handle.append(text);
        }
    }

    fn activity(&self, text: &str) {
        if let Some(handle) = self.transcript.get() {
            handle.set_activity(text);
        }
    }
}

#[async_trait]
impl TaskFrontend for SubagentFrontend {
    fn emit(&self, event: SessionEvent) {
        match &event.event {
            TaskEvent::Say {
                text,
                partial: false,
                kind,
                ..
            } => self.note(&format!("[{}] {:?}: {text}\n", event.agent, kind)),
            TaskEvent::ToolUse { name, input, .. } => {
                self.tools_used
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(name.clone());
                self.activity(name);
                self.note(&format!("[{}] tool {name} {input}\n", event.agent));
            }
            TaskEvent::ToolResult {
                name,
                output,
                is_error,
                ..
            } => {
                self.activity("thinking");
                let first: String = output.chars().take(400).collect();
                let label = if *is_error { "error" } else { "result" };
                self.note(&format!("[{}] {name} {label}: {first}\n", event.agent));
            }
            TaskEvent::Usage(report) => {
                let used = report.usage.input_tokens + report.usage.output_tokens;
                let total = self.tokens.fetch_add(used, Ordering::SeqCst) + used;
                if let Some(handle) = self.transcript.get() {
                    handle.add_tokens(used);
                }
                if let Some(budget) = self.budget
                    && total >= budget
                    && !self.budget_hit.swap(true, Ordering::SeqCst)
                    && let Some(abort) = self.abort.get()
                {
                    abort.abort();
                }
            }
            _ => {}
        }
        let mut event = event;
        if event.parent_tool_use_id.is_none() {
            event.parent_tool_use_id = self.parent_call.clone();
        }
        self.inner.emit(event);
    }

    async fn answer(&self, ask: &AskRequest) -> AskResponse {
        if ask.kind == AskKind::CompletionResult {
            // The parent judges the result, not the user.
            return AskResponse::Approve;
        }
        self.activity("waiting for an answer");
        self.inner.answer(ask).await
    }
}
