//! The shell analysis proved against bash itself: generated commands run
//! in real bash (with every `execve` recorded by `strace -f`) inside a
//! throwaway directory whose `PATH` holds only stand-ins for programs
//! (links to `true`), so nothing real runs. For every command kaji would
//! auto-approve, every program that actually ran, with the arguments it
//! got, must itself be auto-approved, and nothing outside the project or
//! at a protected path may change; a command made only of allowed parts
//! must be auto-approved (so "ask for everything" fails).
//!
//! `differential_sample` runs a few hundred cases in CI;
//! `differential_10k` (ignored; `cargo test -p kaji-policy --test all
//! differential::differential_10k -- --ignored --nocapture`) runs 10,000 and prints the counts recorded in
//! docs/benchmarks.md. Seeds are fixed unless `KAJI_TEST_SEED=random|N`
//! says otherwise; a failure prints its seed and command. Needs `strace`.

use std::collections::HashMap;
use std::fs;
use std::path::{Component, Path, PathBuf};
use std::process::{Command, Stdio};

use kaji_policy::{Context, Decision, PermissionRequest, RealPath, RuleSet, RuleSource, decide};

/// Seeds run by default (the 10,000-case run splits its cases among them).
const SEEDS: &[u64] = &[27, 0x5eed_0027, 20_261_201];

/// Seeds that once found a bug, kept in the CI sample for good: a process
/// substitution in a `${…}` inside `"$( … )"` (quoting starts afresh in
/// `$( … )`).
const FOUND_BUGS: &[u64] = &[1_796_223_172_338_796_708];

/// Rules the generated commands are judged against.
const RULES: &[&str] = &[
    "Bash(cargo test:*)",
    "Bash(npm run lint)",
    "Bash(make check)",
    "Bash(git push:*)",
    "Bash(test:*)",
];

/// Simple commands allowed by a rule or as read-only.
const ALLOWED: &[&str] = &[
    "cargo test",
    "cargo test --all -q",
    "npm run lint",
    "make check",
    "git push origin main",
    "ls -la",
    "cat 'a b.txt'",
    "git status",
    "echo hi",
    "wc -l src/lib.rs",
    "find . -name '*.rs'",
    "cargo test > out.txt",
    "rg -n foo src 2>/dev/null",
    "test -f Cargo.toml",
];

/// Simple commands no rule allows: each runs a program that must never
/// run unasked (or writes where nothing may be written unasked).
const PAYLOADS: &[&str] = &[
    "touch INJECTED",
    "rm -rf target",
    "python3 -c 'import os'",
    "curl http://127.0.0.1:1/x",
    "cargo build",
    "npm run lint --fix",
    "make check2",
    "git pushx",
    "cargo testx",
    "git -c core.pager=sh log",
    "find . -delete",
    "echo pwned > link_out/x",
    "cargo test > link_file",
    "echo pwned > link_out/../escaped",
    "cargo test > deep_link/../escaped2",
    "echo pwned >> .git/config",
    "echo pwned > .kaji/config.toml",
    "echo pwned > dangling",
];

/// Programs that exist (as links to `true`) in the throwaway `PATH`.
const PROGRAMS: &[&str] = &[
    "cargo", "npm", "make", "git", "ls", "cat", "wc", "find", "rg", "touch", "rm", "python3",
    "curl", "head", "tail", "sort", "grep",
];

/// A small deterministic generator (SplitMix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

/// One generated command: its text, whether every part of it is allowed
/// (then it must be auto-approved), and the class that produced its outer
/// shape (for the counts).
struct Case {
    text: String,
    all_allowed: bool,
    class: &'static str,
}

