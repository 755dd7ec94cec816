//! The MCP adapter: rmcp tool definitions that convert arguments into core requests and
//! core results into tool results. The only module that knows rmcp; it never sees redb.
//!
//! Results are the core's values as pretty-printed JSON text, exactly as prompt-diary's
//! server sends them; argument problems are `isError` results naming the argument.

pub mod args;
mod citations;
mod sampling;
mod schemas;
mod stdio;
pub mod tool_output;

pub use stdio::{DEPTH_MAX, IN_FLIGHT_MAX, STOP_GRACE};

use std::os::fd::AsFd;
use std::sync::{Arc, Mutex};

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::tool::ToolCallContext;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, CustomRequest,
    CustomResult, Extensions, GetPromptRequestParams, GetPromptResponse, Implementation,
    JsonObject, ListPromptsResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    PromptsCapability, ReadResourceRequestParams, ReadResourceResponse, ResourcesCapability,
    ServerCapabilities, ServerConfig, ToolsCapability,
};
use rmcp::schemars::{self, JsonSchema};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt, tool, tool_handler, tool_router};
use serde::{Deserialize, Serialize};
use tokio::sync::OnceCell;

use crate::read::pages::{Paging, RawCursor};
use crate::read::{Mode, ReadRequest};
use crate::service::Service;
use crate::util::stop_flag::{Stop, StopReason};
use args::{Arg, ArgErrors, Call};

const MODE_DESCRIPTION: &str = "Output verbosity. 'compact' (default) returns bounded structured records. \
'full' returns raw JSONL lines and can be very large, so use it only for a narrow line range where exact raw \
content is necessary.";

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(title = "prompt_diary_pingArguments")]
pub struct PingArgs {}

#[derive(JsonSchema)]
#[allow(
    dead_code,
    reason = "a schema only: the arguments are read by name (args::ArgErrors)"
)]
#[schemars(title = "read_session_linesArguments")]
pub struct ReadSessionLinesArgs {
    #[schemars(title = "Project Key")]
    project_key: Arg<String>,
    #[schemars(title = "Session Ref")]
    session_ref: Arg<String>,
    #[schemars(title = "Start Line")]
    start_line: Arg<i64>,
    #[schemars(title = "End Line")]
    end_line: Arg<i64>,
    #[serde(default)]
    #[schemars(title = "Mode", description = MODE_DESCRIPTION, extend("default" = "compact"))]
    mode: Arg<ModeArg>,
    /// The paged contract's continuation; its listed schema is 0.2.20's (`schemas.rs`).
    #[serde(default)]
    #[schemars(skip)]
    cursor: Arg<serde_json::Value>,
}

#[derive(JsonSchema)]
#[allow(
    dead_code,
    reason = "a schema only: the arguments are read by name (args::ArgErrors)"
)]
#[schemars(title = "write_evidenceArguments")]
pub struct WriteEvidenceArgs {
    #[schemars(title = "Project Key")]
    project_key: Arg<String>,
    #[schemars(title = "Session Ref")]
    session_ref: Arg<String>,
    #[schemars(title = "Evidence Chain")]
    evidence_chain: Arg<args::JsonObject>,
}

#[derive(JsonSchema)]
#[allow(
    dead_code,
    reason = "a schema only: the arguments are read by name (args::ArgErrors)"
)]
#[schemars(title = "write_work_itemArguments")]
pub struct WriteWorkItemArgs {
    #[schemars(title = "Project Key")]
    project_key: Arg<String>,
    #[schemars(title = "Work Item")]
    work_item: Arg<args::JsonObject>,
}

#[derive(JsonSchema)]
#[allow(
    dead_code,
    reason = "a schema only: the arguments are read by name (args::ArgErrors)"
)]
#[schemars(title = "write_project_summaryArguments")]
pub struct WriteProjectSummaryArgs {
    #[schemars(title = "Project Key")]
    project_key: Arg<String>,
    #[schemars(title = "Summary")]
    summary: Arg<args::JsonObject>,
}

#[derive(JsonSchema)]
#[allow(
    dead_code,
    reason = "a schema only: the arguments are read by name (args::ArgErrors)"
)]
#[schemars(title = "write_report_titleArguments")]
pub struct WriteReportTitleArgs {
    #[schemars(title = "Title")]
    title: Arg<args::JsonObject>,
}

