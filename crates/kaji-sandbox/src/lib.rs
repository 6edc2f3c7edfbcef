//! The sandbox kaji runs the model's shell commands in.
//!
//! A [`SandboxPolicy`] says what a confined command may do: in
//! [`SandboxMode::WorkspaceWrite`] it may write only below its writable
//! roots (the working directory and its worktrees, the temp dir, kaji's run
//! dir), never to the protected paths inside them (`.git/config`,
//! `.git/hooks`, kaji's and Claude's project settings, `.kajiignore`), never
//! read the denied directories (`~/.ssh`, `~/.aws`, `~/.gnupg`, kaji's own
//! settings), and open no network socket other than a Unix one unless the
//! policy allows the network. [`SandboxMode::ReadOnly`] allows no writes at
//! all (except to `/dev/null` and the terminal devices).
//!
//! On Linux the policy is enforced in the child, between `fork` and `exec`,
//! in three layers: a user and mount namespace (protected paths bind-mounted
//! read-only, denied directories covered by an empty tmpfs), then Landlock
//! (writes only below the writable roots), then seccomp (no new non-Unix
//! sockets). Everything that allocates or reads files is done before the
//! fork by [`SandboxPolicy::prepare`]; [`PreparedSandbox::apply_in_child`]
//! only makes raw system calls, so it is safe to run in the child of a
//! multi-threaded parent. [`probe`] tells which layers this kernel supports
//! by trying each in a short-lived child.
//!
//! This crate must never pretend: a layer that cannot be set up is an error
//! from [`SandboxPolicy::prepare`] or from the spawn, never a silently
//! weaker sandbox. It never spawns commands itself (spawning is
//! `kaji_tasks::process`'s job); [`probe`] forks only to test the kernel.
//! On other targets everything reports [`SandboxError::Unsupported`].

use std::path::{Path, PathBuf};

mod paths;

#[cfg(target_os = "linux")]
mod linux;

#[cfg(target_os = "linux")]
pub use linux::PreparedSandbox;

pub use paths::{
    create_protectable_dirs, default_deny_read, holds_home, home_protected_paths,
    kaji_working_space, protected_paths_in, unix_socket_dirs, worktree_git_dirs,
};

/// How much a sandboxed command may write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxMode {
    /// No writes at all (plan mode).
    ReadOnly,
    /// Writes below the writable roots, except to protected paths.
    WorkspaceWrite,
    /// No sandbox.
    Off,
}

impl SandboxMode {
    /// The name used by `--sandbox` and the `sandbox` setting.
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxMode::ReadOnly => "read-only",
            SandboxMode::WorkspaceWrite => "workspace-write",
            SandboxMode::Off => "off",
        }
    }
}

impl std::fmt::Display for SandboxMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for SandboxMode {
    type Err = SandboxError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "read-only" => Ok(SandboxMode::ReadOnly),
            "workspace-write" => Ok(SandboxMode::WorkspaceWrite),
            "off" => Ok(SandboxMode::Off),
            other => Err(SandboxError::UnknownMode(other.to_string())),
        }
    }
}

/// Why a sandbox could not be prepared.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// Not Linux.
    #[error("the sandbox is only supported on Linux")]
    Unsupported,
    /// A mode name that is none of `read-only`, `workspace-write`, `off`.
    #[error("unknown sandbox mode {0:?}: expected read-only, workspace-write or off")]
    UnknownMode(String),
    /// The kernel has no usable Landlock.
    #[error("Landlock is not available on this kernel: {0}")]
    LandlockUnavailable(String),
    /// The seccomp filter could not be built for this architecture.
    #[error("the seccomp filter could not be built: {0}")]
    Seccomp(String),
    /// A path could not be turned into a mount point or a Landlock rule.
    #[error("sandbox path {path}: {reason}")]
    Path {
        /// The path.
        path: PathBuf,
        /// What was wrong with it.
        reason: String,
    },
}

/// What a confined command may do. Build one with
/// [`SandboxPolicy::workspace`], then adjust its fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxPolicy {
    /// Read-only, workspace-write or off.
    pub mode: SandboxMode,
    /// Directories (and files) below which writes are allowed in
    /// workspace-write mode. Ignored in read-only mode.
    pub writable_roots: Vec<PathBuf>,
    /// Paths that stay read-only even inside a writable root. Only paths
    /// that exist when the command starts can be protected.
    pub protected_paths: Vec<PathBuf>,
    /// Directories (or files) the command must not read: covered by an
    /// empty tmpfs (a file by `/dev/null`).
    pub deny_read: Vec<PathBuf>,
    /// Whether new network sockets (other than Unix ones) are allowed.
    pub network: bool,
    /// The command's own temp dir (it gets `TMPDIR` pointing there):
    /// created by [`SandboxPolicy::prepare`] and writable. `None`: no temp
    /// dir is writable unless a writable root holds one.
    pub temp_dir: Option<PathBuf>,
    /// Pathname Unix sockets (or directories of them) outside the writable
    /// roots that commands may still connect to (`sandbox_allow_unix_sockets`).
    /// Every other listening socket outside the writable roots is hidden.
    pub allow_unix_sockets: Vec<PathBuf>,
}

