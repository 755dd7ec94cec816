//! Extraction of citations from one assistant message.
//!
//! The rules are Ralph's (`ralph_gold.evidence`), with Python `re` semantics: its four
//! marker patterns verbatim, its references and contexts as its examples and receipt show
//! them, plus the fixes numbered below.
//!
//! - **File**: the reference is the path and lines; the context is up to 100 characters
//!   on each side of the marker, stripped, at most 200.
//! - **Command**: a fenced `bash` or `sh` block after the marker. The reference is the
//!   command, the block's first line (`pytest tests/ -v`); the context is the rest of the
//!   block, the command's output, stripped and cut to 200 characters (none when empty).
//! - **Test**: `pytest <node id> - PASS|FAIL`; the reference is the marker's text,
//!   `pytest <node id> - <result>`, as JSON citations write it. Without `pytest `, only a
//!   pytest node id, a `.py` path then `::` and a name (`tests/test_auth.py::test_login`),
//!   followed by ` - PASS|FAIL` is a test citation, its reference as written
//!   (`tests/test_auth.py::test_login - PASS`, nothing added): the documentation's "For
//!   Agent Users" sample writes its test that way and says it is extracted, which Ralph's
//!   own pattern misses. Anything else before ` - PASS|FAIL` (`**Evidence**: lint - PASS`,
//!   a link followed by ` - FAIL`) is no test citation (and, matching no other pattern,
//!   no citation).
//! - **URL**: `[label](url)`; the reference is `label: url`.
//!
//! 1. **Line endings.** Every run of CRs directly before an LF is removed before matching
//!    (CRLF becomes LF, and so does the doubled CRCRLF of a converted-twice file), so the
//!    command pattern's `\n` matches and CRLF text gives the same citations as LF text.
//!    A CR anywhere else is kept. Offsets are mapped back to the text as given.
//! 2. **Duplicates.** A citation repeated within one message (same type and reference) is
//!    kept once, at its first occurrence, with that occurrence's context.
//! 3. **Order.** Citations come in order of position in the text, not grouped by type;
//!    where two patterns match at the same marker the order is file, command, test, url.
//! 4. **A message that is one JSON object.** A bare JSON object ending the message may
//!    also start it (after whitespace), not only follow a newline.
//!
//! Python's `re` and the `regex` crate agree on these patterns: both pick the leftmost
//! match and, at one start, the first alternative by backtracking priority, both match
//! `.` (with DOTALL) and negated classes against any character including newline, and
//! both treat `\d` as Unicode decimal digits (`Nd`). Python's `\s` is Unicode White_Space
//! plus U+001C..U+001F, so it is spelled out as [`WS`] rather than the crate's `\s`. The
//! one remaining difference is the Unicode version behind `\d`: digits of scripts added
//! after the Python release (Unicode 14 for 3.11) match here and not there.

use std::borrow::Cow;
use std::collections::HashSet;
use std::sync::LazyLock;

use regex::Regex;

use super::{COMMAND, Citation, FILE, Located, TEST, UNKNOWN, URL};
use crate::util::pyjson::{self, Value};

/// What to extract.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// Look for a JSON evidence block first (Ralph's `enable_json`). On by default, as
    /// Ralph's configuration turns it on (`enable_limits = true`).
    pub enable_json: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options { enable_json: true }
    }
}

impl Options {
    /// The options as the store records them: 0 for the defaults, bit 0 set when JSON
    /// evidence blocks are not read.
    pub fn bits(self) -> u64 {
        u64::from(!self.enable_json)
    }
}

/// Python's `\s` for `str` patterns: the characters `str.isspace()` accepts.
const WS: &str = r"[\t\n\x0B\x0C\r\x1C-\x1F \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}]";

/// Characters of context kept on each side of a file citation's match.
const CONTEXT_SIDE: usize = 100;
/// Longest context, command reference and command output and JSON context, in characters.
const MAX_CHARS: usize = 200;

fn compile(pattern: &str) -> Regex {
    let pattern = pattern.replace(r"\s", WS);
    match Regex::new(&pattern) {
        Ok(re) => re,
        // The patterns are constants; the unit tests compile every one of them.
        Err(e) => unreachable!("invalid built-in pattern {pattern}: {e}"),
    }
}

// Ralph's four marker patterns, verbatim but for the DOTALL flag written inline.
// MULTILINE changes nothing here: none of them uses `^` or `$`.
static FILE_RE: LazyLock<Regex> =
    LazyLock::new(|| compile(r"\*\*Evidence\*\*:\s*([a-zA-Z0-9_/\.\-]+:\d+(?::\d+)?(?:-\d+)?)"));
