//! The output side of sparse records: a small JSON tree, written compact with sorted
//! keys after the sparse rule, and the bounded previews of long text.

use crate::util::pyjson::{self, Value, ceil_suffix, floor_prefix, write_string};

/// A value of a sparse record before the sparse rule drops its empty members.
#[derive(Debug, Clone, PartialEq)]
pub enum J {
    Null,
    Bool(bool),
    /// An integer as decimal text (any size).
    Int(String),
    Str(String),
    Arr(Vec<J>),
    Obj(Vec<(&'static str, J)>),
}

impl J {
    pub fn opt_str(s: Option<String>) -> J {
        s.map_or(J::Null, J::Str)
    }

    pub fn int(n: u64) -> J {
        J::Int(itoa::Buffer::new().format(n).to_owned())
    }

    /// Whether the sparse rule drops this value: null, false, the empty string and the
    /// empty array. Integer 0 and empty objects stay.
    fn is_empty(&self) -> bool {
        match self {
            J::Null | J::Bool(false) => true,
            J::Str(s) => s.is_empty(),
            J::Arr(items) => items.is_empty(),
            _ => false,
        }
    }
}

/// Writes `value` as compact JSON with sorted keys, dropping every object member whose
/// value is empty ([`J::is_empty`]) except a string `text`, at any depth.
pub fn write_sparse(out: &mut String, value: &J) {
    match value {
        J::Null => out.push_str("null"),
        J::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        J::Int(n) => out.push_str(n),
        J::Str(s) => write_string(out, s),
        J::Arr(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_sparse(out, item);
            }
            out.push(']');
        }
        J::Obj(members) => {
            let mut kept: Vec<&(&'static str, J)> = members
                .iter()
                .filter(|(key, v)| (*key == "text" && matches!(v, J::Str(_))) || !v.is_empty())
                .collect();
            kept.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (key, item)) in kept.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(out, key);
                out.push(':');
                write_sparse(out, item);
            }
            out.push('}');
        }
    }
}

/// Text payloads longer than this many UTF-8 bytes are trimmed.
pub const SHORT_BYTES: usize = 1024;
pub const HEAD_BYTES: usize = 320;
pub const TAIL_BYTES: usize = 160;
const ELISION: &str = "\n...[trimmed]...\n";

/// A tool payload as shown: whole up to [`SHORT_BYTES`], else its first 320 and last
/// 160 bytes (whole characters) around the elision mark. The flag says it was trimmed.
pub fn preview(text: String) -> (String, bool) {
    let (shown, whole) = preview_keeping(text);
    (shown, whole.is_some())
}

/// [`preview`], keeping the whole text when it was trimmed (what a handle names).
pub fn preview_keeping(text: String) -> (String, Option<String>) {
    if text.len() <= SHORT_BYTES {
        return (text, None);
    }
    bounded_keeping(text, HEAD_BYTES, TAIL_BYTES)
}

/// `text` cut to its first `head` and last `tail` bytes (whole characters) around the
/// elision mark, when longer than `head`; without a tail part when `tail` is 0 or the
/// text is no longer than both parts. The whole text is kept when it was cut.
pub fn bounded_keeping(text: String, head: usize, tail: usize) -> (String, Option<String>) {
    if text.len() <= head {
        return (text, None);
    }
    let mut out = floor_prefix(&text, head).to_owned();
    out.push_str(ELISION);
    if tail > 0 && text.len() > head + tail {
        out.push_str(ceil_suffix(&text, tail));
    }
    (out, Some(text))
}

/// A value as text: nothing for null or absent, a string as it is, anything else as
/// Python's `json.dumps(value, ensure_ascii=False, sort_keys=True)`.
pub fn json_text(value: Option<&Value>) -> String {
    match value {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(v) => pyjson::to_sorted_compact(v),
    }
}

/// Python truthiness of a JSON value.
pub fn truthy(value: Option<&Value>) -> bool {
    match value {
        None | Some(Value::Null) | Some(Value::Bool(false)) => false,
        Some(Value::Int(n)) => n != "0",
        Some(Value::Float(f)) => *f != 0.0,
        Some(Value::String(s)) => !s.is_empty(),
        Some(Value::Array(a)) => !a.is_empty(),
        Some(Value::Object(m)) => !m.is_empty(),
        Some(Value::Bool(true)) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sparse_keeps_text_and_zero() {
        let v = J::Obj(vec![
            ("text", J::Str(String::new())),
            ("name", J::Str(String::new())),
            ("line", J::int(0)),
            ("truncated", J::Bool(false)),
            (
                "parts",
                J::Arr(vec![J::Obj(vec![
                    ("text", J::Str("a".into())),
                    ("x", J::Null),
                ])]),
            ),
            ("e", J::Arr(vec![])),
        ]);
        let mut out = String::new();
        write_sparse(&mut out, &v);
        assert_eq!(out, r#"{"line":0,"parts":[{"text":"a"}],"text":""}"#);
    }

    #[test]
    fn previews() {
        assert_eq!(preview("a".repeat(1024)), ("a".repeat(1024), false));
        let (p, t) = preview("é".repeat(600));
        assert!(t);
        assert_eq!(p, format!("{}{ELISION}{}", "é".repeat(160), "é".repeat(80)));
        assert_eq!(
            bounded_keeping("x".repeat(321), 320, 0).0,
            format!("{}{ELISION}", "x".repeat(320))
        );
    }
}
