//! Claude Code's headless protocol, which the Claude Agent SDKs speak:
//! `kaji --output-format stream-json --input-format stream-json …` (and
//! `kaji -p --output-format json|text PROMPT`). Flags in (args.rs), a
//! session from the [`kaji_core::SessionBuilder`], messages out
//! (sdk_messages.rs, through frontend.rs). See docs/sdk.md.
//!
//! This front end stays thin: it must never decide anything the core
//! decides, and never write to standard output anything but whole
//! messages of the chosen format.

mod args;
mod context;
mod control;
mod frontend;
mod hooks;
mod initialize;
mod input;
mod output;
mod permission;
mod schema;
mod sdk_mcp;

use std::io::Read;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Result;
use kaji_core::{ResumeFrom, Session, TaskOutcome};
use kaji_protocol::TaskStatus;
use kaji_protocol::redact::redact_url_passwords;
use serde_json::{Value, json};

pub use args::SdkArgs;
use args::{InputFormat, OutputFormat};
use frontend::SdkFrontend;
use output::Output;

use crate::agent::{self, UsageError};
use crate::sdk_messages::{self as msg, SdkMessage};
use crate::tui::TuiArgs;

/// How many times a final answer that breaks `--json-schema` is sent back.
const STRUCTURED_OUTPUT_RETRIES: u32 = 2;

/// Runs a headless SDK session; returns the exit code.
pub async fn run(tui: TuiArgs, sdk: SdkArgs) -> i32 {
    match run_inner(tui, sdk).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("kaji: {}", redact_url_passwords(&format!("{e:#}")));
            if e.downcast_ref::<UsageError>().is_some() {
                2
            } else {
                1
            }
        }
    }
}

/// One run's fixed facts.
struct Run {
    session: Arc<Session>,
    frontend: Arc<SdkFrontend>,
    schema: Option<Value>,
    warnings: Vec<String>,
    /// The model `set_model` chose, shared with the input reader.
    shared: Option<Arc<input::Shared>>,
    init_sent: bool,
    last: Option<SdkMessage>,
    failed: bool,
}

