//! The stored format of schema version 8, pinned by a store that version wrote
//! (`tests/fixtures/store-v8.redb`, made by `tests/it/store_format.rs`). Every table holds a
//! value there; each is read with today's code and compared with what was written, and
//! every value must encode back to the very bytes stored. A field added to, removed from
//! or moved in a stored record without a schema step fails here.

use std::path::Path;

use redb::{ReadableTable, TableDefinition};

use super::citations::{CitationLookup, CitationRecord, CitationScan, StoredCheck, StoredCitation};
use super::codec::{Encoded, Record};
use super::reader::Tables;
use super::schema::*;
use super::*;
use crate::util::lines::LineEntry;
use crate::workspace::contract::Contract;
use crate::workspace::{Span, Turn};

const PROJECT: &str = "Demo-0123456789ab";
/// The workspace root the fixture was imported from (a temp dir then).
const ROOT: &str = "/tmp/.tmpqTLYNa";

fn digest(hex: &str) -> [u8; 32] {
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap();
    }
    out
}

/// A copy of the fixture opened the way every command opens a store.
fn fixture() -> (tempfile::TempDir, Store) {
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/store-v8.redb");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.redb");
    std::fs::copy(from, &path).unwrap();
    let store = Store::open(&path, crate::util::wait::DEFAULT_TIMEOUT).unwrap();
    (dir, store)
}

/// The workspace's identity as `meta` records it: the first 8 bytes (big-endian) of the
/// SHA-256 of its root's real path.
fn root_identity(root: &str) -> u64 {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(root.as_bytes());
    u64::from_be_bytes(digest[..8].try_into().unwrap())
}

fn span(start: i64, end: i64) -> Span {
    Span { start, end }
}

fn session(
    session_ref: &str,
    source_session_id: &str,
    path: &str,
    target: Span,
    turns: &[(&str, Span)],
    index_line: u64,
) -> crate::workspace::Session {
    crate::workspace::Session {
        session_ref: session_ref.into(),
        source: if source_session_id == "x1" {
            "codex"
        } else {
            "claude-code"
        }
        .into(),
        source_session_id: source_session_id.into(),
        session_path: path.into(),
        target,
        turns: turns
            .iter()
            .map(|(turn_ref, span)| Turn {
                turn_ref: (*turn_ref).into(),
                span: *span,
            })
            .collect(),
        index_line,
    }
}

fn indexed(file_id: u64, size: u64, time_ns: u64, lines: u64, hex: &str, inode: u64) -> FileState {
    FileState::Indexed(FileRecord {
        file_id,
        size,
        mtime_ns: time_ns,
        lines,
        digest: digest(hex),
        ctime_ns: time_ns,
        inode,
    })
}