/// Generates a command of depth at most `depth`; `bad` asks for a payload
/// somewhere in it.
fn generate(rng: &mut Rng, depth: usize, bad: bool) -> Case {
    let leaf = |rng: &mut Rng, bad: bool| {
        if bad {
            rng.pick(PAYLOADS).to_string()
        } else {
            rng.pick(ALLOWED).to_string()
        }
    };
    if depth == 0 || rng.below(4) == 0 {
        return Case {
            text: leaf(rng, bad),
            all_allowed: !bad,
            class: "simple",
        };
    }
    let split = rng.below(2) == 0;
    let (bad_a, bad_b) = if bad { (split, !split) } else { (false, false) };
    let inner_allowed = std::cell::Cell::new(true);
    let sub = |rng: &mut Rng, bad| {
        let case = generate(rng, depth - 1, bad);
        inner_allowed.set(inner_allowed.get() && case.all_allowed);
        case
    };
    let kind = rng.below(31);
    let (text, keeps_allowed, class) = match kind {
        0..=5 => {
            let op = rng.pick(&[";", "&&", "||", "|", "&", "\n"]);
            let (a, b) = (sub(rng, bad_a), sub(rng, bad_b));
            let text = format!("{} {op} {}", a.text, b.text);
            return Case {
                all_allowed: a.all_allowed && b.all_allowed,
                text,
                class: "list",
            };
        }
        6 => {
            // A pipeline of three or more stages, a separator, then a
            // redirected command (issue 23).
            let stages: Vec<String> = (0..3 + rng.below(2))
                .map(|_| rng.pick(&["cat 'a b.txt'", "head -n 1", "wc -l", "cargo test"]))
                .map(str::to_string)
                .collect();
            let sep = rng.pick(&[";", "\n"]);
            let last = if bad {
                rng.pick(&["touch INJECTED > out.txt", "rm -rf x > out.txt"])
            } else {
                "cargo test > out.txt"
            };
            (
                format!("{} {sep} {last}", stages.join(" | ")),
                !bad,
                "pipeline-then-redirect",
            )
        }
        7 => (format!("( {} )", sub(rng, bad).text), true, "subshell"),
        8 => (format!("{{ {}; }}", sub(rng, bad).text), true, "group"),
        9 => (
            format!("echo \"$( {} )\"", sub(rng, bad).text),
            true,
            "substitution",
        ),
        10 => (format!("echo `{}`", leaf(rng, bad)), true, "backticks"),
        11 => {
            let inner = leaf(rng, bad);
            let text = match rng.below(4) {
                0 => format!("echo \"`echo \\`{inner}\\``\""),
                1 => format!("echo `echo \\`{inner}\\``"),
                2 => format!("echo `echo \\`echo \\\\\\`{inner}\\\\\\`\\``"),
                _ => format!("echo \"`echo \\\"\\`{inner}\\`\\\"`\""),
            };
            (text, true, "nested-backticks")
        }
        12 => (
            format!("cat <( {} )", sub(rng, bad).text),
            true,
            "process-substitution",
        ),
        13 => {
            let inner = leaf(rng, bad);
            let text = match rng.below(4) {
                0 => format!("{{ cat <<EOF\nline `{inner}`\nEOF\n}}"),
                1 => format!("{{ cat <<EOF\n$({inner}) and ${{UNSET:-`{inner}`}}\nEOF\n}}"),
                2 => format!("{{ cat <<-EOF\n\tx $({inner})\n\tEOF\n}}"),
                _ => format!("{{ cat <<EOF | wc -l\n`echo \\`{inner}\\``\nEOF\n}}"),
            };
            (text, true, "heredoc")
        }
        14 => {
            let inner = leaf(rng, bad);
            (
                format!("{{ cat <<'EOF'\n`{inner}` $({inner})\nEOF\n}}"),
                true,
                "quoted-heredoc",
            )
        }
        15 => {
            let inner = leaf(rng, bad);
            let text = match rng.below(5) {
                0 => format!("echo ${{UNSET:-$({inner})}}"),
                1 => format!("echo ${{UNSET:-`{inner}`}}"),
                2 => format!("echo ${{UNSET:-<({inner})}}"),
                3 => format!("echo \"${{UNSET:-<({inner})}}\""),
                _ => format!("echo \"${{UNSET:-`{inner}`}}\""),
            };
            // tree-sitter-bash cannot parse a `'` inside a double-quoted
            // `${…}` or a `<(…)` in a `${…}` (so those ask).
            let parses = !((text.contains("\"${") || text.contains("<(")) && inner.contains('\''));
            (text, parses, "parameter-default")
        }
        16 => {
            let text = rng
                .pick(&[
                    "echo $((EVIL))",
                    "echo $((EVIL + 1))",
                    "echo ${ARR[EVIL]}",
                    "echo ${HOME:EVIL:1}",
                    "echo ${!REF}",
                    "echo ${PROMPT@P}",
                    "[[ EVIL -eq 1 ]]",
                    "[[ -v $REF ]]",
                    "test -v \"$REF\"",
                    "[ -v 'a[$(touch INJECTED)]' ]",
                    "echo $[EVIL]",
                    "{ cat <<EOF\n$((EVIL))\nEOF\n}",
                ])
                .to_string();
            (text, false, "code-running-expansion")
        }
        17 => (
            format!("echo $(( $({}) + 1 ))", leaf(rng, bad)),
            false,
            "arithmetic-substitution",
        ),
        18 => {
            let inner = leaf(rng, bad).replace('\'', "'\\''");
            let text = match rng.below(10) {
                0 => format!("eval '{inner}'"),
                1 => "source evil.sh".to_string(),
                2 => ". ./evil.sh".to_string(),
                3 => format!("trap '{inner}' EXIT"),
                4 => format!("command {inner}"),
                5 => format!("exec {inner}"),
                6 => format!("builtin eval '{inner}'"),
                7 => format!("f() {{ {inner}; }}\nf"),
                8 => format!("shopt -s expand_aliases\nalias ls='{inner}'\nls"),
                _ => format!("function g {{ {inner}; }}; g"),
            };
            (text, false, "code-running-builtin")
        }
        19 => {
            let inner = sub(rng, bad).text.replace('\'', "'\\''");
            (format!("bash -c '{inner}'"), true, "shell-c")
        }
        20 => (
            format!(
                "if {}; then {}; fi",
                sub(rng, bad_a).text,
                sub(rng, bad_b).text
            ),
            true,
            "if",
        ),
        21 => (
            format!("for i in 1 2; do {}; done", sub(rng, bad).text),
            true,
            "for",
        ),
        22 => (
            format!("case x in x) {} ;; esac", sub(rng, bad).text),
            true,
            "case",
        ),
        // `! compound` is misparsed by tree-sitter-bash (the words
        // `if`, `then`, … become commands, so it asks): simple commands only.
        23 => (format!("! {}", leaf(rng, bad)), true, "negation"),
        24 => {
            let text = rng.pick(&[
                "echo x > link_out/y",
                "echo x > deep_link/../z",
                "echo x > sub/../link_out/w",
                "cat 'a b.txt' > link_file",
                "echo x >> .git/config",
                "echo x > .kaji/config.toml",
                "echo x > ./.git/../.git/config",
                "echo x > dangling",
                "echo x > ../outside/direct",
                "cat <> link_out/rw",
                "echo x >& link_out/dup",
                "echo x 3> link_out/fd3",
                "echo x &> deep_link/../both",
            ]);
            (text.to_string(), false, "redirect-through-symlink")
        }
        25 => (
            format!("echo \"$(echo \"$({})\")\"", leaf(rng, bad)),
            true,
            "nested-substitution",
        ),
        26 => {
            // Escaped, the backticks are literal: the leaf's `>` would be
            // echo's own redirection (which asks).
            let inner = leaf(rng, bad);
            let plain = !inner.contains('>');
            (format!("echo hi \\`{inner}\\`"), plain, "escaped-backticks")
        }
        27 => (
            format!(
                "echo '`{}`' '$({})'",
                leaf(rng, bad).replace('\'', "'\\''"),
                leaf(rng, bad).replace('\'', "'\\''")
            ),
            true,
            "single-quoted",
        ),
        28 => (
            format!("[[ -n $({}) ]] && {}", leaf(rng, bad_a), leaf(rng, bad_b)),
            true,
            "test-command",
        ),
        29 => {
            let inner = leaf(rng, bad);
            let text = match rng.below(4) {
                0 => format!("echo hi#$({inner})"),
                1 => format!("{{ echo hi # $({inner})\n}}"),
                2 => format!("echo hi <<< \"`{inner}`\""),
                _ => format!("echo $'x' \"$({inner})\"$'y'"),
            };
            (text, true, "comments-and-quoting")
        }
        _ => (
            format!("echo ${{UNSET:-\"$( {} )\"}}", sub(rng, bad).text),
            true,
            "quoted-default",
        ),
    };
    // Wrappers with only one inner part: allowed when that part is (the
    // generator put a payload in when `bad`).
    Case {
        all_allowed: keeps_allowed && !bad && inner_allowed.get(),
        text,
        class,
    }
}

