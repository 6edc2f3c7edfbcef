//! `EnterWorktree` and `ExitWorktree`: isolated git worktrees for risky or
//! parallel changes.
//!
//! `EnterWorktree` runs `git worktree add .kaji/worktrees/<name> -b
//! kaji/<name> HEAD` at the root of the repository holding the task's
//! project directory, lists `.kaji/worktrees/` in the repository's
//! `info/exclude`, and asks the executor (through
//! [`ToolControl::ChangeDirectory`]) to move the task into the worktree.
//! `ExitWorktree` moves the task back to its project directory and, with
//! `action: "remove"`, deletes the worktree and its branch — but only when
//! that loses nothing (no uncommitted changes, no commits missing from the
//! project directory's branch) unless `discard_changes` is true; with
//! `action: "merge"`, runs `git merge --no-ff --no-edit kaji/<name>` in the
//! project directory (on the branch recorded at creation as git config
//! `branch.kaji/<name>.kajiBase`) and then removes it as with `remove`. A
//! merge with conflicts is aborted, leaving the checkout as it was.
//!
//! These tools must never delete work silently: every refusal lists what
//! would be lost. They never touch the user's checkout other than
//! `info/exclude` and git's own worktree bookkeeping.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use kaji_protocol::ToolSpec;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::AsyncReadExt;

use crate::{
    Tool, ToolAccess, ToolContext, ToolControl, ToolError, ToolOutput, ToolRegistry, parse_input,
};

/// Adds `EnterWorktree` and `ExitWorktree` to `registry`.
pub(crate) fn register(registry: &mut ToolRegistry) {
    registry.register(Arc::new(EnterWorktreeTool));
    registry.register(Arc::new(ExitWorktreeTool));
}

const ENTER_WORKTREE: &str = "EnterWorktree";
const EXIT_WORKTREE: &str = "ExitWorktree";

/// Where worktrees live, relative to the repository root.
pub const WORKTREES_DIR: &str = ".kaji/worktrees";

/// The line added to the repository's `info/exclude`.
const EXCLUDE_LINE: &str = "/.kaji/worktrees/";

/// The branch prefix of worktree branches.
pub const BRANCH_PREFIX: &str = "kaji/";

/// A worktree created by [`create_worktree`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Worktree {
    /// Its name (the last path component and the branch suffix).
    pub name: String,
    /// Its branch, `kaji/<name>`.
    pub branch: String,
    /// Its root directory, `<repository root>/.kaji/worktrees/<name>`.
    pub root: PathBuf,
    /// The directory inside it that corresponds to the project directory
    /// (the root itself unless the project directory was a subdirectory of
    /// the repository): the task's new working directory.
    pub cwd: PathBuf,
    /// The commit it started from.
    pub base: String,
    /// The branch the project directory was on when it was created (what
    /// `ExitWorktree` `merge` merges into); `None` on a detached HEAD.
    pub base_branch: Option<String>,
}

/// The git config key recording a worktree branch's base branch. Deleting
/// the branch (`git branch -D`) deletes its config section with it.
fn base_branch_key(branch: &str) -> String {
    format!("branch.{branch}.kajiBase")
}

