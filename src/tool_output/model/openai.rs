//! An OpenAI-compatible chat-completions endpoint (OpenAI, vLLM, llama.cpp's server, Ollama,
//! LiteLLM): `POST <base_url>/chat/completions`, with tools as `function` tools.
//!
//! The API key is read from an environment variable whose name is configured; its value is
//! sent only in the `Authorization` header and never logged or shown ([`Endpoint::describe`]
//! names the variable, not the value).

use std::time::Duration;

use serde_json::{Value, json};

use super::{BoxFuture, Message, Model, ModelError, Reply, Request, ToolCall};

/// Where the endpoint is and how to call it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointConfig {
    /// Base URL up to the API version, such as `http://127.0.0.1:11434/v1`.
    pub base_url: String,
    pub model: String,
    /// Name of the environment variable holding the API key; `None`: no key is sent.
    pub api_key_env: Option<String>,
    /// Longest one request may take.
    pub timeout: Duration,
}

/// Why an endpoint cannot be set up.
#[derive(Debug, thiserror::Error)]
pub enum EndpointError {
    #[error("the model endpoint URL {0:?} is not an http:// or https:// URL")]
    Url(String),
    #[error("the API-key variable {0} is not set or not valid UTF-8")]
    MissingKey(String),
    #[error("cannot build the HTTP client: {0}")]
    Client(String),
}

/// A configured endpoint.
pub struct Endpoint {
    config: EndpointConfig,
    url: String,
    key: Option<String>,
    client: reqwest::Client,
}

impl Endpoint {
    pub fn new(config: EndpointConfig) -> Result<Endpoint, EndpointError> {
        let base = config.base_url.trim_end_matches('/');
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(EndpointError::Url(config.base_url.clone()));
        }
        let url = format!("{base}/chat/completions");
        let key = match &config.api_key_env {
            Some(name) => Some(
                std::env::var(name)
                    .ok()
                    .filter(|v| !v.is_empty())
                    .ok_or_else(|| EndpointError::MissingKey(name.clone()))?,
            ),
            None => None,
        };
        let client = reqwest::Client::builder()
            .timeout(config.timeout)
            .build()
            .map_err(|e| EndpointError::Client(e.to_string()))?;
        Ok(Endpoint {
            config,
            url,
            key,
            client,
        })
    }

    /// The request body for `request`, as the endpoint receives it.
    pub fn body(&self, request: &Request) -> Value {
        request_body(&self.config.model, request)
    }
}

/// The chat-completions request body.
pub fn request_body(model: &str, request: &Request) -> Value {
    let mut messages = vec![json!({"role": "system", "content": request.system})];
    for m in &request.messages {
        messages.push(match m {
            Message::User(text) => json!({"role": "user", "content": text}),
            Message::Assistant { text, tool_calls } if tool_calls.is_empty() => {
                json!({"role": "assistant", "content": text})
            }
            Message::Assistant { text, tool_calls } => json!({
                "role": "assistant",
                "content": text,
                "tool_calls": tool_calls.iter().map(|c| json!({
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments.to_string()},
                })).collect::<Vec<_>>(),
            }),
            Message::ToolResult {
                call_id, content, ..
            } => json!({"role": "tool", "tool_call_id": call_id, "content": content}),
        });
    }
    let mut body = json!({
        "model": model,
        "messages": messages,
        "max_tokens": request.max_tokens,
    });
    if !request.tools.is_empty() {
        body["tools"] = request
            .tools
            .iter()
            .map(|t| {
                json!({"type": "function", "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.input_schema,
                }})
            })
            .collect();
    }
    body
}

/// Reads the first choice of a chat-completions answer.
pub fn parse_reply(answer: &Value) -> Result<Reply, ModelError> {
    let message = answer
        .pointer("/choices/0/message")
        .ok_or_else(|| ModelError::Answer("no choices[0].message".into()))?;
    let text = message
        .get("content")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let mut tool_calls = Vec::new();
    if let Some(calls) = message.get("tool_calls").and_then(Value::as_array) {
        for (i, call) in calls.iter().enumerate() {
            let name = call
                .pointer("/function/name")
                .and_then(Value::as_str)
                .ok_or_else(|| ModelError::Answer(format!("tool call {i} has no name")))?;
            let raw = call.pointer("/function/arguments");
            let arguments = match raw {
                Some(Value::String(s)) => {
                    serde_json::from_str(s).unwrap_or_else(|_| Value::String(s.clone()))
                }
                Some(v) => v.clone(),
                None => json!({}),
            };
            let id = call
                .get("id")
                .and_then(Value::as_str)
                .map_or_else(|| format!("call_{i}"), str::to_string);
            tool_calls.push(ToolCall {
                id,
                name: name.to_string(),
                arguments,
            });
        }
    }
    Ok(Reply { text, tool_calls })
}

