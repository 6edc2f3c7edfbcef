//! Helpers shared by the task list tests.

use std::path::Path;

/// A temporary `$KAJI_HOME` on tmpfs (`/dev/shm`) when there is one, else
/// in the default temporary directory.
///
/// For tests of the list's rules and locking, not of durability: files,
/// renames and locks are as real on tmpfs, but fsync costs nothing there,
/// which keeps many-operation tests fast on a busy disk.
pub fn fast_temp_home() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    if shm.is_dir()
        && let Ok(dir) = tempfile::tempdir_in(shm)
    {
        return dir;
    }
    tempfile::tempdir().expect("temp dir")
}

/// Which backend a test runs against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(dead_code)]
pub enum Backend {
    /// The file store under a temporary `$KAJI_HOME`.
    Files,
    /// A fresh list in the throwaway PostgreSQL of kaji-test-support.
    Pg,
}

/// A fresh list on one backend: its `$KAJI_HOME`, its name, and (for the
/// database) the URL that `task-list-worker` and kaji read from
/// `KAJI_TASK_LIST_URL`.
#[allow(dead_code)]
pub struct Fixture {
    pub backend: Backend,
    pub home: tempfile::TempDir,
    pub list: String,
    pub url: Option<String>,
}

#[allow(dead_code)]
impl Fixture {
    /// A fresh list named after `name` (unique per process and call).
    pub fn new(backend: Backend, name: &str, fast: bool) -> Self {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let home = if fast {
            fast_temp_home()
        } else {
            tempfile::tempdir().expect("temp dir")
        };
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let list = format!("{name}-{}-{n}", std::process::id());
        let url = match backend {
            Backend::Files => None,
            Backend::Pg => match kaji_test_support::pg::PgServer::shared() {
                Ok(server) => Some(server.url(&list)),
                Err(e) => panic!("the PostgreSQL fixture did not start: {e}"),
            },
        };
        Self {
            backend,
            home,
            list,
            url,
        }
    }

    /// Points a child at this list's backend.
    pub fn env(&self, cmd: &mut std::process::Command) {
        match &self.url {
            Some(url) => cmd.env(kaji_tasks::list::pg::TASK_LIST_URL_ENV, url),
            None => cmd.env_remove(kaji_tasks::list::pg::TASK_LIST_URL_ENV),
        };
    }

    /// The list (created if missing), with blocking calls.
    pub fn open(&self) -> Blocking {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let target = match &self.url {
            Some(url) => kaji_tasks::list::ListTarget::Pg(
                Box::new(kaji_tasks::list::pg::PgUrl::parse(url).expect("url")),
                self.list.clone(),
            ),
            None => kaji_tasks::list::ListTarget::Files(self.list.clone()),
        };
        let list = rt
            .block_on(kaji_tasks::list::TaskList::open(self.home.path(), &target))
            .expect("open the list");
        Blocking { list, rt }
    }
}

/// A [`kaji_tasks::list::TaskList`] with blocking methods named as the
/// file store's, so one test body serves both backends.
#[allow(dead_code)]
pub struct Blocking {
    pub list: kaji_tasks::list::TaskList,
    rt: tokio::runtime::Runtime,
}

#[allow(dead_code)]
impl Blocking {
    fn run<T>(&self, f: impl std::future::Future<Output = T>) -> T {
        self.rt.block_on(f)
    }
    pub fn highwatermark(&self) -> Result<u64, kaji_tasks::list::TaskListError> {
        self.run(self.list.highwatermark())
    }
    pub fn list(&self) -> Result<kaji_tasks::list::ListSnapshot, kaji_tasks::list::TaskListError> {
        self.run(self.list.list())
    }
    pub fn get(
        &self,
        id: u64,
    ) -> Result<kaji_tasks::list::ListTask, kaji_tasks::list::TaskListError> {
        self.run(self.list.get(id))
    }
    pub fn create(
        &self,
        new: kaji_tasks::list::NewListTask,
    ) -> Result<kaji_tasks::list::ListTask, kaji_tasks::list::TaskListError> {
        self.run(self.list.create(new))
    }
    pub fn update(
        &self,
        id: u64,
        patch: kaji_tasks::list::ListTaskPatch,
    ) -> Result<kaji_tasks::list::UpdateOutcome, kaji_tasks::list::TaskListError> {
        self.run(self.list.update(id, patch))
    }
    pub fn delete(
        &self,
        id: u64,
    ) -> Result<kaji_tasks::list::ListTask, kaji_tasks::list::TaskListError> {
        self.run(self.list.delete(id))
    }
    pub fn claim(
        &self,
        id: u64,
        owner: &str,
    ) -> Result<kaji_tasks::list::ListTask, kaji_tasks::list::TaskListError> {
        self.run(self.list.claim(id, owner))
    }
    pub fn release(&self, owner: &str) -> Result<Vec<u64>, kaji_tasks::list::TaskListError> {
        self.run(self.list.release(owner))
    }
    pub fn reset(&self) -> Result<Vec<u64>, kaji_tasks::list::TaskListError> {
        self.run(self.list.reset())
    }
}
