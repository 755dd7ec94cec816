//! Writing: beginning a write transaction ([`begin_write_within`]), one write transaction
//! ([`Writer`]) and a file's line table as it is stored ([`LineSink`]).

use std::sync::Arc;

use redb::{Database, ReadableTable, TableDefinition, WriteTransaction};
use sha2::{Digest, Sha256};

use super::codec::{Bincode, Encoded, LINES_PER_BLOCK, LineBlock, PackedLines, Record};
use super::error::StoreError;
use super::error::{OrStore, ended};
use super::guard::guarded_drop;
use super::records;
use super::schema::*;
use super::types::{DocumentRecord, ProjectRecord, SessionRecord, WorkspaceRecord};
use super::{backend, guard};
use crate::util::lines::LineEntry;
use crate::workspace::contract::Contract;

/// Begins a write transaction, waiting while another (in any process) is open, at most
/// `timeout`: a writer that is stopped (SIGSTOP, a debugger) or stuck must not stop every
/// other writer for ever.
pub(super) fn begin_write_within(
    db: &Database,
    shown: &str,
    timeout: std::time::Duration,
) -> Result<redb::WriteTransaction, StoreError> {
    let mut poll = crate::util::wait::Poll::new(timeout);
    let mut said = false;
    loop {
        match db.try_begin_write() {
            Err(redb::TransactionError::WouldBlock) => {}
            other => return other.store(),
        }
        if !said && poll.waited() >= std::time::Duration::from_millis(500) {
            tracing::warn!(
                store = shown,
                "waiting for another write transaction on the store to end; giving up after {} s",
                crate::util::wait::secs(poll.timeout())
            );
            said = true;
        }
        if !poll.sleep() {
            return Err(StoreError::Busy {
                path: shown.to_owned(),
                waited_secs: crate::util::wait::secs(poll.waited()),
            });
        }
    }
}

/// One write transaction: nothing is visible to anyone until [`Writer::commit`].
pub struct Writer {
    /// Always `Some` until commit or drop.
    pub(super) txn: Option<WriteTransaction>,
    pub(super) shown: Arc<str>,
    pub(super) fault: Option<Arc<backend::Fault>>,
    /// The store's disk, which the documents this transaction commits are written through.
    pub(super) disk: crate::util::disk::Disk,
    pub(super) stores_document: bool,
}

impl Drop for Writer {
    fn drop(&mut self) {
        guarded_drop(&self.shown, self.txn.take());
    }
}

impl Drop for LineSink<'_> {
    fn drop(&mut self) {
        guarded_drop(&self.shown, self.table.take());
    }
}

impl Writer {
    /// The disk the store writes through: a document committed with this transaction is
    /// written through it too.
    pub fn disk(&self) -> &crate::util::disk::Disk {
        &self.disk
    }

    pub(super) fn txn(&self) -> Result<&WriteTransaction, StoreError> {
        self.txn.as_ref().ok_or_else(ended)
    }

    /// Stores `record`, the table's own record type, under `key` in `table`, replacing
    /// what was there. Every record write of the store goes through here, inside the
    /// guard; a record that cannot be encoded is [`StoreError::Encode`], nothing stored.
    pub(super) fn put<'k, K: redb::Key + 'static, T: Record>(
        &mut self,
        table: TableDefinition<K, Bincode<T>>,
        key: impl std::borrow::Borrow<K::SelfType<'k>>,
        record: &T,
    ) -> Result<(), StoreError> {
        let value = Encoded::encode(record)?;
        guard::guard(&self.shown.clone(), || {
            let mut table = self.txn()?.open_table(table).store()?;
            table.insert(key, &value).store()?;
            Ok(())
        })
    }

