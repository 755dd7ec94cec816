//! An OpenAI-compatible chat-completions endpoint (OpenAI, vLLM, llama.cpp's server, Ollama,
//! LiteLLM): `POST <base_url>/chat/completions`, with tools as `function` tools.
//!
//! The API key is read from an environment variable whose name is configured; its value is
//! sent only in the `Authorization` header and never logged or shown ([`Endpoint::describe`]
//! names the variable, not the value). Credentials in the URL (`http://user:key@host`) are
//! sent as basic authentication and shown as `***` in every log line and reason.
//!
//! A reply is read as it streams in, up to [`reply_cap`] bytes; a longer one is not read
//! further and the call fails with the reason. Failures say what happened: `timed out after
//! N s`, `connection refused`, `HTTP 400: <the body's first 200 bytes>`.

use std::error::Error as _;
use std::time::Duration;

use serde_json::{Value, json};

use super::{BoxFuture, Message, Model, ModelError, PublishedContext, Reply, Request, ToolCall};

/// Where the endpoint is and how to call it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointConfig {
    /// Base URL up to the API version, such as `http://127.0.0.1:11434/v1`.
    pub base_url: String,
    pub model: String,
    /// Name of the environment variable holding the API key; `None`: no key is sent.
    pub api_key_env: Option<String>,
    /// Longest one request may take, reading the reply included.
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

/// Bytes of a reply read at most per token of the answer's budget: a token is a few bytes
/// of text, more once JSON-escaped, plus the reply's envelope.
pub const REPLY_BYTES_PER_TOKEN: usize = 16;
/// The smallest reply cap.
pub const REPLY_FLOOR_BYTES: usize = 1 << 20;
/// Bytes of an error reply read at most.
const ERROR_BODY_BYTES: usize = 64 << 10;
/// Bytes of an error reply or unreadable answer quoted in a reason.
pub const QUOTED_BYTES: usize = 200;
/// Longest a context-size probe may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// Most bytes of a reply to a request answering in at most `max_tokens` tokens.
pub fn reply_cap(max_tokens: u32) -> usize {
    usize::try_from(max_tokens)
        .unwrap_or(usize::MAX)
        .saturating_mul(REPLY_BYTES_PER_TOKEN)
        .max(REPLY_FLOOR_BYTES)
}

/// Query values at least this long are treated as secrets (shorter ones, such as
/// `api-version=1`, would scrub ordinary text).
const MIN_QUERY_SECRET: usize = 6;

/// A configured endpoint.
pub struct Endpoint {
    config: EndpointConfig,
    /// The chat-completions URL, without credentials.
    url: String,
    /// The server's root (the base URL without a trailing `/v1`), without credentials.
    root: String,
    /// The chat-completions URL as logs show it.
    shown: String,
    /// Credentials from the URL, sent as basic authentication.
    basic: Option<(String, Option<String>)>,
    key: Option<String>,
    /// Every secret a message could carry, replaced by `***` in reasons.
    secrets: Vec<String>,
    client: reqwest::Client,
    published: tokio::sync::OnceCell<Option<PublishedContext>>,
}

/// `text` (a URL) with anything between `://` and the host's `@` shown as `***`.
pub fn redact_url(text: &str) -> String {
    let Some(start) = text.find("://").map(|i| i + 3) else {
        return text.to_string();
    };
    let rest = &text[start..];
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..end].rfind('@') {
        Some(at) => format!("{}***{}", &text[..start], &rest[at..]),
        None => text.to_string(),
    }
}

