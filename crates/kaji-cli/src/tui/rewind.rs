//! Esc Esc (Claude Code's rewind) and `!command`, on the UI side.
//!
//! Esc twice on an idle input opens a picker of the conversation's earlier
//! user messages; Enter on one asks the event loop to rewind the session to
//! just before it ([`Action::Rewind`]), puts its text into the input to be
//! edited and sent again, and, when the files' checkpoint of that moment is
//! known, offers to restore them (`y` / `n`, [`Action::RestoreFiles`]).
//! A prompt starting with `!` runs as a shell command ([`Action::Shell`]).
//!
//! State and keys only: it never touches the session or the files itself.

use crossterm::event::{KeyCode, KeyEvent};
use kaji_core::session::UserPrompt;

use super::app::{Action, App};

/// The picker, or the offer that follows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rewind {
    /// Choosing the message to go back to (`selected` indexes `prompts`).
    Pick {
        /// The user messages, oldest first.
        prompts: Vec<UserPrompt>,
        /// The one Enter takes.
        selected: usize,
    },
    /// Rewound: restore the files from this checkpoint? (`y` / `n`).
    Offer {
        /// The checkpoint's id.
        checkpoint: String,
    },
}

/// How many characters of a message the picker shows.
const SHOWN: usize = 70;

impl App {
    /// Esc with no task running and nothing asked: the second in a row
    /// opens the picker.
    pub(super) fn on_idle_esc(&mut self, armed: bool) -> Action {
        if armed {
            return Action::RewindMenu;
        }
        self.esc_armed = true;
        self.notice = Some("Esc again to go back to an earlier message".into());
        Action::None
    }

    /// Opens the picker on the session's user messages (newest selected).
    pub fn open_rewind(&mut self, prompts: Vec<UserPrompt>) {
        if prompts.is_empty() {
            self.notice = Some("no earlier message to go back to".into());
            return;
        }
        let selected = prompts.len() - 1;
        self.rewind = Some(Rewind::Pick { prompts, selected });
    }

    /// The session was rewound to before `prompt`: its text goes into the
    /// input; the files' checkpoint is offered when known.
    pub fn rewound(&mut self, prompt: UserPrompt) {
        // What was typed, not the files attached to it.
        let (typed, _) = super::mentions::split_attachments(&prompt.text);
        self.input.set(typed);
        self.note(format!(
            "  — rewound to before: {} — edit it and Enter to send it again",
            first_line(&prompt.text)
        ));
        self.rewind = prompt
            .checkpoint
            .map(|checkpoint| Rewind::Offer { checkpoint });
    }

    /// Keys while the picker or the offer is open; `None` when closed.
    pub(super) fn on_rewind_key(&mut self, key: KeyEvent) -> Option<Action> {
        let rewind = self.rewind.as_mut()?;
        let action = match rewind {
            Rewind::Pick { prompts, selected } => match key.code {
                KeyCode::Up => {
                    *selected = selected.saturating_sub(1);
                    Action::None
                }
                KeyCode::Down => {
                    *selected = (*selected + 1).min(prompts.len() - 1);
                    Action::None
                }
                KeyCode::Enter => {
                    let index = prompts[*selected].index;
                    self.rewind = None;
                    Action::Rewind(index)
                }
                KeyCode::Esc => {
                    self.rewind = None;
                    Action::None
                }
                _ => Action::None,
            },
            Rewind::Offer { checkpoint } => match key.code {
                KeyCode::Char('y') | KeyCode::Char('Y') => {
                    let id = checkpoint.clone();
                    self.rewind = None;
                    Action::RestoreFiles(id)
                }
                KeyCode::Char('n') | KeyCode::Char('N') | KeyCode::Esc => {
                    self.rewind = None;
                    self.note("  the files were left as they are".into());
                    Action::None
                }
                _ => Action::None,
            },
        };
        Some(action)
    }

