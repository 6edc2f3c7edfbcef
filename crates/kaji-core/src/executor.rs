//! The tool executor: everything between "the model called a tool" and "this
//! is the result the model gets back".
//!
//! It looks the tool up, checks the arguments, decides permissions (asking
//! the user when needed), waits for the initial checkpoint when the tool
//! writes, runs the tool under the task's cancellation, and carries out the
//! tool's [`ToolControl`]. The Task itself handles no concrete tool; the
//! executor handles no conversation state beyond what it is handed.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use futures::future::{BoxFuture, FutureExt, Shared};

use kaji_protocol::{AskKind, AskPayload, AskResponse, SayKind, SayPayload, StateUpdate};
use kaji_tools::{
    Tool, ToolAccess, ToolContext, ToolControl, ToolError, ToolOutput, ToolRegistry, ToolView,
};
use serde_json::{Value, json};

use crate::config::DEFAULT_TOOL_RESULT_MAX_CHARS;
use crate::emitter::Emitter;
use crate::storage::record::SessionRecord;
use crate::storage::recorder::Recorder;
use tokio::sync::watch;

use crate::hooks::{HookEvent, HookPayload, HookRunner, PermissionDecision};
use crate::parser::ToolCall;
use crate::permissions::{
    Decision, PermissionDenial, PermissionMode, SharedApprovals, decide, requests_for,
};
use kaji_mcp::McpManager;

mod outcome;
pub use outcome::{Effect, Ran, ToolRun};

/// The seed's initial-checkpoint gate: closed while the first checkpoint of
/// the task is being taken; tools that are not read-only wait for it to
/// open, read-only tools run at once. It also holds the checkpoint of the
/// last write while that is written ([`defer`](Self::defer)). Cheap to
/// clone.
#[derive(Clone)]
pub struct CheckpointGate {
    open: Arc<watch::Sender<bool>>,
    waiting: Arc<watch::Sender<usize>>,
    /// What writes that did not wait saved for the initial checkpoint.
    preimages: crate::checkpoints::PreImages,
    /// The checkpoint after the last write, taken while the task goes on;
    /// done (and said) when awaited to the end.
    deferred: Arc<Mutex<Option<Shared<BoxFuture<'static, ()>>>>>,
}

impl std::fmt::Debug for CheckpointGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CheckpointGate")
            .field("open", &self.is_open())
            .finish_non_exhaustive()
    }
}

impl Default for CheckpointGate {
    fn default() -> Self {
        Self::new()
    }
}

impl CheckpointGate {
    /// A closed gate.
    pub fn new() -> Self {
        Self {
            open: Arc::new(watch::channel(false).0),
            waiting: Arc::new(watch::channel(0).0),
            preimages: crate::checkpoints::PreImages::default(),
            deferred: Arc::default(),
        }
    }

    /// Leaves `work` (a checkpoint being written, and its report) to be
    /// finished by the next [`settle`](Self::settle): the next checkpoint,
    /// or the task's end. The caller settles what was deferred before.
    pub fn defer(&self, work: BoxFuture<'static, ()>) {
        *self.deferred.lock().unwrap_or_else(|e| e.into_inner()) = Some(work.shared());
    }

    /// Waits until the deferred work, if any, is done. Where it is awaited
    /// is where it reports, so its events come at the same place on
    /// every run.
    pub async fn settle(&self) {
        let work = self
            .deferred
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if let Some(work) = work {
            work.await;
        }
    }

    /// Where writes that do not wait save the files they change, for the
    /// initial checkpoint (see [`crate::checkpoints::PreImages`]).
    pub fn preimages(&self) -> &crate::checkpoints::PreImages {
        &self.preimages
    }

    /// Waits until the gate opens, `cancel` fires or `patience` passes;
    /// whether it is open.
    pub async fn wait_at_most(
        &self,
        patience: std::time::Duration,
        cancel: &tokio_util::sync::CancellationToken,
    ) -> bool {
        if self.is_open() {
            return true;
        }
        self.waiting.send_modify(|n| *n += 1);
        let mut open = self.open.subscribe();
        tokio::select! {
            _ = open.wait_for(|o| *o) => {}
            _ = cancel.cancelled() => {}
            () = tokio::time::sleep(patience) => {}
        }
        self.waiting.send_modify(|n| *n = n.saturating_sub(1));
        self.is_open()
    }

    /// Opens the gate for good.
    pub fn open(&self) {
        self.open.send_replace(true);
    }

    /// Whether it is open.
    pub fn is_open(&self) -> bool {
        *self.open.borrow()
    }

    /// Waits until the gate opens or `cancel` fires.
    pub async fn wait(&self, cancel: &tokio_util::sync::CancellationToken) {
        if self.is_open() {
            return;
        }
        self.waiting.send_modify(|n| *n += 1);
        let mut open = self.open.subscribe();
        tokio::select! {
            _ = open.wait_for(|o| *o) => {}
            _ = cancel.cancelled() => {}
        }
        self.waiting.send_modify(|n| *n = n.saturating_sub(1));
    }

    /// Waits until at least `n` calls are waiting at the gate (for tests
    /// and front ends that show "waiting for the checkpoint").
    pub async fn wait_for_waiters(&self, n: usize) {
        let mut waiting = self.waiting.subscribe();
        let _ = waiting.wait_for(|w| *w >= n).await;
    }
}

/// How long a cancelled tool may take to clean up before it is dropped.
const CANCEL_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

/// Where a call runs: the task's state at that moment.
pub(crate) struct CallEnv<'a> {
    /// The permission mode.
    pub mode: PermissionMode,
    /// The mode to return to when a plan is approved.
    pub mode_before_plan: PermissionMode,
    /// The tool context (working directory, cancellation, stores).
    pub ctx: &'a ToolContext,
    /// Where events and asks go.
    pub emitter: &'a Emitter,
    /// The task's id (for hooks).
    pub task_id: &'a str,
    /// `$KAJI_HOME` (saved plans, spilled results).
    pub kaji_home: &'a Path,
    /// Where approvals granted for the session are written.
    pub recorder: &'a Recorder,
    /// The session file (hook payloads' `transcript_path`).
    pub transcript_path: Option<&'a std::path::Path>,
    /// The message id of the call's `tool` say (the id of the partial ask
    /// its streamed arguments were shown in, if any).
    pub announce_id: u64,
}

