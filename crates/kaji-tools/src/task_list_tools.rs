//! `TaskCreate`, `TaskGet`, `TaskList` and `TaskUpdate`: the shared task
//! list (kaji-tasks' [`TaskList`]: the file store or PostgreSQL) offered
//! to the model.
//!
//! The tools only translate between the model's JSON and the list; every
//! rule (ids, dependencies, locking) lives in the backend. They never print
//! or ask: each change returns the whole list as `{"task_list": [...]}` in
//! [`ToolOutput::data`] for the core to show the user as a `say`. Without
//! a task list in the [`ToolContext`] they refuse.

use std::sync::Arc;

use async_trait::async_trait;
use kaji_protocol::{StateUpdate, TaskListItem, ToolSpec};
use kaji_tasks::list::{
    ListSnapshot, ListTask, ListTaskFilter, ListTaskPatch, ListTaskStatus, NewListTask, TaskList,
    TaskListError, TaskListErrorKind,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::{
    AgentRole, Tool, ToolAccess, ToolContext, ToolError, ToolOutput, ToolRegistry, parse_input,
};

/// Adds `TaskCreate`, `TaskGet`, `TaskList` and `TaskUpdate` to `registry`.
pub(crate) fn register(registry: &mut ToolRegistry) {
    registry.register(Arc::new(TaskCreateTool));
    registry.register(Arc::new(TaskGetTool));
    registry.register(Arc::new(TaskListTool));
    registry.register(Arc::new(TaskUpdateTool));
}

const TASK_CREATE: &str = "TaskCreate";
const TASK_GET: &str = "TaskGet";
const TASK_LIST: &str = "TaskList";
const TASK_UPDATE: &str = "TaskUpdate";

/// A task id as the model sends it: a string like `"3"` (as in the schema)
/// or, leniently, a number.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum TaskIdInput {
    Number(u64),
    Text(String),
}

impl TaskIdInput {
    pub(crate) fn parse(&self, tool: &str, field: &str) -> Result<u64, ToolError> {
        match self {
            Self::Number(id) => Ok(*id),
            Self::Text(text) => {
                text.trim()
                    .trim_start_matches('#')
                    .parse()
                    .map_err(|_| ToolError::InvalidInput {
                        tool: tool.to_string(),
                        message: format!(
                            "{field} must be a task id such as \"3\" (see TaskList), not {text:?}"
                        ),
                    })
            }
        }
    }
}

fn parse_ids(
    tool: &str,
    field: &str,
    ids: &Option<Vec<TaskIdInput>>,
) -> Result<Vec<u64>, ToolError> {
    ids.iter()
        .flatten()
        .map(|id| id.parse(tool, field))
        .collect()
}

/// The store of the session, or a refusal the model can understand.
pub(crate) fn store_of(ctx: &ToolContext) -> Result<TaskList, ToolError> {
    ctx.services.task_list.clone().ok_or_else(|| {
        ToolError::Refused(
            "this session has no task list, so the task tools are unavailable; keep track of the \
             work in your replies instead"
                .to_string(),
        )
    })
}

/// Runs task-list work (on either backend), its error as a tool error.
pub(crate) async fn blocking<T>(
    work: impl std::future::Future<Output = Result<T, TaskListError>>,
) -> Result<T, ToolError> {
    work.await.map_err(tool_error)
}

fn tool_error(e: TaskListError) -> ToolError {
    match e {
        TaskListError::Io { path, source } => ToolError::Io { path, source },
        other => {
            let hint = match other.kind() {
                TaskListErrorKind::NotFound => " Use TaskList to see the existing task ids.",
                _ => "",
            };
            ToolError::Refused(format!("{other}.{hint}"))
        }
    }
}

/// The whole list as the front ends show it after a change.
pub fn summary(snapshot: &ListSnapshot) -> StateUpdate {
    let tasks = snapshot
        .tasks
        .iter()
        .map(|t| TaskListItem {
            id: t.id,
            subject: t.subject.clone(),
            status: t.status.as_str().to_string(),
            owner: t.owner.clone(),
            active_form: t.active_form.clone(),
            blocked_by: snapshot.open_blockers(t),
        })
        .collect();
    StateUpdate::TaskList { tasks }
}

