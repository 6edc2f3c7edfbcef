//! Live output of a foreground command for the front end: the first piece
//! is a partial `command_output` say, every later piece a delta of it, so
//! a front end shows the output growing while the command runs. The
//! tool's result still carries the output (capped) for the model. The
//! text is the command's as it is: front ends drop escape sequences.
//!
//! It only forwards text: it never buffers more than the bytes of one
//! unfinished UTF-8 character, and never decides anything.

use std::sync::Mutex;

use kaji_protocol::{SayKind, TaskEvent};
use kaji_tools::OutputSink;

use crate::emitter::Emitter;

#[derive(Default)]
struct State {
    /// The say's id, once the first piece went out.
    id: Option<u64>,
    /// The bytes of a character split between two pieces.
    pending: Vec<u8>,
}

/// A sink sending one command's output through `emitter`.
pub fn sink(emitter: Emitter) -> OutputSink {
    let state = Mutex::new(State::default());
    OutputSink::new(move |bytes| {
        let mut st = state.lock().unwrap_or_else(|e| e.into_inner());
        st.pending.extend_from_slice(bytes);
        let text = take_text(&mut st.pending);
        if text.is_empty() {
            return;
        }
        match st.id {
            Some(id) => emitter.emit(TaskEvent::Delta { id, text }),
            None => {
                let id = emitter.next();
                st.id = Some(id);
                emitter.emit(TaskEvent::Say {
                    id,
                    kind: SayKind::CommandOutput,
                    text,
                    partial: true,
                    payload: None,
                });
            }
        }
    })
}

/// The text of `pending` up to an unfinished character at its end (kept);
/// invalid bytes become U+FFFD.
fn take_text(pending: &mut Vec<u8>) -> String {
    let keep = match std::str::from_utf8(pending) {
        Ok(_) => 0,
        Err(e) if e.error_len().is_none() => pending.len() - e.valid_up_to(),
        Err(_) => 0,
    };
    let rest = pending.split_off(pending.len() - keep);
    let text = String::from_utf8_lossy(pending).into_owned();
    *pending = rest;
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_character_split_between_pieces_is_joined() {
        let bytes = "aé€".as_bytes();
        let mut pending = bytes[..2].to_vec(); // "a" and half of "é"
        assert_eq!(take_text(&mut pending), "a");
        assert_eq!(pending.len(), 1);
        pending.extend_from_slice(&bytes[2..5]); // the rest of "é", part of "€"
        assert_eq!(take_text(&mut pending), "é");
        pending.extend_from_slice(&bytes[5..]);
        assert_eq!(take_text(&mut pending), "€");
        assert!(pending.is_empty());
        let mut bad = vec![b'x', 0xff, b'y'];
        assert_eq!(take_text(&mut bad), "x\u{fffd}y");
    }
}
