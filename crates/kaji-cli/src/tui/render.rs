//! Drawing the TUI: a pure function from [`App`] to a ratatui frame.
//!
//! Nothing here changes state except the transcript's page height, which
//! paging needs and only the layout knows. It never reads keys or events.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span, Text};
use ratatui::widgets::{Block, Borders, Paragraph, Wrap};

use super::app::{App, EntryStyle};

fn style_of(style: EntryStyle) -> Style {
    match style {
        EntryStyle::User => Style::default().add_modifier(Modifier::BOLD),
        EntryStyle::Text => Style::default(),
        EntryStyle::Reasoning => Style::default()
            .add_modifier(Modifier::DIM)
            .add_modifier(Modifier::ITALIC),
        EntryStyle::Tool => Style::default().fg(Color::Cyan),
        EntryStyle::ToolResult | EntryStyle::Note => Style::default().add_modifier(Modifier::DIM),
        EntryStyle::ToolError | EntryStyle::Error => Style::default().fg(Color::Red),
        EntryStyle::Completion => Style::default().fg(Color::Green),
    }
}

/// The transcript as styled lines, a blank line before each user message.
pub fn transcript_text(app: &App) -> Text<'static> {
    let mut lines = Vec::new();
    for entry in &app.entries {
        if entry.style == EntryStyle::User && !lines.is_empty() {
            lines.push(Line::default());
        }
        let style = style_of(entry.style);
        for l in entry.text.split('\n') {
            lines.push(Line::styled(l.to_string(), style));
        }
    }
    Text::from(lines)
}

/// Draws the whole screen.
pub fn draw(frame: &mut Frame<'_>, app: &mut App) {
    let area = frame.area();
    // The ask panel: the question (wrapped, at most 8 lines of it), then
    // the keys, under a top border; at most half the screen, and the keys
    // line always shows.
    let ask = app.ask_prompt().map(|(text, keys)| {
        let lines: Vec<Line> = text
            .lines()
            .take(8)
            .enumerate()
            .map(|(i, l)| {
                let style = if i == 0 {
                    Style::default()
                        .fg(Color::Yellow)
                        .add_modifier(Modifier::BOLD)
                } else {
                    Style::default()
                };
                Line::styled(l.to_string(), style)
            })
            .collect();
        let question = Paragraph::new(lines).wrap(Wrap { trim: false });
        let height = question.line_count(area.width) as u16;
        (question, height, keys)
    });
    let ask_height = match &ask {
        Some((_, height, _)) => (height + 2).min(area.height / 2),
        None => 0,
    };
    let [transcript_area, ask_area, status_area, input_area] = Layout::vertical([
        Constraint::Min(1),
        Constraint::Length(ask_height),
        Constraint::Length(1),
        Constraint::Length(3),
    ])
    .areas(area);

    draw_transcript(frame, app, transcript_area);
    if let Some((question, _, keys)) = ask {
        let block = Block::default()
            .borders(Borders::TOP)
            .border_style(Style::default().fg(Color::Yellow));
        let inner = block.inner(ask_area);
        frame.render_widget(block, ask_area);
        let [question_area, keys_area] =
            Layout::vertical([Constraint::Min(0), Constraint::Length(1)]).areas(inner);
        frame.render_widget(question, question_area);
        frame.render_widget(
            Paragraph::new(Line::styled(
                keys,
                Style::default().add_modifier(Modifier::DIM),
            )),
            keys_area,
        );
    }
    frame.render_widget(Paragraph::new(status_line(app)), status_area);

    let title = match app.pending.as_ref() {
        Some(_) => " answer ",
        None if app.running => " task running (Esc aborts) ",
        None => " prompt (Enter sends, Ctrl-D quits) ",
    };
    // Long input scrolls sideways so the cursor stays visible.
    let room = input_area.width.saturating_sub(5).max(1) as usize;
    let cursor = app.input.cursor();
    let skip = cursor.saturating_sub(room);
    let shown: String = app.input.text().chars().skip(skip).take(room + 1).collect();
    let input = Paragraph::new(format!("› {shown}"))
        .block(Block::default().borders(Borders::ALL).title(title));
    frame.render_widget(input, input_area);
    frame.set_cursor_position((input_area.x + 3 + (cursor - skip) as u16, input_area.y + 1));
}

