//! Shell analysis: a command line split into the simple commands a shell
//! would run, each as argv words, with everything that cannot be known
//! before it runs flagged as unanalysable.
//!
//! The command is parsed with tree-sitter-bash (a real bash grammar, the
//! one codex uses): lists (`;`, `&&`, `||`, `&`, newlines), pipelines,
//! subshells, `{ …; }`, `if`/`while`/`for`/`case`, `$(…)`, backticks,
//! process substitution and heredoc bodies are all walked, and every
//! simple command found anywhere is reported. A word is
//! [`Word::Literal`] when its value is known (quotes and backslashes
//! resolved), else [`Word::Dynamic`]. Where the grammar is not bash — the
//! inside of backticks (re-parsed after bash's unescaping), unquoted
//! heredoc bodies and `${…}` (scanned as text) — bash's rules are applied
//! by hand; expansions and builtins that run code out of sight are
//! unanalysable.
//!
//! This module never runs anything and never reads a file: redirection
//! targets are judged against the [`Context`]'s directories, lexically and
//! through the caller's [`crate::RealPath`] resolver. It must never report
//! a command as analysable when a shell could run something that is not in
//! [`Analysis::commands`]; `tests/all/differential.rs` checks that against bash.

use std::path::{Path, PathBuf};

use tree_sitter::{Node, Parser};

use crate::context::Context;
use crate::paths;

/// One word of a simple command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Word {
    /// A word whose value is known: quotes and escapes resolved.
    Literal(String),
    /// A word with an expansion, a glob or a `~`: its value (and even its
    /// number of words) is only known when the shell runs it. Holds the
    /// source text.
    Dynamic(String),
}

impl Word {
    /// The value, when it is known.
    pub fn literal(&self) -> Option<&str> {
        match self {
            Word::Literal(s) => Some(s),
            Word::Dynamic(_) => None,
        }
    }
}

/// One simple command: a program and its arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimpleCommand {
    /// argv: the program first.
    pub words: Vec<Word>,
    /// The command's source text (without the redirections of an
    /// enclosing statement).
    pub text: String,
    /// Whether its output goes to a file (a `>`, `>>`, `&>`, … to
    /// anything other than `/dev/null`, `/dev/stdout`, `/dev/stderr`),
    /// on the command itself or on a statement around it.
    pub writes_file: bool,
}

impl SimpleCommand {
    /// The program's name, when it is literal.
    pub fn program(&self) -> Option<&str> {
        self.words.first().and_then(Word::literal)
    }

    /// All words, when every one is literal.
    pub fn literal_words(&self) -> Option<Vec<String>> {
        self.words
            .iter()
            .map(|w| w.literal().map(str::to_string))
            .collect()
    }
}

/// What a command line would run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Analysis {
    /// Every simple command found, in source order (inner commands of a
    /// `$(…)` come before the command they are an argument of).
    pub commands: Vec<SimpleCommand>,
    /// Why the command cannot be fully analysed; empty when it can.
    pub unanalysable: Vec<String>,
    /// Where redirections write outside the project or to a protected
    /// path (as [`crate::RealPath`] resolves them): never allowed by a
    /// rule or a hook. Each is also in [`Analysis::unanalysable`].
    pub guarded_writes: Vec<PathBuf>,
}

impl Analysis {
    /// Whether every part of the command is known.
    pub fn is_analysable(&self) -> bool {
        self.unanalysable.is_empty()
    }
}

/// Builtins that run code or change how later commands run, so nothing
/// after them can be judged from the text.
const OPAQUE_BUILTINS: &[&str] = &[
    "eval",
    "source",
    ".",
    "exec",
    "alias",
    "unalias",
    "set",
    "shopt",
    "enable",
    "hash",
    "trap",
    "declare",
    "typeset",
    "export",
    "local",
    "readonly",
    "unset",
    "let",
    "read",
    "mapfile",
    "readarray",
    "builtin",
    "command",
    "env",
    "coproc",
    "fc",
    "getopts",
    "caller",
    "compgen",
    "complete",
    "bind",
];

/// Words bash reads as syntax where a command starts: seen as a command
/// name, they mean the parse differs from bash's.
const RESERVED_WORDS: &[&str] = &[
    "if", "then", "else", "elif", "fi", "do", "done", "case", "esac", "while", "until", "for",
    "function", "select", "{", "}", "!", "[[", "]]", "coproc",
];

/// Shells whose `-c SCRIPT` is analysed as a command line of its own.
const SHELLS: &[&str] = &["sh", "bash", "dash", "zsh", "ksh", "mksh", "ash"];

/// How many `bash -c` scripts may nest inside each other.
const MAX_DEPTH: usize = 16;
/// How deep the syntax tree may nest before the walk gives up.
const MAX_NESTING: usize = 400;

/// Analyses `command` for the project in `ctx` (redirections are judged
/// relative to `ctx.cwd`).
pub fn analyse(command: &str, ctx: &Context) -> Analysis {
    let mut walker = Walker {
        ctx,
        out: Analysis::default(),
        changes_dir: false,
        relative_write: false,
        depth: 0,
        nesting: 0,
        quoted: false,
    };
    walker.script(command);
    if walker.changes_dir && walker.relative_write {
        walker
            .out
            .unanalysable
            .push("changes directory and then writes to a relative path".into());
    }
    walker.out
}

/// The words of `text` when it is exactly one simple command of literal
/// words with no redirection; else why not. Used for `Bash(…)` rules.
pub fn literal_words(text: &str) -> Result<Vec<String>, String> {
    let ctx = Context::new("/", true);
    let analysis = analyse(text, &ctx);
    if let Some(why) = analysis.unanalysable.first() {
        return Err(format!("the command {why}"));
    }
    match analysis.commands.as_slice() {
        [one] if !one.writes_file => one
            .literal_words()
            .ok_or_else(|| "the command has a word with an expansion, a glob or a `~`".into()),
        [] => Err("there is no command".into()),
        _ => Err("a rule names one simple command, without `;`, `&&`, `|` or a redirection".into()),
    }
}

