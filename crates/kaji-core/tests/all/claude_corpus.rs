//! Every file of the Claude Code corpus (`../shared/corpus/claude-code/`)
//! as kaji reads it: agent types, custom commands, skills, rule files and
//! `.mcp.json` and Claude Code's `settings.json`/`settings.local.json`
//! (every rule with its source, every hook), each compared with its committed expected outcome in
//! `tests/claude_corpus/<path>.expected` (kind; read / read with a warning
//! / refused with an error naming the file; for agents and commands the
//! parsed name, description, tools and model). A difference fails, and so
//! does a silent ignore: a file kaji's discovery neither reads nor warns
//! about. `KAJI_BLESS=1` rewrites the expected files (check them by hand).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use kaji_core::commands;
use kaji_core::rules::RuleFiles;
use kaji_core::subagent::types::{AgentCatalog, AgentSource, agent_files, parse_agent_file};

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus/claude-code")
}

fn expected_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/claude_corpus")
}

const AGENTS: &str = "VoltAgent+awesome-claude-code-subagents/categories";
const COMMANDS: &str = "wshobson+commands";

/// Every file of the corpus, relative, sorted.
fn corpus_files(root: &Path) -> Vec<String> {
    fn walk(dir: &Path, root: &Path, out: &mut Vec<String>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for path in entries.flatten().map(|e| e.path()) {
            if path.is_dir() {
                walk(&path, root, out);
            } else if let Ok(rel) = path.strip_prefix(root) {
                out.push(rel.to_string_lossy().into_owned());
            }
        }
    }
    let mut out = Vec::new();
    walk(root, root, &mut out);
    out.sort();
    out
}

/// Text without the corpus's absolute location.
fn rel(text: &str, roots: &[(&Path, &str)]) -> String {
    let mut text = text.to_string();
    for (root, name) in roots {
        text = text.replace(&root.to_string_lossy().into_owned(), name);
    }
    text.replace('\n', "\\n")
}

fn known_tools() -> Vec<&'static str> {
    let mut names = kaji_tools::builtin_tools().names();
    names.push("Skill");
    names
}

/// The outcome of every agent file, through discovery (a project whose
/// `.claude/agents` is the corpus's folder of category subfolders).
fn agent_outcomes(root: &Path, out: &mut BTreeMap<String, String>) {
    let project = tempfile::tempdir().expect("tempdir");
    let claude = project.path().join(".claude");
    std::fs::create_dir_all(&claude).expect("mkdir");
    let dir = root.join(AGENTS);
    std::os::unix::fs::symlink(&dir, claude.join("agents")).expect("symlink");
    let home = tempfile::tempdir().expect("tempdir");
    let catalog = AgentCatalog::discover(home.path(), project.path(), None);
    let through = claude.join("agents");
    let roots = [(through.as_path(), "<agents>"), (root, "<corpus>")];
    let known = known_tools();
    for file in agent_files(&through) {
        let key = format!(
            "{AGENTS}/{}",
            file.strip_prefix(&through).expect("inside").display()
        );
        let found = catalog
            .agents
            .iter()
            .find(|a| a.source == AgentSource::File(file.clone()));
        let warned: Vec<&String> = catalog
            .warnings
            .iter()
            .filter(|w| w.contains(&file.to_string_lossy().into_owned()))
            .collect();
        let mut text = String::from("kind: agent\n");
        match (
            found,
            parse_agent_file(&std::fs::read_to_string(&file).expect("read"), &file),
        ) {
            (Some(def), _) => {
                let single = AgentCatalog {
                    agents: vec![def.clone()],
                    warnings: Vec::new(),
                };
                let unknown = single.unknown_tools_warning(&known);
                let outcome = if warned.is_empty() && unknown.is_none() {
                    "read"
                } else {
                    "read, warned"
                };
                text.push_str(&format!("outcome: {outcome}\nname: {}\n", def.name));
                text.push_str(&format!("description: {}\n", rel(&def.description, &roots)));
                let tools = match &def.tools {
                    Some(list) => list.join(", "),
                    None => "(all)".into(),
                };
                text.push_str(&format!("tools: {tools}\n"));
                text.push_str(&format!(
                    "model: {}\n",
                    def.model.as_deref().unwrap_or("(inherit)")
                ));
                if let Some(unknown) = unknown {
                    let tools = unknown.rsplit_once(": ").map(|(_, t)| t).unwrap_or("");
                    text.push_str(&format!("unknown tools: {tools}\n"));
                }
            }
            (None, Err(e)) if !warned.is_empty() => {
                assert!(e.contains(&file.to_string_lossy().into_owned()), "{e}");
                text.push_str(&format!("outcome: refused\nerror: {}\n", rel(&e, &roots)));
            }
            (None, _) => text.push_str(
                "outcome: SILENTLY IGNORED (another file of the same name wins, or no warning)\n",
            ),
        }
        for w in warned {
            text.push_str(&format!("warning: {}\n", rel(w, &roots)));
        }
        out.insert(key, text);
    }
}

