//! The Linux sandbox: what [`prepare`] builds before the fork, what
//! [`PreparedSandbox::apply_in_child`] does after it, and [`probe`].
//!
//! The child of a multi-threaded parent may only make async-signal-safe
//! calls between `fork` and `exec`: everything here that allocates, formats
//! or reads files runs in [`prepare`]; `apply_in_child` and the probes'
//! children make raw system calls on data prepared earlier, and nothing
//! else. Never add an allocation, a lock or a `std::fs` call to them.

use std::collections::BTreeMap;
use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use landlock::{
    ABI, AccessFs, PathBeneath, PathFd, Ruleset, RulesetAttr, RulesetCreatedAttr, Scope,
};
use nix::mount::{MsFlags, mount};
use nix::sched::{CloneFlags, unshare};
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

use crate::paths::expand_denied;
use crate::{SandboxError, SandboxMode, SandboxPolicy, SandboxSupport};

/// The Landlock ABI whose write rights kaji asks for (older kernels get the
/// subset they know; the ABI actually in force is reported by [`probe`]).
const LANDLOCK_ABI: ABI = ABI::V5;

/// Devices every sandboxed command may write to (or use as a terminal).
const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/pts",
    "/dev/shm",
];

/// Everything a child needs to confine itself, built before the fork by
/// [`SandboxPolicy::prepare`]. Use it once, in one child's `pre_exec`.
#[derive(Debug)]
pub struct PreparedSandbox {
    mode: SandboxMode,
    namespace: Namespace,
    landlock: OwnedFd,
    seccomp: BpfProgram,
}

/// The user and mount namespace part.
#[derive(Debug)]
struct Namespace {
    uid_map: Vec<u8>,
    gid_map: Vec<u8>,
    mounts: Vec<MountOp>,
    chdir: Option<CString>,
}

/// One mount in the child's mount namespace, in the order given.
#[derive(Debug)]
enum MountOp {
    /// Bind a directory onto itself, recursively and writable: a hole in a
    /// read-only bind made after it, or a mount point that cannot be
    /// renamed away.
    SelfBind(CString),
    /// Bind a path onto itself and remount it read-only, keeping the
    /// `nosuid`/`nodev`/`noexec`/atime flags the kernel locks.
    ReadOnly {
        path: CString,
        recursive: bool,
        kept: MsFlags,
    },
    /// An empty read-only tmpfs over a directory.
    EmptyTmpfs(CString),
    /// `/dev/null` over a file.
    NullFile(CString),
    /// `/dev/null` over a listening Unix socket outside the writable roots;
    /// a socket removed since [`prepare`] looked is nothing to hide.
    HideSocket(CString),
}

impl PreparedSandbox {
    /// The mode this sandbox enforces.
    pub fn mode(&self) -> SandboxMode {
        self.mode
    }

    /// Confines the calling process: enters a new user and mount namespace
    /// and makes the mounts, sets `no_new_privs`, restricts itself with
    /// Landlock and installs the seccomp filter.
    ///
    /// Meant for `pre_exec`: makes raw system calls only (no allocation).
    /// On failure the error is the `errno` of the step that failed.
    pub fn apply_in_child(&self) -> io::Result<()> {
        self.namespace.enter()?;
        no_new_privs()?;
        landlock_restrict(&self.landlock)?;
        install_seccomp(&self.seccomp)
    }
}

