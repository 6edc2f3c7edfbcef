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

use kaji_protocol::{AskKind, AskPayload, AskResponse, SayKind, SayPayload, StateUpdate};
use kaji_tools::{ToolAccess, ToolContext, ToolControl, ToolError, ToolRegistry};
use serde_json::{Value, json};

use crate::emitter::Emitter;
use crate::session::record::SessionRecord;
use crate::session::recorder::Recorder;
use tokio::sync::watch;

use crate::hooks::{HookEvent, HookPayload, HookRunner, PermissionDecision};
use crate::parser::ToolCall;
use crate::permissions::{
    Decision, PermissionDenial, PermissionMode, SharedApprovals, decide, requests_for,
};
use kaji_mcp::McpManager;

/// The seed's initial-checkpoint gate: closed while the first checkpoint of
/// the task is being taken; tools that are not read-only wait for it to
/// open, read-only tools run at once. Cheap to clone.
#[derive(Debug, Clone)]
pub struct CheckpointGate {
    open: Arc<watch::Sender<bool>>,
    waiting: Arc<watch::Sender<usize>>,
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
        }
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

/// The default of `tool_result_max_chars`.
pub const DEFAULT_TOOL_RESULT_MAX_CHARS: usize = 50_000;

/// How long a cancelled tool may take to clean up before it is dropped.
const CANCEL_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

/// What became of one tool call.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolRun {
    /// The result text for the model.
    pub content: String,
    /// Whether it is an error result.
    pub is_error: bool,
    /// Whether it counts as a mistake of the model (unknown tool, bad
    /// arguments, a failing call).
    pub mistake: bool,
    /// The user rejected the call: the rest of the reply is skipped.
    pub rejected: bool,
    /// The call ended the task with this result (AttemptCompletion).
    pub completion: Option<String>,
    /// The call changed files.
    pub changed_files: bool,
    /// The task's permission mode changes to this (plan mode).
    pub new_mode: Option<PermissionMode>,
    /// The task's working directory changes to this (worktrees).
    pub new_cwd: Option<PathBuf>,
    /// Session state the call changed (task list, todo).
    pub update: Option<StateUpdate>,
    /// The tool polls (the same result again is no loop).
    pub polls: bool,
    /// Images the result carries (a Read of a PNG), sent after it.
    pub images: Vec<kaji_protocol::ContentBlock>,
}

impl ToolRun {
    fn error(content: impl Into<String>, mistake: bool) -> Self {
        Self {
            content: content.into(),
            is_error: true,
            mistake,
            rejected: false,
            completion: None,
            changed_files: false,
            new_mode: None,
            new_cwd: None,
            update: None,
            polls: false,
            images: Vec::new(),
        }
    }

    fn ok(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            is_error: false,
            mistake: false,
            rejected: false,
            completion: None,
            changed_files: false,
            new_mode: None,
            new_cwd: None,
            update: None,
            polls: false,
            images: Vec::new(),
        }
    }
}

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
    /// Where approvals granted for the session are written.
    pub recorder: &'a Recorder,
    /// The session file (hook payloads' `transcript_path`).
    pub transcript_path: Option<&'a std::path::Path>,
    /// The message id of the call's `tool` say (the id of the partial ask
    /// its streamed arguments were shown in, if any).
    pub announce_id: u64,
}

