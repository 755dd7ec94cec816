//! Golden tests: the examples of Ralph's evidence documentation, input and "Extracted
//! citations" copied from it
//! (`example_*`), its other agent-output samples of every marker and JSON evidence form,
//! and the fixes listed in [`mod@super::extract`], each as (input text, expected
//! citations as receipt JSON).

use super::{Citation, Located, Options, extract};

/// Extracts from `input` (and from its CRLF form, which must give the same citations)
/// and compares with `expect`, a JSON list of `{type, reference, context}`.
fn check(enable_json: bool, input: &str, expect: &str) {
    let options = Options { enable_json };
    let found = extract(input, &options);
    let expect: serde_json::Value = serde_json::from_str(expect).unwrap_or_default();
    assert_eq!(receipt_json(&found), expect, "input: {input:?}");
    assert_spans(input, &found);

    let crlf = input.replace('\n', "\r\n");
    let found_crlf = extract(&crlf, &options);
    assert_eq!(receipt_json(&found_crlf), expect, "CRLF input: {crlf:?}");
    assert_spans(&crlf, &found_crlf);
}

/// Extracts from a documented agent output `input` and compares with its "Extracted
/// citations" list `listed`, both copied from Ralph's documentation: one `- type: reference`
/// line per citation, in order, with ` (context: "...")` where the documentation shows the
/// context.
fn documented_example(input: &str, listed: &str) {
    let found = extract(input, &Options::default());
    let lines: Vec<&str> = listed.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(found.len(), lines.len(), "{found:?}");
    for (line, l) in lines.iter().zip(&found) {
        let item = line.strip_prefix("- ").unwrap_or(line);
        let (item, context) = match item.strip_suffix("\")") {
            Some(head) => match head.split_once(" (context: \"") {
                Some((item, context)) => (item, Some(context)),
                None => (item, None),
            },
            None => (item, None),
        };
        let c = &l.citation;
        assert_eq!(format!("{}: {}", c.kind, c.reference), item);
        if let Some(context) = context {
            assert_eq!(c.context.as_deref(), Some(context), "{line}");
        }
    }
}

fn receipt_json(found: &[Located]) -> serde_json::Value {
    let citations: Vec<&Citation> = found.iter().map(|l| &l.citation).collect();
    serde_json::to_value(citations).unwrap_or_default()
}

/// Each span is inside the text and covers the marker or the JSON object it came from.
fn assert_spans(text: &str, found: &[Located]) {
    for l in found {
        let span = text.get(l.offset..l.offset + l.len);
        let Some(span) = span else {
            panic!("span {}+{} not in {text:?}", l.offset, l.len);
        };
        assert!(
            span.starts_with("**Evidence**:") || (span.starts_with('{') && span.ends_with('}')),
            "span {span:?} of {:?}",
            l.citation
        );
    }
}

/// Example 1, as Ralph's documentation gives it.
#[test]
fn example_1_file_references() {
    documented_example(
        r###"I've fixed the authentication bug.

The issue was in the token validation logic:
**Evidence**: src/auth/login.py:42-45
**Evidence**: src/auth/jwt.py:100

The fix validates tokens before decoding."###,
        r###"- file: src/auth/login.py:42-45
- file: src/auth/jwt.py:100"###,
    );
}

/// Example 1's contexts: the text around each marker, 100 characters on each side.
#[test]
fn example_1_file_contexts() {
    check(
        true,
        r###"I've fixed the authentication bug.

The issue was in the token validation logic:
**Evidence**: src/auth/login.py:42-45
**Evidence**: src/auth/jwt.py:100

The fix validates tokens before decoding."###,
        r###"[
  {
    "type": "file",
    "reference": "src/auth/login.py:42-45",
    "context": "I've fixed the authentication bug.\n\nThe issue was in the token validation logic:\n**Evidence**: src/auth/login.py:42-45\n**Evidence**: src/auth/jwt.py:100\n\nThe fix validates tokens before decoding."
  },
  {
    "type": "file",
    "reference": "src/auth/jwt.py:100",
    "context": "entication bug.\n\nThe issue was in the token validation logic:\n**Evidence**: src/auth/login.py:42-45\n**Evidence**: src/auth/jwt.py:100\n\nThe fix validates tokens before decoding."
  }
]"###,
    );
}

