//! One task-list interface over both backends: the file store (the
//! default) and PostgreSQL, chosen by `task_list_url` /
//! `KAJI_TASK_LIST_URL`.
//!
//! Must never sanitise a URL into a file list name, or print a password.

use std::path::Path;

use super::pg::{PgTaskList, PgUrl, is_url};
use super::{
    DEFAULT_LIST_ID, ListSnapshot, ListTask, ListTaskPatch, NewListTask, TaskListError,
    TaskListStore, UpdateOutcome,
};

/// The list environment variable (`KAJI_TASK_LIST_ID`).
pub const TASK_LIST_ID_ENV: &str = "KAJI_TASK_LIST_ID";

/// A task list on either backend. Methods are async; file operations run
/// on the blocking pool.
#[derive(Debug, Clone)]
pub enum TaskList {
    /// Files under `$KAJI_HOME/tasks/<id>/`.
    Files(TaskListStore),
    /// A PostgreSQL database.
    Pg(PgTaskList),
}

/// Where a list lives, resolved from flags, settings and the environment.
#[derive(Debug, Clone)]
pub enum ListTarget {
    /// A file list with this (raw) id.
    Files(String),
    /// A database list.
    Pg(Box<PgUrl>, String),
}

/// Resolves the backend and list name. `list_flag` is `--list` /
/// `--task-list`; `url_setting` is `task_list_url` (the caller reads
/// `KAJI_TASK_LIST_URL` into it when the setting is unset); `env_list` is
/// `KAJI_TASK_LIST_ID`. A `list_flag` containing `://` is a URL and must
/// carry `?list=NAME`; a URL from the setting takes its name from, in
/// order, `list_flag`, `env_list`, `?list=`, then `default`. A URL without
/// a usable list name (none, or one that sanitises to nothing) is
/// [`TaskListError::BadUrl`].
pub fn resolve_target(
    list_flag: Option<&str>,
    env_list: Option<&str>,
    url_setting: Option<&str>,
    default: &str,
) -> Result<ListTarget, TaskListError> {
    let (url, flag_list) = match list_flag {
        Some(v) if is_url(v) => (Some(v), None),
        other => (url_setting.filter(|u| !u.trim().is_empty()), other),
    };
    let Some(url) = url else {
        let id = flag_list.or(env_list).unwrap_or(default);
        return Ok(ListTarget::Files(id.to_string()));
    };
    let parsed = PgUrl::parse(url)?;
    let url_from_flag = list_flag.is_some_and(is_url);
    // A URL given in place of a list name must name its list; one from the
    // setting falls back to the environment and the default.
    let name = if url_from_flag {
        parsed.list.clone()
    } else {
        flag_list
            .or(env_list)
            .map(str::to_string)
            .or_else(|| parsed.list.clone())
            .or_else(|| (!default.is_empty()).then(|| default.to_string()))
    };
    let problem = match &name {
        None => Some(
            "no list name: a URL given to --list or --task-list must end in ?list=NAME".to_string(),
        ),
        Some(n) => super::sanitize_list_id(n).err().map(|e| e.to_string()),
    };
    match (problem, name) {
        (None, Some(name)) => Ok(ListTarget::Pg(Box::new(parsed), name)),
        (problem, _) => Err(TaskListError::BadUrl {
            url: kaji_protocol::redact::redact_url_passwords(url),
            problem: problem.unwrap_or_default(),
        }),
    }
}

macro_rules! both {
    ($self:expr, $s:ident => $files:expr, $p:ident => $pg:expr) => {
        match $self {
            TaskList::Files($s) => {
                let $s = $s.clone();
                tokio::task::spawn_blocking(move || $files)
                    .await
                    .map_err(|e| {
                        TaskListError::InvalidInput(format!("task-list worker failed: {e}"))
                    })?
            }
            TaskList::Pg($p) => $pg.await,
        }
    };
}

impl TaskList {
    /// Opens (creating if missing) the list `target` names.
    pub async fn open(kaji_home: &Path, target: &ListTarget) -> Result<Self, TaskListError> {
        match target {
            ListTarget::Files(id) => Ok(Self::Files(TaskListStore::open(kaji_home, id)?)),
            ListTarget::Pg(url, id) => Ok(Self::Pg(PgTaskList::open(url, id).await?)),
        }
    }

    /// Opens the list `target` names; a missing list is `ListNotFound`.
    pub async fn open_existing(
        kaji_home: &Path,
        target: &ListTarget,
    ) -> Result<Self, TaskListError> {
        match target {
            ListTarget::Files(id) => Ok(Self::Files(TaskListStore::open_existing(kaji_home, id)?)),
            ListTarget::Pg(url, id) => Ok(Self::Pg(PgTaskList::open_existing(url, id).await?)),
        }
    }

    /// Removes a file list's directory when nothing was ever written to
    /// it (see [`TaskListStore::remove_if_empty`]); a database list stays.
    pub fn remove_if_empty(&self) {
        if let Self::Files(store) = self {
            store.remove_if_empty();
        }
    }

