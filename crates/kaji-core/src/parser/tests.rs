use super::*;
use serde_json::json;

fn grammar() -> XmlToolGrammar {
    let mut g = XmlToolGrammar::default();
    g.add_tool(
        "Read",
        &[
            ("file_path", ParamKind::String),
            ("offset", ParamKind::Json),
            ("limit", ParamKind::Json),
        ],
    );
    g.add_tool(
        "Write",
        &[
            ("file_path", ParamKind::String),
            ("content", ParamKind::String),
        ],
    );
    g.add_tool(
        "Edit",
        &[
            ("file_path", ParamKind::String),
            ("old_string", ParamKind::String),
            ("new_string", ParamKind::String),
            ("replace_all", ParamKind::Json),
        ],
    );
    g.add_tool(
        "Bash",
        &[("command", ParamKind::String), ("timeout", ParamKind::Json)],
    );
    g.add_tool("AttemptCompletion", &[("result", ParamKind::String)]);
    g
}

/// Every message of the suite: the parser must give the same blocks for
/// each whatever the chunking.
pub(crate) const SUITE: &[&str] = &[
    "",
    "plain text only",
    "Let me look.\n<Read><file_path>src/main.rs</file_path></Read>",
    "<thinking>I should read it</thinking>Reading now.<Read>\n<file_path>a.rs</file_path>\n<offset>10</offset>\n</Read>trailing",
    "Vec<String> and a < b and <Rea without closing, <thinking is not a tag",
    "<Write><file_path>x.html</file_path><content><div></div></content></Write>",
    "<Write><file_path>t.rs</file_path><content>fn main() { let s = \"</content>\"; }\n</content></Write>",
    "<Write><file_path>nested.md</file_path><content>Use <Read><file_path>y</file_path></Read> and </Write> inside.</content>\n</Write>done",
    "<Edit><file_path>a</file_path><old_string>x</old_string><new_string></old_string> </new_string></Edit>",
    "<Bash><command>echo '</command>' && ls</command><timeout>5000</timeout></Bash>",
    "<Bash><command>echo ü日本語 ✓</command></Bash> 日本語のテキスト",
    "<Read><file_path>a</file_path></Read><Read><file_path>b</file_path></Read>",
    "<Read><file_path>cut off",
    "<Read><offset>not json</offset></Read>",
    "<Read>junk<file_path>a</file_path></Read>",
    "<Unknown><x>1</x></Unknown> text",
    "<thinking>unterminated thought",
    "a</thinking>b<thinking></thinking>c",
    "<AttemptCompletion><result>\nAll done.\n</result></AttemptCompletion>",
    "<Write><file_path>w</file_path><content>a</content  >b</content></Write>",
    "<think>R1 reasons here</think>Answer.<think>no </thinking> close</think>",
    "<think>unterminated think",
    "<Write>\n<file_path>  src/lib.rs \n</file_path>\n<content>\nfn a() {}\n</content>\n</Write>",
];

fn one_shot(msg: &str) -> Vec<AssistantBlock> {
    chunked(msg, &[msg.len()])
}

fn chunked(msg: &str, sizes: &[usize]) -> Vec<AssistantBlock> {
    let mut a = ReplyAssembler::new(ToolProtocol::Xml, grammar(), "xml_");
    let mut rest = msg;
    let mut i = 0;
    while !rest.is_empty() {
        let mut n = sizes[i % sizes.len()].max(1).min(rest.len());
        while !rest.is_char_boundary(n) {
            n += 1;
        }
        a.push(&StreamEvent::TextDelta {
            text: rest[..n].to_string(),
        });
        rest = &rest[n..];
        i += 1;
    }
    a.finish();
    a.blocks().to_vec()
}

fn split_at(msg: &str, at: usize) -> Vec<AssistantBlock> {
    let mut a = ReplyAssembler::new(ToolProtocol::Xml, grammar(), "xml_");
    for part in [&msg[..at], &msg[at..]] {
        if !part.is_empty() {
            a.push(&StreamEvent::TextDelta {
                text: part.to_string(),
            });
        }
    }
    a.finish();
    a.blocks().to_vec()
}

#[test]
fn same_blocks_at_every_split_offset() {
    for msg in SUITE {
        let expected = one_shot(msg);
        for at in 0..=msg.len() {
            if msg.is_char_boundary(at) {
                assert_eq!(split_at(msg, at), expected, "message {msg:?} split at {at}");
            }
        }
        assert_eq!(chunked(msg, &[1]), expected, "message {msg:?} char by char");
    }
}