/// The outcome of every command file, through loading (a project whose
/// `.claude/commands` is the corpus's folder).
fn command_outcomes(root: &Path, out: &mut BTreeMap<String, String>) {
    let dir = root.join(COMMANDS);
    let (loaded, warnings) = commands::load(std::slice::from_ref(&dir), &[]);
    let roots = [(dir.as_path(), "<commands>"), (root, "<corpus>")];
    for file in agent_files(&dir) {
        let key = format!(
            "{COMMANDS}/{}",
            file.strip_prefix(&dir).expect("inside").display()
        );
        let warned: Vec<&String> = warnings
            .iter()
            .filter(|w| w.contains(&file.to_string_lossy().into_owned()))
            .collect();
        let mut text = String::from("kind: command\n");
        match loaded.iter().find(|c| c.path == file) {
            Some(c) => {
                let outcome = if warned.is_empty() {
                    "read"
                } else {
                    "read, warned"
                };
                let reached = match commands::find(&loaded, &c.name) {
                    Some(first) if first.path == file => format!("/{}", c.name),
                    _ => format!("/{} only", c.qualified_name()),
                };
                text.push_str(&format!("outcome: {outcome}\nname: {reached}"));
                if c.namespace.is_some() && !reached.ends_with("only") {
                    text.push_str(&format!(" (also /{})", c.qualified_name()));
                }
                text.push_str(&format!("\ndescription: {}\n", rel(&c.description, &roots)));
                let tools = match &c.allowed_tools {
                    Some(list) => list.join(", "),
                    None => "(session's)".into(),
                };
                text.push_str(&format!("tools: {tools}\n"));
                text.push_str(&format!(
                    "model: {}\n",
                    c.model.as_deref().unwrap_or("(session's)")
                ));
                let cwd = tempfile::tempdir().expect("tempdir");
                let e = commands::expand(c, "ARG", cwd.path(), cwd.path());
                let placed = if e.prompt.ends_with("\n\nARGUMENTS: ARG") {
                    "appended"
                } else {
                    "placed"
                };
                text.push_str(&format!(
                    "arguments: {placed}\nshell commands: {}\n",
                    e.shell.len()
                ));
            }
            None if !warned.is_empty() => text.push_str("outcome: refused\n"),
            None => text.push_str("outcome: SILENTLY IGNORED\n"),
        }
        for w in warned {
            text.push_str(&format!("warning: {}\n", rel(w, &roots)));
        }
        out.insert(key, text);
    }
}

fn skill_outcome(root: &Path, rel_path: &str) -> String {
    let dir = root.join(rel_path).parent().expect("parent").to_path_buf();
    match kaji_tools::skill::read_skill(&dir) {
        Ok((skill, _)) => format!(
            "kind: skill\noutcome: read\nname: {}\ndescription: {}\n",
            skill.name,
            rel(&skill.description, &[(root, "<corpus>")])
        ),
        Err(e) => format!(
            "kind: skill\noutcome: refused\nerror: {}\n",
            rel(&e.to_string(), &[(root, "<corpus>")])
        ),
    }
}

