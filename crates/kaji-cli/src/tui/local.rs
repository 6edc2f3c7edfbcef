//! Slash commands of the TUI that look at the session rather than at the
//! UI's own state: `/agents` (the session's runtime registry),
//! `/checkpoints` (the working directory's checkpoint store), and the
//! prompt `/init` sends.
//!
//! Each returns the lines to show; none of them talks to the model, and
//! only `/checkpoints restore` changes anything (the directory's files,
//! after saving their present state as a checkpoint of its own).

use std::path::Path;

use kaji_core::checkpoints::{Checkpoint, CheckpointStore};
use kaji_protocol::Usage;
use kaji_tasks::runtime::RuntimeTaskInfo;

/// What `/init` sends to the model.
pub const INIT_PROMPT: &str = "Please look at this repository and write an AGENTS.md file at its root: a short guide for coding agents working here. Find out what the project is, how it is laid out, how to build it, run its tests and lint it (the exact commands), its code style and conventions, and anything a newcomer would trip over. Read the README, the build files and CI configuration, and a few source files. If an AGENTS.md (or CLAUDE.md, .cursorrules, .github/copilot-instructions.md) already exists, improve it rather than starting over. Keep it concise and specific to this repository.";

/// `/agents`: the session's sub-agents and background agents, with their
/// status and what they are doing, and the tokens sub-agents used.
pub fn agents_text(
    tasks: &[RuntimeTaskInfo],
    finished: &[String],
    subagent_usage: &Usage,
) -> String {
    let mut lines: Vec<String> = tasks
        .iter()
        .filter(|t| t.task_type.is_agent())
        .map(|t| {
            let name = t.agent.as_deref().unwrap_or("agent");
            let mut line = format!(
                "  ⚙ {} {name} — {} · {}",
                t.id,
                t.status.as_str(),
                t.description
            );
            if let Some(activity) = t.activity.as_deref().filter(|a| !a.is_empty()) {
                line.push_str(&format!(" · {activity}"));
            }
            if let Some(tokens) = t.tokens {
                line.push_str(&format!(" · {tokens} tokens"));
            }
            line
        })
        .collect();
    // Sub-agents that ran in the foreground and ended (the runtime
    // registry holds only background ones).
    lines.extend(finished.iter().map(|f| format!("  ✓ {f}")));
    if lines.is_empty() {
        lines.push("  no sub-agents or background agents in this session".into());
    }
    lines.push(format!(
        "  sub-agents used {} input / {} output tokens",
        subagent_usage.input_tokens, subagent_usage.output_tokens
    ));
    lines.join("\n")
}

/// What `/agents ARGS` asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AgentsCommand {
    /// List them.
    List,
    /// Show the transcript (what this UI has not shown of it yet).
    Show(String),
    /// Stop one.
    Stop(String),
}

/// Parses the arguments of `/agents`.
pub fn parse_agents(args: &str) -> Result<AgentsCommand, String> {
    let mut words = args.split_whitespace();
    match (words.next(), words.next(), words.next()) {
        (None, _, _) | (Some("list"), None, _) => Ok(AgentsCommand::List),
        (Some("show"), Some(id), None) => Ok(AgentsCommand::Show(id.into())),
        (Some("stop"), Some(id), None) => Ok(AgentsCommand::Stop(id.into())),
        _ => Err(format!(
            "/agents {args}: use /agents (list), /agents show ID or /agents stop ID"
        )),
    }
}

/// The reader name the UI reads agents' transcripts under.
const UI_READER: &str = "ui";

