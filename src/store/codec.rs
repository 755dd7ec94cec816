//! How records become bytes. The only module that knows bincode, so it could be swapped
//! (bincode is flagged unmaintained by RustSec) by changing this file and the schema version.

use std::marker::PhantomData;

use serde::de::{Deserializer, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};

use super::FileState;
use super::records::{StoredSession, StoredSessionRecord, StoredSpan};
use crate::util::lines::LineEntry;

/// Why stored bytes could not be decoded: the store is corrupt or from another build.
#[derive(Debug, thiserror::Error)]
#[error("stored {what} record cannot be decoded: {detail}")]
pub struct CodecError {
    what: &'static str,
    detail: String,
}

fn config() -> bincode::config::Configuration {
    bincode::config::standard()
}

pub fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    // Encoding into a Vec cannot fail for the plain structs stored here (no maps with
    // non-string keys, no sequences of unknown length).
    bincode::serde::encode_to_vec(value, config()).unwrap_or_default()
}

/// Decodes a whole value; its strings may borrow from `bytes`.
pub fn decode<'b, T: Deserialize<'b>>(
    what: &'static str,
    bytes: &'b [u8],
) -> Result<T, CodecError> {
    match bincode::serde::borrow_decode_from_slice(bytes, config()) {
        Ok((value, used)) if used == bytes.len() => Ok(value),
        Ok((_, used)) => Err(CodecError {
            what,
            detail: format!("{} trailing bytes", bytes.len() - used),
        }),
        Err(e) => Err(CodecError {
            what,
            detail: e.to_string(),
        }),
    }
}

/// Lines per `line_blocks` value: a 2000-line read touches at most three blocks, and a
/// block (56 KiB) is small enough to rewrite cheaply.
pub const LINES_PER_BLOCK: u64 = 1024;
/// Bytes of one packed [`LineEntry`]: offset, len, decoded_len (u64 LE each), SHA-256.
pub const ENTRY_BYTES: usize = 56;

/// Line entries are fixed-size and read in bulk, so they are packed by hand rather than
/// through bincode.
pub fn encode_lines(entries: &[LineEntry]) -> Vec<u8> {
    let mut out = Vec::with_capacity(entries.len() * ENTRY_BYTES);
    for e in entries {
        out.extend_from_slice(&e.offset.to_le_bytes());
        out.extend_from_slice(&e.len.to_le_bytes());
        out.extend_from_slice(&e.decoded_len.to_le_bytes());
        out.extend_from_slice(&e.sha256);
    }
    out
}

/// The entries `skip..skip + take` of a block (fewer where the block ends first).
pub fn decode_lines_range(
    bytes: &[u8],
    skip: u64,
    take: u64,
) -> Result<impl Iterator<Item = LineEntry> + '_, CodecError> {
    let entries = decode_lines_iter(bytes)?;
    let skip = usize::try_from(skip).unwrap_or(usize::MAX);
    let take = usize::try_from(take).unwrap_or(usize::MAX);
    Ok(entries.skip(skip).take(take))
}

pub fn decode_lines(bytes: &[u8]) -> Result<Vec<LineEntry>, CodecError> {
    Ok(decode_lines_iter(bytes)?.collect())
}

fn decode_lines_iter(bytes: &[u8]) -> Result<impl Iterator<Item = LineEntry> + '_, CodecError> {
    if !bytes.len().is_multiple_of(ENTRY_BYTES) {
        return Err(CodecError {
            what: "line block",
            detail: format!("{} bytes is not a whole number of entries", bytes.len()),
        });
    }
    let u64_at = |chunk: &[u8], at: usize| {
        let mut word = [0u8; 8];
        word.copy_from_slice(&chunk[at..at + 8]);
        u64::from_le_bytes(word)
    };
    Ok(bytes.chunks_exact(ENTRY_BYTES).map(move |chunk| {
        let mut sha256 = [0u8; 32];
        sha256.copy_from_slice(&chunk[24..56]);
        LineEntry {
            offset: u64_at(chunk, 0),
            len: u64_at(chunk, 8),
            decoded_len: u64_at(chunk, 16),
            sha256,
        }
    }))
}

/// What a read needs of a stored `SessionRecord`: how to read its file, and the file
/// record. Decoded in place, stepping over the turns (a long session has thousands)
/// without building them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionFile {
    pub source: String,
    pub session_path: String,
    pub file: FileState,
}

/// `StoredSessionRecord`'s layout with borrowed strings and the turns skipped. It must
/// follow `StoredSessionRecord` and `StoredSession` field for field (a test decodes both
/// ways).
#[derive(Deserialize)]
struct SessionRecordView<'a> {
    #[serde(borrow)]
    session: SessionView<'a>,
    file: FileState,
}

#[derive(Deserialize)]
#[allow(dead_code)] // Fields are read to step over them.
struct SessionView<'a> {
    session_ref: &'a str,
    source: &'a str,
    source_session_id: &'a str,
    session_path: &'a str,
    target: StoredSpan,
    #[serde(borrow)]
    turns: Skipped<TurnView<'a>>,
    index_line: u64,
}

#[derive(Deserialize)]
#[allow(dead_code)]
struct TurnView<'a> {
    turn_ref: &'a str,
    span: StoredSpan,
}