/// Example 2, as Ralph's documentation gives it: the reference keeps `pytest `.
#[test]
fn example_2_test_results() {
    documented_example(
        r###"All tests are passing:

**Evidence**: pytest tests/test_auth.py::test_login - PASS
**Evidence**: pytest tests/test_auth.py::test_logout - PASS
**Evidence**: pytest tests/test_api.py::test_create_user - PASS"###,
        r###"- test: pytest tests/test_auth.py::test_login - PASS
- test: pytest tests/test_auth.py::test_logout - PASS
- test: pytest tests/test_api.py::test_create_user - PASS"###,
    );
}

/// Example 3, as Ralph's documentation gives it: the JSON block's citations with their contexts.
#[test]
fn example_3_structured_json() {
    documented_example(
        r###"Task complete. Evidence:

```json
{
  "evidence": [
    {"type": "file", "reference": "src/auth.py:42", "context": "Added JWT validation"},
    {"type": "test", "reference": "pytest tests/test_auth.py - PASS", "context": "All 3 tests passed"},
    {"type": "url", "reference": "JWT Spec: https://tools.ietf.org/html/rfc7519"}
  ]
}
```"###,
        r###"- file: src/auth.py:42 (context: "Added JWT validation")
- test: pytest tests/test_auth.py - PASS (context: "All 3 tests passed")
- url: JWT Spec: https://tools.ietf.org/html/rfc7519"###,
    );
}

/// Example 3 with JSON extraction switched off: it has no markers.
#[test]
fn example_3_with_json_off_has_no_markers() {
    check(
        false,
        r###"Task complete. Evidence:

```json
{
  "evidence": [
    {"type": "file", "reference": "src/auth.py:42", "context": "Added JWT validation"},
    {"type": "test", "reference": "pytest tests/test_auth.py - PASS", "context": "All 3 tests passed"},
    {"type": "url", "reference": "JWT Spec: https://tools.ietf.org/html/rfc7519"}
  ]
}
```"###,
        r###"[]"###,
    );
}

/// "For Agent Users", which the documentation says is extracted: the test line has no
/// `pytest `, but it is a pytest node id followed by its result, so it is a test
/// citation with its reference as written.
#[test]
fn for_agent_users() {
    check(
        true,
        r###"I've implemented the authentication feature.

**Evidence**: src/auth/login.py:42-56
**Evidence**: tests/test_auth.py::test_login - PASS

The login function now validates JWT tokens correctly."###,
        r###"[
  {
    "type": "file",
    "reference": "src/auth/login.py:42-56",
    "context": "I've implemented the authentication feature.\n\n**Evidence**: src/auth/login.py:42-56\n**Evidence**: tests/test_auth.py::test_login - PASS\n\nThe login function now validates JWT tokens co"
  },
  {
    "type": "test",
    "reference": "tests/test_auth.py::test_login - PASS",
    "context": null
  }
]"###,
    );
}

/// The "Format" line of each marker type, as the documentation writes them: the test's
/// `PASS|FAIL` is read as `PASS` (the pattern stops at the first result word).
#[test]
fn format_lines() {
    check(
        true,
        r###"**Format:** `**Evidence**: path/to/file.py:42`
**Format:** `**Evidence**: pytest path/to/test.py::test_name - PASS|FAIL`
**Format:** `**Evidence**: [link text](url)`"###,
        r###"[
  {
    "type": "file",
    "reference": "path/to/file.py:42",
    "context": "**Format:** `**Evidence**: path/to/file.py:42`\n**Format:** `**Evidence**: pytest path/to/test.py::test_name - PASS|FAIL`\n**Format:** `**Evidence*"
  },
  {
    "type": "test",
    "reference": "pytest path/to/test.py::test_name - PASS",
    "context": null
  },
  {
    "type": "url",
    "reference": "link text: url",
    "context": null
  }
]"###,
    );
}

/// The file pattern's "Matches" list from the documentation's technical details: each
/// line alone is one file citation of itself.
#[test]
fn file_pattern_matches_list() {
    for reference in ["src/file.py:42", "src/file.py:42:47", "src/file.py:42-47"] {
        let marker = format!("**Evidence**: {reference}");
        check(
            true,
            &marker,
            &serde_json::json!([{"type": "file", "reference": reference, "context": marker}])
                .to_string(),
        );
    }
}

