//! `kaji tui`: the interactive full-screen terminal UI.
//!
//! One event loop selects over the terminal's key events, the events and
//! asks of the running task, and termination signals, and redraws after
//! each. State lives in [`app::App`], drawing in [`render`]; the loop only
//! wires them to the terminal and to the session. Each submitted prompt
//! runs as a new Task of the one `kaji_core::Session`, which keeps the
//! conversation, the approvals and the background work between prompts.
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
use kaji_core::{AskRequest, ResumeFrom, Session, TaskFrontend, TaskOutcome};
use kaji_protocol::{AskResponse, SessionEvent, TaskEvent};
use tokio::sync::{mpsc, oneshot};

use crate::agent::{AgentArgs, UsageError};
use app::{Action, App, EntryStyle, StatusInfo};

/// Arguments of `kaji tui`.
#[derive(Debug, clap::Args)]
pub struct TuiArgs {
    #[command(flatten)]
    pub agent: AgentArgs,
    /// A first prompt to run at once.
    #[arg(value_name = "PROMPT")]
    pub prompt: Option<String>,
    /// Continue the most recent session of this directory.
    #[arg(short = 'c', long = "continue", conflicts_with = "resume")]
    pub continue_: bool,
    /// Continue the saved session ID (or a unique prefix of it).
    #[arg(short = 'r', long, value_name = "ID")]
    pub resume: Option<String>,
}

impl TuiArgs {
    fn resume_from(&self) -> Option<ResumeFrom> {
        match (&self.resume, self.continue_) {
            (Some(id), _) => Some(ResumeFrom::Id(id.clone())),
            (None, true) => Some(ResumeFrom::Latest),
            (None, false) => None,
        }
    }
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
    fn emit(&self, event: SessionEvent) {
        let _ = self.tx.send(UiMessage::Event(event.event));
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
    let (tx, mut rx) = mpsc::unbounded_channel();
    let frontend = Arc::new(TuiFrontend { tx: tx.clone() });
    let (session, warnings) = match args.agent.build_session(args.resume_from(), frontend).await {
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
    // ratatui's init also makes a panic restore the terminal first.
    let code = match ratatui::try_init() {
        Ok(terminal) => {
            // Pasted text arrives whole instead of as keys (an Enter in it
            // would send the prompt).
            let _ = crossterm::execute!(std::io::stdout(), crossterm::event::EnableBracketedPaste);
            let code = event_loop(terminal, &session, warnings, args.prompt, &tx, &mut rx).await;
            restore_terminal();
            code
        }
        Err(e) => {
            restore_terminal();
            Err(anyhow::anyhow!("cannot set up the terminal: {e}"))
        }
    };
    // Leaving with a prompt still running (the terminal went away, an
    // error): abort it and let it kill its commands before going on.
    if session.is_busy() {
        session.abort();
        while let Some(message) = rx.recv().await {
            if let UiMessage::Done(_) = message {
                break;
            }
        }
    }
    // No orphans: what the session left running stops with kaji.
    let _ = session.shutdown().await;
    let _ = kaji_home;
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

/// Runs one prompt of the session in the background; its end comes back
/// as [`UiMessage::Done`].
fn start_prompt(session: &Arc<Session>, tx: &mpsc::UnboundedSender<UiMessage>, prompt: String) {
    let session = Arc::clone(session);
    let tx = tx.clone();
    tokio::spawn(async move {
        let handle = tokio::spawn(async move { session.submit(prompt).await });
        let outcome = match handle.await {
            Ok(Ok(outcome)) => Ok(outcome),
            Ok(Err(e)) => Err(e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        let _ = tx.send(UiMessage::Done(outcome));
    });
}

/// Runs the UI until the user quits. A prompt still running when it
/// left for the caller to abort when this returns early.
async fn event_loop(
    mut terminal: ratatui::DefaultTerminal,
    session: &Arc<Session>,
    warnings: Vec<String>,
    first_prompt: Option<String>,
    tx: &mpsc::UnboundedSender<UiMessage>,
    rx: &mut mpsc::UnboundedReceiver<UiMessage>,
) -> anyhow::Result<()> {
    let mut app = App::new(StatusInfo {
        model: session.provider_config().model.clone(),
        permission_mode: session.permission_mode().as_str().to_string(),
        cwd: session.cwd().display().to_string(),
    });
    for w in warnings {
        app.entries.push(app::Entry {
            style: EntryStyle::Error,
            text: format!("! {w}"),
        });
    }
    if session.is_resuming() {
        app.show_history(&session.history());
    }
    if let Some(prompt) = first_prompt.filter(|p| !p.trim().is_empty()) {
        app.task_started();
        start_prompt(session, tx, prompt);
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
        if quitting && !app.running {
            return Ok(());
        }
        tokio::select! {
            key = keys.next() => match key {
                Some(Ok(Event::Key(key))) => match app.on_key(key) {
                    Action::None => {}
                    Action::Submit(prompt) => {
                        app.task_started();
                        start_prompt(session, tx, prompt);
                    }
                    Action::Clear => session.clear(),
                    Action::Abort => {
                        session.abort();
                        app.pending = None;
                    }
                    Action::Quit => {
                        quitting = true;
                        session.abort();
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
                session.abort();
            }
            _ = hangup.recv() => {
                quitting = true;
                session.abort();
            }
            _ = interrupt.recv() => {
                quitting = true;
                session.abort();
            }
        }
    }
}
