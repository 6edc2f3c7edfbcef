//! Spawning a child in its own process group, and killing the whole group.
//!
//! This is the one place in kaji that starts external processes that may
//! outlive a single call: the `Bash` tool, background shells, hooks, MCP
//! stdio servers and sub-agents all go through [`spawn_in_group`] (or
//! [`spawn_with_merged_output`]) so that one rule holds everywhere: **every
//! process kaji starts lives in a process group of its own, and is killed
//! together with that group.** Grandchildren (a shell's background jobs, a
//! test runner's workers) are in the same group, so they die too.
//!
//! The life cycle of a [`GroupChild`]:
//!
//! 1. [`spawn_in_group`] starts the command as the leader of a new process
//!    group (`setpgid(0, 0)` in the child, before `exec`).
//! 2. [`GroupChild::wait`] waits for the leader. Members it left behind
//!    keep running until step 3.
//! 3. [`GroupChild::shutdown`] sends `SIGTERM` to the group, waits up to a
//!    grace period, sends `SIGKILL` to whatever is left, and returns once
//!    every member is dead. [`GroupChild::kill_now`] skips the grace period.
//! 4. If a [`GroupChild`] (or the [`ProcessGroup`] inside it) is dropped
//!    before step 3 confirmed that the group is empty — a dropped future, an
//!    aborted task, a panic unwinding — the drop sends `SIGKILL` to the
//!    whole group: kill-on-drop semantics for the group, not just the
//!    leader.
//!
//! Waiting for death does not poll: on Linux each member is watched through
//! a pidfd (readable once the process has exited), and members are found by
//! scanning `/proc` for the group id. A process that leaves the group on
//! purpose (`setsid`, `setpgid`) escapes this mechanism; nothing short of
//! cgroups can follow it — except through a pipe it still holds:
//! [`kill_pipe_holders`] finds and kills the holders of a child's output
//! pipes (hooks use it at their timeout).
//!
//! This module must never block a runtime thread for long, never send a
//! signal to a group it did not create, and never leave a group it created
//! running once its handle is gone.
//!
//! Two more rules hold for every spawn here ([`spawn_in_group_with`] is the
//! one function that applies them): a child never inherits a variable that
//! looks like a secret ([`scrub_secret_env`], by the session's
//! [`EnvPolicy`] in its [`SpawnOptions`]), and a child given a sandbox in its [`SpawnOptions`]
//! is confined before it runs (the model's Bash commands; hooks, MCP
//! servers and kaji's own git calls are spawned without one).
//!
//! One exception to the group rule, for kaji's own work only: [`spawn_detached`]
//! starts a child meant to outlive kaji (the checkpoints' background copy of
//! borrowed objects), in a session of its own and unknown to the watchdog.

use std::ffi::OsStr;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use kaji_sandbox::SandboxPolicy;

pub use crate::limits::DEFAULT_KILL_GRACE;
pub use crate::procfs::{ProcStat, read_stat};

use tokio::process::{Child, Command};

/// How long [`GroupChild::shutdown`] and [`GroupChild::kill_now`] wait for
/// the members of a group to die after `SIGKILL` before giving up (a
/// process in uninterruptible sleep can take a while). `SIGKILL` cannot be
/// ignored, so this bound is only reached in pathological cases.
pub const KILL_WAIT_LIMIT: Duration = Duration::from_secs(5);

/// The shell kaji runs command lines with: the first `bash` found on `PATH`,
/// else `/bin/sh`. Looked up once per process.
pub fn shell_path() -> &'static Path {
    static SHELL: OnceLock<PathBuf> = OnceLock::new();
    SHELL.get_or_init(|| {
        find_on_path(OsStr::new("bash")).unwrap_or_else(|| PathBuf::from("/bin/sh"))
    })
}

fn find_on_path(program: &OsStr) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| {
            std::fs::metadata(candidate)
                .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
                .unwrap_or(false)
        })
}

/// A command that runs `command_line` with [`shell_path`] (`bash -c …` or
/// `sh -c …`). Working directory, environment and stdio are left to the
/// caller; spawn it with [`spawn_in_group`] or
/// [`spawn_with_merged_output`].
pub fn shell_command(command_line: &str) -> Command {
    let mut cmd = Command::new(shell_path());
    cmd.arg("-c").arg(command_line);
    cmd
}