async fn run_inner(tui: TuiArgs, sdk: SdkArgs) -> Result<i32> {
    let format = sdk.output_format.unwrap_or(OutputFormat::Text);
    let schema = sdk
        .json_schema
        .as_deref()
        .map(|s| {
            serde_json::from_str::<Value>(s)
                .map_err(|e| UsageError(format!("--json-schema: not JSON: {e}")))
        })
        .transpose()?;
    let mut agent_args = tui.agent.clone();
    let settings_warnings = sdk.apply_settings(&mut agent_args)?;
    sdk.apply(&mut agent_args)?;
    agent_args.text_reply_default = Some(kaji_core::config::TextReply::Finish);
    let resume = match (&tui.resume, tui.continue_) {
        (Some(Some(id)), _) => Some(ResumeFrom::Id(id.clone())),
        (Some(None), _) => return Err(UsageError("--resume needs a session id here".into()).into()),
        (None, true) => Some(ResumeFrom::Latest),
        (None, false) => None,
    };
    let out = Arc::new(Output::stdout(format));
    // `--max-budget-usd` is the core's run budget (`RunBudget`): a task
    // it stops ends with the stop reason `max_budget_usd`.
    let frontend = Arc::new(SdkFrontend::new(
        Arc::clone(&out),
        sdk.include_partial_messages,
    ));
    let mcp = sdk.mcp_config()?;
    let mut options = agent_args.session_options()?;
    options.resume = resume;
    options.headless = true;
    options.setting_sources = sdk
        .setting_sources
        .as_deref()
        .map(kaji_core::claude_settings::SettingSource::parse_list)
        .transpose()
        .map_err(|e| UsageError(format!("--setting-sources: {e}")))?;
    options.mcp_servers.extend(mcp.servers);
    options.system_prompt = sdk.custom_prompt()?;
    let mut early_warnings = mcp.warnings;
    early_warnings.extend(settings_warnings);
    let stream = sdk.input_format.unwrap_or(InputFormat::Text) == InputFormat::StreamJson;
    // With stream-json the program's `initialize` comes first: its agents
    // and in-process MCP servers go into the session being built.
    let mut shared = None;
    let mut incoming = None;
    let mut first_prompt = None;
    let mut init_request = None;
    let mut early = Vec::new();
    if stream {
        let control = Arc::new(control::Control::new(Arc::clone(&out)));
        if sdk.permission_prompt_tool.as_deref() == Some("stdio") {
            frontend.ask_program(Arc::clone(&control));
        }
        let s = Arc::new(input::Shared::new(
            Arc::clone(&out),
            control,
            Arc::clone(&frontend),
        ));
        let mut rx = input::spawn(Arc::clone(&s));
        match rx.recv().await {
            Some(input::Incoming::Initialize { id, request }) => {
                let (agents, w) = initialize::agents(&request);
                options.agents = agents;
                initialize::custom_prompt(&request, &mut options.system_prompt);
                early_warnings.extend(w);
                for name in initialize::sdk_servers(&request, &mcp.sdk) {
                    match sdk_mcp::connect(Arc::clone(&s.control), &name).await {
                        Ok(tools) => options.tools.0.extend(tools),
                        Err(e) => early_warnings.push(format!(
                            "the program's MCP server {name:?} is not used: {e}"
                        )),
                    }
                }
                let (hooks, w) = hooks::program_hooks(&request, &s.control);
                options.program_hooks = hooks;
                early_warnings.extend(w);
                init_request = Some(id);
            }
            Some(input::Incoming::Prompt(p)) => first_prompt = Some(p),
            Some(input::Incoming::Control { id, request }) => early.push((id, request)),
            None => {}
        }
        shared = Some(s);
        incoming = Some(rx);
    }
    options.session_id = sdk.new_session_id(options.resume.is_some())?;
    let (session, mut warnings) = if sdk.fork_session && options.resume.is_some() {
        fork(options, frontend.clone()).await?
    } else {
        agent::build(options, frontend.clone()).await?
    };
    warnings.extend(early_warnings);
    warnings.extend(sdk.unhonoured());
    for w in &warnings {
        eprintln!("kaji: warning: {}", redact_url_passwords(w));
    }
    frontend.attach(&session);
    if let Some(id) = init_request {
        out.control(&msg::control_success(&id, initialize_response(&session)));
    }
    // From here on the reader answers control requests itself; those that
    // came before are answered below, in order, after initialize's.
    if let Some(s) = &shared {
        let _ = s.session.set(Arc::clone(&session));
    }
    let mut run = Run {
        session: Arc::clone(&session),
        frontend,
        schema,
        warnings,
        shared: shared.clone(),
        init_sent: false,
        last: None,
        failed: false,
    };
    match incoming.zip(shared) {
        None => {
            let prompt = text_prompt(&tui.prompt)?;
            run.prompt(prompt).await?;
        }
        Some((mut prompts, shared)) => {
            for (id, request) in early {
                input::answer(id, &request, &shared);
            }
            if let Some(p) = first_prompt {
                run.prompt(p).await?;
            }
            while let Some(next) = prompts.recv().await {
                match next {
                    input::Incoming::Prompt(p) => run.prompt(p).await?,
                    input::Incoming::Control { id, request } => {
                        input::answer(id, &request, &shared)
                    }
                    input::Incoming::Initialize { id, .. } => out.control(&msg::control_error(
                        &id,
                        "the session is initialized already (initialize comes once, first)",
                    )),
                }
            }
        }
    }
    session.shutdown().await;
    let Some(last) = run.last.take() else {
        return Err(UsageError("no prompt was given".into()).into());
    };
    out.finish(&last, sdk.verbose);
    Ok(if run.failed { 1 } else { 0 })
}

/// `--fork-session`: the saved session is opened, copied into a new
/// session (a fork, with `--session-id` if given) and closed unchanged.
async fn fork(
    options: kaji_core::SessionOptions,
    frontend: Arc<SdkFrontend>,
) -> Result<(Arc<Session>, Vec<String>)> {
    let (original, mut warnings) = agent::build(options.clone(), frontend.clone()).await?;
    let history = original.history();
    let parent = original.id().to_string();
    original.shutdown().await;
    let (fork, more) = kaji_core::SessionBuilder::new(crate::paths::kaji_home(), options)
        .forked_from(&parent, history)
        .build(frontend)
        .await
        .map_err(agent::session_error)?;
    warnings.extend(more);
    Ok((fork, warnings))
}

