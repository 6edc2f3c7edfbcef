//! kaji's own git: the one way kaji builds a git command (checkpoints, the
//! worktree tool, `kaji doctor`), so that no program a repository — or a
//! model's command inside it — could have planted runs outside the sandbox.
//!
//! A command from [`command_in`] has its git directories set explicitly
//! (`GIT_DIR`, `GIT_COMMON_DIR`, `GIT_WORK_TREE`: a planted `commondir` is
//! never followed), no `GIT_*` variable of kaji's environment, no system
//! configuration, and configuration that turns off everything that runs a
//! program: fsmonitor, hooks, pager, editors, askpass and credential
//! helpers, `ext::` transports. [`harden`] applies the same to a command
//! that names its own repository (the checkpoints' shadow).
//!
//! This module must never run git itself, and never read more of a
//! repository than its `.git` entry and a linked worktree's `commondir`.

use std::ffi::OsStr;
use std::io;
use std::path::{Path, PathBuf};

/// The `-c` settings every kaji git call carries.
pub const SAFE_CONFIG: &[&str] = &[
    "core.fsmonitor=false",
    "core.hooksPath=/dev/null",
    "core.pager=cat",
    "core.editor=false",
    "sequence.editor=false",
    "core.askPass=",
    "credential.helper=",
    "protocol.ext.allow=never",
    "safe.bareRepository=explicit",
];

/// Variables removed from every kaji git call besides `GIT_*`: programs
/// git would run (`SSH_ASKPASS`, `PAGER`, `EDITOR`, `VISUAL`).
const REMOVED: &[&str] = &["SSH_ASKPASS", "PAGER", "EDITOR", "VISUAL"];

/// Where a checkout's git data lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitDirs {
    /// The top of the work tree (the directory holding `.git`).
    pub work_tree: PathBuf,
    /// The git directory (`.git`, or a linked worktree's `gitdir:`).
    pub git_dir: PathBuf,
    /// The common git directory (the git directory itself, except in a
    /// linked worktree).
    pub common_dir: PathBuf,
}

/// Finds the checkout holding `dir`: the nearest ancestor with a `.git`
/// entry. `Ok(None)` when there is none. A `commondir` file in a `.git`
/// directory is an error (only a linked worktree's `gitdir:` target has
/// one; git's ref store follows it even when `GIT_COMMON_DIR` is set), and
/// so is a linked worktree's `commondir` that does not name the directory
/// whose `worktrees/` holds it.
pub fn discover(dir: &Path) -> io::Result<Option<GitDirs>> {
    let dir = std::fs::canonicalize(dir)?;
    for top in dir.ancestors() {
        let dot_git = top.join(".git");
        let Ok(meta) = dot_git.symlink_metadata() else {
            continue;
        };
        let work_tree = top.to_path_buf();
        if meta.is_dir() {
            let planted = dot_git.join("commondir");
            if planted.symlink_metadata().is_ok() {
                return Err(io::Error::other(format!(
                    "{} exists, but only a linked worktree's git directory has one: it would \
                     point git at another repository's refs and settings; remove it",
                    planted.display()
                )));
            }
            return Ok(Some(GitDirs {
                work_tree,
                git_dir: dot_git.clone(),
                common_dir: dot_git,
            }));
        }
        return linked(work_tree, &dot_git).map(Some);
    }
    Ok(None)
}

/// The git dirs of a linked worktree whose `.git` file is `dot_git`.
fn linked(work_tree: PathBuf, dot_git: &Path) -> io::Result<GitDirs> {
    let bad = |why: String| io::Error::other(format!("{}: {why}", dot_git.display()));
    let text = std::fs::read_to_string(dot_git)?;
    let target = text
        .lines()
        .find_map(|l| l.strip_prefix("gitdir:"))
        .ok_or_else(|| bad("no `gitdir:` line".into()))?;
    let git_dir = std::fs::canonicalize(work_tree.join(target.trim()))?;
    let common = match std::fs::read_to_string(git_dir.join("commondir")) {
        Ok(c) => std::fs::canonicalize(git_dir.join(c.trim()))?,
        Err(e) if e.kind() == io::ErrorKind::NotFound => git_dir.clone(),
        Err(e) => return Err(e),
    };
    if common != git_dir && git_dir.parent() != Some(common.join("worktrees").as_path()) {
        return Err(bad(format!(
            "its git directory {} names {} as its common directory, which does not hold it",
            git_dir.display(),
            common.display()
        )));
    }
    Ok(GitDirs {
        work_tree,
        git_dir,
        common_dir: common,
    })
}

