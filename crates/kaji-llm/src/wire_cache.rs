//! A conversation's messages as a provider serialised them, kept by the
//! owner of the history between the requests of one conversation, so that
//! a request serialises only what is new and its body is a concatenation
//! (the bytes are the same as serialising the whole body at once). It
//! never decides what is sent, and it must never give the bytes of a
//! message that changed: the owner says what changed
//! ([`WireCache::keep_first`], [`WireCache::clear`]); a message whose
//! number of blocks or role differs from when it was serialised is made
//! again even when the owner forgot.

use std::fmt;
use std::sync::Mutex;

use kaji_protocol::{Message, Role};

/// Serialised messages of one conversation, shared by the history's owner
/// and its requests ([`crate::ModelRequest::wire_cache`]).
#[derive(Default)]
pub struct WireCache {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// The wire format the entries are in (a provider's name).
    wire: &'static str,
    /// Message `i`'s wire text (its JSON values joined by commas, empty
    /// when the message sends nothing).
    entries: Vec<Entry>,
}

struct Entry {
    role: Role,
    blocks: usize,
    text: String,
}

impl WireCache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// Forgets every message from `index` on: they changed, or are gone.
    pub fn keep_first(&self, index: usize) {
        self.lock().entries.truncate(index);
    }

    /// Forgets every message (the history was replaced).
    pub fn clear(&self) {
        self.keep_first(0);
    }

    /// How many messages are kept serialised.
    pub fn len(&self) -> usize {
        self.lock().entries.len()
    }

    /// Whether no message is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Appends the wire text of `messages` in the `wire` format to the
    /// array being written in `out` ([`push_item`]): kept entries reused,
    /// missing ones made with `make` (a message's JSON values joined by
    /// commas, empty for none) and kept.
    pub(crate) fn write(
        &self,
        out: &mut String,
        wire: &'static str,
        messages: &[Message],
        make: impl Fn(&Message) -> String,
    ) {
        let mut inner = self.lock();
        if inner.wire != wire {
            inner.wire = wire;
            inner.entries.clear();
        }
        let valid = inner
            .entries
            .iter()
            .zip(messages)
            .take_while(|(e, m)| e.role == m.role && e.blocks == m.content.len())
            .count();
        inner.entries.truncate(valid);
        for message in &messages[valid..] {
            inner.entries.push(Entry {
                role: message.role,
                blocks: message.content.len(),
                text: make(message),
            });
        }
        for entry in &inner.entries[..messages.len()] {
            push_item(out, &entry.text);
        }
    }

    /// The bytes the kept messages hold (what an array of them takes,
    /// less brackets and commas).
    fn bytes(&self) -> usize {
        self.lock().entries.iter().map(|e| e.text.len() + 1).sum()
    }
}

impl fmt::Debug for WireCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WireCache")
            .field("messages", &self.len())
            .finish()
    }
}

/// A cache never changes what a request means: any two are equal.
impl PartialEq for WireCache {
    fn eq(&self, _other: &Self) -> bool {
        true
    }
}

/// Stands for the messages in a body serialised without them; replaced by
/// [`splice_messages`]. Its NULs make it a string no request holds.
pub(crate) const MESSAGES_SENTINEL: &str = "\u{0}kaji:messages\u{0}";

/// Appends `item` (JSON values joined by commas; empty for none) to the
/// array whose `[` ends `out` or that already holds items.
pub(crate) fn push_item(out: &mut String, item: &str) {
    if item.is_empty() {
        return;
    }
    if !out.ends_with('[') {
        out.push(',');
    }
    out.push_str(item);
}

/// `body` (serialised with [`MESSAGES_SENTINEL`] as its value under
/// `key`) with an array in its place, whose items `write` appends (with
/// [`push_item`] or [`WireCache::write`]), written straight into the one
/// buffer that is sent.
pub(crate) fn splice_messages(
    body: &str,
    key: &str,
    cache: Option<&WireCache>,
    write: impl FnOnce(&mut String),
) -> String {
    let marker = format!("\"{key}\":\"\\u0000kaji:messages\\u0000\"");
    let Some(at) = body.find(&marker) else {
        // Never expected: the caller put the sentinel there.
        return body.to_string();
    };
    let hint = cache.map_or(0, WireCache::bytes);
    let mut out = String::with_capacity(body.len() + hint + 1024);
    out.push_str(&body[..at]);
    out.push('"');
    out.push_str(key);
    out.push_str("\":[");
    write(&mut out);
    out.push(']');
    out.push_str(&body[at + marker.len()..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use kaji_protocol::ContentBlock;

    fn user(text: &str) -> Message {
        Message {
            role: Role::User,
            content: vec![ContentBlock::text(text)],
        }
    }

    fn joined(
        cache: &WireCache,
        wire: &'static str,
        messages: &[Message],
        make: impl Fn(&Message) -> String,
    ) -> String {
        let mut out = String::from("[");
        cache.write(&mut out, wire, messages, make);
        out[1..].to_string()
    }

    #[test]
    fn reuses_kept_entries_and_remakes_changed_ones() {
        let cache = WireCache::new();
        let made = std::cell::Cell::new(0);
        let make = |m: &Message| {
            made.set(made.get() + 1);
            format!("{}", m.content.len())
        };
        let mut history = vec![user("a"), user("b")];
        assert_eq!(joined(&cache, "x", &history, make), "1,1");
        assert_eq!(made.get(), 2);
        history.push(user("c"));
        assert_eq!(joined(&cache, "x", &history, make), "1,1,1");
        assert_eq!(made.get(), 3, "only the new message is made");
        // A message that grew is made again, even unannounced.
        history[2].content.push(ContentBlock::text("d"));
        assert_eq!(joined(&cache, "x", &history, make), "1,1,2");
        assert_eq!(made.get(), 4);
        // Another wire starts over.
        assert_eq!(joined(&cache, "y", &history, make), "1,1,2");
        assert_eq!(made.get(), 7);
        cache.keep_first(1);
        assert_eq!(joined(&cache, "y", &history[..2], make), "1,1");
        assert_eq!(made.get(), 8);
    }

    #[test]
    fn splices_the_array_in_place_of_the_sentinel() {
        let body = serde_json::json!({"a": 1, "messages": MESSAGES_SENTINEL, "z": "x"}).to_string();
        let items = |out: &mut String| {
            ["{\"b\":2}", "", "3"]
                .iter()
                .for_each(|i| push_item(out, i))
        };
        assert_eq!(
            splice_messages(&body, "messages", None, items),
            r#"{"a":1,"messages":[{"b":2},3],"z":"x"}"#
        );
        assert_eq!(
            splice_messages(&body, "messages", None, |_| {}),
            r#"{"a":1,"messages":[],"z":"x"}"#
        );
    }
}
