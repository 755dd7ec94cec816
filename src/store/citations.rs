//! Stored agent citations: the `citations` table (one entry per session line that cites
//! something) and the `citation_scans` table (which line table a session's citations were
//! taken from), both defined in [`super::schema`]. The values the store hands out stand with
//! its others in `types.rs` (named here too), kept apart from the citation rules' own types
//! (the citations layer converts, in its `scan` and `stored` files) and from their stored
//! twins in `records.rs`, whose layout changes only with the schema.
//!
//! A session's citations are current when its scan record names the digest and line count
//! of the session's stored line table. Import writes both tables in the same transaction
//! as the line table, so a reader never sees citations of another version of the file.

use redb::ReadableTable;

use super::error::OrStore;
use super::error::StoreError;
use super::reader::Tables;
use super::reader::{Lookup, Reader};
use super::schema::{CITATION_SCANS, CITATIONS, LINE_BLOCKS, META};
pub use super::types::{
    CitationRecord, CitationScan, SessionCitations, StoredCheck, StoredCitation,
};
use super::writer::Writer;
use super::{guard, records};

/// `meta` key: the extraction options the stored citations were taken with, as bits
/// (see `citations::Options::bits`); absent when they were the defaults.
pub const OPTIONS_KEY: &str = "citation_options";

/// Citation lookups; a snapshot ([`super::Reader`]) and a write transaction both answer.
pub trait CitationLookup: Lookup {
    /// The extraction options the stored citations were taken with (0: the defaults).
    fn citation_options(&self) -> Result<u64, StoreError> {
        guard::guard(self.shown(), || {
            let table = self.table(META)?;
            let value = table.get(OPTIONS_KEY).store()?;
            Ok(value.map_or(0, |v| v.value()))
        })
    }

    /// The session's scan record, if it was scanned.
    fn citation_scan(
        &self,
        project_key: &str,
        session_ref: &str,
    ) -> Result<Option<CitationScan>, StoreError> {
        guard::guard(self.shown(), || {
            let table = self.table(CITATION_SCANS)?;
            let value = table.get((project_key, session_ref)).store()?;
            Ok(value
                .map(|v| v.value().decode())
                .transpose()?
                .map(CitationScan::from))
        })
    }

    /// Every citation of one session, in line order (empty when none or not scanned).
    fn session_citations(
        &self,
        project_key: &str,
        session_ref: &str,
    ) -> Result<Vec<CitationRecord>, StoreError> {
        guard::guard(self.shown(), || {
            let table = self.table(CITATIONS)?;
            let mut out = Vec::new();
            let range = (project_key, session_ref, 0)..=(project_key, session_ref, u64::MAX);
            for item in table.range(range).store()? {
                let (key, value) = item.store()?;
                let line = key.value().2;
                let found = value.value().decode()?;
                out.extend(found.into_iter().map(|citation| CitationRecord {
                    line,
                    citation: citation.into(),
                }));
            }
            Ok(out)
        })
    }

    /// Every stored citation, grouped by session in key order (project key, then session
    /// ref), or only those of `project_key`. Sessions without citations are left out.
    fn workspace_citations(
        &self,
        project_key: Option<&str>,
    ) -> Result<Vec<SessionCitations>, StoreError> {
        guard::guard(self.shown(), || {
            let table = self.table(CITATIONS)?;
            let mut out: Vec<SessionCitations> = Vec::new();
            let items = match project_key {
                Some(p) => table.range((p, "", 0)..).store()?,
                None => table.iter().store()?,
            };
            for item in items {
                let (key, value) = item.store()?;
                let (p, s, line) = key.value();
                if project_key.is_some_and(|want| want != p) {
                    break;
                }
                let found = value.value().decode()?;
                let same = out
                    .last()
                    .is_some_and(|last| last.project_key == p && last.session_ref == s);
                if !same {
                    out.push(SessionCitations {
                        project_key: p.to_owned(),
                        session_ref: s.to_owned(),
                        citations: Vec::new(),
                    });
                }
                if let Some(last) = out.last_mut() {
                    last.citations
                        .extend(found.into_iter().map(|citation| CitationRecord {
                            line,
                            citation: citation.into(),
                        }));
                }
            }
            Ok(out)
        })
    }

    /// How many citations are stored over the whole workspace (the fixture test's check).
    #[cfg(test)]
    fn citation_count(&self) -> Result<u64, StoreError> {
        guard::guard(self.shown(), || {
            let mut n = 0;
            for item in self.table(CITATION_SCANS)?.iter().store()? {
                let (_, value) = item.store()?;
                n += CitationScan::from(value.value().decode()?).citations;
            }
            Ok(n)
        })
    }
}

