//! `/proc/<pid>/stat`: the few fields kaji reads of a process (state,
//! parent, group, start time). The floor under the process seam, the
//! watchdog and the runtime state; it reads files and never spawns,
//! signals or imports anything of this crate.

/// The fields of `/proc/<pid>/stat` kaji uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcStat {
    /// One-letter state: `R`, `S`, `D`, `Z` (zombie), `T`, …
    pub state: char,
    /// Parent pid.
    pub ppid: i32,
    /// Process group id.
    pub pgrp: i32,
    /// Start time in clock ticks after boot (identifies a process across
    /// pid reuse).
    pub start_ticks: u64,
}

/// Reads `/proc/<pid>/stat` (Linux only; `None` elsewhere or when the
/// process does not exist).
pub fn read_stat(pid: i32) -> Option<ProcStat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&text)
}

fn parse_stat(text: &str) -> Option<ProcStat> {
    // The command name is in parentheses and may itself contain spaces or
    // parentheses: the fields after it start after the last ')'.
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // fields[0] is field 3 of proc(5) (state); starttime is field 22.
    Some(ProcStat {
        state: fields.first()?.chars().next()?,
        ppid: fields.get(1)?.parse().ok()?,
        pgrp: fields.get(2)?.parse().ok()?,
        start_ticks: fields.get(19)?.parse().ok()?,
    })
}

/// The start time of this process, in clock ticks after boot.
pub(crate) fn own_start_ticks() -> Option<u64> {
    read_stat(i32::try_from(std::process::id()).ok()?).map(|s| s.start_ticks)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat_with_odd_command_names() {
        let line = "1234 (a b) c)) S 1 1234 1234 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 98765 0 0";
        let stat = parse_stat(line).expect("parses");
        assert_eq!(stat.state, 'S');
        assert_eq!(stat.ppid, 1);
        assert_eq!(stat.pgrp, 1234);
        assert_eq!(stat.start_ticks, 98765);
    }

    #[test]
    fn rejects_truncated_stat() {
        assert_eq!(parse_stat("12 (x) S 1"), None);
        assert_eq!(parse_stat("garbage"), None);
    }
}
