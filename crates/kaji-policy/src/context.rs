//! What the policy knows of the world: the project, the working and home
//! directories, trust, the extra protected paths and the caller's view of
//! where a path leads ([`Context`]), and the lexical path view used when
//! the caller gives none ([`normalise`]). The floor of the crate: it
//! imports none of its other modules, and never reads the file system.

use std::fmt;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

/// What the project is and whether it is trusted: everything the
/// decision (`decide`) needs to know about the world, passed in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Context {
    /// The project's root directory (absolute, normalised): `/` rule
    /// patterns are anchored here, and writes outside it are never
    /// auto-allowed.
    pub project_root: PathBuf,
    /// The working directory, where commands run and relative paths and
    /// patterns start (defaults to the project root).
    pub cwd: PathBuf,
    /// The home directory, for `~/` patterns (`None`: they match nothing).
    pub home: Option<PathBuf>,
    /// Whether the user trusted the project (its `.git/config` and its
    /// settings' allow rules count only then).
    pub trusted: bool,
    /// Protected paths beyond the built-in `PROTECTED_PATHS` (the
    /// `protected_paths` setting), relative to the project root.
    pub protected_paths: Vec<String>,
    /// Where a path really leads (symlinks followed as the kernel follows
    /// them), for the targets of shell redirections. The caller's view of
    /// the file system, passed in so that the policy never reads it.
    pub real_path: RealPath,
}

/// How the caller finds where an absolute path really leads: the kernel's
/// resolution (each symlink followed, `..` applied to where it leads),
/// with the components that do not exist yet kept as they are. The
/// default knows no symlinks and returns the path unchanged.
#[derive(Clone, Default)]
pub struct RealPath(Option<Arc<Resolver>>);

/// The function behind a [`RealPath`].
type Resolver = dyn Fn(&Path) -> PathBuf + Send + Sync;

impl RealPath {
    /// A resolver calling `f`.
    pub fn new(f: impl Fn(&Path) -> PathBuf + Send + Sync + 'static) -> Self {
        Self(Some(Arc::new(f)))
    }

    /// Where `path` (absolute, not normalised) really leads.
    pub fn resolve(&self, path: &Path) -> PathBuf {
        match &self.0 {
            Some(f) => f(path),
            None => normalise(path),
        }
    }
}

impl fmt::Debug for RealPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_some() {
            "RealPath(resolver)"
        } else {
            "RealPath(lexical)"
        })
    }
}

impl PartialEq for RealPath {
    fn eq(&self, other: &Self) -> bool {
        match (&self.0, &other.0) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        }
    }
}

impl Eq for RealPath {}

impl Context {
    /// A context for `project_root`, working there, with no home directory
    /// and no extra protected paths.
    pub fn new(project_root: impl Into<PathBuf>, trusted: bool) -> Self {
        let project_root = normalise(&project_root.into());
        Self {
            cwd: project_root.clone(),
            project_root,
            home: None,
            trusted,
            protected_paths: Vec::new(),
            real_path: RealPath::default(),
        }
    }
}

/// `path` with `.` and `..` resolved lexically (`..` at the root stays at
/// the root).
pub fn normalise(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}
