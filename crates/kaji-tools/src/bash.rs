//! Placeholder: filled in by its issue.

use crate::ToolRegistry;

/// Adds this module's tools to `registry`.
pub(crate) fn register(_registry: &mut ToolRegistry) {}
