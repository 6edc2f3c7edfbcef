//! Property tests over generated compound commands: a command with any
//! segment no rule allows is never auto-approved, and a command made only
//! of allowed simple commands, with nothing unanalysable, always is.
//!
//! Each property runs 2,000 cases per seed over a fixed list of seeds
//! (`kaji_test_support::seeds`); `KAJI_TEST_SEED=random|N` explores or
//! replays (`KAJI_PROPTEST_SEED` is still read).

use kaji_policy::{Context, Decision, PermissionRequest, RuleSet, RuleSource, decide};
use kaji_test_support::seeds::seeds;
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestRunner};

const CASES: u32 = 2_000;

/// Simple commands the rules below allow (or that are read-only).
const ALLOWED: &[&str] = &[
    "cargo test",
    "cargo test --all -q",
    "cargo test -- --nocapture",
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
];

/// Simple commands no rule allows, and constructs that are never
/// analysable.
const FORBIDDEN: &[&str] = &[
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
    "sort -o out f",
    "ls > listing",
    "eval ls",
    "X=1 cargo test",
    "$CMD",
    "bash -c \"$x\"",
    "cat x > /tmp/out",
    "echo x >> .git/config",
    "source env.sh",
    "f() { ls; }",
];

fn rules() -> RuleSet {
    let mut set = RuleSet::new();
    for rule in [
        "Bash(cargo test:*)",
        "Bash(npm run lint)",
        "Bash(make check)",
        "Bash(git push:*)",
    ] {
        set.push(
            Decision::Allow,
            rule.parse().expect("valid rule"),
            RuleSource::Session,
            true,
        );
    }
    set
}

/// A compound command: leaves joined, nested and substituted.
#[derive(Debug, Clone)]
enum Tree {
    Leaf(String),
    Join(&'static str, Box<Tree>, Box<Tree>),
    Subshell(Box<Tree>),
    Group(Box<Tree>),
    Substitution(Box<Tree>),
    Backtick(String),
    ProcessSubstitution(Box<Tree>),
    ShellC(Box<Tree>),
    If(Box<Tree>, Box<Tree>),
}

impl Tree {
    fn render(&self) -> String {
        match self {
            Tree::Leaf(s) => s.clone(),
            Tree::Join(op, a, b) => format!("{} {op} {}", a.render(), b.render()),
            Tree::Subshell(a) => format!("( {} )", a.render()),
            Tree::Group(a) => format!("{{ {}; }}", a.render()),
            Tree::Substitution(a) => format!("echo \"$( {} )\"", a.render()),
            Tree::Backtick(s) => format!("cargo test `{s}`"),
            Tree::ProcessSubstitution(a) => format!("cat <( {} )", a.render()),
            Tree::ShellC(a) => format!("bash -c '{}'", a.render().replace('\'', r"'\''")),
            Tree::If(a, b) => format!("if {}; then {}; fi", a.render(), b.render()),
        }
    }

    fn leaves(&self) -> usize {
        match self {
            Tree::Leaf(_) | Tree::Backtick(_) => 1,
            Tree::Join(_, a, b) | Tree::If(a, b) => a.leaves() + b.leaves(),
            Tree::Subshell(a)
            | Tree::Group(a)
            | Tree::Substitution(a)
            | Tree::ProcessSubstitution(a)
            | Tree::ShellC(a) => a.leaves(),
        }
    }

