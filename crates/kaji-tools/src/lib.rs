//! kaji's built-in tools: what each one does, its input schema, and whether
//! it only reads.
//!
//! A tool here is a pure capability: it gets its typed input and a
//! [`ToolContext`] (working directory, cancellation, shared stores) and
//! returns a [`ToolOutput`] or a [`ToolError`]. It must never ask the user,
//! print, or decide about permissions: the core's `ToolExecutor` does that
//! from [`Tool::access`]. Tools that need the user or change the task's
//! course (AskUser, AttemptCompletion, plan mode, worktrees) return a
//! [`ToolControl`] that the executor carries out.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
pub use kaji_protocol::{FileChange, ToolKind, ToolSpec, ToolView};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

pub mod agent_tools;
mod bash;
mod error;
pub mod file_access;
mod fs;
mod html_depth;
mod interaction;
pub mod lsp;
pub mod plan;
mod registry;
mod runtime_tools;
pub mod schema;
pub mod skill;
mod task_list_tools;
pub use task_list_tools::summary as task_list_update;
mod team_mail;
pub mod team_tools;
pub mod todo;
pub mod web_fetch;
pub mod web_search;
pub mod worktree;

pub use error::ToolError;
pub use file_access::{FileAccess, FileAccessError};
pub use fs::{
    IgnoreRule, KajiIgnore, MAX_IMAGE_SIDE, load_image_file, normalize_lexically, real_path,
    validate_image,
};
pub use interaction::finishing_tool;
pub use registry::ToolRegistry;

/// What kind of agent makes a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AgentRole {
    /// The session's main agent, with a person (or `kaji exec`) behind it:
    /// taking over another owner's task is an ask.
    #[default]
    Main,
    /// A sub-agent started by the `Agent` tool: it never takes over.
    Subagent,
    /// A teammate or `kaji worker`: it never takes over either.
    Teammate,
}

/// The session's services a tool may use, shared by reference: built once
/// per session (kaji-core's session builder is the one place that fills
/// it) and held in an [`Arc`] by every Task, sub-agent and call of the
/// session. A service a tool needs is one field here.
#[derive(Debug, Clone, Default)]
pub struct ToolServices {
    /// The shared task list, when the session has one.
    pub task_list: Option<kaji_tasks::list::TaskList>,
    /// The session's runtime task registry, when the session has one.
    pub runtime: Option<Arc<kaji_tasks::RuntimeTaskRegistry>>,
    /// The session's child-process environment policy (`secret_env`,
    /// `env_passthrough`): every process a tool starts gets it in its
    /// [`kaji_tasks::process::SpawnOptions`]. Sessions of one process
    /// (`kaji acp`) each have their own.
    pub env_policy: Arc<kaji_tasks::process::EnvPolicy>,
    /// Where `Read`, `Write` and `Edit` get and put a text file's content
    /// (an editor's buffers over ACP); `None`: the local disk.
    pub files: Option<Arc<dyn FileAccess>>,
    /// The session's language servers (`LSP` tool, diagnostics after
    /// edits); `None`: none.
    pub lsp: Option<Arc<kaji_lsp::LspPool>>,
}

/// Everything a tool may use while it runs: the session's services by
/// reference, what differs per Task (who calls, which search) and per call
/// (where, cancellation, sandbox, live output).
#[derive(Debug, Clone)]
pub struct ToolContext {
    /// The session's services, shared by every call.
    pub services: Arc<ToolServices>,
    /// The task's working directory; relative paths resolve against it.
    /// Inside a worktree it is the worktree's directory.
    pub cwd: PathBuf,
    /// The directory the task started in (the user's checkout). Equal to
    /// `cwd` unless the task moved into a worktree.
    pub project_dir: PathBuf,
    /// Cancelled when the task is aborted: a tool stops at its next await
    /// point and kills what it started.
    pub cancel: CancellationToken,
    /// The kaji session id (a sub-agent's own; used to place runtime
    /// output files).
    pub session_id: String,
    /// The agent making the call: `main`, or a sub-agent's name. It owns
    /// the background tasks it starts and gets their finished notices.
    pub agent: String,
    /// The name the caller holds tasks of the shared list under (their
    /// `owner`): a teammate's or worker's `--name`, a sub-agent's name, the
    /// main agent's `KAJI_AGENT_NAME` or else its session id.
    pub owner: String,
    /// What kind of agent calls: the owner rules of the task list differ.
    pub role: AgentRole,
    /// Runs sub-agents for the `Agent` tool (one level deeper than the
    /// caller); `None` refuses them.
    pub agents: Option<Arc<dyn agent_tools::AgentSpawner>>,
    /// Does `WebSearch`'s searches (the provider's own search for the
    /// Task's model, or a configured backend); `None`: the tool says how
    /// to enable one.
    pub web_search: Option<Arc<dyn web_search::WebSearcher>>,
    /// The sandbox `Bash` commands (foreground and background) run in;
    /// `None` runs them unconfined. Nothing else a tool starts is confined.
    pub sandbox: Option<Arc<kaji_sandbox::SandboxPolicy>>,
    /// Files a `Read` deny rule covers: Grep and Glob leave them out of
    /// their results, as if they did not exist (`None`: nothing hidden).
    pub hidden: Option<ReadFilter>,
    /// Where a foreground `Bash` command's output goes as it is read
    /// (live output for a front end); `None`: only the result has it.
    pub output: Option<OutputSink>,
    /// The id of the tool call being run (the model's `tool_use` id), when
    /// the executor runs one: a sub-agent's events name the `Agent` call
    /// that started it.
    pub call_id: Option<String>,
}

