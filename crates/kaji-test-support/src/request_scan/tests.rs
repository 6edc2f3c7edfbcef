//! The cheap reading says what parsing the body whole says, on random
//! conversations that grow, change their last messages and come in other
//! conversations' turns (fixed seeds), and declines what it cannot read.

use super::*;
use serde_json::json;

/// A small xorshift generator: this crate has no `rand`.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn item(rng: &mut Rng, n: usize) -> Value {
    let text = [
        "",
        "plain",
        "quote \" and \\ and \u{0} and ü",
        "line\nbreak",
        "12",
    ];
    let text = text[rng.below(text.len() as u64) as usize];
    match rng.below(8) {
        0 => json!({"role": "assistant", "content": [{"type": "text", "text": text}]}),
        1 => json!({"role": "user", "content": text}),
        2 => {
            json!({"type": "function_call", "call_id": format!("c{n}"), "name": "Read", "arguments": text})
        }
        3 => json!({"type": "function_call_output", "call_id": format!("c{n}"), "output": text}),
        4 => json!({"type": "reasoning", "id": format!("r{n}"), "summary": [], "role": 7}),
        5 => json!({"role": "system", "content": [{"type": "text", "text": text}]}),
        6 => {
            json!({"role": "tool", "tool_call_id": format!("c{n}"), "content": {"nested": [text, 1.5, null]}})
        }
        _ => {
            json!({"content": [{"type": "text", "text": text, "role": "assistant"}], "role": "user"})
        }
    }
}

/// A body around `items`, its fields in an order the seed picks.
fn body(rng: &mut Rng, list: &str, items: &[Value], order: &[usize], pretty: bool) -> Bytes {
    let mut map = serde_json::Map::new();
    for &field in order {
        match field {
            0 => map.insert("model".into(), json!("m")),
            1 => map.insert("stream_options".into(), json!({"include_usage": true})),
            2 => map.insert(
                "system".into(),
                json!([{"type": "text", "text": "Be brief."}]),
            ),
            3 => map.insert("instructions".into(), json!("Be brief.")),
            4 => map.insert(
                "tools".into(),
                json!([{"name": "Read", "input_schema": {"type": "object"}}]),
            ),
            _ => map.insert(list.into(), Value::Array(items.to_vec())),
        };
    }
    let value = Value::Object(map);
    let text = if pretty {
        serde_json::to_string_pretty(&value).unwrap_or_default()
    } else {
        value.to_string()
    };
    // Whitespace around the body is JSON too.
    let pad = if rng.below(4) == 0 { " \n" } else { "" };
    Bytes::from(format!("{pad}{text}{pad}"))
}

/// What a summary says, comparable.
fn said(summary: &Summary, body: &[u8]) -> String {
    let items: Vec<_> = (summary.items.iter().flatten())
        .map(|i| (i.assistant, i.output, i.system_content.clone()))
        .collect();
    format!(
        "{:?} {:?} {:?} {:?} {:?} {:?}",
        summary.model,
        summary.stream_options,
        summary.system,
        summary.instructions,
        items,
        summary.last_item(body)
    )
}

#[test]
fn the_reading_says_what_the_whole_parse_says() {
    for seed in crate::seeds::seeds("request scan", &[1, 2, 3, 0x37], None) {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let reader = Reader::default();
        // Two conversations taking turns now and then.
        let mut conversations: Vec<Vec<Value>> = vec![Vec::new(), Vec::new()];
        let list = if rng.below(2) == 0 {
            "messages"
        } else {
            "input"
        };
        let mut order: Vec<usize> = (0..6).collect();
        for round in 0..200 {
            let c = usize::from(rng.below(5) == 0);
            let items = &mut conversations[c];
            match rng.below(6) {
                // The last message changes (a breakpoint moves on).
                0 if !items.is_empty() => {
                    let n = items.len();
                    items[n - 1] = item(&mut rng, n);
                }
                1 if items.len() > 6 => items.truncate(items.len() / 2),
                _ => {
                    let n = items.len();
                    let new = item(&mut rng, n);
                    items.push(new);
                }
            }
            if round % 50 == 0 {
                order.rotate_left(1 + rng.below(5) as usize);
            }
            let pretty = rng.below(10) == 0;
            let bytes = body(&mut rng, list, items, &order, pretty);
            let whole: Value = serde_json::from_slice(&bytes).unwrap_or_default();
            let summary = reader.read(&bytes, list);
            let summary = summary.unwrap_or_else(|| panic!("declined, seed {seed}, round {round}"));
            assert_eq!(
                said(&summary, &bytes),
                said(&Summary::of_value(&whole, list), &bytes),
                "seed {seed}, round {round}"
            );
        }
    }
}

#[test]
fn a_grown_body_is_read_from_where_the_last_one_changed() {
    let reader = Reader::default();
    let items: Vec<Value> = (0..5)
        .map(|n| json!({"role": "user", "content": format!("m{n}")}))
        .collect();
    let first = Bytes::from(json!({"model": "m", "messages": items[..4]}).to_string());
    reader.read(&first, "messages");
    let grown = Bytes::from(json!({"model": "m", "messages": items}).to_string());
    let recent = reader.lock().back().cloned();
    let resume = recent.and_then(|prev| resume_point(&prev, &grown, "messages"));
    // The fourth item ends where the first body's list does: the byte after
    // it differs, so three are kept.
    assert_eq!(resume.map(|r| r.items.len()), Some(3));
    let summary = reader.read(&grown, "messages");
    assert_eq!(summary.and_then(|s| s.items).map(|i| i.len()), Some(5));
}

#[test]
fn what_it_cannot_read_is_left_to_the_whole_parse() {
    let reader = Reader::default();
    for body in [
        "{not json",
        r#"{"model": "m", "messages": []} x"#,
        r#"{"model": "m", "model": "n", "messages": []}"#,
        r#"{"messages": [], "messages": []}"#,
        r#"{"messages": ["text"]}"#,
        r#"{"messages": [["user", "x"]]}"#,
        r#"{"messages": [{"role": "user", "role": "assistant"}]}"#,
        r#"{"messages": [{"role": "user",}]}"#,
        r#"{"messages": [{"role": "user"},]}"#,
        r#"{"messages": {"role": "user"}}"#,
        r#"{"messages": [{"role": "user", "content": "\x"}]}"#,
        "[1]",
        "",
    ] {
        assert!(
            reader.read(&Bytes::from(body), "messages").is_none(),
            "{body}"
        );
    }
    let read = reader.read(&Bytes::from("{}"), "messages");
    assert!(read.is_some_and(|s| s.items.is_none()));
}
