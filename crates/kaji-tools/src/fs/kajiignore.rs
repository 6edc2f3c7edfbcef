//! `.kajiignore`: files the user keeps away from kaji's file tools.
//!
//! The file uses gitignore syntax. It is read from the working directory and
//! from the repository root (the nearest ancestor of the working directory
//! that holds `.git`); where both exist, the working directory's file is the
//! deeper one and takes precedence, as with nested `.gitignore` files (a
//! `!rule` there can re-admit what the root file excludes). `Read`, `Write`
//! and `Edit` refuse matching paths; `Glob` and `Grep` skip them.
//!
//! A file is judged by its identity too: a hard link (or any other path)
//! to an excluded file is excluded as well. Only files with more than one
//! link can have another path, so only for those are the excluded files
//! looked up (once per matcher, by walking the ignore files' directories).
//!
//! This matcher only answers questions: it never reads the contents of the
//! files it judges, and a path outside the directory of a `.kajiignore` is
//! simply not matched by it (never a panic).

use std::collections::HashMap;
use std::fmt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use ignore::Match;
use ignore::gitignore::{Gitignore, GitignoreBuilder};

/// The name of the ignore file.
pub const KAJIIGNORE_FILE: &str = ".kajiignore";

/// The rule of a `.kajiignore` file that excludes a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IgnoreRule {
    /// The `.kajiignore` file holding the rule.
    pub file: PathBuf,
    /// The rule's 1-based line number in that file.
    pub line: usize,
    /// The rule as written.
    pub rule: String,
}

impl fmt::Display for IgnoreRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "rule `{}` (line {} of {})",
            self.rule,
            self.line,
            self.file.display()
        )
    }
}

/// The `.kajiignore` rules in force for one working directory.
///
/// Load it once per tool call with [`KajiIgnore::load`]; it is cheap (at most
/// two small files) and always reflects the files as they are now.
#[derive(Debug, Clone, Default)]
pub struct KajiIgnore {
    /// Deepest first: the working directory's file, then the root's.
    files: Vec<IgnoreFile>,
    warnings: Vec<String>,
    /// The excluded files with more than one link, by (device, inode):
    /// found on the first question about a multiply-linked file.
    linked: Arc<OnceLock<LinkedExcluded>>,
}

/// How many entries the identity walk visits at most; past it, a
/// multiply-linked file cannot be cleared and counts as excluded.
const MAX_IDENTITY_WALK: usize = 200_000;

#[derive(Debug, Default)]
struct LinkedExcluded {
    by_identity: HashMap<(u64, u64), IgnoreRule>,
    /// The walk stopped at [`MAX_IDENTITY_WALK`] entries.
    incomplete: bool,
}

#[derive(Debug, Clone)]
struct IgnoreFile {
    path: PathBuf,
    /// The directory holding the file, as reached from the working directory.
    root: PathBuf,
    /// The same directory with symlinks resolved, when that differs.
    real_root: Option<PathBuf>,
    matcher: Gitignore,
    /// (line number, rule as written) of every rule, to name it in messages.
    lines: Vec<(usize, String)>,
}

impl KajiIgnore {
    /// Reads `.kajiignore` in `cwd` and in its repository root. A file that
    /// cannot be read or has invalid rules does not fail the load: the bad
    /// parts are skipped and described in [`KajiIgnore::warnings`].
    pub fn load(cwd: &Path) -> Self {
        let cwd = super::paths::absolute(cwd);
        let mut dirs = vec![cwd.to_path_buf()];
        if let Some(root) = repository_root(&cwd)
            && root != cwd
        {
            dirs.push(root);
        }
        let mut out = Self::default();
        for dir in dirs {
            let path = dir.join(KAJIIGNORE_FILE);
            let text = match std::fs::read(&path) {
                Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => {
                    out.warnings.push(format!(
                        "{} could not be read ({e}); its rules are not applied",
                        path.display()
                    ));
                    continue;
                }
            };
            let mut builder = GitignoreBuilder::new(&dir);
            let mut lines = Vec::new();
            for (i, line) in text.lines().enumerate() {
                if let Err(e) = builder.add_line(Some(path.clone()), line) {
                    out.warnings.push(format!(
                        "line {} of {} is not a valid rule and was skipped: {e}",
                        i + 1,
                        path.display()
                    ));
                    continue;
                }
                lines.push((i + 1, line.trim().to_string()));
            }
            let matcher = match builder.build() {
                Ok(m) => m,
                Err(e) => {
                    out.warnings.push(format!(
                        "{} could not be compiled ({e}); its rules are not applied",
                        path.display()
                    ));
                    continue;
                }
            };
            let real_root = dir.canonicalize().ok().filter(|r| *r != dir);
            out.files.push(IgnoreFile {
                path,
                root: dir,
                real_root,
                matcher,
                lines,
            });
        }
        out
    }

