//! Orphans of dead sessions: process groups a kaji process recorded in its
//! `runs/<session-id>/groups.json` (see [`crate::watchdog`]) that still
//! have live members although that process is gone — left behind when the
//! watchdog itself could not act (it was killed too, or disabled). `kaji
//! ps` lists them and `kaji ps --kill-orphans` ends them.
//!
//! A recorded group counts as the same group only if its id is not in use
//! by a live session, and its leader is either gone (a group id stays
//! reserved while the group has members) or still the process recorded
//! (same start time). This module must never signal a group that fails
//! those checks, and it checks again right before signalling.

use std::path::Path;
use std::time::{Duration, Instant};

use super::state::SessionScan;
use super::{RuntimeTaskInfo, RuntimeTaskStatus};
use crate::process::KILL_WAIT_LIMIT;
use crate::procfs::read_stat;
use crate::watchdog::{GROUPS_FILE, GroupRecord, GroupsFile};

/// The largest `groups.json` read.
const MAX_GROUPS_FILE_BYTES: u64 = 4 * 1024 * 1024;
/// Pause between two looks at the process table while ending groups.
const POLL: Duration = Duration::from_millis(10);

/// A process group of a dead session that still has live members.
#[derive(Debug, Clone, PartialEq)]
pub struct OrphanGroup {
    /// The dead session.
    pub session_id: String,
    /// The pid its kaji process had.
    pub session_pid: u32,
    /// The group id.
    pub pgid: i32,
    /// What was started (program and arguments).
    pub command: String,
    /// When it was started, milliseconds since the Unix epoch.
    pub started_at_ms: u64,
    /// The runtime task whose group it is, as the session's state file
    /// last described it (it may still say `running`).
    pub task: Option<RuntimeTaskInfo>,
    /// The live members of the group.
    pub live_pids: Vec<i32>,
    record: GroupRecord,
}

/// What [`kill_orphans`] did to one group.
#[derive(Debug, Clone, PartialEq)]
pub struct KilledOrphan {
    /// The group.
    pub group: OrphanGroup,
    /// Members still alive at the end (normally none).
    pub survivors: Vec<i32>,
}

/// The orphaned groups of the dead sessions in `scan`, by session.
pub fn find_orphans(kaji_home: &Path, scan: &SessionScan) -> Vec<OrphanGroup> {
    let runs = kaji_home.join("runs");
    let mut claimed: Vec<i32> = Vec::new();
    for live in &scan.live {
        claimed.extend(live.tasks.iter().filter_map(|t| t.pid));
        if let Some(file) = read_groups(&runs.join(&live.session_id).join(GROUPS_FILE)) {
            claimed.extend(file.groups.iter().map(|g| g.pgid));
        }
    }
    let mut orphans: Vec<OrphanGroup> = Vec::new();
    for dead in &scan.dead {
        let Some(file) = read_groups(&runs.join(&dead.session_id).join(GROUPS_FILE)) else {
            continue;
        };
        if file.pid != dead.pid {
            continue;
        }
        for record in file.groups {
            if claimed.contains(&record.pgid) || orphans.iter().any(|o| o.pgid == record.pgid) {
                continue;
            }
            let live_pids = verified_members(&record);
            if live_pids.is_empty() {
                continue;
            }
            let task = dead
                .tasks
                .iter()
                .find(|t| t.pid == Some(record.pgid) && !t.status.is_terminal())
                .cloned();
            orphans.push(OrphanGroup {
                session_id: dead.session_id.clone(),
                session_pid: dead.pid,
                pgid: record.pgid,
                command: record.command.clone(),
                started_at_ms: record.started_at_ms,
                task,
                live_pids,
                record,
            });
        }
    }
    orphans
}

/// Ends `groups`: `SIGTERM` to each (checked again first), up to `grace`
/// for them to go, `SIGKILL` to what is left, and up to
/// [`KILL_WAIT_LIMIT`] more for that. Returns every group with the
/// members that survived (normally none). Polls the process table, which
/// only this one-shot command does.
pub fn kill_orphans(groups: &[OrphanGroup], grace: Duration) -> Vec<KilledOrphan> {
    let targets: Vec<&OrphanGroup> = groups
        .iter()
        .filter(|g| !verified_members(&g.record).is_empty())
        .collect();
    signal_all(&targets, libc::SIGTERM);
    wait_gone(&targets, grace);
    signal_all(&targets, libc::SIGKILL);
    wait_gone(&targets, KILL_WAIT_LIMIT);
    groups
        .iter()
        .map(|g| KilledOrphan {
            group: g.clone(),
            survivors: members_of(g.pgid),
        })
        .collect()
}

/// The status `kaji ps` shows for an orphan: `orphaned` (the state file's
/// `running` is stale).
pub const ORPHANED: &str = "orphaned";

impl OrphanGroup {
    /// What the state file said about its task, if it is a task's group.
    pub fn recorded_status(&self) -> Option<RuntimeTaskStatus> {
        self.task.as_ref().map(|t| t.status)
    }
}

fn signal_all(targets: &[&OrphanGroup], signal: i32) {
    for g in targets {
        if !verified_members(&g.record).is_empty() {
            // SAFETY: killpg has no memory-safety preconditions.
            unsafe { libc::killpg(g.pgid, signal) };
        }
    }
}

fn wait_gone(targets: &[&OrphanGroup], limit: Duration) {
    let deadline = Instant::now() + limit;
    while targets.iter().any(|g| !members_of(g.pgid).is_empty()) && Instant::now() < deadline {
        std::thread::sleep(POLL);
    }
}

/// The live members of the recorded group, or none when the id now
/// belongs to another group.
fn verified_members(record: &GroupRecord) -> Vec<i32> {
    if let (Some(expected), Some(leader)) = (record.leader_start_ticks, read_stat(record.pgid))
        && leader.start_ticks != expected
        && leader.state != 'Z'
    {
        return Vec::new();
    }
    let members = members_of(record.pgid);
    match record.leader_start_ticks {
        // Members started after the leader; anything older is not ours.
        Some(expected) => members
            .into_iter()
            .filter(|&pid| read_stat(pid).is_some_and(|s| s.start_ticks >= expected))
            .collect(),
        None => members,
    }
}

/// Live (not zombie) processes whose group is `pgid`, from `/proc`.
fn members_of(pgid: i32) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut pids: Vec<i32> = dir
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()))
        .filter(|&pid| {
            read_stat(pid).is_some_and(|s| s.pgrp == pgid && s.state != 'Z' && s.state != 'X')
        })
        .collect();
    pids.sort_unstable();
    pids
}

fn read_groups(path: &Path) -> Option<GroupsFile> {
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() || meta.len() > MAX_GROUPS_FILE_BYTES {
        return None;
    }
    let bytes = std::fs::read(path).ok()?;
    serde_json::from_slice(&bytes).ok()
}