fn draw_transcript(frame: &mut Frame<'_>, app: &mut App, area: Rect) {
    app.page_height = area.height.saturating_sub(1).max(1);
    let paragraph = Paragraph::new(transcript_text(app)).wrap(Wrap { trim: false });
    let total = paragraph.line_count(area.width) as u16;
    let bottom = total.saturating_sub(area.height);
    app.scroll_up = app.scroll_up.min(bottom);
    let top = bottom - app.scroll_up;
    frame.render_widget(paragraph.scroll((top, 0)), area);
}

/// The status line: model, mode, directory, turn, tokens, activity.
pub fn status_line(app: &App) -> Line<'static> {
    let dim = Style::default().add_modifier(Modifier::DIM);
    let mut spans = vec![
        Span::styled(app.status.model.clone(), Style::default().fg(Color::Cyan)),
        Span::styled(" · ", dim),
        Span::styled(app.status.permission_mode.clone(), Style::default()),
        Span::styled(" · ", dim),
        Span::styled(app.status.cwd.clone(), dim),
        Span::styled(" · ", dim),
        Span::styled(format!("turn {}", app.turns), dim),
        Span::styled(" · ", dim),
        Span::styled(
            format!("{}↑ {}↓ tokens", app.input_tokens, app.output_tokens),
            dim,
        ),
    ];
    if app.scroll_up > 0 {
        spans.push(Span::styled(" · scrolled (PageDown)", dim));
    }
    if let Some(notice) = &app.notice {
        spans.push(Span::styled(
            format!(" · {notice}"),
            Style::default().fg(Color::Yellow),
        ));
    } else if app.pending.is_some() {
        spans.push(Span::styled(
            " · waiting for you",
            Style::default().fg(Color::Yellow),
        ));
    } else if app.running {
        let secs = app.started_at.map(|t| t.elapsed().as_secs()).unwrap_or(0);
        spans.push(Span::styled(
            format!(" · working… {secs}s"),
            Style::default().fg(Color::Yellow),
        ));
    }
    Line::from(spans)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tui::app::StatusInfo;
    use kaji_protocol::{SayKind, TaskEvent};
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;

    fn screen(app: &mut App, width: u16, height: u16) -> String {
        let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
        terminal.draw(|f| draw(f, app)).unwrap();
        let buffer = terminal.backend().buffer().clone();
        let mut out = String::new();
        for y in 0..height {
            for x in 0..width {
                out.push_str(buffer[(x, y)].symbol());
            }
            out.push('\n');
        }
        out
    }

    #[test]
    fn a_long_ask_keeps_its_keys_on_screen() {
        let mut app = App::new(StatusInfo::default());
        app.task_started();
        let (tx, _rx) = tokio::sync::oneshot::channel();
        app.on_ask(
            kaji_core::AskRequest {
                id: 1,
                kind: kaji_protocol::AskKind::Command,
                text: format!("Bash: {}", "x ".repeat(800)),
                payload: None,
                agent: "main".into(),
            },
            tx,
        );
        let s = screen(&mut app, 80, 16);
        assert!(s.contains("Run this command?"), "{s}");
        assert!(s.contains("y approve · a always"), "{s}");
        assert!(s.contains("waiting for you"), "{s}");
    }

    #[test]
    fn shows_transcript_status_and_follows_the_end() {
        let mut app = App::new(StatusInfo {
            model: "scripted".into(),
            permission_mode: "default".into(),
            cwd: "/w".into(),
        });
        app.task_started();
        for i in 0..50 {
            app.on_event(TaskEvent::Say {
                id: i,
                kind: SayKind::Text,
                text: format!("line {i}"),
                partial: false,
                payload: None,
            });
        }
        let s = screen(&mut app, 60, 20);
        assert!(s.contains("line 49"), "{s}");
        assert!(!s.contains("line 10\n"), "{s}");
        assert!(s.contains("scripted · default · /w"), "{s}");
        assert!(s.contains("working…"), "{s}");
        // Scrolling up a page shows older lines.
        app.scroll_up = app.page_height;
        let s = screen(&mut app, 60, 20);
        assert!(!s.contains("line 49"), "{s}");
        assert!(s.contains("line 30 "), "{s}");
    }
}
