//! JSON as Python's `json` module reads and writes it.
//!
//! prompt-diary parses every workspace file and session line with `json.loads` and writes
//! every file with `json.dumps`, so matching it byte for byte needs Python's rules, which
//! serde_json does not follow: `NaN`/`Infinity` literals, integers of any size, duplicate
//! keys (last value at the first key's position), Python's error messages, `repr(float)`.

use std::borrow::Cow;
use std::fmt::Write as _;

/// An object: insertion-ordered, as Python's `dict`.
pub type Map = indexmap::IndexMap<String, Value>;

#[derive(Debug, Clone, PartialEq, Default)]
pub enum Value {
    #[default]
    Null,
    Bool(bool),
    /// An integer token, kept as decimal text (any size), canonical (`-0` is `0`).
    Int(String),
    Float(f64),
    String(String),
    Array(Vec<Value>),
    Object(Map),
}

impl Value {
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.as_object()?.get(key)
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_object(&self) -> Option<&Map> {
        match self {
            Value::Object(m) => Some(m),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&[Value]> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }
}

/// Why text is not JSON, with Python's message (without its position suffix).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParseError {
    kind: ErrorKind,
    offset: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ErrorKind {
    ExpectingValue,
    ExpectingPropertyName,
    ExpectingColon,
    ExpectingComma,
    ExtraData,
    UnterminatedString,
    InvalidControl,
    InvalidEscape,
    InvalidUnicodeEscape,
    Bom,
    TooDeep,
}

impl ParseError {
    pub fn message(&self) -> &'static str {
        match self.kind {
            ErrorKind::ExpectingValue => "Expecting value",
            ErrorKind::ExpectingPropertyName => "Expecting property name enclosed in double quotes",
            ErrorKind::ExpectingColon => "Expecting ':' delimiter",
            ErrorKind::ExpectingComma => "Expecting ',' delimiter",
            ErrorKind::ExtraData => "Extra data",
            ErrorKind::UnterminatedString => "Unterminated string starting at",
            ErrorKind::InvalidControl => "Invalid control character at",
            ErrorKind::InvalidEscape => "Invalid \\escape",
            ErrorKind::InvalidUnicodeEscape => "Invalid \\uXXXX escape",
            ErrorKind::Bom => "Unexpected UTF-8 BOM (decode using utf-8-sig)",
            ErrorKind::TooDeep => "Nesting too deep",
        }
    }
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (byte {})", self.message(), self.offset)
    }
}

impl std::error::Error for ParseError {}

/// Deeper nesting is refused (Python hits its recursion limit near 1000).
const MAX_DEPTH: usize = 1000;

/// Parses `text` as Python's `json.loads` does (lone surrogate escapes become U+FFFD).
pub fn parse(text: &str) -> Result<Value, ParseError> {
    parse_borrowed(text).map(|node| node.to_value())
}

/// Parses `text` with [`parse`]'s rules into a tree that borrows from it: strings stay
/// undecoded slices until asked for, objects keep their members in order of appearance.
/// Reading a line needs a few fields and the size and ends of the large ones; this
/// avoids copying everything else.
pub fn parse_borrowed(text: &str) -> Result<Node<'_>, ParseError> {
    let mut p = Parser::over(text)?;
    p.skip_ws();
    let value = p.value(0)?;
    p.finish()?;
    Ok(value)
}

/// Checks that `text` is JSON as [`parse`] reads it (the same grammar, limits and
/// errors), building nothing: a large document is judged without its tree.
pub fn check(text: &str) -> Result<(), ParseError> {
    let mut p = Parser::over(text)?;
    p.skip_ws();
    p.skip(0)?;
    p.finish()
}

/// The raw text of the value of the last member named `key` (as a Python `dict` keeps
/// the last), when `text` is an object: one member of a large document, read without
/// building the rest. `Ok(None)` when `text` is no object or has no such member. The
/// whole text is checked as [`check`] does.
pub fn raw_member<'a>(text: &'a str, key: &str) -> Result<Option<&'a str>, ParseError> {
    let mut p = Parser::over(text)?;
    p.skip_ws();
    if p.s.get(p.i) != Some(&b'{') {
        p.skip(0)?;
        p.finish()?;
        return Ok(None);
    }
    let mut found = None;
    p.members(|p, name| {
        let start = p.i;
        p.skip(1)?;
        if name.is(key) {
            found = Some(&p.text[start..p.i]);
        }
        Ok(())
    })?;
    p.finish()?;
    Ok(found)
}

/// The raw text of each element of `text`, in order, when it is an array (nothing when
/// it is another value): the elements of a large document one at a time, each checked
/// as it is reached; the first error ends the iteration.
pub fn raw_elements(text: &str) -> RawElements<'_> {
    let start = Parser::over(text).map(|mut p| {
        p.skip_ws();
        p
    });
    let (parser, done) = match start {
        Ok(p) if p.s.get(p.i) == Some(&b'[') => (Some(p), false),
        _ => (None, true),
    };
    RawElements {
        parser,
        first: true,
        done,
    }
}

/// The iterator of [`raw_elements`].
pub struct RawElements<'a> {
    parser: Option<Parser<'a>>,
    first: bool,
    done: bool,
}

