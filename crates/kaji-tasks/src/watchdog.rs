//! The orphan watchdog: every process group kaji starts dies with kaji,
//! however kaji ends — even by `SIGKILL`.
//!
//! `PR_SET_PDEATHSIG` is not enough (it fires when the spawning *thread*
//! ends and reaches only the direct child), and cgroup v1 machines offer no
//! way to kill a whole tree at once. So, at the first spawn through
//! [`crate::process`], kaji forks one small watchdog process that holds the
//! read end of a pipe whose write end only kaji holds (close-on-exec, so no
//! child inherits it). Every process group spawned through
//! [`crate::process`] is registered by writing its group id down the pipe
//! — by the child itself, between `fork` and `exec`, so no command runs
//! unwatched ([`register_self`]) — and a negative id, written by kaji,
//! unregisters it once kaji has seen the group end. When
//! the pipe reaches end-of-file — kaji exited or was killed, by whatever
//! means — the watchdog sends `SIGTERM` to every registered group, waits
//! up to the kill grace for them to go, sends `SIGKILL` to the rest, and
//! exits.
//!
//! Why fork without exec: a library cannot re-exec its host binary, and a
//! shell is no reliable place to keep group ids. A child forked from a
//! multi-threaded process may only make async-signal-safe calls, so the
//! watchdog's loop is written with raw system calls only: `read`, `kill`,
//! `nanosleep`, `close`, `_exit`; its table of groups is allocated before
//! the fork. It first closes every descriptor but its pipe (so it holds no
//! lock file, socket or terminal of kaji's), leaves kaji's process group
//! (so a Ctrl-C or a `kill -- -PGID` aimed at kaji does not take the
//! watchdog with it) and ignores `SIGINT`, `SIGHUP` and `SIGPIPE`.
//!
//! Each group is also recorded, with its leader's start time and command,
//! in `groups.json` in the run directory of every runtime registry of the
//! process ([`record_groups_in`]), so that `kaji ps` can list the
//! processes a dead session left behind should the watchdog itself have
//! been killed.
//!
//! Limits: a process that leaves its group (`setsid`) escapes, as it does
//! [`crate::process`]; `groups.json` learns of a group only after its spawn
//! returned (the watchdog before its `exec`), so `kaji ps` may miss a group
//! if kaji *and* the watchdog are killed in those microseconds; the table
//! holds 4,096 groups at once (more are not watched); a group id kaji saw
//! end but had not yet unregistered when it died, or that of a child whose
//! `exec` failed after it registered itself, may in theory have been
//! reused by the time the watchdog signals it.
//! Setting `KAJI_WATCHDOG=off` disables the watchdog (for tests of the
//! orphan listing).
//!
//! This module must never allocate, lock or unwind in the forked child,
//! never signal a group that was not registered, and never make kaji fail
//! to spawn because the watchdog could not be started.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The environment variable that disables the watchdog when set to `off`
/// (or `0`).
pub const WATCHDOG_ENV: &str = "KAJI_WATCHDOG";
/// The name of the file that records a process's live groups, in a
/// session's run directory.
pub const GROUPS_FILE: &str = "groups.json";
/// The most groups the watchdog watches at once.
const TABLE_CAPACITY: usize = 4096;

/// One process group started through [`crate::process`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupRecord {
    /// The process group id (the leader's pid).
    pub pgid: i32,
    /// The leader's start time in clock ticks after boot, to tell the
    /// group from a later one with the same id.
    #[serde(default)]
    pub leader_start_ticks: Option<u64>,
    /// The program and its arguments, cut to 200 characters.
    pub command: String,
    /// When it was started, milliseconds since the Unix epoch.
    pub started_at_ms: u64,
}

/// What `groups.json` holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupsFile {
    /// Always 1.
    pub schema_version: u32,
    /// The pid of the kaji process that started the groups.
    pub pid: u32,
    /// Its start time in clock ticks after boot.
    #[serde(default)]
    pub pid_start_ticks: Option<u64>,
    /// The groups that were running when the file was last written.
    pub groups: Vec<GroupRecord>,
}

