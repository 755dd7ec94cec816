//! Command-line parsing. clap types stop here: [`parse`] returns a plain [`Config`]
//! (`dump`'s [`DumpTarget`] is its own subcommand, so its help stands beside what it shows).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use clap::{Args, CommandFactory, Parser, Subcommand};

use crate::cli::dump::DumpTarget;
use crate::tool_output::settings::Settings as ToolOutputSettings;
use crate::workspace::{WorkspaceRoot, python_path_display};

/// Environment variable that names the prepared workspace (as prompt-diary sets it for
/// the MCP servers it launches).
pub(crate) const WORKSPACE_ENV: &str = "PROMPT_DIARY_WORKSPACE";

/// `--version`: the package version, the commit it was built from ("unknown" outside a
/// git checkout) and the prompt-diary releases whose workspaces it serves.
pub(crate) fn version_text() -> &'static str {
    static TEXT: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        let releases: Vec<String> = crate::workspace::contract::Contract::ALL
            .iter()
            .map(|c| c.release().to_owned())
            .collect();
        format!(
            "{} (commit {}; serves prompt-diary {})",
            env!("CARGO_PKG_VERSION"),
            env!("EVIDENCE_STORE_COMMIT"),
            releases.join(" and ")
        )
    });
    &TEXT
}

#[derive(Debug, Parser)]
#[command(
    name = "evidence-store",
    version = version_text(),
    about = "A transactional evidence store and drop-in MCP server for prompt-diary workspaces",
    long_about = "A transactional evidence store and drop-in MCP server for prompt-diary workspaces.\n\n\
        `import` loads a prepared workspace into an embedded redb store; `serve` answers \
        prompt-diary's MCP tools from it over stdio; `build` assembles the daily-report \
        skeleton; `export` writes every document the store holds back into the workspace; \
        `run -- prompt-diary generate ...` runs prompt-diary with its MCP server replaced by `serve` \
        and exports afterwards; `dump` shows what the store holds; `view` writes one HTML page of the \
        day's evidence; `verify` checks the store without changing it; `verify-citations` checks the \
        files agents cited again, as they are now.",
    disable_help_subcommand = true
)]
struct Cli {
    /// Prepared workspace root [default: $PROMPT_DIARY_WORKSPACE, else the current directory]
    #[arg(long, global = true, value_name = "DIR")]
    workspace: Option<PathBuf>,
    /// Store file [default: DIR/.evidence-store/store.redb]
    #[arg(long, global = true, value_name = "PATH")]
    store: Option<PathBuf>,
    /// Whether a JSON `evidence` or `citations` block in an assistant message is read as
    /// its citations before its `**Evidence**:` markers (Ralph's `enable_json`), on the
    /// commands that import (`import`, `serve`, `build`, `run`). Changing it makes the next
    /// import take every session's citations again [default: $EVIDENCE_STORE_CITATIONS_JSON,
    /// else on]
    #[arg(long, global = true, value_name = "on|off", value_parser = ["on", "off"])]
    citations_json: Option<String>,
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
    /// Write one self-contained HTML page of the day's evidence (coverage of every turn,
    /// each chain beside the lines it cites, work items, the report, agent citations) and
    /// print its file:// URL
    View {
        /// The page to write [default: DIR/.evidence-store/view.html]
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
    },
    /// Write every evidence card and report the store holds into the workspace, atomically
    Export,
    /// Build the daily-report skeleton from the work items (keeping completed slots)
    Build,
    /// Serve the MCP tools over stdio (importing what changed first)
    Serve {
        #[command(flatten)]
        model: ModelFlags,
    },
    /// Run a command (e.g. `prompt-diary generate --today`) whose `report mcp serve` is
    /// evidence-store, then export; exits with the command's exit code
    #[command(
        long_about = "Run a command (e.g. `prompt-diary generate --today`) whose `report mcp serve` is evidence-store, then export.\n\n\
            The command runs with PATH starting with a private directory that holds a `report` link to this \
            binary: `report mcp serve` (as prompt-diary starts its MCP server) runs `evidence-store serve` \
            on $PROMPT_DIARY_WORKSPACE; every other `report ...` runs the real `report` found later on PATH, \
            unchanged. When the command exits, every workspace served (and --workspace, if it has a store) \
            is imported (adopting the files prompt-diary wrote) and exported. Exits with the command's exit \
            code (1 if the command succeeded but an export failed)."
    )]
    Run {
        /// The command and its arguments (after `--`)
        #[arg(
            required = true,
            trailing_var_arg = true,
            allow_hyphen_values = true,
            value_name = "COMMAND"
        )]
        command: Vec<OsString>,
        /// Passed to every `report mcp serve` the command starts, through the environment
        #[command(flatten)]
        model: ModelFlags,
    },
    /// Check the agent citations in the store again against the cited files as they are
    /// now (all, one project's or one session's) and store the new results
    VerifyCitations {
        /// Only this project (its key, e.g. Demo-0123456789ab)
        project_key: Option<String>,
        /// Only this session of the project (e.g. S0001)
        session_ref: Option<String>,
    },
    /// Print this message or the help of the given subcommand(s)
    Help {
        /// The subcommand whose help to print
        #[arg(value_name = "COMMAND")]
        command: Vec<String>,
    },
}