impl SandboxPolicy {
    /// The default policy for commands run in `cwd`: `cwd` writable (not
    /// the shared temp dir, not its git directories), the protected paths
    /// of `cwd` ([`protected_paths_in`]) and of the home directory
    /// ([`home_protected_paths`]) read-only, `~/.ssh`, `~/.aws`, `~/.gnupg`
    /// and the directories of other programs' Unix sockets
    /// ([`unix_socket_dirs`]) unreadable, no network. Add a `temp_dir`,
    /// kaji's run dir to `writable_roots` and kaji's settings dir to
    /// `deny_read` (see [`SandboxPolicy::for_session`]).
    ///
    /// Creates an empty `.kaji/` in `cwd` (and `.git/hooks/` in a
    /// repository) when missing, so that a command cannot create them (see
    /// [`create_protectable_dirs`]); [`SandboxPolicy::preview`] does not.
    pub fn workspace(mode: SandboxMode, cwd: &Path) -> Self {
        let _ = paths::create_protectable_dirs(cwd);
        Self::preview(mode, cwd)
    }

    /// The policy [`SandboxPolicy::workspace`] would build, without
    /// creating anything (for `kaji doctor`).
    pub fn preview(mode: SandboxMode, cwd: &Path) -> Self {
        let mut writable_roots = vec![cwd.to_path_buf()];
        writable_roots.extend(paths::kaji_working_space(cwd));
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let mut protected_paths = protected_paths_in(cwd);
        protected_paths.extend(
            home.as_deref()
                .map(paths::home_protected_paths)
                .unwrap_or_default(),
        );
        let mut deny_read = default_deny_read(home.as_deref(), None);
        deny_read.extend(paths::unix_socket_dirs(home.as_deref()));
        Self {
            mode,
            writable_roots,
            protected_paths,
            deny_read,
            network: false,
            temp_dir: None,
            allow_unix_sockets: Vec::new(),
        }
    }

    /// The policy for a session's `Bash` commands, from its settings:
    /// [`SandboxPolicy::workspace`] for `cwd`, plus the session's run dir
    /// (`$KAJI_HOME/runs/<session>`) writable with the command's temp dir
    /// in it (`<run dir>/tmp`), `kaji_home` read-only as a whole and
    /// unreadable (except the run dir), `sandbox_deny_read` (`~/` is the
    /// home directory) unreadable, and `sandbox_network`.
    pub fn for_session(
        mode: SandboxMode,
        cwd: &Path,
        kaji_home: &Path,
        run_dir: Option<&Path>,
        sandbox_deny_read: &[String],
        sandbox_network: bool,
    ) -> Self {
        let mut policy = Self::workspace(mode, cwd);
        policy.writable_roots.extend(run_dir.map(Path::to_path_buf));
        policy.temp_dir = run_dir.map(|r| r.join("tmp"));
        let home = std::env::var_os("HOME").map(PathBuf::from);
        policy.protected_paths.push(kaji_home.to_path_buf());
        policy.deny_read.push(kaji_home.to_path_buf());
        policy.deny_read.extend(
            sandbox_deny_read
                .iter()
                .map(|p| expand_home(p, home.as_deref())),
        );
        policy.network = sandbox_network;
        policy
    }

    /// Whether this policy confines anything (its mode is not `off`).
    pub fn is_enabled(&self) -> bool {
        self.mode != SandboxMode::Off
    }

    /// Prepares everything the child needs before the fork: mount points,
    /// the Landlock ruleset with its rules, the seccomp program. `cwd` is
    /// the directory the command will run in (the child changes into it
    /// again once the mounts are in place). Prepare once per spawn.
    #[cfg(target_os = "linux")]
    pub fn prepare(&self, cwd: Option<&Path>) -> Result<PreparedSandbox, SandboxError> {
        linux::prepare(self, cwd)
    }

    /// Not Linux: always [`SandboxError::Unsupported`].
    #[cfg(not(target_os = "linux"))]
    pub fn prepare(&self, _cwd: Option<&Path>) -> Result<PreparedSandbox, SandboxError> {
        Err(SandboxError::Unsupported)
    }
}

/// `path` with a leading `~/` (or a lone `~`) replaced by `home`; other
/// paths, and every path when `home` is unknown, as they are.
pub fn expand_home(path: &str, home: Option<&Path>) -> PathBuf {
    match (path.strip_prefix('~'), home) {
        (Some(""), Some(home)) => home.to_path_buf(),
        (Some(rest), Some(home)) if rest.starts_with('/') => home.join(&rest[1..]),
        _ => PathBuf::from(path),
    }
}

/// Stand-in on targets without a sandbox; it cannot be built.
#[cfg(not(target_os = "linux"))]
#[derive(Debug)]
pub struct PreparedSandbox {
    _never: std::convert::Infallible,
}

#[cfg(not(target_os = "linux"))]
impl PreparedSandbox {
    /// Unreachable: a [`PreparedSandbox`] cannot exist here.
    pub fn apply_in_child(&self) -> std::io::Result<()> {
        match self._never {}
    }
}