    /// Removes what `table` holds under `key`, if anything.
    pub(super) fn remove<'k, K: redb::Key + 'static, V: redb::Value + 'static>(
        &mut self,
        table: TableDefinition<K, V>,
        key: impl std::borrow::Borrow<K::SelfType<'k>>,
    ) -> Result<(), StoreError> {
        guard::guard(&self.shown.clone(), || {
            let mut table = self.txn()?.open_table(table).store()?;
            table.remove(key).store()?;
            Ok(())
        })
    }

    pub fn put_workspace(&mut self, record: WorkspaceRecord) -> Result<(), StoreError> {
        let record = records::Workspace::from(record);
        self.put(WORKSPACE, WORKSPACE_KEY, &record)
    }

    pub fn put_project(&mut self, record: ProjectRecord) -> Result<(), StoreError> {
        let key = record.key.clone();
        let stored = records::Project::from(record);
        self.put(PROJECTS, key.as_str(), &stored)
    }

    pub fn remove_project(&mut self, key: &str) -> Result<(), StoreError> {
        self.remove(PROJECTS, key)
    }

    pub fn put_session(
        &mut self,
        project_key: &str,
        record: SessionRecord,
    ) -> Result<(), StoreError> {
        let session_ref = record.session.session_ref.clone();
        let stored = records::SessionRecord::from(record);
        self.put(SESSIONS, (project_key, session_ref.as_str()), &stored)
    }

    /// Every stored `(project_key, session_ref)` with its record.
    pub fn all_sessions(&self) -> Result<Vec<(String, SessionRecord)>, StoreError> {
        guard::guard(&self.shown.clone(), || {
            let table = self.txn()?.open_table(SESSIONS).store()?;
            let mut out = Vec::new();
            for item in table.iter().store()? {
                let (key, value) = item.store()?;
                let record = SessionRecord::from(value.value().decode()?);
                out.push((key.value().0.to_owned(), record));
            }
            Ok(out)
        })
    }

    pub fn all_projects(&self) -> Result<Vec<String>, StoreError> {
        guard::guard(&self.shown.clone(), || {
            let table = self.txn()?.open_table(PROJECTS).store()?;
            let mut out = Vec::new();
            for item in table.iter().store()? {
                out.push(item.store()?.0.value().to_owned());
            }
            Ok(out)
        })
    }

    pub fn remove_session(
        &mut self,
        project_key: &str,
        session_ref: &str,
    ) -> Result<(), StoreError> {
        self.remove(SESSIONS, (project_key, session_ref))
    }

    /// A fresh file id for a new line table.
    pub fn new_file_id(&mut self) -> Result<u64, StoreError> {
        guard::guard(&self.shown.clone(), || {
            let mut table = self.txn()?.open_table(META).store()?;
            let id = table.get("next_file_id").store()?.map_or(1, |v| v.value());
            table.insert("next_file_id", id + 1).store()?;
            Ok(id)
        })
    }

    /// Starts writing the line table of `file_id`, block by block as lines arrive.
    pub fn line_sink(&mut self, file_id: u64) -> Result<LineSink<'_>, StoreError> {
        guard::guard(&self.shown.clone(), || {
            Ok(LineSink {
                shown: self.shown.clone(),
                table: Some(self.txn()?.open_table(LINE_BLOCKS).store()?),
                file_id,
                next_block: 0,
                pending: Vec::with_capacity(LINES_PER_BLOCK as usize),
                digest: Sha256::new(),
            })
        })
    }

    /// Deletes the line table of `file_id`.
    pub fn delete_lines(&mut self, file_id: u64) -> Result<(), StoreError> {
        guard::guard(&self.shown.clone(), || {
            let mut table = self.txn()?.open_table(LINE_BLOCKS).store()?;
            table
                .retain_in((file_id, 0)..=(file_id, u64::MAX), |_, _| false)
                .store()?;
            Ok(())
        })
    }

    pub fn put_document(
        &mut self,
        rel_path: &str,
        record: DocumentRecord,
    ) -> Result<(), StoreError> {
        self.stores_document = true;
        let stored = records::Document::from(record);
        self.put(DOCUMENTS, rel_path, &stored)
    }

    pub fn remove_document(&mut self, rel_path: &str) -> Result<(), StoreError> {
        self.remove(DOCUMENTS, rel_path)
    }

    /// Records the contract of the workspace this transaction imports.
    pub fn put_contract(&mut self, contract: Contract) -> Result<(), StoreError> {
        let schema = u64::try_from(contract.workspace_schema()).unwrap_or_default();
        guard::guard(&self.shown.clone(), || {
            let mut table = self.txn()?.open_table(META).store()?;
            table.insert(CONTRACT_KEY, schema).store()?;
            Ok(())
        })
    }

    /// Records which workspace the store holds ([`WORKSPACE_ROOT_KEY`]).
    pub fn put_workspace_identity(&mut self, identity: u64) -> Result<(), StoreError> {
        guard::guard(&self.shown.clone(), || {
            let mut table = self.txn()?.open_table(META).store()?;
            table.insert(WORKSPACE_ROOT_KEY, identity).store()?;
            Ok(())
        })
    }

    /// Makes everything written visible, durably, as one step.
    pub fn commit(mut self) -> Result<(), StoreError> {
        if let Some(fault) = self.fault.as_ref().filter(|_| self.stores_document) {
            fault.before_commit();
        }
        let shown = self.shown.clone();
        guard::guard(&shown, move || match self.txn.take() {
            Some(txn) => txn.commit().store(),
            None => Err(ended()),
        })
    }
}

/// Receives a file's line entries in order and stores them in blocks.
pub struct LineSink<'w> {
    shown: Arc<str>,
    /// Always `Some` until drop.
    table: Option<redb::Table<'w, (u64, u64), PackedLines>>,
    file_id: u64,
    next_block: u64,
    pending: Vec<LineEntry>,
    digest: Sha256,
}

impl LineSink<'_> {
    pub fn push(&mut self, entry: LineEntry) -> Result<(), StoreError> {
        self.pending.push(entry);
        if self.pending.len() as u64 == LINES_PER_BLOCK {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), StoreError> {
        guard::guard(&self.shown.clone(), || {
            if self.pending.is_empty() {
                return Ok(());
            }
            let block = LineBlock::pack(&self.pending);
            self.digest.update(block.bytes());
            self.table
                .as_mut()
                .ok_or_else(ended)?
                .insert((self.file_id, self.next_block), &block)
                .store()?;
            self.next_block += 1;
            self.pending.clear();
            Ok(())
        })
    }

    /// Stores the last partial block; returns the digest of the whole line table.
    pub fn finish(mut self) -> Result<[u8; 32], StoreError> {
        let shown = self.shown.clone();
        guard::guard(&shown, move || {
            self.flush()?;
            Ok(std::mem::take(&mut self.digest).finalize().into())
        })
    }
}
