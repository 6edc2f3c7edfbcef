//! The `Bash` tool: runs a command line with `bash -c` (or `sh -c` when
//! bash is missing) in the task's working directory.
//!
//! In the foreground the command runs in its own process group
//! ([`kaji_tasks::process`]); stdout and stderr are read from one pipe, in
//! the order they were written, and capped (the start and the end are kept,
//! with a marker saying how much was cut). When the command line ends, any
//! process it left running in the background is stopped with its group, so
//! a foreground call never leaves anything behind; long-running work uses
//! `run_in_background`, which hands the command to the session's
//! [`RuntimeTaskRegistry`](kaji_tasks::RuntimeTaskRegistry) and returns at
//! once with the runtime task id and the output file.
//!
//! A timeout stops the group politely (`SIGTERM`, a grace period,
//! `SIGKILL`); an abort (the context's cancellation token) kills it at once.
//! With a sandbox in the [`ToolContext`], the command (foreground or
//! background) and everything it starts run confined; a sandboxed command
//! that fails with a permission error in its output is a
//! [`ToolError::SandboxDenied`] saying the sandbox may have blocked it.
//!
//! This tool never decides permissions (its [`ToolAccess`] is the command
//! line) and never interprets the command itself.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use kaji_protocol::ToolSpec;
use kaji_tasks::process::{self, DEFAULT_KILL_GRACE, GroupChild};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::AsyncReadExt;

use crate::{
    OutputSink, Tool, ToolAccess, ToolContext, ToolError, ToolOutput, ToolRegistry, parse_input,
};

/// Default timeout of a foreground command: 120,000 ms.
pub const DEFAULT_TIMEOUT_MS: u64 = 120_000;
/// Largest timeout a call may ask for: 600,000 ms.
pub const MAX_TIMEOUT_MS: u64 = 600_000;
/// Default cap on the output returned to the model, in characters.
pub const DEFAULT_OUTPUT_CAP_CHARS: usize = 30_000;

/// How many entries of the workspace are looked at to find what
/// `.kajiignore` excludes before a sandboxed command starts.
const KAJIIGNORE_WALK_LIMIT: usize = 200_000;

/// The context's sandbox with what `.kajiignore` excludes made unreadable
/// too, so that a command cannot read what the file tools refuse. A
/// workspace too large to walk is an error rather than a weaker sandbox.
fn sandbox_for(ctx: &ToolContext) -> Result<Option<Arc<kaji_sandbox::SandboxPolicy>>, ToolError> {
    let Some(policy) = ctx.sandbox.as_ref().filter(|p| p.is_enabled()) else {
        return Ok(ctx.sandbox.clone());
    };
    let ignore = crate::fs::KajiIgnore::load(&ctx.cwd);
    if ignore.is_empty() {
        return Ok(Some(policy.clone()));
    }
    let root = if ctx.cwd.starts_with(&ctx.project_dir) {
        ctx.project_dir.clone()
    } else {
        ctx.cwd.clone()
    };
    let Some(excluded) = ignore.excluded_paths(&root, KAJIIGNORE_WALK_LIMIT) else {
        return Err(ToolError::Refused(format!(
            "Bash: {} has more than {KAJIIGNORE_WALK_LIMIT} entries, too many to find what \
             .kajiignore excludes before the sandbox starts; run the command in a subdirectory",
            root.display()
        )));
    };
    let mut policy = (**policy).clone();
    policy.deny_read.extend(excluded);
    Ok(Some(Arc::new(policy)))
}

/// When a sandboxed command failed and its output looks like the kernel
/// refused an access, the note saying the sandbox may have blocked it.
fn sandbox_note(
    ctx: &ToolContext,
    status: std::process::ExitStatus,
    output: &str,
) -> Option<String> {
    let policy = ctx.sandbox.as_deref().filter(|p| p.is_enabled())?;
    if status.success() {
        return None;
    }
    kaji_sandbox::denial_note(policy.mode, output)
}

/// Adds `Bash` to `registry`.
pub(crate) fn register(registry: &mut ToolRegistry) {
    registry.register(Arc::new(BashTool::with_config(BashConfig::default())));
}