/// Where `tool_output` finds a language model besides the client's MCP sampling, and its
/// thresholds. Every flag can also be set through its environment variable.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "tool_output model")]
struct ModelFlags {
    /// OpenAI-compatible chat-completions base URL, such as http://127.0.0.1:11434/v1
    /// (Ollama), http://127.0.0.1:8080/v1 (llama.cpp), https://api.openai.com/v1
    #[arg(long, env = MODEL_URL_ENV, hide_env_values = true, value_name = "URL", requires = "model")]
    model_url: Option<String>,
    /// Model name sent to the endpoint
    #[arg(long, env = MODEL_ENV, hide_env_values = true, value_name = "NAME", requires = "model_url")]
    model: Option<String>,
    /// Name of the environment variable holding the endpoint's API key (its value is never
    /// logged); unset: no key is sent
    #[arg(long, env = MODEL_API_KEY_ENV_ENV, hide_env_values = true, value_name = "VAR")]
    model_api_key_env: Option<String>,
    /// Longest one model request may take, in seconds
    #[arg(long, env = MODEL_TIMEOUT_ENV, hide_env_values = true, value_name = "SECS", default_value_t = 300)]
    model_timeout_secs: u64,
    /// The model's context window, in tokens (sizes the full-chunked chunks)
    #[arg(long, env = MODEL_CONTEXT_ENV, hide_env_values = true, value_name = "TOKENS", default_value_t = crate::tool_output::engine::DEFAULT_CONTEXT_TOKENS)]
    model_context_tokens: usize,
    /// Most tokens of one model answer
    #[arg(long, env = MODEL_OUTPUT_ENV, hide_env_values = true, value_name = "TOKENS", default_value_t = crate::tool_output::engine::DEFAULT_MAX_OUTPUT_TOKENS)]
    model_max_output_tokens: usize,
    /// Cap of every `tool_output` answer, in bytes
    #[arg(long, env = MAX_BYTES_ENV, hide_env_values = true, value_name = "BYTES", default_value_t = crate::tool_output::truncate::DEFAULT_MAX_BYTES, value_parser = parse_cap)]
    tool_output_max_bytes: usize,
    /// Most chunks `auto` lets full-chunked use (more: read-grep)
    #[arg(long, env = MAX_CHUNKS_ENV, hide_env_values = true, value_name = "N", default_value_t = crate::tool_output::route::DEFAULT_MAX_CHUNKS)]
    tool_output_max_chunks: usize,
    /// Average line size above which `auto` prefers full-chunked
    #[arg(long, env = LONG_LINE_ENV, hide_env_values = true, value_name = "BYTES", default_value_t = crate::tool_output::route::DEFAULT_LONG_LINE_BYTES)]
    tool_output_long_line_bytes: usize,
    /// Overlap of consecutive full-chunked chunks, in percent of the chunk size (0 to 50)
    #[arg(long, env = OVERLAP_ENV, hide_env_values = true, value_name = "PERCENT", default_value_t = crate::tool_output::chunk::DEFAULT_OVERLAP_PCT, value_parser = parse_overlap)]
    tool_output_chunk_overlap_percent: usize,
    /// Longest one `tool_output` call may take, in seconds; past it the answer is the
    /// truncate fallback
    #[arg(long, env = DEADLINE_ENV, hide_env_values = true, value_name = "SECS", default_value_t = crate::tool_output::engine::DEFAULT_DEADLINE.as_secs(), value_parser = clap::value_parser!(u64).range(1..))]
    tool_output_deadline_secs: u64,
}