/// Checks a worktree name: 1 to 64 characters of `[A-Za-z0-9._-]`,
/// starting with a letter or digit, without `..`, not ending in `.` or
/// `.lock` (so it is a valid directory and branch name).
pub fn validate_worktree_name(name: &str) -> Result<(), ToolError> {
    let bad = |why: &str| {
        Err(ToolError::InvalidInput {
            tool: ENTER_WORKTREE.to_string(),
            message: format!(
                "invalid worktree name {name:?}: {why}; use 1 to 64 of A-Z a-z 0-9 . _ - starting with a letter or digit"
            ),
        })
    };
    if name.is_empty() || name.len() > 64 {
        return bad("wrong length");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    {
        return bad("it contains a character other than A-Z a-z 0-9 . _ -");
    }
    if !name.as_bytes()[0].is_ascii_alphanumeric() {
        return bad("it must start with a letter or digit");
    }
    if name.contains("..") {
        return bad("it contains `..`");
    }
    if name.ends_with('.') || name.ends_with(".lock") {
        return bad("it ends with `.` or `.lock`");
    }
    Ok(())
}

/// Creates worktree `name` (a generated name when `None`) for the
/// repository holding `project_dir`: `git worktree add
/// .kaji/worktrees/<name> -b kaji/<name> HEAD` at the repository root, and
/// `.kaji/worktrees/` in the repository's `info/exclude`. Used by the
/// `EnterWorktree` tool and by `kaji exec --worktree NAME`.
pub async fn create_worktree(
    project_dir: &Path,
    name: Option<&str>,
) -> Result<Worktree, ToolError> {
    create_worktree_cancellable(
        project_dir,
        name,
        &tokio_util::sync::CancellationToken::new(),
    )
    .await
}

async fn create_worktree_cancellable(
    project_dir: &Path,
    name: Option<&str>,
    cancel: &tokio_util::sync::CancellationToken,
) -> Result<Worktree, ToolError> {
    let repo = Repo::find(project_dir, cancel).await?;
    let head = repo
        .git(
            &["rev-parse", "--verify", "--quiet", "HEAD^{commit}"],
            cancel,
        )
        .await?;
    if !head.success {
        return Err(ToolError::Refused(format!(
            "the repository at {} has no commits yet: a worktree starts from HEAD, so commit something first",
            repo.root.display()
        )));
    }
    let base = head.stdout.trim().to_string();
    let name = match name {
        Some(name) => {
            validate_worktree_name(name)?;
            name.to_string()
        }
        None => generated_name(&repo).await,
    };
    let root = repo.root.join(WORKTREES_DIR).join(&name);
    if root.exists() {
        return Err(ToolError::Refused(format!(
            "a worktree named {name:?} already exists at {}: pick another name",
            root.display()
        )));
    }
    let branch = format!("{BRANCH_PREFIX}{name}");
    let current = run_git(
        project_dir,
        &["symbolic-ref", "--quiet", "--short", "HEAD"],
        cancel,
    )
    .await?;
    let base_branch = current
        .success
        .then(|| current.stdout.trim().to_string())
        .filter(|b| !b.is_empty());
    repo.exclude_worktrees(cancel).await?;
    let root_arg = root.to_string_lossy().into_owned();
    let added = repo
        .git(
            &[
                "worktree", "add", "--quiet", "-b", &branch, &root_arg, &base,
            ],
            cancel,
        )
        .await?;
    if !added.success {
        return Err(ToolError::Refused(format!(
            "`git worktree add {} -b {branch} HEAD` failed in {}: {}",
            root.display(),
            repo.root.display(),
            added.stderr.trim()
        )));
    }
    if let Some(base_branch) = &base_branch {
        let key = base_branch_key(&branch);
        let recorded = repo.git(&["config", &key, base_branch], cancel).await?;
        if !recorded.success {
            return Err(ToolError::Refused(format!(
                "created worktree {} but could not record its base branch ({key}): {}",
                root.display(),
                recorded.stderr.trim()
            )));
        }
    }
    let cwd = worktree_cwd(project_dir, &repo.root, &root);
    Ok(Worktree {
        name,
        branch,
        root,
        cwd,
        base,
        base_branch,
    })
}

/// `kaji exec --worktree NAME`: enters worktree `name` when it exists
/// (`.kaji/worktrees/<name>` of this repository, on branch `kaji/<name>`),
/// else creates it as [`create_worktree`] does. The flag is `true` when it
/// was created. A directory there that is not that worktree is refused.
pub async fn open_or_create_worktree(
    project_dir: &Path,
    name: &str,
) -> Result<(Worktree, bool), ToolError> {
    validate_worktree_name(name)?;
    let cancel = tokio_util::sync::CancellationToken::new();
    let repo = Repo::find(project_dir, &cancel).await?;
    let root = repo.root.join(WORKTREES_DIR).join(name);
    if !root.exists() {
        return Ok((create_worktree(project_dir, Some(name)).await?, true));
    }
    let branch = format!("{BRANCH_PREFIX}{name}");
    let refuse = |why: String| {
        Err(ToolError::Refused(format!(
            "{} exists but {why}; remove it or pick another name",
            root.display()
        )))
    };
    let top = run_git(&root, &["rev-parse", "--show-toplevel"], &cancel).await?;
    let top = PathBuf::from(top.stdout.trim_end_matches(['\n', '\r']));
    if top.canonicalize().ok() != root.canonicalize().ok() {
        return refuse("is not a git worktree".into());
    }
    let head = run_git(
        &root,
        &["symbolic-ref", "--quiet", "--short", "HEAD"],
        &cancel,
    )
    .await?;
    if head.stdout.trim() != branch {
        return refuse(format!(
            "is on {} instead of {branch}",
            Some(head.stdout.trim())
                .filter(|b| !b.is_empty())
                .unwrap_or("a detached HEAD")
        ));
    }
    let base = run_git(&root, &["rev-parse", "HEAD"], &cancel).await?;
    let key = base_branch_key(&branch);
    let recorded = repo.git(&["config", "--get", &key], &cancel).await?;
    let base_branch = Some(recorded.stdout.trim().to_string()).filter(|b| !b.is_empty());
    let cwd = worktree_cwd(project_dir, &repo.root, &root);
    Ok((
        Worktree {
            name: name.to_string(),
            branch,
            root,
            cwd,
            base: base.stdout.trim().to_string(),
            base_branch,
        },
        false,
    ))
}

/// The directory of worktree `root` that corresponds to `project_dir` (a
/// subdirectory of the repository at `repo_root`), else `root` itself.
fn worktree_cwd(project_dir: &Path, repo_root: &Path, root: &Path) -> PathBuf {
    match project_dir
        .canonicalize()
        .ok()
        .and_then(|p| p.strip_prefix(repo_root).ok().map(Path::to_path_buf))
    {
        Some(rel) if !rel.as_os_str().is_empty() && root.join(&rel).is_dir() => root.join(rel),
        _ => root.to_path_buf(),
    }
}

/// A name like `wt-5f3a9c21`, not taken yet by a worktree directory.
async fn generated_name(repo: &Repo) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let seed = (nanos as u64) ^ u64::from(std::process::id()).rotate_left(32);
    let base = format!("wt-{:08x}", seed & 0xffff_ffff);
    let mut name = base.clone();
    let mut n = 2;
    while repo.root.join(WORKTREES_DIR).join(&name).exists() {
        name = format!("{base}-{n}");
        n += 1;
    }
    name
}

