//! Hook callbacks a front end's program serves in its own process (the
//! Agent SDK's `hooks` option, registered in `initialize` and called with
//! `hook_callback` requests). They run after the settings files' hooks of
//! the same event, in the order the program registered them, and answer in
//! the same JSON as a command hook's stdout.
//!
//! This module never talks to the program itself (the front end's
//! [`HookCallbacks`] does) and never waits past a callback's timeout.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::{HookEvent, ToolMatcher};

/// One `hook_callback` request: which callback, its input (the hook input
/// a command hook reads on stdin) and the tool call's id for tool events.
#[derive(Debug, Clone, PartialEq)]
pub struct HookCallbackRequest {
    /// The id the program gave the callback in `initialize`.
    pub callback_id: String,
    /// The hook input (`hook_event_name`, `session_id`, `tool_name`, …).
    pub input: Value,
    /// The tool call's id (tool events), else `None`.
    pub tool_use_id: Option<String>,
}

/// Calls the program's hook callbacks (the front end's side).
#[async_trait]
pub trait HookCallbacks: Send + Sync {
    /// Sends `request` and returns the callback's answer (a JSON object
    /// as a command hook prints), or why there is none. Dropping the
    /// future gives the request up.
    async fn call(&self, request: HookCallbackRequest) -> Result<Value, String>;
}

/// One matcher of the program's hooks: its callbacks, in order.
#[derive(Debug, Clone)]
pub struct ProgramHook {
    /// Which tools (or sources, triggers, … as for file hooks) it applies
    /// to; `None`: all.
    pub matcher: Option<ToolMatcher>,
    /// The callbacks' ids, called one after the other.
    pub callback_ids: Vec<String>,
    /// How long each callback may take before it counts as failed.
    pub timeout: Duration,
    /// A failing callback (an error answer, no answer in time) blocks
    /// (`onFailure` other than `continue`); otherwise it is a warning.
    pub block_on_failure: bool,
}

/// The program's hooks by event, and how to call them.
#[derive(Clone)]
pub struct ProgramHooks {
    hooks: BTreeMap<HookEvent, Vec<ProgramHook>>,
    caller: Arc<dyn HookCallbacks>,
}

impl std::fmt::Debug for ProgramHooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProgramHooks")
            .field("hooks", &self.hooks)
            .finish_non_exhaustive()
    }
}

/// How one callback's call ended.
pub(super) enum CallbackRun {
    /// The program answered.
    Answered(Value),
    /// It answered with an error, or not at all: the reason.
    Failed(String),
    /// The task was cancelled meanwhile.
    Cancelled,
}

impl ProgramHooks {
    /// No hooks yet; `caller` reaches the program.
    pub fn new(caller: Arc<dyn HookCallbacks>) -> Self {
        Self {
            hooks: BTreeMap::new(),
            caller,
        }
    }

    /// Appends `hook` to the program's hooks of `event`.
    pub fn push(&mut self, event: HookEvent, hook: ProgramHook) {
        self.hooks.entry(event).or_default().push(hook);
    }

    /// The program's hooks of `event`, in order.
    pub fn hooks(&self, event: HookEvent) -> &[ProgramHook] {
        self.hooks.get(&event).map(Vec::as_slice).unwrap_or(&[])
    }

    /// Whether the program registered no hook at all.
    pub fn is_empty(&self) -> bool {
        self.hooks.values().all(Vec::is_empty)
    }

    /// Calls one callback, bounded by `timeout` and `cancel`.
    pub(super) async fn call(
        &self,
        request: HookCallbackRequest,
        timeout: Duration,
        cancel: &CancellationToken,
    ) -> CallbackRun {
        tokio::select! {
            answer = self.caller.call(request) => match answer {
                Ok(v) => CallbackRun::Answered(v),
                Err(e) => CallbackRun::Failed(e),
            },
            () = tokio::time::sleep(timeout) => CallbackRun::Failed(format!(
                "no answer within {} s", timeout.as_secs_f64()
            )),
            () = cancel.cancelled() => CallbackRun::Cancelled,
        }
    }
}
