//! MCP over this process's stdin and stdout, both sides owned here.
//!
//! A reader thread reads stdin line by line into a bounded buffer, decodes each line and
//! hands the messages to rmcp; a line it cannot hand on (not JSON, not a JSON-RPC message,
//! too long, too deep) it answers itself, with JSON-RPC's error codes. A writer thread
//! writes every outgoing message whole, one line each, in the order sent.
//!
//! Memory is bounded by backpressure: each line that needs an answer takes one of
//! [`IN_FLIGHT_MAX`] slots, given back once its answer is written. While every slot is
//! taken the reader keeps reading: responses (a client's answers to this server's
//! sampling requests) and notifications (cancels) go on at once, the end of input starts
//! the end at once, and lines that need a slot are held, in order, at most [`HELD_MAX`] of
//! them (each at most [`LINE_MAX`] bytes of input); with that many held, the next line that
//! needs a slot waits in the reader's hand until a slot is given back. Meanwhile the
//! reader watches stdin: once the client has closed its end and no slot has been given
//! back for [`EOF_WAIT`] (a client that closed stdin and reads no answer), the input has
//! ended, as if its end had been read. A cancel for a held request drops it unstarted
//! and unanswered. A cancelled request gives its slot back at once if
//! its work has not started (it will not start: [`Streamer::begin`]), else when the work
//! ends ([`Running`]): a cancel cannot stop a tool that runs on a blocking thread, so a
//! client that cancels every call must not make room for more of them. So at most that
//! many requests, their work and their answers are held, whatever the client sends and
//! however slowly it reads. A read's text is streamed ([`Streamer`]): the writer sends each piece
//! as it is printed, at most [`PIECES_AHEAD`] pieces behind its maker, and only for the
//! request the stream is keyed by. At the end of input the reader waits until every taken
//! slot is given back and every held line handed on, at most [`EOF_WAIT`], then sets the
//! end-of-input stop ([`Stdio::ended`]) that every call's work obeys and reports the end to
//! rmcp: every answer that is ready in time is written before `serve` returns, a request
//! abandoned after the wait (running or still held) is reported as an error, and `serve`
//! exits within [`EOF_GRACE`] of the end of input.

use std::collections::{HashMap, HashSet, VecDeque};
use std::future::Future;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

use rmcp::RoleServer;
use rmcp::model::{ContentBlock, GetExtensions, JsonRpcMessage, RequestId, ServerResult};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use crate::util::stop_flag::{Stop, StopReason};

/// Most requests taken from stdin and not yet answered; the reader waits while this many
/// are unanswered.
pub const IN_FLIGHT_MAX: usize = 16;
/// Most lines that need a slot held unread by rmcp while every slot is taken; the reader
/// reads nothing more while this many are held.
pub const HELD_MAX: usize = IN_FLIGHT_MAX;
/// Longest line (one message) read; a longer one is drained without being held and
/// answered as an invalid request.
pub const LINE_MAX: usize = 16 << 20;
/// Deepest nesting of arrays and objects in one message (Python's `json` gives up near
/// 1000 too); a deeper one is answered as an invalid request without being parsed.
pub const DEPTH_MAX: usize = 1000;
/// Stack of the reader and writer threads: parsing, converting and dropping a message
/// recurse once per level of nesting, up to [`DEPTH_MAX`].
pub const STACK_BYTES: usize = 16 << 20;
/// Bytes of an over-long line kept to find its `id`.
const HEAD_KEPT: usize = 64 << 10;

const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const INVALID_PARAMS: i64 = -32602;

/// The slots of requests in flight.
struct Gate {
    state: Mutex<GateState>,
    changed: Condvar,
    /// Set once the input ended and the wait for the work in flight is over.
    ended: Stop,
}

#[derive(Default)]
struct GateState {
    /// Slots taken: requests handed to rmcp and answers this transport owes itself.
    taken: usize,
    /// Ids of the requests handed to rmcp and not yet answered.
    ids: HashSet<RequestId>,
    /// The output failed: nothing more can be answered.
    failed: bool,
    /// Texts being made for the answers to these requests (see [`Streamer`]).
    streams: HashMap<RequestId, Receiver<Piece>>,
    /// The stop of each text being made, set by its request's cancel (the writer may be
    /// sending it already).
    stream_stops: HashMap<RequestId, Stop>,
    /// How many [`Running`] guards each request's work holds.
    running: HashMap<RequestId, usize>,
    /// Requests cancelled while their work runs: their slots are given back when it ends.
    cancelled: HashSet<RequestId>,
    /// Requests left unanswered when the input ended and their work outlasted the grace.
    abandoned: usize,
    /// Slots given back so far: whether a wait for room sees progress.
    released: u64,
    /// Lines that need a slot, read while every slot was taken, in the order read.
    held: VecDeque<Decoded>,
    /// The input ended, or rmcp no longer listens: nothing held is handed on any more.
    ended: bool,
}

/// What the reader may do with the line in its hand that needs a slot
/// ([`Gate::wait_for_room`]).
enum Room {
    /// Hold it (or hand it on).
    Hold,
    /// The output failed or the reading ended: nothing more is handed on.
    Ended,
    /// The client closed its end of the input and no slot was given back for
    /// [`EOF_WAIT`]: the input has ended, this line with it.
    Stalled,
}

/// How often a reader waiting for room asks whether the client closed its input.
const HANGUP_POLL: std::time::Duration = std::time::Duration::from_millis(100);

/// Whether the writing end of the input `fd` (a pipe or a socket) is closed: nothing
/// more comes after what is buffered. A file, or anything `poll` cannot tell it of, never
/// is.
fn hung_up(fd: std::os::fd::BorrowedFd<'_>) -> bool {
    use std::os::fd::AsRawFd;
    let mut probe = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLRDHUP,
        revents: 0,
    };
    // SAFETY: one valid `pollfd` for a descriptor borrowed for the call; no wait.
    let ready = unsafe { libc::poll(&raw mut probe, 1, 0) };
    ready > 0 && probe.revents & (libc::POLLHUP | libc::POLLRDHUP | libc::POLLERR) != 0
}

/// Which slot a written message gives back.
enum Release {
    None,
    /// An answer this transport made itself.
    Slot,
    /// The answer to the request with this id.
    Id(RequestId),
}

impl Gate {
    fn lock(&self) -> MutexGuard<'_, GateState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether lines are still read: the output has not failed and the reading has not
    /// ended.
    fn reading(&self) -> bool {
        let state = self.lock();
        !state.failed && !state.ended
    }

