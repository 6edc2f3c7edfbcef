//! Environment overrides of the crate's production timeouts, so that tests
//! (and users) never have to wait for the real defaults.
//!
//! This module only reads the environment; it must never cache a value
//! (tests of one process set different values).

use std::time::Duration;

/// The grace period between `SIGTERM` and `SIGKILL` used by kaji unless
/// configured otherwise: 2 seconds.
pub const DEFAULT_KILL_GRACE: Duration = Duration::from_secs(2);

/// The environment variable that overrides
/// [`DEFAULT_KILL_GRACE`], the time
/// between `SIGTERM` and `SIGKILL` (milliseconds).
pub const KILL_GRACE_ENV: &str = "KAJI_KILL_GRACE_MS";

/// The kill grace from `KAJI_KILL_GRACE_MS`, else the default (2 s). A
/// value that is not a whole number of milliseconds is ignored.
pub fn kill_grace_from_env() -> Duration {
    std::env::var(KILL_GRACE_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map_or(DEFAULT_KILL_GRACE, Duration::from_millis)
}
