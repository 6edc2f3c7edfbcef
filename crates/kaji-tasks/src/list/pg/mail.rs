//! The teammates' mailbox on PostgreSQL (table `kaji_mail`, schema
//! version 2): messages and completion notices reach agents on other
//! machines. Posting is one insert; taking is one `DELETE … RETURNING`,
//! so a message is delivered exactly once even when two processes of one
//! name race.
//!
//! Must never deliver anything itself: the core puts taken messages into
//! the recipient's next model request.

use super::ops::now;
use super::{Fail, PgTaskList, in_tx};
use crate::list::{MailMessage, TaskListError};

impl PgTaskList {
    /// Appends a message to `to`'s mailbox.
    pub async fn post_message(
        &self,
        from: &str,
        to: &str,
        text: &str,
    ) -> Result<(), TaskListError> {
        let (from, to, text) = (from.to_string(), to.to_string(), text.to_string());
        in_tx!(self, |tx| {
            async {
                self.require_list(&tx).await?;
                tx.execute(
                    "INSERT INTO kaji_mail (list, recipient, sender, body, sent_at) \
                     VALUES ($1, $2, $3, $4, $5)",
                    &[&self.list_id, &to, &from, &text, &now()],
                )
                .await?;
                Ok::<_, Fail>(())
            }
            .await
        })
    }

    /// Takes every message waiting for `name`, oldest first.
    pub async fn take_messages(&self, name: &str) -> Result<Vec<MailMessage>, TaskListError> {
        let name = name.to_string();
        in_tx!(self, |tx| {
            async {
                let rows = tx
                    .query(
                        "DELETE FROM kaji_mail WHERE list = $1 AND recipient = $2 \
                         RETURNING seq, sender, body, sent_at",
                        &[&self.list_id, &name],
                    )
                    .await?;
                let mut out = Vec::with_capacity(rows.len());
                for row in rows {
                    let seq: i64 = row.try_get(0)?;
                    out.push((
                        seq,
                        MailMessage {
                            from: row.try_get(1)?,
                            to: name.clone(),
                            text: row.try_get(2)?,
                            at: row.try_get::<_, i64>(3)? as u64,
                        },
                    ));
                }
                out.sort_by_key(|(seq, _)| *seq);
                Ok::<_, Fail>(out.into_iter().map(|(_, m)| m).collect())
            }
            .await
        })
    }

    /// Gives back every unfinished task `owner` holds, noting `why` in
    /// their metadata (`releasedFrom`, `releaseNote`).
    pub async fn release_with_note(
        &self,
        owner: &str,
        why: &str,
    ) -> Result<Vec<u64>, TaskListError> {
        let owner = super::ops::require_owner(owner)?;
        let why = why.to_string();
        in_tx!(self, |tx| {
            self.release_in(&tx, &owner, Some(&why)).await
        })
    }
}
