//! Reply parser throughput and per-chunk cost: replies of 1 KB to 1 MB fed
//! in 16-byte chunks, for plain text (native protocol) and text with xml
//! tool calls. A flat per-chunk cost means the parser never re-reads what
//! it has seen.

use kaji_core::parser::{ParamKind, ReplyAssembler, ToolProtocol, XmlToolGrammar};
use kaji_protocol::StreamEvent;

const SIZES: &[usize] = &[1 << 10, 16 << 10, 256 << 10, 1 << 20];

fn grammar() -> XmlToolGrammar {
    let mut g = XmlToolGrammar::default();
    g.add_tool(
        "Read",
        &[
            ("file_path", ParamKind::String),
            ("offset", ParamKind::Json),
        ],
    );
    g.add_tool(
        "Write",
        &[
            ("file_path", ParamKind::String),
            ("content", ParamKind::String),
        ],
    );
    g.add_tool("Bash", &[("command", ParamKind::String)]);
    g
}

/// A reply of `size` bytes: prose with some code-like `<` characters, and
/// (for xml) a Write call every 4 KB whose content holds tags.
fn reply(size: usize, xml: bool) -> String {
    let prose = "The parser walks the reply once; Vec<String> and a < b stay text. ";
    let call = "<Write><file_path>src/x.rs</file_path><content>fn f() -> Vec<u8> { vec![] } // </content> in code\n</content></Write>";
    let mut s = String::with_capacity(size + 256);
    while s.len() < size {
        if xml && s.len() % 4096 < prose.len() {
            s.push_str(call);
        }
        s.push_str(prose);
    }
    s.truncate(size);
    s
}

fn chunks(text: &str, n: usize) -> Vec<StreamEvent> {
    let mut out = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let mut k = n.min(rest.len());
        while !rest.is_char_boundary(k) {
            k += 1;
        }
        out.push(StreamEvent::TextDelta {
            text: rest[..k].to_string(),
        });
        rest = &rest[k..];
    }
    out
}

fn run(events: &[StreamEvent], protocol: ToolProtocol) -> usize {
    let mut a = ReplyAssembler::new(protocol, grammar(), "xml_");
    for e in events {
        a.push(e);
    }
    a.finish();
    a.blocks().len()
}

#[divan::bench(args = SIZES)]
fn native_text_16b_chunks(bencher: divan::Bencher, size: usize) {
    let events = chunks(&reply(size, false), 16);
    bencher
        .counter(divan::counter::BytesCount::new(size))
        .bench(|| run(divan::black_box(&events), ToolProtocol::Native));
}

#[divan::bench(args = SIZES)]
fn xml_tools_16b_chunks(bencher: divan::Bencher, size: usize) {
    let events = chunks(&reply(size, true), 16);
    bencher
        .counter(divan::counter::BytesCount::new(size))
        .bench(|| run(divan::black_box(&events), ToolProtocol::Xml));
}

/// Cost per 16-byte chunk of the next 256 chunks after `size` bytes have
/// been parsed: flat across sizes when the work per chunk does not grow
/// with the reply (growth of the reply's buffers is amortised over them).
#[divan::bench(args = SIZES)]
fn next_chunks_after(bencher: divan::Bencher, size: usize) {
    let prefix = chunks(&reply(size, true), 16);
    let next = chunks(&reply(4096, true), 16);
    bencher
        .counter(divan::counter::ItemsCount::new(next.len()))
        .with_inputs(|| {
            let mut a = ReplyAssembler::new(ToolProtocol::Xml, grammar(), "xml_");
            for e in &prefix {
                a.push(e);
            }
            a
        })
        .bench_local_refs(|a| {
            for e in &next {
                a.push(divan::black_box(e));
            }
        });
}

fn main() {
    divan::main();
}
