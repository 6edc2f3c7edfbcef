//! The stream reader: the one place a round's reply stream is read. It
//! feeds the assembler under the lock, charges the run's budget with the
//! reported usage as the stream ends, and never presents or decides.

use std::sync::Arc;

use futures::StreamExt;
use kaji_llm::ModelRequest;
use kaji_protocol::{SayKind, SayPayload};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::Task;

use tokio::task::JoinHandle;

impl Task {
    /// The stream reader: a tokio task that feeds the round's assembler
    /// under the lock and bumps the version the presenter waits on; it
    /// records how the stream ended in [`TaskState`] and stops when
    /// `stream_cancel` fires. Its answer: whether it charged the run's
    /// budget with the reply's usage, which it does as the stream ends —
    /// before the end is recorded, so before any tool (a sub-agent's
    /// requests) waiting for it runs — when the server reported any.
    pub(super) fn spawn_stream_reader(
        &self,
        request: ModelRequest,
        version_tx: watch::Sender<u64>,
        stream_cancel: &CancellationToken,
    ) -> JoinHandle<bool> {
        let state = Arc::clone(&self.state);
        let emitter = self.emitter.clone();
        let provider = Arc::clone(&self.config.provider);
        let budget = Arc::clone(&self.config.budget);
        let pricing = self.config.pricing.clone();
        let stream_cancel = stream_cancel.clone();
        tokio::spawn(async move {
            let mut stream = provider.stream(request);
            let end = loop {
                let item = tokio::select! {
                    item = stream.next() => item,
                    _ = stream_cancel.cancelled() => break Ok(()),
                };
                match item {
                    None => break Ok(()),
                    Some(Err(e)) => {
                        break Err(e);
                    }
                    Some(Ok(kaji_protocol::StreamEvent::Retrying {
                        attempt,
                        max_attempts,
                        delay_ms,
                        reason,
                    })) => {
                        emitter.say(
                            SayKind::ApiReqRetried,
                            format!("Retrying (attempt {attempt}/{max_attempts}) in {delay_ms} ms: {reason}"),
                            Some(SayPayload::Retry { attempt, max_attempts, delay_ms }),
                        );
                    }
                    Some(Ok(event)) => {
                        let mut st = state.lock().unwrap_or_else(|e| e.into_inner());
                        if !matches!(event, kaji_protocol::StreamEvent::Usage(_)) {
                            st.stream_had_content = true;
                        }
                        if let Some(a) = st.assembler.as_mut() {
                            a.push(&event);
                        }
                        drop(st);
                        version_tx.send_modify(|v| *v += 1);
                    }
                }
            };
            drop(stream);
            let mut st = state.lock().unwrap_or_else(|e| e.into_inner());
            let mut usage = kaji_protocol::Usage::default();
            if let Some(a) = st.assembler.as_mut() {
                a.finish();
                usage = a.usage();
            }
            let charged = usage != kaji_protocol::Usage::default();
            if charged {
                budget.charge(pricing.as_ref().map(|p| p(&usage)), &usage);
            }
            st.stream_end = Some(end);
            drop(st);
            version_tx.send_modify(|v| *v += 1);
            charged
        })
    }
}
