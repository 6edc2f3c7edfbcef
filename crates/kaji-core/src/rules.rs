//! Rule files: the user's and the project's standing instructions, found on
//! disk and put into the system prompt.
//!
//! [`RuleFiles::discover`] looks, in this order (the order they appear in
//! the system prompt, so later, more specific rules come last):
//!
//! 1. global rules: every `*.md` file directly in `$KAJI_HOME/rules/`,
//!    sorted by file name;
//! 2. the user's Claude Code memory, `~/.claude/CLAUDE.md`;
//! 3. project rules: every directory from the repository root (the nearest
//!    directory above the working directory holding `.git`) down to the
//!    working directory — only the working directory outside a repository
//!    — and in each: `AGENTS.md`, `CLAUDE.md`, `.claude/CLAUDE.md`,
//!    `CLAUDE.local.md` (scope `local`), then `.clinerules` (a file, or a
//!    directory whose `*.md` files are taken sorted by name).
//!
//! A rule file's `@path` words (outside code spans and code blocks) import
//! another file, as Claude Code's memory imports do: relative to the
//! importing file, or `~/…` from the home directory; each imported file
//! follows its importer, up to [`MAX_IMPORT_DEPTH`] hops. An import that is
//! missing, outside the allowed roots (the repository, `~/.claude`,
//! `$KAJI_HOME`), a cycle, past the depth limit or binary is refused with a
//! warning naming both files.
//!
//! A file reached twice (a symlink `CLAUDE.md -> AGENTS.md`) is read once.
//! Each file is capped at [`RULE_FILE_CAP_BYTES`]; a longer one is cut with
//! a note. Empty files are skipped. A file that cannot be read or is not
//! UTF-8 is skipped with a warning. This module only reads: it never writes
//! or creates a rule file, and never follows `.clinerules` into
//! subdirectories.

use std::collections::HashSet;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::Serialize;

/// The most of one rule file that goes into the system prompt: 64 KiB.
pub const RULE_FILE_CAP_BYTES: usize = 64 * 1024;

/// The rule file names looked for in each project directory, in order.
/// `.clinerules` may also be a directory of `*.md` files.
pub const PROJECT_RULE_NAMES: [&str; 5] = [
    "AGENTS.md",
    "CLAUDE.md",
    ".claude/CLAUDE.md",
    "CLAUDE.local.md",
    ".clinerules",
];

/// How many hops of `@path` imports are followed (Claude Code's limit).
pub const MAX_IMPORT_DEPTH: usize = 5;

/// Where a rule file comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RuleScope {
    /// `$KAJI_HOME/rules/`.
    Global,
    /// `~/.claude/CLAUDE.md`.
    User,
    /// The repository or working directory.
    Project,
    /// `CLAUDE.local.md`: the user's own notes for this project.
    Local,
}

impl RuleScope {
    /// `global` or `project`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Global => "global",
            Self::User => "user",
            Self::Project => "project",
            Self::Local => "local",
        }
    }
}

/// One rule file as it goes into the system prompt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RuleFile {
    /// The file's path as found (not canonicalized).
    pub path: PathBuf,
    /// Global or project.
    pub scope: RuleScope,
    /// The text included (at most [`RULE_FILE_CAP_BYTES`] bytes).
    pub text: String,
    /// The file's size on disk, in bytes.
    pub size: u64,
    /// Whether the text was cut at the cap.
    pub truncated: bool,
    /// The rule file whose `@path` imported it, if it was imported.
    pub imported_by: Option<PathBuf>,
}

/// The rule files that apply to a working directory, in prompt order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RuleFiles {
    /// The files, in the order they go into the system prompt.
    pub files: Vec<RuleFile>,
    /// Files that were skipped (unreadable, not UTF-8), one message each
    /// naming the file.
    pub warnings: Vec<String>,
}

/// Where imports may come from, and the chain of importers.
struct Walk {
    home: Option<PathBuf>,
    roots: Vec<PathBuf>,
    seen: HashSet<PathBuf>,
}