struct Walker<'a> {
    ctx: &'a Context,
    out: Analysis,
    changes_dir: bool,
    relative_write: bool,
    depth: usize,
    nesting: usize,
    /// Inside a double-quoted string (where `\"` in backticks is `"`).
    quoted: bool,
}

impl Walker<'_> {
    fn bad(&mut self, why: impl Into<String>) {
        self.out.unanalysable.push(why.into());
    }

    fn script(&mut self, text: &str) {
        if self.depth >= MAX_DEPTH {
            return self.bad("is nested too deeply to analyse");
        }
        let mut parser = Parser::new();
        if parser
            .set_language(&tree_sitter_bash::LANGUAGE.into())
            .is_err()
        {
            return self.bad("cannot be parsed: the bash grammar failed to load");
        }
        let Some((tree, text)) = parse_without_run_ons(&mut parser, text) else {
            return self.bad("cannot be parsed");
        };
        let text = text.as_str();
        if tree.root_node().has_error() {
            // Still walked, so that a deny rule sees the commands it can.
            self.bad("does not parse as a shell command");
        }
        self.depth += 1;
        self.walk(tree.root_node(), text.as_bytes(), false);
        self.depth -= 1;
    }

    fn walk(&mut self, node: Node, src: &[u8], redirected: bool) {
        if node.is_error() || node.is_missing() {
            let near = text(node, src);
            return self.bad(format!("does not parse as a shell command (near `{near}`)"));
        }
        if self.nesting >= MAX_NESTING {
            return self.bad("is nested too deeply to analyse");
        }
        self.nesting += 1;
        self.walk_node(node, src, redirected);
        self.nesting -= 1;
    }

    fn walk_node(&mut self, node: Node, src: &[u8], redirected: bool) {
        match node.kind() {
            "comment" => {}
            "command" => self.command(node, src, redirected),
            "redirected_statement" => self.redirected(node, src, redirected),
            "function_definition" => self.bad("defines a function"),
            "variable_assignment" | "variable_assignments" => {
                self.bad(format!("assigns a variable (`{}`)", text(node, src)))
            }
            "declaration_command" | "unset_command" => {
                self.bad(format!("changes shell variables (`{}`)", text(node, src)))
            }
            "c_style_for_statement" => self.bad("has a C-style for loop"),
            "arithmetic_expansion" if arithmetic_on_names(&text(node, src)) => self.bad(format!(
                "has arithmetic on variables (`{}`), which can run code",
                text(node, src)
            )),
            "compound_statement"
                if text(node, src).starts_with("((") && arithmetic_on_names(&text(node, src)) =>
            {
                self.bad(format!(
                    "has arithmetic on variables (`{}`), which can run code",
                    text(node, src)
                ))
            }
            "test_command" if is_arithmetic_test(&text(node, src)) => self.bad(format!(
                "compares variables arithmetically (`{}`), which can run code",
                text(node, src)
            )),
            "test_command" if tests_a_variable(&text(node, src)) => self.bad(format!(
                "tests a variable by name (`{}`), whose subscript can run code",
                text(node, src)
            )),
            "for_statement" => {
                let var = node
                    .child_by_field_name("variable")
                    .map(|v| text(v, src))
                    .unwrap_or_default();
                if var.chars().any(|c| c.is_ascii_uppercase()) {
                    self.bad(format!("assigns the variable `{var}` in a for loop"));
                }
                self.children(node, src, redirected);
            }
            "file_redirect" => {
                self.redirect(node, src);
            }
            "command_substitution" if text(node, src).starts_with('`') => {
                self.backticks(&text(node, src))
            }
            "expansion" => self.expansion(&text(node, src)),
            // Inside `$(…)` and `<(…)` quoting starts afresh.
            "command_substitution" | "process_substitution" => {
                let quoted = std::mem::replace(&mut self.quoted, false);
                self.children(node, src, redirected);
                self.quoted = quoted;
            }
            "heredoc_redirect" => {
                let mut later = Vec::new();
                self.heredoc(node, src, &mut later);
                for part in later {
                    self.walk(part, src, false);
                }
            }
            _ => self.children(node, src, redirected),
        }
    }

    fn children(&mut self, node: Node, src: &[u8], redirected: bool) {
        let mut cursor = node.walk();
        let kids: Vec<Node> = node.children(&mut cursor).collect();
        for child in kids {
            if child.is_named() || child.is_error() || child.is_missing() {
                self.walk(child, src, redirected);
            }
        }
    }

    fn redirected(&mut self, node: Node, src: &[u8], redirected: bool) {
        let mut writes = redirected;
        let body = node.child_by_field_name("body");
        let mut cursor = node.walk();
        let kids: Vec<Node> = node.named_children(&mut cursor).collect();
        let mut later = Vec::new();
        for child in kids {
            if Some(child) == body {
                continue;
            }
            match child.kind() {
                "file_redirect" => writes |= self.redirect(child, src),
                "heredoc_redirect" => writes |= self.heredoc(child, src, &mut later),
                _ => later.push(child),
            }
        }
        if let Some(body) = body {
            self.redirected_body(body, src, redirected, writes);
        }
        for part in later {
            self.walk(part, src, false);
        }
    }

    /// A `<<` redirection: its body, when the delimiter is unquoted, is
    /// expanded as bash expands it (scanned as text, since tree-sitter
    /// misses backticks there); the commands written after `<<EOF` on the
    /// same line go to `later`. Returns whether it also writes a file.
    fn heredoc<'t>(&mut self, node: Node<'t>, src: &[u8], later: &mut Vec<Node<'t>>) -> bool {
        let mut writes = false;
        let mut cursor = node.walk();
        let parts: Vec<Node> = node.named_children(&mut cursor).collect();
        let quoted = parts
            .iter()
            .find(|p| p.kind() == "heredoc_start")
            .is_some_and(|start| text(*start, src).contains(['\'', '"', '\\']));
        for part in parts {
            match part.kind() {
                "file_redirect" => writes |= self.redirect(part, src),
                "heredoc_start" | "heredoc_end" => {}
                "heredoc_body" if quoted => {}
                "heredoc_body" => self.expanded_text(&text(part, src), false, false),
                _ => later.push(part),
            }
        }
        writes
    }

    /// A backtick command substitution: its text is unescaped as bash
    /// unescapes it (`\\`, `` \` ``, `\$`, and `\"` inside double quotes)
    /// and analysed as a script of its own, so nested backticks are seen.
    fn backticks(&mut self, raw: &str) {
        let inner = raw
            .strip_prefix('`')
            .and_then(|r| r.strip_suffix('`'))
            .filter(|_| raw.len() >= 2);
        match inner {
            Some(inner) => {
                let script = unescape_backticks(inner, self.quoted);
                let quoted = std::mem::replace(&mut self.quoted, false);
                self.script(&script);
                self.quoted = quoted;
            }
            None => self.bad(format!("has an unterminated backtick (`{raw}`)")),
        }
    }

    /// A `${…}` expansion, judged on its text: one that runs code through
    /// an arithmetic subscript or offset, an indirection or a prompt
    /// expansion is unanalysable; substitutions inside it are analysed.
    fn expansion(&mut self, raw: &str) {
        if let Some(why) = expansion_runs_code(raw) {
            self.bad(format!("has the expansion `{raw}`, which {why}"));
        }
        let inner = raw.strip_prefix("${").unwrap_or(raw);
        let inner = inner.strip_suffix('}').unwrap_or(inner);
        self.expanded_text(inner, self.quoted, !self.quoted);
    }

    /// Text bash expands like the inside of double quotes (an unquoted
    /// heredoc body, the inside of `${…}`): every backtick, `$(…)`,
    /// `$((…))` and `${…}` in it is found by scanning, never trusted to
    /// the parse tree; `<(…)` and `>(…)` too where bash runs them
    /// (`process`: an unquoted `${…}`, not a heredoc body).
    fn expanded_text(&mut self, raw: &str, quoted: bool, process: bool) {
        let bytes = raw.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            let rest = &raw[i..];
            if let Some(escaped) = rest.strip_prefix('\\') {
                i += 1 + escaped.chars().next().map_or(0, char::len_utf8);
            } else if rest.starts_with('`') {
                match closing_backtick(rest) {
                    Some(end) => {
                        let was = std::mem::replace(&mut self.quoted, quoted);
                        self.backticks(&rest[..=end]);
                        self.quoted = was;
                        i += end + 1;
                    }
                    None => return self.bad(format!("has an unterminated backtick (`{rest}`)")),
                }
            } else if rest.starts_with("$((") || rest.starts_with("$[") {
                let close = if rest.starts_with("$[") { "]" } else { "))" };
                let end = rest.find(close).map_or(rest.len(), |e| e + close.len());
                if arithmetic_on_names(&rest[..end]) {
                    self.bad(format!(
                        "has arithmetic on variables (`{}`), which can run code",
                        &rest[..end]
                    ));
                }
                i += 2;
            } else if rest.starts_with("$(")
                || process && (rest.starts_with("<(") || rest.starts_with(">("))
            {
                match substitution_end(rest) {
                    Some(end) => {
                        self.script(&rest[2..end - 1]);
                        i += end;
                    }
                    None => {
                        return self.bad(format!(
                            "has a command substitution it cannot delimit (`{rest}`)"
                        ));
                    }
                }
            } else if rest.starts_with("${") {
                let end = closing_brace(rest).unwrap_or(rest.len());
                if let Some(why) = expansion_runs_code(&rest[..end]) {
                    self.bad(format!("has the expansion `{}`, which {why}", &rest[..end]));
                }
                i += 2;
            } else {
                i += rest.chars().next().map_or(1, char::len_utf8);
            }
        }
    }

    /// tree-sitter-bash hangs a trailing redirection on a whole list or
    /// pipeline (`a && b > f`), where bash applies it to the last command
    /// only; this puts it back there.
    fn redirected_body(&mut self, body: Node, src: &[u8], outer: bool, writes: bool) {
        if !matches!(body.kind(), "list" | "pipeline") {
            return self.walk(body, src, writes);
        }
        let mut cursor = body.walk();
        let kids: Vec<Node> = body
            .children(&mut cursor)
            .filter(|c| (c.is_named() && c.kind() != "comment") || c.is_error() || c.is_missing())
            .collect();
        if let Some((last, init)) = kids.split_last() {
            for kid in init {
                self.walk(*kid, src, outer);
            }
            self.redirected_body(*last, src, outer, writes);
        }
    }

    /// One `command` node. tree-sitter-bash sometimes runs a simple
    /// command on across a newline or `;` (after a pipeline of three or
    /// more stages, `a | b | c\nd > f` comes back as one command `c d`
    /// carrying the redirection); bash runs those as separate commands, so
    /// the node's children are split wherever the source between two of
    /// them holds a separator, and each part is judged on its own.
    fn command(&mut self, node: Node, src: &[u8], redirected: bool) {
        let mut cursor = node.walk();
        let kids: Vec<Node> = node.children(&mut cursor).collect();
        let mut parts: Vec<Vec<Node>> = vec![Vec::new()];
        let mut prev_end: Option<usize> = None;
        for child in kids {
            if let Some(end) = prev_end {
                match gap(&src[end..child.start_byte()]) {
                    Gap::Blank => {}
                    Gap::Separator => parts.push(Vec::new()),
                    Gap::Other => {
                        let near = text(node, src);
                        self.bad(format!("does not parse as a shell command (near `{near}`)"));
                    }
                }
            }
            prev_end = Some(child.end_byte());
            if child.is_named()
                && let Some(part) = parts.last_mut()
            {
                part.push(child);
            }
        }
        let last = parts.len().saturating_sub(1);
        for (i, part) in parts.into_iter().enumerate() {
            if i > 0 && starts_with_reserved_word(&part, src) {
                self.bad(format!(
                    "does not parse as a shell command (near `{}`)",
                    text(node, src)
                ));
            }
            // A redirection of an enclosing statement follows the last part.
            self.command_part(&part, src, redirected && i == last);
        }
    }

    fn command_part(&mut self, kids: &[Node], src: &[u8], redirected: bool) {
        let (Some(first), Some(last)) = (kids.first(), kids.last()) else {
            return;
        };
        let mut words = Vec::new();
        let mut writes = redirected;
        for child in kids.iter().copied() {
            match child.kind() {
                "variable_assignment" => self.bad(format!(
                    "sets a variable for a command (`{}`)",
                    text(child, src)
                )),
                "file_redirect" => writes |= self.redirect(child, src),
                "herestring_redirect" | "subshell" => self.children(child, src, false),
                "command_name" => match child.named_child(0) {
                    Some(name) => words.push(self.word(name, src)),
                    None => words.push(Word::Dynamic(text(child, src))),
                },
                "comment" => {}
                _ => words.push(self.word(child, src)),
            }
        }
        let source = String::from_utf8_lossy(&src[first.start_byte()..last.end_byte()]);
        let command = SimpleCommand {
            words,
            text: source.into_owned(),
            writes_file: writes,
        };
        self.simple(command);
    }

    fn simple(&mut self, command: SimpleCommand) {
        let Some(first) = command.words.first() else {
            if command.writes_file {
                self.bad("redirects output without a command");
            }
            return;
        };
        let Some(program) = first.literal().map(str::to_string) else {
            return self.bad(format!(
                "runs a command whose name is an expansion (`{}`)",
                command.text
            ));
        };
        if RESERVED_WORDS.contains(&program.as_str()) {
            return self.bad(format!(
                "has the reserved word `{program}` where the parser expected a command"
            ));
        }
        if OPAQUE_BUILTINS.contains(&program.as_str()) {
            return self.bad(format!(
                "uses `{program}`, which runs or changes code the text does not show"
            ));
        }
        let printf_option = |w: &Word| w.literal().is_none_or(|w| w.starts_with("-v"));
        if program == "printf"
            && (command.words.get(1).is_some_and(printf_option)
                || command
                    .words
                    .iter()
                    .any(|w| w.literal().is_some_and(|w| w.starts_with("-v"))))
        {
            return self.bad("uses `printf -v`, which sets a shell variable");
        }
        if let Some(why) = builtin_runs_code(&program, &command.words) {
            return self.bad(format!("uses `{}`, which {why}", command.text));
        }
        if matches!(program.as_str(), "cd" | "pushd" | "popd") {
            self.changes_dir = true;
        }
        if SHELLS.contains(&program.as_str()) && self.shell_script(&command) {
            return;
        }
        self.out.commands.push(command);
    }

    /// `bash -c SCRIPT`: analyses SCRIPT in place of the shell and returns
    /// true; false when there is no `-c` (then it is an ordinary command).
    fn shell_script(&mut self, command: &SimpleCommand) -> bool {
        let mut args = command.words.iter().skip(1);
        let mut saw_c = false;
        for word in args.by_ref() {
            match word.literal() {
                Some(w) if w.len() > 1 && !w.starts_with("--") && w.starts_with('-') => {
                    if w.contains('c') {
                        saw_c = true;
                        break;
                    }
                }
                Some(w) if w.starts_with("--") => {}
                Some(_) => return false,
                None => {
                    self.bad(format!(
                        "runs a shell with an expansion (`{}`)",
                        command.text
                    ));
                    return true;
                }
            }
        }
        if !saw_c {
            return false;
        }
        match args.next() {
            Some(Word::Literal(script)) => {
                let script = script.clone();
                self.script(&script);
            }
            _ => self.bad(format!(
                "runs a shell script that is not literal text (`{}`)",
                command.text
            )),
        }
        true
    }

    /// Checks one `file_redirect`; returns whether it writes to a file.
    fn redirect(&mut self, node: Node, src: &[u8]) -> bool {
        let op = operator(node, src);
        let dest = node.child_by_field_name("destination");
        let Some(dest) = dest else {
            return false;
        };
        let word = self.word(dest, src);
        let is_dup = matches!(op.as_str(), ">&" | "<&" | ">&-" | "<&-")
            && word
                .literal()
                .is_some_and(|w| w == "-" || w.chars().all(|c| c.is_ascii_digit()));
        if op == "<" || op == "<<<" || is_dup {
            return false;
        }
        match word {
            Word::Dynamic(t) => {
                self.bad(format!(
                    "redirects to `{t}`, which is only known when it runs"
                ));
                true
            }
            Word::Literal(target) => self.write_target(&target),
        }
    }

    /// Judges a literal redirection target: where it really leads (through
    /// symlinks, as the kernel resolves `link/..`) must be inside the
    /// project and not protected, and so must its lexical form.
    fn write_target(&mut self, target: &str) -> bool {
        if matches!(target, "/dev/null" | "/dev/stdout" | "/dev/stderr") {
            return false;
        }
        let joined = self.ctx.cwd.join(target);
        let lexical = paths::normalise(&joined);
        let real = paths::normalise(&self.ctx.real_path.resolve(&joined));
        let real_root = paths::normalise(&self.ctx.real_path.resolve(&self.ctx.project_root));
        let real_inside = real
            .strip_prefix(&real_root)
            .ok()
            .map(|rel| self.ctx.project_root.join(rel));
        let guarded = if !lexical.starts_with(&self.ctx.project_root) {
            Some(format!("writes outside the project (`{target}`)"))
        } else if real_inside.is_none() && !real.starts_with(&self.ctx.project_root) {
            Some(format!(
                "writes outside the project (`{target}` leads to `{}`)",
                real.display()
            ))
        } else if paths::is_protected(&lexical, self.ctx)
            || real_inside.is_some_and(|p| paths::is_protected(&p, self.ctx))
            || paths::is_protected(&real, self.ctx)
        {
            Some(format!("writes to the protected path `{target}`"))
        } else {
            None
        };
        if let Some(why) = guarded {
            self.bad(why);
            self.out.guarded_writes.push(real);
        }
        if Path::new(target).is_relative() {
            self.relative_write = true;
        }
        true
    }

    /// A word made of parts (`a'b'"c"`): literal when every part is and
    /// the parts cover the whole word.
    fn concatenation(&mut self, node: Node, src: &[u8], raw: String) -> Word {
        let mut cursor = node.walk();
        let kids: Vec<Node> = node.children(&mut cursor).collect();
        let mut joined = Some(String::new());
        let mut unquoted = String::new();
        let mut end = node.start_byte();
        for kid in kids {
            if kid.kind() == "word" {
                unquoted.push_str(&text(kid, src));
            } else {
                unquoted.push('\0');
            }
            let part = if kid.is_named() {
                self.word(kid, src)
            } else if text(kid, src) == "$" {
                Word::Literal("$".into())
            } else {
                Word::Dynamic(text(kid, src))
            };
            if kid.start_byte() != end {
                joined = None;
            }
            end = kid.end_byte();
            joined = joined.zip(part.literal()).map(|(j, p)| j + p);
        }
        match joined {
            Some(s) if end == node.end_byte() && !has_brace_expansion(&unquoted) => {
                Word::Literal(s)
            }
            _ => Word::Dynamic(raw),
        }
    }

    /// The word `node` stands for; walks any command substitution in it.
    fn word(&mut self, node: Node, src: &[u8]) -> Word {
        let raw = text(node, src);
        match node.kind() {
            "word" => {
                if has_unplaced_substitution(&raw) {
                    self.bad(format!(
                        "has a substitution the parser did not place (`{raw}`)"
                    ));
                    Word::Dynamic(raw)
                } else if raw.starts_with('~') || has_glob(&raw) {
                    Word::Dynamic(raw)
                } else {
                    Word::Literal(unescape(&raw))
                }
            }
            "number" => Word::Literal(raw),
            "raw_string" => Word::Literal(strip_quotes(&raw, '\'')),
            "string" => {
                let mut cursor = node.walk();
                let kids: Vec<Node> = node.named_children(&mut cursor).collect();
                let mut literal = true;
                let was = std::mem::replace(&mut self.quoted, true);
                for child in kids {
                    if child.kind() != "string_content" {
                        literal = false;
                        self.walk(child, src, false);
                    }
                }
                self.quoted = was;
                if literal {
                    Word::Literal(unescape_double(&strip_quotes(&raw, '"')))
                } else {
                    Word::Dynamic(raw)
                }
            }
            "concatenation" => self.concatenation(node, src, raw),
            _ => {
                self.walk(node, src, false);
                Word::Dynamic(raw)
            }
        }
    }
}

