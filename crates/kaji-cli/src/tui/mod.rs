//! `kaji tui`: the interactive full-screen terminal UI.
//!
//! One event loop selects over the terminal's key events, the events and
//! asks of the running task, and termination signals, and redraws after
//! each. State lives in [`app::App`], drawing in [`render`]; the loop only
//! wires them to the terminal and to tasks. Each submitted prompt runs as
//! a new `kaji_core::Task` with the same configuration.
//!
//! It must never leave the terminal in raw mode or the alternate screen
//! (on exit, error or panic), and never leave background processes or MCP
//! servers running after it returns.

mod app;
mod input;
mod render;

use std::io::Write;
use std::sync::Arc;

use async_trait::async_trait;
use crossterm::event::{Event, EventStream};
use futures::StreamExt;
use kaji_core::{AbortHandle, AskRequest, Task, TaskFrontend, TaskOutcome, ToolExecutor};
use kaji_protocol::{AskResponse, TaskEvent};
use tokio::sync::{mpsc, oneshot};

use crate::agent::{AgentArgs, AgentSetup, UsageError, new_session_id};
use app::{Action, App, EntryStyle, StatusInfo};

/// Arguments of `kaji tui`.
#[derive(Debug, clap::Args)]
pub struct TuiArgs {
    #[command(flatten)]
    pub agent: AgentArgs,
    /// A first prompt to run at once.
    #[arg(value_name = "PROMPT")]
    pub prompt: Option<String>,
}

/// What the task side sends to the UI loop.
enum UiMessage {
    /// An event of the running task.
    Event(TaskEvent),
    /// An ask, with where its answer goes.
    Ask(AskRequest, oneshot::Sender<AskResponse>),
    /// The task's `run` returned (or its tokio task died).
    Done(Result<TaskOutcome, String>),
}

/// The front end the tasks see: forwards everything to the UI loop.
struct TuiFrontend {
    tx: mpsc::UnboundedSender<UiMessage>,
}

#[async_trait]
impl TaskFrontend for TuiFrontend {
    fn emit(&self, event: TaskEvent) {
        let _ = self.tx.send(UiMessage::Event(event));
    }

    async fn answer(&self, ask: &AskRequest) -> AskResponse {
        let (reply, answer) = oneshot::channel();
        if self.tx.send(UiMessage::Ask(ask.clone(), reply)).is_err() {
            return AskResponse::Deny {
                feedback: Some("the terminal UI has closed".into()),
            };
        }
        // The UI drops the sender when the task ends or the UI closes.
        answer.await.unwrap_or(AskResponse::Deny { feedback: None })
    }
}

/// Runs `kaji tui`; returns the exit code.
pub async fn run(args: TuiArgs) -> i32 {
    let kaji_home = crate::paths::kaji_home();
    use std::io::IsTerminal;
    if !std::io::stdin().is_terminal() || !std::io::stdout().is_terminal() {
        eprintln!(
            "kaji tui: standard input and output must be a terminal; use `kaji exec` to run a task from a script"
        );
        return 2;
    }
    let session_id = new_session_id();
    let setup = match args.agent.setup(&kaji_home, &session_id).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("kaji tui: {e:#}");
            return if e.downcast_ref::<UsageError>().is_some() {
                2
            } else {
                1
            };
        }
    };
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut running = None;
    // ratatui's init also makes a panic restore the terminal first.
    let code = match ratatui::try_init() {
        Ok(terminal) => {
            // Pasted text arrives whole instead of as keys (an Enter in it
            // would send the prompt).
            let _ = crossterm::execute!(std::io::stdout(), crossterm::event::EnableBracketedPaste);
            let code = event_loop(terminal, &setup, args.prompt, &tx, &mut rx, &mut running).await;
            restore_terminal();
            code
        }
        Err(e) => {
            restore_terminal();
            Err(anyhow::anyhow!("cannot set up the terminal: {e}"))
        }
    };
    // Leaving with a task still running (the terminal went away, an
    // error): abort it and let it kill its commands before going on.
    if let Some(task) = running.take() {
        task.abort.abort();
        while let Some(message) = rx.recv().await {
            if let UiMessage::Done(_) = message {
                break;
            }
        }
    }
    // No orphans: what the tasks left running stops with kaji.
    if let Some(runtime) = &setup.config.runtime {
        runtime.stop_all().await;
    }
    if let Some(mcp) = &setup.mcp {
        mcp.shutdown().await;
    }
    match code {
        Ok(()) => 0,
        Err(e) => {
            // The terminal may be gone (SIGHUP): never panic on writing.
            let _ = writeln!(std::io::stderr(), "kaji tui: {e:#}");
            1
        }
    }
}

/// Leaves raw mode and the alternate screen. Unlike `ratatui::restore`,
/// never prints: after a hangup stderr is gone too, and a failed
/// `eprintln!` would panic before the running task was stopped.
fn restore_terminal() {
    let _ = crossterm::terminal::disable_raw_mode();
    let _ = crossterm::execute!(
        std::io::stdout(),
        crossterm::event::DisableBracketedPaste,
        crossterm::terminal::LeaveAlternateScreen,
        crossterm::cursor::Show
    );
}

/// A task in flight.
struct Running {
    abort: AbortHandle,
}

