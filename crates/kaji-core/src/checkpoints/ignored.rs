//! Which written paths no ignore rule can touch, decided without starting
//! git: the `.gitignore` files of the directories above a path and the
//! shadow's `info/exclude` are read here (with the `ignore` crate), so an
//! Edit's checkpoint runs `git check-ignore` only for a path some rule
//! matches.
//!
//! What this module must never do: call a path kept that git would
//! ignore. It answers only "no rule of any of these files matches the
//! path or a directory above it"; every other case (a rule matches,
//! ignoring or re-including; a file it cannot read; a `.gitignore` that is
//! a symlink) is left to git, which also knows that tracked files are
//! never ignored.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use ignore::Match;
use ignore::gitignore::{Gitignore, GitignoreBuilder};

/// The ignore rules of one checkpoint's paths, read once per directory.
pub(super) struct Rules<'a> {
    work_tree: &'a Path,
    /// The shadow's `info/exclude` (rooted at the work tree); `None` when
    /// it could not be read with certainty.
    exclude: Option<Gitignore>,
    /// Directory (absolute) → its `.gitignore`; `None` inside when it
    /// could not be read with certainty.
    dirs: HashMap<PathBuf, Option<Gitignore>>,
}

impl<'a> Rules<'a> {
    /// The rules of `work_tree`, with the shadow `git_dir`'s exclude file.
    pub(super) fn new(work_tree: &'a Path, git_dir: &Path) -> Self {
        let exclude = load(work_tree, &git_dir.join("info").join("exclude"));
        Self {
            work_tree,
            exclude,
            dirs: HashMap::new(),
        }
    }

    /// Whether no rule matches `rel` (relative to the work tree) or any
    /// directory above it: then git certainly does not ignore it.
    pub(super) fn untouched(&mut self, rel: &Path) -> bool {
        let Some(exclude) = self.exclude.clone() else {
            return false;
        };
        let full = self.work_tree.join(rel);
        let mut dir = self.work_tree.to_path_buf();
        let mut matchers = vec![exclude];
        let components: Vec<_> = rel.components().collect();
        for (i, component) in components.iter().enumerate() {
            match self.rules_of(&dir) {
                Some(Some(rules)) => matchers.push(rules),
                Some(None) => {}
                None => return false,
            }
            dir.push(component);
            let is_dir = if i + 1 < components.len() {
                true
            } else {
                std::fs::symlink_metadata(&full).is_ok_and(|m| m.is_dir())
            };
            if matchers
                .iter()
                .any(|m| !matches!(m.matched(&dir, is_dir), Match::None))
            {
                return false;
            }
        }
        true
    }

    /// The `.gitignore` of `dir`: `Some(None)` when it has none, `None`
    /// when it cannot be read with certainty.
    fn rules_of(&mut self, dir: &Path) -> Option<Option<Gitignore>> {
        if let Some(known) = self.dirs.get(dir) {
            return known.clone().map(Some);
        }
        let file = dir.join(".gitignore");
        let loaded = match std::fs::symlink_metadata(&file) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                self.dirs.insert(dir.to_path_buf(), None);
                return Some(None);
            }
            Ok(meta) if meta.is_file() => load(dir, &file),
            _ => None,
        };
        self.dirs.insert(dir.to_path_buf(), loaded.clone());
        loaded.map(Some)
    }
}

/// The rules of `file`, rooted at `root`; `None` when it cannot be read
/// or parsed completely. A missing file has no rules.
fn load(root: &Path, file: &Path) -> Option<Gitignore> {
    let mut builder = GitignoreBuilder::new(root);
    match std::fs::metadata(file) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return builder.build().ok(),
        Err(_) => return None,
        Ok(_) => {}
    }
    if builder.add(file).is_some() {
        return None;
    }
    builder.build().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules_in(files: &[(&str, &str)]) -> (tempfile::TempDir, tempfile::TempDir) {
        let tree = tempfile::tempdir().expect("tree");
        let shadow = tempfile::tempdir().expect("shadow");
        std::fs::create_dir_all(shadow.path().join("info")).expect("mkdir");
        std::fs::write(shadow.path().join("info/exclude"), "/.kaji/worktrees/\n").expect("write");
        for (path, text) in files {
            let full = tree.path().join(path);
            std::fs::create_dir_all(full.parent().expect("parent")).expect("mkdir");
            std::fs::write(full, text).expect("write");
        }
        (tree, shadow)
    }

    #[test]
    fn only_paths_no_rule_matches_are_untouched() {
        let (tree, shadow) = rules_in(&[
            (".gitignore", "*.log\nbuild/\n!keep.log\n"),
            ("src/.gitignore", "gen.rs\n"),
        ]);
        let mut rules = Rules::new(tree.path(), shadow.path());
        assert!(rules.untouched(Path::new("calc.py")));
        assert!(rules.untouched(Path::new("src/main.rs")));
        assert!(rules.untouched(Path::new("new/dir/file.txt")));
        // Ignored, or re-included: git decides.
        assert!(!rules.untouched(Path::new("debug.log")));
        assert!(!rules.untouched(Path::new("keep.log")));
        assert!(!rules.untouched(Path::new("build/out.o")));
        assert!(!rules.untouched(Path::new("src/gen.rs")));
        assert!(!rules.untouched(Path::new("src/deep/x.log")));
        assert!(!rules.untouched(Path::new(".kaji/worktrees/a/f.txt")));
    }

    #[test]
    fn an_unreadable_exclude_file_leaves_everything_to_git() {
        let (tree, shadow) = rules_in(&[]);
        std::fs::remove_file(shadow.path().join("info/exclude")).expect("rm");
        std::fs::create_dir(shadow.path().join("info/exclude")).expect("mkdir");
        let mut rules = Rules::new(tree.path(), shadow.path());
        assert!(!rules.untouched(Path::new("calc.py")));
    }
}