/// A rule file as the only one of a fresh repository (with its siblings
/// of the corpus folder beside it).
fn rule_outcome(root: &Path, rel_path: &str) -> String {
    let source = root.join(rel_path);
    let repo = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(repo.path().join(".git")).expect("mkdir");
    let name = source.file_name().expect("name");
    std::fs::copy(&source, repo.path().join(name)).expect("copy");
    let home = tempfile::tempdir().expect("tempdir");
    let rules = RuleFiles::discover_with_home(home.path(), repo.path(), Some(home.path()));
    let roots = [(repo.path(), "<repo>")];
    let mut text = String::from("kind: rule file\n");
    let read = rules.files.iter().any(|f| f.path.file_name() == Some(name));
    let outcome = match (read, rules.warnings.is_empty()) {
        (true, true) => "read",
        (true, false) => "read, warned",
        (false, false) => "skipped, warned",
        (false, true) => "SILENTLY IGNORED",
    };
    text.push_str(&format!("outcome: {outcome}\n"));
    for f in &rules.files {
        text.push_str(&format!(
            "file: {} ({}, {} bytes{})\n",
            rel(&f.path.to_string_lossy(), &roots),
            f.scope.as_str(),
            f.size,
            if f.truncated { ", cut" } else { "" }
        ));
    }
    for w in &rules.warnings {
        text.push_str(&format!("warning: {}\n", rel(w, &roots)));
    }
    text
}

fn mcp_outcome(root: &Path, rel_path: &str) -> String {
    let path = root.join(rel_path);
    let text = std::fs::read_to_string(&path).expect("read");
    let roots = [(root, "<corpus>")];
    let mut out = String::from("kind: .mcp.json\n");
    match kaji_mcp::parse_mcp_json_servers(&text, &path, &|_| None) {
        Ok(found) => {
            let outcome = if found.skipped.is_empty() {
                "read"
            } else {
                "read, servers skipped with a warning"
            };
            out.push_str(&format!("outcome: {outcome}\n"));
            for (name, server) in &found.servers {
                out.push_str(&format!("server: {name}: {}\n", transport(server)));
            }
            for (name, e) in &found.skipped {
                out.push_str(&format!(
                    "skipped: {name}: {}\n",
                    rel(&e.to_string(), &roots)
                ));
            }
        }
        Err(e) => out.push_str(&format!(
            "outcome: skipped, warned\nwarning: {}\n",
            rel(&e.to_string(), &roots)
        )),
    }
    out
}

/// A `.claude/settings*.json` as kaji reads it: every rule with its list,
/// line and source, every hook, `env` names, `defaultMode`, and every
/// warning. A rule or hook of the file that is neither read nor warned
/// about is a silent ignore.
fn settings_outcome(root: &Path, file: &str) -> String {
    use kaji_core::claude_settings::{self, SettingSource};
    use kaji_core::hooks::HookEvent;
    let path = root.join(file);
    let source = if file.ends_with("settings.local.json") {
        SettingSource::Local
    } else {
        SettingSource::Project
    };
    let text = std::fs::read_to_string(&path).expect("read");
    let roots = [(root, "<corpus>")];
    let mut out = String::from("kind: settings\n");
    let settings = match claude_settings::parse(&text, &path, source) {
        Ok(s) => s,
        Err(e) => {
            out.push_str(&format!("outcome: refused\nwarning: {}\n", rel(&e, &roots)));
            return out;
        }
    };
    let outcome = if settings.warnings.is_empty() {
        "read"
    } else {
        "read, warned"
    };
    out.push_str(&format!("outcome: {outcome}\n"));
    for (r, line) in settings.permissions.iter().zip(&settings.rule_lines) {
        out.push_str(&format!(
            "rule: {} {} (line {line}, {} {})\n",
            r.kind,
            r.rule,
            r.source.scope(),
            rel(&r.source.to_string(), &roots)
        ));
    }
    if let Some(mode) = settings.default_mode {
        out.push_str(&format!("defaultMode: {}\n", mode.claude_name()));
    }
    let mut hooks = 0;
    for event in HookEvent::ALL {
        for h in settings.hooks.hooks(event) {
            hooks += 1;
            let matcher = h.matcher.as_ref().map_or("(none)", |m| m.pattern());
            out.push_str(&format!(
                "hook: {event} matcher {matcher:?} `{}` timeout {} s{} ({} {})\n",
                h.command,
                h.timeout.as_secs_f64(),
                h.status_message
                    .as_ref()
                    .map_or(String::new(), |m| format!(" status {m:?}")),
                source.as_str(),
                rel(
                    &h.source
                        .as_ref()
                        .map_or(String::new(), |p| p.display().to_string()),
                    &roots
                )
            ));
        }
    }
    for name in settings.env.keys() {
        out.push_str(&format!("env: {name}\n"));
    }
    for w in &settings.warnings {
        out.push_str(&format!("warning: {}\n", rel(w, &roots)));
    }
    // Nothing silently ignored: every rule string and every hook command
    // of the file is read or named in a warning.
    let json: serde_json::Value = serde_json::from_str(&text).expect("json");
    let mut written = 0;
    for list in ["allow", "ask", "deny"] {
        written += json["permissions"][list].as_array().map_or(0, Vec::len);
    }
    let rule_warnings = settings
        .warnings
        .iter()
        .filter(|w| w.contains("key `permissions.") && w.contains("]`"))
        .count();
    if settings.permissions.len() + rule_warnings != written {
        out.push_str("outcome: SILENTLY IGNORED (a rule neither read nor warned about)\n");
    }
    let mut commands = 0;
    if let Some(events) = json["hooks"].as_object() {
        for groups in events.values() {
            for g in groups.as_array().into_iter().flatten() {
                commands += g["hooks"].as_array().map_or(0, Vec::len);
            }
        }
    }
    let hook_warnings = settings
        .warnings
        .iter()
        .filter(|w| w.contains("key `hooks."))
        .count();
    if hooks + hook_warnings < commands {
        out.push_str("outcome: SILENTLY IGNORED (a hook neither read nor warned about)\n");
    }
    out
}