/// `#1 [pending] Subject (owner: x) — blocked by #2, #3`
fn summary_line(snapshot: &ListSnapshot, task: &ListTask) -> String {
    let mut line = format!("#{} [{}] {}", task.id, task.status, task.subject);
    if let Some(owner) = &task.owner {
        line.push_str(&format!(" (owner: {owner})"));
    }
    let open = snapshot.open_blockers(task);
    if !open.is_empty() {
        line.push_str(&format!(" — blocked by {}", id_list(&open)));
    }
    line
}

fn id_list(ids: &[u64]) -> String {
    ids.iter()
        .map(|id| format!("#{id}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The `TaskCreate` tool.
struct TaskCreateTool;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct TaskCreateInput {
    /// Short imperative title of the task.
    subject: String,
    /// What needs to be done, with enough context for someone else to do it.
    // Asked for, but a call without it still creates the task.
    #[schemars(required, with = "String")]
    description: Option<String>,
    /// Present-continuous form shown while the task is in progress, e.g. "Running the tests".
    #[serde(default)]
    active_form: Option<String>,
    /// Extra key/value context to store with the task.
    #[serde(default)]
    metadata: Option<Map<String, Value>>,
}

#[async_trait]
impl Tool for TaskCreateTool {
    fn hook_event(&self, _input: &Value, output: &ToolOutput) -> Option<(&'static str, Value)> {
        output.data.clone().map(|d| ("TaskCreated", d))
    }

    fn name(&self) -> &'static str {
        TASK_CREATE
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: TASK_CREATE.to_string(),
            description: "Adds a task to the shared task list. It starts as pending with no owner; \
creating it starts no work. Use the task list to plan work that needs several steps: split a complex \
request into tasks before you begin, record each item when the user hands you a list of things to do, \
and add tasks for follow-up work you discover. Do not bother for a single trivial step. Give subject as a \
short imperative title (\"Fix the login timeout\"), put the details and what counts as done in \
description, and give activeForm as the present-continuous phrase shown while the task is being worked \
on (\"Fixing the login timeout\"). Dependencies are set afterwards with TaskUpdate. Returns the new \
task's id."
                .to_string(),
            input_schema: crate::schema::input_schema::<TaskCreateInput>(),
        }
    }

    fn title(&self, input: &Value) -> String {
        crate::title_with(TASK_CREATE, input, "subject")
    }

    fn is_read_only(&self) -> bool {
        false
    }

    fn access(&self, _input: &Value, _ctx: &ToolContext) -> ToolAccess {
        ToolAccess::SessionState
    }

    async fn call(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let input: TaskCreateInput = parse_input(TASK_CREATE, input)?;
        let store = store_of(ctx)?;
        let new = NewListTask {
            subject: input.subject,
            description: input.description.unwrap_or_default(),
            active_form: input.active_form.filter(|f| !f.trim().is_empty()),
            metadata: input.metadata.unwrap_or_default(),
            ..NewListTask::default()
        };
        let (task, snapshot) = blocking(async {
            let task = store.create(new).await?;
            Ok((task, store.list().await?))
        })
        .await?;
        Ok(ToolOutput {
            content: format!("Task #{} created: {}", task.id, task.subject),
            update: Some(summary(&snapshot)),
            data: Some(hook_fields(&task)),
            ..ToolOutput::default()
        })
    }
}

/// The `TaskGet` tool.
struct TaskGetTool;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct TaskGetInput {
    /// Id of the task, e.g. "3".
    #[schemars(with = "String")]
    task_id: TaskIdInput,
}

#[async_trait]
impl Tool for TaskGetTool {
    fn name(&self) -> &'static str {
        TASK_GET
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: TASK_GET.to_string(),
            description: "Returns everything about one task: subject, full description, status, owner, \
active form, metadata, the tasks it blocks, and the tasks blocking it with those still open marked. Read \
a task with TaskGet before you start on it, to get its full requirements, and before you update it, so you \
work from its latest state: other agents may have changed it since you last looked."
                .to_string(),
            input_schema: crate::schema::input_schema::<TaskGetInput>(),
        }
    }

    fn title(&self, input: &Value) -> String {
        crate::title_with(TASK_GET, input, "taskId")
    }

    fn is_read_only(&self) -> bool {
        true
    }

    async fn call(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let input: TaskGetInput = parse_input(TASK_GET, input)?;
        let id = input.task_id.parse(TASK_GET, "taskId")?;
        let store = store_of(ctx)?;
        let (task, snapshot) = blocking(async {
            let task = store.get(id).await?;
            Ok((task, store.list().await?))
        })
        .await?;
        Ok(ToolOutput {
            content: describe(&snapshot, &task),
            data: Some(json!({ "task": task_json(&snapshot, &task) })),
            ..ToolOutput::default()
        })
    }
}

