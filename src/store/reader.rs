//! Reading: the lookups a snapshot and a write transaction share ([`Lookup`]), and a
//! snapshot's own reads ([`Reader`]).

use std::sync::Arc;

use redb::{ReadTransaction, ReadableTable, ReadableTableMetadata, TableDefinition};

use super::codec::{Bincode, LINES_PER_BLOCK, Record};
use super::error::StoreError;
use super::error::{OrStore, ended};
use super::guard;
use super::guard::guarded_drop;
use super::records::SessionFile;
use super::schema::*;
use super::types::{
    DocumentRecord, FileState, ProjectRecord, SessionRecord, Totals, WorkspaceRecord,
};
use super::writer::Writer;
use crate::util::lines::LineEntry;
use crate::workspace::contract::Contract;

/// The record stored under `key` in `table`, decoded and converted to its twin `D`;
/// `None` when there is none.
fn decoded<'k, K: redb::Key + 'static, T: Record, D: From<T>>(
    table: &impl ReadableTable<K, Bincode<T>>,
    key: impl std::borrow::Borrow<K::SelfType<'k>>,
) -> Result<Option<D>, StoreError> {
    let value = table.get(key).store()?;
    Ok(value.map(|v| v.value().decode()).transpose()?.map(D::from))
}

/// Opens a table of a snapshot or a write transaction. Only the store can name it (the
/// module is private), and every call runs inside a guard
/// (`every_table_is_opened_inside_the_guard`).
pub trait Tables {
    fn table<K: redb::Key + 'static, V: redb::Value + 'static>(
        &self,
        def: TableDefinition<K, V>,
    ) -> Result<impl ReadableTable<K, V>, StoreError>;
}

/// The lookups a snapshot and a write transaction both answer (a write transaction sees
/// its own uncommitted changes). Every lookup runs inside the store boundary's guard.
pub trait Lookup: Tables {
    /// The store's path as messages print it.
    fn shown(&self) -> &str;

    fn workspace(&self) -> Result<Option<WorkspaceRecord>, StoreError> {
        guard::guard(self.shown(), || {
            decoded(&self.table(WORKSPACE)?, WORKSPACE_KEY)
        })
    }

    fn project(&self, key: &str) -> Result<Option<ProjectRecord>, StoreError> {
        guard::guard(self.shown(), || decoded(&self.table(PROJECTS)?, key))
    }

    /// The prompt-diary contract of the imported workspace (0.2.10 when none is recorded).
    /// A value this build does not serve is a damaged store.
    fn contract(&self) -> Result<Contract, StoreError> {
        guard::guard(self.shown(), || {
            let value = self
                .table(META)?
                .get(CONTRACT_KEY)
                .store()?
                .map(|v| v.value());
            match value {
                None => Ok(Contract::V0_2_10),
                Some(n) => i64::try_from(n)
                    .ok()
                    .and_then(Contract::from_workspace_schema)
                    .ok_or_else(|| StoreError::Damaged {
                        path: self.shown().to_owned(),
                        detail: format!(
                            "the recorded workspace schema_version {n} is not one this build serves"
                        ),
                    }),
            }
        })
    }

    /// The identity of the workspace the store holds ([`WORKSPACE_ROOT_KEY`]); `None`
    /// before the first import that recorded one.
    fn workspace_identity(&self) -> Result<Option<u64>, StoreError> {
        guard::guard(self.shown(), || {
            Ok(self
                .table(META)?
                .get(WORKSPACE_ROOT_KEY)
                .store()?
                .map(|v| v.value()))
        })
    }

    /// Whether a workspace was imported, without decoding it.
    fn has_workspace(&self) -> Result<bool, StoreError> {
        guard::guard(self.shown(), || {
            Ok(self.table(WORKSPACE)?.get(WORKSPACE_KEY).store()?.is_some())
        })
    }

    /// Whether the project exists, without decoding it.
    fn has_project(&self, key: &str) -> Result<bool, StoreError> {
        guard::guard(self.shown(), || {
            Ok(self.table(PROJECTS)?.get(key).store()?.is_some())
        })
    }

    fn session(
        &self,
        project_key: &str,
        session_ref: &str,
    ) -> Result<Option<SessionRecord>, StoreError> {
        guard::guard(self.shown(), || {
            decoded(&self.table(SESSIONS)?, (project_key, session_ref))
        })
    }

    /// A session's file and how to read it ([`SessionFile`]), without its turns.
    fn session_file(
        &self,
        project_key: &str,
        session_ref: &str,
    ) -> Result<Option<SessionFile>, StoreError> {
        guard::guard(self.shown(), || {
            let table = self.table(SESSIONS)?;
            let value = table.get((project_key, session_ref)).store()?;
            Ok(value.map(|v| v.value().session_file()).transpose()?)
        })
    }

    /// How many sessions are stored, over all projects.
    fn session_count(&self) -> Result<u64, StoreError> {
        guard::guard(self.shown(), || self.table(SESSIONS)?.len().store())
    }

    /// How many projects are stored.
    fn project_count(&self) -> Result<u64, StoreError> {
        guard::guard(self.shown(), || self.table(PROJECTS)?.len().store())
    }