    /// Waits until fewer than [`HELD_MAX`] lines are held, so that the line in the
    /// reader's hand can be. While it waits it asks `hung_up` (the client closed its end
    /// of the input) now and then: once it has, a wait in which no slot is given back for
    /// [`EOF_WAIT`] is [`Room::Stalled`].
    fn wait_for_room(&self, hung_up: impl Fn() -> bool) -> Room {
        let mut state = self.lock();
        // Since when, and at which count of slots given back, the client is gone.
        let mut gone: Option<(std::time::Instant, u64)> = None;
        loop {
            if state.failed || state.ended {
                return Room::Ended;
            }
            if state.held.len() < HELD_MAX {
                return Room::Hold;
            }
            match gone {
                Some((since, released)) if released == state.released => {
                    if since.elapsed() >= EOF_WAIT {
                        return Room::Stalled;
                    }
                }
                _ => {
                    gone = hung_up().then(|| (std::time::Instant::now(), state.released));
                }
            }
            state = self
                .changed
                .wait_timeout(state, HANGUP_POLL)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    /// Holds `decoded` if a line is held already or every slot is taken; else gives it
    /// back to be handed on now.
    fn hold_if_full(&self, decoded: Decoded) -> Option<Decoded> {
        let mut state = self.lock();
        if state.held.is_empty() && state.taken < IN_FLIGHT_MAX {
            return Some(decoded);
        }
        state.held.push_back(decoded);
        None
    }

    /// Waits until a held line can take a slot; false when the output has failed or
    /// the reading has ended.
    fn wait_for_held_and_room(&self) -> bool {
        let mut state = self.lock();
        while !state.failed
            && !state.ended
            && (state.held.is_empty() || state.taken >= IN_FLIGHT_MAX)
        {
            state = self
                .changed
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
        !state.failed && !state.ended
    }

    /// The first held line, if a slot is free for it.
    fn take_held(&self) -> Option<Decoded> {
        let mut state = self.lock();
        if state.taken >= IN_FLIGHT_MAX {
            return None;
        }
        let decoded = state.held.pop_front();
        drop(state);
        // The reader may hold another line now.
        self.changed.notify_all();
        decoded
    }

    /// Nothing held is handed on any more.
    fn end_input(&self) {
        self.lock().ended = true;
        self.changed.notify_all();
    }

    /// Waits until every slot is given back and nothing is held (or can be handed on
    /// any more), the output fails, or `grace` has passed; returns how many requests are
    /// still unanswered, held ones included (0 when the output failed: nothing more can
    /// be written anyway).
    fn wait_until_idle_within(&self, grace: std::time::Duration) -> usize {
        let deadline = std::time::Instant::now() + grace;
        let mut state = self.lock();
        while (state.taken > 0 || (!state.held.is_empty() && !state.ended)) && !state.failed {
            let Some(left) = deadline.checked_duration_since(std::time::Instant::now()) else {
                break;
            };
            state = self
                .changed
                .wait_timeout(state, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        if state.failed {
            0
        } else {
            state.taken + state.held.len()
        }
    }

    fn take_slot(&self) {
        self.lock().taken += 1;
    }

    /// Takes a slot for request `id`; false if a request with that id is in flight.
    fn take_id(&self, id: RequestId) -> bool {
        let mut state = self.lock();
        if !state.ids.insert(id) {
            return false;
        }
        state.taken += 1;
        true
    }

    fn release(&self, release: Release) {
        let mut state = self.lock();
        match release {
            Release::None => return,
            Release::Slot => state.taken = state.taken.saturating_sub(1),
            Release::Id(id) => {
                // An unanswered text's maker learns that nobody listens.
                state.streams.remove(&id);
                state.stream_stops.remove(&id);
                if !state.ids.remove(&id) {
                    return;
                }
                state.taken = state.taken.saturating_sub(1);
            }
        }
        state.released += 1;
        drop(state);
        self.changed.notify_all();
    }

    /// The client cancelled request `id`: its text is no longer wanted, and its slot is
    /// given back now, or when its running work ends.
    fn cancel(&self, id: RequestId) {
        let mut state = self.lock();
        // A held request has not started: it is dropped, and never answered.
        state.held.retain(|held| held_request_id(held) != Some(&id));
        state.streams.remove(&id);
        if let Some(stop) = state.stream_stops.remove(&id) {
            stop.set(StopReason::Cancelled);
        }
        if state.running.contains_key(&id) {
            state.cancelled.insert(id);
            return;
        }
        drop(state);
        self.release(Release::Id(id));
    }

    /// Work for request `id` starts; `None` when the request is not in flight (it was
    /// cancelled, or never taken).
    fn begin(self: &Arc<Self>, id: &RequestId) -> Option<Running> {
        self.begin_with(id, |_| {})
    }

    /// [`Gate::begin`], doing `also` under the same lock when the work may start.
    fn begin_with(
        self: &Arc<Self>,
        id: &RequestId,
        also: impl FnOnce(&mut GateState),
    ) -> Option<Running> {
        let mut state = self.lock();
        if !state.ids.contains(id) || state.cancelled.contains(id) {
            return None;
        }
        *state.running.entry(id.clone()).or_default() += 1;
        also(&mut state);
        Some(Running {
            gate: self.clone(),
            id: id.clone(),
        })
    }

    /// A [`Running`] guard of request `id` ended.
    fn end(&self, id: &RequestId) {
        let mut state = self.lock();
        let Some(count) = state.running.get_mut(id) else {
            return;
        };
        *count -= 1;
        if *count > 0 {
            return;
        }
        state.running.remove(id);
        if state.cancelled.remove(id) {
            drop(state);
            self.release(Release::Id(id.clone()));
        }
    }

    fn fail(&self) {
        self.lock().failed = true;
        self.changed.notify_all();
    }

    fn failed(&self) -> bool {
        self.lock().failed
    }

    fn abandon(&self, unanswered: usize) {
        self.lock().abandoned = unanswered;
    }
}

/// One message for the writer thread.
struct Job {
    message: Outgoing,
    release: Release,
    done: Option<oneshot::Sender<io::Result<()>>>,
}

enum Outgoing {
    /// A message from rmcp, encoded by the writer.
    Message(Box<TxJsonRpcMessage<RoleServer>>),
    /// An answer this transport made, already a whole line.
    Line(Vec<u8>),
}

/// The writer thread: each message encoded whole, then written, so a line is either
/// whole or the output has failed (and nothing follows it).
fn write_all_in_order(mut out: impl Write, jobs: std::sync::mpsc::Receiver<Job>, gate: &Gate) {
    let mut buf = Vec::new();
    while let Ok(job) = jobs.recv() {
        let result = if gate.failed() {
            Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "the output failed",
            ))
        } else {
            let written = match job.message {
                Outgoing::Message(message) => {
                    let stream =
                        streamed_id(&message).and_then(|id| gate.lock().streams.remove(&id));
                    write_message(&mut out, *message, stream, &mut buf)
                }
                Outgoing::Line(bytes) => out.write_all(&bytes),
            }
            .and_then(|()| out.flush());
            if let Err(e) = &written {
                tracing::error!(error = %e, "cannot write to stdout");
                gate.fail();
            }
            written
        };
        // A huge answer does not keep its buffer.
        if buf.capacity() > 4 << 20 {
            buf = Vec::new();
        }
        gate.release(job.release);
        if let Some(done) = job.done {
            let _ = done.send(result);
        }
    }
}

/// Texts at least this long are escaped apart from their message (see [`write_message`]).
const SPLICE_MIN: usize = 64 << 10;

/// Writes what serde_json writes for `message`, and a newline. A tool result whose only
/// content is one long text (a read's answer, megabytes) is written as serde_json's
/// message with an empty text, with the text's escaped content put between that
/// member's quotes: the same bytes, escaped by [`crate::util::pyjson::write_string_content`],
/// which tests whole blocks of bytes at once, several times faster than serde_json's
/// byte-by-byte escaping.
fn write_message(
    out: &mut impl Write,
    mut message: TxJsonRpcMessage<RoleServer>,
    stream: Option<Receiver<Piece>>,
    buf: &mut Vec<u8>,
) -> io::Result<()> {
    buf.clear();
    let text = match only_text(&mut message) {
        Some(text) if stream.is_some() || text.len() >= SPLICE_MIN => std::mem::take(text),
        _ => String::new(),
    };
    serde_json::to_writer(&mut *buf, &message).map_err(io::Error::other)?;
    buf.push(b'\n');
    if text.is_empty() && stream.is_none() {
        return out.write_all(buf);
    }
    // `"text":""` outside a string is only the emptied member: inside a string every
    // quote is escaped. A message holding it twice (a key of other content) never
    // happens for a single-text result, and would not be spliced.
    const MEMBER: &[u8] = b"\"text\":\"\"";
    let mut found = memchr::memmem::find_iter(buf.as_slice(), MEMBER);
    let (Some(at), None) = (found.next(), found.next()) else {
        let restored = restore_text(message, text);
        buf.clear();
        serde_json::to_writer(&mut *buf, &restored).map_err(io::Error::other)?;
        buf.push(b'\n');
        return out.write_all(buf);
    };
    let split = at + MEMBER.len() - 1;
    if let Some(pieces) = stream {
        out.write_all(&buf[..split])?;
        loop {
            match pieces.recv() {
                Ok(Some(piece)) => out.write_all(piece.as_bytes())?,
                Ok(None) => break,
                Err(_) => {
                    tracing::error!("a streamed tool result ended unfinished");
                    out.write_all(UNFINISHED.as_bytes())?;
                    break;
                }
            }
        }
        return out.write_all(&buf[split..]);
    }
    let mut escaped = String::with_capacity(text.len() + text.len() / 8);
    crate::util::pyjson::write_string_content(&mut escaped, &text);
    drop(text);
    out.write_all(&buf[..split])?;
    out.write_all(escaped.as_bytes())?;
    out.write_all(&buf[split..])
}

/// The text of a tool result whose only content is one text.
fn only_text(message: &mut TxJsonRpcMessage<RoleServer>) -> Option<&mut String> {
    let JsonRpcMessage::Response(response) = message else {
        return None;
    };
    let ServerResult::CallToolResult(result) = &mut response.result else {
        return None;
    };
    let [ContentBlock::Text(content)] = result.content.as_mut_slice() else {
        return None;
    };
    Some(&mut content.text)
}

fn restore_text(
    mut message: TxJsonRpcMessage<RoleServer>,
    text: String,
) -> TxJsonRpcMessage<RoleServer> {
    if let Some(slot) = only_text(&mut message) {
        *slot = text;
    }
    message
}

/// One piece of a streamed text (JSON string content), or its end.
type Piece = Option<String>;

/// Ends a text whose maker stopped before finishing it (a bug: it panicked), so that the
/// message is still valid JSON and the client sees what happened.
const UNFINISHED: &str =
    "\\n[evidence-store: this result could not be completed; see the server log]";
/// Ends a text that stopped being made while it was sent: its request was cancelled, or
/// the input ended.
const STOPPED_TEXT: &str = "\\n[evidence-store: this result was stopped before its end: the request was cancelled or the input ended]";
/// The text of a tool result whose text is streamed: any text the writer would not
/// take for a finished answer's (an answer's text starts with `{`).
const STREAMED: &str = "\0evidence-store:streamed\0";
/// Pieces a text's maker may be ahead of the writer.
const PIECES_AHEAD: usize = 8;

/// Lets a tool stream its result's text: the writer sends the message up to the text as
/// soon as the tool returns, then each piece as it is made. Keyed by the request's id,
/// whose slot bounds the streams; a cancelled request's stream is dropped with its
/// slot, and its maker learns that nobody listens.
#[derive(Clone)]
pub struct Streamer(Arc<Gate>);

/// Where a tool sends the pieces of its streamed text. The text's making is the request's
/// running work: a cancelled request keeps its slot until the sender is dropped.
pub struct PieceSender {
    pieces: SyncSender<Piece>,
    /// Set by the request's cancel.
    stop: Stop,
    ended: Stop,
    /// The text was ended as stopped.
    closed: std::sync::atomic::AtomicBool,
    _running: Running,
}

/// Work for one request in progress (a tool call, a streamed text): while a guard lives,
/// a cancelled request keeps its slot, since the work holds memory and a thread that a
/// cancel cannot take back.
pub struct Running {
    gate: Arc<Gate>,
    id: RequestId,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.gate.end(&self.id);
    }
}

impl PieceSender {
    /// Sends the next piece of the text, already escaped as JSON string content
    /// (without quotes). False when the text is no longer wanted: its request was
    /// cancelled, or the input ended (then the writer ends the text as unfinished, and
    /// goes on with the next answer). Waits while the writer is [`PIECES_AHEAD`] behind,
    /// asking the flags meanwhile: a writer stuck on a client that reads nothing must not
    /// keep the text's maker (and the store it reads) past a stop.
    pub fn send(&self, piece: String) -> bool {
        let mut piece = Some(piece);
        let mut pause = std::time::Duration::from_micros(50);
        loop {
            if self.stop.is_set() || self.ended.is_set() {
                // Said once, and never waiting for the writer: a writer that cannot go on
                // ends the text as unfinished instead.
                if !self.closed.swap(true, std::sync::atomic::Ordering::SeqCst)
                    && self.pieces.try_send(Some(STOPPED_TEXT.to_owned())).is_ok()
                {
                    let _ = self.pieces.try_send(None);
                }
                return false;
            }
            match self.pieces.try_send(piece.take()) {
                Ok(()) => return true,
                Err(std::sync::mpsc::TrySendError::Full(back)) => {
                    piece = back;
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(std::time::Duration::from_millis(2));
                }
                Err(std::sync::mpsc::TrySendError::Disconnected(_)) => return false,
            }
        }
    }

    /// Marks the text complete. A sender dropped without it leaves the text unfinished.
    pub fn finish(self) {
        if !self.closed.load(std::sync::atomic::Ordering::SeqCst) {
            let _ = self.pieces.send(None);
        }
    }
}

/// A streamed read's pieces go out as JSON string content, each as it is made.
impl crate::read::Sink for PieceSender {
    fn form(&self) -> crate::read::TextForm {
        crate::read::TextForm::JsonString
    }

    fn piece(&mut self, piece: String) -> bool {
        self.send(piece)
    }

    fn stops(&self) -> Vec<Stop> {
        vec![self.stop.clone(), self.ended.clone()]
    }
}

impl Streamer {
    /// Work for request `id` starts: hold the guard until it ends. `None` when the request
    /// is no longer in flight on this transport (cancelled before its work started): then
    /// do no work, nobody waits for it.
    pub fn begin(&self, id: &RequestId) -> Option<Running> {
        self.0.begin(id)
    }

    /// The text to return as the tool result's only content, and where to send its
    /// pieces; `None` unless the request `id` is in flight on this transport (then the
    /// tool answers with its whole text instead).
    pub fn stream(&self, id: &RequestId) -> Option<(String, PieceSender)> {
        let (tx, rx) = std::sync::mpsc::sync_channel(PIECES_AHEAD);
        let stop = Stop::new();
        // Under one lock: a cancel either comes first (no stream) or finds it to drop.
        let running = self.0.begin_with(id, |state| {
            state.streams.insert(id.clone(), rx);
            state.stream_stops.insert(id.clone(), stop.clone());
        })?;
        Some((
            STREAMED.to_owned(),
            PieceSender {
                pieces: tx,
                stop,
                ended: self.0.ended.clone(),
                closed: std::sync::atomic::AtomicBool::new(false),
                _running: running,
            },
        ))
    }
}

/// The id of a response whose text is [`STREAMED`].
fn streamed_id(message: &TxJsonRpcMessage<RoleServer>) -> Option<RequestId> {
    let JsonRpcMessage::Response(response) = message else {
        return None;
    };
    let ServerResult::CallToolResult(result) = &response.result else {
        return None;
    };
    let [ContentBlock::Text(content)] = result.content.as_slice() else {
        return None;
    };
    (content.text == STREAMED).then(|| response.id.clone())
}

/// Longest `serve` runs after stdin closes, whatever work is in flight.
pub const EOF_GRACE: std::time::Duration = std::time::Duration::from_secs(5);
/// How long work gets to end once it was told to stop, and then the runtime to shut down.
pub const STOP_GRACE: std::time::Duration = std::time::Duration::from_millis(500);
/// How long requests still running when stdin closes get to finish and be answered: the
/// grace less the two stops that follow it (the work's, then the runtime's).
pub const EOF_WAIT: std::time::Duration = EOF_GRACE
    .saturating_sub(STOP_GRACE)
    .saturating_sub(STOP_GRACE);

/// A server transport over `read` and `write` (stdin and stdout in `serve`).
pub struct Stdio {
    incoming: mpsc::Receiver<RxJsonRpcMessage<RoleServer>>,
    jobs: std::sync::mpsc::Sender<Job>,
    gate: Arc<Gate>,
}

impl Stdio {
    /// Starts the reader and writer threads.
    pub fn new(
        read: impl Read + std::os::fd::AsFd + Send + 'static,
        write: impl Write + Send + 'static,
    ) -> io::Result<Self> {
        let gate = Arc::new(Gate {
            state: Mutex::default(),
            changed: Condvar::new(),
            ended: Stop::new(),
        });
        let (jobs, job_rx) = std::sync::mpsc::channel();
        let writer_gate = gate.clone();
        std::thread::Builder::new()
            .name("evidence-store-writer".into())
            .stack_size(STACK_BYTES)
            .spawn(move || write_all_in_order(write, job_rx, &writer_gate))?;
        let (tx, incoming) = mpsc::channel(1);
        let reader = Reader {
            gate: gate.clone(),
            jobs: jobs.clone(),
            to_rmcp: Arc::new(Mutex::new(tx)),
            started: Arc::new(AtomicBool::new(false)),
        };
        std::thread::Builder::new()
            .name("evidence-store-reader".into())
            .stack_size(STACK_BYTES)
            .spawn(move || reader.run(read))?;
        Ok(Stdio {
            incoming,
            jobs,
            gate,
        })
    }

    /// Lets tools stream their results over this transport.
    pub fn streamer(&self) -> Streamer {
        Streamer(self.gate.clone())
    }

    /// Set once the input ended and the wait for the work in flight is over: every call's
    /// work stops.
    pub fn ended(&self) -> Stop {
        self.gate.ended.clone()
    }

    /// How many requests were left unanswered at the end of input (their work outlasted
    /// [`EOF_WAIT`]).
    pub fn abandoned(&self) -> Arc<dyn Fn() -> usize + Send + Sync> {
        let gate = self.gate.clone();
        Arc::new(move || gate.lock().abandoned)
    }

    /// Whether every answer could be written so far.
    pub fn output_failed(&self) -> Arc<dyn Fn() -> bool + Send + Sync> {
        let gate = self.gate.clone();
        Arc::new(move || gate.failed())
    }
}

impl Transport<RoleServer> for Stdio {
    type Error = io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let release = match &item {
            JsonRpcMessage::Response(response) => Release::Id(response.id.clone()),
            JsonRpcMessage::Error(error) => error.id.clone().map_or(Release::None, Release::Id),
            _ => Release::None,
        };
        let (done, written) = oneshot::channel();
        let queued = self
            .jobs
            .send(Job {
                message: Outgoing::Message(Box::new(item)),
                release,
                done: Some(done),
            })
            .map_err(|_| closed());
        async move {
            queued?;
            written.await.map_err(|_| closed())?
        }
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleServer>>> + Send {
        self.incoming.recv()
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        Ok(())
    }
}

fn closed() -> io::Error {
    io::Error::new(io::ErrorKind::BrokenPipe, "the output is closed")
}

/// The reading side: stdin to rmcp, answering what rmcp cannot be given.
#[derive(Clone)]
struct Reader {
    gate: Arc<Gate>,
    jobs: std::sync::mpsc::Sender<Job>,
    /// Locked while a message is chosen and handed on, so rmcp gets the messages in the
    /// order read, held lines excepted.
    to_rmcp: Arc<Mutex<mpsc::Sender<RxJsonRpcMessage<RoleServer>>>>,
    /// A request that starts the session has been handed on (see [`starts_session`]).
    started: Arc<AtomicBool>,
}

type ToRmcp = mpsc::Sender<RxJsonRpcMessage<RoleServer>>;

/// A line read by [`read_line`].
enum LineRead {
    Line,
    /// Longer than [`LINE_MAX`]: drained; the buffer holds its first bytes.
    TooLong,
    End,
}

impl Reader {
    fn run(self, read: impl Read + std::os::fd::AsFd) {
        let dispatcher = self.clone();
        let dispatcher = std::thread::Builder::new()
            .name("evidence-store-held".into())
            .stack_size(STACK_BYTES)
            .spawn(move || dispatcher.hand_on_held());
        if let Err(e) = &dispatcher {
            tracing::error!(error = %e, "cannot start a thread");
        }
        let mut input = BufReader::with_capacity(64 << 10, read);
        let mut line = Vec::new();
        let mut stalled = false;
        while dispatcher.is_ok() && self.gate.reading() {
            let decoded = match read_line(&mut input, &mut line) {
                Ok(LineRead::Line) => decode(&line),
                Ok(LineRead::TooLong) => error(
                    INVALID_REQUEST,
                    format!("Invalid Request: the message is longer than {LINE_MAX} bytes"),
                    scan(&line).id,
                ),
                Ok(LineRead::End) => break,
                Err(e) => {
                    tracing::error!(error = %e, "cannot read stdin");
                    break;
                }
            };
            if line.capacity() > 1 << 20 {
                line = Vec::new();
            }
            if needs_slot(&decoded) {
                match self.gate.wait_for_room(|| hung_up(input.get_ref().as_fd())) {
                    Room::Hold => {}
                    Room::Ended => break,
                    Room::Stalled => {
                        stalled = true;
                        break;
                    }
                }
            }
            let to_rmcp = self.lock_rmcp();
            let decoded = if needs_slot(&decoded) {
                match self.gate.hold_if_full(decoded) {
                    Some(decoded) => decoded,
                    None => continue,
                }
            } else {
                decoded
            };
            if !self.handle(&to_rmcp, decoded) {
                break;
            }
        }
        // Every request read is answered before rmcp learns that the input ended (held
        // ones are handed on as slots free), unless the work outlasts the grace (a model or
        // a client that never answers, a stuck file): the client is gone, so the rest is
        // cancelled, what is still held never starts, and `serve` exits non-zero. A stall
        // has had its grace already, and the line in hand is unanswered too.
        let left = if stalled {
            tracing::warn!(
                "stdin is closed and no answer was taken for {} ms; the input has ended",
                EOF_WAIT.as_millis()
            );
            self.gate.wait_until_idle_within(std::time::Duration::ZERO) + 1
        } else {
            self.gate.wait_until_idle_within(EOF_WAIT)
        };
        self.gate.ended.set(StopReason::EndOfInput);
        self.gate.end_input();
        if let Ok(dispatcher) = dispatcher {
            let _ = dispatcher.join();
        }
        drop(std::mem::take(&mut self.gate.lock().held));
        if left > 0 {
            tracing::warn!(
                unanswered = left,
                "stdin is closed and requests are still unanswered after {} ms; stopping them",
                EOF_WAIT.as_millis()
            );
            self.gate.abandon(left);
        }
    }

    /// Hands on each held line once a slot is free, until the reading ends.
    fn hand_on_held(self) {
        while self.gate.wait_for_held_and_room() {
            let to_rmcp = self.lock_rmcp();
            let Some(decoded) = self.gate.take_held() else {
                continue;
            };
            if !self.handle(&to_rmcp, decoded) {
                drop(to_rmcp);
                self.gate.end_input();
                return;
            }
        }
    }

    fn lock_rmcp(&self) -> MutexGuard<'_, ToRmcp> {
        self.to_rmcp.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// False when rmcp no longer listens.
    fn handle(&self, to_rmcp: &ToRmcp, decoded: Decoded) -> bool {
        match decoded {
            Decoded::Skip => true,
            Decoded::Answer { code, message, id } => {
                self.answer(code, &message, id);
                true
            }
            Decoded::Message(message) => {
                // Before the session starts rmcp takes requests only, and ends the
                // session at anything else; a notification or response sent that early
                // (an eager `notifications/initialized`) is ignored, as prompt-diary's
                // server ignores it.
                if !self.started.load(Ordering::Acquire) {
                    match message.as_ref() {
                        JsonRpcMessage::Request(request) if starts_session(&request.request) => {
                            self.started.store(true, Ordering::Release);
                        }
                        JsonRpcMessage::Request(_) => {}
                        _ => {
                            tracing::debug!("a message before initialize is ignored");
                            return true;
                        }
                    }
                }
                if let JsonRpcMessage::Request(request) = message.as_ref()
                    && !self.gate.take_id(request.id.clone())
                {
                    self.answer(
                        INVALID_REQUEST,
                        "Invalid Request: a request with this id is still in flight",
                        Some(request.id.clone()),
                    );
                    return true;
                }
                if let Some(id) = cancelled_request(&message) {
                    // rmcp answers a cancelled request no more; a held one is dropped.
                    self.gate.cancel(id);
                }
                to_rmcp.blocking_send(*message).is_ok()
            }
        }
    }

    /// Writes an error answer this transport makes itself.
    fn answer(&self, code: i64, message: &str, id: Option<RequestId>) {
        let value = serde_json::json!({
            "jsonrpc": "2.0",
            "id": id,
            "error": {"code": code, "message": message},
        });
        let mut line = value.to_string().into_bytes();
        line.push(b'\n');
        self.gate.take_slot();
        let job = Job {
            message: Outgoing::Line(line),
            release: Release::Slot,
            done: None,
        };
        if self.jobs.send(job).is_err() {
            self.gate.release(Release::Slot);
        }
    }
}

/// Whether rmcp starts the session at `request`: `initialize`, or a request carrying the
/// whole of the inline protocol metadata that starts a session without it. Before one,
/// rmcp answers pings and refuses other requests, and stops at anything else.
fn starts_session(request: &rmcp::model::ClientRequest) -> bool {
    use rmcp::model::{ClientRequest, GetMeta, ProtocolVersion};
    match request {
        ClientRequest::InitializeRequest(_) => true,
        ClientRequest::PingRequest(_) | ClientRequest::DiscoverRequest(_) => false,
        other => {
            let meta = other.get_meta();
            meta.protocol_version().is_some()
                && meta
                    .missing_required_keys(&ProtocolVersion::V_2026_07_28)
                    .is_empty()
        }
    }
}

/// Whether handing `decoded` on takes a slot: a request, or an answer this transport
/// makes; responses and notifications take none.
fn needs_slot(decoded: &Decoded) -> bool {
    match decoded {
        Decoded::Skip => false,
        Decoded::Answer { .. } => true,
        Decoded::Message(message) => matches!(message.as_ref(), JsonRpcMessage::Request(_)),
    }
}

/// The id of a held request (not of an answer this transport owes).
fn held_request_id(decoded: &Decoded) -> Option<&RequestId> {
    match decoded {
        Decoded::Message(message) => match message.as_ref() {
            JsonRpcMessage::Request(request) => Some(&request.id),
            _ => None,
        },
        _ => None,
    }
}

/// The request a `notifications/cancelled` names.
fn cancelled_request(message: &RxJsonRpcMessage<RoleServer>) -> Option<RequestId> {
    let JsonRpcMessage::Notification(notification) = message else {
        return None;
    };
    let rmcp::model::ClientNotification::CancelledNotification(cancelled) =
        &notification.notification
    else {
        return None;
    };
    cancelled.params.request_id.clone()
}

/// Reads one line into `line` (without its newline), never holding more than
/// [`LINE_MAX`] bytes of it: the rest of a longer line is read and dropped.
fn read_line(input: &mut impl BufRead, line: &mut Vec<u8>) -> io::Result<LineRead> {
    line.clear();
    let mut too_long = false;
    loop {
        let available = match input.fill_buf() {
            Ok(available) => available,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if available.is_empty() {
            // A last line without a newline is still a line.
            return Ok(match (too_long, line.is_empty()) {
                (true, _) => LineRead::TooLong,
                (false, true) => LineRead::End,
                (false, false) => LineRead::Line,
            });
        }
        let newline = memchr::memchr(b'\n', available);
        let take = newline.unwrap_or(available.len());
        if !too_long {
            if line.len() + take > LINE_MAX {
                too_long = true;
                let keep = HEAD_KEPT.saturating_sub(line.len()).min(take);
                line.truncate(HEAD_KEPT);
                line.extend_from_slice(&available[..keep]);
            } else {
                line.extend_from_slice(&available[..take]);
            }
        }
        let consumed = newline.map_or(take, |at| at + 1);
        input.consume(consumed);
        if newline.is_some() {
            return Ok(if too_long {
                LineRead::TooLong
            } else {
                LineRead::Line
            });
        }
    }
}

/// What a line is.
enum Decoded {
    /// Nothing to do: a blank line, or a malformed notification or response (which
    /// JSON-RPC never answers).
    Skip,
    Message(Box<RxJsonRpcMessage<RoleServer>>),
    Answer {
        code: i64,
        message: String,
        id: Option<RequestId>,
    },
}

fn error(code: i64, message: impl Into<String>, id: Option<RequestId>) -> Decoded {
    Decoded::Answer {
        code,
        message: message.into(),
        id,
    }
}

/// Decodes one line. The nesting is measured before anything recurses into it.
fn decode(line: &[u8]) -> Decoded {
    let line = line.trim_ascii();
    if line.is_empty() {
        return Decoded::Skip;
    }
    let scanned = scan(line);
    if scanned.depth > DEPTH_MAX {
        return error(
            INVALID_REQUEST,
            format!("Invalid Request: nested deeper than {DEPTH_MAX} levels"),
            scanned.id,
        );
    }
    let mut de = serde_json::Deserializer::from_slice(line);
    de.disable_recursion_limit();
    let parsed = serde::Deserialize::deserialize(&mut de).and_then(|v: Value| de.end().map(|()| v));
    match parsed {
        Ok(value) => {
            // A tool call whose arguments serde_json cannot hold as Python does (an
            // integer beyond 64 bits) carries them read with Python's rules too.
            let exact = super::args::exact_arguments(line, &value);
            let mut decoded = classify(value);
            if let (Some(exact), Decoded::Message(message)) = (exact, &mut decoded)
                && let JsonRpcMessage::Request(request) = message.as_mut()
            {
                request.request.extensions_mut().insert(exact);
            }
            decoded
        }
        Err(e) => unparsable(line, &scanned, &e),
    }
}

/// A line serde_json cannot take. Valid JSON whose values it cannot hold (a lone
/// surrogate escape, a number beyond `f64`) is an invalid request or invalid params;
/// anything else (bad UTF-8, `NaN`, broken syntax) is a parse error.
fn unparsable(line: &[u8], scanned: &Scanned, e: &serde_json::Error) -> Decoded {
    let lenient = std::str::from_utf8(line)
        .ok()
        .filter(|_| !scanned.non_json_literal)
        .and_then(|text| crate::util::pyjson::parse_borrowed(text).ok());
    let Some(node) = lenient else {
        return error(PARSE_ERROR, format!("Parse error: {e}"), scanned.id.clone());
    };
    let crate::util::pyjson::Node::Object(_) = &node else {
        return error(INVALID_REQUEST, "Invalid Request: not an object", None);
    };
    // The id is checked as the message's shape is.
    let id = match node.get("id") {
        None => None,
        Some(_) => match &scanned.id {
            Some(id) => Some(id.clone()),
            None => {
                return error(
                    INVALID_REQUEST,
                    "Invalid Request: id must be a string or an integer",
                    None,
                );
            }
        },
    };
    let method_ok = node
        .get("method")
        .and_then(crate::util::pyjson::Node::as_str)
        .is_some();
    let version_ok = node
        .get("jsonrpc")
        .and_then(crate::util::pyjson::Node::as_str)
        .is_some_and(|v| v.is("2.0"));
    match id {
        None => Decoded::Skip,
        Some(id) if !method_ok || !version_ok => {
            error(INVALID_REQUEST, format!("Invalid Request: {e}"), Some(id))
        }
        Some(id) => error(INVALID_PARAMS, format!("Invalid params: {e}"), Some(id)),
    }
}

/// A parsed line as a JSON-RPC message, or the answer saying why it is not one.
fn classify(value: Value) -> Decoded {
    let Value::Object(object) = &value else {
        return error(INVALID_REQUEST, "Invalid Request: not an object", None);
    };
    let id = match object.get("id") {
        None => None,
        Some(raw) => match request_id(raw) {
            Some(id) => Some(id),
            None => {
                return error(
                    INVALID_REQUEST,
                    "Invalid Request: id must be a string or an integer",
                    None,
                );
            }
        },
    };
    if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return match id {
            Some(id) => error(
                INVALID_REQUEST,
                "Invalid Request: jsonrpc must be \"2.0\"",
                Some(id),
            ),
            None => error(
                INVALID_REQUEST,
                "Invalid Request: jsonrpc must be \"2.0\"",
                None,
            ),
        };
    }
    let is_response = object.contains_key("result") || object.contains_key("error");
    match object.get("method") {
        None if is_response => {
            // A response to a request of this server's (it sends none): rmcp's to judge.
            return match serde_json::from_value(value) {
                Ok(message) => Decoded::Message(Box::new(message)),
                Err(_) => Decoded::Skip,
            };
        }
        None => return error(INVALID_REQUEST, "Invalid Request: method is missing", id),
        Some(Value::String(_)) => {}
        Some(_) => {
            return error(
                INVALID_REQUEST,
                "Invalid Request: method must be a string",
                id,
            );
        }
    }
    if let Some(params) = object.get("params")
        && !params.is_object()
    {
        return match id {
            Some(id) => error(
                INVALID_PARAMS,
                "Invalid params: params must be an object",
                Some(id),
            ),
            None => Decoded::Skip,
        };
    }
    match serde_json::from_value(value) {
        Ok(message) => Decoded::Message(Box::new(message)),
        Err(e) => match id {
            Some(id) => error(INVALID_PARAMS, format!("Invalid params: {e}"), Some(id)),
            None => Decoded::Skip,
        },
    }
}

/// A JSON-RPC id: a string or an integer that fits in 64 bits.
fn request_id(raw: &Value) -> Option<RequestId> {
    match raw {
        Value::String(s) => Some(RequestId::String(s.as_str().into())),
        Value::Number(n) => n.as_i64().map(RequestId::Number),
        _ => None,
    }
}

/// What a byte scan of a line finds, without parsing it.
struct Scanned {
    /// Deepest nesting of arrays and objects.
    depth: usize,
    /// A `NaN`, `Infinity` or other bare word JSON does not have, outside strings.
    non_json_literal: bool,
    /// The top-level object's `id` (its last), if it is a string or a 64-bit integer.
    id: Option<RequestId>,
}

/// Scans `line` once, keeping no stack: strings are skipped (escapes included), brackets
/// counted, and the top-level `"id"` member's value read where it stands.
fn scan(line: &[u8]) -> Scanned {
    let mut scanned = Scanned {
        depth: 0,
        non_json_literal: false,
        id: None,
    };
    let mut depth = 0usize;
    let mut i = 0;
    // Inside the top-level object, whether the last string was the key `id`.
    let mut id_key = false;
    let mut last_string: Option<(usize, usize)> = None;
    while i < line.len() {
        match line[i] {
            b'"' => {
                let start = i;
                i += 1;
                while i < line.len() && line[i] != b'"' {
                    if line[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
                let end = (i + 1).min(line.len());
                if depth == 1 && id_key {
                    scanned.id = serde_json::from_slice::<String>(&line[start..end])
                        .ok()
                        .map(|s| RequestId::String(s.into()));
                    id_key = false;
                }
                last_string = Some((start, end));
            }
            b'{' | b'[' => {
                depth += 1;
                scanned.depth = scanned.depth.max(depth);
                id_key = false;
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            b':' if depth == 1 => {
                id_key = last_string.is_some_and(|(s, e)| &line[s..e] == b"\"id\"");
                if id_key {
                    scanned.id = None;
                }
            }
            b',' => id_key = false,
            b'-' | b'0'..=b'9' => {
                let start = i;
                while i + 1 < line.len()
                    && matches!(line[i + 1], b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E')
                {
                    i += 1;
                }
                if depth == 1 && id_key {
                    scanned.id = std::str::from_utf8(&line[start..=i])
                        .ok()
                        .and_then(|n| n.parse::<i64>().ok())
                        .map(RequestId::Number);
                    id_key = false;
                }
            }
            b'a'..=b'z' | b'A'..=b'Z' => {
                let start = i;
                while i + 1 < line.len() && line[i + 1].is_ascii_alphanumeric() {
                    i += 1;
                }
                if !matches!(&line[start..=i], b"true" | b"false" | b"null") {
                    scanned.non_json_literal = true;
                }
                id_key = false;
            }
            _ => {}
        }
        i += 1;
    }
    scanned
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A piece of text as a streamed read sends it: escaped as JSON string content.
    fn escape(text: &str) -> String {
        let mut piece = String::new();
        crate::util::pyjson::write_string_content(&mut piece, text);
        piece
    }

    fn answer(line: &[u8]) -> (i64, Option<RequestId>) {
        match decode(line) {
            Decoded::Answer { code, id, .. } => (code, id),
            Decoded::Skip => panic!("skipped"),
            Decoded::Message(m) => panic!("decoded {m:?}"),
        }
    }

    #[test]
    fn the_scan_finds_the_top_level_id() {
        let cases: [(&[u8], Option<RequestId>); 6] = [
            (br#"{"id": 7, "x": {"id": 8}}"#, Some(RequestId::Number(7))),
            (
                br#"{"x": {"id": 8}, "id": "a\"b"}"#,
                Some(RequestId::String("a\"b".into())),
            ),
            (br#"{"x": "\"id\":", "y": 1}"#, None),
            (br#"{"id": 1.5}"#, None),
            (br#"{"id": null}"#, None),
            (
                b"{\"method\": \"\xff\", \"id\": 3}",
                Some(RequestId::Number(3)),
            ),
        ];
        for (line, id) in cases {
            assert_eq!(scan(line).id, id, "{}", String::from_utf8_lossy(line));
        }
    }

    #[test]
    fn undecodable_lines_get_their_codes() {
        let n = || Some(RequestId::Number(1));
        let deep = format!(
            "{{\"id\":1,\"p\":{}{}}}",
            "[".repeat(100_000),
            "]".repeat(100_000)
        );
        type Case = (Vec<u8>, (i64, Option<RequestId>));
        let cases: Vec<Case> = vec![
            (
                b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xff\"}".to_vec(),
                (PARSE_ERROR, n()),
            ),
            (
                br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"a":NaN}}"#.to_vec(),
                (PARSE_ERROR, n()),
            ),
            (
                b"{\"jsonrpc\":\"2.0\",\"id\":1,".to_vec(),
                (PARSE_ERROR, n()),
            ),
            (b"nonsense".to_vec(), (PARSE_ERROR, None)),
            (
                br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"a":"\ud800"}}"#
                    .to_vec(),
                (INVALID_PARAMS, n()),
            ),
            (
                format!(
                    r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"a":{}}}}}"#,
                    "9".repeat(400)
                )
                .into_bytes(),
                (INVALID_PARAMS, n()),
            ),
            (
                br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"a":1e400}}"#.to_vec(),
                (INVALID_PARAMS, n()),
            ),
            (
                br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":[1]}"#.to_vec(),
                (INVALID_PARAMS, n()),
            ),
            (
                br#"{"jsonrpc":"2.0","id":1}"#.to_vec(),
                (INVALID_REQUEST, n()),
            ),
            (
                br#"{"jsonrpc":"2.0","id":1e400,"method":"ping"}"#.to_vec(),
                (INVALID_REQUEST, None),
            ),
            (br#"[1]"#.to_vec(), (INVALID_REQUEST, None)),
            (deep.into_bytes(), (INVALID_REQUEST, n())),
        ];
        for (line, expect) in cases {
            assert_eq!(
                answer(&line),
                expect,
                "{}",
                String::from_utf8_lossy(&line[..line.len().min(200)])
            );
        }
    }

    #[test]
    fn a_long_text_is_written_as_serde_json_writes_it() {
        use rmcp::model::{CallToolResult, NumberOrString};
        let awkward = "quote \" backslash \\ newline \n nul \0 us \u{1f} del \u{7f} é 😀 \u{2028} ";
        let big = awkward.repeat(4000);
        let response = |text: String, id: NumberOrString| -> TxJsonRpcMessage<RoleServer> {
            JsonRpcMessage::response(
                ServerResult::CallToolResult(CallToolResult::success(vec![ContentBlock::text(
                    text,
                )])),
                id,
            )
        };
        let cases = [
            (big.clone(), NumberOrString::Number(7)),
            ("small".to_owned(), NumberOrString::Number(8)),
            // The member's spelling inside the text or the id does not move the splice.
            (
                format!("\"text\":\"\"{big}"),
                NumberOrString::String("\"text\":\"\"".into()),
            ),
            (String::new(), NumberOrString::Number(9)),
        ];
        for (text, id) in cases {
            let message = response(text, id);
            let mut expect = serde_json::to_vec(&message).unwrap();
            expect.push(b'\n');
            let mut got = Vec::new();
            write_message(&mut got, message, None, &mut Vec::new()).unwrap();
            assert!(
                got == expect,
                "{}",
                String::from_utf8_lossy(&got[..80.min(got.len())])
            );
        }
    }

    fn gate() -> Arc<Gate> {
        Arc::new(Gate {
            state: Mutex::default(),
            changed: Condvar::new(),
            ended: Stop::new(),
        })
    }

    fn read_response(text: String, id: i64) -> TxJsonRpcMessage<RoleServer> {
        use rmcp::model::CallToolResult;
        JsonRpcMessage::response(
            ServerResult::CallToolResult(CallToolResult::success(vec![ContentBlock::text(text)])),
            RequestId::Number(id),
        )
    }

    /// What the writer sends for the streamed answer to request `id`.
    fn written_streamed(gate: &Arc<Gate>, id: i64, placeholder: String) -> Value {
        let message = read_response(placeholder, id);
        let stream = streamed_id(&message).and_then(|id| gate.lock().streams.remove(&id));
        assert!(stream.is_some());
        let mut got = Vec::new();
        write_message(&mut got, message, stream, &mut Vec::new()).unwrap();
        assert_eq!(got.last(), Some(&b'\n'));
        serde_json::from_slice(&got).unwrap()
    }

    #[test]
    fn a_streamed_text_is_sent_as_serde_json_writes_the_text() {
        let gate = gate();
        let streamer = Streamer(gate.clone());
        assert!(gate.take_id(RequestId::Number(3)));
        assert!(
            streamer.stream(&RequestId::Number(4)).is_none(),
            "not in flight"
        );
        let text = "quote \" backslash \\ nul \0 é 😀 \u{2028} ".repeat(3000);
        let (placeholder, sender) = streamer.stream(&RequestId::Number(3)).unwrap();
        let cuts = [0, text.len() / 3, text.len()].map(|at| text.floor_char_boundary(at));
        let pieces: Vec<String> = cuts
            .windows(2)
            .map(|w| text[w[0]..w[1]].to_owned())
            .collect();
        let maker = std::thread::spawn(move || {
            for piece in pieces {
                assert!(sender.send(escape(&piece)));
            }
            sender.finish();
        });
        let got = written_streamed(&gate, 3, placeholder);
        maker.join().unwrap();
        let expect = serde_json::to_value(read_response(text, 3)).unwrap();
        assert_eq!(got, expect);
    }

    #[test]
    fn an_unfinished_text_still_makes_a_valid_message() {
        let gate = gate();
        let streamer = Streamer(gate.clone());
        assert!(gate.take_id(RequestId::Number(1)));
        let (placeholder, sender) = streamer.stream(&RequestId::Number(1)).unwrap();
        assert!(sender.send(escape("{\n  \"status\": ")));
        drop(sender);
        let got = written_streamed(&gate, 1, placeholder);
        assert_eq!(
            got["result"]["content"][0]["text"],
            "{\n  \"status\": \n[evidence-store: this result could not be completed; see the server log]"
        );
    }

    #[test]
    fn a_cancelled_request_drops_its_stream_and_keeps_its_slot_until_the_maker_stops() {
        let gate = gate();
        let streamer = Streamer(gate.clone());
        assert!(gate.take_id(RequestId::Number(1)));
        let (_, sender) = streamer.stream(&RequestId::Number(1)).unwrap();
        gate.cancel(RequestId::Number(1));
        assert!(
            !sender.send("late".into()),
            "its maker learns that nobody listens"
        );
        assert_eq!(gate.lock().taken, 1, "the maker still runs");
        drop(sender);
        assert_eq!(gate.lock().taken, 0);
        assert!(gate.lock().ids.is_empty() && gate.lock().running.is_empty());
    }

    #[test]
    fn a_cancel_gives_the_slot_back_when_the_work_ends() {
        let gate = gate();
        let streamer = Streamer(gate.clone());
        let (one, two) = (RequestId::Number(1), RequestId::Number(2));
        assert!(gate.take_id(one.clone()) && gate.take_id(two.clone()));
        // Cancelled before its work began: the slot is free at once, and no work starts.
        gate.cancel(one.clone());
        assert_eq!(gate.lock().taken, 1);
        assert!(streamer.begin(&one).is_none());
        assert!(streamer.stream(&one).is_none());
        // Cancelled while its work runs (the call and its streamed text): held until both end.
        let call = streamer.begin(&two).unwrap();
        let (_, text) = streamer.stream(&two).unwrap();
        gate.cancel(two.clone());
        assert!(
            streamer.begin(&two).is_none(),
            "no new work for a cancelled request"
        );
        assert_eq!(gate.lock().taken, 1);
        drop(call);
        assert_eq!(gate.lock().taken, 1);
        drop(text);
        assert_eq!(gate.lock().taken, 0);
        assert!(gate.take_id(two), "its id is free again");
    }

    #[test]
    fn an_answered_request_is_released_by_its_answer_not_its_work() {
        let gate = gate();
        let streamer = Streamer(gate.clone());
        let id = RequestId::Number(7);
        assert!(gate.take_id(id.clone()));
        drop(streamer.begin(&id).unwrap());
        assert_eq!(gate.lock().taken, 1, "the answer is not written yet");
        gate.release(Release::Id(id));
        assert_eq!(gate.lock().taken, 0);
    }

    /// The next message the reader hands to rmcp, within a generous bound.
    fn next_for_rmcp(stdio: &mut Stdio) -> Option<Value> {
        let end = std::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            match stdio.incoming.try_recv() {
                Ok(message) => return Some(serde_json::to_value(message).unwrap()),
                Err(mpsc::error::TryRecvError::Disconnected) => return None,
                Err(mpsc::error::TryRecvError::Empty) => {
                    assert!(std::time::Instant::now() < end, "nothing handed on in 20 s");
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
            }
        }
    }

    fn nothing_for_rmcp(stdio: &mut Stdio) -> bool {
        std::thread::sleep(std::time::Duration::from_millis(200));
        matches!(
            stdio.incoming.try_recv(),
            Err(mpsc::error::TryRecvError::Empty)
        )
    }

    #[test]
    fn with_every_slot_taken_responses_and_cancels_still_pass_and_requests_wait() {
        let (read, mut write) = std::io::pipe().unwrap();
        let mut stdio = Stdio::new(read, io::sink()).unwrap();
        let mut send = |line: String| writeln!(write, "{line}").unwrap();
        let ping = |id: i64| format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#);
        // The session starts (until then only requests are handed on), then its slot is
        // given back as its answer would give it.
        send(r#"{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#.to_owned());
        assert_eq!(next_for_rmcp(&mut stdio).unwrap()["id"], "init");
        stdio
            .gate
            .release(Release::Id(RequestId::String("init".into())));
        for id in 0..IN_FLIGHT_MAX as i64 {
            send(ping(id));
            assert_eq!(next_for_rmcp(&mut stdio).unwrap()["id"], id);
        }
        // Every slot is taken: these two requests are held.
        send(ping(100));
        send(ping(101));
        // A client's answer and a cancel of a held request go on at once.
        send(r#"{"jsonrpc":"2.0","id":"s1","result":{}}"#.to_owned());
        assert_eq!(next_for_rmcp(&mut stdio).unwrap()["id"], "s1");
        send(
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":101}}"#
                .to_owned(),
        );
        assert_eq!(
            next_for_rmcp(&mut stdio).unwrap()["method"],
            "notifications/cancelled"
        );
        assert!(nothing_for_rmcp(&mut stdio), "the held request waits");
        assert_eq!(
            stdio.gate.lock().held.len(),
            1,
            "the cancelled one is dropped"
        );
        // A slot given back lets the first held request on; the cancelled one never comes.
        stdio.gate.release(Release::Id(RequestId::Number(0)));
        assert_eq!(next_for_rmcp(&mut stdio).unwrap()["id"], 100);
        assert!(
            nothing_for_rmcp(&mut stdio),
            "the cancelled request never starts"
        );
        assert_eq!(stdio.gate.lock().taken, IN_FLIGHT_MAX);
    }

    #[test]
    fn the_end_of_input_is_read_with_every_slot_taken() {
        let (read, mut write) = std::io::pipe().unwrap();
        let mut stdio = Stdio::new(read, io::sink()).unwrap();
        for id in 0..IN_FLIGHT_MAX as i64 + 3 {
            writeln!(write, r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#).unwrap();
        }
        for _ in 0..IN_FLIGHT_MAX {
            assert!(next_for_rmcp(&mut stdio).is_some());
        }
        drop(write);
        // A slot given back during the grace lets a held request on; the rest outlast
        // the grace and count as unanswered, then rmcp learns that the input ended.
        stdio.gate.release(Release::Id(RequestId::Number(0)));
        assert_eq!(
            next_for_rmcp(&mut stdio).unwrap()["id"],
            IN_FLIGHT_MAX as i64
        );
        assert!(next_for_rmcp(&mut stdio).is_none());
        assert_eq!(stdio.abandoned()(), IN_FLIGHT_MAX + 2);
        assert!(stdio.gate.lock().held.is_empty());
    }

    #[test]
    fn a_closed_input_is_seen_with_every_slot_taken_and_every_hold_full() {
        let (read, mut write) = std::io::pipe().unwrap();
        let mut stdio = Stdio::new(read, io::sink()).unwrap();
        // Taken, held, one in the reader's hand, and more the reader never gets to.
        for id in 0..(IN_FLIGHT_MAX + HELD_MAX) as i64 + 5 {
            writeln!(write, r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#).unwrap();
        }
        for _ in 0..IN_FLIGHT_MAX {
            assert!(next_for_rmcp(&mut stdio).is_some());
        }
        // No answer is ever written: the client closed stdin and reads nothing.
        drop(write);
        assert!(next_for_rmcp(&mut stdio).is_none(), "the input never ended");
        assert_eq!(stdio.abandoned()(), IN_FLIGHT_MAX + HELD_MAX + 1);
        assert!(stdio.gate.lock().held.is_empty());
    }

    #[test]
    fn long_lines_are_drained_not_held() {
        let mut text = br#"{"id": 5, "x": ""#.to_vec();
        text.resize(LINE_MAX + 10, b'a');
        text.extend_from_slice(b"\"}\n{}\n");
        let mut input = BufReader::with_capacity(1 << 10, text.as_slice());
        let mut line = Vec::new();
        assert!(matches!(
            read_line(&mut input, &mut line).unwrap(),
            LineRead::TooLong
        ));
        assert!(line.len() <= HEAD_KEPT);
        assert_eq!(scan(&line).id, Some(RequestId::Number(5)));
        assert!(matches!(
            read_line(&mut input, &mut line).unwrap(),
            LineRead::Line
        ));
        assert_eq!(line, b"{}");
        assert!(matches!(
            read_line(&mut input, &mut line).unwrap(),
            LineRead::End
        ));
    }
}