/// Whether the arithmetic `$(( … ))` names a variable (or expands
/// anything): plain numbers and operators are harmless.
fn arithmetic_on_names(expansion: &str) -> bool {
    let inner = expansion
        .strip_prefix("$((")
        .or_else(|| expansion.strip_prefix("$["))
        .unwrap_or(expansion);
    inner.contains(|c: char| c.is_ascii_alphabetic() || matches!(c, '_' | '$' | '`'))
}

/// Why the `${…}` expansion `raw` runs code, if it does: an arithmetic
/// array subscript or substring offset (where a variable holding
/// `a[$(cmd)]` runs `cmd`), an indirection `${!x}`, a prompt expansion
/// `${x@P}`, or a bash 5.3 `${ cmd; }`.
fn expansion_runs_code(raw: &str) -> Option<&'static str> {
    let inner = raw.strip_prefix("${")?;
    let inner = inner.strip_suffix('}').unwrap_or(inner);
    if inner.starts_with(|c: char| c.is_whitespace() || c == '|') {
        return Some("runs commands in the current shell");
    }
    let inner = match inner.strip_prefix('#') {
        Some(rest) if !rest.is_empty() => rest,
        _ => inner,
    };
    if inner.strip_prefix('!').is_some_and(|rest| !rest.is_empty()) {
        return Some("expands a variable named by another, whose subscript can run code");
    }
    let name_len = inner
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(inner.len());
    let name_len = if name_len == 0 {
        inner.chars().next().map_or(0, char::len_utf8)
    } else {
        name_len
    };
    let mut rest = &inner[name_len..];
    if let Some(sub) = rest.strip_prefix('[') {
        let end = sub.find(']').unwrap_or(sub.len());
        let index = &sub[..end];
        let number = index.trim_start_matches('-');
        if !(index == "@"
            || index == "*"
            || !number.is_empty() && number.bytes().all(|b| b.is_ascii_digit()))
        {
            return Some("evaluates its array subscript as arithmetic, which can run code");
        }
        rest = sub.get(end + 1..).unwrap_or("");
    }
    if let Some(offset) = rest.strip_prefix(':')
        && !offset.starts_with(['-', '=', '?', '+'])
        && offset.contains(|c: char| c.is_ascii_alphabetic() || matches!(c, '_' | '$' | '`'))
    {
        return Some("evaluates its offset as arithmetic, which can run code");
    }
    if rest.starts_with('@') && rest.contains('P') {
        return Some("expands its value as a prompt, which runs commands");
    }
    None
}

