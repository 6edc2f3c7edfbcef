//! The state of the interactive terminal UI, without a terminal.
//!
//! [`App`] turns [`TaskEvent`]s into transcript entries and key presses
//! into edits of the input line, answers to asks and [`Action`]s for the
//! event loop. It never draws and never touches the terminal or a task:
//! every transition here is testable with plain values.

use std::collections::{HashMap, VecDeque};

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use kaji_core::session::UserPrompt;
use kaji_core::{AskRequest, PermissionMode};
use kaji_protocol::{
    AskKind, AskPayload, AskResponse, BackgroundTask, SayKind, SayPayload, StateUpdate, TaskEvent,
    TaskListItem, TaskStatus, TodoItem, TodoStatus,
};
use tokio::sync::oneshot;

pub use super::action::Action;
use super::commands::{self, CustomCommand};
use super::input::InputLine;
use super::rewind::{self, Rewind};

/// How a transcript entry looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryStyle {
    /// The user's prompt or feedback.
    User,
    /// Model text.
    Text,
    /// Model reasoning (dimmed).
    Reasoning,
    /// A tool call (`⏺ …`).
    Tool,
    /// A tool's one-line result summary.
    ToolResult,
    /// A failed or refused tool call.
    ToolError,
    /// An error.
    Error,
    /// The completion result.
    Completion,
    /// Side notes: command output, todo lists, hook output, answers.
    Note,
    /// A unified diff (an Edit or Write call), coloured by line.
    Diff,
    /// A command's output while it runs (its last lines are shown; it is
    /// emptied when the result arrives).
    Live,
}

/// One block of the transcript.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// How it looks.
    pub style: EntryStyle,
    /// Its text, already prefixed (`⏺ `, `> `, …); may span lines.
    pub text: String,
    /// What opening it shows (a tool's whole output), if anything.
    pub detail: Option<String>,
}

impl Entry {
    /// An entry without detail.
    pub fn new(style: EntryStyle, text: String) -> Self {
        Self {
            style,
            text,
            detail: None,
        }
    }
}

/// Where an unanswered ask stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AskStage {
    /// Waiting for `y`, `a` or `n`.
    Choose,
    /// `n` was pressed: the input line holds optional feedback.
    DenyFeedback,
    /// The answer is typed text (followup questions, completion feedback).
    Text,
}

/// An ask the task waits on.
#[derive(Debug)]
pub struct PendingAsk {
    /// The question.
    pub request: AskRequest,
    /// Where the answer goes.
    reply: Option<oneshot::Sender<AskResponse>>,
    /// What the keys do now.
    pub stage: AskStage,
}

/// A Ctrl-R search of the prompt history.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HistorySearch {
    /// What is searched for.
    pub query: String,
    /// How many newer matches to pass over (each Ctrl-R adds one).
    pub skip: usize,
}

/// Facts shown in the status line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StatusInfo {
    /// The model name.
    pub model: String,
    /// The permission mode.
    pub permission_mode: String,
    /// The sandbox commands run in (`sandbox: workspace-write`,
    /// `sandbox off`).
    pub sandbox: String,
    /// What that means, for `/status` (`sandbox: workspace-write —
    /// commands run without asking`).
    pub sandbox_long: String,
    /// The working directory.
    pub cwd: String,
}

/// The whole UI state.
#[derive(Debug, Default)]
pub struct App {
    /// The transcript, oldest first.
    pub entries: Vec<Entry>,
    /// Message id of the running task → index in `entries`.
    by_id: HashMap<u64, usize>,
    /// Tool calls whose arguments are streaming (partial asks): message id
    /// → (tool name, call id).
    streaming_calls: HashMap<u64, (String, String)>,
    /// The input line.
    pub input: InputLine,
    /// Prompts sent this session, oldest first (Up/Down recall them).
    pub history: Vec<String>,
    /// Which history entry the input shows, while browsing it.
    history_pos: Option<usize>,
    /// The ask waiting for an answer, if any.
    pub pending: Option<PendingAsk>,
    /// Whether a task is running.
    pub running: bool,
    /// Lines scrolled up from the bottom; 0 follows the transcript.
    pub scroll_up: u16,
    /// Height of the transcript view, for paging.
    pub page_height: u16,
    /// Status line facts.
    pub status: StatusInfo,
    /// Model turns of the running (or last) task.
    pub turns: u32,
    /// Input tokens over the session.
    pub input_tokens: u64,
    /// Output tokens over the session.
    pub output_tokens: u64,
    /// A short notice for the status area (cleared by the next key).
    pub notice: Option<String>,
    /// When the running task started.
    pub started_at: Option<std::time::Instant>,
    /// Cost in USD over the session, when the model's prices are known.
    pub cost_usd: Option<f64>,
    /// The context the conversation fills, after the last round.
    pub context_tokens: u64,
    /// The model's context window, when known.
    pub context_window: Option<u64>,
    /// Custom slash commands (`.kaji/commands/*.md`, …).
    pub custom: Vec<CustomCommand>,
    /// Whether the project is trusted (a custom command's `!` lines run).
    pub trusted: bool,
    /// The project directory (its command files need trust).
    pub project_dir: Option<std::path::PathBuf>,
    /// The todo checklist as it stands.
    pub todo: Vec<TodoItem>,
    /// The shared task list as it stands.
    pub task_list: Vec<TaskListItem>,
    /// Background tasks last reported.
    pub background: Vec<BackgroundTask>,
    /// Prompts typed while a task ran, sent in order when it ends.
    pub queued: VecDeque<String>,
    /// A first Ctrl-C on an empty input was pressed: a second quits.
    quit_armed: bool,
    /// A first Esc on an idle input was pressed: a second opens the
    /// rewind picker.
    esc_armed: bool,
    /// Esc Esc: the rewind picker or the offer to restore files.
    pub rewind: Option<Rewind>,
    /// The terminal bell is due (an ask waits, a task ended).
    pub bell: bool,
    /// Whether tool results show their whole output (Ctrl-O).
    pub expanded: bool,
    /// The project's files, for `@` completion.
    pub files: Vec<String>,
    /// Ctrl-R: the history search under way.
    pub search: Option<HistorySearch>,
    /// Rendered Markdown by entry index (text entries only grow between
    /// replacements, which drop their rendering).
    pub markdown_cache: HashMap<usize, super::markdown::Incremental>,
    /// Images pasted with Ctrl+V: `[Image #N]` is the N-th.
    pub pasted_images: Vec<std::path::PathBuf>,
    /// Whether the user has been told that no clipboard program is there.
    pub clipboard_warned: bool,
    /// What a call does in full (its tool's preview: the whole command),
    /// by call id, until its `tool` say folds it under its line.
    previews: HashMap<String, String>,
    /// Sub-agents by the id of the `Agent` call that started them: their
    /// folded entry and what it shows.
    subagents: HashMap<String, (usize, super::nesting::SubagentView)>,
    /// Sub-agents of this session that finished, newest last (`/agents`).
    pub finished_agents: Vec<String>,
}

impl App {
    /// An empty UI with this status line.
    pub fn new(status: StatusInfo) -> Self {
        Self {
            status,
            page_height: 10,
            ..Self::default()
        }
    }

    /// A task is starting: message ids restart with it.
    pub fn task_started(&mut self) {
        self.by_id.clear();
        self.streaming_calls.clear();
        self.running = true;
        self.started_at = Some(std::time::Instant::now());
        self.turns = 0;
        self.scroll_up = 0;
    }

    /// The task is over (its `finished` event has been handled, or it died).
    pub fn task_ended(&mut self) {
        self.running = false;
        // An unanswered ask of a finished task can no longer be answered.
        self.pending = None;
    }

    fn push(&mut self, style: EntryStyle, text: String) -> usize {
        let text = kaji_protocol::terminal::sanitize_terminal(&text, false);
        self.entries.push(Entry::new(style, text));
        self.entries.len() - 1
    }

    /// Sends a prompt, or queues it while a task runs.
    fn send(&mut self, prompt: String) -> Action {
        if self.running {
            self.note(format!("  queued (sent when this task ends): {prompt}"));
            self.queued.push_back(prompt);
            return Action::None;
        }
        Action::Submit(prompt)
    }

    /// Esc aborts the task, not what was queued behind it: queued prompts
    /// go back into the input box, unsent.
    fn unqueue(&mut self) {
        if self.queued.is_empty() {
            return;
        }
        let mut texts: Vec<String> = self.queued.drain(..).collect();
        if !self.input.text().is_empty() {
            texts.push(self.input.text().to_string());
        }
        self.input.set(&texts.join("\n"));
        self.note("  the queued prompt is back in the input box, unsent (Enter sends it)".into());
    }

    /// The next queued prompt, once no task runs.
    pub fn next_queued(&mut self) -> Option<String> {
        if self.running {
            return None;
        }
        self.queued.pop_front()
    }

    /// The slash commands matching what is typed, while the input is one
    /// word starting with `/` (the completion menu).
    pub fn menu(&self) -> Vec<(String, String)> {
        let text = self.input.text();
        if self.pending.is_some() || !text.starts_with('/') || text.contains(char::is_whitespace) {
            return Vec::new();
        }
        commands::matches(text, &self.custom)
    }

    /// The files matching the `@word` being typed (the mention menu).
    pub fn file_menu(&self) -> Vec<String> {
        if self.pending.is_some() || self.search.is_some() {
            return Vec::new();
        }
        match super::mentions::typing(self.input.before_cursor()) {
            Some(query) => super::mentions::matches(&self.files, query, 8),
            None => Vec::new(),
        }
    }

