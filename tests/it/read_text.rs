//! `Service::read`'s text (the records printed straight from the checked lines, chunk by
//! chunk on two threads, as the server answers) against serde_json's pretty print of
//! `Service::read_records` (the same pipeline ending in records): the same text, whatever
//! the read.

use crate::common;

use common::{LARGE_SESSION_LINES, LARGE_SESSION_PATH, PROJECT, Workspace};
use evidence_store::harness::{Mode, Paging, ReadRequest, Service, Sink, TextForm, WorkspaceRoot};

fn service(ws: &Workspace) -> Service {
    let root = WorkspaceRoot {
        display: ws.root().display().to_string(),
        path: ws.root().to_path_buf(),
    };
    Service::start(root, &ws.store())
}

fn request(session_ref: &str, start_line: i64, end_line: i64, mode: Mode) -> ReadRequest {
    ReadRequest {
        project_key: PROJECT.into(),
        session_ref: session_ref.into(),
        start_line: start_line.into(),
        end_line: end_line.into(),
        mode,
    }
}

/// The chunked text equals the printed records; returns it.
fn check(service: &Service, req: &ReadRequest) -> String {
    let mut got = String::new();
    service.read(req, Paging::Unpaged, &mut got);
    let expect = serde_json::to_string_pretty(&service.read_records(req)).expect("encodes");
    if got != expect {
        let at = got
            .bytes()
            .zip(expect.bytes())
            .position(|(a, b)| a != b)
            .unwrap_or(got.len().min(expect.len()));
        let near = |s: &str| {
            String::from_utf8_lossy(&s.as_bytes()[at.saturating_sub(60)..(at + 60).min(s.len())])
                .into_owned()
        };
        panic!(
            "{req:?}: differs at byte {at}: got {:?}, expected {:?}",
            near(&got),
            near(&expect)
        );
    }
    // The same read as a transport sends it: the content of the JSON string holding it.
    let mut content = JsonContent(String::new());
    service.read(req, Paging::Unpaged, &mut content);
    let content = content.0;
    let quoted = serde_json::to_string(&expect).expect("encodes");
    assert!(
        content == quoted[1..quoted.len() - 1],
        "{req:?}: the JSON string form differs from the escaped text"
    );
    got
}

/// A read's pieces as a transport that sends them inside a JSON message takes them.
struct JsonContent(String);

impl Sink for JsonContent {
    fn form(&self) -> TextForm {
        TextForm::JsonString
    }

    fn piece(&mut self, piece: String) -> bool {
        self.0.push_str(&piece);
        true
    }
}

#[test]
fn chunked_text_is_the_printed_records() {
    let ws = Workspace::example();
    ws.add_large_session();
    let service = service(&ws);
    let last = LARGE_SESSION_LINES as i64;
    let cases = [
        // Many chunks on two threads, one chunk, and ranges that start and end mid-file.
        request("S0009", 1, last, Mode::Compact),
        request("S0009", 1, 1, Mode::Compact),
        request("S0009", 1000, 1999, Mode::Compact),
        request("S0009", 7, 8, Mode::Compact),
        request("S0009", 1, 100, Mode::Full),
        request("S0009", last - 99, last, Mode::Full),
        request("S0001", 1, 8, Mode::Compact),
        request("S0002", 1, 8, Mode::Full),
        // Answers without lines: a range past the end, an unknown session.
        request("S0009", 1, last + 1, Mode::Compact),
        request("S0404", 1, 1, Mode::Compact),
    ];
    let texts: Vec<String> = cases.iter().map(|req| check(&service, req)).collect();
    assert!(
        texts[0].len() > 1 << 20,
        "the whole session is read in many chunks"
    );
    assert!(
        texts[4].contains("\u{fffd}\u{fffd}\u{fffd}\\\"}"),
        "lines that are not UTF-8 are read as Python decodes them"
    );
}

