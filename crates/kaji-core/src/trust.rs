//! Which projects the user trusts: `$KAJI_HOME/trusted.toml`.
//!
//! A project's settings that run code or widen permissions count only once
//! the user has trusted the project. The file holds one `[[project]]` per
//! project directory that was answered:
//!
//! ```toml
//! [[project]]
//! path = "/home/me/src/app"
//! trusted = true
//! at = "2026-12-01T11:40:00Z"
//! ```
//!
//! A project is named by [`project_dir`]: the canonical directory holding
//! the `.kaji/` that applies to the working directory, else the repository
//! root, else the directory itself. This module reads and writes only that
//! file (written whole, through a temporary file renamed into place); it
//! never decides what trust allows and never asks anyone: [`question`]
//! says what a front end should ask ("Do you trust this folder?") and
//! [`record`] keeps the answer.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::config::repository_root;

/// The trust file's name in `$KAJI_HOME`.
pub const TRUST_FILE_NAME: &str = "trusted.toml";

/// One answered project.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrustEntry {
    /// The project directory (canonical).
    pub path: PathBuf,
    /// Whether the user trusts it.
    pub trusted: bool,
    /// When the user answered (RFC 3339).
    pub at: String,
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct TrustFile {
    #[serde(default, rename = "project")]
    projects: Vec<TrustEntry>,
}

/// Why the trust file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    /// The file or a directory could not be read.
    #[error("{}: cannot read: {source}", path.display())]
    Read {
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a valid trust file.
    #[error("{}: not a valid trust file: {message}", path.display())]
    Invalid {
        /// The trust file.
        path: PathBuf,
        /// What is wrong (with the line).
        message: String,
    },
    /// The file could not be written.
    #[error("{}: cannot write: {source}", path.display())]
    Write {
        /// The trust file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

/// The trust file's entries, loaded to be read or changed.
#[derive(Debug)]
pub struct TrustStore {
    path: PathBuf,
    entries: Vec<TrustEntry>,
}

impl TrustStore {
    /// Loads `kaji_home/trusted.toml` (no file: no entries).
    pub fn load(kaji_home: &Path) -> Result<Self, TrustError> {
        let path = kaji_home.join(TRUST_FILE_NAME);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(source) => return Err(TrustError::Read { path, source }),
        };
        let file: TrustFile = toml::from_str(&text).map_err(|e| TrustError::Invalid {
            path: path.clone(),
            message: e.to_string().trim().to_string(),
        })?;
        Ok(Self {
            path,
            entries: file.projects,
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Every entry.
    pub fn entries(&self) -> &[TrustEntry] {
        &self.entries
    }

    /// The answer recorded for the project directory `project` (as given
    /// by [`project_dir`]): `None` when the user was never asked.
    pub fn get(&self, project: &Path) -> Option<&TrustEntry> {
        self.entries.iter().find(|e| e.path == project)
    }

    /// Records an answer for `project`, replacing an earlier one.
    pub fn set(&mut self, project: &Path, trusted: bool, at: String) {
        self.entries.retain(|e| e.path != project);
        self.entries.push(TrustEntry {
            path: project.to_path_buf(),
            trusted,
            at,
        });
    }

    /// Writes the file (creating `$KAJI_HOME` when needed).
    pub fn save(&self) -> Result<(), TrustError> {
        let write_err = |source| TrustError::Write {
            path: self.path.clone(),
            source,
        };
        let file = TrustFile {
            projects: self.entries.clone(),
        };
        let text = toml::to_string(&file).map_err(|e| TrustError::Invalid {
            path: self.path.clone(),
            message: e.to_string(),
        })?;
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir).map_err(write_err)?;
        }
        let tmp = self
            .path
            .with_extension(format!("toml.{}.tmp", std::process::id()));
        std::fs::write(&tmp, text).map_err(write_err)?;
        std::fs::rename(&tmp, &self.path).map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            write_err(e)
        })
    }
}

/// The project directory `dir` belongs to: the nearest directory from
/// `dir` up to the repository root that holds `.kaji/`, else the
/// repository root, else `dir` — canonical, so every path to it names the
/// same project.
pub fn project_dir(dir: &Path) -> Result<PathBuf, TrustError> {
    let dir = dir.canonicalize().map_err(|source| TrustError::Read {
        path: dir.to_path_buf(),
        source,
    })?;
    let root = repository_root(&dir);
    for candidate in dir.ancestors() {
        if candidate.join(".kaji").is_dir() {
            return Ok(candidate.to_path_buf());
        }
        if root.as_deref().is_none_or(|r| r == candidate) {
            break;
        }
    }
    Ok(root.unwrap_or(dir))
}

/// What a front end asks before a session starts in an untrusted
/// project: the project and the settings that trusting it would apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrustQuestion {
    /// The project directory ([`project_dir`]).
    pub project: PathBuf,
    /// The settings now ignored, each with its file.
    pub settings: Vec<crate::config::IgnoredSetting>,
}

/// The question to ask for `dir`: `Some` only when the user never
/// answered for its project and the project has settings that take
/// effect only once it is trusted. Settings that cannot be read give
/// `None` (the session reports them when it loads them).
pub fn question(kaji_home: &Path, dir: &Path) -> Result<Option<TrustQuestion>, TrustError> {
    let project = project_dir(dir)?;
    if TrustStore::load(kaji_home)?.get(&project).is_some() {
        return Ok(None);
    }
    let Ok((_, settings)) = crate::config::KajiConfig::load_gated(kaji_home, dir, false) else {
        return Ok(None);
    };
    Ok((!settings.is_empty()).then_some(TrustQuestion { project, settings }))
}