    /// The newest history entry the search finds, past `skip` newer ones.
    pub fn search_match(&self) -> Option<&str> {
        let search = self.search.as_ref()?;
        self.history
            .iter()
            .rev()
            .filter(|h| h.contains(&search.query))
            .nth(search.skip)
            .map(String::as_str)
    }

    /// Keys while Ctrl-R searches: typing narrows, Ctrl-R goes older,
    /// Enter or Tab takes the match into the input, Esc leaves it as it was.
    fn on_search_key(&mut self, key: KeyEvent) {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        let Some(search) = self.search.as_mut() else {
            return;
        };
        match key.code {
            KeyCode::Char('r') if ctrl => search.skip += 1,
            KeyCode::Char('g') if ctrl => self.search = None,
            KeyCode::Esc => self.search = None,
            KeyCode::Enter | KeyCode::Tab | KeyCode::Right => {
                if let Some(found) = self.search_match().map(str::to_string) {
                    self.input.set(&found);
                }
                self.search = None;
            }
            KeyCode::Backspace => {
                search.query.pop();
                search.skip = 0;
            }
            KeyCode::Char(c) if !ctrl => {
                search.query.push(c);
                search.skip = 0;
            }
            _ => {}
        }
        // Past the oldest match: stay on it.
        if let Some(search) = &self.search
            && search.skip > 0
            && self.search_match().is_none()
            && let Some(s) = self.search.as_mut()
        {
            s.skip -= 1;
        }
    }

    /// Handles a slash command locally: it never reaches the model unless
    /// it is a custom command, whose expansion is sent as the prompt.
    fn slash(&mut self, text: &str) -> Action {
        let (name, args) = match text.split_once(char::is_whitespace) {
            Some((n, a)) => (n, a.trim()),
            None => (text, ""),
        };
        let busy = || Some("a task is running: wait, or Esc to abort it".to_string());
        // A project's or user's own /review (or /init) wins over the
        // built-in, which stays reachable as /builtin:review.
        let Some(name) = commands::builtin_of(name, &self.custom) else {
            return self.custom_command(name, args);
        };
        match name {
            "/exit" | "/quit" => return Action::Quit,
            "/help" => self.note(commands::help(&self.custom)),
            "/cost" => self.note(self.cost_text()),
            "/status" => self.note(self.status_text()),
            "/todo" => self.note(self.todo_text()),
            "/tasks" => self.note(self.tasks_text()),
            "/mode" => match args.parse::<PermissionMode>() {
                Ok(mode) => return Action::Mode(mode),
                Err(_) => self.error(format!(
                    "/mode {args:?}: not a permission mode (default, accept-edits, plan, yolo)"
                )),
            },
            "/reasoning" => match args.parse::<kaji_llm::Reasoning>() {
                Ok(level) => return Action::Reasoning(level),
                Err(e) => self.error(format!("/reasoning: {e}")),
            },
            "/model" if args.is_empty() => self.note(format!(
                "  model: {} (/model NAME to change)",
                self.status.model
            )),
            "/model" | "/clear" | "/sessions" | "/resume" | "/fork" | "/compact"
                if self.running =>
            {
                self.notice = busy();
            }
            "/model" => return Action::Model(args.to_string()),
            "/compact" => return Action::Compact(args.to_string()),
            "/clear" => {
                self.note("— conversation cleared: the next prompt starts a new one —".into());
                return Action::Clear;
            }
            "/sessions" => return Action::Sessions,
            "/resume" => return Action::Resume((!args.is_empty()).then(|| args.to_string())),
            "/fork" => return Action::Fork,
            "/agents" => match super::local::parse_agents(args) {
                Ok(command) => return Action::Agents(command),
                Err(e) => self.error(e),
            },
            "/checkpoints" => match super::local::parse_checkpoints(args) {
                Ok(super::local::CheckpointsCommand::Restore(_)) if self.running => {
                    self.notice = busy();
                }
                Ok(command) => return Action::Checkpoints(command),
                Err(e) => self.error(e),
            },
            "/init" => return self.send(super::local::INIT_PROMPT.to_string()),
            "/review" if self.running => self.notice = busy(),
            "/review" => return Action::Review((!args.is_empty()).then(|| args.to_string())),
            _ => return self.custom_command(name, args),
        }
        Action::None
    }

    /// A custom command: its expansion is the prompt; its `` !`cmd` ``
    /// commands run first, through the session, in a trusted project.
    fn custom_command(&mut self, name: &str, args: &str) -> Action {
        let Some(command) = commands::find(&self.custom, &name[1..]).cloned() else {
            self.error(format!("unknown command {name} (/help lists the commands)"));
            return Action::None;
        };
        let options = self.command_options(&command);
        let special = options.model.is_some() || options.allow_source.is_some();
        let root = self.project_dir.clone().unwrap_or_default();
        let expansion = commands::expand(&command, args, &root, &root);
        for note in &expansion.notes {
            self.note(format!("  {name}: {note}"));
        }
        let prompt = expansion.prompt;
        if !expansion.shell.is_empty() {
            if self.trusted {
                if self.running {
                    self.notice = Some("a task is running: wait, or Esc to abort it".into());
                    return Action::None;
                }
                return Action::ShellThenSubmit(expansion.shell, prompt, options);
            }
            self.note(format!(
                "  {name}: {} !`…` command(s) not run: running commands from a command file needs a trusted project",
                expansion.shell.len()
            ));
        }
        if prompt.is_empty() {
            self.error(format!("{name}: the command expands to nothing"));
            return Action::None;
        }
        if !special {
            return self.send(prompt);
        }
        if self.running {
            self.notice = Some("a task is running: wait, or Esc to abort it".into());
            return Action::None;
        }
        Action::SubmitCommand(prompt, options)
    }

    /// A custom command's `model` and `allowed-tools` for its prompt. A
    /// project's command file allows tools only in a trusted project (a
    /// repository could ship one); the user's own always.
    fn command_options(&mut self, command: &commands::CustomCommand) -> kaji_core::PromptOptions {
        let mut options = kaji_core::PromptOptions {
            model: command.model.clone().filter(|m| !m.trim().is_empty()),
            ..kaji_core::PromptOptions::default()
        };
        let Some(tools) = command.allowed_tools.clone() else {
            return options;
        };
        let from_project = self
            .project_dir
            .as_deref()
            .is_some_and(|p| command.path.starts_with(p));
        if from_project && !self.trusted {
            self.note(format!(
                "  /{}: its allowed-tools are not applied: a project's command file allows tools only in a trusted project",
                command.name
            ));
            return options;
        }
        options.allow = tools;
        options.allow_source = Some(kaji_policy::RuleSource::Command(command.path.clone()));
        options
    }

    /// `/cost`.
    /// `/status`: model, permission mode, sandbox, directory, usage.
    fn status_text(&self) -> String {
        format!(
            "  model: {}\n  permission mode: {}\n  {}\n  directory: {}\n{}",
            self.status.model,
            self.status.permission_mode,
            self.status.sandbox_long,
            self.status.cwd,
            self.cost_text()
        )
    }

    fn cost_text(&self) -> String {
        let cost = match self.cost_usd {
            Some(c) => format!("${c:.4}"),
            None => "unknown (no prices for this model)".into(),
        };
        format!(
            "  tokens: {} input, {} output · cost: {cost}",
            self.input_tokens, self.output_tokens
        )
    }

    /// `/todo`: the checklist.
    fn todo_text(&self) -> String {
        if self.todo.is_empty() {
            return "  no todo list yet".into();
        }
        let lines: Vec<String> = self
            .todo
            .iter()
            .map(|t| format!("  {}", todo_line(t)))
            .collect();
        lines.join("\n")
    }

    /// `/tasks`: the task list and the background tasks.
    fn tasks_text(&self) -> String {
        let mut lines: Vec<String> = self
            .task_list
            .iter()
            .map(|t| format!("  {}", task_line(t)))
            .collect();
        lines.extend(
            self.background
                .iter()
                .map(|b| format!("  {}", background_line(b))),
        );
        if lines.is_empty() {
            return "  no tasks and no background work".into();
        }
        lines.join("\n")
    }

    /// Typed state updates go to the panels, not the transcript; `true`
    /// when the payload was handled so.
    fn on_say_payload(&mut self, _id: u64, payload: Option<&SayPayload>) -> bool {
        match payload {
            Some(SayPayload::Update(StateUpdate::Todo { items })) => self.todo = items.clone(),
            Some(SayPayload::Update(StateUpdate::TaskList { tasks })) => {
                self.task_list = tasks.clone()
            }
            Some(SayPayload::Background { tasks }) => self.background = tasks.clone(),
            _ => return false,
        }
        true
    }

    /// A call whose preview says more than its one-line title (a
    /// multi-line command): folded under its `⏺` line, whole with Ctrl-O.
    /// Calls with a diff show the diff instead.
    fn fold_preview(&mut self, say_id: u64, preview: Option<&str>) {
        let Some(preview) = preview else {
            return;
        };
        let more = preview.lines().count().saturating_sub(1);
        let Some(&i) = self.by_id.get(&say_id) else {
            return;
        };
        if more == 0 {
            return;
        }
        let entry = &mut self.entries[i];
        let first = entry.text.lines().next().unwrap_or("").to_string();
        entry.text = format!("{first} (+{more} lines, Ctrl-O)");
        let body = kaji_protocol::terminal::sanitize_terminal(preview, false);
        entry.detail = Some(format!("{first}\n{body}"));
    }

