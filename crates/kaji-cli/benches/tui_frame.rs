//! Frame time of the terminal UI while a 1 MB Markdown reply streams in:
//! one delta of ~100 bytes and one full redraw (120×40, ratatui's test
//! backend) per iteration, measured once the reply holds 100 KB and once
//! it holds 1 MB (the first and the last 100 KB of the stream). The target
//! is the last at most twice the first.
//!
//! Before the frames, `support/idle_cpu.rs` measures the idle CPU of the
//! real `kaji tui` in tmux over 10 s (target: under 1% of a core);
//! `KAJI_BENCH_SKIP_IDLE=1` skips it.
//!
//! The TUI lives in the binary crate, so its modules are compiled in here
//! by path; nothing here touches a terminal.

#[allow(dead_code, unused_imports)]
#[path = "../src/tui/action.rs"]
mod action;

#[allow(dead_code, unused_imports)]
#[path = "../src/tui/app.rs"]
mod app;
#[allow(dead_code, unused_imports)]
#[path = "../src/tui/commands.rs"]
mod commands;
#[allow(dead_code, unused_imports)]
#[path = "../src/tui/diff.rs"]
mod diff;
#[allow(dead_code, unused_imports)]
#[path = "../src/tui/highlight.rs"]
mod highlight;
#[allow(dead_code, unused_imports)]
#[path = "../src/tui/input.rs"]
mod input;
#[allow(dead_code, unused_imports)]
#[path = "../src/tui/local.rs"]
mod local;
#[allow(dead_code, unused_imports)]
#[path = "../src/tui/markdown.rs"]
mod markdown;
#[allow(dead_code, unused_imports)]
#[path = "../src/tui/mentions.rs"]
mod mentions;
#[allow(dead_code, unused_imports)]
#[path = "../src/tui/nesting.rs"]
mod nesting;
#[allow(dead_code, unused_imports)]
#[path = "../src/tui/render.rs"]
mod render;
#[allow(dead_code, unused_imports)]
#[path = "../src/tui/rewind.rs"]
mod rewind;

use app::{App, StatusInfo};
use kaji_protocol::{SayKind, TaskEvent};
use ratatui::Terminal;
use ratatui::backend::TestBackend;

#[path = "support/idle_cpu.rs"]
mod idle_cpu;

fn main() {
    if std::env::var_os("KAJI_BENCH_SKIP_IDLE").is_none() {
        idle_cpu::measure(std::path::Path::new(env!("CARGO_BIN_EXE_kaji")));
    }
    divan::main();
}

/// ~100 bytes of Markdown: a paragraph line, a list item, now and then a
/// heading, a blank line or a code block.
fn chunk(n: usize) -> String {
    match n % 10 {
        0 => format!("\n## Section {n}\n\n"),
        3 => format!("- item {n} with `code` and **bold** words in it, long enough\n"),
        6 => "\n```rust\nfn main() { println!(\"hello\"); }\n```\n\n".to_string(),
        _ => format!("Some *streamed* text for chunk {n}, going on and on to fill the line. "),
    }
}

/// A UI whose reply already holds `size` bytes, drawn once.
fn streaming(size: usize) -> (App, Terminal<TestBackend>, usize) {
    let mut app = App::new(StatusInfo::default());
    app.task_started();
    app.on_event(TaskEvent::Say {
        id: 1,
        kind: SayKind::Text,
        text: String::new(),
        partial: true,
        payload: None,
    });
    let mut terminal = Terminal::new(TestBackend::new(120, 40)).expect("test backend");
    let mut n = 0;
    let mut len = 0;
    while len < size {
        let text = chunk(n);
        len += text.len();
        app.on_event(TaskEvent::Delta { id: 1, text });
        n += 1;
        // Drawn as it grows, as the UI does (at most once per burst).
        if n % 64 == 0 {
            terminal.draw(|f| render::draw(f, &mut app)).expect("draw");
        }
    }
    terminal.draw(|f| render::draw(f, &mut app)).expect("draw");
    (app, terminal, n)
}

/// One delta and one frame, with the reply at `size` bytes.
#[divan::bench(args = [100_000, 1_000_000])]
fn delta_and_frame(bencher: divan::Bencher, size: usize) {
    let (mut app, mut terminal, mut n) = streaming(size);
    bencher.bench_local(|| {
        app.on_event(TaskEvent::Delta {
            id: 1,
            text: chunk(n),
        });
        n += 1;
        terminal.draw(|f| render::draw(f, &mut app)).expect("draw");
    });
}

/// A frame with nothing new (a key that changes nothing).
#[divan::bench(args = [100_000, 1_000_000])]
fn idle_frame(bencher: divan::Bencher, size: usize) {
    let (mut app, mut terminal, _) = streaming(size);
    bencher.bench_local(|| {
        terminal.draw(|f| render::draw(f, &mut app)).expect("draw");
    });
}
