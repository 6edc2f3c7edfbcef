//! `kaji exec`: run one task without a person at the keyboard, for scripts
//! and CI.
//!
//! Without `--json` it prints a readable transcript; with `--json` one JSON
//! object per line, only ever an [`ExecLine`] (types in exec_events.rs,
//! schema in docs/exec-json.md). Nobody can answer an ask here, so every
//! ask but the final acceptance of the result is denied, and the model is
//! told why.

use std::io::{Read, Write};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::Result;
use async_trait::async_trait;
use kaji_core::{AskRequest, ResumeFrom, TaskFrontend};
use kaji_protocol::{
    AskKind, AskResponse, BackgroundTask, SayKind, SayPayload, SessionEvent, StateUpdate,
    TaskEvent, TaskListItem,
};

use crate::agent::{self, AgentArgs, UsageError};
use crate::exec_events::{self, ExecLine};
use kaji_core::permissions::PermissionDenial;
use kaji_protocol::redact::redact_url_passwords;
use kaji_protocol::terminal::sanitize_terminal;

/// Arguments of `kaji exec`.
#[derive(Debug, clap::Args)]
pub struct ExecArgs {
    /// The task. `-` reads it from standard input.
    #[arg(value_name = "PROMPT")]
    pub prompt: String,
    /// Print one JSON object per line instead of a transcript.
    #[arg(long)]
    pub json: bool,
    /// Approve the plan when the model leaves plan mode (without it, a
    /// task in plan mode ends with the plan as its result).
    #[arg(long)]
    pub approve_plan: bool,
    /// Continue the saved session ID (or a unique prefix of it) with this
    /// prompt.
    #[arg(long, value_name = "ID", conflicts_with = "continue_")]
    pub resume: Option<String>,
    /// Continue the most recent session of this directory.
    #[arg(long = "continue", short = 'c')]
    pub continue_: bool,
    /// Attach an image (PNG, JPEG, GIF or WebP) to the prompt; repeat for
    /// more.
    #[arg(short = 'i', long = "image", value_name = "FILE")]
    pub images: Vec<std::path::PathBuf>,
    #[command(flatten)]
    pub agent: AgentArgs,
}

/// Runs `kaji exec`; returns the exit code.
pub async fn run(args: ExecArgs) -> i32 {
    match run_inner(args).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("kaji exec: {}", redact_url_passwords(&format!("{e:#}")));
            if e.downcast_ref::<UsageError>().is_some() {
                2
            } else {
                1
            }
        }
    }
}

