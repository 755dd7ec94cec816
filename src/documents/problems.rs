//! The validation toolkit the write tools share (evidence chains, work items, the daily
//! report's slots): a structured problem, the problems of one parse in the order found,
//! and prompt-diary's lenient coercions of JSON values.

use serde::Serialize;

use crate::util::pyjson::{self, Map, Value};

/// One structured error: `{"path", "message", "hint"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    pub path: String,
    pub message: String,
    pub hint: String,
}

impl Problem {
    pub fn new(
        path: impl Into<String>,
        message: impl Into<String>,
        hint: impl Into<String>,
    ) -> Self {
        Problem {
            path: path.into(),
            message: message.into(),
            hint: hint.into(),
        }
    }
}

/// The hint of a string field that is missing, blank or not a string.
pub const STRING_HINT: &str = "provide a concise non-empty string";
/// The hint of a malformed turn reference.
pub const REF_HINT: &str =
    "reference a turn as {\"session_ref\": \"S0001\", \"turn_ref\": \"T0001\"}";
/// The allowed values sorted and joined, as the controlled-value hint lists them.
fn controlled_hint(allowed: &[&str]) -> String {
    let mut sorted = allowed.to_vec();
    sorted.sort_unstable();
    format!("use a controlled value such as {}", sorted.join(", "))
}

/// The problems a chain-only parse has found, in the order it found them, with the field
/// checks every parse (evidence chain, work item, daily-report slots) shares.
#[derive(Debug)]
pub struct Problems {
    found: Vec<Problem>,
    /// The hint of a non-empty-string failure (it differs between tools).
    text_hint: &'static str,
}

impl Problems {
    pub fn new(text_hint: &'static str) -> Self {
        Problems {
            found: Vec::new(),
            text_hint,
        }
    }

    pub fn push(
        &mut self,
        path: impl Into<String>,
        message: impl Into<String>,
        hint: impl Into<String>,
    ) {
        self.found.push(Problem::new(path, message, hint));
    }

    /// `value` if nothing was found, else the problems.
    pub fn finish<T>(self, value: T) -> Result<T, Vec<Problem>> {
        if self.found.is_empty() {
            Ok(value)
        } else {
            Err(self.found)
        }
    }

    /// A non-empty string, kept verbatim; `null` in its place when it is not one.
    pub fn text(&mut self, path: &str, v: Option<&Value>) -> Value {
        match non_empty(v) {
            Some(s) => Value::String(s.to_owned()),
            None => {
                self.push(
                    path,
                    format!("{path} must be a non-empty string"),
                    self.text_hint,
                );
                Value::Null
            }
        }
    }

    /// `obj.field` as a non-empty string, reported at `{base}.{field}`.
    pub fn text_field(&mut self, base: &str, obj: &Map, field: &str) -> Value {
        self.text(&format!("{base}.{field}"), obj.get(field))
    }

    /// Each element of a list (leniently coerced) as a non-empty string.
    pub fn strings(&mut self, path: &str, v: Option<&Value>) -> Value {
        Value::Array(
            as_list(v)
                .iter()
                .enumerate()
                .map(|(i, x)| self.text(&format!("{path}[{i}]"), Some(x)))
                .collect(),
        )
    }

    /// `obj.field` as one of `allowed`, reported at `{base}.{field}`.
    pub fn controlled_field(
        &mut self,
        base: &str,
        obj: &Map,
        field: &str,
        label: &str,
        allowed: &[&str],
    ) -> Value {
        self.controlled(&format!("{base}.{field}"), label, obj.get(field), allowed)
    }

    /// One of `allowed`, exactly (no trimming, no case folding).
    pub fn controlled(
        &mut self,
        path: &str,
        label: &str,
        v: Option<&Value>,
        allowed: &[&str],
    ) -> Value {
        match v.and_then(Value::as_str).filter(|s| allowed.contains(s)) {
            Some(s) => Value::String(s.to_owned()),
            None => {
                self.push(
                    path,
                    format!("{path} must be a controlled {label} value"),
                    controlled_hint(allowed),
                );
                Value::Null
            }
        }
    }
}

/// `v` if it is an object, else an empty one (prompt-diary's lenient coercion).
pub fn as_object(v: Option<&Value>) -> &Map {
    static EMPTY: std::sync::OnceLock<Map> = std::sync::OnceLock::new();
    match v {
        Some(Value::Object(m)) => m,
        _ => EMPTY.get_or_init(Map::new),
    }
}

/// `v` if it is an array, else an empty one.
pub fn as_list(v: Option<&Value>) -> &[Value] {
    match v {
        Some(Value::Array(items)) => items,
        _ => &[],
    }
}

/// Each element of the list `v` (leniently coerced) as an object, with the path its
/// problems are reported at (`{path}[i]`).
pub fn objects<'a>(
    v: Option<&'a Value>,
    path: &'a str,
) -> impl Iterator<Item = (String, &'a Map)> + 'a {
    as_list(v)
        .iter()
        .enumerate()
        .map(move |(i, o)| (format!("{path}[{i}]"), as_object(Some(o))))
}

/// A non-blank string (Python whitespace), returned verbatim.
pub fn non_empty(v: Option<&Value>) -> Option<&str> {
    v.and_then(Value::as_str).filter(|s| !pyjson::is_blank(s))
}