impl CallEnv<'_> {
    /// A tool hook's payload for `tool` called with `input`.
    fn hook_payload(&self, tool: &str, input: Value) -> HookPayload {
        HookPayload::task(self.task_id, &self.ctx.cwd, self.mode)
            .with_session(
                self.ctx.session_id.clone(),
                self.transcript_path.map(std::path::Path::to_path_buf),
            )
            .with_tool(tool, input)
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
        }
    }

    /// Caps every tool result — built-in and MCP alike — at `chars`
    /// characters (`tool_result_max_chars`).
    pub fn set_result_cap(&mut self, chars: usize) {
        self.result_cap = chars.max(1);
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

    /// Whether the tool of this name (built-in or MCP) only reads.
    pub fn is_read_only(&self, name: &str) -> bool {
        self.round_tools
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .is_some_and(|t| t.is_read_only())
    }

    /// The tools.
    pub fn registry(&self) -> &ToolRegistry {
        &self.registry
    }

    /// Runs one call. Never fails: every problem becomes an error result.
    pub(crate) async fn execute(&self, call: &ToolCall, env: &CallEnv<'_>) -> ToolRun {
        let (ctx, emitter) = (env.ctx, env.emitter);
        let round_tools = self
            .round_tools
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let Some(tool) = round_tools.get(&call.name).cloned() else {
            // Not a mistake of the model: the tool's server is on its way.
            if let Some(server) = self.mcp().and_then(|m| m.connecting_server_of(&call.name)) {
                return ToolRun::error(
                    format!(
                        "{} was not run: its MCP server {server:?} is still connecting; its tools will be listed once it is ready (try again then)",
                        call.name
                    ),
                    false,
                );
            }
            let names = round_tools.names().join(", ");
            return ToolRun::error(
                format!(
                    "unknown tool {:?}; the available tools are: {names}",
                    call.name
                ),
                true,
            );
        };
        let input = match &call.input {
            Ok(v) => v.clone(),
            Err(e) => return ToolRun::error(format!("{} was not run: {e}", call.name), true),
        };
        if !input.is_object() {
            return ToolRun::error(
                format!(
                    "invalid input for {}: the arguments must be a JSON object, got {input}",
                    call.name
                ),
                true,
            );
        }
        let access = tool.access_checked(&input, ctx).await;
        emitter.say_as(
            env.announce_id,
            SayKind::Tool,
            describe_call(&call.name, &input),
            Some(SayPayload::Tool {
                id: call.id.clone(),
                tool: call.name.clone(),
                input: input.clone(),
            }),
        );

        // PreToolUse hooks may refuse the call before anyone is asked.
        let mut hook_context = Vec::new();
        let mut hook_decision = None;
        if let Some(hooks) = self
            .hooks
            .as_ref()
            .filter(|h| h.has_hooks(HookEvent::PreToolUse))
        {
            let payload = env.hook_payload(&call.name, input.clone());
            let outcome = hooks.run(HookEvent::PreToolUse, payload, &ctx.cancel).await;
            report_hook_warnings(emitter, &outcome.warnings);
            if let Some(reason) = outcome.blocked {
                return ToolRun::error(
                    format!("A PreToolUse hook refused {}: {reason}", call.name),
                    false,
                );
            }
            for message in &outcome.messages {
                emitter.say(SayKind::Info, format!("hook: {message}"), None);
            }
            hook_context = outcome.context;
            hook_decision = outcome.permission;
        }

        if let Some(run) = self.permit(call, &input, &access, env, hook_decision).await {
            return run;
        }

        if !tool.is_read_only() && !matches!(access, ToolAccess::Interaction) {
            self.wait_for_checkpoint(ctx).await;
        }
        if ctx.cancel.is_cancelled() {
            return ToolRun::error("the task was aborted before the tool ran", false);
        }

        let started = Instant::now();
        let mut result = run_tool(&tool, &input, ctx).await;
        tracing::debug!(
            tool = call.name,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "tool finished"
        );
        if let Err(ToolError::SandboxDenied { note, .. }) = &result
            && let Some(free) = self.offer_unsandboxed(call, &input, note, env).await
        {
            result = run_tool(&tool, &input, &free).await;
        }
        let mut run = match result {
            Err(ToolError::Cancelled) => {
                return ToolRun::error(
                    "the tool was interrupted because the task was aborted",
                    false,
                );
            }
            Err(e) => ToolRun::error(e.to_string(), true),
            Ok(out) => {
                if let Some(update) = &out.update {
                    say_update(emitter, update);
                }
                let changed_files = out.changed_files;
                let mut run = match out.control {
                    None => ToolRun::ok(out.content),
                    Some(control) => self.control(control, out.content, env).await,
                };
                run.changed_files = changed_files;
                run.update = out.update;
                run.polls = tool.polls();
                run.images = out
                    .images
                    .iter()
                    .map(kaji_tools::ToolImage::block)
                    .collect();
                run
            }
        };

        // PostToolUse hooks see the result and may add to it.
        if let Some(hooks) = self
            .hooks
            .as_ref()
            .filter(|h| h.has_hooks(HookEvent::PostToolUse))
        {
            let payload = env
                .hook_payload(&call.name, input)
                .with_tool_response(json!({"output": run.content, "is_error": run.is_error}));
            let outcome = hooks
                .run(HookEvent::PostToolUse, payload, &ctx.cancel)
                .await;
            report_hook_warnings(emitter, &outcome.warnings);
            hook_context.extend(outcome.context);
            if let Some(reason) = outcome.blocked {
                hook_context.push(format!("A PostToolUse hook objected: {reason}"));
            }
        }
        for extra in hook_context {
            run.content.push_str("\n\n[hook] ");
            run.content.push_str(&extra);
        }
        run.content = cap_result(
            std::mem::take(&mut run.content),
            self.result_cap,
            ctx,
            &call.id,
        );
        run
    }

    /// The permission check: `None` when the call may run, else the run
    /// it ends as (denied, rejected by the user, or denied because nobody
    /// could approve it). A PreToolUse hook's `allow` skips the question
    /// (never a deny); its `ask` asks even where the rules would allow.
    async fn permit(
        &self,
        call: &ToolCall,
        input: &Value,
        access: &ToolAccess,
        env: &CallEnv<'_>,
        hook: Option<PermissionDecision>,
    ) -> Option<ToolRun> {
        let ctx = env.ctx;
        let (decision, pctx, headless) = {
            let approvals = self.approvals.lock().unwrap_or_else(|e| e.into_inner());
            let pctx = approvals.context(&ctx.project_dir, &ctx.cwd);
            let d = decide(env.mode, &call.name, access, input, &pctx, &approvals);
            (d, pctx, approvals.headless)
        };
        let decision = with_hook_decision(decision, hook, access);
        let kind = match decision {
            Decision::Allow | Decision::AllowSandboxed => return None,
            Decision::Deny(reason) => return Some(ToolRun::error(reason, false)),
            Decision::Ask(kind) => kind,
        };
        let text = describe_call(&call.name, input);
        let always = always_rules(&call.name, access, input, &pctx);
        let payload = AskPayload::ToolApproval {
            tool: call.name.clone(),
            input: input.clone(),
            preview: preview_call(&call.name, input, &ctx.cwd),
            always: always.iter().map(ToString::to_string).collect(),
        };
        match ask_or_abort(env, kind, text, Some(payload)).await {
            AskResponse::Approve => None,
            AskResponse::ApproveAlways => {
                self.remember(&always, env);
                None
            }
            AskResponse::ApproveAlwaysProject => {
                self.remember(&always, env);
                remember_in_project(&always, &ctx.project_dir, env.emitter);
                None
            }
            AskResponse::Deny { feedback } if headless && !ctx.cancel.is_cancelled() => {
                let run = rejected(&call.name, feedback.as_deref());
                let requests = requests_for(&call.name, access, input);
                let rule = match requests.as_slice() {
                    [one] => kaji_policy::always_rule_for(one, &pctx).map(|r| r.to_string()),
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
                    });
                // Nobody could answer: not a person's "no" but a mistake,
                // so a model that keeps trying reaches the mistake limit.
                // The rest of the reply is skipped, as for any denial.
                Some(ToolRun {
                    mistake: true,
                    ..run
                })
            }
            AskResponse::Deny { feedback } => Some(rejected(&call.name, feedback.as_deref())),
            AskResponse::Reply { text } => Some(rejected(&call.name, Some(&text))),
        }
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
            describe_call(&call.name, input)
        );
        let payload = AskPayload::ToolApproval {
            tool: call.name.clone(),
            input: input.clone(),
            preview: preview_call(&call.name, input, &env.ctx.cwd),
            always: Vec::new(),
        };
        match ask_or_abort(env, AskKind::Command, text, Some(payload)).await {
            AskResponse::Approve
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
                let mut run = ToolRun::ok(content);
                run.completion = Some(result);
                run
            }
            ToolControl::ChangeDirectory { path } => {
                let mut run = ToolRun::ok(content);
                run.new_cwd = Some(path);
                run
            }
            ToolControl::EnterPlanMode => {
                if env.mode == PermissionMode::Plan {
                    return ToolRun::ok("The task is already in plan mode.");
                }
                let mut run = ToolRun::ok(format!(
                    "{content}\nEntered plan mode: only read-only tools run now. Investigate, then present your plan with ExitPlanMode."
                ));
                run.new_mode = Some(PermissionMode::Plan);
                run
            }
            ToolControl::ExitPlanMode { plan } => {
                if env.mode != PermissionMode::Plan {
                    return ToolRun::error(
                        "ExitPlanMode is only for leaving plan mode, and the task is not in plan mode. Go ahead with the work.",
                        false,
                    );
                }
                match ask_or_abort(env, AskKind::Plan, plan.clone(), None).await {
                    AskResponse::Approve
                    | AskResponse::ApproveAlways
                    | AskResponse::ApproveAlwaysProject => {
                        let back = match env.mode_before_plan {
                            // Started in plan mode: the approved plan is
                            // carried out with edits accepted.
                            PermissionMode::Plan => PermissionMode::AcceptEdits,
                            other => other,
                        };
                        // Plans live under $KAJI_HOME, never in the
                        // repository.
                        let saved = match kaji_tools::plan::save_project_plan(
                            &env.ctx.kaji_home,
                            &env.ctx.project_dir,
                            &plan,
                            std::time::SystemTime::now(),
                        ) {
                            Ok(path) => format!("The plan was saved to {}.", path.display()),
                            Err(e) => format!("The plan could not be saved: {e}."),
                        };
                        let mut run = ToolRun::ok(format!(
                            "The user approved the plan. {saved} The task left plan mode (permission mode {}): carry out the plan now.",
                            back.as_str()
                        ));
                        run.new_mode = Some(back);
                        run
                    }
                    AskResponse::Deny {
                        feedback: Some(text),
                    }
                    | AskResponse::Reply { text } => ToolRun::ok(format!(
                        "The user did not approve the plan and said:\n{text}\nStay in plan mode: revise the plan and present it again with ExitPlanMode."
                    )),
                    AskResponse::Deny { feedback: None } => {
                        // Nobody will approve it (e.g. `kaji exec` without
                        // --approve-plan): the plan is the task's result.
                        let mut run = ToolRun::ok("The plan was recorded as the task's result.");
                        run.completion = Some(plan);
                        run
                    }
                }
            }
            ToolControl::AskUser { question, options } => {
                let payload = AskPayload::Followup { options };
                match ask_or_abort(env, AskKind::Followup, question, Some(payload)).await {
                    AskResponse::Reply { text } => {
                        ToolRun::ok(format!("The user answered:\n{text}"))
                    }
                    AskResponse::Approve
                    | AskResponse::ApproveAlways
                    | AskResponse::ApproveAlwaysProject => {
                        ToolRun::ok("The user acknowledged the question without answering.")
                    }
                    AskResponse::Deny { feedback } => ToolRun::error(
                        format!(
                            "The question could not be answered{}. Go on with your best judgement, or finish with AttemptCompletion and say what you needed.",
                            feedback.map(|f| format!(": {f}")).unwrap_or_default()
                        ),
                        false,
                    ),
                }
            }
        }
    }

    async fn wait_for_checkpoint(&self, ctx: &ToolContext) {
        if let Some(gate) = &self.checkpoint_gate {
            gate.wait(&ctx.cancel).await;
        }
    }
}