/// The receipt's three citations, each written as its marker: the file, the test and
/// the command block, in that order, as the receipt lists them.
#[test]
fn receipt_citations_as_markers() {
    check(
        false,
        "**Evidence**: src/auth/login.py:42\n**Evidence**: pytest tests/test_auth.py::test_login - PASS\n**Evidence**:\n```bash\npytest tests/ -v\n======================== test session starts...\n```",
        r#"[{"type": "file", "reference": "src/auth/login.py:42",
             "context": "**Evidence**: src/auth/login.py:42\n**Evidence**: pytest tests/test_auth.py::test_login - PASS\n**Evidence**:\n```bash\npytest tests/ -v\n="},
            {"type": "test", "reference": "pytest tests/test_auth.py::test_login - PASS", "context": null},
            {"type": "command", "reference": "pytest tests/ -v",
             "context": "======================== test session starts..."}]"#,
    );
}

/// Troubleshooting, the correct form.
#[test]
fn troubleshooting_correct() {
    check(
        true,
        r###"**Evidence**: src/file.py:42"###,
        r###"[
  {
    "type": "file",
    "reference": "src/file.py:42",
    "context": "**Evidence**: src/file.py:42"
  }
]"###,
    );
}

#[test]
fn troubleshooting_incorrect_space_before_colon() {
    check(
        true,
        r###"**Evidence** : src/file.py:42  (space before colon)"###,
        r###"[]"###,
    );
}

#[test]
fn troubleshooting_incorrect_no_line_number() {
    check(
        true,
        r###"**Evidence**: src/file.py (no line number)"###,
        r###"[]"###,
    );
}

#[test]
fn troubleshooting_incorrect_not_bold() {
    check(
        true,
        r###"Evidence: src/file.py:42 (not bold)"###,
        r###"[]"###,
    );
}

/// Troubleshooting, the three incorrect forms together: nothing.
#[test]
fn troubleshooting_incorrect_all_three() {
    check(
        true,
        r###"**Evidence** : src/file.py:42  (space before colon)
**Evidence**: src/file.py (no line number)
Evidence: src/file.py:42 (not bold)"###,
        r###"[]"###,
    );
}

#[test]
fn file_reference_examples() {
    check(
        true,
        r###"**Evidence**: src/auth/login.py:42
**Evidence**: src/models/user.py:100-105
**Evidence**: tests/test_auth.py:25"###,
        r###"[
  {
    "type": "file",
    "reference": "src/auth/login.py:42",
    "context": "**Evidence**: src/auth/login.py:42\n**Evidence**: src/models/user.py:100-105\n**Evidence**: tests/test_auth.py:25"
  },
  {
    "type": "file",
    "reference": "src/models/user.py:100-105",
    "context": "**Evidence**: src/auth/login.py:42\n**Evidence**: src/models/user.py:100-105\n**Evidence**: tests/test_auth.py:25"
  },
  {
    "type": "file",
    "reference": "tests/test_auth.py:25",
    "context": "**Evidence**: src/auth/login.py:42\n**Evidence**: src/models/user.py:100-105\n**Evidence**: tests/test_auth.py:25"
  }
]"###,
    );
}

/// The three supported file forms: line, `:` range, `-` range.
#[test]
fn file_reference_forms() {
    check(
        true,
        r###"**Evidence**: file.py:42
**Evidence**: file.py:42:47
**Evidence**: file.py:42-47"###,
        r###"[
  {
    "type": "file",
    "reference": "file.py:42",
    "context": "**Evidence**: file.py:42\n**Evidence**: file.py:42:47\n**Evidence**: file.py:42-47"
  },
  {
    "type": "file",
    "reference": "file.py:42:47",
    "context": "**Evidence**: file.py:42\n**Evidence**: file.py:42:47\n**Evidence**: file.py:42-47"
  },
  {
    "type": "file",
    "reference": "file.py:42-47",
    "context": "**Evidence**: file.py:42\n**Evidence**: file.py:42:47\n**Evidence**: file.py:42-47"
  }
]"###,
    );
}

