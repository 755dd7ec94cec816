//! MCP sampling (`sampling/createMessage`) as a [`Model`]: the connected client's own model
//! answers the extraction prompts. Used only when the client declared the `sampling`
//! capability; tool use (read-grep) only when it also declared `sampling.tools`.
#![allow(deprecated)] // Sampling is deprecated in the newest MCP revision; clients still offer it.

use rmcp::RoleServer;
use rmcp::model::{
    CancelledNotification, CancelledNotificationParam, ClientResult, ContentBlock,
    CreateMessageRequest, CreateMessageRequestParams, RequestId, Role, SamplingMessage,
    SamplingMessageContentBlock, ServerRequest, Tool,
};
use rmcp::service::{Peer, PeerRequestOptions, ServiceError};

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
            let params = params(&request);
            if !self.tools && params.tools.is_some() {
                return Err(ModelError::Refused(
                    "the client does not support tool use in sampling".into(),
                ));
            }
            params.validate().map_err(ModelError::Refused)?;
            let sent = self
                .peer
                .send_cancellable_request(
                    ServerRequest::CreateMessageRequest(CreateMessageRequest::new(params)),
                    PeerRequestOptions::with_timeout(SAMPLING_TIMEOUT),
                )
                .await
                .map_err(|e| ModelError::Refused(e.to_string()))?;
            // Dropped before the answer (the call was cancelled or passed its deadline):
            // the client is told, so its model stops too.
            let guard = CancelOnDrop {
                peer: Some(self.peer.clone()),
                id: sent.id.clone(),
            };
            let answer = sent.await_response().await;
            guard.disarm();
            match answer {
                Ok(ClientResult::CreateMessageResult(result)) => Ok(reply(result.message)),
                Ok(_) => Err(ModelError::Answer(
                    "the client answered the sampling request with something else".into(),
                )),
                Err(ServiceError::Timeout { timeout }) => Err(ModelError::Transport(format!(
                    "timed out after {} s (the client did not answer the sampling request)",
                    timeout.as_secs()
                ))),
                Err(e) => Err(ModelError::Refused(e.to_string())),
            }
        })
    }
}

/// Sends `notifications/cancelled` for a sampling request dropped before its answer.
struct CancelOnDrop {
    peer: Option<Peer<RoleServer>>,
    id: RequestId,
}

impl CancelOnDrop {
    fn disarm(mut self) {
        self.peer = None;
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let Some(peer) = self.peer.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let notification = CancelledNotification::new(CancelledNotificationParam::new(
            Some(self.id.clone()),
            Some("the tool_output call ended".into()),
        ));
        runtime.spawn(async move {
            let _ = peer.send_notification(notification.into()).await;
        });
    }
}