fn percent_decode(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%'
            && i + 2 < b.len()
            && let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2]))
        {
            out.push(u8::try_from(h * 16 + l).unwrap_or(b'?'));
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl Endpoint {
    /// The endpoint `config` describes; `key_of` gives the value of the environment
    /// variable `config.api_key_env` names (the CLI reads it: the core reads no
    /// environment).
    pub fn new(
        config: EndpointConfig,
        key_of: impl Fn(&str) -> Option<String>,
    ) -> Result<Endpoint, EndpointError> {
        let bad = || EndpointError::Url(redact_url(&config.base_url));
        let mut parsed = reqwest::Url::parse(config.base_url.trim()).map_err(|_| bad())?;
        if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
            return Err(bad());
        }
        let mut secrets = Vec::new();
        let basic = if parsed.username().is_empty() && parsed.password().is_none() {
            None
        } else {
            let user = percent_decode(parsed.username());
            let password = parsed.password().map(percent_decode);
            for raw in [parsed.username().to_string(), user.clone()] {
                if password.is_none() && !raw.is_empty() {
                    secrets.push(raw);
                }
            }
            if let Some(p) = parsed.password() {
                secrets.push(format!("{}:{p}", parsed.username()));
                secrets.push(p.to_string());
            }
            if let Some(p) = &password {
                secrets.push(p.clone());
            }
            parsed.set_username("").map_err(|()| bad())?;
            parsed.set_password(None).map_err(|()| bad())?;
            Some((user, password))
        };
        // The query (e.g. `?api-version=…&key=…`) stays on every request URL, after the
        // path; its values may be secrets, so logs show it as `?***` and reasons scrub them.
        if let Some(query) = parsed.query().filter(|q| !q.is_empty()) {
            secrets.push(query.to_string());
            for (_, value) in parsed.query_pairs() {
                if value.len() >= MIN_QUERY_SECRET {
                    secrets.push(value.into_owned());
                }
            }
        }
        parsed.set_fragment(None);
        let mut chat = parsed.clone();
        chat.path_segments_mut()
            .map_err(|()| bad())?
            .pop_if_empty()
            .extend(["chat", "completions"]);
        let url = chat.to_string();
        let mut bare = parsed.clone();
        bare.set_query(None);
        let base = bare.as_str().trim_end_matches('/').to_string();
        let root = base.strip_suffix("/v1").unwrap_or(&base).to_string();
        let mut shown_url = chat.clone();
        if shown_url.query().is_some() {
            shown_url.set_query(Some("***"));
        }
        let shown_url = shown_url.to_string();
        let shown = if basic.is_some() {
            redact_url(&format!(
                "{}://user@{}",
                parsed.scheme(),
                &shown_url[parsed.scheme().len() + 3..]
            ))
        } else {
            shown_url
        };
        let key = match &config.api_key_env {
            Some(name) => Some(
                key_of(name)
                    .filter(|v| !v.is_empty())
                    .ok_or_else(|| EndpointError::MissingKey(name.clone()))?,
            ),
            None => None,
        };
        if let Some(k) = &key {
            secrets.push(k.clone());
        }
        secrets.retain(|s| !s.is_empty());
        // Longest first, so a secret holding another is replaced whole.
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        let client = reqwest::Client::builder()
            .connect_timeout(config.timeout.min(Duration::from_secs(30)))
            .build()
            .map_err(|e| EndpointError::Client(e.to_string()))?;
        Ok(Endpoint {
            config,
            url,
            root,
            shown,
            basic,
            key,
            secrets,
            client,
            published: tokio::sync::OnceCell::new(),
        })
    }

    /// The request body for `request`, as the endpoint receives it.
    pub fn body(&self, request: &Request) -> Value {
        request_body(&self.config.model, request)
    }

    /// `text` with every secret shown as `***`.
    fn scrub(&self, text: &str) -> String {
        let mut out = redact_url(text);
        for s in &self.secrets {
            out = out.replace(s.as_str(), "***");
        }
        out
    }

    fn scrub_error(&self, e: ModelError) -> ModelError {
        match e {
            ModelError::Transport(t) => ModelError::Transport(self.scrub(&t)),
            ModelError::Status { status, body } => ModelError::Status {
                status,
                body: self.scrub(&body),
            },
            ModelError::ContextExceeded {
                status,
                body,
                n_prompt_tokens,
                n_ctx,
            } => ModelError::ContextExceeded {
                status,
                body: self.scrub(&body),
                n_prompt_tokens,
                n_ctx,
            },
            ModelError::Answer(t) => ModelError::Answer(self.scrub(&t)),
            other => other,
        }
    }

    /// One HTTP exchange: the status and the body, read as it streams in. A successful
    /// reply over `cap` bytes is an error; an error reply is kept to its first
    /// [`ERROR_BODY_BYTES`].
    async fn fetch(
        &self,
        method: reqwest::Method,
        url: &str,
        body: Option<&Value>,
        cap: usize,
    ) -> Result<(u16, Vec<u8>), ModelError> {
        let timeout = self.config.timeout;
        let mut call = self.client.request(method, url);
        if let Some(body) = body {
            call = call.json(body);
        }
        if let Some(key) = &self.key {
            call = call.bearer_auth(key);
        } else if let Some((user, password)) = &self.basic {
            call = call.basic_auth(user, password.as_ref());
        }
        let mut response = call
            .send()
            .await
            .map_err(|e| ModelError::Transport(transport_reason(&e, timeout)))?;
        let status = response.status();
        let limit = if status.is_success() {
            cap
        } else {
            ERROR_BODY_BYTES
        };
        if status.is_success()
            && response
                .content_length()
                .is_some_and(|n| n > u64::try_from(cap).unwrap_or(u64::MAX))
        {
            return Err(ModelError::TooLarge { cap });
        }
        let mut bytes = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| ModelError::Transport(transport_reason(&e, timeout)))?
        {
            if bytes.len() + chunk.len() > limit {
                if status.is_success() {
                    return Err(ModelError::TooLarge { cap });
                }
                bytes.extend_from_slice(&chunk[..limit - bytes.len()]);
                break;
            }
            bytes.extend_from_slice(&chunk);
        }
        Ok((status.as_u16(), bytes))
    }

    /// The chat completion, unscrubbed.
    async fn chat(&self, request: &Request) -> Result<Reply, ModelError> {
        let timeout = self.config.timeout;
        let body = self.body(request);
        let cap = reply_cap(request.max_tokens);
        let exchange = self.fetch(reqwest::Method::POST, &self.url, Some(&body), cap);
        let (status, bytes) = tokio::time::timeout(timeout, exchange)
            .await
            .map_err(|_| {
                ModelError::Transport(format!("timed out after {} s", timeout.as_secs()))
            })??;
        let text = String::from_utf8_lossy(&bytes);
        if !(200..300).contains(&status) {
            let quoted = head(&text, QUOTED_BYTES).to_string();
            // The error's numbers size this call's one retry only: an endpoint that once
            // states a tiny context must not shrink every later call.
            if let Some((n_prompt_tokens, n_ctx)) = context_exceeded(status, &text) {
                return Err(ModelError::ContextExceeded {
                    status,
                    body: quoted,
                    n_prompt_tokens,
                    n_ctx,
                });
            }
            return Err(ModelError::Status {
                status,
                body: quoted,
            });
        }
        let answer: Value = serde_json::from_str(&text).map_err(|e| {
            ModelError::Answer(format!(
                "not JSON ({e}); it began: {:?}",
                head(&text, QUOTED_BYTES)
            ))
        })?;
        parse_reply(&answer)
    }

    /// The context size the server publishes: llama.cpp's `GET /props`, else Ollama's
    /// `POST /api/show` (the model's `num_ctx` parameter, else its `context_length` as a
    /// most).
    async fn probe_context(&self) -> Option<PublishedContext> {
        let cap = REPLY_FLOOR_BYTES;
        let props_url = format!("{}/props", self.root);
        let props = self.fetch(reqwest::Method::GET, &props_url, None, cap);
        if let Ok(Ok((200, bytes))) = tokio::time::timeout(PROBE_TIMEOUT, props).await
            && let Ok(v) = serde_json::from_slice::<Value>(&bytes)
            && let Some(n) = v
                .pointer("/default_generation_settings/n_ctx")
                .or_else(|| v.get("n_ctx"))
                .and_then(Value::as_u64)
                .and_then(|n| usize::try_from(n).ok())
                .filter(|n| *n > 0)
        {
            return Some(PublishedContext {
                tokens: n,
                source: "the endpoint's /props (llama.cpp n_ctx)".into(),
                limit_only: false,
            });
        }
        let body = json!({"model": self.config.model, "name": self.config.model});
        let show_url = format!("{}/api/show", self.root);
        let show = self.fetch(reqwest::Method::POST, &show_url, Some(&body), cap);
        let Ok(Ok((200, bytes))) = tokio::time::timeout(PROBE_TIMEOUT, show).await else {
            return None;
        };
        let v: Value = serde_json::from_slice(&bytes).ok()?;
        let num_ctx = v
            .get("parameters")
            .and_then(Value::as_str)
            .into_iter()
            .flat_map(str::lines)
            .filter_map(|l| l.trim().strip_prefix("num_ctx"))
            .find_map(|n| n.trim().parse::<usize>().ok())
            .filter(|n| *n > 0);
        if let Some(n) = num_ctx {
            return Some(PublishedContext {
                tokens: n,
                source: "the endpoint's /api/show (Ollama num_ctx)".into(),
                limit_only: false,
            });
        }
        let length = v
            .get("model_info")
            .and_then(Value::as_object)?
            .iter()
            .find(|(k, _)| k.ends_with(".context_length"))
            .and_then(|(_, n)| n.as_u64())
            .and_then(|n| usize::try_from(n).ok())
            .filter(|n| *n > 0)?;
        Some(PublishedContext {
            tokens: length,
            source: "the endpoint's /api/show (Ollama context_length, the model's most)".into(),
            limit_only: true,
        })
    }
}