/// Records the user's answer for `project` (trusted or not), now.
pub fn record(kaji_home: &Path, project: &Path, trusted: bool) -> Result<(), TrustError> {
    let mut store = TrustStore::load(kaji_home)?;
    let at = kaji_protocol::UtcDateTime::from_system_time(std::time::SystemTime::now())
        .map(|now| {
            kaji_protocol::UtcDateTime {
                nanosecond: 0,
                ..now
            }
            .rfc3339()
        })
        .unwrap_or_default();
    store.set(project, trusted, at);
    store.save()
}

/// Whether the user trusts the project `dir` belongs to (never asked:
/// not trusted).
pub fn is_trusted(kaji_home: &Path, dir: &Path) -> Result<bool, TrustError> {
    let project = project_dir(dir)?;
    let store = TrustStore::load(kaji_home)?;
    Ok(store.get(&project).is_some_and(|e| e.trusted))
}

/// The git directories outside `root/.git/` that git reads for the
/// checkout at `root`: when `root/.git` is a file (a worktree or a
/// submodule) its `gitdir:` target, and that directory's `commondir` (the
/// main repository's `.git`, where `config` and `hooks/` live). Missing or
/// unreadable files give nothing.
pub fn linked_git_dirs(root: &Path) -> Vec<PathBuf> {
    let Ok(text) = std::fs::read_to_string(root.join(".git")) else {
        return Vec::new();
    };
    let Some(target) = text.lines().find_map(|l| l.strip_prefix("gitdir:")) else {
        return Vec::new();
    };
    let gitdir = root.join(target.trim());
    let gitdir = gitdir.canonicalize().unwrap_or(gitdir);
    let mut dirs = vec![gitdir.clone()];
    if let Ok(common) = std::fs::read_to_string(gitdir.join("commondir")) {
        let common = gitdir.join(common.trim());
        dirs.push(common.canonicalize().unwrap_or(common));
    }
    dirs
}

/// [`linked_git_dirs`] as extra protected-path patterns for
/// `kaji_policy::Context::protected_paths`: each directory's `config` and
/// `hooks/**`, as absolute (`//…`) patterns.
pub fn git_protected_patterns(root: &Path) -> Vec<String> {
    linked_git_dirs(root)
        .iter()
        .flat_map(|dir| {
            let dir = kaji_policy::paths::escape(&dir.to_string_lossy());
            let dir = dir
                .trim_start_matches('/')
                .trim_end_matches('/')
                .to_string();
            [format!("//{dir}/config"), format!("//{dir}/hooks/**")]
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trust_is_recorded_per_project_and_revocable() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let home = tmp.path().join("home");
        let repo = tmp.path().join("repo");
        let sub = repo.join("a").join("b");
        std::fs::create_dir_all(repo.join(".git")).expect("mkdir");
        std::fs::create_dir_all(&sub).expect("mkdir");
        assert!(!is_trusted(&home, &sub).expect("check"));

        let project = project_dir(&sub).expect("project");
        assert_eq!(project, repo.canonicalize().expect("canonical"));
        let mut store = TrustStore::load(&home).expect("load");
        store.set(&project, true, "2026-12-01T00:00:00Z".into());
        store.save().expect("save");
        assert!(is_trusted(&home, &sub).expect("check"));
        assert!(is_trusted(&home, &repo).expect("check"));

        std::fs::create_dir_all(sub.join(".kaji")).expect("mkdir");
        assert!(!is_trusted(&home, &sub).expect("nested .kaji is its own project"));

        let mut store = TrustStore::load(&home).expect("load");
        store.set(&project, false, "2026-12-01T00:00:01Z".into());
        store.save().expect("save");
        assert!(!is_trusted(&home, &repo).expect("check"));
        assert_eq!(TrustStore::load(&home).expect("load").entries().len(), 1);
    }

    #[test]
    fn a_worktree_protects_its_gitdir_and_the_common_dir() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let main = tmp.path().join("main");
        let gitdir = main.join(".git/worktrees/w");
        let wt = tmp.path().join("w");
        std::fs::create_dir_all(&gitdir).expect("mkdir");
        std::fs::create_dir_all(&wt).expect("mkdir");
        std::fs::write(wt.join(".git"), format!("gitdir: {}\n", gitdir.display())).expect("write");
        std::fs::write(gitdir.join("commondir"), "../..\n").expect("write");
        let patterns = git_protected_patterns(&wt);
        let main_git = main.join(".git").canonicalize().expect("canonical");
        assert!(
            patterns.contains(&format!("/{}/config", main_git.display())),
            "{patterns:?}"
        );
        let mut ctx = kaji_policy::Context::new(&wt, true);
        ctx.protected_paths = patterns;
        assert!(kaji_policy::paths::is_protected(
            &main_git.join("config"),
            &ctx
        ));
        assert!(kaji_policy::paths::is_protected(
            &main_git.join("hooks/pre-commit"),
            &ctx
        ));
        assert!(!kaji_policy::paths::is_protected(
            &main_git.join("HEAD"),
            &ctx
        ));
        assert!(git_protected_patterns(&main).is_empty());
    }

    #[test]
    fn a_bad_trust_file_is_an_error_naming_it() {
        let tmp = tempfile::tempdir().expect("tempdir");
        std::fs::write(tmp.path().join(TRUST_FILE_NAME), "[[project]]\npath = 1\n").expect("write");
        let err = TrustStore::load(tmp.path()).expect_err("invalid");
        assert!(err.to_string().contains(TRUST_FILE_NAME), "{err}");
    }
}
