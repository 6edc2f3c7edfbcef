//! What the scripted server reads of a request body to choose its reply:
//! the model, `stream_options`, the system text and each message's (or
//! Responses item's) role and type. It reads the body's top level and its
//! message list without building the whole body as a JSON tree, and it
//! reuses what it read of a recent body: a conversation's next request
//! repeats the last one's bytes up to its newest messages, so only the
//! bytes after the common prefix are read again, and the server's work per
//! request does not grow with the conversation.
//!
//! Every byte read is checked as JSON (each value by serde_json). A body
//! this reader declines (not JSON, a duplicate field it reads, an item
//! that is not an object, ...) is parsed whole by the caller as before,
//! which gives the same answers and errors. It never decides the reply:
//! it reports what the body says.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use serde::Deserialize;
use serde::de::{DeserializeOwned, IgnoredAny};
use serde_json::Value;

/// How many recent bodies are kept to compare a new one with.
const RECENT: usize = 4;

/// What a body says that the reply depends on.
#[derive(Debug, Clone, Default)]
pub(crate) struct Summary {
    /// The top-level `model`.
    pub model: Option<Value>,
    /// The top-level `stream_options`.
    pub stream_options: Option<Value>,
    /// The top-level `system` (Anthropic).
    pub system: Option<Value>,
    /// The top-level `instructions` (Responses).
    pub instructions: Option<Value>,
    /// The list's items (`messages`, or `input` for Responses); `None`
    /// when the body has no such array.
    pub items: Option<Vec<Item>>,
    /// The last item, when the body was parsed whole.
    last: Option<Value>,
}

/// One message (or Responses item) of the list.
#[derive(Debug, Clone)]
pub(crate) struct Item {
    /// Its bytes in the body (`start..end`).
    start: usize,
    end: usize,
    /// `role` is `assistant`.
    pub assistant: bool,
    /// A Responses output item: an assistant message, reasoning, a
    /// function call or a web search.
    pub output: bool,
    /// The `content` of a `role: system` message.
    pub system_content: Option<Value>,
}

impl Item {
    fn new(start: usize, end: usize, role: Option<&str>, kind: Option<&str>) -> Self {
        let output = role == Some("assistant")
            || matches!(
                kind,
                Some("reasoning" | "function_call" | "custom_tool_call" | "web_search_call")
            );
        Self {
            start,
            end,
            assistant: role == Some("assistant"),
            output,
            system_content: None,
        }
    }
}

impl Summary {
    /// The summary of a body parsed whole (`list` names the item array).
    pub(crate) fn of_value(body: &Value, list: &str) -> Self {
        let items = body.get(list).and_then(Value::as_array);
        Self {
            model: body.get("model").cloned(),
            stream_options: body.get("stream_options").cloned(),
            system: body.get("system").cloned(),
            instructions: body.get("instructions").cloned(),
            items: items.map(|items| {
                items
                    .iter()
                    .map(|m| {
                        let role = m.get("role").and_then(Value::as_str);
                        let mut item = Item::new(0, 0, role, m.get("type").and_then(Value::as_str));
                        if role == Some("system") {
                            item.system_content = m.get("content").cloned();
                        }
                        item
                    })
                    .collect()
            }),
            last: items.and_then(|items| items.last()).cloned(),
        }
    }

    /// The last item as JSON (read from `body`, the bytes this summary
    /// was made from).
    pub(crate) fn last_item(&self, body: &[u8]) -> Option<Value> {
        if let Some(last) = &self.last {
            return Some(last.clone());
        }
        let item = self.items.as_ref()?.last()?;
        serde_json::from_slice(body.get(item.start..item.end)?).ok()
    }
}

/// A body read, kept to compare later bodies with.
struct Scanned {
    body: Bytes,
    /// Which list was read (`messages` or `input`).
    list: &'static str,
    /// The offset of the list's `[`.
    list_open: usize,
    /// The fields read before the list (the bytes before it are the same
    /// in a body that shares the prefix).
    head: Summary,
    /// The summary of the whole body.
    summary: Summary,
}

