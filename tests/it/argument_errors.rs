//! Argument errors of the real `serve` binary, over raw stdio (so that integers beyond 64
//! bits reach it as written), on a 0.2.10 (schema 2) and a 0.2.20 (schema 7) workspace:
//! both answer with pydantic's whole report, as prompt-diary's servers do, and name a line
//! number beyond 64 bits exactly. Also the empty resource and prompt lists, and the
//! capabilities `initialize` declares.
//!
//! The expected texts are prompt-diary's own answers (0.2.10 and 0.2.20, pydantic 2.14.4),
//! captured from their servers for the same arguments.

use crate::common;

use common::{PROJECT, Workspace};
use serde_json::{Value, json};

const BIG: &str = "1000000000000000000000000000000";

/// A `serve` process spoken to line by line.
struct Raw(common::stdio::LineServer);

/// Far above any answer's time: the tests fail on a missing answer, never on a slow one.
const NEVER: std::time::Duration = std::time::Duration::from_secs(120);

impl Raw {
    fn start(ws: &Workspace) -> Raw {
        Raw(common::stdio::LineServer::start(
            common::stdio::serve_command(ws, &[]),
            "t",
            NEVER,
        ))
    }

    /// Sends a request whose params are `params` (JSON text, sent as written) and returns
    /// the answer's `result`.
    fn request(&mut self, method: &str, params: &str) -> Value {
        let id = self.0.request_text(method, params);
        let message = self.0.answer(id, NEVER);
        assert!(message.get("error").is_none(), "{method}: {message}");
        message["result"].clone()
    }

