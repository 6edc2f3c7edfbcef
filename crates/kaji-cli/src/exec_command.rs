//! `kaji exec "/name args"`: a prompt that names a custom command is that
//! command's expansion, as in the TUI — its `` !`cmd` `` commands run first
//! through the session (its approvals and sandbox; in a trusted project
//! only), its `model` and `allowed-tools` apply to the prompt.
//!
//! It never runs anything itself and never prints except warnings on
//! stderr.

use kaji_core::{PromptOptions, Session};

use crate::tui::commands;

/// What to submit for `prompt`: the expansion of the custom command it
/// names, or the prompt as typed.
pub async fn prepare(
    session: &Session,
    prompt: String,
    trusted: bool,
) -> anyhow::Result<(String, PromptOptions)> {
    let text = prompt.trim_start();
    if !commands::is_command(text) {
        return Ok((prompt, PromptOptions::default()));
    }
    let (word, args) = text.split_once(char::is_whitespace).unwrap_or((text, ""));
    let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
    let dirs = commands::command_dirs(
        session.project_dir(),
        &crate::paths::kaji_home(),
        home.as_deref(),
    );
    let (custom, warnings) = commands::load(&dirs);
    for w in warnings {
        eprintln!("kaji exec: warning: {w}");
    }
    let Some(command) = commands::find(&custom, &word[1..]) else {
        eprintln!("kaji exec: warning: no custom command {word}; the prompt is sent as typed");
        return Ok((prompt, PromptOptions::default()));
    };
    let cwd = session.cwd();
    let expansion = commands::expand(command, args, &cwd, session.project_dir());
    for note in &expansion.notes {
        eprintln!("kaji exec: {word}: {note}");
    }
    if trusted {
        for shell in &expansion.shell {
            session.run_shell(shell).await?;
        }
    } else if !expansion.shell.is_empty() {
        eprintln!(
            "kaji exec: {word}: {} !`…` command(s) not run: running commands from a command file needs a trusted project (--trust or `kaji trust`)",
            expansion.shell.len()
        );
    }
    let mut options = PromptOptions {
        model: command.model.clone().filter(|m| !m.trim().is_empty()),
        ..PromptOptions::default()
    };
    if let Some(tools) = &command.allowed_tools {
        let from_project = command.path.starts_with(session.project_dir());
        if trusted || !from_project {
            options.allow = tools.clone();
            options.allow_source = Some(kaji_policy::RuleSource::Command(command.path.clone()));
        } else {
            eprintln!(
                "kaji exec: {word}: its allowed-tools are not applied: a project's command file allows tools only in a trusted project"
            );
        }
    }
    Ok((expansion.prompt, options))
}
