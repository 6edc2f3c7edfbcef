//! Input schemas derived from the input types with `schemars`: a field's
//! doc comment is its description, so the shape the model is offered and
//! the shape `call` parses are one declaration.
//!
//! The derived schema is brought to the form models have always been sent
//! (byte for byte, which keeps the prompt-cache prefix of every request
//! where it was): no `$schema` or `title`, sub-schemas inlined, optional
//! fields typed without `null`, no `format`, and each object's keys in one
//! order — `type`, constraints, `items`, `description`, `properties`,
//! `required`, `additionalProperties`. It must never add to what a type
//! declares.

use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde_json::{Map, Value};

/// The order of the keys of every schema object; others follow in the
/// order they came.
const KEY_ORDER: [&str; 11] = [
    "type",
    "enum",
    "default",
    "minimum",
    "maximum",
    "minLength",
    "items",
    "description",
    "properties",
    "required",
    "additionalProperties",
];

/// The input schema of a tool whose input is `T`, in the form models are
/// sent. The root object refuses properties it does not name and has no
/// description of its own (the tool's description is the model's).
pub fn input_schema<T: JsonSchema>() -> Value {
    let settings = SchemaSettings::draft2020_12().with(|s| {
        s.meta_schema = None;
        s.inline_subschemas = true;
    });
    let schema = settings.into_generator().into_root_schema_for::<T>();
    let mut value = schema.to_value();
    shape(&mut value);
    if let Value::Object(root) = &mut value {
        // The type's own doc comment is for its readers; the tool's
        // description says what the model needs.
        root.remove("description");
        // An input without parameters still says it has none.
        if !root.contains_key("properties") {
            root.insert("properties".into(), Value::Object(Map::new()));
        }
        root.insert("additionalProperties".into(), Value::Bool(false));
        reorder(root);
    }
    value
}

/// Gives `property` of an input schema the values it may take, known only
/// at run time (the `Skill` tool's skill names), in the sent key order.
pub fn set_enum(schema: &mut Value, property: &str, values: Vec<Value>) {
    if let Some(Value::Object(map)) = schema
        .get_mut("properties")
        .and_then(|p| p.get_mut(property))
    {
        map.insert("enum".into(), Value::Array(values));
        reorder(map);
    }
}

/// One schema object in the sent form, its sub-schemas too.
fn shape(value: &mut Value) {
    let Value::Object(map) = value else {
        return;
    };
    for key in ["$schema", "title", "format", "$defs"] {
        map.remove(key);
    }
    if map.get("default") == Some(&Value::Null) {
        map.remove("default");
    }
    if map.get("additionalProperties") == Some(&Value::Bool(true)) {
        map.remove("additionalProperties");
    }
    if let Some(Value::Array(types)) = map.get("type") {
        let non_null: Vec<&Value> = types.iter().filter(|t| *t != "null").collect();
        if let [one] = non_null.as_slice() {
            let one = (*one).clone();
            map.insert("type".into(), one);
        }
    }
    if let Some(Value::Array(values)) = map.get_mut("enum") {
        values.retain(|v| !v.is_null());
    }
    if let Some(Value::Object(props)) = map.get_mut("properties") {
        props.values_mut().for_each(shape);
    }
    if let Some(items) = map.get_mut("items") {
        shape(items);
    }
    reorder(map);
}

/// Puts the keys of `map` in [`KEY_ORDER`] (a removal may have moved
/// them), the others after them in the order they are in.
fn reorder(map: &mut Map<String, Value>) {
    let mut known: Vec<Option<(String, Value)>> = vec![None; KEY_ORDER.len()];
    let mut others = Vec::new();
    for (key, value) in std::mem::take(map) {
        match KEY_ORDER.iter().position(|k| *k == key) {
            Some(i) => known[i] = Some((key, value)),
            None => others.push((key, value)),
        }
    }
    map.extend(known.into_iter().flatten().chain(others));
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// An input of every shape the tools use.
    #[derive(JsonSchema)]
    #[allow(dead_code)]
    struct Sample {
        /// A required path.
        path: String,
        /// An optional count.
        #[schemars(range(min = 1))]
        count: Option<u32>,
        /// Some words.
        words: Option<Vec<String>>,
    }

    #[test]
    fn a_derived_schema_has_the_sent_form() {
        assert_eq!(
            input_schema::<Sample>(),
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "A required path."},
                    "count": {"type": "integer", "minimum": 1, "description": "An optional count."},
                    "words": {"type": "array", "items": {"type": "string"}, "description": "Some words."}
                },
                "required": ["path"],
                "additionalProperties": false
            })
        );
    }
}