/// A `tool_output` answer cap: at least 1024 bytes, so the header and a useful part of
/// the text always fit.
fn parse_cap(text: &str) -> Result<usize, String> {
    let n: usize = text.parse().map_err(|e| format!("{e}"))?;
    if n < 1024 {
        return Err(format!("{n} is below the smallest cap, 1024 bytes"));
    }
    Ok(n)
}

/// A chunk overlap: 0 to 50 percent (more would read most of the payload twice).
fn parse_overlap(text: &str) -> Result<usize, String> {
    let n: usize = text.parse().map_err(|e| format!("{e}"))?;
    if n > 50 {
        return Err(format!("{n} is above the largest overlap, 50 percent"));
    }
    Ok(n)
}

/// Environment variables of the `tool_output` settings (see `ModelFlags`).
pub(crate) const MODEL_URL_ENV: &str = "EVIDENCE_STORE_MODEL_URL";
pub(crate) const MODEL_ENV: &str = "EVIDENCE_STORE_MODEL";
pub(crate) const MODEL_API_KEY_ENV_ENV: &str = "EVIDENCE_STORE_MODEL_API_KEY_ENV";
pub(crate) const MODEL_TIMEOUT_ENV: &str = "EVIDENCE_STORE_MODEL_TIMEOUT_SECS";
pub(crate) const MODEL_CONTEXT_ENV: &str = "EVIDENCE_STORE_MODEL_CONTEXT_TOKENS";
pub(crate) const MODEL_OUTPUT_ENV: &str = "EVIDENCE_STORE_MODEL_MAX_OUTPUT_TOKENS";
pub(crate) const MAX_BYTES_ENV: &str = "EVIDENCE_STORE_TOOL_OUTPUT_MAX_BYTES";
pub(crate) const MAX_CHUNKS_ENV: &str = "EVIDENCE_STORE_TOOL_OUTPUT_MAX_CHUNKS";
pub(crate) const LONG_LINE_ENV: &str = "EVIDENCE_STORE_TOOL_OUTPUT_LONG_LINE_BYTES";
pub(crate) const DEADLINE_ENV: &str = "EVIDENCE_STORE_TOOL_OUTPUT_DEADLINE_SECS";
pub(crate) const OVERLAP_ENV: &str = "EVIDENCE_STORE_TOOL_OUTPUT_CHUNK_OVERLAP_PERCENT";
/// The citation extraction setting (`--citations-json`), `on` or `off`.
pub(crate) const CITATIONS_JSON_ENV: &str = "EVIDENCE_STORE_CITATIONS_JSON";

/// `--citations-json`'s value as extraction options.
fn citation_options(json: &str) -> crate::citations::Options {
    crate::citations::Options {
        enable_json: json != "off",
    }
}

/// The citation setting as the environment variable the servers `run` starts read.
pub(crate) fn citations_env(options: crate::citations::Options) -> (&'static str, &'static str) {
    (
        CITATIONS_JSON_ENV,
        if options.enable_json { "on" } else { "off" },
    )
}

impl ModelFlags {
    fn settings(&self) -> ToolOutputSettings {
        use crate::tool_output::engine::EngineConfig;
        use crate::tool_output::model::openai::EndpointConfig;
        ToolOutputSettings {
            engine: EngineConfig {
                max_bytes: self.tool_output_max_bytes,
                max_chunks: self.tool_output_max_chunks,
                long_line_bytes: self.tool_output_long_line_bytes,
                overlap_pct: self.tool_output_chunk_overlap_percent,
                context_tokens: self.model_context_tokens,
                max_output_tokens: self.model_max_output_tokens,
                deadline: std::time::Duration::from_secs(self.tool_output_deadline_secs),
            },
            endpoint: match (&self.model_url, &self.model) {
                (Some(url), Some(model)) => Some(EndpointConfig {
                    base_url: url.clone(),
                    model: model.clone(),
                    api_key_env: self.model_api_key_env.clone(),
                    timeout: std::time::Duration::from_secs(self.model_timeout_secs),
                }),
                _ => None,
            },
        }
    }
}