/// The throwaway world: a project with symlinks leading out of it, a
/// directory outside it, and a `PATH` of stand-ins.
struct World {
    _dir: tempfile::TempDir,
    root: PathBuf,
    project: PathBuf,
    bin: PathBuf,
    log: PathBuf,
    strace: PathBuf,
}

impl World {
    fn new() -> World {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path().canonicalize().expect("canonical temp dir");
        let project = root.join("proj");
        let bin = root.join("bin");
        for d in [&project, &bin, &project.join("src"), &project.join("sub")] {
            fs::create_dir_all(d).expect("mkdir");
        }
        for p in PROGRAMS {
            std::os::unix::fs::symlink("/bin/true", bin.join(p)).expect("link program");
        }
        for shell in ["bash", "sh"] {
            std::os::unix::fs::symlink("/bin/bash", bin.join(shell)).expect("link shell");
        }
        fs::write(project.join("evil.sh"), "touch INJECTED\n").expect("write");
        fs::write(project.join("a b.txt"), "a\n").expect("write");
        let link = |target: &str, name: &str| {
            std::os::unix::fs::symlink(target, project.join(name)).expect("symlink");
        };
        link("../outside", "link_out");
        link("../outside/f.txt", "link_file");
        link("../outside/deep", "deep_link");
        link("../outside/missing/file", "dangling");
        let log = root.join("strace.log");
        let strace = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
            .map(|d| d.join("strace"))
            .find(|p| p.is_file())
            .expect("strace is installed (apt-get install strace)");
        let world = World {
            strace,
            _dir: dir,
            root,
            project,
            bin,
            log,
        };
        world.reset();
        world
    }

