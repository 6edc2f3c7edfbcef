//! Path patterns of `Edit(…)`, `Write(…)` and `Read(…)` rules, anchored
//! as Claude Code anchors them, and the protected paths.
//!
//! A pattern follows gitignore rules and is anchored by how it starts:
//! `//abs/…` is an absolute path, `~/…` is under the home directory,
//! `/…` is relative to the project root, and anything else (`src/**`,
//! `./x`) relative to the working directory — where a pattern with no `/`
//! (`*.env`) matches at any depth below it. A trailing `/` means
//! everything under that directory. `*` never crosses a `/`; `**` does.
//!
//! Everything here is lexical: paths are normalised (`.` and `..`
//! resolved) but never looked up on disk, so the caller must pass real
//! paths when symlinks matter. Nothing here reads or writes a file.

use std::path::Path;
use std::sync::OnceLock;

use globset::{GlobBuilder, GlobMatcher, GlobSet, GlobSetBuilder};

use crate::context::Context;
pub use crate::context::normalise;

/// Paths, relative to the project root (at any depth), that always ask
/// before an edit and are never covered by an allow rule or an "always":
/// what git or kaji would run code from, or that widens permissions.
/// `.kaji/worktrees/` (where teammates work) is deliberately not here.
pub const PROTECTED_PATHS: &[&str] = &[
    ".git/config",
    ".git/hooks/**",
    ".kaji/*.toml",
    ".kaji/agents/**",
    ".kaji/commands/**",
    ".kajiignore",
    ".claude/**",
];

/// Whether the absolute, normalised `path` is one of the protected paths
/// of the project (the built-in ones and `ctx.protected_paths`).
///
/// Extra patterns starting with `//` are absolute (`//repo/.git/worktrees/x/config`
/// for a worktree's `gitdir:` target) and apply anywhere; the others are
/// relative to the project root, at any depth.
pub fn is_protected(path: &Path, ctx: &Context) -> bool {
    let inside = path.strip_prefix(&ctx.project_root).ok();
    if inside.is_some_and(|rel| builtin_protected().is_match(rel)) {
        return true;
    }
    let inside = inside.is_some();
    ctx.protected_paths
        .iter()
        .map(String::as_str)
        .any(|pattern| {
            let anchored = match pattern.strip_prefix("//") {
                Some(abs) => format!("/{abs}"),
                None if inside => {
                    let rel = pattern.trim_start_matches('/');
                    format!("{}/**/{rel}", glob_dir(&ctx.project_root))
                }
                None => return false,
            };
            compile(&anchored).is_some_and(|m| m.is_match(path))
        })
}

/// [`PROTECTED_PATHS`] at any depth, compiled once, matched against a path
/// relative to the project root.
fn builtin_protected() -> &'static GlobSet {
    static SET: OnceLock<GlobSet> = OnceLock::new();
    SET.get_or_init(|| {
        let mut builder = GlobSetBuilder::new();
        for pattern in PROTECTED_PATHS {
            let glob = GlobBuilder::new(&format!("**/{pattern}"))
                .literal_separator(true)
                .build();
            // The built-in patterns are constants known to be valid.
            if let Ok(glob) = glob {
                builder.add(glob);
            }
        }
        builder.build().unwrap_or_else(|_| GlobSet::empty())
    })
}

/// Whether the rule pattern `pattern` covers the absolute, normalised
/// `path`. A pattern that cannot be anchored (`~/…` with no home) or is
/// not a valid glob matches nothing.
pub fn pattern_matches(pattern: &str, path: &Path, ctx: &Context) -> bool {
    anchor(pattern, ctx)
        .and_then(|glob| compile(&glob))
        .is_some_and(|m| m.is_match(path))
}

/// The absolute glob a rule pattern stands for.
pub fn anchor(pattern: &str, ctx: &Context) -> Option<String> {
    let mut pattern = pattern.trim().to_string();
    if pattern.ends_with('/') {
        pattern.push_str("**");
    }
    if let Some(abs) = pattern.strip_prefix("//") {
        return Some(format!("/{abs}"));
    }
    if pattern == "~" || pattern.starts_with("~/") {
        let home = ctx.home.as_ref()?;
        let rest = pattern[1..].trim_start_matches('/');
        return Some(join_glob(&glob_dir(home), rest));
    }
    if let Some(rel) = pattern.strip_prefix('/') {
        return Some(join_glob(&glob_dir(&ctx.project_root), rel));
    }
    let rel = pattern.strip_prefix("./").unwrap_or(&pattern);
    let base = glob_dir(&ctx.cwd);
    if rel.contains('/') {
        Some(join_glob(&base, rel))
    } else {
        Some(format!("{base}/**/{rel}"))
    }
}