/// Whether a file is hidden from the reading tools (a `Read` deny rule).
#[derive(Clone)]
pub struct ReadFilter(Arc<dyn Fn(&Path) -> bool + Send + Sync>);

impl ReadFilter {
    /// A filter calling `f` with each absolute path.
    pub fn new(f: impl Fn(&Path) -> bool + Send + Sync + 'static) -> Self {
        Self(Arc::new(f))
    }

    /// Whether `path` (absolute) is hidden.
    pub fn hides(&self, path: &Path) -> bool {
        (self.0)(path)
    }
}

impl std::fmt::Debug for ReadFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ReadFilter")
    }
}

/// Receives a command's output while it runs, in the pieces it is read
/// in (bytes: a piece may end inside a UTF-8 character).
#[derive(Clone)]
pub struct OutputSink(Arc<SinkFn>);

/// What an [`OutputSink`] calls.
type SinkFn = dyn Fn(&[u8]) + Send + Sync;

impl OutputSink {
    /// A sink calling `f` with each piece.
    pub fn new(f: impl Fn(&[u8]) + Send + Sync + 'static) -> Self {
        Self(Arc::new(f))
    }

    /// Hands over one piece.
    pub fn send(&self, bytes: &[u8]) {
        (self.0)(bytes)
    }
}

impl std::fmt::Debug for OutputSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OutputSink")
    }
}

impl ToolContext {
    /// A context for `cwd` with no shared stores, for tests and scripts.
    pub fn new(cwd: impl Into<PathBuf>) -> Self {
        let cwd = cwd.into();
        Self {
            services: Arc::default(),
            project_dir: cwd.clone(),
            cwd,
            cancel: CancellationToken::new(),
            session_id: "local".to_string(),
            agent: "main".to_string(),
            owner: "main".to_string(),
            role: AgentRole::Main,
            agents: None,
            web_search: None,
            sandbox: None,
            hidden: None,
            output: None,
            call_id: None,
        }
    }

    /// The same context with these services (tests, scripts).
    pub fn with_services(mut self, services: ToolServices) -> Self {
        self.services = Arc::new(services);
        self
    }

    /// The session's services, to change them before the context is
    /// shared (tests, scripts): copies them first if they are shared.
    pub fn services_mut(&mut self) -> &mut ToolServices {
        Arc::make_mut(&mut self.services)
    }

    /// Resolves a path given by the model against the working directory.
    pub fn resolve(&self, path: &str) -> PathBuf {
        let p = Path::new(path);
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.cwd.join(p)
        }
    }
}

/// What a tool call would touch, for the permission check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolAccess {
    /// Only reads; never changes anything.
    ReadOnly,
    /// Writes these files.
    Edit {
        /// Absolute paths written.
        paths: Vec<PathBuf>,
    },
    /// Runs a shell command.
    Execute {
        /// The command line.
        command: String,
    },
    /// Talks to the user (AskUser) or controls the task (AttemptCompletion,
    /// plan mode): never needs approval of its own.
    Interaction,
    /// Changes session state that is not files (task list, runtime tasks).
    SessionState,
    /// Reaches something outside kaji's knowledge (MCP servers).
    External,
    /// Deletes a task of the shared list that another owner holds, or
    /// changes its owner: the main agent asks first (in every mode but
    /// yolo); other agents are refused by the tool itself.
    TakeOver {
        /// The task.
        task_id: u64,
        /// Who holds it now.
        holder: String,
    },
    /// Changes a task of the shared list that the caller does not hold
    /// (nobody's, or another owner's without taking it over): runs in
    /// every mode but plan, where only the caller's own tasks change.
    SharedTask {
        /// The task; `None`: whichever is next available (`TaskClaim`).
        task_id: Option<u64>,
    },
    /// Reads from the network (`WebFetch`): only reads, but the user is
    /// asked per domain unless a rule allows it.
    Network {
        /// The URL, as given.
        url: String,
        /// Its host in lower case (`docs.rs`); empty when the URL has none.
        domain: String,
    },
}

