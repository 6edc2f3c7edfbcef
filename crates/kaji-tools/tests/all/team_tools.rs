//! `TaskClaim`, `SendMessage` and the completion notices, against a real
//! task list on disk.

use kaji_tasks::TaskListStore;
use kaji_tasks::list::NewListTask;
use kaji_tools::{ToolContext, ToolError, ToolOutput, builtin_tools};
use serde_json::{Value, json};

async fn call(ctx: &ToolContext, tool: &str, input: Value) -> Result<ToolOutput, ToolError> {
    let registry = builtin_tools();
    let tool = registry.get(tool).expect("registered");
    tool.call(input, ctx).await
}

fn ctx(dir: &std::path::Path, store: &TaskListStore, agent: &str) -> ToolContext {
    let mut ctx = ToolContext::new(dir);
    ctx.services_mut().task_list = Some(kaji_tasks::list::TaskList::Files(store.clone()));
    ctx.agent = agent.to_string();
    ctx.owner = agent.to_string();
    ctx.role = kaji_tools::AgentRole::Teammate;
    ctx
}

fn new_task(subject: &str, blocked_by: &[u64]) -> NewListTask {
    NewListTask {
        subject: subject.to_string(),
        blocked_by: blocked_by.to_vec(),
        ..NewListTask::default()
    }
}

#[tokio::test]
async fn claims_go_through_the_store_with_the_agent_as_owner() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = TaskListStore::open(dir.path(), "team").expect("store");
    let first = store.create(new_task("build", &[])).expect("create");
    let second = store.create(new_task("test", &[first.id])).expect("create");
    let alice = ctx(dir.path(), &store, "alice");
    let bob = ctx(dir.path(), &store, "bob");

    let claimed = call(&alice, "TaskClaim", json!({})).await.expect("claim");
    assert_eq!(claimed.data.as_ref().expect("data")["claimed"], first.id);
    assert_eq!(
        store.get(first.id).expect("get").owner.as_deref(),
        Some("alice")
    );
    // Taken, and the other one is blocked: nothing for bob.
    let none = call(&bob, "TaskClaim", json!({})).await.expect("claim");
    assert!(
        none.content.contains("No task is available"),
        "{}",
        none.content
    );
    let err = call(&bob, "TaskClaim", json!({"taskId": first.id.to_string()}))
        .await
        .expect_err("already claimed");
    assert!(err.to_string().contains("alice"), "{err}");
    let err = call(&bob, "TaskClaim", json!({"taskId": second.id.to_string()}))
        .await
        .expect_err("blocked");
    assert!(err.to_string().contains("block"), "{err}");

    // bob owns the blocked task by assignment; alice completes the blocker.
    call(
        &bob,
        "TaskUpdate",
        json!({"taskId": second.id.to_string(), "owner": "bob"}),
    )
    .await
    .expect("assign");
    call(
        &alice,
        "TaskUpdate",
        json!({"taskId": first.id.to_string(), "status": "completed"}),
    )
    .await
    .expect("complete");
    let to_lead = store.take_messages("main").expect("take");
    assert_eq!(to_lead.len(), 1, "{to_lead:?}");
    assert!(
        to_lead[0].text.contains("completed by alice"),
        "{:?}",
        to_lead[0]
    );
    let to_bob = store.take_messages("bob").expect("take");
    assert_eq!(to_bob.len(), 1, "{to_bob:?}");
    assert!(
        to_bob[0]
            .text
            .contains(&format!("unblocked #{}", second.id))
    );
}

#[tokio::test]
async fn messages_wait_in_the_mailbox_for_their_recipient() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = TaskListStore::open(dir.path(), "team").expect("store");
    let alice = ctx(dir.path(), &store, "alice");
    call(
        &alice,
        "SendMessage",
        json!({"to": "lead", "message": "I need the API key name"}),
    )
    .await
    .expect("send");
    let got = store.take_messages("main").expect("take");
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].from, "alice");
    assert_eq!(
        got[0].to_prompt_text(),
        "[message from alice] I need the API key name"
    );
    let err = call(&alice, "SendMessage", json!({"to": " ", "message": "x"}))
        .await
        .expect_err("no recipient");
    assert!(err.to_string().contains("to is empty"), "{err}");
}

#[tokio::test]
async fn a_teammate_never_takes_over_another_owners_task() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = TaskListStore::open(dir.path(), "team").expect("store");
    let held = store
        .create(new_task("held by alice", &[]))
        .expect("create");
    let free = store.create(new_task("nobody's", &[])).expect("create");
    store.claim(held.id, "alice").expect("claim");
    let bob = ctx(dir.path(), &store, "bob");
    let id = held.id.to_string();
    for input in [
        json!({"taskId": id, "status": "deleted"}),
        json!({"taskId": id, "owner": "bob"}),
        json!({"taskId": id, "owner": ""}),
    ] {
        let err = call(&bob, "TaskUpdate", input.clone())
            .await
            .expect_err("refused");
        assert!(matches!(err, ToolError::Refused(_)), "{input}: {err}");
        assert!(err.to_string().contains("held by alice"), "{err}");
    }
    let after = store.get(held.id).expect("still there");
    assert_eq!(after.owner.as_deref(), Some("alice"));
    // A task nobody holds, or one's own, may be given to anyone.
    call(
        &bob,
        "TaskUpdate",
        json!({"taskId": free.id.to_string(), "owner": "bob"}),
    )
    .await
    .expect("take a free task");
    call(
        &bob,
        "TaskUpdate",
        json!({"taskId": free.id.to_string(), "owner": "carol"}),
    )
    .await
    .expect("hand one's own task on");
    // Other changes to alice's task (its metadata, say) are not a takeover.
    call(
        &bob,
        "TaskUpdate",
        json!({"taskId": id, "metadata": {"seen": true}}),
    )
    .await
    .expect("metadata");
}

#[tokio::test]
async fn the_main_agent_taking_over_is_an_access_that_asks() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = TaskListStore::open(dir.path(), "team").expect("store");
    let held = store
        .create(new_task("held by alice", &[]))
        .expect("create");
    let mine = store.create(new_task("mine", &[])).expect("create");
    store.claim(held.id, "alice").expect("claim");
    let mut lead = ToolContext::new(dir.path());
    lead.services_mut().task_list = Some(kaji_tasks::list::TaskList::Files(store.clone()));
    lead.owner = "lead-session".to_string();
    store.claim(mine.id, "lead-session").expect("claim");
    let registry = builtin_tools();
    let tool = registry.get("TaskUpdate").expect("registered");
    let access = tool
        .access_checked(
            &json!({"taskId": held.id.to_string(), "status": "deleted"}),
            &lead,
        )
        .await;
    assert_eq!(
        access,
        kaji_tools::ToolAccess::TakeOver {
            task_id: held.id,
            holder: "alice".to_string()
        }
    );
    let access = tool
        .access_checked(
            &json!({"taskId": mine.id.to_string(), "status": "deleted"}),
            &lead,
        )
        .await;
    assert_eq!(access, kaji_tools::ToolAccess::SessionState);
}