    /// The stored document, refused as damaged when its bytes fail their checksum.
    fn document(&self, rel_path: &str) -> Result<Option<DocumentRecord>, StoreError> {
        guard::guard(self.shown(), || {
            let table = self.table(DOCUMENTS)?;
            let value = table.get(rel_path).store()?;
            let record = value.map(|v| v.value().document()).transpose()?;
            match record {
                Some(doc) if !doc.intact() => Err(StoreError::Damaged {
                    path: self.shown().to_owned(),
                    detail: format!("the stored copy of {rel_path} fails its SHA-256 checksum"),
                }),
                other => Ok(other),
            }
        })
    }

    /// Relative paths of every stored document, sorted.
    fn document_paths(&self) -> Result<Vec<String>, StoreError> {
        guard::guard(self.shown(), || {
            let mut out = Vec::new();
            for item in self.table(DOCUMENTS)?.iter().store()? {
                out.push(item.store()?.0.value().to_owned());
            }
            Ok(out)
        })
    }
}

impl Tables for Reader {
    fn table<K: redb::Key + 'static, V: redb::Value + 'static>(
        &self,
        def: TableDefinition<K, V>,
    ) -> Result<impl ReadableTable<K, V>, StoreError> {
        self.txn()?.open_table(def).store()
    }
}

impl Lookup for Reader {
    fn shown(&self) -> &str {
        &self.shown
    }
}

impl Tables for Writer {
    fn table<K: redb::Key + 'static, V: redb::Value + 'static>(
        &self,
        def: TableDefinition<K, V>,
    ) -> Result<impl ReadableTable<K, V>, StoreError> {
        self.txn()?.open_table(def).store()
    }
}

impl Lookup for Writer {
    fn shown(&self) -> &str {
        &self.shown
    }
}

/// Read access to one snapshot.
pub struct Reader {
    /// Always `Some` until drop.
    pub(super) txn: Option<ReadTransaction>,
    pub(super) shown: Arc<str>,
}

impl Drop for Reader {
    fn drop(&mut self) {
        guarded_drop(&self.shown, self.txn.take());
    }
}

impl Reader {
    pub(super) fn txn(&self) -> Result<&ReadTransaction, StoreError> {
        self.txn.as_ref().ok_or_else(ended)
    }

    /// Every session of a project, in index order.
    pub fn sessions(&self, project: &ProjectRecord) -> Result<Vec<SessionRecord>, StoreError> {
        guard::guard(&self.shown.clone(), || {
            let mut out = Vec::with_capacity(project.session_refs.len());
            for session_ref in &project.session_refs {
                if let Some(record) = self.session(&project.key, session_ref)? {
                    out.push(record);
                }
            }
            Ok(out)
        })
    }

    /// Line entries `first..=last` (1-based) of an indexed file.
    pub fn lines(&self, file_id: u64, first: u64, last: u64) -> Result<Vec<LineEntry>, StoreError> {
        guard::guard(&self.shown.clone(), || {
            let mut out = Vec::with_capacity(last.saturating_sub(first) as usize + 1);
            if first == 0 || last < first {
                return Ok(out);
            }
            let table = self.txn()?.open_table(LINE_BLOCKS).store()?;
            let (first_block, last_block) =
                ((first - 1) / LINES_PER_BLOCK, (last - 1) / LINES_PER_BLOCK);
            for item in table
                .range((file_id, first_block)..=(file_id, last_block))
                .store()?
            {
                let (key, value) = item.store()?;
                let block_first = key.value().1 * LINES_PER_BLOCK + 1;
                // The entries of lines first..=last that this block holds, decoded alone.
                let skip = first.saturating_sub(block_first);
                let take = (last + 1).saturating_sub(block_first.max(first));
                out.extend(value.value().range(skip, take)?);
            }
            Ok(out)
        })
    }

    /// Entry count of every table, for `dump`.
    pub fn counts(&self) -> Result<Vec<(&'static str, u64)>, StoreError> {
        guard::guard(&self.shown.clone(), || {
            Ok(vec![
                ("meta", self.txn()?.open_table(META).store()?.len().store()?),
                (
                    "workspace",
                    self.txn()?.open_table(WORKSPACE).store()?.len().store()?,
                ),
                (
                    "projects",
                    self.txn()?.open_table(PROJECTS).store()?.len().store()?,
                ),
                (
                    "sessions",
                    self.txn()?.open_table(SESSIONS).store()?.len().store()?,
                ),
                (
                    "line_blocks",
                    self.txn()?.open_table(LINE_BLOCKS).store()?.len().store()?,
                ),
                (
                    "documents",
                    self.txn()?.open_table(DOCUMENTS).store()?.len().store()?,
                ),
            ])
        })
    }

