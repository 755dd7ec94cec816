//! evidence-store: a transactional store and drop-in MCP server for prompt-diary workspaces.
//!
//! The folders are the layers, from the edges down (ARCHITECTURE.md has the map):
//! [`cli`] and [`mcp`] are the edges, [`service`] is the transport-independent core they
//! share, [`import`], [`documents`], [`citations`], [`tool_output`], [`read`] and
//! [`session`] are its features, [`store`] is the only code that knows redb, and
//! [`workspace`] and [`util`] are the ground everything stands on.

pub mod citations;
pub mod cli;
pub mod documents;
pub mod import;
pub mod mcp;
pub mod read;
pub mod service;
pub mod session;
pub mod store;
pub mod tool_output;
pub mod util;
pub mod workspace;