/// The `tool_output` settings as environment variables, for the servers `run` starts.
pub(crate) fn settings_env(settings: &ToolOutputSettings) -> Vec<(&'static str, String)> {
    let e = &settings.engine;
    let mut out = vec![
        (MODEL_CONTEXT_ENV, e.context_tokens.to_string()),
        (MODEL_OUTPUT_ENV, e.max_output_tokens.to_string()),
        (MAX_BYTES_ENV, e.max_bytes.to_string()),
        (MAX_CHUNKS_ENV, e.max_chunks.to_string()),
        (LONG_LINE_ENV, e.long_line_bytes.to_string()),
        (DEADLINE_ENV, e.deadline.as_secs().to_string()),
        (OVERLAP_ENV, e.overlap_pct.to_string()),
    ];
    if let Some(p) = &settings.endpoint {
        out.push((MODEL_URL_ENV, p.base_url.clone()));
        out.push((MODEL_ENV, p.model.clone()));
        out.push((MODEL_TIMEOUT_ENV, p.timeout.as_secs().to_string()));
        if let Some(var) = &p.api_key_env {
            out.push((MODEL_API_KEY_ENV_ENV, var.clone()));
        }
    }
    out
}

/// The settings of a `report mcp serve`: each from its environment variable, else from
/// `file` (the settings file `run` left for the servers it starts, as the same
/// `NAME=VALUE` entries, and where it is), else its default. A value that is not valid is
/// an error naming where it came from (the variable, or the file and its entry), never
/// clap's words about a flag no one gave.
pub(crate) fn server_settings(
    file: Option<(&Path, &[(String, String)])>,
) -> anyhow::Result<(ToolOutputSettings, crate::citations::Options)> {
    use clap::FromArgMatches;
    #[derive(Debug, Parser)]
    struct Flags {
        #[command(flatten)]
        model: ModelFlags,
    }
    // clap reads no environment here: each value is given as its flag, so that an error
    // can say where the value came from.
    let command = || Flags::command().mut_args(|a| a.env(None));
    let named = |name: &str, from_file: bool, why: &str| match file {
        Some((path, _)) if from_file => anyhow::anyhow!(
            "the settings file {} that `run` left for this server is malformed: its {name} {why}",
            path.display()
        ),
        _ => anyhow::anyhow!("the environment variable {name} {why}"),
    };
    let known: Vec<(String, String)> = Flags::command()
        .get_arguments()
        .filter_map(|a| {
            let env = a.get_env()?.to_str()?.to_owned();
            Some((env, a.get_long()?.to_owned()))
        })
        .collect();
    if let Some((_, entries)) = file
        && let Some((name, _)) = entries.iter().find(|(name, _)| {
            name != CITATIONS_JSON_ENV && !known.iter().any(|(env, _)| env == name)
        })
    {
        return Err(named(name, true, "is not a setting of this evidence-store"));
    }
    // The value of `name` and whether it came from the file.
    let lookup = |name: &str| -> anyhow::Result<Option<(String, bool)>> {
        if let Some(value) = std::env::var_os(name) {
            let value = value
                .into_string()
                .map_err(|_| named(name, false, "is not valid UTF-8"))?;
            return Ok(Some((value, false)));
        }
        Ok(file.and_then(|(_, entries)| {
            let (_, value) = entries.iter().find(|(n, _)| n == name)?;
            Some((value.clone(), true))
        }))
    };
    let mut argv = vec!["evidence-store".to_owned()];
    let mut given = Vec::new();
    for (env, long) in &known {
        let Some((value, from_file)) = lookup(env)? else {
            continue;
        };
        let flag = format!("--{long}={value}");
        match command().try_get_matches_from(["evidence-store", flag.as_str()]) {
            Err(e) if e.kind() != clap::error::ErrorKind::MissingRequiredArgument => {
                return Err(named(
                    env,
                    from_file,
                    &format!("is not valid: {}", clap_reason(&e)),
                ));
            }
            _ => {}
        }
        argv.push(flag);
        given.push((env.as_str(), from_file));
    }
    let has = |name: &str| given.iter().find(|(env, _)| *env == name);
    match (has(MODEL_URL_ENV), has(MODEL_ENV)) {
        (Some(&(_, from_file)), None) => {
            return Err(named(
                MODEL_URL_ENV,
                from_file,
                &format!("is set without {MODEL_ENV}"),
            ));
        }
        (None, Some(&(_, from_file))) => {
            return Err(named(
                MODEL_ENV,
                from_file,
                &format!("is set without {MODEL_URL_ENV}"),
            ));
        }
        _ => {}
    }
    let flags = command()
        .try_get_matches_from(argv)
        .and_then(|matches| Flags::from_arg_matches(&matches))
        .map_err(|e| {
            anyhow::anyhow!(
                "the tool_output settings are not valid: {}",
                clap_reason(&e)
            )
        })?;
    // Set by `run` for the servers it starts: from the environment, anything but `off` is
    // the default; the file `run` wrote holds `on` or `off`.
    let citations = match lookup(CITATIONS_JSON_ENV)? {
        Some((value, true)) if value != "on" && value != "off" => {
            return Err(named(CITATIONS_JSON_ENV, true, "is neither on nor off"));
        }
        Some((value, _)) => value,
        None => String::new(),
    };
    Ok((flags.model.settings(), citation_options(&citations)))
}

