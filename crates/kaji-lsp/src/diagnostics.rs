//! Diagnostics as kaji reports them: which ones an edit introduced, and
//! the lines `path:line:col: severity: message` the model reads.

use std::collections::HashMap;

use serde_json::Value;

/// The most diagnostic lines appended to a tool result.
pub const MAX_REPORTED: usize = 20;

/// One diagnostic, positions 1-based.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// Line, from 1.
    pub line: u32,
    /// Column (UTF-16 units as the server counts them), from 1.
    pub column: u32,
    /// `error`, `warning`, `info` or `hint`.
    pub severity: &'static str,
    /// The message (first line).
    pub message: String,
}

impl Diagnostic {
    /// Reads an LSP `Diagnostic`; `None` when it is malformed.
    pub fn from_lsp(v: &Value) -> Option<Self> {
        let start = v.pointer("/range/start")?;
        let line = start.get("line")?.as_u64()?;
        let character = start.get("character")?.as_u64()?;
        let severity = match v.get("severity").and_then(Value::as_u64) {
            Some(2) => "warning",
            Some(3) => "info",
            Some(4) => "hint",
            _ => "error",
        };
        let message = v.get("message")?.as_str()?;
        Some(Self {
            line: u32::try_from(line).ok()?.saturating_add(1),
            column: u32::try_from(character).ok()?.saturating_add(1),
            severity,
            message: message
                .lines()
                .next()
                .unwrap_or("")
                .chars()
                .take(300)
                .collect(),
        })
    }

    /// Whether it is worth reporting after an edit (errors and warnings).
    pub fn matters(&self) -> bool {
        matches!(self.severity, "error" | "warning")
    }

    fn key(&self) -> (&'static str, &str) {
        (self.severity, &self.message)
    }
}

/// The diagnostics of `after` that `before` did not have. Positions move
/// with edits, so two diagnostics are the same when severity and message
/// are; each one of `before` cancels one of `after`.
pub fn introduced<'a>(before: &[Diagnostic], after: &'a [Diagnostic]) -> Vec<&'a Diagnostic> {
    let mut seen: HashMap<(&str, &str), usize> = HashMap::new();
    for d in before {
        *seen.entry(d.key()).or_default() += 1;
    }
    after
        .iter()
        .filter(|d| d.matters())
        .filter(|d| match seen.get_mut(&d.key()) {
            Some(n) if *n > 0 => {
                *n -= 1;
                false
            }
            _ => true,
        })
        .collect()
}

/// The lines for `diagnostics` of the file shown as `path`, at most
/// [`MAX_REPORTED`], then how many more there are.
pub fn report(path: &str, diagnostics: &[&Diagnostic]) -> String {
    let mut out: Vec<String> = diagnostics
        .iter()
        .take(MAX_REPORTED)
        .map(|d| {
            format!(
                "{path}:{}:{}: {}: {}",
                d.line, d.column, d.severity, d.message
            )
        })
        .collect();
    if diagnostics.len() > MAX_REPORTED {
        out.push(format!("… and {} more", diagnostics.len() - MAX_REPORTED));
    }
    out.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(line: u32, sev: &'static str, msg: &str) -> Diagnostic {
        Diagnostic {
            line,
            column: 1,
            severity: sev,
            message: msg.into(),
        }
    }

    #[test]
    fn only_new_ones_count() {
        let before = [d(3, "error", "old"), d(9, "error", "dup")];
        let after = [
            d(5, "error", "old"),
            d(1, "error", "dup"),
            d(2, "error", "dup"),
            d(4, "hint", "h"),
            d(7, "error", "new"),
        ];
        let new: Vec<_> = introduced(&before, &after).iter().map(|d| d.line).collect();
        assert_eq!(new, [2, 7]);
        assert!(introduced(&after, &before).is_empty());
        let many: Vec<_> = (0..30).map(|i| d(i, "error", "x")).collect();
        let refs: Vec<_> = many.iter().collect();
        let text = report("a.py", &refs);
        assert!(text.starts_with("a.py:0:1: error: x"));
        assert!(text.ends_with("… and 10 more"), "{text}");
    }
}
