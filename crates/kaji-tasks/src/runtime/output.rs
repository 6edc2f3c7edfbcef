//! The capped output file of one runtime task.
//!
//! A task's output is a stream of bytes with *logical* offsets: byte `n` is
//! the `n`-th byte the task ever wrote. The file on disk holds the newest
//! part of that stream, at most `cap` bytes of it. While the stream fits,
//! the file is exactly the output. Once it passes the cap, the file is
//! rewritten in place as a one-line header that says how many of the oldest
//! bytes were dropped, followed by the newest `cap / 2` bytes, and
//! truncated; appending then resumes. (A reader outside kaji, such as
//! `tail -f`, may see the rewrite happen.) Each byte is thus copied at most once more, and
//! the producer never waits on anything but a short in-memory lock.
//!
//! Readers ask for bytes by logical offset; those that were dropped are
//! reported as such instead of being returned.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use tokio::sync::watch;

/// Piece size of the in-place copy during compaction.
const COPY_CHUNK: u64 = 1024 * 1024;

/// How far the output got, published to waiting readers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Progress {
    /// Logical bytes written so far.
    pub written: u64,
    /// The task has ended and every byte of its output is in the log.
    pub finished: bool,
}

/// The bytes of one read.
#[derive(Debug, Default)]
pub(crate) struct Slice {
    /// Logical offset of the first byte of `bytes`.
    pub start: u64,
    /// Logical offset just past the last byte of `bytes`.
    pub end: u64,
    /// Bytes between the requested offset and `start` that the file cap
    /// had already dropped.
    pub dropped: u64,
    /// Bytes between the requested offset (or the first kept byte) and
    /// `start` left out because of `max_bytes`.
    pub skipped: u64,
    /// The bytes.
    pub bytes: Vec<u8>,
}

#[derive(Debug)]
struct LogState {
    file: File,
    header_len: u64,
    dropped: u64,
    written: u64,
    /// The first error met while writing; later output is counted but lost.
    error: Option<String>,
}

/// A task's output file; shared by the capture thread (the only writer) and
/// the readers.
#[derive(Debug)]
pub(crate) struct OutputLog {
    path: PathBuf,
    cap: u64,
    state: Mutex<LogState>,
    progress: watch::Sender<Progress>,
}

