//! MCP over this process's stdin and stdout.
//!
//! Reading is rmcp's own (its line reader, message parsing and "Invalid request" replies).
//! Writing differs in one respect: a tool may hand its result text over already encoded
//! as a JSON string ([`Prepared::insert`]; a 2000-line read prints over a megabyte, on
//! two threads, directly in that form) and put a placeholder in the result; the
//! placeholder's member is replaced by that string in the envelope serde_json writes for
//! the rest. The bytes are what rmcp's encoder writes for the text itself (tests compare
//! them); one task writes every message whole, in the order rmcp sends them.

use std::collections::BTreeMap;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use rmcp::RoleServer;
use rmcp::model::{ContentBlock, JsonRpcMessage, ServerResult};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::transport::async_rw::AsyncRwTransport;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};

/// A placeholder text: this prefix, a number, and a NUL. serde_json writes it as
/// `"\u0000evidence-store:prepared:<n>\u0000"`; with the unescaped `"text":` before it,
/// the member can only be the placeholder's own, not part of another string (an `id`,
/// say) that happens to hold the same characters.
const PLACEHOLDER: &str = "\0evidence-store:prepared:";
/// Prepared strings kept at most, the oldest dropped first: only a tool call whose result
/// is never sent (a cancelled one) leaves one behind.
const PREPARED_MAX: usize = 64;

/// JSON strings of tool-result texts that tools prepared for this transport, by number.
#[derive(Default)]
pub struct Prepared {
    next: AtomicU64,
    strings: Mutex<BTreeMap<u64, String>>,
}

impl Prepared {
    /// Keeps `json_string`, which must be a text encoded as a JSON string (quotes
    /// included), and returns the placeholder text to put in the tool result instead.
    /// Only the transport that owns this table can send that result.
    pub fn insert(&self, json_string: String) -> String {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let mut strings = self.strings.lock().unwrap_or_else(PoisonError::into_inner);
        if strings.len() >= PREPARED_MAX {
            strings.pop_first();
        }
        strings.insert(n, json_string);
        format!("{PLACEHOLDER}{n}\0")
    }

    fn take(&self, n: u64) -> Option<String> {
        let mut strings = self.strings.lock().unwrap_or_else(PoisonError::into_inner);
        strings.remove(&n)
    }

    /// One line of JSON-RPC: what serde_json writes for `item`, and a newline, with a
    /// placeholder text's member written as `"text":` and its prepared string.
    pub fn encode(&self, item: TxJsonRpcMessage<RoleServer>) -> io::Result<Vec<u8>> {
        let Some(n) = placeholder(&item) else {
            let mut out = serde_json::to_vec(&item)?;
            out.push(b'\n');
            return Ok(out);
        };
        let json_string = self.take(n).ok_or_else(|| {
            io::Error::other(format!("prepared tool result {n} is missing (a bug)"))
        })?;
        let mut out = serde_json::to_vec(&item)?;
        let member = format!("\"text\":\"\\u0000evidence-store:prepared:{n}\\u0000\"");
        let at = memchr::memmem::find(&out, member.as_bytes())
            .ok_or_else(|| io::Error::other("the encoded tool result lost its placeholder"))?;
        let tail = out.split_off(at + member.len());
        out.truncate(at + "\"text\":".len());
        out.reserve(json_string.len() + tail.len() + 1);
        out.extend_from_slice(json_string.as_bytes());
        out.extend_from_slice(&tail);
        out.push(b'\n');
        Ok(out)
    }
}

type Chunk = (Vec<u8>, Option<oneshot::Sender<io::Result<()>>>);

/// A server transport over `read` and `write` (stdin and stdout in `serve`).
pub struct Stdio<R: AsyncRead> {
    inner: AsyncRwTransport<RoleServer, R, Queue>,
    queue: Queue,
    prepared: Arc<Prepared>,
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
            prepared: Arc::default(),
        }
    }

    /// The table through which tools hand this transport their prepared results.
    pub fn prepared(&self) -> Arc<Prepared> {
        self.prepared.clone()
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
        let queued = self
            .prepared
            .encode(item)
            .and_then(|bytes| self.queue.push(bytes, Some(done)));
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

/// The number of the placeholder that is a tool result's only text, if it is one.
fn placeholder(item: &TxJsonRpcMessage<RoleServer>) -> Option<u64> {
    let JsonRpcMessage::Response(response) = item else {
        return None;
    };
    let ServerResult::CallToolResult(result) = &response.result else {
        return None;
    };
    let [ContentBlock::Text(content)] = result.content.as_slice() else {
        return None;
    };
    content
        .text
        .strip_prefix(PLACEHOLDER)?
        .strip_suffix('\0')?
        .parse()
        .ok()
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

    fn serde_line(message: &TxJsonRpcMessage<RoleServer>) -> Vec<u8> {
        let mut line = serde_json::to_vec(message).unwrap();
        line.push(b'\n');
        line
    }

    fn awkward_text() -> String {
        let awkward = "quote \" backslash \\ newline \n nul \0 us \u{1f} é 😀 \u{2028} ";
        awkward.repeat(4000)
    }

    #[test]
    fn a_prepared_text_is_sent_as_serde_json_writes_the_text() {
        let prepared = Prepared::default();
        let big = awkward_text();
        let texts_and_ids = [
            (big.clone(), NumberOrString::Number(7)),
            (String::new(), NumberOrString::Number(8)),
            // Placeholder-like text inside a prepared text is carried like any other.
            (format!("{PLACEHOLDER}0\0{big}"), NumberOrString::Number(9)),
            // A request id holding a placeholder's characters does not move the splice.
            (
                big.clone(),
                NumberOrString::String(format!("{PLACEHOLDER}3\0").into()),
            ),
        ];
        for (text, id) in texts_and_ids {
            let expect = serde_line(&response_to(text.clone(), id.clone()));
            let placeholder = prepared.insert(serde_json::to_string(&text).unwrap());
            let got = prepared
                .encode(response_to(placeholder.clone(), id))
                .unwrap();
            assert!(got == expect, "{:?}", String::from_utf8_lossy(&got[..80]));
            // Used once: the same placeholder again is an error, never a wrong text.
            let again = prepared.encode(response(placeholder));
            assert!(again.is_err());
        }
    }

    #[test]
    fn other_messages_are_serde_jsons() {
        let prepared = Prepared::default();
        let messages = [
            response(awkward_text()),
            response("small".into()),
            // Not a placeholder: no number, or no closing NUL.
            response(format!("{PLACEHOLDER}x\0")),
            response(format!("{PLACEHOLDER}1")),
            JsonRpcMessage::error(ErrorData::invalid_request("Invalid request", None), None),
        ];
        prepared.insert("\"unused\"".into());
        for message in messages {
            let expect = serde_line(&message);
            assert!(prepared.encode(message).unwrap() == expect);
        }
    }

    #[test]
    fn the_table_is_bounded_oldest_first() {
        let prepared = Prepared::default();
        let first = prepared.insert("\"first\"".into());
        for n in 1..=PREPARED_MAX {
            prepared.insert(format!("\"{n}\""));
        }
        assert!(prepared.encode(response(first)).is_err());
        let last = format!("{PLACEHOLDER}{PREPARED_MAX}\0");
        let got = prepared.encode(response(last)).unwrap();
        assert!(got == serde_line(&response(PREPARED_MAX.to_string())));
    }
}
