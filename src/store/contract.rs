//! Which prompt-diary contract the imported workspace uses, recorded in the `meta` table
//! as the workspace `schema_version` that selected it (key [`CONTRACT_KEY`]).
//!
//! A store without the record holds a prompt-diary 0.2.10 workspace: stores before schema
//! step 6 only ever imported those (the step writes the record for them).

use redb::ReadableTable;

use super::error::OrStore;
use super::guard;
use super::schema::META;
use super::{Lookup, StoreError, Writer};
use crate::workspace::contract::Contract;

/// `meta` key: the imported workspace's `schema_version` (2 or 7).
pub const CONTRACT_KEY: &str = "workspace_schema";

/// The recorded contract; 0.2.10 when none is recorded. A value this build does not serve
/// is a damaged store.
pub(super) fn recorded(lookup: &(impl Lookup + ?Sized)) -> Result<Contract, StoreError> {
    guard::guard(lookup.shown(), || {
        let value = lookup
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
                    path: lookup.shown().to_owned(),
                    detail: format!(
                        "the recorded workspace schema_version {n} is not one this build serves"
                    ),
                }),
        }
    })
}

impl Writer {
    /// Records the contract of the workspace this transaction imports.
    pub fn put_contract(&mut self, contract: Contract) -> Result<(), StoreError> {
        let schema = u64::try_from(contract.workspace_schema()).unwrap_or_default();
        guard::guard(&self.shown.clone(), || {
            let mut table = self.txn()?.open_table(META).store()?;
            table.insert(CONTRACT_KEY, schema).store()?;
            Ok(())
        })
    }
}