#[derive(JsonSchema)]
#[allow(
    dead_code,
    reason = "a schema only: the arguments are read by name (args::ArgErrors)"
)]
#[schemars(title = "write_engagementArguments")]
pub struct WriteEngagementArgs {
    #[schemars(title = "Overall Reading")]
    overall_reading: Arg<args::JsonObject>,
    #[schemars(title = "Observations")]
    observations: Arg<Vec<serde_json::Value>>,
    #[schemars(title = "Limits")]
    limits: Arg<Vec<serde_json::Value>>,
}

#[derive(JsonSchema)]
#[allow(
    dead_code,
    reason = "a schema only: the arguments are read by name (args::ArgErrors)"
)]
#[schemars(title = "write_team_learningArguments")]
pub struct WriteTeamLearningArgs {
    #[schemars(title = "Takeaways")]
    takeaways: Arg<args::JsonObject>,
    #[schemars(title = "Patterns")]
    patterns: Arg<Vec<serde_json::Value>>,
    #[schemars(title = "Limits")]
    limits: Arg<Vec<serde_json::Value>>,
}

/// `read_session_lines`'s `mode` as the schema shows it.
#[derive(Debug, Clone, Copy, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum ModeArg {
    Compact,
    Full,
}

/// Builds the service on first use, off the async runtime; until then the server can
/// already answer `initialize` and `tools/list`.
struct Lazy {
    cell: OnceCell<Arc<Service>>,
    start: Mutex<Option<Box<dyn FnOnce() -> Service + Send>>>,
    /// Held by a start's blocking work while it runs: a service nobody waits for any more
    /// is dropped (its store closed) there, when the start ends.
    starting: Arc<()>,
}

impl Lazy {
    async fn get(&self) -> Result<Arc<Service>, ErrorData> {
        self.cell
            .get_or_try_init(|| async {
                let start = self.start.lock().ok().and_then(|mut s| s.take());
                let start = start.ok_or_else(|| {
                    ErrorData::internal_error("service start failed earlier", None)
                })?;
                let starting = self.starting.clone();
                // Returned beside the service, so that a service nobody takes is dropped
                // before the hold is.
                tokio::task::spawn_blocking(move || (Arc::new(start()), starting))
                    .await
                    .map(|(service, _starting)| service)
                    .map_err(|e| {
                        ErrorData::internal_error(format!("service start panicked: {e}"), None)
                    })
            })
            .await
            .cloned()
    }
}

/// The MCP server: prompt-diary's tools over a [`Service`].
#[derive(Clone)]
pub struct Server {
    service: Arc<Lazy>,
    tool_router: ToolRouter<Server>,
    /// Streams a read's text to this server's own stdio ([`stdio::Streamer`]).
    streamer: Option<stdio::Streamer>,
    /// Set when the input ended and the grace for the work in flight is over: every
    /// call's work stops.
    ended: Stop,
}

/// Watches one call for its cancel and the end of input, setting its stop flag; the watch
/// ends when this is dropped.
struct Watch(tokio::task::JoinHandle<()>);

impl Drop for Watch {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Server {
    /// `start` builds the service (opening and importing the store); it runs on a
    /// blocking thread when the first tool call, or [`Server::warm_up`], needs it.
    pub fn new(start: impl FnOnce() -> Service + Send + 'static) -> Self {
        Server {
            service: Arc::new(Lazy {
                cell: OnceCell::new(),
                start: Mutex::new(Some(Box::new(start))),
                starting: Arc::new(()),
            }),
            tool_router: Self::tool_router()
                + Self::citation_router()
                + Self::tool_output_router()
                + Self::tool_output_text_router(),
            streamer: None,
            ended: Stop::new(),
        }
    }

    /// Sets `stop` when `cancelled` resolves (the call's cancel) or the input ends, until
    /// the returned watch is dropped.
    fn watch(
        &self,
        cancelled: impl std::future::Future<Output = ()> + Send + 'static,
        stop: &Stop,
    ) -> Watch {
        let (stop, ended) = (stop.clone(), self.ended.clone());
        Watch(tokio::spawn(async move {
            tokio::select! {
                () = cancelled => stop.set(StopReason::Cancelled),
                () = ended.wait() => stop.set(ended.reason().unwrap_or(StopReason::EndOfInput)),
                () = stop.wait() => {}
            }
        }))
    }