/// Limits of the `Bash` tool.
#[derive(Debug, Clone)]
pub struct BashConfig {
    /// Timeout when the call gives none.
    pub default_timeout: Duration,
    /// Upper bound on the timeout a call may ask for.
    pub max_timeout: Duration,
    /// Characters of output returned at most (half from the start, half
    /// from the end).
    pub output_cap_chars: usize,
    /// Time between `SIGTERM` and `SIGKILL` when a command times out or
    /// leaves processes behind.
    pub kill_grace: Duration,
}

impl Default for BashConfig {
    fn default() -> Self {
        Self {
            default_timeout: Duration::from_millis(DEFAULT_TIMEOUT_MS),
            max_timeout: Duration::from_millis(MAX_TIMEOUT_MS),
            output_cap_chars: DEFAULT_OUTPUT_CAP_CHARS,
            kill_grace: DEFAULT_KILL_GRACE,
        }
    }
}

/// The `Bash` tool.
#[derive(Debug, Clone, Default)]
pub struct BashTool {
    config: BashConfig,
}

/// Input of `Bash`, as in Claude Code's tool of the same name.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct BashInput {
    /// The command line to run.
    command: String,
    /// Timeout in milliseconds (default 120000, at most 600000).
    #[serde(default, deserialize_with = "deserialize_millis")]
    #[schemars(with = "Option<f64>")]
    timeout: Option<u64>,
    /// What the command does, in 5 to 10 words.
    #[serde(default)]
    description: Option<String>,
    /// Start the command as a background task and return at once; read its output later with TaskOutput.
    #[serde(default)]
    run_in_background: Option<bool>,
}

const NAME: &str = "Bash";

const DESCRIPTION: &str = "Runs a shell command line with bash (sh when bash is missing) in the \
working directory and returns its combined stdout and stderr, its exit code and how long it took.\n\
- The command runs in its own process group: when it ends, times out or is aborted, every process \
it started is stopped too. Do not start servers or watchers with `&` in the foreground: use \
run_in_background.\n\
- timeout is in milliseconds (default 120000, at most 600000).\n\
- Output longer than 30000 characters is cut in the middle; the start and the end are kept.\n\
- Prefer the Read, Glob, Grep, Edit and Write tools over cat, find, grep, sed and echo redirection.\n\
- run_in_background: true starts the command as a background runtime task and returns at once with \
its task id and output file; read new output with TaskOutput and stop it with TaskStop. You are told \
when it finishes.";

impl BashTool {
    /// A `Bash` tool with these limits.
    pub fn with_config(config: BashConfig) -> Self {
        Self { config }
    }

    fn timeout_for(&self, input: &BashInput) -> Result<Duration, ToolError> {
        match input.timeout {
            None => Ok(self.config.default_timeout),
            Some(0) => Err(invalid("timeout must be at least 1 ms")),
            Some(ms) => {
                let asked = Duration::from_millis(ms);
                if asked > self.config.max_timeout {
                    Err(invalid(format!(
                        "timeout {ms} ms is above the maximum of {} ms",
                        self.config.max_timeout.as_millis()
                    )))
                } else {
                    Ok(asked)
                }
            }
        }
    }