impl RuleFiles {
    /// Finds the rule files for a task working in `cwd`, with global rules
    /// from `kaji_home/rules/` and the user's from `$HOME/.claude/`. Never
    /// fails: problems become [`RuleFiles::warnings`].
    pub fn discover(kaji_home: &Path, cwd: &Path) -> Self {
        let home = std::env::var_os("HOME").map(PathBuf::from);
        Self::discover_with_home(kaji_home, cwd, home.as_deref())
    }

    /// As [`RuleFiles::discover`], with the home directory given.
    pub fn discover_with_home(kaji_home: &Path, cwd: &Path, home: Option<&Path>) -> Self {
        let mut found = Self::default();
        let dirs = project_dirs(cwd);
        let mut roots: Vec<PathBuf> = vec![kaji_home.to_path_buf()];
        roots.extend(dirs.first().cloned());
        roots.extend(home.map(|h| h.join(".claude")));
        let mut walk = Walk {
            home: home.map(Path::to_path_buf),
            roots: roots
                .iter()
                .map(|r| r.canonicalize().unwrap_or_else(|_| r.clone()))
                .collect(),
            seen: HashSet::new(),
        };

        let global_dir = kaji_home.join("rules");
        for path in markdown_files_in(&global_dir, &mut found.warnings) {
            found.add(path, RuleScope::Global, &mut walk, &[]);
        }
        if let Some(home) = home {
            let user = home.join(".claude").join("CLAUDE.md");
            if user.is_file() {
                found.add(user, RuleScope::User, &mut walk, &[]);
            }
        }

        for dir in dirs {
            for name in PROJECT_RULE_NAMES {
                let path = dir.join(name);
                let scope = if name == "CLAUDE.local.md" {
                    RuleScope::Local
                } else {
                    RuleScope::Project
                };
                if name == ".clinerules" && path.is_dir() {
                    for file in markdown_files_in(&path, &mut found.warnings) {
                        found.add(file, scope, &mut walk, &[]);
                    }
                } else if path.is_file() {
                    found.add(path, scope, &mut walk, &[]);
                }
            }
        }
        found
    }

    /// Adds the file at `path` (imported through `chain`, outermost first)
    /// and then what it imports.
    fn add(&mut self, path: PathBuf, scope: RuleScope, walk: &mut Walk, chain: &[PathBuf]) {
        let key = path.canonicalize().unwrap_or_else(|_| path.clone());
        if !walk.seen.insert(key.clone()) {
            return;
        }
        let (text, size, truncated) = match read_capped(&path) {
            Ok(read) if read.0.contains('\0') => {
                self.warnings.push(format!(
                    "skipped rule file {}: a binary file",
                    path.display()
                ));
                return;
            }
            Ok(read) => read,
            Err(reason) => {
                self.warnings
                    .push(format!("skipped rule file {}: {reason}", path.display()));
                return;
            }
        };
        if !text.trim().is_empty() {
            self.files.push(RuleFile {
                path: path.clone(),
                scope,
                text: text.clone(),
                size,
                truncated,
                imported_by: chain.last().cloned(),
            });
        }
        let mut chain = chain.to_vec();
        chain.push(path.clone());
        for import in imports(&text) {
            self.import(&import, &path, &key, scope, walk, &chain);
        }
    }

    /// Follows one `@import` of `from` (whose canonical path is `from_key`).
    fn import(
        &mut self,
        import: &str,
        from: &Path,
        from_key: &Path,
        scope: RuleScope,
        walk: &mut Walk,
        chain: &[PathBuf],
    ) {
        let refuse = |why: String| format!("import @{import} in {}: {why}", from.display());
        let target = match (import.strip_prefix("~/"), &walk.home) {
            (Some(rest), Some(home)) => home.join(rest),
            (Some(_), None) => {
                self.warnings
                    .push(refuse("no home directory is known".into()));
                return;
            }
            (None, _) => from_key.parent().unwrap_or(Path::new("/")).join(import),
        };
        let Ok(real) = target.canonicalize() else {
            if import.contains('/') || import.contains('.') {
                self.warnings
                    .push(refuse("no such file; not imported".into()));
            }
            return;
        };
        if !real.is_file() {
            self.warnings
                .push(refuse("not a file; not imported".into()));
            return;
        }
        let chain_keys: Vec<PathBuf> = chain
            .iter()
            .map(|p| p.canonicalize().unwrap_or_else(|_| p.clone()))
            .collect();
        if chain_keys.contains(&real) {
            self.warnings
                .push(refuse("an import cycle; not imported again".into()));
            return;
        }
        if chain.len() > MAX_IMPORT_DEPTH {
            self.warnings.push(refuse(format!(
                "deeper than {MAX_IMPORT_DEPTH} imports; not imported"
            )));
            return;
        }
        if !walk.roots.iter().any(|root| real.starts_with(root)) {
            self.warnings.push(refuse(
                "outside the repository, ~/.claude and $KAJI_HOME; not imported".into(),
            ));
            return;
        }
        self.add(real, scope, walk, chain);
    }

