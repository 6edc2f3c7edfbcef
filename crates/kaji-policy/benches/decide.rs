//! The cost of one permission decision: parsing a command with
//! tree-sitter-bash, walking it, and matching every simple command against
//! the rules. Target: well under a millisecond per decision, so that it is
//! never noticeable next to a tool call.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "benchmark setup: a failed step aborts the measurement"
)]

use kaji_policy::{Context, Decision, PathTool, PermissionRequest, RuleSet, RuleSource, decide};

fn main() {
    divan::main();
}

fn rules() -> RuleSet {
    let mut set = RuleSet::new();
    for (kind, rule) in [
        (Decision::Allow, "Bash(cargo test:*)"),
        (Decision::Allow, "Bash(npm run lint)"),
        (Decision::Allow, "Edit(/src/**)"),
        (Decision::Ask, "Bash(git push:*)"),
        (Decision::Deny, "Bash(rm:*)"),
        (Decision::Deny, "Read(~/.ssh/**)"),
    ] {
        let rule = rule.parse().expect("valid rule");
        set.push(kind, rule, RuleSource::Session, true);
    }
    set
}

fn ctx() -> Context {
    let mut ctx = Context::new("/work/project", true);
    ctx.home = Some("/home/me".into());
    ctx
}

fn bash(command: String) -> PermissionRequest {
    PermissionRequest::Bash { command }
}

fn heredoc(lines: usize) -> String {
    let mut s = String::from("python3 - <<'EOF'\n");
    for i in 0..lines {
        s.push_str(&format!("print('line {i}', {i} * 2)\n"));
    }
    s.push_str("EOF\n");
    s
}

#[divan::bench]
fn simple_command(bencher: divan::Bencher) {
    let (set, ctx, req) = (rules(), ctx(), bash("cargo test --all -q".into()));
    bencher.bench(|| decide(&set, &req, &ctx));
}

#[divan::bench]
fn compound_ten_segments(bencher: divan::Bencher) {
    let command = "cargo test && git status | head -5; ls -la src && echo \"$(cat Cargo.toml | wc -l)\" || npm run lint; find . -name '*.rs' | sort > files.txt; (cd src && ls)";
    let (set, ctx, req) = (rules(), ctx(), bash(command.into()));
    bencher.bench(|| decide(&set, &req, &ctx));
}

#[divan::bench]
fn heredoc_41_lines(bencher: divan::Bencher) {
    let (set, ctx, req) = (rules(), ctx(), bash(heredoc(41)));
    bencher.bench(|| decide(&set, &req, &ctx));
}

#[divan::bench]
fn edit_path(bencher: divan::Bencher) {
    let req = PermissionRequest::Path {
        tool: PathTool::Edit,
        path: "/work/project/src/deep/module/file.rs".into(),
    };
    let (set, ctx) = (rules(), ctx());
    bencher.bench(|| decide(&set, &req, &ctx));
}