    /// Seeds the counters from a resumed session's totals.
    pub fn seed_usage(&mut self, usage: &kaji_protocol::Usage) {
        self.input_tokens = usage.input_tokens;
        self.output_tokens = usage.output_tokens;
    }

    /// Adds a note to the transcript.
    pub fn note(&mut self, text: String) {
        self.push(EntryStyle::Note, text);
    }

    /// Adds an error to the transcript.
    pub fn error(&mut self, text: String) {
        self.push(EntryStyle::Error, format!("! {text}"));
    }

    /// Starts over with another session's transcript (after `/resume`,
    /// `/fork`): what it said before its last compaction, dimmed
    /// ([`App::show_earlier`]), then its history.
    pub fn switch_session(
        &mut self,
        status: StatusInfo,
        earlier: Vec<TaskEvent>,
        history: &[kaji_protocol::Message],
    ) {
        self.entries.clear();
        self.markdown_cache.clear();
        self.by_id.clear();
        self.status = status;
        self.show_earlier(earlier);
        for event in kaji_core::session::transcript::history_events(history) {
            self.on_event(event);
        }
    }

    /// Shows, dimmed, what a resumed session said before its conversation
    /// was compacted (from its session file); the compacted history
    /// follows ([`App::show_history`]).
    pub fn show_earlier(&mut self, events: Vec<TaskEvent>) {
        if events.is_empty() {
            return;
        }
        let from = self.entries.len();
        self.note("── earlier conversation, before it was compacted ──".into());
        for event in events {
            self.on_event(event);
        }
        for entry in &mut self.entries[from..] {
            entry.style = EntryStyle::Note;
        }
        // The history's events number their messages from 1 again.
        self.by_id.clear();
        self.previews.clear();
        self.running = false;
        self.bell = false;
    }

    /// Shows a conversation loaded from disk, as it was shown live.
    pub fn show_history(&mut self, history: &[kaji_protocol::Message]) {
        for event in kaji_core::session::transcript::history_events(history) {
            self.on_event(event);
        }
        self.push(
            EntryStyle::Note,
            "  (resumed: the conversation above was restored)".into(),
        );
    }

    /// A tool call whose arguments are still streaming: shown growing
    /// (deltas append to it) until its `tool` say replaces it.
    /// Its header is the tool's title for the arguments so far; the
    /// partial ask comes again, whole, when the title changes.
    fn on_partial_ask(&mut self, id: u64, text: &str, payload: Option<&AskPayload>) {
        if let Some(AskPayload::ToolArguments {
            tool,
            title,
            tool_use_id,
        }) = payload
        {
            self.upsert(id, EntryStyle::Tool, format!("⏺ {title} …\n{text}"));
            self.streaming_calls
                .insert(id, (tool.clone(), tool_use_id.clone()));
        }
    }

    /// A call that was shown streaming but never announced (an unknown
    /// tool, unusable arguments) ends with its result, found by the call's
    /// id: only its tool's name stays.
    fn close_streamed_call(&mut self, call_id: &str) {
        let Some(id) = self
            .streaming_calls
            .iter()
            .find(|(_, (_, call))| call == call_id)
            .map(|(id, _)| *id)
        else {
            return;
        };
        if let Some((tool, _)) = self.streaming_calls.remove(&id) {
            self.upsert(id, EntryStyle::Tool, format!("⏺ {tool}"));
        }
    }

    /// Adds or replaces the entry of message `id`. Control and escape
    /// sequences from the model or tools are dropped first.
    fn upsert(&mut self, id: u64, style: EntryStyle, text: String) {
        let text = kaji_protocol::terminal::sanitize_terminal(&text, false);
        match self.by_id.get(&id) {
            Some(&i) => {
                self.entries[i] = Entry::new(style, text);
                self.markdown_cache.remove(&i);
            }
            None => {
                let i = self.push(style, text);
                self.by_id.insert(id, i);
            }
        }
    }

    /// Handles one event of the session: the main agent's go into the
    /// transcript, a sub-agent's fold under its `Agent` call.
    pub fn on_session_event(&mut self, event: kaji_protocol::SessionEvent) {
        if event.agent == "main" {
            return self.on_event(event.event);
        }
        if let TaskEvent::Usage(report) = &event.event {
            // The session's totals include its sub-agents'.
            self.input_tokens += report.usage.input_tokens;
            self.output_tokens += report.usage.output_tokens;
            if let Some(c) = report.cost_usd {
                self.cost_usd = Some(self.cost_usd.unwrap_or(0.0) + c);
            }
        }
        let key = event
            .parent_tool_use_id
            .clone()
            .unwrap_or_else(|| event.agent.clone());
        let (i, view) = match self.subagents.remove(&key) {
            Some(entry) => entry,
            None => {
                let i = self.push(EntryStyle::Note, String::new());
                (i, super::nesting::SubagentView::new(&event.agent))
            }
        };
        let mut view = view;
        view.on_event(&event.event);
        if matches!(event.event, TaskEvent::Finished { .. }) {
            self.finished_agents.push(view.summary());
        }
        if let Some(entry) = self.entries.get_mut(i) {
            entry.text = view.line();
            entry.detail = Some(view.detail());
        }
        self.subagents.insert(key, (i, view));
    }

    /// Handles one event of the running task.
    pub fn on_event(&mut self, event: TaskEvent) {
        match event {
            TaskEvent::Say {
                id,
                kind,
                text,
                payload,
                ..
            } => {
                if self.on_say_payload(id, payload.as_ref()) {
                    return;
                }
                let (style, text) = match kind {
                    SayKind::UserFeedback => (EntryStyle::User, user_prompt_text(&text)),
                    SayKind::Text => (EntryStyle::Text, text),
                    SayKind::Reasoning => (EntryStyle::Reasoning, text),
                    SayKind::Tool => (EntryStyle::Tool, format!("⏺ {text}")),
                    SayKind::Error | SayKind::ApiReqRetried => {
                        (EntryStyle::Error, format!("! {text}"))
                    }
                    SayKind::CompletionResult => (EntryStyle::Completion, format!("✓ {text}")),
                    SayKind::ApiReqStarted => {
                        self.turns += 1;
                        return;
                    }
                    SayKind::CommandOutput => (EntryStyle::Live, text),
                    SayKind::TaskList | SayKind::Todo | SayKind::Info => (EntryStyle::Note, text),
                    SayKind::ContextCompacted => (EntryStyle::Note, format!("── {text} ──")),
                };
                // A call shown while it streamed gets its diff now.
                let streamed = self.streaming_calls.remove(&id).is_some();
                let new = streamed || !self.by_id.contains_key(&id);
                let preview = match &payload {
                    Some(SayPayload::Tool { id: call, .. }) => self.previews.remove(call),
                    _ => None,
                };
                self.upsert(id, style, text);
                // One diff per edit, with context and line numbers, asked
                // or not; a long command folded under its line.
                if new && let Some(SayPayload::Tool { view, .. }) = payload {
                    match super::diff::of_call(view.as_ref(), preview.as_deref()) {
                        Some(diff) => {
                            self.push(EntryStyle::Diff, diff);
                        }
                        None => self.fold_preview(id, preview.as_deref()),
                    }
                }
            }
            TaskEvent::Delta { id, text } => {
                if let Some(&i) = self.by_id.get(&id) {
                    let text = kaji_protocol::terminal::sanitize_terminal(&text, false);
                    self.entries[i].text.push_str(&text);
                }
            }
            TaskEvent::Ask {
                id,
                kind,
                text,
                partial,
                payload,
            } => {
                // Tool and command asks repeat the `⏺` line already shown;
                // the completion ask repeats the result.
                if partial {
                    self.on_partial_ask(id, &text, payload.as_ref());
                    return;
                }
                match kind {
                    AskKind::Followup => {
                        let mut shown = format!("? {text}");
                        for (i, option) in followup_options(payload.as_ref()).iter().enumerate() {
                            shown.push_str(&format!("\n  {}. {option}", i + 1));
                        }
                        self.upsert(id, EntryStyle::Note, shown);
                    }
                    AskKind::Plan => self.upsert(id, EntryStyle::Text, format!("Plan:\n{text}")),
                    // The whole command or the diff the approval is for.
                    AskKind::Tool | AskKind::Command => {
                        if let Some(AskPayload::ToolApproval {
                            preview: Some(preview),
                            ..
                        }) = &payload
                            && !super::diff::looks_like_diff(preview)
                        {
                            self.upsert(id, EntryStyle::Note, prefix_lines("  │ ", preview));
                        }
                    }
                    _ => {}
                }
            }
            TaskEvent::ToolUse {
                id,
                preview: Some(preview),
                ..
            } => {
                self.previews.insert(id, preview);
            }
            TaskEvent::ToolUse { .. } => {}
            TaskEvent::ToolResult {
                id,
                is_error,
                output,
                summary,
                ..
            } => {
                self.close_streamed_call(&id);
                // The result replaces the live output.
                if let Some(live) = self
                    .entries
                    .iter_mut()
                    .rev()
                    .find(|e| e.style == EntryStyle::Live)
                {
                    live.text.clear();
                }
                // The tool's own summary of its result (the output's
                // first line for events made without one); the whole
                // output is its detail.
                let first_line = kaji_tools::first_line_summary(&output);
                let summary = summary.unwrap_or_else(|| first_line.clone());
                let (style, mark) = if is_error {
                    (EntryStyle::ToolError, "⎿ error: ")
                } else {
                    (EntryStyle::ToolResult, "⎿ ")
                };
                // Tabs (Read's line numbers) would be dropped by the
                // terminal renderer: show them as spaces.
                let first = summary.lines().next().unwrap_or("").replace('\t', "  ");
                let i = self.push(style, format!("  {mark}{first}"));
                if output.trim_end() != first.trim_end() {
                    // Opened, the output follows the result's line (whose
                    // first line is the output's when the tool has no
                    // summary of its own).
                    let body = output.replace('\t', "  ");
                    self.entries[i].detail = Some(if summary == first_line {
                        body
                    } else {
                        format!("{first}\n{body}")
                    });
                }
            }
            // The status line's counters move every round.
            TaskEvent::Usage(report) => {
                self.turns = report.turn;
                self.input_tokens += report.usage.input_tokens;
                self.output_tokens += report.usage.output_tokens;
                self.context_tokens = report.context_tokens;
                self.context_window = report.context_window.or(self.context_window);
                if let Some(c) = report.cost_usd {
                    self.cost_usd = Some(self.cost_usd.unwrap_or(0.0) + c);
                }
            }
            TaskEvent::Finished {
                status,
                turns,
                usage,
                result,
            } => {
                self.turns = turns;
                let style = match status {
                    TaskStatus::Completed => EntryStyle::Note,
                    TaskStatus::Aborted => EntryStyle::Note,
                    _ => EntryStyle::Error,
                };
                let mut line = format!(
                    "[{}] {turns} turn(s), {} input / {} output tokens",
                    status.as_str(),
                    usage.input_tokens,
                    usage.output_tokens
                );
                if status != TaskStatus::Completed
                    && let Some(r) = result
                {
                    line.push_str(&format!(": {r}"));
                }
                self.push(style, line);
                // Still running until the session's run returns
                // (`task_ended`): only then does the session hold the
                // task's history (Esc Esc lists its prompt) and take a
                // new prompt (Enter meanwhile queues).
                self.bell = true;
            }
        }
    }

