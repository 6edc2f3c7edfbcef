//! `kaji rules`: which rule files a task started in a directory would put
//! into its system prompt, in order, and from where.
//!
//! A thin layer over `kaji_core::rules::RuleFiles::discover`: it prints one
//! line per file (or JSON with `--json`) and the warnings for skipped files
//! on stderr. It only reads; it never creates or changes a rule file.
//! Exit codes: 0 listed (even when nothing was found), 2 the directory does
//! not exist.

use std::io::Write;
use std::path::PathBuf;

use kaji_core::rules::{RULE_FILE_CAP_BYTES, RuleFiles};
use serde_json::json;

/// Arguments of `kaji rules`.
#[derive(Debug, clap::Args)]
pub struct RulesArgs {
    /// The working directory to look from (default: the current one).
    #[arg(short = 'C', value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Runs `kaji rules`; returns the exit code.
pub fn run(args: RulesArgs) -> i32 {
    let dir = match args.dir {
        Some(dir) => dir,
        None => match std::env::current_dir() {
            Ok(dir) => dir,
            Err(e) => {
                eprintln!("kaji rules: cannot read the current directory: {e}");
                return 2;
            }
        },
    };
    let dir = match dir.canonicalize() {
        Ok(dir) if dir.is_dir() => dir,
        Ok(dir) => {
            eprintln!("kaji rules: {} is not a directory", dir.display());
            return 2;
        }
        Err(e) => {
            eprintln!("kaji rules: {}: {e}", dir.display());
            return 2;
        }
    };
    let home = crate::paths::kaji_home();
    let rules = RuleFiles::discover(&home, &dir);
    for warning in &rules.warnings {
        eprintln!("kaji rules: warning: {warning}");
    }

    let mut out = std::io::stdout().lock();
    let written = if args.json {
        let files: Vec<_> = rules
            .files
            .iter()
            .map(|f| {
                json!({
                    "path": f.path,
                    "scope": f.scope.as_str(),
                    "size": f.size,
                    "included_bytes": f.text.len(),
                    "truncated": f.truncated,
                    "imported_by": f.imported_by,
                })
            })
            .collect();
        let value = json!({
            "cwd": dir,
            "kaji_home": home,
            "files": files,
            "warnings": rules.warnings,
        });
        writeln!(out, "{value:#}")
    } else if rules.files.is_empty() {
        writeln!(
            out,
            "No rule files for {} (looked in {}, ~/.claude/CLAUDE.md and from the repository root down).",
            dir.display(),
            home.join("rules").display()
        )
    } else {
        write_table(&mut out, &rules)
    };
    match written {
        Ok(()) => 0,
        // A closed pipe (`kaji rules | head`) is not an error worth a
        // message.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => 0,
        Err(e) => {
            eprintln!("kaji rules: cannot write output: {e}");
            1
        }
    }
}

fn write_table(out: &mut impl Write, rules: &RuleFiles) -> std::io::Result<()> {
    writeln!(
        out,
        "Rule files, in the order they go into the system prompt:"
    )?;
    for (index, file) in rules.files.iter().enumerate() {
        let mut note = if file.truncated {
            format!(", cut to {RULE_FILE_CAP_BYTES}")
        } else {
            String::new()
        };
        if let Some(by) = &file.imported_by {
            note.push_str(&format!(", imported by {}", by.display()));
        }
        writeln!(
            out,
            "{:>3}. {:<8} {} ({} bytes{note})",
            index + 1,
            file.scope.as_str(),
            file.path.display(),
            file.size
        )?;
    }
    Ok(())
}
