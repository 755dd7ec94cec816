//! MCP over this process's stdin and stdout.
//!
//! Reading is rmcp's own (its line reader, message parsing and "Invalid request" replies).
//! Writing differs in one respect: a tool may stream its result text ([`Prepared::stream`]):
//! it puts a placeholder in the result and sends the text, already encoded as the content
//! of a JSON string, in pieces as it makes them (a 2000-line read prints over a
//! megabyte). The placeholder's member is written as `"text":"`, then the pieces as they
//! come, then the rest of the envelope serde_json writes. The bytes are what rmcp's
//! encoder writes for the whole text (tests compare them); one task writes every message
//! whole, in the order rmcp sends them.

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
use std::io::Write;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{mpsc, oneshot};

/// A placeholder text: this prefix, a number, and a NUL. serde_json writes it as
/// `"\u0000evidence-store:prepared:<n>\u0000"`; with the unescaped `"text":` before it,
/// the member can only be the placeholder's own, not part of another string (an `id`,
/// say) that happens to hold the same characters.
const PLACEHOLDER: &str = "\0evidence-store:prepared:";
/// Streams kept at most before their message is sent, the oldest dropped first: only a
/// tool call whose result is never sent (a cancelled one) leaves one behind, and its
/// sender then learns that nobody listens.
const PREPARED_MAX: usize = 64;
/// Ends a text whose maker stopped before finishing it (a bug: it panicked), so that the
/// message is still valid JSON and the client sees what happened.
const UNFINISHED: &str =
    "\\n[evidence-store: this result could not be completed; see the server log]";

/// One piece of a streamed text, or its end.
type Piece = Option<String>;

/// Texts that tools are streaming to this transport, by number.
#[derive(Default)]
pub struct Prepared {
    next: AtomicU64,
    streams: Mutex<BTreeMap<u64, mpsc::UnboundedReceiver<Piece>>>,
}

/// Where a tool sends the pieces of a streamed text.
pub struct TextSender(mpsc::UnboundedSender<Piece>);

impl TextSender {
    /// Sends the next piece: JSON string content (escaped, no quotes), cut anywhere but
    /// inside an escape. False when the text is no longer wanted (the output is closed).
    pub fn send(&self, piece: String) -> bool {
        self.0.send(Some(piece)).is_ok()
    }

    /// Marks the text complete. A sender dropped without it leaves the text unfinished.
    pub fn finish(self) {
        let _ = self.0.send(None);
    }
}

impl Prepared {
    /// A new streamed text: the placeholder text to put in the tool result instead, and
    /// where to send the pieces. Only the transport that owns this table can send that
    /// result.
    pub fn stream(&self) -> (String, TextSender) {
        let (tx, rx) = mpsc::unbounded_channel();
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let mut streams = self.streams.lock().unwrap_or_else(PoisonError::into_inner);
        if streams.len() >= PREPARED_MAX {
            streams.pop_first();
        }
        streams.insert(n, rx);
        (format!("{PLACEHOLDER}{n}\0"), TextSender(tx))
    }

    fn take(&self, n: u64) -> Option<mpsc::UnboundedReceiver<Piece>> {
        let mut streams = self.streams.lock().unwrap_or_else(PoisonError::into_inner);
        streams.remove(&n)
    }

    /// What serde_json writes for `item` and a newline; with a placeholder text, its
    /// member split into what comes before the text, the text's pieces and what follows.
    pub fn encode(&self, item: TxJsonRpcMessage<RoleServer>) -> io::Result<Outgoing> {
        let Some(n) = placeholder(&item) else {
            let mut out = serde_json::to_vec(&item)?;
            out.push(b'\n');
            return Ok(Outgoing::Line(out));
        };
        let pieces = self.take(n).ok_or_else(|| {
            io::Error::other(format!("streamed tool result {n} is missing (a bug)"))
        })?;
        let mut head = serde_json::to_vec(&item)?;
        let member = format!("\"text\":\"\\u0000evidence-store:prepared:{n}\\u0000\"");
        let at = memchr::memmem::find(&head, member.as_bytes())
            .ok_or_else(|| io::Error::other("the encoded tool result lost its placeholder"))?;
        let mut tail = head.split_off(at + member.len());
        head.truncate(at + "\"text\":\"".len());
        tail.insert(0, b'"');
        tail.push(b'\n');
        Ok(Outgoing::Streamed { head, pieces, tail })
    }
}

/// One message for the writer task.
pub enum Outgoing {
    /// A whole line.
    Line(Vec<u8>),
    /// A line whose text arrives in pieces: `head`, the pieces, `tail`.
    Streamed {
        head: Vec<u8>,
        pieces: mpsc::UnboundedReceiver<Piece>,
        tail: Vec<u8>,
    },
}

impl Outgoing {
    /// Writes the message, waiting for a streamed text's pieces as they come.
    fn write_to(self, write: &mut impl Write) -> io::Result<()> {
        match self {
            Outgoing::Line(bytes) => write.write_all(&bytes)?,
            Outgoing::Streamed {
                head,
                mut pieces,
                tail,
            } => {
                write.write_all(&head)?;
                loop {
                    match pieces.blocking_recv() {
                        Some(Some(piece)) => write.write_all(piece.as_bytes())?,
                        Some(None) => break,
                        None => {
                            tracing::error!("a streamed tool result ended unfinished");
                            write.write_all(UNFINISHED.as_bytes())?;
                            break;
                        }
                    }
                }
                write.write_all(&tail)?;
            }
        }
        write.flush()
    }
}