fn start_task(
    setup: &AgentSetup,
    frontend: &Arc<TuiFrontend>,
    tx: &mpsc::UnboundedSender<UiMessage>,
    prompt: String,
    conversation: &[kaji_protocol::Message],
) -> Running {
    // A task owns its executor; each gets a fresh one over the same tools
    // and MCP servers. "Always allow" lives in the App instead.
    let mut executor = ToolExecutor::new(setup.executor.registry().clone());
    if let Some(mcp) = &setup.mcp {
        executor.set_mcp(mcp.clone());
    }
    // Each prompt is a task of its own that continues the conversation so
    // far (every tool use in it already has its result).
    let mut config = setup.config.clone();
    config.history = conversation.to_vec();
    let task = Task::new(config, executor, frontend.clone());
    let abort = task.abort_handle();
    let tx = tx.clone();
    tokio::spawn(async move {
        let handle = tokio::spawn(task.run(prompt));
        let outcome = handle.await.map_err(|e| e.to_string());
        let _ = tx.send(UiMessage::Done(outcome));
    });
    Running { abort }
}

/// Runs the UI until the user quits. `running` is the task in flight,
/// left for the caller to abort when this returns early.
async fn event_loop(
    mut terminal: ratatui::DefaultTerminal,
    setup: &AgentSetup,
    first_prompt: Option<String>,
    tx: &mpsc::UnboundedSender<UiMessage>,
    rx: &mut mpsc::UnboundedReceiver<UiMessage>,
    running: &mut Option<Running>,
) -> anyhow::Result<()> {
    let frontend = Arc::new(TuiFrontend { tx: tx.clone() });
    let mut app = App::new(StatusInfo {
        model: setup.provider_config.model.clone(),
        permission_mode: setup.config.permission_mode.as_str().to_string(),
        cwd: setup
            .config
            .start_dir
            .as_ref()
            .unwrap_or(&setup.config.cwd)
            .display()
            .to_string(),
    });
    // The conversation so far: the history of the last task that ended.
    let mut conversation: Vec<kaji_protocol::Message> = Vec::new();
    if let Some(prompt) = first_prompt.filter(|p| !p.trim().is_empty()) {
        app.task_started();
        *running = Some(start_task(setup, &frontend, tx, prompt, &conversation));
    }
    let mut keys = EventStream::new();
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    let mut hangup = signal(SignalKind::hangup())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    // Ticks keep the elapsed time in the status line moving.
    let mut tick = tokio::time::interval(std::time::Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut quitting = false;
    loop {
        terminal.draw(|f| render::draw(f, &mut app))?;
        if quitting && running.is_none() {
            return Ok(());
        }
        tokio::select! {
            key = keys.next() => match key {
                Some(Ok(Event::Key(key))) => match app.on_key(key) {
                    Action::None => {}
                    Action::Submit(prompt) => {
                        app.task_started();
                        *running = Some(start_task(setup, &frontend, tx, prompt, &conversation));
                    }
                    Action::Clear => conversation.clear(),
                    Action::Abort => {
                        if let Some(r) = &running {
                            r.abort.abort();
                        }
                        app.pending = None;
                    }
                    Action::Quit => {
                        quitting = true;
                        if let Some(r) = &running {
                            r.abort.abort();
                        }
                    }
                },
                Some(Ok(Event::Paste(text))) => app.on_paste(&text),
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(anyhow::anyhow!("cannot read the terminal: {e}")),
                None => return Ok(()),
            },
            message = rx.recv() => {
                // Drain what is queued so one redraw covers a burst of
                // deltas.
                let mut next = message;
                while let Some(message) = next {
                    match message {
                        UiMessage::Event(event) => app.on_event(event),
                        UiMessage::Ask(request, reply) => {
                            app.on_ask(request, reply);
                        }
                        UiMessage::Done(outcome) => {
                            if let Ok(outcome) = &outcome {
                                conversation = outcome.history.clone();
                            }
                            if let Err(e) = outcome {
                                // A panic in the task ran ratatui's panic
                                // hook, which restored the terminal: take
                                // it over again.
                                let _ = crossterm::terminal::enable_raw_mode();
                                let _ = crossterm::execute!(
                                    std::io::stdout(),
                                    crossterm::terminal::EnterAlternateScreen,
                                    crossterm::event::EnableBracketedPaste
                                );
                                let _ = terminal.clear();
                                app.entries.push(app::Entry {
                                    style: EntryStyle::Error,
                                    text: format!("! the task died: {e}"),
                                });
                            }
                            *running = None;
                            app.task_ended();
                        }
                    }
                    next = rx.try_recv().ok();
                }
            }
            _ = tick.tick(), if app.running => {}
            // SIGTERM, SIGHUP (the terminal closed) and a SIGINT sent from
            // outside: abort the task and quit.
            _ = term.recv() => {
                quitting = true;
                if let Some(r) = &running {
                    r.abort.abort();
                }
            }
            _ = hangup.recv() => {
                quitting = true;
                if let Some(r) = &running {
                    r.abort.abort();
                }
            }
            _ = interrupt.recv() => {
                quitting = true;
                if let Some(r) = &running {
                    r.abort.abort();
                }
            }
        }
    }
}
