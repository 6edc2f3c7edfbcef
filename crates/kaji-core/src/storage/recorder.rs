//! Writes what a conversation is made of to its session file, as it
//! happens. The Task and the executor call it at fixed points (see
//! docs/sessions.md); it never decides what to record, and a failing disk
//! never stops a task: the first failure is reported once, the rest are
//! counted.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use super::record::{SessionRecord, UnixMillis};

/// Where records go: a session file, or a buffer in tests.
pub trait RecordSink: Send + Sync {
    /// Appends one record as one line.
    fn append(&self, record: &SessionRecord) -> std::io::Result<()>;
    /// Makes everything appended so far durable.
    fn sync(&self) -> std::io::Result<()>;
}

/// A session's recorder. Cheap to clone; clones share the sink. A recorder
/// without a sink (`--no-session-persistence`) records nothing.
#[derive(Clone, Default)]
pub struct Recorder {
    sink: Option<Arc<dyn RecordSink>>,
    failed: Arc<AtomicBool>,
    /// The first write error, for the session to report.
    first_error: Arc<Mutex<Option<String>>>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("persistent", &self.sink.is_some())
            .finish()
    }
}

impl Recorder {
    /// A recorder writing to `sink`.
    pub fn new(sink: Arc<dyn RecordSink>) -> Self {
        Self {
            sink: Some(sink),
            ..Self::default()
        }
    }

    /// A recorder that writes nothing.
    pub fn disabled() -> Self {
        Self::default()
    }

    /// Whether records go anywhere.
    pub fn is_enabled(&self) -> bool {
        self.sink.is_some()
    }

    /// Appends a record (not yet durable).
    pub fn record(&self, record: SessionRecord) {
        if let Some(sink) = &self.sink
            && let Err(e) = sink.append(&record)
        {
            self.fail(e);
        }
    }

    /// Appends a record and makes it durable with everything before it.
    pub fn record_synced(&self, record: SessionRecord) {
        self.record(record);
        self.sync();
    }

    /// Makes everything recorded so far durable.
    pub fn sync(&self) {
        if let Some(sink) = &self.sink
            && let Err(e) = sink.sync()
        {
            self.fail(e);
        }
    }

    /// The first write error, once: the caller shows it to the user.
    pub fn take_error(&self) -> Option<String> {
        self.first_error
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }

    fn fail(&self, e: std::io::Error) {
        if !self.failed.swap(true, Ordering::SeqCst) {
            *self.first_error.lock().unwrap_or_else(|e| e.into_inner()) = Some(format!(
                "the session file could not be written ({e}); this conversation may not be resumable"
            ));
        }
    }
}

/// Now, in milliseconds since the Unix epoch.
pub fn now_millis() -> UnixMillis {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as UnixMillis)
        .unwrap_or(0)
}

/// A sink that keeps records in memory (tests, benchmarks).
#[derive(Debug, Default)]
pub struct MemorySink {
    records: Mutex<Vec<SessionRecord>>,
}

impl MemorySink {
    /// Everything recorded so far.
    pub fn records(&self) -> Vec<SessionRecord> {
        self.records
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl RecordSink for MemorySink {
    fn append(&self, record: &SessionRecord) -> std::io::Result<()> {
        self.records
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(record.clone());
        Ok(())
    }

    fn sync(&self) -> std::io::Result<()> {
        Ok(())
    }
}
