//! Deterministic Read and Grep over one payload: numbered lines and regex matches, within
//! the byte cap, saying when an answer was cut and how to go on. The MCP tools
//! `tool_output_read` and `tool_output_grep` and the read-grep sub-agent's Read and Grep
//! ([`Tools`]) all use them.
//!
//! Grep's cost is bounded:
//! - a pattern that compiles to more than [`PATTERN_SIZE_LIMIT`] bytes is refused before
//!   anything is searched, and the lazy DFA's cache is held to [`DFA_CACHE_BYTES`];
//! - a search stops when its time budget is spent or its caller asks it to stop, checked
//!   between lines and between spans of [`SPAN`] bytes of a long line. A span's search sees
//!   the whole line for `\b`, `^` and `$`; a match must end within its span, so a match that
//!   crosses a span's end is cut there (and one longer than [`OVERLAP`] bytes that crosses it
//!   may be missed).
//!
//! Every stop answers with what was searched (lines and bytes), what was shown, and how to
//! narrow the pattern or go on.
//!
//! Lines up to [`LONG_LINE`] bytes are shown whole, once per matching line, with context
//! lines. On a longer line every match gets its own window of about [`WINDOW`] bytes, tagged
//! `line@byte`, within `max_matches`.

use crate::util::stop_flag::{Stop, StopReason};
use crate::util::text::{ceil_char_boundary, floor_char_boundary};

use std::cell::Cell;
use std::time::{Duration, Instant};

use regex_automata::util::syntax;
use regex_automata::{Input, MatchKind, meta};

use super::engine::{BadPattern, TextTools};

/// Most bytes a grep pattern may compile to (the regex crate's default is 10 MiB, which let
/// a 100-fold repetition of Unicode word classes through).
pub const PATTERN_SIZE_LIMIT: usize = 1 << 20;
/// Most bytes of the lazy DFA's cache of one search.
pub const DFA_CACHE_BYTES: usize = 1 << 20;
/// Default time one grep may search.
pub const GREP_BUDGET: Duration = Duration::from_secs(5);
/// A long line is searched this many bytes at a time, so a stop is seen between spans.
pub const SPAN: usize = 32 * 1024;
/// After a span without a match, the next span starts this many bytes before its end, so a
/// match up to this long that crosses the boundary is still found.
pub const OVERLAP: usize = 1024;
/// Bytes shown around a match on a long line.
pub const WINDOW: usize = 200;
/// Lines longer than this show a window per match instead of the whole line.
pub const LONG_LINE: usize = WINDOW * 2;
/// Most bytes of a pattern echoed back in an answer's header.
pub const ECHO_BYTES: usize = 200;
/// Room kept within the cap for the closing notice.
const NOTICE_ROOM: usize = 400;
/// What a stopped or refused grep suggests.
const NARROW: &str = "narrow the pattern: a literal word to anchor it, fewer or bounded repetitions, ASCII classes such as (?-u:\\w) instead of \\w";

/// Appends `piece` when it fits within `cap`; false when it does not.
fn push_capped(out: &mut String, piece: &str, cap: usize) -> bool {
    if out.len() + piece.len() > cap {
        return false;
    }
    out.push_str(piece);
    true
}

/// The pattern as an answer's header shows it: quoted, and cut to [`ECHO_BYTES`] bytes with
/// its whole size when longer.
pub fn echo(pattern: &str) -> String {
    if pattern.len() <= ECHO_BYTES {
        return format!("{pattern:?}");
    }
    let cut = floor_char_boundary(pattern, ECHO_BYTES);
    format!("{:?}... ({} bytes)", &pattern[..cut], pattern.len())
}

/// A compiled grep pattern.
#[derive(Debug, Clone)]
pub struct Pattern(meta::Regex);

/// Why a pattern cannot be searched with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PatternError {
    /// Not a valid pattern: the parser's message.
    Syntax(String),
    /// It compiles to more than this many bytes.
    TooCostly(usize),
}