static COMMAND_RE: LazyLock<Regex> =
    LazyLock::new(|| compile(r"(?s)\*\*Evidence\*\*:\s*```(?:bash|sh)\n(.*?)\n```"));
static TEST_RE: LazyLock<Regex> = LazyLock::new(|| {
    compile(r"\*\*Evidence\*\*:\s*pytest\s+([a-zA-Z0-9_/\.\-:]+)\s+-\s+(PASS|FAIL)")
});
static URL_RE: LazyLock<Regex> =
    LazyLock::new(|| compile(r"\*\*Evidence\*\*:\s*\[([^\]]+)\]\(([^)]+)\)"));

/// Beside them, a test marker without `pytest `: a pytest node id (a `.py` path, `::`,
/// then the name and any more parts, in the characters Ralph's test pattern allows) and
/// its result.
static NODE_TEST_RE: LazyLock<Regex> = LazyLock::new(|| {
    compile(r"\*\*Evidence\*\*:\s*([a-zA-Z0-9_/\.\-]+\.py::[a-zA-Z0-9_/\.\-:]+)\s+-\s+(PASS|FAIL)")
});

/// The first fenced `json` block holding an object.
static JSON_BLOCK_RE: LazyLock<Regex> = LazyLock::new(|| compile(r"(?s)```json\s*(\{.*?\})\s*```"));
/// An object from the start of the message or the first line that starts with `{`, to
/// a `}` that ends the message.
static JSON_TAIL_RE: LazyLock<Regex> = LazyLock::new(|| compile(r"(?s)(?:\A\s*|\n)(\{.*\})\s*\z"));

const MARKER: &str = "**Evidence**:";

/// The citations in one assistant message, in order of position, each once.
///
/// With `enable_json`, a JSON evidence block that yields at least one citation is the
/// answer; otherwise the `**Evidence**:` markers are. Never fails: text without
/// citations, or with a broken JSON block, gives what the markers give.
pub fn extract(text: &str, options: &Options) -> Vec<Located> {
    let normal = Normalised::new(text);
    let found = if options.enable_json {
        Some(json_citations(&normal.text)).filter(|found| !found.is_empty())
    } else {
        None
    };
    let found = match found {
        Some(found) => found,
        None => marker_citations(&normal.text),
    };
    dedup(found)
        .into_iter()
        .map(|(start, end, citation)| {
            let offset = normal.original(start);
            Located {
                offset,
                len: normal.original(end) - offset,
                citation,
            }
        })
        .collect()
}

/// A citation with its span in the normalised text.
type Found = (usize, usize, Citation);

/// Keeps the first of each (type, reference), in order of position.
fn dedup(mut found: Vec<Found>) -> Vec<Found> {
    // Stable: at one position the earlier pattern stays first.
    found.sort_by_key(|f| f.0);
    let mut seen = HashSet::new();
    found.retain(|(_, _, c)| seen.insert((c.kind.clone(), c.reference.clone())));
    found
}

fn marker_citations(text: &str) -> Vec<Found> {
    let mut found = Vec::new();
    if !text.contains(MARKER) {
        return found;
    }
    for caps in FILE_RE.captures_iter(text) {
        let (Some(whole), Some(reference)) = (caps.get(0), caps.get(1)) else {
            continue;
        };
        let before = back_chars(text, whole.start(), CONTEXT_SIDE);
        let after = forward_chars(text, whole.end(), CONTEXT_SIDE);
        let context = head_chars(py_strip(&text[before..after]), MAX_CHARS);
        found.push((
            whole.start(),
            whole.end(),
            citation(
                FILE,
                reference.as_str(),
                Some(context).filter(|c| !c.is_empty()),
            ),
        ));
    }
    for caps in COMMAND_RE.captures_iter(text) {
        let (Some(whole), Some(block)) = (caps.get(0), caps.get(1)) else {
            continue;
        };
        let (command, output) = command_and_output(block.as_str());
        found.push((
            whole.start(),
            whole.end(),
            citation(COMMAND, command, Some(output).filter(|o| !o.is_empty())),
        ));
    }
    for caps in TEST_RE.captures_iter(text) {
        let (Some(whole), Some(path), Some(result)) = (caps.get(0), caps.get(1), caps.get(2))
        else {
            continue;
        };
        let reference = format!("pytest {} - {}", path.as_str(), result.as_str());
        found.push((whole.start(), whole.end(), citation(TEST, &reference, None)));
    }
    for caps in NODE_TEST_RE.captures_iter(text) {
        let (Some(whole), Some(node), Some(result)) = (caps.get(0), caps.get(1), caps.get(2))
        else {
            continue;
        };
        let reference = format!("{} - {}", node.as_str(), result.as_str());
        found.push((whole.start(), whole.end(), citation(TEST, &reference, None)));
    }
    for caps in URL_RE.captures_iter(text) {
        let (Some(whole), Some(label), Some(url)) = (caps.get(0), caps.get(1), caps.get(2)) else {
            continue;
        };
        let reference = format!("{}: {}", label.as_str(), url.as_str());
        found.push((whole.start(), whole.end(), citation(URL, &reference, None)));
    }
    found
}