    /// Whether no rule file was found.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// The system prompt section with every rule file, each under its path
    /// as a header, or `None` when there are none.
    pub fn to_system_section(&self) -> Option<String> {
        if self.files.is_empty() {
            return None;
        }
        let mut out = String::from(
            "# Rules\n\nThe user and the project gave these standing instructions. Follow them. \
They are listed from the most general (global rules, then the repository root) to the most \
specific (the working directory); when two disagree, the later one wins.\n",
        );
        for file in &self.files {
            let imported = match &file.imported_by {
                Some(by) => format!(", imported by {}", by.display()),
                None => String::new(),
            };
            out.push_str(&format!(
                "\n## {} ({} rules{imported})\n\n",
                file.path.display(),
                file.scope.as_str()
            ));
            out.push_str(file.text.trim_end());
            out.push('\n');
            if file.truncated {
                out.push_str(&format!(
                    "\n[This file is {} bytes; only its first {} bytes are included.]\n",
                    file.size, RULE_FILE_CAP_BYTES
                ));
            }
        }
        Some(out)
    }
}

/// The `@path` imports of a rule file's text: outside code blocks and
/// code spans, in order.
pub fn imports(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced {
            out.extend(crate::commands::at_mentions(line));
        }
    }
    out
}

/// The directories whose rule files apply, from the repository root down
/// to `cwd` (only `cwd` outside a repository).
fn project_dirs(cwd: &Path) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    for dir in cwd.ancestors() {
        dirs.push(dir.to_path_buf());
        if dir.join(".git").exists() {
            dirs.reverse();
            return dirs;
        }
    }
    vec![cwd.to_path_buf()]
}

/// The `*.md` files directly in `dir`, sorted by name. A missing directory
/// is empty; an unreadable one is a warning.
fn markdown_files_in(dir: &Path, warnings: &mut Vec<String>) -> Vec<PathBuf> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
        Err(e) => {
            if dir.exists() {
                warnings.push(format!("skipped rule directory {}: {e}", dir.display()));
            }
            return Vec::new();
        }
    };
    let mut files: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|ext| ext == "md") && p.is_file())
        .collect();
    files.sort();
    files
}

/// Reads at most [`RULE_FILE_CAP_BYTES`] of `path` as UTF-8. Returns the
/// text, the size on disk and whether it was cut.
fn read_capped(path: &Path) -> Result<(String, u64, bool), String> {
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let size = file.metadata().map_err(|e| e.to_string())?.len();
    let mut bytes = Vec::new();
    file.take(RULE_FILE_CAP_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| e.to_string())?;
    let truncated = bytes.len() > RULE_FILE_CAP_BYTES;
    bytes.truncate(RULE_FILE_CAP_BYTES);
    let text = match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) => {
            let utf8 = e.utf8_error();
            // A cut in the middle of a character is not the file's fault.
            if truncated && utf8.error_len().is_none() {
                let valid = utf8.valid_up_to();
                let mut bytes = e.into_bytes();
                bytes.truncate(valid);
                String::from_utf8(bytes).map_err(|e| e.to_string())?
            } else {
                return Err(format!(
                    "not valid UTF-8 (invalid byte at offset {})",
                    utf8.valid_up_to()
                ));
            }
        }
    };
    Ok((text, size, truncated))
}