    /// Starts building the service now, in the background.
    pub fn warm_up(&self) {
        let service = self.service.clone();
        tokio::spawn(async move { service.get().await.map(|_| ()) });
    }

    /// Runs a blocking core call on the blocking pool.
    async fn call<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Service) -> T + Send + 'static,
    ) -> Result<T, ErrorData> {
        let service = self.service.get().await?;
        tokio::task::spawn_blocking(move || f(&service))
            .await
            .map_err(|e| ErrorData::internal_error(format!("tool panicked: {e}"), None))
    }
}

/// A normal result: the value as 2-space pretty JSON text (prompt-diary's encoding).
fn text_result<T: Serialize>(value: &T) -> Result<CallToolResult, ErrorData> {
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| ErrorData::internal_error(format!("cannot encode result: {e}"), None))?;
    Ok(CallToolResult::success(vec![ContentBlock::text(text)]))
}

/// An argument problem, reported the way prompt-diary's server reports it.
fn argument_error(tool: &str, message: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(format!(
        "Error executing tool {tool}: {message}"
    ))])
}

/// The result refusing a call's arguments in pydantic's words, as prompt-diary's server
/// answers before its tool runs (so whatever the workspace's state); `None` when they
/// were fine.
fn refuse(tool: &str, errors: ArgErrors) -> Option<CallToolResult> {
    errors
        .into_message(tool)
        .map(|message| argument_error(tool, message))
}

fn ping_output_schema() -> Arc<JsonObject> {
    let schema = serde_json::json!({
        "additionalProperties": {"type": "string"},
        "title": "prompt_diary_pingDictOutput",
        "type": "object"
    });
    match schema {
        serde_json::Value::Object(map) => Arc::new(map),
        _ => Arc::new(JsonObject::new()),
    }
}

#[tool_router]
impl Server {
    #[tool(
        description = "Return stable boilerplate data for MCP connectivity checks.",
        output_schema = ping_output_schema(),
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn prompt_diary_ping(
        &self,
        _: Parameters<PingArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let ping = self.call(|service| service.ping()).await?;
        let mut result = text_result(&ping)?;
        result.structured_content = serde_json::to_value(&ping).ok();
        Ok(result)
    }

    #[tool(
        description = "Validate and append one evidence chain from the resolved prepared workspace.",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn write_evidence(
        &self,
        extensions: Extensions,
        Parameters(call): Parameters<Call<WriteEvidenceArgs>>,
    ) -> Result<CallToolResult, ErrorData> {
        let mut errors = call.errors(&extensions);
        let project_key = errors.string("project_key");
        let session_ref = errors.string("session_ref");
        let chain = errors.object("evidence_chain");
        if let Some(refusal) = refuse("write_evidence", errors) {
            return Ok(refusal);
        }
        let result = self
            .call(move |service| service.write_evidence(&project_key, &session_ref, &chain))
            .await?;
        text_result(&result)
    }

    #[tool(
        description = "Validate and append one work item from the resolved prepared workspace.",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn write_work_item(
        &self,
        extensions: Extensions,
        Parameters(call): Parameters<Call<WriteWorkItemArgs>>,
    ) -> Result<CallToolResult, ErrorData> {
        let mut errors = call.errors(&extensions);
        let project_key = errors.string("project_key");
        let item = errors.object("work_item");
        if let Some(refusal) = refuse("write_work_item", errors) {
            return Ok(refusal);
        }
        let result = self
            .call(move |service| service.write_work_item(&project_key, &item))
            .await?;
        text_result(&result)
    }

    #[tool(
        description = "Validate and patch one project's daily-report summary slot from the resolved workspace.",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn write_project_summary(
        &self,
        extensions: Extensions,
        Parameters(call): Parameters<Call<WriteProjectSummaryArgs>>,
    ) -> Result<CallToolResult, ErrorData> {
        let mut errors = call.errors(&extensions);
        let project_key = errors.string("project_key");
        let summary = errors.object("summary");
        if let Some(refusal) = refuse("write_project_summary", errors) {
            return Ok(refusal);
        }
        let result = self
            .call(move |service| service.write_project_summary(&project_key, &summary))
            .await?;
        text_result(&result)
    }