    /// A `read_session_lines` call with `arguments` (JSON text): whether it is an error
    /// result, and its text.
    fn read(&mut self, arguments: &str) -> (bool, String) {
        let result = self.request(
            "tools/call",
            &format!(r#"{{"name":"read_session_lines","arguments":{arguments}}}"#),
        );
        let text = result["content"][0]["text"]
            .as_str()
            .expect("a text")
            .to_owned();
        (result["isError"] == json!(true), text)
    }
}

fn link(kind: &str) -> String {
    format!("\n    For further information visit https://errors.pydantic.dev/2.14/v/{kind}")
}

/// What both contracts answer alike: pydantic's report (null is a wrong value, not a
/// missing one), the empty lists and the capabilities.
fn same_on_both_contracts(raw: &mut Raw) {
    let head = "Error executing tool read_session_lines: 1 validation error for read_session_linesArguments\n";
    let cases = [
        (
            format!(
                r#"{{"project_key":"{PROJECT}","session_ref":"S0001","start_line":null,"end_line":3}}"#
            ),
            format!(
                "{head}start_line\n  Input should be a valid integer [type=int_type, input_value=None, input_type=NoneType]{}",
                link("int_type")
            ),
        ),
        (
            format!(
                r#"{{"project_key":"{PROJECT}","session_ref":"S0001","start_line":"abc","end_line":3}}"#
            ),
            format!(
                "{head}start_line\n  Input should be a valid integer, unable to parse string as an integer [type=int_parsing, input_value='abc', input_type=str]{}",
                link("int_parsing")
            ),
        ),
        (
            format!(
                r#"{{"project_key":"{PROJECT}","session_ref":"S0001","start_line":1.5,"end_line":3}}"#
            ),
            format!(
                "{head}start_line\n  Input should be a valid integer, got a number with a fractional part [type=int_from_float, input_value=1.5, input_type=float]{}",
                link("int_from_float")
            ),
        ),
        (
            format!(r#"{{"project_key":{BIG},"session_ref":"S0001","start_line":1,"end_line":3}}"#),
            format!(
                "{head}project_key\n  Input should be a valid string [type=string_type, input_value={BIG}, input_type=int]{}",
                link("string_type")
            ),
        ),
        (
            format!(
                r#"{{"project_key":"{PROJECT}","session_ref":"S0001","start_line":1e30,"end_line":3}}"#
            ),
            format!(
                "{head}start_line\n  Unable to parse input string as an integer, exceeded maximum size [type=int_parsing_size, input_value=1e+30, input_type=float]{}",
                link("int_parsing_size")
            ),
        ),
    ];
    for (arguments, expect) in cases {
        assert_eq!(raw.read(&arguments), (true, expect), "{arguments}");
    }
    // Lax values are taken as pydantic takes them: the read goes on to the range check.
    let (is_error, text) = raw.read(&format!(
        r#"{{"project_key":"{PROJECT}","session_ref":"S0001","start_line":" 3 ","end_line":"2.0","mode":"compact"}}"#
    ));
    assert!(
        !is_error && text.contains("end_line 2 must be >= start_line 3"),
        "{text}"
    );

    assert_eq!(
        raw.request("resources/list", "{}"),
        json!({"resources": []})
    );
    assert_eq!(raw.request("prompts/list", "{}"), json!({"prompts": []}));
    assert_eq!(
        raw.0.initialized["result"]["capabilities"],
        json!({
            "experimental": {},
            "prompts": {"listChanged": false},
            "resources": {"subscribe": false, "listChanged": false},
            "tools": {"listChanged": false}
        })
    );
}

/// The `message` of the one error of an invalid read result (pretty or compact JSON).
fn invalid_message(text: &str) -> String {
    let value: Value = serde_json::from_str(text).expect("a JSON result");
    assert_eq!(value["status"], "invalid", "{text}");
    value["errors"][0]["message"]
        .as_str()
        .expect("message")
        .to_owned()
}

/// The message of the one error of the read of S0001's lines `start` to `end` (written
/// as given, so beyond 64 bits too): a result, never a tool error.
fn range_message(raw: &mut Raw, start: &str, end: &str) -> String {
    let (is_error, text) = raw.read(&format!(
        r#"{{"project_key":"{PROJECT}","session_ref":"S0001","start_line":{start},"end_line":{end}}}"#
    ));
    assert!(!is_error, "{text}");
    invalid_message(&text)
}

#[test]
fn a_0_2_10_workspace_answers_pydantic_s_report_and_exact_big_lines() {
    let ws = Workspace::example();
    let mut raw = Raw::start(&ws);
    same_on_both_contracts(&mut raw);
    assert_eq!(
        range_message(&mut raw, BIG, "3"),
        format!("end_line 3 must be >= start_line {BIG}")
    );
    assert_eq!(
        range_message(&mut raw, &format!("-{BIG}1"), BIG),
        format!("start_line -{BIG}1 must be a positive 1-based line number")
    );
}

#[test]
fn a_0_2_20_workspace_answers_pydantic_s_report_and_exact_big_lines() {
    let ws = Workspace::example();
    ws.to_schema_7();
    let mut raw = Raw::start(&ws);
    same_on_both_contracts(&mut raw);
    assert_eq!(
        range_message(&mut raw, &format!("{BIG}1"), BIG),
        format!("end_line {BIG} must be >= start_line {BIG}1")
    );
    assert_eq!(
        range_message(&mut raw, BIG, &format!("{BIG}1")),
        format!("start_line {BIG} is past the session's last line 8")
    );
    // The cursor's fields are pydantic's too.
    let (is_error, text) = raw.read(&format!(
        r#"{{"project_key":"{PROJECT}","session_ref":"S0001","start_line":1,"end_line":3,"cursor":{{"line":1,"offset":1e30}}}}"#
    ));
    assert_eq!(
        (is_error, text),
        (
            true,
            format!(
                "Error executing tool read_session_lines: 1 validation error for read_session_linesArguments\ncursor.offset\n  Unable to parse input string as an integer, exceeded maximum size [type=int_parsing_size, input_value=1e+30, input_type=float]{}",
                link("int_parsing_size")
            )
        )
    );
}