/// Spawns `cmd` as the leader of a new process group, unconfined, with the
/// built-in secret variables removed from its environment:
/// [`spawn_in_group_with`] with the default [`SpawnOptions`]. For kaji's
/// own helpers (git for checkpoints and worktrees); whatever runs on a
/// session's behalf passes that session's [`EnvPolicy`].
pub fn spawn_in_group(cmd: Command) -> io::Result<GroupChild> {
    spawn_in_group_with(cmd, &SpawnOptions::default())
}

/// How a child is started beyond what its [`Command`] says.
#[derive(Debug, Clone, Default)]
pub struct SpawnOptions {
    /// Confine the child, and everything it starts, in this sandbox
    /// (prepared afresh for this spawn). `None`, or a policy whose mode is
    /// `off`, runs it unconfined.
    pub sandbox: Option<Arc<SandboxPolicy>>,
    /// Which variables count as secrets for this spawn: the policy of the
    /// session the child runs for (there is no process-wide one: one
    /// process may hold several sessions, `kaji acp`). The default names
    /// only the built-in secrets.
    pub env: Arc<EnvPolicy>,
}

impl SpawnOptions {
    /// Options that confine the child in `sandbox` (when given).
    pub fn sandboxed(sandbox: Option<Arc<SandboxPolicy>>) -> Self {
        Self {
            sandbox,
            env: Arc::default(),
        }
    }

    /// These options with the session's environment policy `env`.
    pub fn with_env(mut self, env: Arc<EnvPolicy>) -> Self {
        self.env = env;
        self
    }
}

/// Spawns `cmd` as the leader of a new process group.
///
/// This is the one function every spawn in kaji goes through. Before the
/// spawn it removes secret variables the child would inherit
/// ([`scrub_secret_env`]) and, when `options` carry an enabled sandbox,
/// prepares it and confines the child in it between `fork` and `exec`.
///
/// The command is taken by value: a [`Command`] keeps the file descriptors
/// given to it as stdio until it is dropped, which would keep pipes open
/// after the child closed its end. `kill_on_drop` is set on the leader, and
/// the returned [`GroupChild`] kills the whole group when dropped before
/// [`GroupChild::shutdown`] or [`GroupChild::kill_now`] confirmed it empty.
///
/// Must be called within a Tokio runtime.
pub fn spawn_in_group_with(mut cmd: Command, options: &SpawnOptions) -> io::Result<GroupChild> {
    scrub_secret_env(&mut cmd, &options.env);
    cmd.process_group(0).kill_on_drop(true);
    // No orphans even if kaji is killed right after the fork: the child
    // registers its group with the watchdog before it execs (see
    // `crate::watchdog`). First of the hooks, before any confinement.
    if let Some(fd) = crate::watchdog::child_registration_fd() {
        // SAFETY: register_self makes only async-signal-safe calls (getpid,
        // write) on an fd that outlives the spawn (the watchdog's pipe is
        // never closed while kaji runs).
        unsafe {
            cmd.pre_exec(move || crate::watchdog::register_self(fd));
        }
    }
    let sandboxed = match options.sandbox.as_deref().filter(|p| p.is_enabled()) {
        Some(policy) => Some(confine(&mut cmd, policy)?),
        None => None,
    };
    let description = crate::watchdog::describe(cmd.as_std());
    let child = cmd.spawn().map_err(|e| match sandboxed {
        Some(mode) => io::Error::new(
            e.kind(),
            format!(
                "{e} (starting it in the {mode} sandbox; `kaji doctor` shows what this kernel \
                 supports)"
            ),
        ),
        None => e,
    })?;
    drop(cmd);
    let pid = child
        .id()
        .ok_or_else(|| io::Error::other("the child exited before its pid could be read"))?;
    let pgid = libc::pid_t::try_from(pid)
        .map_err(|_| io::Error::other(format!("pid {pid} out of range")))?;
    // For `kaji ps`, should the watchdog itself be killed.
    crate::watchdog::register(pgid, &description);
    Ok(GroupChild {
        child,
        group: ProcessGroup { pgid, armed: true },
        status: None,
    })
}