fn transport(server: &kaji_mcp::McpServerConfig) -> String {
    match &server.transport {
        kaji_mcp::McpTransportConfig::Stdio { command, args, .. } => {
            format!("stdio `{command}` {}", args.join(" "))
        }
        kaji_mcp::McpTransportConfig::Http { url, .. } => format!("http {url}"),
    }
}

fn outcome_of(root: &Path, file: &str, bulk: &BTreeMap<String, String>) -> String {
    if let Some(text) = bulk.get(file) {
        return text.clone();
    }
    let name = Path::new(file)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    match name.as_str() {
        "SKILL.md" => skill_outcome(root, file),
        "CLAUDE.md" | "AGENTS.md" => rule_outcome(root, file),
        ".mcp.json" => mcp_outcome(root, file),
        "settings.json" | "settings.local.json" => settings_outcome(root, file),
        "README.md" if file == "README.md" => {
            "kind: corpus readme\noutcome: not a Claude Code file\n".into()
        }
        _ => "kind: UNKNOWN\noutcome: SILENTLY IGNORED\n".into(),
    }
}

#[test]
fn every_corpus_file_is_read_as_expected() {
    let root = corpus();
    assert!(
        root.join("README.md").is_file(),
        "the Claude Code corpus is missing: expected it at {}",
        root.display()
    );
    let root = root.canonicalize().expect("corpus");
    let bless = std::env::var_os("KAJI_BLESS").is_some();
    let mut bulk = BTreeMap::new();
    agent_outcomes(&root, &mut bulk);
    command_outcomes(&root, &mut bulk);
    let mut counts: BTreeMap<(String, String), usize> = BTreeMap::new();
    let mut failures = Vec::new();
    for file in corpus_files(&root) {
        let actual = outcome_of(&root, &file, &bulk);
        let kind = actual
            .lines()
            .next()
            .unwrap_or("")
            .trim_start_matches("kind: ");
        let outcome = actual
            .lines()
            .nth(1)
            .unwrap_or("")
            .trim_start_matches("outcome: ");
        *counts
            .entry((kind.to_string(), outcome.to_string()))
            .or_default() += 1;
        if actual.contains("SILENTLY IGNORED") {
            failures.push(format!("{file}: silently ignored"));
        }
        let expected_path = expected_dir().join(format!("{file}.expected"));
        if bless {
            std::fs::create_dir_all(expected_path.parent().expect("parent")).expect("mkdir");
            std::fs::write(&expected_path, &actual).expect("write");
            continue;
        }
        match std::fs::read_to_string(&expected_path) {
            Ok(expected) if expected == actual => {}
            Ok(expected) => failures.push(format!(
                "{file}: differs from {}\n--- expected\n{expected}--- actual\n{actual}",
                expected_path.display()
            )),
            Err(_) => failures.push(format!(
                "{file}: no expected outcome at {}\n{actual}",
                expected_path.display()
            )),
        }
    }
    println!("corpus outcomes (kind / outcome: files):");
    for ((kind, outcome), n) in &counts {
        println!("  {kind} / {outcome}: {n}");
    }
    assert!(
        failures.is_empty(),
        "{} of the corpus files differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