fn join_glob(base: &str, rest: &str) -> String {
    if rest.is_empty() {
        base.to_string()
    } else {
        format!("{}/{rest}", base.trim_end_matches('/'))
    }
}

/// A directory as the literal start of a glob.
fn glob_dir(dir: &Path) -> String {
    let text = globset::escape(&dir.to_string_lossy());
    text.trim_end_matches('/').to_string()
}

fn compile(glob: &str) -> Option<GlobMatcher> {
    GlobBuilder::new(glob)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
        .ok()
        .map(|g| g.compile_matcher())
}

/// `text` with glob metacharacters escaped, for a pattern naming exactly
/// one path.
pub fn escape(text: &str) -> String {
    globset::escape(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn ctx() -> Context {
        let mut ctx = Context::new("/proj", true);
        ctx.cwd = PathBuf::from("/proj/sub");
        ctx.home = Some(PathBuf::from("/home/u"));
        ctx
    }

    fn m(pattern: &str, path: &str) -> bool {
        pattern_matches(pattern, Path::new(path), &ctx())
    }

    #[test]
    fn patterns_are_anchored_as_claude_code_does() {
        assert!(m("/src/**", "/proj/src/a/b.rs"));
        assert!(!m("/src/**", "/proj/sub/src/a.rs"));
        assert!(m("src/**", "/proj/sub/src/a.rs"));
        assert!(m("./src/*.rs", "/proj/sub/src/a.rs"));
        assert!(!m("./src/*.rs", "/proj/sub/src/x/a.rs"));
        assert!(m("*.env", "/proj/sub/deep/er/.env"));
        assert!(m("*.env", "/proj/sub/x.env"));
        assert!(!m("*.env", "/proj/x.env"));
        assert!(m("~/.ssh/**", "/home/u/.ssh/id_rsa"));
        assert!(m("//etc/**", "/etc/passwd"));
        assert!(m("docs/", "/proj/sub/docs/a/b.md"));
    }

    #[test]
    fn protected_paths_are_protected_at_any_depth_but_not_worktrees() {
        let ctx = ctx();
        let p = |s: &str| is_protected(Path::new(s), &ctx);
        assert!(p("/proj/.git/config"));
        assert!(p("/proj/.git/hooks/pre-commit"));
        assert!(p("/proj/.kaji/config.toml"));
        assert!(p("/proj/.kaji/config.local.toml"));
        assert!(p("/proj/.kaji/agents/x.md"));
        assert!(p("/proj/.kaji/commands/x.md"));
        assert!(p("/proj/.kajiignore"));
        assert!(p("/proj/.claude/settings.json"));
        assert!(p("/proj/vendor/lib/.git/config"));
        assert!(!p("/proj/.kaji/worktrees/alice/src/main.rs"));
        assert!(!p("/proj/src/main.rs"));
        assert!(!p("/proj/.git/HEAD"));
        assert!(!p("/elsewhere/.git/config"));

        let mut extra = ctx.clone();
        extra.protected_paths = vec!["secrets/**".into(), "//main/.git/worktrees/w/config".into()];
        assert!(is_protected(Path::new("/proj/a/secrets/k"), &extra));
        assert!(is_protected(
            Path::new("/main/.git/worktrees/w/config"),
            &extra
        ));
        assert!(!is_protected(
            Path::new("/main/.git/worktrees/w/HEAD"),
            &extra
        ));
    }

    #[test]
    fn every_builtin_protected_pattern_compiles() {
        assert_eq!(builtin_protected().len(), PROTECTED_PATHS.len());
    }

    #[test]
    fn normalise_resolves_dots() {
        assert_eq!(normalise(Path::new("/a/b/../c/./d")), Path::new("/a/c/d"));
        assert_eq!(normalise(Path::new("/../x")), Path::new("/x"));
    }
}