    /// The task asks something. (What the session already allows never
    /// gets here: the core's one approval memory answers it.)
    pub fn on_ask(&mut self, request: AskRequest, reply: oneshot::Sender<AskResponse>) {
        let stage = match request.kind {
            AskKind::Followup | AskKind::CompletionResult => AskStage::Text,
            _ => AskStage::Choose,
        };
        self.input.clear();
        self.scroll_up = 0;
        self.bell = true;
        self.pending = Some(PendingAsk {
            request,
            reply: Some(reply),
            stage,
        });
    }

    /// Sends the answer to the pending ask and notes it in the transcript.
    fn answer(&mut self, response: AskResponse) {
        let Some(mut pending) = self.pending.take() else {
            return;
        };
        let note = match &response {
            AskResponse::Approve => match pending.request.kind {
                AskKind::CompletionResult => None,
                _ => Some("  ✓ approved".to_string()),
            },
            AskResponse::ApproveEdited { .. } => Some("  ✓ approved (edited)".to_string()),
            AskResponse::ApproveAlways => Some(always_note(&pending.request, "for this session")),
            AskResponse::ApproveAlwaysProject => Some(always_note(
                &pending.request,
                "for this project (.kaji/config.local.toml)",
            )),
            AskResponse::Deny { feedback: None } => Some("  ✗ denied".to_string()),
            AskResponse::Deny { feedback: Some(f) } | AskResponse::Refuse { message: f } => {
                Some(format!("  ✗ denied: {f}"))
            }
            // The task echoes replies as user feedback itself when it uses
            // them; followup answers are shown here.
            AskResponse::Reply { text } => Some(prefix_lines("> ", text)),
        };
        if let Some(note) = note {
            let style = if matches!(response, AskResponse::Reply { .. }) {
                EntryStyle::User
            } else {
                EntryStyle::Note
            };
            self.push(style, note);
        }
        if let Some(reply) = pending.reply.take() {
            let _ = reply.send(response);
        }
        self.input.clear();
    }

    /// Esc with no task running and nothing asked: the second in a row
    /// opens the rewind picker.
    fn on_idle_esc(&mut self, armed: bool) -> Action {
        if armed {
            return Action::RewindMenu;
        }
        self.esc_armed = true;
        self.notice = Some("Esc again to go back to an earlier message".into());
        Action::None
    }

    /// Opens the rewind picker on the session's user messages (newest
    /// selected).
    pub fn open_rewind(&mut self, prompts: Vec<UserPrompt>) {
        self.rewind = Rewind::picker(prompts);
        if self.rewind.is_none() {
            self.notice = Some("no earlier message to go back to".into());
        }
    }

    /// The session was rewound to before `prompt`: its text goes into the
    /// input; the files' checkpoint is offered when known.
    pub fn rewound(&mut self, prompt: UserPrompt) {
        let (typed, note) = rewind::rewound(&prompt);
        self.input.set(typed);
        self.note(note);
        self.rewind = Rewind::offer(&prompt);
    }

    /// Keys while the rewind picker or offer is open; `None` when closed.
    fn on_rewind_key(&mut self, key: KeyEvent) -> Option<Action> {
        let step = self.rewind.as_mut()?.on_key(key);
        if step.close {
            self.rewind = None;
        }
        if let Some(note) = step.note {
            self.note(note);
        }
        Some(step.action)
    }

    /// The lines the menu area shows for the rewind picker or offer.
    pub fn rewind_menu(&self) -> Option<Vec<(String, String)>> {
        self.rewind.as_ref().map(Rewind::menu)
    }

    /// A prompt `!command`: the shell command, or a note when it cannot
    /// run now.
    fn shell(&mut self, command: &str) -> Action {
        let command = command.trim();
        if command.is_empty() {
            self.error("! alone runs nothing: type a command after it".into());
            return Action::None;
        }
        if self.running {
            self.notice = Some("a task is running: wait, or Esc to abort it".into());
            return Action::None;
        }
        Action::Shell(command.to_string())
    }

    /// Handles a key press.
    pub fn on_key(&mut self, key: KeyEvent) -> Action {
        if key.kind == KeyEventKind::Release {
            return Action::None;
        }
        self.notice = None;
        let armed = std::mem::take(&mut self.quit_armed);
        let esc_armed = std::mem::take(&mut self.esc_armed);
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        if !ctrl && let Some(action) = self.on_rewind_key(key) {
            return action;
        }
        match key.code {
            KeyCode::Char('o') if ctrl => {
                self.expanded = !self.expanded;
                return Action::None;
            }
            KeyCode::Char('v') if ctrl || key.modifiers.contains(KeyModifiers::ALT) => {
                if self.pending.as_ref().map(|p| p.stage) == Some(AskStage::Choose) {
                    return Action::None;
                }
                return Action::PasteClipboard;
            }
            KeyCode::PageUp => {
                self.scroll_up = self.scroll_up.saturating_add(self.page_height.max(1));
                return Action::None;
            }
            KeyCode::PageDown => {
                self.scroll_up = self.scroll_up.saturating_sub(self.page_height.max(1));
                return Action::None;
            }
            KeyCode::Char('c') if ctrl => {
                if self.running {
                    return Action::Abort;
                }
                if !self.input.is_empty() {
                    self.input.clear();
                } else if armed {
                    return Action::Quit;
                } else {
                    self.quit_armed = true;
                    self.notice = Some("press Ctrl-C again to quit".into());
                }
                return Action::None;
            }
            KeyCode::Char('d') if ctrl => {
                if !self.running && self.input.is_empty() {
                    return Action::Quit;
                }
                return Action::None;
            }
            KeyCode::Esc => {
                if let Some(p) = &mut self.pending
                    && p.stage == AskStage::DenyFeedback
                {
                    // Back to the choice.
                    p.stage = AskStage::Choose;
                    self.input.clear();
                    return Action::None;
                }
                if self.running {
                    self.unqueue();
                    return Action::Abort;
                }
                if self.search.take().is_some() {
                    return Action::None;
                }
                if self.pending.is_none() {
                    return self.on_idle_esc(esc_armed);
                }
                return Action::None;
            }
            _ => {}
        }
        if let Some(stage) = self.pending.as_ref().map(|p| p.stage) {
            return self.on_ask_key(stage, key);
        }
        if self.search.is_some() {
            self.on_search_key(key);
            return Action::None;
        }
        if ctrl && key.code == KeyCode::Char('r') {
            self.search = Some(HistorySearch::default());
            return Action::None;
        }
        match key.code {
            KeyCode::Enter
                if !key
                    .modifiers
                    .intersects(KeyModifiers::SHIFT | KeyModifiers::ALT) =>
            {
                let mut text = self.input.text().trim().to_string();
                if text.is_empty() {
                    return Action::None;
                }
                // Enter in the open menu runs its first command, unless
                // what is typed names one already.
                let menu = self.menu();
                if !menu.is_empty() && !menu.iter().any(|(name, _)| *name == text) {
                    text = menu[0].0.clone();
                }
                self.history_pos = None;
                if self.history.last() != Some(&text) {
                    self.history.push(text.clone());
                }
                self.input.clear();
                if let Some(command) = text.strip_prefix('!') {
                    return self.shell(command);
                }
                if commands::is_command(&text) {
                    return self.slash(&text);
                }
                self.send(text)
            }
            KeyCode::Tab => {
                if let Some((name, _)) = self.menu().first() {
                    let name = format!("{name} ");
                    self.input.set(&name);
                } else if let Some(path) = self.file_menu().first() {
                    let typed = super::mentions::typing(self.input.before_cursor())
                        .map(|q| q.chars().count() + 1)
                        .unwrap_or(0);
                    self.input
                        .replace_before_cursor(typed, &format!("@{path} "));
                }
                Action::None
            }
            KeyCode::Up | KeyCode::Down if self.input.is_multiline() => Action::None,
            KeyCode::Up if !self.history.is_empty() => {
                let pos = match self.history_pos {
                    Some(p) => p.saturating_sub(1),
                    None => self.history.len() - 1,
                };
                self.history_pos = Some(pos);
                self.input.set(&self.history[pos]);
                Action::None
            }
            KeyCode::Down => {
                match self.history_pos {
                    Some(p) if p + 1 < self.history.len() => {
                        self.history_pos = Some(p + 1);
                        self.input.set(&self.history[p + 1]);
                    }
                    Some(_) => {
                        self.history_pos = None;
                        self.input.clear();
                    }
                    None => {}
                }
                Action::None
            }
            _ => {
                self.input.edit(&key);
                Action::None
            }
        }
    }