impl Namespace {
    fn enter(&self) -> io::Result<()> {
        unshare(CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNS).map_err(errno)?;
        write_proc(c"/proc/self/setgroups", b"deny")?;
        write_proc(c"/proc/self/uid_map", &self.uid_map)?;
        write_proc(c"/proc/self/gid_map", &self.gid_map)?;
        let none: Option<&CStr> = None;
        mount(
            none,
            c"/",
            none,
            MsFlags::MS_REC | MsFlags::MS_PRIVATE,
            none,
        )
        .map_err(errno)?;
        for op in &self.mounts {
            op.apply()?;
        }
        if let Some(dir) = &self.chdir {
            // Re-enter the working directory so that relative paths see
            // the new mounts.
            // SAFETY: chdir takes a NUL-terminated path we own.
            if unsafe { libc::chdir(dir.as_ptr()) } != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(())
    }
}

impl MountOp {
    fn apply(&self) -> io::Result<()> {
        let none: Option<&CStr> = None;
        match self {
            MountOp::SelfBind(path) => mount(
                Some(path.as_c_str()),
                path.as_c_str(),
                none,
                MsFlags::MS_BIND | MsFlags::MS_REC,
                none,
            )
            .map_err(errno),
            MountOp::ReadOnly {
                path,
                recursive,
                kept,
            } => {
                let mut flags = MsFlags::MS_BIND;
                if *recursive {
                    flags |= MsFlags::MS_REC;
                }
                mount(Some(path.as_c_str()), path.as_c_str(), none, flags, none).map_err(errno)?;
                let remount = MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY | *kept;
                mount(none, path.as_c_str(), none, remount, none).map_err(errno)
            }
            MountOp::EmptyTmpfs(path) => {
                let flags = MsFlags::MS_RDONLY
                    | MsFlags::MS_NOSUID
                    | MsFlags::MS_NODEV
                    | MsFlags::MS_NOEXEC;
                mount(
                    Some(c"tmpfs"),
                    path.as_c_str(),
                    Some(c"tmpfs"),
                    flags,
                    Some(c"size=4k,mode=0555"),
                )
                .map_err(errno)
            }
            MountOp::NullFile(path) => null_over(path),
            MountOp::HideSocket(path) => match null_over(path) {
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(()),
                other => other,
            },
        }
    }
}

/// Binds `/dev/null` over the file `path`.
fn null_over(path: &CStr) -> io::Result<()> {
    let none: Option<&CStr> = None;
    mount(Some(c"/dev/null"), path, none, MsFlags::MS_BIND, none).map_err(errno)
}

fn errno(e: nix::errno::Errno) -> io::Error {
    io::Error::from_raw_os_error(e as i32)
}

/// Writes `bytes` to a `/proc/self` file with raw system calls.
fn write_proc(path: &CStr, bytes: &[u8]) -> io::Result<()> {
    // SAFETY: open/write/close on a NUL-terminated path and a live buffer.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let written = libc::write(fd, bytes.as_ptr().cast(), bytes.len());
        let result = if written == bytes.len() as isize {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        };
        libc::close(fd);
        result
    }
}

