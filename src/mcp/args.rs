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

/// A tool's arguments as the client sent them, and parsed into `T`. pydantic's report of
/// a missing argument shows the whole object, unknown members included.
#[derive(Debug)]
pub struct Call<T> {
    pub args: T,
    pub raw: JsonObject,
}

impl<'de, T: serde::de::DeserializeOwned> Deserialize<'de> for Call<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = JsonObject::deserialize(deserializer)?;
        let args = T::deserialize(&Value::Object(raw.clone())).map_err(serde::de::Error::custom)?;
        Ok(Call { args, raw })
    }
}

impl<T: JsonSchema> JsonSchema for Call<T> {
    fn schema_name() -> Cow<'static, str> {
        T::schema_name()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        T::json_schema(generator)
    }

    fn inline_schema() -> bool {
        T::inline_schema()
    }
}

/// How much of each problem an argument error tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Detail {
    /// The location and message only (prompt-diary 0.2.10's server).
    Message,
    /// pydantic's whole line: `[type=…, input_value=…, input_type=…]` and the link to the
    /// error's documentation (prompt-diary 0.2.20's server, with the pydantic it installs).
    Pydantic,
}

/// The pydantic release whose documentation links [`Detail::Pydantic`] errors carry.
const PYDANTIC_DOCS: &str = "https://errors.pydantic.dev/2.14/v/";

/// One problem: where, pydantic's message and error type, and the value it was about
/// (`None`: the whole arguments object, which is what a missing top-level argument shows).
#[derive(Debug)]
struct Problem {
    loc: &'static str,
    message: String,
    kind: &'static str,
    input: Option<Value>,
}

/// Problems found in one call's arguments, reported together like pydantic does.
#[derive(Debug, Default)]
pub struct ArgErrors<'a> {
    raw: Option<&'a JsonObject>,
    errors: Vec<Problem>,
}

impl<'a> ArgErrors<'a> {
    /// The checks of one call whose arguments object was `raw`.
    pub fn new(raw: &'a JsonObject) -> Self {
        ArgErrors {
            raw: Some(raw),
            errors: Vec::new(),
        }
    }

    fn push(
        &mut self,
        loc: &'static str,
        message: impl Into<String>,
        kind: &'static str,
        input: Option<&Value>,
    ) {
        self.errors.push(Problem {
            loc,
            message: message.into(),
            kind,
            input: input.cloned(),
        });
    }

    fn missing(&mut self, loc: &'static str) {
        self.push(loc, "Field required", "missing", None);
    }

    /// Whether every argument was fine.
    pub fn is_empty(&self) -> bool {
        self.errors.is_empty()
    }

    /// `None` when every argument was fine.
    pub fn into_message(self, tool: &str, detail: Detail) -> Option<String> {
        if self.errors.is_empty() {
            return None;
        }
        let count = self.errors.len();
        let plural = if count == 1 { "" } else { "s" };
        let mut text = format!("{count} validation error{plural} for {tool}Arguments");
        let whole = Value::Object(self.raw.cloned().unwrap_or_default());
        for p in &self.errors {
            text.push_str(&format!("\n{}\n  {}", p.loc, p.message));
            if detail == Detail::Pydantic {
                let input = p.input.as_ref().unwrap_or(&whole);
                text.push_str(&format!(
                    " [type={}, input_value={}, input_type={}]\n    For further information visit {PYDANTIC_DOCS}{}",
                    p.kind,
                    truncated_repr(&py_repr(input)),
                    py_type(input),
                    p.kind
                ));
            }
        }
        Some(text)
    }

    /// A required string argument.
    pub fn string(&mut self, name: &'static str, arg: &Arg<String>) -> String {
        match &arg.raw {
            Some(Value::String(s)) => s.clone(),
            Some(v) => {
                self.push(
                    name,
                    "Input should be a valid string",
                    "string_type",
                    Some(v),
                );
                String::new()
            }
            None => {
                self.missing(name);
                String::new()
            }
        }
    }