impl Model for Endpoint {
    fn supports_tools(&self) -> bool {
        true
    }

    fn describe(&self) -> String {
        match &self.config.api_key_env {
            Some(name) => format!(
                "{} model {} (key from ${name})",
                self.url, self.config.model
            ),
            None => format!("{} model {}", self.url, self.config.model),
        }
    }

    fn complete(&self, request: Request) -> BoxFuture<'_, Result<Reply, ModelError>> {
        Box::pin(async move {
            let mut call = self.client.post(&self.url).json(&self.body(&request));
            if let Some(key) = &self.key {
                call = call.bearer_auth(key);
            }
            // reqwest's errors name the URL, never the headers, so the key stays out.
            let response = call
                .send()
                .await
                .map_err(|e| ModelError::Transport(e.to_string()))?;
            let status = response.status();
            let text = response
                .text()
                .await
                .map_err(|e| ModelError::Transport(e.to_string()))?;
            if !status.is_success() {
                let mut end = text.len().min(500);
                while !text.is_char_boundary(end) {
                    end -= 1;
                }
                let body = text[..end].to_string();
                return Err(ModelError::Status {
                    status: status.as_u16(),
                    body,
                });
            }
            let answer: Value =
                serde_json::from_str(&text).map_err(|e| ModelError::Answer(e.to_string()))?;
            parse_reply(&answer)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool_output::model::ToolDef;

    #[test]
    fn body_carries_tools_and_history() {
        let request = Request {
            system: "S".into(),
            messages: vec![
                Message::User("U".into()),
                Message::Assistant {
                    text: String::new(),
                    tool_calls: vec![ToolCall {
                        id: "c1".into(),
                        name: "Grep".into(),
                        arguments: json!({"file": "h", "pattern": "x"}),
                    }],
                },
                Message::ToolResult {
                    call_id: "c1".into(),
                    name: "Grep".into(),
                    content: "R".into(),
                },
            ],
            tools: vec![ToolDef {
                name: "Grep".into(),
                description: "D".into(),
                input_schema: json!({"type": "object"}),
            }],
            max_tokens: 7,
        };
        let expect = json!({
            "model": "m",
            "messages": [
                {"role": "system", "content": "S"},
                {"role": "user", "content": "U"},
                {"role": "assistant", "content": "", "tool_calls": [
                    {"id": "c1", "type": "function",
                     "function": {"name": "Grep", "arguments": "{\"file\":\"h\",\"pattern\":\"x\"}"}}
                ]},
                {"role": "tool", "tool_call_id": "c1", "content": "R"},
            ],
            "max_tokens": 7,
            "tools": [{"type": "function", "function": {
                "name": "Grep", "description": "D", "parameters": {"type": "object"}}}],
        });
        assert_eq!(request_body("m", &request), expect);
    }

    #[test]
    fn replies_parse_leniently() {
        let r = parse_reply(
            &json!({"choices": [{"message": {"content": null, "tool_calls": [
                {"id": "a", "function": {"name": "Read", "arguments": "{\"start_line\":1}"}},
                {"function": {"name": "Grep", "arguments": "not json"}}
            ]}}]}),
        )
        .unwrap();
        assert_eq!(r.text, "");
        assert_eq!(r.tool_calls[0].arguments, json!({"start_line": 1}));
        assert_eq!(r.tool_calls[1].id, "call_1");
        assert_eq!(r.tool_calls[1].arguments, json!("not json"));
        assert!(parse_reply(&json!({"error": "x"})).is_err());
    }

    #[test]
    fn bad_urls_and_missing_keys_are_errors() {
        let cfg = |url: &str, env: Option<&str>| EndpointConfig {
            base_url: url.into(),
            model: "m".into(),
            api_key_env: env.map(str::to_string),
            timeout: Duration::from_secs(1),
        };
        assert!(matches!(
            Endpoint::new(cfg("ftp://x", None)),
            Err(EndpointError::Url(_))
        ));
        assert!(matches!(
            Endpoint::new(cfg(
                "http://127.0.0.1:1/v1",
                Some("EVIDENCE_STORE_TEST_UNSET_KEY_VAR")
            )),
            Err(EndpointError::MissingKey(_))
        ));
        let e = Endpoint::new(cfg("http://127.0.0.1:1/v1/", None)).unwrap();
        assert_eq!(
            e.describe(),
            "http://127.0.0.1:1/v1/chat/completions model m"
        );
    }
}