/// Prepares `policy` for `cmd` and makes the child apply it before `exec`.
/// Returns the mode, for error messages.
#[cfg(target_os = "linux")]
fn confine(cmd: &mut Command, policy: &SandboxPolicy) -> io::Result<kaji_sandbox::SandboxMode> {
    let cwd = match cmd.as_std().get_current_dir() {
        Some(dir) => Some(dir.to_path_buf()),
        None => std::env::current_dir().ok(),
    };
    let prepared = policy
        .prepare(cwd.as_deref())
        .map_err(|e| io::Error::other(format!("could not prepare the sandbox: {e}")))?;
    if let Some(tmp) = &policy.temp_dir {
        // The command's own temp dir: the shared one is not writable.
        cmd.env("TMPDIR", tmp);
    }
    // SAFETY: apply_in_child only makes async-signal-safe system calls on
    // data prepared above.
    unsafe {
        cmd.pre_exec(move || prepared.apply_in_child());
    }
    Ok(policy.mode)
}

#[cfg(not(target_os = "linux"))]
fn confine(_cmd: &mut Command, policy: &SandboxPolicy) -> io::Result<kaji_sandbox::SandboxMode> {
    Err(io::Error::other(format!(
        "could not prepare the sandbox ({}): {}",
        policy.mode,
        kaji_sandbox::SandboxError::Unsupported
    )))
}

/// Which environment variables children must not inherit, beyond the
/// built-in secret names (see [`kaji_protocol::redact::is_secret_env_name`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EnvPolicy {
    /// More names that are secrets (the `secret_env` setting).
    pub secret_env: Vec<String>,
    /// Names children inherit even though they look like secrets (the
    /// `env_passthrough` setting).
    pub env_passthrough: Vec<String>,
    /// Variables every child gets (Claude Code's settings `env`), unless
    /// the caller set the name on the command itself.
    pub set: Vec<(String, String)>,
}

/// Removes from `cmd`'s environment every variable it would inherit from
/// kaji whose name is a secret under `policy`. Variables the caller set on
/// `cmd` explicitly (an MCP server's configured `env`) are kept.
pub fn scrub_secret_env(cmd: &mut Command, policy: &EnvPolicy) {
    let explicit: Vec<std::ffi::OsString> = cmd
        .as_std()
        .get_envs()
        .filter(|(_, v)| v.is_some())
        .map(|(k, _)| k.to_os_string())
        .collect();
    for (name, _) in std::env::vars_os() {
        let secret = name.to_str().is_some_and(|n| {
            kaji_protocol::redact::is_secret_env_name(
                n,
                &policy.secret_env,
                &policy.env_passthrough,
            )
        });
        if secret && !explicit.contains(&name) {
            cmd.env_remove(&name);
        }
    }
    for (name, value) in &policy.set {
        if !explicit.iter().any(|e| e == name.as_str()) {
            cmd.env(name, value);
        }
    }
}

/// Starts `cmd` detached from kaji, for kaji's own work that must be able
/// to finish after kaji exits (the checkpoints' copy of the objects a
/// shadow borrowed): in a session of its own (`setsid` in the child, so
/// neither kaji's group nor its terminal's signals reach it), **not**
/// registered with the watchdog, not killed on drop, stdio on
/// `/dev/null`, secret variables removed as for every spawn. `keep_fd`, a
/// descriptor kaji holds (such as a file it has locked with `flock`), is
/// inherited by the child and everything it starts, so the lock stays
/// held until they have all exited, whether kaji is still running or not.
///
/// The exception to the module's rule, on purpose: never use it for what
/// runs on a session's behalf. The returned child may be awaited; if it is
/// dropped instead, tokio reaps it (or `init`, once kaji has exited).
#[cfg(unix)]
pub fn spawn_detached(mut cmd: Command, keep_fd: Option<std::os::fd::RawFd>) -> io::Result<Child> {
    scrub_secret_env(&mut cmd, &EnvPolicy::default());
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(false);
    // SAFETY: setsid and fcntl are async-signal-safe; `keep_fd` is a
    // descriptor the caller keeps open until the spawn returned.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setsid() < 0 {
                return Err(io::Error::last_os_error());
            }
            if let Some(fd) = keep_fd
                && libc::fcntl(fd, libc::F_SETFD, 0) < 0
            {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.spawn()
}

