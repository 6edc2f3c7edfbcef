//! The task list on PostgreSQL: the same semantics as the file store
//! ([`TaskListStore`](super::TaskListStore)), for teams on several machines.
//!
//! Every change is one transaction; ids come from a per-list high-water
//! mark row; claims are `SELECT … FOR UPDATE SKIP LOCKED` over a partial
//! index of pending, unowned tasks; changes are announced with NOTIFY on
//! the channel `kaji_tasks` (payload: the list id). The schema and its
//! versions are in `schema.rs`; `docs/task-list.md` describes both.
//!
//! This module must never build SQL from values (parameters only), print a
//! password, or leave a change half-written: a transaction either commits
//! or is rolled back by the server when the connection goes.

mod claim;
mod lease;
mod mail;
mod ops;
mod schema;
mod tls;
mod url;
mod watch;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio_postgres::Client;
use tokio_postgres::error::SqlState;

use super::TaskListError;
pub use lease::{DEFAULT_LEASE_MS, LEASE_MS_ENV, Lease};
pub use schema::{MigrateReport, SCHEMA_VERSION};
pub use url::{PgUrl, TASK_LIST_URL_ENV, is_url};
pub use watch::{ListWatcher, WatchMode};

/// Overrides the connect timeout (milliseconds; default 10 s).
pub const CONNECT_TIMEOUT_ENV: &str = "KAJI_PG_CONNECT_TIMEOUT_MS";
/// How many times a transaction that failed before its commit is tried.
const ATTEMPTS: u32 = 3;

/// A task list in a PostgreSQL database. Cheap to clone; clones share a
/// small pool of connections (one per concurrent operation).
#[derive(Clone)]
pub struct PgTaskList {
    shared: Arc<Shared>,
    list_id: String,
}

struct Shared {
    url: PgUrl,
    tls: tls::MakePgTls,
    idle: std::sync::Mutex<Vec<Client>>,
    schema_checked: AtomicBool,
    migrate_note: std::sync::Mutex<Option<String>>,
}

impl std::fmt::Debug for PgTaskList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgTaskList")
            .field("server", &self.shared.url.server)
            .field("list_id", &self.list_id)
            .finish()
    }
}

/// How a transaction failed: by the list's rules (never retried), in a
/// statement, or at commit (where the outcome may be unknown).
pub(crate) enum Fail {
    List(TaskListError),
    Pg(tokio_postgres::Error),
    Commit(tokio_postgres::Error),
}

impl From<TaskListError> for Fail {
    fn from(e: TaskListError) -> Self {
        Self::List(e)
    }
}

impl From<tokio_postgres::Error> for Fail {
    fn from(e: tokio_postgres::Error) -> Self {
        Self::Pg(e)
    }
}

/// Runs `$body` (a block using `$tx: &Transaction`, yielding
/// `Result<T, Fail>`) in one transaction, retrying on a fresh connection
/// when the failure happened before the commit or was a serialization
/// failure.
macro_rules! in_tx {
    ($self:expr, |$tx:ident| $body:block) => {{
        let mut attempt = 0u32;
        loop {
            attempt += 1;
            let mut client = $self.take().await?;
            let result: Result<_, $crate::list::pg::Fail> = async {
                let $tx = client.transaction().await?;
                let value = $body?;
                $tx.commit().await.map_err($crate::list::pg::Fail::Commit)?;
                Ok(value)
            }
            .await;
            match $self.settle(client, result, attempt) {
                Ok(Some(value)) => break Ok(value),
                Ok(None) => continue,
                Err(e) => break Err(e),
            }
        }
    }};
}
pub(crate) use in_tx;

impl PgTaskList {
    /// Connects to the database of `url` and opens list `list_id`
    /// (sanitised as for files), creating the list if it is missing. The
    /// schema is created or upgraded on first use (see
    /// [`migrate_note`](Self::migrate_note)).
    pub async fn open(url: &PgUrl, list_id: &str) -> Result<Self, TaskListError> {
        let list = Self::connect(url, list_id).await?;
        list.ensure_list(true).await?;
        Ok(list)
    }

