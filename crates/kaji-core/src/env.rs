//! Settings the environment overrides (timeouts and polling intervals that
//! tests shorten). Reads only; a value that does not parse is warned about
//! and the default is used, never an error.

use std::time::Duration;

/// Milliseconds from the environment variable `name`, else `default`.
pub(crate) fn duration_from_env(name: &str, default: Duration) -> Duration {
    let Some(value) = std::env::var_os(name) else {
        return default;
    };
    match value.to_str().and_then(|v| v.trim().parse::<u64>().ok()) {
        Some(ms) => Duration::from_millis(ms),
        None => {
            tracing::warn!("{name}={value:?} is not a number of milliseconds; using {default:?}");
            default
        }
    }
}