fn no_new_privs() -> io::Result<()> {
    // SAFETY: prctl with integer arguments.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn landlock_restrict(ruleset: &OwnedFd) -> io::Result<()> {
    // SAFETY: landlock_restrict_self(fd, 0) on a ruleset fd we own.
    let rc = unsafe { libc::syscall(libc::SYS_landlock_restrict_self, ruleset.as_raw_fd(), 0) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn install_seccomp(program: &BpfProgram) -> io::Result<()> {
    let len =
        u16::try_from(program.len()).map_err(|_| io::Error::from_raw_os_error(libc::E2BIG))?;
    let fprog = libc::sock_fprog {
        len,
        // seccompiler's sock_filter has the kernel's layout.
        filter: program.as_ptr().cast_mut().cast(),
    };
    // SAFETY: seccomp(SET_MODE_FILTER) reads `fprog`, which points into
    // `program` for the duration of the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            0,
            &fprog as *const libc::sock_fprog,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Builds the [`PreparedSandbox`] for `policy` (see
/// [`SandboxPolicy::prepare`]).
pub(crate) fn prepare(
    policy: &SandboxPolicy,
    cwd: Option<&Path>,
) -> Result<PreparedSandbox, SandboxError> {
    let writable: Vec<PathBuf> = match policy.mode {
        SandboxMode::WorkspaceWrite => {
            if let Some(tmp) = &policy.temp_dir {
                std::fs::create_dir_all(tmp).map_err(|e| SandboxError::Path {
                    path: tmp.clone(),
                    reason: format!("could not create the command's temp dir: {e}"),
                })?;
            }
            let roots = policy.writable_roots.iter().chain(&policy.temp_dir);
            existing_canonical(&roots.cloned().collect::<Vec<_>>())
        }
        SandboxMode::ReadOnly | SandboxMode::Off => Vec::new(),
    };
    let namespace = Namespace {
        chdir: cwd.map(c_path).transpose()?,
        ..namespace_for(policy, &writable)?
    };
    Ok(PreparedSandbox {
        mode: policy.mode,
        namespace,
        landlock: landlock_ruleset(&writable)?,
        seccomp: seccomp_program(policy.network)?,
    })
}

fn existing_canonical(paths: &[PathBuf]) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = paths
        .iter()
        .filter_map(|p| std::fs::canonicalize(p).ok())
        .collect();
    out.sort();
    out.dedup();
    out
}

fn c_path(path: &Path) -> Result<CString, SandboxError> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| SandboxError::Path {
        path: path.to_path_buf(),
        reason: "contains a NUL byte".to_string(),
    })
}

/// The id maps and mounts: holes for writable roots inside protected
/// directories, the protected paths read-only, the denied paths covered.
fn namespace_for(policy: &SandboxPolicy, writable: &[PathBuf]) -> Result<Namespace, SandboxError> {
    // Outside the writable roots Landlock already refuses every write.
    let mut protected = existing_canonical(&policy.protected_paths);
    protected.retain(|p| writable.iter().any(|w| p.starts_with(w)));
    let mut mounts = Vec::new();
    // Sockets first: a directory covered below may hold one.
    let allowed = existing_canonical(&policy.allow_unix_sockets);
    for socket in listening_sockets_outside(writable, &allowed) {
        mounts.push(MountOp::HideSocket(c_path(&socket)?));
    }
    // Parents before children (a bind hides what was mounted below it).
    for dir in self_binds(&protected, writable) {
        mounts.push(MountOp::SelfBind(c_path(&dir)?));
    }
    for path in &protected {
        mounts.push(MountOp::ReadOnly {
            path: c_path(path)?,
            recursive: path.is_dir(),
            kept: locked_flags(path)?,
        });
    }
    let mut denied = existing_canonical(&policy.deny_read);
    denied.retain(|d| !allowed.iter().any(|a| a.starts_with(d)));
    for denied in denied {
        for path in expand_denied(&denied, writable) {
            let c = c_path(&path)?;
            mounts.push(if path.is_dir() {
                MountOp::EmptyTmpfs(c)
            } else {
                MountOp::NullFile(c)
            });
        }
    }
    // A process may only map its own ids into the namespace it created
    // (one line each, and gid_map only after setgroups is denied), root
    // included: the namespace has no capability in its parent.
    // SAFETY: geteuid/getegid cannot fail.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    Ok(Namespace {
        uid_map: format!("{uid} {uid} 1\n").into_bytes(),
        gid_map: format!("{gid} {gid} 1\n").into_bytes(),
        mounts,
        chdir: None,
    })
}

/// The pathname Unix sockets listening in this network namespace
/// (`/proc/net/unix`) that lie outside `writable` and `allowed`, exist and
/// are sockets, canonical. A socket bound with a relative path is found by
/// [`crate::unix_socket_dirs`] or not at all.
fn listening_sockets_outside(writable: &[PathBuf], allowed: &[PathBuf]) -> Vec<PathBuf> {
    use std::os::unix::fs::FileTypeExt;
    let Ok(table) = std::fs::read_to_string("/proc/net/unix") else {
        return Vec::new();
    };
    let mut found: Vec<PathBuf> = table
        .lines()
        .skip(1)
        .filter_map(|line| line.split_whitespace().nth(7))
        .filter(|path| path.starts_with('/'))
        .filter_map(|path| std::fs::canonicalize(path).ok())
        .filter(|p| !writable.iter().chain(allowed).any(|w| p.starts_with(w)))
        .filter(|p| std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_socket()))
        .collect();
    found.sort();
    found.dedup();
    found
}

/// The directories to bind onto themselves (writable) before the
/// protected paths are made read-only, parents first:
///
/// - every directory from a writable root down to a protected path's
///   parent (`ROOT`, `ROOT/.git`): a mount point cannot be renamed or
///   removed, so `mv .git .git-old && mkdir .git` cannot swap the
///   protected files for unprotected copies;
/// - every writable root strictly inside a protected directory (such as
///   `.kaji/worktrees` inside `.kaji`): a writable hole in it.
fn self_binds(protected: &[PathBuf], writable: &[PathBuf]) -> std::collections::BTreeSet<PathBuf> {
    let mut dirs = std::collections::BTreeSet::new();
    for path in protected {
        let root = writable
            .iter()
            .filter(|w| path.starts_with(w) && *w != path)
            .max_by_key(|w| w.as_os_str().len());
        let Some(root) = root else { continue };
        let mut dir = path.parent();
        while let Some(d) = dir.filter(|d| d.starts_with(root)) {
            dirs.insert(d.to_path_buf());
            dir = d.parent();
        }
    }
    for root in writable {
        if root.is_dir() && protected.iter().any(|p| root.starts_with(p) && root != p) {
            dirs.insert(root.clone());
        }
    }
    dirs
}

