//! Schema versions: creating a new store, upgrading an older one, refusing a newer one.
//! Each step is documented in `migrations/`.

use redb::{Database, ReadableDatabase, ReadableTable, TableHandle, WriteTransaction};

use super::codec::Encoded;
use super::error::CodecError;
use super::error::OrStore;
use super::error::{OpenError, StoreError};
use super::schema::{self, META, SCHEMA_VERSION};
use super::types::DocumentRecord;
use super::{records, writer};

/// One upgrade step: from `from` to `from + 1`.
struct Step {
    from: u64,
    run: fn(&WriteTransaction) -> Result<(), StoreError>,
}

/// Upgrade steps in order (`migrations/000<from + 1>-*.md` describes each).
const STEPS: &[Step] = &[
    Step {
        from: 1,
        run: file_ctime,
    },
    Step {
        from: 2,
        run: checksum_documents,
    },
    Step {
        from: 3,
        run: citation_tables,
    },
    Step {
        from: 4,
        run: record_workspace_contract,
    },
    Step {
        from: 5,
        run: retake_citations,
    },
    Step {
        from: 6,
        run: retake_citations,
    },
    Step {
        from: 7,
        run: retake_citations,
    },
];

/// 5 → 6, 6 → 7 and 7 → 8: every stored citation and scan record goes; the layout is
/// unchanged. Version 5 took a Codex line's project directory from any earlier `"cwd"`
/// key, read cited files in system directories, counted `src/a.py:3 - PASS` as a test too
/// and `pytest - PASS` as a test. Version 6 took a test marker without `pytest ` as a test
/// and stored a test's reference without `pytest `, and a command block whole as its
/// reference with no context. Version 7 took no test from a marker without `pytest `,
/// even a pytest node id (`tests/test_auth.py::test_login - PASS`). Results of those rules
/// stay wrong until the session file changes. With no scan record left, the next import
/// takes every session's citations again under the current rules (line tables are kept
/// when the lines are the same).
fn retake_citations(txn: &WriteTransaction) -> Result<(), StoreError> {
    txn.open_table(schema::CITATIONS)
        .store()?
        .retain(|_, _| false)
        .store()?;
    txn.open_table(schema::CITATION_SCANS)
        .store()?
        .retain(|_, _| false)
        .store()?;
    Ok(())
}

/// 3 → 4: the `citations` and `citation_scans` tables, empty. No session has a scan
/// record yet, so the next import scans every session file once (its line table is kept
/// when the lines are the same).
fn citation_tables(txn: &WriteTransaction) -> Result<(), StoreError> {
    txn.open_table(schema::CITATIONS).store()?;
    txn.open_table(schema::CITATION_SCANS).store()?;
    Ok(())
}

/// 4 → 5: a store with an imported workspace records that workspace's contract, which
/// can only be prompt-diary 0.2.10 (schema_version 2): no earlier build imported another.
fn record_workspace_contract(txn: &WriteTransaction) -> Result<(), StoreError> {
    let imported = txn
        .open_table(schema::WORKSPACE)
        .store()?
        .get(schema::WORKSPACE_KEY)
        .store()?
        .is_some();
    if imported {
        txn.open_table(META)
            .store()?
            .insert(schema::CONTRACT_KEY, 2)
            .store()?;
    }
    Ok(())
}

/// 1 → 2: file records gain ctime and inode (0 in every upgraded record). Line blocks no
/// session refers to (left by concurrent imports of version 1) are dropped.
fn file_ctime(txn: &WriteTransaction) -> Result<(), StoreError> {
    let mut table = txn.open_table(schema::SESSIONS).store()?;
    let mut upgraded = Vec::new();
    let mut referenced = std::collections::HashSet::new();
    for item in table.iter().store()? {
        let (key, value) = item.store()?;
        let (project_key, session_ref) = key.value();
        let record = upgrade_session_v1(&value.value())?;
        if let records::FileState::Indexed(file) = &record.file {
            referenced.insert(file.file_id);
        }
        upgraded.push((
            project_key.to_owned(),
            session_ref.to_owned(),
            Encoded::encode(&record)?,
        ));
    }
    for (project_key, session_ref, value) in upgraded {
        table
            .insert((project_key.as_str(), session_ref.as_str()), &value)
            .store()?;
    }
    txn.open_table(schema::LINE_BLOCKS)
        .store()?
        .retain(|(file_id, _), _| referenced.contains(&file_id))
        .store()?;
    Ok(())
}

