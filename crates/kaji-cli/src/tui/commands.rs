//! Slash commands of the TUI: the built-in ones, the completion menu's
//! matches and `/help`. Custom commands (reading, expansion) are
//! `kaji_core::commands`, shared with `kaji exec`.
//!
//! Pure functions over text: it never runs a command line and never talks
//! to the model or the session.

#[cfg(test)]
pub use kaji_core::commands::parse;
pub use kaji_core::commands::{CustomCommand, command_dirs, expand, find};

/// The built-in commands and what they do, in the order `/help` lists them.
pub const BUILTINS: &[(&str, &str)] = &[
    ("/help", "list the commands"),
    ("/model", "NAME: use this model from the next prompt on"),
    (
        "/mode",
        "NAME: permission mode (default, accept-edits, plan, yolo)",
    ),
    (
        "/reasoning",
        "LEVEL: how hard the model thinks (off, low, medium, high)",
    ),
    (
        "/status",
        "model, permission mode, sandbox (what runs without asking), directory, usage",
    ),
    ("/cost", "tokens and cost of this session so far"),
    (
        "/compact",
        "[INSTRUCTIONS]: compact the conversation now (the model summarises it)",
    ),
    ("/todo", "the todo checklist"),
    ("/tasks", "the task list and the background tasks"),
    ("/sessions", "this directory's saved sessions"),
    ("/resume", "[N|ID]: continue a saved session"),
    ("/fork", "continue in a copy of this session"),
    (
        "/agents",
        "[show|stop ID]: the agents and teammates (status, activity, tokens); read one's transcript or stop it",
    ),
    (
        "/checkpoints",
        "[restore N|ID]: list the checkpoints of the files, or restore one",
    ),
    (
        "/init",
        "the model looks at the repository and writes an AGENTS.md",
    ),
    (
        "/review",
        "[BASE]: the model reviews the changes (or this branch against BASE), read-only",
    ),
    ("/clear", "forget the conversation"),
    ("/exit", "quit (also /quit)"),
];

/// The built-ins a project's or user's own command of the same name
/// replaces in the UI (Claude Code setups often have a `review.md`): they
/// only send the model a prompt. The built-in stays reachable as
/// `/builtin:NAME` ([`BUILTIN_PREFIX`]).
pub const SHADOWABLE: &[&str] = &["/review", "/init"];

/// How a shadowed built-in is still reached: `/builtin:review`.
pub const BUILTIN_PREFIX: &str = "/builtin:";

/// Reads the custom commands under `dirs`; built-in names are not
/// shadowed, but for the [`SHADOWABLE`] ones.
pub fn load(dirs: &[std::path::PathBuf]) -> (Vec<CustomCommand>, Vec<String>) {
    let reserved: Vec<&str> = BUILTINS
        .iter()
        .filter(|(b, _)| !SHADOWABLE.contains(b))
        .map(|(b, _)| &b[1..])
        .collect();
    kaji_core::commands::load(dirs, &reserved)
}

/// The top-level custom command that shadows the built-in `name` (with
/// its slash), if any.
pub fn shadowing<'a>(name: &str, custom: &'a [CustomCommand]) -> Option<&'a CustomCommand> {
    if !SHADOWABLE.contains(&name) {
        return None;
    }
    custom
        .iter()
        .find(|c| c.namespace.is_none() && c.name == name[1..])
}

/// What a slash word stands for: the built-in it names (a shadowed one
/// only as `/builtin:NAME`), or `None` for a custom command.
pub fn builtin_of<'a>(word: &'a str, custom: &[CustomCommand]) -> Option<&'a str> {
    if let Some(name) = word.strip_prefix(BUILTIN_PREFIX) {
        let builtin = BUILTINS
            .iter()
            .find(|(b, _)| SHADOWABLE.contains(b) && b[1..] == *name)?;
        return Some(builtin.0);
    }
    shadowing(word, custom).is_none().then_some(word)
}

/// A command file's path as `/help` shows it: from its `.claude` or
/// `.kaji` folder on (`.claude/commands/review.md`).
fn short_path(path: &std::path::Path) -> String {
    let parts: Vec<_> = path.components().collect();
    let from = parts
        .iter()
        .rposition(|c| {
            let c = c.as_os_str().to_string_lossy();
            c == ".claude" || c == ".kaji" || c == "kaji-home"
        })
        .unwrap_or(0);
    parts[from..]
        .iter()
        .collect::<std::path::PathBuf>()
        .display()
        .to_string()
}

/// Whether `text` is a slash command rather than a prompt that starts
/// with a path (`/etc/hosts is odd`): a `/` and a word of letters,
/// digits, `-`, `_` and `:`.
pub fn is_command(text: &str) -> bool {
    let word = text.split_whitespace().next().unwrap_or("");
    let Some(name) = word.strip_prefix('/') else {
        return false;
    };
    name.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | ':'))
}

/// The commands whose name starts with `prefix` (which starts with `/`),
/// built-ins first: `(name, description)`.
pub fn matches(prefix: &str, custom: &[CustomCommand]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = BUILTINS
        .iter()
        .map(|(n, d)| match shadowing(n, custom) {
            Some(_) => (
                format!("{BUILTIN_PREFIX}{}", &n[1..]),
                format!("{d} (built-in)"),
            ),
            None => (n.to_string(), d.to_string()),
        })
        .filter(|(name, _)| name.starts_with(prefix))
        .collect();
    for c in custom {
        let name = format!("/{}", c.name);
        let qualified = format!("/{}", c.qualified_name());
        let name = if name.starts_with(prefix) || c.namespace.is_none() {
            name
        } else {
            qualified
        };
        if name.starts_with(prefix) {
            let hint = c
                .argument_hint
                .as_deref()
                .map(|h| format!("{h}: "))
                .unwrap_or_default();
            out.push((name, format!("{hint}{} (custom)", c.description)));
        }
    }
    out
}

