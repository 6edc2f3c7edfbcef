//! `file://` URIs from paths and back (percent-encoding of what is not
//! plain).

use std::path::{Path, PathBuf};

/// The `file://` URI of an absolute path.
pub fn path_to_uri(path: &Path) -> String {
    let mut out = String::from("file://");
    for &b in path.to_string_lossy().as_bytes() {
        if b.is_ascii_alphanumeric() || b"/-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The path of a `file://` URI; `None` for other schemes.
pub fn uri_to_path(uri: &str) -> Option<PathBuf> {
    let rest = uri.strip_prefix("file://")?;
    let bytes = rest.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok());
        if bytes[i] == b'%'
            && let Some(b) = hex.and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    Some(PathBuf::from(String::from_utf8_lossy(&out).into_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        for p in ["/tmp/a b/ü.py", "/x/%41.ts", "/plain/file.rs"] {
            assert_eq!(
                uri_to_path(&path_to_uri(Path::new(p))).unwrap(),
                Path::new(p)
            );
        }
        assert_eq!(uri_to_path("file:///a/b%20c").unwrap(), Path::new("/a/b c"));
        assert!(uri_to_path("untitled:x").is_none());
    }
}
