//! Fitting the extraction model's prompts to its context window, and the sub-agent's guard
//! against repeating itself.
//!
//! - One estimate of bytes a token, [`BYTES_PER_TOKEN_TENTHS`], for every size the engine
//!   computes: chunk sizes, the map prompt's "Tokens (estimate)", the prompt budget.
//! - A prompt may take the context less the answer's tokens ([`Budget`]). The read-grep
//!   conversation is cut to it before every turn, the oldest tool results first
//!   ([`fit_conversation`]); the reduce prompt's chunk outputs are cut to it, the longest
//!   first ([`fit_outputs`]). Every cut says so in the text the model reads.
//! - A context-size error is retried once with a smaller budget: from the endpoint's numbers
//!   (its context, at the bytes a token the refused prompt showed, less a tenth), else half
//!   the refused prompt ([`Budget::shrink`]).
//! - A tool call the same as one of an earlier turn (same tool, same arguments) ends the
//!   sub-agent: it would only repeat itself ([`CallLog`]). Calls within one turn are bounded
//!   by the tool-call limit and all run.

use serde_json::Value;

use super::model::{Message, Request, ToolCall};
use crate::util::text::floor_char_boundary;

/// Bytes a token is estimated at, in tenths: 2.5. Real logs and JSON measure 2.3-2.8
/// bytes a token with small models' tokenizers; 4 sent prompts larger than the context.
pub const BYTES_PER_TOKEN_TENTHS: usize = 25;

/// Tokens `bytes` bytes are estimated at (rounded up).
pub fn tokens_for(bytes: usize) -> usize {
    bytes.saturating_mul(10).div_ceil(BYTES_PER_TOKEN_TENTHS)
}

/// Bytes `tokens` tokens are estimated to hold (rounded down).
pub fn bytes_for(tokens: usize) -> usize {
    tokens.saturating_mul(BYTES_PER_TOKEN_TENTHS) / 10
}

/// Tokens a prompt may take: the context less the answer, or half the context when the
/// answer's budget takes nearly all of it.
pub fn prompt_tokens(context_tokens: usize, max_output_tokens: usize) -> usize {
    let room = context_tokens.saturating_sub(max_output_tokens);
    if room < context_tokens / 4 {
        context_tokens / 2
    } else {
        room
    }
}

/// Bytes a message is estimated to add for its role and framing in the chat template.
const MESSAGE_OVERHEAD: usize = 16;

/// Bytes one message adds to a prompt.
pub fn message_bytes(message: &Message) -> usize {
    MESSAGE_OVERHEAD
        + match message {
            Message::User(text) => text.len(),
            Message::Assistant { text, tool_calls } => {
                text.len()
                    + tool_calls
                        .iter()
                        .map(|c| c.name.len() + c.id.len() + c.arguments.to_string().len())
                        .sum::<usize>()
            }
            Message::ToolResult {
                call_id,
                name,
                content,
            } => call_id.len() + name.len() + content.len(),
        }
}

/// Bytes of everything a request sends but its messages: the system prompt and the tool
/// definitions, as JSON.
pub fn fixed_bytes(request: &Request) -> usize {
    MESSAGE_OVERHEAD
        + request.system.len()
        + request
            .tools
            .iter()
            .map(|t| {
                MESSAGE_OVERHEAD
                    + t.name.len()
                    + t.description.len()
                    + t.input_schema.to_string().len()
            })
            .sum::<usize>()
}

/// Bytes a whole request is estimated at.
pub fn request_bytes(request: &Request) -> usize {
    fixed_bytes(request) + request.messages.iter().map(message_bytes).sum::<usize>()
}

/// The prompt bytes one call may send, and whether its one retry after a context error is
/// spent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    bytes: usize,
    max_output_tokens: usize,
    retried: bool,
}