/// `/help`'s text.
pub fn help(custom: &[CustomCommand]) -> String {
    let mut out = String::from("  Commands (handled here, never sent to the model):");
    for (name, what) in BUILTINS {
        match shadowing(name, custom) {
            Some(c) => out.push_str(&format!(
                "\n    {name:<12} (built-in, shadowed by {}: {BUILTIN_PREFIX}{} runs it) {what}",
                short_path(&c.path),
                &name[1..]
            )),
            None => out.push_str(&format!("\n    {name:<12} {what}")),
        }
    }
    if custom.is_empty() {
        out.push_str("\n  No custom commands (.kaji/commands/*.md, .claude/commands/*.md).");
    } else {
        out.push_str("\n  Custom commands:");
        for c in custom {
            let name = format!("/{}", c.name);
            let hint = c.argument_hint.as_deref().unwrap_or("");
            let also = match &c.namespace {
                Some(_) => format!(" (also /{})", c.qualified_name()),
                None => String::new(),
            };
            out.push_str(&format!("\n    {name:<12} {hint} {}{also}", c.description));
        }
    }
    out.push_str(
        "\n  Keys: Shift-Enter/Alt-Enter/Ctrl-J newline · Tab completes · Ctrl-O opens tool results and folded commands · Esc aborts the task · Esc Esc rewinds to an earlier prompt · Ctrl-R searches past prompts · Ctrl-D quits",
    );
    out.push_str(
        "\n  In a prompt: @path attaches a file · !command runs a shell command yourself · /command runs one of the commands above",
    );
    out
}

/// The first screen's hint: what can be typed, and the rule files loaded.
pub fn first_screen_hint(rule_files: &[String]) -> String {
    let mut out = String::from(
        "  / commands (/help) · @ attaches a file · ! runs a command · Esc Esc rewinds · Ctrl-O opens folds",
    );
    if rule_files.is_empty() {
        out.push_str("\n  No rule files loaded (AGENTS.md, CLAUDE.md; /init writes one).");
    } else {
        out.push_str(&format!("\n  Rules loaded: {}", rule_files.join(", ")));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::{Path, PathBuf};

    #[test]
    fn front_matter_and_arguments_expand_like_claude_code() {
        let text = "---\ndescription: Review a file\nargument-hint: FILE [FOCUS]\nallowed-tools: Read, Grep\nmodel: small\n---\nReview $1 with focus on $2.\nAll: $ARGUMENTS\n!`git status`\n! rm -rf /\nEnd.\n";
        let c = parse("review", text, PathBuf::from("review.md"));
        assert_eq!(c.description, "Review a file");
        assert_eq!(c.argument_hint.as_deref(), Some("FILE [FOCUS]"));
        assert_eq!(
            c.allowed_tools,
            Some(vec!["Read".to_string(), "Grep".to_string()])
        );
        assert_eq!(c.model.as_deref(), Some("small"));
        let e = expand(&c, " src/a.rs speed ", Path::new("/"), Path::new("/"));
        assert_eq!(
            e.prompt,
            "Review src/a.rs with focus on speed.\nAll: src/a.rs speed\n`git status`\n! rm -rf /\nEnd."
        );
        assert_eq!(e.shell, ["git status"]);
        // Without front matter the first line describes it.
        let c = parse("fix", "# Fix the bug\nin $ARGUMENTS", PathBuf::new());
        assert_eq!(c.description, "Fix the bug");
        assert_eq!(
            expand(&c, "", Path::new("/"), Path::new("/")).prompt,
            "# Fix the bug\nin"
        );
    }

    #[test]
    fn loads_from_every_directory_first_wins_and_subdirs_by_both_names() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        std::fs::write(a.path().join("one.md"), "from a").unwrap();
        std::fs::write(b.path().join("one.md"), "from b").unwrap();
        std::fs::write(b.path().join("two.md"), "two").unwrap();
        std::fs::write(b.path().join("help.md"), "shadow").unwrap();
        std::fs::write(b.path().join("notes.txt"), "no").unwrap();
        std::fs::create_dir(b.path().join("front")).unwrap();
        std::fs::write(b.path().join("front/comp.md"), "c").unwrap();
        let (cmds, warnings) = load(&[a.path().into(), b.path().into(), "/nonexistent".into()]);
        assert!(warnings.is_empty());
        let names: Vec<_> = cmds.iter().map(|c| c.qualified_name()).collect();
        assert_eq!(names, ["front:comp", "one", "two"]);
        assert_eq!(cmds[1].body, "from a");
        assert_eq!(find(&cmds, "comp"), find(&cmds, "front:comp"));
        assert!(find(&cmds, "comp").is_some());
        assert!(help(&cmds).contains("/comp"));
        assert!(help(&cmds).contains("/front:comp"));
        assert!(help(&cmds).contains("/model"));
    }

    #[test]
    fn commands_are_told_from_paths_and_matched_by_prefix() {
        assert!(is_command("/help"));
        assert!(is_command("/model big one"));
        assert!(is_command("/front:comp x"));
        assert!(!is_command("/etc/hosts is odd"));
        assert!(!is_command("/ nothing"));
        assert!(!is_command("hello /help"));
        let custom = vec![parse("mine", "do it", PathBuf::new())];
        let names: Vec<_> = matches("/m", &custom).into_iter().map(|m| m.0).collect();
        assert_eq!(names, ["/model", "/mode", "/mine"]);
        assert!(matches("/zz", &custom).is_empty());
    }
}
