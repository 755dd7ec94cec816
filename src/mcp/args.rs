//! Tool arguments as clients send them, converted into core types.
//!
//! prompt-diary answers a bad argument with a tool result (`isError: true`, text
//! `Error executing tool <name>: ...` naming the argument), not a protocol error, and LLM
//! clients rely on reading that text. So arguments are first captured as raw JSON
//! ([`Arg`], which never fails to deserialize) and checked here, where a failure becomes
//! such a result. Coercions follow pydantic's lax mode where clients depend on them.

use std::borrow::Cow;
use std::marker::PhantomData;

use rmcp::schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::de::{Deserialize, Deserializer, Visitor};
use serde_json::Value;

/// A JSON object argument as the client sent it.
pub type JsonObject = serde_json::Map<String, Value>;

/// The core's JSON value for an argument (Python's view of numbers: integers stay exact).
pub fn to_py(v: &Value) -> crate::pyjson::Value {
    use crate::pyjson::Value as Py;
    match v {
        Value::Null => Py::Null,
        Value::Bool(b) => Py::Bool(*b),
        Value::Number(n) if n.is_i64() || n.is_u64() => Py::Int(n.to_string()),
        Value::Number(n) => Py::Float(n.as_f64().unwrap_or(f64::NAN)),
        Value::String(s) => Py::String(s.clone()),
        Value::Array(items) => Py::Array(items.iter().map(to_py).collect()),
        Value::Object(map) => Py::Object(map.iter().map(|(k, v)| (k.clone(), to_py(v))).collect()),
    }
}

/// One argument, raw: `None` when absent or `null`. Its JSON schema is `T`'s.
#[derive(Debug, Clone, PartialEq)]
pub struct Arg<T> {
    raw: Option<Value>,
    _type: PhantomData<T>,
}

impl<T> Default for Arg<T> {
    fn default() -> Self {
        Arg::new(None)
    }
}

impl<T> Arg<T> {
    pub fn new(raw: Option<Value>) -> Self {
        Arg {
            raw,
            _type: PhantomData,
        }
    }
}

impl<'de, T> Deserialize<'de> for Arg<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // `deserialize_option` is also what serde calls for a missing field, so an absent
        // argument arrives here as `None` instead of failing the whole argument object.
        struct RawVisitor;
        impl<'de> Visitor<'de> for RawVisitor {
            type Value = Option<Value>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_none<E>(self) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
                Value::deserialize(d).map(Some)
            }
        }
        deserializer.deserialize_option(RawVisitor).map(Arg::new)
    }
}

impl<T: JsonSchema> JsonSchema for Arg<T> {
    fn schema_name() -> Cow<'static, str> {
        T::schema_name()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        T::json_schema(generator)
    }

    fn inline_schema() -> bool {
        true
    }
}

/// An optional argument that is present: `null` is kept as a value (a wrong one for
/// most arguments), unlike [`Arg`]'s own reading, where `null` is absent. With
/// `#[serde(default)]`, an absent argument is still `None`.
pub fn present<'de, D: Deserializer<'de>, T>(deserializer: D) -> Result<Arg<T>, D::Error> {
    Value::deserialize(deserializer).map(|v| Arg::new(Some(v)))
}

/// Problems found in one call's arguments, reported together like pydantic does.
#[derive(Debug, Default)]
pub struct ArgErrors {
    errors: Vec<(&'static str, String)>,
}

impl ArgErrors {
    fn push(&mut self, name: &'static str, problem: impl Into<String>) {
        self.errors.push((name, problem.into()));
    }

    /// `None` when every argument was fine.
    pub fn into_message(self, tool: &str) -> Option<String> {
        if self.errors.is_empty() {
            return None;
        }
        let count = self.errors.len();
        let plural = if count == 1 { "" } else { "s" };
        let mut text = format!("{count} validation error{plural} for {tool}Arguments");
        for (name, problem) in self.errors {
            text.push_str(&format!("\n{name}\n  {problem}"));
        }
        Some(text)
    }