    /// A required integer argument: integers, integral floats (`4.0`), booleans, and
    /// strings holding a decimal integer, as pydantic's lax mode accepts them.
    pub fn integer(&mut self, name: &'static str, arg: &Arg<i64>) -> i64 {
        let Some(raw) = &arg.raw else {
            self.missing(name);
            return 0;
        };
        match lax_integer(raw) {
            Ok(n) => n,
            Err((problem, kind)) => {
                self.push(name, problem, kind, Some(raw));
                0
            }
        }
    }

    /// A required object argument. A string holding a JSON object is accepted too: LLM
    /// clients often send nested objects that way (prompt-diary's server parses them).
    pub fn object(&mut self, name: &'static str, arg: &Arg<JsonObject>) -> crate::pyjson::Value {
        let object = match &arg.raw {
            None => {
                self.missing(name);
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
                self.push(
                    name,
                    "Input should be a valid dictionary",
                    "dict_type",
                    arg.raw.as_ref(),
                );
                crate::pyjson::Value::Null
            }
        }
    }

    /// A required array argument (a string holding a JSON array is accepted too).
    pub fn array(&mut self, name: &'static str, arg: &Arg<Vec<Value>>) -> crate::pyjson::Value {
        let array = match &arg.raw {
            None => {
                self.missing(name);
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
                self.push(
                    name,
                    "Input should be a valid list",
                    "list_type",
                    arg.raw.as_ref(),
                );
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
                "dataclass_type",
                Some(raw),
            );
            return None;
        };
        let line = match map.get("line") {
            None => Err(("Field required", "missing", raw)),
            Some(v) => lax_integer(v).map_err(|(m, k)| (m, k, v)),
        };
        let offset = match map.get("offset") {
            None => Ok(0),
            Some(v) => lax_integer(v).map_err(|(m, k)| (m, k, v)),
        };
        if let Err((problem, kind, input)) = line {
            self.push("cursor.line", problem, kind, Some(input));
        }
        if let Err((problem, kind, input)) = offset {
            self.push("cursor.offset", problem, kind, Some(input));
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
                self.push(
                    name,
                    format!("Input should be {}", names.join(" or ")),
                    "literal_error",
                    Some(raw),
                );
                None
            }
        }
    }
}

impl ArgErrors<'_> {
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

/// Python's `repr` of a JSON value as the server received it.
fn py_repr(v: &Value) -> String {
    match v {
        Value::Null => "None".into(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::Number(n) if n.is_i64() || n.is_u64() => n.to_string(),
        Value::Number(n) => crate::pyjson::float_repr(n.as_f64().unwrap_or(f64::NAN)),
        Value::String(s) => crate::pyjson::py_repr(s),
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(py_repr).collect();
            format!("[{}]", items.join(", "))
        }
        Value::Object(map) => {
            let members: Vec<String> = map
                .iter()
                .map(|(k, v)| format!("{}: {}", crate::pyjson::py_repr(k), py_repr(v)))
                .collect();
            format!("{{{}}}", members.join(", "))
        }
    }
}

/// The Python type name of a JSON value.
fn py_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "NoneType",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_i64() || n.is_u64() => "int",
        Value::Number(_) => "float",
        Value::String(_) => "str",
        Value::Array(_) => "list",
        Value::Object(_) => "dict",
    }
}

/// pydantic shortens an input's repr of over 50 bytes to its first 25 and last 24 bytes
/// around `...`, each end moved to the nearest character boundary inside it.
fn truncated_repr(repr: &str) -> Cow<'_, str> {
    if repr.len() <= 50 {
        return Cow::Borrowed(repr);
    }
    Cow::Owned(format!(
        "{}...{}",
        crate::pyjson::floor_prefix(repr, 25),
        crate::pyjson::ceil_suffix(repr, 24)
    ))
}

