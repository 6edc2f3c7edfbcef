//! The runtime task registry (placeholder until issue 5 lands).

/// Registry of the runtime tasks of one session.
#[derive(Debug, Default)]
pub struct RuntimeTaskRegistry {}