    /// The lines the menu area shows for the picker or the offer.
    pub fn rewind_menu(&self) -> Option<Vec<(String, String)>> {
        match self.rewind.as_ref()? {
            Rewind::Pick { prompts, selected } => Some(
                prompts
                    .iter()
                    .enumerate()
                    .skip(selected.saturating_sub(6))
                    .take(8)
                    .map(|(i, p)| {
                        let mark = if i == *selected { "›" } else { " " };
                        let (typed, _) = super::mentions::split_attachments(&p.text);
                        (format!("{mark} {}.", i + 1), first_line(typed))
                    })
                    .collect(),
            ),
            Rewind::Offer { checkpoint } => Some(vec![(
                "restore files?".into(),
                format!(
                    "y: put the files back as they were then (checkpoint {}) · n: leave them",
                    checkpoint.get(..12).unwrap_or(checkpoint)
                ),
            )]),
        }
    }

    /// A prompt `!command`: the shell command, or a note when it cannot
    /// run now.
    pub(super) fn shell(&mut self, command: &str) -> Action {
        let command = command.trim();
        if command.is_empty() {
            self.error("! alone runs nothing: type a command after it".into());
            return Action::None;
        }
        if self.running {
            self.notice = Some("a task is running: wait, or Esc to abort it".into());
            return Action::None;
        }
        Action::Shell(command.to_string())
    }
}

fn first_line(text: &str) -> String {
    let line = text.lines().next().unwrap_or("");
    let mut shown: String = line.chars().take(SHOWN).collect();
    if line.chars().count() > SHOWN || text.lines().nth(1).is_some() {
        shown.push('…');
    }
    shown
}

#[cfg(test)]
mod tests {
    use super::super::app::StatusInfo;
    use super::*;
    use crossterm::event::KeyModifiers;

    fn code(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    fn prompts() -> Vec<UserPrompt> {
        ["first", "second\nline two", "third"]
            .iter()
            .enumerate()
            .map(|(index, text)| UserPrompt {
                index,
                text: text.to_string(),
                checkpoint: (index == 1).then(|| "0123456789abcdef0123".to_string()),
            })
            .collect()
    }

    #[test]
    fn esc_esc_opens_the_picker_and_enter_rewinds_to_the_chosen_message() {
        let mut app = App::new(StatusInfo::default());
        assert_eq!(app.on_key(code(KeyCode::Esc)), Action::None);
        assert!(app.notice.as_deref().unwrap_or("").contains("Esc again"));
        // Another key between disarms it.
        app.on_key(code(KeyCode::Left));
        assert_eq!(app.on_key(code(KeyCode::Esc)), Action::None);
        assert_eq!(app.on_key(code(KeyCode::Esc)), Action::RewindMenu);
        app.open_rewind(prompts());
        let menu = app.rewind_menu().unwrap();
        assert_eq!(menu.len(), 3);
        assert_eq!(menu[2], ("› 3.".to_string(), "third".to_string()));
        assert_eq!(menu[1].1, "second…");
        app.on_key(code(KeyCode::Up));
        assert_eq!(app.on_key(code(KeyCode::Enter)), Action::Rewind(1));
        assert!(app.rewind.is_none());
        // Rewound: the text is in the input and the files are offered.
        app.rewound(prompts().remove(1));
        assert_eq!(app.input.text(), "second\nline two");
        assert!(app.rewind_menu().unwrap()[0].1.contains("0123456789ab"));
        assert_eq!(
            app.on_key(KeyEvent::new(KeyCode::Char('y'), KeyModifiers::NONE)),
            Action::RestoreFiles("0123456789abcdef0123".into())
        );
        // Without a known checkpoint there is no offer; Esc closes the
        // picker; no messages, no picker.
        app.rewound(prompts().remove(0));
        assert!(app.rewind.is_none());
        app.open_rewind(prompts());
        app.on_key(code(KeyCode::Esc));
        assert!(app.rewind.is_none());
        app.open_rewind(Vec::new());
        assert!(app.rewind.is_none());
        // While a task runs Esc aborts, as before.
        app.task_started();
        assert_eq!(app.on_key(code(KeyCode::Esc)), Action::Abort);
    }

    #[test]
    fn a_bang_prompt_is_a_shell_command() {
        let mut app = App::new(StatusInfo::default());
        app.input.set("!ls -la");
        assert_eq!(
            app.on_key(code(KeyCode::Enter)),
            Action::Shell("ls -la".into())
        );
        app.input.set("!  ");
        assert_eq!(app.on_key(code(KeyCode::Enter)), Action::None);
        app.task_started();
        app.input.set("!ls");
        assert_eq!(app.on_key(code(KeyCode::Enter)), Action::None);
        assert!(app.notice.is_some());
    }
}
