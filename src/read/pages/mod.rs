//! Cursor pages: one bounded answer of a line range, as prompt-diary 0.2.20 frames it.
//!
//! A page is `{"next_cursor":C,"records":[...]}` (compact JSON, keys sorted) of at most
//! [`PAGE_BYTES`] UTF-8 bytes. Records are added whole while the page, priced with the
//! widest cursor the range could still need, fits. The first record that does not fit
//! ends a non-empty page, whose cursor then names that record's line. A record that does
//! not fit an empty page is cut into lossless fragments, each as long as the page allows
//! (offsets and lengths in code points of the record's text); every fragment but the
//! last is a page of its own, and the last may share its page with the records after it.
//!
//! Pure: records come from an iterator, pulled one at a time, so a page reads no more of
//! the session than it holds, plus the record that ends it. `read.rs` feeds it a
//! session's lines from the store.

mod read;

pub use read::{Paging, RawCursor, invalid_text, read_session_page};

use crate::util::pyjson::write_string_content;

/// Most UTF-8 bytes in one page's text.
pub const PAGE_BYTES: usize = 32 * 1024;

/// Where a page starts: a physical line and a code-point offset into its record's text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Cursor {
    pub line: u64,
    pub offset: u64,
}

/// What a fragment is a piece of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// The record's compact JSON text.
    CompactJson,
    /// The raw session line.
    RawLine,
}

impl Format {
    pub fn name(self) -> &'static str {
        match self {
            Format::CompactJson => "compact_json",
            Format::RawLine => "raw_line",
        }
    }
}

/// One emitted record: its line, its JSON as it appears whole in a page, and the text
/// fragments are cut from (the JSON itself for compact records, the raw line for full
/// ones).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub line: u64,
    pub json: String,
    /// `None`: fragments are cut from `json`.
    pub content: Option<String>,
}

impl Record {
    fn content(&self) -> &str {
        self.content.as_deref().unwrap_or(&self.json)
    }
}

/// A finished page: its exact text and the cursor it names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    pub text: String,
    pub next_cursor: Option<Cursor>,
}

/// Why a cursor cannot start a page.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PageError {
    #[error("cursor offset refers to an omitted record")]
    OmittedRecord,
    #[error("cursor offset is past the record content")]
    PastContent,
    #[error("page metadata leaves no room for record content")]
    NoRoom,
}

/// The message for a cursor outside the requested range (checked before paging).
pub const OUTSIDE_RANGE: &str = "cursor is outside the requested range";
/// The hint every cursor error carries.
pub const CURSOR_HINT: &str = "reuse next_cursor with the same project, session, range, and mode";

/// Builds the page that starts at `cursor` of a range ending at `end_line`. `records`
/// yields the emitted records from `cursor.line` on, in line order (omitted lines yield
/// nothing); it is pulled no further than the record that ends the page. The caller has
/// checked that `cursor.line` is inside the range.
pub fn page<E>(
    records: impl IntoIterator<Item = Result<Record, E>>,
    mut cursor: Cursor,
    end_line: u64,
    format: Format,
) -> Result<Result<Page, PageError>, E> {
    let mut page = Builder::default();
    for record in records {
        let record = record?;
        if record.line != cursor.line {
            if cursor.offset != 0 {
                return Ok(Err(PageError::OmittedRecord));
            }
            cursor = Cursor {
                line: record.line,
                offset: 0,
            };
        }
        let more = record.line < end_line;
        // Omitted lines can put the next cursor anywhere up to the range's end: price
        // the page with the widest one.
        let budget = more.then_some(Cursor {
            line: end_line,
            offset: 0,
        });
        if cursor.offset == 0 && page.size_with(record.json.len(), budget) <= PAGE_BYTES {
            page.push(record.json);
        } else if !page.is_empty() {
            return Ok(Ok(page.finish(Some(cursor))));
        } else {
            let content = record.content();
            let cut = match fragment(content, record.line, cursor.offset, format, budget) {
                Ok(cut) => cut,
                Err(e) => return Ok(Err(e)),
            };
            page.push(cut.json);
            if cut.end < cut.total {
                return Ok(Ok(page.finish(Some(Cursor {
                    line: record.line,
                    offset: cut.end,
                }))));
            }
        }
        if !more {
            break;
        }
        cursor = Cursor {
            line: record.line + 1,
            offset: 0,
        };
    }
    if cursor.offset != 0 && page.is_empty() {
        return Ok(Err(PageError::OmittedRecord));
    }
    Ok(Ok(page.finish(None)))
}