/// The repository holding a directory.
struct Repo {
    /// The top of its work tree (canonical).
    root: PathBuf,
}

/// The result of one git run.
struct GitResult {
    success: bool,
    stdout: String,
    stderr: String,
}

impl Repo {
    async fn find(
        dir: &Path,
        cancel: &tokio_util::sync::CancellationToken,
    ) -> Result<Self, ToolError> {
        let out = run_git(dir, &["rev-parse", "--show-toplevel"], cancel).await?;
        if !out.success {
            return Err(ToolError::Refused(format!(
                "{} is not inside a git repository, so there is no worktree to enter or leave ({})",
                dir.display(),
                out.stderr.trim()
            )));
        }
        let top = PathBuf::from(out.stdout.trim_end_matches(['\n', '\r']));
        let root = top
            .canonicalize()
            .map_err(|source| ToolError::Io { path: top, source })?;
        Ok(Self { root })
    }

    async fn git(
        &self,
        args: &[&str],
        cancel: &tokio_util::sync::CancellationToken,
    ) -> Result<GitResult, ToolError> {
        run_git(&self.root, args, cancel).await
    }

    /// Adds `/.kaji/worktrees/` to `<git-common-dir>/info/exclude` unless
    /// a line already says so.
    async fn exclude_worktrees(
        &self,
        cancel: &tokio_util::sync::CancellationToken,
    ) -> Result<(), ToolError> {
        let out = self
            .git(
                &["rev-parse", "--path-format=absolute", "--git-common-dir"],
                cancel,
            )
            .await?;
        if !out.success {
            return Err(ToolError::Refused(format!(
                "cannot find the git directory of {}: {}",
                self.root.display(),
                out.stderr.trim()
            )));
        }
        let common = PathBuf::from(out.stdout.trim_end_matches(['\n', '\r']));
        let info = common.join("info");
        let exclude = info.join("exclude");
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| ToolError::Io { path, source }
        };
        let existing = match tokio::fs::read_to_string(&exclude).await {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(io(&exclude)(e)),
        };
        let listed = existing.lines().any(|l| {
            let l = l.trim();
            l == EXCLUDE_LINE || l == ".kaji/worktrees/" || l == "/.kaji/worktrees"
        });
        if listed {
            return Ok(());
        }
        tokio::fs::create_dir_all(&info).await.map_err(io(&info))?;
        let mut text = existing;
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str("# kaji worktrees (EnterWorktree)\n");
        text.push_str(EXCLUDE_LINE);
        text.push('\n');
        tokio::fs::write(&exclude, text).await.map_err(io(&exclude))
    }
}

