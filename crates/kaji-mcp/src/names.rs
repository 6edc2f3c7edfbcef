//! The names MCP tools are offered under: `mcp__<server>__<tool>`, limited
//! to `[A-Za-z0-9_-]` and 64 characters (what both model APIs accept).
//! Cut names end with a stable hash of the full name.

use std::collections::HashSet;
use std::sync::{Mutex, OnceLock};

/// The prefix of every MCP tool name.
pub const MCP_TOOL_PREFIX: &str = "mcp__";

/// The longest tool name the model APIs accept.
pub const MAX_TOOL_NAME_LEN: usize = 64;

/// Replaces every character outside `[A-Za-z0-9_-]` with `_`.
pub fn sanitize(part: &str) -> String {
    part.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The name a server's tool is offered under: `mcp__<server>__<tool>`, each
/// part sanitised. A name longer than [`MAX_TOOL_NAME_LEN`] is cut and ends
/// with a hash of the full name, so distinct long names stay distinct.
pub fn qualified_tool_name(server: &str, tool: &str) -> String {
    let full = format!("{MCP_TOOL_PREFIX}{}__{}", sanitize(server), sanitize(tool));
    if full.len() <= MAX_TOOL_NAME_LEN {
        return full;
    }
    let suffix = format!("_{:08x}", fnv1a(format!("{server}\0{tool}").as_bytes()));
    // Sanitised names are ASCII, so any byte index is a char boundary.
    format!("{}{suffix}", &full[..MAX_TOOL_NAME_LEN - suffix.len()])
}

/// 32-bit FNV-1a: a hash that is the same in every kaji build, so cut names
/// stay stable across sessions.
fn fnv1a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5_u32, |hash, &b| {
        (hash ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

/// Returns a `&'static str` equal to `name`, allocating it once per
/// distinct name for the life of the process.
///
/// [`kaji_tools::Tool::name`] returns `&'static str`; MCP tool names are only
/// known at run time. The set of distinct names is bounded by the servers'
/// tool lists, so the memory kept is bounded too.
pub fn intern(name: &str) -> &'static str {
    static NAMES: OnceLock<Mutex<HashSet<&'static str>>> = OnceLock::new();
    let mut names = NAMES
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    if let Some(existing) = names.get(name) {
        return existing;
    }
    let leaked: &'static str = Box::leak(name.to_string().into_boxed_str());
    names.insert(leaked);
    leaked
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitises_and_prefixes() {
        assert_eq!(
            qualified_tool_name("every thing", "get-sum"),
            "mcp__every_thing__get-sum"
        );
        assert_eq!(
            qualified_tool_name("fs", "read.file/ü"),
            "mcp__fs__read_file__"
        );
    }

    #[test]
    fn long_names_are_cut_but_stay_distinct() {
        let a = qualified_tool_name("server", &"a".repeat(100));
        let b = qualified_tool_name("server", &format!("{}b", "a".repeat(99)));
        assert_eq!(a.len(), MAX_TOOL_NAME_LEN);
        assert_eq!(b.len(), MAX_TOOL_NAME_LEN);
        assert_ne!(a, b);
        assert!(a.starts_with("mcp__server__aaa"));
    }

    #[test]
    fn interning_returns_the_same_pointer() {
        let a = intern("mcp__x__y");
        let b = intern(&String::from("mcp__x__y"));
        assert!(std::ptr::eq(a, b));
    }
}
