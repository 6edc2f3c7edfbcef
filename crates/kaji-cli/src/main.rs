//! The `kaji` binary: argument parsing and dispatch to the subcommands.
//!
//! Each subcommand lives in its own module and returns the process exit
//! code; `main` only parses, dispatches and exits. Only this crate prints.

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

mod acp;
mod agent;
mod agents_cmd;
mod checkpoints_cmd;
mod demo;
mod doctor_checks;
mod doctor_cmd;
mod doctor_lsp;
mod environ;
mod exec;
mod exec_command;
mod exec_events;
mod log_file;
mod login_cmd;
mod mcp_cmd;
mod paths;
mod permissions_cmd;
mod policy_text;
mod ps_cmd;
mod review_cmd;
mod rules_cmd;
mod sdk;
mod sdk_messages;
mod sessions_cmd;
mod tasks_cmd;
mod tui;
mod worker_cmd;

/// kaji — a coding agent for the terminal.
#[derive(Debug, Parser)]
#[command(
    name = "kaji",
    version,
    disable_version_flag = true,
    about,
    long_about = None,
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Print mode: run the prompt without the UI, as `kaji exec PROMPT`
    /// (`-p -c PROMPT` is `kaji exec --continue PROMPT`).
    #[arg(short = 'p', long = "print")]
    print: bool,
    /// With -p: one JSON object per line, exactly `kaji exec --json`
    /// (docs/exec-json.md, schema_version 1).
    #[arg(long, requires = "print")]
    json: bool,
    /// Print the version.
    #[arg(short = 'v', short_alias = 'V', long = "version", action = clap::ArgAction::Version)]
    version: Option<bool>,
    /// Claude Code's headless flags, which the Agent SDKs pass (see
    /// docs/sdk.md).
    #[command(flatten)]
    sdk: sdk::SdkArgs,
    /// Without a subcommand: the interactive terminal UI (`kaji tui`).
    #[command(flatten)]
    tui: tui::TuiArgs,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run one task non-interactively and print its transcript (or JSON
    /// lines with --json).
    Exec(exec::ExecArgs),
    /// List, diff and restore the checkpoints kaji took of a working
    /// directory.
    Checkpoints(checkpoints_cmd::CheckpointsArgs),
    /// Watch kaji fix a bug in a scratch repository, offline: the model is
    /// a scripted replay, the tools are real.
    Demo(demo::DemoArgs),
    /// Read, create, update and claim tasks of a shared task list.
    Tasks(tasks_cmd::TasksArgs),
    /// Manage MCP servers: `kaji mcp list` shows each configured server,
    /// its status and its tools.
    Mcp(mcp_cmd::McpArgs),
    /// Show which rule files (AGENTS.md, CLAUDE.md, .clinerules, global
    /// rules) would go into the system prompt, and from where.
    Rules(rules_cmd::RulesArgs),
    /// List, add, remove and check permission rules (`Bash(cargo test:*)`,
    /// `Edit(src/**)`, …) and where they come from.
    Permissions(permissions_cmd::PermissionsArgs),
    /// Trust a project, so its settings that run code or widen permissions
    /// take effect (`--revoke` to stop trusting it).
    Trust(permissions_cmd::TrustArgs),
    /// Run a headless teammate that claims and works tasks of a shared
    /// task list until none can become available.
    Worker(worker_cmd::WorkerArgs),
    /// List the agent types the Agent tool offers (built-in, user and
    /// project ones) and where each comes from.
    Agents(agents_cmd::AgentsArgs),
    /// List the runtime tasks (background shells and agents) of every
    /// running kaji session on this machine.
    Ps(ps_cmd::PsArgs),
    /// Check what this machine gives kaji: sandbox support (Landlock, user
    /// namespaces, seccomp), settings files, provider keys, git.
    Doctor(doctor_cmd::DoctorArgs),
    /// List, show and remove saved sessions.
    Sessions(sessions_cmd::SessionsArgs),
    /// Have the model review the working tree's changes (or a branch
    /// against --base) with read-only tools and report findings; exit 1
    /// when one is at or above --fail-on.
    Review(review_cmd::ReviewArgs),
    /// The interactive terminal UI: type prompts, watch the task, answer
    /// its questions.
    Tui(tui::TuiArgs),
    /// Open the terminal UI on a saved session (no ID: pick one of this
    /// directory's).
    Resume(ResumeArgs),
    /// Speak the Agent Client Protocol over stdio, for editors (Zed,
    /// JetBrains IDEs, Neovim): see docs/acp.md.
    Acp(acp::AcpArgs),
    /// Print a shell completion script (`kaji completions bash > …`).
    Completions(CompletionsArgs),
    /// Open the terminal UI and run what `/init` does: the model studies
    /// the repository and writes AGENTS.md (its edits ask as usual).
    Init(InitArgs),
    /// Say how kaji finds the model provider's key (kaji has no login of
    /// its own) and which keys are set; calls no model.
    Login(login_cmd::LoginArgs),
}

#[derive(Debug, clap::Args)]
struct InitArgs {
    #[command(flatten)]
    agent: agent::AgentArgs,
}

