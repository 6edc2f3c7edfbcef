//! Custom slash commands in Claude Code's format: Markdown files with
//! optional YAML front matter (`description`, `argument-hint`,
//! `allowed-tools`, `model`, `disable-model-invocation`), found in
//! `.kaji/commands/`, `$KAJI_HOME/commands/`, `.claude/commands/` and
//! `~/.claude/commands/` (subfolders included), and their expansion into
//! a prompt for every front end (the TUI, `kaji exec`).
//!
//! A file `frontend/component.md` is the command `/component`, also
//! reachable as `/frontend:component`. Expansion follows Claude Code:
//! `$ARGUMENTS` and `$1`…`$9` take the typed arguments, which are appended
//! (`ARGUMENTS: …`) when the body places none; only `` !`cmd` `` is a shell
//! command (handed back for the caller to run through the session, under
//! its approvals and sandbox), never a line that merely starts with `!`;
//! `@path` outside code blocks attaches that file of the project, capped.
//! This module never runs anything and never writes.

use std::path::{Path, PathBuf};

use crate::front_matter as fm;

/// The most of one `@file` a command attaches: 32 KiB.
pub const ATTACH_FILE_CAP_BYTES: usize = 32 * 1024;

/// The most a command attaches in all: 128 KiB.
pub const ATTACH_TOTAL_CAP_BYTES: usize = 128 * 1024;

/// Front matter keys of a command file (Claude Code's). kaji never lets
/// the model run a command on its own, so `disable-model-invocation` is
/// always in effect.
const KNOWN_KEYS: [&str; 5] = [
    "description",
    "argument-hint",
    "allowed-tools",
    "model",
    "disable-model-invocation",
];

/// A custom command read from `<name>.md`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CustomCommand {
    /// The name without the slash: the file's stem (`component` for
    /// `frontend/component.md`).
    pub name: String,
    /// The subfolder it sits in (`frontend`), which also names it
    /// `/frontend:component`.
    pub namespace: Option<String>,
    /// `description` from the front matter (else the body's first line).
    pub description: String,
    /// `argument-hint` from the front matter.
    pub argument_hint: Option<String>,
    /// `allowed-tools` from the front matter: one rule each.
    pub allowed_tools: Option<Vec<String>>,
    /// `model` from the front matter.
    pub model: Option<String>,
    /// The prompt template.
    pub body: String,
    /// The file it came from.
    pub path: PathBuf,
}

impl CustomCommand {
    /// `namespace:name`, or the name when it has no namespace.
    pub fn qualified_name(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{ns}:{}", self.name),
            None => self.name.clone(),
        }
    }
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

/// Reads every `*.md` under `dirs` and their subfolders, skipping names in
/// `reserved` (built-in commands). Files that cannot be read or whose front
/// matter is not YAML are skipped with a warning naming the file.
pub fn load(dirs: &[PathBuf], reserved: &[&str]) -> (Vec<CustomCommand>, Vec<String>) {
    let mut commands: Vec<CustomCommand> = Vec::new();
    let mut warnings = Vec::new();
    for dir in dirs {
        for (namespace, name, path) in md_files(dir) {
            if reserved.contains(&name.as_str()) && namespace.is_none() {
                continue;
            }
            let text = match std::fs::read_to_string(&path) {
                Ok(text) => text,
                Err(e) => {
                    warnings.push(format!("custom command {}: {e}", path.display()));
                    continue;
                }
            };
            match parse_checked(namespace, &name, &text, path) {
                Ok((command, notes)) => {
                    warnings.extend(notes);
                    let q = command.qualified_name();
                    if !commands.iter().any(|c| c.qualified_name() == q) {
                        commands.push(command);
                    }
                }
                Err(e) => warnings.push(e),
            }
        }
    }
    commands.sort_by_key(|c| c.qualified_name());
    (commands, warnings)
}

/// The command `/name` stands for (without the slash): an exact
/// `namespace:name` or top-level name first, else the first command of
/// that file name in any subfolder.
pub fn find<'a>(commands: &'a [CustomCommand], name: &str) -> Option<&'a CustomCommand> {
    commands
        .iter()
        .find(|c| c.qualified_name() == name)
        .or_else(|| commands.iter().find(|c| c.name == name))
}