/// Compiles `pattern` as the regex crate would (Unicode, leftmost-first), within
/// [`PATTERN_SIZE_LIMIT`].
pub fn compile(pattern: &str) -> Result<Pattern, PatternError> {
    let config = meta::Config::new()
        .match_kind(MatchKind::LeftmostFirst)
        .utf8_empty(true)
        .nfa_size_limit(Some(PATTERN_SIZE_LIMIT))
        .onepass_size_limit(Some(PATTERN_SIZE_LIMIT))
        .hybrid_cache_capacity(DFA_CACHE_BYTES);
    meta::Builder::new()
        .configure(config)
        .syntax(syntax::Config::new().utf8(true))
        .build(pattern)
        .map(Pattern)
        .map_err(|e| match (e.size_limit(), e.syntax_error()) {
            (Some(limit), _) => PatternError::TooCostly(limit),
            (None, Some(s)) => PatternError::Syntax(syntax_message(pattern, &s.to_string())),
            (None, None) => PatternError::Syntax(syntax_message(pattern, &e.to_string())),
        })
}

/// The parser's message, which quotes the whole pattern; for a pattern longer than
/// [`ECHO_BYTES`], its last line (what is wrong) with the pattern cut, so the answer does
/// not grow with the pattern.
fn syntax_message(pattern: &str, message: &str) -> String {
    if pattern.len() <= ECHO_BYTES {
        return message.to_string();
    }
    let what = message.trim_end().lines().last().unwrap_or("");
    let what = crate::util::text::echo_cut(what.trim_start_matches("error: "));
    format!(
        "regex parse error: {what}, in the pattern {}",
        echo(pattern)
    )
}

/// The answer to a pattern refused as too costly: nothing was searched.
pub fn too_costly(limit: usize, text: &str) -> String {
    format!(
        "(the pattern was not searched: it compiles to more than {limit} bytes, the limit. \
         The payload has {} lines, {} bytes; {NARROW})\n",
        text.lines().count(),
        text.len()
    )
}

/// Where a search or read begins: a 1-based line and a byte of that line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    pub line: u64,
    pub byte: usize,
}

impl Position {
    pub const START: Position = Position { line: 1, byte: 0 };
}

/// How one grep runs.
#[derive(Debug, Clone, Copy)]
pub struct GrepOptions {
    /// Lines shown before and after a matching short line.
    pub context_lines: usize,
    /// Matches shown at most.
    pub max_matches: usize,
    /// Most bytes of the answer.
    pub cap: usize,
    /// Where the search begins.
    pub from: Position,
    /// The caller can go on from a position (`start_line`, `start_byte`), so the answer
    /// names one; the sub-agent's Grep cannot.
    pub resumable: bool,
    /// Longest the search may take.
    pub budget: Duration,
}

impl GrepOptions {
    /// Defaults: no context, 50 matches, from the start, the default budget, not resumable.
    pub fn new(cap: usize) -> GrepOptions {
        GrepOptions {
            context_lines: 0,
            max_matches: 50,
            cap,
            from: Position::START,
            resumable: false,
            budget: GREP_BUDGET,
        }
    }
}

/// Why a search stopped before the end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Halt {
    /// Its time budget was spent.
    Budget,
    /// Its caller asked it to stop (the request was cancelled).
    Asked,
}

/// What a grep answered, and why it stopped before the end, if it did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Searched {
    pub body: String,
    pub halted: Option<Halt>,
}

struct Searcher<'a> {
    re: &'a meta::Regex,
    cache: meta::Cache,
    started: Instant,
    budget: Duration,
    should_stop: &'a dyn Fn() -> bool,
}

impl Searcher<'_> {
    fn check(&self) -> Result<(), Halt> {
        if self.started.elapsed() >= self.budget {
            return Err(Halt::Budget);
        }
        if (self.should_stop)() {
            return Err(Halt::Asked);
        }
        Ok(())
    }

    /// The next match in `line` at or after byte `pos`, searched a span at a time when the
    /// line is long.
    fn next_match(&mut self, line: &str, pos: usize) -> Result<Option<(usize, usize)>, Halt> {
        let len = line.len();
        let mut s = pos;
        loop {
            if s > len {
                return Ok(None);
            }
            let e = if len - s <= SPAN {
                len
            } else {
                ceil_char_boundary(line, s + SPAN)
            };
            let input = Input::new(line).range(s..e);
            match self.re.search_with(&mut self.cache, &input) {
                Some(m) => return Ok(Some((m.start(), m.end()))),
                None if e == len => return Ok(None),
                None => {
                    self.check()?;
                    s = floor_char_boundary(line, e - OVERLAP).max(ceil_char_boundary(line, s + 1));
                }
            }
        }
    }
}

