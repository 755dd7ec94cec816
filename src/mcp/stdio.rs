//! MCP over this process's stdin and stdout.
//!
//! Reading is rmcp's own (its line reader, message parsing and "Invalid request" replies).
//! Writing differs in one respect: a message is encoded where rmcp hands it over, and the
//! text of a large tool result (a 2000-line read prints over a megabyte) is escaped on
//! two threads and spliced into the envelope serde_json writes for the rest. The bytes
//! are what rmcp's encoder writes (tests compare them); one task writes every message
//! whole, in the order rmcp sends them.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use rmcp::RoleServer;
use rmcp::model::{ContentBlock, JsonRpcMessage, ServerResult};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::transport::async_rw::AsyncRwTransport;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};

use crate::pyjson::write_string;

/// Texts at least this long are escaped on two threads.
const PARALLEL_TEXT_BYTES: usize = 256 << 10;

/// Stands in for a large text while the rest of the message is serialized. serde_json
/// writes the member as `"text":"\u0000evidence-store:text\u0000"`; the unescaped quotes
/// around `text` can only be the member's own, not part of some other string (an `id`,
/// say) that happens to hold the marker.
const MARKER: &str = "\0evidence-store:text\0";
const ESCAPED_MEMBER: &[u8] = b"\"text\":\"\\u0000evidence-store:text\\u0000\"";
const KEY: &[u8] = b"\"text\":";

type Chunk = (Vec<u8>, Option<oneshot::Sender<io::Result<()>>>);

/// A server transport over `read` and `write` (stdin and stdout in `serve`).
pub struct Stdio<R: AsyncRead> {
    inner: AsyncRwTransport<RoleServer, R, Queue>,
    queue: Queue,
}

impl<R> Stdio<R>
where
    R: AsyncRead + Send + Unpin + 'static,
{
    /// Spawns the writer task on the current runtime.
    pub fn new<W>(read: R, write: W) -> Self
    where
        W: AsyncWrite + Send + Unpin + 'static,
    {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(write_all_in_order(write, rx));
        let queue = Queue(tx);
        Stdio {
            inner: AsyncRwTransport::new_server(read, queue.clone()),
            queue,
        }
    }
}

async fn write_all_in_order<W: AsyncWrite + Unpin>(
    mut write: W,
    mut rx: mpsc::UnboundedReceiver<Chunk>,
) {
    while let Some((bytes, done)) = rx.recv().await {
        let result = match write.write_all(&bytes).await {
            Ok(()) => write.flush().await,
            Err(e) => Err(e),
        };
        if let Some(done) = done {
            let _ = done.send(result);
        }
    }
}

/// The writer task's input: whole messages, written in the order they were queued.
#[derive(Clone)]
struct Queue(mpsc::UnboundedSender<Chunk>);

impl Queue {
    fn push(
        &self,
        bytes: Vec<u8>,
        done: Option<oneshot::Sender<io::Result<()>>>,
    ) -> io::Result<()> {
        self.0
            .send((bytes, done))
            .map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "the output is closed"))
    }
}