/// A sequence read element by element and thrown away.
struct Skipped<T>(PhantomData<T>);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Skipped<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Each<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for Each<T> {
            type Value = Skipped<T>;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a sequence")
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                while seq.next_element::<T>()?.is_some() {}
                Ok(Skipped(PhantomData))
            }
        }
        deserializer.deserialize_seq(Each(PhantomData))
    }
}

/// A `SessionRecord` as schema 1 stored it: the file record had no ctime and inode.
#[derive(Deserialize)]
struct SessionRecordV1 {
    session: StoredSession,
    file: FileStateV1,
}

#[derive(Deserialize)]
enum FileStateV1 {
    Missing,
    Indexed(FileRecordV1),
}

#[derive(Deserialize)]
struct FileRecordV1 {
    file_id: u64,
    size: u64,
    mtime_ns: u64,
    lines: u64,
    digest: [u8; 32],
}

/// Re-encodes a schema-1 `SessionRecord` in the current layout. The file record gets
/// ctime and inode 0, which no file has, so the next import re-hashes the file once and
/// keeps its line table when the lines are the same.
pub fn upgrade_session_v1(bytes: &[u8]) -> Result<Vec<u8>, CodecError> {
    let old: SessionRecordV1 = decode("schema 1 session", bytes)?;
    let file = match old.file {
        FileStateV1::Missing => FileState::Missing,
        FileStateV1::Indexed(f) => FileState::Indexed(super::FileRecord {
            file_id: f.file_id,
            size: f.size,
            mtime_ns: f.mtime_ns,
            lines: f.lines,
            digest: f.digest,
            ctime_ns: 0,
            inode: 0,
        }),
    };
    Ok(encode(&StoredSessionRecord {
        session: old.session,
        file,
    }))
}

pub fn decode_session_file(bytes: &[u8]) -> Result<SessionFile, CodecError> {
    let view: SessionRecordView<'_> = decode("session", bytes)?;
    Ok(SessionFile {
        source: view.session.source.to_owned(),
        session_path: view.session.session_path.to_owned(),
        file: view.file,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_blocks_round_trip() {
        let entries: Vec<LineEntry> = (0..5u8)
            .map(|i| LineEntry {
                offset: u64::from(i) << 40,
                len: u64::from(i) * 3,
                decoded_len: u64::from(i) * 3 + 1,
                sha256: [i; 32],
            })
            .collect();
        let bytes = encode_lines(&entries);
        assert_eq!(decode_lines(&bytes).unwrap(), entries);
        assert!(decode_lines(&[0; 55]).is_err());
        for (skip, take) in [(0, 5), (1, 3), (4, 9), (5, 1), (0, 0), (2, u64::MAX)] {
            let got: Vec<LineEntry> = decode_lines_range(&bytes, skip, take).unwrap().collect();
            let want: Vec<LineEntry> = entries
                .iter()
                .skip(skip as usize)
                .take(take.min(5) as usize)
                .cloned()
                .collect();
            assert_eq!(got, want, "skip {skip} take {take}");
        }
    }

    #[test]
    fn a_session_file_is_read_from_a_whole_session_record() {
        use super::super::{FileRecord, SessionRecord};
        use crate::workspace::{Session, Span, Turn};
        let span = |start, end| Span { start, end };
        let session = Session {
            session_ref: "S0001".into(),
            source: "claude-code".into(),
            source_session_id: "x".into(),
            session_path: "sessions/claude-code/é.jsonl".into(),
            target: span(1, 9),
            turns: (1..=300)
                .map(|t| Turn {
                    turn_ref: format!("T{t:04}"),
                    span: span(t, t + 1),
                })
                .collect(),
            index_line: 3,
        };
        let files = [
            FileState::Missing,
            FileState::Indexed(FileRecord {
                file_id: 7,
                size: 1 << 40,
                mtime_ns: u64::MAX,
                lines: 9,
                digest: [5; 32],
                ctime_ns: 1 << 62,
                inode: 12345,
            }),
        ];
        for file in files {
            let record = SessionRecord {
                session: session.clone(),
                file: file.clone(),
            };
            let bytes = encode(&record);
            let whole: SessionRecord = decode("session", &bytes).unwrap();
            assert_eq!(
                decode_session_file(&bytes).unwrap(),
                SessionFile {
                    source: whole.session.source,
                    session_path: whole.session.session_path,
                    file: whole.file,
                }
            );
            assert!(decode_session_file(&bytes[..bytes.len() - 1]).is_err());
            let mut longer = bytes.clone();
            longer.push(0);
            assert!(decode_session_file(&longer).is_err());
        }
    }

    #[test]
    fn records_round_trip_and_reject_garbage() {
        let value = (String::from("P-1"), vec![1u64, 2, 3], Some(true));
        let bytes = encode(&value);
        assert_eq!(
            decode::<(String, Vec<u64>, Option<bool>)>("test", &bytes).unwrap(),
            value
        );
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(decode::<(String, Vec<u64>, Option<bool>)>("test", &longer).is_err());
        assert!(decode::<(String, Vec<u64>, Option<bool>)>("test", &bytes[..2]).is_err());
    }
}