/// A git command (`program`, usually `git`) for the checkout holding `dir`,
/// hardened as the module docs say, run in `dir`. Outside any checkout the
/// command still carries the hardening but names no repository (git then
/// finds none: `safe.bareRepository=explicit` keeps it from taking `dir`
/// for a bare one).
pub fn command_in(program: impl AsRef<OsStr>, dir: &Path) -> io::Result<tokio::process::Command> {
    let mut cmd = tokio::process::Command::new(program);
    harden(&mut cmd);
    if let Some(dirs) = discover(dir)? {
        cmd.env("GIT_DIR", &dirs.git_dir)
            .env("GIT_COMMON_DIR", &dirs.common_dir)
            .env("GIT_WORK_TREE", &dirs.work_tree);
    } else {
        cmd.env("GIT_CEILING_DIRECTORIES", dir);
    }
    cmd.current_dir(dir);
    Ok(cmd)
}

/// The git to run: the first executable `git` in an absolute directory of
/// `PATH`, looked up once per process (each spawn then execs it directly,
/// without trying every directory of `PATH` first). A relative entry
/// (`.`, an empty one) is never searched: git runs inside the repository,
/// where one could have been planted. `git` when none is found, so the
/// spawn fails with the usual error.
pub fn program() -> &'static Path {
    static PROGRAM: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    PROGRAM.get_or_init(|| {
        find_program(std::env::var_os("PATH").as_deref()).unwrap_or_else(|| PathBuf::from("git"))
    })
}

/// The first executable `git` in an absolute directory of `path`.
fn find_program(path: Option<&OsStr>) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    std::env::split_paths(path?)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join("git"))
        .find(|candidate| {
            std::fs::metadata(candidate)
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// Removes kaji's `GIT_*` variables and the programs git would run from
/// `cmd`'s environment, turns off the system configuration, prompts and
/// pagers, and adds [`SAFE_CONFIG`]. Call it first: it adds arguments.
pub fn harden(cmd: &mut tokio::process::Command) {
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("GIT_") {
            cmd.env_remove(&key);
        }
    }
    for name in REMOVED {
        cmd.env_remove(name);
    }
    cmd.env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_PAGER", "cat")
        .env("GIT_EDITOR", "false")
        .env("GIT_SEQUENCE_EDITOR", "false")
        .arg("--no-pager");
    for setting in SAFE_CONFIG {
        cmd.arg("-c").arg(setting);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn git_is_found_only_in_absolute_directories_of_path() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let (plain, exec) = (dir.path().join("plain"), dir.path().join("exec"));
        for d in [&plain, &exec] {
            std::fs::create_dir(d).unwrap();
            std::fs::write(d.join("git"), "#!/bin/sh\n").unwrap();
        }
        std::fs::set_permissions(exec.join("git"), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(plain.join("git"), std::fs::Permissions::from_mode(0o644))
            .unwrap();
        let path = std::env::join_paths([Path::new("."), Path::new("rel"), &plain, &exec]).unwrap();
        assert_eq!(find_program(Some(path.as_os_str())), Some(exec.join("git")));
        let path = std::env::join_paths([Path::new("."), &plain]).unwrap();
        assert_eq!(find_program(Some(path.as_os_str())), None);
        assert_eq!(find_program(None), None);
    }

    #[test]
    fn a_planted_commondir_of_a_main_repository_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir_all(root.join(".git")).unwrap();
        std::fs::create_dir_all(root.join("planted")).unwrap();
        std::fs::write(root.join(".git/commondir"), "../planted\n").unwrap();
        std::fs::create_dir_all(root.join("sub")).unwrap();
        let err = discover(&root.join("sub")).unwrap_err();
        assert!(err.to_string().contains("commondir exists"), "{err}");
        std::fs::remove_file(root.join(".git/commondir")).unwrap();
        let dirs = discover(&root.join("sub")).unwrap().unwrap();
        assert_eq!(dirs.work_tree, root);
        assert_eq!(dirs.common_dir, root.join(".git"));
    }

    #[test]
    fn a_linked_worktree_must_live_in_its_common_dir() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let wt_git = root.join("main/.git/worktrees/w");
        std::fs::create_dir_all(&wt_git).unwrap();
        std::fs::write(wt_git.join("commondir"), "../..\n").unwrap();
        std::fs::create_dir_all(root.join("w")).unwrap();
        std::fs::write(
            root.join("w/.git"),
            format!("gitdir: {}\n", wt_git.display()),
        )
        .unwrap();
        let dirs = discover(&root.join("w")).unwrap().unwrap();
        assert_eq!(dirs.common_dir, root.join("main/.git"));

        std::fs::create_dir_all(root.join("planted")).unwrap();
        std::fs::write(wt_git.join("commondir"), "../../../../planted\n").unwrap();
        let err = discover(&root.join("w")).unwrap_err();
        assert!(err.to_string().contains("does not hold it"), "{err}");
    }
}
