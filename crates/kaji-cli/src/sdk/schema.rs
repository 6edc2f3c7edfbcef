//! `--json-schema`: checks a final answer against a JSON Schema (the
//! keywords structured output uses: `type`, `properties`, `required`,
//! `items`, `enum`, `const`, `additionalProperties: false`). It never
//! fetches a `$ref` or anything else.

use serde_json::Value;

/// The answer's JSON: the whole text, or a fenced ```json block in it.
pub fn extract(text: &str) -> Option<Value> {
    let trimmed = text.trim();
    if let Ok(v) = serde_json::from_str(trimmed) {
        return Some(v);
    }
    let start = trimmed.find("```")?;
    let body = &trimmed[start + 3..];
    let body = body.strip_prefix("json").unwrap_or(body);
    let end = body.find("```")?;
    serde_json::from_str(body[..end].trim()).ok()
}

/// The first way `value` breaks `schema`, with the path to it.
pub fn check(value: &Value, schema: &Value) -> Result<(), String> {
    check_at(value, schema, "$")
}

fn check_at(value: &Value, schema: &Value, at: &str) -> Result<(), String> {
    let Some(schema) = schema.as_object() else {
        return Ok(());
    };
    if let Some(t) = schema.get("type") {
        let types: Vec<&str> = match t {
            Value::String(s) => vec![s.as_str()],
            Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        if !types.is_empty() && !types.iter().any(|t| has_type(value, t)) {
            return Err(format!(
                "{at}: expected {}, got {value}",
                types.join(" or ")
            ));
        }
    }
    if let Some(options) = schema.get("enum").and_then(Value::as_array)
        && !options.contains(value)
    {
        return Err(format!(
            "{at}: {value} is not one of {}",
            Value::from(options.clone())
        ));
    }
    if let Some(c) = schema.get("const")
        && c != value
    {
        return Err(format!("{at}: expected {c}, got {value}"));
    }
    if let Value::Object(map) = value {
        check_object(map, schema, at)?;
    }
    if let (Value::Array(items), Some(item_schema)) = (value, schema.get("items")) {
        for (i, item) in items.iter().enumerate() {
            check_at(item, item_schema, &format!("{at}[{i}]"))?;
        }
    }
    Ok(())
}

fn check_object(
    map: &serde_json::Map<String, Value>,
    schema: &serde_json::Map<String, Value>,
    at: &str,
) -> Result<(), String> {
    for name in schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        if !map.contains_key(name) {
            return Err(format!("{at}: the required property `{name}` is missing"));
        }
    }
    let properties = schema.get("properties").and_then(Value::as_object);
    for (key, v) in map {
        match properties.and_then(|p| p.get(key)) {
            Some(s) => check_at(v, s, &format!("{at}.{key}"))?,
            None if schema.get("additionalProperties") == Some(&Value::Bool(false)) => {
                return Err(format!("{at}: the property `{key}` is not allowed"));
            }
            None => {}
        }
    }
    Ok(())
}

fn has_type(value: &Value, t: &str) -> bool {
    match t {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "number" => value.is_number(),
        "integer" => value.is_i64() || value.is_u64(),
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn answers_are_checked_against_the_schema() {
        let schema = json!({"type": "object", "required": ["n"], "additionalProperties": false,
            "properties": {"n": {"type": "integer"}, "tags": {"type": "array", "items": {"enum": ["a", "b"]}}}});
        assert!(check(&json!({"n": 3, "tags": ["a"]}), &schema).is_ok());
        assert!(check(&json!({}), &schema).unwrap_err().contains("`n`"));
        assert!(
            check(&json!({"n": "3"}), &schema)
                .unwrap_err()
                .contains("$.n")
        );
        assert!(check(&json!({"n": 1, "x": 1}), &schema).is_err());
        assert!(
            check(&json!({"n": 1, "tags": ["c"]}), &schema)
                .unwrap_err()
                .contains("$.tags[0]")
        );
    }

    #[test]
    fn json_is_found_bare_or_fenced() {
        assert_eq!(extract(" {\"a\":1} "), Some(json!({"a": 1})));
        assert_eq!(
            extract("Here:\n```json\n{\"a\":2}\n```"),
            Some(json!({"a": 2}))
        );
        assert_eq!(extract("no json"), None);
    }
}