    async fn run_foreground(
        &self,
        input: &BashInput,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let timeout = self.timeout_for(input)?;
        if !ctx.cwd.is_dir() {
            return Err(ToolError::Refused(format!(
                "Bash: the working directory {} does not exist or is not a directory",
                ctx.cwd.display()
            )));
        }
        let started = Instant::now();
        let mut cmd = process::shell_command(&input.command);
        cmd.current_dir(&ctx.cwd).stdin(std::process::Stdio::null());
        let options = process::SpawnOptions::sandboxed(sandbox_for(ctx)?)
            .with_env(Arc::clone(&ctx.services.env_policy));
        let (mut child, reader) =
            process::spawn_with_merged_output_with(cmd, &options).map_err(|e| {
                ToolError::Refused(format!(
                    "Bash: could not start {}: {e}",
                    process::shell_path().display()
                ))
            })?;
        let mut reader =
            tokio::net::unix::pipe::Receiver::from_owned_fd(reader.into()).map_err(|e| {
                ToolError::Refused(format!("Bash: could not read the command's output: {e}"))
            })?;
        let mut capture = HeadTailCapture::new(self.config.output_cap_chars);

        let end = run_until_end(
            &mut child,
            &mut reader,
            &mut capture,
            timeout,
            ctx,
            self.config.kill_grace,
        )
        .await;
        let duration = started.elapsed();

        let status = match end {
            RunEnd::Cancelled => {
                // Abort: no grace period.
                let _ = child.kill_now().await;
                return Err(ToolError::Cancelled);
            }
            RunEnd::TimedOut => {
                let status = child.shutdown(self.config.kill_grace).await.ok();
                drain_ready(&mut reader, &mut capture, ctx.output.as_ref());
                let text = capture.finish();
                let seconds = timeout.as_secs_f64();
                let mut content = text.text.clone();
                if !content.is_empty() && !content.ends_with('\n') {
                    content.push('\n');
                }
                content.push_str(&format!(
                    "[Command timed out after {seconds:.1} s; it and every process it started were stopped.]"
                ));
                return Ok(ToolOutput {
                    content,
                    update: None,
                    data: Some(json!({
                        "exit_code": status.and_then(|s| s.code()),
                        "signal": status.and_then(signal_of),
                        "timed_out": true,
                        "duration_ms": duration.as_millis() as u64,
                        "omitted_bytes": text.omitted_bytes,
                    })),
                    control: None,
                    changed_files: true,
                    images: Vec::new(),
                });
            }
            RunEnd::Exited(status) => status,
        };

        let text = capture.finish();
        let mut content = text.text.clone();
        if !content.is_empty() && !content.ends_with('\n') {
            content.push('\n');
        }
        let secs = duration.as_secs_f64();
        match (status.code(), signal_of(status)) {
            (Some(code), _) => content.push_str(&format!("[exit code {code}, {secs:.2} s]")),
            (None, Some(sig)) => {
                content.push_str(&format!("[killed by signal {sig}, {secs:.2} s]"))
            }
            (None, None) => content.push_str(&format!("[ended, {secs:.2} s]")),
        }
        if let Some(note) = sandbox_note(ctx, status, &text.text) {
            return Err(ToolError::SandboxDenied {
                output: content,
                note,
            });
        }
        Ok(ToolOutput {
            content,
            update: None,
            data: Some(json!({
                "exit_code": status.code(),
                "signal": signal_of(status),
                "timed_out": false,
                "duration_ms": duration.as_millis() as u64,
                "omitted_bytes": text.omitted_bytes,
            })),
            control: None,
            changed_files: true,
            images: Vec::new(),
        })
    }

    async fn run_background(
        &self,
        input: &BashInput,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let Some(registry) = ctx.services.runtime.as_ref() else {
            return Err(ToolError::Refused(
                "Bash: run_in_background is not available in this session (it has no runtime task \
                 registry); run the command in the foreground instead"
                    .to_string(),
            ));
        };
        let description = input
            .description
            .clone()
            .filter(|d| !d.trim().is_empty())
            .unwrap_or_else(|| input.command.clone());
        let options = process::SpawnOptions::sandboxed(sandbox_for(ctx)?)
            .with_env(Arc::clone(&ctx.services.env_policy));
        let info = registry
            .start_local_bash_with(&input.command, &description, &ctx.cwd, &ctx.agent, options)
            .await
            .map_err(|e| ToolError::Refused(format!("Bash: {e}")))?;
        let content = format!(
            "Started background task {id} ({description}).\nOutput file: {path}\nRead its new output with \
             TaskOutput {{\"task_id\": \"{id}\"}} and stop it with TaskStop; you will be told when it ends.",
            id = info.id,
            path = info.output_path.display(),
        );
        Ok(ToolOutput {
            content,
            update: None,
            data: Some(json!({
                "task_id": info.id.as_str(),
                "output_path": info.output_path,
                "background": true,
            })),
            control: None,
            changed_files: true,
            images: Vec::new(),
        })
    }
}