impl<'a> Iterator for RawElements<'a> {
    type Item = Result<&'a str, ParseError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let p = self.parser.as_mut()?;
        let step = (|| {
            if self.first {
                self.first = false;
                p.i += 1;
                p.skip_ws();
                if p.s.get(p.i) == Some(&b']') {
                    return Ok(None);
                }
            } else {
                p.skip_ws();
                match p.s.get(p.i) {
                    Some(b',') => p.i += 1,
                    Some(b']') => return Ok(None),
                    _ => return Err(p.error(ErrorKind::ExpectingComma)),
                }
            }
            p.skip_ws();
            let start = p.i;
            p.skip(1)?;
            Ok(Some(&p.text[start..p.i]))
        })();
        match step {
            Ok(Some(raw)) => Some(Ok(raw)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

/// A parsed value borrowing from its text; see [`parse_borrowed`].
#[derive(Debug, Clone, PartialEq)]
pub enum Node<'a> {
    Null,
    Bool(bool),
    /// An integer token as written.
    Int(&'a str),
    Float(f64),
    String(Str<'a>),
    Array(Vec<Node<'a>>),
    /// Members in order of appearance, repeated keys included; [`Node::get`] finds the
    /// last, as a Python `dict` keeps the last value.
    Object(Vec<(Str<'a>, Node<'a>)>),
}

impl<'a> Node<'a> {
    /// The value of the last member named `key`, if this is an object.
    pub fn get(&self, key: &str) -> Option<&Node<'a>> {
        match self {
            Node::Object(members) => members.iter().rev().find(|(k, _)| k.is(key)).map(|m| &m.1),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&Str<'a>> {
        match self {
            Node::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&[Node<'a>]> {
        match self {
            Node::Array(items) => Some(items),
            _ => None,
        }
    }

    pub fn is_object(&self) -> bool {
        matches!(self, Node::Object(_))
    }

    /// The owned value: strings decoded, integers canonical (`-0` is `0`), and a repeated
    /// key kept at its first position with its last value.
    pub fn to_value(&self) -> Value {
        match self {
            Node::Null => Value::Null,
            Node::Bool(b) => Value::Bool(*b),
            Node::Int(token) => {
                let digits = token.trim_start_matches('-');
                Value::Int(if token.starts_with('-') && digits != "0" {
                    (*token).to_owned()
                } else {
                    digits.to_owned()
                })
            }
            Node::Float(f) => Value::Float(*f),
            Node::String(s) => Value::String(s.decode().into_owned()),
            Node::Array(items) => Value::Array(items.iter().map(Node::to_value).collect()),
            Node::Object(members) => {
                let mut map = Map::with_capacity(members.len());
                for (key, value) in members {
                    map.insert(key.decode().into_owned(), value.to_value());
                }
                Value::Object(map)
            }
        }
    }
}

/// A JSON string as written between its quotes, already checked to be valid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Str<'a> {
    raw: &'a str,
    /// The decoded string's length in UTF-8 bytes.
    len: usize,
    escaped: bool,
}

impl<'a> Str<'a> {
    /// The decoded length in UTF-8 bytes (what Python's `len(s.encode())` gives, with a
    /// lone surrogate counted as U+FFFD).
    pub fn len(&self) -> usize {
        self.len
    }

    /// The decoded string; borrowed when it holds no escape.
    pub fn decode(&self) -> Cow<'a, str> {
        if !self.escaped {
            return Cow::Borrowed(self.raw);
        }
        let mut out = String::with_capacity(self.len);
        for unit in units(self.raw) {
            unit.push_to(&mut out);
        }
        Cow::Owned(out)
    }

    /// Empty or only Python whitespace; decodes only up to the first other character.
    pub fn is_blank(&self) -> bool {
        units(self.raw).all(|unit| match unit {
            Unit::Run(run) => is_blank(run),
            Unit::Escape(c) => is_py_whitespace(c),
        })
    }

    /// Whether the decoded string equals `s`.
    pub fn is(&self, s: &str) -> bool {
        if self.escaped {
            self.len == s.len() && self.decode() == s
        } else {
            self.raw == s
        }
    }

    /// The longest prefix of the decoded string of at most `max` bytes ending on a
    /// character boundary, decoding no more than that.
    pub fn head(&self, max: usize) -> Cow<'a, str> {
        if !self.escaped {
            return Cow::Borrowed(floor_prefix(self.raw, max));
        }
        let mut out = String::with_capacity(max.min(self.len) + 4);
        for unit in units(self.raw) {
            if out.len() > max {
                break;
            }
            unit.push_to(&mut out);
        }
        let end = floor_prefix(&out, max).len();
        out.truncate(end);
        Cow::Owned(out)
    }

    /// The longest suffix of the decoded string of at most `max` bytes starting on a
    /// character boundary, decoding from the end no more than the units it spans.
    pub fn tail(&self, max: usize) -> Cow<'a, str> {
        if !self.escaped {
            return Cow::Borrowed(ceil_suffix(self.raw, max));
        }
        // Units from the end, last first, until they hold `max` bytes.
        let mut units = Vec::new();
        let mut got = 0;
        let mut end = self.raw.len();
        while end > 0 && got < max {
            let (unit, start) = last_unit(self.raw, end, max - got);
            got += unit.len();
            units.push(unit);
            end = start;
        }
        let mut out = String::with_capacity(got);
        for unit in units.into_iter().rev() {
            unit.push_to(&mut out);
        }
        let start = out.len() - ceil_suffix(&out, max).len();
        out.drain(..start);
        Cow::Owned(out)
    }
}

/// The last unit of the validated raw string `raw[..end]` (which ends where a unit ends),
/// and where it starts. A run is cut to its last `need` bytes or a little more (from a
/// character boundary).
///
/// In valid string content a backslash starts an escape unless it is the second of a
/// `\\` pair, and pairs form from the start of a run of backslashes: the parity of the
/// run that ends at the last backslash tells which. A low-surrogate escape right after a
/// high-surrogate one is one character with it, as forward decoding pairs them.
fn last_unit(raw: &str, end: usize, need: usize) -> (Unit<'_>, usize) {
    let bytes = raw.as_bytes();
    let Some(q) = memchr::memrchr(b'\\', &bytes[..end]) else {
        return run_tail(raw, 0, end, need);
    };
    // An even run ends with the second backslash of a `\\` pair.
    let ends_pair = backslash_run(bytes, q).is_multiple_of(2);
    let escape_end = if ends_pair {
        q + 1
    } else if bytes.get(q + 1) == Some(&b'u') {
        q + 6
    } else {
        q + 2
    };
    if escape_end < end {
        return run_tail(raw, escape_end, end, need);
    }
    if ends_pair {
        return (Unit::Escape('\\'), q - 1);
    }
    // A low surrogate's partner, if the unit before it is a high-surrogate escape.
    let is_low = |at: usize| hex4(bytes, at).is_ok_and(|u| (0xDC00..0xE000).contains(&u));
    let is_high = |at: usize| hex4(bytes, at).is_ok_and(|u| (0xD800..0xDC00).contains(&u));
    let start = if bytes[q + 1] == b'u'
        && is_low(q)
        && q >= 6
        && bytes[q - 6] == b'\\'
        && bytes[q - 5] == b'u'
        && !backslash_run(bytes, q - 6).is_multiple_of(2)
        && is_high(q - 6)
    {
        q - 6
    } else {
        q
    };
    // Validated when parsed: decoding cannot fail here.
    let c = unescape(bytes, start).map_or(char::REPLACEMENT_CHARACTER, |(c, _)| c);
    (Unit::Escape(c), start)
}

/// How many backslashes end at `at` (inclusive).
fn backslash_run(bytes: &[u8], at: usize) -> usize {
    bytes[..=at]
        .iter()
        .rev()
        .take_while(|&&b| b == b'\\')
        .count()
}

/// The raw run `raw[start..end]`, cut to its last `need` bytes or a little more.
fn run_tail(raw: &str, start: usize, end: usize, need: usize) -> (Unit<'_>, usize) {
    let mut from = end.saturating_sub(need).max(start);
    while !raw.is_char_boundary(from) {
        from -= 1;
    }
    (Unit::Run(&raw[from..end]), from)
}

/// The longest prefix of `s` of at most `max` bytes that ends on a character boundary.
pub fn floor_prefix(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// The longest suffix of `s` of at most `max` bytes that starts on a character boundary.
pub fn ceil_suffix(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut start = s.len() - max;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    &s[start..]
}

/// A piece of a string's raw text: a run without escapes, or one escape sequence.
#[derive(Clone, Copy)]
enum Unit<'a> {
    Run(&'a str),
    Escape(char),
}

impl Unit<'_> {
    fn len(&self) -> usize {
        match self {
            Unit::Run(run) => run.len(),
            Unit::Escape(c) => c.len_utf8(),
        }
    }

    fn push_to(self, out: &mut String) {
        match self {
            Unit::Run(run) => out.push_str(run),
            Unit::Escape(c) => out.push(c),
        }
    }
}

/// The units of a validated raw string, in order.
fn units(raw: &str) -> impl Iterator<Item = Unit<'_>> {
    let bytes = raw.as_bytes();
    let mut i = 0;
    std::iter::from_fn(move || {
        if i >= bytes.len() {
            return None;
        }
        if bytes[i] == b'\\' {
            // Validated when parsed; a failure here cannot happen, and ends the string.
            let (c, next) = unescape(bytes, i).ok()?;
            i = next;
            return Some(Unit::Escape(c));
        }
        let end = memchr::memchr(b'\\', &bytes[i..]).map_or(bytes.len(), |n| i + n);
        let run = &raw[i..end];
        i = end;
        Some(Unit::Run(run))
    })
}

/// Decodes the escape sequence whose backslash is at `at`: the character (a lone
/// surrogate becomes U+FFFD, as Python keeps it and cannot encode it) and the index just
/// past the sequence. A high surrogate followed by an escaped low one is one character.
fn unescape(s: &[u8], at: usize) -> Result<(char, usize), ParseError> {
    let error = |kind, offset| ParseError { kind, offset };
    let c = match s.get(at + 1) {
        None => return Err(error(ErrorKind::UnterminatedString, at)),
        Some(b'"') => '"',
        Some(b'\\') => '\\',
        Some(b'/') => '/',
        Some(b'b') => '\u{8}',
        Some(b'f') => '\u{c}',
        Some(b'n') => '\n',
        Some(b'r') => '\r',
        Some(b't') => '\t',
        Some(b'u') => {
            let hi = hex4(s, at)?;
            let after = at + 6;
            if (0xD800..0xDC00).contains(&hi) && s[after..].starts_with(b"\\u") {
                let lo = hex4(s, after)?;
                if (0xDC00..0xE000).contains(&lo) {
                    let c = char::from_u32(0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00));
                    return Ok((c.unwrap_or(char::REPLACEMENT_CHARACTER), after + 6));
                }
            }
            let c = char::from_u32(hi).unwrap_or(char::REPLACEMENT_CHARACTER);
            return Ok((c, after));
        }
        Some(_) => return Err(error(ErrorKind::InvalidEscape, at)),
    };
    Ok((c, at + 2))
}

/// The four hex digits of the `\u` escape whose backslash is at `at`.
fn hex4(s: &[u8], at: usize) -> Result<u32, ParseError> {
    let digits = s
        .get(at + 2..at + 6)
        .filter(|d| d.iter().all(u8::is_ascii_hexdigit))
        .ok_or(ParseError {
            kind: ErrorKind::InvalidUnicodeEscape,
            offset: at,
        })?;
    Ok(digits.iter().fold(0, |acc, d| {
        acc * 16 + char::from(*d).to_digit(16).unwrap_or(0)
    }))
}

struct Parser<'a> {
    s: &'a [u8],
    text: &'a str,
    i: usize,
}

