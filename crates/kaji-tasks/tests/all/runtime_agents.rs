//! Runtime tasks that are not processes (agents), and the blocking read
//! that waits for the end of a task of any type. Nothing here sleeps: every
//! wait is a read the registry wakes.

use std::path::Path;
use std::time::Duration;

use kaji_tasks::RuntimeTaskRegistry;
use kaji_tasks::runtime::{
    AgentEnd, AgentStart, MAIN_CALLER, ReadWait, RuntimeConfig, RuntimeError, RuntimeTaskStatus,
    RuntimeTaskType, scan_sessions,
};

const LONG: Duration = Duration::from_secs(120);

fn registry(home: &Path) -> RuntimeTaskRegistry {
    RuntimeTaskRegistry::new(home, "agents-session", RuntimeConfig::default()).expect("registry")
}

fn agent(name: &str) -> AgentStart {
    AgentStart {
        task_type: RuntimeTaskType::LocalAgent,
        description: format!("{name} at work"),
        agent: name.to_string(),
        owner: MAIN_CALLER.to_string(),
    }
}

#[tokio::test]
async fn an_agent_task_is_read_incrementally_per_reader_and_ends_with_its_result() {
    let home = tempfile::tempdir().expect("tempdir");
    let reg = registry(home.path());
    let handle = reg.start_agent(agent("scout")).expect("start");
    let id = handle.id().as_str().to_string();
    assert!(id.starts_with('a'), "{id}");
    handle.set_activity("Grep");
    handle.append("first\n");

    let now = reg
        .read_since_last(MAIN_CALLER, &id, false, LONG)
        .await
        .expect("read");
    assert_eq!(now.text(), "first\n");
    assert_eq!(now.task.status, RuntimeTaskStatus::Running);
    assert_eq!(now.task.activity.as_deref(), Some("Grep"));
    assert_eq!(now.task.agent.as_deref(), Some("scout"));

    // `kaji ps` sees it, with its activity.
    let scan = scan_sessions(home.path());
    let listed = &scan.live[0].tasks[0];
    assert_eq!(listed.task_type, RuntimeTaskType::LocalAgent);
    assert_eq!(listed.status, RuntimeTaskStatus::Running);

    handle.append("second\n");
    let blocking = reg.read_since_last(MAIN_CALLER, &id, true, LONG);
    let finish = async {
        // The other reader follows the output as it comes and starts from 0.
        let other = reg
            .read_waiting("other", &id, ReadWait::NewOutput, LONG)
            .await
            .expect("read");
        assert_eq!(other.text(), "first\nsecond\n");
        handle.append("third\n");
        handle.set_result("all found");
        handle.finish(AgentEnd::Completed)
    };
    let (read, info) = tokio::join!(blocking, finish);
    let read = read.expect("read");
    assert_eq!(info.status, RuntimeTaskStatus::Completed);
    assert_eq!(read.task.status, RuntimeTaskStatus::Completed);
    assert_eq!(read.text(), "second\nthird\n");
    assert!(!read.timed_out);

    // The owner read everything after the end: no notice.
    assert!(reg.take_finished_notices().is_empty());
}

#[tokio::test]
async fn the_notice_of_an_agent_carries_its_result() {
    let home = tempfile::tempdir().expect("tempdir");
    let reg = registry(home.path());
    let handle = reg.start_agent(agent("writer")).expect("start");
    handle.append("working\n");
    handle.set_result("wrote 3 files");
    handle.finish(AgentEnd::Completed);
    let notices = reg.take_finished_notices_for(MAIN_CALLER);
    assert_eq!(notices.len(), 1);
    let text = notices[0].to_prompt_text();
    assert!(text.contains("wrote 3 files"), "{text}");
    assert!(text.contains("completed"), "{text}");
}

#[tokio::test]
async fn stop_cancels_the_agent_and_waits_for_its_end() {
    let home = tempfile::tempdir().expect("tempdir");
    let reg = registry(home.path());
    let handle = reg.start_agent(agent("looper")).expect("start");
    let id = handle.id().as_str().to_string();
    let stop = handle.stop_token();
    let runner = tokio::spawn(async move {
        handle.append("step 1\n");
        stop.cancelled().await;
        handle.append("stopped after step 1\n");
        handle.finish(AgentEnd::Completed)
    });
    let info = reg.stop(&id).await.expect("stop");
    assert_eq!(info.status, RuntimeTaskStatus::Killed);
    let ended = runner.await.expect("runner");
    assert_eq!(ended.status, RuntimeTaskStatus::Killed);
    let read = reg
        .read_since_last(MAIN_CALLER, &id, false, LONG)
        .await
        .expect("read");
    assert!(
        read.text().contains("stopped after step 1"),
        "{}",
        read.text()
    );
    assert!(matches!(
        reg.stop(&id).await,
        Err(RuntimeError::NotRunning { .. })
    ));
}

#[tokio::test]
async fn an_agent_that_crashes_ends_as_failed() {
    let home = tempfile::tempdir().expect("tempdir");
    let reg = registry(home.path());
    let handle = reg.start_agent(agent("crasher")).expect("start");
    let id = handle.id().as_str().to_string();
    let crashed = tokio::spawn(async move {
        let _handle = handle;
        panic!("the agent crashed");
    })
    .await;
    assert!(crashed.is_err());
    let info = reg.get(&id).expect("get");
    assert_eq!(info.status, RuntimeTaskStatus::Failed);
    assert!(info.error.as_deref().unwrap_or("").contains("crashed"));
}

#[tokio::test]
async fn start_agent_refuses_process_types_and_start_refuses_agents() {
    let home = tempfile::tempdir().expect("tempdir");
    let reg = registry(home.path());
    let mut bash = agent("x");
    bash.task_type = RuntimeTaskType::LocalBash;
    assert!(matches!(
        reg.start_agent(bash),
        Err(RuntimeError::WrongStart(RuntimeTaskType::LocalBash))
    ));
    let mut teammate = agent("mate");
    teammate.task_type = RuntimeTaskType::InProcessTeammate;
    let handle = reg.start_agent(teammate).expect("teammate");
    assert!(handle.id().as_str().starts_with('t'));
    handle.set_activity("idle");
    assert_eq!(handle.info().status, RuntimeTaskStatus::Running);
    assert_eq!(handle.info().activity.as_deref(), Some("idle"));
}

#[tokio::test]
async fn a_blocking_read_of_a_shell_returns_only_when_it_has_ended_with_all_unread_output() {
    let home = tempfile::tempdir().expect("tempdir");
    let reg = registry(home.path());
    let fifo = home.path().join("go");
    kaji_test_support::fixtures::mkfifo(&fifo);
    let command = format!("echo a; read x < '{}'; echo b", fifo.display());
    let info = reg
        .start_local_bash(&command, "two halves", home.path(), MAIN_CALLER)
        .await
        .expect("start");
    let id = info.id.as_str().to_string();
    let blocking = reg.read_since_last(MAIN_CALLER, &id, true, LONG);
    let release = async {
        // Another reader sees the first half while the task still runs.
        let first = reg
            .read_waiting("observer", &id, ReadWait::NewOutput, LONG)
            .await
            .expect("read");
        assert_eq!(first.text(), "a\n");
        let fifo = fifo.clone();
        tokio::task::spawn_blocking(move || std::fs::write(&fifo, "go\n").expect("write fifo"))
            .await
            .expect("writer");
    };
    let (read, ()) = tokio::join!(blocking, release);
    let read = read.expect("read");
    assert_eq!(read.task.status, RuntimeTaskStatus::Completed);
    assert_eq!(read.text(), "a\nb\n");
}