/// Runs git in `dir` in its own process group; kills it on cancellation.
/// kaji's own git (`kaji_tasks::git`): its git directories set explicitly,
/// no hooks, fsmonitor, pager, editor or askpass.
async fn run_git(
    dir: &Path,
    args: &[&str],
    cancel: &tokio_util::sync::CancellationToken,
) -> Result<GitResult, ToolError> {
    let spawn_error = |source: std::io::Error| {
        ToolError::Refused(format!("cannot run `git {}`: {source}", args.join(" ")))
    };
    let mut cmd = kaji_tasks::git::command_in("git", dir).map_err(spawn_error)?;
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = kaji_tasks::process::spawn_in_group(cmd).map_err(spawn_error)?;
    let mut stdout = child.child_mut().stdout.take();
    let mut stderr = child.child_mut().stderr.take();
    let work = async {
        let mut out = Vec::new();
        let mut err = Vec::new();
        let read_out = async {
            if let Some(s) = stdout.as_mut() {
                s.read_to_end(&mut out).await?;
            }
            Ok::<_, std::io::Error>(())
        };
        let read_err = async {
            if let Some(s) = stderr.as_mut() {
                s.read_to_end(&mut err).await?;
            }
            Ok::<_, std::io::Error>(())
        };
        let (a, b, status) = tokio::join!(read_out, read_err, child.wait());
        a?;
        b?;
        Ok::<_, std::io::Error>((status?, out, err))
    };
    let result = tokio::select! {
        r = work => r,
        _ = cancel.cancelled() => {
            let _ = child.kill_now().await;
            return Err(ToolError::Cancelled);
        }
    };
    // Reap anything the command left behind in its group (hooks).
    let _ = child.kill_now().await;
    let (status, out, err) = result.map_err(spawn_error)?;
    Ok(GitResult {
        success: status.success(),
        stdout: String::from_utf8_lossy(&out).into_owned(),
        stderr: String::from_utf8_lossy(&err).into_owned(),
    })
}

/// Finds the worktree the task is in: `cwd` must lie inside
/// `<root of project_dir's repository>/.kaji/worktrees/<name>`.
async fn current_worktree(ctx: &ToolContext) -> Result<(Repo, String, PathBuf), ToolError> {
    let repo = Repo::find(&ctx.project_dir, &ctx.cancel).await?;
    let base = repo.root.join(WORKTREES_DIR);
    let cwd = ctx.cwd.canonicalize().unwrap_or_else(|_| ctx.cwd.clone());
    let name = cwd
        .strip_prefix(&base)
        .ok()
        .and_then(|rel| rel.components().next())
        .map(|c| c.as_os_str().to_string_lossy().into_owned());
    match name {
        Some(name) => {
            let root = base.join(&name);
            Ok((repo, name, root))
        }
        None => Err(ToolError::Refused(format!(
            "not in a worktree: the working directory is {}, not inside {}; EnterWorktree creates one",
            ctx.cwd.display(),
            base.display()
        ))),
    }
}