fn duration_text(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{} ms", d.as_millis())
    }
}

/// Offset of `line` (a slice of `text`) within `text`.
fn offset_in(text: &str, line: &str) -> usize {
    (line.as_ptr() as usize).saturating_sub(text.as_ptr() as usize)
}

/// Grep over `text`: see the module's rules. `should_stop` is asked between lines and spans.
pub fn grep(
    text: &str,
    pattern: &Pattern,
    opts: &GrepOptions,
    should_stop: &dyn Fn() -> bool,
) -> Searched {
    let stopped = Cell::new(None);
    let body = search(text, pattern, opts, should_stop, &stopped);
    Searched {
        body,
        halted: stopped.get(),
    }
}

fn search(
    text: &str,
    pattern: &Pattern,
    opts: &GrepOptions,
    should_stop: &dyn Fn() -> bool,
    stopped: &Cell<Option<Halt>>,
) -> String {
    let re = &pattern.0;
    let mut searcher = Searcher {
        re,
        cache: re.create_cache(),
        started: Instant::now(),
        budget: opts.budget,
        should_stop,
    };
    let lines: Vec<&str> = text.lines().collect();
    let first = usize::try_from(opts.from.line.max(1) - 1).unwrap_or(usize::MAX);
    if first >= lines.len() {
        return format!(
            "(no line {} to search from: the payload has {} lines)\n",
            opts.from.line,
            lines.len()
        );
    }
    let budget = opts.cap.saturating_sub(NOTICE_ROOM);
    let max = opts.max_matches.max(1);
    let mut out = String::new();
    let mut shown = 0usize;
    // The notice that ends a search stopped at line index `i`, byte `b`.
    let halted = |halt: Halt, i: usize, b: usize, shown: usize| -> String {
        stopped.set(Some(halt));
        let begun = offset_in(text, lines[first]) + opts.from.byte.min(lines[first].len());
        let searched = (offset_in(text, lines[i]) + b).saturating_sub(begun);
        let what = match halt {
            Halt::Budget => format!("time budget of {} reached", duration_text(opts.budget)),
            Halt::Asked => "stopped on request".to_string(),
        };
        let go_on = if opts.resumable {
            format!(
                "; continue with start_line {}, start_byte {b}, or {NARROW}",
                i + 1
            )
        } else {
            format!("; {NARROW}")
        };
        format!(
            "[{what} at line {} byte {b}: searched {searched} of {} bytes and showed {shown} matches{go_on}]\n",
            i + 1,
            text.len()
        )
    };
    for (i, line) in lines.iter().enumerate().skip(first) {
        if let Err(h) = searcher.check() {
            out.push_str(&halted(h, i, 0, shown));
            return out;
        }
        let n = i + 1;
        let mut pos = if i == first {
            ceil_char_boundary(line, opts.from.byte)
        } else {
            0
        };
        if i == first && opts.from.byte > line.len() {
            continue;
        }
        if line.len() <= LONG_LINE && pos == 0 {
            match searcher.next_match(line, 0) {
                Ok(None) => continue,
                Ok(Some(_)) => {}
                Err(h) => {
                    out.push_str(&halted(h, i, 0, shown));
                    return out;
                }
            }
            if shown == max {
                out.push_str(&more_notice(opts, max, n, 0));
                return out;
            }
            let lo = i.saturating_sub(opts.context_lines);
            let hi = i.saturating_add(opts.context_lines).min(lines.len() - 1);
            let mut block = String::new();
            for (j, l) in lines.iter().enumerate().take(hi + 1).skip(lo) {
                let sep = if j == i { ':' } else { '-' };
                if l.len() > LONG_LINE && j != i {
                    let cut = floor_char_boundary(l, WINDOW);
                    block.push_str(&format!(
                        "{}{sep} {}[... {} bytes]\n",
                        j + 1,
                        &l[..cut],
                        l.len()
                    ));
                } else {
                    block.push_str(&format!("{}{sep} {l}\n", j + 1));
                }
            }
            if !push_capped(&mut out, &block, budget) {
                out.push_str(&cut_notice(opts, shown, n, 0));
                return out;
            }
            shown += 1;
            continue;
        }
        loop {
            let (a, b) = match searcher.next_match(line, pos) {
                Ok(Some(m)) => m,
                Ok(None) => break,
                Err(h) => {
                    out.push_str(&halted(h, i, pos, shown));
                    return out;
                }
            };
            if shown == max {
                out.push_str(&more_notice(opts, max, n, a));
                return out;
            }
            let from = floor_char_boundary(line, a.saturating_sub(WINDOW / 2));
            let to = ceil_char_boundary(line, b.min(a + WINDOW / 2) + WINDOW / 2);
            let block = format!("{n}@{a}: ...{}...\n", &line[from..to]);
            if !push_capped(&mut out, &block, budget) {
                out.push_str(&cut_notice(opts, shown, n, a));
                return out;
            }
            shown += 1;
            pos = if b > a {
                b
            } else {
                ceil_char_boundary(line, b + 1)
            };
            if b >= line.len() {
                break;
            }
        }
    }
    if shown == 0 {
        if opts.from == Position::START {
            out.push_str("(no line matches the pattern)\n");
        } else {
            out.push_str(&format!(
                "(no match from line {} byte {})\n",
                opts.from.line, opts.from.byte
            ));
        }
    }
    out
}

