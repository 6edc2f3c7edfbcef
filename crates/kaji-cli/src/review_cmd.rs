//! `kaji review [--base REF] [--json] [--fail-on SEVERITY]`: the model
//! reviews a diff with read-only tools and reports findings (file, line,
//! severity, title, explanation, suggested change).
//!
//! The diff is the working tree against `HEAD`, or with `--base` the
//! branch against its merge base with REF (the working tree's changes
//! included). The session runs in plan mode, so only read-only tools run;
//! the model answers with AttemptCompletion holding the findings as JSON,
//! which is checked here ([`parse_findings`]). Findings go to stdout (a
//! JSON array with `--json`), progress and errors to stderr. Exit codes: 0
//! no finding at or above `--fail-on`, 1 at least one, 2 usage errors, 3
//! the review itself failed (no diff readable, the model gave no valid
//! findings). This module must never change the repository.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result, anyhow};
use async_trait::async_trait;
use kaji_core::permissions::PermissionMode;
use kaji_core::{AskRequest, TaskFrontend};
use kaji_protocol::{AskKind, AskResponse, SessionEvent, TaskEvent};
use serde::{Deserialize, Serialize};

use crate::agent::{self, AgentArgs, UsageError};

/// The diff the model sees is cut to this many characters; the rest of the
/// changed files are listed for it to Read.
const MAX_DIFF_CHARS: usize = 120_000;

/// Arguments of `kaji review`.
#[derive(Debug, clap::Args)]
pub struct ReviewArgs {
    /// Review the branch against REF: the changes since their merge base,
    /// the working tree's included. Default: the working tree against HEAD.
    #[arg(long, value_name = "REF")]
    pub base: Option<String>,
    /// Print the findings as one JSON array on stdout.
    #[arg(long)]
    pub json: bool,
    /// Exit 1 when a finding is at or above SEVERITY: critical, high,
    /// medium, low, or none (never).
    #[arg(long, value_name = "SEVERITY", default_value = "high")]
    pub fail_on: FailOn,
    #[command(flatten)]
    pub agent: AgentArgs,
}

/// How bad a finding is.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Worth a thought.
    Low,
    /// Should be fixed.
    Medium,
    /// A bug or a hole: fix before merging.
    High,
    /// Breaks things badly (data loss, security).
    Critical,
}

impl Severity {
    fn as_str(self) -> &'static str {
        match self {
            Self::Low => "low",
            Self::Medium => "medium",
            Self::High => "high",
            Self::Critical => "critical",
        }
    }
}

/// `--fail-on`: a severity, or never.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FailOn {
    /// Any finding of severity low or above.
    Low,
    /// Medium or above.
    Medium,
    /// High or above.
    High,
    /// Critical only.
    Critical,
    /// Never fail.
    None,
}

impl FailOn {
    fn threshold(self) -> Option<Severity> {
        match self {
            Self::Low => Some(Severity::Low),
            Self::Medium => Some(Severity::Medium),
            Self::High => Some(Severity::High),
            Self::Critical => Some(Severity::Critical),
            Self::None => None,
        }
    }
}

/// One finding, as `--json` prints it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Finding {
    /// The file, relative to the repository root.
    pub file: String,
    /// The line in the new version of the file, when it is about one.
    #[serde(default)]
    pub line: Option<u64>,
    /// How bad it is.
    pub severity: Severity,
    /// One line.
    pub title: String,
    /// Why it is a problem.
    #[serde(default)]
    pub body: String,
    /// The replacement code or what to change, when there is one.
    #[serde(default)]
    pub suggestion: Option<String>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum FindingsReply {
    Wrapped { findings: Vec<Finding> },
    Bare(Vec<Finding>),
}