/// A `SessionRecord` as schema 1 stored it: the file record had no ctime and inode.
#[derive(serde::Deserialize)]
struct SessionRecordV1 {
    session: records::Session,
    file: FileStateV1,
}

#[derive(serde::Deserialize)]
enum FileStateV1 {
    Missing,
    Indexed(FileRecordV1),
}

#[derive(serde::Deserialize)]
struct FileRecordV1 {
    file_id: u64,
    size: u64,
    mtime_ns: u64,
    lines: u64,
    digest: [u8; 32],
}

/// A schema-1 `SessionRecord` in the current layout. The file record gets ctime and
/// inode 0, which no file has, so the next import re-hashes the file once and keeps its
/// line table when the lines are the same.
fn upgrade_session_v1(
    old: &Encoded<'_, records::SessionRecord>,
) -> Result<records::SessionRecord, CodecError> {
    let old: SessionRecordV1 = old.decode_as("schema 1 session")?;
    let file = match old.file {
        FileStateV1::Missing => records::FileState::Missing,
        FileStateV1::Indexed(f) => records::FileState::Indexed(records::FileRecord {
            file_id: f.file_id,
            size: f.size,
            mtime_ns: f.mtime_ns,
            lines: f.lines,
            digest: f.digest,
            ctime_ns: 0,
            inode: 0,
        }),
    };
    Ok(records::SessionRecord {
        session: old.session,
        file,
    })
}

/// Versions 1 and 2 stored a document as its bytes alone.
#[derive(serde::Deserialize)]
struct DocumentV1 {
    bytes: Vec<u8>,
}

/// 2 → 3: every stored document gets the SHA-256 of its bytes.
fn checksum_documents(txn: &WriteTransaction) -> Result<(), StoreError> {
    let mut table = txn.open_table(schema::DOCUMENTS).store()?;
    let mut upgraded = Vec::new();
    for item in table.iter().store()? {
        let (key, value) = item.store()?;
        let old: DocumentV1 = value.value().decode_as("document")?;
        let new = records::Document::from(DocumentRecord::new(old.bytes));
        upgraded.push((key.value().to_owned(), Encoded::encode(&new)?));
    }
    for (key, value) in upgraded {
        table.insert(key.as_str(), &value).store()?;
    }
    Ok(())
}

/// Makes sure the store at hand has the current schema, creating or upgrading it.
pub(super) fn ensure_current(
    db: &Database,
    shown: &str,
    lock_wait: std::time::Duration,
) -> Result<(), OpenError> {
    let db_error = |e: redb::Error| OpenError::Database {
        path: shown.to_owned(),
        source: Box::new(e),
    };
    // Most opens find the current version: check on a snapshot, without the write lock.
    if read_version(db).map_err(db_error)? == Some(SCHEMA_VERSION) {
        return Ok(());
    }
    let txn = writer::begin_write_within(db, shown, crate::util::wait::bounded(lock_wait))
        .map_err(OpenError::Store)?;
    let found = {
        let table = txn.open_table(META).map_err(|e| db_error(e.into()))?;
        let value = table
            .get("schema_version")
            .map_err(|e| db_error(e.into()))?;
        value.map(|v| v.value())
    };
    match found {
        Some(v) if v > SCHEMA_VERSION => {
            return Err(OpenError::NewerSchema {
                path: shown.to_owned(),
                found: v,
                supported: SCHEMA_VERSION,
            });
        }
        Some(v) => {
            for step in STEPS.iter().filter(|s| s.from >= v) {
                (step.run)(&txn).map_err(OpenError::Store)?;
            }
        }
        None => {
            let foreign = txn
                .list_tables()
                .map_err(|e| db_error(e.into()))?
                .any(|t| !schema::TABLE_NAMES.contains(&t.name()));
            if foreign {
                return Err(OpenError::Foreign {
                    path: shown.to_owned(),
                });
            }
        }
    }
    create_tables(&txn).map_err(db_error)?;
    {
        let mut table = txn.open_table(META).map_err(|e| db_error(e.into()))?;
        table
            .insert("schema_version", SCHEMA_VERSION)
            .map_err(|e| db_error(e.into()))?;
    }
    txn.commit().map_err(|e| db_error(e.into()))
}