    /// Whether no rules are in force.
    pub fn is_empty(&self) -> bool {
        self.files.iter().all(|f| f.matcher.is_empty())
    }

    /// Problems met while loading (unreadable files, invalid rules), to be
    /// passed on to the model as notes.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// The existing paths below `root` that these rules exclude, for the
    /// sandbox to cover: an excluded directory is listed once and not
    /// entered; `.git` is not entered. At most `limit` entries are visited;
    /// `None` when the walk did not finish (the caller must not pretend).
    pub fn excluded_paths(&self, root: &Path, limit: usize) -> Option<Vec<PathBuf>> {
        if self.is_empty() {
            return Some(Vec::new());
        }
        let mut found = Vec::new();
        let mut pending = vec![super::paths::absolute(root).to_path_buf()];
        let mut visited = 0usize;
        while let Some(dir) = pending.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                visited += 1;
                if visited > limit {
                    return None;
                }
                let path = entry.path();
                let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
                if self.excluded_as(&path, is_dir, false).is_some() {
                    found.push(path);
                } else if is_dir && entry.file_name() != ".git" {
                    pending.push(path);
                }
            }
        }
        found.sort();
        Some(found)
    }

    /// The rule excluding the absolute `path` (or one of its parent
    /// directories), if any. Both the path as given and, when it exists, the
    /// path with symlinks resolved are checked, so a symlink does not smuggle
    /// an excluded file past the rules.
    pub fn excluded(&self, path: &Path, is_dir: bool) -> Option<IgnoreRule> {
        if self.is_empty() {
            return None;
        }
        if let Some(rule) = self.excluded_as(path, is_dir, false) {
            return Some(rule);
        }
        let real = super::paths::real_path(path);
        if real != path
            && let Some(rule) = self.excluded_as(&real, is_dir, true)
        {
            return Some(rule);
        }
        if is_dir {
            return None;
        }
        std::fs::metadata(path)
            .ok()
            .and_then(|meta| self.excluded_identity(&meta))
    }

    /// The rule excluding another path of the same file, when the file
    /// `meta` describes has more than one link (a hard link to an
    /// excluded file).
    pub fn excluded_identity(&self, meta: &std::fs::Metadata) -> Option<IgnoreRule> {
        if self.is_empty() || !meta.is_file() || meta.nlink() < 2 {
            return None;
        }
        let linked = self.linked.get_or_init(|| self.find_linked());
        if let Some(rule) = linked.by_identity.get(&(meta.dev(), meta.ino())) {
            return Some(rule.clone());
        }
        linked.incomplete.then(|| IgnoreRule {
            file: self.files[0].path.clone(),
            line: 0,
            rule: format!(
                "(a file with several hard links, which cannot be checked against the excluded files: the tree has more than {MAX_IDENTITY_WALK} entries)"
            ),
        })
    }

    /// Walks the directories of the ignore files for excluded files with
    /// more than one link. Symlinks are not followed; `.git` is skipped.
    fn find_linked(&self) -> LinkedExcluded {
        let mut out = LinkedExcluded::default();
        let mut seen = 0usize;
        let mut stack: Vec<PathBuf> = self.files.iter().map(|f| f.root.clone()).collect();
        stack.dedup();
        while let Some(dir) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                seen += 1;
                if seen > MAX_IDENTITY_WALK {
                    out.incomplete = true;
                    return out;
                }
                let path = entry.path();
                let Ok(meta) = std::fs::symlink_metadata(&path) else {
                    continue;
                };
                if meta.is_dir() {
                    if entry.file_name() != ".git" {
                        stack.push(path);
                    }
                    continue;
                }
                if !meta.is_file() || meta.nlink() < 2 {
                    continue;
                }
                // Rules on a parent directory count (`secrets/`).
                if let Some(rule) = self.excluded_as(&path, false, false) {
                    out.by_identity.insert((meta.dev(), meta.ino()), rule);
                }
            }
        }
        out
    }

    /// Whether a path met while walking a tree is excluded. Only the path
    /// itself is checked, not its parents: the walk prunes excluded
    /// directories before it reaches their contents.
    pub fn excludes_entry(&self, path: &Path, is_dir: bool) -> bool {
        if self.excludes_entry_path(path, is_dir) {
            return true;
        }
        !is_dir
            && !self.is_empty()
            && std::fs::symlink_metadata(path)
                .ok()
                .and_then(|meta| self.excluded_identity(&meta))
                .is_some()
    }

    fn excludes_entry_path(&self, path: &Path, is_dir: bool) -> bool {
        for file in &self.files {
            if !path.starts_with(&file.root) {
                continue;
            }
            match file.matcher.matched(path, is_dir) {
                Match::Ignore(_) => return true,
                Match::Whitelist(_) => return false,
                Match::None => {}
            }
        }
        false
    }

    fn excluded_as(&self, path: &Path, is_dir: bool, real: bool) -> Option<IgnoreRule> {
        for file in &self.files {
            let root = if real {
                file.real_root.as_ref().unwrap_or(&file.root)
            } else {
                &file.root
            };
            let Ok(relative) = path.strip_prefix(root) else {
                continue;
            };
            if relative.as_os_str().is_empty() {
                continue;
            }
            match file.matcher.matched_path_or_any_parents(relative, is_dir) {
                Match::Ignore(glob) => {
                    let rule = glob.original().to_string();
                    let line = file
                        .lines
                        .iter()
                        .find(|(_, r)| *r == rule)
                        .map_or(0, |(n, _)| *n);
                    return Some(IgnoreRule {
                        file: file.path.clone(),
                        line,
                        rule,
                    });
                }
                Match::Whitelist(_) => return None,
                Match::None => {}
            }
        }
        None
    }
}

