//! The program's hook callbacks: `initialize`'s `hooks`
//! (`{EventName: [{matcher, hookCallbackIds, timeout, onFailure}]}`) as
//! the core's [`ProgramHooks`], and each call as a `hook_callback`
//! request. Translation only: the core's hook runner decides what an
//! answer means, and bounds each call by its timeout.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use kaji_core::hooks::{
    DEFAULT_HOOK_TIMEOUT, HookCallbackRequest, HookCallbacks, HookEvent, ProgramHook, ProgramHooks,
    ToolMatcher,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::control::Control;

/// Longer than any callback's timeout: the hook runner gives up first.
const NO_LIMIT: Duration = Duration::from_secs(24 * 60 * 60);

/// Calls the program's callbacks over the control protocol.
struct SdkCallbacks {
    control: Arc<Control>,
}

#[async_trait]
impl HookCallbacks for SdkCallbacks {
    async fn call(&self, request: HookCallbackRequest) -> Result<Value, String> {
        let mut body = json!({
            "subtype": "hook_callback",
            "callback_id": request.callback_id,
            "input": request.input,
        });
        if let Some(id) = request.tool_use_id {
            body["tool_use_id"] = json!(id);
        }
        // The runner drops this future at the callback's timeout or an
        // interrupt; the request is cancelled then.
        self.control
            .request(body, NO_LIMIT, &CancellationToken::new())
            .await
            .map_err(|e| e.to_string())
    }
}

/// The hooks of `initialize` (`None` when it registered none), and a
/// warning for each entry that cannot be used.
pub fn program_hooks(
    request: &Value,
    control: &Arc<Control>,
) -> (Option<ProgramHooks>, Vec<String>) {
    let mut warnings = Vec::new();
    let Some(map) = request.get("hooks").and_then(Value::as_object) else {
        return (None, warnings);
    };
    let mut hooks = ProgramHooks::new(Arc::new(SdkCallbacks {
        control: Arc::clone(control),
    }));
    for (name, matchers) in map {
        let event = match name.parse::<HookEvent>() {
            Ok(e) => e,
            Err(e) => {
                warnings.push(format!("initialize: hooks.{name} is not used: {e}"));
                continue;
            }
        };
        for (i, m) in matchers.as_array().into_iter().flatten().enumerate() {
            match matcher(m) {
                Ok(hook) => hooks.push(event, hook),
                Err(e) => warnings.push(format!("initialize: hooks.{name}[{i}] is not used: {e}")),
            }
        }
    }
    ((!hooks.is_empty()).then_some(hooks), warnings)
}

fn matcher(m: &Value) -> Result<ProgramHook, String> {
    let matcher = match m.get("matcher") {
        None | Some(Value::Null) => None,
        Some(Value::String(p)) => {
            Some(ToolMatcher::new(p).map_err(|e| format!("`matcher` {p:?}: {e}"))?)
        }
        Some(other) => return Err(format!("`matcher` is not a string: {other}")),
    };
    let callback_ids = m
        .get("hookCallbackIds")
        .and_then(Value::as_array)
        .ok_or("it has no `hookCallbackIds` list")?
        .iter()
        .map(|id| {
            id.as_str()
                .map(str::to_string)
                .ok_or_else(|| format!("`hookCallbackIds` holds a non-string: {id}"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    // Seconds, as a settings file's `timeout`.
    let timeout = match m.get("timeout") {
        None | Some(Value::Null) => DEFAULT_HOOK_TIMEOUT,
        Some(t) => match t.as_f64() {
            Some(secs) if secs > 0.0 && secs.is_finite() => Duration::from_secs_f64(secs),
            _ => {
                return Err(format!(
                    "`timeout` is not a positive number of seconds: {t}"
                ));
            }
        },
    };
    let block_on_failure = match m.get("onFailure") {
        None | Some(Value::Null) => false,
        Some(v) => v.as_str() != Some("continue"),
    };
    Ok(ProgramHook {
        matcher,
        callback_ids,
        timeout,
        block_on_failure,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sdk::args::OutputFormat;
    use crate::sdk::output::Output;

    #[test]
    fn initialize_hooks_become_program_hooks() {
        let out = Arc::new(Output::to(
            OutputFormat::StreamJson,
            Box::new(std::io::sink()),
        ));
        let control = Arc::new(Control::new(out));
        let request = json!({"hooks": {
            "PreToolUse": [
                {"matcher": "Bash", "hookCallbackIds": ["hook_0", "hook_1"], "timeout": 5},
                {"matcher": null, "hookCallbackIds": ["hook_2"], "onFailure": "block"},
                {"matcher": "(", "hookCallbackIds": ["hook_3"]},
            ],
            "NoSuchEvent": [{"hookCallbackIds": ["hook_4"]}],
        }});
        let (hooks, warnings) = program_hooks(&request, &control);
        let hooks = hooks.expect("hooks");
        let pre = hooks.hooks(HookEvent::PreToolUse);
        assert_eq!(pre.len(), 2);
        assert_eq!(pre[0].callback_ids, ["hook_0", "hook_1"]);
        assert_eq!(pre[0].timeout, Duration::from_secs(5));
        assert!(pre[0].matcher.as_ref().is_some_and(|m| m.matches("Bash")));
        assert!(!pre[0].block_on_failure);
        assert!(pre[1].matcher.is_none() && pre[1].block_on_failure);
        assert_eq!(pre[1].timeout, DEFAULT_HOOK_TIMEOUT);
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(
            warnings.iter().any(|w| w.contains("NoSuchEvent")),
            "{warnings:?}"
        );
        assert!(
            warnings.iter().any(|w| w.contains("PreToolUse[2]")),
            "{warnings:?}"
        );
        assert!(program_hooks(&json!({"hooks": null}), &control).0.is_none());
    }
}