/// An instruction from a tool to the executor that ran it.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolControl {
    /// Ask the user this question; the answer is the tool's result.
    AskUser {
        /// The question.
        question: String,
        /// Suggested answers.
        options: Vec<String>,
    },
    /// The task is done with this result.
    Complete {
        /// The result to show.
        result: String,
    },
    /// Switch the task to plan mode (only read-only tools run).
    EnterPlanMode,
    /// Show this plan to the user for approval; on approval the task
    /// leaves plan mode.
    ExitPlanMode {
        /// The plan, markdown.
        plan: String,
    },
    /// From now on the task works in this directory (entering or leaving a
    /// worktree). Relative paths and Bash use it.
    ChangeDirectory {
        /// The new working directory, absolute.
        path: PathBuf,
    },
}

/// What a successful tool call returns.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolOutput {
    /// The result text sent back to the model.
    pub content: String,
    /// Structured detail of the call (diff, exit code, the task created,
    /// …), in the tool's own shape. Its reader is the tool itself: its
    /// [`Tool::hook_response`] (Claude Code's `tool_response`: Bash's exit
    /// code and interruption, Write's and Edit's path and action) and
    /// [`Tool::hook_event`] (`TaskCreated`, `TaskCompleted` with the task)
    /// build on it. The model and front ends never see it.
    pub data: Option<Value>,
    /// Session state the call changed (task list, todo), shown to the
    /// user as a typed `say`.
    pub update: Option<kaji_protocol::StateUpdate>,
    /// What the executor must do next, if anything.
    pub control: Option<ToolControl>,
    /// Whether the call changed files in the working directory (drives
    /// checkpoints).
    pub changed_files: bool,
    /// Images for the model (`Read` of an image file, MCP image results).
    /// The executor sends each, as [`ToolImage::block`], right after the
    /// call's `ToolResult` in the same user message.
    pub images: Vec<ToolImage>,
}

/// An image a tool returns to the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolImage {
    /// `image/png`, `image/jpeg`, `image/gif` or `image/webp`.
    pub media_type: String,
    /// The bytes, standard base64.
    pub data: String,
}

impl ToolImage {
    /// The image as a history block.
    pub fn block(&self) -> kaji_protocol::ContentBlock {
        kaji_protocol::ContentBlock::image(self.media_type.clone(), self.data.clone())
    }
}

impl ToolOutput {
    /// A plain text result.
    pub fn text(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            ..Self::default()
        }
    }
}

/// A tool kaji can run.
#[async_trait]
pub trait Tool: Send + Sync {
    /// The name the model calls it by.
    fn name(&self) -> &'static str;

    /// Name, description and input schema, as offered to the model.
    fn spec(&self) -> ToolSpec;

    /// Whether calling it again with the same input is expected to return
    /// the same result for a while (polling a background task's output):
    /// such calls are never taken for a loop.
    fn polls(&self) -> bool {
        false
    }

    /// The call's result as a hook's `tool_response`, in Claude Code's
    /// shape for this tool (Bash `{stdout, stderr, interrupted, isImage}`,
    /// Write and Edit `{filePath, …}`). The default is `{"output": …}`.
    fn hook_response(&self, _input: &Value, output: &ToolOutput) -> Value {
        serde_json::json!({ "output": output.content })
    }

    /// The Claude Code hook event this call amounts to, with its fields
    /// (`TaskCreated`, `TaskCompleted` for task-list items); `None` for
    /// most calls.
    fn hook_event(&self, _input: &Value, _output: &ToolOutput) -> Option<(&'static str, Value)> {
        None
    }

    /// Whether calling it finishes the task (AttemptCompletion): a
    /// sub-agent always has it, whatever its type's `tools:` list says.
    fn finishes_task(&self) -> bool {
        false
    }

    /// Whether the tool only ever reads. Read-only tools run in plan mode
    /// and do not wait for the initial checkpoint.
    fn is_read_only(&self) -> bool;

    /// What this particular call would touch. The default says read-only
    /// tools read and other tools reach outside.
    fn access(&self, _input: &Value, _ctx: &ToolContext) -> ToolAccess {
        if self.is_read_only() {
            ToolAccess::ReadOnly
        } else {
            ToolAccess::External
        }
    }

    /// What this call would touch, for tools that must look something up
    /// first (the shared task list, which may be a database). The executor
    /// asks this one; the default is [`Tool::access`].
    async fn access_checked(&self, input: &Value, ctx: &ToolContext) -> ToolAccess {
        self.access(input, ctx)
    }

    /// What a call of it does, for front ends (an icon, ACP's `kind`).
    fn kind(&self) -> ToolKind {
        ToolKind::Other
    }

    /// One line for people: `Edit: src/main.rs`, `Bash: cargo test`. The
    /// input may be incomplete (arguments still streaming) or invalid: a
    /// title never fails. The default is the tool's name.
    fn title(&self, _input: &Value) -> String {
        self.name().to_string()
    }

