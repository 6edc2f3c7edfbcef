//! The limits and mappings every sub-agent of a session obeys: plain
//! settings data, so the settings and the session options can name them
//! without reaching the sub-agent runner. Never does I/O.

use std::collections::BTreeMap;

/// Default depth limit: the main agent's sub-agents may have sub-agents,
/// and those none.
pub const DEFAULT_MAX_DEPTH: u32 = 2;

/// Limits and mappings that apply to every sub-agent of a session.
#[derive(Debug, Clone)]
pub struct SubagentLimits {
    /// How deep sub-agents nest (the main agent is depth 0).
    pub max_depth: u32,
    /// Total tokens a sub-agent may use, unless its type says otherwise.
    pub token_budget: Option<u64>,
    /// `[model_aliases]`: `sonnet`, `opus`, `haiku` (or any alias) to a
    /// model name of the session's provider.
    pub model_aliases: BTreeMap<String, String>,
}

impl Default for SubagentLimits {
    fn default() -> Self {
        Self {
            max_depth: DEFAULT_MAX_DEPTH,
            token_budget: None,
            model_aliases: BTreeMap::new(),
        }
    }
}