impl CallEnv<'_> {
    /// A tool hook's payload for `call` with `input`.
    fn hook_payload(&self, call: &ToolCall, input: Value) -> HookPayload {
        HookPayload::task(self.task_id, &self.ctx.cwd, self.mode)
            .with_session(
                self.ctx.session_id.clone(),
                self.transcript_path.map(std::path::Path::to_path_buf),
            )
            .with_tool(&call.name, input)
            .with_tool_use_id(&call.id)
            .with_agent(&self.ctx.agent, self.task_id)
    }
}

/// Runs tool calls for one task.
pub struct ToolExecutor {
    registry: ToolRegistry,
    approvals: SharedApprovals,
    /// `true` once the initial checkpoint is done; tools that are not
    /// read-only wait for it (the seed's gate).
    checkpoint_gate: Option<CheckpointGate>,
    hooks: Option<HookRunner>,
    mcp: Option<McpManager>,
    /// The built-in tools plus the MCP tools connected when the current
    /// round began.
    round_tools: Mutex<ToolRegistry>,
    /// `tool_result_max_chars`: longer results are cut, the whole of them
    /// spilled to a file the result names.
    result_cap: usize,
    /// A hook answered `"continue": false` (its `stopReason`): the task
    /// stops after this round.
    hook_stop: Mutex<Option<String>>,
}

impl std::fmt::Debug for ToolExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolExecutor")
            .field("registry", &self.registry)
            .finish_non_exhaustive()
    }
}

impl ToolExecutor {
    /// An executor over these tools.
    pub fn new(registry: ToolRegistry) -> Self {
        Self {
            round_tools: Mutex::new(registry.clone()),
            registry,
            approvals: SharedApprovals::default(),
            checkpoint_gate: None,
            hooks: None,
            mcp: None,
            result_cap: DEFAULT_TOOL_RESULT_MAX_CHARS,
            hook_stop: Mutex::new(None),
        }
    }

    /// The `stopReason` of a hook that answered `"continue": false`, once:
    /// the task must stop.
    pub fn take_hook_stop(&self) -> Option<String> {
        self.hook_stop
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }

    /// Whether a hook asked the task to stop (no further call runs).
    pub fn hook_stop_pending(&self) -> bool {
        self.hook_stop
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
    }

    /// Notes a hook's `"continue": false`, if it answered that.
    fn note_stop(&self, outcome: &crate::hooks::HookOutcome) {
        if let Some(reason) = &outcome.stop {
            let mut stop = self.hook_stop.lock().unwrap_or_else(|e| e.into_inner());
            stop.get_or_insert_with(|| reason.clone());
        }
    }

    /// Caps every tool result — built-in and MCP alike — at `chars`
    /// characters (`tool_result_max_chars`).
    pub fn set_result_cap(&mut self, chars: usize) {
        self.result_cap = chars.max(1);
    }

    /// The cap on every tool result, in characters.
    pub fn result_cap(&self) -> usize {
        self.result_cap
    }

    /// Shares the session's approval memory ("always allow"), so that
    /// every Task of a session, and its sub-agents, see the same approvals.
    pub fn set_approvals(&mut self, approvals: SharedApprovals) {
        self.approvals = approvals;
    }

    /// Offers the tools of these MCP servers too (as `mcp__<server>__<tool>`
    /// plus ListMcpResources and ReadMcpResource).
    pub fn set_mcp(&mut self, mcp: McpManager) {
        self.mcp = Some(mcp);
    }

    /// The MCP servers, if any.
    pub fn mcp(&self) -> Option<&McpManager> {
        self.mcp.as_ref()
    }

    /// Fixes the tools of the next round: the built-in ones plus the MCP
    /// tools of every server connected now. Returns their specs.
    pub fn begin_round(&self) -> Vec<kaji_protocol::ToolSpec> {
        let mut tools = self.registry.clone();
        if let Some(mcp) = &self.mcp {
            for tool in mcp.tools() {
                tools.register(tool);
            }
        }
        let specs = tools.specs();
        *self.round_tools.lock().unwrap_or_else(|e| e.into_inner()) = tools;
        specs
    }

    /// Runs these hooks around tool calls (PreToolUse, PostToolUse).
    pub fn set_hooks(&mut self, hooks: HookRunner) {
        self.hooks = Some(hooks);
    }

    /// Makes tools that are not read-only wait until `gate` opens (the
    /// initial checkpoint is done); read-only tools never wait.
    pub fn set_checkpoint_gate(&mut self, gate: CheckpointGate) {
        self.checkpoint_gate = Some(gate);
    }

    /// The checkpoint gate, if any.
    pub fn checkpoint_gate(&self) -> Option<&CheckpointGate> {
        self.checkpoint_gate.as_ref()
    }

    /// How the tool of this name presents a call with `input` in `ctx`
    /// (its view) and what an approval of it would show (its preview);
    /// `None` for a tool this round does not have.
    pub fn presentation(
        &self,
        name: &str,
        input: &Value,
        ctx: &ToolContext,
    ) -> Option<(ToolView, Option<String>)> {
        let tool = self.lookup(name).ok()?;
        Some((
            kaji_tools::view(tool.as_ref(), input),
            tool.preview(input, ctx),
        ))
    }

    /// The title of a call of the tool of this name with `input` (which
    /// may be incomplete: arguments still streaming): the round's tool's
    /// own, else the name and its first common argument.
    pub fn title_of(&self, name: &str, input: &Value) -> String {
        match self.lookup(name) {
            Ok(tool) => tool.title(input),
            Err(_) => kaji_tools::title_from_args(name, input),
        }
    }

    /// How a result of a call of the tool of this name reads for people
    /// ([`kaji_tools::result_summary`]; the output's first line for a tool
    /// this round does not have).
    pub fn result_summary(
        &self,
        name: &str,
        input: &Value,
        output: &str,
        is_error: bool,
    ) -> String {
        let tool = self.lookup(name).ok();
        kaji_tools::result_summary(tool.as_deref(), input, output, is_error)
    }

