//! Writing the store's view back to the workspace: every document, then the citation
//! receipts. `export` and the end of `run` both do it, each wording the failure for its
//! own context.

use std::path::Path;

use crate::citations::receipt_files::{self, ReceiptError, ReceiptsReport};
use crate::documents::{self, DocumentError, ExportReport};
use crate::store::Store;
use crate::util::wait::Locks;

/// Which half of the export failed.
#[derive(Debug)]
pub(crate) enum ExportError {
    Documents(DocumentError),
    Receipts(ReceiptError),
}

impl ExportError {
    /// The half's own error, as it is reported (with its causes, unchanged).
    pub(crate) fn into_cause(self) -> anyhow::Error {
        match self {
            ExportError::Documents(e) => e.into(),
            ExportError::Receipts(e) => e.into(),
        }
    }
}

/// Exports the documents, then the receipts (the receipts only when the documents were
/// written).
pub(crate) fn export_all(
    store: &Store,
    root: &Path,
    locks: &Locks,
) -> Result<(ExportReport, ReceiptsReport), ExportError> {
    let documents = documents::export(store, root, locks).map_err(ExportError::Documents)?;
    let receipts =
        receipt_files::export_receipts(store, root, locks).map_err(ExportError::Receipts)?;
    Ok((documents, receipts))
}
