//! Keeps provider keys out of `/proc/<kaji's pid>/environ`.
//!
//! The kernel serves that file from the environment block the process was
//! started with; removing or replacing a variable (`remove_var`,
//! `set_var`) only changes libc's pointer array, never that block. So at
//! start, before any thread exists, every secret-looking variable
//! ([`kaji_protocol::redact::is_secret_env_name`]) is copied to the heap
//! (`setenv`) and its bytes in the original block are overwritten with
//! zeros: kaji still reads its key, an unconfined command reading kaji's
//! `environ` does not.
//!
//! Must run first in `main`, single-threaded; must never print a value.

use std::ffi::CStr;

unsafe extern "C" {
    static mut environ: *mut *mut libc::c_char;
}

/// Moves every secret-looking variable out of the original environment
/// block (see the module docs). Returns how many were moved.
pub fn hide_secrets_from_proc() -> usize {
    let mut originals: Vec<*mut libc::c_char> = Vec::new();
    let mut moved: Vec<(String, std::ffi::OsString)> = Vec::new();
    // SAFETY: single-threaded at start; `environ` is a NULL-terminated
    // array of NUL-terminated strings owned by libc.
    unsafe {
        let mut entry = environ;
        while !entry.is_null() && !(*entry).is_null() {
            let raw = *entry;
            let bytes = CStr::from_ptr(raw).to_bytes();
            if let Some(eq) = bytes.iter().position(|b| *b == b'=')
                && let Ok(name) = std::str::from_utf8(&bytes[..eq])
                && !bytes[eq + 1..].is_empty()
                && kaji_protocol::redact::is_secret_env_name(name, &[], &[])
            {
                use std::os::unix::ffi::OsStrExt;
                let value = std::ffi::OsStr::from_bytes(&bytes[eq + 1..]).to_os_string();
                moved.push((name.to_string(), value));
                originals.push(raw);
            }
            entry = entry.add(1);
        }
    }
    for (name, value) in &moved {
        // SAFETY: no other thread exists yet (see the module docs).
        unsafe { std::env::set_var(name, value) };
    }
    for raw in &originals {
        // SAFETY: `raw` points into the original block, which stays mapped
        // for the life of the process; only the value after `=` is zeroed
        // (libc no longer points at it after `setenv`).
        unsafe {
            let len = libc::strlen(*raw);
            let bytes = std::slice::from_raw_parts_mut(raw.cast::<u8>(), len);
            if let Some(eq) = bytes.iter().position(|b| *b == b'=') {
                bytes[eq + 1..].fill(0);
            }
        }
    }
    moved.len()
}
