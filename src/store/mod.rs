//! The redb store: the only module that knows redb.
//!
//! Every process opens the file in redb's multi-writer mode, so any number of `serve`
//! processes (and an `import`) share it: reads run on snapshots, and write transactions
//! are serialised by redb across processes. A killed process leaves no lock behind (the
//! kernel drops its byte-range locks) and no torn state (redb's commits are atomic).
//!
//! The map, from the ground up (each file uses only those before it):
//! [`error`](self::error) says what failed, [`types`](self::types) holds the values handed
//! out, `backend` is the file redb runs on; [`guard`](self::guard) runs every redb call;
//! [`codec`] makes the bytes, [`records`](self::records) the stored twins of the types,
//! [`schema`] every table; [`writer`](self::writer) begins and writes one transaction
//! ([`Writer`]); [`reader`](self::reader) reads a snapshot ([`Reader`], [`Lookup`]);
//! [`migrate`](self::migrate) upgrades older schemas; [`open`](self::open) opens the file
//! ([`Store`]) and [`citations`] keeps the agents' citations; [`verify`] checks it all.

mod backend;
pub mod citations;
mod codec;
mod error;
#[cfg(test)]
mod format_tests;
mod guard;
mod kind;
mod migrate;
mod open;
mod reader;
mod records;
mod schema;
mod types;
pub mod verify;
mod writer;

pub use error::{OpenError, OwnStoreError, StoreError};
pub use open::{
    Store, WORKSPACE_STORE, check_own_store, on_read_only_media, open_by_a_writer, remove_if_unused,
};
pub use reader::{Lookup, Reader};
pub use schema::SCHEMA_VERSION;
pub use types::{
    DocumentRecord, FileRecord, FileState, ProjectRecord, SessionRecord, WorkspaceRecord,
};
pub use writer::Writer;