/// Why clap refused a value, in its value parser's words when it has them (not the
/// flag's).
fn clap_reason(e: &clap::Error) -> String {
    match std::error::Error::source(e) {
        Some(source) => source.to_string(),
        None => e.kind().to_string(),
    }
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
    what: Option<DumpTarget>,
}

/// Where the workspace directory was named, for messages about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WorkspaceFrom {
    Flag,
    Env,
    CurrentDir,
}

impl WorkspaceFrom {
    /// How a message names what chose the directory.
    pub(crate) fn shown(self) -> &'static str {
        match self {
            WorkspaceFrom::Flag => "--workspace",
            WorkspaceFrom::Env => "$PROMPT_DIARY_WORKSPACE",
            WorkspaceFrom::CurrentDir => "the current directory",
        }
    }
}

/// Everything a run needs, free of clap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub(crate) workspace: WorkspaceRoot,
    /// What named `workspace`.
    pub(crate) workspace_from: WorkspaceFrom,
    pub(crate) store: PathBuf,
    pub(crate) command: Command,
    /// `tool_output`'s model and thresholds (used by `serve` and `run`).
    pub(crate) tool_output: ToolOutputSettings,
    /// How imports extract citations.
    pub(crate) citations: crate::citations::Options,
    /// Lock waits and the document lock's holder name (set by `app::run`).
    pub(crate) locks: crate::util::wait::Locks,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Command {
    Import {
        rehash: bool,
        rebuild: bool,
    },
    Verify,
    Dump {
        json: bool,
        target: DumpTarget,
    },
    Serve,
    Export,
    Build,
    /// Write the HTML page of the store's evidence to `out`.
    View {
        out: PathBuf,
    },
    /// Run a command with `report mcp serve` replaced by `serve`, then export.
    Run {
        command: Vec<OsString>,
    },
    /// Invoked as `report`: serve for `report mcp serve`, else hand over to the real one.
    Report {
        argv0: OsString,
        args: Vec<OsString>,
    },
    /// Print help text (already rendered) and exit successfully.
    Help {
        text: String,
    },
    /// Re-check stored agent citations and commit the new results.
    VerifyCitations {
        project_key: Option<String>,
        session_ref: Option<String>,
    },
}

/// The name under which `run` puts this binary on PATH, as prompt-diary starts its MCP
/// server (`report mcp serve`).
pub(crate) const REPORT_NAME: &str = "report";