/// The command block example: the command is the reference, its output the context
/// (stripped, cut to 200 characters), as Ralph's documented receipt stores `pytest tests/ -v`.
#[test]
fn command_block() {
    check(
        true,
        r###"**Evidence**:
```bash
pytest tests/test_auth.py -v
======================== test session starts =========================
collected 3 items

tests/test_auth.py::test_login PASSED
tests/test_auth.py::test_logout PASSED
========================= 2 passed in 0.5s =========================
```"###,
        r###"[
  {
    "type": "command",
    "reference": "pytest tests/test_auth.py -v",
    "context": "======================== test session starts =========================\ncollected 3 items\n\ntests/test_auth.py::test_login PASSED\ntests/test_auth.py::test_logout PASSED\n========================= 2 passe"
  }
]"###,
    );
}

/// The receipt's command citation: `pytest tests/ -v` with the output as its context.
#[test]
fn receipt_command_citation() {
    check(
        false,
        "**Evidence**:\n```bash\npytest tests/ -v\n======================== test session starts...\n```",
        r#"[{"type": "command", "reference": "pytest tests/ -v",
             "context": "======================== test session starts..."}]"#,
    );
}

#[test]
fn test_result_examples() {
    check(
        true,
        r###"**Evidence**: pytest tests/test_auth.py::test_login - PASS
**Evidence**: pytest tests/test_api.py::test_create_user - FAIL"###,
        r###"[
  {
    "type": "test",
    "reference": "pytest tests/test_auth.py::test_login - PASS",
    "context": null
  },
  {
    "type": "test",
    "reference": "pytest tests/test_api.py::test_create_user - FAIL",
    "context": null
  }
]"###,
    );
}

#[test]
fn url_examples() {
    check(
        true,
        r###"**Evidence**: [OWASP ASVS](https://owasp.org/www-project-application-security-verification-standard/)
**Evidence**: [GitHub Issue #123](https://github.com/owner/repo/issues/123)"###,
        r###"[
  {
    "type": "url",
    "reference": "OWASP ASVS: https://owasp.org/www-project-application-security-verification-standard/",
    "context": null
  },
  {
    "type": "url",
    "reference": "GitHub Issue #123: https://github.com/owner/repo/issues/123",
    "context": null
  }
]"###,
    );
}

/// The prompt-author instruction: its command line has a literal `\n`, so no block.
#[test]
fn prompt_author_instruction() {
    check(
        true,
        r###"When referencing files, tests, or commands, use this format:

**Evidence**: path/to/file.py:42
**Evidence**: pytest tests/test_example.py - PASS
**Evidence**: ```bash\n<command>\n```"###,
        r###"[
  {
    "type": "file",
    "reference": "path/to/file.py:42",
    "context": "When referencing files, tests, or commands, use this format:\n\n**Evidence**: path/to/file.py:42\n**Evidence**: pytest tests/test_example.py - PASS\n**Evidence**: ```bash\\n<command>\\n```"
  },
  {
    "type": "test",
    "reference": "pytest tests/test_example.py - PASS",
    "context": null
  }
]"###,
    );
}