fn task_json(snapshot: &ListSnapshot, task: &ListTask) -> Value {
    let mut value = serde_json::to_value(task).unwrap_or(Value::Null);
    if let Value::Object(map) = &mut value {
        map.insert(
            "openBlockers".to_string(),
            json!(snapshot.open_blockers(task)),
        );
        map.insert(
            "wouldUnblock".to_string(),
            json!(snapshot.would_unblock(task)),
        );
    }
    value
}

/// The full text of one task for the model.
fn describe(snapshot: &ListSnapshot, task: &ListTask) -> String {
    let mut out = format!(
        "Task #{}: {}\nStatus: {}\n",
        task.id, task.subject, task.status
    );
    out.push_str(&format!(
        "Owner: {}\n",
        task.owner.as_deref().unwrap_or("none")
    ));
    if let Some(form) = &task.active_form {
        out.push_str(&format!("Active form: {form}\n"));
    }
    let open = snapshot.open_blockers(task);
    if !task.blocked_by.is_empty() {
        let all: Vec<u64> = task.blocked_by.iter().copied().collect();
        out.push_str(&format!("Blocked by: {}", id_list(&all)));
        if open.is_empty() {
            out.push_str(" (all completed)\n");
        } else {
            out.push_str(&format!(" (still open: {})\n", id_list(&open)));
        }
    }
    if !task.blocks.is_empty() {
        let all: Vec<u64> = task.blocks.iter().copied().collect();
        out.push_str(&format!("Blocks: {}\n", id_list(&all)));
    }
    if task.status != ListTaskStatus::Completed {
        let freed = snapshot.would_unblock(task);
        if !freed.is_empty() {
            out.push_str(&format!("Completing it unblocks: {}\n", id_list(&freed)));
        }
    }
    if !task.metadata.is_empty() {
        out.push_str(&format!(
            "Metadata: {}\n",
            Value::Object(task.metadata.clone())
        ));
    }
    out.push_str("Description:\n");
    out.push_str(if task.description.is_empty() {
        "(none)"
    } else {
        &task.description
    });
    out
}

/// The `TaskList` tool.
struct TaskListTool;

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct TaskListInput {
    /// Only tasks in this status.
    #[serde(default)]
    #[schemars(extend("enum" = ["pending", "in_progress", "completed"]))]
    status: Option<String>,
    /// Only tasks held by this owner; an empty string lists the tasks nobody holds.
    #[serde(default)]
    owner: Option<String>,
    /// Only tasks you could claim now: pending, no owner, nothing blocking them.
    available: Option<bool>,
    /// Only tasks still waiting for an open blocker.
    blocked: Option<bool>,
}

impl TaskListInput {
    fn filter(self) -> Result<ListTaskFilter, ToolError> {
        let status = self
            .status
            .map(|s| s.trim().parse::<ListTaskStatus>())
            .transpose()
            .map_err(|e| ToolError::InvalidInput {
                tool: TASK_LIST.to_string(),
                message: format!("status: {e}"),
            })?;
        Ok(ListTaskFilter {
            status,
            owner: self.owner,
            available: self.available.unwrap_or(false),
            blocked: self.blocked.unwrap_or(false),
        })
    }
}

#[async_trait]
impl Tool for TaskListTool {
    fn name(&self) -> &'static str {
        TASK_LIST
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: TASK_LIST.to_string(),
            description: "Lists every task in the shared task list, one line each: id, status, owner, \
subject and the blockers that are still open. Use it to see what is left to do, to choose your next task \
(prefer the lowest id that is pending, has no owner and nothing blocking it: `available: true` lists just \
those), and to check progress after finishing a task. The optional filters narrow the list; every filter \
given must hold. Use TaskGet for a task's full description."
                .to_string(),
            input_schema: crate::schema::input_schema::<TaskListInput>(),
        }
    }

    fn is_read_only(&self) -> bool {
        true
    }

    async fn call(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let input = if input.is_null() { json!({}) } else { input };
        let filter = parse_input::<TaskListInput>(TASK_LIST, input)?.filter()?;
        let store = store_of(ctx)?;
        let snapshot = blocking(store.list()).await?;
        let mut lines: Vec<String> = snapshot
            .filtered(&filter)
            .into_iter()
            .map(|t| summary_line(&snapshot, t))
            .collect();
        if lines.is_empty() && snapshot.tasks.is_empty() {
            lines.push("The task list is empty.".to_string());
        } else if lines.is_empty() {
            lines.push(format!(
                "No task matches the filter ({} tasks in the list).",
                snapshot.tasks.len()
            ));
        }
        for e in &snapshot.errors {
            lines.push(format!("(unreadable: {}: {})", e.path.display(), e.problem));
        }
        Ok(ToolOutput {
            content: lines.join("\n"),
            update: Some(summary(&snapshot)),
            ..ToolOutput::default()
        })
    }
}