/// The bodies read lately, most recent last.
#[derive(Default)]
pub(crate) struct Reader {
    recent: Mutex<VecDeque<Arc<Scanned>>>,
}

impl Reader {
    /// What `body` says, its list being `list`; `None` when this reader
    /// declines it (the caller parses it whole).
    pub(crate) fn read(&self, body: &Bytes, list: &'static str) -> Option<Summary> {
        let recent: Vec<Arc<Scanned>> = self.lock().iter().rev().cloned().collect();
        let resumed = recent
            .iter()
            .find_map(|prev| resume_point(prev, body, list));
        let mut parser = Parser {
            bytes: body,
            list,
            summary: Summary::default(),
            head: None,
            list_open: None,
        };
        parser.run(resumed)?;
        let summary = parser.summary.clone();
        if let (Some(list_open), Some(head)) = (parser.list_open, parser.head) {
            let mut recent = self.lock();
            if recent.len() == RECENT {
                recent.pop_front();
            }
            recent.push_back(Arc::new(Scanned {
                body: body.clone(),
                list,
                list_open,
                head,
                summary: parser.summary,
            }));
        }
        Some(summary)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Arc<Scanned>>> {
        self.recent.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Where reading a body can start after what `prev` read of a body with
/// the same prefix: the fields before the list, the items wholly inside
/// the common prefix, and the offset after the last of them. `None` when
/// the common prefix holds no whole item.
struct Resume {
    head: Summary,
    list_open: usize,
    items: Vec<Item>,
    after: usize,
}

fn resume_point(prev: &Scanned, body: &[u8], list: &str) -> Option<Resume> {
    if prev.list != list {
        return None;
    }
    let common = common_prefix(&prev.body, body);
    if common <= prev.list_open {
        return None;
    }
    let items = prev.summary.items.as_deref().unwrap_or_default();
    // An item is the same when the byte after it is too.
    let kept = items.partition_point(|item| item.end < common);
    let last = items.get(kept.checked_sub(1)?)?;
    Some(Resume {
        head: prev.head.clone(),
        list_open: prev.list_open,
        items: items[..kept].to_vec(),
        after: last.end,
    })
}

/// How many leading bytes `a` and `b` share.
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    const CHUNK: usize = 4096;
    let n = a.len().min(b.len());
    let mut i = 0;
    while i + CHUNK <= n && a[i..i + CHUNK] == b[i..i + CHUNK] {
        i += CHUNK;
    }
    while i < n && a[i] == b[i] {
        i += 1;
    }
    i
}

/// The JSON value at `pos` (after any whitespace) and the offset after it.
fn value_at<T: DeserializeOwned>(bytes: &[u8], pos: usize) -> Option<(T, usize)> {
    let rest = bytes.get(pos..)?;
    let mut values = serde_json::Deserializer::from_slice(rest).into_iter::<T>();
    let value = values.next()?.ok()?;
    Some((value, pos + values.byte_offset()))
}

/// The fields of an item this reader looks at.
#[derive(Deserialize)]
struct Head {
    #[serde(default)]
    role: Option<Value>,
    #[serde(default, rename = "type")]
    kind: Option<Value>,
}

/// One reading of a body's top level and list.
struct Parser<'a> {
    bytes: &'a [u8],
    list: &'static str,
    summary: Summary,
    /// The summary when the list began.
    head: Option<Summary>,
    list_open: Option<usize>,
}

impl Parser<'_> {
    fn ws(&self, mut pos: usize) -> usize {
        while matches!(self.bytes.get(pos), Some(b' ' | b'\n' | b'\r' | b'\t')) {
            pos += 1;
        }
        pos
    }

