//! `serve`: the MCP server on stdin/stdout, on its own bounded runtime.

use std::process::ExitCode;

use anyhow::Context;

use crate::cli::args::Config;
use crate::cli::signals;
use crate::mcp;
use crate::service::Service;
use crate::tool_output::service::ToolOutput;
use crate::util::stop;

/// Stack of the async runtime's threads (workers and blocking pool).
const TASK_STACK_BYTES: usize = 4 << 20;

/// How long `serve` waits, once it has stopped serving, for its tasks to end (they were
/// told to stop; within the end of input's grace).
const SHUTDOWN_GRACE: std::time::Duration = mcp::STOP_GRACE;

/// How long `serve`, its serving over, waits for the work still running on the blocking
/// pool (told to stop: a write finishing its commit, a read at its next piece) to let the
/// store go, so that it is closed cleanly.
const CLOSE_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

pub(crate) fn run_serve(config: Config) -> anyhow::Result<ExitCode> {
    say_what_is_served(&config);
    let missing = !config.workspace.path.is_dir();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        // Tool arguments nest up to `mcp::DEPTH_MAX` levels, and converting or dropping
        // them recurses once per level, on these threads too (measured: a 990-level
        // argument needs well under this in a debug build). Smaller than the stdio
        // threads' `mcp::STACK_BYTES`: there are up to 20 of these, and each stack is
        // address space reserved whether used or not.
        .thread_stack_size(TASK_STACK_BYTES)
        // Each request in flight runs at most one blocking task (its tool call, or a
        // streamed text's maker), plus the service's start and the handle scan: more
        // threads would only reserve more memory (each one a stack of STACK_BYTES).
        .max_blocking_threads(mcp::IN_FLIGHT_MAX + 2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let Config {
        workspace,
        store,
        tool_output,
        citations,
        locks,
        ..
    } = config;
    let endpoint = match &tool_output.endpoint {
        Some(endpoint) => {
            let built =
                crate::tool_output::model::openai::Endpoint::new(endpoint.clone(), |name| {
                    std::env::var(name).ok()
                })
                .context("cannot set up the tool_output model endpoint")?;
            tracing::info!(
                endpoint = crate::tool_output::model::Model::describe(&built),
                "tool_output model endpoint"
            );
            Some(built)
        }
        None => None,
    };
    let config = crate::service::Config {
        workspace,
        store,
        import: crate::import::ImportOptions {
            rehash: false,
            citations,
        },
        tool_output: ToolOutput::new(tool_output.engine, endpoint),
        locks,
        disk: crate::util::disk::Disk::real(),
    };
    // SIGINT, SIGTERM and SIGHUP (a client such as Codex ends each server it started
    // with SIGTERM) stop the serving: every call is told to stop, and the store is
    // closed once their work has let it go.
    let asked = std::sync::Arc::new(tokio::sync::Notify::new());
    let wake = asked.clone();
    if let Err(e) = signals::watch_with(move |_| wake.notify_one()) {
        tracing::warn!(%e, "signals will stop this server without closing the store");
    }
    let (served, held) = runtime.block_on(async move {
        let shutdown = async move { asked.notified().await };
        mcp::serve_stdio(shutdown, move || {
            let service = Service::new(config);
            // A client shows a server that started as connected, whatever its workspace:
            // say plainly on stderr (its log) that this one answers nothing useful.
            // (A start a signal stopped is not the workspace's fault.)
            if let Some(problem) = service.unavailable()
                && stop::requested().is_none()
            {
                eprintln!("{}", unavailable_warning(&problem, missing));
            }
            service
        })
        .await
    });
    // Work still running (a model or a sampling client that never answers, a blocking
    // read) is not waited for past this: the tasks are dropped, the threads left to the
    // process's exit.
    runtime.shutdown_timeout(SHUTDOWN_GRACE);
    let closed = held.is_none_or(|held| held.close(CLOSE_WAIT));
    if !closed {
        tracing::warn!("work still running held the store; it was not closed");
    }
    if let Some(signal) = stop::requested() {
        return Ok(signals::interrupted_serve(signal, closed));
    }
    served.map_err(no_client_hint)?;
    Ok(ExitCode::SUCCESS)
}

/// Where the README says how a client starts `serve`.
const CONNECT_A_CLIENT: &str = "README.md, \"Connect a client\"";

/// `serve`'s first words on stderr, said at once: the workspace it serves and the day it
/// prepares (so a client's MCP log shows which day this server answers for), or that the
/// directory does not exist; and, when a person typed `serve` at a terminal, what it is.
/// (A workspace whose `metadata.json` does not load is named by the warning that follows.)
fn say_what_is_served(config: &Config) {
    let root = &config.workspace;
    if !root.path.is_dir() {
        eprintln!(
            "evidence-store serve: WARNING: {}",
            crate::cli::app::missing_workspace(config)
        );
    } else if let Ok((contract, metadata)) = crate::workspace::load::load_metadata(root) {
        let absolute = |p: &std::path::Path| {
            std::path::absolute(p)
                .map_or_else(|_| p.display().to_string(), |p| p.display().to_string())
        };
        eprintln!(
            "evidence-store serve: workspace {}, report date {} (prompt-diary {}), store {}",
            absolute(&root.path),
            metadata.report_date,
            contract.release(),
            absolute(&config.store)
        );
    }
    if std::io::IsTerminal::is_terminal(&std::io::stdin()) {
        eprintln!(
            "evidence-store serve: this is an MCP server, for an MCP client (Claude Code, Codex, \
             the MCP Inspector) to start: it reads JSON-RPC messages on stdin, so typed lines get \
             JSON-RPC errors. To connect a client, see {CONNECT_A_CLIENT}. Ctrl-D or Ctrl-C \
             ends it."
        );
    }
}

/// A session that ended before any client's `initialize` (stdin closed, or Ctrl-D at a
/// terminal) says that `serve` waits for a client.
fn no_client_hint(e: crate::mcp::ServeError) -> anyhow::Error {
    match e {
        crate::mcp::ServeError::Initialize(_) => anyhow::Error::new(e).context(format!(
            "no MCP client spoke to this server (`serve` is started by one; see \
             {CONNECT_A_CLIENT})"
        )),
        e => e.into(),
    }
}

/// The warning `serve` prints when its workspace cannot be served; for a directory that
/// does not exist, its first line was said already.
fn unavailable_warning(problem: &str, missing: bool) -> String {
    let first = if missing {
        String::new()
    } else {
        format!("evidence-store serve: WARNING: {problem}\n")
    };
    format!(
        "{first}evidence-store serve: every tool, prompt_diary_ping included, answers \
         \"unavailable\" with this problem; give --workspace (or PROMPT_DIARY_WORKSPACE) a \
         workspace `prompt-diary prepare` made (<reports root>/work/<date>)"
    )
}