/// Best guess at the repository root without running git (for
/// [`Tool::access`], which must not block): the nearest ancestor of `dir`
/// holding a `.git` entry, or `dir` itself.
fn guess_repo_root(dir: &Path) -> PathBuf {
    dir.ancestors()
        .find(|d| d.join(".git").exists())
        .unwrap_or(dir)
        .to_path_buf()
}

/// The `EnterWorktree` tool.
struct EnterWorktreeTool;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct EnterWorktreeInput {
    /// Name of the worktree and suffix of its branch: letters, digits, '.', '_' and '-'. Generated when omitted.
    #[serde(default)]
    name: Option<String>,
}

#[async_trait]
impl Tool for EnterWorktreeTool {
    fn name(&self) -> &'static str {
        ENTER_WORKTREE
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: ENTER_WORKTREE.to_string(),
            description: "Creates an isolated git worktree of the current repository and moves the task into it: \
a new checkout at .kaji/worktrees/<name> on a new branch kaji/<name> starting at HEAD. From then on, relative \
paths and Bash commands use the worktree, and the user's checkout is left untouched. Use it for risky or \
experimental changes, or work that should not disturb the user's files. Commit your work in the worktree; \
ExitWorktree returns to the original directory and keeps or removes the worktree. Only works inside a git \
repository with at least one commit."
                .to_string(),
            input_schema: crate::schema::input_schema::<EnterWorktreeInput>(),
        }
    }

    fn is_read_only(&self) -> bool {
        false
    }

    fn access(&self, input: &Value, ctx: &ToolContext) -> ToolAccess {
        let dir = guess_repo_root(&ctx.project_dir).join(WORKTREES_DIR);
        let path = match input.get("name").and_then(Value::as_str) {
            Some(name) => dir.join(name),
            None => dir,
        };
        ToolAccess::Edit { paths: vec![path] }
    }

    async fn call(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let input: EnterWorktreeInput = parse_input(ENTER_WORKTREE, input)?;
        if let Ok((_, name, root)) = current_worktree(ctx).await {
            return Err(ToolError::Refused(format!(
                "already in worktree {name:?} ({}): call ExitWorktree first",
                root.display()
            )));
        }
        let name = input
            .name
            .as_deref()
            .map(str::trim)
            .filter(|n| !n.is_empty());
        let wt = create_worktree_cancellable(&ctx.project_dir, name, &ctx.cancel).await?;
        let short = wt.base.get(..12).unwrap_or(&wt.base);
        Ok(ToolOutput {
            content: format!(
                "Created worktree {:?} at {} on branch {} (from {short}). The working directory is now {}; \
relative paths and Bash use it. Commit your changes there, then call ExitWorktree with action \"merge\", \"keep\" or \"remove\".",
                wt.name,
                wt.root.display(),
                wt.branch,
                wt.cwd.display()
            ),
            update: None,
            data: Some(json!({
                "name": wt.name,
                "branch": wt.branch,
                "path": wt.root,
                "cwd": wt.cwd,
                "base": wt.base,
            })),
            control: Some(ToolControl::ChangeDirectory { path: wt.cwd }),
            changed_files: false,
            images: Vec::new(),
        })
    }
}