    /// As [`open`](Self::open), but a missing list is
    /// [`TaskListError::ListNotFound`].
    pub async fn open_existing(url: &PgUrl, list_id: &str) -> Result<Self, TaskListError> {
        let list = Self::connect(url, list_id).await?;
        list.ensure_list(false).await?;
        Ok(list)
    }

    /// A handle without touching the list (for `migrate`).
    pub async fn connect(url: &PgUrl, list_id: &str) -> Result<Self, TaskListError> {
        let list_id = super::sanitize_list_id(list_id)?;
        let tls = make_tls().map_err(|problem| TaskListError::Database {
            server: url.server.clone(),
            list_id: list_id.clone(),
            problem,
            retryable: false,
        })?;
        let mut url = url.clone();
        url.config.connect_timeout(connect_timeout_from_env());
        let list = Self {
            shared: Arc::new(Shared {
                url,
                tls,
                idle: std::sync::Mutex::new(Vec::new()),
                schema_checked: AtomicBool::new(false),
                migrate_note: std::sync::Mutex::new(None),
            }),
            list_id,
        };
        let client = list.take().await?;
        list.put_back(client);
        Ok(list)
    }

    /// The same database and pool, another list (not checked or created;
    /// see [`create_list`](Self::create_list)).
    pub fn with_list(&self, list_id: &str) -> Result<Self, TaskListError> {
        Ok(Self {
            shared: Arc::clone(&self.shared),
            list_id: super::sanitize_list_id(list_id)?,
        })
    }

    /// Creates this handle's list if it is missing (a handle from
    /// [`with_list`](Self::with_list) does not check its list).
    pub async fn create_list(&self) -> Result<(), TaskListError> {
        self.ensure_list(true).await
    }

    /// The list id.
    pub fn list_id(&self) -> &str {
        &self.list_id
    }

    /// `host:port/database` (never a password).
    pub fn server(&self) -> &str {
        &self.shared.url.server
    }

    /// What the first use did to the schema (`created the task-list schema
    /// (version 1) on …`), once; `None` if nothing was done.
    pub fn migrate_note(&self) -> Option<String> {
        self.shared
            .migrate_note
            .lock()
            .ok()
            .and_then(|mut n| n.take())
    }

    /// An idle connection of the pool, or a new one (schema checked once).
    async fn take(&self) -> Result<Client, TaskListError> {
        let idle = self.shared.idle.lock().ok().and_then(|mut v| v.pop());
        if let Some(client) = idle.filter(|c| !c.is_closed()) {
            return Ok(client);
        }
        let client = self.new_client().await?;
        if !self.shared.schema_checked.load(Ordering::Acquire) {
            let note = schema::ensure(&client, self).await?;
            if let (Some(note), Ok(mut slot)) = (note, self.shared.migrate_note.lock()) {
                *slot = Some(note);
            }
            self.shared.schema_checked.store(true, Ordering::Release);
        }
        Ok(client)
    }

    /// A fresh connection, its driver spawned on the runtime.
    pub(crate) async fn new_client(&self) -> Result<Client, TaskListError> {
        let url = &self.shared.url;
        let mut last = None;
        for attempt in 0..ATTEMPTS {
            match url.config.connect(self.shared.tls.clone()).await {
                Ok((client, connection)) => {
                    tokio::spawn(async move {
                        let _ = connection.await;
                    });
                    return Ok(client);
                }
                Err(e) => {
                    let retry = is_transient_connect(&e);
                    last = Some(e);
                    if !retry {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(50 << attempt)).await;
                }
            }
        }
        Err(self.db_error(last, "cannot connect", true))
    }

    fn put_back(&self, client: Client) {
        if client.is_closed() {
            return;
        }
        if let Ok(mut idle) = self.shared.idle.lock()
            && idle.len() < 64
        {
            idle.push(client);
        }
    }