/// Which sandbox layers this kernel supports, found by trying each one in a
/// short-lived child ([`probe`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SandboxSupport {
    /// The Landlock ABI version (0 when Landlock is missing or disabled).
    pub landlock_abi: u32,
    /// Whether a child could restrict itself with Landlock.
    pub landlock: bool,
    /// Whether a child could create a user and mount namespace, map its
    /// ids and mount in it.
    pub user_namespaces: bool,
    /// Whether a child could install the seccomp filter and was then
    /// refused a TCP socket.
    pub seccomp: bool,
    /// Why each failed layer failed, in words.
    pub problems: Vec<String>,
}

impl SandboxSupport {
    /// Whether every layer works, so the sandbox enforces all it promises.
    pub fn is_complete(&self) -> bool {
        self.landlock && self.user_namespaces && self.seccomp
    }
}

/// Tries each sandbox layer in a child process and reports what works.
/// Blocking (it waits for the children); from async code run it with
/// `spawn_blocking`.
#[cfg(target_os = "linux")]
pub fn probe() -> SandboxSupport {
    linux::probe()
}

/// Not Linux: nothing is supported.
#[cfg(not(target_os = "linux"))]
pub fn probe() -> SandboxSupport {
    SandboxSupport {
        landlock_abi: 0,
        landlock: false,
        user_namespaces: false,
        seccomp: false,
        problems: vec![SandboxError::Unsupported.to_string()],
    }
}

/// The phrases an error message carries when the kernel refused an access
/// (`EBUSY` is what replacing a read-only bind-mounted file by a rename
/// gives, as `git config` does).
const DENIAL_PHRASES: &[&str] = &[
    "Permission denied",
    "Device or resource busy",
    "Operation not permitted",
    "Read-only file system",
];

/// When a sandboxed command failed, the first line of its output that looks
/// like the kernel refused an access (`EACCES`, `EPERM`, `EROFS`,
/// `EBUSY`), if any.
pub fn denial_line(output: &str) -> Option<&str> {
    output
        .lines()
        .find(|line| DENIAL_PHRASES.iter().any(|p| line.contains(p)))
        .map(str::trim)
}

/// The note added to a failed sandboxed command's result when its output
/// looks like a sandbox denial, e.g. "this may have been blocked by the
/// sandbox (workspace-write): touch: cannot touch '/x': Read-only file
/// system".
pub fn denial_note(mode: SandboxMode, output: &str) -> Option<String> {
    denial_line(output)
        .map(|line| format!("this may have been blocked by the sandbox ({mode}): {line}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_round_trip_by_name() {
        for mode in [
            SandboxMode::ReadOnly,
            SandboxMode::WorkspaceWrite,
            SandboxMode::Off,
        ] {
            assert_eq!(mode.as_str().parse::<SandboxMode>().ok(), Some(mode));
        }
        let err = "rw".parse::<SandboxMode>().unwrap_err();
        assert!(err.to_string().contains("\"rw\""), "{err}");
    }

    #[test]
    fn home_is_expanded_in_deny_paths() {
        let home = Path::new("/home/u");
        assert_eq!(expand_home("~/.kube", Some(home)), home.join(".kube"));
        assert_eq!(expand_home("~", Some(home)), home.to_path_buf());
        assert_eq!(expand_home("~bob/x", Some(home)), PathBuf::from("~bob/x"));
        assert_eq!(expand_home("/etc/x", Some(home)), PathBuf::from("/etc/x"));
        assert_eq!(expand_home("~/x", None), PathBuf::from("~/x"));
    }

    #[test]
    fn a_session_policy_adds_run_dir_kaji_home_and_settings() {
        let dir = tempfile::tempdir().unwrap();
        let (ws, kaji) = (dir.path().join("ws"), dir.path().join("kaji"));
        std::fs::create_dir_all(&ws).unwrap();
        let run = kaji.join("runs/s1");
        let deny = vec!["/srv/secrets".to_string()];
        let p = SandboxPolicy::for_session(
            SandboxMode::WorkspaceWrite,
            &ws,
            &kaji,
            Some(&run),
            &deny,
            true,
        );
        assert!(p.writable_roots.contains(&ws) && p.writable_roots.contains(&run));
        assert!(p.deny_read.contains(&kaji));
        assert!(p.deny_read.contains(&PathBuf::from("/srv/secrets")));
        assert!(p.network);
        assert!(
            ws.join(".kaji").is_dir(),
            "the workspace's .kaji/ exists to be protected"
        );
    }

    #[test]
    fn denial_note_names_the_mode_and_the_line() {
        let out = "ok\ntouch: cannot touch '/etc/x': Read-only file system\n";
        let note = denial_note(SandboxMode::WorkspaceWrite, out).unwrap_or_default();
        assert_eq!(
            note,
            "this may have been blocked by the sandbox (workspace-write): \
             touch: cannot touch '/etc/x': Read-only file system"
        );
        assert_eq!(denial_note(SandboxMode::ReadOnly, "no such file"), None);
    }
}