#[async_trait]
impl Tool for BashTool {
    fn hook_response(&self, input: &Value, output: &ToolOutput) -> Value {
        let data = output.data.as_ref();
        // The output without kaji's closing `[exit code …]` line.
        let stdout = match output.content.rfind("\n[") {
            Some(i) => &output.content[..i + 1],
            None if output.content.starts_with('[') => "",
            None => output.content.as_str(),
        };
        let background = input.get("run_in_background").and_then(Value::as_bool) == Some(true);
        serde_json::json!({
            "stdout": if background { output.content.as_str() } else { stdout },
            "stderr": "",
            "interrupted": data.and_then(|d| d.get("timed_out")).and_then(Value::as_bool).unwrap_or(false),
            "isImage": false,
            "exitCode": data.and_then(|d| d.get("exit_code")).cloned().unwrap_or(Value::Null),
        })
    }

    fn name(&self) -> &'static str {
        NAME
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: NAME.to_string(),
            description: DESCRIPTION.to_string(),
            input_schema: crate::schema::input_schema::<BashInput>(),
        }
    }

    fn kind(&self) -> crate::ToolKind {
        crate::ToolKind::Execute
    }

    fn title(&self, input: &Value) -> String {
        crate::title_with(NAME, input, "command")
    }

    fn preview(&self, input: &Value, _ctx: &ToolContext) -> Option<String> {
        input
            .get("command")
            .and_then(Value::as_str)
            .map(str::to_string)
    }

    fn shell_input(&self, command: &str) -> Option<Value> {
        Some(serde_json::json!({ "command": command }))
    }

    fn summary(&self, _input: &Value, output: &str) -> Option<String> {
        bash_summary(output)
    }

    fn is_read_only(&self) -> bool {
        false
    }

    fn access(&self, input: &Value, _ctx: &ToolContext) -> ToolAccess {
        let command = input
            .get("command")
            .and_then(Value::as_str)
            .unwrap_or_default();
        ToolAccess::Execute {
            command: command.to_string(),
        }
    }

    async fn call(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let input: BashInput = parse_input(NAME, input)?;
        if input.command.trim().is_empty() {
            return Err(invalid("command is empty"));
        }
        if ctx.cancel.is_cancelled() {
            return Err(ToolError::Cancelled);
        }
        if input.run_in_background.unwrap_or(false) {
            self.run_background(&input, ctx).await
        } else {
            self.run_foreground(&input, ctx).await
        }
    }
}

/// A foreground command's result in one line: its first line of output
/// and how many follow, then how it ended unless it exited 0 (`error: no
/// such file (+3 lines) · exit 1`, `exit 2`, `timed out after 5.0 s`).
/// `None` for a result without kaji's closing line (a background start).
fn bash_summary(output: &str) -> Option<String> {
    let lines: Vec<&str> = output.lines().collect();
    let (end, status) = lines.iter().enumerate().rev().find_map(|(i, l)| {
        let status = if let Some(rest) = l.strip_prefix("[exit code ") {
            let code = rest.split(',').next()?;
            (code != "0").then(|| format!("exit {code}"))
        } else if let Some(rest) = l.strip_prefix("[killed by signal ") {
            Some(format!("killed by signal {}", rest.split(',').next()?))
        } else if let Some(rest) = l.strip_prefix("[Command timed out after ") {
            Some(format!("timed out after {}", rest.split(';').next()?))
        } else if l.starts_with("[ended, ") {
            None
        } else {
            return None;
        };
        Some((i, status))
    })?;
    let printed = &lines[..end];
    let Some(first) = printed.first() else {
        return Some(status.unwrap_or_else(|| "no output".to_string()));
    };
    let mut summary = first.to_string();
    if printed.len() > 1 {
        summary.push_str(&format!(" (+{} lines)", printed.len() - 1));
    }
    if let Some(status) = status {
        summary.push_str(&format!(" · {status}"));
    }
    Some(summary)
}

