//! `EnterPlanMode` and `ExitPlanMode`: the tools through which the model
//! switches the task into plan mode and presents its plan for approval
//! (the "Plan" layer of seed 002), plus [`save_project_plan`], which
//! stores an approved plan under `$KAJI_HOME/plans/<project>/` (never in
//! the repository, never in `.git/`).
//!
//! The tools themselves do nothing: each returns a [`ToolControl`] that
//! the core's executor carries out (changing the permission mode, asking
//! the user to approve the plan). [`save_project_plan`] (and the older
//! [`save_plan`]) is the only code here that writes, and it never
//! overwrites an existing file.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use async_trait::async_trait;
use kaji_protocol::ToolSpec;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::{
    Tool, ToolAccess, ToolContext, ToolControl, ToolError, ToolOutput, ToolRegistry, parse_input,
};

/// The name of the tool that enters plan mode.
pub const ENTER_PLAN_MODE: &str = "EnterPlanMode";
/// The name of the tool that presents the plan.
pub const EXIT_PLAN_MODE: &str = "ExitPlanMode";

/// Where approved plans are saved, relative to the working directory.
pub const PLANS_DIR: &str = ".kaji/plans";

/// The longest slug in a plan's file name, in characters.
pub const MAX_SLUG_CHARS: usize = 40;

/// Adds `EnterPlanMode` and `ExitPlanMode` to `registry`.
pub(crate) fn register(registry: &mut ToolRegistry) {
    registry.register(Arc::new(EnterPlanModeTool));
    registry.register(Arc::new(ExitPlanModeTool));
}

/// The directory of a project's plans: `$KAJI_HOME/plans/<project>/`,
/// where `<project>` is the last component of the canonical project
/// directory (letters, digits, `.`, `_` and `-`; others become `-`), a
/// `-`, and the 64-bit FNV-1a hash of the whole canonical path as 16 hex
/// digits, so two checkouts with the same name never share plans.
pub fn project_plans_dir(kaji_home: &Path, project_dir: &Path) -> PathBuf {
    let canonical = project_dir
        .canonicalize()
        .unwrap_or_else(|_| project_dir.to_path_buf());
    let name: String = canonical
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .take(64)
        .collect();
    let name = name.trim_start_matches('.');
    let name = if name.is_empty() { "root" } else { name };
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in canonical.as_os_str().as_encoded_bytes() {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    kaji_home.join("plans").join(format!("{name}-{hash:016x}"))
}

/// Saves an approved plan of the project in `project_dir` as
/// `<project_plans_dir>/<yyyymmdd-hhmmss>-<slug>.md` (see
/// [`project_plans_dir`] and [`save_plan`] for the name) and returns the
/// path. Refused when that directory would lie inside a `.git` directory
/// (a `$KAJI_HOME` set inside one).
pub fn save_project_plan(
    kaji_home: &Path,
    project_dir: &Path,
    plan: &str,
    now: SystemTime,
) -> Result<PathBuf, ToolError> {
    let dir = project_plans_dir(kaji_home, project_dir);
    if dir.components().any(|c| c.as_os_str() == ".git") {
        return Err(ToolError::Refused(format!(
            "plans are never saved inside a .git directory, and {} is one: set KAJI_HOME elsewhere",
            dir.display()
        )));
    }
    save_plan_in(&dir, plan, now)
}

/// Saves an approved plan as `<cwd>/.kaji/plans/<yyyymmdd-hhmmss>-<slug>.md`
/// and returns the path. Prefer [`save_project_plan`], which keeps plans
/// out of the repository.
///
/// The time stamp is `now` in UTC. The slug comes from the plan's first
/// non-empty line (a markdown heading's `#` marks dropped): lower-case
/// ASCII letters and digits, every other run of characters turned into one
/// `-`, at most [`MAX_SLUG_CHARS`] characters, `plan` when nothing is left.
/// An existing file is never overwritten: `-2`, `-3`, … is appended to the
/// name instead. The directories are created as needed.
pub fn save_plan(cwd: &Path, plan: &str, now: SystemTime) -> Result<PathBuf, ToolError> {
    save_plan_in(&cwd.join(PLANS_DIR), plan, now)
}

/// Saves `plan` in `dir` under its time-and-slug name (never overwriting).
fn save_plan_in(dir: &Path, plan: &str, now: SystemTime) -> Result<PathBuf, ToolError> {
    let dir = dir.to_path_buf();
    std::fs::create_dir_all(&dir).map_err(|source| ToolError::Io {
        path: dir.clone(),
        source,
    })?;
    let stamp = kaji_protocol::UtcDateTime::from_system_time(now)
        .unwrap_or(kaji_protocol::UtcDateTime::EPOCH);
    let stem = format!(
        "{:04}{:02}{:02}-{:02}{:02}{:02}-{}",
        stamp.year,
        stamp.month,
        stamp.day,
        stamp.hour,
        stamp.minute,
        stamp.second,
        plan_slug(plan)
    );
    let mut body = plan.trim_end().to_string();
    body.push('\n');
    for attempt in 1u32.. {
        let name = if attempt == 1 {
            format!("{stem}.md")
        } else {
            format!("{stem}-{attempt}.md")
        };
        let path = dir.join(name);
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
        {
            Ok(mut file) => {
                file.write_all(body.as_bytes())
                    .and_then(|()| file.sync_all())
                    .map_err(|source| ToolError::Io {
                        path: path.clone(),
                        source,
                    })?;
                return Ok(path);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(source) => return Err(ToolError::Io { path, source }),
        }
    }
    Err(ToolError::Refused(format!(
        "no free file name for the plan in {}",
        dir.display()
    )))
}

/// The slug of a plan's file name; see [`save_plan`].
pub fn plan_slug(plan: &str) -> String {
    let first = plan
        .lines()
        .map(|l| l.trim().trim_start_matches('#').trim())
        .find(|l| !l.is_empty())
        .unwrap_or("");
    let mut slug = String::new();
    for c in first.chars().flat_map(char::to_lowercase) {
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            slug.push(c);
        } else if !slug.is_empty() && !slug.ends_with('-') {
            slug.push('-');
        }
        if slug.len() >= MAX_SLUG_CHARS {
            break;
        }
    }
    slug.truncate(MAX_SLUG_CHARS);
    let slug = slug.trim_end_matches('-');
    if slug.is_empty() {
        "plan".to_string()
    } else {
        slug.to_string()
    }
}

/// `EnterPlanMode`: switches the task to plan mode.
struct EnterPlanModeTool;

#[async_trait]
impl Tool for EnterPlanModeTool {
    fn name(&self) -> &'static str {
        ENTER_PLAN_MODE
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: ENTER_PLAN_MODE.to_string(),
            description: "Switches the task into plan mode, where you look before you touch \
anything: only read-only tools run (reading, searching, listing tasks and output); edits and \
commands are refused until the user approves a plan. Use it when the work is large, risky or \
unclear — a change across many files, a choice between designs, an unfamiliar code base, a \
request you could read more than one way — so the user can agree on the approach first. Skip it \
for small, obvious changes and for pure questions. When you know what to do, present the plan \
with ExitPlanMode."
                .to_string(),
            input_schema: crate::schema::input_schema::<EnterPlanModeInput>(),
        }
    }

    fn kind(&self) -> crate::ToolKind {
        crate::ToolKind::SwitchMode
    }

    fn is_read_only(&self) -> bool {
        true
    }

    fn access(&self, _input: &Value, _ctx: &ToolContext) -> ToolAccess {
        ToolAccess::Interaction
    }

    async fn call(&self, input: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        if !(input.is_null() || input.as_object().is_some()) {
            return Err(ToolError::InvalidInput {
                tool: ENTER_PLAN_MODE.to_string(),
                message: "expected an empty object {}".to_string(),
            });
        }
        Ok(ToolOutput {
            content: "Plan mode is on. Investigate with read-only tools only; do not change \
anything. When you have a plan, present it with ExitPlanMode for the user's approval."
                .to_string(),
            update: None,
            data: None,
            control: Some(ToolControl::EnterPlanMode),
            changed_files: false,
            images: Vec::new(),
        })
    }
}