/// The notice when more than `max` matches exist; the next is at line `n`, byte `b`.
fn more_notice(opts: &GrepOptions, max: usize, n: usize, b: usize) -> String {
    if opts.resumable {
        format!(
            "[stopped after {max} matches: raise max_matches, continue with start_line {n}, start_byte {b}, or narrow the pattern]\n"
        )
    } else {
        format!("[stopped after {max} matches: raise max_matches or narrow the pattern]\n")
    }
}

/// The notice when the next match (line `n`, byte `b`) does not fit within the cap.
fn cut_notice(opts: &GrepOptions, shown: usize, n: usize, b: usize) -> String {
    if opts.resumable {
        format!(
            "[cut at the size cap after {shown} matches: the next is at line {n} byte {b}; continue with start_line {n}, start_byte {b}, or narrow the pattern]\n"
        )
    } else if b > 0 {
        format!(
            "[cut at the size cap after {shown} matches: narrow the pattern or Read around line {n} (the next match is at its byte {b})]\n"
        )
    } else {
        format!(
            "[cut at the size cap after {shown} matches: narrow the pattern or Read around line {n}]\n"
        )
    }
}

/// How one read runs.
#[derive(Debug, Clone, Copy)]
pub struct ReadOptions {
    /// First line, and the byte of it to start at.
    pub from: Position,
    /// Last line (inclusive).
    pub end_line: u64,
    /// Most bytes shown of each line; `None`: as many as fit.
    pub byte_length: Option<usize>,
    /// Most bytes of the answer.
    pub cap: usize,
    /// The caller can go on from a byte of a line (`start_line`, `byte_offset`), so a cut
    /// line says where; the sub-agent's Read cannot.
    pub resumable: bool,
}