    /// A required string argument.
    pub fn string(&mut self, name: &'static str, arg: &Arg<String>) -> String {
        match &arg.raw {
            Some(Value::String(s)) => s.clone(),
            Some(_) => {
                self.push(name, "Input should be a valid string");
                String::new()
            }
            None => {
                self.push(name, "Field required");
                String::new()
            }
        }
    }

    /// A required integer argument: integers, integral floats (`4.0`), booleans, and
    /// strings holding a decimal integer, as pydantic's lax mode accepts them.
    pub fn integer(&mut self, name: &'static str, arg: &Arg<i64>) -> i64 {
        let Some(raw) = &arg.raw else {
            self.push(name, "Field required");
            return 0;
        };
        match lax_integer(raw) {
            Ok(n) => n,
            Err(problem) => {
                self.push(name, problem);
                0
            }
        }
    }

    /// A required object argument. A string holding a JSON object is accepted too: LLM
    /// clients often send nested objects that way (prompt-diary's server parses them).
    pub fn object(&mut self, name: &'static str, arg: &Arg<JsonObject>) -> crate::pyjson::Value {
        let object = match &arg.raw {
            None => {
                self.push(name, "Field required");
                return crate::pyjson::Value::Null;
            }
            Some(Value::String(s)) => serde_json::from_str::<Value>(s)
                .ok()
                .filter(Value::is_object),
            Some(v) => Some(v.clone()).filter(Value::is_object),
        };
        match object {
            Some(v) => to_py(&v),
            None => {
                self.push(name, "Input should be a valid dictionary");
                crate::pyjson::Value::Null
            }
        }
    }

    /// A required array argument (a string holding a JSON array is accepted too).
    pub fn array(&mut self, name: &'static str, arg: &Arg<Vec<Value>>) -> crate::pyjson::Value {
        let array = match &arg.raw {
            None => {
                self.push(name, "Field required");
                return crate::pyjson::Value::Null;
            }
            Some(Value::String(s)) => serde_json::from_str::<Value>(s)
                .ok()
                .filter(Value::is_array),
            Some(v) => Some(v.clone()).filter(Value::is_array),
        };
        match array {
            Some(v) => to_py(&v),
            None => {
                self.push(name, "Input should be a valid list");
                crate::pyjson::Value::Null
            }
        }
    }

    /// An optional argument restricted to a few literal strings; `None` if absent.
    /// The paged read's `cursor`: absent or null, or `{line, offset = 0}` of integers.
    pub fn cursor(&mut self, arg: &Arg<Value>) -> Option<(i64, i64)> {
        let raw = arg.raw.as_ref()?;
        let Value::Object(map) = raw else {
            self.push(
                "cursor",
                "Input should be a dictionary or an instance of ReadCursor",
            );
            return None;
        };
        let line = match map.get("line") {
            None => Err("Field required"),
            Some(v) => lax_integer(v),
        };
        let offset = map.get("offset").map_or(Ok(0), lax_integer);
        if let Err(problem) = line {
            self.push("cursor.line", problem);
        }
        if let Err(problem) = offset {
            self.push("cursor.offset", problem);
        }
        Some((line.ok()?, offset.ok()?))
    }

    pub fn literal<T: Copy>(
        &mut self,
        name: &'static str,
        arg: &Arg<T>,
        choices: &[(&str, T)],
    ) -> Option<T> {
        let raw = arg.raw.as_ref()?;
        let found = raw
            .as_str()
            .and_then(|s| choices.iter().find(|(c, _)| *c == s));
        match found {
            Some((_, value)) => Some(*value),
            None => {
                let names: Vec<String> = choices.iter().map(|(c, _)| format!("'{c}'")).collect();
                self.push(name, format!("Input should be {}", names.join(" or ")));
                None
            }
        }
    }
}

impl ArgErrors {
    /// An optional string argument; `None` when absent or `null`.
    pub fn optional_string(&mut self, name: &'static str, arg: &Arg<String>) -> Option<String> {
        arg.raw.as_ref()?;
        Some(self.string(name, arg))
    }

