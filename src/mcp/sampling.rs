//! MCP sampling (`sampling/createMessage`) as a [`Model`]: the connected client's own model
//! answers the extraction prompts. Used only when the client declared the `sampling`
//! capability; tool use (read-grep) only when it also declared `sampling.tools`.
#![allow(deprecated)] // Sampling is deprecated in the newest MCP revision; clients still offer it.

use rmcp::RoleServer;
use rmcp::model::{
    ContentBlock, CreateMessageRequestParams, Role, SamplingMessage, SamplingMessageContentBlock,
    Tool,
};
use rmcp::service::Peer;

use crate::tool_output::model::{BoxFuture, Message, Model, ModelError, Reply, Request, ToolCall};

/// Longest the client may take to answer one sampling request.
const SAMPLING_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(300);

/// The client's model, reached through sampling requests on its connection.
pub struct Sampling {
    peer: Peer<RoleServer>,
    tools: bool,
}

impl Sampling {
    /// The client's sampling, if it declared the capability.
    pub fn of(peer: &Peer<RoleServer>) -> Option<Sampling> {
        let info = peer.peer_info()?;
        let sampling = info.capabilities.sampling.as_ref()?;
        Some(Sampling {
            peer: peer.clone(),
            tools: sampling.tools.is_some(),
        })
    }
}

/// The request as sampling parameters: consecutive tool results share one user message.
pub fn params(request: &Request) -> CreateMessageRequestParams {
    let mut messages: Vec<SamplingMessage> = Vec::new();
    let mut results: Vec<SamplingMessageContentBlock> = Vec::new();
    let flush = |messages: &mut Vec<SamplingMessage>, results: &mut Vec<_>| {
        if !results.is_empty() {
            messages.push(SamplingMessage::new_multiple(
                Role::User,
                std::mem::take(results),
            ));
        }
    };
    for m in &request.messages {
        match m {
            Message::User(text) => {
                flush(&mut messages, &mut results);
                messages.push(SamplingMessage::user_text(text.clone()));
            }
            Message::Assistant { text, tool_calls } => {
                flush(&mut messages, &mut results);
                let mut blocks = Vec::new();
                if !text.is_empty() || tool_calls.is_empty() {
                    blocks.push(SamplingMessageContentBlock::text(text.clone()));
                }
                for c in tool_calls {
                    let input = match &c.arguments {
                        serde_json::Value::Object(map) => map.clone(),
                        _ => serde_json::Map::new(),
                    };
                    blocks.push(SamplingMessageContentBlock::tool_use(
                        c.id.clone(),
                        c.name.clone(),
                        input,
                    ));
                }
                messages.push(SamplingMessage::new_multiple(Role::Assistant, blocks));
            }
            Message::ToolResult {
                call_id, content, ..
            } => results.push(SamplingMessageContentBlock::tool_result(
                call_id.clone(),
                vec![ContentBlock::text(content.clone())],
            )),
        }
    }
    flush(&mut messages, &mut results);
    let mut params = CreateMessageRequestParams::new(messages, request.max_tokens)
        .with_system_prompt(request.system.clone());
    if !request.tools.is_empty() {
        let tools = request
            .tools
            .iter()
            .map(|t| {
                let schema = match &t.input_schema {
                    serde_json::Value::Object(map) => map.clone(),
                    _ => serde_json::Map::new(),
                };
                Tool::new(t.name.clone(), t.description.clone(), schema)
            })
            .collect();
        params = params.with_tools(tools);
    }
    params
}

/// The client's answer as a [`Reply`]: text blocks joined, tool uses as calls.
pub fn reply(message: SamplingMessage) -> Reply {
    let mut out = Reply::default();
    for block in message.content.into_vec() {
        match block {
            SamplingMessageContentBlock::Text(t) => out.text.push_str(&t.text),
            SamplingMessageContentBlock::ToolUse(u) => out.tool_calls.push(ToolCall {
                id: u.id,
                name: u.name,
                arguments: serde_json::Value::Object(u.input),
            }),
            _ => {}
        }
    }
    out
}

impl Model for Sampling {
    fn supports_tools(&self) -> bool {
        self.tools
    }

    fn describe(&self) -> String {
        let name = self
            .peer
            .peer_info()
            .map(|i| i.client_info.name.clone())
            .unwrap_or_default();
        format!("MCP sampling of client {name:?}")
    }

    fn complete(&self, request: Request) -> BoxFuture<'_, Result<Reply, ModelError>> {
        Box::pin(async move {
            let call = self.peer.create_message(params(&request));
            let result = tokio::time::timeout(SAMPLING_TIMEOUT, call)
                .await
                .map_err(|_| {
                    ModelError::Transport(format!(
                        "the client did not answer the sampling request within {} s",
                        SAMPLING_TIMEOUT.as_secs()
                    ))
                })?
                .map_err(|e| ModelError::Refused(e.to_string()))?;
            Ok(reply(result.message))
        })
    }
}