/// The `TaskUpdate` tool.
struct TaskUpdateTool;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct TaskUpdateInput {
    /// Id of the task to change, e.g. "3".
    #[schemars(with = "String")]
    task_id: TaskIdInput,
    /// New status; "deleted" deletes the task.
    #[serde(default)]
    #[schemars(extend("enum" = ["pending", "in_progress", "completed", "deleted"]))]
    status: Option<String>,
    /// New imperative title.
    #[serde(default)]
    subject: Option<String>,
    /// New full description.
    #[serde(default)]
    description: Option<String>,
    /// New present-continuous form shown while in progress.
    #[serde(default)]
    active_form: Option<String>,
    /// New owner; an empty string clears it.
    #[serde(default)]
    owner: Option<String>,
    /// Keys to merge into the metadata; a null value removes the key.
    #[serde(default)]
    metadata: Option<Map<String, Value>>,
    /// Ids of tasks that cannot start until this one is completed.
    #[serde(default)]
    #[schemars(with = "Option<Vec<String>>")]
    add_blocks: Option<Vec<TaskIdInput>>,
    /// Ids of tasks that must be completed before this one can start.
    #[serde(default)]
    #[schemars(with = "Option<Vec<String>>")]
    add_blocked_by: Option<Vec<TaskIdInput>>,
    /// Ids of tasks this one should no longer block.
    #[serde(default)]
    #[schemars(with = "Option<Vec<String>>")]
    remove_blocks: Option<Vec<TaskIdInput>>,
    /// Ids of tasks this one should no longer wait for.
    #[serde(default)]
    #[schemars(with = "Option<Vec<String>>")]
    remove_blocked_by: Option<Vec<TaskIdInput>>,
}

#[async_trait]
impl Tool for TaskUpdateTool {
    fn hook_event(&self, input: &Value, output: &ToolOutput) -> Option<(&'static str, Value)> {
        let completing = input.get("status").and_then(Value::as_str) == Some("completed");
        output
            .data
            .clone()
            .filter(|_| completing)
            .map(|d| ("TaskCompleted", d))
    }