/// Reads a duration in milliseconds that a model may write as `5000`,
/// `5000.0` or `"5000"`; negative, fractional or non-numeric values are an
/// input error. Shared by the runtime task tools.
pub(crate) fn deserialize_millis<'de, D>(deserializer: D) -> Result<Option<u64>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    use serde::de::Error;
    let value = Option::<Value>::deserialize(deserializer)?;
    let number = match &value {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Number(n)) => n.as_u64().or_else(|| {
            n.as_f64()
                .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f <= u64::MAX as f64)
                .map(|f| f as u64)
        }),
        Some(Value::String(s)) => s.trim().parse::<u64>().ok(),
        Some(_) => None,
    };
    number.map(Some).ok_or_else(|| {
        D::Error::custom(format!(
            "timeout must be a whole number of milliseconds, got {}",
            value.unwrap_or(Value::Null)
        ))
    })
}

fn invalid(message: impl Into<String>) -> ToolError {
    ToolError::InvalidInput {
        tool: NAME.to_string(),
        message: message.into(),
    }
}

fn signal_of(status: std::process::ExitStatus) -> Option<i32> {
    use std::os::unix::process::ExitStatusExt;
    status.signal()
}

enum RunEnd {
    Exited(std::process::ExitStatus),
    TimedOut,
    Cancelled,
}

/// Reads output until the leader has exited and every writer of the pipe
/// is gone, the timeout passes, or the call is cancelled. When the leader
/// exits, the processes it left behind are stopped (their output up to
/// then is kept).
async fn run_until_end(
    child: &mut GroupChild,
    reader: &mut tokio::net::unix::pipe::Receiver,
    capture: &mut HeadTailCapture,
    timeout: Duration,
    ctx: &ToolContext,
    grace: Duration,
) -> RunEnd {
    let deadline = tokio::time::sleep(timeout);
    tokio::pin!(deadline);
    let mut buf = vec![0u8; 64 * 1024];
    let mut eof = false;
    let status = loop {
        tokio::select! {
            biased;
            _ = ctx.cancel.cancelled() => return RunEnd::Cancelled,
            _ = &mut deadline => return RunEnd::TimedOut,
            read = reader.read(&mut buf), if !eof => match read {
                Ok(0) | Err(_) => eof = true,
                Ok(n) => {
                    capture.push(&buf[..n]);
                    if let Some(sink) = &ctx.output {
                        sink.send(&buf[..n]);
                    }
                }
            },
            waited = child.wait() => match waited {
                Ok(status) => break status,
                // Waiting failed (should not happen): treat as a timeout so
                // the group is stopped and the caller gets an answer.
                Err(_) => return RunEnd::TimedOut,
            },
        }
    };
    // The leader is done. Stop what it left behind while reading the rest
    // of the output, so a background job still writing cannot block.
    let shutdown = child.shutdown(grace);
    tokio::pin!(shutdown);
    let mut shut = false;
    loop {
        if eof && shut {
            break;
        }
        tokio::select! {
            biased;
            _ = ctx.cancel.cancelled() => return RunEnd::Cancelled,
            _ = &mut deadline => return RunEnd::TimedOut,
            _ = &mut shutdown, if !shut => shut = true,
            read = reader.read(&mut buf), if !eof => match read {
                Ok(0) | Err(_) => eof = true,
                Ok(n) => {
                    capture.push(&buf[..n]);
                    if let Some(sink) = &ctx.output {
                        sink.send(&buf[..n]);
                    }
                }
            },
        }
        if shut && !eof {
            // Every member is dead: what is left is in the pipe already (or
            // held by a process that escaped the group, which we do not
            // wait for).
            drain_ready(reader, capture, ctx.output.as_ref());
            break;
        }
    }
    RunEnd::Exited(status)
}

/// Reads whatever is already in the pipe without waiting.
///
/// It reads the descriptor itself (non-blocking, as tokio left it) rather
/// than through `Receiver::try_read`: tokio answers `try_read` from the
/// readiness its reactor last saw and does not even try the read when that
/// says "not readable". A command that wrote and exited before the reactor
/// turned (a busy runtime: a checkpoint running beside it) would then lose
/// its whole output, although every byte of it is in the pipe.
fn drain_ready(
    reader: &mut tokio::net::unix::pipe::Receiver,
    capture: &mut HeadTailCapture,
    sink: Option<&OutputSink>,
) {
    use std::io::Read;
    use std::os::fd::AsFd;
    let Ok(fd) = reader.as_fd().try_clone_to_owned() else {
        return;
    };
    let mut pipe = std::fs::File::from(fd);
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match pipe.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                capture.push(&buf[..n]);
                if let Some(sink) = sink {
                    sink.send(&buf[..n]);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            // `WouldBlock`: the pipe is empty; anything else: nothing more to read.
            Err(_) => break,
        }
    }
}

