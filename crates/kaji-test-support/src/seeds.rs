//! Seeds for randomized tests, one rule for the whole workspace: a fixed
//! list by default, so every run of the suite is the same run;
//! `KAJI_TEST_SEED=random` for one fresh seed, `KAJI_TEST_SEED=N` to replay
//! one. Every seed in use is printed, so a failure can be replayed.
//!
//! A seed that ever found a bug is added to the test's fixed list and
//! stays there. This module never reads anything but its variables.

use std::time::{SystemTime, UNIX_EPOCH};

/// The variable that overrides every randomized test's seeds.
pub const SEED_VAR: &str = "KAJI_TEST_SEED";

/// The seeds a randomized test runs: `fixed` unless `KAJI_TEST_SEED` (or
/// the test's older variable `alias`, kept working) asks for another.
/// Each is printed with the command that replays it; `name` says which
/// test it is for. An unreadable value is a panic naming the variable: a
/// test that silently ran other seeds would look like a replay.
pub fn seeds(name: &str, fixed: &[u64], alias: Option<&str>) -> Vec<u64> {
    let chosen = requested(SEED_VAR)
        .or_else(|| alias.and_then(requested))
        .unwrap_or_else(|| fixed.to_vec());
    for seed in &chosen {
        println!("{name}: seed {seed} (replay with {SEED_VAR}={seed})");
        eprintln!("{name}: seed {seed} (replay with {SEED_VAR}={seed})");
    }
    chosen
}

fn requested(var: &str) -> Option<Vec<u64>> {
    let value = std::env::var(var).ok()?;
    let value = value.trim();
    if value.is_empty() {
        return None;
    }
    if value.eq_ignore_ascii_case("random") {
        return Some(vec![random_seed()]);
    }
    match value.parse::<u64>() {
        Ok(seed) => Some(vec![seed]),
        Err(_) => panic!("{var}={value:?}: expected `random` or a whole number"),
    }
}

/// A fresh seed from the clock and the process id.
pub fn random_seed() -> u64 {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    nanos ^ (u64::from(std::process::id()) << 32)
}