/// The nearest ancestor of `cwd` (or `cwd` itself) that holds `.git` (a
/// directory, or a file in worktrees and submodules).
pub(crate) fn repository_root(cwd: &Path) -> Option<PathBuf> {
    cwd.ancestors()
        .find(|dir| dir.join(".git").symlink_metadata().is_ok())
        .map(Path::to_path_buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn names_file_line_and_rule() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(&root.join(".kajiignore"), "# secrets\n\nsecrets/\n*.pem\n");
        let ig = KajiIgnore::load(root);
        let hit = ig.excluded(&root.join("secrets/a/b.txt"), false).unwrap();
        assert_eq!(hit.rule, "secrets/");
        assert_eq!(hit.line, 3);
        assert_eq!(hit.file, root.join(".kajiignore"));
        assert_eq!(ig.excluded(&root.join("key.pem"), false).unwrap().line, 4);
        assert!(ig.excluded(&root.join("src/main.rs"), false).is_none());
        assert!(ig.excluded(Path::new("/etc/passwd"), false).is_none());
        assert!(ig.excluded(root, true).is_none());
    }

    #[test]
    fn cwd_file_overrides_repository_root_file() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir(root.join(".git")).unwrap();
        write(&root.join(".kajiignore"), "*.log\n");
        let sub = root.join("sub");
        write(&sub.join(".kajiignore"), "!keep.log\nlocal.txt\n");
        let ig = KajiIgnore::load(&sub);
        assert!(ig.excluded(&sub.join("x.log"), false).is_some());
        assert!(ig.excluded(&sub.join("keep.log"), false).is_none());
        assert_eq!(
            ig.excluded(&sub.join("local.txt"), false).unwrap().file,
            sub.join(".kajiignore")
        );
        assert!(ig.excludes_entry(&sub.join("x.log"), false));
        assert!(!ig.excludes_entry(&sub.join("keep.log"), false));
    }

    #[test]
    fn invalid_rule_is_a_warning() {
        let dir = tempfile::tempdir().unwrap();
        write(&dir.path().join(".kajiignore"), "{a,b\nb.txt\n");
        let ig = KajiIgnore::load(dir.path());
        assert_eq!(ig.warnings().len(), 1, "{:?}", ig.warnings());
        assert!(ig.excluded(&dir.path().join("b.txt"), false).is_some());
    }

    #[test]
    fn a_hard_link_to_an_excluded_file_is_excluded() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(&root.join(".kajiignore"), "secrets/\n");
        write(&root.join("secrets/key.txt"), "TOPSECRET");
        write(&root.join("src/plain.txt"), "hello");
        std::fs::hard_link(root.join("secrets/key.txt"), root.join("src/innocent.txt")).unwrap();
        std::fs::hard_link(root.join("src/plain.txt"), root.join("src/plain2.txt")).unwrap();
        let ig = KajiIgnore::load(root);
        let hit = ig
            .excluded(&root.join("src/innocent.txt"), false)
            .expect("the link is excluded");
        assert_eq!(hit.rule, "secrets/");
        assert!(ig.excludes_entry(&root.join("src/innocent.txt"), false));
        // Another multiply-linked file that is not excluded stays readable.
        assert!(ig.excluded(&root.join("src/plain2.txt"), false).is_none());
        assert!(!ig.excludes_entry(&root.join("src/plain2.txt"), false));
    }
}