/// Keeps the first and last bytes of a stream whose length is not known in
/// advance, in bounded memory.
#[derive(Debug)]
struct HeadTailCapture {
    cap_chars: usize,
    head: Vec<u8>,
    tail: std::collections::VecDeque<u8>,
    /// Byte limit of `head` and of `tail` (a character is at most 4 bytes).
    side_bytes: usize,
    total: u64,
}

/// The captured text, cut to the cap.
#[derive(Debug)]
struct CapturedText {
    text: String,
    omitted_bytes: u64,
}

impl HeadTailCapture {
    fn new(cap_chars: usize) -> Self {
        let side_bytes = cap_chars.div_ceil(2).saturating_mul(4).max(4);
        Self {
            cap_chars,
            head: Vec::new(),
            tail: std::collections::VecDeque::new(),
            side_bytes,
            total: 0,
        }
    }

    fn push(&mut self, mut bytes: &[u8]) {
        self.total += bytes.len() as u64;
        if self.head.len() < self.side_bytes {
            let take = bytes.len().min(self.side_bytes - self.head.len());
            self.head.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
        }
        if bytes.len() >= self.side_bytes {
            self.tail.clear();
            bytes = &bytes[bytes.len() - self.side_bytes..];
        }
        let overflow = (self.tail.len() + bytes.len()).saturating_sub(self.side_bytes);
        self.tail.drain(..overflow);
        self.tail.extend(bytes);
    }

    fn finish(self) -> CapturedText {
        let tail: Vec<u8> = self.tail.into();
        let kept = (self.head.len() + tail.len()) as u64;
        if kept == self.total {
            // Nothing was dropped yet: cut by characters if needed.
            let mut all = self.head;
            all.extend_from_slice(&tail);
            let text = String::from_utf8_lossy(&all).into_owned();
            if text.chars().count() <= self.cap_chars {
                return CapturedText {
                    text,
                    omitted_bytes: 0,
                };
            }
            let head_chars = self.cap_chars / 2;
            let tail_chars = self.cap_chars - head_chars;
            let head_end = text
                .char_indices()
                .nth(head_chars)
                .map_or(text.len(), |(i, _)| i);
            let tail_start = text
                .char_indices()
                .rev()
                .nth(tail_chars.saturating_sub(1))
                .map_or(0, |(i, _)| i)
                .max(head_end);
            let omitted = (tail_start - head_end) as u64;
            return CapturedText {
                text: join_with_marker(&text[..head_end], &text[tail_start..], omitted, self.total),
                omitted_bytes: omitted,
            };
        }
        let head_chars = self.cap_chars / 2;
        let tail_chars = self.cap_chars - head_chars;
        let head_text = String::from_utf8_lossy(&self.head);
        let head_end = head_text
            .char_indices()
            .nth(head_chars)
            .map_or(head_text.len(), |(i, _)| i);
        let head_str = &head_text[..head_end];
        let head_bytes_shown = prefix_bytes_of(&self.head, head_str);
        // Skip continuation bytes at the start of the tail (a character cut
        // in half by the ring buffer).
        let tail_skip = tail
            .iter()
            .take(3)
            .take_while(|b| (**b & 0xC0) == 0x80)
            .count();
        let tail_text = String::from_utf8_lossy(&tail[tail_skip..]);
        let tail_start = tail_text
            .char_indices()
            .rev()
            .nth(tail_chars.saturating_sub(1))
            .map_or(0, |(i, _)| i);
        let tail_str = &tail_text[tail_start..];
        let tail_bytes_shown = suffix_bytes_of(&tail[tail_skip..], tail_str);
        let omitted = self.total - head_bytes_shown - tail_bytes_shown;
        CapturedText {
            text: join_with_marker(head_str, tail_str, omitted, self.total),
            omitted_bytes: omitted,
        }
    }
}