    /// The kind of the tool of this name and the files a call with
    /// `input` reads and writes (for compaction); `None` for a tool this
    /// round does not have.
    pub fn files_of(
        &self,
        name: &str,
        input: &Value,
    ) -> Option<(kaji_tools::ToolKind, kaji_tools::ToolFiles)> {
        let tool = self.lookup(name).ok()?;
        Some((tool.kind(), tool.files(input)))
    }

    /// The tools.
    pub fn registry(&self) -> &ToolRegistry {
        &self.registry
    }

    /// Runs one call. Never fails: every problem becomes an error result,
    /// capped like any other.
    pub(crate) async fn execute(&self, call: &ToolCall, env: &CallEnv<'_>) -> ToolRun {
        let mut run = match self.pipeline(call, env).await {
            Ok(run) | Err(run) => run,
        };
        let content = std::mem::take(run.content_mut());
        let spill = env
            .kaji_home
            .join("runs")
            .join(&env.ctx.session_id)
            .join("tool-results");
        *run.content_mut() = cap_result(content, self.result_cap, &spill, &call.id);
        run
    }

    /// The steps of a call: lookup → validate → PreToolUse hooks → decide
    /// → gate (ask) → wait for the initial checkpoint → run (and retry outside the
    /// sandbox) → carry out its control → PostToolUse hooks. An `Err` is a
    /// call that ended at a step.
    async fn pipeline(&self, call: &ToolCall, env: &CallEnv<'_>) -> Result<ToolRun, ToolRun> {
        let tool = self.lookup(&call.name)?;
        let input = validate(call)?;
        let access = tool.access_checked(&input, env.ctx).await;
        announce(tool.as_ref(), call, &input, env);
        let started = std::time::Instant::now();
        let pre = self.pre_hooks(call, &input, env).await?;
        let decision = self.decide(call, tool.as_ref(), &input, &access, env, pre.permission);
        let input = match self
            .gate(decision, call, tool.as_ref(), &input, &access, env)
            .await?
        {
            Some(edited) => self.edited(call, tool.as_ref(), edited, env).await?,
            None => input,
        };
        self.wait_for_turn(tool.as_ref(), &input, &access, env.ctx)
            .await?;
        let result = self.run_with_retry(&tool, call, &input, env).await;
        let facts = match (&self.hooks, &result) {
            (Some(_), Ok(out)) => Some(outcome::HookFacts {
                response: tool.hook_response(&input, out),
                event: tool.hook_event(&input, out),
            }),
            _ => None,
        };
        let mut run = self.outcome(tool.as_ref(), result, env).await;
        self.scope_changes(&access, env, &mut run);
        let ms = started.elapsed().as_millis() as u64;
        Ok(self
            .post_hooks(call, input, run, (pre.context, ms, facts), env)
            .await)
    }

    /// The tool of this round called `name`.
    fn lookup(&self, name: &str) -> Result<Arc<dyn Tool>, ToolRun> {
        let tools = self.round_tools.lock().unwrap_or_else(|e| e.into_inner());
        tools.get(name).cloned().ok_or_else(|| {
            // Not a mistake of the model: the tool's server is on its way.
            if let Some(server) = self.mcp().and_then(|m| m.connecting_server_of(name)) {
                return ToolRun::failed(
                    format!(
                        "{name} was not run: its MCP server {server:?} is still connecting; its tools will be listed once it is ready (try again then)"
                    ),
                    false,
                );
            }
            let names = tools.names().join(", ");
            ToolRun::failed(
                format!("unknown tool {name:?}; the available tools are: {names}"),
                true,
            )
        })
    }

    /// PreToolUse hooks: they may refuse the call before anyone is asked,
    /// add context to its result, and allow or ask for it.
    async fn pre_hooks(
        &self,
        call: &ToolCall,
        input: &Value,
        env: &CallEnv<'_>,
    ) -> Result<PreHooks, ToolRun> {
        let Some(hooks) = self
            .hooks
            .as_ref()
            .filter(|h| h.has_hooks(HookEvent::PreToolUse))
        else {
            return Ok(PreHooks::default());
        };
        let payload = env.hook_payload(call, input.clone());
        let outcome = hooks
            .run(HookEvent::PreToolUse, payload, &env.ctx.cancel)
            .await;
        report_hook_warnings(env.emitter, &outcome.warnings);
        self.note_stop(&outcome);
        if let Some(reason) = outcome.blocked {
            return Err(ToolRun::failed(
                format!("A PreToolUse hook refused {}: {reason}", call.name),
                false,
            ));
        }
        for message in &outcome.messages {
            env.emitter
                .say(SayKind::Info, format!("hook: {message}"), None);
        }
        Ok(PreHooks {
            context: outcome.context,
            permission: outcome.permission,
        })
    }

    /// The permission decision: the rules and the mode, then a PreToolUse
    /// hook's `allow` (skips the question, never a deny, never for a
    /// protected path or a write outside the project) or `ask` (asks even
    /// where the rules would allow).
    fn decide(
        &self,
        call: &ToolCall,
        tool: &dyn Tool,
        input: &Value,
        access: &ToolAccess,
        env: &CallEnv<'_>,
        hook: Option<PermissionDecision>,
    ) -> Decision {
        let approvals = self.approvals.lock().unwrap_or_else(|e| e.into_inner());
        let pctx = approvals.context(&env.ctx.project_dir, &env.ctx.cwd);
        let reads = reads_of(tool, input);
        let decision = decide(env.mode, &call.name, access, &reads, &pctx, &approvals);
        // A hook's `allow` never covers a protected path or a write
        // outside the project (docs/hooks.md).
        let hook = hook.filter(|h| {
            *h != PermissionDecision::Allow
                || crate::permissions::guarded_write(access, &pctx).is_none()
        });
        with_hook_decision(decision, hook, access)
    }

    /// The input an approval edited: the rules decide on it again (a
    /// deny still denies; an ask is what was just approved).
    async fn edited(
        &self,
        call: &ToolCall,
        tool: &dyn Tool,
        input: Value,
        env: &CallEnv<'_>,
    ) -> Result<Value, ToolRun> {
        let access = tool.access_checked(&input, env.ctx).await;
        match self.decide(call, tool, &input, &access, env, None) {
            Decision::Deny(reason) => Err(ToolRun::failed(reason, false)),
            _ => Ok(input),
        }
    }