impl<'a> Parser<'a> {
    /// A parser at the start of `text` (a BOM is refused, as Python refuses it).
    fn over(text: &'a str) -> Result<Parser<'a>, ParseError> {
        if text.starts_with('\u{FEFF}') {
            return Err(ParseError {
                kind: ErrorKind::Bom,
                offset: 0,
            });
        }
        Ok(Parser {
            s: text.as_bytes(),
            text,
            i: 0,
        })
    }

    /// Only whitespace may follow the value.
    fn finish(&mut self) -> Result<(), ParseError> {
        self.skip_ws();
        if self.i == self.s.len() {
            Ok(())
        } else {
            Err(self.error(ErrorKind::ExtraData))
        }
    }

    /// Checks one value as [`Parser::value`] reads it, building nothing.
    fn skip(&mut self, depth: usize) -> Result<(), ParseError> {
        if depth > MAX_DEPTH {
            return Err(self.error(ErrorKind::TooDeep));
        }
        match self.s.get(self.i) {
            Some(b'{') => self.members(|p, _| p.skip(depth + 1)),
            Some(b'[') => {
                self.i += 1;
                self.skip_ws();
                if self.s.get(self.i) == Some(&b']') {
                    self.i += 1;
                    return Ok(());
                }
                loop {
                    self.skip_ws();
                    self.skip(depth + 1)?;
                    self.skip_ws();
                    match self.s.get(self.i) {
                        Some(b',') => self.i += 1,
                        Some(b']') => {
                            self.i += 1;
                            return Ok(());
                        }
                        _ => return Err(self.error(ErrorKind::ExpectingComma)),
                    }
                }
            }
            // A scalar's node holds no allocation.
            _ => self.value(depth).map(drop),
        }
    }

    /// The members of the object at the cursor, as [`Parser::object`] reads them: `value`
    /// is called at each member's value and must consume it.
    fn members(
        &mut self,
        mut value: impl FnMut(&mut Parser<'a>, Str<'a>) -> Result<(), ParseError>,
    ) -> Result<(), ParseError> {
        self.i += 1;
        self.skip_ws();
        if self.s.get(self.i) == Some(&b'}') {
            self.i += 1;
            return Ok(());
        }
        loop {
            self.skip_ws();
            if self.s.get(self.i) != Some(&b'"') {
                return Err(self.error(ErrorKind::ExpectingPropertyName));
            }
            let key = self.string()?;
            self.skip_ws();
            if self.s.get(self.i) != Some(&b':') {
                return Err(self.error(ErrorKind::ExpectingColon));
            }
            self.i += 1;
            self.skip_ws();
            value(self, key)?;
            self.skip_ws();
            match self.s.get(self.i) {
                Some(b',') => self.i += 1,
                Some(b'}') => {
                    self.i += 1;
                    return Ok(());
                }
                _ => return Err(self.error(ErrorKind::ExpectingComma)),
            }
        }
    }

    fn error(&self, kind: ErrorKind) -> ParseError {
        ParseError {
            kind,
            offset: self.i,
        }
    }

    fn skip_ws(&mut self) {
        while matches!(self.s.get(self.i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }

    fn eat(&mut self, literal: &str) -> bool {
        if self.s[self.i..].starts_with(literal.as_bytes()) {
            self.i += literal.len();
            true
        } else {
            false
        }
    }

    fn value(&mut self, depth: usize) -> Result<Node<'a>, ParseError> {
        if depth > MAX_DEPTH {
            return Err(self.error(ErrorKind::TooDeep));
        }
        match self.s.get(self.i) {
            Some(b'{') => self.object(depth),
            Some(b'[') => self.array(depth),
            Some(b'"') => self.string().map(Node::String),
            Some(b'n') if self.eat("null") => Ok(Node::Null),
            Some(b't') if self.eat("true") => Ok(Node::Bool(true)),
            Some(b'f') if self.eat("false") => Ok(Node::Bool(false)),
            Some(b'N') if self.eat("NaN") => Ok(Node::Float(f64::NAN)),
            Some(b'I') if self.eat("Infinity") => Ok(Node::Float(f64::INFINITY)),
            Some(b'-') if self.s[self.i..].starts_with(b"-Infinity") => {
                self.i += "-Infinity".len();
                Ok(Node::Float(f64::NEG_INFINITY))
            }
            Some(b'-' | b'0'..=b'9') => self.number(),
            _ => Err(self.error(ErrorKind::ExpectingValue)),
        }
    }

    fn digits(&mut self) -> usize {
        let start = self.i;
        while matches!(self.s.get(self.i), Some(b'0'..=b'9')) {
            self.i += 1;
        }
        self.i - start
    }

    /// `-?(0|[1-9]\d*)(\.\d+)?([eE][-+]?\d+)?`: an optional part that does not complete is
    /// not consumed (so `1.` parses `1` and then fails with "Extra data", as in Python).
    fn number(&mut self) -> Result<Node<'a>, ParseError> {
        let start = self.i;
        if self.s[self.i] == b'-' {
            self.i += 1;
        }
        match self.s.get(self.i) {
            Some(b'0') => self.i += 1,
            Some(b'1'..=b'9') => {
                self.digits();
            }
            _ => {
                self.i = start;
                return Err(self.error(ErrorKind::ExpectingValue));
            }
        }
        let int_end = self.i;
        let mut float = false;
        if self.s.get(self.i) == Some(&b'.') {
            self.i += 1;
            if self.digits() == 0 {
                self.i = int_end;
            } else {
                float = true;
            }
        }
        if matches!(self.s.get(self.i), Some(b'e' | b'E')) {
            let before = self.i;
            self.i += 1;
            if matches!(self.s.get(self.i), Some(b'+' | b'-')) {
                self.i += 1;
            }
            if self.digits() == 0 {
                self.i = before;
            } else {
                float = true;
            }
        }
        let token = &self.text[start..self.i];
        Ok(if float {
            // Rust's parser is correctly rounded like Python's; overflow gives infinity.
            Node::Float(token.parse().unwrap_or(f64::NAN))
        } else {
            Node::Int(token)
        })
    }

    /// A string token: checked (control characters, escapes) and measured, not copied.
    fn string(&mut self) -> Result<Str<'a>, ParseError> {
        let open = self.i;
        self.i += 1;
        let content = self.i;
        let mut len = 0;
        let mut escaped = false;
        loop {
            // The next quote, backslash or (an error) raw control character.
            let stop = next_special(self.s, self.i);
            len += stop - self.i;
            self.i = stop;
            match self.s.get(self.i) {
                None => {
                    return Err(ParseError {
                        kind: ErrorKind::UnterminatedString,
                        offset: open,
                    });
                }
                Some(b'"') => {
                    let raw = &self.text[content..self.i];
                    self.i += 1;
                    return Ok(Str { raw, len, escaped });
                }
                Some(b'\\') => {
                    let (c, next) = unescape(self.s, self.i)?;
                    len += c.len_utf8();
                    escaped = true;
                    self.i = next;
                }
                Some(_) => return Err(self.error(ErrorKind::InvalidControl)),
            }
        }
    }