    /// The files this call reads and writes, as the input names them (for
    /// `Read(…)` permission rules, compaction and front ends' locations).
    fn files(&self, _input: &Value) -> ToolFiles {
        ToolFiles::default()
    }

    /// The change this call makes to a file, as text a front end can
    /// diff; its path as the input names it. `None` for tools that change
    /// no file.
    fn change(&self, _input: &Value) -> Option<FileChange> {
        None
    }

    /// What an approval shows beyond the title: the whole command, a
    /// unified diff of the file as it is now. May read files; never
    /// changes anything. `None`: the title says it all.
    fn preview(&self, _input: &Value, _ctx: &ToolContext) -> Option<String> {
        None
    }

    /// The input of a call of this tool that runs `command` as a shell
    /// command line, for the tool that runs them (`Bash`): a front end's
    /// `!command` is such a call. `None` (the default): it runs none.
    fn shell_input(&self, _command: &str) -> Option<Value> {
        None
    }

    /// Runs the call.
    async fn call(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError>;
}

/// The files a call names, as its input names them (relative to the
/// working directory, or absolute).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolFiles {
    /// Files (or, for searches, directories) it reads.
    pub reads: Vec<String>,
    /// Files it writes.
    pub writes: Vec<String>,
}

impl ToolFiles {
    /// A call that reads `path`, when the input names one.
    pub fn read(path: Option<&str>) -> Self {
        Self {
            reads: path.map(str::to_string).into_iter().collect(),
            writes: Vec::new(),
        }
    }

    /// A call that writes `path`, when the input names one.
    pub fn write(path: Option<&str>) -> Self {
        Self {
            reads: Vec::new(),
            writes: path.map(str::to_string).into_iter().collect(),
        }
    }
}

/// How `tool` presents a call with `input` to front ends: its kind and
/// title, the files it touches and the change it makes, paths as the input
/// names them.
pub fn view(tool: &dyn Tool, input: &Value) -> ToolView {
    let files = tool.files(input);
    ToolView {
        kind: tool.kind(),
        title: tool.title(input),
        locations: files
            .reads
            .into_iter()
            .chain(files.writes)
            .map(PathBuf::from)
            .collect(),
        change: tool.change(input),
    }
}

/// A title for a tool kaji knows nothing of (an MCP server's): its name
/// and the first line of the first string argument of a common name
/// (`file_path`, `command`, `pattern`, `path`, `query`, `url`, …).
pub fn title_from_args(name: &str, input: &Value) -> String {
    const COMMON: [&str; 10] = [
        "file_path",
        "command",
        "pattern",
        "path",
        "question",
        "query",
        "taskId",
        "task_id",
        "subject",
        "url",
    ];
    COMMON
        .iter()
        .find(|k| input.get(**k).is_some_and(Value::is_string))
        .map_or_else(|| name.to_string(), |k| title_with(name, input, k))
}

/// A title `"{name}: {value}"` from the first line of a string argument,
/// or the bare name when the input has no such argument (yet).
pub fn title_with(name: &str, input: &Value, key: &str) -> String {
    match input.get(key).and_then(Value::as_str) {
        Some(v) => format!("{name}: {}", v.lines().next().unwrap_or("")),
        None => name.to_string(),
    }
}

/// Checks that a required text argument holds more than white space. The
/// error names the argument and says what to give: "`{field}` is empty;
/// {what}".
pub fn require_text(tool: &str, field: &str, value: &str, what: &str) -> Result<(), ToolError> {
    if value.trim().is_empty() {
        return Err(ToolError::InvalidInput {
            tool: tool.to_string(),
            message: format!("{field} is empty; {what}"),
        });
    }
    Ok(())
}

/// Deserializes a tool's typed input, turning serde's complaint into a
/// message the model can act on.
pub fn parse_input<T: serde::de::DeserializeOwned>(
    tool: &str,
    input: Value,
) -> Result<T, ToolError> {
    serde_json::from_value(input).map_err(|e| ToolError::InvalidInput {
        tool: tool.to_string(),
        message: e.to_string(),
    })
}

/// The registry of every built-in tool, in the order offered to the model.
pub fn builtin_tools() -> ToolRegistry {
    let mut registry = ToolRegistry::new();
    fs::register(&mut registry);
    bash::register(&mut registry);
    interaction::register(&mut registry);
    task_list_tools::register(&mut registry);
    team_tools::register(&mut registry);
    runtime_tools::register(&mut registry);
    todo::register(&mut registry);
    plan::register(&mut registry);
    worktree::register(&mut registry);
    web_fetch::register(&mut registry);
    web_search::register(&mut registry);
    lsp::register(&mut registry);
    agent_tools::register(&mut registry);
    registry
}