/// The `ExitWorktree` tool.
struct ExitWorktreeTool;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum ExitAction {
    Keep,
    Remove,
    Merge,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ExitWorktreeInput {
    /// keep: leave the worktree and branch; remove: delete both; merge: merge the branch into the original one, then delete both.
    action: ExitAction,
    /// With remove: delete even if uncommitted changes or unmerged commits would be lost. Default false.
    #[serde(default)]
    discard_changes: Option<bool>,
}

#[async_trait]
impl Tool for ExitWorktreeTool {
    fn name(&self) -> &'static str {
        EXIT_WORKTREE
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: EXIT_WORKTREE.to_string(),
            description: "Leaves the worktree entered with EnterWorktree and returns the task to its original \
directory. action \"keep\" leaves the worktree and its branch kaji/<name> in place (the user can merge or inspect \
it); action \"remove\" deletes the worktree and its branch, and is refused when that would lose work — uncommitted \
changes, or commits that are not on the original directory's branch — unless discard_changes is true. Merge or \
commit what should be kept before removing. action \"merge\" runs `git merge --no-ff --no-edit kaji/<name>` in the \
original directory, into the branch it was on when the worktree was created, then removes the worktree and branch; \
it is refused when the worktree has uncommitted changes (commit them first) or the original checkout is on another \
branch or has staged changes, and a merge with conflicts is aborted and the conflicting files listed."
                .to_string(),
            input_schema: crate::schema::input_schema::<ExitWorktreeInput>(),
        }
    }

    fn is_read_only(&self) -> bool {
        false
    }

    fn access(&self, input: &Value, ctx: &ToolContext) -> ToolAccess {
        match input.get("action").and_then(Value::as_str) {
            Some("keep") => ToolAccess::SessionState,
            _ => {
                let base = guess_repo_root(&ctx.project_dir).join(WORKTREES_DIR);
                let path = ctx
                    .cwd
                    .strip_prefix(&base)
                    .ok()
                    .and_then(|rel| rel.components().next())
                    .map(|c| base.join(c.as_os_str()))
                    .unwrap_or(base);
                ToolAccess::Edit { paths: vec![path] }
            }
        }
    }

    async fn call(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let input: ExitWorktreeInput = parse_input(EXIT_WORKTREE, input)?;
        let (repo, name, root) = current_worktree(ctx).await?;
        let branch = format!("{BRANCH_PREFIX}{name}");
        let back = ToolControl::ChangeDirectory {
            path: ctx.project_dir.clone(),
        };
        if input.action == ExitAction::Keep {
            return Ok(ToolOutput {
                content: format!(
                    "Left worktree {name:?}; it stays at {} on branch {branch}. The working directory is {} again.",
                    root.display(),
                    ctx.project_dir.display()
                ),
                update: None,
                data: Some(json!({"name": name, "branch": branch, "path": root, "action": "keep"})),
                control: Some(back),
                changed_files: false,
                images: Vec::new(),
            });
        }

        if input.action == ExitAction::Merge {
            return merge_worktree(ctx, &repo, &name, &root).await;
        }
        let uncommitted = uncommitted_changes(&root, &ctx.cancel).await?;
        let original = run_git(
            &ctx.project_dir,
            &["rev-parse", "--verify", "HEAD"],
            &ctx.cancel,
        )
        .await?;
        let range = format!("{}..refs/heads/{branch}", original.stdout.trim());
        let unmerged: Vec<String> = if original.success {
            let log = repo
                .git(&["log", "--format=%h %s", &range, "--"], &ctx.cancel)
                .await?;
            if log.success {
                log.stdout
                    .lines()
                    .map(str::to_string)
                    .filter(|l| !l.is_empty())
                    .collect()
            } else {
                Vec::new()
            }
        } else {
            Vec::new()
        };
        if !input.discard_changes.unwrap_or(false)
            && (!uncommitted.is_empty() || !unmerged.is_empty())
        {
            let mut why = format!(
                "refusing to remove worktree {name:?} at {}:",
                root.display()
            );
            if !uncommitted.is_empty() {
                why.push_str(&format!("\nuncommitted changes ({}):", uncommitted.len()));
                for line in uncommitted.iter().take(50) {
                    why.push_str(&format!("\n  {line}"));
                }
            }
            if !unmerged.is_empty() {
                why.push_str(&format!(
                    "\ncommits on {branch} that are not on the original branch ({}):",
                    unmerged.len()
                ));
                for line in unmerged.iter().take(50) {
                    why.push_str(&format!("\n  {line}"));
                }
            }
            why.push_str(
                "\nCommit and merge what should be kept, use action \"keep\", or pass discard_changes: true to delete it anyway.",
            );
            return Err(ToolError::Refused(why));
        }

        remove_worktree(&repo, &root, &branch, &ctx.cancel).await?;
        let mut content = format!(
            "Removed worktree {name:?} ({}) and branch {branch}. The working directory is {} again.",
            root.display(),
            ctx.project_dir.display()
        );
        if !uncommitted.is_empty() || !unmerged.is_empty() {
            content.push_str(&format!(
                " Discarded {} uncommitted change(s) and {} unmerged commit(s).",
                uncommitted.len(),
                unmerged.len()
            ));
        }
        Ok(ToolOutput {
            content,
            update: None,
            data: Some(json!({
                "name": name,
                "branch": branch,
                "path": root,
                "action": "remove",
                "discarded_changes": uncommitted,
                "discarded_commits": unmerged,
            })),
            control: Some(back),
            changed_files: true,
            images: Vec::new(),
        })
    }
}