    /// Reads the whole body, or from `resume` on; `None` when declined.
    fn run(&mut self, resume: Option<Resume>) -> Option<()> {
        let end = match resume {
            Some(resume) => {
                self.summary = resume.head.clone();
                self.summary.items = Some(resume.items);
                self.head = Some(resume.head);
                self.list_open = Some(resume.list_open);
                let pos = self.items(resume.after, true)?;
                self.members(pos, false)?
            }
            None => {
                let pos = self.ws(0);
                (self.bytes.get(pos) == Some(&b'{')).then_some(())?;
                let pos = self.ws(pos + 1);
                if self.bytes.get(pos) == Some(&b'}') {
                    pos + 1
                } else {
                    self.members(pos, true)?
                }
            }
        };
        (self.ws(end) == self.bytes.len()).then_some(())
    }

    /// Reads an object's members from `pos`, which is at a key when
    /// `at_key`, else after a member's value; returns the offset after
    /// the `}`.
    fn members(&mut self, mut pos: usize, mut at_key: bool) -> Option<usize> {
        loop {
            if at_key {
                let (key, after) = value_at::<String>(self.bytes, pos)?;
                let colon = self.ws(after);
                (self.bytes.get(colon) == Some(&b':')).then_some(())?;
                pos = self.member(&key, self.ws(colon + 1))?;
            }
            pos = self.ws(pos);
            match self.bytes.get(pos)? {
                b',' => {
                    pos = self.ws(pos + 1);
                    at_key = true;
                }
                b'}' => return Some(pos + 1),
                _ => return None,
            }
        }
    }

    /// Reads the value of the top-level member `key` at `pos`.
    fn member(&mut self, key: &str, pos: usize) -> Option<usize> {
        let field = match key {
            _ if key == self.list => {
                // A second list: left to the whole parse.
                self.list_open.is_none().then_some(())?;
                (self.bytes.get(pos) == Some(&b'[')).then_some(())?;
                self.head = Some(self.summary.clone());
                self.list_open = Some(pos);
                self.summary.items = Some(Vec::new());
                return self.items(pos + 1, false);
            }
            "model" => &mut self.summary.model,
            "stream_options" => &mut self.summary.stream_options,
            "system" => &mut self.summary.system,
            "instructions" => &mut self.summary.instructions,
            _ => return value_at::<IgnoredAny>(self.bytes, pos).map(|(_, end)| end),
        };
        // A field read twice: left to the whole parse.
        field.is_none().then_some(())?;
        let (value, end) = value_at::<Value>(self.bytes, pos)?;
        *field = Some(value);
        Some(end)
    }

    /// Reads the list's items from `pos`, which is after a `[` or, when
    /// `after_item`, after an item; returns the offset after the `]`.
    fn items(&mut self, mut pos: usize, mut after_item: bool) -> Option<usize> {
        if !after_item {
            pos = self.ws(pos);
            if self.bytes.get(pos) == Some(&b']') {
                return Some(pos + 1);
            }
        }
        loop {
            if !after_item {
                let item = self.item(pos)?;
                pos = item.end;
                self.summary.items.get_or_insert_with(Vec::new).push(item);
            }
            after_item = false;
            pos = self.ws(pos);
            match self.bytes.get(pos)? {
                b',' => pos = self.ws(pos + 1),
                b']' => return Some(pos + 1),
                _ => return None,
            }
        }
    }

    /// The item at `pos` (an object, or the reading is declined).
    fn item(&self, start: usize) -> Option<Item> {
        (self.bytes.get(start) == Some(&b'{')).then_some(())?;
        let (head, end) = value_at::<Head>(self.bytes, start)?;
        let role = head.role.as_ref().and_then(Value::as_str);
        let kind = head.kind.as_ref().and_then(Value::as_str);
        let mut item = Item::new(start, end, role, kind);
        if role == Some("system") {
            let message: Value = serde_json::from_slice(&self.bytes[start..end]).ok()?;
            item.system_content = message.get("content").cloned();
        }
        Some(item)
    }
}

#[cfg(test)]
mod tests;