    /// Decides what a transaction's result means: a value, a retry
    /// (`Ok(None)`), or the error to report.
    pub(crate) fn settle<T>(
        &self,
        client: Client,
        result: Result<T, Fail>,
        attempt: u32,
    ) -> Result<Option<T>, TaskListError> {
        match result {
            Ok(value) => {
                self.put_back(client);
                Ok(Some(value))
            }
            Err(Fail::List(e)) => {
                self.put_back(client);
                Err(e)
            }
            Err(Fail::Pg(e)) => {
                let retry = is_retryable(&e, client.is_closed());
                self.put_back(client);
                if retry && attempt < ATTEMPTS {
                    return Ok(None);
                }
                Err(self.db_error(Some(e), "the change was not made", retry))
            }
            Err(Fail::Commit(e)) => {
                let rolled_back = e.as_db_error().is_some();
                self.put_back(client);
                if rolled_back && is_retryable(&e, false) && attempt < ATTEMPTS {
                    return Ok(None);
                }
                let what = if rolled_back {
                    "the change was not made"
                } else {
                    "the connection was lost while committing: the change may or may not \
                     have been made; look with `kaji tasks list` before trying again"
                };
                Err(self.db_error(Some(e), what, rolled_back))
            }
        }
    }

    pub(crate) fn db_error(
        &self,
        e: Option<tokio_postgres::Error>,
        what: &str,
        retryable: bool,
    ) -> TaskListError {
        let detail = match &e {
            Some(e) => describe(e),
            None => "unknown error".to_string(),
        };
        TaskListError::Database {
            server: self.shared.url.server.clone(),
            list_id: self.list_id.clone(),
            problem: kaji_protocol::redact::redact_url_passwords(&format!("{what}: {detail}")),
            retryable,
        }
    }

    /// Where a task "would be", for not-found messages.
    pub(crate) fn locator(&self, id: Option<u64>) -> std::path::PathBuf {
        let mut text = format!(
            "postgres://{} (list {:?}",
            self.shared.url.server, self.list_id
        );
        if let Some(id) = id {
            text.push_str(&format!(", task #{id}"));
        }
        text.push(')');
        text.into()
    }
}

/// `KAJI_PG_CONNECT_TIMEOUT_MS`, else 10 s.
pub fn connect_timeout_from_env() -> Duration {
    std::env::var(CONNECT_TIMEOUT_ENV)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .map_or(Duration::from_secs(10), Duration::from_millis)
}

fn make_tls() -> Result<tls::MakePgTls, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_native_certs::load_native_certs().certs {
        let _ = roots.add(cert);
    }
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("cannot set up TLS: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(tls::MakePgTls::new(config))
}

/// A statement failure worth one more try on a fresh connection: the
/// connection went away (the server rolls the transaction back), or the
/// server asks for a retry (serialization failure, deadlock).
fn is_retryable(e: &tokio_postgres::Error, closed: bool) -> bool {
    match e.as_db_error() {
        Some(db) => {
            *db.code() == SqlState::T_R_SERIALIZATION_FAILURE
                || *db.code() == SqlState::T_R_DEADLOCK_DETECTED
                || *db.code() == SqlState::ADMIN_SHUTDOWN
        }
        None => closed || e.is_closed() || std::error::Error::source(e).is_some(),
    }
}

fn is_transient_connect(e: &tokio_postgres::Error) -> bool {
    match e.as_db_error() {
        Some(db) => *db.code() == SqlState::CANNOT_CONNECT_NOW,
        None => {
            let text = e.to_string();
            !text.contains("password") && !text.contains("authentication")
        }
    }
}

/// A one-line account of `e` with the server's message and what to do.
fn describe(e: &tokio_postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        let hint = match db.code() {
            c if *c == SqlState::INVALID_PASSWORD
                || *c == SqlState::INVALID_AUTHORIZATION_SPECIFICATION =>
            {
                " (check the user and password in the URL, PGPASSWORD or ~/.pgpass)"
            }
            c if *c == SqlState::INVALID_CATALOG_NAME => " (create the database first)",
            _ => "",
        };
        return format!("{}: {}{hint}", db.severity(), db.message());
    }
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(&format!(": {s}"));
        source = s.source();
    }
    if text.contains("Connection refused") {
        text.push_str(" (is the server running and is the port right?)");
    }
    text
}
