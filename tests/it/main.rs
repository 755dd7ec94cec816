//! The integration tests, one crate (one link of the whole program): each module is the
//! tests of one topic, run against the real binary; `common` holds their shared helpers.

mod common;

mod argument_errors;
mod bounded_waits;
mod citation_checks;
mod citations_e2e;
mod citations_store;
mod cli_errors;
mod cli_import;
mod concurrent_commands;
mod confinement;
mod contract_selection;
mod damaged_store;
mod disk_full;
mod dump_stats;
mod failed_writes;
mod fault_sweep;
mod first_hour;
mod handles;
mod import_changes;
mod layers;
mod line_tables;
mod many_servers;
mod mcp_stdio;
mod mcp_synthesis;
mod mcp_write;
mod protocol;
mod read_pages;
mod read_text;
mod real_model;
mod rebuild_race;
mod run_command;
mod run_settings;
mod session_files;
mod stops;
mod store_format;
mod tool_output;
mod tool_output_text;
mod view_page;
mod wrong_setup;