    /// Carries out the decision: `Ok` when the call may run (with the
    /// input an approval edited, if it did), else the run it ends as
    /// (denied, rejected by the user, or denied because nobody could
    /// approve it).
    async fn gate(
        &self,
        decision: Decision,
        call: &ToolCall,
        tool: &dyn Tool,
        input: &Value,
        access: &ToolAccess,
        env: &CallEnv<'_>,
    ) -> Result<Option<Value>, ToolRun> {
        let kind = match decision {
            Decision::Allow | Decision::AllowSandboxed => return Ok(None),
            Decision::Deny(reason) => return Err(ToolRun::failed(reason, false)),
            Decision::Ask(kind) => kind,
        };
        let (pctx, headless) = {
            let approvals = self.approvals.lock().unwrap_or_else(|e| e.into_inner());
            let pctx = approvals.context(&env.ctx.project_dir, &env.ctx.cwd);
            (pctx, approvals.headless)
        };
        let requests = requests_for(&call.name, access, &reads_of(tool, input));
        let always = always_rules(&requests, &pctx);
        if let Some(answer) = self.permission_request_hooks(call, input, env).await {
            return answer.map(|()| None);
        }
        let payload = AskPayload::ToolApproval {
            tool: call.name.clone(),
            input: input.clone(),
            preview: tool.preview(input, env.ctx),
            always: always.iter().map(ToString::to_string).collect(),
            tool_use_id: Some(call.id.clone()),
        };
        match ask_or_abort(env, kind, tool.title(input), Some(payload)).await {
            AskResponse::Approve => Ok(None),
            AskResponse::ApproveEdited { input } => Ok(Some(input)),
            AskResponse::ApproveAlways => {
                self.remember(&always, env);
                Ok(None)
            }
            AskResponse::ApproveAlwaysProject => {
                self.remember(&always, env);
                remember_in_project(&always, &env.ctx.project_dir, env.emitter);
                Ok(None)
            }
            AskResponse::Deny { feedback } if headless && !env.ctx.cancel.is_cancelled() => {
                self.record_denial(call, input, &requests, &pctx);
                // Nobody could answer: not a person's "no" but a mistake,
                // so a model that keeps trying reaches the mistake limit.
                // The rest of the reply is skipped, as for any denial.
                Err(rejected(&call.name, feedback.as_deref(), true))
            }
            AskResponse::Deny { feedback } => Err(rejected(&call.name, feedback.as_deref(), false)),
            AskResponse::Refuse { message } => {
                if headless {
                    self.record_denial(call, input, &requests, &pctx);
                }
                Err(ToolRun::failed(message, false))
            }
            AskResponse::Reply { text } => Err(rejected(&call.name, Some(&text), false)),
        }
    }

    /// Records a call nobody could approve (headless), with the rule that
    /// would have allowed it when there is exactly one.
    fn record_denial(
        &self,
        call: &ToolCall,
        input: &Value,
        requests: &[kaji_policy::PermissionRequest],
        pctx: &kaji_policy::Context,
    ) {
        let rule = match requests {
            [one] => kaji_policy::always_rule_for(one, pctx).map(|r| r.to_string()),
            _ => None,
        };
        self.approvals
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .record_denial(PermissionDenial {
                tool_use_id: call.id.clone(),
                tool: call.name.clone(),
                input: input.clone(),
                reason: "nobody could approve it".to_string(),
                rule,
                action: crate::permissions::DeniedAction::of(requests),
            });
    }

    /// Whether the call may change files: neither a read-only tool, nor a
    /// command the approval analysis classes read-only, nor a question.
    fn may_write(&self, tool: &dyn Tool, access: &ToolAccess, ctx: &ToolContext) -> bool {
        let read_only = tool.is_read_only() || self.is_read_only_command(access, ctx);
        !read_only && !matches!(access, ToolAccess::Interaction)
    }

    /// Tools that may change files wait for the initial checkpoint (a
    /// read-only command runs at once, as read-only tools do); nothing
    /// runs once the task is aborted.
    async fn wait_for_turn(
        &self,
        tool: &dyn Tool,
        input: &Value,
        access: &ToolAccess,
        ctx: &ToolContext,
    ) -> Result<(), ToolRun> {
        if self.may_write(tool, access, ctx) {
            self.wait_for_checkpoint(tool, input, ctx).await;
        }
        if ctx.cancel.is_cancelled() {
            return Err(ToolRun::failed(
                "the task was aborted before the tool ran",
                false,
            ));
        }
        Ok(())
    }

    /// Runs the tool; after a sandbox denial, again outside the sandbox
    /// when the user says so.
    async fn run_with_retry(
        &self,
        tool: &Arc<dyn Tool>,
        call: &ToolCall,
        input: &Value,
        env: &CallEnv<'_>,
    ) -> Result<ToolOutput, ToolError> {
        let started = Instant::now();
        let result = run_tool(tool, input, env.ctx).await;
        tracing::debug!(
            tool = call.name,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "tool finished"
        );
        if let Err(ToolError::SandboxDenied { note, .. }) = &result
            && let Some(free) = self
                .offer_unsandboxed(tool.as_ref(), call, input, note, env)
                .await
        {
            return run_tool(tool, input, &free).await;
        }
        result
    }

    /// What the tool's result becomes: an error result, or the output
    /// with its control carried out and its state update said.
    async fn outcome(
        &self,
        tool: &dyn Tool,
        result: Result<ToolOutput, ToolError>,
        env: &CallEnv<'_>,
    ) -> ToolRun {
        let out = match result {
            Err(ToolError::Cancelled) => {
                return ToolRun::failed(
                    "the tool was interrupted because the task was aborted",
                    false,
                );
            }
            Err(e) => return ToolRun::failed(e.to_string(), true),
            Ok(out) => out,
        };
        if let Some(update) = &out.update {
            say_update(env.emitter, update);
        }
        let mut run = match out.control {
            None => ToolRun::ok(out.content),
            Some(control) => self.control(control, out.content, env).await,
        };
        if let ToolRun::Ran(ran) = &mut run {
            ran.changed_files = out.changed_files;
            ran.update = out.update;
            ran.polls = tool.polls();
            ran.images = out
                .images
                .iter()
                .map(kaji_tools::ToolImage::block)
                .collect();
        }
        run
    }