impl OutputLog {
    /// Creates (or truncates) the file at `path`, keeping at most `cap`
    /// bytes (`cap` is at least 2).
    pub fn create(path: PathBuf, cap: u64) -> io::Result<Self> {
        let file = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)?;
        Ok(Self {
            path,
            cap: cap.max(2),
            state: Mutex::new(LogState {
                file,
                header_len: 0,
                dropped: 0,
                written: 0,
                error: None,
            }),
            progress: watch::Sender::new(Progress::default()),
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A receiver of progress updates.
    pub fn subscribe(&self) -> watch::Receiver<Progress> {
        self.progress.subscribe()
    }

    /// The current progress.
    pub fn progress(&self) -> Progress {
        *self.progress.borrow()
    }

    /// Logical bytes dropped from the front so far.
    pub fn dropped(&self) -> u64 {
        self.lock().dropped
    }

    /// The first write error, if any.
    pub fn error(&self) -> Option<String> {
        self.lock().error.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LogState> {
        // A panic while holding the lock cannot leave the state torn in a
        // way that matters more than losing output: keep going.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Appends `chunk` to the output, dropping the oldest bytes when the cap
    /// is passed, and wakes the readers.
    pub fn append(&self, chunk: &[u8]) {
        if chunk.is_empty() {
            return;
        }
        let written = {
            let mut st = self.lock();
            if st.error.is_none() {
                let kept = st.written - st.dropped;
                let result = if kept + chunk.len() as u64 <= self.cap {
                    st.file.write_all_at(chunk, st.header_len + kept)
                } else {
                    self.compact(&mut st, chunk)
                };
                if let Err(e) = result {
                    st.error = Some(format!("writing {}: {e}", self.path.display()));
                }
            }
            st.written += chunk.len() as u64;
            if st.error.is_some() {
                // Nothing more reaches the file: count the bytes as dropped
                // so readers are told rather than handed stale data.
                st.dropped = st.written;
            }
            st.written
        };
        self.progress.send_modify(|p| p.written = written);
    }

    /// Marks the output complete and wakes the readers.
    pub fn finish(&self) {
        self.progress.send_modify(|p| p.finished = true);
    }

    /// Rewrites the file in place as a header plus the newest `cap / 2`
    /// bytes of the kept output followed by `chunk`, and truncates it.
    ///
    /// In place rather than into a new file: the pages at the front of the
    /// file are reused, no second copy of the kept part is ever held, and
    /// the work is one sequential copy of `cap / 2` bytes per `cap / 2`
    /// bytes of new output.
    fn compact(&self, st: &mut LogState, chunk: &[u8]) -> io::Result<()> {
        let keep = (self.cap / 2).max(1);
        let new_written = st.written + chunk.len() as u64;
        let new_dropped = new_written - keep;
        let from_chunk = (chunk.len() as u64).min(keep);
        let from_old = keep - from_chunk;
        let header = format!(
            "[kaji: this output passed its cap of {} bytes; the oldest {} bytes were dropped, the newest follow]\n",
            self.cap, new_dropped
        );
        let dst = header.len() as u64;
        if from_old > 0 {
            let old_len = st.written - st.dropped;
            let src = st.header_len + old_len - from_old;
            if dst <= src {
                // Forward copy: with dst <= src, no chunk overwrites bytes
                // that are still to be read.
                let mut buf = vec![0u8; (from_old.min(COPY_CHUNK)) as usize];
                let mut done = 0u64;
                while done < from_old {
                    let n = (from_old - done).min(buf.len() as u64) as usize;
                    st.file.read_exact_at(&mut buf[..n], src + done)?;
                    st.file.write_all_at(&buf[..n], dst + done)?;
                    done += n as u64;
                }
            } else {
                // Only with tiny caps, where the header is longer than what
                // is kept: go through memory.
                let mut old = vec![0u8; from_old as usize];
                st.file.read_exact_at(&mut old, src)?;
                st.file.write_all_at(&old, dst)?;
            }
        }
        st.file.write_all_at(header.as_bytes(), 0)?;
        st.file
            .write_all_at(&chunk[chunk.len() - from_chunk as usize..], dst + from_old)?;
        st.file.set_len(dst + keep)?;
        st.header_len = dst;
        st.dropped = new_dropped;
        Ok(())
    }

    /// Reads the output from logical offset `from` to the end as it is now,
    /// at most `max_bytes` of it (the newest are kept).
    pub fn read_from(&self, from: u64, max_bytes: u64) -> io::Result<Slice> {
        let st = self.lock();
        let end = st.written;
        let kept_from = from.max(st.dropped).min(end);
        let dropped = kept_from - from.min(kept_from);
        let start = kept_from.max(end.saturating_sub(max_bytes));
        let skipped = start - kept_from;
        let mut bytes = vec![0u8; (end - start) as usize];
        if !bytes.is_empty() {
            st.file
                .read_exact_at(&mut bytes, st.header_len + (start - st.dropped))?;
        }
        Ok(Slice {
            start,
            end,
            dropped,
            skipped,
            bytes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log(cap: u64) -> (tempfile::TempDir, OutputLog) {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = OutputLog::create(dir.path().join("t.output"), cap).expect("create");
        (dir, log)
    }

    #[test]
    fn below_the_cap_the_file_is_the_output() {
        let (_dir, log) = log(1000);
        log.append(b"hello ");
        log.append(b"world");
        assert_eq!(std::fs::read(log.path()).expect("read"), b"hello world");
        let s = log.read_from(0, 1000).expect("read");
        assert_eq!(s.bytes, b"hello world");
        assert_eq!((s.start, s.end, s.dropped, s.skipped), (0, 11, 0, 0));
        let s = log.read_from(6, 1000).expect("read");
        assert_eq!(s.bytes, b"world");
    }

    #[test]
    fn past_the_cap_the_oldest_bytes_go_and_offsets_hold() {
        let (_dir, log) = log(100);
        let data: Vec<u8> = (0..1000u32).map(|i| b'a' + (i % 26) as u8).collect();
        for chunk in data.chunks(7) {
            log.append(chunk);
        }
        let dropped = log.dropped();
        assert!(dropped > 0 && dropped < 1000);
        let s = log.read_from(0, 10_000).expect("read");
        assert_eq!(s.dropped, dropped);
        assert_eq!(s.start, dropped);
        assert_eq!(s.end, 1000);
        assert_eq!(s.bytes, &data[dropped as usize..]);
        let file = std::fs::read(log.path()).expect("read");
        assert!(file.len() <= 100 + 200, "file is {} bytes", file.len());
        let text = String::from_utf8_lossy(&file);
        assert!(
            text.starts_with("[kaji: this output passed its cap of 100 bytes"),
            "{text}"
        );
        assert!(file.ends_with(&data[dropped as usize..]));
    }

    #[test]
    fn a_chunk_larger_than_the_cap_keeps_its_end() {
        let (_dir, log) = log(10);
        log.append(b"0123456789abcdefghij");
        let s = log.read_from(0, 100).expect("read");
        assert_eq!(s.bytes, b"fghij");
        assert_eq!(s.dropped, 15);
    }

    #[test]
    fn max_bytes_keeps_the_newest() {
        let (_dir, log) = log(1000);
        log.append(b"0123456789");
        let s = log.read_from(2, 3).expect("read");
        assert_eq!(s.bytes, b"789");
        assert_eq!((s.skipped, s.dropped), (5, 0));
    }
}
