//! The team's notices through the durable mailbox beside the task list:
//! who the lead is (`LEAD`) and the notice that a task was completed,
//! posted by whichever tool or worker completed it. Below the task-list
//! and team tools, which both post it; it never edits a task and never
//! delivers a message itself.

use kaji_tasks::list::{ListSnapshot, TaskList, UpdateOutcome};

/// The name the lead (the session's main agent) is addressed by.
pub const LEAD: &str = "main";

/// Tells the lead and the owners of the tasks it unblocked that a task was
/// completed (by `by`). Failures to post are not the completer's problem:
/// they are ignored.
pub async fn notify_completion(
    store: &TaskList,
    by: &str,
    outcome: &UpdateOutcome,
    snapshot: &ListSnapshot,
) {
    let task = &outcome.task;
    let mut text = format!(
        "Task #{} ({}) was completed by {by}.",
        task.id, task.subject
    );
    if !outcome.unblocked.is_empty() {
        let ids: Vec<String> = outcome.unblocked.iter().map(|i| format!("#{i}")).collect();
        text.push_str(&format!(" It unblocked {}.", ids.join(", ")));
    }
    let mut recipients: Vec<String> = Vec::new();
    if by != LEAD {
        recipients.push(LEAD.to_string());
    }
    for id in &outcome.unblocked {
        if let Some(owner) = snapshot
            .tasks
            .iter()
            .find(|t| t.id == *id)
            .and_then(|t| t.owner.clone())
            && owner != by
            && !recipients.contains(&owner)
        {
            recipients.push(owner);
        }
    }
    for to in recipients {
        let _ = store.post_message("kaji", &to, &text).await;
    }
}