    /// A call that changed files changed nothing, for its checkpoint,
    /// when it is a command the approval analysis classes read-only.
    fn scope_changes(&self, access: &ToolAccess, env: &CallEnv<'_>, run: &mut ToolRun) {
        if let ToolRun::Ran(ran) = run
            && ran.changed_files
            && self.is_read_only_command(access, env.ctx)
        {
            ran.changed_files = false;
        }
    }

    /// Whether `access` runs a command the approval analysis classes
    /// read-only (as in plan mode).
    fn is_read_only_command(&self, access: &ToolAccess, ctx: &ToolContext) -> bool {
        let ToolAccess::Execute { command } = access else {
            return false;
        };
        let approvals = self.approvals.lock().unwrap_or_else(|e| e.into_inner());
        let pctx = approvals.context(&ctx.project_dir, &ctx.cwd);
        kaji_policy::is_read_only_command(command, &pctx)
    }

    /// The only files a call changed, when its tool names the files it
    /// writes (`Tool::files`), resolved in `ctx`; `None` when anything in
    /// the working directory may have changed (a command). Drives what the
    /// call's checkpoint stages.
    pub fn written_by(&self, call: &ToolCall, ctx: &ToolContext) -> Option<Vec<PathBuf>> {
        let input = call.input.as_ref().ok()?;
        let writes = self.lookup(&call.name).ok()?.files(input).writes;
        (!writes.is_empty()).then(|| writes.iter().map(|w| ctx.resolve(w)).collect())
    }

    /// PostToolUse hooks see the result and may add to it; the context
    /// of every hook is appended.
    async fn post_hooks(
        &self,
        call: &ToolCall,
        input: Value,
        mut run: ToolRun,
        (mut context, duration_ms, facts): (Vec<String>, u64, Option<outcome::HookFacts>),
        env: &CallEnv<'_>,
    ) -> ToolRun {
        // Claude Code's split: PostToolUse for a call that ran,
        // PostToolUseFailure (with `error`) for one that failed.
        let event = if run.is_error() {
            HookEvent::PostToolUseFailure
        } else {
            HookEvent::PostToolUse
        };
        if let Some(hooks) = self.hooks.as_ref().filter(|h| h.has_hooks(event)) {
            let payload = env
                .hook_payload(call, input)
                .with_field("duration_ms", duration_ms);
            let payload = match &run {
                ToolRun::Ran(ran) => payload.with_tool_response(
                    facts
                        .as_ref()
                        .map_or_else(|| json!({"output": ran.content}), |f| f.response.clone()),
                ),
                failed => payload
                    .with_field("error", failed.content())
                    .with_field("is_interrupt", env.ctx.cancel.is_cancelled()),
            };
            let outcome = hooks.run(event, payload, &env.ctx.cancel).await;
            report_hook_warnings(env.emitter, &outcome.warnings);
            self.note_stop(&outcome);
            context.extend(outcome.context);
            if let Some(reason) = outcome.blocked {
                context.push(format!("A {event} hook objected: {reason}"));
            }
        }
        if let ToolRun::Ran(_) = &run
            && let Some((name, fields)) = facts.as_ref().and_then(|f| f.event.as_ref())
            && let Ok(event) = name.parse::<HookEvent>()
            && let Some(hooks) = self.hooks.as_ref().filter(|h| h.has_hooks(event))
        {
            let mut payload = env.hook_payload(call, Value::Null);
            // Claude Code's fields: `task_id` is the list item's.
            payload.tool_name = None;
            payload.tool_input = None;
            payload.task_id = String::new();
            payload.extra.remove("tool_use_id");
            for (key, value) in fields.as_object().into_iter().flatten() {
                payload = payload.with_field(key.clone(), value.clone());
            }
            let outcome = hooks.run(event, payload, &env.ctx.cancel).await;
            report_hook_warnings(env.emitter, &outcome.warnings);
            self.note_stop(&outcome);
            context.extend(outcome.context);
            if let Some(reason) = outcome.blocked {
                context.push(format!("A {event} hook objected: {reason}"));
            }
        }
        for extra in context {
            run.content_mut().push_str("\n\n[hook] ");
            run.content_mut().push_str(&extra);
        }
        run
    }

    /// PermissionRequest hooks, before the user is asked: a `deny` (or
    /// exit 2) refuses the call, an `allow` runs it; otherwise `None` and
    /// the user is asked.
    async fn permission_request_hooks(
        &self,
        call: &ToolCall,
        input: &Value,
        env: &CallEnv<'_>,
    ) -> Option<Result<(), ToolRun>> {
        let hooks = self
            .hooks
            .as_ref()
            .filter(|h| h.has_hooks(HookEvent::PermissionRequest))?;
        let payload = env.hook_payload(call, input.clone());
        let outcome = hooks
            .run(HookEvent::PermissionRequest, payload, &env.ctx.cancel)
            .await;
        report_hook_warnings(env.emitter, &outcome.warnings);
        self.note_stop(&outcome);
        if let Some(reason) = outcome.blocked {
            return Some(Err(ToolRun::failed(
                format!("A PermissionRequest hook refused {}: {reason}", call.name),
                false,
            )));
        }
        (outcome.permission == Some(PermissionDecision::Allow)).then_some(Ok(()))
    }

    /// Stores the rules of an "always allow" for this session and records
    /// them in the session file.
    fn remember(&self, rules: &[kaji_policy::Rule], env: &CallEnv<'_>) {
        let mut approvals = self.approvals.lock().unwrap_or_else(|e| e.into_inner());
        for rule in rules {
            approvals.remember_rule(rule.clone());
            env.recorder.record(SessionRecord::Approval {
                rule: rule.to_string(),
            });
        }
    }