/// The prompt of `--input-format text`: the words given, else standard
/// input.
fn text_prompt(words: &[String]) -> Result<String, UsageError> {
    let mut prompt = words.join(" ");
    if prompt.trim().is_empty() {
        std::io::stdin()
            .read_to_string(&mut prompt)
            .map_err(|e| UsageError(format!("cannot read the prompt from standard input: {e}")))?;
    }
    if prompt.trim().is_empty() {
        return Err(UsageError(
            "the prompt is empty (give it as arguments or on standard input)".into(),
        ));
    }
    Ok(prompt)
}

impl Run {
    fn init(&mut self) {
        if std::mem::replace(&mut self.init_sent, true) {
            return;
        }
        let s = &self.session;
        let mcp_servers = mcp_servers(s);
        let catalog = s.agent_catalog();
        let facts = msg::InitFacts {
            cwd: s.cwd().to_string_lossy().into_owned(),
            tools: s.tool_names(),
            mcp_servers,
            model: s.provider_config().model.clone(),
            permission_mode: msg::claude_mode(s.permission_mode()),
            agents: catalog.agents.iter().map(|a| a.name.clone()).collect(),
            warnings: self.warnings.clone(),
        };
        let init = msg::init(s.id(), self.frontend.uuid(), &facts);
        self.frontend.output().send(&init);
    }

    /// Runs one prompt (with `--json-schema`, until its answer fits) and
    /// sends its `result`.
    async fn prompt(&mut self, prompt: String) -> Result<()> {
        self.init();
        self.frontend.begin_prompt();
        let started = Instant::now();
        let mut text = prompt;
        if let Some(schema) = &self.schema {
            text.push_str(&format!(
                "\n\nWhen you are done, your final answer must be only a JSON value (no other text) that matches this JSON Schema:\n{schema}"
            ));
        }
        let mut outcome = self.submit(text).await?;
        let mut structured = None;
        if let Some(schema) = self.schema.clone() {
            let mut retries = 0;
            loop {
                match self.structured(&outcome, &schema) {
                    Ok(v) => {
                        structured = Some(Ok(v));
                        break;
                    }
                    Err(e)
                        if retries < STRUCTURED_OUTPUT_RETRIES
                            && outcome.status == TaskStatus::Completed =>
                    {
                        retries += 1;
                        let again = format!(
                            "Your final answer does not match the JSON Schema: {e}. Answer again with only the JSON value."
                        );
                        let more = self.submit(again).await?;
                        outcome = merge(outcome, more);
                    }
                    Err(e) => {
                        structured = Some(Err(e));
                        break;
                    }
                }
            }
        }
        let result = self.result(&outcome, started, structured);
        if let SdkMessage::Result(r) = &result {
            self.failed |= r.is_error;
        }
        self.frontend.output().send(&result);
        self.last = Some(result);
        Ok(())
    }

    async fn submit(&self, text: String) -> Result<TaskOutcome> {
        let options = kaji_core::PromptOptions {
            model: self.shared.as_ref().and_then(|s| s.model()),
            ..kaji_core::PromptOptions::default()
        };
        self.session
            .submit_with_options(kaji_core::new_task_id(), text, options)
            .await
            .map_err(agent::session_error)
    }

    fn answer_text(&self, outcome: &TaskOutcome) -> Option<String> {
        outcome
            .result
            .clone()
            .or_else(|| self.frontend.prompt_facts().1)
    }

    fn structured(&self, outcome: &TaskOutcome, schema: &Value) -> Result<Value, String> {
        let text = self.answer_text(outcome).unwrap_or_default();
        let value =
            schema::extract(&text).ok_or_else(|| "the final answer is not JSON".to_string())?;
        schema::check(&value, schema)?;
        Ok(value)
    }