/// Closes `fd` without waiting for the kernel to finish with it: a child
/// forked for the purpose, holding nothing else (every other descriptor
/// closed first, so no pipe kaji's caller reads stays open), makes the
/// last close and exits; kaji only drops its own reference. For
/// descriptors whose last close is slow — an inotify instance with
/// watches waits for an SRCU grace period of the kernel's, 8–60 ms
/// measured, and a process cannot exit while one of its threads is in it.
/// The child is reaped by a thread of its own (or by `init`, once kaji
/// has exited). Where fork fails, `fd` is closed here.
#[cfg(target_os = "linux")]
pub fn close_in_background(fd: std::os::fd::OwnedFd) {
    use std::os::fd::AsRawFd;
    let raw = fd.as_raw_fd();
    // SAFETY: the child only closes descriptors and exits (async-signal
    // safe calls on a descriptor this function owns); it never returns.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: in the forked child, see above.
        unsafe {
            crate::watchdog::child::close_all_but(raw);
            libc::close(raw);
            libc::_exit(0);
        }
    }
    drop(fd);
    if pid > 0 {
        let reaper = std::thread::Builder::new()
            .name("kaji-close".into())
            .spawn(move || {
                // SAFETY: waits for the child forked above, which is ours.
                unsafe { libc::waitpid(pid, std::ptr::null_mut(), 0) };
            });
        drop(reaper);
    }
}

/// Spawns `cmd` in a new process group (as [`spawn_in_group`]) with its
/// stdout and stderr both connected to one pipe, so the output reads in
/// the order it was written (like `2>&1`). Returns the read end of the
/// pipe. Stdin is left as configured on `cmd`.
///
/// The read end gets end-of-file once every process holding the write end
/// (the leader and any member it passed it on to) has exited or closed it.
pub fn spawn_with_merged_output(cmd: Command) -> io::Result<(GroupChild, std::io::PipeReader)> {
    spawn_with_merged_output_with(cmd, &SpawnOptions::default())
}

/// [`spawn_with_merged_output`] with [`SpawnOptions`] (a sandbox).
pub fn spawn_with_merged_output_with(
    mut cmd: Command,
    options: &SpawnOptions,
) -> io::Result<(GroupChild, std::io::PipeReader)> {
    let (reader, writer) = std::io::pipe()?;
    cmd.stdout(Stdio::from(writer.try_clone()?));
    cmd.stderr(Stdio::from(writer));
    let child = spawn_in_group_with(cmd, options)?;
    Ok((child, reader))
}

/// A process group created by [`spawn_in_group`]; the group id is the
/// leader's pid.
///
/// Dropping it while it is armed sends `SIGKILL` to the whole group. It is
/// disarmed only once kaji has seen every member die, so a dropped handle
/// never signals a group id the kernel may have handed out again.
#[derive(Debug)]
pub struct ProcessGroup {
    pgid: libc::pid_t,
    armed: bool,
}

impl ProcessGroup {
    /// The process group id (the leader's pid).
    pub fn id(&self) -> i32 {
        self.pgid
    }

    /// Sends `SIGTERM` to every member of the group.
    pub fn terminate(&self) -> io::Result<()> {
        self.signal(libc::SIGTERM)
    }

    /// Sends `SIGKILL` to every member of the group.
    pub fn kill(&self) -> io::Result<()> {
        self.signal(libc::SIGKILL)
    }

    /// Sends `signal` (a `libc::SIG*` number) to every member of the group.
    /// A group with no members left is not an error.
    pub fn signal(&self, signal: i32) -> io::Result<()> {
        if !self.armed {
            return Ok(());
        }
        // SAFETY: killpg has no memory-safety preconditions.
        let rc = unsafe { libc::killpg(self.pgid, signal) };
        if rc == 0 {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        if err.raw_os_error() == Some(libc::ESRCH) {
            Ok(())
        } else {
            Err(err)
        }
    }

    /// The pids of the group's members that are still alive (zombies, which
    /// have exited but not been reaped yet, do not count).
    ///
    /// On Linux this scans `/proc`. Elsewhere it is not known, and `None`
    /// is returned.
    pub fn live_members(&self) -> Option<Vec<i32>> {
        if !self.armed {
            return Some(Vec::new());
        }
        live_members_of(self.pgid)
    }

    /// Waits until no member of the group is alive, for at most `limit`.
    /// Returns whether the group was seen empty; once it has been, the
    /// group is disarmed (its drop no longer signals).
    ///
    /// Does not poll on Linux: each member found in `/proc` is watched with
    /// a pidfd. Elsewhere the group cannot be observed and this returns
    /// `false` at once.
    pub async fn wait_until_empty(&mut self, limit: Duration) -> bool {
        if !self.armed {
            return true;
        }
        let pgid = self.pgid;
        let empty = tokio::time::timeout(limit, wait_group_empty(pgid))
            .await
            .unwrap_or(false);
        if empty {
            self.armed = false;
        }
        empty
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        if self.armed {
            // Best effort: there is nobody to report a failure to.
            let _ = self.kill();
        }
        crate::watchdog::unregister(self.pgid);
    }
}

/// A child process leading its own process group; see the module docs for
/// its life cycle.
#[derive(Debug)]
pub struct GroupChild {
    child: Child,
    group: ProcessGroup,
    status: Option<ExitStatus>,
}

impl GroupChild {
    /// The leader's pid, which is also the process group id.
    pub fn pid(&self) -> i32 {
        self.group.pgid
    }

