//! evidence-store: a transactional store and drop-in MCP server for prompt-diary workspaces.
//!
//! The folders are the layers, from the edges down (ARCHITECTURE.md has the map):
//! `cli` and `mcp` are the edges, `service` is the transport-independent core they share,
//! `import`, `view`, `citations`, `tool_output`, `documents`, `read` and `session` are
//! its features, `store` is the only code that knows redb, and `workspace` and `util` are the
//! ground everything stands on. A layer uses only the layers below it (`tests/it/layers.rs`).

pub(crate) mod citations;
pub mod cli;
pub(crate) mod documents;
pub(crate) mod import;
pub(crate) mod mcp;
pub(crate) mod read;
pub(crate) mod service;
pub(crate) mod session;
pub(crate) mod store;
pub(crate) mod tool_output;
pub(crate) mod util;
pub(crate) mod view;
pub(crate) mod workspace;

/// The few internals the integration tests and benches call in process. Not an API: it
/// is public only because tests and benches are other crates. Everything else is
/// `pub(crate)`, so the compiler's dead-code lint sees the crate (except what these
/// items name in their signatures, such as `Service`'s methods and their types, which
/// count as used).
#[doc(hidden)]
pub mod harness {
    /// The store format `dump --stats` and `verify` report; tests compare their output
    /// with it.
    pub use crate::store::SCHEMA_VERSION;

    /// The deepest message `serve` takes; the protocol tests send one just within it.
    pub use crate::mcp::DEPTH_MAX;

    /// The read path without the transport: `tests/it/read_text.rs` compares its printed
    /// text with its records, `benches/read_path.rs` times it.
    pub use crate::read::pages::Paging;
    pub use crate::read::{Mode, ReadRequest, Sink, TextForm};
    pub use crate::service::Service;
    pub use crate::workspace::WorkspaceRoot;

    /// What a real model's final report becomes in a tool result: the oracle of
    /// `tests/it/real_model.rs`, which runs the binary against a live endpoint.
    pub use crate::tool_output::context::unclosed_note;
    pub use crate::tool_output::report::parse_final_report;
    pub use crate::tool_output::truncate::truncate;

    /// The single-thread steps `benches/read_path.rs` times apart, and the extraction
    /// `benches/citations.rs` times.
    pub use crate::citations::{Options, extract};
    pub use crate::read::compact::compact_line;
    pub use crate::util::lines::hash_line;

    /// The fault sweep (`tests/it/fault_sweep/`): the tools and commands it runs in
    /// process, each simulated process on the disk the sweep passes in, and what it
    /// checks the store and the files with afterwards.
    pub mod fault {
        pub use crate::citations::receipt_files::export_receipts;
        pub use crate::documents::evidence::WriteResult;
        pub use crate::documents::{export, remove_abandoned_temp_files};
        pub use crate::import::rebuild::rebuild;
        pub use crate::import::{ImportOptions, Quiet, import};
        pub use crate::service::Config;
        pub use crate::store::verify::verify;
        pub use crate::store::{Lookup, Store};
        pub use crate::util::disk::{Disk, Faults, Step};
        pub use crate::util::pyjson::{Value, parse};
        pub use crate::util::wait::Locks;
    }

    /// `util::pyjson::parse_borrowed` with its tree opaque: the bench only drops
    /// it, and an opaque result keeps the tree's methods out of the public surface.
    pub fn parse_borrowed(text: &str) -> impl Sized + '_ {
        crate::util::pyjson::parse_borrowed(text)
    }
}
