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

mod action;
mod app;
mod clipboard;
pub(crate) mod commands;
pub(crate) mod diff;
#[cfg(test)]
mod frame_tests;
mod highlight;
mod input;
mod local;
pub(crate) use local::INIT_PROMPT;
mod markdown;
mod mentions;
mod nesting;
mod render;
mod rewind;

use std::io::Write;
use std::sync::Arc;

use async_trait::async_trait;
use crossterm::event::{Event, EventStream};
use futures::StreamExt;
use kaji_core::{AskRequest, ResumeFrom, Session, TaskFrontend, TaskOutcome};
use kaji_protocol::{AskResponse, SessionEvent, TaskEvent};
use tokio::sync::{mpsc, oneshot};

use crate::agent::{AgentArgs, UsageError};
use app::{Action, App, StatusInfo};

/// Arguments of `kaji tui`.
#[derive(Debug, clap::Args)]
pub struct TuiArgs {
    #[command(flatten)]
    pub agent: AgentArgs,
    /// A first prompt to run at once (its words are joined by spaces).
    #[arg(value_name = "PROMPT", trailing_var_arg = true)]
    pub prompt: Vec<String>,
    /// Continue the most recent session of this directory.
    #[arg(short = 'c', long = "continue", conflicts_with = "resume")]
    pub continue_: bool,
    /// Continue the saved session ID (or a unique prefix of it); without
    /// ID, pick one of this directory's sessions.
    #[arg(short = 'r', long, value_name = "ID", num_args = 0..=1)]
    pub resume: Option<Option<String>>,
    /// With -p: attach an image (PNG, JPEG, GIF or WebP) to the prompt;
    /// repeat for more.
    #[arg(short = 'i', long = "image", value_name = "FILE")]
    pub images: Vec<std::path::PathBuf>,
}

impl TuiArgs {
    /// Which session to continue; `Err` when the picker was left.
    fn resume_from(&self) -> Result<Option<ResumeFrom>, String> {
        Ok(match (&self.resume, self.continue_) {
            (Some(Some(id)), _) => Some(ResumeFrom::Id(id.clone())),
            (Some(None), _) => Some(ResumeFrom::Id(self.pick()?)),
            (None, true) => Some(ResumeFrom::Latest),
            (None, false) => None,
        })
    }

    /// `kaji resume` without an id: a numbered list of this directory's
    /// sessions, newest first, and a number read from the terminal.
    fn pick(&self) -> Result<String, String> {
        let dir = match &self.agent.cwd {
            Some(d) => d.clone(),
            None => std::env::current_dir().map_err(|e| e.to_string())?,
        };
        let dir = dir
            .canonicalize()
            .map_err(|e| format!("{}: {e}", dir.display()))?;
        let list = kaji_core::storage::persist::list_for_dir(&crate::paths::kaji_home(), &dir)
            .map_err(|e| e.to_string())?;
        if list.is_empty() {
            return Err(format!("no saved sessions in {}", dir.display()));
        }
        for (n, s) in list.iter().enumerate() {
            eprintln!(
                "{:>3}. {}  {} turns  {}",
                n + 1,
                &s.id[..s.id.len().min(8)],
                s.turns,
                s.title
            );
        }
        eprint!("Resume which session? [1-{}] ", list.len());
        let mut line = String::new();
        std::io::stdin()
            .read_line(&mut line)
            .map_err(|e| e.to_string())?;
        match line.trim().parse::<usize>() {
            Ok(n) if (1..=list.len()).contains(&n) => Ok(list[n - 1].id.clone()),
            _ => Err(format!("no session picked ({:?})", line.trim())),
        }
    }
}