    /// The default list of `kaji tasks`.
    pub fn default_id() -> &'static str {
        DEFAULT_LIST_ID
    }

    /// The (sanitised) list id.
    pub fn list_id(&self) -> &str {
        match self {
            Self::Files(s) => s.list_id(),
            Self::Pg(p) => p.list_id(),
        }
    }

    /// See [`TaskListStore::highwatermark`].
    pub async fn highwatermark(&self) -> Result<u64, TaskListError> {
        both!(self, s => s.highwatermark(), p => p.highwatermark())
    }
    /// See [`TaskListStore::get`].
    pub async fn get(&self, id: u64) -> Result<ListTask, TaskListError> {
        both!(self, s => s.get(id), p => p.get(id))
    }
    /// See [`TaskListStore::list`].
    pub async fn list(&self) -> Result<ListSnapshot, TaskListError> {
        both!(self, s => s.list(), p => p.list())
    }
    /// See [`TaskListStore::available`].
    pub async fn available(&self) -> Result<Vec<ListTask>, TaskListError> {
        both!(self, s => s.available(), p => p.available())
    }
    /// See [`TaskListStore::create`].
    pub async fn create(&self, new: NewListTask) -> Result<ListTask, TaskListError> {
        both!(self, s => s.create(new), p => p.create(new))
    }
    /// See [`TaskListStore::update`].
    pub async fn update(
        &self,
        id: u64,
        patch: ListTaskPatch,
    ) -> Result<UpdateOutcome, TaskListError> {
        both!(self, s => s.update(id, patch), p => p.update(id, patch))
    }
    /// See [`TaskListStore::delete`].
    pub async fn delete(&self, id: u64) -> Result<ListTask, TaskListError> {
        both!(self, s => s.delete(id), p => p.delete(id))
    }
    /// See [`TaskListStore::reset`].
    pub async fn reset(&self) -> Result<Vec<u64>, TaskListError> {
        both!(self, s => s.reset(), p => p.reset())
    }
    /// See [`TaskListStore::claim`].
    pub async fn claim(&self, id: u64, owner: &str) -> Result<ListTask, TaskListError> {
        let owner = owner.to_string();
        both!(self, s => s.claim(id, &owner), p => p.claim(id, &owner))
    }
    /// See [`TaskListStore::claim_next`].
    pub async fn claim_next(&self, owner: &str) -> Result<Option<ListTask>, TaskListError> {
        let owner = owner.to_string();
        both!(self, s => s.claim_next(&owner), p => p.claim_next(&owner))
    }
    /// See [`TaskListStore::release`].
    pub async fn release(&self, owner: &str) -> Result<Vec<u64>, TaskListError> {
        let owner = owner.to_string();
        both!(self, s => s.release(&owner), p => p.release(&owner))
    }
}

/// The tasks of an exported list made consistent for import: edges to
/// tasks not in the export are dropped, `blockedBy` is rebuilt from
/// `blocks` (so both sides agree), and a cycle is refused.
pub fn normalize_import(snapshot: &ListSnapshot) -> Result<ListSnapshot, TaskListError> {
    let mut tasks = snapshot.tasks.clone();
    tasks.sort_by_key(|t| t.id);
    if tasks.windows(2).any(|w| w[0].id == w[1].id) || tasks.iter().any(|t| t.id == 0) {
        return Err(TaskListError::InvalidInput(
            "the export holds a task id twice, or id 0".to_string(),
        ));
    }
    let ids: std::collections::BTreeSet<u64> = tasks.iter().map(|t| t.id).collect();
    let mut graph = super::graph::BlocksGraph::default();
    let mut edges = Vec::new();
    for t in &tasks {
        super::model::validate_subject(&t.subject)?;
        for &b in t.blocks.iter().chain(&t.blocked_by) {
            let (blocker, blocked) = if t.blocks.contains(&b) {
                (t.id, b)
            } else {
                (b, t.id)
            };
            if ids.contains(&b) && !edges.contains(&(blocker, blocked)) {
                if let Some(cycle) = graph.cycle_if_added(blocker, blocked) {
                    return Err(TaskListError::Cycle { cycle });
                }
                graph.add(blocker, blocked);
                edges.push((blocker, blocked));
            }
        }
    }
    for t in &mut tasks {
        t.blocks = edges.iter().filter(|e| e.0 == t.id).map(|e| e.1).collect();
        t.blocked_by = edges.iter().filter(|e| e.1 == t.id).map(|e| e.0).collect();
    }
    let highwatermark = snapshot.highwatermark.max(tasks.last().map_or(0, |t| t.id));
    Ok(ListSnapshot {
        tasks,
        errors: Vec::new(),
        highwatermark,
    })
}

impl TaskList {
    /// Puts an exported list into this (empty) list, ids and all.
    pub async fn import(&self, snapshot: &ListSnapshot) -> Result<usize, TaskListError> {
        let snapshot = normalize_import(snapshot)?;
        both!(self, s => s.import(&snapshot), p => p.import(&snapshot))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_list_name_comes_from_flag_env_url_then_default() {
        let url = "postgres://u:pw@h:1/db?list=fromurl";
        let name = |flag, env, setting| match resolve_target(flag, env, setting, "default") {
            Ok(ListTarget::Pg(_, name)) => name,
            Ok(ListTarget::Files(id)) => format!("files:{id}"),
            Err(e) => format!("error:{e}"),
        };
        assert_eq!(name(Some("f"), Some("e"), Some(url)), "f");
        assert_eq!(name(None, Some("e"), Some(url)), "e");
        assert_eq!(name(None, None, Some(url)), "fromurl");
        assert_eq!(name(None, None, Some("postgres://h/db")), "default");
        assert_eq!(name(Some(url), Some("e"), None), "fromurl");
        assert_eq!(name(Some("a/b"), None, None), "files:a/b");
        let err = name(Some("postgres://u:pw@h/db"), None, None);
        assert!(
            err.starts_with("error:") && err.contains("no list name") && !err.contains(":pw@"),
            "{err}"
        );
        let err = name(None, None, Some("postgres://h/db?list=%20"));
        assert!(err.starts_with("error:"), "{err}");
    }
}
