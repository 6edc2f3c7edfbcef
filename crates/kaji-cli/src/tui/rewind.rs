//! Esc Esc (Claude Code's rewind), on the UI side.
//!
//! Esc twice on an idle input opens a picker of the conversation's earlier
//! user messages; Enter on one asks the event loop to rewind the session to
//! just before it ([`Action::Rewind`]), puts its text into the input to be
//! edited and sent again, and, when the files' checkpoint of that moment is
//! known, offers to restore them (`y` / `n`, [`Action::RestoreFiles`]).
//!
//! State and keys only: it never touches the session, the files or the
//! rest of the UI's state itself ([`super::app::App`] holds a [`Rewind`] and
//! applies each [`RewindStep`]).

use crossterm::event::{KeyCode, KeyEvent};
use kaji_core::session::UserPrompt;

use super::action::Action;

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

/// What a key did to the open picker or offer.
#[derive(Debug, Clone, PartialEq)]
pub struct RewindStep {
    /// What the event loop does next.
    pub action: Action,
    /// Whether the picker or offer is closed now.
    pub close: bool,
    /// A line for the transcript, if any.
    pub note: Option<String>,
}

impl RewindStep {
    fn stay() -> Self {
        Self {
            action: Action::None,
            close: false,
            note: None,
        }
    }

    fn close(action: Action) -> Self {
        Self {
            action,
            close: true,
            note: None,
        }
    }
}

impl Rewind {
    /// The picker on the session's user messages, the newest selected;
    /// `None` when there is none to go back to.
    pub fn picker(prompts: Vec<UserPrompt>) -> Option<Self> {
        let selected = prompts.len().checked_sub(1)?;
        Some(Self::Pick { prompts, selected })
    }

    /// After the session was rewound to before `prompt`: the offer to
    /// restore the files, when the checkpoint of that moment is known.
    pub fn offer(prompt: &UserPrompt) -> Option<Self> {
        prompt
            .checkpoint
            .clone()
            .map(|checkpoint| Self::Offer { checkpoint })
    }

    /// A key while the picker or the offer is open.
    pub fn on_key(&mut self, key: KeyEvent) -> RewindStep {
        match self {
            Self::Pick { prompts, selected } => match key.code {
                KeyCode::Up => {
                    *selected = selected.saturating_sub(1);
                    RewindStep::stay()
                }
                KeyCode::Down => {
                    *selected = (*selected + 1).min(prompts.len() - 1);
                    RewindStep::stay()
                }
                KeyCode::Enter => RewindStep::close(Action::Rewind(prompts[*selected].index)),
                KeyCode::Esc => RewindStep::close(Action::None),
                _ => RewindStep::stay(),
            },
            Self::Offer { checkpoint } => match key.code {
                KeyCode::Char('y') | KeyCode::Char('Y') => {
                    RewindStep::close(Action::RestoreFiles(checkpoint.clone()))
                }
                KeyCode::Char('n') | KeyCode::Char('N') | KeyCode::Esc => RewindStep {
                    note: Some("  the files were left as they are".into()),
                    ..RewindStep::close(Action::None)
                },
                _ => RewindStep::stay(),
            },
        }
    }

    /// The lines the menu area shows for the picker or the offer.
    pub fn menu(&self) -> Vec<(String, String)> {
        match self {
            Self::Pick { prompts, selected } => prompts
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
            Self::Offer { checkpoint } => vec![(
                "restore files?".into(),
                format!(
                    "y: put the files back as they were then (checkpoint {}) · n: leave them",
                    checkpoint.get(..12).unwrap_or(checkpoint)
                ),
            )],
        }
    }
}

/// After a rewind to before `prompt`: what goes back into the input (what
/// was typed, not the files attached to it) and the transcript's note.
pub fn rewound(prompt: &UserPrompt) -> (&str, String) {
    let (typed, _) = super::mentions::split_attachments(&prompt.text);
    let note = format!(
        "  — rewound to before: {} — edit it and Enter to send it again",
        first_line(&prompt.text)
    );
    (typed, note)
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
    use super::*;
    use crossterm::event::KeyModifiers;

    fn code(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    fn prompt(index: usize, text: &str, checkpoint: Option<&str>) -> UserPrompt {
        UserPrompt {
            index,
            text: text.to_string(),
            checkpoint: checkpoint.map(str::to_string),
        }
    }

    #[test]
    fn the_picker_moves_within_its_messages_and_enter_closes_it_with_a_rewind() {
        assert_eq!(Rewind::picker(Vec::new()), None);
        let prompts = vec![prompt(0, "first", None), prompt(4, "second", None)];
        let mut picker = Rewind::picker(prompts).unwrap();
        assert_eq!(picker.on_key(code(KeyCode::Down)), RewindStep::stay());
        assert_eq!(picker.menu()[1].0, "› 2.");
        picker.on_key(code(KeyCode::Up));
        picker.on_key(code(KeyCode::Up));
        assert_eq!(picker.menu()[0].0, "› 1.");
        assert_eq!(
            picker.on_key(code(KeyCode::Enter)),
            RewindStep::close(Action::Rewind(0))
        );
    }

    #[test]
    fn the_offer_restores_on_y_and_notes_a_refusal() {
        assert_eq!(Rewind::offer(&prompt(0, "x", None)), None);
        let mut offer = Rewind::offer(&prompt(0, "x", Some("abc"))).unwrap();
        assert_eq!(offer.on_key(code(KeyCode::Char('q'))), RewindStep::stay());
        assert_eq!(
            offer.on_key(code(KeyCode::Char('y'))),
            RewindStep::close(Action::RestoreFiles("abc".into()))
        );
        let step = offer.on_key(code(KeyCode::Char('n')));
        assert!(step.close && step.note.is_some() && step.action == Action::None);
    }
}
