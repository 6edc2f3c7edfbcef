//! The control protocol's requests from kaji to the program (the Agent
//! SDK): `can_use_tool`, `mcp_message`. Each request gets an id, goes out
//! on standard output and waits for the `control_response` the input
//! reader hands back. It must never wait unbounded: every wait ends at a
//! deadline or a cancellation, and then the request is cancelled with a
//! `control_cancel_request`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::output::Output;

/// The longest a permission request waits for the program's answer
/// (`KAJI_ASK_TIMEOUT_MS`; default ten minutes). Then the call is denied.
pub fn ask_timeout() -> Duration {
    std::env::var("KAJI_ASK_TIMEOUT_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .map(Duration::from_millis)
        .unwrap_or(Duration::from_secs(600))
}

/// Why a request got no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ControlError {
    /// The program answered with an error.
    #[error("the program answered with an error: {0}")]
    Answered(String),
    /// No answer within the deadline.
    #[error("the program did not answer within {0} ms")]
    Timeout(u128),
    /// The request was given up (the prompt was interrupted).
    #[error("the request was cancelled")]
    Cancelled,
    /// Standard input closed before the answer came.
    #[error("the program closed its end before answering")]
    Closed,
}

/// A request still waiting: dropped, it is cancelled.
struct Unanswered<'a> {
    control: &'a Control,
    id: Option<String>,
}

impl Drop for Unanswered<'_> {
    fn drop(&mut self) {
        if let Some(id) = self.id.take()
            && self.control.lock().remove(&id).is_some()
        {
            self.control.out.control_value(&json!({
                "type": "control_cancel_request",
                "request_id": id,
            }));
        }
    }
}

type Pending = HashMap<String, oneshot::Sender<Result<Value, String>>>;

/// kaji's side of the requests it sends.
pub struct Control {
    out: Arc<Output>,
    pending: Mutex<Pending>,
    counter: AtomicU64,
    closed: std::sync::atomic::AtomicBool,
}

impl Control {
    /// Requests written to `out`.
    pub fn new(out: Arc<Output>) -> Self {
        Self {
            out,
            pending: Mutex::new(HashMap::new()),
            counter: AtomicU64::new(0),
            closed: std::sync::atomic::AtomicBool::new(false),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sends `request` and waits for its answer's `response`, at most
    /// `limit`, and only while `cancel` is not cancelled.
    pub async fn request(
        &self,
        request: Value,
        limit: Duration,
        cancel: &CancellationToken,
    ) -> Result<Value, ControlError> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(ControlError::Closed);
        }
        let n = self.counter.fetch_add(1, Ordering::Relaxed) + 1;
        let id = format!("kaji_req_{n}");
        let (tx, rx) = oneshot::channel();
        self.lock().insert(id.clone(), tx);
        self.out.control_value(&json!({
            "type": "control_request",
            "request_id": id,
            "request": request,
        }));
        // Cancels the request unless its answer came, also when this
        // future is dropped (an interrupt).
        let mut guard = Unanswered {
            control: self,
            id: Some(id),
        };
        tokio::select! {
            answer = rx => {
                guard.id = None;
                match answer {
                    Ok(Ok(v)) => Ok(v),
                    Ok(Err(e)) => Err(ControlError::Answered(e)),
                    Err(_) => Err(ControlError::Closed),
                }
            }
            _ = tokio::time::sleep(limit) => Err(ControlError::Timeout(limit.as_millis())),
            _ = cancel.cancelled() => Err(ControlError::Cancelled),
        }
    }

    /// A `control_response` from the program: hands it to its request.
    /// False when no request waits for it.
    pub fn resolve(&self, response: &Value) -> bool {
        let Some(id) = response.get("request_id").and_then(Value::as_str) else {
            return false;
        };
        let Some(tx) = self.lock().remove(id) else {
            return false;
        };
        let answer = match response.get("subtype").and_then(Value::as_str) {
            Some("error") => Err(response
                .get("error")
                .and_then(Value::as_str)
                .unwrap_or("(no message)")
                .to_string()),
            _ => Ok(response.get("response").cloned().unwrap_or(json!({}))),
        };
        let _ = tx.send(answer);
        true
    }

    /// Standard input closed: every waiting request fails now.
    pub fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.lock().clear();
    }
}