#[derive(Default)]
struct Book {
    groups: BTreeMap<i32, GroupRecord>,
    files: Vec<PathBuf>,
}

fn book() -> MutexGuard<'static, Book> {
    static BOOK: OnceLock<Mutex<Book>> = OnceLock::new();
    BOOK.get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

/// The program and arguments of `cmd`, for the record.
pub fn describe(cmd: &std::process::Command) -> String {
    let mut text = cmd.get_program().to_string_lossy().into_owned();
    for arg in cmd.get_args() {
        text.push(' ');
        text.push_str(&arg.to_string_lossy());
    }
    if let Some((cut, _)) = text.char_indices().nth(200) {
        text.truncate(cut);
        text.push('…');
    }
    text
}

/// The write end of the watchdog's pipe, starting the watchdog if it is
/// not running yet; `None` when it is disabled or could not be started.
///
/// A child about to be spawned registers itself with it through
/// [`register_self`], between `fork` and `exec`: the watchdog then knows
/// the group before the command can run a single instruction, so a kaji
/// killed at any moment after the fork leaves no unwatched group.
pub fn child_registration_fd() -> Option<std::os::fd::RawFd> {
    use std::os::fd::AsRawFd;
    watchdog().map(|w| w.write_fd.as_raw_fd())
}

/// Registers the calling process's own group with the watchdog through
/// `fd` (from [`child_registration_fd`]).
///
/// Runs in a forked child before `exec` (a `pre_exec` hook, after the
/// child became the leader of its own group): async-signal-safe calls
/// only, `getpid` and `write`. The pipe's write end is close-on-exec, so
/// the command itself never holds it. The id written is the child's pid,
/// which is its group id: should the group not have been created, the
/// watchdog's signal to it finds nothing.
pub fn register_self(fd: std::os::fd::RawFd) -> std::io::Result<()> {
    // SAFETY: getpid cannot fail; write sends 4 bytes from a live buffer
    // (atomic on a pipe) to an fd inherited from the parent.
    unsafe {
        let bytes = libc::getpid().to_ne_bytes();
        loop {
            let rc = libc::write(fd, bytes.as_ptr().cast(), bytes.len());
            // Reading errno this way allocates nothing.
            let interrupted = std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR);
            if rc >= 0 || !interrupted {
                return Ok(());
            }
        }
    }
}

/// Records group `pgid` (just spawned; the child registered itself with
/// the watchdog before its `exec`, see [`register_self`]) for `kaji ps`.
/// Never fails: a record that cannot be written leaves the watchdog in
/// place.
pub fn register(pgid: i32, command: &str) {
    if pgid <= 0 {
        return;
    }
    let record = GroupRecord {
        pgid,
        leader_start_ticks: crate::procfs::read_stat(pgid).map(|s| s.start_ticks),
        command: command.to_string(),
        started_at_ms: now_ms(),
    };
    let mut book = book();
    book.groups.insert(pgid, record);
    write_files(&book);
}

/// Unregisters group `pgid`: kaji has seen it end or has killed it.
pub fn unregister(pgid: i32) {
    if pgid <= 0 {
        return;
    }
    let mut book = book();
    if book.groups.remove(&pgid).is_none() {
        return;
    }
    if let Some(w) = WATCHDOG.get().and_then(Option::as_ref) {
        w.send(-pgid);
    }
    write_files(&book);
}

/// The groups registered now, by id.
pub fn registered() -> Vec<GroupRecord> {
    book().groups.values().cloned().collect()
}

/// The watchdog's pid, once it runs.
pub fn watchdog_pid() -> Option<i32> {
    WATCHDOG.get().and_then(Option::as_ref).map(|w| w.pid)
}

/// Keeps `path` (a session's `groups.json`) up to date with the live
/// groups of this process from now on.
pub fn record_groups_in(path: PathBuf) {
    let mut book = book();
    if !book.files.contains(&path) {
        book.files.push(path);
    }
    write_files(&book);
}