/// Numbered lines `from.line..=end_line` of `text`. A line longer than its share of the cap
/// (all of it for a one-line read, half otherwise) or than `byte_length` is cut, and says at
/// which byte; a line shown from a byte other than 0 is tagged `line@byte`.
/// `should_stop` is asked between lines.
pub fn read(text: &str, opts: &ReadOptions, should_stop: &dyn Fn() -> bool) -> String {
    let (start_line, end_line) = (opts.from.line, opts.end_line);
    let mut total = 0u64;
    for _ in text.lines() {
        total += 1;
        if total.is_multiple_of(STOP_EVERY_LINES) && should_stop() {
            return STOPPED_READ.to_string();
        }
    }
    if start_line > total || end_line < start_line {
        return format!("(no lines {start_line}-{end_line}: the file has {total} lines)\n");
    }
    let budget = opts.cap.saturating_sub(120);
    let share = if opts.resumable && start_line == end_line.min(total) {
        budget.saturating_sub(150)
    } else {
        budget / 2
    };
    let share = opts.byte_length.map_or(share, |l| l.clamp(1, share.max(1)));
    let mut out = String::new();
    for (i, line) in text.lines().enumerate() {
        let n = i as u64 + 1;
        if n.is_multiple_of(STOP_EVERY_LINES) && should_stop() {
            out.push_str(STOPPED_READ);
            return out;
        }
        if n < start_line {
            continue;
        }
        if n > end_line {
            break;
        }
        let a = if n == start_line { opts.from.byte } else { 0 };
        if a > 0 && a >= line.len() {
            out.push_str(&format!(
                "(line {n} has {} bytes; byte_offset {a} is past its end)\n",
                line.len()
            ));
            continue;
        }
        let a = floor_char_boundary(line, a);
        let shown = if line.len() - a > share || (a > 0 && opts.byte_length.is_some()) {
            let mut b = floor_char_boundary(line, a + share);
            if b <= a {
                b = ceil_char_boundary(line, a + 1);
            }
            let prefix = if a == 0 {
                format!("{n}: ")
            } else {
                format!("{n}@{a}: ")
            };
            let suffix = if b >= line.len() {
                "\n".to_string()
            } else if opts.resumable {
                format!(
                    "[... line cut at byte {b} of {}: continue with start_line {n}, byte_offset {b}]\n",
                    line.len()
                )
            } else {
                format!("[... line cut at byte {b} of {}]\n", line.len())
            };
            format!("{prefix}{}{suffix}", &line[a..b])
        } else if a > 0 {
            format!("{n}@{a}: {}\n", &line[a..])
        } else {
            format!("{n}: {line}\n")
        };
        if !push_capped(&mut out, &shown, budget) {
            out.push_str(&format!(
                "[cut at the size cap: continue with start_line {n}]\n"
            ));
            return out;
        }
    }
    out
}

/// A read asks its stop every this many lines (a line costs little to step over).
const STOP_EVERY_LINES: u64 = 1024;
/// What a stopped read answers, or ends with.
const STOPPED_READ: &str = "[the read was stopped: the call ended]\n";

/// Read and Grep as the read-grep sub-agent gets them: from the start, without positions
/// it could not pass back, and stopped by the call's [`Stop`]: a grep's budget is at most
/// what is left of the call's deadline, so the searches of one call never outlast it.
pub struct Tools {
    stop: Stop,
}

impl Tools {
    /// The tools of one call, stopped when `stop` is.
    pub fn new(stop: Stop) -> Tools {
        Tools { stop }
    }
}

impl TextTools for Tools {
    fn read(&self, text: &str, start_line: u64, end_line: u64, cap: usize) -> String {
        read(
            text,
            &ReadOptions {
                from: Position {
                    line: start_line,
                    byte: 0,
                },
                end_line,
                byte_length: None,
                cap,
                resumable: false,
            },
            &|| self.stop.is_set(),
        )
    }

    fn grep(
        &self,
        text: &str,
        pattern: &str,
        context_lines: usize,
        max_matches: usize,
        cap: usize,
    ) -> Result<String, BadPattern> {
        // A stopped call compiles nothing more (a costly pattern takes a while to).
        if self.stop.is_set() {
            return Ok(format!(
                "[not searched: the call was stopped ({})]\n",
                self.stop.reason().map_or("stopped", StopReason::as_str)
            ));
        }
        let compiled = match compile(pattern) {
            Ok(p) => p,
            Err(PatternError::Syntax(e)) => return Err(BadPattern(e)),
            Err(PatternError::TooCostly(limit)) => return Ok(too_costly(limit, text)),
        };
        let opts = GrepOptions {
            context_lines,
            max_matches,
            budget: self.stop.left().map_or(GREP_BUDGET, |l| l.min(GREP_BUDGET)),
            ..GrepOptions::new(cap)
        };
        tracing::debug!(bytes = text.len(), "read-grep sub-agent's Grep searching");
        let searched = grep(text, &compiled, &opts, &|| self.stop.is_set());
        if let Some(halt) = searched.halted {
            tracing::info!(
                ?halt,
                reason = self.stop.reason().map(StopReason::as_str),
                "read-grep sub-agent's Grep stopped"
            );
        }
        Ok(searched.body)
    }