    /// Puts the outside directory and the protected files back as they
    /// were.
    fn reset(&self) {
        let outside = self.root.join("outside");
        let _ = fs::remove_dir_all(&outside);
        fs::create_dir_all(outside.join("deep")).expect("mkdir outside");
        fs::write(outside.join("f.txt"), "original\n").expect("write");
        fs::create_dir_all(self.project.join(".git")).expect("mkdir .git");
        fs::create_dir_all(self.project.join(".kaji")).expect("mkdir .kaji");
        fs::write(self.project.join(".git/config"), "[core]\n").expect("write");
        let _ = fs::remove_file(self.project.join(".kaji/config.toml"));
    }

    /// Every file outside the project or protected, with its content.
    fn guarded_state(&self) -> Vec<(PathBuf, String)> {
        let mut out = Vec::new();
        let mut stack = vec![self.root.join("outside"), self.project.join(".kaji")];
        while let Some(dir) = stack.pop() {
            let Ok(entries) = fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let path = entry.path();
                if path.is_dir() {
                    stack.push(path);
                } else {
                    out.push((path.clone(), fs::read_to_string(&path).unwrap_or_default()));
                }
            }
        }
        let config = self.project.join(".git/config");
        out.push((
            config.clone(),
            fs::read_to_string(&config).unwrap_or_default(),
        ));
        out.sort();
        out
    }

    /// Runs `command` in bash under strace: the argv of every program that
    /// ran (the shell itself and `bash -c` shells left out).
    fn run(&self, command: &str) -> Vec<Vec<String>> {
        let status = Command::new(&self.strace)
            .args([
                "-f",
                "-qq",
                "-s",
                "65536",
                "-e",
                "trace=execve",
                "-e",
                "signal=none",
                "-o",
            ])
            .arg(&self.log)
            .arg("/bin/bash")
            .args(["-c", command])
            .current_dir(&self.project)
            .env_clear()
            .env("PATH", &self.bin)
            .env("HOME", self.root.join("home"))
            .env("EVIL", "a[$(touch INJECTED)]")
            .env("REF", "a[$(touch INJECTED)]")
            .env("PROMPT", "$(touch INJECTED)")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("strace runs");
        let _ = status;
        let log = fs::read_to_string(&self.log).unwrap_or_default();
        executed(&log)
    }
}