/// Parses `std::env::args`, exiting with clap's usage message on error (exit 2). A bad
/// value that came from an environment variable, not from the command line, is named as
/// that variable.
pub fn parse() -> Config {
    let argv: Vec<OsString> = std::env::args_os().collect();
    let argv0 = argv.first().cloned().unwrap_or_default();
    let env = std::env::var_os(WORKSPACE_ENV).map(PathBuf::from);
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    if invoked_as_report(&argv0) {
        return report_config(argv0, argv.into_iter().skip(1).collect(), env, cwd);
    }
    let cli =
        Cli::try_parse_from(&argv).unwrap_or_else(|e| match from_the_environment(&e, &argv) {
            Some(message) => usage_exit(&message),
            None => e.exit(),
        });
    config(cli, env, cwd).unwrap_or_else(|message| usage_exit(&message))
}

/// Prints a usage error the way `main` prints an error, and exits as clap does (2).
fn usage_exit(message: &str) -> ! {
    eprintln!("evidence-store: {message}");
    std::process::exit(2)
}

/// When clap refused a flag's value that the user did not type but set through the
/// flag's environment variable: the message naming that variable, its value, what is
/// wrong and what to do.
fn from_the_environment(e: &clap::Error, argv: &[OsString]) -> Option<String> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if !matches!(
        e.kind(),
        ErrorKind::InvalidValue | ErrorKind::ValueValidation
    ) {
        return None;
    }
    let Some(ContextValue::String(shown)) = e.get(ContextKind::InvalidArg) else {
        return None;
    };
    // Shown as `--model-timeout-secs <SECS>`.
    let long = shown.split_whitespace().next()?.strip_prefix("--")?;
    let typed = argv.iter().any(|a| {
        a.to_str().is_some_and(|a| {
            a.strip_prefix("--")
                .and_then(|rest| rest.strip_prefix(long))
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('='))
        })
    });
    if typed {
        return None;
    }
    let command = Cli::command();
    let var = std::iter::once(&command)
        .chain(command.get_subcommands())
        .flat_map(|c| c.get_arguments())
        .find(|a| a.get_long() == Some(long))
        .and_then(|a| a.get_env())?
        .to_string_lossy()
        .into_owned();
    let value = std::env::var_os(&var)?;
    let why = match (e.get(ContextKind::ValidValue), std::error::Error::source(e)) {
        (Some(ContextValue::Strings(valid)), _) => {
            format!("it must be one of {}", valid.join(", "))
        }
        (_, Some(source)) => source.to_string(),
        _ => "it is not a valid value".to_owned(),
    };
    Some(format!(
        "the environment variable {var}={:?} (which sets {shown}) is refused: {why}; set it \
         to a valid value, or unset it (`unset {var}`)",
        value.to_string_lossy()
    ))
}

/// True when `argv[0]`'s file name is `report` (the link `run` puts on PATH).
pub(crate) fn invoked_as_report(argv0: &std::ffi::OsStr) -> bool {
    Path::new(argv0)
        .file_name()
        .is_some_and(|name| name == REPORT_NAME)
}

/// `report ARGS`: the workspace is `$PROMPT_DIARY_WORKSPACE` (as prompt-diary sets it for
/// its MCP server), else the current directory; the store is the workspace's own.
fn report_config(
    argv0: OsString,
    args: Vec<OsString>,
    env: Option<PathBuf>,
    cwd: PathBuf,
) -> Config {
    let workspace_from = workspace_from(false, env.as_deref());
    let workspace = resolve_workspace(env, cwd);
    // Only `report mcp serve` has settings, and it reads them once it runs
    // (`server_settings`): reading them for other `report` calls could turn a bad variable
    // into an error that has nothing to do with that call.
    Config {
        store: default_store(&workspace.path),
        workspace,
        workspace_from,
        command: Command::Report { argv0, args },
        tool_output: ToolOutputSettings::default(),
        citations: citation_options(""),
        locks: crate::util::wait::Locks::default(),
    }
}