    /// After a sandbox denial, asks whether to run the command outside the
    /// sandbox; the context to run it in when the answer is yes.
    async fn offer_unsandboxed(
        &self,
        tool: &dyn Tool,
        call: &ToolCall,
        input: &Value,
        note: &str,
        env: &CallEnv<'_>,
    ) -> Option<ToolContext> {
        let headless = self
            .approvals
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .headless;
        if headless || env.ctx.sandbox.is_none() || env.ctx.cancel.is_cancelled() {
            return None;
        }
        let text = format!(
            "{} failed in the sandbox ({note}). Run it again outside the sandbox?",
            tool.title(input)
        );
        let payload = AskPayload::ToolApproval {
            tool: call.name.clone(),
            input: input.clone(),
            preview: tool.preview(input, env.ctx),
            always: Vec::new(),
            tool_use_id: Some(call.id.clone()),
        };
        match ask_or_abort(env, AskKind::Command, text, Some(payload)).await {
            AskResponse::Approve
            | AskResponse::ApproveEdited { .. }
            | AskResponse::ApproveAlways
            | AskResponse::ApproveAlwaysProject => {
                let mut free = env.ctx.clone();
                free.sandbox = None;
                Some(free)
            }
            _ => None,
        }
    }

    /// Carries out what a tool asked of the executor.
    async fn control(&self, control: ToolControl, content: String, env: &CallEnv<'_>) -> ToolRun {
        match control {
            ToolControl::Complete { result } => {
                ToolRun::with_effect(content, Effect::Complete(result))
            }
            ToolControl::ChangeDirectory { path } => {
                ToolRun::with_effect(content, Effect::Cwd(path))
            }
            ToolControl::EnterPlanMode => {
                if env.mode == PermissionMode::Plan {
                    return ToolRun::ok("The task is already in plan mode.");
                }
                ToolRun::with_effect(
                    format!(
                        "{content}\nEntered plan mode: only read-only tools run now. Investigate, then present your plan with ExitPlanMode."
                    ),
                    Effect::Mode(PermissionMode::Plan),
                )
            }
            ToolControl::ExitPlanMode { plan } => self.exit_plan_mode(plan, env).await,
            ToolControl::AskUser { question, options } => ask_user(question, options, env).await,
        }
    }

    /// ExitPlanMode: the user approves the plan (the task leaves plan
    /// mode), asks for changes, or nobody can answer (the plan is the
    /// task's result).
    async fn exit_plan_mode(&self, plan: String, env: &CallEnv<'_>) -> ToolRun {
        if env.mode != PermissionMode::Plan {
            return ToolRun::failed(
                "ExitPlanMode is only for leaving plan mode, and the task is not in plan mode. Go ahead with the work.",
                false,
            );
        }
        match ask_or_abort(env, AskKind::Plan, plan.clone(), None).await {
            AskResponse::Approve
            | AskResponse::ApproveEdited { .. }
            | AskResponse::ApproveAlways
            | AskResponse::ApproveAlwaysProject => {
                let back = match env.mode_before_plan {
                    // Started in plan mode: the approved plan is carried
                    // out with edits accepted.
                    PermissionMode::Plan => PermissionMode::AcceptEdits,
                    other => other,
                };
                // Plans live under $KAJI_HOME, never in the repository.
                let saved = match kaji_tools::plan::save_project_plan(
                    env.kaji_home,
                    &env.ctx.project_dir,
                    &plan,
                    std::time::SystemTime::now(),
                ) {
                    Ok(path) => format!("The plan was saved to {}.", path.display()),
                    Err(e) => format!("The plan could not be saved: {e}."),
                };
                ToolRun::with_effect(
                    format!(
                        "The user approved the plan. {saved} The task left plan mode (permission mode {}): carry out the plan now.",
                        back.as_str()
                    ),
                    Effect::Mode(back),
                )
            }
            AskResponse::Deny {
                feedback: Some(text),
            }
            | AskResponse::Refuse { message: text }
            | AskResponse::Reply { text } => ToolRun::ok(format!(
                "The user did not approve the plan and said:\n{text}\nStay in plan mode: revise the plan and present it again with ExitPlanMode."
            )),
            // Nobody will approve it (e.g. `kaji exec` without
            // --approve-plan): the plan is the task's result.
            AskResponse::Deny { feedback: None } => ToolRun::with_effect(
                "The plan was recorded as the task's result.",
                Effect::Complete(plan),
            ),
        }
    }

    async fn wait_for_checkpoint(&self, tool: &dyn Tool, input: &Value, ctx: &ToolContext) {
        let Some(gate) = &self.checkpoint_gate else {
            return;
        };
        // A tool that names its files waits a little, then saves what it
        // will change for the initial checkpoint and goes ahead.
        let writes = tool.files(input).writes;
        if writes.is_empty() || gate.is_open() {
            return gate.wait(&ctx.cancel).await;
        }
        let patience = crate::checkpoints::GATE_PATIENCE;
        if gate.wait_at_most(patience, &ctx.cancel).await || ctx.cancel.is_cancelled() {
            return;
        }
        let paths: Vec<PathBuf> = writes.iter().map(|w| ctx.resolve(w)).collect();
        let max = crate::checkpoints::DEFAULT_MAX_FILE_SIZE;
        if !gate.preimages().save(&paths, max) {
            gate.wait(&ctx.cancel).await;
        }
    }
}

/// The PreToolUse hooks' word on a call they let go on.
#[derive(Debug, Default)]
struct PreHooks {
    /// Context for the call's result.
    context: Vec<String>,
    /// `allow` or `ask`, if a hook said so.
    permission: Option<PermissionDecision>,
}

/// The call's arguments: a JSON object, or the error result saying why not.
fn validate(call: &ToolCall) -> Result<Value, ToolRun> {
    let input = match &call.input {
        Ok(v) => v.clone(),
        Err(e) => {
            return Err(ToolRun::failed(
                format!("{} was not run: {e}", call.name),
                true,
            ));
        }
    };
    if !input.is_object() {
        return Err(ToolRun::failed(
            format!(
                "invalid input for {}: the arguments must be a JSON object, got {input}",
                call.name
            ),
            true,
        ));
    }
    Ok(input)
}

