//! The settings walk: every setting of [`KajiConfig`] either reaches a
//! sub-agent exactly as it reaches the main agent, or is named here as
//! deliberately different for a child ([`super::services::TaskSpec::child`]).
//! The settings struct is destructured without `..`: a new setting does
//! not compile until it is classified here.

use std::sync::Arc;

use async_trait::async_trait;
use kaji_protocol::{AskResponse, SessionEvent};

use crate::config::{Compaction, KajiConfig, TextReply};
use crate::frontend::{AskRequest, TaskFrontend};
use crate::permissions::PermissionMode;
use crate::session::services::{ChildChanges, ToolGrant};
use crate::session::{SessionBuilder, SessionOptions};

struct Quiet;

#[async_trait]
impl TaskFrontend for Quiet {
    fn emit(&self, _event: SessionEvent) {}

    async fn answer(&self, _ask: &AskRequest) -> AskResponse {
        AskResponse::Deny { feedback: None }
    }
}

/// Every setting away from its default (the user's file: nothing gated).
const SETTINGS: &str = r#"
model = "walk-model"
reasoning = "low"
permission_mode = "accept-edits"
max_mistakes = 7
tool_result_max_chars = 1234
token_budget = 99999
max_agent_depth = 3
on_text_reply = "nudge"
compaction = "manual"
auto_compact_threshold = 0.42
sandbox = "off"
sandbox_network = true
sandbox_deny_read = ["~/walk-secret"]
protected_paths = ["walk/**"]
env_passthrough = ["WALK_PASS_TOKEN"]
secret_env = ["WALK_SECRET"]
lease_ms = 1234
lsp_wait_ms = 4321

[lsp.walk]
command = "walk-ls"
extensions = ["walk"]

[model_aliases]
sonnet = "walk-sonnet"

[models."walk-model"]
context_window = 12345
input_price = 1.0
output_price = 2.0

[permissions]
allow = ["Bash(walk:*)"]

[web_search]
provider = "searxng"
url = "http://127.0.0.1:9"

[[hooks.TaskStart]]
command = "true"

[mcp_servers.walk]
command = "kaji-walk-no-such-server"
"#;