    fn on_ask_key(&mut self, stage: AskStage, key: KeyEvent) -> Action {
        let kind = match &self.pending {
            Some(p) => p.request.kind,
            None => return Action::None,
        };
        match stage {
            AskStage::Choose => match key.code {
                KeyCode::Char('y') | KeyCode::Char('Y') => self.answer(AskResponse::Approve),
                KeyCode::Char('a') | KeyCode::Char('A')
                    if matches!(kind, AskKind::Tool | AskKind::Command) && self.can_remember() =>
                {
                    self.answer(AskResponse::ApproveAlways)
                }
                KeyCode::Char('p') | KeyCode::Char('P')
                    if matches!(kind, AskKind::Tool | AskKind::Command) && self.can_remember() =>
                {
                    self.answer(AskResponse::ApproveAlwaysProject)
                }
                KeyCode::Char('n') | KeyCode::Char('N') => {
                    if matches!(kind, AskKind::Tool | AskKind::Command | AskKind::Plan) {
                        if let Some(p) = &mut self.pending {
                            p.stage = AskStage::DenyFeedback;
                        }
                        self.input.clear();
                    } else {
                        self.answer(AskResponse::Deny { feedback: None });
                    }
                }
                _ => {}
            },
            AskStage::DenyFeedback | AskStage::Text => match key.code {
                KeyCode::Enter
                    if !key
                        .modifiers
                        .intersects(KeyModifiers::SHIFT | KeyModifiers::ALT) =>
                {
                    let text = self.input.text().trim().to_string();
                    let response = match (stage, kind) {
                        (AskStage::DenyFeedback, _) => AskResponse::Deny {
                            feedback: (!text.is_empty()).then_some(text),
                        },
                        (_, AskKind::CompletionResult) if text.is_empty() => AskResponse::Approve,
                        (_, _) if text.is_empty() => return Action::None,
                        (_, AskKind::Followup) => {
                            // A number picks one of the offered options.
                            let options = self
                                .pending
                                .as_ref()
                                .map(|p| followup_options(p.request.payload.as_ref()))
                                .unwrap_or_default();
                            let picked = text
                                .parse::<usize>()
                                .ok()
                                .and_then(|n| n.checked_sub(1))
                                .and_then(|i| options.get(i).cloned());
                            AskResponse::Reply {
                                text: picked.unwrap_or(text),
                            }
                        }
                        _ => AskResponse::Reply { text },
                    };
                    self.answer(response);
                }
                _ => {
                    self.input.edit(&key);
                }
            },
        }
        Action::None
    }

    /// Pasted text goes into the input line (not while a choice is asked).
    pub fn on_paste(&mut self, text: &str) {
        if self.pending.as_ref().map(|p| p.stage) == Some(AskStage::Choose) {
            return;
        }
        self.input.insert_str(text);
    }

    /// Whether the pending approval has a rule an "always" answer stores.
    fn can_remember(&self) -> bool {
        matches!(
            self.pending.as_ref().and_then(|p| p.request.payload.as_ref()),
            Some(AskPayload::ToolApproval { always, .. }) if !always.is_empty()
        )
    }

    /// The prompt shown in the ask area, if an ask is pending.
    pub fn ask_prompt(&self) -> Option<(String, &'static str)> {
        let p = self.pending.as_ref()?;
        let keys = match (p.stage, p.request.kind) {
            (AskStage::DenyFeedback, _) => {
                "type feedback for the model (optional), Enter to deny · Esc back"
            }
            (AskStage::Text, AskKind::CompletionResult) => {
                "Enter accepts the result · or type feedback + Enter to go on"
            }
            (AskStage::Text, AskKind::Followup)
                if !followup_options(p.request.payload.as_ref()).is_empty() =>
            {
                "type your answer, or an option's number, + Enter"
            }
            (AskStage::Text, _) => "type your answer + Enter",
            (AskStage::Choose, AskKind::Tool | AskKind::Command) if self.can_remember() => {
                "y approve · a always (this session) · p always (this project) · n deny"
            }
            // Nothing narrow enough to remember (a sandbox retry, say):
            // "always" would store nothing, so it is not offered.
            (AskStage::Choose, AskKind::Tool | AskKind::Command) => "y approve this once · n deny",
            (AskStage::Choose, AskKind::Plan) => "y approve the plan · n give feedback",
            (AskStage::Choose, _) => "y yes · n no",
        };
        let title = match p.request.kind {
            AskKind::Tool => "Allow this tool call?",
            AskKind::Command => "Run this command?",
            AskKind::Followup => "Question",
            AskKind::MistakeLimitReached => "Mistake limit reached",
            AskKind::ApiReqFailed => "Model request failed",
            AskKind::CompletionResult => "Task complete",
            AskKind::Resume => "Resume?",
            AskKind::Plan => "Approve the plan?",
        };
        let mut text = format!("{title}\n{}", p.request.text);
        if let Some(AskPayload::ToolApproval { preview, .. }) = &p.request.payload
            && let Some(diff) = super::diff::of_call(None, preview.as_deref())
        {
            text.push('\n');
            text.push_str(&diff);
        }
        if let Some(AskPayload::ToolApproval { always, .. }) = &p.request.payload {
            text.push('\n');
            text.push_str(&always_line(always));
        }
        Some((text, keys))
    }
}

/// What "always" would store, shown under an approval ask: the exact
/// rules, or that nothing narrow enough exists.
fn always_line(always: &[String]) -> String {
    if always.is_empty() {
        "nothing here can be remembered: this answer is for this call only".to_string()
    } else {
        format!(
            "always stores {} — a: for this session · p: for this project, in .kaji/config.local.toml",
            always.join(", ")
        )
    }
}

/// The transcript's note for an "always" answer: the rules it stored and
/// where.
fn always_note(request: &AskRequest, scope: &str) -> String {
    match &request.payload {
        Some(AskPayload::ToolApproval { always, .. }) if !always.is_empty() => {
            format!("  ✓ always allowed {} {scope}", always.join(", "))
        }
        _ => "  ✓ approved once (nothing narrow enough to remember)".to_string(),
    }
}

/// One todo item as a checklist line.
pub fn todo_line(t: &TodoItem) -> String {
    match t.status {
        TodoStatus::Completed => format!("☑ {}", t.content),
        TodoStatus::InProgress => format!("◐ {}", t.active_form),
        TodoStatus::Pending => format!("☐ {}", t.content),
    }
}

/// One task of the task list as a checklist line.
pub fn task_line(t: &TaskListItem) -> String {
    let mark = match t.status.as_str() {
        "completed" => "☑",
        "in_progress" => "◐",
        _ => "☐",
    };
    let mut line = format!("{mark} #{} {}", t.id, t.subject);
    if let Some(owner) = &t.owner {
        line.push_str(&format!(" ({owner})"));
    }
    if !t.blocked_by.is_empty() {
        let ids: Vec<String> = t.blocked_by.iter().map(|b| format!("#{b}")).collect();
        line.push_str(&format!(" — blocked by {}", ids.join(", ")));
    }
    line
}

/// One background task as a panel line.
pub fn background_line(b: &BackgroundTask) -> String {
    format!("⚙ {} {} — {}", b.id, b.description, b.status)
}

/// The options a followup question offers.
fn followup_options(payload: Option<&AskPayload>) -> Vec<String> {
    match payload {
        Some(AskPayload::Followup { options }) => options.clone(),
        _ => Vec::new(),
    }
}

/// A user's prompt as typed (`> …`), its attached files one line each
/// (`⎿ Read src/a.rs (12 lines)`) rather than their contents.
fn user_prompt_text(text: &str) -> String {
    let (typed, files) = super::mentions::split_attachments(text);
    let mut out = prefix_lines("> ", typed);
    for (path, lines) in files {
        out.push_str(&format!("\n  ⎿ Read {path} ({lines} lines)"));
    }
    out
}