impl<T: Lookup> CitationLookup for T {}

impl Writer {
    /// Records the extraction options the stored citations are taken with (the
    /// defaults, 0, as no record).
    pub fn put_citation_options(&mut self, bits: u64) -> Result<(), StoreError> {
        guard::guard(&self.shown.clone(), || {
            let mut table = self.txn()?.open_table(META).store()?;
            if bits == 0 {
                table.remove(OPTIONS_KEY).store()?;
            } else {
                table.insert(OPTIONS_KEY, bits).store()?;
            }
            Ok(())
        })
    }

    /// Replaces every citation of one session by `citations` (grouped by line) and records
    /// the line table they were taken from.
    pub fn put_session_citations(
        &mut self,
        project_key: &str,
        session_ref: &str,
        scan: &CitationScan,
        citations: Vec<CitationRecord>,
    ) -> Result<(), StoreError> {
        self.delete_session_citations(project_key, session_ref)?;
        // One row per run of citations on the same line, in the order given.
        let mut citations = citations.into_iter().peekable();
        while let Some(first) = citations.next() {
            let line = first.line;
            let mut stored = vec![records::Citation::from(first.citation)];
            while let Some(next) = citations.next_if(|c| c.line == line) {
                stored.push(next.citation.into());
            }
            self.put(CITATIONS, (project_key, session_ref, line), &stored)?;
        }
        let scan = records::Scan::from(*scan);
        self.put(CITATION_SCANS, (project_key, session_ref), &scan)
    }

    /// Removes a session's citations and its scan record.
    pub fn delete_session_citations(
        &mut self,
        project_key: &str,
        session_ref: &str,
    ) -> Result<(), StoreError> {
        guard::guard(&self.shown.clone(), || {
            let txn = self.txn()?;
            txn.open_table(CITATIONS)
                .store()?
                .retain_in(
                    (project_key, session_ref, 0)..=(project_key, session_ref, u64::MAX),
                    |_, _| false,
                )
                .store()?;
            Ok(())
        })?;
        self.remove(CITATION_SCANS, (project_key, session_ref))
    }

    /// Every entry of `file_id`'s line table, in line order.
    pub fn each_line(
        &self,
        file_id: u64,
        mut each: impl FnMut(&crate::util::lines::LineEntry),
    ) -> Result<(), StoreError> {
        guard::guard(&self.shown.clone(), || {
            let table = self.txn()?.open_table(LINE_BLOCKS).store()?;
            for item in table.range((file_id, 0)..=(file_id, u64::MAX)).store()? {
                let (_, value) = item.store()?;
                for entry in value.value().entries()? {
                    each(&entry);
                }
            }
            Ok(())
        })
    }
}

/// `verify`'s part: every citation and scan record decodes, belongs to a stored session,
/// and every session's citations have their scan record with the right count.
pub(super) fn check(reader: &Reader, problem: &dyn Fn(String)) -> Result<(), StoreError> {
    use std::collections::BTreeMap;
    let shown = reader.shown().to_owned();
    guard::guard(&shown, || {
        let mut counted: BTreeMap<(String, String), u64> = BTreeMap::new();
        for item in reader.table(CITATIONS)?.iter().store()? {
            let (key, value) = item.store()?;
            let (p, s, line) = key.value();
            match value.value().decode() {
                Ok(found) => {
                    *counted.entry((p.to_owned(), s.to_owned())).or_default() += found.len() as u64;
                }
                Err(e) => problem(format!("citations of {p}/{s} line {line}: {e}")),
            }
        }
        for item in reader.table(CITATION_SCANS)?.iter().store()? {
            let (key, value) = item.store()?;
            let (p, s) = key.value();
            if reader.session_file(p, s)?.is_none() {
                problem(format!(
                    "citation scan of {p}/{s} belongs to no stored session"
                ));
            }
            let found = counted.remove(&(p.to_owned(), s.to_owned())).unwrap_or(0);
            match value.value().decode().map(CitationScan::from) {
                Ok(scan) if scan.citations != found => problem(format!(
                    "session {p}/{s}: {found} citations stored, its scan record says {}",
                    scan.citations
                )),
                Ok(_) => {}
                Err(e) => problem(format!("citation scan of {p}/{s}: {e}")),
            }
        }
        for (p, s) in counted.keys() {
            problem(format!("citations of {p}/{s} have no scan record"));
        }
        Ok(())
    })
}