/// What the task side sends to the UI loop.
enum UiMessage {
    /// An event of the running task (or of one of its sub-agents).
    Event(SessionEvent),
    /// An ask, with where its answer goes.
    Ask(AskRequest, oneshot::Sender<AskResponse>),
    /// The task's `run` returned (or its tokio task died).
    Done(Result<TaskOutcome, String>),
    /// `/compact` ended.
    Compacted(Result<(), String>),
    /// A `!command` ended.
    Shell(Result<kaji_core::session::ShellOutcome, String>),
    /// The project's files, for `@` completion (scanned in the
    /// background at start).
    Files(Vec<String>),
}

/// The front end the tasks see: forwards everything to the UI loop.
struct TuiFrontend {
    tx: mpsc::UnboundedSender<UiMessage>,
}

#[async_trait]
impl TaskFrontend for TuiFrontend {
    fn emit(&self, event: SessionEvent) {
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
pub async fn run(mut args: TuiArgs) -> i32 {
    // A person answers here: a reply without a tool ends the turn.
    args.agent.text_reply_default = Some(kaji_core::config::TextReply::Finish);
    // Commands' output is shown while they run.
    args.agent.live_output = true;
    let kaji_home = crate::paths::kaji_home();
    use std::io::IsTerminal;
    if !std::io::stdin().is_terminal() || !std::io::stdout().is_terminal() {
        eprintln!(
            "kaji tui: standard input and output must be a terminal; use `kaji exec` to run a task from a script"
        );
        return 2;
    }
    let resume = match args.resume_from() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("kaji: {e}");
            return 1;
        }
    };
    if !args.agent.trust
        && let Err(e) = ask_trust(&kaji_home, &args.agent)
    {
        eprintln!("kaji: {e}");
        return 1;
    }
    let (tx, mut rx) = mpsc::unbounded_channel();
    let frontend = Arc::new(TuiFrontend { tx: tx.clone() });
    let (mut session, warnings) = match args.agent.build_session(resume, frontend).await {
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
    watch_task_panel(&session);
    // ratatui's init also makes a panic restore the terminal first.
    let code = match ratatui::try_init() {
        Ok(terminal) => {
            // Pasted text arrives whole instead of as keys (an Enter in it
            // would send the prompt).
            let _ = crossterm::execute!(std::io::stdout(), crossterm::event::EnableBracketedPaste);
            let prompt = args.prompt.join(" ");
            let code = event_loop(
                terminal,
                &args.agent,
                &mut session,
                warnings,
                Some(prompt),
                &tx,
                &mut rx,
            )
            .await;
            restore_terminal();
            if let Ok(cost) = &code {
                print_summary(&session, *cost);
            }
            code.map(|_| ())
        }
        Err(e) => {
            restore_terminal();
            Err(anyhow::anyhow!("cannot set up the terminal: {e}"))
        }
    };
    // Leaving with a prompt still running (the terminal went away, an
    // error): abort it and let it kill its commands before going on.
    // Both waits are bounded: a tool or hook that will not let go never
    // keeps the UI from leaving (the watchdog ends what it started).
    if session.is_busy() {
        session.abort();
        let _ = tokio::time::timeout(crate::exec::exit_grace(), async {
            while let Some(message) = rx.recv().await {
                if let UiMessage::Done(_) = message {
                    break;
                }
            }
        })
        .await;
    }
    // No orphans: what the session left running stops with kaji.
    let _ = tokio::time::timeout(crate::exec::exit_grace(), session.shutdown()).await;
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

/// "Do you trust this folder?", on the normal screen before the UI starts,
/// when the project has settings that apply only once it is trusted and
/// the user never answered for it. The answer is recorded either way
/// (`kaji trust` and `kaji trust --revoke` change it later).
fn ask_trust(kaji_home: &std::path::Path, agent: &AgentArgs) -> anyhow::Result<()> {
    let dir = match &agent.cwd {
        Some(dir) => dir.clone(),
        None => std::env::current_dir()?,
    };
    let Some(question) = kaji_core::trust::question(kaji_home, &dir)? else {
        return Ok(());
    };
    eprint!("{}", trust_question_text(&question));
    let mut line = String::new();
    std::io::stdin().read_line(&mut line)?;
    let yes = matches!(line.trim().to_ascii_lowercase().as_str(), "y" | "yes");
    kaji_core::trust::record(kaji_home, &question.project, yes)?;
    Ok(())
}

fn trust_question_text(question: &kaji_core::trust::TrustQuestion) -> String {
    let mut files: Vec<(&std::path::Path, Vec<&str>)> = Vec::new();
    for s in &question.settings {
        match files.iter_mut().find(|(p, _)| *p == s.path.as_path()) {
            Some((_, keys)) => keys.push(s.key),
            None => files.push((s.path.as_path(), vec![s.key])),
        }
    }
    let mut text = format!(
        "Do you trust this folder?\n\n  {}\n\nIts settings run code, widen permissions or redirect traffic, and apply only in a folder you trust:\n",
        question.project.display()
    );
    for (path, keys) in files {
        text.push_str(&format!("  {}: {}\n", path.display(), keys.join(", ")));
    }
    text.push_str(
        "\nTrust it only if you know its files. y: trust it (its settings apply) · n: go on without them\nTrust this folder? [y/N] ",
    );
    text
}

/// What leaving prints to the normal screen: the session, how to resume
/// it, its tokens (and cost when known).
fn summary(session: &Session, cost: Option<f64>) -> String {
    let usage = session.usage();
    let cost = cost.map(|c| format!(", ${c:.4}")).unwrap_or_default();
    let mut out = format!(
        "kaji: session {} · {} input / {} output tokens{cost}\n",
        session.id(),
        usage.input_tokens,
        usage.output_tokens
    );
    if session.session_file().is_some() {
        out.push_str(&format!(
            "  resume it with `kaji -c` (the latest here) or `kaji resume {}`\n",
            session.id()
        ));
    } else {
        out.push_str("  (not saved: --no-session-persistence)\n");
    }
    out
}

fn print_summary(session: &Session, cost: Option<f64>) {
    let _ = write!(std::io::stdout(), "{}", summary(session, cost));
    let _ = std::io::stdout().flush();
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

fn status_info(session: &Session) -> StatusInfo {
    let mode = session.permission_mode();
    let sandbox = session.sandbox_mode_for(mode);
    StatusInfo {
        model: session.provider_config().model.clone(),
        permission_mode: mode.as_str().to_string(),
        sandbox: crate::policy_text::sandbox_short(sandbox),
        sandbox_long: crate::policy_text::sandbox_line(mode, sandbox),
        cwd: session.cwd().display().to_string(),
    }
}

/// `/sessions`: this directory's saved sessions, newest first, numbered.
fn list_sessions(app: &mut App, session: &Session) -> Vec<String> {
    let home = crate::paths::kaji_home();
    match kaji_core::storage::persist::list_for_dir(&home, session.project_dir()) {
        Ok(list) if list.is_empty() => {
            app.note("  no saved sessions in this directory".into());
            Vec::new()
        }
        Ok(list) => {
            let mut ids = Vec::new();
            for (n, s) in list.iter().enumerate() {
                let current = if s.id == session.id() {
                    " (this one)"
                } else {
                    ""
                };
                app.note(format!(
                    "  {:>2}. {}  {} turns  {}{current}",
                    n + 1,
                    &s.id[..s.id.len().min(8)],
                    s.turns,
                    s.title
                ));
                ids.push(s.id.clone());
            }
            ids
        }
        Err(e) => {
            app.error(format!("cannot list the sessions: {e}"));
            Vec::new()
        }
    }
}

enum Switch {
    Resume(String),
    Fork,
    /// `/model NAME`: a fork that goes on with another model.
    ForkWith(String),
}

/// `/resume ID` and `/fork`: ends this session and continues in another,
/// whose transcript replaces this one's on screen.
async fn switch(
    app: &mut App,
    agent: &AgentArgs,
    session: &mut Arc<Session>,
    tx: &mpsc::UnboundedSender<UiMessage>,
    to: Switch,
) {
    let frontend = Arc::new(TuiFrontend { tx: tx.clone() });
    let built = match &to {
        Switch::Resume(id) if id == session.id() => {
            app.note("  this session is the one open".into());
            return;
        }
        Switch::Resume(id) => {
            agent
                .build_session(Some(ResumeFrom::Id(id.clone())), frontend)
                .await
        }
        Switch::Fork | Switch::ForkWith(_) => match agent.session_options() {
            Ok(mut options) => {
                // A fork goes on with this conversation's model, or the
                // one `/model` chose.
                options.model = match &to {
                    Switch::ForkWith(model) => Some(model.clone()),
                    _ => session.chosen_model().or(options.model),
                };
                kaji_core::SessionBuilder::new(crate::paths::kaji_home(), options)
                    .forked_from(session.id(), session.history())
                    .build(frontend)
                    .await
                    .map_err(crate::agent::session_error)
            }
            Err(e) => Err(e.into()),
        },
    };
    match built {
        Ok((next, warnings)) => {
            let old = std::mem::replace(session, next);
            watch_task_panel(session);
            let _ = old.shutdown().await;
            app.switch_session(
                status_info(session),
                earlier_transcript(session),
                &session.history(),
            );
            for w in warnings {
                app.error(w);
            }
            let what = match to {
                Switch::Resume(_) => "resumed",
                Switch::Fork | Switch::ForkWith(_) => "forked into",
            };
            app.note(format!("  — {what} session {} —", session.id()));
        }
        Err(e) => app.error(format!("{e:#}")),
    }
}

/// The prompt with the files it mentions (`@path`) attached, and the
/// images among them.
async fn with_mentions(
    app: &mut App,
    session: &Session,
    prompt: String,
) -> (String, Vec<kaji_protocol::ContentBlock>) {
    let (prompt, mut images, notes) = mentions::attach(&prompt, &session.cwd()).await;
    for note in notes {
        app.note(note);
    }
    // `[Image #N]`: the N-th image pasted with Ctrl+V.
    for n in clipboard::markers(&prompt) {
        let Some(path) = n.checked_sub(1).and_then(|i| app.pasted_images.get(i)) else {
            app.note(format!(
                "  [Image #{n}]: no such pasted image; sent as text"
            ));
            continue;
        };
        match kaji_tools::load_image_file(path) {
            Ok((mime, data)) => images.push(kaji_protocol::ContentBlock::image(mime, data)),
            Err(why) => app.error(format!("[Image #{n}] ({}): {why}", path.display())),
        }
    }
    (prompt, images)
}

/// Ctrl+V / Alt+V: the clipboard's image (saved, `[Image #N]` inserted)
/// or text (inserted); a missing clipboard program is said once.
async fn paste_clipboard(app: &mut App, session: &Session) {
    match clipboard::read().await {
        Ok(clipboard::Clip::Text(text)) => app.on_paste(&text),
        Ok(clipboard::Clip::Image { mime, bytes }) => {
            let n = app.pasted_images.len() + 1;
            let run_dir = crate::paths::kaji_home().join("runs").join(session.id());
            match clipboard::save_image(&run_dir, n, &mime, &bytes) {
                Ok(path) => {
                    app.pasted_images.push(path);
                    app.on_paste(&format!("[Image #{n}]"));
                }
                Err(e) => app.error(e),
            }
        }
        Ok(clipboard::Clip::Empty) => app.notice = Some("the clipboard is empty".into()),
        Err(clipboard::ClipError::NoTool(why)) => {
            if !std::mem::replace(&mut app.clipboard_warned, true) {
                app.error(why);
            }
        }
        Err(clipboard::ClipError::Failed(why)) => app.error(format!("paste: {why}")),
    }
}

/// `/review [BASE]`: the changes' diff to the model, in plan mode (read-only
/// tools) until the review ends, then the mode it was in.
async fn start_review(
    app: &mut App,
    session: &Arc<Session>,
    tx: &mpsc::UnboundedSender<UiMessage>,
    base: Option<String>,
) {
    let (diff, what) = match crate::review_cmd::diff(&session.cwd(), base.as_deref()).await {
        Ok(d) => d,
        Err(e) => return app.error(format!("/review: {e:#}")),
    };
    if diff.trim().is_empty() {
        return app.note(format!("  /review: no changes to review ({what})"));
    }
    let before = session.permission_mode();
    session.set_permission_mode(kaji_core::permissions::PermissionMode::Plan);
    app.note(format!(
        "  /review: reviewing {what}, read-only (plan mode until the review ends)"
    ));
    app.task_started();
    let prompt = crate::review_cmd::review_prompt(&diff, &what, false);
    let session = Arc::clone(session);
    let tx = tx.clone();
    tokio::spawn(async move {
        let done = session
            .submit_with_options(kaji_core::task::new_task_id(), prompt, Default::default())
            .await
            .map_err(|e| e.to_string());
        session.set_permission_mode(before);
        let _ = tx.send(UiMessage::Done(done));
    });
}

/// What the session file holds before its last compaction, as events
/// (empty when it was never compacted or cannot be read).
fn earlier_transcript(session: &Session) -> Vec<TaskEvent> {
    use kaji_core::storage::record::SessionRecord;
    let store = kaji_core::storage::store::SessionStore::new(&crate::paths::kaji_home());
    let Ok(mut loaded) = store.load(session.id()) else {
        return Vec::new();
    };
    let cut = loaded.records.iter().rposition(
        |r| matches!(r, SessionRecord::HistoryReplaced { reason, .. } if reason == "compaction"),
    );
    let Some(cut) = cut else {
        return Vec::new();
    };
    loaded.records.truncate(cut);
    crate::sessions_cmd::transcript_events(&loaded, None)
}

/// Runs a custom command's prompt (with its model and allowed tools) in
/// the background; its end comes back as [`UiMessage::Done`].
fn start_command(
    session: &Arc<Session>,
    tx: &mpsc::UnboundedSender<UiMessage>,
    prompt: String,
    options: kaji_core::PromptOptions,
) {
    let session = Arc::clone(session);
    let tx = tx.clone();
    tokio::spawn(async move {
        let task_id = kaji_core::task::new_task_id();
        let run =
            tokio::spawn(
                async move { session.submit_with_options(task_id, prompt, options).await },
            );
        let outcome = match run.await {
            Ok(Ok(outcome)) => Ok(outcome),
            Ok(Err(e)) => Err(e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        let _ = tx.send(UiMessage::Done(outcome));
    });
}

/// Runs one prompt of the session in the background; its end comes back
/// as [`UiMessage::Done`].
fn start_prompt(
    session: &Arc<Session>,
    tx: &mpsc::UnboundedSender<UiMessage>,
    (prompt, images): (String, Vec<kaji_protocol::ContentBlock>),
) {
    let session = Arc::clone(session);
    let tx = tx.clone();
    tokio::spawn(async move {
        let handle =
            tokio::spawn(async move { session.submit_with_attachments(prompt, images).await });
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
#[allow(clippy::too_many_arguments)]
async fn event_loop(
    mut terminal: ratatui::DefaultTerminal,
    agent: &AgentArgs,
    session: &mut Arc<Session>,
    warnings: Vec<String>,
    first_prompt: Option<String>,
    tx: &mpsc::UnboundedSender<UiMessage>,
    rx: &mut mpsc::UnboundedReceiver<UiMessage>,
) -> anyhow::Result<Option<f64>> {
    let mut agent = agent.clone();
    let mut app = App::new(status_info(session));
    let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
    let dirs = commands::command_dirs(
        session.project_dir(),
        &crate::paths::kaji_home(),
        home.as_deref(),
    );
    let (custom, command_warnings) = commands::load(&dirs);
    // The first code block should not wait for the syntaxes to load.
    tokio::task::spawn_blocking(highlight::warm_up);
    app.custom = custom;
    app.project_dir = Some(session.project_dir().to_path_buf());
    app.trusted = agent.trust
        || kaji_core::trust::is_trusted(&crate::paths::kaji_home(), session.project_dir())
            .unwrap_or(false);
    app.seed_usage(&session.usage());
    if session.is_resuming() {
        // Continued: the status line keeps the cost and the context.
        let info = session.model_info();
        app.cost_usd = info
            .prices
            .map(|p| kaji_llm::pricing::cost_usd(&session.usage(), &p));
        app.context_window = Some(info.context_window).filter(|w| *w > 0);
        app.context_tokens = kaji_core::compaction::estimate_tokens(&session.history());
    }
    {
        let root = session.cwd();
        let tx = tx.clone();
        tokio::task::spawn_blocking(move || {
            let _ = tx.send(UiMessage::Files(mentions::scan(&root, mentions::MAX_FILES)));
        });
    }
    // The ids of the last `/sessions` listing, for `/resume N`, and of
    // the last `/checkpoints` listing, for `/checkpoints restore N`.
    let mut listed: Vec<String> = Vec::new();
    let mut checkpoints_listed: Vec<String> = Vec::new();
    for w in warnings.into_iter().chain(command_warnings) {
        app.error(w);
    }
    if session.is_resuming() {
        app.show_earlier(earlier_transcript(session));
        app.show_history(&session.history());
    } else {
        let cwd = session.cwd();
        let rules = kaji_core::rules::RuleFiles::discover_with_home(
            &crate::paths::kaji_home(),
            &cwd,
            home.as_deref(),
        );
        let names: Vec<String> = rules
            .files
            .iter()
            .map(|f| {
                f.path
                    .strip_prefix(&cwd)
                    .unwrap_or(&f.path)
                    .display()
                    .to_string()
            })
            .collect();
        app.note(commands::first_screen_hint(&names));
    }
    if let Some(prompt) = first_prompt.filter(|p| !p.trim().is_empty()) {
        let prompt = with_mentions(&mut app, session, prompt).await;
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
    // Signals received; past the grace after the first, the UI leaves
    // whether or not the aborted prompt has ended.
    let mut signals = 0u32;
    let quit_grace = tokio::time::sleep(std::time::Duration::from_secs(3600 * 24));
    tokio::pin!(quit_grace);
    loop {
        terminal.draw(|f| render::draw(f, &mut app))?;
        if std::mem::take(&mut app.bell) {
            let _ = std::io::stdout().write_all(b"\x07");
            let _ = std::io::stdout().flush();
        }
        if quitting && !app.running {
            return Ok(app.cost_usd);
        }
        if signals >= 2 {
            // A second signal leaves at once.
            return Ok(app.cost_usd);
        }
        tokio::select! {
            key = keys.next() => match key {
                Some(Ok(Event::Key(key))) => match app.on_key(key) {
                    Action::None => {}
                    Action::Submit(prompt) => {
                        let prompt = with_mentions(&mut app, session, prompt).await;
                        app.task_started();
                        start_prompt(session, tx, prompt);
                    }
                    Action::SubmitCommand(prompt, mut options) => {
                        let (prompt, images) = with_mentions(&mut app, session, prompt).await;
                        options.attachments = images;
                        app.task_started();
                        start_command(session, tx, prompt, options);
                    }
                    Action::Clear => session.clear(),
                    Action::Sessions => listed = list_sessions(&mut app, session),
                    Action::Resume(None) => {
                        listed = list_sessions(&mut app, session);
                        app.note("  type /resume N (or an id) to continue one".into());
                    }
                    Action::Resume(Some(which)) => {
                        let id = match which.parse::<usize>() {
                            Ok(n) if (1..=listed.len()).contains(&n) => listed[n - 1].clone(),
                            _ => which,
                        };
                        switch(&mut app, &agent, session, tx, Switch::Resume(id)).await;
                    }
                    Action::Fork => switch(&mut app, &agent, session, tx, Switch::Fork).await,
                    Action::Compact(instructions) => {
                        app.task_started();
                        let session = Arc::clone(session);
                        let tx = tx.clone();
                        tokio::spawn(async move {
                            let instructions = Some(instructions).filter(|i| !i.is_empty());
                            let done = session.compact(instructions).await.map_err(|e| e.to_string());
                            let _ = tx.send(UiMessage::Compacted(done));
                        });
                    }
                    Action::Mode(mode) => {
                        session.set_permission_mode(mode);
                        app.status = status_info(session);
                        app.note(format!(
                            "  permission mode: {} · {}",
                            mode.as_str(),
                            app.status.sandbox_long
                        ));
                    }
                    Action::Reasoning(level) => match session.set_reasoning(level) {
                        Ok(()) => {
                            agent.reasoning = Some(level.to_string());
                            app.note(format!("  reasoning: {level} from the next prompt on"));
                        }
                        Err(e) => app.error(format!("/reasoning: {e}")),
                    },
                    Action::Model(model) => {
                        // The Session has no model setter: continue in a
                        // fork of this conversation built with the model
                        // (its file records it, so a resume keeps it).
                        let before = session.id().to_string();
                        switch(&mut app, &agent, session, tx, Switch::ForkWith(model.clone())).await;
                        if session.id() != before {
                            app.note(format!("  model: {model} from the next prompt on"));
                        }
                    }
                    Action::Agents(local::AgentsCommand::List) => app.note(local::agents_text(
                        &session.runtime().list(),
                        &app.finished_agents,
                        &session.subagent_usage(),
                    )),
                    Action::Agents(command) => {
                        match local::agents_action(session.runtime(), &command).await {
                            Ok(text) => app.note(text),
                            Err(e) => app.error(format!("/agents: {e}")),
                        }
                    }
                    Action::Checkpoints(command) => {
                        let home = crate::paths::kaji_home();
                        match local::checkpoints(&home, &session.cwd(), command, &mut checkpoints_listed).await {
                            Ok(text) => app.note(text),
                            Err(e) => app.error(format!("/checkpoints: {e}")),
                        }
                    }
                    Action::Shell(command) => {
                        app.on_event(TaskEvent::Say {
                            id: u64::MAX,
                            kind: kaji_protocol::SayKind::UserFeedback,
                            text: format!("!{command}"),
                            partial: false,
                            payload: None,
                        });
                        app.task_started();
                        let session = Arc::clone(session);
                        let tx = tx.clone();
                        tokio::spawn(async move {
                            let done = session.run_shell(&command).await.map_err(|e| e.to_string());
                            let _ = tx.send(UiMessage::Shell(done));
                        });
                    }
                    Action::ShellThenSubmit(commands, prompt, options) => {
                        app.task_started();
                        let session = Arc::clone(session);
                        let tx = tx.clone();
                        tokio::spawn(async move {
                            for command in commands {
                                if let Err(e) = session.run_shell(&command).await {
                                    let _ = tx.send(UiMessage::Done(Err(e.to_string())));
                                    return;
                                }
                            }
                            let done = session
                                .submit_with_options(kaji_core::task::new_task_id(), prompt, options)
                                .await
                                .map_err(|e| e.to_string());
                            let _ = tx.send(UiMessage::Done(done));
                        });
                    }
                    Action::RewindMenu => app.open_rewind(session.user_prompts()),
                    Action::Rewind(index) => match session.rewind(index) {
                        Ok(prompt) => {
                            app.switch_session(status_info(session), earlier_transcript(session), &session.history());
                            app.rewound(prompt);
                        }
                        Err(e) => app.error(format!("rewind: {e}")),
                    },
                    Action::RestoreFiles(id) => {
                        let home = crate::paths::kaji_home();
                        let restored = match kaji_core::checkpoints::CheckpointStore::open(&home, &session.cwd()) {
                            Ok(store) => local::restore(&store, &id).await,
                            Err(e) => Err(e.to_string()),
                        };
                        match restored {
                            Ok(text) => app.note(text),
                            Err(e) => app.error(format!("restore: {e}")),
                        }
                    }
                    Action::PasteClipboard => paste_clipboard(&mut app, session).await,
                    Action::Review(base) => start_review(&mut app, session, tx, base).await,
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
                None => return Ok(app.cost_usd),
            },
            message = rx.recv() => {
                // Drain what is queued so one redraw covers a burst of
                // deltas.
                let mut next = message;
                while let Some(message) = next {
                    match message {
                        UiMessage::Event(event) => app.on_session_event(event),
                        UiMessage::Ask(request, reply) => {
                            app.on_ask(request, reply);
                        }
                        UiMessage::Files(files) => app.files = files,
                        UiMessage::Shell(done) => {
                            app.task_ended();
                            app.bell = true;
                            match done {
                                Ok(outcome) if outcome.denied => {
                                    app.note("  not run: the conversation is unchanged".into())
                                }
                                Ok(_) => app.note("  (the command and its output are in the conversation)".into()),
                                Err(e) => app.error(format!("!command: {e}")),
                            }
                            if !quitting && let Some(prompt) = app.next_queued() {
                                let prompt = with_mentions(&mut app, session, prompt).await;
                                app.task_started();
                                start_prompt(session, tx, prompt);
                            }
                        }
                        UiMessage::Compacted(done) => {
                            app.task_ended();
                            if let Err(e) = done {
                                app.error(format!("/compact: {e}"));
                            }
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
                                app.error(format!("the task died: {e}"));
                            }
                            app.task_ended();
                            app.background = session.background_tasks();
                            if !quitting && let Some(prompt) = app.next_queued() {
                                let prompt = with_mentions(&mut app, session, prompt).await;
                                app.task_started();
                                start_prompt(session, tx, prompt);
                            }
                        }
                    }
                    next = rx.try_recv().ok();
                }
            }
            _ = tick.tick(), if app.running => {}
            _ = &mut quit_grace, if signals > 0 => return Ok(app.cost_usd),
            // SIGTERM, SIGHUP (the terminal closed) and a SIGINT sent from
            // outside: abort the task and quit.
            _ = term.recv() => {
                quitting = true;
                session.abort();
                signals += 1;
                if signals == 1 {
                    quit_grace
                        .as_mut()
                        .reset(tokio::time::Instant::now() + crate::exec::exit_grace());
                }
            }
            _ = hangup.recv() => {
                quitting = true;
                session.abort();
                signals += 1;
                if signals == 1 {
                    quit_grace
                        .as_mut()
                        .reset(tokio::time::Instant::now() + crate::exec::exit_grace());
                }
            }
            _ = interrupt.recv() => {
                quitting = true;
                session.abort();
                signals += 1;
                if signals == 1 {
                    quit_grace
                        .as_mut()
                        .reset(tokio::time::Instant::now() + crate::exec::exit_grace());
                }
            }
        }
    }
}

/// The task panel's watcher of the open session (cancelled when another
/// session is opened).
static TASK_PANEL: std::sync::Mutex<Option<tokio_util::sync::CancellationToken>> =
    std::sync::Mutex::new(None);

/// Keeps the task panel current: every change of the session's task list,
/// made anywhere (another process, another machine on a database list),
/// reaches the panel; the list is polled every 200 ms where it cannot be
/// listened to.
fn watch_task_panel(session: &Arc<Session>) {
    let token = tokio_util::sync::CancellationToken::new();
    if let Ok(mut slot) = TASK_PANEL.lock()
        && let Some(old) = slot.replace(token.clone())
    {
        old.cancel();
    }
    session.watch_task_list(std::time::Duration::from_millis(200), token);
}