/// Structured JSON, format 1 (`evidence`).
#[test]
fn json_format_1_evidence() {
    check(
        true,
        r###"```json
{
  "evidence": [
    {
      "type": "file",
      "reference": "src/auth/login.py:42",
      "context": "Implemented JWT token validation"
    },
    {
      "type": "test",
      "reference": "pytest tests/test_auth.py::test_login - PASS",
      "context": "Test verifies login functionality"
    }
  ]
}
```"###,
        r###"[
  {
    "type": "file",
    "reference": "src/auth/login.py:42",
    "context": "Implemented JWT token validation"
  },
  {
    "type": "test",
    "reference": "pytest tests/test_auth.py::test_login - PASS",
    "context": "Test verifies login functionality"
  }
]"###,
    );
}

/// Structured JSON, format 2 (`citations`).
#[test]
fn json_format_2_citations() {
    check(
        true,
        r###"```json
{
  "citations": [
    {
      "type": "command",
      "reference": "pytest tests/ -v",
      "context": "All tests passing"
    },
    {
      "type": "url",
      "reference": "Documentation: https://example.com/docs"
    }
  ]
}
```"###,
        r###"[
  {
    "type": "command",
    "reference": "pytest tests/ -v",
    "context": "All tests passing"
  },
  {
    "type": "url",
    "reference": "Documentation: https://example.com/docs",
    "context": null
  }
]"###,
    );
}

/// The troubleshooting JSON object, ending a message.
#[test]
fn json_test_extraction_object() {
    check(
        true,
        r###"Done.
{"evidence": [{"type": "file", "reference": "test.py:1"}]}
"###,
        r###"[
  {
    "type": "file",
    "reference": "test.py:1",
    "context": null
  }
]"###,
    );
}

// The fixes to Ralph's rules (numbered as in `extract.rs`) and the JSON rules.

/// A test citation is `pytest <path> - <result>`, its reference normalised to single
/// spaces whatever the whitespace between them, or, without `pytest `, a pytest node id
/// (`<path>.py::<name>`) and its result, the reference as written.
#[test]
fn a_test_citation_is_pytest_or_a_node_id() {
    let text = "**Evidence**: t.py::a - FAIL\n**Evidence**: pytest t.py::a - FAIL";
    let found = extract(text, &Options::default());
    assert_eq!(found.len(), 2);
    assert_eq!((found[0].offset, found[0].len), (0, 28));
    assert_eq!((found[1].offset, found[1].len), (29, 35));
    check(
        true,
        "**Evidence**: tests/t.py::a - FAIL\n**Evidence**: pytest tests/t.py::a - FAIL\n**Evidence**: pytest\ttests/t.py::b  -  PASS\n**Evidence**: tests/t.py::C::test_c\t-  PASS",
        r#"[{"type": "test", "reference": "tests/t.py::a - FAIL", "context": null},
            {"type": "test", "reference": "pytest tests/t.py::a - FAIL", "context": null},
            {"type": "test", "reference": "pytest tests/t.py::b - PASS", "context": null},
            {"type": "test", "reference": "tests/t.py::C::test_c - PASS", "context": null}]"#,
    );
}

/// Results after anything but `pytest <path>` or a node id are no citation at all: a bare
/// word, a link, a path without `::`, a `::` name on a file that is not `.py`, a node id
/// with nothing after `::`, a result that is not PASS or FAIL.
#[test]
fn results_without_pytest_or_a_node_id_are_no_citation() {
    check(false, "**Evidence**: lint - PASS", "[]");
    check(
        false,
        "**Evidence**: https://ci.example.com/run/1 - FAIL",
        "[]",
    );
    check(
        true,
        "Done.\n**Evidence**: lint - PASS\n**Evidence**: https://ci.example.com/run/1 - FAIL\n",
        "[]",
    );
    for text in [
        "**Evidence**: tests/test_auth.py - PASS",
        "**Evidence**: tests/test_auth.rs::login - PASS",
        "**Evidence**: tests/test_auth.py:: - PASS",
        "**Evidence**: tests/test_auth.py::test_login - SKIP",
        "**Evidence**: tests/test_auth.py::test_login-PASS",
        "**Evidence**: see tests/test_auth.py::test_login - PASS",
    ] {
        check(false, text, "[]");
    }
}

/// A command block written with CRLF line endings matches (the pattern wants `\n`), and
/// its offsets are those of the CRLF text.
#[test]
fn crlf_command_block_matches_with_original_offsets() {
    let text = "Ran it:\r\n**Evidence**: ```sh\r\nmake test\r\nok\r\n```\r\n";
    let found = extract(text, &Options::default());
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].citation.reference, "make test");
    assert_eq!(found[0].citation.context.as_deref(), Some("ok"));
    assert_eq!(found[0].offset, 9);
    assert_eq!(
        &text[found[0].offset..found[0].offset + found[0].len],
        "**Evidence**: ```sh\r\nmake test\r\nok\r\n```"
    );
}

/// A repeated citation is kept once, with the context of its first occurrence.
#[test]
fn repeated_citation_kept_once_with_first_context() {
    let text = "first\n**Evidence**: a.py:1\nmiddle\n**Evidence**: a.py:1\n**Evidence**: [d](u)\n**Evidence**: [d](u)";
    let found = extract(text, &Options::default());
    let refs: Vec<(&str, &str)> = found
        .iter()
        .map(|l| (l.citation.kind.as_str(), l.citation.reference.as_str()))
        .collect();
    assert_eq!(refs, [("file", "a.py:1"), ("url", "d: u")]);
    assert_eq!(found[0].offset, 6);
    assert!(
        found[0]
            .citation
            .context
            .as_deref()
            .is_some_and(|c| c.starts_with("first\n**Evidence**: a.py:1"))
    );
}

/// Citations come in order of position, whatever their type.
#[test]
fn citations_ordered_by_position() {
    check(
        false,
        "**Evidence**: [d](https://d)\n**Evidence**: pytest t.py - PASS\n**Evidence**: ```bash\nls\n```\nx",
        r#"[{"type": "url", "reference": "d: https://d", "context": null},
            {"type": "test", "reference": "pytest t.py - PASS", "context": null},
            {"type": "command", "reference": "ls", "context": null}]"#,
    );
}

/// A file line followed by a result is a file citation only; after `pytest `, Ralph's
/// pattern takes whatever path follows as the test.
#[test]
fn a_file_line_with_a_result_is_a_file_citation_only() {
    check(
        false,
        "**Evidence**: t.py:3 - PASS",
        r#"[{"type": "file", "reference": "t.py:3", "context": "**Evidence**: t.py:3 - PASS"}]"#,
    );
    check(
        false,
        "**Evidence**: src/a.py:3-5 - FAIL\n**Evidence**: src/a.py:3:4 - PASS",
        r#"[{"type": "file", "reference": "src/a.py:3-5", "context": "**Evidence**: src/a.py:3-5 - FAIL\n**Evidence**: src/a.py:3:4 - PASS"},
            {"type": "file", "reference": "src/a.py:3:4", "context": "**Evidence**: src/a.py:3-5 - FAIL\n**Evidence**: src/a.py:3:4 - PASS"}]"#,
    );
    check(
        false,
        "**Evidence**: pytest t.py:3 - PASS",
        r#"[{"type": "test", "reference": "pytest t.py:3 - PASS", "context": null}]"#,
    );
}

/// The bare word `pytest` names no test: Ralph's pattern wants a path after it.
#[test]
fn bare_pytest_is_no_test() {
    check(false, "**Evidence**: pytest - PASS", "[]");
    check(false, "**Evidence**: pytest  -  FAIL\n", "[]");
    check(
        false,
        "**Evidence**: pytest - PASS\n**Evidence**: pytest tests/t.py - PASS\n**Evidence**: t.py::x - FAIL",
        r#"[{"type": "test", "reference": "pytest tests/t.py - PASS", "context": null},
            {"type": "test", "reference": "t.py::x - FAIL", "context": null}]"#,
    );
}

/// File context: 100 characters (not bytes) each side, stripped, cut to 200.
#[test]
fn file_context_counts_characters_and_is_cut_to_200() {
    let before = "é".repeat(150);
    let after = "ü".repeat(150);
    let text = format!("{before}\n  **Evidence**: a.py:7  \n{after}");
    let found = extract(&text, &Options::default());
    let context = found[0].citation.context.clone().unwrap_or_default();
    let expected: String = format!(
        "{}\n  **Evidence**: a.py:7  \n{}",
        "é".repeat(97),
        "ü".repeat(97)
    );
    let expected: String = expected.chars().take(200).collect();
    assert_eq!(context, expected);
    assert_eq!(context.chars().count(), 200);
}

/// A command's reference is its first line and its context the rest, each stripped and
/// cut to 200 characters.
#[test]
fn command_reference_and_output_cut_to_200() {
    let text = format!(
        "**Evidence**: ```bash\n  {}\n{}\n```",
        "ß".repeat(300),
        "o".repeat(300)
    );
    let found = extract(&text, &Options::default());
    assert_eq!(found[0].citation.reference, "ß".repeat(200));
    assert_eq!(found[0].citation.context, Some("o".repeat(200)));
}

/// JSON: a missing or null type is `unknown`, other values are Python's `str()`, the
/// context is cut to 200 characters and dropped when Python would call it false.
#[test]
fn json_fields_as_python_reads_them() {
    let long = "c".repeat(250);
    let text = format!(
        "```json\n{{\"evidence\": [{{\"reference\": \"a\", \"context\": \"{long}\"}}, 7, {{\"type\": null, \"reference\": 5, \"context\": 0}}, {{\"type\": [\"x\"], \"reference\": true, \"context\": {{\"k\": 1.0}}}}, {{}}]}}\n```"
    );
    let expect = format!(
        r#"[{{"type": "unknown", "reference": "a", "context": "{}"}},
            {{"type": "unknown", "reference": "5", "context": null}},
            {{"type": "['x']", "reference": "True", "context": "{{'k': 1.0}}"}},
            {{"type": "unknown", "reference": "", "context": null}}]"#,
        "c".repeat(200)
    );
    check(true, &text, &expect);
}

/// JSON citations each span their own object in the list.
#[test]
fn json_citations_span_their_objects() {
    let text = "x\n```json\n{\"citations\": [{\"reference\": \"a\"}, {\"reference\": \"b\"}]}\n```";
    let found = extract(text, &Options::default());
    let spans: Vec<&str> = found
        .iter()
        .map(|l| &text[l.offset..l.offset + l.len])
        .collect();
    assert_eq!(spans, [r#"{"reference": "a"}"#, r#"{"reference": "b"}"#]);
}

/// An empty or unusable JSON result falls back to the markers; a usable one wins.
#[test]
fn json_falls_back_to_markers_unless_non_empty() {
    let marker = "**Evidence**: [d](u)\n";
    let url = r#"[{"type": "url", "reference": "d: u", "context": null}]"#;
    // An empty `evidence` list is the answer Python's code gives: nothing, so markers.
    check(
        true,
        &format!("{marker}```json\n{{\"evidence\": [], \"citations\": [{{}}]}}\n```"),
        url,
    );
    check(
        true,
        &format!("{marker}```json\n{{\"evidence\": [1, \"x\"]}}\n```"),
        url,
    );
    check(
        true,
        &format!("{marker}```json\n{{\"evidence\": [}}\n```"),
        url,
    );
    check(
        true,
        &format!("{marker}```json\n{{\"other\": []}}\n```"),
        url,
    );
    check(
        true,
        &format!(
            "{marker}```json\n{{\"citations\": [{{\"type\": \"file\", \"reference\": \"z.py:1\"}}]}}\n```"
        ),
        r#"[{"type": "file", "reference": "z.py:1", "context": null}]"#,
    );
    check(
        false,
        &format!(
            "{marker}```json\n{{\"citations\": [{{\"type\": \"file\", \"reference\": \"z.py:1\"}}]}}\n```"
        ),
        url,
    );
}

/// Only the first fenced json block holding an object is read, even when it fails.
#[test]
fn first_json_block_only() {
    check(
        true,
        "```json\n[1]\n```\n```json\n{\"evidence\": [{\"reference\": \"one\"}]}\n```\n```json\n{\"evidence\": [{\"reference\": \"two\"}]}\n```",
        r#"[{"type": "unknown", "reference": "one", "context": null}]"#,
    );
    check(
        true,
        "```json\n{\"evidence\": [{\"reference\": \"bad\"},]}\n```\n{\"evidence\": [{\"reference\": \"tail\"}]}",
        "[]",
    );
}

/// A bare object ending the message: from the first line that starts with `{`, or the
/// start of the message, to the final `}`; NaN and repeated keys as Python reads them.
#[test]
fn bare_object_ending_the_message() {
    check(
        true,
        "Summary.\n{\"evidence\": [{\"reference\": \"a\", \"context\": NaN}], \"evidence\": [{\"reference\": \"b\"}]}\n \n",
        r#"[{"type": "unknown", "reference": "b", "context": null}]"#,
    );
    check(
        true,
        "  {\"evidence\": [{\"type\": \"file\", \"reference\": \"test.py:1\"}]}",
        r#"[{"type": "file", "reference": "test.py:1", "context": null}]"#,
    );
    // Text after the object: not a bare object ending the message.
    check(
        true,
        "x\n{\"evidence\": [{\"reference\": \"a\"}]}\nthanks",
        "[]",
    );
    // Two objects: the span from the first is not one JSON value.
    check(
        true,
        "x\n{\"a\": 1}\n{\"evidence\": [{\"reference\": \"a\"}]}",
        "[]",
    );
}