    fn array(&mut self, depth: usize) -> Result<Node<'a>, ParseError> {
        self.i += 1;
        let mut items = Vec::new();
        self.skip_ws();
        if self.s.get(self.i) == Some(&b']') {
            self.i += 1;
            return Ok(Node::Array(items));
        }
        loop {
            self.skip_ws();
            items.push(self.value(depth + 1)?);
            self.skip_ws();
            match self.s.get(self.i) {
                Some(b',') => self.i += 1,
                Some(b']') => {
                    self.i += 1;
                    return Ok(Node::Array(items));
                }
                _ => return Err(self.error(ErrorKind::ExpectingComma)),
            }
        }
    }

    fn object(&mut self, depth: usize) -> Result<Node<'a>, ParseError> {
        self.i += 1;
        let mut members = Vec::new();
        self.skip_ws();
        if self.s.get(self.i) == Some(&b'}') {
            self.i += 1;
            return Ok(Node::Object(members));
        }
        loop {
            self.skip_ws();
            if self.s.get(self.i) != Some(&b'"') {
                return Err(self.error(ErrorKind::ExpectingPropertyName));
            }
            let key = self.string()?;
            self.skip_ws();
            if self.s.get(self.i) != Some(&b':') {
                return Err(self.error(ErrorKind::ExpectingColon));
            }
            self.i += 1;
            self.skip_ws();
            members.push((key, self.value(depth + 1)?));
            self.skip_ws();
            match self.s.get(self.i) {
                Some(b',') => self.i += 1,
                Some(b'}') => {
                    self.i += 1;
                    return Ok(Node::Object(members));
                }
                _ => return Err(self.error(ErrorKind::ExpectingComma)),
            }
        }
    }
}

/// Python `json.dumps(v, indent=2, ensure_ascii=False)` (no trailing newline).
pub fn to_pretty(v: &Value) -> String {
    let mut out = String::new();
    write_pretty(&mut out, v, 0);
    out
}

fn write_pretty(out: &mut String, v: &Value, indent: usize) {
    match v {
        Value::Array(items) if !items.is_empty() => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                out.push_str(if i == 0 { "\n" } else { ",\n" });
                push_indent(out, indent + 1);
                write_pretty(out, item, indent + 1);
            }
            out.push('\n');
            push_indent(out, indent);
            out.push(']');
        }
        Value::Object(map) if !map.is_empty() => {
            out.push('{');
            for (i, (key, item)) in map.iter().enumerate() {
                out.push_str(if i == 0 { "\n" } else { ",\n" });
                push_indent(out, indent + 1);
                write_string(out, key);
                out.push_str(": ");
                write_pretty(out, item, indent + 1);
            }
            out.push('\n');
            push_indent(out, indent);
            out.push('}');
        }
        other => write_scalar(out, other),
    }
}