/// `/agents show ID` and `/agents stop ID`: the agent's new transcript, or
/// what stopping it did. Ids name agent tasks only.
pub async fn agents_action(
    runtime: &kaji_tasks::RuntimeTaskRegistry,
    command: &AgentsCommand,
) -> Result<String, String> {
    let id = match command {
        AgentsCommand::List => return Err("nothing to do".into()),
        AgentsCommand::Show(id) | AgentsCommand::Stop(id) => id,
    };
    let info = runtime.get(id).map_err(|e| e.to_string())?;
    if !info.task_type.is_agent() {
        return Err(format!("{id} is a {}, not an agent", info.task_type));
    }
    let name = info.agent.clone().unwrap_or_default();
    match command {
        AgentsCommand::Stop(_) => {
            let stopped = runtime.stop(id).await.map_err(|e| e.to_string())?;
            Ok(format!("  ⚙ {id} {name} — {}", stopped.status.as_str()))
        }
        _ => {
            let read = runtime
                .read_since_last(UI_READER, id, false, std::time::Duration::ZERO)
                .await
                .map_err(|e| e.to_string())?;
            let text = String::from_utf8_lossy(&read.output);
            let text = kaji_protocol::terminal::sanitize_terminal(&text, false);
            let body = if text.trim().is_empty() {
                "  (nothing new)".to_string()
            } else {
                text.lines()
                    .map(|l| format!("  │ {l}"))
                    .collect::<Vec<_>>()
                    .join("\n")
            };
            Ok(format!(
                "  ⚙ {id} {name} — {}\n{body}",
                read.task.status.as_str()
            ))
        }
    }
}

/// What `/checkpoints ARGS` asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CheckpointsCommand {
    /// List them, numbered, newest first.
    List,
    /// Restore one: a number of the last listing, or an id (prefix).
    Restore(String),
}

/// Parses the arguments of `/checkpoints`.
pub fn parse_checkpoints(args: &str) -> Result<CheckpointsCommand, String> {
    let mut words = args.split_whitespace();
    match (words.next(), words.next(), words.next()) {
        (None, _, _) | (Some("list"), None, _) => Ok(CheckpointsCommand::List),
        (Some("restore"), Some(which), None) => Ok(CheckpointsCommand::Restore(which.into())),
        _ => Err(format!(
            "/checkpoints {args}: use /checkpoints (list) or /checkpoints restore N|ID"
        )),
    }
}

/// The listing's lines (numbered from 1, newest first).
pub fn checkpoints_text(dir: &Path, checkpoints: &[Checkpoint]) -> String {
    if checkpoints.is_empty() {
        return format!("  no checkpoints of {}", dir.display());
    }
    let mut lines = vec![format!("  checkpoints of {}, newest first:", dir.display())];
    for (n, c) in checkpoints.iter().enumerate() {
        lines.push(format!(
            "  {:>3}. {}  {}  {}",
            n + 1,
            c.id.short(),
            ago(c.time),
            c.label
        ));
    }
    lines.push("  /checkpoints restore N (or an id) puts the files back as they were".into());
    lines.join("\n")
}

fn ago(time: u64) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(time);
    match now.saturating_sub(time) {
        s if s < 120 => format!("{s}s ago"),
        s if s < 7200 => format!("{}m ago", s / 60),
        s if s < 172_800 => format!("{}h ago", s / 3600),
        s => format!("{}d ago", s / 86_400),
    }
}

/// Runs `/checkpoints …` on the store of `dir`; `listed` holds the ids of
/// the last listing (for `restore N`) and is refreshed by a listing.
pub async fn checkpoints(
    kaji_home: &Path,
    dir: &Path,
    command: CheckpointsCommand,
    listed: &mut Vec<String>,
) -> Result<String, String> {
    let store = CheckpointStore::open(kaji_home, dir).map_err(|e| e.to_string())?;
    match command {
        CheckpointsCommand::List => {
            let list = store.list().await.map_err(|e| e.to_string())?;
            *listed = list.iter().map(|c| c.id.as_str().to_string()).collect();
            Ok(checkpoints_text(dir, &list))
        }
        CheckpointsCommand::Restore(which) => {
            let id = match which.parse::<usize>() {
                Ok(n) if (1..=listed.len()).contains(&n) => listed[n - 1].clone(),
                Ok(n) if which.len() < 4 => {
                    return Err(format!(
                        "no checkpoint {n} in the last listing (/checkpoints lists them)"
                    ));
                }
                _ => which,
            };
            restore(&store, &id).await
        }
    }
}