/// Why the builtin `program` with these words runs code the text does
/// not show, if it does: `test -v` / `[ -v ]` evaluate a subscript,
/// `wait -p` assigns one.
fn builtin_runs_code(program: &str, words: &[Word]) -> Option<&'static str> {
    let literal = |w: &Word, f: &dyn Fn(&str) -> bool| w.literal().is_some_and(f);
    match program {
        "test" | "[" => {
            let by_name = words
                .iter()
                .any(|w| literal(w, &|w| w == "-v" || w == "-R"));
            let dynamic = words.iter().any(|w| w.literal().is_none());
            let subscript = words.iter().any(|w| literal(w, &|w| w.contains('[')));
            (by_name || dynamic && subscript)
                .then_some("tests a variable by name, whose subscript can run code")
        }
        "wait" => words[1..]
            .iter()
            .any(|w| {
                w.literal()
                    .is_none_or(|w| w.starts_with('-') && w.contains('p'))
            })
            .then_some("assigns a variable by name, whose subscript can run code"),
        _ => None,
    }
}

/// Whether a `[[ … ]]` test checks a variable by name (`-v`, `-R`), whose
/// subscript is evaluated as arithmetic.
fn tests_a_variable(test: &str) -> bool {
    test.split_whitespace().any(|w| matches!(w, "-v" | "-R"))
}