#[derive(Debug, clap::Args)]
struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish or powershell.
    #[arg(value_name = "SHELL")]
    shell: clap_complete::Shell,
}

#[derive(Debug, clap::Args)]
struct ResumeArgs {
    /// The session id, or a unique prefix of it.
    #[arg(value_name = "ID")]
    id: Option<String>,
    #[command(flatten)]
    agent: agent::AgentArgs,
}

fn main() -> ExitCode {
    environ::hide_secrets_from_proc();
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if let Some(first) = argv.get(1).and_then(|a| a.to_str())
        && let Some(near) = near_miss(first)
    {
        eprintln!(
            "kaji: `{first}` is not a command: did you mean `kaji {near}`? (to send it to the model as a prompt: kaji -- {first})"
        );
        return ExitCode::from(2);
    }
    let cli = Cli::parse_from(argv);
    // The libraries' warnings go to a file, never to the terminal.
    log_file::install(&paths::kaji_home());
    if cli.command.is_none()
        && (cli.sdk.output_format.is_some()
            || cli.sdk.input_format.is_some()
            || (cli.print && cli.sdk.any()))
    {
        return ExitCode::from(block_on(sdk::run(cli.tui, cli.sdk)).clamp(0, 255) as u8);
    }
    if cli.command.is_none() && cli.sdk.any() {
        eprintln!(
            "kaji: Claude Code's headless flags need print mode: add -p or --output-format (see docs/sdk.md)"
        );
        return ExitCode::from(2);
    }
    if cli.print && cli.command.is_none() {
        return ExitCode::from(print_mode(cli.tui, cli.json).clamp(0, 255) as u8);
    }
    if cli.command.is_none() && !cli.tui.images.is_empty() {
        eprintln!(
            "kaji: -i/--image attaches images in print mode (kaji -p -i FILE PROMPT) and to kaji exec"
        );
        return ExitCode::from(2);
    }
    let code = match cli.command {
        Some(Command::Exec(args)) => block_on(exec::run(args)),
        Some(Command::Acp(args)) => block_on(acp::run(args)),
        Some(Command::Demo(args)) => block_on(demo::run(args)),
        Some(Command::Checkpoints(args)) => block_on(checkpoints_cmd::run(args)),
        Some(Command::Tasks(args)) => tasks_cmd::run(args),
        Some(Command::Ps(args)) => ps_cmd::run(args),
        Some(Command::Agents(args)) => agents_cmd::run(args),
        Some(Command::Worker(args)) => block_on(worker_cmd::run(args)),
        Some(Command::Doctor(args)) => block_on(doctor_cmd::run(args)),
        Some(Command::Rules(args)) => rules_cmd::run(args),
        Some(Command::Permissions(args)) => permissions_cmd::run(args),
        Some(Command::Trust(args)) => permissions_cmd::run_trust(args),
        Some(Command::Sessions(args)) => sessions_cmd::run(args),
        Some(Command::Review(args)) => block_on(review_cmd::run(args)),
        Some(Command::Mcp(args)) => block_on(mcp_cmd::run(args)),
        Some(Command::Tui(args)) => block_on(tui::run(args)),
        Some(Command::Resume(args)) => block_on(tui::run(tui::TuiArgs {
            agent: args.agent,
            prompt: Vec::new(),
            continue_: false,
            resume: Some(args.id),
            images: Vec::new(),
        })),
        Some(Command::Init(args)) => block_on(tui::run(tui::TuiArgs {
            agent: args.agent,
            prompt: vec![tui::INIT_PROMPT.to_string()],
            continue_: false,
            resume: None,
            images: Vec::new(),
        })),
        Some(Command::Login(args)) => login_cmd::run(args),
        Some(Command::Completions(args)) => {
            // Into memory first: a closed pipe must not panic.
            let mut script = Vec::new();
            clap_complete::generate(args.shell, &mut Cli::command(), "kaji", &mut script);
            use std::io::Write;
            let _ = std::io::stdout().write_all(&script);
            0
        }
        None => block_on(tui::run(cli.tui)),
    };
    ExitCode::from(code.clamp(0, 255) as u8)
}

/// `kaji -p PROMPT…`: `kaji exec PROMPT` (with `--continue` for `-c`,
/// `--resume ID` for `-r ID`, `--json` for `--json`). Piped standard input
/// is added to the prompt, as `claude -p` does.
fn print_mode(args: tui::TuiArgs, json: bool) -> i32 {
    let mut prompt = args.prompt.join(" ");
    let stdin = if prompt == "-" {
        Ok(None) // `kaji exec -` reads it
    } else {
        piped_stdin()
    };
    match stdin {
        Ok(Some(input)) => prompt = with_piped_input(&prompt, &input),
        Ok(None) => {}
        Err(e) => {
            eprintln!("kaji -p: cannot read standard input: {e}");
            return 2;
        }
    }
    if prompt.trim().is_empty() {
        eprintln!("kaji -p: a prompt is needed (kaji -p PROMPT…)");
        return 2;
    }
    let resume = match args.resume {
        Some(Some(id)) => Some(id),
        Some(None) => {
            eprintln!("kaji -p: -r needs a session id here");
            return 2;
        }
        None => None,
    };
    block_on(exec::run(exec::ExecArgs {
        prompt,
        json,
        approve_plan: false,
        resume,
        continue_: args.continue_,
        images: args.images,
        agent: args.agent,
    }))
}