/// A command block's command (its first non-blank line, stripped) and output (the rest,
/// stripped), each cut to 200 characters.
fn command_and_output(block: &str) -> (&str, &str) {
    let block = py_strip(block);
    let (command, output) = block.split_once('\n').unwrap_or((block, ""));
    (
        head_chars(py_strip(command), MAX_CHARS),
        head_chars(py_strip(output), MAX_CHARS),
    )
}

fn citation(kind: &str, reference: &str, context: Option<&str>) -> Citation {
    Citation {
        kind: kind.to_owned(),
        reference: reference.to_owned(),
        context: context.map(str::to_owned),
    }
}

/// The citations of the JSON evidence block, if there is one; empty otherwise.
///
/// The block is the first fenced `json` block holding an object, or, when there is none,
/// an object from the first line starting with `{` to the `}` that ends the message
/// (only whitespace after it). It is parsed as Python's `json.loads` would; if it is an
/// object with an `evidence` list, that list gives the citations, else a `citations`
/// list does (an empty `evidence` list is not passed over for `citations`). Elements that
/// are not objects are skipped. `type` and `reference` become text as Python's `str()`
/// writes them; a missing or `null` type is `unknown`, a missing or `null` reference is
/// empty. `context` is kept, as text and cut to 200 characters, when Python would call it
/// true (not `null`, `false`, zero or empty).
fn json_citations(text: &str) -> Vec<Found> {
    let Some(object) = json_object(text) else {
        return Vec::new();
    };
    let Ok(value) = pyjson::parse(object.as_str()) else {
        return Vec::new();
    };
    let key = ["evidence", "citations"]
        .into_iter()
        .find(|key| matches!(value.get(key), Some(Value::Array(_))));
    let Some(items) = key.and_then(|key| value.get(key)).and_then(Value::as_array) else {
        return Vec::new();
    };
    let spans = key
        .and_then(|key| element_spans(object.as_str(), key))
        .filter(|spans| spans.len() == items.len());
    let whole = (object.start(), object.end());
    items
        .iter()
        .enumerate()
        .filter_map(|(i, item)| {
            let fields = item.as_object()?;
            let kind = match fields.get("type") {
                None | Some(Value::Null) => UNKNOWN.to_owned(),
                Some(v) => py_str(v),
            };
            let reference = match fields.get("reference") {
                None | Some(Value::Null) => String::new(),
                Some(v) => py_str(v),
            };
            let context = fields
                .get("context")
                .filter(|v| py_truthy(v))
                .map(|v| head_chars(&py_str(v), MAX_CHARS).to_owned());
            let (start, end) = spans
                .as_ref()
                .and_then(|spans| spans.get(i))
                .map_or(whole, |&(s, e)| (object.start() + s, object.start() + e));
            Some((
                start,
                end,
                Citation {
                    kind,
                    reference,
                    context,
                },
            ))
        })
        .collect()
}

fn json_object(text: &str) -> Option<regex::Match<'_>> {
    if text.contains("```json")
        && let Some(m) = JSON_BLOCK_RE.captures(text).and_then(|c| c.get(1))
    {
        return Some(m);
    }
    if !py_strip(text).ends_with('}') {
        return None;
    }
    JSON_TAIL_RE.captures(text).and_then(|c| c.get(1))
}

