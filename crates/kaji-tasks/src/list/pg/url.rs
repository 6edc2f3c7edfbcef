//! Task-list URLs (`postgres://user@host:port/db?list=NAME`): splitting off
//! kaji's own `list` parameter, filling credentials from the environment
//! and `~/.pgpass`, and naming the server without its password.
//!
//! Must never put a password into anything it returns for display.

use std::path::Path;
use std::str::FromStr;

use kaji_protocol::redact::redact_url_passwords;
use tokio_postgres::config::{Config, Host};

use crate::list::TaskListError;

/// The environment variable naming the task-list backend URL (unset: files).
pub const TASK_LIST_URL_ENV: &str = "KAJI_TASK_LIST_URL";

/// A parsed PostgreSQL task-list URL.
#[derive(Clone)]
pub struct PgUrl {
    /// The connection settings (credentials included).
    pub config: Config,
    /// The URL's `?list=` value, if any (not yet sanitised).
    pub list: Option<String>,
    /// `host:port/database`, for messages (never a password).
    pub server: String,
}

impl std::fmt::Debug for PgUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgUrl")
            .field("server", &self.server)
            .field("list", &self.list)
            .finish_non_exhaustive()
    }
}

/// Whether `value` (a `--list` value, say) is a URL rather than a list id.
pub fn is_url(value: &str) -> bool {
    value.contains("://")
}

impl PgUrl {
    /// Parses `url`; `PGUSER`, `PGPASSWORD` and `~/.pgpass` (or
    /// `PGPASSFILE`) fill in what the URL leaves out.
    pub fn parse(url: &str) -> Result<Self, TaskListError> {
        let bad = |problem: String| TaskListError::BadUrl {
            url: redact_url_passwords(url),
            problem,
        };
        let scheme_ok = url.starts_with("postgres://") || url.starts_with("postgresql://");
        if !scheme_ok {
            return Err(bad(
                "only postgres:// and postgresql:// URLs are supported".to_string()
            ));
        }
        let (base, list) = split_list_param(url);
        let mut config = Config::from_str(&base).map_err(|e| bad(e.to_string()))?;
        if config.get_hosts().is_empty() {
            config.host("localhost");
        }
        if config.get_user().is_none() {
            let user = std::env::var("PGUSER")
                .or_else(|_| std::env::var("USER"))
                .unwrap_or_else(|_| "postgres".to_string());
            config.user(&user);
        }
        let server = server_of(&config);
        if config.get_password().is_none() {
            if let Ok(password) = std::env::var("PGPASSWORD") {
                config.password(password);
            } else if let Some(password) = pgpass_password(&config) {
                config.password(password);
            }
        }
        Ok(Self {
            config,
            list,
            server,
        })
    }
}

/// `host:port/database` of `config`.
pub(crate) fn server_of(config: &Config) -> String {
    let host = match config.get_hosts().first() {
        Some(Host::Tcp(h)) => h.clone(),
        Some(Host::Unix(p)) => p.display().to_string(),
        None => "localhost".to_string(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let db = config
        .get_dbname()
        .or(config.get_user())
        .unwrap_or("postgres");
    format!("{host}:{port}/{db}")
}

/// Removes every `list=` pair from the query; returns the rest of the URL
/// and the (percent-decoded) last `list` value.
fn split_list_param(url: &str) -> (String, Option<String>) {
    let Some((head, query)) = url.split_once('?') else {
        return (url.to_string(), None);
    };
    let mut list = None;
    let mut kept = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some(("list", value)) => list = Some(percent_decode(value)),
            _ => kept.push(pair),
        }
    }
    if kept.is_empty() {
        (head.to_string(), list)
    } else {
        (format!("{head}?{}", kept.join("&")), list)
    }
}

fn percent_decode(value: &str) -> String {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b'+', _) => {
                out.push(b' ');
                i += 1;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The password `~/.pgpass` (or `$PGPASSFILE`) gives for `config`.
fn pgpass_password(config: &Config) -> Option<String> {
    let path = match std::env::var_os("PGPASSFILE") {
        Some(p) => p.into(),
        None => Path::new(&std::env::var_os("HOME")?).join(".pgpass"),
    };
    let text = std::fs::read_to_string(path).ok()?;
    let host = match config.get_hosts().first() {
        Some(Host::Tcp(h)) => h.clone(),
        _ => "localhost".to_string(),
    };
    let port = config
        .get_ports()
        .first()
        .copied()
        .unwrap_or(5432)
        .to_string();
    let user = config.get_user().unwrap_or("");
    let db = config.get_dbname().unwrap_or(user);
    let wanted = [host.as_str(), port.as_str(), db, user];
    text.lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .map(pgpass_fields)
        .find(|fields| {
            fields.len() == 5
                && fields[..4]
                    .iter()
                    .zip(wanted)
                    .all(|(f, w)| f == "*" || f == w)
        })
        .map(|mut fields| fields.remove(4))
}

/// Splits a `.pgpass` line on unescaped `:` (`\:` and `\\` are escapes).
fn pgpass_fields(line: &str) -> Vec<String> {
    let mut fields = vec![String::new()];
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let (Some(next), Some(last)) = (chars.next(), fields.last_mut()) {
                    last.push(next);
                }
            }
            ':' => fields.push(String::new()),
            c => {
                if let Some(last) = fields.last_mut() {
                    last.push(c);
                }
            }
        }
    }
    fields
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_parameter_is_split_off_and_password_never_shown() {
        let url =
            PgUrl::parse("postgres://u:sekrit@127.0.0.1:5999/kaji?sslmode=disable&list=a%2Fb")
                .unwrap();
        assert_eq!(url.list.as_deref(), Some("a/b"));
        assert_eq!(url.server, "127.0.0.1:5999/kaji");
        assert!(!format!("{url:?}").contains("sekrit"));
        let err = PgUrl::parse("mysql://u:sekrit@h/db")
            .unwrap_err()
            .to_string();
        assert!(!err.contains("sekrit"), "{err}");
    }

    #[test]
    fn pgpass_lines_honour_escapes() {
        assert_eq!(
            pgpass_fields(r"h:5432:db:u:p\:w"),
            ["h", "5432", "db", "u", "p:w"]
        );
    }
}