/// A stored line entry: offset, length (decoded length too: these lines are UTF-8) and
/// SHA-256.
type Line = (u64, u64, &'static str);

const C1_DIGEST: &str = "c901f09ee4f2ec8f59ce8ce858abcb2e1099dc8b467bec2e94d8e53a77e0e470";
const X1_DIGEST: &str = "f6299d5be83d13b3dd4a9cba890e25b780cf5a0456bd2130fe4485f185e15794";
const C3_DIGEST: &str = "6859ddf981c9e8380bc571c74fc27fecd9ec872b21d382d87d8265f041cef617";

#[test]
fn the_schema_8_fixture_reads_as_written() {
    let (_dir, store) = fixture();
    let reader = store.reader().unwrap();
    assert_eq!(reader.schema_version().unwrap(), Some(8));
    assert_eq!(
        SCHEMA_VERSION, 8,
        "a new schema version needs its own fixture"
    );
    assert_eq!(reader.contract().unwrap(), Contract::V0_2_10);
    let meta: Vec<(String, u64)> = reader
        .table(META)
        .unwrap()
        .iter()
        .unwrap()
        .map(|item| {
            let (k, v) = item.unwrap();
            (k.value().to_owned(), v.value())
        })
        .collect();
    assert_eq!(
        meta,
        [
            ("next_file_id".to_owned(), 4),
            ("schema_version".to_owned(), 8),
            ("workspace_root".to_owned(), root_identity(ROOT)),
            ("workspace_schema".to_owned(), 2),
        ]
    );

    let workspace = reader.workspace().unwrap().unwrap();
    assert_eq!(workspace.root_display, ROOT);
    assert_eq!(workspace.project_keys, [PROJECT]);
    let metadata = &workspace.metadata;
    assert_eq!(
        (
            metadata.report_date.as_str(),
            metadata.status.as_str(),
            metadata.timezone.as_str()
        ),
        ("2026-01-15", "final", "UTC")
    );
    assert_eq!(
        metadata.text,
        "{\n  \"schema_version\": 2,\n  \"report_date\": \"2026-01-15\",\n  \"timezone\": \"UTC\",\n  \
         \"status\": \"final\",\n  \"prepared_at\": \"2026-01-16T09:00:00Z\",\n  \
         \"report_window_local\": {\n    \"start\": \"2026-01-15T00:00:00Z\",\n    \
         \"end\": \"2026-01-16T00:00:00Z\"\n  },\n  \"report_window_utc\": {\n    \
         \"start\": \"2026-01-15T00:00:00Z\",\n    \"end\": \"2026-01-16T00:00:00Z\"\n  }\n}\n"
    );

    assert_eq!(
        reader.project(PROJECT).unwrap(),
        Some(ProjectRecord {
            key: PROJECT.into(),
            label: "Demo".into(),
            session_refs: vec![
                "S0001".into(),
                "S0002".into(),
                "S0003".into(),
                "S0004".into()
            ],
        })
    );

    let t1 = 1_796_173_946_753_863_582;
    let t2 = 1_796_173_946_753_898_117;
    let sessions = [
        SessionRecord {
            session: session(
                "S0001",
                "c1",
                "sessions/claude-code/c1.jsonl",
                span(1, 8),
                &[("T0001", span(1, 6)), ("T0002", span(7, 8))],
                1,
            ),
            file: indexed(1, 1354, t1, 8, C1_DIGEST, 10_027_056),
        },
        SessionRecord {
            session: session(
                "S0002",
                "x1",
                "sessions/codex/x1.jsonl",
                span(1, 8),
                &[("T0001", span(2, 8))],
                2,
            ),
            file: indexed(2, 2221, t2, 8, X1_DIGEST, 10_027_062),
        },
        SessionRecord {
            session: session(
                "S0003",
                "s0003",
                "sessions/claude-code/c3.jsonl",
                span(1, 2),
                &[("T0001", span(1, 2))],
                3,
            ),
            file: indexed(3, 420, t2, 2, C3_DIGEST, 10_027_066),
        },
        SessionRecord {
            session: session(
                "S0004",
                "s0004",
                "sessions/claude-code/gone.jsonl",
                span(1, 4),
                &[("T0001", span(1, 4))],
                4,
            ),
            file: FileState::Missing,
        },
    ];
    for want in &sessions {
        let session_ref = &want.session.session_ref;
        let got = reader.session(PROJECT, session_ref).unwrap();
        assert_eq!(got.as_ref(), Some(want), "{session_ref}");
        let file = reader.session_file(PROJECT, session_ref).unwrap().unwrap();
        assert_eq!(file.session_path, want.session.session_path);
        assert_eq!(file.file, want.file);
    }

    // Line tables: (offset, len = decoded_len, SHA-256) of every line, by file id.
    let lines: [(u64, &[Line]); 3] = [
        (
            1,
            &[
                (
                    0,
                    107,
                    "afad91372564120a76b8afa6d8fd83fee5f013aa46bbab3d2199898b38cf77ac",
                ),
                (
                    108,
                    231,
                    "53af6fc08fa8e4eb10ed672fd0bd722dcf630a2ec594d7bed0b2c25a0587028f",
                ),
                (
                    340,
                    206,
                    "4fb3093485ce3c195ebbe7e6311154e02114de6e332f3738b98f3cac1c2a8064",
                ),
                (
                    547,
                    188,
                    "b275b976cfe4078bb80a05fbfa3599255cd98bf86061152e145a7e2396e06846",
                ),
                (
                    736,
                    234,
                    "01140f05940a81faed7eacf686adee7cfcdb42d91efc3045dd8adb5df3716eb2",
                ),
                (
                    971,
                    250,
                    "1ac246f9ea0bc88d5caab527f07289ee4df422e4de3f5c767a1da1b3090a2047",
                ),
                (
                    1222,
                    69,
                    "790a498b33daa4a9b3eeceb833687d0623470547489ff830ebbfcf54bd9733ef",
                ),
                (
                    1292,
                    61,
                    "4833b6e5fe35876c9d523754d64cda3afb4c9000261a6dd8e4631a4621ddd61c",
                ),
            ],
        ),
        (
            2,
            &[
                (
                    0,
                    94,
                    "d876cf897d30fb39798945653faa0330bf47c342a6740778b3c2f64817712ea1",
                ),
                (
                    95,
                    120,
                    "af29699828676e8ad12601e60e333427e28a9c9fb2eccf795d42c475c4c9fec6",
                ),
                (
                    216,
                    131,
                    "1d234f99215b1004754aa2113b3996823d991e16417580f0d3cb2cc82b19c5d9",
                ),
                (
                    348,
                    172,
                    "37cbddbfd6fad3d5f2d743ca9d89da6a9cfc00a215b530eb922577ab7e86dc78",
                ),
                (
                    521,
                    1311,
                    "3e937df7d9648cbf55047db59dff9ce63d2ba11ebcc23addd9df6b20f5a49763",
                ),
                (
                    1833,
                    167,
                    "5366e5e4a32ed2213d6ff26eada0ace3dc643c6093e7cbb14148051eb12d9b14",
                ),
                (
                    2001,
                    118,
                    "0fd09acafbda800013e966f73c8769176d11bb04cf4c06c07bf949c7bfc3848a",
                ),
                (
                    2120,
                    100,
                    "06864c2a7e33fcf02da73504d37046a53952c125e63a0ec5047f80485b2ae6ab",
                ),
            ],
        ),
        (
            3,
            &[
                (
                    0,
                    117,
                    "a9383c67eb8ac5f2696feca88e9040a2f7f3f92027f1e168a49f45d5fc3924f4",
                ),
                (
                    118,
                    301,
                    "8e710a1438923e184cd1c3caf99638c42be999b914fd989129ac7f140976f9f4",
                ),
            ],
        ),
    ];
    for (file_id, want) in lines {
        let want: Vec<LineEntry> = want
            .iter()
            .map(|&(offset, len, hex)| LineEntry {
                offset,
                len,
                decoded_len: len,
                sha256: digest(hex),
            })
            .collect();
        assert_eq!(
            reader.lines(file_id, 1, want.len() as u64).unwrap(),
            want,
            "file {file_id}"
        );
    }

    let documents = [
        ("daily-report.json", "{\"report\": \"2026-01-15\"}\n"),
        (
            "projects/Demo-0123456789ab/evidence/S0001.json",
            "{\"card\": \"S0001\"}\n",
        ),
        (
            "projects/Demo-0123456789ab/project-synthesis.json",
            "{\"envelope\": 1}\n",
        ),
    ];
    assert_eq!(
        reader.document_paths().unwrap(),
        documents.map(|(path, _)| path)
    );
    for (path, text) in documents {
        assert_eq!(
            reader.document(path).unwrap(),
            Some(DocumentRecord::new(text.as_bytes().to_vec())),
            "{path}"
        );
    }

    let scans = [
        ("S0001", Some((C1_DIGEST, 8, 2))),
        ("S0002", Some((X1_DIGEST, 8, 0))),
        ("S0003", Some((C3_DIGEST, 2, 1))),
        ("S0004", None),
    ];
    for (session_ref, want) in scans {
        let want = want.map(|(hex, lines, citations)| CitationScan {
            digest: digest(hex),
            lines,
            citations,
        });
        assert_eq!(
            reader.citation_scan(PROJECT, session_ref).unwrap(),
            want,
            "{session_ref}"
        );
    }
    let unchecked = |detail: &str| StoredCheck {
        status: "unchecked".into(),
        cwd: None,
        sha256: None,
        file_lines: None,
        detail: Some(detail.into()),
    };
    let c1_text = "Fixed the off-by-one in parse_tokens; all 5 tests pass.\n\n\
                   **Evidence**: src/parser.py:41-42\n\
                   **Evidence**: pytest tests/test_parser.py::test_parse_tokens - PASS";
    let s1 = vec![
        CitationRecord {
            line: 6,
            citation: StoredCitation {
                turn_ref: Some("T0001".into()),
                content_index: Some(0),
                offset: 57,
                len: 33,
                kind: "file".into(),
                reference: "src/parser.py:41-42".into(),
                context: Some(c1_text.into()),
                check: unchecked("the session records no working directory"),
            },
        },
        CitationRecord {
            line: 6,
            citation: StoredCitation {
                turn_ref: Some("T0001".into()),
                content_index: Some(0),
                offset: 91,
                len: 67,
                kind: "test".into(),
                reference: "pytest tests/test_parser.py::test_parse_tokens - PASS".into(),
                context: None,
                check: unchecked("not a file citation"),
            },
        },
    ];
    let s3 = vec![CitationRecord {
        line: 2,
        citation: StoredCitation {
            turn_ref: Some("T0001".into()),
            content_index: Some(0),
            offset: 83,
            len: 74,
            kind: "file".into(),
            reference: "src/a.py:1-3".into(),
            context: Some("the whole file".into()),
            check: StoredCheck {
                status: "ok".into(),
                cwd: Some(format!("{ROOT}/repo")),
                sha256: Some(digest(
                    "b6285c57e8797db5d4c51c80d6f11938afda9b11c6a003549709189e9b4b92a2",
                )),
                file_lines: Some(3),
                detail: None,
            },
        },
    }];
    assert_eq!(reader.session_citations(PROJECT, "S0001").unwrap(), s1);
    assert_eq!(reader.session_citations(PROJECT, "S0003").unwrap(), s3);
    assert_eq!(reader.citation_count().unwrap(), 3);
    let all = reader.workspace_citations(None).unwrap();
    let refs: Vec<&str> = all.iter().map(|s| s.session_ref.as_str()).collect();
    assert_eq!(refs, ["S0001", "S0003"]);
}

/// Every value of every table, decoded with today's records and converted to the types
/// the store hands out and back, encodes back to exactly the stored bytes.
#[test]
fn every_stored_value_encodes_back_to_its_bytes() {
    fn same<T: Record + From<D>, D: From<T>>(value: &Encoded<'_, T>) {
        let handed_out: D = value.decode().unwrap().into();
        let again = Encoded::encode(&T::from(handed_out)).unwrap();
        assert_eq!(again.bytes(), value.bytes(), "{}", T::WHAT);
    }
    fn each<K: redb::Key + 'static, V: redb::Value + 'static>(
        reader: &Reader,
        table: TableDefinition<K, V>,
        check: impl Fn(&V::SelfType<'_>),
    ) -> usize {
        let table = reader.table(table).unwrap();
        let mut n = 0;
        for item in table.iter().unwrap() {
            check(&item.unwrap().1.value());
            n += 1;
        }
        n
    }
    let (_dir, store) = fixture();
    let reader = store.reader().unwrap();
    let counts = [
        each(&reader, WORKSPACE, same::<_, WorkspaceRecord>),
        each(&reader, PROJECTS, same::<_, ProjectRecord>),
        each(&reader, SESSIONS, same::<_, SessionRecord>),
        each(&reader, DOCUMENTS, same::<_, DocumentRecord>),
        each(&reader, CITATIONS, |value| {
            let handed_out: Vec<StoredCitation> = value
                .decode()
                .unwrap()
                .into_iter()
                .map(Into::into)
                .collect();
            let again: Vec<records::Citation> = handed_out.into_iter().map(Into::into).collect();
            assert_eq!(Encoded::encode(&again).unwrap().bytes(), value.bytes());
        }),
        each(&reader, CITATION_SCANS, same::<_, CitationScan>),
        each(&reader, LINE_BLOCKS, |b| {
            let bytes = b.bytes();
            assert_eq!(
                codec::encode_lines(&codec::decode_lines(bytes).unwrap()),
                bytes
            )
        }),
    ];
    assert_eq!(counts, [1, 1, 4, 3, 2, 3, 3]);
}

/// `verify` finds the fixture whole: every record decodes, line tables match their
/// digests, documents their checksums.
#[test]
fn the_schema_8_fixture_verifies() {
    let (dir, store) = fixture();
    drop(store);
    let verified = verify::verify(
        &dir.path().join("store.redb"),
        dir.path(),
        crate::util::wait::DEFAULT_TIMEOUT,
        || Ok::<_, std::convert::Infallible>(()),
    );
    assert_eq!(verified.problems, Vec::<String>::new());
    assert_eq!(verified.cannot_check, None);
    assert_eq!(
        (verified.projects, verified.sessions, verified.documents),
        (1, 4, 3)
    );
}