/// Runs the tool under the task's cancellation: a cancelled tool gets a
/// moment to clean up (the Bash tool kills its process group) before it is
/// dropped.
async fn run_tool(
    tool: &Arc<dyn kaji_tools::Tool>,
    input: &Value,
    ctx: &ToolContext,
) -> Result<kaji_tools::ToolOutput, ToolError> {
    let call_future = tool.call(input.clone(), ctx);
    tokio::pin!(call_future);
    tokio::select! {
        r = &mut call_future => r,
        _ = ctx.cancel.cancelled() => {
            match tokio::time::timeout(CANCEL_GRACE, call_future).await {
                Ok(Ok(_)) | Ok(Err(_)) | Err(_) => Err(ToolError::Cancelled),
            }
        }
    }
}

/// What an approval shows beyond its one line: the whole command for
/// Bash, a unified diff for Edit and Write (computed before the tool
/// runs, from the file as it is now). `None` for other tools.
pub fn preview_call(name: &str, input: &Value, cwd: &std::path::Path) -> Option<String> {
    let text = |k: &str| input.get(k).and_then(Value::as_str);
    match name {
        "Bash" => text("command").map(str::to_string),
        "Write" | "Edit" => {
            let path = text("file_path")?;
            let abs = cwd.join(path);
            let old = std::fs::read_to_string(&abs).unwrap_or_default();
            let new = if name == "Write" {
                text("content")?.to_string()
            } else {
                let (from, to) = (text("old_string")?, text("new_string")?);
                let all = input.get("replace_all").and_then(Value::as_bool) == Some(true);
                if all {
                    old.replace(from, to)
                } else {
                    old.replacen(from, to, 1)
                }
            };
            let diff = similar::TextDiff::from_lines(&old, &new);
            Some(
                diff.unified_diff()
                    .context_radius(3)
                    .header(&format!("a/{path}"), &format!("b/{path}"))
                    .to_string(),
            )
        }
        _ => None,
    }
}

