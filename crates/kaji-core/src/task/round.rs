//! The middle loop's body: one round — the request assembled, the stream
//! read, the reply presented and settled. It never decides what the task
//! does next; the outer loop does, from its [`RoundOutcome`].

use std::sync::Arc;

use kaji_llm::ModelRequest;
use kaji_protocol::{ContentBlock, Message, SayKind, SayPayload, TaskEvent, Usage, UsageReport};
use tokio::sync::watch;

use super::state::{RoundError, RoundOutcome};
use super::{Task, mcp_connect_wait};
use crate::parser::{ReplyAssembler, ToolProtocol, XmlToolGrammar};
use crate::prompt::{PromptInputs, system_prompt};
use crate::storage::record::SessionRecord;

impl Task {
    /// The middle loop's body: one request, its stream, its presentation.
    pub(super) async fn round(&self, user_content: Vec<ContentBlock>) -> RoundOutcome {
        // MCP servers still connecting get up to 10 s before the first
        // request (the seed's wait); after that, a server that connects
        // later has its tools in the next round.
        if let Some(mcp) = self.executor.mcp()
            && self.lock().turns == 0
        {
            tokio::select! {
                still = mcp.wait_ready(mcp_connect_wait()) => {
                    if !still.is_empty() {
                        self.emitter.say(
                            SayKind::Info,
                            format!("MCP servers still connecting, going on without them for now: {}", still.join(", ")),
                            None,
                        );
                    }
                    // Nothing fails silently: a server that could not start
                    // is named, with why.
                    for failure in mcp.failures() {
                        self.emitter.say(
                            SayKind::Error,
                            format!("MCP server {} is not available: {}", failure.name, failure.why),
                            None,
                        );
                    }
                }
                _ = self.cancel.cancelled() => return RoundOutcome::Aborted,
            }
        }
        let specs = self.executor.begin_round();
        let turn = {
            let mut st = self.lock();
            st.round_user = Some(user_content.clone());
            st.push_user_content(user_content);
            st.turns += 1;
            st.stream_end = None;
            st.stream_had_content = false;
            let grammar = XmlToolGrammar::from_specs(&specs);
            st.assembler = Some(ReplyAssembler::new(
                self.config.tool_protocol,
                grammar,
                &format!("xml_{}_", st.turns),
            ));
            st.turns
        };
        let request = self.request(specs);
        let searched = request.web_search.is_some();
        let size = RequestSize::of(&request);
        self.emitter.say(
            SayKind::ApiReqStarted,
            format!("Turn {turn}: request to {}", self.config.model),
            Some(SayPayload::ApiRequest {
                turn,
                model: self.config.model.clone(),
            }),
        );

        let (version_tx, version_rx) = watch::channel(0u64);
        let stream_cancel = self.cancel.child_token();
        let reader = self.spawn_stream_reader(request, version_tx, &stream_cancel);

        let presented = self.present(version_rx, &stream_cancel).await;
        stream_cancel.cancel();
        let charged = reader.await.unwrap_or(false);
        let outcome = self.settle(presented, size, charged);
        if searched {
            return self.unless_search_rejected(outcome);
        }
        outcome
    }

    /// A request that offered the provider's search and was rejected for
    /// it (HTTP 400 naming the tool): the search is withdrawn for the
    /// session, with a warning, and the round is sent again without it —
    /// once, as the next request no longer offers it.
    fn unless_search_rejected(&self, outcome: RoundOutcome) -> RoundOutcome {
        let RoundOutcome::ApiFailed(RoundError::Request(err)) = &outcome else {
            return outcome;
        };
        let Some(search) = self.config.provider_web_search.as_ref() else {
            return outcome;
        };
        if !crate::web_search::rejects_provider_search(err) {
            return outcome;
        }
        if search.withdraw() {
            self.emitter.say(
                SayKind::Error,
                format!(
                    "The model server rejected the provider's web search tool ({err}); \
                     retrying without it, and it is not offered again in this session. {}",
                    crate::web_search::SET_A_BACKEND
                ),
                None,
            );
        }
        RoundOutcome::SearchRejected
    }

    pub(super) fn request(&self, mut specs: Vec<kaji_protocol::ToolSpec>) -> ModelRequest {
        let (mode, messages, wire, cwd) = {
            let st = self.lock();
            let wire = Arc::clone(&st.wire);
            (st.mode, st.history.clone(), wire, st.cwd.clone())
        };
        let web_search = self
            .may_search_in_reply(mode, &cwd)
            .then(|| crate::web_search::provider_search(&mut specs))
            .flatten();
        let system = system_prompt(&PromptInputs {
            cwd: &cwd,
            protocol: self.config.tool_protocol,
            tools: &specs,
            mode,
            extra_sections: &self.config.extra_system_sections,
            intro: self.config.system_intro.as_deref(),
        });
        ModelRequest {
            model: self.config.model.clone(),
            system,
            messages,
            tools: match self.config.tool_protocol {
                ToolProtocol::Native => specs,
                ToolProtocol::Xml => Vec::new(),
            },
            max_tokens: self.config.max_tokens,
            temperature: self.config.temperature,
            web_search,
            wire_cache: Some(wire),
        }
    }

