//! The known read-only commands: programs that only read and print, checked
//! argument by argument for the options that would make them write or run
//! something.
//!
//! [`check`] says whether one simple command is read-only. It must never
//! call a command read-only when an option of it writes a file, runs a
//! program or reads git configuration from an untrusted project; when in
//! doubt (an argument whose value is only known at run time, an option it
//! does not know for `git branch`) it says no.

use crate::shell::SimpleCommand;

/// Programs that read and print only, whatever their (literal or not)
/// arguments are.
const PLAIN: &[&str] = &[
    "ls",
    "cat",
    "head",
    "tail",
    "wc",
    "grep",
    "egrep",
    "fgrep",
    "pwd",
    "echo",
    "stat",
    "du",
    "which",
    "basename",
    "dirname",
    "realpath",
    "readlink",
    "true",
    "false",
    "diff",
    "cmp",
    "cut",
    "tr",
    "nl",
    "sha256sum",
    "sha1sum",
    "md5sum",
    "whoami",
    "uname",
    "id",
    "cd",
];

/// Programs read-only once their arguments are checked (every argument
/// must be literal, since a glob could expand to an option).
const CHECKED: &[&str] = &["find", "sort", "rg", "file", "tree", "git"];

/// The git subcommands that only read.
const GIT_READ_ONLY: &[&str] = &[
    "status",
    "log",
    "diff",
    "show",
    "branch",
    "rev-parse",
    "ls-files",
];

/// The names of every read-only program, for documentation and `kaji
/// permissions list`.
pub fn programs() -> impl Iterator<Item = &'static str> {
    PLAIN.iter().chain(CHECKED).copied()
}

/// Whether `cmd` is read-only: `Ok(())`, or why not. `trusted` says
/// whether the project's `.git/config` may be trusted (read-only git is
/// only read-only then).
pub fn check(cmd: &SimpleCommand, trusted: bool) -> Result<(), String> {
    let Some(program) = cmd.program() else {
        return Err("its name is not literal".into());
    };
    if !PLAIN.contains(&program) && !CHECKED.contains(&program) {
        return Err(format!("`{program}` is not a known read-only command"));
    }
    if cmd.writes_file {
        return Err("it redirects output to a file".into());
    }
    if PLAIN.contains(&program) {
        return Ok(());
    }
    let Some(words) = cmd.literal_words() else {
        return Err(format!(
            "an argument of `{program}` is only known when it runs (an expansion or a glob could become an option)"
        ));
    };
    let args = &words[1..];
    match program {
        "find" => find(args),
        "sort" => sort(args),
        "rg" => rg(args),
        "file" => refuse_any(args, &["-C", "--compile"], "file"),
        "tree" => tree(args),
        "git" => git(args, trusted),
        _ => Err(format!("`{program}` is not a known read-only command")),
    }
}

fn refuse_any(args: &[String], options: &[&str], program: &str) -> Result<(), String> {
    match args.iter().find(|a| {
        options
            .iter()
            .any(|o| a == o || a.starts_with(&format!("{o}=")))
    }) {
        Some(a) => Err(format!("`{program} {a}` writes files or runs programs")),
        None => Ok(()),
    }
}

fn find(args: &[String]) -> Result<(), String> {
    const ACTIONS: &[&str] = &[
        "-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf", "-fls",
    ];
    refuse_any(args, ACTIONS, "find")
}

fn sort(args: &[String]) -> Result<(), String> {
    for a in args {
        if a == "--" {
            break;
        }
        if let Some(long) = a.strip_prefix("--") {
            let name = long.split('=').next().unwrap_or("");
            let abbreviates = |full: &str| !name.is_empty() && full.starts_with(name);
            if abbreviates("output") || abbreviates("compress-program") {
                return Err(format!("`sort {a}` writes a file or runs a program"));
            }
        } else if a.starts_with('-') && a.len() > 1 && short_option_has(a, 'o') {
            return Err(format!("`sort {a}` writes a file"));
        }
    }
    Ok(())
}

/// Whether a cluster of short options (`-ro`) includes `letter` before any
/// option that takes the rest as its value.
fn short_option_has(cluster: &str, letter: char) -> bool {
    for c in cluster.chars().skip(1) {
        if c == letter {
            return true;
        }
        if matches!(c, 'k' | 't' | 'T' | 'S') {
            return false;
        }
    }
    false
}