    #[tool(
        description = "Validate and patch the daily-report title slot from the resolved workspace.",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn write_report_title(
        &self,
        extensions: Extensions,
        Parameters(call): Parameters<Call<WriteReportTitleArgs>>,
    ) -> Result<CallToolResult, ErrorData> {
        let mut errors = call.errors(&extensions);
        let title = errors.object("title");
        if let Some(refusal) = refuse("write_report_title", errors) {
            return Ok(refusal);
        }
        let result = self
            .call(move |service| service.write_report_title(&title))
            .await?;
        text_result(&result)
    }

    #[tool(
        description = "Validate and patch the daily-report engagement slot from the resolved workspace.",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn write_engagement(
        &self,
        extensions: Extensions,
        Parameters(call): Parameters<Call<WriteEngagementArgs>>,
    ) -> Result<CallToolResult, ErrorData> {
        let mut errors = call.errors(&extensions);
        let overall = errors.object("overall_reading");
        let observations = errors.array("observations");
        let limits = errors.array("limits");
        if let Some(refusal) = refuse("write_engagement", errors) {
            return Ok(refusal);
        }
        let result = self
            .call(move |service| service.write_engagement(&overall, &observations, &limits))
            .await?;
        text_result(&result)
    }

    #[tool(
        description = "Validate and patch the daily-report team-learning slot from the resolved workspace.",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn write_team_learning(
        &self,
        extensions: Extensions,
        Parameters(call): Parameters<Call<WriteTeamLearningArgs>>,
    ) -> Result<CallToolResult, ErrorData> {
        let mut errors = call.errors(&extensions);
        let takeaways = errors.object("takeaways");
        let patterns = errors.array("patterns");
        let limits = errors.array("limits");
        if let Some(refusal) = refuse("write_team_learning", errors) {
            return Ok(refusal);
        }
        let result = self
            .call(move |service| service.write_team_learning(&takeaways, &patterns, &limits))
            .await?;
        text_result(&result)
    }

    #[tool(
        description = "Read a physical line range from one indexed session in the resolved prepared workspace.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn read_session_lines(
        &self,
        context: RequestContext<RoleServer>,
        Parameters(call): Parameters<Call<ReadSessionLinesArgs>>,
    ) -> Result<CallToolResult, ErrorData> {
        let mut errors = call.errors(&context.extensions);
        let request = ReadRequest {
            project_key: errors.string("project_key"),
            session_ref: errors.string("session_ref"),
            start_line: errors.integer("start_line"),
            end_line: errors.integer("end_line"),
            mode: match errors.literal(
                "mode",
                &[("compact", ModeArg::Compact), ("full", ModeArg::Full)],
            ) {
                Some(ModeArg::Full) => Mode::Full,
                Some(ModeArg::Compact) | None => Mode::Compact,
            },
        };
        // The paged contract takes a cursor (and answers one page, sent whole).
        // Decided once, here: the service answers under the same decision.
        let service = self.service.get().await?;
        let paged = service.contract().rules().paged_reads;
        let paging = if paged {
            Paging::Page(
                errors
                    .cursor()
                    .map(|(line, offset)| RawCursor { line, offset }),
            )
        } else {
            Paging::Unpaged
        };
        if let Some(refusal) = refuse("read_session_lines", errors) {
            return Ok(refusal);
        }
        // Made on the blocking pool: a 2000-line answer is over a megabyte. Over this
        // server's stdio an unpaged read is streamed: the transport sends the message up
        // to the text at once, then each piece as it is printed, overlapping the making,
        // the writing and the client's reading. Elsewhere the text is kept whole.
        let stream = match &self.streamer {
            Some(streamer) if !paged => streamer.stream(&context.id),
            _ => None,
        };
        let text = match stream {
            Some((text, mut sender)) => {
                tokio::task::spawn_blocking(move || {
                    service.read(&request, paging, &mut sender);
                    sender.finish();
                });
                text
            }
            None => {
                self.call(move |service| {
                    let mut text = String::new();
                    service.read(&request, paging, &mut text);
                    text
                })
                .await?
            }
        };
        Ok(CallToolResult::success(vec![ContentBlock::text(text)]))
    }
}

