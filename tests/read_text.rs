//! `read_session_text` and `read_session_json_string` (the chunked paths the server
//! answers with) against `read_session_lines` (records, printed by one thread): the same
//! text, whatever the read, and the JSON string exactly what serde_json writes for it.

mod common;

use common::{LARGE_SESSION_LINES, LARGE_SESSION_PATH, PROJECT, Workspace};
use evidence_store::read::{Mode, ReadRequest};
use evidence_store::service::Service;
use evidence_store::workspace::WorkspaceRoot;

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
        start_line,
        end_line,
        mode,
    }
}

/// The chunked text equals the printed records; returns it.
fn check(service: &Service, req: &ReadRequest) -> String {
    let got = service.read_session_text(req);
    let expect = service.read_session_lines(req).to_pretty_json();
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
    assert!(
        service.read_session_json_string(req)
            == serde_json::to_string(&expect).expect("a string encodes"),
        "{req:?}: the JSON string form is not serde_json's"
    );
    got
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
    let mut sizes = Vec::new();
    for req in &cases {
        sizes.push(check(&service, req).len());
    }
    assert!(
        sizes[0] > 1 << 20,
        "the whole session is read in many chunks"
    );
}

#[test]
fn a_change_in_a_late_chunk_is_reported_at_its_first_changed_line() {
    let ws = Workspace::example();
    ws.add_large_session();
    let service = service(&ws);
    // Same size, different bytes, on lines 1503 and 1803 (the `... trailing` lines).
    let session = String::from_utf8(ws.read(LARGE_SESSION_PATH)).expect("utf-8");
    let changed: String = session
        .split_inclusive('\n')
        .enumerate()
        .map(|(i, line)| match i + 1 {
            1503 | 1803 => line.replace("trailing", "trailinG"),
            _ => line.to_owned(),
        })
        .collect();
    assert_eq!(changed.len(), session.len());
    ws.write(LARGE_SESSION_PATH, changed);
    for (start, end, mode) in [
        (1, LARGE_SESSION_LINES as i64, Mode::Compact),
        (1480, 1579, Mode::Full),
    ] {
        let text = check(&service, &request("S0009", start, end, mode));
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