/// `ExitPlanMode`: presents the plan for approval.
struct ExitPlanModeTool;

/// `EnterPlanMode` takes no arguments.
#[derive(Debug, Deserialize, JsonSchema)]
struct EnterPlanModeInput {}

#[derive(Debug, Deserialize, JsonSchema)]
struct ExitPlanModeInput {
    /// The plan, in markdown, starting with a one-line title.
    #[schemars(length(min = 1))]
    plan: String,
}

#[async_trait]
impl Tool for ExitPlanModeTool {
    fn name(&self) -> &'static str {
        EXIT_PLAN_MODE
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: EXIT_PLAN_MODE.to_string(),
            description: "Presents your plan to the user for approval and, once approved, leaves \
plan mode so you can carry it out (the plan is saved under $KAJI_HOME/plans/; the result names the file). Call it in plan mode when \
your investigation is done and you know how to implement the change — not for research-only \
requests, where you simply answer. Write the plan in markdown, starting with a one-line title: \
the steps in order, the files you will change, how you will check the result, and any open \
question. If the user rejects it, their feedback comes back as the result: revise the plan and \
present it again."
                .to_string(),
            input_schema: crate::schema::input_schema::<ExitPlanModeInput>(),
        }
    }

    fn kind(&self) -> crate::ToolKind {
        crate::ToolKind::SwitchMode
    }

    fn is_read_only(&self) -> bool {
        true
    }

    fn access(&self, _input: &Value, _ctx: &ToolContext) -> ToolAccess {
        ToolAccess::Interaction
    }

    async fn call(&self, input: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let input: ExitPlanModeInput = parse_input(EXIT_PLAN_MODE, input)?;
        let plan = input.plan.trim().to_string();
        crate::require_text(
            EXIT_PLAN_MODE,
            "plan",
            &plan,
            "write the plan you want the user to approve",
        )?;
        Ok(ToolOutput {
            content: "The plan was presented to the user for approval.".to_string(),
            update: None,
            data: Some(json!({ "plan": plan })),
            control: Some(ToolControl::ExitPlanMode { plan }),
            changed_files: false,
            images: Vec::new(),
        })
    }
}