type Chunk = (Outgoing, Option<oneshot::Sender<io::Result<()>>>);

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
    /// Starts the writer thread. `write` is written with blocking calls, each piece of
    /// a streamed text as soon as it comes, without a hop through the async runtime.
    pub fn new<W>(read: R, write: W) -> io::Result<Self>
    where
        W: Write + Send + 'static,
    {
        let (tx, rx) = mpsc::unbounded_channel();
        std::thread::Builder::new()
            .name("evidence-store-writer".into())
            .spawn(move || write_all_in_order(write, rx))?;
        let queue = Queue(tx);
        Ok(Stdio {
            inner: AsyncRwTransport::new_server(read, queue.clone()),
            queue,
            prepared: Arc::default(),
        })
    }

    /// The table through which tools stream their results to this transport.
    pub fn prepared(&self) -> Arc<Prepared> {
        self.prepared.clone()
    }
}

/// The writer thread: every message whole, in the order queued, until the queue closes
/// or the output fails (then the queue's senders learn it is closed).
fn write_all_in_order<W: Write>(mut write: W, mut rx: mpsc::UnboundedReceiver<Chunk>) {
    while let Some((message, done)) = rx.blocking_recv() {
        let result = message.write_to(&mut write);
        let failed = result.is_err();
        if let Some(done) = done {
            let _ = done.send(result);
        }
        if failed {
            return;
        }
    }
}

/// The writer task's input: whole messages, written in the order they were queued.
#[derive(Clone)]
struct Queue(mpsc::UnboundedSender<Chunk>);

impl Queue {
    fn push(
        &self,
        message: Outgoing,
        done: Option<oneshot::Sender<io::Result<()>>>,
    ) -> io::Result<()> {
        self.0
            .send((message, done))
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
        Poll::Ready(
            self.push(Outgoing::Line(buf.to_vec()), None)
                .map(|()| buf.len()),
        )
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
            .and_then(|message| self.queue.push(message, Some(done)));
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

    /// A JSON string's content: what serde_json writes for `text`, without the quotes.
    fn content(text: &str) -> String {
        let quoted = serde_json::to_string(text).unwrap();
        quoted[1..quoted.len() - 1].to_owned()
    }

    /// The bytes the writer sends for `message`.
    fn written(message: Outgoing) -> Vec<u8> {
        let mut out = Vec::new();
        message.write_to(&mut out).unwrap();
        out
    }

    /// `text` streamed in three pieces cut at character boundaries, then finished.
    fn stream_text(prepared: &Prepared, text: &str) -> String {
        let (placeholder, sender) = prepared.stream();
        let cuts =
            [0, text.len() / 3, text.len() / 2, text.len()].map(|at| text.floor_char_boundary(at));
        for w in cuts.windows(2) {
            assert!(sender.send(content(&text[w[0]..w[1]])));
        }
        sender.finish();
        placeholder
    }

    #[test]
    fn a_streamed_text_is_sent_as_serde_json_writes_the_text() {
        let prepared = Prepared::default();
        let big = awkward_text();
        let texts_and_ids = [
            (big.clone(), NumberOrString::Number(7)),
            (String::new(), NumberOrString::Number(8)),
            // Placeholder-like text inside a streamed text is carried like any other.
            (format!("{PLACEHOLDER}0\0{big}"), NumberOrString::Number(9)),
            // A request id holding a placeholder's characters does not move the splice.
            (
                big.clone(),
                NumberOrString::String(format!("{PLACEHOLDER}3\0").into()),
            ),
        ];
        for (text, id) in texts_and_ids {
            let expect = serde_line(&response_to(text.clone(), id.clone()));
            let placeholder = stream_text(&prepared, &text);
            let got = written(
                prepared
                    .encode(response_to(placeholder.clone(), id))
                    .unwrap(),
            );
            assert!(got == expect, "{:?}", String::from_utf8_lossy(&got[..80]));
            // Used once: the same placeholder again is an error, never a wrong text.
            let again = prepared.encode(response(placeholder));
            assert!(again.is_err());
        }
    }

    #[test]
    fn an_unfinished_text_still_makes_a_valid_message() {
        let prepared = Prepared::default();
        let (placeholder, sender) = prepared.stream();
        assert!(sender.send(content("{\n  \"status\": ")));
        drop(sender);
        let got = written(prepared.encode(response(placeholder)).unwrap());
        let message: serde_json::Value = serde_json::from_slice(&got).unwrap();
        assert_eq!(
            message["result"]["content"][0]["text"],
            "{\n  \"status\": \n[evidence-store: this result could not be completed; see the server log]"
        );
        assert_eq!(got.last(), Some(&b'\n'));
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
        stream_text(&prepared, "unused");
        for message in messages {
            let expect = serde_line(&message);
            assert!(written(prepared.encode(message).unwrap()) == expect);
        }
    }

    #[test]
    fn the_table_is_bounded_oldest_first() {
        let prepared = Prepared::default();
        let (first, first_sender) = prepared.stream();
        for n in 1..=PREPARED_MAX {
            stream_text(&prepared, &n.to_string());
        }
        assert!(prepared.encode(response(first)).is_err());
        // Its maker learns that nobody listens.
        assert!(!first_sender.send("late".into()));
        let last = format!("{PLACEHOLDER}{PREPARED_MAX}\0");
        let got = written(prepared.encode(response(last)).unwrap());
        assert!(got == serde_line(&response(PREPARED_MAX.to_string())));
    }
}
