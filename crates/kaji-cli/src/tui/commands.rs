//! Slash commands of the TUI: the built-in ones, custom commands read from
//! Markdown files in Claude Code's format, their expansion into a prompt,
//! and the completion menu's matches.
//!
//! Pure functions over text and files: it never runs a command line (a
//! custom command's `!` lines are dropped with a note in an untrusted
//! project; in a trusted one they are handed back for the UI to run
//! through the session) and never talks to the model or the session.

use std::path::{Path, PathBuf};

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
    ("/clear", "forget the conversation"),
    ("/exit", "quit (also /quit)"),
];

/// A custom command read from `<name>.md`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CustomCommand {
    /// The name without the slash (`review`, `frontend:component` for
    /// `frontend/component.md`).
    pub name: String,
    /// `description` from the front matter (else the body's first line).
    pub description: String,
    /// `argument-hint` from the front matter.
    pub argument_hint: Option<String>,
    /// `allowed-tools` from the front matter, as written.
    pub allowed_tools: Option<String>,
    /// `model` from the front matter.
    pub model: Option<String>,
    /// The prompt template.
    pub body: String,
    /// The file it came from.
    pub path: PathBuf,
}

/// The directories custom commands are read from, first wins on a name
/// clash: the project's `.kaji/commands`, `$KAJI_HOME/commands`, the
/// project's `.claude/commands`, `~/.claude/commands`.
pub fn command_dirs(project: &Path, kaji_home: &Path, home: Option<&Path>) -> Vec<PathBuf> {
    let mut dirs = vec![
        project.join(".kaji/commands"),
        kaji_home.join("commands"),
        project.join(".claude/commands"),
    ];
    if let Some(home) = home {
        dirs.push(home.join(".claude/commands"));
    }
    dirs
}

/// Reads every `*.md` under `dirs` (one level of subdirectories gives
/// `dir:name`). Unreadable files are reported, not fatal.
pub fn load(dirs: &[PathBuf]) -> (Vec<CustomCommand>, Vec<String>) {
    let mut commands: Vec<CustomCommand> = Vec::new();
    let mut warnings = Vec::new();
    for dir in dirs {
        for (name, path) in md_files(dir) {
            let builtin = BUILTINS.iter().any(|(b, _)| b[1..] == name);
            if builtin || commands.iter().any(|c| c.name == name) {
                continue;
            }
            match std::fs::read_to_string(&path) {
                Ok(text) => commands.push(parse(&name, &text, path)),
                Err(e) => warnings.push(format!("custom command {}: {e}", path.display())),
            }
        }
    }
    commands.sort_by(|a, b| a.name.cmp(&b.name));
    (commands, warnings)
}

/// `(name, path)` of the Markdown files of `dir` and its subdirectories.
fn md_files(dir: &Path) -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    let mut entries: Vec<_> = entries.flatten().map(|e| e.path()).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            let prefix = file_name(&path);
            for (name, sub) in md_files(&path) {
                if !name.contains(':') {
                    out.push((format!("{prefix}:{name}"), sub));
                }
            }
        } else if path.extension().is_some_and(|e| e == "md") {
            let name = path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            if !name.is_empty() {
                out.push((name, path));
            }
        }
    }
    out
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Parses a command file: optional `---` front matter of `key: value`
/// lines, then the body.
pub fn parse(name: &str, text: &str, path: PathBuf) -> CustomCommand {
    let mut command = CustomCommand {
        name: name.to_string(),
        description: String::new(),
        argument_hint: None,
        allowed_tools: None,
        model: None,
        body: text.to_string(),
        path,
    };
    let rest = text.strip_prefix("---\n").or(text.strip_prefix("---\r\n"));
    if let Some(rest) = rest
        && let Some(end) = rest.find("\n---")
    {
        for line in rest[..end].lines() {
            let Some((key, value)) = line.split_once(':') else {
                continue;
            };
            let value = value
                .trim()
                .trim_matches('"')
                .trim_matches('\'')
                .to_string();
            match key.trim() {
                "description" => command.description = value,
                "argument-hint" => command.argument_hint = Some(value),
                "allowed-tools" => command.allowed_tools = Some(value),
                "model" => command.model = Some(value),
                _ => {}
            }
        }
        let body = &rest[end + 4..];
        command.body = body.strip_prefix('\n').unwrap_or(body).to_string();
        command.body = command
            .body
            .strip_prefix("\r\n")
            .unwrap_or(&command.body)
            .to_string();
    }
    if command.description.is_empty() {
        command.description = command
            .body
            .lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("")
            .trim_start_matches('#')
            .trim()
            .to_string();
    }
    command
}

/// The prompt a custom command stands for: `$ARGUMENTS` is everything
/// after the name, `$1`…`$9` its words. Lines that would run a command
/// (`!` at the start, or `` !`…` ``) are dropped; the second value says
/// how many were.
pub fn expand(command: &CustomCommand, args: &str) -> (String, usize) {
    let words: Vec<&str> = args.split_whitespace().collect();
    let mut skipped = 0;
    let mut lines = Vec::new();
    for line in command.body.lines() {
        if line.trim_start().starts_with('!') || line.contains("!`") {
            skipped += 1;
            continue;
        }
        let mut line = line.replace("$ARGUMENTS", args.trim());
        for n in (1..=9).rev() {
            let value = words.get(n - 1).copied().unwrap_or("");
            line = line.replace(&format!("${n}"), value);
        }
        lines.push(line);
    }
    (lines.join("\n").trim().to_string(), skipped)
}