/// The argv of every successful `execve` in an strace log, but the first
/// (the shell under test) and shells given `-c` (what they run is traced
/// in its turn).
fn executed(log: &str) -> Vec<Vec<String>> {
    let mut pending: HashMap<&str, Vec<String>> = HashMap::new();
    let mut out = Vec::new();
    let mut first = true;
    for line in log.lines() {
        let Some((pid, rest)) = line.split_once(' ') else {
            continue;
        };
        let rest = rest.trim_start();
        if let Some(call) = rest.strip_prefix("execve(") {
            let argv = parse_argv(call);
            if rest.ends_with("<unfinished ...>") {
                pending.insert(pid, argv);
            } else if !rest.contains("= -1 ") {
                out.push(argv);
            }
        } else if rest.starts_with("<... execve resumed>")
            && let Some(argv) = pending.remove(pid)
            && !rest.contains("= -1 ")
        {
            out.push(argv);
        }
    }
    out.retain(|argv| {
        let skip = first
            || (argv.first().is_some_and(|p| p == "bash" || p == "sh")
                && argv
                    .iter()
                    .any(|a| a.starts_with('-') && !a.starts_with("--") && a.contains('c')));
        first = false;
        !skip
    });
    out
}

/// The argv array of an strace `execve("path", ["a", "b"], …` line.
fn parse_argv(call: &str) -> Vec<String> {
    let Some(start) = call.find(", [") else {
        return Vec::new();
    };
    let mut chars = call[start + 3..].chars();
    let mut argv = Vec::new();
    loop {
        match chars.next() {
            Some('"') => {
                let mut s = Vec::new();
                while let Some(c) = chars.next() {
                    match c {
                        '"' => break,
                        '\\' => match chars.next() {
                            Some('n') => s.push(b'\n'),
                            Some('t') => s.push(b'\t'),
                            Some('x') => {
                                let hex: String = chars.by_ref().take(2).collect();
                                s.push(u8::from_str_radix(&hex, 16).unwrap_or(b'?'));
                            }
                            Some(c) => s.extend(c.to_string().bytes()),
                            None => break,
                        },
                        c => s.extend(c.to_string().bytes()),
                    }
                }
                argv.push(String::from_utf8_lossy(&s).into_owned());
            }
            Some(']') | None => break,
            Some(_) => {}
        }
    }
    argv
}

/// Where a path really leads, as the kernel resolves it.
fn real_path(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    let mut hops = 0;
    let mut todo: Vec<PathBuf> = path
        .components()
        .rev()
        .map(|c| PathBuf::from(c.as_os_str()))
        .collect();
    while let Some(c) = todo.pop() {
        match Path::new(&c).components().next() {
            Some(Component::RootDir) => out = PathBuf::from("/"),
            Some(Component::ParentDir) => {
                out.pop();
            }
            Some(Component::Normal(name)) => {
                let next = out.join(name);
                match fs::read_link(&next) {
                    Ok(target) if hops < 40 => {
                        hops += 1;
                        todo.extend(
                            target
                                .components()
                                .rev()
                                .map(|c| PathBuf::from(c.as_os_str())),
                        );
                    }
                    _ => out = next,
                }
            }
            _ => {}
        }
    }
    out
}

fn rules() -> RuleSet {
    let mut set = RuleSet::new();
    for rule in RULES {
        set.push(
            Decision::Allow,
            rule.parse().expect("valid rule"),
            RuleSource::Session,
            true,
        );
    }
    set
}

fn decision(rules: &RuleSet, ctx: &Context, command: &str) -> Decision {
    let request = PermissionRequest::Bash {
        command: command.to_string(),
    };
    decide(rules, &request, ctx).decision
}

fn shell_quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', "'\\''"))
}

#[derive(Default, Debug)]
struct Counts {
    cases: usize,
    approved: usize,
    asked: usize,
    must_approve: usize,
    programs_run: usize,
    payload_runs_asked: usize,
    by_class: HashMap<&'static str, (usize, usize)>,
}