/// Restores checkpoint `id` (an id or a prefix of one) and says how to
/// undo it.
pub async fn restore(store: &CheckpointStore, id: &str) -> Result<String, String> {
    let target = store.resolve(id).await.map_err(|e| e.to_string())?;
    let outcome = store.restore(&target).await.map_err(|e| e.to_string())?;
    Ok(format!(
        "  restored the files to checkpoint {}; the state before is checkpoint {} (/checkpoints restore {} undoes it)",
        target.short(),
        outcome.before.short(),
        outcome.before.short()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_commands_are_local_listed_in_help_and_init_is_a_prompt() {
        use super::super::app::{Action, App, StatusInfo};
        use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
        let mut app = App::new(StatusInfo::default());
        let enter = |app: &mut App, text: &str| {
            app.input.set(text);
            app.on_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE))
        };
        assert_eq!(
            enter(&mut app, "/agents"),
            Action::Agents(AgentsCommand::List)
        );
        assert_eq!(
            enter(&mut app, "/agents show t123"),
            Action::Agents(AgentsCommand::Show("t123".into()))
        );
        assert_eq!(
            enter(&mut app, "/agents stop t123"),
            Action::Agents(AgentsCommand::Stop("t123".into()))
        );
        assert_eq!(
            enter(&mut app, "/checkpoints"),
            Action::Checkpoints(CheckpointsCommand::List)
        );
        assert_eq!(
            enter(&mut app, "/checkpoints restore 3"),
            Action::Checkpoints(CheckpointsCommand::Restore("3".into()))
        );
        assert_eq!(enter(&mut app, "/checkpoints bogus"), Action::None);
        assert!(
            app.entries
                .last()
                .unwrap()
                .text
                .starts_with("! /checkpoints bogus")
        );
        assert_eq!(enter(&mut app, "/init"), Action::Submit(INIT_PROMPT.into()));
        // Completion: the menu offers them.
        app.input.set("/ch");
        assert_eq!(app.menu()[0].0, "/checkpoints");
        app.input.set("/ag");
        assert_eq!(app.menu()[0].0, "/agents");
        let help = super::super::commands::help(&[]);
        for name in ["/agents", "/checkpoints", "/init"] {
            assert!(help.contains(name), "{help}");
        }
        // While a task runs, /init is queued and a restore waits.
        app.task_started();
        assert_eq!(enter(&mut app, "/init"), Action::None);
        assert_eq!(app.queued.len(), 1);
        assert_eq!(enter(&mut app, "/checkpoints restore 1"), Action::None);
        assert!(
            app.notice
                .as_deref()
                .unwrap_or("")
                .contains("task is running")
        );
    }

    #[test]
    fn a_custom_commands_shell_lines_run_only_in_a_trusted_project() {
        use super::super::app::{Action, App, StatusInfo};
        use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
        let mut app = App::new(StatusInfo::default());
        app.custom = vec![super::super::commands::parse(
            "ctx",
            "!`git status` then review $1",
            Default::default(),
        )];
        let enter = |app: &mut App| {
            app.input.set("/ctx a.rs");
            app.on_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE))
        };
        // Untrusted: the command is not run, the text stays.
        assert_eq!(
            enter(&mut app),
            Action::Submit("`git status` then review a.rs".into())
        );
        app.trusted = true;
        assert_eq!(
            enter(&mut app),
            Action::ShellThenSubmit(
                vec!["git status".into()],
                "`git status` then review a.rs".into(),
                kaji_core::PromptOptions::default()
            )
        );
    }

    #[test]
    fn a_command_brings_its_model_and_allowed_tools_in_a_trusted_project_only() {
        use super::super::app::{Action, App, StatusInfo};
        use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
        let project = std::path::PathBuf::from("/repo");
        let mut app = App::new(StatusInfo::default());
        app.project_dir = Some(project.clone());
        let file = project.join(".kaji/commands/commit.md");
        app.custom = vec![super::super::commands::parse(
            "commit",
            "---\nallowed-tools: Bash(git add:*), Bash(git commit:*)\nmodel: haiku\n---\nCommit it.",
            file.clone(),
        )];
        let enter = |app: &mut App| {
            app.input.set("/commit");
            app.on_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE))
        };
        // Untrusted: the model applies, the project's allowed tools do not.
        let untrusted = kaji_core::PromptOptions {
            model: Some("haiku".into()),
            ..kaji_core::PromptOptions::default()
        };
        assert_eq!(
            enter(&mut app),
            Action::SubmitCommand("Commit it.".into(), untrusted)
        );
        app.trusted = true;
        let trusted = kaji_core::PromptOptions {
            model: Some("haiku".into()),
            allow: vec!["Bash(git add:*)".into(), "Bash(git commit:*)".into()],
            allow_source: Some(kaji_policy::RuleSource::Command(file)),
            ..kaji_core::PromptOptions::default()
        };
        assert_eq!(
            enter(&mut app),
            Action::SubmitCommand("Commit it.".into(), trusted)
        );
    }

    #[test]
    fn checkpoints_arguments_parse_or_say_what_is_wrong() {
        assert_eq!(parse_checkpoints(""), Ok(CheckpointsCommand::List));
        assert_eq!(parse_checkpoints("list"), Ok(CheckpointsCommand::List));
        assert_eq!(
            parse_checkpoints("restore 2"),
            Ok(CheckpointsCommand::Restore("2".into()))
        );
        assert!(parse_checkpoints("restore").is_err());
        assert!(
            parse_checkpoints("frob")
                .unwrap_err()
                .contains("restore N|ID")
        );
    }

    #[tokio::test]
    async fn lists_and_restores_a_real_checkpoint() {
        let home = tempfile::tempdir().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.txt");
        std::fs::write(&file, "before\n").unwrap();
        let store = CheckpointStore::open(home.path(), dir.path()).unwrap();
        store.commit("task start").await.unwrap();
        std::fs::write(&file, "after\n").unwrap();
        let mut listed = Vec::new();
        let text = checkpoints(
            home.path(),
            dir.path(),
            CheckpointsCommand::List,
            &mut listed,
        )
        .await
        .unwrap();
        assert!(
            text.contains("  1. ") && text.contains("task start"),
            "{text}"
        );
        assert_eq!(listed.len(), 1);
        let text = checkpoints(
            home.path(),
            dir.path(),
            CheckpointsCommand::Restore("1".into()),
            &mut listed,
        )
        .await
        .unwrap();
        assert!(text.contains("restored the files"), "{text}");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "before\n");
        let err = checkpoints(
            home.path(),
            dir.path(),
            CheckpointsCommand::Restore("7".into()),
            &mut listed,
        )
        .await
        .unwrap_err();
        assert!(err.contains("no checkpoint 7"), "{err}");
    }

    #[test]
    fn agents_lists_only_agents_with_their_activity() {
        let info = |id: &str, agent: Option<&str>| -> RuntimeTaskInfo {
            serde_json::from_value(serde_json::json!({
                "id": id, "type": if agent.is_some() { "local_agent" } else { "local_bash" },
                "status": "running", "description": "look around", "owner": "main",
                "started_at_ms": 0, "output_path": "/tmp/x", "output_bytes": 0,
                "dropped_bytes": 0, "agent": agent, "activity": agent.map(|_| "Bash"),
            }))
            .unwrap()
        };
        let usage = Usage {
            input_tokens: 12,
            output_tokens: 3,
            ..Usage::default()
        };
        let text = agents_text(
            &[info("a12345678", Some("explore")), info("b12345678", None)],
            &[],
            &usage,
        );
        assert!(
            text.contains("⚙ a12345678 explore — running · look around · Bash"),
            "{text}"
        );
        assert!(!text.contains("b12345678"), "{text}");
        assert!(text.contains("12 input / 3 output tokens"), "{text}");
        assert!(agents_text(&[], &[], &usage).contains("no sub-agents"));
        let done = ["agent helper-1 · 1 tool use(s) · completed after 2 turn(s)".to_string()];
        assert!(agents_text(&[], &done, &usage).contains("✓ agent helper-1"));
    }
}
