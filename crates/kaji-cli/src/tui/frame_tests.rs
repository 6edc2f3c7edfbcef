//! Snapshot tests of whole rendered frames (insta, on ratatui's test
//! backend): Markdown, diffs, collapsed and opened tool results, the
//! checklist panel, the slash-command menu, a narrow and a wide terminal.
//!
//! A snapshot shows the characters only, so each test also asserts on the
//! cells what a wrong rendering would get wrong (bold headings, coloured
//! code, green `+` lines, a status line that fits). Tests only: nothing
//! here runs in the binary.

use insta::assert_snapshot;
use kaji_protocol::{
    BackgroundTask, SayKind, SayPayload, StateUpdate, TaskEvent, TodoItem, TodoStatus,
};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::buffer::{Buffer, Cell};
use ratatui::style::{Color, Modifier};

use super::app::{App, StatusInfo};
use super::render;

fn status() -> StatusInfo {
    StatusInfo {
        model: "claude-sonnet-4-5".into(),
        permission_mode: "default".into(),
        cwd: "/home/dev/projects/kaji".into(),
        ..StatusInfo::default()
    }
}

fn draw(app: &mut App, width: u16, height: u16) -> Buffer {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).expect("test backend");
    terminal
        .draw(|f| render::draw(f, app))
        .expect("draw on the test backend");
    terminal.backend().buffer().clone()
}

fn rows(buffer: &Buffer) -> Vec<String> {
    let area = buffer.area;
    (0..area.height)
        .map(|y| {
            (0..area.width)
                .map(|x| buffer[(x, y)].symbol())
                .collect::<String>()
        })
        .collect()
}

/// The frame as text, trailing blanks cut (what the snapshot holds).
fn text(buffer: &Buffer) -> String {
    rows(buffer)
        .iter()
        .map(|r| r.trim_end())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The cells showing `needle` (its first occurrence).
fn cells<'a>(buffer: &'a Buffer, needle: &str) -> Vec<&'a Cell> {
    let rows = rows(buffer);
    let (y, row) = rows
        .iter()
        .enumerate()
        .find(|(_, r)| r.contains(needle))
        .unwrap_or_else(|| panic!("no row shows {needle:?}:\n{}", rows.join("\n")));
    let x = row[..row.find(needle).unwrap_or(0)].chars().count();
    (x..x + needle.chars().count())
        .map(|x| &buffer[(x as u16, y as u16)])
        .collect()
}

fn say(app: &mut App, id: u64, kind: SayKind, text: &str, payload: Option<SayPayload>) {
    app.on_event(TaskEvent::Say {
        id,
        kind,
        text: text.into(),
        partial: false,
        payload,
    });
}

const REPLY: &str = "# Title\n\nSome *emphasis*, **strong** words and `inline code`.\n\n## A list\n\n- one\n- two\n  1. nested\n\n```rust\nfn main() {\n    let x = 1;\n}\n```\n\n> a quote\n\nSee [the docs](https://example.com).";

#[test]
fn markdown_frame() {
    let mut app = App::new(status());
    say(&mut app, 0, SayKind::UserFeedback, "explain it", None);
    say(&mut app, 1, SayKind::Text, REPLY, None);
    let b = draw(&mut app, 70, 30);
    assert_snapshot!("markdown_70x30", text(&b));
    let shown = text(&b);
    assert!(
        !shown.contains("# Title") && !shown.contains("```"),
        "{shown}"
    );
    for cell in cells(&b, "Title") {
        assert!(cell.modifier.contains(Modifier::BOLD), "{cell:?}");
    }
    for cell in cells(&b, "let x = 1;").iter().filter(|c| c.symbol() != " ") {
        assert_ne!(cell.fg, Color::Reset, "{cell:?}");
    }
    for cell in cells(&b, "emphasis") {
        assert!(cell.modifier.contains(Modifier::ITALIC), "{cell:?}");
    }
}

fn edit_input() -> serde_json::Value {
    serde_json::json!({
        "file_path": "src/lib.rs",
        "old_string": "fn old() {}\n",
        "new_string": "fn new() {}\nfn more() {}\n",
    })
}

fn edit_app() -> App {
    let mut app = App::new(status());
    say(
        &mut app,
        1,
        SayKind::Tool,
        "Edit: src/lib.rs",
        Some(SayPayload::Tool {
            id: "t1".into(),
            tool: "Edit".into(),
            input: edit_input(),
            view: kaji_core::executor::recorded_view("Edit", &edit_input()),
        }),
    );
    app
}

#[test]
fn diff_frame() {
    let mut app = edit_app();
    let b = draw(&mut app, 60, 16);
    assert_snapshot!("diff_60x16", text(&b));
    for needle in ["+fn new() {}", "+fn more() {}"] {
        for cell in cells(&b, needle) {
            assert_eq!(cell.fg, Color::Green, "{needle}: {cell:?}");
        }
    }
    for cell in cells(&b, "-fn old() {}") {
        assert_eq!(cell.fg, Color::Red, "{cell:?}");
    }
}