/// `git status --porcelain` lines of the worktree at `root` (none when the
/// directory is gone).
async fn uncommitted_changes(
    root: &Path,
    cancel: &tokio_util::sync::CancellationToken,
) -> Result<Vec<String>, ToolError> {
    if !root.is_dir() {
        return Ok(Vec::new());
    }
    let status = run_git(
        root,
        &["status", "--porcelain", "--untracked-files=all"],
        cancel,
    )
    .await?;
    if !status.success {
        return Err(ToolError::Refused(format!(
            "cannot check worktree {} for uncommitted changes: {}",
            root.display(),
            status.stderr.trim()
        )));
    }
    Ok(lines(&status.stdout))
}

fn lines(text: &str) -> Vec<String> {
    text.lines()
        .map(str::to_string)
        .filter(|l| !l.is_empty())
        .collect()
}

/// Deletes the worktree at `root` (or prunes it when its directory is
/// gone) and its branch.
async fn remove_worktree(
    repo: &Repo,
    root: &Path,
    branch: &str,
    cancel: &tokio_util::sync::CancellationToken,
) -> Result<(), ToolError> {
    let root_arg = root.to_string_lossy().into_owned();
    if root.exists() {
        let removed = repo
            .git(
                &["worktree", "remove", "--force", "--force", &root_arg],
                cancel,
            )
            .await?;
        if !removed.success {
            return Err(ToolError::Refused(format!(
                "`git worktree remove {}` failed: {}",
                root.display(),
                removed.stderr.trim()
            )));
        }
    } else {
        repo.git(&["worktree", "prune"], cancel).await?;
    }
    let deleted = repo.git(&["branch", "-D", branch], cancel).await?;
    if !deleted.success {
        return Err(ToolError::Refused(format!(
            "removed worktree {} but could not delete branch {branch}: {}",
            root.display(),
            deleted.stderr.trim()
        )));
    }
    Ok(())
}