/// A full read's lines longer than a segment (256 KiB) are read, checked and printed in
/// segments, cut where the decoding of the parts is that of the whole: the same text as
/// the printed records, whatever falls at the cuts (multi-byte characters, invalid
/// sequences, characters JSON escapes), and compact reads of the same lines too.
#[test]
fn long_lines_read_in_segments_are_the_printed_records() {
    let ws = Workspace::example();
    let awkward: &[u8] = "quote \\\" backslash \\\\ tab \t é 😀 ".as_bytes();
    // What straddles a segment's end (256 KiB into its line) in each line: characters of
    // two, three and four bytes, and invalid sequences (a cut one, a lone lead byte,
    // a run of continuation bytes).
    let straddling: [&[u8]; 6] = [
        "😀".as_bytes(),
        "é".as_bytes(),
        b"\xF0\x9F\x98",
        b"\xE2",
        "€".as_bytes(),
        b"\x80\x80\x80\x80\x80\x80",
    ];
    let prefix: &[u8] = b"{\"type\":\"user\",\"message\":{\"role\":\"user\",\"content\":\"";
    let mut session = Vec::new();
    for (i, odd) in straddling.iter().enumerate() {
        let mut line = prefix.to_vec();
        while line.len() < 300_000 * (i + 1) {
            line.extend_from_slice(awkward);
            line.extend_from_slice(&b"x".repeat(line.len() % 13));
        }
        // At every segment end in the line, from one to four bytes before it.
        for end in (1..=i + 1).map(|k| k * (256 << 10)) {
            let at = end - 1 - i % 4;
            if at + odd.len() < line.len() {
                line[at..at + odd.len()].copy_from_slice(odd);
            }
        }
        session.extend_from_slice(&line);
        session.extend_from_slice(b"\"}}\n");
        session.extend_from_slice(format!("{{\"type\":\"system\",\"n\":{i}}}\n").as_bytes());
    }
    let rel = "projects/Demo-0123456789ab/sessions/claude-code/long.jsonl";
    ws.write(rel, &session);
    let index = format!("projects/{PROJECT}/sessions.index.jsonl");
    let mut rows = String::from_utf8(ws.read(&index)).expect("utf-8 index");
    rows.push_str("{\"session_ref\": \"S0011\", \"source\": \"claude-code\", \"source_session_id\": \"long\", \"session_path\": \"sessions/claude-code/long.jsonl\", \"target_start_line\": 1, \"target_end_line\": 1, \"turns\": []}\n");
    ws.write(&index, rows);
    let service = service(&ws);
    for req in [
        request("S0011", 1, 12, Mode::Full),
        request("S0011", 2, 11, Mode::Full),
        request("S0011", 5, 5, Mode::Full),
        request("S0011", 1, 12, Mode::Compact),
    ] {
        let text = check(&service, &req);
        assert!(text.contains("\"status\": \"ok\""), "{req:?}");
    }
}

#[test]
fn an_edited_line_terminator_leaves_each_line_its_own_text() {
    // Line 1000 ends with an incomplete UTF-8 sequence. Its terminator is then edited, in
    // place, into the byte that completes the sequence: no line's digest covers the
    // terminator, and the two lines together are now valid UTF-8. Each line must still
    // read as its own bytes decode.
    let ws = Workspace::example();
    ws.add_large_session();
    let mut session = ws.read(LARGE_SESSION_PATH);
    let end = session
        .iter()
        .enumerate()
        .filter(|(_, b)| **b == b'\n')
        .nth(999)
        .map(|(i, _)| i)
        .expect("2000 lines");
    session.splice(end..end, *b"\xe2\x82");
    ws.write(LARGE_SESSION_PATH, &session);
    let service = service(&ws);
    session[end + 2] = 0xac;
    ws.write(LARGE_SESSION_PATH, &session);
    for mode in [Mode::Full, Mode::Compact] {
        let text = check(&service, &request("S0009", 1000, 1001, mode));
        assert!(text.contains("\"status\": \"ok\""), "{text}");
    }
}

#[test]
fn a_change_in_a_late_chunk_is_reported_at_its_first_changed_line() {
    let ws = Workspace::example();
    ws.add_large_session();
    let service = service(&ws);
    // Same size, different bytes, on lines 1503 and 1803 (the `... trailing` lines).
    let session = ws.read(LARGE_SESSION_PATH);
    let changed: Vec<u8> = session
        .split_inclusive(|&b| b == b'\n')
        .enumerate()
        .flat_map(|(i, line)| match i + 1 {
            1503 | 1803 => String::from_utf8(line.to_vec())
                .expect("these lines are UTF-8")
                .replace("trailing", "trailinG")
                .into_bytes(),
            _ => line.to_vec(),
        })
        .collect();
    assert_eq!(changed.len(), session.len());
    ws.write(LARGE_SESSION_PATH, changed);
    for (start, end, mode) in [
        (1, LARGE_SESSION_LINES as i64, Mode::Compact),
        (1480, 1579, Mode::Full),
    ] {
        let req = request("S0009", start, end, mode);
        let text = check(&service, &req);
        let got: serde_json::Value = serde_json::from_str(&text).expect("JSON");
        assert_eq!(
            got["errors"][0]["message"],
            "session file for session_ref 'S0009' changed since it was imported (line 1503 no longer matches its recorded SHA-256)"
        );
    }
    // The lines before the change still read.
    let text = check(&service, &request("S0009", 1, 1502, Mode::Compact));
    assert!(text.starts_with("{\n  \"status\": \"ok\""));
}