/// Stops updating `path` and removes it: its session ended cleanly.
pub fn stop_recording_in(path: &Path) {
    let mut book = book();
    book.files.retain(|p| p != path);
    let _ = std::fs::remove_file(path);
}

/// Rewrites every record file; failures only cost `kaji ps` its view.
fn write_files(book: &Book) {
    if book.files.is_empty() {
        return;
    }
    let file = GroupsFile {
        schema_version: 1,
        pid: std::process::id(),
        pid_start_ticks: crate::procfs::own_start_ticks(),
        groups: book.groups.values().cloned().collect(),
    };
    let Ok(mut json) = serde_json::to_vec_pretty(&file) else {
        return;
    };
    json.push(b'\n');
    for path in &book.files {
        let _ = write_atomic(path, &json);
    }
}

fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

static WATCHDOG: OnceLock<Option<Watchdog>> = OnceLock::new();

fn watchdog() -> Option<&'static Watchdog> {
    WATCHDOG
        .get_or_init(|| {
            let disabled = std::env::var(WATCHDOG_ENV)
                .is_ok_and(|v| matches!(v.trim(), "off" | "0" | "false"));
            if disabled {
                None
            } else {
                Watchdog::start(crate::limits::kill_grace_from_env()).ok()
            }
        })
        .as_ref()
}

/// kaji's end of the watchdog's pipe.
struct Watchdog {
    write_fd: std::os::fd::OwnedFd,
    pid: i32,
}

impl Watchdog {
    /// Sends one message (4 bytes: atomic on a pipe, whatever the thread).
    fn send(&self, message: i32) {
        use std::os::fd::AsRawFd;
        let bytes = message.to_ne_bytes();
        loop {
            // SAFETY: writes 4 bytes from a live buffer to an fd we own.
            let rc = unsafe {
                libc::write(
                    self.write_fd.as_raw_fd(),
                    bytes.as_ptr().cast(),
                    bytes.len(),
                )
            };
            if rc >= 0 || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted
            {
                return;
            }
        }
    }

    #[cfg(target_os = "linux")]
    fn start(grace: Duration) -> std::io::Result<Self> {
        use std::os::fd::FromRawFd;
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: pipe2 fills two fds; close-on-exec keeps them out of
        // every child kaji execs.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let [read_fd, write_fd] = fds;
        let grace_ms = u64::try_from(grace.as_millis()).unwrap_or(u64::MAX);
        let mut table = vec![0i32; TABLE_CAPACITY];
        // SAFETY: fork; the child only runs `child_main`, which makes
        // async-signal-safe calls only and never returns.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            // SAFETY: in the forked child, with a table allocated before.
            unsafe { child::main(read_fd, table.as_mut_ptr(), table.len(), grace_ms) }
        }
        drop(table);
        // SAFETY: closing our copy of the read end, which we own.
        unsafe { libc::close(read_fd) };
        // SAFETY: the write end is ours alone.
        let write_fd = unsafe { std::os::fd::OwnedFd::from_raw_fd(write_fd) };
        if pid < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Self { write_fd, pid })
    }

    #[cfg(not(target_os = "linux"))]
    fn start(_grace: Duration) -> std::io::Result<Self> {
        Err(std::io::Error::other(
            "the watchdog is implemented for Linux only",
        ))
    }
}

/// The watchdog process. Everything here runs in a child forked from a
/// multi-threaded process: raw system calls only, no allocation, no
/// locks, no panics.
#[cfg(target_os = "linux")]
pub(crate) mod child {
    /// Watches the pipe until end-of-file, then ends every registered group.
    ///
    /// # Safety
    /// Call only in a freshly forked child; `table` must point to `cap`
    /// writable `i32`s.
    pub(super) unsafe fn main(read_fd: i32, table: *mut i32, cap: usize, grace_ms: u64) -> ! {
        // SAFETY (whole function): raw libc calls on our own fds and
        // memory; the table pointer is valid for `cap` elements.
        unsafe {
            prepare(read_fd);
            let mut len = 0usize;
            let mut buf = [0u8; 1024];
            let mut carry = [0u8; 4];
            let mut carried = 0usize;
            loop {
                let n = libc::read(read_fd, buf.as_mut_ptr().cast(), buf.len());
                if n == 0 {
                    break;
                }
                if n < 0 {
                    if *libc::__errno_location() == libc::EINTR {
                        continue;
                    }
                    break;
                }
                for &byte in &buf[..n as usize] {
                    carry[carried] = byte;
                    carried += 1;
                    if carried == 4 {
                        carried = 0;
                        apply(i32::from_ne_bytes(carry), table, cap, &mut len);
                    }
                }
            }
            end_groups(table, len, grace_ms);
            libc::_exit(0)
        }
    }