fn push_indent(out: &mut String, level: usize) {
    for _ in 0..level {
        out.push_str("  ");
    }
}

/// Python `json.dumps(v, ensure_ascii=False, sort_keys=True)`: `", "` and `": "`.
pub fn to_sorted_compact(v: &Value) -> String {
    let mut out = String::new();
    write_sorted(&mut out, v);
    out
}

impl Node<'_> {
    /// [`to_sorted_compact`] of [`Node::to_value`], written from the tree itself without
    /// building the owned value.
    pub fn to_sorted_compact(&self) -> String {
        let mut out = String::new();
        write_sorted_node(&mut out, self);
        out
    }
}

fn write_sorted_node(out: &mut String, node: &Node<'_>) {
    match node {
        Node::Null => out.push_str("null"),
        Node::Bool(true) => out.push_str("true"),
        Node::Bool(false) => out.push_str("false"),
        // As `to_value` makes it canonical: `-0` is `0`.
        Node::Int(token) => match token.strip_prefix('-') {
            Some("0") => out.push('0'),
            _ => out.push_str(token),
        },
        Node::Float(f) => out.push_str(&float_repr(*f)),
        Node::String(s) => write_string(out, &s.decode()),
        Node::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_sorted_node(out, item);
            }
            out.push(']');
        }
        Node::Object(members) => {
            // Sorted as `write_sorted` sorts; the sort is stable, so of a repeated key
            // the value written, the last of its run, is the last given (a dict's).
            let mut entries: Vec<(Cow<'_, str>, &Node<'_>)> =
                members.iter().map(|(k, v)| (k.decode(), v)).collect();
            entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            out.push('{');
            let mut first = true;
            for (i, (key, item)) in entries.iter().enumerate() {
                if entries.get(i + 1).is_some_and(|next| next.0 == *key) {
                    continue;
                }
                if !first {
                    out.push_str(", ");
                }
                first = false;
                write_string(out, key);
                out.push_str(": ");
                write_sorted_node(out, item);
            }
            out.push('}');
        }
    }
}

fn write_sorted(out: &mut String, v: &Value) {
    match v {
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_sorted(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => {
            // Python sorts str keys by code point, which is UTF-8 byte order.
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            out.push('{');
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_string(out, key);
                out.push_str(": ");
                write_sorted(out, item);
            }
            out.push('}');
        }
        other => write_scalar(out, other),
    }
}

fn write_scalar(out: &mut String, v: &Value) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Int(text) => out.push_str(text),
        Value::Float(f) => out.push_str(&float_repr(*f)),
        Value::String(s) => write_string(out, s),
        Value::Array(_) => out.push_str("[]"),
        Value::Object(_) => out.push_str("{}"),
    }
}

/// A JSON string with Python's escapes; non-ASCII stays raw (`ensure_ascii=False`).
/// serde_json escapes the same way, so its output and this one are byte-identical.
pub fn write_string(out: &mut String, s: &str) {
    out.reserve(s.len() + 2);
    out.push('"');
    write_string_content(out, s);
    out.push('"');
}

/// [`write_string`] without the quotes. Escaping is per character, so the content of a
/// text is the concatenation of its pieces' contents.
pub fn write_string_content(out: &mut String, s: &str) {
    write_escaped(out, s, escape_once);
}

/// The content of a JSON string holding the JSON string `s`: [`write_string_content`]
/// applied twice, in one pass. What a JSON text printed into a JSON string holds for
/// each of its string values.
pub fn write_string_content_twice(out: &mut String, s: &str) {
    write_escaped(out, s, escape_twice);
}

/// `s` with every byte a JSON string escapes (quote, backslash, control character)
/// replaced by what `escape` writes for it. Those bytes are ASCII, so runs between them are whole
/// characters. Blocks of 32 bytes are first tested as a whole (the compiler vectorises
/// the test); only a block that holds such a byte is mapped bit by bit, and all of its
/// bytes are then handled from that one mask.
fn write_escaped(out: &mut String, s: &str, escape: fn(&mut String, u8)) {
    let bytes = s.as_bytes();
    out.reserve(s.len() + s.len() / 8);
    let mut run = 0;
    let mut base = 0;
    while let Some(block) = bytes.get(base..base + 32) {
        if block.iter().fold(false, |any, &b| any | is_special(b)) {
            let mut mask = block
                .iter()
                .enumerate()
                .fold(0u32, |mask, (i, &b)| mask | (u32::from(is_special(b)) << i));
            while mask != 0 {
                let at = base + mask.trailing_zeros() as usize;
                out.push_str(&s[run..at]);
                escape(out, bytes[at]);
                run = at + 1;
                mask &= mask - 1;
            }
        }
        base += 32;
    }
    for (at, &b) in bytes.iter().enumerate().skip(base) {
        if is_special(b) {
            out.push_str(&s[run..at]);
            escape(out, b);
            run = at + 1;
        }
    }
    out.push_str(&s[run..]);
}

/// Writes Python's (and serde_json's) escape of a byte JSON strings escape.
fn escape_once(out: &mut String, b: u8) {
    out.push_str(match b {
        b'"' => "\\\"",
        b'\\' => "\\\\",
        _ => CONTROL.get(usize::from(b)).copied().unwrap_or(""),
    });
}

/// Writes the escape of [`escape_once`]'s escape. Every escape starts with a backslash,
/// which becomes two; a quote or backslash after it gains one more.
fn escape_twice(out: &mut String, b: u8) {
    out.push_str("\\\\");
    match b {
        b'"' => out.push_str("\\\""),
        b'\\' => out.push_str("\\\\"),
        _ => out.push_str(CONTROL.get(usize::from(b)).map_or("", |e| &e[1..])),
    }
}

/// The escapes of the control characters, by code.
const CONTROL: [&str; 32] = [
    "\\u0000", "\\u0001", "\\u0002", "\\u0003", "\\u0004", "\\u0005", "\\u0006", "\\u0007", "\\b",
    "\\t", "\\n", "\\u000b", "\\f", "\\r", "\\u000e", "\\u000f", "\\u0010", "\\u0011", "\\u0012",
    "\\u0013", "\\u0014", "\\u0015", "\\u0016", "\\u0017", "\\u0018", "\\u0019", "\\u001a",
    "\\u001b", "\\u001c", "\\u001d", "\\u001e", "\\u001f",
];

/// Whether a JSON string must escape `b` (and a parser must stop at it).
fn is_special(b: u8) -> bool {
    b < 0x20 || b == b'"' || b == b'\\'
}