/// What names the workspace: the flag, else the variable (when not empty), else the
/// current directory, as [`resolve_workspace`] decides.
fn workspace_from(flag: bool, env: Option<&Path>) -> WorkspaceFrom {
    if flag {
        WorkspaceFrom::Flag
    } else if env.is_some_and(|p| !p.as_os_str().is_empty()) {
        WorkspaceFrom::Env
    } else {
        WorkspaceFrom::CurrentDir
    }
}

fn resolve_workspace(given: Option<PathBuf>, cwd: PathBuf) -> WorkspaceRoot {
    match given.filter(|p| !p.as_os_str().is_empty()) {
        Some(path) => WorkspaceRoot {
            display: python_path_display(&path),
            path,
        },
        None => WorkspaceRoot {
            display: cwd.display().to_string(),
            path: cwd,
        },
    }
}

/// Where `view` writes its page by default, relative to the workspace.
const VIEW_FILE: &str = crate::view::DEFAULT_PAGE;

/// `DIR/.evidence-store/store.redb`.
pub(crate) fn default_store(workspace: &Path) -> PathBuf {
    workspace.join(crate::store::WORKSPACE_STORE)
}

/// The help of the named subcommand path (`help dump lines`), exactly as `dump lines
/// --help` prints it; clap's usage error (exit 2) for an unknown name.
fn help_text(names: &[String]) -> String {
    let argv = std::iter::once("evidence-store")
        .chain(names.iter().map(String::as_str))
        .chain(std::iter::once("--help"));
    match Cli::try_parse_from(argv) {
        Err(e) if e.kind() == clap::error::ErrorKind::DisplayHelp => e.render().to_string(),
        Err(e) => e.exit(),
        Ok(_) => Cli::command().render_long_help().to_string(),
    }
}

/// The citation setting of a command: `--citations-json`, else, on the commands that
/// import (the only ones it changes), [`CITATIONS_JSON_ENV`] (empty: unset), else on.
/// `Err`: the message for a variable that is neither `on` nor `off`.
fn citations_setting(
    flag: Option<&str>,
    imports: bool,
    env: Option<OsString>,
) -> Result<crate::citations::Options, String> {
    if let Some(flag) = flag {
        return Ok(citation_options(flag));
    }
    match env.filter(|v| imports && !v.is_empty()) {
        None => Ok(crate::citations::Options::default()),
        Some(v) if v == "on" || v == "off" => Ok(citation_options(&v.to_string_lossy())),
        Some(v) => Err(format!(
            "the environment variable {CITATIONS_JSON_ENV}={:?} (which sets --citations-json, \
             whether JSON evidence blocks are read) is neither `on` nor `off`: set it to on or \
             off, or unset it (`unset {CITATIONS_JSON_ENV}`)",
            v.to_string_lossy()
        )),
    }
}

