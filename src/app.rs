//! Runs one command. The CLI edge: errors here are `anyhow`, printed once by `main`.

use std::process::ExitCode;

use anyhow::{Context, bail};
use tracing_subscriber::EnvFilter;

use crate::cli::{Command, Config};
use crate::import::{self, ImportOptions, ImportReport};
use crate::progress::Bar;
use crate::service::Service;
use crate::store::Store;
use crate::{dump, mcp};

pub fn run(config: Config) -> anyhow::Result<ExitCode> {
    init_tracing();
    match &config.command {
        Command::Import { rehash } => run_import(&config, *rehash),
        Command::Dump { json, target } => {
            if !config.store.exists() {
                bail!(
                    "no store at {}: run `evidence-store import` first",
                    config.store.display()
                );
            }
            let store = Store::open(&config.store)?;
            let value = dump::dump(&store.reader()?, target)?;
            if *json {
                println!("{}", serde_json::to_string_pretty(&value)?);
            } else {
                print!("{}", dump::to_text(&value));
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Serve => run_serve(config),
        Command::Build => {
            if !config.store.exists() {
                bail!(
                    "no store at {}: run `evidence-store import` first",
                    config.store.display()
                );
            }
            let service = Service::start(config.workspace.clone(), &config.store);
            let built = service.build().map_err(|e| {
                anyhow::anyhow!("build failed; daily-report.json is unchanged: {e}")
            })?;
            let kept = if built.preserved.is_empty() {
                "none".to_owned()
            } else {
                built.preserved.join(", ")
            };
            println!(
                "built daily-report.json: {} project(s), {} work item(s); kept from the previous report: {kept}",
                built.projects, built.work_items
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Export => {
            if !config.store.exists() {
                bail!(
                    "no store at {}: run `evidence-store import` first",
                    config.store.display()
                );
            }
            let store = Store::open(&config.store)?;
            let report = crate::documents::export(&store, &config.workspace.path)?;
            println!(
                "exported {} file(s) ({} already current), removed {} stale temp file(s)",
                report.written, report.unchanged, report.temp_files_removed
            );
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Logs go to stderr (stdout belongs to MCP in `serve`), filtered by `RUST_LOG`.
fn init_tracing() {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .try_init();
}

fn run_import(config: &Config, rehash: bool) -> anyhow::Result<ExitCode> {
    let store = Store::open(&config.store)?;
    let report = import::import(
        &config.workspace,
        &store,
        ImportOptions { rehash },
        &Bar::new("import"),
    )
    .with_context(|| {
        format!(
            "import of {} failed; the store is unchanged",
            config.workspace.path.display()
        )
    })?;
    println!("{}", summary(&report));
    Ok(ExitCode::SUCCESS)
}

fn summary(r: &ImportReport) -> String {
    format!(
        "imported {} project(s), {} session(s): {} file(s) indexed ({:.1} MiB, {} lines), {} unchanged, {} missing; {} document(s)",
        r.projects,
        r.sessions,
        r.files_indexed,
        r.bytes_indexed as f64 / (1 << 20) as f64,
        r.lines_indexed,
        r.files_unchanged,
        r.files_missing,
        r.documents
    )
}

fn run_serve(config: Config) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        // Tool arguments nest up to `mcp::DEPTH_MAX` levels, and converting or dropping
        // them recurses once per level, on these threads too.
        .thread_stack_size(mcp::STACK_BYTES)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let Config {
        workspace, store, ..
    } = config;
    runtime.block_on(async move {
        let shutdown = async {
            let _ = tokio::signal::ctrl_c().await;
        };
        mcp::serve_stdio(shutdown, move || Service::start(workspace, &store)).await
    })?;
    Ok(ExitCode::SUCCESS)
}
