//! Command-line parsing. clap types stop here: [`parse`] returns a plain [`Config`].

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::dump::DumpTarget;
use crate::workspace::{WorkspaceRoot, python_path_display};

/// Environment variable that names the prepared workspace (as prompt-diary sets it for
/// the MCP servers it launches).
pub const WORKSPACE_ENV: &str = "PROMPT_DIARY_WORKSPACE";

#[derive(Debug, Parser)]
#[command(
    name = "evidence-store",
    version,
    about = "A transactional evidence store and drop-in MCP server for prompt-diary workspaces",
    long_about = "A transactional evidence store and drop-in MCP server for prompt-diary workspaces.\n\n\
        `import` loads a prepared workspace into an embedded redb store; `serve` answers \
        prompt-diary's MCP tools from it over stdio; `dump` shows what the store holds."
)]
struct Cli {
    /// Prepared workspace root [default: $PROMPT_DIARY_WORKSPACE, else the current directory]
    #[arg(long, global = true, value_name = "DIR")]
    workspace: Option<PathBuf>,
    /// Store file [default: DIR/.evidence-store/store.redb]
    #[arg(long, global = true, value_name = "PATH")]
    store: Option<PathBuf>,
    #[command(subcommand)]
    command: CliCommand,
}

#[derive(Debug, Subcommand)]
enum CliCommand {
    /// Load the prepared workspace into the store (incremental and transactional)
    Import {
        /// Re-hash every session file, even those whose size and mtime are unchanged
        #[arg(long)]
        rehash: bool,
        /// Build a new store from the workspace files alone (session files and documents)
        /// and replace the old one in one rename: the repair for a damaged store. Stop
        /// every `serve` first (it refuses while one has the store open): a server still
        /// running would keep the old file open, answering from it and writing to it
        #[arg(long, conflicts_with = "rehash")]
        rebuild: bool,
    },
    /// Check the store without changing it: redb's integrity check, every record decodes,
    /// line tables match their digests, documents their checksums. Exits 1 on a problem
    Verify,
    /// Show what the store holds
    Dump(DumpArgs),
    /// Write every evidence card and report the store holds into the workspace, atomically
    Export,
    /// Build the daily-report skeleton from the work items (keeping completed slots)
    Build,
    /// Serve the MCP tools over stdio (importing what changed first)
    Serve,
}

#[derive(Debug, Args)]
struct DumpArgs {
    /// Print JSON instead of text
    #[arg(long, global = true)]
    json: bool,
    /// Sizes and counts: store size, tables, lines indexed, bytes covered, documents
    #[arg(long)]
    stats: bool,
    #[command(subcommand)]
    what: Option<DumpCommand>,
}

#[derive(Debug, Subcommand)]
enum DumpCommand {
    /// Tables and their entry counts (the default)
    Tables,
    /// One project and its sessions
    Project { project_key: String },
    /// One session: its index row, turns and file record
    Session {
        project_key: String,
        session_ref: String,
    },
    /// One turn of a session
    Turn {
        project_key: String,
        session_ref: String,
        turn_ref: String,
    },
    /// The line index (offset, length, SHA-256) of a range of a session's lines
    Lines {
        project_key: String,
        session_ref: String,
        start_line: u64,
        end_line: u64,
    },
}

/// Everything a run needs, free of clap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub workspace: WorkspaceRoot,
    pub store: PathBuf,
    pub command: Command,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    Import { rehash: bool, rebuild: bool },
    Verify,
    Dump { json: bool, target: DumpTarget },
    Serve,
    Export,
    Build,
}

/// Parses `std::env::args`, exiting with clap's usage message on error.
pub fn parse() -> Config {
    let cli = Cli::parse();
    let env = std::env::var_os(WORKSPACE_ENV).map(PathBuf::from);
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    config(cli, env, cwd)
}

fn config(cli: Cli, env: Option<PathBuf>, cwd: PathBuf) -> Config {
    let given = cli.workspace.or(env).filter(|p| !p.as_os_str().is_empty());
    let workspace = match given {
        Some(path) => WorkspaceRoot {
            display: python_path_display(&path),
            path,
        },
        None => WorkspaceRoot {
            display: cwd.display().to_string(),
            path: cwd,
        },
    };
    let store = cli
        .store
        .unwrap_or_else(|| workspace.path.join(".evidence-store").join("store.redb"));
    let command = match cli.command {
        CliCommand::Import { rehash, rebuild } => Command::Import { rehash, rebuild },
        CliCommand::Verify => Command::Verify,
        CliCommand::Serve => Command::Serve,
        CliCommand::Export => Command::Export,
        CliCommand::Build => Command::Build,
        CliCommand::Dump(DumpArgs { json, stats, what }) => Command::Dump {
            json,
            target: match what.unwrap_or(DumpCommand::Tables) {
                _ if stats => DumpTarget::Stats,
                DumpCommand::Tables => DumpTarget::Tables,
                DumpCommand::Project { project_key } => DumpTarget::Project { project_key },
                DumpCommand::Session {
                    project_key,
                    session_ref,
                } => DumpTarget::Session {
                    project_key,
                    session_ref,
                },
                DumpCommand::Turn {
                    project_key,
                    session_ref,
                    turn_ref,
                } => DumpTarget::Turn {
                    project_key,
                    session_ref,
                    turn_ref,
                },
                DumpCommand::Lines {
                    project_key,
                    session_ref,
                    start_line,
                    end_line,
                } => DumpTarget::Lines {
                    project_key,
                    session_ref,
                    start_line,
                    end_line,
                },
            },
        },
    };
    Config {
        workspace,
        store,
        command,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_from(args: &[&str], env: Option<&str>) -> Config {
        let cli = Cli::try_parse_from(args).expect("valid arguments");
        config(cli, env.map(PathBuf::from), PathBuf::from("/home/u/cwd"))
    }

    #[test]
    fn workspace_comes_from_flag_then_env_then_cwd() {
        let c = parse_from(&["evidence-store", "import"], None);
        assert_eq!(c.workspace.display, "/home/u/cwd");
        assert_eq!(
            c.store,
            PathBuf::from("/home/u/cwd/.evidence-store/store.redb")
        );
        let c = parse_from(&["evidence-store", "import"], Some("/tmp//ws/./"));
        assert_eq!(c.workspace.display, "/tmp/ws");
        let c = parse_from(&["evidence-store", "import"], Some(""));
        assert_eq!(
            c.workspace.display, "/home/u/cwd",
            "an empty variable is ignored"
        );
        let c = parse_from(
            &["evidence-store", "serve", "--workspace", "w"],
            Some("/env"),
        );
        assert_eq!(
            (c.workspace.display.as_str(), c.command),
            ("w", Command::Serve)
        );
    }

    #[test]
    fn global_flags_go_before_or_after_the_subcommand() {
        let before = parse_from(
            &["evidence-store", "--store", "/s.redb", "dump", "--json"],
            None,
        );
        let after = parse_from(
            &["evidence-store", "dump", "--json", "--store", "/s.redb"],
            None,
        );
        assert_eq!(before, after);
        assert_eq!(
            before.command,
            Command::Dump {
                json: true,
                target: DumpTarget::Tables
            }
        );
    }
}
