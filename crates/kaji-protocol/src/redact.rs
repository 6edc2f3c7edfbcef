//! Secrets: which environment variables count as secrets, and removing
//! secret values and URL passwords from text before it is shown, logged or
//! stored.
//!
//! Pure functions on strings: this module never reads the environment
//! itself (callers pass the names and values in) and never keeps a secret.

/// What replaces a secret in redacted text.
pub const MASK: &str = "***";

/// Name suffixes that mark a variable as a secret.
const SECRET_SUFFIXES: &[&str] = &["_API_KEY", "_TOKEN", "_SECRET", "_PASSWORD"];

/// Names that are secrets although no suffix says so.
const SECRET_NAMES: &[&str] = &["ANTHROPIC_AUTH_TOKEN", "AWS_SECRET_ACCESS_KEY"];

/// Whether the environment variable `name` holds a secret that children
/// must not inherit: a name ending in `_API_KEY`, `_TOKEN`, `_SECRET` or
/// `_PASSWORD` (case-insensitive), `ANTHROPIC_AUTH_TOKEN`,
/// `AWS_SECRET_ACCESS_KEY`, or a name in `extra` (the `secret_env`
/// setting) — unless `passthrough` (the `env_passthrough` setting) names
/// it.
pub fn is_secret_env_name(name: &str, extra: &[String], passthrough: &[String]) -> bool {
    if passthrough.iter().any(|p| p == name) {
        return false;
    }
    let upper = name.to_ascii_uppercase();
    SECRET_SUFFIXES.iter().any(|s| upper.ends_with(s))
        || SECRET_NAMES.contains(&upper.as_str())
        || extra.iter().any(|e| e == name)
}

/// Secret values shorter than this are not masked on their own (a
/// one-letter "secret" would mask every occurrence of that letter).
pub const MIN_SECRET_LEN: usize = 6;

/// `text` with every password in a URL (`scheme://user:PASSWORD@host`)
/// and every occurrence of a `secrets` value (at least
/// [`MIN_SECRET_LEN`] characters long) replaced by [`MASK`].
pub fn redact(text: &str, secrets: &[&str]) -> String {
    let mut out = redact_url_passwords(text);
    let mut secrets: Vec<&str> = secrets
        .iter()
        .copied()
        .filter(|s| s.chars().count() >= MIN_SECRET_LEN)
        .collect();
    // Longest first, so a secret that contains another is masked whole.
    secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    for secret in secrets {
        if out.contains(secret) {
            out = out.replace(secret, MASK);
        }
    }
    out
}

/// `text` with the password of every `scheme://user:password@host` URL
/// replaced by [`MASK`] (the user name is kept).
pub fn redact_url_passwords(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("://") {
        let (head, tail) = rest.split_at(i + 3);
        out.push_str(head);
        let end = tail
            .find(|c: char| c == '/' || c == '?' || c == '#' || c.is_whitespace())
            .unwrap_or(tail.len());
        let authority = &tail[..end];
        match authority.rfind('@') {
            Some(at) => match authority[..at].find(':') {
                Some(colon) => {
                    out.push_str(&authority[..=colon]);
                    out.push_str(MASK);
                    out.push_str(&authority[at..]);
                }
                None => out.push_str(authority),
            },
            None => out.push_str(authority),
        }
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_names() {
        let none: &[String] = &[];
        for name in [
            "ANTHROPIC_API_KEY",
            "OPENAI_API_KEY",
            "GITHUB_TOKEN",
            "ANTHROPIC_AUTH_TOKEN",
            "MY_SECRET",
            "github_token",
        ] {
            assert!(is_secret_env_name(name, none, none), "{name}");
        }
        for name in ["PATH", "HOME", "TOKENIZER", "KAJI_HOME", "SECRETARY"] {
            assert!(!is_secret_env_name(name, none, none), "{name}");
        }
        let extra = vec!["DB_URL".to_string()];
        assert!(is_secret_env_name("DB_URL", &extra, none));
        let pass = vec!["GITHUB_TOKEN".to_string()];
        assert!(!is_secret_env_name("GITHUB_TOKEN", none, &pass));
    }

    #[test]
    fn url_passwords_are_masked_and_users_kept() {
        assert_eq!(
            redact_url_passwords("base url http://u:SECRET@host:8080/v1 failed"),
            "base url http://u:***@host:8080/v1 failed"
        );
        assert_eq!(
            redact_url_passwords("https://tok@host/x and ftp://a:b:c@h"),
            "https://tok@host/x and ftp://a:***@h"
        );
        assert_eq!(redact_url_passwords("no url: a:b@c"), "no url: a:b@c");
    }

    #[test]
    fn known_values_are_masked() {
        let text = "key sk-ant-123456 and sk-ant-123456789 short ab";
        assert_eq!(
            redact(text, &["sk-ant-123456", "sk-ant-123456789", "ab"]),
            "key *** and *** short ab"
        );
    }
}