#[tool_handler]
impl ServerHandler for Server {
    /// prompt-diary's capabilities: tools, and resources and prompts (it has none of
    /// either, and lists them empty), none of whose lists ever change.
    fn get_info(&self) -> ServerConfig {
        let mut capabilities = ServerCapabilities::builder()
            .enable_experimental()
            .enable_prompts()
            .enable_resources()
            .enable_tools()
            .build();
        let mut prompts = PromptsCapability::default();
        prompts.list_changed = Some(false);
        let mut resources = ResourcesCapability::default();
        resources.subscribe = Some(false);
        resources.list_changed = Some(false);
        let mut tools = ToolsCapability::default();
        tools.list_changed = Some(false);
        capabilities.prompts = Some(prompts);
        capabilities.resources = Some(resources);
        capabilities.tools = Some(tools);
        ServerConfig::new(capabilities).with_server_info(Implementation::new(
            "evidence-store",
            env!("CARGO_PKG_VERSION"),
        ))
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        Ok(ListResourcesResult::with_all_items(Vec::new()))
    }

    /// No resource exists: resource-not-found (-32002), naming the URI.
    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        Err(ErrorData::resource_not_found(
            format!(
                "Unknown resource: {} (this server has no resources; resources/list is empty)",
                request.uri
            ),
            Some(serde_json::json!({"uri": request.uri})),
        ))
    }

    /// No prompt exists: invalid params (-32602), naming the prompt.
    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        Err(ErrorData::invalid_params(
            format!(
                "Unknown prompt: {} (this server has no prompts; prompts/list is empty)",
                request.name
            ),
            None,
        ))
    }

    /// A request rmcp could not read as its method's: for a method MCP defines, its
    /// params are wrong (invalid params, -32602, saying what is wrong and what the method
    /// takes); any other method is not found (-32601).
    async fn on_custom_request(
        &self,
        request: CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        match args::params_problem(&request.method, request.params) {
            Some(problem) => Err(ErrorData::invalid_params(problem, None)),
            None => Err(ErrorData::new(
                rmcp::model::ErrorCode::METHOD_NOT_FOUND,
                format!("Method not found: {}", request.method),
                None,
            )),
        }
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        Ok(ListPromptsResult::with_all_items(Vec::new()))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let contract = self.service.get().await?.contract();
        let tools = schemas::listed(self.tool_router.list_all(), contract).map_err(|e| {
            ErrorData::internal_error(format!("cannot read the listed schemas: {e}"), None)
        })?;
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if !self.tool_router.has_route(&request.name) {
            let unknown = CallToolResult::error(vec![ContentBlock::text(format!(
                "Unknown tool: {}",
                request.name
            ))]);
            return Ok(CallToolResponse::Complete(unknown));
        }
        // Over this server's stdio, a call cancelled before its work started does none
        // (nobody waits for it), and a started one keeps its slot until it ends.
        let _running = match &self.streamer {
            Some(streamer) => match streamer.begin(&context.id) {
                Some(running) => Some(running),
                None => {
                    return Err(ErrorData::invalid_request(
                        "the request was cancelled",
                        None,
                    ));
                }
            },
            None => None,
        };
        let context = ToolCallContext::new(self, request, context);
        self.tool_router.call(context).await
    }
}

/// Why serving stopped with a failure.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot set up stdio: {0}")]
    Io(#[from] std::io::Error),
    #[error("the MCP session could not start: {0}")]
    Initialize(Box<rmcp::service::ServerInitializeError>),
    #[error("the MCP session ended abnormally: {0}")]
    Session(#[from] tokio::task::JoinError),
    #[error("stdout failed before every answer was written")]
    OutputFailed,
    #[error(
        "stdin closed while {0} request(s) were still running or waiting; they were cancelled unanswered"
    )]
    Abandoned(usize),
}

impl From<rmcp::service::ServerInitializeError> for ServeError {
    fn from(e: rmcp::service::ServerInitializeError) -> Self {
        ServeError::Initialize(Box::new(e))
    }
}

/// The service a server made, kept past the end of serving so that it is dropped (and
/// its store closed, which redb marks clean) only once no call's work holds it any more.
pub struct Held(Arc<Lazy>);

