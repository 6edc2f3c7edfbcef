//! Helpers shared by the task list tests.

use std::path::Path;

/// A temporary `$KAJI_HOME` on tmpfs (`/dev/shm`) when there is one, else
/// in the default temporary directory.
///
/// For tests of the list's rules and locking, not of durability: files,
/// renames and locks are as real on tmpfs, but fsync costs nothing there,
/// which keeps many-operation tests fast on a busy disk.
pub fn fast_temp_home() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    if shm.is_dir()
        && let Ok(dir) = tempfile::tempdir_in(shm)
    {
        return dir;
    }
    tempfile::tempdir().expect("temp dir")
}
