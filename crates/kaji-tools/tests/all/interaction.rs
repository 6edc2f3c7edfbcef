//! Tests of `AskUser` and `AttemptCompletion`: they only hand a control
//! instruction to the executor.

use kaji_tools::{ToolAccess, ToolContext, ToolControl, builtin_tools};
use serde_json::json;

fn ctx() -> ToolContext {
    ToolContext::new(std::env::temp_dir())
}

#[tokio::test]
async fn ask_user_returns_an_ask_control() {
    let registry = builtin_tools();
    let tool = registry.get("AskUser").expect("AskUser registered");
    assert!(tool.is_read_only());
    let input = json!({"question": "Which database?", "options": ["Postgres", " ", "SQLite"]});
    assert_eq!(tool.access(&input, &ctx()), ToolAccess::Interaction);
    let out = tool.call(input, &ctx()).await.unwrap();
    assert_eq!(
        out.control,
        Some(ToolControl::AskUser {
            question: "Which database?".to_string(),
            options: vec!["Postgres".to_string(), "SQLite".to_string()],
        })
    );
    assert!(!out.changed_files);
    let out = tool
        .call(json!({"question": "Go on?"}), &ctx())
        .await
        .unwrap();
    assert_eq!(
        out.control,
        Some(ToolControl::AskUser {
            question: "Go on?".to_string(),
            options: vec![]
        })
    );
}

#[tokio::test]
async fn ask_user_needs_a_question() {
    let registry = builtin_tools();
    let tool = registry.get("AskUser").unwrap();
    let e = tool
        .call(json!({"question": "  "}), &ctx())
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("AskUser") && e.contains("question"), "{e}");
    let e = tool
        .call(json!({"options": ["a"]}), &ctx())
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("AskUser") && e.contains("question"), "{e}");
}

#[tokio::test]
async fn attempt_completion_returns_a_complete_control() {
    let registry = builtin_tools();
    let tool = registry
        .get("AttemptCompletion")
        .expect("AttemptCompletion registered");
    assert!(tool.is_read_only());
    let input = json!({"result": "Fixed the off-by-one in parse(); tests pass."});
    assert_eq!(tool.access(&input, &ctx()), ToolAccess::Interaction);
    let out = tool.call(input, &ctx()).await.unwrap();
    assert_eq!(
        out.control,
        Some(ToolControl::Complete {
            result: "Fixed the off-by-one in parse(); tests pass.".to_string()
        })
    );
    let e = tool
        .call(json!({"result": ""}), &ctx())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("AttemptCompletion") && e.contains("result"),
        "{e}"
    );
}

#[test]
fn specs_are_well_formed_and_read_only_flags_are_right() {
    let registry = builtin_tools();
    let expected = [
        ("Read", true),
        ("Write", false),
        ("Edit", false),
        ("Glob", true),
        ("Grep", true),
        ("AskUser", true),
        ("AttemptCompletion", true),
    ];
    for (name, read_only) in expected {
        let tool = registry
            .get(name)
            .unwrap_or_else(|| panic!("{name} registered"));
        assert_eq!(tool.is_read_only(), read_only, "{name}");
        let spec = tool.spec();
        assert_eq!(spec.name, name);
        assert!(
            spec.description.len() > 80,
            "{name} needs a real description"
        );
        let schema = &spec.input_schema;
        assert_eq!(schema["type"], "object", "{name}");
        let props = schema["properties"].as_object().expect("properties");
        for required in schema["required"].as_array().expect("required") {
            assert!(
                props.contains_key(required.as_str().unwrap()),
                "{name}: {required}"
            );
        }
    }
    let grep = registry.get("Grep").unwrap().spec();
    let props = grep.input_schema["properties"].as_object().unwrap();
    for key in [
        "pattern",
        "path",
        "glob",
        "type",
        "output_mode",
        "-i",
        "-n",
        "-A",
        "-B",
        "-C",
        "head_limit",
        "multiline",
    ] {
        assert!(props.contains_key(key), "Grep schema lacks {key}");
    }
}