impl Held {
    /// Once the runtime that served is shut down: waits, at most `within`, until neither a
    /// start nor a call's work on the blocking pool holds the service, then drops it.
    /// False when work still held it at the bound (it is then left to the process's exit,
    /// and the store to the next open's repair).
    pub fn close(self, within: std::time::Duration) -> bool {
        let deadline = std::time::Instant::now() + within;
        let waited = || {
            let going = std::time::Instant::now() < deadline;
            if going {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            going
        };
        // A start still running drops the service it makes when it ends.
        while Arc::strong_count(&self.0.starting) > 1 {
            if !waited() {
                return false;
            }
        }
        let Ok(lazy) = Arc::try_unwrap(self.0) else {
            return false;
        };
        let Some(mut service) = lazy.cell.into_inner() else {
            return true;
        };
        loop {
            match Arc::try_unwrap(service) {
                Ok(service) => {
                    drop(service);
                    return true;
                }
                Err(shared) if waited() => service = shared,
                Err(_) => return false,
            }
        }
    }
}

/// Serves MCP over this process's stdin and stdout (see `stdio.rs`) until the client
/// disconnects or `shutdown` resolves (a signal: every call's work is told to stop); call
/// it inside the runtime that serves. Returns the service with the outcome, for
/// [`Held::close`] once that runtime is shut down.
pub async fn serve_stdio(
    shutdown: impl std::future::Future<Output = ()>,
    start: impl FnOnce() -> Service + Send + 'static,
) -> (Result<(), ServeError>, Option<Held>) {
    let mut held = None;
    let served = serve_stdio_holding(shutdown, start, &mut held).await;
    (served, held)
}

async fn serve_stdio_holding(
    shutdown: impl std::future::Future<Output = ()>,
    start: impl FnOnce() -> Service + Send + 'static,
    held: &mut Option<Held>,
) -> Result<(), ServeError> {
    // Written through its own descriptor: unbuffered, and apart from anything that might
    // print to `std::io::stdout` (nothing should; logs go to stderr).
    let stdout = std::fs::File::from(std::io::stdout().as_fd().try_clone_to_owned()?);
    // A pipe (as clients start servers) of 1 MiB, Linux's default most, takes a large
    // answer while the client reads it, instead of stopping the writer every 64 KiB
    // (measured: 0.5-0.9 ms less per 2000-line read). Not a pipe, or not allowed: as is.
    #[cfg(target_os = "linux")]
    if let Err(e) = rustix::pipe::fcntl_setpipe_size(&stdout, 1 << 20) {
        tracing::debug!(error = %e, "stdout keeps its buffer size");
    }
    let stdin = std::fs::File::from(std::io::stdin().as_fd().try_clone_to_owned()?);
    let transport = stdio::Stdio::new(stdin, stdout)?;
    let output_failed = transport.output_failed();
    let abandoned = transport.abandoned();
    let mut server = Server::new(start);
    server.streamer = Some(transport.streamer());
    server.ended = transport.ended();
    *held = Some(Held(server.service.clone()));
    run(server, transport, shutdown).await?;
    if output_failed() {
        return Err(ServeError::OutputFailed);
    }
    match abandoned() {
        0 => Ok(()),
        n => Err(ServeError::Abandoned(n)),
    }
}

async fn run<T, E, A>(
    server: Server,
    transport: T,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), ServeError>
where
    T: rmcp::transport::IntoTransport<RoleServer, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    server.warm_up();
    let ended = server.ended.clone();
    let running = server.serve(transport).await?;
    // Once the input ended and its grace is over, every call's work is stopped; what has
    // not ended [`STOP_GRACE`] later is dropped, without waiting for rmcp's own drain.
    let stopped = async {
        ended.wait().await;
        tokio::time::sleep(STOP_GRACE).await;
    };
    tokio::select! {
        quit = running.waiting() => { quit?; }
        () = shutdown => {
            // Every call's work stops at its next safe point (a write finishes or drops
            // its transaction); what has ended is then closed by the caller.
            tracing::info!("stopping: every call is told to stop");
            ended.set(StopReason::Interrupted);
        }
        () = stopped => { tracing::warn!("the input ended; work still running is dropped"); }
    }
    Ok(())
}