/// `(namespace, name, path)` of the Markdown files of `dir` and its
/// subfolders (the namespace is the subfolder path joined with `:`).
fn md_files(dir: &Path) -> Vec<(Option<String>, String, PathBuf)> {
    let mut out = Vec::new();
    walk(dir, None, &mut out, 0);
    out
}

fn walk(
    dir: &Path,
    namespace: Option<String>,
    out: &mut Vec<(Option<String>, String, PathBuf)>,
    depth: usize,
) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.flatten().map(|e| e.path()).collect();
    entries.sort();
    for path in entries {
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        if path.is_dir() {
            if depth < 4 {
                let file = path
                    .file_name()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let ns = match &namespace {
                    Some(ns) => format!("{ns}:{file}"),
                    None => file,
                };
                walk(&path, Some(ns), out, depth + 1);
            }
        } else if path.extension().is_some_and(|e| e == "md") && !stem.is_empty() {
            out.push((namespace.clone(), stem, path));
        }
    }
}

/// Parses a command file named `name` (a `dir:name` names the subfolder);
/// a file whose front matter is not YAML keeps its whole text as the body.
pub fn parse(name: &str, text: &str, path: PathBuf) -> CustomCommand {
    let (namespace, name) = match name.rsplit_once(':') {
        Some((ns, n)) => (Some(ns.to_string()), n),
        None => (None, name),
    };
    match parse_checked(namespace.clone(), name, text, path.clone()) {
        Ok((command, _)) => command,
        Err(_) => plain(namespace, name, text, path),
    }
}

fn plain(namespace: Option<String>, name: &str, body: &str, path: PathBuf) -> CustomCommand {
    CustomCommand {
        name: name.to_string(),
        namespace,
        description: first_line(body),
        argument_hint: None,
        allowed_tools: None,
        model: None,
        body: body.to_string(),
        path,
    }
}

/// Parses a command file: optional YAML front matter, then the body.
/// Returns the command and warnings (unknown keys); fails, naming the file,
/// when the front matter is unclosed or not YAML.
pub fn parse_checked(
    namespace: Option<String>,
    name: &str,
    text: &str,
    path: PathBuf,
) -> Result<(CustomCommand, Vec<String>), String> {
    let front = fm::parse(text).map_err(|e| format!("custom command {}: {e}", path.display()))?;
    let Some(front) = front else {
        return Ok((plain(namespace, name, text, path), Vec::new()));
    };
    let mut warnings = Vec::new();
    let mut command = plain(namespace, name, &front.body, path);
    for (key, value) in &front.fields {
        let key = fm::text(key).unwrap_or_default();
        let text = fm::text(value).filter(|t| !t.is_empty());
        match key.as_str() {
            "description" => {
                if let Some(text) = text {
                    command.description = text;
                }
            }
            "argument-hint" => command.argument_hint = text,
            "allowed-tools" => command.allowed_tools = Some(fm::list(value)),
            "model" => command.model = text,
            k if KNOWN_KEYS.contains(&k) => {}
            other => warnings.push(format!(
                "custom command {}: unknown key `{other}` ignored",
                command.path.display()
            )),
        }
    }
    Ok((command, warnings))
}

fn first_line(body: &str) -> String {
    body.lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim_start_matches('#')
        .trim()
        .to_string()
}

/// What a command expands to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Expansion {
    /// The prompt (with the attached files at its end).
    pub prompt: String,
    /// The `` !`cmd` `` commands, in order, for the caller to run before
    /// the prompt (their output joins the conversation).
    pub shell: Vec<String>,
    /// The files attached for `@path`.
    pub attached: Vec<PathBuf>,
    /// What was not attached, and why, one line each.
    pub notes: Vec<String>,
}