    fn result(
        &self,
        outcome: &TaskOutcome,
        started: Instant,
        structured: Option<Result<Value, String>>,
    ) -> SdkMessage {
        let (api, _) = self.frontend.prompt_facts();
        // The core's run-wide cap (`--max-budget-usd` on every command)
        // ends a task with this stop reason.
        let budget_hit = outcome.stop_reason.as_deref() == Some("max_budget_usd");
        let (structured_output, schema_error) = match structured {
            Some(Ok(v)) => (Some(v), None),
            Some(Err(e)) => (None, Some(e)),
            None => (None, None),
        };
        let subtype = match (outcome.status, budget_hit, &schema_error) {
            (_, true, _) => "error_max_budget_usd",
            (TaskStatus::MaxTurns, ..) => "error_max_turns",
            (TaskStatus::Completed, false, Some(_)) => "error_max_structured_output_retries",
            (TaskStatus::Completed, false, None) => "success",
            _ => "error_during_execution",
        };
        let mut errors = Vec::new();
        if subtype != "success" {
            errors.push(match &schema_error {
                Some(e) => format!("structured output: {e}"),
                None if budget_hit => "the run reached --max-budget-usd".to_string(),
                None => format!("the task ended: {}", outcome.status.as_str()),
            });
        }
        let cost = outcome.cost_usd.unwrap_or(0.0);
        let usage = msg::usage(&outcome.usage);
        let model = self.session.provider_config().model.clone();
        let model_usage = json!({ model: {
            "inputTokens": outcome.usage.input_tokens,
            "outputTokens": outcome.usage.output_tokens,
            "cacheReadInputTokens": outcome.usage.cache_read_input_tokens,
            "cacheCreationInputTokens": outcome.usage.cache_creation_input_tokens,
            "costUSD": cost,
        }});
        let denials = self
            .session
            .permission_denials()
            .into_iter()
            .map(|d| json!({"tool_name": d.tool, "tool_use_id": d.tool_use_id, "tool_input": d.input}))
            .collect();
        SdkMessage::Result(Box::new(msg::ResultMessage {
            subtype,
            is_error: subtype != "success",
            duration_ms: started.elapsed().as_millis() as u64,
            duration_api_ms: api.as_millis() as u64,
            num_turns: outcome.turns,
            result: self.answer_text(outcome),
            stop_reason: outcome.stop_reason.clone(),
            session_id: self.session.id().to_string(),
            total_cost_usd: cost,
            usage,
            model_usage,
            permission_denials: denials,
            structured_output,
            errors,
            uuid: self.frontend.uuid(),
            kaji_status: outcome.status.as_str(),
        }))
    }
}

/// A prompt's outcome after a retry: the retry's status and answer, the
/// sums of both.
fn merge(first: TaskOutcome, mut then: TaskOutcome) -> TaskOutcome {
    then.turns += first.turns;
    then.usage.add(&first.usage);
    then.cost_usd = match (first.cost_usd, then.cost_usd) {
        (Some(a), Some(b)) => Some(a + b),
        (a, b) => a.or(b),
    };
    then
}

/// The answer to `initialize`.
fn initialize_response(session: &Session) -> Value {
    let agents: Vec<Value> = session
        .agent_catalog()
        .agents
        .iter()
        .map(|a| json!({"name": a.name, "description": a.description}))
        .collect();
    json!({
        "commands": [],
        "agents": agents,
        "output_style": "default",
        "available_output_styles": ["default"],
        "models": [],
        "account": {},
        "pid": std::process::id(),
    })
}

/// The MCP servers kaji started and the program's own, with their
/// status in Claude Code's words.
fn mcp_servers(s: &Session) -> Vec<(String, String)> {
    let mut servers: Vec<(String, String)> = s
        .mcp()
        .map(|m| {
            m.status()
                .into_iter()
                .map(|r| (r.name, mcp_status(&r.status).to_string()))
                .collect()
        })
        .unwrap_or_default();
    for name in s.tool_names() {
        if let Some(server) = name
            .strip_prefix("mcp__")
            .and_then(|r| r.split("__").next())
            && !servers.iter().any(|(n, _)| n == server)
        {
            servers.push((server.to_string(), "connected".to_string()));
        }
    }
    servers
}

fn mcp_status(status: &kaji_mcp::McpServerStatus) -> &'static str {
    use kaji_mcp::McpServerStatus as S;
    match status {
        S::Disabled => "disabled",
        S::Connecting => "pending",
        S::Connected { .. } => "connected",
        S::Failed { .. } => "failed",
        #[allow(unreachable_patterns)]
        _ => "unknown",
    }
}