fn config(cli: Cli, env: Option<PathBuf>, cwd: PathBuf) -> Result<Config, String> {
    let workspace_from = workspace_from(
        cli.workspace
            .as_ref()
            .is_some_and(|p| !p.as_os_str().is_empty()),
        env.as_deref(),
    );
    let workspace = resolve_workspace(cli.workspace.or(env), cwd);
    let store = cli.store.unwrap_or_else(|| default_store(&workspace.path));
    let tool_output = match &cli.command {
        CliCommand::Serve { model } | CliCommand::Run { model, .. } => model.settings(),
        _ => ToolOutputSettings::default(),
    };
    let imports = matches!(
        cli.command,
        CliCommand::Import { .. }
            | CliCommand::Serve { .. }
            | CliCommand::Run { .. }
            | CliCommand::Build
    );
    let citations = citations_setting(
        cli.citations_json.as_deref(),
        imports,
        std::env::var_os(CITATIONS_JSON_ENV),
    )?;
    let command = match cli.command {
        CliCommand::Import { rehash, rebuild } => Command::Import { rehash, rebuild },
        CliCommand::Verify => Command::Verify,
        CliCommand::Serve { .. } => Command::Serve,
        CliCommand::Export => Command::Export,
        CliCommand::Build => Command::Build,
        CliCommand::View { out } => Command::View {
            out: out.unwrap_or_else(|| workspace.path.join(VIEW_FILE)),
        },
        CliCommand::Run { command, .. } => Command::Run { command },
        CliCommand::Help { command } => Command::Help {
            text: help_text(&command),
        },
        CliCommand::VerifyCitations {
            project_key,
            session_ref,
        } => Command::VerifyCitations {
            project_key,
            session_ref,
        },
        CliCommand::Dump(DumpArgs { json, stats, what }) => Command::Dump {
            json,
            target: match what {
                _ if stats => DumpTarget::Stats,
                what => what.unwrap_or(DumpTarget::Tables),
            },
        },
    };
    Ok(Config {
        workspace,
        workspace_from,
        store,
        command,
        tool_output,
        citations,
        locks: crate::util::wait::Locks::default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_from(args: &[&str], env: Option<&str>) -> Config {
        let cli = Cli::try_parse_from(args).expect("valid arguments");
        config(cli, env.map(PathBuf::from), PathBuf::from("/home/u/cwd")).expect("valid")
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

    #[test]
    fn run_takes_the_command_after_the_separator_verbatim() {
        let c = parse_from(
            &[
                "evidence-store",
                "run",
                "--workspace",
                "w",
                "--",
                "prompt-diary",
                "--help",
                "-x",
            ],
            None,
        );
        assert_eq!(c.workspace.display, "w");
        assert_eq!(
            c.command,
            Command::Run {
                command: ["prompt-diary", "--help", "-x"]
                    .map(OsString::from)
                    .to_vec()
            }
        );
        assert!(Cli::try_parse_from(["evidence-store", "run"]).is_err());
    }

    #[test]
    fn argv0_report_selects_the_shim_with_the_workspace_from_the_environment() {
        assert!(invoked_as_report("/tmp/x/report".as_ref()));
        assert!(invoked_as_report("report".as_ref()));
        assert!(!invoked_as_report("/usr/bin/evidence-store".as_ref()));
        assert!(!invoked_as_report("/report/evidence-store".as_ref()));
        let c = report_config(
            "report".into(),
            vec!["mcp".into(), "serve".into()],
            Some(PathBuf::from("/ws")),
            PathBuf::from("/cwd"),
        );
        assert_eq!(c.workspace.path, PathBuf::from("/ws"));
        assert_eq!(c.store, PathBuf::from("/ws/.evidence-store/store.redb"));
    }

    #[test]
    fn model_flags_reach_the_settings_and_the_environment_of_run() {
        let c = parse_from(
            &[
                "evidence-store",
                "serve",
                "--model-url",
                "http://127.0.0.1:9/v1",
                "--model",
                "m",
                "--model-api-key-env",
                "KEY_VAR",
                "--tool-output-max-chunks",
                "4",
            ],
            None,
        );
        let endpoint = c.tool_output.endpoint.clone().expect("an endpoint");
        assert_eq!(endpoint.base_url, "http://127.0.0.1:9/v1");
        assert_eq!(endpoint.model, "m");
        assert_eq!(endpoint.api_key_env.as_deref(), Some("KEY_VAR"));
        assert_eq!(c.tool_output.engine.max_chunks, 4);
        let env = settings_env(&c.tool_output);
        assert!(env.contains(&(MODEL_URL_ENV, "http://127.0.0.1:9/v1".to_string())));
        assert!(env.contains(&(MODEL_API_KEY_ENV_ENV, "KEY_VAR".to_string())));
        assert!(env.contains(&(MAX_CHUNKS_ENV, "4".to_string())));
        // A URL without a model name (or the reverse) is a usage error.
        assert!(
            Cli::try_parse_from(["evidence-store", "serve", "--model-url", "http://x"]).is_err()
        );
        assert!(
            Cli::try_parse_from(["evidence-store", "serve", "--tool-output-max-bytes", "100"])
                .is_err()
        );
        let plain = parse_from(&["evidence-store", "serve"], None);
        assert_eq!(plain.tool_output.endpoint, None);
        assert!(plain.citations.enable_json);
        let off = parse_from(
            &[
                "evidence-store",
                "run",
                "--citations-json",
                "off",
                "--",
                "x",
            ],
            None,
        );
        assert!(!off.citations.enable_json);
        assert_eq!(citations_env(off.citations), (CITATIONS_JSON_ENV, "off"));
    }
}