    /// Whether the provider's own search may run within the reply: it has
    /// one, tools are called natively, and the rules let `WebSearch` run
    /// without asking (a search the provider runs cannot wait for an
    /// answer).
    fn may_search_in_reply(
        &self,
        mode: crate::permissions::PermissionMode,
        cwd: &std::path::Path,
    ) -> bool {
        let offered =
            (self.config.provider_web_search.as_ref()).is_some_and(|search| !search.is_withdrawn());
        if !offered || self.config.tool_protocol != ToolProtocol::Native {
            return false;
        }
        let approvals = self
            .config
            .approvals
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let ctx = approvals.context(&self.config.cwd, cwd);
        crate::permissions::decide(
            mode,
            kaji_tools::web_search::WEB_SEARCH,
            &kaji_tools::ToolAccess::External,
            &[],
            &ctx,
            &approvals,
        ) == crate::permissions::Decision::Allow
    }

    /// Tells the front end and the session file what a request used, and
    /// charges the run's budget with it unless the stream reader did.
    pub(super) fn report_usage(&self, turn: u32, usage: Usage, estimated: bool, charged: bool) {
        let cost_usd = self.config.pricing.as_ref().map(|p| p(&usage));
        let context_tokens = usage
            .input_tokens
            .saturating_add(usage.cache_read_input_tokens)
            .saturating_add(usage.cache_creation_input_tokens)
            .saturating_add(usage.output_tokens);
        {
            let mut st = self.lock();
            st.context_tokens = context_tokens;
            if let Some(c) = cost_usd {
                *st.cost_usd.get_or_insert(0.0) += c;
            }
        }
        if !charged {
            self.config.budget.charge(cost_usd, &usage);
        }
        self.config.recorder.record(SessionRecord::Usage {
            turn,
            usage,
            cost_usd,
        });
        self.emitter.emit(TaskEvent::Usage(UsageReport {
            turn,
            usage,
            context_tokens,
            context_window: self.config.context_window,
            cost_usd,
            estimated,
        }));
    }

    /// A tool result in the form the protocol needs: a native
    /// `tool_result` block, or text for the xml protocol.
    pub(super) fn result_block(
        &self,
        id: &str,
        name: &str,
        content: &str,
        is_error: bool,
    ) -> ContentBlock {
        match self.config.tool_protocol {
            ToolProtocol::Native => ContentBlock::tool_result(id, content, is_error),
            ToolProtocol::Xml => {
                let label = if is_error { "Error" } else { "Result" };
                ContentBlock::text(format!("[{name}] {label}:\n{content}"))
            }
        }
    }
}

/// What a request sends (system prompt, messages, tools), measured only
/// when it is needed: the basis of a token estimate when the server
/// reports no usage. The messages are the history's, shared; the size
/// must be taken (or dropped) before the history changes again, or the
/// change copies it.
pub(super) struct RequestSize {
    /// The system prompt's and the tools' bytes.
    fixed: usize,
    /// The messages as sent.
    messages: Arc<Vec<Message>>,
}

impl RequestSize {
    /// The size of `request`, to measure later.
    pub(super) fn of(request: &ModelRequest) -> Self {
        let tools = serde_json::to_vec(&request.tools).map_or(0, |v| v.len());
        Self {
            fixed: request.system.len() + tools,
            messages: Arc::clone(&request.messages),
        }
    }

    /// The bytes, counting the messages now.
    pub(super) fn bytes(self) -> usize {
        let messages = serde_json::to_vec(&*self.messages).map_or(0, |v| v.len());
        self.fixed + messages
    }
}

/// About four bytes a token: the estimate for servers that report no usage
/// (llama.cpp's and others that ignore `stream_options.include_usage`).
pub(super) fn estimate_usage(request_bytes: usize, reply: &ReplyAssembler, broken: bool) -> Usage {
    // A reply that broke off (past the reply cap, say) is kept in part
    // only: the estimate counts what the next request will carry.
    let mut content = reply.history_content();
    if broken {
        cap_broken_text(&mut content);
    }
    let reply_bytes = serde_json::to_vec(&content).map_or(0, |v| v.len());
    Usage {
        input_tokens: (request_bytes as u64).div_ceil(4),
        output_tokens: (reply_bytes as u64).div_ceil(4),
        ..Usage::default()
    }
}

/// The most text of a broken-off reply the history keeps.
pub(super) const BROKEN_TEXT_KEPT: usize = 20_000;

/// Cuts the text blocks of a broken-off reply to [`BROKEN_TEXT_KEPT`]
/// characters in all, with a note.
pub(super) fn cap_broken_text(content: &mut [ContentBlock]) {
    let mut budget = BROKEN_TEXT_KEPT;
    for block in content.iter_mut() {
        if let ContentBlock::Text { text, .. } = block {
            let chars = text.chars().count();
            if chars <= budget {
                budget -= chars;
                continue;
            }
            let cut = text
                .char_indices()
                .nth(budget)
                .map_or(text.len(), |(i, _)| i);
            text.truncate(cut);
            text.push_str(&format!(
                "\n[… {} more characters of this reply were not kept]",
                chars - budget
            ));
            budget = 0;
        }
    }
}

/// Removes stray `<thinking>`/`</thinking>` tags left in text blocks.
pub(super) fn strip_thinking_leftovers(text: &str) -> String {
    if text.contains("thinking>") {
        text.replace("<thinking>", "").replace("</thinking>", "")
    } else {
        text.to_string()
    }
}

pub(super) const MAX_TOKENS_NOTE: &str = "[Your previous reply hit the output token limit (max_tokens) before it ended. A tool call it cut off was not run. Continue from where you stopped, in smaller steps: write a large file in several parts (Write the first part, then Edit to append the rest).]";
