//! `can_use_tool` in Claude Code's shapes: kaji's "always" rules as the
//! permission suggestions the program sees, and the program's answer as
//! an [`AskResponse`]. Pure translation: it never decides anything.

use kaji_protocol::AskResponse;
use serde_json::{Value, json};

/// One rule `Tool(content)` (or `Tool`) as Claude Code's rule value.
fn rule_value(rule: &str) -> Value {
    match rule.split_once('(') {
        Some((tool, rest)) if rest.ends_with(')') => {
            json!({"toolName": tool, "ruleContent": &rest[..rest.len() - 1]})
        }
        _ => json!({"toolName": rule}),
    }
}

/// The suggestions of an ask: its "always" rules, added for the session.
pub fn suggestions(always: &[String]) -> Value {
    if always.is_empty() {
        return json!([]);
    }
    json!([{
        "type": "addRules",
        "rules": always.iter().map(|r| rule_value(r)).collect::<Vec<_>>(),
        "behavior": "allow",
        "destination": "session",
    }])
}

/// The program's answer: allow (with its `updatedInput` when it changed
/// the input; with `updatedPermissions` adding allow rules, "always"),
/// or refuse with its message. The flag: the program asked to interrupt.
pub fn response(answer: &Value, original: &Value) -> (AskResponse, bool) {
    match answer.get("behavior").and_then(Value::as_str) {
        Some("allow") => {
            if let Some(input) = answer.get("updatedInput").filter(|i| i.is_object())
                && input != original
            {
                return (
                    AskResponse::ApproveEdited {
                        input: input.clone(),
                    },
                    false,
                );
            }
            (always(answer).unwrap_or(AskResponse::Approve), false)
        }
        Some("deny") => {
            let message = answer
                .get("message")
                .and_then(Value::as_str)
                .filter(|m| !m.trim().is_empty())
                .unwrap_or("The program denied this tool call.");
            let interrupt = answer.get("interrupt").and_then(Value::as_bool) == Some(true);
            // Somebody answered: the message is the call's result, and a
            // program's "no" is never the model's mistake.
            (
                AskResponse::Refuse {
                    message: message.to_string(),
                },
                interrupt,
            )
        }
        other => (
            AskResponse::Deny {
                feedback: Some(format!(
                    "The program's answer was not understood (behavior {}); the call was denied.",
                    other.unwrap_or("missing")
                )),
            },
            false,
        ),
    }
}

/// "Always": `updatedPermissions` with an `addRules` allow update; kept
/// in the project when its destination is a settings file.
fn always(answer: &Value) -> Option<AskResponse> {
    let updates = answer.get("updatedPermissions")?.as_array()?;
    let adds: Vec<&Value> = updates
        .iter()
        .filter(|u| {
            u.get("type").and_then(Value::as_str) == Some("addRules")
                && u.get("behavior").and_then(Value::as_str) == Some("allow")
        })
        .collect();
    let first = adds.first()?;
    Some(match first.get("destination").and_then(Value::as_str) {
        Some("projectSettings" | "localSettings") => AskResponse::ApproveAlwaysProject,
        _ => AskResponse::ApproveAlways,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn always_rules_become_suggestions() {
        let s = suggestions(&["Bash(git log:*)".into(), "Edit".into()]);
        assert_eq!(
            s[0]["rules"],
            json!([{"toolName": "Bash", "ruleContent": "git log:*"}, {"toolName": "Edit"}])
        );
        assert_eq!(s[0]["destination"], "session");
        assert_eq!(suggestions(&[]), json!([]));
    }

    #[test]
    fn answers_become_ask_responses() {
        let input = json!({"a": 1});
        let same = json!({"behavior": "allow", "updatedInput": {"a": 1}});
        assert_eq!(response(&same, &input).0, AskResponse::Approve);
        let edited = json!({"behavior": "allow", "updatedInput": {"a": 2}});
        assert_eq!(
            response(&edited, &input).0,
            AskResponse::ApproveEdited {
                input: json!({"a": 2})
            }
        );
        let always = json!({"behavior": "allow", "updatedPermissions": [
            {"type": "addRules", "rules": [{"toolName": "Bash"}], "behavior": "allow", "destination": "localSettings"}]});
        assert_eq!(
            response(&always, &input).0,
            AskResponse::ApproveAlwaysProject
        );
        let deny = json!({"behavior": "deny", "message": "no", "interrupt": true});
        assert_eq!(
            response(&deny, &input),
            (
                AskResponse::Refuse {
                    message: "no".into()
                },
                true
            )
        );
        assert!(matches!(
            response(&json!({}), &input).0,
            AskResponse::Deny { .. }
        ));
    }
}