/// What rmcp's own reader writes (its "Invalid request" replies) goes through the queue
/// as well. Every write is taken whole, so a reply is never split by another message.
impl AsyncWrite for Queue {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Poll::Ready(self.push(buf.to_vec(), None).map(|()| buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

impl<R> Transport<RoleServer> for Stdio<R>
where
    R: AsyncRead + Send + Unpin + 'static,
{
    type Error = io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let (done, written) = oneshot::channel();
        let queued = encode(item).and_then(|bytes| self.queue.push(bytes, Some(done)));
        async move {
            queued?;
            written
                .await
                .map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "the output is closed"))?
        }
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleServer>>> + Send {
        self.inner.receive()
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.inner.close().await
    }
}

/// One line of JSON-RPC: what serde_json writes for `item`, and a newline.
pub fn encode(mut item: TxJsonRpcMessage<RoleServer>) -> io::Result<Vec<u8>> {
    let text = large_text(&mut item).map(|text| std::mem::replace(text, MARKER.to_owned()));
    let mut out = serde_json::to_vec(&item)?;
    if let Some(text) = text {
        let at = memchr::memmem::find(&out, ESCAPED_MEMBER)
            .ok_or_else(|| io::Error::other("the encoded tool result lost its text"))?;
        let tail = out.split_off(at + ESCAPED_MEMBER.len());
        let escaped = escape_in_parallel(&text);
        out.truncate(at + KEY.len());
        out.reserve(escaped.len() + tail.len() + 1);
        out.extend_from_slice(escaped.as_bytes());
        out.extend_from_slice(&tail);
    }
    out.push(b'\n');
    Ok(out)
}

/// The text of a tool result's only content block, if it is large.
fn large_text(item: &mut TxJsonRpcMessage<RoleServer>) -> Option<&mut String> {
    let JsonRpcMessage::Response(response) = item else {
        return None;
    };
    let ServerResult::CallToolResult(result) = &mut response.result else {
        return None;
    };
    match result.content.as_mut_slice() {
        [ContentBlock::Text(content)] if content.text.len() >= PARALLEL_TEXT_BYTES => {
            Some(&mut content.text)
        }
        _ => None,
    }
}

/// `text` as a JSON string, its two halves escaped on two threads.
fn escape_in_parallel(text: &str) -> String {
    let mut middle = text.len() / 2;
    while !text.is_char_boundary(middle) {
        middle += 1;
    }
    let (left, right) = text.split_at(middle);
    let escape = |part: &str| {
        let mut out = String::with_capacity(part.len() + part.len() / 8 + 2);
        write_string(&mut out, part);
        out
    };
    let (left, right) = std::thread::scope(|scope| {
        let other = scope.spawn(|| escape(right));
        let left = escape(left);
        // Escaping does not panic; if it ever did, escape the half here.
        (left, other.join().unwrap_or_else(|_| escape(right)))
    });
    // Both halves are quoted strings: drop the closing and the opening quote between them.
    let mut out = String::with_capacity(left.len() + right.len());
    out.push_str(&left[..left.len() - 1]);
    out.push_str(&right[1..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{CallToolResult, ErrorData, NumberOrString};

    fn response(text: String) -> TxJsonRpcMessage<RoleServer> {
        response_to(text, NumberOrString::Number(7))
    }

    fn response_to(text: String, id: NumberOrString) -> TxJsonRpcMessage<RoleServer> {
        JsonRpcMessage::response(
            ServerResult::CallToolResult(CallToolResult::success(vec![ContentBlock::text(text)])),
            id,
        )
    }

    #[test]
    fn encoding_is_serde_jsons() {
        let awkward = "quote \" backslash \\ newline \n nul \0 us \u{1f} é 😀 \u{2028} ";
        let big = awkward.repeat(PARALLEL_TEXT_BYTES / awkward.len() + 3);
        let messages = [
            response(big.clone()),
            // The marker's own text in a large result is escaped like any other.
            response(format!("{MARKER}{big}{MARKER}")),
            // A request id holding the marker does not move the splice.
            response_to(big.clone(), NumberOrString::String(MARKER.into())),
            response("small".into()),
            JsonRpcMessage::error(ErrorData::invalid_request("Invalid request", None), None),
        ];
        for message in messages {
            let mut expect = serde_json::to_vec(&message).unwrap();
            expect.push(b'\n');
            assert!(encode(message).unwrap() == expect);
        }
        // Every split point lands on a character boundary.
        for n in 0..8 {
            let text = format!("{}{}", "a".repeat(n), "😀".repeat(PARALLEL_TEXT_BYTES / 4));
            let mut expect = serde_json::to_vec(&response(text.clone())).unwrap();
            expect.push(b'\n');
            assert!(encode(response(text)).unwrap() == expect, "offset {n}");
        }
    }
}
