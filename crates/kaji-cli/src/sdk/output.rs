//! Where a headless run's messages go: standard output (or a test's
//! writer) in the chosen format, written whole or kept for the final
//! `json` array. Below the front end and the control requests, which both
//! write through it; it must never decide what a message says.

use std::io::Write;
use std::sync::Mutex;

use serde_json::Value;

use super::args::OutputFormat;
use crate::sdk_messages::SdkMessage;

/// Where messages go, in the chosen format.
pub struct Output {
    format: OutputFormat,
    out: Mutex<Box<dyn Write + Send>>,
    /// With `--output-format json`: every message so far.
    kept: Mutex<Vec<Value>>,
}

impl Output {
    /// Standard output in `format`.
    pub fn stdout(format: OutputFormat) -> Self {
        Self::to(format, Box::new(std::io::stdout()))
    }

    /// `out` in `format`.
    pub fn to(format: OutputFormat, out: Box<dyn Write + Send>) -> Self {
        Self {
            format,
            out: Mutex::new(out),
            kept: Mutex::new(Vec::new()),
        }
    }

    /// Writes (stream-json) or keeps (json) one message.
    pub fn send(&self, message: &SdkMessage) {
        let value = message.to_json();
        match self.format {
            OutputFormat::StreamJson => self.write_line(&value.to_string()),
            OutputFormat::Json => self.lock_kept().push(value),
            OutputFormat::Text => {}
        }
    }

    /// Writes a control response at once, whatever the format.
    pub fn control(&self, message: &SdkMessage) {
        self.write_line(&message.to_json().to_string());
    }

    /// Writes a control request (or its cancellation) at once.
    pub fn control_value(&self, message: &Value) {
        self.write_line(&message.to_string());
    }

    /// The end of the run: the json output, or the text of the result.
    pub fn finish(&self, result: &SdkMessage, verbose: bool) {
        match self.format {
            OutputFormat::StreamJson => {}
            OutputFormat::Json if verbose => {
                let all = Value::Array(std::mem::take(&mut *self.lock_kept()));
                self.write_line(&all.to_string());
            }
            OutputFormat::Json => self.write_line(&result.to_json().to_string()),
            OutputFormat::Text => {
                if let SdkMessage::Result(r) = result {
                    let text = r.result.clone().unwrap_or_else(|| r.errors.join("\n"));
                    self.write_line(&text);
                }
            }
        }
    }

    fn lock_kept(&self) -> std::sync::MutexGuard<'_, Vec<Value>> {
        self.kept.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn write_line(&self, line: &str) {
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    }
}
