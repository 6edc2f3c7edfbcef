//! What the event loop must do after a key press: the one value the UI
//! state ([`super::app::App`], the rewind picker) hands the loop in
//! `tui/mod.rs`. Plain data: it must never carry the session or do the
//! work itself.

use kaji_core::PermissionMode;

/// What the event loop must do after a key press.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Nothing beyond redrawing.
    None,
    /// Start a new task with this prompt.
    Submit(String),
    /// Abort the running task.
    Abort,
    /// Leave the TUI.
    Quit,
    /// Forget the conversation: the next prompt starts afresh.
    Clear,
    /// `/sessions`: list this directory's saved sessions.
    Sessions,
    /// `/resume [ID|N]`: switch to a saved session (no argument: list them
    /// to pick from).
    Resume(Option<String>),
    /// `/fork`: continue in a new session with a copy of this one's history.
    Fork,
    /// `/compact [instructions]`: compact the conversation now.
    Compact(String),
    /// `/model NAME`: use this model from the next prompt on.
    Model(String),
    /// `/mode NAME`: change the permission mode.
    Mode(PermissionMode),
    /// `/reasoning LEVEL`: how hard the model thinks from the next prompt.
    Reasoning(kaji_llm::Reasoning),
    /// `/agents`: list the session's agents.
    Agents(super::local::AgentsCommand),
    /// `/checkpoints [restore N|ID]`.
    Checkpoints(super::local::CheckpointsCommand),
    /// `!command`: run it as the user's own shell command.
    Shell(String),
    /// Esc Esc: open the picker of earlier user messages.
    RewindMenu,
    /// Rewind the conversation to before user message N.
    Rewind(usize),
    /// Restore the files from this checkpoint (after a rewind).
    RestoreFiles(String),
    /// A custom command in a trusted project: run these shell commands
    /// (as `!command`s), then send the prompt.
    ShellThenSubmit(Vec<String>, String, kaji_core::PromptOptions),
    /// A custom command's prompt with its `model` and `allowed-tools`.
    SubmitCommand(String, kaji_core::PromptOptions),
    /// Ctrl+V / Alt+V: paste what the clipboard holds (an image or text).
    PasteClipboard,
    /// `/review [BASE]`: the model reviews the changes, read-only.
    Review(Option<String>),
}
