//! The log file: where the libraries' `tracing` events go —
//! `$KAJI_HOME/logs/kaji.log`, at the level `KAJI_LOG` names (`error`,
//! `warn`, `info`, `debug`, `trace` or `off`; default `warn`). One line an
//! event: time (UTC), level, where, message and fields.
//!
//! It must never write to the terminal (the TUI draws on it) and never
//! stop or slow kaji's start: the file is opened at the first event, and a
//! file that cannot be opened or written means no log, silently. A log
//! past [`MAX_BYTES`] when it is opened is moved to `kaji.log.1` (the one
//! before is dropped), so the two together stay under twice that.

use std::fmt::Write as _;
use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use tracing::field::{Field, Visit};
use tracing::level_filters::LevelFilter;
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

/// The environment variable that sets the level.
pub const LEVEL_ENV: &str = "KAJI_LOG";

/// A log larger than this (1 MiB) when kaji opens it is rotated.
pub const MAX_BYTES: u64 = 1024 * 1024;

/// Installs the log as the process's `tracing` subscriber: events at the
/// level of `KAJI_LOG` (default `warn`) go to `kaji_home/logs/kaji.log`.
/// Does nothing for `off`, or when a subscriber is already set.
pub fn install(kaji_home: &Path) {
    let level = level(std::env::var(LEVEL_ENV).ok().as_deref());
    if level == LevelFilter::OFF {
        return;
    }
    let log = FileLog {
        path: kaji_home.join("logs").join("kaji.log"),
        level,
        file: OnceLock::new(),
        spans: AtomicU64::new(0),
    };
    let _ = tracing::subscriber::set_global_default(log);
}

/// The level `value` names; unset, empty or unknown: `warn`.
fn level(value: Option<&str>) -> LevelFilter {
    match value.map(|v| v.trim().to_ascii_lowercase()).as_deref() {
        Some("off") => LevelFilter::OFF,
        Some("error") => LevelFilter::ERROR,
        Some("info") => LevelFilter::INFO,
        Some("debug") => LevelFilter::DEBUG,
        Some("trace") => LevelFilter::TRACE,
        _ => LevelFilter::WARN,
    }
}

/// A `tracing` subscriber writing events to a file; spans are numbered
/// and otherwise ignored.
struct FileLog {
    path: PathBuf,
    level: LevelFilter,
    /// Opened at the first event; `None` when it could not be.
    file: OnceLock<Option<Mutex<File>>>,
    spans: AtomicU64,
}

impl FileLog {
    fn file(&self) -> Option<&Mutex<File>> {
        self.file
            .get_or_init(|| open(&self.path).ok().map(Mutex::new))
            .as_ref()
    }
}

/// Opens `path` for appending, after rotating it when it is past
/// [`MAX_BYTES`]; creates its directory.
fn open(path: &Path) -> std::io::Result<File> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    if std::fs::metadata(path).is_ok_and(|m| m.len() > MAX_BYTES) {
        let _ = std::fs::rename(path, path.with_extension("log.1"));
    }
    OpenOptions::new().create(true).append(true).open(path)
}

impl Subscriber for FileLog {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        *metadata.level() <= self.level
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        Some(self.level)
    }

    fn new_span(&self, _span: &Attributes<'_>) -> Id {
        Id::from_u64(self.spans.fetch_add(1, Ordering::Relaxed) + 1)
    }

    fn record(&self, _span: &Id, _values: &Record<'_>) {}

    fn record_follows_from(&self, _span: &Id, _follows: &Id) {}

    fn event(&self, event: &Event<'_>) {
        let Some(file) = self.file() else {
            return;
        };
        let line = line(event);
        let mut file = file.lock().unwrap_or_else(|e| e.into_inner());
        // One write a line: lines of kaji processes sharing the file do
        // not interleave.
        let _ = file.write_all(line.as_bytes());
    }

    fn enter(&self, _span: &Id) {}

    fn exit(&self, _span: &Id) {}
}

/// `2026-12-02T04:50:01.123Z WARN kaji_core::env: message key=value`.
fn line(event: &Event<'_>) -> String {
    let meta = event.metadata();
    let now = kaji_protocol::UtcDateTime::from_system_time(std::time::SystemTime::now())
        .map(|t| t.rfc3339())
        .unwrap_or_default();
    let mut fields = Fields::default();
    event.record(&mut fields);
    let mut line = format!(
        "{now} {} {}: {}",
        meta.level(),
        meta.target(),
        fields.message
    );
    line.push_str(&fields.rest);
    // A message of several lines stays one line of the log.
    let mut line = line.replace('\n', "\\n");
    line.push('\n');
    line
}

/// An event's message and its other fields (` key=value` each).
#[derive(Default)]
struct Fields {
    message: String,
    rest: String,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message.push_str(value);
        } else {
            let _ = write!(self.rest, " {}={value}", field.name());
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.message, "{value:?}");
        } else {
            let _ = write!(self.rest, " {}={value:?}", field.name());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_level_is_warn_unless_named() {
        assert_eq!(level(None), LevelFilter::WARN);
        assert_eq!(level(Some("")), LevelFilter::WARN);
        assert_eq!(level(Some("loud")), LevelFilter::WARN);
        assert_eq!(level(Some(" Debug ")), LevelFilter::DEBUG);
        assert_eq!(level(Some("off")), LevelFilter::OFF);
    }

    #[test]
    fn events_at_the_level_go_to_the_file_and_a_big_log_is_rotated() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("logs/kaji.log");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, vec![b'x'; MAX_BYTES as usize + 1]).unwrap();
        let log = FileLog {
            path: path.clone(),
            level: LevelFilter::WARN,
            file: OnceLock::new(),
            spans: AtomicU64::new(0),
        };
        tracing::subscriber::with_default(log, || {
            tracing::info!("not at the level");
            tracing::warn!(value = "soon", count = 3, "a warning\nof two lines");
        });
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 1, "{text}");
        assert!(
            text.contains(" WARN ")
                && text.contains(": a warning\\nof two lines value=soon count=3"),
            "{text}"
        );
        let old = std::fs::metadata(path.with_extension("log.1")).unwrap();
        assert_eq!(old.len(), MAX_BYTES + 1);
    }

    #[test]
    fn a_log_that_cannot_be_opened_is_no_log() {
        let dir = tempfile::tempdir().unwrap();
        // A file where the directory should be.
        std::fs::write(dir.path().join("logs"), "").unwrap();
        let log = FileLog {
            path: dir.path().join("logs/kaji.log"),
            level: LevelFilter::WARN,
            file: OnceLock::new(),
            spans: AtomicU64::new(0),
        };
        tracing::subscriber::with_default(log, || tracing::warn!("dropped"));
    }
}