/// How many bytes of `raw` the lossy-decoded prefix `shown` stands for.
fn prefix_bytes_of(raw: &[u8], shown: &str) -> u64 {
    if raw.starts_with(shown.as_bytes()) {
        shown.len() as u64
    } else {
        // Replacement characters make the decoded text differ from the raw
        // bytes; estimate by characters.
        let chars = shown.chars().count();
        String::from_utf8_lossy(raw)
            .char_indices()
            .nth(chars)
            .map_or(raw.len(), |(i, _)| i.min(raw.len())) as u64
    }
}

/// How many bytes of `raw` the lossy-decoded suffix `shown` stands for.
fn suffix_bytes_of(raw: &[u8], shown: &str) -> u64 {
    if raw.ends_with(shown.as_bytes()) {
        shown.len() as u64
    } else {
        (shown.len() as u64).min(raw.len() as u64)
    }
}

fn join_with_marker(head: &str, tail: &str, omitted: u64, total: u64) -> String {
    let mut out = String::with_capacity(head.len() + tail.len() + 160);
    out.push_str(head);
    if !head.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(&format!(
        "[... output cut: {omitted} of {total} bytes omitted here; the start and the end are shown ...]\n"
    ));
    out.push_str(tail);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn capture(cap: usize, chunks: &[&[u8]]) -> CapturedText {
        let mut c = HeadTailCapture::new(cap);
        for chunk in chunks {
            c.push(chunk);
        }
        c.finish()
    }

    /// A command that wrote and exited before tokio's reactor turned: its
    /// output is in the pipe, but tokio has not seen the pipe readable yet.
    /// Draining must still find every byte (it once found none, now and
    /// then, when a checkpoint kept the runtime busy).
    #[tokio::test(flavor = "current_thread")]
    async fn draining_reads_what_the_reactor_has_not_seen_yet() {
        use std::io::Write;
        let (reader, mut writer) = std::io::pipe().expect("pipe");
        writer.write_all(b"secret output\n").expect("write");
        drop(writer);
        // No `.await` between registering the pipe and draining it: the
        // reactor cannot have turned, so its readiness is still empty.
        let mut reader = tokio::net::unix::pipe::Receiver::from_owned_fd(reader.into())
            .expect("register the pipe");
        let mut capture = HeadTailCapture::new(1000);
        drain_ready(&mut reader, &mut capture, None);
        assert_eq!(capture.finish().text, "secret output\n");
    }

    #[test]
    fn short_output_is_untouched() {
        let out = capture(100, &[b"hello ", b"world\n"]);
        assert_eq!(out.text, "hello world\n");
        assert_eq!(out.omitted_bytes, 0);
    }

    #[test]
    fn long_output_keeps_start_and_end() {
        let data: String = (0..1000).map(|i| format!("{i:04}\n")).collect();
        let out = capture(100, &[data.as_bytes()]);
        assert!(out.text.starts_with("0000\n"), "{}", out.text);
        assert!(out.text.ends_with("0999\n"), "{}", out.text);
        assert!(out.text.contains("output cut"));
        assert_eq!(out.omitted_bytes, data.len() as u64 - 100);
    }

    #[test]
    fn ring_buffer_keeps_the_true_end() {
        let data: String = (0..100_000).map(|i| format!("{i:06}\n")).collect();
        let chunks: Vec<&[u8]> = data.as_bytes().chunks(777).collect();
        let out = capture(1000, &chunks);
        assert!(out.text.starts_with("000000\n"));
        assert!(out.text.ends_with("099999\n"));
        assert_eq!(out.omitted_bytes, data.len() as u64 - 1000);
        let shown = out.text.chars().count();
        assert!(shown < 1000 + 200, "shown {shown} chars");
    }

    #[test]
    fn multibyte_characters_are_not_split() {
        let data = "é".repeat(10_000);
        let chunks: Vec<&[u8]> = data.as_bytes().chunks(3).collect();
        let out = capture(100, &chunks);
        assert!(!out.text.contains('\u{FFFD}'), "{}", out.text);
        assert_eq!(out.omitted_bytes, (10_000 - 100) * 2);
    }
}