/// The position of the first byte at or after `from` that [`is_special`], or
/// `bytes.len()`: a vectorised search for the next quote or backslash, then a check of
/// the run before it for control characters. (Looking at the next few bytes one by one
/// first, for escapes that come close together, measured slower on session lines.)
fn next_special(bytes: &[u8], from: usize) -> usize {
    let rest = bytes.get(from..).unwrap_or_default();
    let stop = memchr::memchr2(b'"', b'\\', rest).unwrap_or(rest.len());
    from + first_control(&rest[..stop]).unwrap_or(stop)
}

/// The position of the first byte below 0x20 (a raw control character, which a JSON string
/// cannot hold). Checked 32 bytes at a time with a branch-free test the compiler
/// vectorises; the byte-exact search runs only in the chunk that has one.
fn first_control(run: &[u8]) -> Option<usize> {
    let mut chunks = run.chunks_exact(32);
    let mut base = 0;
    for chunk in &mut chunks {
        if chunk.iter().fold(false, |any, &b| any | (b < 0x20)) {
            return chunk.iter().position(|&b| b < 0x20).map(|n| base + n);
        }
        base += 32;
    }
    chunks
        .remainder()
        .iter()
        .position(|&b| b < 0x20)
        .map(|n| base + n)
}

/// Python's `repr(float)` as `json.dumps` prints it.
pub fn float_repr(f: f64) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 {
            "Infinity".into()
        } else {
            "-Infinity".into()
        };
    }
    // `{:e}` gives the shortest round-trip digits: "d.ddde±x".
    let sci = format!("{f:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let (sign, mantissa) = mantissa
        .strip_prefix('-')
        .map_or(("", mantissa), |m| ("-", m));
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    if (-4..16).contains(&exp) {
        let point = exp + 1; // digits before the decimal point
        let body = if point <= 0 {
            format!("0.{}{}", "0".repeat((-point) as usize), digits)
        } else if point as usize >= digits.len() {
            format!("{}{}.0", digits, "0".repeat(point as usize - digits.len()))
        } else {
            format!(
                "{}.{}",
                &digits[..point as usize],
                &digits[point as usize..]
            )
        };
        format!("{sign}{body}")
    } else {
        let frac = if digits.len() > 1 {
            format!(".{}", &digits[1..])
        } else {
            String::new()
        };
        let esign = if exp < 0 { '-' } else { '+' };
        format!("{sign}{}{frac}e{esign}{:02}", &digits[..1], exp.abs())
    }
}

/// Python `str.isspace`: Unicode White_Space plus the four information separators.
pub fn is_py_whitespace(c: char) -> bool {
    matches!(c, '\u{1C}'..='\u{1F}') || c.is_whitespace()
}

/// Empty or only Python whitespace (what `not s.strip()` tests).
pub fn is_blank(s: &str) -> bool {
    s.chars().all(is_py_whitespace)
}