fn rejected(tool: &str, feedback: Option<&str>) -> ToolRun {
    let mut content = format!("The user denied this operation: {tool} was not run.");
    if let Some(f) = feedback.filter(|f| !f.trim().is_empty()) {
        content.push_str("\nThe user said:\n");
        content.push_str(f);
    }
    let mut run = ToolRun::error(content, false);
    run.rejected = true;
    run
}

/// A one-line description of a call for the user.
pub fn describe_call(name: &str, input: &Value) -> String {
    let main = [
        "file_path",
        "command",
        "pattern",
        "path",
        "question",
        "taskId",
        "task_id",
        "subject",
        "url",
    ]
    .iter()
    .find_map(|k| input.get(*k).and_then(Value::as_str).map(|v| v.to_string()));
    match main {
        Some(v) => {
            let first_line = v.lines().next().unwrap_or("");
            format!("{name}: {first_line}")
        }
        None => name.to_string(),
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
/// `$KAJI_HOME/runs/<session>/tool-results/<call id>.txt`, which the cut
/// result names (or says could not be written).
fn cap_result(content: String, cap: usize, ctx: &ToolContext, call_id: &str) -> String {
    let Some((cut, _)) = content.char_indices().nth(cap) else {
        return content;
    };
    let total = content.chars().count();
    let dir = ctx
        .kaji_home
        .join("runs")
        .join(&ctx.session_id)
        .join("tool-results");
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
    let saved = std::fs::create_dir_all(&dir).and_then(|_| std::fs::write(&path, &content));
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

/// The rules an "always allow" of this call stores: one per request, or
/// none when any request has no rule narrow enough (then "always"
/// approves the call once).
fn always_rules(
    tool: &str,
    access: &ToolAccess,
    input: &Value,
    pctx: &kaji_policy::Context,
) -> Vec<kaji_policy::Rule> {
    let rules: Option<Vec<_>> = requests_for(tool, access, input)
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
        let mut ctx = ToolContext::new(home.path());
        ctx.kaji_home = home.path().to_path_buf();
        ctx.session_id = "s1".into();
        let long = "é".repeat(120);
        let out = cap_result(long.clone(), 100, &ctx, "call/1");
        assert!(out.starts_with(&"é".repeat(100)), "{out}");
        assert!(!out.starts_with(&"é".repeat(101)), "{out}");
        let path = home.path().join("runs/s1/tool-results/call_1.txt");
        assert!(out.contains(&path.display().to_string()), "{out}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), long);
        // Short results are untouched and spill nothing.
        assert_eq!(cap_result("ok".into(), 100, &ctx, "c2"), "ok");
        assert!(!home.path().join("runs/s1/tool-results/c2.txt").exists());
    }
}