/// Whether a plain word's text has a substitution the parser left in it
/// as text: an unescaped backtick, `$(`, `${` or `$[`.
fn has_unplaced_substitution(raw: &str) -> bool {
    let mut escaped = false;
    let mut prev_dollar = false;
    for c in raw.chars() {
        if escaped {
            escaped = false;
            prev_dollar = false;
            continue;
        }
        if c == '`' || (prev_dollar && matches!(c, '(' | '{' | '[')) {
            return true;
        }
        escaped = c == '\\';
        prev_dollar = c == '$';
    }
    false
}

/// Inside backticks bash removes a backslash before `$`, `` ` `` and `\\`
/// (and `"` when the backticks are inside double quotes), then parses the
/// result as a script.
fn unescape_backticks(inner: &str, quoted: bool) -> String {
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, chars.peek()) {
            ('\\', Some(&n)) if matches!(n, '$' | '`' | '\\') || (quoted && n == '"') => {
                out.push(n);
                chars.next();
            }
            _ => out.push(c),
        }
    }
    out
}

/// The byte index of the backtick closing the one `rest` starts with.
fn closing_backtick(rest: &str) -> Option<usize> {
    let mut escaped = false;
    for (i, c) in rest.char_indices().skip(1) {
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == '`' {
            return Some(i);
        }
    }
    None
}