/// Standard input when it is not a terminal and holds something.
fn piped_stdin() -> std::io::Result<Option<String>> {
    use std::io::{IsTerminal, Read};
    let mut stdin = std::io::stdin();
    if stdin.is_terminal() {
        return Ok(None);
    }
    let mut bytes = Vec::new();
    stdin.read_to_end(&mut bytes)?;
    let text = String::from_utf8_lossy(&bytes).into_owned();
    Ok((!text.trim().is_empty()).then_some(text))
}

/// The prompt with piped input after it (the input alone when the prompt
/// is empty).
fn with_piped_input(prompt: &str, input: &str) -> String {
    if prompt.trim().is_empty() {
        input.to_string()
    } else {
        format!("{prompt}\n\n{}", input.trim_end())
    }
}

/// The subcommand `word` nearly names: not a subcommand itself, and at
/// Damerau–Levenshtein distance 1 from one of at least 4 letters.
fn near_miss(word: &str) -> Option<String> {
    if word.starts_with('-') {
        return None;
    }
    let command = Cli::command();
    let names: Vec<String> = command
        .get_subcommands()
        .flat_map(|c| {
            std::iter::once(c.get_name().to_string()).chain(c.get_all_aliases().map(str::to_string))
        })
        .chain(["help".to_string()])
        .collect();
    if names.iter().any(|n| n == word) {
        return None;
    }
    names
        .into_iter()
        .find(|n| n.chars().count() >= 4 && damerau_levenshtein(n, word) == 1)
}

/// The optimal-string-alignment distance: insertions, deletions,
/// substitutions and swaps of neighbours.
fn damerau_levenshtein(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = best;
        }
    }
    d[a.len()][b.len()]
}

/// Runs an async command on a multi-threaded tokio runtime.
fn block_on<F: std::future::Future<Output = i32>>(future: F) -> i32 {
    match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => {
            let code = rt.block_on(future);
            // Blocking work that will not end (a read of a FIFO, a held
            // lock) must not keep kaji alive once the command is done.
            rt.shutdown_timeout(std::time::Duration::from_millis(500));
            code
        }
        Err(e) => {
            eprintln!("kaji: cannot start the async runtime: {e}");
            1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn near_misses_are_one_edit_from_a_long_subcommand() {
        assert_eq!(damerau_levenshtein("exec", "exce"), 1);
        assert_eq!(damerau_levenshtein("exec", "exec"), 0);
        assert_eq!(damerau_levenshtein("tasks", "tsaks"), 1);
        assert_eq!(damerau_levenshtein("tasks", "test"), 3);
        assert_eq!(near_miss("exce").as_deref(), Some("exec"));
        assert_eq!(near_miss("doctr").as_deref(), Some("doctor"));
        assert_eq!(near_miss("sessionss").as_deref(), Some("sessions"));
        assert_eq!(near_miss("exec"), None);
        assert_eq!(near_miss("fix"), None);
        // Short subcommands never count: `pss` is a prompt.
        assert_eq!(near_miss("pss"), None);
        assert_eq!(near_miss("--exce"), None);
    }

    /// Every flag the pinned Agent SDKs can pass parses, and has its row
    /// in docs/sdk.md's table: none is a usage error or undocumented.
    #[test]
    fn every_flag_of_the_agent_sdks_parses_and_is_in_the_table() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let list = std::fs::read_to_string(root.join("tests/agent-sdk/sdk-flags.tsv")).unwrap();
        let doc = std::fs::read_to_string(root.join("docs/sdk.md")).unwrap();
        let mut seen = 0;
        for line in list.lines().filter(|l| l.starts_with("--")) {
            let mut cols = line.split('\t');
            let flag = cols.next().unwrap();
            let sample = cols.next().unwrap_or("-");
            let mut argv = vec!["kaji".to_string()];
            match sample {
                "-" => argv.push(flag.to_string()),
                s if s.starts_with('=') => argv.push(format!("{flag}{s}")),
                s => argv.extend([flag.to_string(), s.to_string()]),
            }
            if flag != "--output-format" {
                argv.extend(["--output-format".into(), "stream-json".into()]);
            }
            if let Err(e) = Cli::try_parse_from(&argv) {
                panic!("{argv:?} does not parse: {e}");
            }
            assert!(
                doc.contains(&format!("| `{flag}`")),
                "docs/sdk.md has no row for {flag}"
            );
            seen += 1;
        }
        assert!(seen >= 37, "only {seen} flags listed");
    }

    #[test]
    fn minus_v_prints_the_version() {
        let e = Cli::try_parse_from(["kaji", "-v"]).unwrap_err();
        assert_eq!(e.kind(), clap::error::ErrorKind::DisplayVersion);
        assert!(e.to_string().contains(env!("CARGO_PKG_VERSION")));
    }

    #[test]
    fn the_cli_is_consistent() {
        Cli::command().debug_assert();
    }
}