/// The mount flags of the mount holding `path` that a user namespace may
/// not drop on a remount.
fn locked_flags(path: &Path) -> Result<MsFlags, SandboxError> {
    let c = c_path(path)?;
    // SAFETY: statvfs writes into the zeroed struct we pass.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Err(SandboxError::Path {
            path: path.to_path_buf(),
            reason: format!("statvfs: {}", io::Error::last_os_error()),
        });
    }
    let f = st.f_flag;
    let mut kept = MsFlags::empty();
    for (st_flag, ms) in [
        (libc::ST_NOSUID, MsFlags::MS_NOSUID),
        (libc::ST_NODEV, MsFlags::MS_NODEV),
        (libc::ST_NOEXEC, MsFlags::MS_NOEXEC),
        (libc::ST_NOATIME, MsFlags::MS_NOATIME),
        (libc::ST_NODIRATIME, MsFlags::MS_NODIRATIME),
        (libc::ST_RELATIME, MsFlags::MS_RELATIME),
    ] {
        if f & st_flag != 0 {
            kept |= ms;
        }
    }
    if f & (libc::ST_NOATIME | libc::ST_RELATIME) == 0 {
        kept |= MsFlags::MS_STRICTATIME;
    }
    Ok(kept)
}

/// A Landlock ruleset allowing writes below `writable` and to [`DEVICES`].
fn landlock_ruleset(writable: &[PathBuf]) -> Result<OwnedFd, SandboxError> {
    let unavailable = |e: &dyn std::fmt::Display| SandboxError::LandlockUnavailable(e.to_string());
    let access = AccessFs::from_write(LANDLOCK_ABI);
    // Scoping abstract Unix sockets needs ABI 6; an older kernel gets the
    // file-system rights alone (what `kaji doctor` reports as its ABI).
    let mut ruleset = Ruleset::default()
        .handle_access(access)
        .map_err(|e| unavailable(&e))?
        .scope(Scope::AbstractUnixSocket)
        .map_err(|e| unavailable(&e))?
        .create()
        .map_err(|e| unavailable(&e))?;
    let devices = DEVICES.iter().map(PathBuf::from);
    for path in writable.iter().cloned().chain(devices) {
        let Ok(fd) = PathFd::new(&path) else {
            continue; // a device this machine lacks
        };
        let rights = if path.is_dir() {
            access
        } else {
            access & AccessFs::from_file(LANDLOCK_ABI)
        };
        ruleset = ruleset
            .add_rule(PathBeneath::new(fd, rights))
            .map_err(|e| SandboxError::Path {
                path: path.clone(),
                reason: format!("Landlock rule: {e}"),
            })?;
    }
    let fd: Option<OwnedFd> = ruleset.into();
    fd.ok_or_else(|| unavailable(&"the kernel does not enforce Landlock"))
}

/// The seccomp program: no mount-table changes and no io_uring (which can
/// open sockets behind seccomp's back), and without `network` no socket
/// other than `AF_UNIX`. Refused calls fail with `EPERM`.
fn seccomp_program(network: bool) -> Result<BpfProgram, SandboxError> {
    let err = |e: &dyn std::fmt::Display| SandboxError::Seccomp(e.to_string());
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for call in [
        libc::SYS_mount,
        libc::SYS_umount2,
        libc::SYS_pivot_root,
        libc::SYS_move_mount,
        libc::SYS_open_tree,
        libc::SYS_fsopen,
        libc::SYS_fsmount,
        libc::SYS_fspick,
        libc::SYS_mount_setattr,
        libc::SYS_io_uring_setup,
    ] {
        rules.insert(call, Vec::new());
    }
    if !network {
        let not_unix = SeccompCondition::new(
            0,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::Ne,
            libc::AF_UNIX as u64,
        )
        .map_err(|e| err(&e))?;
        rules.insert(
            libc::SYS_socket,
            vec![SeccompRule::new(vec![not_unix]).map_err(|e| err(&e))?],
        );
    }
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(|e| err(&e))?;
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(|e| err(&e))?;
    filter
        .try_into()
        .map_err(|e: seccompiler::BackendError| err(&e))
}