/// Where the `${` that `rest` starts with ends (just past its `}`).
fn closing_brace(rest: &str) -> Option<usize> {
    let mut depth = 0usize;
    for (i, c) in rest.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return Some(i + 1);
                }
            }
            _ => {}
        }
    }
    None
}

/// Where the `$(…)`, `<(…)` or `>(…)` that `rest` starts with ends (just
/// past its `)`), as tree-sitter-bash delimits it.
fn substitution_end(rest: &str) -> Option<usize> {
    let mut parser = Parser::new();
    parser
        .set_language(&tree_sitter_bash::LANGUAGE.into())
        .ok()?;
    let tree = parser.parse(rest, None)?;
    let mut node = tree.root_node();
    while node.start_byte() == 0 {
        if matches!(node.kind(), "command_substitution" | "process_substitution") {
            let end = node.end_byte();
            return (rest[..end].ends_with(')') && !node.has_error()).then_some(end);
        }
        node = node.child(0)?;
    }
    None
}

/// Whether a `[[ … ]]` or `(( … ))` test evaluates its operands as
/// arithmetic (where a variable's value `a[$(cmd)]` runs `cmd`).
fn is_arithmetic_test(test: &str) -> bool {
    test.starts_with("((")
        || test
            .split_whitespace()
            .any(|w| matches!(w, "-eq" | "-ne" | "-lt" | "-le" | "-gt" | "-ge"))
}

/// How many run-on commands one script may have repaired.
const MAX_REPAIRS: usize = 256;

/// Parses `text`, working around tree-sitter-bash's run-on commands: after
/// a pipeline of two or more stages, it can take the next line's words as
/// more arguments of the pipeline's last command (upstream issue 347).
/// Bash ends a command at an unescaped newline, and `;` before that
/// newline means the same to bash, so a `;` is put there and the text
/// parsed again; the grammar reads `;` right. Returns the tree and the
/// text it is a tree of. Run-ons it cannot repair this way are split by
/// [`Walker::command`].
fn parse_without_run_ons(parser: &mut Parser, text: &str) -> Option<(tree_sitter::Tree, String)> {
    let mut text = text.to_string();
    for _ in 0..MAX_REPAIRS {
        let tree = parser.parse(&text, None)?;
        match first_run_on_newline(tree.root_node(), text.as_bytes()) {
            Some(at) => text.insert(at, ';'),
            None => return Some((tree, text)),
        }
    }
    let tree = parser.parse(&text, None)?;
    Some((tree, text))
}

/// The byte offset of the first unescaped newline between two words of one
/// `command` node, when the text between them is only blanks and newlines.
fn first_run_on_newline(node: Node, src: &[u8]) -> Option<usize> {
    if node.kind() == "command" {
        let mut cursor = node.walk();
        let kids: Vec<Node> = node.children(&mut cursor).collect();
        for pair in kids.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            if a.kind() == "comment" {
                continue;
            }
            let between = &src[a.end_byte()..b.start_byte()];
            if matches!(gap(between), Gap::Separator)
                && between
                    .iter()
                    .all(|c| matches!(c, b' ' | b'\t' | b'\r' | b'\n' | b'\\'))
            {
                let mut i = 0;
                while i < between.len() {
                    match between[i] {
                        b'\\' => i += 2,
                        b'\n' => return Some(a.end_byte() + i),
                        _ => i += 1,
                    }
                }
            }
        }
    }
    let mut cursor = node.walk();
    let kids: Vec<Node> = node.children(&mut cursor).collect();
    kids.into_iter().find_map(|k| first_run_on_newline(k, src))
}

/// What stands between two children of a `command` node.
enum Gap {
    /// Blanks and line continuations: the words belong together.
    Blank,
    /// A newline, `;`, `&` or `|`: bash starts a new command there.
    Separator,
    /// Anything else: the tree does not match the text.
    Other,
}

fn gap(between: &[u8]) -> Gap {
    let mut separated = false;
    let mut i = 0;
    while i < between.len() {
        match between[i] {
            b'\\' if between.get(i + 1) == Some(&b'\n') => i += 1,
            b' ' | b'\t' | b'\r' => {}
            b'\n' | b';' | b'&' | b'|' => separated = true,
            _ => return Gap::Other,
        }
        i += 1;
    }
    if separated {
        Gap::Separator
    } else {
        Gap::Blank
    }
}