/// Expands `command` with the typed `args`; `@path` is resolved against
/// `cwd` and attached only when it lies inside `root` (the project).
pub fn expand(command: &CustomCommand, args: &str, cwd: &Path, root: &Path) -> Expansion {
    let args = args.trim();
    let words: Vec<&str> = args.split_whitespace().collect();
    let mut placed = false;
    let mut out = Expansion::default();
    let mut lines = Vec::new();
    let mut mentions = Vec::new();
    let mut fenced = false;
    for line in command.body.lines() {
        let line = substitute(line, args, &words, &mut placed);
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced {
            mentions.extend(at_mentions(&line));
        }
        lines.push(take_shell(&line, &mut out.shell));
    }
    let mut prompt = lines.join("\n").trim().to_string();
    if !placed && !args.is_empty() {
        prompt.push_str(&format!("\n\nARGUMENTS: {args}"));
    }
    attach(&mut out, &mut prompt, mentions, cwd, root);
    out.prompt = prompt;
    out
}

/// `line` with `$ARGUMENTS` as `args` and `$N` as the N-th word; a `$N`
/// past the words typed (`$150/hour`, `$2` with one word) stays as
/// written, as Claude Code leaves it. `placed` is set when anything was
/// put in.
fn substitute(line: &str, args: &str, words: &[&str], placed: &mut bool) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(tail) = after.strip_prefix("ARGUMENTS") {
            out.push_str(args);
            *placed = true;
            rest = tail;
            continue;
        }
        let digits = after.len() - after.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        match after[..digits].parse::<usize>() {
            Ok(n) if (1..=words.len()).contains(&n) => {
                out.push_str(words[n - 1]);
                *placed = true;
                rest = &after[digits..];
            }
            _ => {
                out.push('$');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// The line with each `` !`cmd` `` as `` `cmd` ``, the commands pushed to
/// `shell`.
fn take_shell(line: &str, shell: &mut Vec<String>) -> String {
    let mut kept = String::new();
    let mut rest = line;
    while let Some(start) = rest.find("!`") {
        let after = &rest[start + 2..];
        let Some(end) = after.find('`') else {
            break;
        };
        kept.push_str(&rest[..start]);
        kept.push_str(&format!("`{}`", &after[..end]));
        if !after[..end].trim().is_empty() {
            shell.push(after[..end].trim().to_string());
        }
        rest = &after[end + 1..];
    }
    kept.push_str(rest);
    kept
}

/// The `@path` words of a line (an `@` at the start or after a space or
/// `(`), without trailing punctuation.
pub fn at_mentions(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut prev = ' ';
    let mut in_code = false;
    for (i, c) in line.char_indices() {
        if c == '`' {
            in_code = !in_code;
        }
        if c == '@' && !in_code && (prev.is_whitespace() || prev == '(') {
            let word: String = line[i + 1..]
                .chars()
                .take_while(|c| !c.is_whitespace() && !matches!(c, '`' | ')' | '"' | '\''))
                .collect();
            let word = word.trim_end_matches(['.', ',', ';', ':', '!', '?']);
            if !word.is_empty() {
                out.push(word.to_string());
            }
        }
        prev = c;
    }
    out
}

fn attach(
    out: &mut Expansion,
    prompt: &mut String,
    mentions: Vec<String>,
    cwd: &Path,
    root: &Path,
) {
    let root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
    let mut total = 0usize;
    for mention in mentions {
        let path = cwd.join(&mention);
        let Ok(real) = path.canonicalize() else {
            if mention.contains('/') || mention.contains('.') {
                out.notes
                    .push(format!("@{mention}: no such file; left as text"));
            }
            continue;
        };
        if !real.is_file() || out.attached.contains(&real) {
            continue;
        }
        if !real.starts_with(&root) {
            out.notes.push(format!(
                "@{mention}: not attached: it is outside the project ({})",
                root.display()
            ));
            continue;
        }
        let Ok(bytes) = std::fs::read(&real) else {
            out.notes
                .push(format!("@{mention}: cannot be read; not attached"));
            continue;
        };
        if bytes.contains(&0) {
            out.notes
                .push(format!("@{mention}: a binary file; not attached"));
            continue;
        }
        let room = ATTACH_FILE_CAP_BYTES.min(ATTACH_TOTAL_CAP_BYTES.saturating_sub(total));
        if room == 0 {
            out.notes.push(format!(
                "@{mention}: not attached: the command's attachments reached {ATTACH_TOTAL_CAP_BYTES} bytes"
            ));
            continue;
        }
        let text = String::from_utf8_lossy(&bytes[..bytes.len().min(room)]).into_owned();
        total += text.len();
        prompt.push_str(&format!("\n\n<file path=\"{mention}\">\n{text}"));
        if bytes.len() > room {
            prompt.push_str(&format!(
                "\n[cut: the file is {} bytes; only its first {room} are attached]",
                bytes.len()
            ));
        }
        prompt.push_str("\n</file>");
        out.attached.push(real);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn command(body: &str) -> CustomCommand {
        parse("c", body, PathBuf::from("/p/c.md"))
    }

    #[test]
    fn only_backtick_bang_runs_and_bang_lines_stay_text() {
        let c = command("Status: !`git status`\n!touch X\n![image](a.png)\n");
        let e = expand(&c, "", Path::new("/"), Path::new("/"));
        assert_eq!(e.shell, vec!["git status"]);
        assert_eq!(e.prompt, "Status: `git status`\n!touch X\n![image](a.png)");
    }

    #[test]
    fn arguments_are_placed_or_appended() {
        let c = command("Fix issue $1 then $ARGUMENTS");
        let e = expand(&c, "42 now", Path::new("/"), Path::new("/"));
        assert_eq!(e.prompt, "Fix issue 42 then 42 now");
        let c = command("Review the code");
        let e = expand(&c, "src/a.rs", Path::new("/"), Path::new("/"));
        assert_eq!(e.prompt, "Review the code\n\nARGUMENTS: src/a.rs");
    }

    #[test]
    fn a_dollar_number_past_the_words_stays() {
        let c = command("Costs $150/hour; $2 stays; $1 is it; $10 too");
        let e = expand(&c, "x", Path::new("/"), Path::new("/"));
        assert_eq!(e.prompt, "Costs $150/hour; $2 stays; x is it; $10 too");
        let c = command("Costs $150/hour");
        let e = expand(&c, "x", Path::new("/"), Path::new("/"));
        assert_eq!(e.prompt, "Costs $150/hour\n\nARGUMENTS: x");
    }

    #[test]
    fn at_files_are_attached_inside_the_project_only() {
        let dir = tempfile::tempdir().expect("tempdir");
        let project = dir.path().join("p");
        std::fs::create_dir_all(&project).expect("mkdir");
        std::fs::write(project.join("a.txt"), "alpha").expect("write");
        std::fs::write(dir.path().join("secret.txt"), "s").expect("write");
        let c = command("See @a.txt and @../secret.txt.\n```\nnpm i @scope/x\n```\n");
        let e = expand(&c, "", &project, &project);
        assert!(
            e.prompt.contains("<file path=\"a.txt\">\nalpha\n</file>"),
            "{}",
            e.prompt
        );
        assert_eq!(e.attached.len(), 1);
        assert_eq!(e.notes.len(), 1, "{:?}", e.notes);
        assert!(e.notes[0].contains("outside the project"), "{:?}", e.notes);
    }

    #[test]
    fn yaml_front_matter_and_subfolders() {
        let dir = tempfile::tempdir().expect("tempdir");
        let sub = dir.path().join("frontend");
        std::fs::create_dir_all(&sub).expect("mkdir");
        std::fs::write(
            sub.join("component.md"),
            "---\ndescription: >\n  Makes a\n  component\nallowed-tools:\n  - Read\n  - Bash(git add:*)\n---\nMake $ARGUMENTS\n",
        )
        .expect("write");
        let (commands, warnings) = load(&[dir.path().to_path_buf()], &[]);
        assert!(warnings.is_empty(), "{warnings:?}");
        let c = find(&commands, "component").expect("by name");
        assert_eq!(c.description, "Makes a component");
        assert_eq!(
            c.allowed_tools,
            Some(vec!["Read".to_string(), "Bash(git add:*)".to_string()])
        );
        assert_eq!(find(&commands, "frontend:component"), Some(c));
    }
}