/// The first `max` bytes of `text`, cut at a character boundary.
fn head(text: &str, max: usize) -> &str {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// What went wrong with a request, in words: never the URL (it may hold credentials).
fn transport_reason(e: &reqwest::Error, timeout: Duration) -> String {
    let timed_out = || format!("timed out after {} s", timeout.as_secs());
    if e.is_timeout() {
        return timed_out();
    }
    let mut innermost = None;
    let mut source = e.source();
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            match io.kind() {
                std::io::ErrorKind::ConnectionRefused => return "connection refused".into(),
                std::io::ErrorKind::ConnectionReset => {
                    return "the endpoint reset the connection".into();
                }
                std::io::ErrorKind::TimedOut => return timed_out(),
                _ => {}
            }
        }
        innermost = Some(s.to_string());
        source = s.source();
    }
    let detail = innermost.unwrap_or_else(|| "no detail".into());
    if e.is_connect() {
        format!("cannot connect: {detail}")
    } else if e.is_body() || e.is_decode() {
        format!("the reply broke off: {detail}")
    } else {
        format!("the request failed: {detail}")
    }
}

/// Whether an error reply says the prompt exceeds the model's context (llama.cpp's
/// `exceed_context_size_error`, OpenAI's and vLLM's `maximum context length`), with the
/// prompt's tokens and the context size when it states them.
pub fn context_exceeded(status: u16, body: &str) -> Option<(Option<u64>, Option<u64>)> {
    if !matches!(status, 400 | 413) {
        return None;
    }
    let lower = body.to_ascii_lowercase();
    let markers = [
        "exceed_context_size_error",
        "exceeds the available context size",
        "context_length_exceeded",
        "maximum context length",
    ];
    if !markers.iter().any(|m| lower.contains(m)) {
        return None;
    }
    let json: Option<Value> = serde_json::from_str(body).ok();
    let field = |key: &str| {
        let v = json.as_ref()?;
        v.pointer(&format!("/error/{key}"))
            .or_else(|| v.get(key))
            .and_then(Value::as_u64)
    };
    let number = |pattern: &str| {
        regex::Regex::new(pattern)
            .ok()?
            .captures(&lower)?
            .get(1)?
            .as_str()
            .parse::<u64>()
            .ok()
    };
    let n_prompt = field("n_prompt_tokens")
        .or_else(|| number(r"request \((\d+) tokens\) exceeds"))
        .or_else(|| number(r"\((\d+) in the messages"));
    let n_ctx = field("n_ctx")
        .or_else(|| number(r"available context size \((\d+) tokens\)"))
        .or_else(|| number(r"maximum context length is (\d+) tokens"));
    Some((n_prompt, n_ctx))
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
                self.shown, self.config.model
            ),
            None => format!("{} model {}", self.shown, self.config.model),
        }
    }

    fn complete(&self, request: Request) -> BoxFuture<'_, Result<Reply, ModelError>> {
        Box::pin(async move { self.chat(&request).await.map_err(|e| self.scrub_error(e)) })
    }

    fn published_context(&self) -> BoxFuture<'_, Option<PublishedContext>> {
        Box::pin(async move {
            self.published
                .get_or_init(|| async {
                    let found = self.probe_context().await;
                    match &found {
                        Some(p) => tracing::info!(
                            endpoint = self.shown,
                            tokens = p.tokens,
                            source = p.source,
                            "tool_output model context size published"
                        ),
                        None => tracing::info!(
                            endpoint = self.shown,
                            "the endpoint publishes no context size; the configured one is used"
                        ),
                    }
                    found
                })
                .await
                .clone()
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

    /// The settings of an endpoint at `url` for model `m`, its key in `env` if any.
    fn cfg(url: &str, env: Option<&str>) -> EndpointConfig {
        EndpointConfig {
            base_url: url.into(),
            model: "m".into(),
            api_key_env: env.map(str::to_string),
            timeout: Duration::from_secs(1),
        }
    }

    /// An endpoint at `url` with no key.
    fn endpoint(url: &str) -> Endpoint {
        Endpoint::new(cfg(url, None), |_| None).expect("a valid endpoint")
    }

    #[test]
    fn credentials_in_urls_are_redacted() {
        assert_eq!(
            redact_url("http://user:key@host:1/v1?a=b@c"),
            "http://***@host:1/v1?a=b@c"
        );
        assert_eq!(redact_url("https://tok@host"), "https://***@host");
        assert_eq!(redact_url("http://host/v1/a@b"), "http://host/v1/a@b");
        assert_eq!(redact_url("not a url"), "not a url");
        let e = endpoint("http://me:p%40ss@127.0.0.1:1/v1");
        assert_eq!(
            e.describe(),
            "http://***@127.0.0.1:1/v1/chat/completions model m"
        );
        assert_eq!(e.url, "http://127.0.0.1:1/v1/chat/completions");
        assert_eq!(e.root, "http://127.0.0.1:1");
        assert_eq!(e.basic, Some(("me".into(), Some("p@ss".into()))));
        assert_eq!(
            e.scrub("me:p%40ss p@ss http://me:p%40ss@x/"),
            "*** *** http://***@x/"
        );
    }

    #[test]
    fn a_query_stays_after_the_path_and_its_values_are_never_shown() {
        let e = endpoint("http://127.0.0.1:1/v1/?api-version=2024-02-01&key=s3cr3tvalue#frag");
        assert_eq!(
            e.url,
            "http://127.0.0.1:1/v1/chat/completions?api-version=2024-02-01&key=s3cr3tvalue"
        );
        assert_eq!(e.root, "http://127.0.0.1:1");
        assert_eq!(
            e.describe(),
            "http://127.0.0.1:1/v1/chat/completions?*** model m"
        );
        assert_eq!(
            e.scrub("GET /v1/chat/completions?api-version=2024-02-01&key=s3cr3tvalue failed: s3cr3tvalue"),
            "GET /v1/chat/completions?*** failed: ***"
        );
    }

    #[test]
    fn context_size_errors_are_recognised_with_their_numbers() {
        let llama = r#"{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error","n_prompt_tokens":9760,"n_ctx":8192}}"#;
        assert_eq!(context_exceeded(400, llama), Some((Some(9760), Some(8192))));
        let newer = r#"{"error":{"code":400,"message":"request (4476 tokens) exceeds the available context size (4096 tokens)","type":"exceed_context_size_error"}}"#;
        assert_eq!(context_exceeded(400, newer), Some((Some(4476), Some(4096))));
        let openai = "This model's maximum context length is 8192 tokens. However, you requested \
                      9000 tokens (8000 in the messages, 1000 in the completion).";
        assert_eq!(
            context_exceeded(400, openai),
            Some((Some(8000), Some(8192)))
        );
        assert_eq!(
            context_exceeded(400, "the request exceeds the available context size"),
            Some((None, None))
        );
        assert_eq!(context_exceeded(500, llama), None);
        assert_eq!(context_exceeded(400, "bad request"), None);
    }

    #[test]
    fn the_reply_cap_follows_the_output_budget_above_a_floor() {
        assert_eq!(reply_cap(1), REPLY_FLOOR_BYTES);
        assert_eq!(reply_cap(1 << 20), 16 << 20);
    }

    #[test]
    fn bad_urls_and_missing_keys_are_errors() {
        assert!(matches!(
            Endpoint::new(cfg("ftp://x", None), |_| None),
            Err(EndpointError::Url(_))
        ));
        assert!(matches!(
            Endpoint::new(
                cfg(
                    "http://127.0.0.1:1/v1",
                    Some("EVIDENCE_STORE_TEST_UNSET_KEY_VAR")
                ),
                |_| None
            ),
            Err(EndpointError::MissingKey(_))
        ));
        let e = endpoint("http://127.0.0.1:1/v1/");
        assert_eq!(
            e.describe(),
            "http://127.0.0.1:1/v1/chat/completions model m"
        );
    }
}
