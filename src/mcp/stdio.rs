//! MCP over this process's stdin and stdout.
//!
//! Reading is rmcp's own (its line reader, message parsing and "Invalid request" replies).
//! Writing differs in one respect: a large tool-result text (a 2000-line read prints over
//! a megabyte) whose JSON string form the tool already made, on two threads while it
//! printed the text ([`prepare`]), is spliced into the envelope serde_json writes for the
//! rest instead of being escaped again. The bytes are what rmcp's encoder writes (tests
//! compare them); one task writes every message whole, in the order rmcp sends them.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::{Mutex, PoisonError};
use std::task::{Context, Poll};

use rmcp::RoleServer;
use rmcp::model::{ContentBlock, JsonRpcMessage, ServerResult};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::transport::async_rw::AsyncRwTransport;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};

/// Texts at least this long are worth splicing; shorter ones serde_json escapes at once.
const SPLICE_MIN_BYTES: usize = 64 << 10;
/// At most this many prepared texts wait for their message (one per tool call in flight).
const PREPARED_MAX: usize = 4;

/// JSON string forms of large tool-result texts, waiting for [`encode`]. An entry is used
/// only for a text equal to its own, byte for byte, so an entry that is stale or meant
/// for another server in this process can only be missed, never change what is sent.
static PREPARED: Mutex<Vec<Prepared>> = Mutex::new(Vec::new());

struct Prepared {
    text: String,
    json_string: String,
}

/// Offers `json_string`, which must be `text` encoded as a JSON string (quotes included),
/// to the encoder of the message that will carry `text`. Keeps a copy of `text` to match
/// it by; small texts are not kept.
pub fn prepare(text: &str, json_string: String) {
    if text.len() < SPLICE_MIN_BYTES {
        return;
    }
    let mut prepared = PREPARED.lock().unwrap_or_else(PoisonError::into_inner);
    if prepared.len() >= PREPARED_MAX {
        prepared.remove(0);
    }
    prepared.push(Prepared {
        text: text.to_owned(),
        json_string,
    });
}

/// The prepared JSON string form of `text`, if there is one; taken.
fn take_prepared(text: &str) -> Option<String> {
    let mut prepared = PREPARED.lock().unwrap_or_else(PoisonError::into_inner);
    let at = prepared.iter().position(|p| p.text == text)?;
    Some(prepared.remove(at).json_string)
}

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
    let json_string = large_text(&mut item).and_then(|text| {
        let json_string = take_prepared(text)?;
        *text = MARKER.to_owned();
        Some(json_string)
    });
    let mut out = serde_json::to_vec(&item)?;
    if let Some(json_string) = json_string {
        let at = memchr::memmem::find(&out, ESCAPED_MEMBER)
            .ok_or_else(|| io::Error::other("the encoded tool result lost its text"))?;
        let tail = out.split_off(at + ESCAPED_MEMBER.len());
        out.truncate(at + KEY.len());
        out.reserve(json_string.len() + tail.len() + 1);
        out.extend_from_slice(json_string.as_bytes());
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
        [ContentBlock::Text(content)] if content.text.len() >= SPLICE_MIN_BYTES => {
            Some(&mut content.text)
        }
        _ => None,
    }
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

    fn prepared_for(text: &str) -> bool {
        let prepared = PREPARED.lock().unwrap_or_else(PoisonError::into_inner);
        prepared.iter().any(|p| p.text == text)
    }

    /// Tests share the process-wide table; each uses texts of its own.
    fn awkward_text(tag: &str) -> String {
        let awkward = "quote \" backslash \\ newline \n nul \0 us \u{1f} é 😀 \u{2028} ";
        format!(
            "{tag}{}",
            awkward.repeat(SPLICE_MIN_BYTES / awkward.len() + 3)
        )
    }

    #[test]
    fn prepared_texts_are_spliced_as_serde_json_writes_them() {
        let big = awkward_text("spliced");
        let texts_and_ids = [
            (big.clone(), NumberOrString::Number(7)),
            // The marker's own text in a large result is carried like any other.
            (format!("{MARKER}{big}{MARKER}"), NumberOrString::Number(8)),
            // A request id holding the marker does not move the splice.
            (format!("{big}!"), NumberOrString::String(MARKER.into())),
        ];
        for (text, id) in texts_and_ids {
            let expect = serde_line(&response_to(text.clone(), id.clone()));
            prepare(&text, serde_json::to_string(&text).unwrap());
            assert!(prepared_for(&text));
            assert!(encode(response_to(text.clone(), id)).unwrap() == expect);
            assert!(!prepared_for(&text), "a prepared text is used once");
        }
    }

    #[test]
    fn other_texts_never_use_a_prepared_form() {
        let big = awkward_text("foreign");
        // Same length, one byte different: the entry must not be used.
        let mut other = big.clone().into_bytes();
        other[0] = b'F';
        let other = String::from_utf8(other).unwrap();
        prepare(&other, "\"not the encoding of big\"".into());
        let message = response(big.clone());
        assert!(encode(response(big)).unwrap() == serde_line(&message));
        // Unprepared large texts, small texts and errors are encoded by serde_json.
        let messages = [
            response(awkward_text("unprepared")),
            response("small".into()),
            JsonRpcMessage::error(ErrorData::invalid_request("Invalid request", None), None),
        ];
        for message in messages {
            let expect = serde_line(&message);
            assert!(encode(message).unwrap() == expect);
        }
        // Small texts are not kept, and the table stays bounded.
        prepare("small", "\"small\"".into());
        assert!(!prepared_for("small"));
        for n in 0..2 * PREPARED_MAX {
            let text = awkward_text(&format!("bounded {n}"));
            prepare(&text, serde_json::to_string(&text).unwrap());
        }
        assert!(
            PREPARED
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .len()
                <= PREPARED_MAX
        );
    }
}