    /// The process group.
    pub fn group(&self) -> &ProcessGroup {
        &self.group
    }

    /// The underlying Tokio child, to take its piped stdin, stdout or
    /// stderr. Do not kill or wait on it directly: use the methods of
    /// [`GroupChild`], which remember the leader's exit status.
    pub fn child_mut(&mut self) -> &mut Child {
        &mut self.child
    }

    /// The leader's exit status, once it has been waited for.
    pub fn exit_status(&self) -> Option<ExitStatus> {
        self.status
    }

    /// Waits for the leader to exit and returns its status. Members it left
    /// behind keep running; call [`GroupChild::shutdown`] to end them.
    ///
    /// Cancel-safe: dropping the future loses nothing, and a later call
    /// returns the same status.
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        if let Some(status) = self.status {
            return Ok(status);
        }
        let status = self.child.wait().await?;
        self.status = Some(status);
        Ok(status)
    }

    /// Ends the whole group politely: `SIGTERM` to every member, up to
    /// `grace` for the leader to exit and the members to die, then
    /// `SIGKILL` to whatever is left. Returns the leader's exit status once
    /// every member is dead (or, in pathological cases, once
    /// [`KILL_WAIT_LIMIT`] has passed after `SIGKILL`).
    ///
    /// When the leader has already exited and no member is left, nothing is
    /// signalled. Calling it again is harmless.
    pub async fn shutdown(&mut self, grace: Duration) -> io::Result<ExitStatus> {
        if self.status.is_some() && self.group.live_members().is_some_and(|m| m.is_empty()) {
            self.group.armed = false;
            return self.wait().await;
        }
        self.group.terminate()?;
        let polite = async {
            let status = self.child.wait().await;
            let empty = wait_group_empty(self.group.pgid).await;
            (status, empty)
        };
        if let Ok((status, empty)) = tokio::time::timeout(grace, polite).await {
            if let Ok(status) = status {
                self.status.get_or_insert(status);
            }
            if empty {
                self.group.armed = false;
                return self.wait().await;
            }
        }
        self.kill_now().await
    }

    /// Sends `SIGKILL` to the whole group at once and returns the leader's
    /// exit status once every member is dead (or [`KILL_WAIT_LIMIT`] has
    /// passed).
    pub async fn kill_now(&mut self) -> io::Result<ExitStatus> {
        self.group.kill()?;
        let status = self.wait().await?;
        self.group.wait_until_empty(KILL_WAIT_LIMIT).await;
        Ok(status)
    }
}