    /// Closes every fd but the pipe, leaves kaji's process group, and
    /// ignores the signals a terminal sends.
    unsafe fn prepare(read_fd: i32) {
        // SAFETY: see `main`.
        unsafe {
            libc::setpgid(0, 0);
            libc::signal(libc::SIGINT, libc::SIG_IGN);
            libc::signal(libc::SIGHUP, libc::SIG_IGN);
            libc::signal(libc::SIGPIPE, libc::SIG_IGN);
            libc::signal(libc::SIGTERM, libc::SIG_DFL);
            let mut empty: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut empty);
            libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
            let name = b"kaji-watchdog\0";
            libc::prctl(libc::PR_SET_NAME, name.as_ptr() as libc::c_ulong, 0, 0, 0);
            close_all_but(read_fd);
        }
    }

    /// Closes every descriptor but `keep`.
    ///
    /// # Safety
    /// Async-signal-safe: may run in a child forked from a multi-threaded
    /// process.
    pub(crate) unsafe fn close_all_but(keep: i32) {
        // SAFETY: see `main`.
        unsafe {
            let keep = keep as libc::c_uint;
            let low = if keep > 0 {
                libc::syscall(libc::SYS_close_range, 0u32, keep - 1, 0u32)
            } else {
                0
            };
            let high = libc::syscall(libc::SYS_close_range, keep + 1, libc::c_uint::MAX, 0u32);
            if low == 0 && high == 0 {
                return;
            }
            // No close_range (kernel before 5.9): close one by one.
            let mut limit: libc::rlimit = std::mem::zeroed();
            let max = if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 {
                limit.rlim_cur.min(1 << 20) as i32
            } else {
                4096
            };
            for fd in 0..max {
                if fd != keep as i32 {
                    libc::close(fd);
                }
            }
        }
    }

    /// Registers (positive) or unregisters (negative) a group id.
    unsafe fn apply(message: i32, table: *mut i32, cap: usize, len: &mut usize) {
        // SAFETY: indices stay below `*len <= cap`.
        unsafe {
            let pgid = message.unsigned_abs() as i32;
            let mut found = None;
            for i in 0..*len {
                if *table.add(i) == pgid {
                    found = Some(i);
                    break;
                }
            }
            match (message > 0, found) {
                (true, None) if *len < cap => {
                    *table.add(*len) = pgid;
                    *len += 1;
                }
                (false, Some(i)) => {
                    *len -= 1;
                    *table.add(i) = *table.add(*len);
                }
                _ => {}
            }
        }
    }

    /// `SIGTERM` to every group, up to `grace_ms` for them to go, then
    /// `SIGKILL` to the rest.
    unsafe fn end_groups(table: *mut i32, len: usize, grace_ms: u64) {
        // SAFETY: indices stay below `len`.
        unsafe {
            for i in 0..len {
                libc::kill(-*table.add(i), libc::SIGTERM);
            }
            let step = libc::timespec {
                tv_sec: 0,
                tv_nsec: 10_000_000,
            };
            let mut waited = 0u64;
            while waited < grace_ms {
                let mut any = false;
                for i in 0..len {
                    if libc::kill(-*table.add(i), 0) == 0 {
                        any = true;
                        break;
                    }
                }
                if !any {
                    return;
                }
                libc::nanosleep(&step, std::ptr::null_mut());
                waited += 10;
            }
            for i in 0..len {
                libc::kill(-*table.add(i), libc::SIGKILL);
            }
        }
    }
}