    /// An optional integer argument (lax, as [`ArgErrors::integer`]); `None` when absent
    /// or `null`.
    pub fn optional_integer(&mut self, name: &'static str, arg: &Arg<i64>) -> Option<i64> {
        arg.raw.as_ref()?;
        Some(self.integer(name, arg))
    }
}

fn lax_integer(raw: &Value) -> Result<i64, &'static str> {
    const NOT_INT: &str = "Input should be a valid integer";
    match raw {
        Value::Bool(b) => Ok(i64::from(*b)),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                return Ok(i);
            }
            let f = n.as_f64().ok_or(NOT_INT)?;
            if f.fract() != 0.0 {
                return Err("Input should be a valid integer, got a number with a fractional part");
            }
            // Integral but beyond i64 (huge JSON integers arrive as floats): saturate, which
            // keeps every range check's outcome.
            Ok(f as i64)
        }
        Value::String(s) => {
            let t: String = s.trim().chars().filter(|c| *c != '_').collect();
            let t = t.strip_suffix(".0").unwrap_or(&t);
            let digits = t.strip_prefix(['+', '-']).unwrap_or(t);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return Err(
                    "Input should be a valid integer, unable to parse string as an integer",
                );
            }
            t.parse::<i64>().map_err(|_| NOT_INT)
        }
        _ => Err(NOT_INT),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn integer(raw: Value) -> Result<i64, String> {
        let mut errors = ArgErrors::default();
        let n = errors.integer("start_line", &Arg::new(Some(raw)));
        errors.into_message("t").map_or(Ok(n), Err)
    }

    #[test]
    fn integers_are_lax_like_pydantic() {
        for (raw, expect) in [
            (json!(4), Ok(4)),
            (json!(4.0), Ok(4)),
            (json!(1e2), Ok(100)),
            (json!(true), Ok(1)),
            (json!(false), Ok(0)),
            (json!("4"), Ok(4)),
            (json!(" 4 "), Ok(4)),
            (json!("+5"), Ok(5)),
            (json!("-3"), Ok(-3)),
            (json!("1_000"), Ok(1000)),
            (json!("4.0"), Ok(4)),
        ] {
            assert_eq!(integer(raw.clone()), expect, "{raw}");
        }
        for raw in [
            json!(4.5),
            json!("1e2"),
            json!("0x10"),
            json!([1]),
            json!({}),
        ] {
            let err = integer(raw.clone()).expect_err("rejected");
            assert!(
                err.starts_with("1 validation error for tArguments\nstart_line\n  Input should be"),
                "{err}"
            );
        }
    }

    #[test]
    fn missing_arguments_are_named() {
        #[derive(serde::Deserialize)]
        struct Args {
            project_key: Arg<String>,
            end_line: Arg<i64>,
        }
        let args: Args = serde_json::from_value(json!({"project_key": 5})).expect("never fails");
        let mut errors = ArgErrors::default();
        errors.string("project_key", &args.project_key);
        errors.integer("end_line", &args.end_line);
        assert_eq!(
            errors.into_message("read_session_lines").unwrap(),
            "2 validation errors for read_session_linesArguments\nproject_key\n  Input should be a valid string\nend_line\n  Field required"
        );
    }

    #[test]
    fn literals_accept_only_their_choices() {
        let choices = [("compact", 0), ("full", 1)];
        let mut errors = ArgErrors::default();
        assert_eq!(
            errors.literal("mode", &Arg::new(Some(json!("full"))), &choices),
            Some(1)
        );
        assert_eq!(
            errors.literal::<i32>("mode", &Arg::new(None), &choices),
            None
        );
        assert!(errors.into_message("t").is_none());
        let mut errors = ArgErrors::default();
        errors.literal("mode", &Arg::new(Some(json!("Full"))), &choices);
        assert_eq!(
            errors.into_message("t").unwrap(),
            "1 validation error for tArguments\nmode\n  Input should be 'compact' or 'full'"
        );
    }
}