/// Whether a part split off a run-on command starts with a word bash
/// would read as syntax, not as a program name.
fn starts_with_reserved_word(kids: &[Node], src: &[u8]) -> bool {
    const RESERVED: &[&str] = &[
        "if", "then", "else", "elif", "fi", "for", "while", "until", "do", "done", "case", "esac",
        "function", "select", "time", "coproc", "{", "}", "!", "[[", "]]", "in",
    ];
    kids.first()
        .is_some_and(|k| RESERVED.contains(&text(*k, src).as_str()))
}

fn text(node: Node, src: &[u8]) -> String {
    String::from_utf8_lossy(&src[node.byte_range()]).into_owned()
}

/// The operator of a redirection: its first anonymous token.
fn operator(node: Node, src: &[u8]) -> String {
    let mut cursor = node.walk();
    node.children(&mut cursor)
        .find(|c| !c.is_named())
        .map(|c| text(c, src))
        .unwrap_or_default()
}

fn has_glob(word: &str) -> bool {
    let mut escaped = false;
    for c in word.chars() {
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if matches!(c, '*' | '?' | '[' | '$' | '`') {
            return true;
        }
    }
    has_brace_expansion(word)
}

/// Whether `word` has a brace expansion (`{a,b}`, `{1..3}`); `{}` alone
/// (as in `find -exec … {}`) is literal.
fn has_brace_expansion(word: &str) -> bool {
    let Some(open) = word.find('{') else {
        return false;
    };
    word[open..].find('}').is_some_and(|close| {
        let inside = &word[open + 1..open + close];
        inside.contains(',') || inside.contains("..")
    })
}

fn strip_quotes(raw: &str, quote: char) -> String {
    raw.strip_prefix(quote)
        .and_then(|s| s.strip_suffix(quote))
        .unwrap_or(raw)
        .to_string()
}

