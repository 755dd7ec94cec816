//! Property tests: extraction never panics, spans are always inside the message on
//! character boundaries, and line endings do not change what is extracted.

use proptest::prelude::*;

use super::{Citation, Options, extract};

/// Pieces that make the patterns match, nearly match, or break in interesting places.
const PIECES: &[&str] = &[
    "**Evidence**:",
    "**Evidence**: ",
    "**Evidence** :",
    " ",
    "\t",
    "\n",
    "\r",
    "\r\n",
    "\u{1F}",
    "\u{3000}",
    "```bash\n",
    "```sh\n",
    "\n```",
    "```json\n",
    "```",
    "{",
    "}",
    "[",
    "]",
    "(",
    ")",
    "\"",
    "\\",
    ",",
    ":",
    "\"evidence\": [",
    "\"citations\": [",
    "{\"type\": \"file\", \"reference\": \"a.py:1\"}",
    "\"context\": NaN",
    "pytest ",
    "tests/t.py::x",
    "a.py:12",
    ":3",
    "-4",
    " - PASS",
    " - FAIL",
    "[doc](https://x)",
    "é",
    "٤",
    "😀",
];

fn message() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            3 => prop::sample::select(PIECES).prop_map(str::to_owned),
            1 => any::<String>(),
        ],
        0..40,
    )
    .prop_map(|parts| parts.concat())
}

fn citations(text: &str, enable_json: bool) -> Vec<Citation> {
    extract(text, &Options { enable_json })
        .into_iter()
        .map(|l| l.citation)
        .collect()
}

proptest! {
    #[test]
    fn spans_inside_message_on_char_boundaries(text in message(), enable_json: bool) {
        for l in extract(&text, &Options { enable_json }) {
            prop_assert!(l.len > 0);
            prop_assert!(text.get(l.offset..l.offset + l.len).is_some(),
                "span {}+{} of {:?}", l.offset, l.len, text);
        }
    }

    #[test]
    fn arbitrary_unicode_never_panics(text in any::<String>(), enable_json: bool) {
        for l in extract(&text, &Options { enable_json }) {
            prop_assert!(text.get(l.offset..l.offset + l.len).is_some());
        }
    }

    /// The same text with each line ending written as LF, CRLF or CRCRLF at random
    /// gives the same citations.
    #[test]
    fn line_endings_do_not_change_citations(
        text in message(),
        endings in prop::collection::vec(0..3u8, 64),
        enable_json: bool,
    ) {
        let lf = text.replace('\r', "");
        let mut mixed = String::with_capacity(lf.len() * 2);
        for (n, line) in lf.split('\n').enumerate() {
            if n > 0 {
                mixed.push_str(["\n", "\r\n", "\r\r\n"][usize::from(endings[n % endings.len()])]);
            }
            mixed.push_str(line);
        }
        prop_assert_eq!(citations(&lf, enable_json), citations(&mixed, enable_json));
    }
}