    fn name(&self) -> &'static str {
        TASK_UPDATE
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: TASK_UPDATE.to_string(),
            description: "Changes one task of the shared task list. Set status to in_progress before you \
start working on a task, and to completed only when it is really done: the work is finished and checked, \
tests pass, nothing is half-done. If you are stuck or only part of the way there, keep it in_progress and \
create a task for what remains. Set owner to take a task or hand it to someone (an empty string clears \
it). metadata keys are merged into the task's metadata; a null value removes that key. addBlocks, \
addBlockedBy, removeBlocks and removeBlockedBy change dependencies: both tasks are updated together, and \
links to missing tasks or links that would create a cycle are refused. status \"deleted\" removes the task \
for good. Read the task with TaskGet first so you do not undo someone else's change. The result says \
which tasks a completion unblocked."
                .to_string(),
            input_schema: crate::schema::input_schema::<TaskUpdateInput>(),
        }
    }

    fn title(&self, input: &Value) -> String {
        crate::title_with(TASK_UPDATE, input, "taskId")
    }

    fn is_read_only(&self) -> bool {
        false
    }

    fn access(&self, _input: &Value, _ctx: &ToolContext) -> ToolAccess {
        ToolAccess::SessionState
    }

    async fn access_checked(&self, input: &Value, ctx: &ToolContext) -> ToolAccess {
        let Ok(parsed) = serde_json::from_value::<TaskUpdateInput>(input.clone()) else {
            return ToolAccess::SessionState;
        };
        // Only the main agent may take over (after an ask); the others are
        // refused in `call`.
        if ctx.role == AgentRole::Main
            && let Some(takeover) = takeover(&parsed, ctx).await
        {
            return takeover;
        }
        shared_task(&parsed.task_id, ctx).await
    }

    async fn call(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let input: TaskUpdateInput = parse_input(TASK_UPDATE, input)?;
        let id = input.task_id.parse(TASK_UPDATE, "taskId")?;
        let store = store_of(ctx)?;
        if ctx.role != AgentRole::Main
            && let Some(ToolAccess::TakeOver { task_id, holder }) = takeover(&input, ctx).await
        {
            return Err(ToolError::Refused(format!(
                "task #{task_id} is held by {holder}: only its owner may delete it or change its owner \
                 (you are {}). Take available work with TaskClaim, or ask {holder} with SendMessage.",
                ctx.owner
            )));
        }
        if input.status.as_deref() == Some("deleted") {
            let (task, snapshot) = blocking(async {
                let task = store.delete(id).await?;
                Ok((task, store.list().await?))
            })
            .await?;
            return Ok(ToolOutput {
                content: format!("Task #{} deleted: {}", task.id, task.subject),
                update: Some(summary(&snapshot)),
                ..ToolOutput::default()
            });
        }
        let status = match input.status.as_deref() {
            None => None,
            Some(s) => Some(
                s.parse::<ListTaskStatus>()
                    .map_err(|_| ToolError::InvalidInput {
                        tool: TASK_UPDATE.to_string(),
                        message: format!(
                            "unknown status {s:?}; use pending, in_progress, completed or deleted"
                        ),
                    })?,
            ),
        };
        let patch = ListTaskPatch {
            subject: input.subject,
            description: input.description,
            active_form: input
                .active_form
                .map(|f| Some(f).filter(|f| !f.trim().is_empty())),
            owner: input
                .owner
                .map(|o| Some(o).filter(|o| !o.trim().is_empty())),
            status,
            metadata: input.metadata,
            add_blocks: parse_ids(TASK_UPDATE, "addBlocks", &input.add_blocks)?,
            add_blocked_by: parse_ids(TASK_UPDATE, "addBlockedBy", &input.add_blocked_by)?,
            remove_blocks: parse_ids(TASK_UPDATE, "removeBlocks", &input.remove_blocks)?,
            remove_blocked_by: parse_ids(TASK_UPDATE, "removeBlockedBy", &input.remove_blocked_by)?,
        };
        let changed = changed_fields(&patch);
        let completing = patch.status == Some(ListTaskStatus::Completed);
        let agent = ctx.agent.clone();
        let (outcome, snapshot) = blocking(async {
            let outcome = store.update(id, patch).await?;
            let snapshot = store.list().await?;
            if completing {
                crate::team_mail::notify_completion(&store, &agent, &outcome, &snapshot).await;
            }
            Ok((outcome, snapshot))
        })
        .await?;
        let mut content = if changed.is_empty() {
            format!("Task #{} unchanged: {}", id, outcome.task.subject)
        } else {
            format!(
                "Updated task #{} ({}): {}",
                id,
                changed.join(", "),
                summary_line(&snapshot, &outcome.task)
            )
        };
        if !outcome.unblocked.is_empty() {
            content.push_str(&format!(
                "\nCompleting it unblocked {}.",
                id_list(&outcome.unblocked)
            ));
        }
        Ok(ToolOutput {
            content,
            update: Some(summary(&snapshot)),
            data: Some(hook_fields(&outcome.task)),
            ..ToolOutput::default()
        })
    }
}

/// A task as Claude Code's TaskCreated and TaskCompleted hooks get it.
fn hook_fields(task: &ListTask) -> Value {
    json!({
        "task_id": task.id.to_string(),
        "task_subject": task.subject,
        "task_description": task.description,
    })
}

/// Whether `input` deletes a task another owner holds or changes such a
/// task's owner: the task's holder, as a [`ToolAccess::TakeOver`]. A task
/// with no owner, or the caller's own, may be given to anyone.
async fn takeover(input: &TaskUpdateInput, ctx: &ToolContext) -> Option<ToolAccess> {
    let deleting = input.status.as_deref() == Some("deleted");
    if !deleting && input.owner.is_none() {
        return None;
    }
    let id = input.task_id.parse(TASK_UPDATE, "taskId").ok()?;
    let task = ctx.services.task_list.as_ref()?.get(id).await.ok()?;
    let holder = task.owner.filter(|o| *o != ctx.owner)?;
    let new_owner = input
        .owner
        .as_deref()
        .map(str::trim)
        .filter(|o| !o.is_empty());
    if !deleting && new_owner == Some(holder.as_str()) {
        return None;
    }
    Some(ToolAccess::TakeOver {
        task_id: id,
        holder,
    })
}