/// A page's records while it is filled, with their total size.
#[derive(Default)]
struct Builder {
    records: Vec<String>,
    bytes: usize,
}

const HEAD: &str = "{\"next_cursor\":";
const MIDDLE: &str = ",\"records\":[";
const TAIL: &str = "]}";

impl Builder {
    fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// The page's size with one more record of `extra` bytes and `cursor`.
    fn size_with(&self, extra: usize, cursor: Option<Cursor>) -> usize {
        page_size(self.bytes + extra, self.records.len() + 1, cursor)
    }

    fn push(&mut self, json: String) {
        self.bytes += json.len();
        self.records.push(json);
    }

    fn finish(self, next_cursor: Option<Cursor>) -> Page {
        let n = self.records.len();
        let mut text = String::with_capacity(page_size(self.bytes, n, next_cursor));
        text.push_str(HEAD);
        write_cursor(&mut text, next_cursor);
        text.push_str(MIDDLE);
        for (i, record) in self.records.iter().enumerate() {
            if i > 0 {
                text.push(',');
            }
            text.push_str(record);
        }
        text.push_str(TAIL);
        debug_assert_eq!(text.len(), page_size(self.bytes, n, next_cursor));
        Page { text, next_cursor }
    }
}

/// The size of a page holding `n` records of `bytes` bytes in all.
fn page_size(bytes: usize, n: usize, cursor: Option<Cursor>) -> usize {
    HEAD.len() + cursor_size(cursor) + MIDDLE.len() + bytes + n.saturating_sub(1) + TAIL.len()
}

fn digits(n: u64) -> usize {
    itoa::Buffer::new().format(n).len()
}

fn cursor_size(cursor: Option<Cursor>) -> usize {
    match cursor {
        // {"line":L,"offset":O}
        Some(c) => 19 + digits(c.line) + digits(c.offset),
        None => 4,
    }
}

fn write_cursor(out: &mut String, cursor: Option<Cursor>) {
    match cursor {
        Some(c) => {
            out.push_str("{\"line\":");
            out.push_str(itoa::Buffer::new().format(c.line));
            out.push_str(",\"offset\":");
            out.push_str(itoa::Buffer::new().format(c.offset));
            out.push('}');
        }
        None => out.push_str("null"),
    }
}

/// The bytes a character takes inside a JSON string (Python's escapes, raw non-ASCII).
fn escaped_len(c: char) -> usize {
    match c {
        '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
        c if (c as u32) < 0x20 => 6,
        c => c.len_utf8(),
    }
}

// A fragment's members, in sorted order: content, line, offset, record_format, total_chars.
const FRAG_CONTENT: &str = "{\"content\":\"";
const FRAG_LINE: &str = "\",\"line\":";
const FRAG_OFFSET: &str = ",\"offset\":";
const FRAG_FORMAT: &str = ",\"record_format\":\"";
const FRAG_TOTAL: &str = "\",\"total_chars\":";

/// A fragment as a page holds it, and where it ends (code points).
struct Cut {
    json: String,
    end: u64,
    total: u64,
}

/// The fragment of `content` from code point `offset`: the rest when it fits a page of
/// its own followed by `after` (the cursor the range would still need), else the longest
/// piece that fits with the cursor to its end.
fn fragment(
    content: &str,
    line: u64,
    offset: u64,
    format: Format,
    after: Option<Cursor>,
) -> Result<Cut, PageError> {
    let total = content.chars().count() as u64;
    if offset >= total {
        return Err(PageError::PastContent);
    }
    let start = content
        .char_indices()
        .nth(offset as usize)
        .map_or(content.len(), |(at, _)| at);
    let rest = &content[start..];
    let remaining = total - offset;
    let frame = FRAG_CONTENT.len()
        + FRAG_LINE.len()
        + digits(line)
        + FRAG_OFFSET.len()
        + digits(offset)
        + FRAG_FORMAT.len()
        + format.name().len()
        + FRAG_TOTAL.len()
        + digits(total)
        + 1;
    let size = |escaped: usize, cursor: Option<Cursor>| page_size(frame + escaped, 1, cursor);
    let cap = PAGE_BYTES as u64;
    let whole: usize = rest.chars().map(escaped_len).sum();
    let (count, bytes) = if remaining <= cap && size(whole, after) <= PAGE_BYTES {
        (remaining, rest.len())
    } else {
        // The longest prefix of at most min(remaining - 1, cap) characters whose page,
        // with the cursor to its end, fits. The size grows with the prefix, so the scan
        // stops at the first that does not fit.
        let most = (remaining - 1).min(cap);
        let (mut count, mut bytes, mut escaped) = (0u64, 0usize, 0usize);
        for c in rest.chars() {
            if count == most {
                break;
            }
            let next = Cursor {
                line,
                offset: offset + count + 1,
            };
            if size(escaped + escaped_len(c), Some(next)) > PAGE_BYTES {
                break;
            }
            count += 1;
            bytes += c.len_utf8();
            escaped += escaped_len(c);
        }
        if count == 0 {
            return Err(PageError::NoRoom);
        }
        (count, bytes)
    };
    let piece = &rest[..bytes];
    let mut json = String::with_capacity(frame + piece.len() + 16);
    json.push_str(FRAG_CONTENT);
    write_string_content(&mut json, piece);
    json.push_str(FRAG_LINE);
    json.push_str(itoa::Buffer::new().format(line));
    json.push_str(FRAG_OFFSET);
    json.push_str(itoa::Buffer::new().format(offset));
    json.push_str(FRAG_FORMAT);
    json.push_str(format.name());
    json.push_str(FRAG_TOTAL);
    json.push_str(itoa::Buffer::new().format(total));
    json.push('}');
    debug_assert_eq!(
        json.len(),
        frame + piece.chars().map(escaped_len).sum::<usize>()
    );
    Ok(Cut {
        json,
        end: offset + count,
        total,
    })
}