#[tokio::test]
async fn every_session_setting_reaches_a_sub_agent_or_is_named_as_overridden() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("config.toml"), SETTINGS).unwrap();
    let settings = KajiConfig::load_gated(home.path(), work.path(), true)
        .unwrap()
        .0;
    let provider = kaji_llm::ProviderConfig::new(
        kaji_llm::ProviderKind::Anthropic,
        "walk-model",
        "http://127.0.0.1:9",
    );
    let options = SessionOptions {
        cwd: Some(work.path().to_path_buf()),
        persist: false,
        ..SessionOptions::default()
    };
    let (session, _warnings) = SessionBuilder::new(home.path(), options)
        .provider(provider)
        .build(Arc::new(Quiet))
        .await
        .unwrap();
    let (services, main) = session.services_and_main_spec();
    let child = main.child(ChildChanges {
        session_id: "child".into(),
        agent: "walker".into(),
        role: kaji_tools::AgentRole::Subagent,
        model: main.model.clone(),
        mode: None,
        tools: ToolGrant::All,
        max_turns: None,
        on_text_reply: TextReply::Finish,
        system_section: String::new(),
        cwd: None,
        recorder: crate::storage::recorder::Recorder::disabled(),
        transcript_path: None,
        frontend: Arc::new(Quiet),
        agents: None,
    });
    let (m, m_exec) = services.task_parts(main.clone());
    let (c, c_exec) = services.task_parts(child);

    let KajiConfig {
        // The provider, its model, URL and reasoning level: the child
        // talks to the same provider object, and keeps the model unless
        // its type names one (a child change).
        provider: _,
        model,
        base_url: _,
        reasoning: _,
        // Child change: its type's mode, never wider than its parent's.
        permission_mode,
        max_mistakes,
        tool_result_max_chars,
        models,
        // The sub-agents' own limits, read from the shared services.
        model_aliases,
        token_budget,
        max_agent_depth,
        // Child change (`ChildChanges::on_text_reply`): a sub-agent
        // finishes on a text answer.
        on_text_reply,
        compaction,
        auto_compact_threshold,
        hooks,
        mcp_servers,
        // Rules, sandbox and protected paths live in the shared approvals.
        permissions,
        sandbox,
        sandbox_network,
        sandbox_deny_read,
        // Part of the sandbox base in the shared approvals, like the above.
        sandbox_allow_unix_sockets: _,
        protected_paths,
        env_passthrough,
        secret_env,
        // Opens the session's task list, which the child shares.
        task_list_url: _,
        // Not a session's: the lease of `kaji worker`.
        lease_ms: _,
        sources: _,
        // Not a setting: the `.mcp.json` servers skipped, said once at start.
        mcp_json_skipped: _,
        // The run's budget, shared by construction (`SessionLimits::budget`,
        // asserted below).
        max_requests,
        max_budget_usd: _,
        // Which of Claude Code's files are read, at start; their warnings
        // are said once at start.
        claude_setting_sources: _,
        claude_warnings: _,
        // Part of the session's env policy (shared `Arc`, like
        // `env_passthrough`).
        claude_env: _,
        // The searcher of `WebSearch`, one for the session.
        web_search,
        // The language servers: one pool in the services, shared.
        lsp,
        lsp_wait_ms,
    } = settings;

    assert!(web_search.is_some_and(|w| w.url.as_deref() == Some("http://127.0.0.1:9")));
    let (mw, cw) = (
        m.web_search.as_ref().unwrap(),
        c.web_search.as_ref().unwrap(),
    );
    assert!(Arc::ptr_eq(mw, cw));
    assert_eq!(mw.describe(), "searxng at http://127.0.0.1:9");

    assert!(Arc::ptr_eq(&m.provider, &c.provider));
    assert_eq!(model.as_deref(), Some(m.model.as_str()));
    assert_eq!(c.model, m.model);

    assert_eq!(permission_mode, Some(PermissionMode::AcceptEdits));
    assert_eq!(m.permission_mode, PermissionMode::AcceptEdits);
    assert_eq!(c.permission_mode, m.permission_mode);

    assert_eq!(max_mistakes, Some(7));
    assert_eq!((m.max_mistakes, c.max_mistakes), (7, 7));
    assert_eq!(tool_result_max_chars, Some(1234));
    assert_eq!((m_exec.result_cap(), c_exec.result_cap()), (1234, 1234));

    assert!(models.contains_key("walk-model"));
    assert_eq!(m.context_window, Some(12345));
    assert_eq!(c.context_window, m.context_window);
    let usage = kaji_protocol::Usage {
        input_tokens: 1_000_000,
        ..kaji_protocol::Usage::default()
    };
    let (mp, cp) = (m.pricing.as_ref().unwrap(), c.pricing.as_ref().unwrap());
    assert_eq!((mp(&usage), cp(&usage)), (1.0, 1.0));

    let limits = &services.limits.subagents;
    assert_eq!(
        model_aliases.get("sonnet"),
        limits.model_aliases.get("sonnet")
    );
    assert_eq!(token_budget, limits.token_budget);
    assert_eq!(max_agent_depth, Some(limits.max_depth));

    assert_eq!(on_text_reply, Some(TextReply::Nudge));
    assert_eq!(m.on_text_reply, TextReply::Nudge);
    assert_eq!(c.on_text_reply, TextReply::Finish);

    assert_eq!(compaction, Some(Compaction::Manual));
    assert_eq!(
        (m.compaction, c.compaction),
        (Compaction::Manual, Compaction::Manual)
    );
    assert_eq!(auto_compact_threshold, Some(0.42));
    assert_eq!((m.compact_threshold, c.compact_threshold), (0.42, 0.42));

    assert!(!hooks.is_empty());
    let has_start = |cfg: &crate::task::TaskConfig| {
        cfg.hooks
            .as_ref()
            .is_some_and(|h| h.has_hooks(crate::hooks::HookEvent::TaskStart))
    };
    assert!(has_start(&m) && has_start(&c));
    assert!(mcp_servers.contains_key("walk"));
    assert!(m_exec.mcp().is_some() && c_exec.mcp().is_some());

    assert!(!permissions.is_empty() && !protected_paths.is_empty());
    assert_eq!(sandbox, Some(kaji_sandbox::SandboxMode::Off));
    assert_eq!(sandbox_network, Some(true));
    assert!(!sandbox_deny_read.is_empty());
    assert!(Arc::ptr_eq(&m.approvals, &c.approvals));
    assert!(Arc::ptr_eq(&m.approvals, &services.approvals));

    // The tools' services are the session's, by reference.
    let (mt, ct) = (&m.tool_services, &c.tool_services);
    assert!(Arc::ptr_eq(mt, ct) && Arc::ptr_eq(mt, &services.tool_services));
    assert_eq!(ct.env_policy.secret_env, secret_env);
    assert_eq!(ct.env_policy.env_passthrough, env_passthrough);

    let list = |t: &kaji_tools::ToolServices| t.task_list.as_ref().map(|l| l.list_id().to_string());
    assert_eq!(list(mt), Some(services.list_id().to_string()));
    assert!(Arc::ptr_eq(mt.runtime.as_ref().unwrap(), &services.runtime));
    assert!(Arc::ptr_eq(&m.budget, &c.budget));
    let _ = max_requests;
    assert!(lsp.contains_key("walk") && lsp_wait_ms == Some(4321));
    let mp = mt.lsp.as_ref().unwrap();
    assert_eq!(mp.wait(), std::time::Duration::from_millis(4321));
    assert!(mp.status().iter().any(|s| s.name == "walk"));
    // Checkpoints: on for both, or off for both.
    assert_eq!(m.checkpoints.is_some(), c.checkpoints.is_some());
    session.shutdown().await;
}