/// Python `repr()` of a string, as prompt-diary's messages quote values.
pub fn py_repr(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if !is_printable(c) => {
                let n = u32::from(c);
                let _ = match n {
                    0..=0xFF => write!(out, "\\x{n:02x}"),
                    0x100..=0xFFFF => write!(out, "\\u{n:04x}"),
                    _ => write!(out, "\\U{n:08x}"),
                };
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

/// Python's `str.isprintable` for one character: not in Cc, Cf, Cs, Co, Cn, Zl, Zp, or a
/// space separator other than U+0020.
///
/// Exact for controls, separators, format characters, private use and noncharacters.
/// Unassigned code points (Cn) are approximated by the planes and blocks that hold no
/// assigned characters; only hand-made input reaches the difference.
fn is_printable(c: char) -> bool {
    let n = u32::from(c);
    let control = n < 0x20 || (0x7F..=0xA0).contains(&n);
    let space_separator = matches!(n, 0x1680 | 0x2000..=0x200A | 0x202F | 0x205F | 0x3000);
    let line_paragraph = matches!(n, 0x2028 | 0x2029);
    let format = matches!(
        n,
        0xAD | 0x600..=0x605
            | 0x61C
            | 0x6DD
            | 0x70F
            | 0x890..=0x891
            | 0x8E2
            | 0x180E
            | 0x200B..=0x200F
            | 0x202A..=0x202E
            | 0x2060..=0x2064
            | 0x2066..=0x206F
            | 0xFEFF
            | 0xFFF9..=0xFFFB
            | 0x110BD
            | 0x110CD
            | 0x13430..=0x13438
            | 0x1BCA0..=0x1BCA3
            | 0x1D173..=0x1D17A
            | 0xE0001
            | 0xE0020..=0xE007F
    );
    let private_use = matches!(n, 0xE000..=0xF8FF | 0xF0000..=0xFFFFD | 0x100000..=0x10FFFD);
    let noncharacter = (0xFDD0..=0xFDEF).contains(&n) || (n & 0xFFFE) == 0xFFFE;
    let unassigned_plane = matches!(n, 0x40000..=0xDFFFF | 0xE0080..=0xEFFFF);
    !(control
        || space_separator
        || line_paragraph
        || format
        || private_use
        || noncharacter
        || unassigned_plane)
}

/// Python's `value == n` for a parsed JSON value and an integer (`2.0 == 2`, `True == 1`).
pub fn int_equals(value: Option<&Value>, n: i64) -> bool {
    match value {
        Some(Value::Int(text)) => text.parse::<i64>() == Ok(n),
        Some(Value::Float(f)) => *f == n as f64,
        Some(Value::Bool(b)) => i64::from(*b) == n,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_parse(input: &str, expect: Result<&str, &str>) {
        let got = parse(input)
            .map(|v| to_sorted_compact(&v))
            .map_err(|e| e.message().to_owned());
        assert_eq!(
            got,
            expect.map(str::to_owned).map_err(str::to_owned),
            "{input:?}"
        );
    }

    /// `check`, `raw_member` and `raw_elements` accept exactly what `parse` accepts, with
    /// its errors at its offsets, and hand out the raw text of what they find.
    #[test]
    fn raw_reads_judge_text_as_parse_does() {
        let cases = [
            "  {\"a\": [1, {\"b\": null}], \"a\": \"last\"}  ",
            "[NaN, -Infinity, 1e5, \"\\ud83d\"]",
            "",
            "{",
            "{\"a\":1,}",
            "[1,]",
            "[1 2]",
            "{\"a\" 1}",
            "{1: 2}",
            "\"\\x\"",
            "\"\u{1}\"",
            "[1] x",
            "\u{feff}[]",
            "1.",
        ];
        for text in cases {
            let parsed = parse(text).map(drop);
            assert_eq!(check(text), parsed, "check {text:?}");
            assert_eq!(raw_member(text, "a").map(drop), parsed, "member {text:?}");
        }
        let deep = format!("{}{}", "[".repeat(MAX_DEPTH + 2), "]".repeat(MAX_DEPTH + 2));
        assert_eq!(check(&deep), parse(&deep).map(drop));
        let deep_object = format!(
            "{}1{}",
            "{\"k\":".repeat(MAX_DEPTH + 2),
            "}".repeat(MAX_DEPTH + 2)
        );
        assert_eq!(check(&deep_object), parse(&deep_object).map(drop));
        assert_eq!(
            raw_member(cases[0], "a"),
            Ok(Some("\"last\"")),
            "the last member named a, as a dict keeps it"
        );
        assert_eq!(raw_member("[1]", "a"), Ok(None));
        assert_eq!(raw_member("{\"b\": 1}", "a"), Ok(None));
        let items: Vec<_> = raw_elements(" [ 1 , {\"x\": [2]},\"s\" ] ").collect();
        assert_eq!(items, vec![Ok("1"), Ok("{\"x\": [2]}"), Ok("\"s\"")]);
        assert_eq!(raw_elements("{}").count(), 0);
        assert_eq!(raw_elements("[]").count(), 0);
        let broken: Vec<_> = raw_elements("[1, }").collect();
        assert_eq!(broken.len(), 2);
        assert_eq!(broken[1], parse("[1, }").map(|_| ""));
    }

    #[test]
    fn parses_like_python() {
        check_parse("  {\"type\":\"summary\"}  ", Ok("{\"type\": \"summary\"}"));
        check_parse(
            "[NaN, Infinity, -Infinity]",
            Ok("[NaN, Infinity, -Infinity]"),
        );
        check_parse(
            "123456789012345678901234567890",
            Ok("123456789012345678901234567890"),
        );
        check_parse("-0", Ok("0"));
        check_parse("{\"a\":1,\"b\":2,\"a\":3}", Ok("{\"a\": 3, \"b\": 2}"));
        check_parse("\"\\ud83d\\ude00 \\u00e9\"", Ok("\"😀 é\""));
        check_parse("", Err("Expecting value"));
        check_parse("   ", Err("Expecting value"));
        check_parse("nul", Err("Expecting value"));
        check_parse("[1,]", Err("Expecting value"));
        check_parse(".5", Err("Expecting value"));
        check_parse("-", Err("Expecting value"));
        check_parse(
            "{",
            Err("Expecting property name enclosed in double quotes"),
        );
        check_parse(
            "{\"a\":1,}",
            Err("Expecting property name enclosed in double quotes"),
        );
        check_parse("{\"a\" 1}", Err("Expecting ':' delimiter"));
        check_parse("{\"a\":1", Err("Expecting ',' delimiter"));
        check_parse("[1 2]", Err("Expecting ',' delimiter"));
        check_parse("{} x", Err("Extra data"));
        check_parse("01", Err("Extra data"));
        check_parse("1.", Err("Extra data"));
        check_parse("\"abc", Err("Unterminated string starting at"));
        check_parse("\"a\nb\"", Err("Invalid control character at"));
        check_parse("\"\\q\"", Err("Invalid \\escape"));
        check_parse("\"\\u12G4\"", Err("Invalid \\uXXXX escape"));
        check_parse(
            "\"\\ud800 \\udc00\\ud800\"",
            Ok("\"\u{fffd} \u{fffd}\u{fffd}\""),
        );
        check_parse(
            "\u{feff}{}",
            Err("Unexpected UTF-8 BOM (decode using utf-8-sig)"),
        );
        check_parse(&"[".repeat(5000), Err("Nesting too deep"));
    }

    #[test]
    fn long_strings_find_their_end_and_their_control_characters() {
        let long = "x".repeat(100);
        check_parse(
            &format!("\"{long}\\\"{long}\""),
            Ok(&format!("\"{long}\\\"{long}\"")),
        );
        check_parse(&format!("\"{long}\\\\\""), Ok(&format!("\"{long}\\\\\"")));
        check_parse(
            &format!("\"{long}\\"),
            Err("Unterminated string starting at"),
        );
        check_parse(&format!("\"{long}"), Err("Unterminated string starting at"));
        // A raw control character on either side of a 32-byte chunk boundary is found,
        // at its own offset.
        for at in [0, 30, 31, 32, 33, 63, 64, 99] {
            let text = format!("\"{}\u{1f}{}\"", &long[..at], &long[at..]);
            let err = parse(&text).map(|_| ()).unwrap_err();
            assert_eq!(
                (err.message(), err.offset),
                ("Invalid control character at", at + 1),
                "{at}"
            );
        }
    }

    #[test]
    fn tails_read_from_the_end_equal_tails_of_the_decoded_string() {
        // Raw string contents built from every kind of unit, in pseudo-random order.
        const PARTS: [&str; 16] = [
            "plain",
            "é",
            "😀",
            "\\\\",
            "\\\\\\\\",
            "\\n",
            "\\\"",
            "\\/",
            "\\u005c",
            "\\u005C\\\\",
            "\\ud83d\\ude00",
            "\\ud83d",
            "\\ude00",
            "\\ud83d\\ud83d\\ude00",
            "\\u00e9",
            "\\t\\b\\f\\r",
        ];
        let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        };
        for case in 0..3000 {
            let len = 1 + next(60);
            let raw: String = (0..len).map(|_| PARTS[next(PARTS.len())]).collect();
            let token = format!("\"{raw}\"");
            let Ok(Node::String(s)) = parse_borrowed(&token) else {
                panic!("not a string: {token}");
            };
            let decoded = s.decode();
            for max in [0, 1, 2, 3, 4, 5, 7, 16, 160, 161, 1000] {
                assert_eq!(
                    s.tail(max),
                    ceil_suffix(&decoded, max),
                    "case {case}, max {max}: {token}"
                );
            }
        }
    }

    #[test]
    fn escaping_once_and_twice_is_serde_jsons() {
        // Every ASCII character alone, and specials on both sides of 32-byte blocks
        // between runs of plain and non-ASCII text.
        let mut cases: Vec<String> = (0u8..0x80).map(|b| char::from(b).to_string()).collect();
        for at in [0, 1, 30, 31, 32, 33, 63, 64, 65, 95] {
            for special in ["\"", "\\", "\n", "\u{0}", "\u{1f}", "\r\t"] {
                let plain = "é-x😀".repeat(30);
                let cut = plain.char_indices().nth(at).map_or(plain.len(), |(i, _)| i);
                cases.push(format!("{}{special}{}", &plain[..cut], &plain[cut..]));
            }
        }
        cases.push(String::new());
        cases.push("\u{2028} \u{7f} \\\"\n".repeat(20));
        for case in &cases {
            let once = serde_json::to_string(case).unwrap();
            let mut got = String::new();
            write_string_content(&mut got, case);
            assert_eq!(got, once[1..once.len() - 1], "{case:?}");
            let twice = serde_json::to_string(&once).unwrap();
            let mut got = String::new();
            write_string_content_twice(&mut got, case);
            assert_eq!(got, twice[3..twice.len() - 3], "{case:?}");
        }
    }

    #[test]
    fn floats_print_like_python_repr() {
        for (input, expect) in [
            ("2.0", "2.0"),
            ("1E2", "100.0"),
            ("-0.0", "-0.0"),
            ("0.00001", "1e-05"),
            ("0.0001", "0.0001"),
            ("1e16", "1e+16"),
            ("123456789012345.0", "123456789012345.0"),
            ("1234567890123456.0", "1234567890123456.0"),
            ("12345678901234567.0", "1.2345678901234568e+16"),
            ("1.5e-07", "1.5e-07"),
            ("1e22", "1e+22"),
            ("2.50", "2.5"),
            ("1e400", "Infinity"),
            ("0.1", "0.1"),
        ] {
            assert_eq!(to_sorted_compact(&parse(input).unwrap()), expect, "{input}");
        }
    }

    #[test]
    fn sorted_compact_of_a_tree_is_that_of_its_value() {
        for input in [
            r#"{"v":NaN,"w":Infinity,"big":123456789012345678901234567890,"f":1E2,"g":-0.0}"#,
            r#"{"b": 1, "a": 2, "b": 3, "c": {"z": [1, -0, "x"], "y": null, "z": true}}"#,
            r#"{"\u00e9": "caf\u00e9", "e\u0301": "\ud83d\ude00", "\ud800": "lone", "": ""}"#,
            r#"[{"k": "quote \" backslash \\ tab \t"}, [], {}, -12, 0.5, false]"#,
            r#"{"a": 1, "a": 2, "a": 3}"#,
            r#""just a string""#,
            "-0",
        ] {
            let node = parse_borrowed(input).unwrap();
            assert_eq!(
                node.to_sorted_compact(),
                to_sorted_compact(&node.to_value()),
                "{input}"
            );
        }
    }

    #[test]
    fn sorted_compact_writes_numbers_and_keys_as_python_does() {
        let input = r#"{"v":NaN,"w":Infinity,"big":123456789012345678901234567890,"f":1E2,"g":-0.0,"h":0.00001,"i":1e16,"j":123456789012345.0}"#;
        assert_eq!(
            to_sorted_compact(&parse(input).unwrap()),
            r#"{"big": 123456789012345678901234567890, "f": 100.0, "g": -0.0, "h": 1e-05, "i": 1e+16, "j": 123456789012345.0, "v": NaN, "w": Infinity}"#
        );
        let input = r#"{"file_path": "/repo/parser.py", "limit": 2.0, "b": "ü"}"#;
        assert_eq!(
            to_sorted_compact(&parse(input).unwrap()),
            r#"{"b": "ü", "file_path": "/repo/parser.py", "limit": 2.0}"#
        );
    }

    #[test]
    fn pretty_matches_python_indent_2() {
        let v = parse(r#"{"a": [], "b": {}, "c": [1, {"d": "x\u0001\u007f\u2028/"}], "e": null}"#)
            .unwrap();
        assert_eq!(
            to_pretty(&v),
            "{\n  \"a\": [],\n  \"b\": {},\n  \"c\": [\n    1,\n    {\n      \"d\": \"x\\u0001\u{7f}\u{2028}/\"\n    }\n  ],\n  \"e\": null\n}"
        );
    }

    #[test]
    fn repr_quotes_like_python() {
        for (input, expect) in [
            ("abc", "'abc'"),
            ("a'b", "\"a'b\""),
            ("a\"b", "'a\"b'"),
            ("a'\"b", "'a\\'\"b'"),
            ("a\\b", "'a\\\\b'"),
            ("T0001\n", "'T0001\\n'"),
            ("é", "'é'"),
            ("\u{a0}", "'\\xa0'"),
            ("\u{7f}", "'\\x7f'"),
            ("\u{2028}", "'\\u2028'"),
            ("\u{200b}", "'\\u200b'"),
            ("\u{ad}", "'\\xad'"),
            ("😀", "'😀'"),
            ("Проект\t\"x'", "'Проект\\t\"x\\''"),
        ] {
            assert_eq!(py_repr(input), expect, "{input:?}");
        }
    }

    #[test]
    fn whitespace_is_pythons() {
        for c in [
            '\u{1c}', '\u{1f}', '\u{85}', '\u{a0}', '\u{3000}', '\u{2028}', ' ', '\t',
        ] {
            assert!(is_py_whitespace(c), "{c:?}");
        }
        assert!(!is_py_whitespace('\u{200b}'));
        assert!(is_blank("") && is_blank("\u{3000}\u{a0}\t") && !is_blank("\u{200b}"));
    }

    /// The borrowed tree reads like the owned value: lookups decode keys, the last of
    /// repeated keys wins, lengths count decoded UTF-8 bytes, nothing is decoded twice.
    #[test]
    fn borrowed_strings_read_like_decoded_ones() {
        let text = r#"{"t\u0079pe": "a", "k": 1, "k": "\ud83d\ude00\n\ud800x", "w": " \u3000\t", "v": "\u200b"}"#;
        let node = parse_borrowed(text).unwrap();
        let s = |key: &str| *node.get(key).and_then(Node::as_str).unwrap();
        assert_eq!(s("type").decode(), "a");
        assert!(matches!(s("type").decode(), Cow::Borrowed(_)));
        let k = s("k");
        assert_eq!(k.decode(), "😀\n\u{FFFD}x");
        assert_eq!(k.len(), k.decode().len());
        assert!(k.is("😀\n\u{FFFD}x") && !k.is("😀"));
        assert_eq!(
            (k.head(4), k.head(3), k.tail(5), k.tail(1)),
            ("😀".into(), "".into(), "\n\u{FFFD}x".into(), "x".into())
        );
        assert!(s("w").is_blank() && !s("v").is_blank() && !k.is_blank());
        let value = node.to_value();
        assert_eq!(
            value.get("k").and_then(Value::as_str),
            k.decode().as_ref().into()
        );
        assert_eq!(
            to_sorted_compact(&value),
            "{\"k\": \"😀\\n\u{FFFD}x\", \"type\": \"a\", \"v\": \"\u{200b}\", \"w\": \" \u{3000}\\t\"}"
        );
        // Integers keep their text; `-0` is canonical only in the owned value.
        let node = parse_borrowed("[-0, 12345678901234567890]").unwrap();
        assert_eq!(node.as_array().map(<[Node]>::len), Some(2));
        assert_eq!(
            to_sorted_compact(&node.to_value()),
            "[0, 12345678901234567890]"
        );
    }
}