#[test]
fn tool_results_collapsed_then_opened() {
    let mut app = App::new(status());
    say(
        &mut app,
        0,
        SayKind::Reasoning,
        "I should run the tests.\nThey live in tests/.\nThen read the failures.",
        None,
    );
    say(&mut app, 1, SayKind::Tool, "Bash: cargo test", None);
    app.on_event(TaskEvent::ToolResult {
        id: "t".into(),
        name: "Bash".into(),
        is_error: false,
        output: "running 3 tests\ntest a ... ok\ntest b ... ok\ntest c ... ok".into(),
        summary: None,
    });
    let b = draw(&mut app, 60, 14);
    assert_snapshot!("results_collapsed_60x14", text(&b));
    assert!(text(&b).contains("⎿ running 3 tests (+3 lines)"));
    assert!(!text(&b).contains("test c ... ok"));
    // Reasoning is folded too, dimmed.
    assert!(text(&b).contains("✻ I should run the tests."));
    assert!(text(&b).contains("2 more line(s) of thinking (Ctrl-O)"));
    assert!(!text(&b).contains("Then read the failures."));
    for cell in cells(&b, "I should run") {
        assert!(cell.modifier.contains(Modifier::DIM), "{cell:?}");
    }
    app.on_key(crossterm::event::KeyEvent::new(
        crossterm::event::KeyCode::Char('o'),
        crossterm::event::KeyModifiers::CONTROL,
    ));
    let b = draw(&mut app, 60, 14);
    assert_snapshot!("results_opened_60x14", text(&b));
    assert!(text(&b).contains("test c ... ok"));
    assert!(!text(&b).contains("(+3 lines)"));
    assert!(text(&b).contains("Then read the failures."));
}

#[test]
fn checklist_panel_frame() {
    let mut app = App::new(status());
    let item = |content: &str, active: &str, status| TodoItem {
        content: content.into(),
        status,
        active_form: active.into(),
    };
    say(
        &mut app,
        1,
        SayKind::Todo,
        "[{\"raw\":\"json\"}]",
        Some(SayPayload::Update(StateUpdate::Todo {
            items: vec![
                item("Read the code", "Reading the code", TodoStatus::Completed),
                item("Fix the bug", "Fixing the bug", TodoStatus::InProgress),
                item("Run the tests", "Running the tests", TodoStatus::Pending),
            ],
        })),
    );
    app.background = vec![BackgroundTask {
        id: "b1a2b3c4".into(),
        description: "cargo watch".into(),
        status: "running".into(),
    }];
    let b = draw(&mut app, 60, 20);
    assert_snapshot!("panel_60x20", text(&b));
    assert!(!text(&b).contains("json"), "{}", text(&b));
    for cell in cells(&b, "◐ Fixing the bug") {
        assert_eq!(cell.fg, Color::Yellow, "{cell:?}");
    }
    assert!(text(&b).contains("⚙ b1a2b3c4 cargo watch — running"));
}

#[test]
fn slash_menu_frame() {
    let mut app = App::new(status());
    app.on_paste("/c");
    let b = draw(&mut app, 70, 16);
    assert_snapshot!("slash_menu_70x16", text(&b));
    for name in ["/cost", "/compact", "/checkpoints", "/clear"] {
        assert!(text(&b).contains(name), "{name}: {}", text(&b));
    }
    assert!(!text(&b).contains("/help"));
    // The first entry is the one Tab takes: bold.
    for cell in cells(&b, "/cost") {
        assert!(cell.modifier.contains(Modifier::BOLD), "{cell:?}");
    }
}

/// A busy session's UI at `width` columns.
fn busy_app() -> App {
    let mut app = edit_app();
    say(&mut app, 2, SayKind::Text, "# Done\n\nAll **good**.", None);
    app.input_tokens = 123_456;
    app.output_tokens = 7_890;
    app.context_tokens = 50_000;
    app.context_window = Some(200_000);
    app.cost_usd = Some(1.234);
    app.turns = 3;
    app
}

#[test]
fn narrow_and_wide_terminals() {
    for (width, name) in [(40u16, "busy_40x16"), (200, "busy_200x16")] {
        let mut app = busy_app();
        let b = draw(&mut app, width, 16);
        assert_snapshot!(name, text(&b));
        // The status line is the row above the input box (3 rows).
        let status_row = &rows(&b)[16 - 4];
        let expected = render::status_line(&app, width).to_string();
        assert!(
            expected.chars().count() <= width as usize,
            "{width}: {expected:?}"
        );
        assert_eq!(status_row.trim_end(), expected.trim_end(), "{width}");
        assert!(status_row.starts_with("claude-sonnet-4-5"), "{status_row}");
        for cell in cells(&b, "Done") {
            assert!(cell.modifier.contains(Modifier::BOLD), "{cell:?}");
        }
        for cell in cells(&b, "+fn new() {}") {
            assert_eq!(cell.fg, Color::Green, "{cell:?}");
        }
    }
    let wide = busy_app();
    let line = render::status_line(&wide, 200).to_string();
    for part in [
        "123k↑ 7.9k↓ tokens",
        "context 25%",
        "$1.23",
        "turn 3",
        "kaji",
    ] {
        assert!(line.contains(part), "{part}: {line}");
    }
}

#[test]
fn a_running_commands_output_shows_its_last_lines_until_the_result() {
    let mut app = App::new(status());
    app.task_started();
    say(&mut app, 1, SayKind::Tool, "Bash: make", None);
    app.on_event(TaskEvent::Say {
        id: 2,
        kind: SayKind::CommandOutput,
        text: "line 1\n".into(),
        partial: true,
        payload: None,
    });
    for n in 2..=12 {
        app.on_event(TaskEvent::Delta {
            id: 2,
            text: format!("line {n}\n"),
        });
    }
    let b = draw(&mut app, 60, 20);
    let shown = text(&b);
    assert!(
        shown.contains("│ line 12") && shown.contains("│ line 5"),
        "{shown}"
    );
    assert_eq!(shown.matches("│ line").count(), 8, "{shown}");
    app.on_event(TaskEvent::ToolResult {
        id: "t".into(),
        name: "Bash".into(),
        is_error: false,
        output: "line 1\nline 12".into(),
        summary: None,
    });
    let shown = text(&draw(&mut app, 60, 20));
    assert!(!shown.contains("│ line"), "{shown}");
    assert!(shown.contains("⎿ line 1 (+1 lines)"), "{shown}");
}