fn unescape(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('\n') | None => {}
                Some(next) => out.push(next),
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn unescape_double(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.peek() {
                Some(&n) if matches!(n, '"' | '\\' | '$' | '`') => {
                    out.push(n);
                    chars.next();
                }
                Some('\n') => {
                    chars.next();
                }
                _ => out.push('\\'),
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx() -> Context {
        Context::new("/proj", true)
    }

    fn programs(command: &str) -> Vec<String> {
        let a = analyse(command, &ctx());
        assert!(a.is_analysable(), "{command}: {:?}", a.unanalysable);
        a.commands
            .iter()
            .map(|c| c.literal_words().unwrap_or_default().join(" "))
            .collect()
    }

    fn why(command: &str) -> Vec<String> {
        let a = analyse(command, &ctx());
        assert!(!a.is_analysable(), "{command} was analysable: {a:?}");
        a.unanalysable
    }

    #[test]
    fn splits_every_kind_of_list() {
        assert_eq!(
            programs("a 1; b && c || d | e & f\ng"),
            ["a 1", "b", "c", "d", "e", "f", "g"]
        );
        assert_eq!(programs("(a; b) && { c; }"), ["a", "b", "c"]);
        assert_eq!(programs("if a; then b; else c; fi"), ["a", "b", "c"]);
        assert_eq!(programs("while a; do b; done"), ["a", "b"]);
        assert_eq!(programs("for f in x y; do b; done"), ["b"]);
        assert_eq!(programs("case x in y) a;; esac"), ["a"]);
        assert_eq!(programs("! a"), ["a"]);
    }

    #[test]
    fn a_command_never_runs_on_past_a_newline_or_semicolon() {
        // tree-sitter-bash joins the last stage of a 3+ stage pipeline
        // with the next line when that line is redirected (issue 23).
        for sep in ["\n", ";", " ;\n", "\n\n", " # note\n"] {
            let command = format!("ls | wc | cargo test{sep}rm -rf /x > f");
            let a = analyse(&command, &ctx());
            let got: Vec<(String, bool)> = a
                .commands
                .iter()
                .map(|c| {
                    (
                        c.literal_words().unwrap_or_default().join(" "),
                        c.writes_file,
                    )
                })
                .collect();
            assert_eq!(
                got,
                [
                    ("ls".to_string(), false),
                    ("wc".to_string(), false),
                    ("cargo test".to_string(), false),
                    ("rm -rf /x".to_string(), true),
                ],
                "{command:?}"
            );
        }
        assert_eq!(programs("a | b | c 1 \\\n 2\nd"), ["a", "b", "c 1 2", "d"]);
    }

    #[test]
    fn finds_commands_inside_words() {
        let a = analyse("echo $(rm x) `touch y` <(mk z) \"$(in q)\"", &ctx());
        let names: Vec<_> = a.commands.iter().filter_map(|c| c.program()).collect();
        for name in ["rm", "touch", "mk", "in", "echo"] {
            assert!(names.contains(&name), "{name} missing from {names:?}");
        }
        let heredoc = analyse("cat <<EOF\n$(rm -rf x)\nEOF\n", &ctx());
        let names: Vec<_> = heredoc
            .commands
            .iter()
            .filter_map(|c| c.program())
            .collect();
        assert_eq!(names, ["rm", "cat"]);
        let quoted = analyse("cat <<'EOF'\n$(rm -rf x)\nEOF\n", &ctx());
        assert_eq!(quoted.commands.len(), 1);
    }

    #[test]
    fn resolves_quotes_and_marks_expansions() {
        let a = analyse(r#"grep 'a b' "c d" e\ f "$HOME" *.rs ~/x"#, &ctx());
        let words = &a.commands[0].words;
        assert_eq!(words[1], Word::Literal("a b".into()));
        assert_eq!(words[2], Word::Literal("c d".into()));
        assert_eq!(words[3], Word::Literal("e f".into()));
        assert!(matches!(words[4], Word::Dynamic(_)));
        assert!(matches!(words[5], Word::Dynamic(_)));
        assert!(matches!(words[6], Word::Dynamic(_)));
        let b = analyse(r#"echo a'b'"c" '$x' x\'y a$"#, &ctx());
        let words = &b.commands[0].words;
        assert_eq!(words[1], Word::Literal("abc".into()));
        assert_eq!(words[2], Word::Literal("$x".into()));
        assert_eq!(words[3], Word::Literal("x'y".into()));
        assert_eq!(words[4], Word::Literal("a$".into()));
        let c = analyse("find . -exec grep x {} ; echo {a,b} $((1 + 2))", &ctx());
        assert!(c.is_analysable(), "{c:?}");
        assert_eq!(c.commands[0].words[5], Word::Literal("{}".into()));
        assert!(matches!(c.commands[1].words[1], Word::Dynamic(_)), "{c:?}");
    }

    #[test]
    fn unanalysable_constructs_are_flagged() {
        for command in [
            "eval ls",
            "sh -c \"$x\"",
            "bash -c $(cat f)",
            "source x.sh",
            ". x.sh",
            "$CMD arg",
            "$(which ls) x",
            "PAGER=x git log",
            "env X=1 git log",
            "exec ls",
            "f() { ls; }",
            "X=1",
            "export X=1",
            "echo hi > /etc/passwd",
            "echo hi > ../outside",
            "echo hi > $OUT",
            "echo x >> .git/config",
            "ls && (",
            "if ls; then cat x",
            "echo \"unterminated",
            "for PATH in /tmp; do ls; done",
            "cd sub && echo x > f",
            "echo $((x + 1))",
            "[[ $n -gt 1 ]] && ls",
            "((n)) && ls",
            "while ((n)); do ls; done",
            "echo ${a[i]}",
            "echo ${#a[i]}",
            "echo ${x:i:1}",
            "echo ${a[@]:i}",
            "echo ${!x}",
            "echo ${x@P}",
            "echo \"${x@P}\"",
            "[[ -v x ]]",
            "test -v x",
            "[ -R x ]",
            "wait -p x",
            "getopts ab x",
            "printf $fmt x",
            "printf -vx y",
            "! if ls; then ls; fi",
            "cat <<EOF\n$((n))\nEOF",
            "cat <<EOF\n${a[i]}\nEOF",
        ] {
            why(command);
        }
    }

    /// Every command of `command`, as words joined by spaces.
    fn all(command: &str) -> Vec<String> {
        analyse(command, &ctx())
            .commands
            .iter()
            .map(|c| c.literal_words().unwrap_or_default().join(" "))
            .collect()
    }

    #[test]
    fn backticks_are_unescaped_and_reparsed_as_bash_does() {
        for command in [
            "echo \"`echo \\`touch y\\``\"",
            "echo `echo \\`touch y\\``",
            "echo \"`echo \\\"\\`touch y\\`\\\"`\"",
            "echo `echo \\`echo \\\\\\`touch y\\\\\\`\\``",
            "echo ${x:-`touch y`}",
            "echo \"${x:-`touch y`}\"",
            "cat <<EOF\n`touch y`\nEOF",
            "cat <<EOF\na ${x:-`touch y`} b\nEOF",
            "cat <<EOF | wc\n`echo \\`touch y\\``\nEOF",
            "cat <<-EOF\n\t$(touch y)\n\tEOF",
            "echo \"$(cat <<EOF\n`touch y`\nEOF\n)\"",
            "echo ${x:-<(touch y)}",
            "echo ${x:->(touch y)}",
            "echo \"$( echo ${x:-<(touch y)} )\"",
            "echo \"$( echo ${x:-`touch y`} )\"",
        ] {
            assert!(
                all(command).contains(&"touch y".to_string()),
                "{command:?}: {:?}",
                analyse(command, &ctx())
            );
        }
        // Escaped outside backticks, or quoted, a backtick is literal.
        assert_eq!(programs("echo \\`touch y\\`"), ["echo `touch y`"]);
        assert_eq!(programs("echo '`touch y`'"), ["echo `touch y`"]);
        assert_eq!(programs("cat <<'EOF'\n`touch y`\nEOF"), ["cat"]);
        assert_eq!(programs("cat <<\\EOF\n`touch y`\nEOF"), ["cat"]);
        assert_eq!(programs("echo `echo \\`ls\\``")[0], "ls");
    }

    #[test]
    fn redirect_targets_are_resolved_through_the_callers_real_path() {
        let mut ctx = ctx();
        // `/proj/out` is a link to `/elsewhere`; `/proj/deep` to `/elsewhere/d`.
        ctx.real_path = crate::RealPath::new(|p: &Path| {
            let s = p.to_string_lossy();
            let s = s
                .replace("/proj/out", "/elsewhere")
                .replace("/proj/deep", "/elsewhere/d");
            paths::normalise(Path::new(&s))
        });
        let a = analyse("echo x > out/f; echo x > deep/../g; echo x > src/h", &ctx);
        assert_eq!(
            a.guarded_writes,
            [PathBuf::from("/elsewhere/f"), PathBuf::from("/elsewhere/g")],
            "{a:?}"
        );
        assert_eq!(a.unanalysable.len(), 2, "{a:?}");
        let inside = analyse("echo x > src/h", &ctx);
        assert!(inside.is_analysable(), "{inside:?}");
    }

    #[test]
    fn shell_c_with_literal_script_is_analysed() {
        assert_eq!(programs("bash -c 'ls; cargo test'"), ["ls", "cargo test"]);
        assert_eq!(programs("sh -ec \"git status\""), ["git status"]);
        assert_eq!(programs("bash script.sh"), ["bash script.sh"]);
    }

    #[test]
    fn redirections_inside_the_project_are_writes() {
        let a = analyse("cargo test > out.txt 2>&1; ls 2>/dev/null", &ctx());
        assert!(a.is_analysable(), "{a:?}");
        assert!(a.commands[0].writes_file);
        assert!(!a.commands[1].writes_file);
        let b = analyse("{ ls; pwd; } > listing", &ctx());
        assert!(b.commands.iter().all(|c| c.writes_file));
        let c = analyse("ls && cargo test > out | wc > x", &ctx());
        let writes: Vec<bool> = c.commands.iter().map(|c| c.writes_file).collect();
        assert_eq!(writes, [false, true, true], "{c:?}");
        let d = analyse("ls | cargo test > out", &ctx());
        let writes: Vec<bool> = d.commands.iter().map(|c| c.writes_file).collect();
        assert_eq!(writes, [false, true], "{d:?}");
    }
}