    /// The tree with its `n`-th leaf (counting from 0) replaced.
    fn replace(self, n: &mut usize, leaf: &str) -> Tree {
        match self {
            Tree::Leaf(_) | Tree::Backtick(_) if *n == 0 => {
                *n = usize::MAX;
                Tree::Leaf(leaf.to_string())
            }
            Tree::Leaf(_) | Tree::Backtick(_) => {
                *n = n.saturating_sub(1);
                self
            }
            Tree::Join(op, a, b) => {
                let a = a.replace(n, leaf);
                Tree::Join(op, Box::new(a), Box::new(b.replace(n, leaf)))
            }
            Tree::If(a, b) => {
                let a = a.replace(n, leaf);
                Tree::If(Box::new(a), Box::new(b.replace(n, leaf)))
            }
            Tree::Subshell(a) => Tree::Subshell(Box::new(a.replace(n, leaf))),
            Tree::Group(a) => Tree::Group(Box::new(a.replace(n, leaf))),
            Tree::Substitution(a) => Tree::Substitution(Box::new(a.replace(n, leaf))),
            Tree::ProcessSubstitution(a) => Tree::ProcessSubstitution(Box::new(a.replace(n, leaf))),
            Tree::ShellC(a) => Tree::ShellC(Box::new(a.replace(n, leaf))),
        }
    }
}

fn allowed_tree() -> impl Strategy<Value = Tree> {
    let leaf = prop_oneof![
        5 => prop::sample::select(ALLOWED).prop_map(|s| Tree::Leaf(s.to_string())),
        1 => prop::sample::select(&["cargo test", "echo hi", "git status"][..])
            .prop_map(|s| Tree::Backtick(s.to_string())),
    ];
    leaf.prop_recursive(4, 24, 2, |inner| {
        let op = prop::sample::select(&[";", "&&", "||", "|", "&", "\n"][..]);
        prop_oneof![
            4 => (op, inner.clone(), inner.clone())
                .prop_map(|(op, a, b)| Tree::Join(op, Box::new(a), Box::new(b))),
            1 => inner.clone().prop_map(|a| Tree::Subshell(Box::new(a))),
            1 => inner.clone().prop_map(|a| Tree::Group(Box::new(a))),
            1 => inner.clone().prop_map(|a| Tree::Substitution(Box::new(a))),
            1 => inner.clone().prop_map(|a| Tree::ProcessSubstitution(Box::new(a))),
            1 => inner.clone().prop_map(|a| Tree::ShellC(Box::new(a))),
            1 => (inner.clone(), inner).prop_map(|(a, b)| Tree::If(Box::new(a), Box::new(b))),
        ]
    })
}

/// Seeds every run uses. 1796147803431568501 found the run-on command
/// of issue 23 (a 3+ stage pipeline, a newline, a redirected command).
const SEEDS: &[u64] = &[1_796_147_803_431_568_501, 0x6b61_6a69, 23];

fn runners(name: &str) -> Vec<(TestRunner, u64)> {
    seeds(name, SEEDS, Some("KAJI_PROPTEST_SEED"))
        .into_iter()
        .map(|seed| (runner(seed), seed))
        .collect()
}

fn runner(seed: u64) -> TestRunner {
    TestRunner::new(Config {
        cases: CASES,
        rng_seed: RngSeed::Fixed(seed),
        failure_persistence: None,
        ..Config::default()
    })
}

fn decision(command: &str) -> Decision {
    let request = PermissionRequest::Bash {
        command: command.to_string(),
    };
    decide(&rules(), &request, &Context::new("/proj", true)).decision
}

#[test]
fn a_command_with_a_segment_no_rule_allows_is_never_auto_approved() {
    for (mut runner, seed) in runners("never") {
        let strategy = (
            allowed_tree(),
            prop::sample::select(FORBIDDEN),
            any::<prop::sample::Index>(),
        );
        let result = runner.run(&strategy, |(tree, bad, at)| {
            let mut n = at.index(tree.leaves());
            let command = tree.replace(&mut n, bad).render();
            prop_assert_ne!(decision(&command), Decision::Allow, "{}", command);
            Ok(())
        });
        if let Err(e) = result {
            panic!("seed {seed} (replay with KAJI_TEST_SEED={seed}): {e}");
        }
    }
}

#[test]
fn a_command_of_allowed_segments_only_is_auto_approved() {
    for (mut runner, seed) in runners("always") {
        let result = runner.run(&allowed_tree(), |tree| {
            let command = tree.render();
            prop_assert_eq!(decision(&command), Decision::Allow, "{}", command);
            Ok(())
        });
        if let Err(e) = result {
            panic!("seed {seed} (replay with KAJI_TEST_SEED={seed}): {e}");
        }
    }
}

/// The run-on command seed 1796147803431568501 found (issue 23): a
/// pipeline of three stages, a newline or `;`, then a redirected command
/// no rule allows. It was auto-approved under `Bash(cargo test:*)`.
#[test]
fn regression_a_line_after_a_three_stage_pipeline_is_its_own_command() {
    for sep in ["\n", ";"] {
        let command = format!("ls | wc -l | cargo test{sep}rm -rf /tmp/elsewhere > out.txt");
        assert_ne!(decision(&command), Decision::Allow, "{command:?}");
        let allowed = format!("ls | wc -l | cargo test{sep}cargo test > out.txt");
        assert_eq!(decision(&allowed), Decision::Allow, "{allowed:?}");
    }
}