/// Shows the call (its `tool` say, with the tool's own view of it).
fn announce(tool: &dyn Tool, call: &ToolCall, input: &Value, env: &CallEnv<'_>) {
    env.emitter.say_as(
        env.announce_id,
        SayKind::Tool,
        tool.title(input),
        Some(SayPayload::Tool {
            id: call.id.clone(),
            tool: call.name.clone(),
            input: input.clone(),
            view: Some(kaji_tools::view(tool, input)),
        }),
    );
}

/// The files a call reads, as its input names them (for `Read(…)` rules).
fn reads_of(tool: &dyn Tool, input: &Value) -> Vec<PathBuf> {
    tool.files(input)
        .reads
        .into_iter()
        .map(PathBuf::from)
        .collect()
}

/// AskUser: the user's answer is the result.
async fn ask_user(question: String, options: Vec<String>, env: &CallEnv<'_>) -> ToolRun {
    let payload = AskPayload::Followup { options };
    match ask_or_abort(env, AskKind::Followup, question, Some(payload)).await {
        AskResponse::Reply { text } => ToolRun::ok(format!("The user answered:\n{text}")),
        AskResponse::Approve
        | AskResponse::ApproveEdited { .. }
        | AskResponse::ApproveAlways
        | AskResponse::ApproveAlwaysProject => {
            ToolRun::ok("The user acknowledged the question without answering.")
        }
        AskResponse::Refuse { message } => ToolRun::failed(message, false),
        AskResponse::Deny { feedback } => ToolRun::failed(
            format!(
                "The question could not be answered{}. Go on with your best judgement, or finish with AttemptCompletion and say what you needed.",
                feedback.map(|f| format!(": {f}")).unwrap_or_default()
            ),
            false,
        ),
    }
}

/// Runs the tool under the task's cancellation: a cancelled tool gets a
/// moment to clean up (the Bash tool kills its process group) before it is
/// dropped.
async fn run_tool(
    tool: &Arc<dyn Tool>,
    input: &Value,
    ctx: &ToolContext,
) -> Result<ToolOutput, ToolError> {
    // A call that writes files a language server serves gets the
    // diagnostics it introduced appended (bounded by the `lsp_wait_ms`).
    let diagnostics = kaji_tools::lsp::EditDiagnostics::before(tool.as_ref(), input, ctx).await;
    let call_future = tool.call(input.clone(), ctx);
    tokio::pin!(call_future);
    let mut result = tokio::select! {
        r = &mut call_future => r,
        _ = ctx.cancel.cancelled() => {
            match tokio::time::timeout(CANCEL_GRACE, call_future).await {
                Ok(Ok(_)) | Ok(Err(_)) | Err(_) => Err(ToolError::Cancelled),
            }
        }
    };
    if let (Ok(output), Some(diagnostics)) = (&mut result, diagnostics)
        && output.changed_files
    {
        output.content.push_str(&diagnostics.after(ctx).await);
    }
    result
}

/// A call the user (or nobody) rejected, with what they said.
fn rejected(tool: &str, feedback: Option<&str>, mistake: bool) -> ToolRun {
    let mut content = format!("The user denied this operation: {tool} was not run.");
    if let Some(f) = feedback.filter(|f| !f.trim().is_empty()) {
        content.push_str("\nThe user said:\n");
        content.push_str(f);
    }
    ToolRun::Rejected { content, mistake }
}

/// The built-in tools, for describing recorded calls.
static BUILTIN: std::sync::LazyLock<ToolRegistry> =
    std::sync::LazyLock::new(kaji_tools::builtin_tools);

/// How a built-in tool presents a recorded call; `None` for other tools
/// (MCP servers may be gone).
pub fn recorded_view(name: &str, input: &Value) -> Option<ToolView> {
    let tool = BUILTIN.get(name)?;
    Some(kaji_tools::view(tool.as_ref(), input))
}

/// How a recorded result reads for people: the built-in tool's summary,
/// else the output's first line (MCP tools).
pub fn recorded_summary(name: &str, input: &Value, output: &str, is_error: bool) -> String {
    let tool = BUILTIN.get(name).map(|t| t.as_ref());
    kaji_tools::result_summary(tool, input, output, is_error)
}

/// A one-line description of a recorded call for the user (a transcript,
/// a denial): the built-in tool's title, else the name and its first
/// common string argument (MCP tools).
pub fn describe_call(name: &str, input: &Value) -> String {
    match BUILTIN.get(name) {
        Some(tool) => tool.title(input),
        None => kaji_tools::title_from_args(name, input),
    }
}

/// Asks the user, unless the task is aborted first: then the answer is a
/// denial that says so (the task ends at its next await point anyway).
async fn ask_or_abort(
    env: &CallEnv<'_>,
    kind: AskKind,
    text: String,
    payload: Option<AskPayload>,
) -> AskResponse {
    tokio::select! {
        answer = env.emitter.ask(kind, text, payload) => answer,
        _ = env.ctx.cancel.cancelled() => AskResponse::Deny {
            feedback: Some("the task was aborted".to_string()),
        },
    }
}

/// The permission decision after a PreToolUse hook's answer: `allow` turns
/// an ask into an allow (a deny stays a deny), `ask` turns an allow into an
/// ask (a deny stays a deny).
fn with_hook_decision(
    decision: Decision,
    hook: Option<PermissionDecision>,
    access: &ToolAccess,
) -> Decision {
    match (hook, decision) {
        (Some(PermissionDecision::Allow), Decision::Ask(_)) => Decision::Allow,
        (Some(PermissionDecision::Ask), Decision::Allow | Decision::AllowSandboxed)
            if !matches!(access, ToolAccess::Interaction) =>
        {
            Decision::Ask(match access {
                ToolAccess::Execute { .. } => AskKind::Command,
                _ => AskKind::Tool,
            })
        }
        (_, decision) => decision,
    }
}

/// Shows hook warnings to the user.
pub(crate) fn report_hook_warnings(emitter: &Emitter, warnings: &[String]) {
    for w in warnings {
        emitter.say(SayKind::Info, format!("hook warning: {w}"), None);
    }
}