/// Waits until the group `pgid` has no live member. Returns `false` when
/// that cannot be observed on this platform.
#[cfg(target_os = "linux")]
async fn wait_group_empty(pgid: libc::pid_t) -> bool {
    loop {
        let Some(members) = live_members_of(pgid) else {
            return false;
        };
        if members.is_empty() {
            return true;
        }
        let mut watched = Vec::new();
        let mut unwatchable = false;
        for pid in members {
            match pidfd::open(pid) {
                Ok(Some(fd)) => {
                    // The pid may have been reused between the scan and the
                    // open: the pidfd now pins the process, so re-check.
                    if process_group_of(pid) == Some(pgid) {
                        watched.push(fd);
                    }
                }
                Ok(None) => {} // already gone
                Err(_) => unwatchable = true,
            }
        }
        for fd in watched {
            // SAFETY: the AsyncFd takes ownership of the OwnedFd, so the
            // descriptor stays open and unchanged for its whole lifetime.
            let registered = unsafe {
                tokio::io::unix::AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE)
            };
            match registered {
                Ok(fd) => {
                    // Readable once the process has exited.
                    let _ = fd.readable().await;
                }
                Err(_) => unwatchable = true,
            }
        }
        if unwatchable {
            // No pidfd support (very old kernel or a sandbox): fall back to
            // rescanning at a modest pace.
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

#[cfg(not(target_os = "linux"))]
async fn wait_group_empty(_pgid: libc::pid_t) -> bool {
    false
}

#[cfg(target_os = "linux")]
fn live_members_of(pgid: libc::pid_t) -> Option<Vec<i32>> {
    let dir = std::fs::read_dir("/proc").ok()?;
    let mut members = Vec::new();
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        if let Some(stat) = read_stat(pid)
            && stat.pgrp == pgid
            && stat.state != 'Z'
            && stat.state != 'X'
        {
            members.push(pid);
        }
    }
    Some(members)
}

#[cfg(not(target_os = "linux"))]
fn live_members_of(_pgid: libc::pid_t) -> Option<Vec<i32>> {
    None
}

#[cfg(target_os = "linux")]
fn process_group_of(pid: i32) -> Option<i32> {
    read_stat(pid)
        .filter(|s| s.state != 'Z' && s.state != 'X')
        .map(|s| s.pgrp)
}

/// The inode of the pipe behind `fd` (Linux; `None` elsewhere or when
/// `fd` is not a pipe), for [`kill_pipe_holders`].
pub fn pipe_inode(fd: std::os::fd::BorrowedFd<'_>) -> Option<u64> {
    use std::os::fd::AsRawFd;
    let link = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).ok()?;
    link.to_str()?
        .strip_prefix("pipe:[")?
        .strip_suffix(']')?
        .parse()
        .ok()
}

/// Sends `SIGKILL` to every process but kaji itself that holds one of the
/// pipes `inodes` open, and returns their pids. These pipes were made for
/// one child (a hook's output), so their holders are that child's
/// descendants — among them those that left its process group on purpose
/// (`setsid … &`), which the group kill cannot reach. Linux only (nothing
/// elsewhere).
pub fn kill_pipe_holders(inodes: &[u64]) -> Vec<i32> {
    let mut killed = Vec::new();
    if inodes.is_empty() {
        return killed;
    }
    let wanted: Vec<String> = inodes.iter().map(|i| format!("pipe:[{i}]")).collect();
    let me = i32::try_from(std::process::id()).unwrap_or(-1);
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return killed;
    };
    for entry in procs.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        if pid == me || pid <= 1 {
            continue;
        }
        let Ok(fds) = std::fs::read_dir(entry.path().join("fd")) else {
            continue;
        };
        let holds = fds.flatten().any(|fd| {
            std::fs::read_link(fd.path())
                .ok()
                .and_then(|l| l.to_str().map(|t| wanted.iter().any(|w| w == t)))
                .unwrap_or(false)
        });
        if holds {
            // SAFETY: kill takes two integers; the pid holds a pipe made
            // for a child of this process.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            killed.push(pid);
        }
    }
    killed
}

/// Whether process `pid` no longer runs: it does not exist, or it is a
/// zombie (or dying) waiting to be reaped.
pub fn is_gone(pid: i32) -> bool {
    read_stat(pid).is_none_or(|s| s.state == 'Z' || s.state == 'X')
}

#[cfg(target_os = "linux")]
mod pidfd {
    use std::io;
    use std::os::fd::{FromRawFd, OwnedFd};

    /// `pidfd_open(pid, 0)`; `Ok(None)` when the process no longer exists.
    pub(super) fn open(pid: i32) -> io::Result<Option<OwnedFd>> {
        // SAFETY: pidfd_open takes two integers and returns a new fd or -1.
        let rc = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        if rc < 0 {
            let err = io::Error::last_os_error();
            return if err.raw_os_error() == Some(libc::ESRCH) {
                Ok(None)
            } else {
                Err(err)
            };
        }
        let fd = i32::try_from(rc).map_err(|_| io::Error::other("pidfd out of range"))?;
        // SAFETY: the kernel just returned this fd to us and nobody else owns it.
        Ok(Some(unsafe { OwnedFd::from_raw_fd(fd) }))
    }
}
