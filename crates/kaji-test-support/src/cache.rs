//! Prompt-cache accounting over recorded Anthropic requests: how much of
//! each request's prefix an earlier request's `cache_control` breakpoint
//! covers, and what the run would be billed with and without the cache.
//! Anthropic caches the prefix (tools, then system, then messages) up to a
//! breakpoint; a later request reads it from the cache when its own prefix
//! is byte-identical up to there. Pure: request bodies in, numbers out.

use serde_json::Value;

/// One request as the cache sees it: its prefix units in order, each with
/// its canonical bytes and whether a breakpoint sits on it.
#[derive(Debug, Clone)]
pub struct CacheView {
    units: Vec<(String, bool)>,
}

impl CacheView {
    /// The units of an Anthropic Messages request body.
    pub fn of(body: &Value) -> Self {
        let mut units = Vec::new();
        let mut push = |v: &Value, prefix: &str| {
            let marked = v.get("cache_control").is_some();
            let mut clean = v.clone();
            if let Value::Object(map) = &mut clean {
                map.remove("cache_control");
            }
            units.push((format!("{prefix}{clean}"), marked));
        };
        for tool in body["tools"].as_array().into_iter().flatten() {
            push(tool, "tool:");
        }
        match &body["system"] {
            Value::String(s) => push(&Value::String(s.clone()), "system:"),
            Value::Array(blocks) => blocks.iter().for_each(|b| push(b, "system:")),
            _ => {}
        }
        for message in body["messages"].as_array().into_iter().flatten() {
            let role = message["role"].as_str().unwrap_or("");
            match &message["content"] {
                Value::String(s) => push(&Value::String(s.clone()), &format!("{role}:")),
                Value::Array(blocks) => {
                    for b in blocks {
                        push(b, &format!("{role}:"));
                    }
                }
                _ => {}
            }
        }
        Self { units }
    }

    /// Total bytes of the request's prefix units.
    pub fn bytes(&self) -> usize {
        self.units.iter().map(|(u, _)| u.len()).sum()
    }

    /// Bytes of this request's prefix that a breakpoint of `earlier`
    /// covers (the longest one whose prefix matches exactly).
    pub fn covered_by(&self, earlier: &CacheView) -> usize {
        let mut covered = 0;
        let mut bytes = 0;
        for (i, (unit, marked)) in earlier.units.iter().enumerate() {
            match self.units.get(i) {
                Some((mine, _)) if mine == unit => bytes += unit.len(),
                _ => break,
            }
            if *marked {
                covered = bytes;
            }
        }
        covered
    }
}

/// What a run of requests comes to.
#[derive(Debug, Clone, PartialEq)]
pub struct CacheReport {
    /// Per request: the share (0–1) of its prefix covered by a breakpoint
    /// of an earlier request.
    pub covered: Vec<f64>,
    /// Input tokens billed without caching (4 bytes a token).
    pub tokens_without: f64,
    /// Input tokens billed with caching, in input-token equivalents at
    /// Anthropic's multipliers (cache read 0.1, cache write 1.25).
    pub tokens_with: f64,
}

/// Accounts `bodies` (in the order they were sent).
pub fn report(bodies: &[Value]) -> CacheReport {
    let views: Vec<CacheView> = bodies.iter().map(CacheView::of).collect();
    let mut covered = Vec::new();
    let mut without = 0.0;
    let mut with = 0.0;
    for (i, view) in views.iter().enumerate() {
        let total = view.bytes() as f64;
        let hit = views[..i]
            .iter()
            .map(|earlier| view.covered_by(earlier))
            .max()
            .unwrap_or(0) as f64;
        covered.push(if total > 0.0 { hit / total } else { 0.0 });
        without += total / 4.0;
        // What is not read from the cache is written to it (this request
        // sets breakpoints at its end) or sent plain.
        with += hit / 4.0 * 0.1 + (total - hit) / 4.0 * 1.25;
    }
    CacheReport {
        covered,
        tokens_without: without,
        tokens_with: with,
    }
}
