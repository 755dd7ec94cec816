//! evidence-store: a transactional store and drop-in MCP server for prompt-diary workspaces.
//!
//! See ARCHITECTURE.md for the code map. In short: [`workspace`] reads and validates a
//! prepared workspace, [`store`] is the only module that knows redb, [`import`] and
//! [`read`] are the transport-independent operations, and [`mcp`] adapts them to rmcp.

pub mod agent_citations;
pub mod app;
pub mod citations;
pub mod cli;
pub mod compact;
pub mod contract;
pub mod documents;
pub mod dump;
pub mod evidence;
pub mod fsutil;
pub mod handles;
pub mod import;
pub mod lines;
pub mod mcp;
pub mod pages;
pub mod parallel;
pub mod progress;
pub mod pyjson;
pub mod read;
pub mod rebuild;
pub mod report;
pub mod run;
pub mod service;
pub mod session;
pub mod sparse;
pub mod store;
pub mod synthesis;
pub mod tool_output;
pub mod trigger;
pub mod wait;
pub mod workspace;
