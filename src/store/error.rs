//! What can go wrong opening, reading or writing the store.

#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("cannot create the store directory {path}: {source}")]
    CreateDir {
        path: String,
        source: std::io::Error,
    },
    #[error("cannot open the store {path}: {source}")]
    Database {
        path: String,
        source: Box<redb::Error>,
    },
    #[error(
        "the store {path} has schema version {found}, newer than this evidence-store supports ({supported}); \
         upgrade evidence-store, or if no newer one wrote it the store is damaged: \
         run evidence-store verify or evidence-store import --rebuild"
    )]
    NewerSchema {
        path: String,
        found: u64,
        supported: u64,
    },
    #[error(
        "the store {path} has schema version {found}, older than this evidence-store's ({supported}); \
         a read-only open cannot upgrade it: run `evidence-store import` first"
    )]
    OlderSchema {
        path: String,
        found: u64,
        supported: u64,
    },
    #[error(
        "{path} is a redb file but not an evidence-store store (it has tables but no schema version); \
         if it was one, it is damaged: run evidence-store verify or evidence-store import --rebuild"
    )]
    Foreign { path: String },
    #[error(
        "the store {path} was not closed cleanly (a writer was killed) and a read-only open cannot \
         repair it: run `evidence-store import` once (it repairs the file), then retry"
    )]
    NeedsRepair { path: String },
    #[error(
        "the store {path} cannot be used: {why}; nothing was written through it (remove what is at that name, then run `evidence-store import`)"
    )]
    NotOwnFile { path: String, why: String },
    /// Another process held the store's gate (in its open or close of the store) past the
    /// wait, and this open was one that does not go on without it.
    #[error(
        "another process is opening or closing the store {path} (it holds the store's gate); retry"
    )]
    Gated { path: String },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Why the workspace's own store is refused: its real location is outside the workspace.
#[derive(Debug, thiserror::Error)]
pub enum OwnStoreError {
    /// `reason` is the message's own last part, not a cause printed after it.
    #[error("the store {path} cannot be used: {reason}")]
    Outside {
        path: String,
        reason: std::io::Error,
    },
    /// `.evidence-store` leads to another workspace's store directory (inside this one).
    #[error(
        "the store {path} is the store of the workspace {holder} (this workspace's \
         .evidence-store leads there): a store serves one workspace, since each workspace's \
         writers lock out only their own; make .evidence-store a directory of this \
         workspace's own (remove the link)"
    )]
    OtherWorkspace { path: String, holder: String },
}

/// A failure reading or writing an open store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("store error: {0}")]
    Db(#[from] Box<redb::Error>),
    #[error(transparent)]
    Codec(#[from] CodecError),
    /// A record could not be encoded: the write fails.
    #[error(transparent)]
    Encode(#[from] EncodeError),
    #[error("the store has no workspace yet: run `evidence-store import`")]
    NotImported,
    #[error("the store is inconsistent: {0}")]
    Inconsistent(String),
    #[error(
        "the store at {path} is damaged: {detail}; run evidence-store verify or evidence-store import --rebuild"
    )]
    Damaged { path: String, detail: String },
    #[error(
        "the disk holding the store at {path} is full ({detail}); nothing was written: free space and retry"
    )]
    DiskFull { path: String, detail: String },
    #[error(
        "another write transaction has held the store's write lock ({path}) for the last {waited_secs} s \
         ({var} sets how long to wait): if an evidence-store process is stuck, stop it, then retry; \
         nothing was written",
        var = crate::util::wait::TIMEOUT_VAR
    )]
    Busy { path: String, waited_secs: u64 },
    #[error("the store at {path} is open read-only")]
    ReadOnly { path: String },
    #[error(
        "the store at {path} was replaced (by `evidence-store import --rebuild`) after this process opened it; nothing was written: run the command again, or restart this server"
    )]
    Replaced { path: String },
}

impl StoreError {
    /// redb latched an I/O failure: the database must be closed and opened again.
    pub(super) fn needs_reopen(&self) -> bool {
        match self {
            StoreError::Db(e) => matches!(e.as_ref(), redb::Error::PreviousIo),
            StoreError::DiskFull { .. } => true,
            _ => false,
        }
    }
}

/// Turns any of redb's per-operation error types into a [`StoreError`].
pub(super) trait OrStore<T> {
    fn store(self) -> Result<T, StoreError>;
}

impl<T, E: Into<redb::Error>> OrStore<T> for Result<T, E> {
    fn store(self) -> Result<T, StoreError> {
        self.map_err(|e| StoreError::Db(Box::new(e.into())))
    }
}

pub(super) fn ended() -> StoreError {
    StoreError::Inconsistent("the transaction has already ended".to_owned())
}

/// Why stored bytes could not be decoded: the store is corrupt or from another build.
#[derive(Debug, thiserror::Error)]
#[error("stored {what} record cannot be decoded: {detail}")]
pub struct CodecError {
    pub(super) what: &'static str,
    pub(super) detail: String,
}

/// Why a record could not be encoded (nothing of it is stored).
#[derive(Debug, thiserror::Error)]
#[error("the {what} record cannot be encoded: {detail}")]
pub struct EncodeError {
    pub(super) what: &'static str,
    pub(super) detail: String,
}