    fn past_deadline(&self) -> bool {
        self.stop.reason() == Some(StopReason::DeadlineReached)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn never() -> bool {
        false
    }

    fn g(text: &str, pattern: &str, opts: GrepOptions) -> String {
        grep(text, &compile(pattern).expect("pattern"), &opts, &never).body
    }

    #[test]
    fn read_and_grep() {
        let t = Tools::new(Stop::new());
        assert_eq!(t.read("a\nb\nc\n", 2, 3, 1000), "2: b\n3: c\n");
        assert_eq!(
            t.read("a\n", 5, 6, 1000),
            "(no lines 5-6: the file has 1 lines)\n"
        );
        assert_eq!(
            t.grep("a\nxb\nc\n", "x", 1, 5, 1000).unwrap(),
            "1- a\n2: xb\n3- c\n"
        );
        let Err(PatternError::Syntax(parser)) = compile("(") else {
            panic!("a syntax error")
        };
        assert_eq!(
            t.grep("a", "(", 0, 5, 1000).unwrap_err().to_string(),
            format!("bad pattern: {parser}")
        );
        let long = format!("{}NEEDLE{}", "a".repeat(1000), "b".repeat(1000));
        let got = t.grep(&long, "NEEDLE", 0, 5, 1000).unwrap();
        assert!(got.starts_with("1@1000: ...") && got.len() < 420, "{got}");
        let many = "x\n".repeat(100);
        assert!(
            t.grep(&many, "x", 0, 3, 1000)
                .unwrap()
                .contains("stopped after 3")
        );
        assert!(t.read(&many, 1, 100, 200).contains("cut at the size cap"));
        // Absurd numbers are clamped, not overflowed.
        assert_eq!(
            t.grep("a\nx\n", "x", usize::MAX, usize::MAX, 1000).unwrap(),
            "1- a\n2: x\n"
        );
        assert_eq!(t.read("a\n", 1, u64::MAX, 1000), "1: a\n");
        assert_eq!(
            t.grep("a\nb\n", "x", 0, 5, 1000).unwrap(),
            "(no line matches the pattern)\n"
        );
    }

    #[test]
    fn a_costly_pattern_is_refused_before_searching() {
        let got = compile(r"\b(?:\w+\W+){100}ZZZ").unwrap_err();
        assert_eq!(got, PatternError::TooCostly(PATTERN_SIZE_LIMIT));
        let answer = Tools::new(Stop::new()).grep("a b\nc\n", r"\b(?:\w+\W+){100}ZZZ", 0, 5, 1000);
        assert_eq!(
            answer.unwrap(),
            format!(
                "(the pattern was not searched: it compiles to more than {PATTERN_SIZE_LIMIT} bytes, the limit. The payload has 2 lines, 6 bytes; {NARROW})\n"
            )
        );
        assert!(
            matches!(compile("("), Err(PatternError::Syntax(e)) if e.contains("regex parse error"))
        );
    }

    #[test]
    fn a_spent_budget_or_a_stop_ends_the_search_with_what_was_searched() {
        let text = "a\n".repeat(10);
        let opts = GrepOptions {
            budget: Duration::ZERO,
            resumable: true,
            ..GrepOptions::new(2000)
        };
        assert_eq!(
            g(&text, "a", opts),
            format!(
                "[time budget of 0 s reached at line 1 byte 0: searched 0 of 20 bytes and showed 0 matches; continue with start_line 1, start_byte 0, or {NARROW}]\n"
            )
        );
        // A stop asked for after the third check: two lines were searched and shown.
        let calls = std::cell::Cell::new(0);
        let stop = || {
            calls.set(calls.get() + 1);
            calls.get() > 2
        };
        let opts = GrepOptions::new(2000);
        let got = grep(&text, &compile("a").unwrap(), &opts, &stop);
        assert_eq!(got.halted, Some(Halt::Asked));
        assert_eq!(
            got.body,
            format!(
                "1: a\n2: a\n[stopped on request at line 3 byte 0: searched 4 of 20 bytes and showed 2 matches; {NARROW}]\n"
            )
        );
    }

    #[test]
    fn a_long_line_is_searched_in_spans_that_a_stop_interrupts() {
        // One line of 10 spans without a match: the stop is seen between spans.
        let line = "x".repeat(SPAN * 10);
        let calls = std::cell::Cell::new(0);
        let stop = || {
            calls.set(calls.get() + 1);
            calls.get() > 3
        };
        let got = grep(
            &line,
            &compile("y").unwrap(),
            &GrepOptions::new(2000),
            &stop,
        )
        .body;
        assert!(
            got.starts_with("[stopped on request at line 1 byte "),
            "{got}"
        );
        // Matches on both sides of span boundaries are all found, once each, in order.
        let mut line = String::new();
        let mut want = Vec::new();
        while line.len() < SPAN * 3 {
            line.push_str(&"z".repeat(997));
            want.push(line.len());
            line.push_str("NEEDLE");
        }
        let opts = GrepOptions {
            max_matches: 500,
            ..GrepOptions::new(1 << 20)
        };
        let got = g(&line, "NEEDLE", opts);
        let offsets: Vec<usize> = got
            .lines()
            .map(|l| l["1@".len()..l.find(':').unwrap()].parse().unwrap())
            .collect();
        assert_eq!(offsets, want);
        // `$` and `\b` see the whole line, not the span's end.
        let line = format!("{} word{}", "x".repeat(SPAN - 3), "y".repeat(SPAN));
        assert_eq!(
            g(&line, r"x$|\bwo\b", GrepOptions::new(2000)),
            "(no line matches the pattern)\n"
        );
    }

    #[test]
    fn every_match_on_a_long_line_gets_a_window_and_cuts_say_where_to_go_on() {
        let items: Vec<String> = (0..10_000)
            .map(|i| format!("{{\"id\":{i},\"status\":\"ok\"}}"))
            .collect();
        let line = format!("[{}]", items.join(","));
        let at = |i: usize| line.find(&format!("{{\"id\":{i},")).unwrap() + 1;
        let opts = GrepOptions {
            resumable: true,
            ..GrepOptions::new(12_000)
        };
        let got = g(&line, r#""id":(4000|9000),"#, opts);
        let (a, b) = (at(4000), at(9000));
        assert!(got.starts_with(&format!("1@{a}: ...")), "{got}");
        assert!(got.contains(&format!("\n1@{b}: ...")), "{got}");
        assert_eq!(got.lines().count(), 2, "{got}");
        // A greedy match still shows a window of its start.
        let got = g(&line, r#"\{"id":7,.*"#, opts);
        assert!(
            got.starts_with(&format!("1@{}: ...", at(7) - 1)) && got.len() < 400,
            "{got}"
        );
        // More matches than max_matches: the notice names the next one.
        let few = GrepOptions {
            max_matches: 2,
            ..opts
        };
        let got = g(&line, r#""id":\d+"#, few);
        assert!(
            got.ends_with(&format!(
                "[stopped after 2 matches: raise max_matches, continue with start_line 1, start_byte {}, or narrow the pattern]\n",
                at(2)
            )),
            "{got}"
        );
        // Cut at the cap: how many were shown and where the next is.
        let got = g(
            &line,
            r#""id":\d+"#,
            GrepOptions {
                max_matches: 500,
                ..opts
            },
        );
        let shown = got.lines().count() - 1;
        assert!(shown > 10, "{got}");
        assert!(
            got.ends_with(&format!(
                "[cut at the size cap after {shown} matches: the next is at line 1 byte {b}; continue with start_line 1, start_byte {b}, or narrow the pattern]\n",
                b = at(shown)
            )),
            "{got}"
        );
        assert!(got.len() <= 12_000);
        // Going on from there shows the next ones.
        let next = GrepOptions {
            from: Position {
                line: 1,
                byte: at(shown),
            },
            max_matches: 1,
            ..opts
        };
        let got = g(&line, r#""id":\d+"#, next);
        assert!(got.starts_with(&format!("1@{}: ...", at(shown))), "{got}");
    }

    #[test]
    fn a_long_line_is_read_from_a_byte_and_says_how_to_go_on() {
        let line = "0123456789".repeat(1000);
        let text = format!("{line}\nshort\n");
        let opts = ReadOptions {
            from: Position { line: 1, byte: 0 },
            end_line: 1,
            byte_length: Some(10),
            cap: 2000,
            resumable: true,
        };
        assert_eq!(
            read(&text, &opts, &never),
            "1: 0123456789[... line cut at byte 10 of 10000: continue with start_line 1, byte_offset 10]\n"
        );
        let opts = ReadOptions {
            from: Position {
                line: 1,
                byte: 9995,
            },
            ..opts
        };
        assert_eq!(read(&text, &opts, &never), "1@9995: 56789\n");
        let opts = ReadOptions {
            from: Position {
                line: 1,
                byte: 20_000,
            },
            ..opts
        };
        assert_eq!(
            read(&text, &opts, &never),
            "(line 1 has 10000 bytes; byte_offset 20000 is past its end)\n"
        );
        // Without a length, one line gets nearly all the cap.
        let opts = ReadOptions {
            from: Position { line: 1, byte: 100 },
            byte_length: None,
            ..opts
        };
        let got = read(&text, &opts, &never);
        assert!(
            got.starts_with("1@100: 0123") && got.len() <= 2000 && got.len() > 1500,
            "{got}"
        );
        let b = got
            .rsplit("byte_offset ")
            .next()
            .unwrap()
            .trim_end_matches("]\n");
        assert!(
            got.contains(&format!("[... line cut at byte {b} of 10000: continue")),
            "{got}"
        );
    }

    #[test]
    fn the_sub_agent_s_grep_stops_with_its_call_and_within_its_deadline() {
        let text = "x\n".repeat(5000);
        // A call past its deadline compiles and searches nothing more.
        let got = Tools::new(Stop::within(Duration::ZERO))
            .grep(&text, "y", 0, 5, 2000)
            .unwrap();
        assert_eq!(
            got,
            "[not searched: the call was stopped (deadline reached)]\n"
        );
        // A stopped call (cancelled, or the input ended): the search and a read stop.
        let stop = Stop::new();
        stop.set(StopReason::Cancelled);
        let tools = Tools::new(stop.clone());
        let got = tools.grep(&text, "y", 0, 5, 2000).unwrap();
        assert_eq!(got, "[not searched: the call was stopped (cancelled)]\n");
        assert_eq!(tools.read(&text, 1, 3, 2000), STOPPED_READ);
        let got = grep(
            &text,
            &compile("y").unwrap(),
            &GrepOptions::new(2000),
            &|| stop.is_set(),
        );
        assert_eq!(got.halted, Some(Halt::Asked));
        // A long deadline: the default budget of one grep.
        let tools = Tools::new(Stop::within(Duration::from_secs(3600)));
        assert_eq!(
            tools.grep(&text, "y", 0, 5, 2000).unwrap(),
            "(no line matches the pattern)\n"
        );
    }

    #[test]
    fn a_long_bad_pattern_is_echoed_cut_in_its_syntax_error() {
        let pattern = format!("({}", "a".repeat(13_000));
        let Err(PatternError::Syntax(message)) = compile(&pattern) else {
            panic!("a syntax error")
        };
        assert_eq!(
            message,
            format!(
                "regex parse error: unclosed group, in the pattern \"({}\"... (13001 bytes)",
                "a".repeat(199)
            )
        );
        // A short one keeps the parser's whole message.
        assert!(
            matches!(compile("(a"), Err(PatternError::Syntax(m)) if m.contains("(a\n") && m.ends_with("unclosed group")),
        );
    }

    #[test]
    fn long_patterns_are_echoed_cut() {
        assert_eq!(echo("ab"), "\"ab\"");
        let long = "é".repeat(6500);
        let e = echo(&long);
        assert!(e.ends_with("... (13000 bytes)") && e.len() < 300, "{e}");
    }
}
