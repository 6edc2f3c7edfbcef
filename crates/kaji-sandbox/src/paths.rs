//! Which paths a default policy protects, denies and makes writable, and
//! how a denied directory that contains a writable root is split up.
//!
//! Only reads the file system (and creates the empty `.kaji/` and
//! `.git/hooks/` directories a workspace needs so that they can be
//! protected); it must never write into an existing file.

use std::path::{Path, PathBuf};

/// The entries of a project's `.kaji/` directory that are settings, not
/// working space: `*.toml`, `agents/`, `commands/`.
fn is_kaji_setting(name: &str) -> bool {
    name.ends_with(".toml") || name == "agents" || name == "commands"
}

/// The protected paths of a workspace `root` that exist: `.git` as a whole
/// (a directory or a worktree's `gitdir:` file — so neither `config`,
/// `hooks/`, `info/` nor a planted `commondir` can be written), and, in a
/// worktree, its `gitdir:` target and the common git directory; `.kaji/`
/// as a whole (its working space, such as `.kaji/worktrees/`, is made
/// writable again through [`kaji_working_space`]), `.kajiignore` and
/// `.claude/`.
///
/// A path that does not exist cannot be protected (a command could create
/// it): see [`create_protectable_dirs`].
pub fn protected_paths_in(root: &Path) -> Vec<PathBuf> {
    let mut found = vec![root.join(".git")];
    found.extend(worktree_git_dirs(root));
    for name in [".kaji", ".kajiignore", ".claude"] {
        found.push(root.join(name));
    }
    found.retain(|p| p.symlink_metadata().is_ok());
    found
}

/// The files in a home directory that make a shell, git, kaji or Claude
/// Code run code, and that exist: the shells' start-up files, git's global
/// configuration, `~/.claude/`, `~/.kaji/`, `~/.config/kaji/`. Only those
/// inside a writable root need protecting; a workspace that holds the home
/// directory ([`holds_home`]) gets no unasked commands, because a start-up
/// file that does not exist yet could be created.
pub fn home_protected_paths(home: &Path) -> Vec<PathBuf> {
    const NAMES: &[&str] = &[
        ".bashrc",
        ".bash_profile",
        ".bash_login",
        ".bash_logout",
        ".profile",
        ".zshrc",
        ".zshenv",
        ".zprofile",
        ".zlogin",
        ".zlogout",
        ".kshrc",
        ".mkshrc",
        ".config/fish",
        ".gitconfig",
        ".config/git",
        ".claude",
        ".claude.json",
        ".kaji",
        ".config/kaji",
    ];
    NAMES
        .iter()
        .map(|n| home.join(n))
        .filter(|p| p.symlink_metadata().is_ok())
        .collect()
}

/// Whether a workspace `cwd` holds the home directory `home` (is it, or
/// one of its ancestors, such as `/`): then the files that make a shell or
/// git run code are inside a writable root, and commands must ask.
pub fn holds_home(cwd: &Path, home: Option<&Path>) -> bool {
    let Some(home) = home else {
        return false;
    };
    let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    canon(home).starts_with(canon(cwd))
}

/// The directories (or files) that hold other programs' Unix sockets and
/// that exist: the user's runtime directory (`$XDG_RUNTIME_DIR`, else
/// `/run/user/<uid>`: the systemd user manager, D-Bus, …), tmux's
/// (`/tmp/tmux-<uid>`, `$TMUX`'s socket) and screen's socket directories,
/// and `$SSH_AUTH_SOCK` (its directory when that is private to it).
/// Covered so that a socket created there after a command started stays
/// unreachable too; sockets already listening anywhere outside the
/// writable roots are hidden one by one when the sandbox is prepared.
pub fn unix_socket_dirs(home: Option<&Path>) -> Vec<PathBuf> {
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    let var = |n: &str| std::env::var_os(n).map(PathBuf::from);
    let mut dirs = vec![
        var("XDG_RUNTIME_DIR").unwrap_or_else(|| PathBuf::from(format!("/run/user/{uid}"))),
        PathBuf::from(format!("/tmp/tmux-{uid}")),
        PathBuf::from("/run/screen"),
        PathBuf::from("/var/run/screen"),
    ];
    dirs.extend(home.map(|h| h.join(".screen")));
    if let Some(tmux) = std::env::var("TMUX").ok().and_then(|t| {
        let socket = t.split(',').next().map(PathBuf::from)?;
        socket.parent().map(Path::to_path_buf)
    }) {
        dirs.push(tmux);
    }
    if let Some(agent) = var("SSH_AUTH_SOCK") {
        let private = agent.parent().filter(|d| {
            d.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("ssh-") || n.starts_with("keyring"))
        });
        dirs.push(private.map(Path::to_path_buf).unwrap_or(agent));
    }
    dirs.retain(|d| d.is_absolute() && d.symlink_metadata().is_ok());
    dirs
}

/// Creates an empty `root/.kaji/` when missing, so that it can be
/// protected: a path must exist to be bind-mounted read-only.
pub fn create_protectable_dirs(root: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(root.join(".kaji"))
}