/// The findings in the model's answer: a JSON object `{"findings": […]}`
/// or a bare array, alone or in a fenced block among other text.
pub fn parse_findings(answer: &str) -> Result<Vec<Finding>, String> {
    let start = answer.find(['{', '[']).ok_or("the answer holds no JSON")?;
    let mut stream = serde_json::Deserializer::from_str(&answer[start..]).into_iter();
    match stream.next() {
        Some(Ok(FindingsReply::Wrapped { findings } | FindingsReply::Bare(findings))) => {
            Ok(findings)
        }
        Some(Err(e)) => Err(format!("its JSON is not a list of findings ({e})")),
        None => Err("the answer holds no JSON".into()),
    }
}

/// The diff to review and a description of it.
pub(crate) async fn diff(dir: &Path, base: Option<&str>) -> Result<(String, String)> {
    let git = |args: &[&str]| {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        async move {
            let mut cmd = kaji_tasks::git::command_in("git", dir)
                .with_context(|| format!("cannot run git in {}", dir.display()))?;
            let out = cmd
                .args(&args)
                .output()
                .await
                .with_context(|| format!("cannot run git in {}", dir.display()))?;
            if !out.status.success() {
                return Err(anyhow!(
                    "git {} failed: {}",
                    args.join(" "),
                    String::from_utf8_lossy(&out.stderr).trim()
                ));
            }
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        }
    };
    let (from, what) = match base {
        Some(base) => {
            let mb = git(&["merge-base", base, "HEAD"])
                .await
                .map_err(|e| UsageError(format!("--base {base}: no merge base with HEAD ({e})")))?;
            let mb = mb.trim().to_string();
            (
                mb.clone(),
                format!(
                    "this branch against {base} (from {})",
                    &mb[..mb.len().min(12)]
                ),
            )
        }
        None => (
            "HEAD".to_string(),
            "the working tree against HEAD".to_string(),
        ),
    };
    let text = git(&["diff", "--no-color", "--no-ext-diff", "-M", &from]).await?;
    let untracked = git(&["ls-files", "--others", "--exclude-standard"]).await?;
    let mut text = text;
    for file in untracked.lines().filter(|l| !l.is_empty()) {
        text.push_str(&format!("\nNew untracked file (Read it): {file}\n"));
    }
    Ok((text, what))
}

/// The prompt of a review of `diff`.
pub fn review_prompt(diff: &str, what: &str, json: bool) -> String {
    let mut cut = diff.to_string();
    if cut.len() > MAX_DIFF_CHARS {
        let mut end = MAX_DIFF_CHARS;
        while !cut.is_char_boundary(end) {
            end -= 1;
        }
        cut.truncate(end);
        cut.push_str("\n[… the diff goes on; Read the changed files for the rest]\n");
    }
    let answer = if json {
        "When you are done, call AttemptCompletion with `result` set to JSON only, exactly \
         {\"findings\": [{\"file\": \"path/from/repo/root\", \"line\": 12, \"severity\": \
         \"critical|high|medium|low\", \"title\": \"one line\", \"body\": \"why it is wrong\", \
         \"suggestion\": \"the corrected code, or null\"}]} — `{\"findings\": []}` when you find \
         nothing. `line` is the line in the new version of the file."
    } else {
        "Report each finding as `file:line [severity] title`, then why, then the suggested \
         change. Severity is critical, high, medium or low. Say so when you find nothing."
    };
    format!(
        "Review the changes below ({what}) like a careful senior reviewer. Look for bugs, \
         security problems, data loss, broken edge cases and missing error handling; not for \
         style. Use read-only tools (Read, Grep, Glob) to check the surrounding code; change \
         nothing. {answer}\n\n<diff>\n{cut}\n</diff>"
    )
}

/// The review's front end: nobody answers asks; the model's tool calls go
/// to stderr, one line each.
struct ReviewFrontend;

#[async_trait]
impl TaskFrontend for ReviewFrontend {
    fn emit(&self, event: SessionEvent) {
        if let TaskEvent::ToolUse {
            view: Some(view), ..
        } = &event.event
        {
            eprintln!(
                "kaji review: {}",
                kaji_protocol::terminal::sanitize_terminal(&view.title, false)
            );
        }
    }

