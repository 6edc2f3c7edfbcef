//! A task's final event (`Finished`) goes out only once the state it
//! describes is stored: a front end that reads the session when it sees
//! it finds the prompt's history, turns and index entry, and a session
//! free for the next prompt; a sub-agent's, its usage in the session's.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use async_trait::async_trait;
use kaji_core::storage::store::SessionStore;
use kaji_core::{AskRequest, Session, SessionBuilder, SessionOptions, TaskFrontend};
use kaji_llm::ProviderKind;
use kaji_protocol::{AskResponse, Message, SessionEvent, TaskEvent, Usage};
use kaji_test_support::{Script, ScriptedModelServer, Turn};
use serde_json::json;

use crate::common::{done, provider_config};

/// What the session held when a `Finished` event arrived.
#[derive(Debug, Clone)]
struct Seen {
    agent: String,
    history: Vec<Message>,
    turns: u32,
    busy: bool,
    subagent_usage: Usage,
    /// The session index's status of the session.
    index_status: Option<String>,
}

/// A front end that, on every `Finished`, reads the session back.
struct Reader {
    session: OnceLock<Weak<Session>>,
    home: PathBuf,
    seen: Mutex<Vec<Seen>>,
}

impl Reader {
    fn read(&self, agent: &str) -> Option<Seen> {
        let session = self.session.get()?.upgrade()?;
        let index_status = SessionStore::new(&self.home)
            .list()
            .ok()?
            .entries
            .into_iter()
            .find(|e| e.id == session.id())
            .map(|e| e.status);
        Some(Seen {
            agent: agent.to_string(),
            history: session.history(),
            turns: session.turns(),
            busy: session.is_busy(),
            subagent_usage: session.subagent_usage(),
            index_status,
        })
    }
}

#[async_trait]
impl TaskFrontend for Reader {
    fn emit(&self, event: SessionEvent) {
        if matches!(event.event, TaskEvent::Finished { .. })
            && let Some(seen) = self.read(&event.agent)
        {
            self.seen.lock().unwrap().push(seen);
        }
    }

    async fn answer(&self, _ask: &AskRequest) -> AskResponse {
        AskResponse::Approve
    }
}

/// A session over `work` whose front end is a [`Reader`] of it.
async fn session(
    home: &Path,
    work: &Path,
    server: &ScriptedModelServer,
) -> (Arc<Session>, Arc<Reader>) {
    let reader = Arc::new(Reader {
        session: OnceLock::new(),
        home: home.to_path_buf(),
        seen: Mutex::new(Vec::new()),
    });
    let options = SessionOptions {
        cwd: Some(work.to_path_buf()),
        no_checkpoints: true,
        ..SessionOptions::default()
    };
    let (session, _) = SessionBuilder::new(home, options)
        .provider(provider_config(server, ProviderKind::Anthropic))
        .build(Arc::clone(&reader) as Arc<dyn TaskFrontend>)
        .await
        .unwrap();
    // Weak: the session holds its front end.
    reader.session.set(Arc::downgrade(&session)).unwrap();
    (session, reader)
}

#[tokio::test]
async fn finished_comes_after_the_session_stored_the_prompt() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let server = ScriptedModelServer::start(Script::new([
        done("first done"),
        Turn::text("Looking.").and_tool_call("Bash", json!({"command": "true"})),
        done("second done"),
    ]))
    .await;
    let (session, reader) = session(home.path(), work.path(), &server).await;
    let first = session.submit("one".into()).await.unwrap();
    let second = session.submit("two".into()).await.unwrap();
    let seen = reader.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2, "{seen:#?}");
    for (seen, outcome, turns) in [(&seen[0], &first, 1), (&seen[1], &second, 3)] {
        assert_eq!(seen.agent, "main");
        assert_eq!(seen.history, outcome.history, "the history at Finished");
        assert_eq!(seen.turns, turns, "the turns at Finished");
        assert!(!seen.busy, "the session was still busy at Finished");
        assert_eq!(seen.index_status.as_deref(), Some("completed"));
    }
    assert!(seen[1].history.len() > seen[0].history.len());
    session.shutdown().await;
}

#[tokio::test]
async fn a_sub_agents_finished_comes_after_its_usage_joined_the_sessions() {
    const EXPLORE: &str = "You are the Explore sub-agent";
    let usage = |input, output| Usage {
        input_tokens: input,
        output_tokens: output,
        ..Usage::default()
    };
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let explore = Script::new([done("found it").with_usage(usage(100, 7))]);
    let main = Script::new([
        Turn::tool_call(
            "Agent",
            json!({"description": "look", "prompt": "Where?", "subagent_type": "explore"}),
        ),
        done("done"),
    ])
    .with_agent(EXPLORE, explore);
    let server = ScriptedModelServer::start(main).await;
    let (session, reader) = session(home.path(), work.path(), &server).await;
    session.submit("find it".into()).await.unwrap();
    let seen = reader.seen.lock().unwrap().clone();
    let agents: Vec<&str> = seen.iter().map(|s| s.agent.as_str()).collect();
    assert_eq!(agents.len(), 2, "{agents:?}");
    assert_ne!(agents[0], "main");
    assert_eq!(seen[0].subagent_usage.input_tokens, 100);
    assert_eq!(seen[0].subagent_usage.output_tokens, 7);
    session.shutdown().await;
}