async fn run_inner(mut args: ExecArgs) -> Result<i32> {
    // Print mode is one request for a text answer: a reply with text and
    // no tool call is the answer (`on_text_reply = finish`), unless the
    // settings ask for the seed's `nudge`.
    args.agent
        .text_reply_default
        .get_or_insert(kaji_core::config::TextReply::Finish);
    let prompt = if args.prompt == "-" {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .map_err(|e| UsageError(format!("cannot read the prompt from standard input: {e}")))?;
        s
    } else {
        args.prompt.clone()
    };
    if prompt.trim().is_empty() {
        return Err(UsageError("the prompt is empty".into()).into());
    }
    let images = load_images(&args.images)?;
    let resume = match (&args.resume, args.continue_) {
        (Some(id), _) => Some(ResumeFrom::Id(id.clone())),
        (None, true) => Some(ResumeFrom::Latest),
        (None, false) => None,
    };
    let frontend =
        Arc::new(ExecFrontend::new(args.json, "default").approving_plans(args.approve_plan));
    let mut options = args.agent.session_options()?;
    options.resume = resume;
    options.headless = true;
    let (session, warnings) = agent::build(options, frontend.clone()).await?;
    for w in warnings {
        eprintln!("kaji exec: warning: {}", redact_url_passwords(&w));
    }
    let worktree = args
        .agent
        .worktree
        .as_ref()
        .map(|name| exec_events::WorktreeInfo {
            name: name.clone(),
            path: session.cwd().to_string_lossy().into_owned(),
            branch: format!("{}{name}", kaji_tools::worktree::BRANCH_PREFIX),
        });
    if let (Some(w), false) = (&worktree, args.json) {
        eprintln!(
            "kaji exec: worktree {}: {} (branch {})",
            w.name, w.path, w.branch
        );
    }
    let mode = session.permission_mode();
    frontend.set_mode(mode.as_str());
    let task_id = kaji_core::new_task_id();
    if args.json {
        let provider = session.provider_config();
        frontend.line(
            &exec_events::task_started(
                &task_id,
                session.id(),
                &provider.model,
                provider.kind,
                session.project_dir(),
                mode,
                session.is_resuming(),
            )
            .with_worktree(worktree),
        );
    }
    let started = Instant::now();
    let signals = {
        let session = Arc::clone(&session);
        let frontend = Arc::clone(&frontend);
        tokio::spawn(async move {
            wait_for_signal().await;
            session.abort();
            // Stop always stops: a second signal, or a task that has not
            // ended within the grace period (a tool or hook that will not
            // let go), ends kaji at once; the watchdog takes its children.
            tokio::select! {
                _ = wait_for_signal() => {}
                _ = tokio::time::sleep(exit_grace()) => {}
            }
            frontend.abandon(started.elapsed());
            std::process::exit(130);
        })
    };
    let trusted = args.agent.trust
        || kaji_core::trust::is_trusted(&crate::paths::kaji_home(), session.project_dir())
            .unwrap_or(false);
    let (prompt, mut options) = crate::exec_command::prepare(&session, prompt, trusted).await?;
    options.attachments.extend(images);
    let outcome = session
        .submit_with_options(task_id, prompt, options)
        .await
        .map_err(agent::session_error)?;
    signals.abort();
    // No orphans: whatever the task left running in the background stops
    // with kaji, and the user hears of it.
    let stopped = session.shutdown().await;
    frontend.report_stopped(&stopped);
    if let Some(e) = session.take_persistence_error() {
        eprintln!(
            "kaji exec: warning: {}",
            redact_url_passwords(&e.to_string())
        );
    }
    let status = outcome.status;
    let denials = session.permission_denials();
    if args.json {
        frontend.line(&exec_events::result(&outcome, started.elapsed(), &denials));
    } else {
        frontend.report_denials(&denials);
        frontend.finish(&format!(
            "\n[{}] {} turn(s), {} input / {} output tokens, {:.1} s",
            status.as_str(),
            outcome.turns,
            outcome.usage.input_tokens,
            outcome.usage.output_tokens,
            started.elapsed().as_secs_f64()
        ));
    }
    Ok(status.exit_code())
}

/// The images of `-i FILE…`, each checked; a bad one is a usage error
/// naming it (nothing is sent).
pub(crate) fn load_images(
    paths: &[std::path::PathBuf],
) -> Result<Vec<kaji_protocol::ContentBlock>> {
    paths
        .iter()
        .map(|p| {
            kaji_tools::load_image_file(p)
                .map(|(mime, data)| kaji_protocol::ContentBlock::image(mime, data))
                .map_err(|why| UsageError(format!("--image {}: {why}", p.display())).into())
        })
        .collect()
}