/// As [`expand`], for a trusted project: the shell commands are handed
/// back, in order, instead of dropped — a line starting with `!` (not
/// `` !` ``) is one
/// (and leaves the prompt), each `` !`…` `` in a line is one (and stays
/// in the line as `` `…` ``, its output being in the conversation).
pub fn expand_trusted(command: &CustomCommand, args: &str) -> (String, Vec<String>) {
    let words: Vec<&str> = args.split_whitespace().collect();
    let mut shell = Vec::new();
    let mut lines = Vec::new();
    for line in command.body.lines() {
        let mut line = line.replace("$ARGUMENTS", args.trim());
        for n in (1..=9).rev() {
            let value = words.get(n - 1).copied().unwrap_or("");
            line = line.replace(&format!("${n}"), value);
        }
        if let Some(rest) = line.trim_start().strip_prefix('!')
            && !rest.starts_with('`')
        {
            if !rest.trim().is_empty() {
                shell.push(rest.trim().to_string());
            }
            continue;
        }
        let mut kept = String::new();
        let mut rest = line.as_str();
        while let Some(start) = rest.find("!`") {
            let after = &rest[start + 2..];
            let Some(end) = after.find('`') else {
                break;
            };
            kept.push_str(&rest[..start]);
            kept.push_str(&format!("`{}`", &after[..end]));
            shell.push(after[..end].to_string());
            rest = &after[end + 1..];
        }
        kept.push_str(rest);
        lines.push(kept);
    }
    (lines.join("\n").trim().to_string(), shell)
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
        .filter(|(name, _)| name.starts_with(prefix))
        .map(|(n, d)| (n.to_string(), d.to_string()))
        .collect();
    for c in custom {
        let name = format!("/{}", c.name);
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
        out.push_str(&format!("\n    {name:<12} {what}"));
    }
    if custom.is_empty() {
        out.push_str("\n  No custom commands (.kaji/commands/*.md, .claude/commands/*.md).");
    } else {
        out.push_str("\n  Custom commands:");
        for c in custom {
            let name = format!("/{}", c.name);
            let hint = c.argument_hint.as_deref().unwrap_or("");
            out.push_str(&format!("\n    {name:<12} {hint} {}", c.description));
        }
    }
    out.push_str(
        "\n  Keys: Shift-Enter/Alt-Enter/Ctrl-J newline · Tab completes · Ctrl-O opens tool results · Esc aborts",
    );
    out
}

/// The rules of an `allowed-tools` line: comma-separated (commas inside
/// parentheses belong to the rule), as Claude Code writes them
/// (`Bash(git add:*), Bash(git status:*), Read`).
pub fn allowed_tools(text: &str) -> Vec<String> {
    let mut rules = Vec::new();
    let mut depth = 0usize;
    let mut current = String::new();
    for c in text.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' | ' ' if depth == 0 => {
                if !current.trim().is_empty() {
                    rules.push(current.trim().to_string());
                }
                current.clear();
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    if !current.trim().is_empty() {
        rules.push(current.trim().to_string());
    }
    rules
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn front_matter_and_arguments_expand_like_claude_code() {
        let text = "---\ndescription: Review a file\nargument-hint: FILE [FOCUS]\nallowed-tools: Read, Grep\nmodel: small\n---\nReview $1 with focus on $2.\nAll: $ARGUMENTS\n!`git status`\n! rm -rf /\nEnd.\n";
        let c = parse("review", text, PathBuf::from("review.md"));
        assert_eq!(c.description, "Review a file");
        assert_eq!(c.argument_hint.as_deref(), Some("FILE [FOCUS]"));
        assert_eq!(c.allowed_tools.as_deref(), Some("Read, Grep"));
        assert_eq!(c.model.as_deref(), Some("small"));
        let (prompt, skipped) = expand(&c, " src/a.rs speed ");
        assert_eq!(
            prompt,
            "Review src/a.rs with focus on speed.\nAll: src/a.rs speed\nEnd."
        );
        assert_eq!(skipped, 2);
        // Without front matter the first line describes it.
        let c = parse("fix", "# Fix the bug\nin $ARGUMENTS", PathBuf::new());
        assert_eq!(c.description, "Fix the bug");
        assert_eq!(expand(&c, "").0, "# Fix the bug\nin");
    }

    #[test]
    fn a_trusted_project_gets_the_shell_lines_back_in_order() {
        let c = parse(
            "ctx",
            "Status: !`git status --short` and !`git diff $1`\n! ls $1\nReview $ARGUMENTS.",
            PathBuf::new(),
        );
        let (prompt, shell) = expand_trusted(&c, "src");
        assert_eq!(shell, ["git status --short", "git diff src", "ls src"]);
        assert_eq!(
            prompt,
            "Status: `git status --short` and `git diff src`\nReview src."
        );
        // Untrusted: the same lines are dropped.
        assert_eq!(expand(&c, "src"), ("Review src.".to_string(), 2));
    }

    #[test]
    fn loads_from_every_directory_first_wins_and_subdirs_namespace() {
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
        let names: Vec<_> = cmds.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["front:comp", "one", "two"]);
        assert_eq!(cmds[1].body, "from a");
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