/// Shows a change of session state. The text is the list as JSON with its
/// keys sorted (what `kaji exec --json` has always printed); front ends
/// render the payload.
pub(crate) fn say_update(emitter: &Emitter, update: &StateUpdate) {
    let (kind, text) = match update {
        StateUpdate::TaskList { tasks } => (SayKind::TaskList, json_text(tasks)),
        StateUpdate::Todo { items } => (SayKind::Todo, json_text(items)),
    };
    emitter.say(kind, text, Some(SayPayload::Update(update.clone())));
}

fn json_text<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_value(value)
        .map(|v| v.to_string())
        .unwrap_or_default()
}

/// A result of at most `cap` characters. A longer one is cut on a char
/// boundary, and the whole of it goes to
/// `dir/<call id>.txt` (`$KAJI_HOME/runs/<session>/tool-results`), which
/// the cut result names (or says could not be written).
fn cap_result(content: String, cap: usize, dir: &Path, call_id: &str) -> String {
    let Some((cut, _)) = content.char_indices().nth(cap) else {
        return content;
    };
    let total = content.chars().count();
    let safe_id: String = call_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let path = dir.join(format!("{safe_id}.txt"));
    let saved = std::fs::create_dir_all(dir).and_then(|_| std::fs::write(&path, &content));
    let note = match saved {
        Ok(()) => format!(
            "[The result was {total} characters; only the first {cap} are shown. The whole result is in {} (read it in parts with Read offset/limit or search it with Grep).]",
            path.display()
        ),
        Err(e) => format!(
            "[The result was {total} characters; only the first {cap} are shown. The whole result could not be saved to {}: {e}.]",
            path.display()
        ),
    };
    let mut out = content;
    out.truncate(cut);
    out.push_str("\n\n");
    out.push_str(&note);
    out
}

/// The rules an "always allow" of a call with these requests stores: one
/// per request, or none when any request has no rule narrow enough (then
/// "always" approves the call once).
fn always_rules(
    requests: &[kaji_policy::PermissionRequest],
    pctx: &kaji_policy::Context,
) -> Vec<kaji_policy::Rule> {
    let rules: Option<Vec<_>> = requests
        .iter()
        .map(|r| kaji_policy::always_rule_for(r, pctx))
        .collect();
    rules.unwrap_or_default()
}

/// "Always allow for this project": the rules go to the project's
/// `.kaji/config.local.toml` (its `[permissions] allow`). A file that
/// cannot be written is said as a warning; the call still runs.
fn remember_in_project(rules: &[kaji_policy::Rule], project_dir: &Path, emitter: &Emitter) {
    let project =
        crate::trust::project_dir(project_dir).unwrap_or_else(|_| project_dir.to_path_buf());
    let path = project
        .join(".kaji")
        .join(crate::config::LOCAL_CONFIG_FILE_NAME);
    for rule in rules {
        if let Err(e) = crate::rule_files::add_rule(&path, kaji_policy::Decision::Allow, rule) {
            emitter.say(
                SayKind::Error,
                format!("{rule} was allowed for this session only: {e}"),
                None,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deferred work is done when `settle` returns, by every settler, and
    /// once only.
    #[tokio::test]
    async fn settling_waits_for_the_deferred_checkpoint() {
        let gate = CheckpointGate::new();
        assert_eq!(gate.settle().now_or_never(), Some(()));
        let (done, mut wait) = tokio::sync::oneshot::channel::<()>();
        let runs = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = Arc::clone(&runs);
        gate.defer(Box::pin(async move {
            let _ = (&mut wait).await;
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }));
        let (mut first, mut second) = (Box::pin(gate.settle()), Box::pin(gate.settle()));
        assert_eq!((&mut first).now_or_never(), None);
        assert_eq!((&mut second).now_or_never(), None);
        done.send(()).unwrap();
        first.await;
        second.await;
        gate.settle().await;
        assert_eq!(runs.load(std::sync::atomic::Ordering::SeqCst), 1);
    }

    #[test]
    fn a_hook_allow_never_overrides_a_deny_and_ask_forces_a_question() {
        use PermissionDecision::{Allow, Ask, Deny};
        let run = ToolAccess::Execute {
            command: "make".into(),
        };
        let deny = Decision::Deny("denied by a rule".into());
        assert_eq!(
            with_hook_decision(deny.clone(), Some(Allow), &run),
            deny.clone()
        );
        assert_eq!(with_hook_decision(deny.clone(), Some(Ask), &run), deny);
        assert_eq!(
            with_hook_decision(Decision::Ask(AskKind::Command), Some(Allow), &run),
            Decision::Allow
        );
        assert_eq!(
            with_hook_decision(Decision::AllowSandboxed, Some(Ask), &run),
            Decision::Ask(AskKind::Command)
        );
        assert_eq!(
            with_hook_decision(Decision::Allow, Some(Ask), &ToolAccess::ReadOnly),
            Decision::Ask(AskKind::Tool)
        );
        assert_eq!(
            with_hook_decision(Decision::Allow, Some(Ask), &ToolAccess::Interaction),
            Decision::Allow
        );
        // A deny answer already refused the call; nothing changes here.
        assert_eq!(
            with_hook_decision(Decision::Allow, Some(Deny), &run),
            Decision::Allow
        );
        assert_eq!(
            with_hook_decision(Decision::Ask(AskKind::Tool), None, &run),
            Decision::Ask(AskKind::Tool)
        );
    }

    #[test]
    fn a_long_result_is_cut_and_spilled_whole() {
        let home = tempfile::tempdir().unwrap();
        let dir = home.path().join("runs/s1/tool-results");
        let long = "é".repeat(120);
        let out = cap_result(long.clone(), 100, &dir, "call/1");
        assert!(out.starts_with(&"é".repeat(100)), "{out}");
        assert!(!out.starts_with(&"é".repeat(101)), "{out}");
        let path = home.path().join("runs/s1/tool-results/call_1.txt");
        assert!(out.contains(&path.display().to_string()), "{out}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), long);
        // Short results are untouched and spill nothing.
        assert_eq!(cap_result("ok".into(), 100, &dir, "c2"), "ok");
        assert!(!home.path().join("runs/s1/tool-results/c2.txt").exists());
    }
}
