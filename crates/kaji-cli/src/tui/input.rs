//! The input of the TUI: multi-line text, a cursor, and the editing keys
//! (Shift-Enter, Alt-Enter and Ctrl-J insert a line break).
//!
//! Pure state, like [`super::app::App`]: it never draws and never decides
//! what Enter means.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

/// Editable text (one or more lines) with a cursor (counted in
/// characters).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct InputLine {
    text: String,
    /// Characters before the cursor.
    cursor: usize,
}

impl InputLine {
    /// The text.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The cursor position in characters.
    #[cfg(test)]
    pub fn cursor(&self) -> usize {
        self.cursor
    }

    /// Whether the line is empty.
    pub fn is_empty(&self) -> bool {
        self.text.is_empty()
    }

    /// Empties the line.
    pub fn clear(&mut self) {
        self.text.clear();
        self.cursor = 0;
    }

    /// Replaces the text and puts the cursor at its end.
    pub fn set(&mut self, text: &str) {
        self.text = text.to_string();
        self.cursor = self.text.chars().count();
    }

    fn byte_index(&self, chars: usize) -> usize {
        self.text
            .char_indices()
            .nth(chars)
            .map(|(i, _)| i)
            .unwrap_or(self.text.len())
    }

    /// The text before the cursor.
    pub fn before_cursor(&self) -> &str {
        &self.text[..self.byte_index(self.cursor)]
    }

    /// Replaces the `chars` characters before the cursor with `with`.
    pub fn replace_before_cursor(&mut self, chars: usize, with: &str) {
        let end = self.byte_index(self.cursor);
        let start = self.byte_index(self.cursor.saturating_sub(chars));
        self.text.replace_range(start..end, with);
        self.cursor = self.cursor.saturating_sub(chars) + with.chars().count();
    }

    /// Whether the text spans more than one line.
    pub fn is_multiline(&self) -> bool {
        self.text.contains('\n')
    }

    /// The cursor's line and column (in characters), from 0.
    pub fn row_col(&self) -> (usize, usize) {
        let before: String = self.text.chars().take(self.cursor).collect();
        let row = before.matches('\n').count();
        let col = before.rsplit('\n').next().unwrap_or("").chars().count();
        (row, col)
    }

    /// Inserts text at the cursor; line breaks are kept (`\r\n` and `\r`
    /// become `\n`), tabs become spaces, other control characters go.
    pub fn insert_str(&mut self, s: &str) {
        let s = s.replace("\r\n", "\n").replace('\r', "\n");
        for c in s.chars() {
            let c = if c == '\t' { ' ' } else { c };
            if c.is_control() && c != '\n' {
                continue;
            }
            let at = self.byte_index(self.cursor);
            self.text.insert(at, c);
            self.cursor += 1;
        }
    }

    /// Handles an editing key; returns `false` for keys it does not edit
    /// with (Enter, Esc, Up, …).
    pub fn edit(&mut self, key: &KeyEvent) -> bool {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        let newline = key
            .modifiers
            .intersects(KeyModifiers::SHIFT | KeyModifiers::ALT);
        let len = self.text.chars().count();
        match key.code {
            KeyCode::Enter if newline => self.insert_str("\n"),
            KeyCode::Char('j') if ctrl => self.insert_str("\n"),
            KeyCode::Char('a') if ctrl => self.cursor = 0,
            KeyCode::Char('e') if ctrl => self.cursor = len,
            KeyCode::Char('u') if ctrl => {
                let at = self.byte_index(self.cursor);
                self.text.drain(..at);
                self.cursor = 0;
            }
            KeyCode::Char('k') if ctrl => {
                let at = self.byte_index(self.cursor);
                self.text.truncate(at);
            }
            KeyCode::Char(_) if ctrl => return false,
            KeyCode::Char(c) => self.insert_str(&c.to_string()),
            KeyCode::Backspace if self.cursor > 0 => {
                self.cursor -= 1;
                let at = self.byte_index(self.cursor);
                self.text.remove(at);
            }
            KeyCode::Delete if self.cursor < len => {
                let at = self.byte_index(self.cursor);
                self.text.remove(at);
            }
            KeyCode::Backspace | KeyCode::Delete => {}
            KeyCode::Left => self.cursor = self.cursor.saturating_sub(1),
            KeyCode::Right => self.cursor = (self.cursor + 1).min(len),
            KeyCode::Home => self.cursor = 0,
            KeyCode::End => self.cursor = len,
            _ => return false,
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    #[test]
    fn edits_at_the_cursor_with_multibyte_text() {
        let mut line = InputLine::default();
        for c in "héllo".chars() {
            line.edit(&key(KeyCode::Char(c)));
        }
        line.edit(&key(KeyCode::Left));
        line.edit(&key(KeyCode::Left));
        line.edit(&key(KeyCode::Backspace));
        assert_eq!((line.text(), line.cursor()), ("hélo", 2));
        line.edit(&key(KeyCode::Home));
        line.edit(&key(KeyCode::Delete));
        line.insert_str("H\tx");
        assert_eq!(line.text(), "H xélo");
        line.edit(&key(KeyCode::End));
        line.edit(&key(KeyCode::Right));
        assert_eq!(line.cursor(), 6);
        line.edit(&KeyEvent::new(KeyCode::Char('a'), KeyModifiers::CONTROL));
        line.edit(&KeyEvent::new(KeyCode::Char('k'), KeyModifiers::CONTROL));
        assert!(line.is_empty());
        // Backspace at the start and Delete at the end do nothing.
        line.edit(&key(KeyCode::Backspace));
        line.edit(&key(KeyCode::Delete));
        assert!(!line.edit(&key(KeyCode::Enter)));
    }

    #[test]
    fn newline_keys_and_pastes_keep_line_breaks() {
        let mut line = InputLine::default();
        line.insert_str("a\r\nb");
        line.edit(&KeyEvent::new(KeyCode::Enter, KeyModifiers::SHIFT));
        line.edit(&key(KeyCode::Char('c')));
        line.edit(&KeyEvent::new(KeyCode::Enter, KeyModifiers::ALT));
        line.edit(&KeyEvent::new(KeyCode::Char('j'), KeyModifiers::CONTROL));
        line.edit(&key(KeyCode::Char('d')));
        assert_eq!(line.text(), "a\nb\nc\n\nd");
        assert!(line.is_multiline());
        assert_eq!(line.row_col(), (4, 1));
        line.set("see @sr");
        line.replace_before_cursor(3, "@src/main.rs ");
        assert_eq!(line.text(), "see @src/main.rs ");
        assert_eq!(line.before_cursor(), "see @src/main.rs ");
    }
}