/// The byte spans, within `object` (a valid JSON object), of the elements of the array
/// that is the value of the last member named `key` (the one Python's `dict` keeps).
fn element_spans(object: &str, key: &str) -> Option<Vec<(usize, usize)>> {
    let s = object.as_bytes();
    let mut i = skip_ws(s, 0);
    if s.get(i) != Some(&b'{') {
        return None;
    }
    i = skip_ws(s, i + 1);
    let mut array_at = None;
    while s.get(i) == Some(&b'"') {
        let key_end = skip_value(s, i)?;
        let named = match pyjson::parse(&object[i..key_end]) {
            Ok(Value::String(name)) => name == key,
            _ => false,
        };
        i = skip_ws(s, key_end);
        if s.get(i) != Some(&b':') {
            return None;
        }
        i = skip_ws(s, i + 1);
        if named {
            array_at = Some(i);
        }
        i = skip_ws(s, skip_value(s, i)?);
        match s.get(i) {
            Some(b',') => i = skip_ws(s, i + 1),
            _ => break,
        }
    }
    let mut i = array_at?;
    if s.get(i) != Some(&b'[') {
        return None;
    }
    i = skip_ws(s, i + 1);
    let mut spans = Vec::new();
    if s.get(i) == Some(&b']') {
        return Some(spans);
    }
    loop {
        let end = skip_value(s, i)?;
        spans.push((i, end));
        i = skip_ws(s, end);
        match s.get(i) {
            Some(b',') => i = skip_ws(s, i + 1),
            Some(b']') => return Some(spans),
            _ => return None,
        }
    }
}

fn skip_ws(s: &[u8], mut i: usize) -> usize {
    while matches!(s.get(i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
        i += 1;
    }
    i
}

/// The end of the JSON value starting at `i` (already known to be valid JSON).
fn skip_value(s: &[u8], i: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut j = i;
    loop {
        match *s.get(j)? {
            b'"' => {
                j += 1;
                loop {
                    match *s.get(j)? {
                        b'\\' => j += 2,
                        b'"' => break,
                        _ => j += 1,
                    }
                }
                j += 1;
            }
            b'{' | b'[' => {
                depth += 1;
                j += 1;
            }
            b'}' | b']' => {
                depth = depth.checked_sub(1)?;
                j += 1;
            }
            _ if depth == 0 => {
                // A scalar: up to the next delimiter.
                while !matches!(
                    s.get(j),
                    None | Some(b',' | b']' | b'}' | b' ' | b'\t' | b'\n' | b'\r')
                ) {
                    j += 1;
                }
                return Some(j);
            }
            _ => j += 1,
        }
        if depth == 0 {
            return Some(j);
        }
    }
}

/// Python's `str()` of a parsed JSON value.
fn py_str(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => {
            let mut out = String::new();
            py_repr(other, &mut out);
            out
        }
    }
}

/// Python's `repr()` of a parsed JSON value (`None`, `True`, `'text'`, `[1, 'a']`, ...).
fn py_repr(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push_str("None"),
        Value::Bool(true) => out.push_str("True"),
        Value::Bool(false) => out.push_str("False"),
        Value::Int(digits) => out.push_str(digits),
        Value::Float(f) if f.is_nan() => out.push_str("nan"),
        Value::Float(f) if f.is_infinite() => out.push_str(if *f > 0.0 { "inf" } else { "-inf" }),
        Value::Float(f) => out.push_str(&pyjson::float_repr(*f)),
        Value::String(s) => out.push_str(&pyjson::py_repr(s)),
        Value::Array(items) => {
            out.push('[');
            for (n, item) in items.iter().enumerate() {
                if n > 0 {
                    out.push_str(", ");
                }
                py_repr(item, out);
            }
            out.push(']');
        }
        Value::Object(members) => {
            out.push('{');
            for (n, (key, item)) in members.iter().enumerate() {
                if n > 0 {
                    out.push_str(", ");
                }
                out.push_str(&pyjson::py_repr(key));
                out.push_str(": ");
                py_repr(item, out);
            }
            out.push('}');
        }
    }
}

/// Python's truth value of a parsed JSON value.
fn py_truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Int(digits) => digits != "0",
        Value::Float(f) => *f != 0.0,
        Value::String(s) => !s.is_empty(),
        Value::Array(items) => !items.is_empty(),
        Value::Object(members) => !members.is_empty(),
    }
}

/// Python's `str.strip()`.
fn py_strip(s: &str) -> &str {
    s.trim_matches(pyjson::is_py_whitespace)
}

/// The first `n` characters of `s` (Python's `s[:n]`).
fn head_chars(s: &str, n: usize) -> &str {
    s.char_indices().nth(n).map_or(s, |(i, _)| &s[..i])
}

