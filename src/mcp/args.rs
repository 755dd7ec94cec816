//! Tool arguments as clients send them, checked as prompt-diary's server checks them.
//!
//! prompt-diary's server (FastMCP) validates a call's arguments with pydantic before the
//! tool runs, and answers a bad one with a tool result (`isError: true`, text
//! `Error executing tool <name>: <pydantic's report>`), not a protocol error; LLM clients
//! read that text. Both served releases print pydantic's whole report: each problem's
//! location and message, `[type=…, input_value=…, input_type=…]` and the link to the
//! error's documentation. So the arguments are taken as the raw JSON object, seen as
//! Python sees it (integers of any size, Python's floats), and checked here with
//! pydantic's lax rules, in the order of the tool's parameters.

use std::borrow::Cow;
use std::marker::PhantomData;
use std::sync::Arc;

use rmcp::model::Extensions;
use rmcp::schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::de::{Deserialize, Deserializer};
use serde_json::Value;

use crate::read::LineNumber;
use crate::util::pyjson::{self, Value as Py};

/// A JSON object argument as the client sent it.
pub type JsonObject = serde_json::Map<String, Value>;

/// The pydantic release whose documentation links the reports carry: the one prompt-diary
/// 0.2.10 and 0.2.20 install (2.14).
const PYDANTIC_DOCS: &str = "https://errors.pydantic.dev/2.14/v/";