fn prefix_lines(prefix: &str, text: &str) -> String {
    text.lines()
        .map(|l| format!("{prefix}{l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use kaji_protocol::Usage;
    use serde_json::json;

    fn key(c: char) -> KeyEvent {
        KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE)
    }

    fn code(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    fn ctrl(c: char) -> KeyEvent {
        KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL)
    }

    fn type_text(app: &mut App, text: &str) {
        for c in text.chars() {
            app.on_key(key(c));
        }
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

    fn command_ask(command: &str) -> AskRequest {
        AskRequest {
            id: 7,
            kind: AskKind::Command,
            text: format!("Bash: {command}"),
            payload: Some(AskPayload::ToolApproval {
                tool: "Bash".into(),
                input: json!({"command": command}),
                preview: None,
                always: Vec::new(),
                tool_use_id: None,
            }),
            agent: "main".into(),
        }
    }

    fn texts(app: &App) -> Vec<&str> {
        app.entries.iter().map(|e| e.text.as_str()).collect()
    }

    #[test]
    fn approvals_show_the_whole_preview_and_escapes_never_pass() {
        let mut app = App::new(StatusInfo::default());
        app.task_started();
        app.on_event(say(1, SayKind::Text, "hi \u{1b}]0;PWNED\u{7}there", false));
        app.on_event(TaskEvent::Ask {
            id: 2,
            kind: AskKind::Command,
            text: "Bash: cat <<EOF".into(),
            partial: false,
            payload: Some(AskPayload::ToolApproval {
                tool: "Bash".into(),
                input: json!({"command": "cat <<EOF\nline 2\nEOF"}),
                preview: Some("cat <<EOF\nline 2\nEOF".into()),
                always: Vec::new(),
                tool_use_id: None,
            }),
        });
        assert_eq!(
            texts(&app),
            ["hi there", "  │ cat <<EOF\n  │ line 2\n  │ EOF"]
        );
    }

    #[test]
    fn streamed_text_grows_with_deltas_and_the_final_say_replaces_it() {
        let mut app = App::new(StatusInfo::default());
        app.task_started();
        app.on_event(say(0, SayKind::UserFeedback, "hi", false));
        app.on_event(say(1, SayKind::Text, "Hel", true));
        app.on_event(TaskEvent::Delta {
            id: 1,
            text: "lo".into(),
        });
        app.on_event(TaskEvent::Delta {
            id: 1,
            text: " world".into(),
        });
        assert_eq!(texts(&app), ["> hi", "Hello world"]);
        app.on_event(say(1, SayKind::Text, "Hello, world.", false));
        assert_eq!(texts(&app), ["> hi", "Hello, world."]);
        // A delta for an unknown message is ignored, not a panic.
        app.on_event(TaskEvent::Delta {
            id: 99,
            text: "x".into(),
        });
        assert_eq!(app.entries.len(), 2);
    }

    #[test]
    fn a_streaming_call_grows_then_its_say_replaces_it_with_the_diff() {
        let mut app = App::new(StatusInfo::default());
        app.task_started();
        let partial = |title: &str, text: &str| TaskEvent::Ask {
            id: 3,
            kind: AskKind::Tool,
            text: text.into(),
            partial: true,
            payload: Some(AskPayload::ToolArguments {
                tool: "Write".into(),
                title: title.into(),
                tool_use_id: "c1".into(),
            }),
        };
        app.on_event(partial("Write", ""));
        app.on_event(TaskEvent::Delta {
            id: 3,
            text: "file_path: a.t".into(),
        });
        assert_eq!(texts(&app), ["⏺ Write …\nfile_path: a.t"]);
        // The path is complete: the same ask again, under the new title.
        app.on_event(partial("Write: a.txt", "file_path: a.txt\ncontent: one"));
        app.on_event(TaskEvent::Delta {
            id: 3,
            text: "\ntwo".into(),
        });
        assert_eq!(
            texts(&app),
            ["⏺ Write: a.txt …\nfile_path: a.txt\ncontent: one\ntwo"]
        );
        app.on_event(TaskEvent::Say {
            id: 3,
            kind: SayKind::Tool,
            text: "Write: a.txt".into(),
            partial: false,
            payload: Some(SayPayload::Tool {
                id: "c1".into(),
                tool: "Write".into(),
                input: serde_json::json!({"file_path": "a.txt", "content": "one\ntwo\n"}),
                view: kaji_core::executor::recorded_view(
                    "Write",
                    &serde_json::json!({"file_path": "a.txt", "content": "one\ntwo\n"}),
                ),
            }),
        });
        assert_eq!(texts(&app)[0], "⏺ Write: a.txt");
        assert_eq!(app.entries.len(), 2, "the diff follows the say");
        assert_eq!(app.entries[1].style, EntryStyle::Diff);
        // A streamed call that is never announced ends with its result.
        let mut app = App::new(StatusInfo::default());
        app.task_started();
        app.on_event(partial("Write", "x: 1"));
        app.on_event(TaskEvent::ToolResult {
            id: "c1".into(),
            name: "Write".into(),
            is_error: true,
            output: "bad".into(),
            summary: None,
        });
        assert_eq!(texts(&app)[0], "⏺ Write");
    }

    #[test]
    fn a_result_closes_only_its_own_streamed_call() {
        let mut app = App::new(StatusInfo::default());
        app.task_started();
        let partial = |id: u64, call: &str, text: &str| TaskEvent::Ask {
            id,
            kind: AskKind::Tool,
            text: text.into(),
            partial: true,
            payload: Some(AskPayload::ToolArguments {
                tool: "Bash".into(),
                title: "Bash".into(),
                tool_use_id: call.into(),
            }),
        };
        // Two calls of one tool in one reply, both still streaming.
        app.on_event(partial(3, "c1", "command: ech"));
        app.on_event(partial(4, "c2", "command: l"));
        app.on_event(TaskEvent::ToolResult {
            id: "c2".into(),
            name: "Bash".into(),
            is_error: true,
            output: "unusable arguments".into(),
            summary: None,
        });
        let shown = texts(&app);
        assert_eq!(shown[0], "⏺ Bash …\ncommand: ech", "{shown:?}");
        assert_eq!(shown[1], "⏺ Bash", "{shown:?}");
        // The first goes on streaming.
        app.on_event(TaskEvent::Delta {
            id: 3,
            text: "o hi".into(),
        });
        assert_eq!(texts(&app)[0], "⏺ Bash …\ncommand: echo hi");
        app.on_event(TaskEvent::ToolResult {
            id: "c1".into(),
            name: "Bash".into(),
            is_error: true,
            output: "refused".into(),
            summary: None,
        });
        assert_eq!(texts(&app)[0], "⏺ Bash");
    }

    #[test]
    fn events_become_styled_transcript_entries() {
        let mut app = App::new(StatusInfo::default());
        app.task_started();
        app.on_event(say(0, SayKind::ApiReqStarted, "", false));
        app.on_event(say(1, SayKind::Reasoning, "thinking", false));
        app.on_event(say(2, SayKind::Tool, "Bash: ls", false));
        app.on_event(TaskEvent::ToolResult {
            id: "t".into(),
            name: "Bash".into(),
            is_error: false,
            output: "a\nb\nc".into(),
            summary: None,
        });
        app.on_event(TaskEvent::ToolResult {
            id: "u".into(),
            name: "Read".into(),
            is_error: true,
            output: "no such file".into(),
            summary: None,
        });
        app.on_event(say(3, SayKind::Error, "boom", false));
        app.on_event(say(4, SayKind::CompletionResult, "done", false));
        app.on_event(TaskEvent::Usage(kaji_protocol::UsageReport {
            turn: 2,
            usage: Usage {
                input_tokens: 10,
                output_tokens: 5,
                ..Usage::default()
            },
            context_tokens: 15,
            context_window: None,
            cost_usd: None,
            estimated: false,
        }));
        app.on_event(TaskEvent::Finished {
            status: TaskStatus::Completed,
            turns: 2,
            usage: Usage {
                input_tokens: 10,
                output_tokens: 5,
                ..Usage::default()
            },
            result: Some("done".into()),
        });
        assert_eq!(
            texts(&app),
            [
                "thinking",
                "⏺ Bash: ls",
                "  ⎿ a (+2 lines)",
                "  ⎿ error: no such file",
                "! boom",
                "✓ done",
                "[completed] 2 turn(s), 10 input / 5 output tokens",
            ]
        );
        let styles: Vec<_> = app.entries.iter().map(|e| e.style).collect();
        assert_eq!(styles[0], EntryStyle::Reasoning);
        assert_eq!(styles[3], EntryStyle::ToolError);
        assert_eq!(styles[4], EntryStyle::Error);
        // The task's end is the session's run returning, not its event.
        assert!(app.running);
        app.task_ended();
        assert!(!app.running);
        assert_eq!((app.turns, app.input_tokens, app.output_tokens), (2, 10, 5));
    }

    #[test]
    fn y_approves_a_command() {
        let mut app = App::new(StatusInfo::default());
        app.task_started();
        let (tx, mut rx) = oneshot::channel();
        app.on_ask(command_ask("ls -l"), tx);
        assert!(app.ask_prompt().unwrap().0.contains("Bash: ls -l"));
        // Other keys do nothing.
        app.on_key(key('x'));
        assert!(rx.try_recv().is_err());
        app.on_key(key('y'));
        assert_eq!(rx.try_recv().unwrap(), AskResponse::Approve);
        assert!(app.pending.is_none());
    }

    #[test]
    fn n_then_feedback_denies_with_the_feedback() {
        let mut app = App::new(StatusInfo::default());
        app.task_started();
        let (tx, mut rx) = oneshot::channel();
        app.on_ask(command_ask("rm -rf /"), tx);
        app.on_key(key('n'));
        assert_eq!(app.pending.as_ref().unwrap().stage, AskStage::DenyFeedback);
        type_text(&mut app, "use trash instead");
        app.on_key(code(KeyCode::Enter));
        assert_eq!(
            rx.try_recv().unwrap(),
            AskResponse::Deny {
                feedback: Some("use trash instead".into())
            }
        );
        // n then Enter alone: no feedback.
        let (tx, mut rx) = oneshot::channel();
        app.on_ask(command_ask("rm x"), tx);
        app.on_key(key('n'));
        app.on_key(code(KeyCode::Enter));
        assert_eq!(rx.try_recv().unwrap(), AskResponse::Deny { feedback: None });
    }

    #[test]
    fn followup_and_completion_asks_take_text() {
        let mut app = App::new(StatusInfo::default());
        app.task_started();
        let (tx, mut rx) = oneshot::channel();
        app.on_ask(
            AskRequest {
                id: 3,
                kind: AskKind::Followup,
                text: "Which file?".into(),
                payload: None,
                agent: "main".into(),
            },
            tx,
        );
        // Enter without text does not answer a question.
        app.on_key(code(KeyCode::Enter));
        assert!(rx.try_recv().is_err());
        type_text(&mut app, "yes.txt");
        app.on_key(code(KeyCode::Enter));
        assert_eq!(
            rx.try_recv().unwrap(),
            AskResponse::Reply {
                text: "yes.txt".into()
            }
        );

        let completion = AskRequest {
            id: 4,
            kind: AskKind::CompletionResult,
            text: "done".into(),
            payload: None,
            agent: "main".into(),
        };
        let (tx, mut rx) = oneshot::channel();
        app.on_ask(completion.clone(), tx);
        app.on_key(code(KeyCode::Enter));
        assert_eq!(rx.try_recv().unwrap(), AskResponse::Approve);
        let (tx, mut rx) = oneshot::channel();
        app.on_ask(completion, tx);
        type_text(&mut app, "also add tests");
        app.on_key(code(KeyCode::Enter));
        assert_eq!(
            rx.try_recv().unwrap(),
            AskResponse::Reply {
                text: "also add tests".into()
            }
        );
    }

    #[test]
    fn followup_options_are_listed_and_picked_by_number() {
        let mut app = App::new(StatusInfo::default());
        app.task_started();
        let payload = AskPayload::Followup {
            options: vec!["red".into(), "blue".into()],
        };
        app.on_event(TaskEvent::Ask {
            id: 2,
            kind: AskKind::Followup,
            text: "Which colour?".into(),
            partial: false,
            payload: Some(payload.clone()),
        });
        assert_eq!(texts(&app), ["? Which colour?\n  1. red\n  2. blue"]);
        let request = AskRequest {
            id: 2,
            kind: AskKind::Followup,
            text: "Which colour?".into(),
            payload: Some(payload),
            agent: "main".into(),
        };
        let (tx, mut rx) = oneshot::channel();
        app.on_ask(request.clone(), tx);
        type_text(&mut app, "2");
        app.on_key(code(KeyCode::Enter));
        assert_eq!(
            rx.try_recv().unwrap(),
            AskResponse::Reply {
                text: "blue".into()
            }
        );
        // Out of range or not a number: the text itself.
        let (tx, mut rx) = oneshot::channel();
        app.on_ask(request, tx);
        type_text(&mut app, "3");
        app.on_key(code(KeyCode::Enter));
        assert_eq!(
            rx.try_recv().unwrap(),
            AskResponse::Reply { text: "3".into() }
        );
    }

    #[test]
    fn mistake_limit_is_yes_or_no() {
        let mut app = App::new(StatusInfo::default());
        app.task_started();
        let (tx, mut rx) = oneshot::channel();
        app.on_ask(
            AskRequest {
                id: 5,
                kind: AskKind::MistakeLimitReached,
                text: "Continue?".into(),
                payload: None,
                agent: "main".into(),
            },
            tx,
        );
        // `a` is only for tool approvals.
        app.on_key(key('a'));
        assert!(rx.try_recv().is_err());
        app.on_key(key('n'));
        assert_eq!(rx.try_recv().unwrap(), AskResponse::Deny { feedback: None });
    }

    #[test]
    fn keys_submit_abort_and_quit() {
        let mut app = App::new(StatusInfo::default());
        assert_eq!(app.on_key(code(KeyCode::Enter)), Action::None);
        type_text(&mut app, "fix it");
        assert_eq!(
            app.on_key(code(KeyCode::Enter)),
            Action::Submit("fix it".into())
        );
        assert!(app.input.is_empty());
        app.task_started();
        assert_eq!(app.on_key(code(KeyCode::Esc)), Action::Abort);
        assert_eq!(app.on_key(ctrl('c')), Action::Abort);
        // Ctrl-D does not quit while a task runs.
        assert_eq!(app.on_key(ctrl('d')), Action::None);
        app.task_ended();
        type_text(&mut app, "draft");
        // Ctrl-C with text clears it; on an empty line it asks for a
        // second one, which quits; another key in between disarms it.
        assert_eq!(app.on_key(ctrl('c')), Action::None);
        assert!(app.input.is_empty());
        assert_eq!(app.on_key(ctrl('c')), Action::None);
        assert_eq!(app.notice.as_deref(), Some("press Ctrl-C again to quit"));
        app.on_key(code(KeyCode::Left));
        assert_eq!(app.on_key(ctrl('c')), Action::None);
        assert_eq!(app.on_key(ctrl('c')), Action::Quit);
        assert_eq!(app.on_key(ctrl('d')), Action::Quit);
        type_text(&mut app, "/exit");
        assert_eq!(app.on_key(code(KeyCode::Enter)), Action::Quit);
    }

    #[test]
    fn up_and_down_recall_sent_prompts_and_paste_keeps_newlines() {
        let mut app = App::new(StatusInfo::default());
        for p in ["one", "two"] {
            type_text(&mut app, p);
            app.on_key(code(KeyCode::Enter));
            app.task_started();
            app.task_ended();
        }
        app.on_key(code(KeyCode::Up));
        assert_eq!(app.input.text(), "two");
        app.on_key(code(KeyCode::Up));
        app.on_key(code(KeyCode::Up));
        assert_eq!(app.input.text(), "one");
        app.on_key(code(KeyCode::Down));
        assert_eq!(app.input.text(), "two");
        app.on_key(code(KeyCode::Down));
        assert!(app.input.is_empty());
        app.on_paste("a\nb");
        assert_eq!(app.input.text(), "a\nb");
        // Up and Down move nowhere in a multi-line input.
        app.on_key(code(KeyCode::Up));
        assert_eq!(app.input.text(), "a\nb");
        // A pending y/a/n choice ignores pastes (a stray `y` must not
        // approve anything).
        app.input.clear();
        let (tx, mut rx) = oneshot::channel();
        app.on_ask(command_ask("ls"), tx);
        app.on_paste("yes");
        assert!(app.input.is_empty());
        assert!(rx.try_recv().is_err());
    }

    #[test]
    fn page_keys_scroll_and_new_tasks_follow_again() {
        let mut app = App::new(StatusInfo::default());
        app.page_height = 5;
        app.on_key(code(KeyCode::PageUp));
        app.on_key(code(KeyCode::PageUp));
        assert_eq!(app.scroll_up, 10);
        app.on_key(code(KeyCode::PageDown));
        assert_eq!(app.scroll_up, 5);
        app.task_started();
        assert_eq!(app.scroll_up, 0);
    }

    fn enter(app: &mut App, text: &str) -> Action {
        app.input.set(text);
        app.on_key(code(KeyCode::Enter))
    }

    #[test]
    fn a_projects_own_review_command_shadows_the_builtin() {
        let mut app = App::new(StatusInfo::default());
        assert_eq!(
            enter(&mut app, "/review main"),
            Action::Review(Some("main".into()))
        );
        app.custom = vec![commands::parse(
            "review",
            "---\ndescription: Our review\n---\nReview $ARGUMENTS our way",
            std::path::PathBuf::from("/p/.claude/commands/review.md"),
        )];
        // The user's file runs; the built-in is still there by its long name.
        assert_eq!(
            enter(&mut app, "/review src/"),
            Action::Submit("Review src/ our way".into())
        );
        assert_eq!(
            enter(&mut app, "/builtin:review main"),
            Action::Review(Some("main".into()))
        );
        assert_eq!(enter(&mut app, "/builtin:help"), Action::None);
        assert!(
            app.entries
                .last()
                .unwrap()
                .text
                .contains("unknown command /builtin:help")
        );
        assert_eq!(enter(&mut app, "/help"), Action::None);
        let help = app.entries.last().unwrap().text.clone();
        assert!(
            help.contains(&format!(
                "{:<12} (built-in, shadowed by .claude/commands/review.md: /builtin:review runs it)",
                "/review"
            )),
            "{help}"
        );
        let menu = commands::matches("/", &app.custom);
        assert!(
            menu.iter()
                .any(|(n, d)| n == "/builtin:review" && d.ends_with("(built-in)")),
            "{menu:?}"
        );
        assert!(
            menu.iter()
                .any(|(n, d)| n == "/review" && d.contains("Our review")),
            "{menu:?}"
        );
        // A command in a subfolder does not shadow it.
        app.custom[0].namespace = Some("team".into());
        assert_eq!(enter(&mut app, "/review"), Action::Review(None));
    }

    #[test]
    fn slash_commands_are_handled_here_and_never_submitted() {
        let mut app = App::new(StatusInfo {
            model: "big".into(),
            ..StatusInfo::default()
        });
        app.custom = vec![commands::parse(
            "audit",
            "---\ndescription: Review\n---\nReview $1 please\n!`git diff`",
            Default::default(),
        )];
        assert_eq!(enter(&mut app, "/help"), Action::None);
        let help = app.entries.last().unwrap().text.clone();
        assert!(help.contains("/model") && help.contains("/audit"), "{help}");
        // Enter in the menu runs its first match.
        assert_eq!(enter(&mut app, "/he"), Action::None);
        assert!(app.entries.last().unwrap().text.contains("/model"));
        assert_eq!(enter(&mut app, "/mod"), Action::None);
        assert!(app.entries.last().unwrap().text.contains("model: big"));
        assert_eq!(enter(&mut app, "/frobnicate x"), Action::None);
        assert_eq!(
            app.entries.last().unwrap().text,
            "! unknown command /frobnicate (/help lists the commands)"
        );
        assert_eq!(app.entries.last().unwrap().style, EntryStyle::Error);
        assert_eq!(
            enter(&mut app, "/mode accept-edits"),
            Action::Mode(PermissionMode::AcceptEdits)
        );
        assert_eq!(
            enter(&mut app, "/compact keep the test plan"),
            Action::Compact("keep the test plan".into())
        );
        assert_eq!(enter(&mut app, "/mode sideways"), Action::None);
        assert!(
            app.entries
                .last()
                .unwrap()
                .text
                .contains("not a permission mode")
        );
        assert_eq!(
            enter(&mut app, "/model small"),
            Action::Model("small".into())
        );
        assert_eq!(
            enter(&mut app, "/reasoning high"),
            Action::Reasoning(kaji_llm::Reasoning::High)
        );
        assert_eq!(enter(&mut app, "/reasoning loud"), Action::None);
        assert!(
            app.entries
                .last()
                .unwrap()
                .text
                .contains("unknown reasoning level")
        );
        assert_eq!(enter(&mut app, "/model"), Action::None);
        assert!(app.entries.last().unwrap().text.contains("model: big"));
        assert_eq!(enter(&mut app, "/cost"), Action::None);
        assert!(app.entries.last().unwrap().text.contains("tokens: 0 input"));
        assert_eq!(enter(&mut app, "/todo"), Action::None);
        assert_eq!(enter(&mut app, "/tasks"), Action::None);
        assert_eq!(enter(&mut app, "/clear"), Action::Clear);
        // A custom command's expansion is the prompt; its !`…` commands do
        // not run in an untrusted project.
        assert_eq!(
            enter(&mut app, "/audit a.rs"),
            Action::Submit("Review a.rs please\n`git diff`".into())
        );
        assert!(
            texts(&app)
                .iter()
                .any(|t| t.contains("needs a trusted project"))
        );
        // A path is a prompt, not a command.
        assert_eq!(
            enter(&mut app, "/etc/hosts is odd"),
            Action::Submit("/etc/hosts is odd".into())
        );
        // The typed command is recalled with Up, not its expansion.
        app.on_key(code(KeyCode::Up));
        app.on_key(code(KeyCode::Up));
        assert_eq!(app.input.text(), "/audit a.rs");
    }

    #[test]
    fn ctrl_r_searches_the_prompt_history() {
        let mut app = App::new(StatusInfo::default());
        app.history = vec![
            "cargo test".into(),
            "fix the bug".into(),
            "cargo build".into(),
        ];
        app.on_key(ctrl('r'));
        type_text(&mut app, "cargo");
        assert_eq!(app.search_match(), Some("cargo build"));
        app.on_key(ctrl('r'));
        assert_eq!(app.search_match(), Some("cargo test"));
        // No older match: it stays.
        app.on_key(ctrl('r'));
        assert_eq!(app.search_match(), Some("cargo test"));
        app.on_key(code(KeyCode::Enter));
        assert!(app.search.is_none());
        assert_eq!(app.input.text(), "cargo test");
        // Esc leaves the input as it was.
        app.on_key(ctrl('r'));
        type_text(&mut app, "bug");
        app.on_key(code(KeyCode::Esc));
        assert_eq!(app.input.text(), "cargo test");
    }

    #[test]
    fn at_completes_project_files_with_tab() {
        let mut app = App::new(StatusInfo::default());
        app.files = vec![
            "README.md".into(),
            "src/main.rs".into(),
            "src/tui/app.rs".into(),
        ];
        type_text(&mut app, "look at @tuiap");
        assert_eq!(app.file_menu(), ["src/tui/app.rs"]);
        app.on_key(code(KeyCode::Tab));
        assert_eq!(app.input.text(), "look at @src/tui/app.rs ");
        assert!(app.file_menu().is_empty());
    }

    #[test]
    fn shift_and_alt_enter_break_the_line_instead_of_sending() {
        let mut app = App::new(StatusInfo::default());
        type_text(&mut app, "one");
        let shift = KeyEvent::new(KeyCode::Enter, KeyModifiers::SHIFT);
        let alt = KeyEvent::new(KeyCode::Enter, KeyModifiers::ALT);
        assert_eq!(app.on_key(shift), Action::None);
        type_text(&mut app, "two");
        assert_eq!(app.on_key(alt), Action::None);
        assert_eq!(app.on_key(ctrl('j')), Action::None);
        type_text(&mut app, "three");
        assert_eq!(
            app.on_key(code(KeyCode::Enter)),
            Action::Submit("one\ntwo\n\nthree".into())
        );
    }

    #[test]
    fn a_prompt_typed_while_a_task_runs_is_queued_in_order() {
        let mut app = App::new(StatusInfo::default());
        app.task_started();
        assert_eq!(enter(&mut app, "next one"), Action::None);
        assert_eq!(enter(&mut app, "and then"), Action::None);
        assert!(texts(&app).iter().any(|t| t.contains("queued")));
        // Not while the task runs.
        assert_eq!(app.next_queued(), None);
        // Session commands wait too.
        assert_eq!(enter(&mut app, "/model x"), Action::None);
        app.task_ended();
        assert_eq!(app.next_queued().as_deref(), Some("next one"));
        assert_eq!(app.next_queued().as_deref(), Some("and then"));
        assert_eq!(app.next_queued(), None);
    }

    #[test]
    fn esc_leaves_a_queued_prompt_in_the_input_box() {
        let mut app = App::new(StatusInfo::default());
        app.task_started();
        enter(&mut app, "run the tests next");
        assert_eq!(app.queued.len(), 1);
        let esc = app.on_key(code(KeyCode::Esc));
        assert_eq!(esc, Action::Abort);
        assert!(app.queued.is_empty());
        assert_eq!(app.input.text(), "run the tests next");
        app.task_ended();
        assert_eq!(app.next_queued(), None, "nothing is sent by itself");
    }

    #[test]
    fn the_bell_rings_when_an_ask_waits_and_when_a_task_ends() {
        let mut app = App::new(StatusInfo::default());
        app.task_started();
        assert!(!app.bell);
        let (tx, _rx) = oneshot::channel();
        app.on_ask(command_ask("ls"), tx);
        assert!(std::mem::take(&mut app.bell));
        app.on_event(TaskEvent::Finished {
            status: TaskStatus::Completed,
            turns: 1,
            usage: Usage::default(),
            result: None,
        });
        assert!(app.bell);
    }

    fn prompts() -> Vec<UserPrompt> {
        ["first", "second\nline two", "third"]
            .iter()
            .enumerate()
            .map(|(index, text)| UserPrompt {
                index,
                text: text.to_string(),
                checkpoint: (index == 1).then(|| "0123456789abcdef0123".to_string()),
            })
            .collect()
    }

    #[test]
    fn esc_esc_opens_the_picker_and_enter_rewinds_to_the_chosen_message() {
        let mut app = App::new(StatusInfo::default());
        assert_eq!(app.on_key(code(KeyCode::Esc)), Action::None);
        assert!(app.notice.as_deref().unwrap_or("").contains("Esc again"));
        // Another key between disarms it.
        app.on_key(code(KeyCode::Left));
        assert_eq!(app.on_key(code(KeyCode::Esc)), Action::None);
        assert_eq!(app.on_key(code(KeyCode::Esc)), Action::RewindMenu);
        app.open_rewind(prompts());
        let menu = app.rewind_menu().unwrap();
        assert_eq!(menu.len(), 3);
        assert_eq!(menu[2], ("› 3.".to_string(), "third".to_string()));
        assert_eq!(menu[1].1, "second…");
        app.on_key(code(KeyCode::Up));
        assert_eq!(app.on_key(code(KeyCode::Enter)), Action::Rewind(1));
        assert!(app.rewind.is_none());
        // Rewound: the text is in the input and the files are offered.
        app.rewound(prompts().remove(1));
        assert_eq!(app.input.text(), "second\nline two");
        assert!(app.rewind_menu().unwrap()[0].1.contains("0123456789ab"));
        assert_eq!(
            app.on_key(KeyEvent::new(KeyCode::Char('y'), KeyModifiers::NONE)),
            Action::RestoreFiles("0123456789abcdef0123".into())
        );
        // Without a known checkpoint there is no offer; Esc closes the
        // picker; no messages, no picker.
        app.rewound(prompts().remove(0));
        assert!(app.rewind.is_none());
        app.open_rewind(prompts());
        app.on_key(code(KeyCode::Esc));
        assert!(app.rewind.is_none());
        app.open_rewind(Vec::new());
        assert!(app.rewind.is_none());
        // While a task runs Esc aborts, as before.
        app.task_started();
        assert_eq!(app.on_key(code(KeyCode::Esc)), Action::Abort);
    }

    #[test]
    fn a_bang_prompt_is_a_shell_command() {
        let mut app = App::new(StatusInfo::default());
        app.input.set("!ls -la");
        assert_eq!(
            app.on_key(code(KeyCode::Enter)),
            Action::Shell("ls -la".into())
        );
        app.input.set("!  ");
        assert_eq!(app.on_key(code(KeyCode::Enter)), Action::None);
        app.task_started();
        app.input.set("!ls");
        assert_eq!(app.on_key(code(KeyCode::Enter)), Action::None);
        assert!(app.notice.is_some());
    }
}