/// How long an aborted task may take to end before kaji exits anyway
/// (`KAJI_EXIT_GRACE_MS`, default 4 s: within the 5 s promised).
pub(crate) fn exit_grace() -> std::time::Duration {
    let ms = std::env::var("KAJI_EXIT_GRACE_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4_000);
    std::time::Duration::from_millis(ms)
}

async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

/// Prints events; denies asks.
pub struct ExecFrontend {
    json: bool,
    approve_plan: bool,
    mode: Mutex<String>,
    out: Mutex<TranscriptState>,
}

struct TranscriptState {
    /// Where the output goes (stdout; a buffer in tests).
    out: Box<dyn Write + Send>,
    /// Whether the cursor is in the middle of a streamed line.
    mid_line: bool,
    /// The text message being streamed: its id and how many bytes of it
    /// are printed. Its final `say` prints the rest (the last chunks may
    /// arrive only there), and deltas of other messages (reasoning) are
    /// not printed.
    streaming: Option<(u64, usize)>,
    /// What calls do in full (their tool's preview: a diff, the whole
    /// command), by call id, until their `tool` say prints it.
    previews: std::collections::HashMap<String, String>,
}

impl ExecFrontend {
    /// A front end printing JSON lines or a transcript.
    pub fn new(json: bool, mode: &str) -> Self {
        Self {
            json,
            approve_plan: false,
            mode: Mutex::new(mode.to_string()),
            out: Mutex::new(TranscriptState {
                out: Box::new(std::io::stdout()),
                mid_line: false,
                streaming: None,
                previews: Default::default(),
            }),
        }
    }

    /// Approves plans (`--approve-plan`) instead of ending the task with
    /// the plan as its result.
    pub fn approving_plans(mut self, approve: bool) -> Self {
        self.approve_plan = approve;
        self
    }

    /// The permission mode named when an approval is denied.
    pub fn set_mode(&self, mode: &str) {
        *self.mode.lock().unwrap_or_else(|e| e.into_inner()) = mode.to_string();
    }

    /// The transcript's last words when calls were denied because nobody
    /// could approve them: each call and the flag or rule that would have
    /// allowed it.
    fn report_denials(&self, denials: &[PermissionDenial]) {
        if denials.is_empty() {
            return;
        }
        let mut text = format!(
            "\n! {} call(s) were denied because nobody could approve them:",
            denials.len()
        );
        for d in denials {
            let call = kaji_core::executor::describe_call(&d.tool, &d.input);
            text.push_str(&format!("\n!   {call}: {}", exec_events::allow_hint(d)));
        }
        self.print(&text, true);
    }

    /// Says which background tasks were stopped because kaji exits.
    fn report_stopped(&self, stopped: &[BackgroundTask]) {
        if stopped.is_empty() {
            return;
        }
        if self.json {
            self.line(&exec_events::background_stopped(stopped));
        } else {
            for t in stopped {
                self.print(
                    &format!(
                        "! stopped background task {} ({}) as kaji exits",
                        t.id, t.description
                    ),
                    true,
                );
            }
        }
    }

    /// The last words of a run abandoned after an abort: the `aborted`
    /// result (JSON) or a note (transcript).
    fn abandon(&self, elapsed: std::time::Duration) {
        if self.json {
            self.line(&exec_events::abandoned(elapsed));
        } else {
            self.print(
                "! the task did not stop in time after the signal; kaji exits now",
                true,
            );
        }
    }

    /// Prints one line of `--json` output.
    fn line(&self, line: &ExecLine) {
        self.write_json(&line.to_json());
    }

    /// Prints one JSON value as a line.
    fn write_json(&self, value: &serde_json::Value) {
        // JSON escapes control characters; passwords in URLs are masked.
        let value = redact_url_passwords(&value.to_string());
        let mut st = self.lock_state();
        let _ = writeln!(st.out, "{value}");
        let _ = st.out.flush();
    }

    fn lock_state(&self) -> std::sync::MutexGuard<'_, TranscriptState> {
        self.out.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Ends a streamed line, if one is open.
    fn end_line(&self) {
        let mut st = self.lock_state();
        if st.mid_line {
            let _ = writeln!(st.out);
            let _ = st.out.flush();
            st.mid_line = false;
        }
    }

    fn finish(&self, text: &str) {
        self.print(text, true);
    }

    /// A sub-agent's progress, one indented line per step under its
    /// `Agent` call: never its streamed text, its prompt or its
    /// `[completed]`, which would read as the user's task.
    fn subagent_transcript(&self, agent: &str, event: &TaskEvent) {
        let line = match event {
            TaskEvent::Say {
                kind: SayKind::Tool,
                text,
                partial: false,
                ..
            } => format!("⏺ {text}"),
            TaskEvent::Say {
                kind: SayKind::Error,
                text,
                partial: false,
                ..
            } => format!("! {text}"),
            TaskEvent::ToolResult {
                is_error,
                output,
                summary,
                ..
            } => {
                let summary = summary
                    .clone()
                    .unwrap_or_else(|| kaji_tools::first_line_summary(output));
                let mark = if *is_error { "⎿ error: " } else { "⎿ " };
                format!("{mark}{summary}")
            }
            TaskEvent::Finished { status, turns, .. } => {
                format!("{} after {turns} turn(s)", status.as_str())
            }
            _ => return,
        };
        let first = line.lines().next().unwrap_or("");
        self.print(&format!("  │ [{agent}] {first}"), true);
    }

    /// After a call's `⏺` line: its diff (numbered, with context) or, for
    /// a command of several lines, the whole command.
    fn print_preview(&self, payload: Option<&SayPayload>) {
        let Some(SayPayload::Tool { id, view, .. }) = payload else {
            return;
        };
        let preview = self.lock_state().previews.remove(id);
        if let Some(diff) = crate::tui::diff::of_call(view.as_ref(), preview.as_deref()) {
            self.print(&indent("  ", &diff), true);
        } else if let Some(p) = preview.filter(|p| p.lines().count() > 1) {
            self.print(&indent("  │ ", &p), true);
        }
    }

    /// Prints transcript text: control and escape sequences from the
    /// model or tools are dropped, passwords in URLs masked.
    fn print(&self, text: &str, newline: bool) {
        let text = &sanitize_terminal(&redact_url_passwords(text), false);
        let mut st = self.lock_state();
        if newline && st.mid_line {
            let _ = writeln!(st.out);
        }
        if newline {
            let _ = writeln!(st.out, "{text}");
            st.mid_line = false;
        } else {
            let _ = write!(st.out, "{text}");
            st.mid_line = !text.ends_with('\n');
        }
        let _ = st.out.flush();
    }

    fn transcript(&self, event: &TaskEvent) {
        match event {
            TaskEvent::ToolUse {
                id,
                preview: Some(preview),
                ..
            } => {
                self.lock_state()
                    .previews
                    .insert(id.clone(), preview.clone());
            }
            TaskEvent::Say {
                id,
                kind,
                text,
                partial,
                payload,
            } => match (kind, partial) {
                (SayKind::Text, true) => {
                    self.print(text, false);
                    self.lock_state().streaming = Some((*id, text.len()));
                }
                (SayKind::Text, false) => {
                    // What was streamed is out already; print the rest.
                    let printed = match self.lock_state().streaming.take() {
                        Some((streamed_id, printed)) if streamed_id == *id => printed,
                        _ => 0,
                    };
                    if printed > 0 {
                        self.print(text.get(printed..).unwrap_or(""), false);
                        self.end_line();
                    } else {
                        self.print(text, true);
                    }
                }
                (SayKind::Reasoning, false) => self.print(&indent("~ ", text), true),
                (SayKind::Tool, false) => {
                    self.print(&format!("⏺ {text}"), true);
                    self.print_preview(payload.as_ref());
                }
                (SayKind::TaskList, false) => {
                    if let Some(SayPayload::Update(StateUpdate::TaskList { tasks })) = payload {
                        self.print(&task_list_text(tasks), true);
                    }
                }
                (SayKind::Error, _) => self.print(&format!("! {text}"), true),
                (SayKind::ApiReqRetried, _) => self.print(&format!("! {text}"), true),
                (SayKind::CompletionResult, _) => self.print(&format!("\n✓ {text}"), true),
                (SayKind::UserFeedback, _) => self.print(&format!("> {text}\n"), true),
                (SayKind::Todo | SayKind::Info | SayKind::CommandOutput, false) => {
                    self.print(&indent("  ", text), true)
                }
                _ => {}
            },
            TaskEvent::Delta { id, text } => {
                let streams = matches!(self.lock_state().streaming, Some((s, _)) if s == *id);
                if streams {
                    self.print(text, false);
                    if let Some((_, printed)) = self.lock_state().streaming.as_mut() {
                        *printed += text.len();
                    }
                }
            }
            TaskEvent::ToolResult {
                is_error,
                output,
                summary,
                ..
            } => {
                // The tool's own summary of its result (the output's
                // first line for events made without one).
                let summary = summary
                    .clone()
                    .unwrap_or_else(|| kaji_tools::first_line_summary(output));
                let mark = if *is_error { "⎿ error: " } else { "⎿ " };
                self.print(&format!("  {mark}{summary}"), true);
            }
            TaskEvent::Ask {
                kind,
                text,
                partial: false,
                ..
                // Nobody here answers "Retry?": the error is said already.
            } if !matches!(kind, AskKind::CompletionResult | AskKind::ApiReqFailed) => {
                self.print(&format!("? {text}"), true)
            }
            _ => {}
        }
    }
}

/// The task list as lines (`  #1 [in_progress] subject (owner)`), not
/// its JSON.
fn task_list_text(tasks: &[TaskListItem]) -> String {
    if tasks.is_empty() {
        return "  task list: empty".into();
    }
    tasks
        .iter()
        .map(|t| {
            let mut line = format!("  #{} [{}] {}", t.id, t.status, t.subject);
            if let Some(owner) = &t.owner {
                line.push_str(&format!(" ({owner})"));
            }
            if !t.blocked_by.is_empty() {
                let ids: Vec<String> = t.blocked_by.iter().map(|b| format!("#{b}")).collect();
                line.push_str(&format!(" blocked by {}", ids.join(", ")));
            }
            line
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn indent(prefix: &str, text: &str) -> String {
    text.lines()
        .map(|l| format!("{prefix}{l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[async_trait]
impl TaskFrontend for ExecFrontend {
    fn emit(&self, event: SessionEvent) {
        // The usage lines are the main agent's; sub-agents' usage reaches
        // the result through the parent's totals.
        if matches!(event.event, TaskEvent::Usage(_)) && event.agent != "main" {
            return;
        }
        if self.json {
            if let Some(line) = exec_events::from_event(&event.event) {
                if event.agent == "main" {
                    self.line(&line);
                } else {
                    self.write_json(
                        &line.to_json_in(&event.agent, event.parent_tool_use_id.as_deref()),
                    );
                }
            }
        } else if event.agent == "main" {
            self.transcript(&event.event);
        } else {
            self.subagent_transcript(&event.agent, &event.event);
        }
    }

    async fn answer(&self, ask: &AskRequest) -> AskResponse {
        match ask.kind {
            AskKind::CompletionResult => AskResponse::Approve,
            AskKind::Plan if self.approve_plan => {
                // The task leaves plan mode: later denials name the mode it
                // goes on in (accept-edits when it started in plan mode).
                let mut mode = self.mode.lock().unwrap_or_else(|e| e.into_inner());
                if *mode == "plan" {
                    *mode = "accept-edits".to_string();
                }
                AskResponse::Approve
            }
            AskKind::Plan => AskResponse::Deny { feedback: None },
            AskKind::Tool | AskKind::Command => AskResponse::Deny {
                feedback: Some(format!(
                    "kaji exec runs without a user to approve this (permission mode {}); it was denied. Use another approach that needs no approval, or finish with AttemptCompletion and say what must be run.",
                    self.mode.lock().unwrap_or_else(|e| e.into_inner())
                )),
            },
            _ => AskResponse::Deny {
                feedback: Some("kaji exec runs without a user to answer questions.".to_string()),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// A writer the test can read back.
    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl Write for Buffer {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn transcript(events: &[TaskEvent]) -> String {
        let buffer = Buffer::default();
        let frontend = ExecFrontend::new(false, "default");
        frontend.lock_state().out = Box::new(buffer.clone());
        for e in events {
            frontend.emit(SessionEvent {
                session_id: "s".into(),
                task_id: "t".into(),
                agent: "main".into(),
                parent_tool_use_id: None,
                event: e.clone(),
            });
        }
        String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap()
    }

    fn say(id: u64, kind: SayKind, text: &str, partial: bool) -> TaskEvent {
        TaskEvent::Say {
            id,
            kind,
            text: text.into(),
            partial,
            payload: None,
        }
    }

    #[test]
    fn streamed_text_is_printed_once_and_whole() {
        // The last chunk may arrive only in the final message.
        let out = transcript(&[
            say(1, SayKind::Text, "Hel", true),
            TaskEvent::Delta {
                id: 1,
                text: "lo wo".into(),
            },
            say(1, SayKind::Text, "Hello world.", false),
            say(2, SayKind::Tool, "Read: a", false),
        ]);
        assert_eq!(out, "Hello world.\n⏺ Read: a\n");
    }

    #[test]
    fn reasoning_deltas_are_not_mixed_into_text() {
        let out = transcript(&[
            say(1, SayKind::Reasoning, "thin", true),
            TaskEvent::Delta {
                id: 1,
                text: "king".into(),
            },
            say(1, SayKind::Reasoning, "thinking", false),
            say(2, SayKind::Text, "Answer.", false),
        ]);
        assert_eq!(out, "~ thinking\nAnswer.\n");
    }
}