proptest::proptest! {
    #![proptest_config(proptest::test_runner::Config {
        failure_persistence: None,
        rng_seed: proptest::test_runner::RngSeed::Fixed(
            kaji_test_support::seeds::seeds("chunk sizes", &[0xc4_0c5], None)[0],
        ),
        ..proptest::test_runner::Config::default()
    })]
    #[test]
    fn same_blocks_for_random_chunk_sizes(idx in 0..SUITE.len(), sizes in proptest::collection::vec(1usize..24, 1..16)) {
        let msg = SUITE[idx];
        proptest::prop_assert_eq!(chunked(msg, &sizes), one_shot(msg));
    }
}

fn tool(blocks: &[AssistantBlock], i: usize) -> &ToolCall {
    match &blocks[i].content {
        BlockContent::ToolUse(c) => c,
        other => panic!("block {i} is {other:?}"),
    }
}

#[test]
fn text_and_tool() {
    let b = one_shot(SUITE[2]);
    assert_eq!(b.len(), 2);
    assert_eq!(b[0].content, BlockContent::Text("Let me look.\n".into()));
    assert_eq!(tool(&b, 1).input, Ok(json!({"file_path": "src/main.rs"})));
    assert_eq!(tool(&b, 1).id, "xml_1");
}

#[test]
fn thinking_becomes_reasoning_and_json_params_parse() {
    let b = one_shot(SUITE[3]);
    assert_eq!(
        b[0].content,
        BlockContent::Reasoning("I should read it".into())
    );
    assert_eq!(b[1].content, BlockContent::Text("Reading now.".into()));
    assert_eq!(
        tool(&b, 2).input,
        Ok(json!({"file_path": "a.rs", "offset": 10}))
    );
    assert_eq!(b[3].content, BlockContent::Text("trailing".into()));
}

#[test]
fn angle_brackets_that_are_not_tags_stay_text() {
    let b = one_shot(SUITE[4]);
    assert_eq!(
        b,
        vec![AssistantBlock {
            content: BlockContent::Text(SUITE[4].into()),
            partial: false
        }]
    );
}

#[test]
fn free_text_may_hold_tags_and_closing_tags() {
    let b = one_shot(SUITE[5]);
    assert_eq!(
        tool(&b, 0).input,
        Ok(json!({"file_path": "x.html", "content": "<div></div>"}))
    );
    let b = one_shot(SUITE[6]);
    assert_eq!(
        tool(&b, 0).input,
        Ok(json!({"file_path": "t.rs", "content": "fn main() { let s = \"</content>\"; }\n"}))
    );
    let b = one_shot(SUITE[7]);
    assert_eq!(
        tool(&b, 0).input,
        Ok(
            json!({"file_path": "nested.md", "content": "Use <Read><file_path>y</file_path></Read> and </Write> inside."})
        )
    );
    assert_eq!(b[1].content, BlockContent::Text("done".into()));
    let b = one_shot(SUITE[8]);
    assert_eq!(
        tool(&b, 0).input,
        Ok(json!({"file_path": "a", "old_string": "x", "new_string": "</old_string> "}))
    );
    let b = one_shot(SUITE[9]);
    assert_eq!(
        tool(&b, 0).input,
        Ok(json!({"command": "echo '</command>' && ls", "timeout": 5000}))
    );
}

#[test]
fn cut_off_and_malformed_calls_are_errors_not_runs() {
    let b = one_shot(SUITE[12]);
    assert!(
        tool(&b, 0)
            .input
            .as_ref()
            .unwrap_err()
            .contains("ended inside <Read>")
    );
    let b = one_shot(SUITE[13]);
    assert!(
        tool(&b, 0)
            .input
            .as_ref()
            .unwrap_err()
            .contains("not valid JSON")
    );
    let b = one_shot(SUITE[14]);
    assert!(
        tool(&b, 0)
            .input
            .as_ref()
            .unwrap_err()
            .contains("unexpected text")
    );
    let b = one_shot(SUITE[15]);
    assert_eq!(b.len(), 1, "unknown tools are text: {b:?}");
}