fn rg(args: &[String]) -> Result<(), String> {
    refuse_any(args, &["--pre", "--pre-glob"], "rg")
}

fn tree(args: &[String]) -> Result<(), String> {
    match args.iter().find(|a| a.starts_with("-o")) {
        Some(a) => Err(format!("`tree {a}` writes a file")),
        None => Ok(()),
    }
}

fn git(args: &[String], trusted: bool) -> Result<(), String> {
    let mut rest = args;
    while rest.first().is_some_and(|a| a == "--no-pager") {
        rest = &rest[1..];
    }
    let Some(sub) = rest.first() else {
        return Err("`git` with no subcommand".into());
    };
    if sub.starts_with('-') {
        return Err(format!(
            "`git {sub}` changes how git runs (`-c`, `-C`, `--git-dir`, … always ask)"
        ));
    }
    if !GIT_READ_ONLY.contains(&sub.as_str()) {
        return Err(format!("`git {sub}` is not a read-only git command"));
    }
    let opts = &rest[1..];
    if let Some(bad) = opts.iter().find(|a| {
        a.starts_with("--output") || a.as_str() == "--ext-diff" || a.starts_with("--exec")
    }) {
        return Err(format!("`git {sub} {bad}` writes a file or runs a program"));
    }
    if sub == "branch" {
        git_branch(opts)?;
    }
    if !trusted {
        return Err(
            "read-only git runs unasked only in trusted projects (an untrusted .git/config could run programs)"
                .into(),
        );
    }
    Ok(())
}

fn git_branch(opts: &[String]) -> Result<(), String> {
    const LISTING: &[&str] = &[
        "-a",
        "-r",
        "-v",
        "-vv",
        "-l",
        "--list",
        "--all",
        "--remotes",
        "--verbose",
        "--show-current",
        "--no-color",
        "--color",
    ];
    match opts.iter().find(|o| !LISTING.contains(&o.as_str())) {
        Some(o) => Err(format!(
            "`git branch {o}` may create, rename or delete a branch"
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Context, shell};

    fn ro(command: &str, trusted: bool) -> Result<(), String> {
        let analysis = shell::analyse(command, &Context::new("/proj", trusted));
        assert!(analysis.is_analysable(), "{command}");
        analysis.commands.iter().try_for_each(|c| check(c, trusted))
    }

    #[test]
    fn plain_reads_are_read_only() {
        for command in [
            "ls -la",
            "cat a b",
            "head -n 5 f",
            "tail -f log",
            "wc -l *.rs",
            "grep -rn foo .",
            "pwd",
            "echo hi",
            "find . -name '*.rs' -type f",
            "sort -r f",
            "rg -n foo src",
            "file x",
            "tree -L 2",
            "du -sh .",
            "stat f",
            "which cargo",
            "ls 2>/dev/null",
        ] {
            assert_eq!(ro(command, true), Ok(()), "{command}");
        }
    }

    #[test]
    fn dangerous_options_ask() {
        for command in [
            "find . -exec rm {} ;",
            "find . -execdir sh ;",
            "find . -ok rm {} ;",
            "find . -delete",
            "find . -fprint out",
            "find . -fprintf out %p",
            "sort -o out f",
            "sort -ro out f",
            "sort --output=out f",
            "sort --out=out f",
            "sort --compress-program=sh f",
            "rg --pre sh foo",
            "rg --pre=sh foo",
            "rg --pre-glob '*' foo",
            "git -c core.pager=sh log",
            "git -C /tmp status",
            "git diff --ext-diff",
            "git log --output=x",
            "git branch new-branch",
            "git branch -D main",
            "git push",
            "tree -o out",
            "file -C -m x",
            "ls > listing",
            "find . $X",
            "rg foo *",
            "rm -rf x",
        ] {
            assert!(ro(command, true).is_err(), "{command} was read-only");
        }
    }

    #[test]
    fn git_is_read_only_only_when_trusted() {
        for command in [
            "git status",
            "git log --oneline -5",
            "git diff HEAD~1",
            "git show HEAD",
            "git branch -a",
            "git rev-parse HEAD",
        ] {
            assert_eq!(ro(command, true), Ok(()), "{command}");
            assert!(ro(command, false).is_err(), "{command} untrusted");
        }
    }
}