/// An integer as pydantic's lax mode reads it, or pydantic's message and error type.
fn lax_integer(raw: &Value) -> Result<i64, (&'static str, &'static str)> {
    const NOT_INT: (&str, &str) = ("Input should be a valid integer", "int_type");
    match raw {
        Value::Bool(b) => Ok(i64::from(*b)),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                return Ok(i);
            }
            let f = n.as_f64().ok_or(NOT_INT)?;
            if f.fract() != 0.0 {
                return Err((
                    "Input should be a valid integer, got a number with a fractional part",
                    "int_from_float",
                ));
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
                return Err((
                    "Input should be a valid integer, unable to parse string as an integer",
                    "int_parsing",
                ));
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
        errors.into_message("t", Detail::Message).map_or(Ok(n), Err)
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
            errors
                .into_message("read_session_lines", Detail::Message)
                .unwrap(),
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
        assert!(errors.into_message("t", Detail::Message).is_none());
        let mut errors = ArgErrors::default();
        errors.literal("mode", &Arg::new(Some(json!("Full"))), &choices);
        assert_eq!(
            errors.into_message("t", Detail::Message).unwrap(),
            "1 validation error for tArguments\nmode\n  Input should be 'compact' or 'full'"
        );
    }

    /// prompt-diary 0.2.20's server (pydantic 2.14) answered these calls with these texts.
    #[test]
    fn pydantic_detail_matches_prompt_diary_0_2_20() {
        #[derive(serde::Deserialize)]
        struct Read {
            project_key: Arg<String>,
            start_line: Arg<i64>,
            #[serde(default)]
            cursor: Arg<Value>,
        }
        fn check(call: Value, expect: &str) {
            let Call { args, raw } = serde_json::from_value::<Call<Read>>(call).unwrap();
            let mut errors = ArgErrors::new(&raw);
            errors.string("project_key", &args.project_key);
            errors.integer("start_line", &args.start_line);
            errors.cursor(&args.cursor);
            let got = errors.into_message("read_session_lines", Detail::Pydantic);
            assert_eq!(got.as_deref(), Some(expect));
        }
        let docs = "\n    For further information visit https://errors.pydantic.dev/2.14/v/";
        check(
            json!({"project_key": "p", "start_line": 1, "cursor": {"offset": "y".repeat(80), "z": [1, 2, 3]}}),
            &format!(
                "2 validation errors for read_session_linesArguments\ncursor.line\n  Field required \
                 [type=missing, input_value={{'offset': 'yyyyyyyyyyyyy...yyyyyy', 'z': [1, 2, 3]}}, \
                 input_type=dict]{docs}missing\ncursor.offset\n  Input should be a valid integer, \
                 unable to parse string as an integer [type=int_parsing, \
                 input_value='yyyyyyyyyyyyyyyyyyyyyyyy...yyyyyyyyyyyyyyyyyyyyyyy', input_type=str]{docs}int_parsing"
            ),
        );
        check(
            json!({"project_key": "p", "start_line": vec![1; 40]}),
            &format!(
                "1 validation error for read_session_linesArguments\nstart_line\n  Input should be a \
                 valid integer [type=int_type, input_value=[1, 1, 1, 1, 1, 1, 1, 1, ... 1, 1, 1, 1, 1, \
                 1, 1, 1], input_type=list]{docs}int_type"
            ),
        );
        check(
            json!({"project_key": "p", "start_line": 1, "cursor": {"line": "é".repeat(60)}}),
            &format!(
                "1 validation error for read_session_linesArguments\ncursor.line\n  Input should be a \
                 valid integer, unable to parse string as an integer [type=int_parsing, \
                 input_value='éééééééééééé...ééééééééééé', input_type=str]{docs}int_parsing"
            ),
        );
        check(
            json!({"project_key": 5, "start_line": {"a": null, "b": true, "c": 1.5}, "cursor": "bad"}),
            &format!(
                "3 validation errors for read_session_linesArguments\nproject_key\n  Input should be a \
                 valid string [type=string_type, input_value=5, input_type=int]{docs}string_type\n\
                 start_line\n  Input should be a valid integer [type=int_type, input_value={{'a': None, \
                 'b': True, 'c': 1.5}}, input_type=dict]{docs}int_type\ncursor\n  Input should be a \
                 dictionary or an instance of ReadCursor [type=dataclass_type, input_value='bad', \
                 input_type=str]{docs}dataclass_type"
            ),
        );
        check(
            json!({"chain": "x"}),
            &format!(
                "2 validation errors for read_session_linesArguments\nproject_key\n  Field required \
                 [type=missing, input_value={{'chain': 'x'}}, input_type=dict]{docs}missing\n\
                 start_line\n  Field required [type=missing, input_value={{'chain': 'x'}}, \
                 input_type=dict]{docs}missing"
            ),
        );
    }
}
