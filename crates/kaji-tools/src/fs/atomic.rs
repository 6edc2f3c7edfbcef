//! Writing a file so that readers see either the old content or the new,
//! never half of it.
//!
//! An existing file is replaced by writing a temporary file in the same
//! directory, giving it the old file's permission bits, syncing it and
//! renaming it over the old one. A new file is created in place (there is
//! no old content to protect) with the process's default permissions. The
//! temporary file is removed on every failure path.

use std::io::Write as _;
use std::path::Path;

/// Writes `bytes` to `path`, which must be a regular file or not exist. The
/// parent directory must exist. Returns whether the file existed before.
pub(super) fn write_file(path: &Path, bytes: &[u8]) -> std::io::Result<bool> {
    match std::fs::metadata(path) {
        Ok(meta) => {
            replace(path, bytes, meta.permissions())?;
            Ok(true)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            create(path, bytes)?;
            Ok(false)
        }
        Err(e) => Err(e),
    }
}

fn replace(path: &Path, bytes: &[u8], permissions: std::fs::Permissions) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut temp = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".kaji-tmp")
        .tempfile_in(dir)?;
    temp.write_all(bytes)?;
    temp.as_file().set_permissions(permissions)?;
    temp.as_file().sync_all()?;
    temp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

fn create(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)?;
    if let Err(e) = file.write_all(bytes).and_then(|()| file.sync_all()) {
        drop(file);
        let _ = std::fs::remove_file(path);
        return Err(e);
    }
    Ok(())
}