/// The byte position `n` characters before `end` (or 0).
fn back_chars(s: &str, end: usize, n: usize) -> usize {
    s[..end]
        .char_indices()
        .rev()
        .take(n)
        .last()
        .map_or(end, |(i, _)| i)
}

/// The byte position `n` characters after `start` (or the end).
fn forward_chars(s: &str, start: usize, n: usize) -> usize {
    s[start..]
        .char_indices()
        .nth(n)
        .map_or(s.len(), |(i, _)| start + i)
}

/// The message with line endings normalised, and the way back to the original offsets.
struct Normalised<'a> {
    text: Cow<'a, str>,
    /// For each LF that lost CRs before it: its position in `text`, and how many CRs
    /// were removed up to and including it. Sorted by position.
    removed: Vec<(usize, usize)>,
}

impl<'a> Normalised<'a> {
    fn new(original: &'a str) -> Self {
        if memchr::memmem::find(original.as_bytes(), b"\r\n").is_none() {
            return Normalised {
                text: Cow::Borrowed(original),
                removed: Vec::new(),
            };
        }
        let mut text = String::with_capacity(original.len());
        let mut removed = Vec::new();
        let mut total = 0;
        let mut rest = original;
        while let Some(cr) = rest.find('\r') {
            text.push_str(&rest[..cr]);
            let run = rest[cr..].bytes().take_while(|&b| b == b'\r').count();
            if rest.as_bytes().get(cr + run) == Some(&b'\n') {
                total += run;
                removed.push((text.len(), total));
            } else {
                text.push_str(&rest[cr..cr + run]);
            }
            rest = &rest[cr + run..];
        }
        text.push_str(rest);
        Normalised {
            text: Cow::Owned(text),
            removed,
        }
    }

    /// The offset in the original text of position `p` of the normalised text: every CR
    /// removed before an LF that comes before `p` is added back.
    fn original(&self, p: usize) -> usize {
        let n = self.removed.partition_point(|&(at, _)| at < p);
        p + n.checked_sub(1).map_or(0, |last| self.removed[last].1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pattern_compiles() {
        for re in [
            &FILE_RE,
            &COMMAND_RE,
            &TEST_RE,
            &NODE_TEST_RE,
            &URL_RE,
            &JSON_BLOCK_RE,
            &JSON_TAIL_RE,
        ] {
            assert!(!re.as_str().is_empty());
        }
    }

    #[test]
    fn normalising_maps_offsets_back() {
        let original = "a\r\nb\r\r\nc\rd\r\n";
        let n = Normalised::new(original);
        assert_eq!(n.text, "a\nb\nc\rd\n");
        // 'b', 'c', 'd' and the end, each back at its original place.
        assert_eq!(n.original(2), 3);
        assert_eq!(n.original(4), 7);
        assert_eq!(n.original(6), 9);
        assert_eq!(n.original(8), original.len());
        // An LF itself maps to just after the CRs removed before the previous LFs.
        assert_eq!(&original[n.original(3)..n.original(4)], "\r\r\n");
    }

    #[test]
    fn python_whitespace_is_the_str_isspace_set() {
        // U+001C..U+001F are whitespace to Python's `\s` and `strip()`, not to Rust's.
        let text = "**Evidence**:\u{1F}a.py:1";
        let found = extract(text, &Options::default());
        assert_eq!(found.len(), 1);
        assert_eq!(py_strip("\u{1C} x \u{3000}"), "x");
    }

    #[test]
    fn python_str_of_json_values() {
        let v = pyjson::parse(r#"[null, true, 1, 1.5, 1e20, NaN, -Infinity, "a'b", {"k": "v"}]"#)
            .unwrap_or_default();
        assert_eq!(
            py_str(&v),
            r#"[None, True, 1, 1.5, 1e+20, nan, -inf, "a'b", {'k': 'v'}]"#
        );
        assert_eq!(py_str(&Value::String("x".into())), "x");
    }

    #[test]
    fn element_spans_follow_the_last_key() {
        let object = r#"{"evidence": [1], "x": {"evidence": [2]}, "\u0065vidence" : [ {"a": "]"} , "s\"" ,3 ]}"#;
        let spans = element_spans(object, "evidence").unwrap_or_default();
        let parts: Vec<&str> = spans.iter().map(|&(s, e)| &object[s..e]).collect();
        assert_eq!(parts, [r#"{"a": "]"}"#, r#""s\"""#, "3"]);
    }
}