/// The existing entries of `root/.kaji/` that are working space rather than
/// settings (e.g. `worktrees/`, `plans/`): writable again inside the
/// read-only `.kaji/`.
pub fn kaji_working_space(root: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(root.join(".kaji")) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| !e.file_name().to_str().is_some_and(is_kaji_setting))
        .map(|e| e.path())
        .collect()
}

/// When `root` is a git worktree (its `.git` is a file saying
/// `gitdir: DIR`): `DIR` and the common git directory it names in its
/// `commondir` file. Empty otherwise.
pub fn worktree_git_dirs(root: &Path) -> Vec<PathBuf> {
    let Ok(text) = std::fs::read_to_string(root.join(".git")) else {
        return Vec::new();
    };
    let Some(target) = text.lines().find_map(|l| l.strip_prefix("gitdir:")) else {
        return Vec::new();
    };
    let gitdir = root.join(target.trim());
    let mut dirs = vec![gitdir.clone()];
    if let Ok(common) = std::fs::read_to_string(gitdir.join("commondir")) {
        let common = gitdir.join(common.trim());
        dirs.push(std::fs::canonicalize(&common).unwrap_or(common));
    }
    dirs.into_iter()
        .map(|d| std::fs::canonicalize(&d).unwrap_or(d))
        .collect()
}

/// The directories no sandboxed command may read: `~/.ssh`, `~/.aws`,
/// `~/.gnupg` (when `home` is known) and kaji's own settings directory
/// (`kaji_home`, i.e. `$KAJI_HOME`).
pub fn default_deny_read(home: Option<&Path>, kaji_home: Option<&Path>) -> Vec<PathBuf> {
    let mut denied: Vec<PathBuf> = home
        .map(|h| [".ssh", ".aws", ".gnupg"].map(|d| h.join(d)).to_vec())
        .unwrap_or_default();
    denied.extend(kaji_home.map(Path::to_path_buf));
    denied
}

/// Splits a denied path that contains a writable root (e.g. `$KAJI_HOME`
/// holding kaji's run dir) into its entries that do not lead to one, so
/// the writable root stays reachable. Paths that do not exist are dropped.
pub(crate) fn expand_denied(denied: &Path, writable: &[PathBuf]) -> Vec<PathBuf> {
    if denied.symlink_metadata().is_err() {
        return Vec::new();
    }
    if writable.iter().any(|w| w == denied) {
        return Vec::new();
    }
    if !writable.iter().any(|w| w.starts_with(denied)) {
        return vec![denied.to_path_buf()];
    }
    let Ok(entries) = std::fs::read_dir(denied) else {
        return Vec::new();
    };
    entries
        .flatten()
        .flat_map(|e| expand_denied(&e.path(), writable))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protects_git_kaji_and_claude_but_not_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join(".git")).unwrap();
        std::fs::write(root.join(".git/config"), "").unwrap();
        std::fs::create_dir_all(root.join(".claude")).unwrap();
        std::fs::create_dir_all(root.join(".kaji/worktrees/a")).unwrap();
        std::fs::write(root.join(".kaji/config.toml"), "").unwrap();
        create_protectable_dirs(root).unwrap();
        let found = protected_paths_in(root);
        for p in [".git", ".kaji", ".claude"] {
            assert!(found.contains(&root.join(p)), "{p} missing from {found:?}");
        }
        assert!(!found.contains(&root.join(".kajiignore")));
        assert_eq!(kaji_working_space(root), vec![root.join(".kaji/worktrees")]);
    }

    #[test]
    fn a_worktree_protects_its_gitdir_targets() {
        let dir = tempfile::tempdir().unwrap();
        let main_git = dir.path().join("main/.git");
        let wt_git = main_git.join("worktrees/x");
        std::fs::create_dir_all(&wt_git).unwrap();
        std::fs::create_dir_all(main_git.join("hooks")).unwrap();
        std::fs::write(main_git.join("config"), "").unwrap();
        std::fs::write(wt_git.join("commondir"), "../..\n").unwrap();
        let wt = dir.path().join("wt");
        std::fs::create_dir_all(&wt).unwrap();
        std::fs::write(wt.join(".git"), format!("gitdir: {}\n", wt_git.display())).unwrap();
        let main_git = std::fs::canonicalize(main_git).unwrap();
        let found = protected_paths_in(&wt);
        assert!(found.contains(&main_git), "{found:?}");
        assert!(found.contains(&wt.join(".git")), "{found:?}");
    }

    #[test]
    fn a_denied_dir_holding_a_writable_root_is_split() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path();
        std::fs::create_dir_all(home.join("runs/s1")).unwrap();
        std::fs::write(home.join("config.toml"), "").unwrap();
        let writable = vec![home.join("runs/s1")];
        assert_eq!(
            expand_denied(home, &writable),
            vec![home.join("config.toml")]
        );
        assert_eq!(expand_denied(home, &[]), vec![home.to_path_buf()]);
        assert!(expand_denied(&home.join("missing"), &[]).is_empty());
    }
}