#[test]
fn native_calls_and_provider_reasoning() {
    let mut a = ReplyAssembler::new(ToolProtocol::Native, XmlToolGrammar::default(), "");
    for ev in [
        StreamEvent::ReasoningDelta { text: "hmm".into() },
        StreamEvent::ReasoningSignature {
            signature: "sig".into(),
        },
        StreamEvent::TextDelta {
            text: "I'll read <Read>".into(),
        },
        StreamEvent::ToolCallStart {
            id: "c1".into(),
            name: "Read".into(),
        },
        StreamEvent::ToolCallDelta {
            id: "c1".into(),
            arguments: "{\"file_pa".into(),
        },
        StreamEvent::ToolCallDelta {
            id: "c1".into(),
            arguments: "th\":\"a\"}".into(),
        },
        StreamEvent::ToolCallEnd { id: "c1".into() },
        StreamEvent::ToolCallStart {
            id: "c2".into(),
            name: "Bash".into(),
        },
        StreamEvent::ToolCallDelta {
            id: "c2".into(),
            arguments: "{not json".into(),
        },
        StreamEvent::ToolCallEnd { id: "c2".into() },
        StreamEvent::ToolCallStart {
            id: "c3".into(),
            name: "Bash".into(),
        },
    ] {
        a.push(&ev);
    }
    assert!(a.blocks()[4].partial);
    a.finish();
    let b = a.blocks();
    assert_eq!(b[0].content, BlockContent::Reasoning("hmm".into()));
    assert_eq!(b[1].content, BlockContent::Text("I'll read <Read>".into()));
    assert_eq!(tool(b, 2).input, Ok(json!({"file_path": "a"})));
    assert!(tool(b, 3).input.is_err());
    assert!(
        tool(b, 4)
            .input
            .as_ref()
            .unwrap_err()
            .contains("ended before")
    );
    let h = a.history_content();
    assert_eq!(
        h[0],
        ContentBlock::Reasoning {
            text: "hmm".into(),
            signature: Some("sig".into())
        }
    );
    assert_eq!(
        h[2],
        ContentBlock::ToolUse {
            id: "c1".into(),
            name: "Read".into(),
            input: json!({"file_path": "a"})
        }
    );
}

#[test]
fn think_tags_are_reasoning_like_thinking() {
    let b = one_shot(SUITE[20]);
    assert_eq!(
        b[0].content,
        BlockContent::Reasoning("R1 reasons here".into())
    );
    assert_eq!(b[1].content, BlockContent::Text("Answer.".into()));
    assert_eq!(
        b[2].content,
        BlockContent::Reasoning("no </thinking> close".into())
    );
    let b = one_shot(SUITE[21]);
    assert_eq!(
        b[0].content,
        BlockContent::Reasoning("unterminated think".into())
    );
}

#[test]
fn written_files_keep_their_final_newline_and_paths_are_trimmed() {
    let b = one_shot(SUITE[22]);
    assert_eq!(
        tool(&b, 0).input,
        Ok(json!({"file_path": "src/lib.rs", "content": "fn a() {}\n"}))
    );
}

#[test]
fn provider_search_blocks_are_kept_in_order_and_shown() {
    let mut a = ReplyAssembler::new(ToolProtocol::Native, XmlToolGrammar::default(), "x");
    let search = json!({"type": "server_tool_use", "id": "s1", "name": "web_search", "input": {"query": "q"}});
    let result = json!({"type": "web_search_tool_result", "tool_use_id": "s1", "content": []});
    let cited =
        json!({"type": "text", "text": "It is so.", "citations": [{"url": "https://a.example/"}]});
    for event in [
        StreamEvent::TextDelta {
            text: "Looking. ".into(),
        },
        StreamEvent::ServerBlock {
            block: search.clone(),
        },
        StreamEvent::ServerBlock {
            block: result.clone(),
        },
        StreamEvent::TextDelta {
            text: "Well: ".into(),
        },
        StreamEvent::TextDelta {
            text: "It is so.".into(),
        },
        StreamEvent::ServerBlock {
            block: cited.clone(),
        },
        StreamEvent::TextDelta {
            text: " Done.".into(),
        },
    ] {
        a.push(&event);
    }
    a.finish();
    // The cited block follows the text it stands for.
    assert_eq!(
        a.history_content(),
        vec![
            ContentBlock::text("Looking. "),
            ContentBlock::Server {
                block: search.clone()
            },
            ContentBlock::Server {
                block: result.clone()
            },
            ContentBlock::text("Well: It is so."),
            ContentBlock::Server { block: cited },
            ContentBlock::text(" Done."),
        ]
    );
    let shown: Vec<&BlockContent> = a.blocks().iter().map(|b| &b.content).collect();
    assert_eq!(
        shown,
        vec![
            &BlockContent::Text("Looking. ".into()),
            &BlockContent::Server(search),
            &BlockContent::Server(result),
            &BlockContent::Text("Well: It is so. Done.".into()),
        ]
    );
}