impl Budget {
    /// The budget of a model with this context and answer size.
    pub fn new(context_tokens: usize, max_output_tokens: usize) -> Budget {
        Budget {
            bytes: bytes_for(prompt_tokens(context_tokens, max_output_tokens)),
            max_output_tokens,
            retried: false,
        }
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// After the endpoint refused a prompt of `sent` bytes as too large for its context:
    /// the smaller budget for the one retry, or `None` when the retry is spent. With the
    /// endpoint's numbers, its context less the answer at the bytes a token the refused
    /// prompt showed, less a tenth; else half the refused prompt. Always below `sent`.
    pub fn shrink(
        &mut self,
        sent: usize,
        n_prompt_tokens: Option<u64>,
        n_ctx: Option<u64>,
    ) -> Option<usize> {
        if self.retried {
            return None;
        }
        self.retried = true;
        let half = sent / 2;
        let fitted = match (
            n_prompt_tokens.and_then(|n| usize::try_from(n).ok()),
            n_ctx.and_then(|n| usize::try_from(n).ok()),
        ) {
            (Some(n_prompt), Some(n_ctx)) if n_prompt > 0 => {
                let room = prompt_tokens(n_ctx, self.max_output_tokens);
                let bytes = sent as u128 * room as u128 / n_prompt as u128 * 9 / 10;
                usize::try_from(bytes).unwrap_or(usize::MAX)
            }
            _ => half,
        };
        self.bytes = fitted.min(sent.saturating_mul(9) / 10).min(self.bytes);
        Some(self.bytes)
    }

    /// The bytes the prompt was cut to for the one retry, once it was retried.
    pub fn retried_at(&self) -> Option<usize> {
        self.retried.then_some(self.bytes)
    }
}

/// What a failure adds to its reason after a retry with the prompt cut to `retried_at`
/// bytes (nothing without a retry).
pub fn retry_note(retried_at: Option<usize>) -> String {
    match retried_at {
        Some(bytes) => format!(" (after a retry with the prompt cut to {bytes} bytes)"),
        None => String::new(),
    }
}

/// What a tool result cut short ends with.
fn cut_note(left_out: usize) -> String {
    format!(
        "\n[{left_out} bytes of this result were cut to fit the model's context; \
         call the tool again on a narrower range if you need them]"
    )
}

/// What replaces a tool result dropped whole.
pub const DROPPED: &str = "[this result was dropped to fit the model's context; \
                           call the tool again on a narrower range if you need it]";

/// Cuts the tool results of `messages`, oldest first, until the request fits `budget`
/// bytes with `fixed` bytes of system prompt and tools; each cut result ends with a note
/// saying so, and one that keeps too little is replaced by [`DROPPED`]. Returns how many
/// results were cut. When even every result dropped is too much, everything is dropped and
/// the endpoint has the last word.
pub fn fit_conversation(messages: &mut [Message], fixed: usize, budget: usize) -> usize {
    let mut total = fixed + messages.iter().map(message_bytes).sum::<usize>();
    let mut cut = 0;
    for message in messages.iter_mut() {
        if total <= budget {
            break;
        }
        let Message::ToolResult { content, .. } = message else {
            continue;
        };
        let excess = total - budget;
        let len = content.len();
        // The note of the cut takes room too; a cut keeping under 64 bytes is a drop.
        let keep = len.saturating_sub(excess + cut_note(len).len());
        let new = if keep < 64 {
            DROPPED.to_string()
        } else {
            let end = floor_char_boundary(content, keep);
            format!("{}{}", &content[..end], cut_note(len - end))
        };
        if new.len() >= len {
            continue;
        }
        total = total - len + new.len();
        *content = new;
        cut += 1;
    }
    cut
}

/// What a chunk output cut short ends with.
fn output_note(left_out: usize) -> String {
    format!("\n[{left_out} more bytes of this chunk's output were cut to fit the model's context]")
}

/// The chunk outputs cut to `room` bytes in all, the longest first: every output keeps an
/// equal share at least, and what the shorter ones leave goes to the longer ones. Each cut
/// output ends with a note saying so. Returns the outputs and how many were cut.
pub fn fit_outputs(outputs: &[String], room: usize) -> (Vec<String>, usize) {
    let total: usize = outputs.iter().map(String::len).sum();
    if total <= room || outputs.is_empty() {
        return (outputs.to_vec(), 0);
    }
    // The largest share `s` with the sum of min(len, s + note) within `room`.
    let note = output_note(usize::MAX).len();
    let spend = |share: usize| -> usize {
        outputs
            .iter()
            .map(|o| {
                if o.len() <= share {
                    o.len()
                } else {
                    share + note
                }
            })
            .sum()
    };
    let (mut lo, mut hi) = (0usize, outputs.iter().map(String::len).max().unwrap_or(0));
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if spend(mid) <= room {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    let mut cut = 0;
    let fitted = outputs
        .iter()
        .map(|o| {
            if o.len() <= lo {
                return o.clone();
            }
            cut += 1;
            let end = floor_char_boundary(o, lo);
            format!("{}{}", &o[..end], output_note(o.len() - end))
        })
        .collect();
    (fitted, cut)
}

/// The tool calls of one sub-agent run, to find one made before.
#[derive(Debug, Default)]
pub struct CallLog(Vec<(String, Value, usize)>);

impl CallLog {
    /// The turn of a recorded call with the same tool and arguments, if any.
    pub fn repeat_of(&self, call: &ToolCall) -> Option<usize> {
        self.0
            .iter()
            .find(|(name, args, _)| *name == call.name && *args == call.arguments)
            .map(|(_, _, turn)| *turn)
    }

    /// Records `call` as made on `turn`.
    pub fn record(&mut self, call: &ToolCall, turn: usize) {
        self.0
            .push((call.name.clone(), call.arguments.clone(), turn));
    }
}

/// Bytes of a repeated call's arguments quoted in the reason.
const QUOTED_ARGS_BYTES: usize = 200;

/// The reason a repeated tool call ends the sub-agent.
pub fn repeated(call: &ToolCall, turn: usize, earlier: usize) -> String {
    let args = call.arguments.to_string();
    let end = floor_char_boundary(&args, QUOTED_ARGS_BYTES);
    let more = if end < args.len() { "…" } else { "" };
    format!(
        "turn {turn}: the model repeated its tool call of turn {earlier}, {} {}{more}; \
         stopped, as it would only repeat itself",
        call.name,
        &args[..end]
    )
}

/// The line an answer starts with when the model's report had no closing tag.
pub fn unclosed_note(max_output_tokens: usize) -> String {
    format!(
        "NOTE: the model's report ended without its closing tag, so it may be cut short \
         (an answer may hold at most {max_output_tokens} tokens).\n\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn result(content: &str) -> Message {
        Message::ToolResult {
            call_id: "c".into(),
            name: "Read".into(),
            content: content.into(),
        }
    }

    fn content(m: &Message) -> &str {
        match m {
            Message::ToolResult { content, .. } => content,
            _ => "",
        }
    }

    #[test]
    fn estimates_use_one_figure() {
        assert_eq!(tokens_for(100), 40);
        assert_eq!(tokens_for(101), 41);
        assert_eq!(bytes_for(40), 100);
        assert_eq!(prompt_tokens(32768, 4096), 28672);
        // An answer taking nearly all the context leaves half of it to the prompt.
        assert_eq!(prompt_tokens(4096, 4000), 2048);
    }

    #[test]
    fn the_oldest_results_are_cut_first_and_say_so() {
        let mut messages = vec![
            Message::User("u".repeat(100)),
            result(&"a".repeat(1000)),
            result(&"b".repeat(1000)),
        ];
        let before: usize = messages.iter().map(message_bytes).sum();
        // 500 bytes too many: only the oldest result is cut.
        let cut = fit_conversation(&mut messages, 0, before - 500);
        assert_eq!(cut, 1);
        assert_eq!(content(&messages[2]), "b".repeat(1000));
        assert!(content(&messages[1]).starts_with("aaa"));
        assert!(content(&messages[1]).contains("were cut to fit the model's context"));
        assert!(messages.iter().map(message_bytes).sum::<usize>() <= before - 500);
        // Far too many: both dropped, the user message kept.
        let cut = fit_conversation(&mut messages, 0, 200);
        assert_eq!(cut, 2);
        assert_eq!(content(&messages[1]), DROPPED);
        assert_eq!(content(&messages[2]), DROPPED);
        assert_eq!(messages[0], Message::User("u".repeat(100)));
        // Within the budget: untouched.
        let mut small = vec![result("x")];
        assert_eq!(fit_conversation(&mut small, 0, 1000), 0);
        assert_eq!(content(&small[0]), "x");
    }

    #[test]
    fn outputs_share_the_room_the_longest_cut_first() {
        let outputs = vec!["s".repeat(10), "l".repeat(5000), "m".repeat(3000)];
        let (fitted, cut) = fit_outputs(&outputs, 4000);
        assert_eq!(cut, 2);
        assert_eq!(fitted[0], "s".repeat(10));
        assert!(fitted.iter().map(String::len).sum::<usize>() <= 4000);
        assert!(fitted[1].contains("were cut to fit the model's context"));
        assert_eq!(fitted[1].len(), fitted[2].len(), "equal shares");
        let (same, cut) = fit_outputs(&outputs, 100_000);
        assert_eq!((same, cut), (outputs, 0));
    }

    #[test]
    fn a_context_error_shrinks_the_budget_once() {
        let mut b = Budget::new(32768, 4096);
        assert_eq!(b.bytes(), 71_680);
        // The endpoint's numbers: 20,000 bytes were 10,000 tokens; 8192 - 4096 fit.
        assert_eq!(b.shrink(20_000, Some(10_000), Some(8192)), Some(7372));
        assert_eq!(
            retry_note(b.retried_at()),
            " (after a retry with the prompt cut to 7372 bytes)"
        );
        assert_eq!(b.shrink(7000, None, None), None, "one retry only");
        // Without numbers: half the refused prompt.
        let mut b = Budget::new(32768, 4096);
        assert_eq!(b.shrink(20_000, None, None), Some(10_000));
    }

    #[test]
    fn a_repeated_call_is_found_with_its_turn() {
        let call = |args: Value| ToolCall {
            id: "x".into(),
            name: "Read".into(),
            arguments: args,
        };
        let mut log = CallLog::default();
        assert_eq!(log.repeat_of(&call(json!({"file": "H"}))), None);
        log.record(&call(json!({"file": "H"})), 1);
        log.record(&call(json!({"file": "H", "start_line": 5})), 2);
        assert_eq!(
            log.repeat_of(&call(json!({"start_line": 5, "file": "H"}))),
            Some(2)
        );
        assert_eq!(log.repeat_of(&call(json!({"file": "H"}))), Some(1));
        let grep = ToolCall {
            name: "Grep".into(),
            ..call(json!({"file": "H"}))
        };
        assert_eq!(log.repeat_of(&grep), None, "another tool");
    }
}
