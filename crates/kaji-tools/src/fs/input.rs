//! Lenient decoding of the small scalar parameters models send.
//!
//! Models trained on many tool formats sometimes send `"offset": "10"` or
//! `"-i": "true"`. Refusing those costs a turn and a mistake for no gain, so
//! numbers and booleans are accepted as JSON values or as strings holding
//! one. Anything else is still an error that names the parameter.

use serde::{Deserialize, Deserializer, de::Error as _};
use serde_json::Value;

/// An optional non-negative integer given as a number or a numeric string.
pub(super) fn opt_usize<'de, D: Deserializer<'de>>(de: D) -> Result<Option<usize>, D::Error> {
    match Option::<Value>::deserialize(de)? {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => match n.as_u64() {
            Some(v) => Ok(Some(usize::try_from(v).unwrap_or(usize::MAX))),
            None if n.as_f64().is_some_and(|f| f.fract() == 0.0 && f >= 0.0) => {
                // 10.0 and the like; the range check above makes the cast safe.
                Ok(Some(n.as_f64().map_or(0, |f| f as usize)))
            }
            None => Err(D::Error::custom(format!(
                "expected a non-negative integer, got {n}"
            ))),
        },
        Some(Value::String(s)) => {
            s.trim().parse::<usize>().map(Some).map_err(|_| {
                D::Error::custom(format!("expected a non-negative integer, got \"{s}\""))
            })
        }
        Some(other) => Err(D::Error::custom(format!(
            "expected a non-negative integer, got {other}"
        ))),
    }
}

/// An optional boolean given as `true`/`false` or as the strings
/// `"true"`/`"false"`.
pub(super) fn opt_bool<'de, D: Deserializer<'de>>(de: D) -> Result<Option<bool>, D::Error> {
    match Option::<Value>::deserialize(de)? {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(b)),
        Some(Value::String(s)) => match s.trim() {
            "true" => Ok(Some(true)),
            "false" => Ok(Some(false)),
            _ => Err(D::Error::custom(format!(
                "expected true or false, got \"{s}\""
            ))),
        },
        Some(other) => Err(D::Error::custom(format!(
            "expected true or false, got {other}"
        ))),
    }
}

/// The string parameter `name` of a raw input, if present; used by
/// `access()`, which runs before the input is validated.
pub(super) fn raw_str<'a>(input: &'a Value, name: &str) -> Option<&'a str> {
    input.get(name).and_then(Value::as_str)
}

/// Defines a `deserialize_with` function that runs one of the lenient
/// decoders above and names the parameter in its error, e.g.
/// `named!(fn limit: Option<usize> = opt_usize, "limit");`.
macro_rules! named {
    (fn $fn:ident: $ty:ty = $inner:ident, $field:literal) => {
        fn $fn<'de, D: serde::Deserializer<'de>>(de: D) -> Result<$ty, D::Error> {
            use serde::de::Error as _;
            super::input::$inner(de)
                .map_err(|e| D::Error::custom(format!("parameter {}: {e}", $field)))
        }
    };
}
pub(super) use named;