/// A full-mode record: `{"line":N,"raw_line":"…"}`; fragments are cut from the line.
pub fn full_record(line: u64, raw_line: &str) -> Record {
    let mut json = String::with_capacity(raw_line.len() + 32);
    json.push_str("{\"line\":");
    json.push_str(itoa::Buffer::new().format(line));
    json.push_str(",\"raw_line\":\"");
    write_string_content(&mut json, raw_line);
    json.push_str("\"}");
    Record {
        line,
        json,
        content: Some(raw_line.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::convert::Infallible;

    fn compact(line: u64, text: &str) -> Record {
        let mut json = format!("{{\"kind\":\"assistant_message\",\"line\":{line},\"text\":\"");
        write_string_content(&mut json, text);
        json.push_str("\"}");
        Record {
            line,
            json,
            content: None,
        }
    }

    /// Every page of the range walked with its cursors; panics on a cursor error.
    fn walk(records: &[Record], start: u64, end: u64, format: Format) -> Vec<Page> {
        let mut pages = Vec::new();
        let mut cursor = Cursor {
            line: start,
            offset: 0,
        };
        loop {
            let from = records
                .iter()
                .filter(|r| r.line >= cursor.line && r.line <= end)
                .cloned()
                .map(Ok::<_, Infallible>);
            let page = page(from, cursor, end, format).unwrap().unwrap();
            assert!(page.text.len() <= PAGE_BYTES, "{}", page.text.len());
            let next = page.next_cursor;
            pages.push(page);
            match next {
                Some(next) => {
                    assert!(next.line >= cursor.line && next.line <= end);
                    assert!(next != cursor, "no progress at {next:?}");
                    cursor = next;
                }
                None => return pages,
            }
        }
    }

    /// Each line's record text rebuilt from the pages: whole records as they are,
    /// fragments concatenated in offset order (checked contiguous).
    fn rebuild(pages: &[Page], format: Format) -> Vec<(u64, String)> {
        let mut out: Vec<(u64, String)> = Vec::new();
        let mut open: Option<(u64, String, u64)> = None;
        for page in pages {
            let value: serde_json::Value = serde_json::from_str(&page.text).unwrap();
            let keys: Vec<&String> = value.as_object().unwrap().keys().collect();
            assert_eq!(keys, ["next_cursor", "records"]);
            for record in value["records"].as_array().unwrap() {
                let line = record["line"].as_u64().unwrap();
                if let Some(content) = record.get("content") {
                    assert_eq!(record["record_format"], format.name());
                    let offset = record["offset"].as_u64().unwrap();
                    let total = record["total_chars"].as_u64().unwrap();
                    let content = content.as_str().unwrap();
                    let mut text = match open.take() {
                        Some((l, text, seen)) => {
                            assert_eq!((l, seen), (line, offset));
                            text
                        }
                        None => {
                            assert_eq!(offset, 0);
                            String::new()
                        }
                    };
                    text.push_str(content);
                    let seen = text.chars().count() as u64;
                    assert!(seen <= total);
                    if seen == total {
                        out.push((line, text));
                    } else {
                        open = Some((line, text, seen));
                    }
                } else {
                    assert!(open.is_none());
                    out.push((line, serde_json::to_string(record).unwrap()));
                }
            }
        }
        assert!(open.is_none());
        out
    }

    fn expected(records: &[Record], start: u64, end: u64) -> Vec<(u64, String)> {
        records
            .iter()
            .filter(|r| (start..=end).contains(&r.line))
            .map(|r| {
                let text = r.content().to_owned();
                // Whole records come back re-serialized by serde_json; compare texts of
                // the same kind.
                (r.line, text)
            })
            .collect()
    }

    /// Normalises a rebuilt record to its content: a whole full-mode record to its raw
    /// line, anything else as it is.
    fn content_of(format: Format, text: &str) -> String {
        match format {
            Format::RawLine if text.starts_with("{\"line\"") => {
                let v: serde_json::Value = serde_json::from_str(text).unwrap();
                v["raw_line"].as_str().unwrap().to_owned()
            }
            _ => text.to_owned(),
        }
    }

    fn pieces() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("a".to_owned()),
            Just("é".to_owned()),
            Just("日本".to_owned()),
            Just("😀".to_owned()),
            Just("\"".to_owned()),
            Just("\\".to_owned()),
            Just("\n".to_owned()),
            Just("\u{1}".to_owned()),
            "[a-z ]{1,40}",
        ]
    }

    fn text() -> impl Strategy<Value = String> {
        (
            prop::collection::vec(pieces(), 0..8),
            prop_oneof![
                Just(0usize),
                Just(10),
                Just(2_000),
                Just(20_000),
                Just(70_000)
            ],
            pieces(),
        )
            .prop_map(|(parts, repeat, filler)| {
                let mut s = parts.concat();
                s.push_str(&filler.repeat(repeat));
                s
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        #[test]
        fn pages_rebuild_the_unpaged_records(
            lines in prop::collection::vec(prop::option::weighted(0.8, text()), 1..12),
            start_pick in any::<prop::sample::Index>(),
            end_pick in any::<prop::sample::Index>(),
            full in any::<bool>(),
        ) {
            let n = lines.len();
            let a = start_pick.index(n) as u64 + 1;
            let b = end_pick.index(n) as u64 + 1;
            let (start, end) = (a.min(b), a.max(b));
            let format = if full { Format::RawLine } else { Format::CompactJson };
            let records: Vec<Record> = lines
                .iter()
                .enumerate()
                .filter_map(|(i, t)| {
                    let line = i as u64 + 1;
                    t.as_ref().map(|t| if full { full_record(line, t) } else { compact(line, t) })
                })
                .collect();
            let pages = walk(&records, start, end, format);
            let got: Vec<(u64, String)> = rebuild(&pages, format)
                .into_iter()
                .map(|(l, t)| (l, content_of(format, &t)))
                .collect();
            prop_assert_eq!(got, expected(&records, start, end));
        }
    }

    #[test]
    fn a_long_record_is_cut_to_fill_each_page() {
        let text = "Résumé — 日本語 line. ".repeat(3000);
        let records = vec![compact(1, "hi"), compact(2, &text), compact(3, "after")];
        let pages = walk(&records, 1, 3, Format::CompactJson);
        assert_eq!(pages[0].next_cursor, Some(Cursor { line: 2, offset: 0 }));
        for page in &pages[1..pages.len() - 1] {
            // A fragment page is full unless the next character would not fit.
            assert!(page.text.len() > PAGE_BYTES - 4, "{}", page.text.len());
        }
        let last = &pages[pages.len() - 1].text;
        assert!(
            last.ends_with(",{\"kind\":\"assistant_message\",\"line\":3,\"text\":\"after\"}]}")
        );
    }

    #[test]
    fn cursor_errors() {
        let records = [compact(2, "x")];
        let run = |cursor: Cursor| {
            page(
                records.iter().cloned().map(Ok::<_, Infallible>),
                cursor,
                3,
                Format::CompactJson,
            )
            .unwrap()
        };
        assert_eq!(
            run(Cursor { line: 1, offset: 1 }),
            Err(PageError::OmittedRecord)
        );
        assert_eq!(
            run(Cursor { line: 3, offset: 1 }),
            Err(PageError::OmittedRecord)
        );
        assert_eq!(
            run(Cursor {
                line: 2,
                offset: 99
            }),
            Err(PageError::PastContent)
        );
        let empty = page(
            std::iter::empty::<Result<Record, Infallible>>(),
            Cursor { line: 1, offset: 0 },
            3,
            Format::RawLine,
        );
        assert_eq!(
            empty.unwrap().unwrap().text,
            "{\"next_cursor\":null,\"records\":[]}"
        );
    }
}