/// Checks what `merge` needs before it touches anything: the worktree is
/// clean, the base branch is recorded, the project directory is on it and
/// has nothing staged. Returns the base branch.
async fn merge_preconditions(
    ctx: &ToolContext,
    repo: &Repo,
    name: &str,
    root: &Path,
) -> Result<String, ToolError> {
    let branch = format!("{BRANCH_PREFIX}{name}");
    let refuse = |why: String| {
        Err(ToolError::Refused(format!(
            "cannot merge worktree {name:?}: {why}"
        )))
    };
    let uncommitted = uncommitted_changes(root, &ctx.cancel).await?;
    if !uncommitted.is_empty() {
        let mut why = format!("it has uncommitted changes ({}):", uncommitted.len());
        for line in uncommitted.iter().take(50) {
            why.push_str(&format!("\n  {line}"));
        }
        why.push_str("\nCommit them in the worktree (or discard them), then merge again.");
        return refuse(why);
    }
    let key = base_branch_key(&branch);
    let recorded = repo.git(&["config", "--get", &key], &ctx.cancel).await?;
    let base = recorded.stdout.trim().to_string();
    if !recorded.success || base.is_empty() {
        return refuse(format!(
            "no base branch is recorded for {branch} ({key}; the worktree was made on a detached HEAD or by an older kaji). Use action \"keep\" and merge it by hand."
        ));
    }
    let dir = &ctx.project_dir;
    let head = run_git(
        dir,
        &["symbolic-ref", "--quiet", "--short", "HEAD"],
        &ctx.cancel,
    )
    .await?;
    let on = head.stdout.trim();
    if !head.success || on != base {
        let on = if head.success { on } else { "a detached HEAD" };
        return refuse(format!(
            "{} is on {on}, not on {base}, the branch the worktree was created from. Switch it back to {base} (or merge by hand), then merge again.",
            dir.display()
        ));
    }
    let staged = run_git(dir, &["diff", "--cached", "--name-only"], &ctx.cancel).await?;
    let staged = lines(&staged.stdout);
    if !staged.is_empty() {
        return refuse(format!(
            "{} has staged changes, which a merge would mix with the merge commit: {}. Commit or unstage them first.",
            dir.display(),
            staged.join(", ")
        ));
    }
    Ok(base)
}

/// `ExitWorktree` with `action: "merge"`.
async fn merge_worktree(
    ctx: &ToolContext,
    repo: &Repo,
    name: &str,
    root: &Path,
) -> Result<ToolOutput, ToolError> {
    let base = merge_preconditions(ctx, repo, name, root).await?;
    let branch = format!("{BRANCH_PREFIX}{name}");
    let dir = &ctx.project_dir;
    let merged = run_git(
        dir,
        &["merge", "--no-ff", "--no-edit", &branch],
        &ctx.cancel,
    )
    .await?;
    if !merged.success {
        let conflicts = run_git(
            dir,
            &["diff", "--name-only", "--diff-filter=U"],
            &ctx.cancel,
        )
        .await?;
        let conflicts = lines(&conflicts.stdout);
        let aborted = run_git(dir, &["merge", "--abort"], &ctx.cancel).await?;
        if !conflicts.is_empty() {
            let state = if aborted.success {
                "The merge was aborted; both branches are as they were"
            } else {
                "`git merge --abort` failed too, so the checkout may still be mid-merge"
            };
            return Err(ToolError::Refused(format!(
                "merging {branch} into {base} in {} conflicts in {} file(s):\n  {}\n{state}. Resolve the conflicts in the worktree (for example merge {base} into {branch} there and fix the files), commit, then merge again.",
                dir.display(),
                conflicts.len(),
                conflicts.join("\n  ")
            )));
        }
        return Err(ToolError::Refused(format!(
            "`git merge --no-ff --no-edit {branch}` failed in {}: {}",
            dir.display(),
            format!("{} {}", merged.stdout.trim(), merged.stderr.trim()).trim()
        )));
    }
    let commit = run_git(dir, &["rev-parse", "--short", "HEAD"], &ctx.cancel).await?;
    let commit = commit.stdout.trim().to_string();
    remove_worktree(repo, root, &branch, &ctx.cancel).await?;
    Ok(ToolOutput {
        content: format!(
            "Merged {branch} into {base} in {} (merge commit {commit}), then removed worktree {name:?} and its branch. The working directory is {} again.",
            dir.display(),
            dir.display()
        ),
        update: None,
        data: Some(json!({
            "name": name,
            "branch": branch,
            "path": root,
            "action": "merge",
            "into": base,
            "commit": commit,
        })),
        control: Some(ToolControl::ChangeDirectory { path: dir.clone() }),
        changed_files: true,
        images: Vec::new(),
    })
}