/// A JSON value as Python's `json` reads it, from serde_json's reading (which holds an
/// integer beyond 64 bits as a float; [`Exact`] has the exact one when the transport had
/// the text).
pub fn to_py(v: &Value) -> Py {
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

/// A `tools/call`'s arguments read from the request's own text with Python's rules, for
/// the tools to use instead of serde_json's reading. The stdio transport attaches it to
/// a request whose arguments hold a number serde_json cannot hold as Python does.
#[derive(Debug, Clone)]
pub struct Exact(pub Arc<pyjson::Map>);

/// The [`Exact`] arguments of a JSON-RPC message, given its text and serde_json's reading:
/// `Some` for a `tools/call` whose arguments hold a number that is not a 64-bit integer
/// (an integer beyond 64 bits, which serde_json turns into a float, or a float, which it
/// may round otherwise than Python).
pub fn exact_arguments(line: &[u8], message: &Value) -> Option<Exact> {
    fn inexact(v: &Value) -> bool {
        match v {
            Value::Number(n) => !(n.is_i64() || n.is_u64()),
            Value::Array(items) => items.iter().any(inexact),
            Value::Object(map) => map.values().any(inexact),
            _ => false,
        }
    }
    if message.get("method").and_then(Value::as_str) != Some("tools/call") {
        return None;
    }
    if !inexact(message.get("params")?.get("arguments")?) {
        return None;
    }
    let text = std::str::from_utf8(line).ok()?;
    let node = pyjson::parse_borrowed(text).ok()?;
    match node.get("params")?.get("arguments")?.to_value() {
        Py::Object(map) => Some(Exact(Arc::new(map))),
        _ => None,
    }
}

/// A tool's parameter: its JSON schema is `T`'s. The value itself is read from the call's
/// arguments by name ([`ArgErrors`]), so this only describes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arg<T>(PhantomData<T>);

impl<T> Default for Arg<T> {
    fn default() -> Self {
        Arg(PhantomData)
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

/// A tool's arguments object as the client sent it; `T` (a struct of [`Arg`]s) is its
/// schema. Any object is taken: the checks are [`ArgErrors`]'s.
#[derive(Debug)]
pub struct Call<T> {
    pub raw: JsonObject,
    schema: PhantomData<T>,
}

impl<T> Call<T> {
    /// The checks of this call. `extensions` are the request's: they hold the [`Exact`]
    /// arguments when the transport read them.
    pub fn errors(&self, extensions: &Extensions) -> ArgErrors {
        let args = match extensions.get::<Exact>() {
            Some(Exact(map)) => map.as_ref().clone(),
            None => self
                .raw
                .iter()
                .map(|(k, v)| (k.clone(), to_py(v)))
                .collect(),
        };
        ArgErrors {
            args,
            errors: Vec::new(),
        }
    }
}

impl<'de, T> Deserialize<'de> for Call<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(Call {
            raw: JsonObject::deserialize(deserializer)?,
            schema: PhantomData,
        })
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

/// One problem: where, pydantic's message and error type, and the value it was about
/// (`None`: the whole arguments object, which is what a missing argument shows).
#[derive(Debug)]
struct Problem {
    loc: &'static str,
    message: Cow<'static, str>,
    kind: &'static str,
    input: Option<Py>,
}

/// The problems found in one call's arguments, reported together as pydantic does.
#[derive(Debug, Default)]
pub struct ArgErrors {
    /// The arguments as pydantic validates them: FastMCP's JSON pre-parsing applied to
    /// each parameter checked so far.
    args: pyjson::Map,
    errors: Vec<Problem>,
}

/// How pydantic's lax mode reads a parameter's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Str,
    Other,
}

/// A problem with one value: pydantic's message and error type.
type Refusal = (&'static str, &'static str);

impl ArgErrors {
    /// The value of parameter `name`, or `None` when it is absent. FastMCP first parses a
    /// string sent for a parameter that is not a string, and uses what it holds when
    /// that is not a string, a number or a boolean (`"[1]"` becomes a list, `"null"`
    /// `None`, `"5"` stays a string); the arguments keep the parsed value.
    fn value(&mut self, name: &str, kind: Kind) -> Option<Py> {
        let value = self.args.get_mut(name)?;
        if kind == Kind::Other
            && let Py::String(text) = &*value
            && let Ok(parsed) = pyjson::parse(text)
            && !matches!(
                parsed,
                Py::String(_) | Py::Int(_) | Py::Float(_) | Py::Bool(_)
            )
        {
            *value = parsed;
        }
        Some(value.clone())
    }

    fn push(&mut self, loc: &'static str, (message, kind): Refusal, input: Option<Py>) {
        self.errors.push(Problem {
            loc,
            message: message.into(),
            kind,
            input,
        });
    }

    fn missing(&mut self, loc: &'static str) {
        self.push(loc, ("Field required", "missing"), None);
    }

    /// pydantic's report, `None` when every argument was fine.
    pub fn into_message(self, tool: &str) -> Option<String> {
        if self.errors.is_empty() {
            return None;
        }
        let count = self.errors.len();
        let plural = if count == 1 { "" } else { "s" };
        let mut text = format!("{count} validation error{plural} for {tool}Arguments");
        let whole = Py::Object(self.args);
        for p in &self.errors {
            let input = p.input.as_ref().unwrap_or(&whole);
            text.push_str(&format!(
                "\n{}\n  {} [type={}, input_value={}, input_type={}]\n    For further information visit {PYDANTIC_DOCS}{}",
                p.loc,
                p.message,
                p.kind,
                truncated_repr(&py_repr(input)),
                py_type(input),
                p.kind
            ));
        }
        Some(text)
    }

    /// A required `str` parameter (a string, nothing else).
    pub fn string(&mut self, name: &'static str) -> String {
        match self.value(name, Kind::Str) {
            Some(Py::String(s)) => s,
            Some(v) => {
                self.push(
                    name,
                    ("Input should be a valid string", "string_type"),
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

    /// An optional `str | None = None` parameter; `None` when absent or `null`.
    pub fn optional_string(&mut self, name: &'static str) -> Option<String> {
        match self.value(name, Kind::Str)? {
            Py::Null => None,
            _ => Some(self.string(name)),
        }
    }

    /// A required `int` parameter, read as pydantic's lax mode reads it: integers of any
    /// size, integral floats (`4.0`), booleans, and strings holding a decimal integer.
    pub fn integer(&mut self, name: &'static str) -> LineNumber {
        let Some(value) = self.value(name, Kind::Other) else {
            self.missing(name);
            return LineNumber::from(0);
        };
        lax_integer(&value).unwrap_or_else(|refusal| {
            self.push(name, refusal, Some(value));
            LineNumber::from(0)
        })
    }

    /// An optional `int | None = None` parameter (lax, as [`ArgErrors::integer`]),
    /// saturated to `i64`; `None` when absent or `null`.
    pub fn optional_integer(&mut self, name: &'static str) -> Option<i64> {
        match self.value(name, Kind::Other)? {
            Py::Null => None,
            _ => Some(self.integer(name).saturated()),
        }
    }

    /// A required `dict[str, Any]` parameter.
    pub fn object(&mut self, name: &'static str) -> Py {
        match self.value(name, Kind::Other) {
            Some(v @ Py::Object(_)) => v,
            Some(v) => {
                self.push(
                    name,
                    ("Input should be a valid dictionary", "dict_type"),
                    Some(v),
                );
                Py::Null
            }
            None => {
                self.missing(name);
                Py::Null
            }
        }
    }

    /// A required `list` parameter.
    pub fn array(&mut self, name: &'static str) -> Py {
        match self.value(name, Kind::Other) {
            Some(v @ Py::Array(_)) => v,
            Some(v) => {
                self.push(name, ("Input should be a valid list", "list_type"), Some(v));
                Py::Null
            }
            None => {
                self.missing(name);
                Py::Null
            }
        }
    }

    /// A `Literal[...]` parameter with a default: one of `choices`, `None` when absent.
    pub fn literal<T: Copy>(&mut self, name: &'static str, choices: &[(&str, T)]) -> Option<T> {
        let value = self.value(name, Kind::Other)?;
        let found = value
            .as_str()
            .and_then(|s| choices.iter().find(|(c, _)| *c == s));
        if let Some((_, choice)) = found {
            return Some(*choice);
        }
        // pydantic's wording: 'a' or 'b'; 'a', 'b' or 'c'.
        let names: Vec<String> = choices.iter().map(|(c, _)| pyjson::py_repr(c)).collect();
        let listed = match names.split_last() {
            Some((last, [])) => last.clone(),
            Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
            None => String::new(),
        };
        self.errors.push(Problem {
            loc: name,
            message: format!("Input should be {listed}").into(),
            kind: "literal_error",
            input: Some(value),
        });
        None
    }

    /// The paged read's `cursor: ReadCursor | None = None`, a dataclass
    /// `{line: int, offset: int = 0}`: `None` when absent or `null`, else its two
    /// integers (saturated to `i64`: a cursor outside the range is refused either way).
    pub fn cursor(&mut self) -> Option<(i64, i64)> {
        let value = self.value("cursor", Kind::Other)?;
        let map = match &value {
            Py::Null => return None,
            Py::Object(map) => map,
            _ => {
                self.push(
                    "cursor",
                    (
                        "Input should be a dictionary or an instance of ReadCursor",
                        "dataclass_type",
                    ),
                    Some(value),
                );
                return None;
            }
        };
        let line = match map.get("line") {
            None => Err((("Field required", "missing"), value.clone())),
            Some(v) => lax_integer(v).map_err(|refusal| (refusal, v.clone())),
        };
        let offset = match map.get("offset") {
            None => Ok(LineNumber::from(0)),
            Some(v) => lax_integer(v).map_err(|refusal| (refusal, v.clone())),
        };
        if let Err((refusal, input)) = &line {
            self.push("cursor.line", *refusal, Some(input.clone()));
        }
        if let Err((refusal, input)) = &offset {
            self.push("cursor.offset", *refusal, Some(input.clone()));
        }
        Some((line.ok()?.saturated(), offset.ok()?.saturated()))
    }
}

/// An integer as pydantic's lax mode reads it, or pydantic's message and error type.
fn lax_integer(value: &Py) -> Result<LineNumber, Refusal> {
    const PARSING: Refusal = (
        "Input should be a valid integer, unable to parse string as an integer",
        "int_parsing",
    );
    match value {
        Py::Bool(b) => Ok(LineNumber::from(i64::from(*b))),
        Py::Int(text) => {
            LineNumber::parse(text).ok_or(("Input should be a valid integer", "int_type"))
        }
        Py::Float(f) if !f.is_finite() => Err(("Input should be a finite number", "finite_number")),
        Py::Float(f) if f.fract() != 0.0 => Err((
            "Input should be a valid integer, got a number with a fractional part",
            "int_from_float",
        )),
        // Strictly inside i64's range, as pydantic-core converts; beyond it, refused.
        Py::Float(f) if *f > i64::MIN as f64 && *f < i64::MAX as f64 => {
            Ok(LineNumber::from(*f as i64))
        }
        Py::Float(_) => Err((
            "Unable to parse input string as an integer, exceeded maximum size",
            "int_parsing_size",
        )),
        Py::String(s) => integer_text(s).ok_or(PARSING),
        _ => Err(("Input should be a valid integer", "int_type")),
    }
}

/// A string as pydantic reads an integer from it: surrounding whitespace, a sign, ASCII
/// digits with single `_` between them, and optionally `.` and zeros (`" 1_000 "`,
/// `"+5"`, `"4.00"`; not `"4."`, `"_1"`, `"1e2"` or other scripts' digits).
fn integer_text(s: &str) -> Option<LineNumber> {
    let t = s.trim();
    let t = match t.split_once('.') {
        Some((whole, zeros)) if !zeros.is_empty() && zeros.bytes().all(|b| b == b'0') => whole,
        Some(_) => return None,
        None => t,
    };
    let (sign, body) = match t.as_bytes().first() {
        Some(b'+' | b'-') => t.split_at(1),
        _ => ("", t),
    };
    let groups_ok = body
        .split('_')
        .all(|g| !g.is_empty() && g.bytes().all(|b| b.is_ascii_digit()));
    if !groups_ok {
        return None;
    }
    LineNumber::parse(&format!("{sign}{}", body.replace('_', "")))
}

/// Python's `repr` of an argument value.
fn py_repr(v: &Py) -> String {
    match v {
        Py::Null => "None".into(),
        Py::Bool(true) => "True".into(),
        Py::Bool(false) => "False".into(),
        Py::Int(text) => text.clone(),
        Py::Float(f) if f.is_nan() => "nan".into(),
        Py::Float(f) if f.is_infinite() => if *f > 0.0 { "inf" } else { "-inf" }.into(),
        Py::Float(f) => pyjson::float_repr(*f),
        Py::String(s) => pyjson::py_repr(s),
        Py::Array(items) => {
            let items: Vec<String> = items.iter().map(py_repr).collect();
            format!("[{}]", items.join(", "))
        }
        Py::Object(map) => {
            let members: Vec<String> = map
                .iter()
                .map(|(k, v)| format!("{}: {}", pyjson::py_repr(k), py_repr(v)))
                .collect();
            format!("{{{}}}", members.join(", "))
        }
    }
}

/// The Python type name of an argument value.
fn py_type(v: &Py) -> &'static str {
    match v {
        Py::Null => "NoneType",
        Py::Bool(_) => "bool",
        Py::Int(_) => "int",
        Py::Float(_) => "float",
        Py::String(_) => "str",
        Py::Array(_) => "list",
        Py::Object(_) => "dict",
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
        pyjson::floor_prefix(repr, 25),
        pyjson::ceil_suffix(repr, 24)
    ))
}

/// What is wrong with the params of a request for `method`, one of the methods of the
/// capabilities this server declares, that rmcp could not read (so its params are
/// wrong), with what the method takes; `None` for any other method.
pub fn params_problem(method: &str, params: Option<Value>) -> Option<String> {
    use rmcp::model::{
        CallToolRequestParams, GetPromptRequestParams, PaginatedRequestParams,
        ReadResourceRequestParams,
    };
    fn problem<T: serde::de::DeserializeOwned>(params: Option<Value>) -> String {
        let params = params.unwrap_or_else(|| Value::Object(serde_json::Map::new()));
        match serde_json::from_value::<T>(params) {
            Err(e) => e.to_string(),
            Ok(_) => "params that are not valid for it".to_owned(),
        }
    }
    let (problem, takes) = match method {
        "tools/call" => (
            problem::<CallToolRequestParams>(params),
            r#"{"name": "<tool name, a string>", "arguments": {<an object>}}"#,
        ),
        "resources/read" => (
            problem::<ReadResourceRequestParams>(params),
            r#"{"uri": "<a string>"}"#,
        ),
        "prompts/get" => (
            problem::<GetPromptRequestParams>(params),
            r#"{"name": "<a string>", "arguments": {<an object>}}"#,
        ),
        "tools/list" | "resources/list" | "resources/templates/list" | "prompts/list" => (
            problem::<PaginatedRequestParams>(params),
            r#"no params, or {"cursor": "<a string>"}"#,
        ),
        _ => return None,
    };
    Some(format!(
        "Invalid params for {method}: {problem}; {method} takes {takes}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The checks of one call whose arguments object is `args` (JSON text), with the
    /// [`Exact`] view the stdio transport attaches; `None` when there is none to attach.
    fn errors_of(args: &str) -> (ArgErrors, bool) {
        let line = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"t","arguments":{args}}}}}"#
        );
        let message: Value = serde_json::from_str(&line).expect("JSON");
        let mut extensions = Extensions::new();
        let exact = exact_arguments(line.as_bytes(), &message);
        let had_exact = exact.is_some();
        if let Some(exact) = exact {
            extensions.insert(exact);
        }
        let raw = match &message["params"]["arguments"] {
            Value::Object(map) => map.clone(),
            _ => JsonObject::new(),
        };
        let call = Call::<()> {
            raw,
            schema: PhantomData,
        };
        (call.errors(&extensions), had_exact)
    }

    /// Runs `tool`'s checks as its handler does, in the order of prompt-diary 0.2.20's
    /// parameters; the report and, for a read, the line numbers read.
    fn run(tool: &str, args: &str) -> (Option<String>, Option<(String, String)>) {
        let (mut errors, _) = errors_of(args);
        let mut lines = None;
        match tool {
            "read_session_lines" => {
                errors.string("project_key");
                errors.string("session_ref");
                let start = errors.integer("start_line");
                let end = errors.integer("end_line");
                errors.literal("mode", &[("compact", 0), ("full", 1)]);
                errors.cursor();
                lines = Some((start.to_string(), end.to_string()));
            }
            "write_engagement" => {
                errors.object("overall_reading");
                errors.array("observations");
                errors.array("limits");
            }
            _ => panic!("no checks for {tool}"),
        }
        (errors.into_message(tool), lines)
    }

    /// Each report is the text prompt-diary 0.2.20's own server answered for these
    /// arguments (`testdata/argument_reports.txt` says how it was captured).
    #[test]
    fn reports_are_prompt_diary_s_byte_for_byte() {
        let cases = include_str!("testdata/argument_reports.txt");
        let mut checked = 0;
        for case in cases.split("\n== ").skip(1) {
            let mut parts = case.trim_end_matches('\n').splitn(3, '\n');
            let (Some(tool), Some(args), Some(expect)) = (parts.next(), parts.next(), parts.next())
            else {
                panic!("a case needs a tool, its arguments and a report: {case:?}");
            };
            assert_eq!(run(tool, args).0.as_deref(), Some(expect), "{args}");
            checked += 1;
        }
        assert_eq!(checked, 20, "cases read from testdata/argument_reports.txt");
    }

    /// What prompt-diary 0.2.10 and 0.2.20 accepted for a line number, and the number their
    /// range messages then printed (`end_line N must be >= start_line M`).
    #[test]
    fn integers_are_read_as_pydantic_s_lax_mode_reads_them() {
        let big = "1000000000000000000000000000000";
        for (value, expect) in [
            ("4", "4"),
            ("4.0", "4"),
            ("-0.0", "0"),
            ("1e2", "100"),
            ("true", "1"),
            ("false", "0"),
            (r#""4""#, "4"),
            (r#"" 4 ""#, "4"),
            (r#""\t5\n""#, "5"),
            (r#""\u00a05""#, "5"),
            (r#""+5""#, "5"),
            (r#""-3""#, "-3"),
            (r#""-0""#, "0"),
            (r#""007""#, "7"),
            (r#""1_000""#, "1000"),
            (r#""4.0""#, "4"),
            (r#""4.00""#, "4"),
            ("9.223372036854775e18", "9223372036854774784"),
            ("9223372036854775808", "9223372036854775808"),
            ("-9223372036854775809", "-9223372036854775809"),
            (big, big),
            (&format!("-{big}"), &format!("-{big}")),
            (&format!(r#""{big}.0""#), big),
        ] {
            let args = format!(
                r#"{{"project_key": "P", "session_ref": "S", "start_line": {value}, "end_line": 1}}"#
            );
            let (report, lines) = run("read_session_lines", &args);
            assert_eq!(report, None, "{value}");
            assert_eq!(lines.map(|l| l.0).as_deref(), Some(expect), "{value}");
        }
        for value in [
            r#""_1""#,
            r#""1_""#,
            r#""1__0""#,
            r#""4.""#,
            r#""4.5""#,
            r#""0x10""#,
            r#""1e2""#,
            r#""٣""#,
            r#""１２""#,
            r#""""#,
            r#"" ""#,
            r#""+""#,
            r#""+-1""#,
            r#""1 000""#,
            r#""NaN""#,
            r#""true""#,
        ] {
            let args = format!(
                r#"{{"project_key": "P", "session_ref": "S", "start_line": {value}, "end_line": 1}}"#
            );
            let report = run("read_session_lines", &args).0.unwrap_or_default();
            assert!(
                report.contains("unable to parse string as an integer [type=int_parsing"),
                "{value}: {report}"
            );
        }
    }

    #[test]
    fn only_calls_with_inexact_numbers_carry_exact_arguments() {
        assert!(!errors_of(r#"{"a": 1, "b": [-2, "3.5"]}"#).1);
        assert!(errors_of(r#"{"a": [1.5]}"#).1);
        assert!(errors_of(r#"{"a": {"b": 100000000000000000000}}"#).1);
    }

    #[test]
    fn literal_choices_are_listed_as_pydantic_lists_them() {
        let (mut errors, _) = errors_of(r#"{"m": "x"}"#);
        errors.literal("m", &[("a", 0), ("b", 1), ("c", 2)]);
        let report = errors.into_message("t").unwrap_or_default();
        assert!(
            report.contains("m\n  Input should be 'a', 'b' or 'c' [type=literal_error"),
            "{report}"
        );
    }
}