/// The Landlock ABI version of the running kernel, 0 when none.
fn landlock_abi() -> u32 {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: landlock_create_ruleset(NULL, 0, VERSION) only returns a number.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    u32::try_from(rc).unwrap_or(0)
}

/// Runs `f` in a forked child and returns its result: `Ok` when it
/// returned 0, else the errno it returned. `f` must be async-signal-safe.
fn in_child(f: impl Fn() -> i32) -> io::Result<()> {
    // SAFETY: the child only runs `f` (raw system calls) and `_exit`.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    if pid == 0 {
        let code = f();
        // SAFETY: _exit is async-signal-safe and ends the child at once.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    loop {
        // SAFETY: waitpid on our own child with a live status pointer.
        let rc = unsafe { libc::waitpid(pid, &mut status, 0) };
        if rc == pid {
            break;
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINTR) {
            return Err(e);
        }
    }
    if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
        Ok(())
    } else if libc::WIFEXITED(status) {
        Err(io::Error::from_raw_os_error(libc::WEXITSTATUS(status)))
    } else {
        Err(io::Error::other("the probe child was killed"))
    }
}

fn code_of(result: io::Result<()>) -> i32 {
    match result {
        Ok(()) => 0,
        Err(e) => e.raw_os_error().unwrap_or(libc::EINVAL).clamp(1, 255),
    }
}

/// Tries each layer in a child (see [`crate::probe`]).
pub(crate) fn probe() -> SandboxSupport {
    let mut problems = Vec::new();
    let tmp = std::env::temp_dir();
    let landlock_abi = landlock_abi();

    let user_namespaces = match probe_policy(&tmp).and_then(|p| namespace_for(&p, &[])) {
        Ok(ns) => report(
            &mut problems,
            "user and mount namespace",
            in_child(|| code_of(ns.enter())),
        ),
        Err(e) => report_err(&mut problems, "user and mount namespace", &e),
    };
    let landlock = match landlock_ruleset(std::slice::from_ref(&tmp)) {
        Ok(fd) => report(
            &mut problems,
            "Landlock",
            in_child(|| code_of(no_new_privs().and_then(|()| landlock_restrict(&fd)))),
        ),
        Err(e) => report_err(&mut problems, "Landlock", &e),
    };
    let seccomp = match seccomp_program(false) {
        Ok(prog) => report(&mut problems, "seccomp", in_child(|| seccomp_child(&prog))),
        Err(e) => report_err(&mut problems, "seccomp", &e),
    };
    SandboxSupport {
        landlock_abi,
        landlock,
        user_namespaces,
        seccomp,
        problems,
    }
}

/// A policy that protects the temp dir, to try the mounts on.
fn probe_policy(tmp: &Path) -> Result<SandboxPolicy, SandboxError> {
    Ok(SandboxPolicy {
        mode: SandboxMode::WorkspaceWrite,
        writable_roots: Vec::new(),
        protected_paths: vec![tmp.to_path_buf()],
        deny_read: Vec::new(),
        network: false,
        temp_dir: None,
        allow_unix_sockets: Vec::new(),
    })
}

/// In the child: install the filter, then a TCP socket must be refused.
fn seccomp_child(prog: &BpfProgram) -> i32 {
    if let Err(e) = no_new_privs().and_then(|()| install_seccomp(prog)) {
        return code_of(Err(e));
    }
    // SAFETY: socket() with integer arguments; a returned fd is closed.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0) };
    if fd >= 0 {
        unsafe { libc::close(fd) };
        return 255;
    }
    0
}

fn report(problems: &mut Vec<String>, layer: &str, result: io::Result<()>) -> bool {
    match result {
        Ok(()) => true,
        Err(e) if e.raw_os_error() == Some(255) => {
            problems.push(format!(
                "{layer}: installed but did not refuse a TCP socket"
            ));
            false
        }
        Err(e) => {
            problems.push(format!("{layer}: {e}"));
            false
        }
    }
}

fn report_err(problems: &mut Vec<String>, layer: &str, e: &SandboxError) -> bool {
    problems.push(format!("{layer}: {e}"));
    false
}