    async fn answer(&self, ask: &AskRequest) -> AskResponse {
        match ask.kind {
            AskKind::CompletionResult => AskResponse::Approve,
            _ => AskResponse::Deny {
                feedback: Some(
                    "kaji review runs read-only and without a user: nothing may be changed or \
                     approved. Finish the review with AttemptCompletion."
                        .into(),
                ),
            },
        }
    }
}

/// Runs `kaji review`; returns the exit code.
pub async fn run(args: ReviewArgs) -> i32 {
    match run_inner(args).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("kaji review: {e:#}");
            if e.downcast_ref::<UsageError>().is_some() {
                2
            } else {
                3
            }
        }
    }
}

async fn run_inner(args: ReviewArgs) -> Result<i32> {
    let dir: PathBuf = match &args.agent.cwd {
        Some(d) => d.clone(),
        None => std::env::current_dir().context("cannot read the current directory")?,
    };
    if kaji_tasks::git::discover(&dir).ok().flatten().is_none() {
        return Err(UsageError(format!("{} is not in a git repository", dir.display())).into());
    }
    let (diff, what) = diff(&dir, args.base.as_deref()).await?;
    if diff.trim().is_empty() {
        eprintln!("kaji review: no changes to review ({what})");
        if args.json {
            println!("[]");
        }
        return Ok(0);
    }
    let mut options = args.agent.session_options()?;
    options.permission_mode = Some(PermissionMode::Plan);
    options.headless = true;
    options.text_reply_default = kaji_core::config::TextReply::Finish;
    let (session, warnings) = agent::build(options, Arc::new(ReviewFrontend)).await?;
    for w in warnings {
        eprintln!("kaji review: warning: {w}");
    }
    let prompt = review_prompt(&diff, &what, true);
    let outcome = session
        .submit_with_options(kaji_core::new_task_id(), prompt, Default::default())
        .await
        .map_err(agent::session_error)?;
    let _ = session.shutdown().await;
    let answer = outcome.result.unwrap_or_default();
    let findings = parse_findings(&answer).map_err(|why| {
        anyhow!(
            "the model's review could not be read: {why} (status {}). Its answer:\n{answer}",
            outcome.status.as_str()
        )
    })?;
    print_findings(&findings, args.json);
    let failing = args
        .fail_on
        .threshold()
        .is_some_and(|t| findings.iter().any(|f| f.severity >= t));
    Ok(i32::from(failing))
}

fn print_findings(findings: &[Finding], json: bool) {
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(findings).unwrap_or_else(|_| "[]".into())
        );
        return;
    }
    if findings.is_empty() {
        println!("No findings.");
    }
    for f in findings {
        let at = f
            .line
            .map_or_else(|| f.file.clone(), |l| format!("{}:{l}", f.file));
        println!("{at} [{}] {}", f.severity.as_str(), f.title);
        for l in f.body.lines() {
            println!("    {l}");
        }
        if let Some(s) = f.suggestion.as_deref().filter(|s| !s.trim().is_empty()) {
            println!("    suggestion:");
            for l in s.lines() {
                println!("      {l}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn findings_in_fences_or_bare() {
        let f = parse_findings(
            "Here:\n```json\n{\"findings\": [{\"file\": \"a.rs\", \"line\": 3, \"severity\": \"high\", \"title\": \"t\"}]}\n```",
        )
        .unwrap();
        assert_eq!(f[0].severity, Severity::High);
        assert_eq!(f[0].line, Some(3));
        assert!(parse_findings("[]").unwrap().is_empty());
        let e = parse_findings("{\"findings\": [{\"file\": 1}]}").unwrap_err();
        assert!(e.contains("not a list of findings"), "{e}");
        assert!(parse_findings("nothing").is_err());
    }

    #[test]
    fn severities_order() {
        assert!(Severity::Critical > Severity::High && Severity::Medium > Severity::Low);
    }
}
