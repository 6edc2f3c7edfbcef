//! The versioned task-list schema: created on first use or by `kaji tasks
//! migrate`, upgraded step by step, refused when a newer kaji wrote it.
//!
//! Must never drop or rewrite user data, and never touch a schema whose
//! version it does not know.

use tokio_postgres::Client;

use super::PgTaskList;
use crate::list::TaskListError;

/// The schema version this build writes and understands.
pub const SCHEMA_VERSION: i32 = 2;

/// Version 1: lists (with their high-water mark), tasks, edges, leases.
const V1: &str = r#"
CREATE TABLE IF NOT EXISTS kaji_task_lists (
    name text PRIMARY KEY,
    highwatermark bigint NOT NULL DEFAULT 0,
    created_at bigint NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS kaji_tasks (
    list text NOT NULL REFERENCES kaji_task_lists(name) ON DELETE CASCADE,
    id bigint NOT NULL,
    subject text NOT NULL,
    description text NOT NULL DEFAULT '',
    active_form text,
    owner text,
    status text NOT NULL CHECK (status IN ('pending', 'in_progress', 'completed')),
    metadata jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at bigint NOT NULL,
    updated_at bigint NOT NULL,
    PRIMARY KEY (list, id)
);
CREATE INDEX IF NOT EXISTS kaji_tasks_available
    ON kaji_tasks (list, id) WHERE status = 'pending' AND owner IS NULL;
CREATE INDEX IF NOT EXISTS kaji_tasks_owner
    ON kaji_tasks (list, owner) WHERE owner IS NOT NULL;
CREATE TABLE IF NOT EXISTS kaji_task_edges (
    list text NOT NULL,
    blocker bigint NOT NULL,
    blocked bigint NOT NULL,
    PRIMARY KEY (list, blocker, blocked),
    FOREIGN KEY (list, blocker) REFERENCES kaji_tasks (list, id) ON DELETE CASCADE,
    FOREIGN KEY (list, blocked) REFERENCES kaji_tasks (list, id) ON DELETE CASCADE
);
CREATE INDEX IF NOT EXISTS kaji_task_edges_blocked ON kaji_task_edges (list, blocked);
CREATE TABLE IF NOT EXISTS kaji_leases (
    list text NOT NULL REFERENCES kaji_task_lists(name) ON DELETE CASCADE,
    holder text NOT NULL,
    token bigint NOT NULL,
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (list, holder)
);
"#;

/// Version 2: the teammates' mailbox (messages and completion notices).
const V2: &str = r#"
CREATE TABLE IF NOT EXISTS kaji_mail (
    list text NOT NULL REFERENCES kaji_task_lists(name) ON DELETE CASCADE,
    seq bigserial NOT NULL,
    recipient text NOT NULL,
    sender text NOT NULL,
    body text NOT NULL,
    sent_at bigint NOT NULL,
    PRIMARY KEY (list, recipient, seq)
);
"#;

/// What [`migrate`] found and did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigrateReport {
    /// The version before (0: no schema).
    pub before: i32,
    /// The version now.
    pub after: i32,
}

/// Creates or upgrades the schema; returns a note when it changed anything.
pub(super) async fn ensure(
    client: &Client,
    list: &PgTaskList,
) -> Result<Option<String>, TaskListError> {
    let report = migrate_with(client, list).await?;
    Ok((report.before != report.after).then(|| {
        if report.before == 0 {
            format!(
                "kaji: created the task-list schema (version {}) on {}",
                report.after,
                list.server()
            )
        } else {
            format!(
                "kaji: upgraded the task-list schema from version {} to {} on {}",
                report.before,
                report.after,
                list.server()
            )
        }
    }))
}

async fn migrate_with(client: &Client, list: &PgTaskList) -> Result<MigrateReport, TaskListError> {
    let fail = |e: tokio_postgres::Error| list.db_error(Some(e), "cannot set up the schema", true);
    // One migrator at a time, across machines; released at commit.
    client.batch_execute("BEGIN").await.map_err(fail)?;
    let result = async {
        client
            .execute("SELECT pg_advisory_xact_lock($1)", &[&0x6b61_6a69_i64])
            .await?;
        client
            .batch_execute(
                "CREATE TABLE IF NOT EXISTS kaji_schema (
                     id int PRIMARY KEY CHECK (id = 1),
                     version int NOT NULL)",
            )
            .await?;
        let row = client
            .query_opt("SELECT version FROM kaji_schema WHERE id = 1", &[])
            .await?;
        Ok::<_, tokio_postgres::Error>(row.map_or(0, |r| r.get::<_, i32>(0)))
    }
    .await;
    let before = match result {
        Ok(v) => v,
        Err(e) => {
            let _ = client.batch_execute("ROLLBACK").await;
            return Err(fail(e));
        }
    };
    if before > SCHEMA_VERSION {
        let _ = client.batch_execute("ROLLBACK").await;
        return Err(TaskListError::SchemaTooNew {
            server: list.server().to_string(),
            list_id: list.list_id().to_string(),
            found: before,
            supported: SCHEMA_VERSION,
        });
    }
    let upgrade = async {
        if before < 1 {
            client.batch_execute(V1).await?;
        }
        if before < 2 {
            client.batch_execute(V2).await?;
        }
        client
            .execute(
                "INSERT INTO kaji_schema (id, version) VALUES (1, $1)
                 ON CONFLICT (id) DO UPDATE SET version = EXCLUDED.version",
                &[&SCHEMA_VERSION],
            )
            .await?;
        client.batch_execute("COMMIT").await
    }
    .await;
    if let Err(e) = upgrade {
        let _ = client.batch_execute("ROLLBACK").await;
        return Err(fail(e));
    }
    Ok(MigrateReport {
        before,
        after: SCHEMA_VERSION,
    })
}

impl PgTaskList {
    /// Creates or upgrades the schema (`kaji tasks migrate`).
    pub async fn migrate(&self) -> Result<MigrateReport, TaskListError> {
        let client = self.new_client().await?;
        migrate_with(&client, self).await
    }
}