    /// Totals over every session's file record and every document, for `dump --stats`.
    pub fn totals(&self) -> Result<Totals, StoreError> {
        guard::guard(&self.shown.clone(), || {
            let mut totals = Totals::default();
            for item in self.txn()?.open_table(SESSIONS).store()?.iter().store()? {
                let (_, value) = item.store()?;
                match value.value().session_file()?.file {
                    FileState::Indexed(file) => {
                        totals.sessions_indexed += 1;
                        totals.lines_indexed += file.lines;
                        totals.bytes_covered += file.size;
                    }
                    FileState::Missing => totals.sessions_missing += 1,
                }
            }
            for item in self.txn()?.open_table(DOCUMENTS).store()?.iter().store()? {
                let (_, value) = item.store()?;
                let doc = DocumentRecord::from(value.value().decode()?);
                totals.documents += 1;
                totals.document_bytes += doc.bytes.len() as u64;
            }
            Ok(totals)
        })
    }

    pub fn schema_version(&self) -> Result<Option<u64>, StoreError> {
        guard::guard(&self.shown.clone(), || {
            let table = self.txn()?.open_table(META).store()?;
            Ok(table.get("schema_version").store()?.map(|v| v.value()))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::Store;
    use super::*;
    use std::collections::BTreeMap;

    /// A small deterministic generator (xorshift), so failures reproduce.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n.max(1)
        }
    }

    fn entry(file_id: u64, line: u64) -> LineEntry {
        LineEntry {
            offset: line * 100,
            len: line % 97,
            decoded_len: line % 97 + file_id,
            sha256: [(line % 251) as u8; 32],
        }
    }

    /// Line tables written, replaced and deleted at random, checked against a `BTreeMap`
    /// model after every transaction, including ranges that cross block boundaries.
    #[test]
    fn line_tables_match_a_model() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(
            &dir.path().join("s.redb"),
            crate::util::wait::DEFAULT_TIMEOUT,
        )
        .unwrap();
        let mut model: BTreeMap<u64, Vec<LineEntry>> = BTreeMap::new();
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        for _ in 0..40 {
            let mut writer = store.writer().unwrap();
            let mut pending = model.clone();
            for _ in 0..rng.below(4) + 1 {
                match rng.below(3) {
                    0 | 1 => {
                        let file_id = writer.new_file_id().unwrap();
                        let count = rng.below(3 * LINES_PER_BLOCK);
                        let mut sink = writer.line_sink(file_id).unwrap();
                        let lines: Vec<LineEntry> =
                            (1..=count).map(|n| entry(file_id, n)).collect();
                        for e in &lines {
                            sink.push(*e).unwrap();
                        }
                        sink.finish().unwrap();
                        pending.insert(file_id, lines);
                    }
                    _ => {
                        if let Some(&id) =
                            pending.keys().nth(rng.below(pending.len() as u64) as usize)
                        {
                            writer.delete_lines(id).unwrap();
                            pending.remove(&id);
                        }
                    }
                }
            }
            // Every other transaction is abandoned, and must leave no trace.
            if rng.below(2) == 0 {
                writer.commit().unwrap();
                model = pending;
            } else {
                drop(writer);
            }
            let reader = store.reader().unwrap();
            for (id, lines) in &model {
                let n = lines.len() as u64;
                assert_eq!(reader.lines(*id, 1, n).unwrap(), *lines);
                for _ in 0..5 {
                    let first = rng.below(n + 2);
                    let last = first + rng.below(LINES_PER_BLOCK + 50);
                    let expect: Vec<LineEntry> = lines
                        .iter()
                        .enumerate()
                        .filter(|(i, _)| first >= 1 && (first..=last).contains(&(*i as u64 + 1)))
                        .map(|(_, e)| *e)
                        .collect();
                    assert_eq!(
                        reader.lines(*id, first, last).unwrap(),
                        expect,
                        "file {id} {first}-{last}"
                    );
                }
            }
        }
    }

    /// A store written by schema version 1 (checked in) is upgraded when opened, and
    /// keeps reading.
    #[test]
    fn version_1_store_fixture_still_opens() {
        let fixture =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/store-v1.redb");
        let dir = tempfile::tempdir().unwrap();
        let copy = dir.path().join("store.redb");
        std::fs::copy(&fixture, &copy).unwrap();
        let store = Store::open(&copy, crate::util::wait::DEFAULT_TIMEOUT).unwrap();
        let reader = store.reader().unwrap();
        // Opening migrates it to the current schema.
        assert_eq!(reader.schema_version().unwrap(), Some(SCHEMA_VERSION));
        let workspace = reader.workspace().unwrap().expect("imported workspace");
        assert_eq!(workspace.project_keys, ["Demo-0123456789ab"]);
        let session = reader
            .session("Demo-0123456789ab", "S0001")
            .unwrap()
            .expect("session");
        let FileState::Indexed(file) = session.file else {
            panic!("indexed")
        };
        // Upgraded records carry no ctime or inode yet: the next import re-hashes.
        assert_eq!((file.ctime_ns, file.inode), (0, 0));
        assert!(file.size > 0 && file.mtime_ns > 0 && file.lines > 0);
        let lines = reader.lines(file.file_id, 7, 7).unwrap();
        assert_eq!(
            crate::util::lines::hex(&lines[0].sha256),
            "790a498b33daa4a9b3eeceb833687d0623470547489ff830ebbfcf54bd9733ef"
        );
    }
}