fn read_version(db: &Database) -> Result<Option<u64>, redb::Error> {
    let txn = db.begin_read()?;
    let table = match txn.open_table(META) {
        Ok(table) => table,
        Err(redb::TableError::TableDoesNotExist(_)) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    Ok(table.get("schema_version")?.map(|v| v.value()))
}

/// Opens every table once so that readers never meet a missing one.
fn create_tables(txn: &WriteTransaction) -> Result<(), redb::Error> {
    txn.open_table(schema::META)?;
    txn.open_table(schema::WORKSPACE)?;
    txn.open_table(schema::PROJECTS)?;
    txn.open_table(schema::SESSIONS)?;
    txn.open_table(schema::LINE_BLOCKS)?;
    txn.open_table(schema::DOCUMENTS)?;
    txn.open_table(schema::CITATIONS)?;
    txn.open_table(schema::CITATION_SCANS)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::codec;
    use crate::store::reader::Tables;
    use redb::ReadableTableMetadata;

    #[test]
    fn new_store_gets_current_version_and_newer_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.redb");
        let store = crate::store::Store::open(&path, crate::util::wait::DEFAULT_TIMEOUT).unwrap();
        assert_eq!(
            store.reader().unwrap().schema_version().unwrap(),
            Some(SCHEMA_VERSION)
        );
        {
            let writer = store.writer().unwrap();
            writer
                .txn()
                .unwrap()
                .open_table(META)
                .unwrap()
                .insert("schema_version", SCHEMA_VERSION + 1)
                .unwrap();
            writer.commit().unwrap();
        }
        drop(store);
        let err = crate::store::Store::open(&path, crate::util::wait::DEFAULT_TIMEOUT)
            .err()
            .expect("newer schema is refused");
        assert!(matches!(err, OpenError::NewerSchema { found, .. } if found == SCHEMA_VERSION + 1));
        assert!(
            err.to_string()
                .contains("newer than this evidence-store supports"),
            "{err}"
        );
    }

    /// A version-1 store with line blocks no session refers to (as concurrent imports of
    /// version 1 left them) loses them in the upgrade, and keeps every other block.
    #[test]
    fn the_upgrade_to_2_drops_orphan_line_blocks() {
        let fixture =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/store-v1.redb");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store.redb");
        std::fs::copy(&fixture, &path).unwrap();
        let blocks = |db: &Database| -> Vec<(u64, u64)> {
            let txn = db.begin_read().unwrap();
            let table = txn.open_table(schema::LINE_BLOCKS).unwrap();
            table
                .iter()
                .unwrap()
                .map(|item| item.unwrap().0.value())
                .collect()
        };
        let kept = {
            let db = Database::create(&path).unwrap();
            let kept = blocks(&db);
            assert!(!kept.is_empty());
            let txn = db.begin_write().unwrap();
            {
                let mut table = txn.open_table(schema::LINE_BLOCKS).unwrap();
                for key in [(900, 0), (900, 1), (901, 0)] {
                    let zero = crate::util::lines::LineEntry {
                        offset: 0,
                        len: 0,
                        decoded_len: 0,
                        sha256: [0; 32],
                    };
                    table.insert(key, &codec::LineBlock::pack(&[zero])).unwrap();
                }
            }
            txn.commit().unwrap();
            assert_eq!(blocks(&db).len(), kept.len() + 3);
            kept
        };
        drop(crate::store::Store::open(&path, crate::util::wait::DEFAULT_TIMEOUT).unwrap());
        assert_eq!(blocks(&Database::create(&path).unwrap()), kept);
    }

    /// A version-1 document (bytes alone) gains its checksum on open, and a read-only
    /// open of the old version is refused instead of misreading it.
    #[test]
    fn version_1_documents_get_their_checksum() {
        #[derive(serde::Serialize)]
        struct V1<'a> {
            bytes: &'a [u8],
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.redb");
        let store = crate::store::Store::open(&path, crate::util::wait::DEFAULT_TIMEOUT).unwrap();
        {
            let writer = store.writer().unwrap();
            let txn = writer.txn().unwrap();
            txn.open_table(schema::DOCUMENTS)
                .unwrap()
                .insert(
                    "daily-report.json",
                    &Encoded::raw(&codec::encode_as(&V1 { bytes: b"{}\n" })),
                )
                .unwrap();
            txn.open_table(META)
                .unwrap()
                .insert("schema_version", 1)
                .unwrap();
            writer.commit().unwrap();
        }
        drop(store);
        let err = crate::store::Store::open_read_only(&path, crate::util::wait::DEFAULT_TIMEOUT)
            .err()
            .expect("an old schema is not read read-only");
        assert!(
            matches!(err, OpenError::OlderSchema { found: 1, .. }),
            "{err}"
        );
        let store = crate::store::Store::open(&path, crate::util::wait::DEFAULT_TIMEOUT).unwrap();
        let reader = store.reader().unwrap();
        assert_eq!(reader.schema_version().unwrap(), Some(SCHEMA_VERSION));
        let doc = crate::store::Lookup::document(&reader, "daily-report.json")
            .unwrap()
            .expect("kept");
        assert_eq!(doc, DocumentRecord::new(b"{}\n".to_vec()));
        assert!(doc.intact());
    }

    /// A version-3 store with a workspace records the 0.2.10 contract; one without a
    /// workspace records nothing (its first import records the workspace's own).
    #[test]
    fn version_3_stores_record_the_0_2_10_contract() {
        use crate::store::Lookup;
        use crate::workspace::contract::Contract;
        for imported in [true, false] {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("s.redb");
            let store =
                crate::store::Store::open(&path, crate::util::wait::DEFAULT_TIMEOUT).unwrap();
            {
                let writer = store.writer().unwrap();
                let txn = writer.txn().unwrap();
                if imported {
                    txn.open_table(schema::WORKSPACE)
                        .unwrap()
                        .insert(schema::WORKSPACE_KEY, &Encoded::raw(b"x"))
                        .unwrap();
                }
                txn.open_table(META)
                    .unwrap()
                    .insert("schema_version", 3)
                    .unwrap();
                writer.commit().unwrap();
            }
            drop(store);
            let store =
                crate::store::Store::open(&path, crate::util::wait::DEFAULT_TIMEOUT).unwrap();
            let reader = store.reader().unwrap();
            assert_eq!(reader.schema_version().unwrap(), Some(SCHEMA_VERSION));
            let recorded = reader
                .table(META)
                .unwrap()
                .get(crate::store::schema::CONTRACT_KEY)
                .unwrap()
                .map(|v| v.value());
            assert_eq!(recorded, imported.then_some(2), "imported: {imported}");
            assert_eq!(reader.contract().unwrap(), Contract::V0_2_10);
        }
    }

    /// A version-5, 6 or 7 store's citations and scan records are dropped, nothing else.
    #[test]
    fn version_5_6_and_7_stores_lose_their_citations_and_scans() {
        for version in [5, 6, 7] {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("s.redb");
            let store =
                crate::store::Store::open(&path, crate::util::wait::DEFAULT_TIMEOUT).unwrap();
            {
                let writer = store.writer().unwrap();
                let txn = writer.txn().unwrap();
                txn.open_table(schema::CITATIONS)
                    .unwrap()
                    .insert(("P", "S0001", 2), &Encoded::raw(b"x"))
                    .unwrap();
                txn.open_table(schema::CITATION_SCANS)
                    .unwrap()
                    .insert(("P", "S0001"), &Encoded::raw(b"y"))
                    .unwrap();
                txn.open_table(schema::DOCUMENTS)
                    .unwrap()
                    .insert("daily-report.json", &Encoded::raw(b"z"))
                    .unwrap();
                txn.open_table(META)
                    .unwrap()
                    .insert("schema_version", version)
                    .unwrap();
                writer.commit().unwrap();
            }
            drop(store);
            let store =
                crate::store::Store::open(&path, crate::util::wait::DEFAULT_TIMEOUT).unwrap();
            let reader = store.reader().unwrap();
            assert_eq!(reader.schema_version().unwrap(), Some(SCHEMA_VERSION));
            assert_eq!(reader.table(schema::CITATIONS).unwrap().len().unwrap(), 0);
            assert_eq!(
                reader.table(schema::CITATION_SCANS).unwrap().len().unwrap(),
                0
            );
            assert_eq!(reader.table(schema::DOCUMENTS).unwrap().len().unwrap(), 1);
        }
    }

    #[test]
    fn foreign_redb_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("other.redb");
        {
            let db = Database::create(&path).unwrap();
            let txn = db.begin_write().unwrap();
            let def: redb::TableDefinition<u64, u64> = redb::TableDefinition::new("their_table");
            txn.open_table(def).unwrap().insert(1, 2).unwrap();
            txn.commit().unwrap();
        }
        let err = crate::store::Store::open(&path, crate::util::wait::DEFAULT_TIMEOUT)
            .err()
            .expect("foreign file is refused");
        assert!(matches!(err, OpenError::Foreign { .. }), "{err}");
    }
}