/// Runs `cases` generated commands from `seed`; every failure, described.
fn differential(seed: u64, cases: usize) -> (Counts, Vec<String>) {
    let world = World::new();
    let mut ctx = Context::new(&world.project, true);
    ctx.real_path = RealPath::new(real_path);
    let rules = rules();
    let mut rng = Rng(seed);
    let mut counts = Counts::default();
    let mut failures = Vec::new();
    for _ in 0..cases {
        let bad = rng.below(2) == 0;
        let case = generate(&mut rng, 3, bad);
        let verdict = decision(&rules, &ctx, &case.text);
        counts.cases += 1;
        let class = counts.by_class.entry(case.class).or_default();
        class.0 += 1;
        if case.all_allowed {
            counts.must_approve += 1;
            if verdict != Decision::Allow {
                failures.push(format!(
                    "only allowed parts, but {verdict}: {:?}",
                    case.text
                ));
            }
        }
        if verdict != Decision::Allow {
            counts.asked += 1;
            // Still run a sample, so the stand-ins show payloads do run.
            if counts.asked % 16 == 0 && !world.run(&case.text).is_empty() {
                counts.payload_runs_asked += 1;
            }
            world.reset();
            continue;
        }
        counts.approved += 1;
        class.1 += 1;
        let before = world.guarded_state();
        let ran = world.run(&case.text);
        counts.programs_run += ran.len();
        for argv in ran {
            let line: Vec<String> = argv.iter().map(|w| shell_quote(w)).collect();
            let line = line.join(" ");
            if decision(&rules, &ctx, &line) != Decision::Allow {
                failures.push(format!("auto-approved {:?}, which ran {line}", case.text));
            }
        }
        if world.guarded_state() != before {
            failures.push(format!(
                "auto-approved {:?}, which wrote outside the project or to a protected path",
                case.text
            ));
        }
        world.reset();
    }
    (counts, failures)
}

fn seeds(fixed: &[u64]) -> Vec<u64> {
    kaji_test_support::seeds::seeds("differential", fixed, None)
}

fn check(fixed: &[u64], cases_per_seed: usize) -> Counts {
    let mut total = Counts::default();
    for seed in seeds(fixed) {
        let (counts, failures) = differential(seed, cases_per_seed);
        println!("seed {seed}: {counts:?}");
        assert!(
            failures.is_empty(),
            "seed {seed} (replay with KAJI_TEST_SEED={seed}): {} failures:\n{}",
            failures.len(),
            failures.join("\n")
        );
        total.cases += counts.cases;
        total.approved += counts.approved;
        total.asked += counts.asked;
        total.must_approve += counts.must_approve;
        total.programs_run += counts.programs_run;
        total.payload_runs_asked += counts.payload_runs_asked;
        for (class, (n, a)) in counts.by_class {
            let e = total.by_class.entry(class).or_default();
            e.0 += n;
            e.1 += a;
        }
    }
    total
}

#[test]
fn differential_sample() {
    let fixed: Vec<u64> = SEEDS.iter().chain(FOUND_BUGS).copied().collect();
    let total = check(&fixed, 100);
    assert!(total.approved > 0 && total.asked > 0, "{total:?}");
}

#[test]
#[ignore = "10,000 commands through strace: minutes; run for docs/benchmarks.md"]
fn differential_10k() {
    let per_seed = 10_000usize.div_ceil(seeds(SEEDS).len());
    let total = check(SEEDS, per_seed);
    let mut classes: Vec<_> = total.by_class.iter().collect();
    classes.sort();
    println!(
        "cases {} approved {} asked {} must-approve {} programs-run {} asked-that-ran-a-payload(sampled) {}",
        total.cases,
        total.approved,
        total.asked,
        total.must_approve,
        total.programs_run,
        total.payload_runs_asked
    );
    for (class, (n, a)) in classes {
        println!("  {class}: {n} cases, {a} auto-approved");
    }
}

#[test]
fn the_strace_log_parser_reads_argv() {
    let log = "10 execve(\"/bin/bash\", [\"bash\", \"-c\", \"x\"], 0x1 /* 3 vars */) = 0\n\
               11 execve(\"/b/cargo\", [\"cargo\", \"a \\\"b\\\"\"], 0x1 /* 3 vars */ <unfinished ...>\n\
               12 execve(\"/b/rm\", [\"rm\"], 0x1 /* 3 vars */) = -1 ENOENT (No such file)\n\
               11 <... execve resumed>) = 0\n";
    assert_eq!(
        executed(log),
        vec![vec!["cargo".to_string(), "a \"b\"".to_string()]]
    );
}
