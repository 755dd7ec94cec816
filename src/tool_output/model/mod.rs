//! Where the extraction model comes from: one async trait, [`Model`], with three sources in
//! order of preference: the MCP client's sampling (implemented in the MCP adapter), an
//! OpenAI-compatible chat-completions endpoint ([`openai`]), or none at all.

pub mod openai;

use std::future::Future;
use std::pin::Pin;

/// A boxed future, so [`Model`] can be used as a trait object.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One tool the model may call.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolDef {
    pub name: String,
    pub description: String,
    /// JSON Schema of the tool's arguments.
    pub input_schema: serde_json::Value,
}

/// One tool call in a model answer.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    /// The model's id for the call, echoed in the result.
    pub id: String,
    pub name: String,
    /// The arguments as the model wrote them (a JSON object when well formed).
    pub arguments: serde_json::Value,
}

/// One message of a conversation after the system prompt.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    User(String),
    Assistant {
        text: String,
        tool_calls: Vec<ToolCall>,
    },
    ToolResult {
        call_id: String,
        name: String,
        content: String,
    },
}

/// One request to the model.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    pub system: String,
    pub messages: Vec<Message>,
    /// Empty: a plain completion.
    pub tools: Vec<ToolDef>,
    pub max_tokens: u32,
}

/// One model answer: its text and the tools it calls (none for a plain completion).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Reply {
    pub text: String,
    pub tool_calls: Vec<ToolCall>,
}

/// A context size the endpoint publishes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublishedContext {
    /// Tokens.
    pub tokens: usize,
    /// Where it was read, for the log.
    pub source: String,
    /// True when it is only the model's most (such as Ollama's `context_length`), not the
    /// size the server runs it with: then the configured size is used when smaller.
    pub limit_only: bool,
}

/// Why a model call failed; the extraction then falls back to truncate with this reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    #[error("model request failed: {0}")]
    Transport(String),
    #[error("model endpoint answered HTTP {status}: {body}")]
    Status { status: u16, body: String },
    /// The prompt did not fit the model's context; the numbers are the endpoint's, when it
    /// gave them.
    #[error("model endpoint answered HTTP {status}: {body}")]
    ContextExceeded {
        status: u16,
        body: String,
        n_prompt_tokens: Option<u64>,
        n_ctx: Option<u64>,
    },
    #[error("the model's reply is larger than {cap} bytes; it was not read further")]
    TooLarge { cap: usize },
    #[error("model answer could not be read: {0}")]
    Answer(String),
    #[error("the client refused the sampling request: {0}")]
    Refused(String),
}

/// A language model the extraction strategies can call.
pub trait Model: Send + Sync {
    /// Whether the model takes tool definitions and answers with tool calls (read-grep
    /// needs it).
    fn supports_tools(&self) -> bool;
    /// A short name for logs, never holding a secret.
    fn describe(&self) -> String;
    /// One completion.
    fn complete(&self, request: Request) -> BoxFuture<'_, Result<Reply, ModelError>>;
    /// The context size the model's server publishes, if any.
    fn published_context(&self) -> BoxFuture<'_, Option<PublishedContext>> {
        Box::pin(async { None })
    }
}