/// [`ToolAccess::SharedTask`] when the task `id` names exists and the
/// caller does not hold it, else [`ToolAccess::SessionState`] (the
/// caller's own task; a missing one is refused by the call itself).
pub(crate) async fn shared_task(id: &TaskIdInput, ctx: &ToolContext) -> ToolAccess {
    let Ok(task_id) = id.parse(TASK_UPDATE, "taskId") else {
        return ToolAccess::SessionState;
    };
    let Some(list) = ctx.services.task_list.as_ref() else {
        return ToolAccess::SessionState;
    };
    match list.get(task_id).await {
        Ok(task) if task.owner.as_deref() != Some(ctx.owner.as_str()) => ToolAccess::SharedTask {
            task_id: Some(task_id),
        },
        _ => ToolAccess::SessionState,
    }
}

fn changed_fields(patch: &ListTaskPatch) -> Vec<&'static str> {
    let mut fields = Vec::new();
    let mut note = |set: bool, name: &'static str| {
        if set {
            fields.push(name);
        }
    };
    note(patch.status.is_some(), "status");
    note(patch.subject.is_some(), "subject");
    note(patch.description.is_some(), "description");
    note(patch.active_form.is_some(), "activeForm");
    note(patch.owner.is_some(), "owner");
    note(patch.metadata.is_some(), "metadata");
    note(patch.changes_edges(), "dependencies");
    fields
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(home: &std::path::Path) -> ToolContext {
        let mut ctx = ToolContext::new(home);
        ctx.services_mut().task_list = Some(TaskList::Files(
            kaji_tasks::TaskListStore::open(home, "tools").expect("open list"),
        ));
        ctx
    }

    async fn call(name: &str, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let registry = crate::builtin_tools();
        let tool = registry.get(name).expect("tool registered");
        tool.call(input, ctx).await
    }

    #[tokio::test]
    async fn plan_claim_complete_and_delete() {
        let home = tempfile::tempdir().expect("temp dir");
        let ctx = ctx(home.path());
        let out = call(
            TASK_CREATE,
            json!({"subject": "Write tests", "description": "d", "activeForm": "Writing tests"}),
            &ctx,
        )
        .await
        .expect("create");
        assert_eq!(out.content, "Task #1 created: Write tests");
        assert_eq!(
            serde_json::to_value(out.update.as_ref().expect("update")).unwrap()["tasks"][0]["status"],
            "pending"
        );
        call(
            TASK_CREATE,
            json!({"subject": "Ship", "description": ""}),
            &ctx,
        )
        .await
        .expect("create");

        let out = call(
            TASK_UPDATE,
            json!({"taskId": "2", "addBlockedBy": ["1"], "metadata": {"k": 1}}),
            &ctx,
        )
        .await
        .expect("edge");
        assert!(out.content.contains("blocked by #1"), "{}", out.content);
        let list = call(TASK_LIST, json!({}), &ctx).await.expect("list");
        assert_eq!(
            list.content,
            "#1 [pending] Write tests\n#2 [pending] Ship — blocked by #1"
        );

        let err = call(
            TASK_UPDATE,
            json!({"taskId": "1", "addBlockedBy": ["2"]}),
            &ctx,
        )
        .await
        .expect_err("cycle");
        assert!(
            err.to_string().contains("cycle #2 blocks #1 blocks #2"),
            "{err}"
        );

        let out = call(
            TASK_UPDATE,
            json!({"taskId": "1", "status": "completed", "owner": "me"}),
            &ctx,
        )
        .await
        .expect("complete");
        assert!(out.content.contains("unblocked #2"), "{}", out.content);
        let got = call(TASK_GET, json!({"taskId": "2"}), &ctx)
            .await
            .expect("get");
        assert!(
            got.content.contains("Blocked by: #1 (all completed)"),
            "{}",
            got.content
        );
        assert!(
            got.content.contains(r#"Metadata: {"k":1}"#),
            "{}",
            got.content
        );

        let out = call(
            TASK_UPDATE,
            json!({"taskId": "2", "status": "deleted"}),
            &ctx,
        )
        .await
        .expect("delete");
        assert_eq!(
            serde_json::to_value(out.update.expect("update")).unwrap()["tasks"]
                .as_array()
                .map(Vec::len),
            Some(1)
        );
        let err = call(TASK_GET, json!({"taskId": "2"}), &ctx)
            .await
            .expect_err("gone");
        assert!(err.to_string().contains("does not exist"), "{err}");
    }

    #[tokio::test]
    async fn bad_input_is_refused_clearly() {
        let home = tempfile::tempdir().expect("temp dir");
        let without = ToolContext::new(home.path());
        let err = call(TASK_LIST, json!({}), &without)
            .await
            .expect_err("no list");
        assert!(matches!(err, ToolError::Refused(_)), "{err}");

        let ctx = ctx(home.path());
        let err = call(TASK_GET, json!({"taskId": "abc"}), &ctx)
            .await
            .expect_err("bad id");
        assert!(
            err.to_string().contains("taskId must be a task id"),
            "{err}"
        );
        call(
            TASK_CREATE,
            json!({"subject": "a", "description": ""}),
            &ctx,
        )
        .await
        .expect("create");
        let err = call(TASK_UPDATE, json!({"taskId": "1", "status": "done"}), &ctx)
            .await
            .expect_err("bad status");
        assert!(err.to_string().contains("unknown status \"done\""), "{err}");
        let err = call(
            TASK_UPDATE,
            json!({"taskId": "1", "addBlocks": ["9"]}),
            &ctx,
        )
        .await
        .expect_err("missing edge target");
        assert!(err.to_string().contains("#9 does not exist"), "{err}");
        let err = call(
            TASK_CREATE,
            json!({"subject": " ", "description": ""}),
            &ctx,
        )
        .await
        .expect_err("empty subject");
        assert!(
            err.to_string().contains("subject must not be empty"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn list_filters_and_get_shows_what_completing_unblocks() {
        let home = tempfile::tempdir().expect("temp dir");
        let ctx = ctx(home.path());
        for subject in ["a", "b", "c"] {
            call(
                TASK_CREATE,
                json!({"subject": subject, "description": ""}),
                &ctx,
            )
            .await
            .expect("create");
        }
        call(
            TASK_UPDATE,
            json!({"taskId": "2", "addBlockedBy": ["1"]}),
            &ctx,
        )
        .await
        .expect("edge");
        call(TASK_UPDATE, json!({"taskId": "3", "owner": "bob"}), &ctx)
            .await
            .expect("owner");
        let list = |input: Value| {
            let ctx = ctx.clone();
            async move { call(TASK_LIST, input, &ctx).await }
        };
        let out = list(json!({"available": true})).await.expect("available");
        assert_eq!(out.content, "#1 [pending] a");
        let out = list(json!({"blocked": true})).await.expect("blocked");
        assert_eq!(out.content, "#2 [pending] b — blocked by #1");
        let out = list(json!({"owner": "bob"})).await.expect("owner");
        assert_eq!(out.content, "#3 [pending] c (owner: bob)");
        let out = list(json!({"status": "completed"})).await.expect("none");
        assert!(
            out.content.starts_with("No task matches"),
            "{}",
            out.content
        );
        let err = list(json!({"status": "done"}))
            .await
            .expect_err("bad status");
        assert!(err.to_string().contains("unknown status \"done\""), "{err}");
        let got = call(TASK_GET, json!({"taskId": "1"}), &ctx)
            .await
            .expect("get");
        assert!(
            got.content.contains("Completing it unblocks: #2"),
            "{}",
            got.content
        );
        assert_eq!(got.data.expect("data")["task"]["wouldUnblock"], json!([2]));
    }

    #[test]
    fn access_and_read_only() {
        let registry = crate::builtin_tools();
        let ctx = ToolContext::new(".");
        for (name, read_only) in [
            (TASK_CREATE, false),
            (TASK_GET, true),
            (TASK_LIST, true),
            (TASK_UPDATE, false),
        ] {
            let tool = registry.get(name).expect("registered");
            assert_eq!(tool.is_read_only(), read_only, "{name}");
            let expected = if read_only {
                ToolAccess::ReadOnly
            } else {
                ToolAccess::SessionState
            };
            assert_eq!(tool.access(&json!({}), &ctx), expected, "{name}");
        }
    }
}
