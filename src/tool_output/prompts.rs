//! The extraction prompts: the map, reduce and read-grep system prompts with their
//! placeholders filled, the user messages that go with them, and the per-call nonce of the
//! final-report wrapper.

use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

use super::route::Stats;

/// What the model is told about the tool that produced the payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    /// The producing tool's name, such as `Bash`, or `unknown`.
    pub tool_name: String,
    /// The producing tool's arguments as verbatim JSON text (`null` when not known).
    pub tool_args_json: String,
}

/// A fresh random nonce for one extraction call: 16 lowercase hex digits. Not secret; it
/// only keeps a wrapper quoted from elsewhere (the payload, another call) from counting as
/// this call's final report.
pub fn nonce() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    // `RandomState` is seeded from the OS once per thread and stepped per instance.
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    if let Ok(d) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        h.write_u128(d.as_nanos());
    }
    h.write_u32(std::process::id());
    format!("{:016x}", h.finish())
}

/// The `SOURCE TOOL` section's lines naming the producing tool and its arguments.
fn source_lines(source: &Source) -> String {
    format!(
        "SOURCE TOOL\n\
         - Name: {}\n\
         - Arguments (verbatim JSON): {}",
        source.tool_name, source.tool_args_json
    )
}

/// The `OUTPUT FORMAT` section: the final-report wrapper, then `first` (a rule of the
/// prompt's own, or nothing) and what to answer when nothing relevant is found in `place`.
fn output_format(nonce: &str, first: &str, place: &str) -> String {
    format!(
        "OUTPUT FORMAT (required)\n\
         - Emit exactly one XML final-report wrapper:\n  \
         <ai-agent-{nonce}-FINAL format=\"text\"> ... </ai-agent-{nonce}-FINAL>\n\
         {first}\
         - If no relevant data exists, output inside the wrapper:\n  \
         NO RELEVANT DATA FOUND\n  \
         <short description of what kind of information is available {place}>"
    )
}

/// The map system prompt for chunk `index` (1-based) of `total`.
pub fn map_system(
    source: &Source,
    stats: Stats,
    index: usize,
    total: usize,
    overlap_pct: usize,
    extract: &str,
    nonce: &str,
) -> String {
    format!(
        "You are an internal extraction agent. You must extract information from a document chunk.\n\
         \n\
         {source}\n\
         \n\
         DOCUMENT STATS\n\
         - Bytes: {bytes}\n\
         - Lines: {lines}\n\
         - Tokens (estimate): {tokens}\n\
         \n\
         CHUNK INFO\n\
         - Index: {index} of {total}\n\
         - Overlap: {overlap_pct}%\n\
         \n\
         WHAT TO EXTRACT\n\
         {extract}\n\
         \n\
         {format}",
        source = source_lines(source),
        bytes = stats.bytes,
        lines = stats.lines,
        tokens = stats.tokens,
        format = output_format(
            nonce,
            "- Put your extracted result inside the wrapper.\n",
            "in this chunk"
        ),
    )
}

/// The map user message: the chunk itself.
pub fn map_user(chunk: &str) -> String {
    chunk.to_string()
}

/// The reduce system prompt over the map answers, in chunk order.
pub fn reduce_system(source: &Source, extract: &str, outputs: &[String], nonce: &str) -> String {
    let total = outputs.len();
    let chunk_outputs = outputs
        .iter()
        .enumerate()
        .map(|(i, o)| format!("--- Chunk {} of {total} ---\n{o}", i + 1))
        .collect::<Vec<_>>()
        .join("\n\n");
    format!(
        "You are an internal extraction agent. You must synthesize multiple chunk extractions into one final answer.\n\
         \n\
         {source}\n\
         \n\
         WHAT TO EXTRACT\n\
         {extract}\n\
         \n\
         CHUNK OUTPUTS\n\
         {chunk_outputs}\n\
         \n\
         {format}",
        source = source_lines(source),
        format = output_format(nonce, "", "across the chunks"),
    )
}

/// The reduce user message.
pub const REDUCE_USER: &str = "Synthesize the chunk outputs above into one final answer.";

/// What the read-grep prompt names as the root directory: handles are not files on disk.
pub const READ_GREP_ROOT: &str = "(none: the server resolves the handle to the stored output)";

/// The read-grep sub-agent's system prompt; the handle is the filename.
pub fn read_grep_system(source: &Source, handle: &str, extract: &str, nonce: &str) -> String {
    format!(
        "You are an internal extraction agent. You can only use Read and Grep tools.\n\
         \n\
         IMPORTANT: The handle is the filename.\n\
         Use the filename exactly as given when calling Read or Grep.\n\
         \n\
         {source}\n\
         - Handle/filename: {handle}\n\
         - Root directory: {READ_GREP_ROOT}\n\
         \n\
         WHAT TO EXTRACT\n\
         {extract}\n\
         \n\
         {format}",
        source = source_lines(source),
        format = output_format(nonce, "", "in the file"),
    )
}

/// The read-grep sub-agent's first user message.
pub fn read_grep_user(handle: &str, stats: Stats) -> String {
    format!(
        "The file {handle} holds {} bytes in {} lines. Use Read and Grep on it, then answer with the final report.",
        stats.bytes, stats.lines
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source() -> Source {
        Source {
            tool_name: "Bash".into(),
            tool_args_json: r#"{"command":"make test"}"#.into(),
        }
    }

    const STATS: Stats = Stats {
        bytes: 5000,
        lines: 120,
        tokens: 1250,
    };

    #[test]
    fn map_prompt_is_exact() {
        let got = map_system(&source(), STATS, 2, 3, 10, "the failing tests", "N1");
        let expect = r#"You are an internal extraction agent. You must extract information from a document chunk.

SOURCE TOOL
- Name: Bash
- Arguments (verbatim JSON): {"command":"make test"}

DOCUMENT STATS
- Bytes: 5000
- Lines: 120
- Tokens (estimate): 1250

CHUNK INFO
- Index: 2 of 3
- Overlap: 10%

WHAT TO EXTRACT
the failing tests

OUTPUT FORMAT (required)
- Emit exactly one XML final-report wrapper:
  <ai-agent-N1-FINAL format="text"> ... </ai-agent-N1-FINAL>
- Put your extracted result inside the wrapper.
- If no relevant data exists, output inside the wrapper:
  NO RELEVANT DATA FOUND
  <short description of what kind of information is available in this chunk>"#;
        assert_eq!(got, expect);
    }

    #[test]
    fn reduce_prompt_is_exact() {
        let got = reduce_system(
            &source(),
            "the failing tests",
            &["a".to_string(), "b\nc".to_string()],
            "N2",
        );
        let expect = r#"You are an internal extraction agent. You must synthesize multiple chunk extractions into one final answer.

SOURCE TOOL
- Name: Bash
- Arguments (verbatim JSON): {"command":"make test"}

WHAT TO EXTRACT
the failing tests

CHUNK OUTPUTS
--- Chunk 1 of 2 ---
a

--- Chunk 2 of 2 ---
b
c

OUTPUT FORMAT (required)
- Emit exactly one XML final-report wrapper:
  <ai-agent-N2-FINAL format="text"> ... </ai-agent-N2-FINAL>
- If no relevant data exists, output inside the wrapper:
  NO RELEVANT DATA FOUND
  <short description of what kind of information is available across the chunks>"#;
        assert_eq!(got, expect);
    }

    #[test]
    fn read_grep_prompt_is_exact() {
        let got = read_grep_system(&source(), "h-1", "the failing tests", "N3");
        let expect = r#"You are an internal extraction agent. You can only use Read and Grep tools.

IMPORTANT: The handle is the filename.
Use the filename exactly as given when calling Read or Grep.

SOURCE TOOL
- Name: Bash
- Arguments (verbatim JSON): {"command":"make test"}
- Handle/filename: h-1
- Root directory: (none: the server resolves the handle to the stored output)

WHAT TO EXTRACT
the failing tests

OUTPUT FORMAT (required)
- Emit exactly one XML final-report wrapper:
  <ai-agent-N3-FINAL format="text"> ... </ai-agent-N3-FINAL>
- If no relevant data exists, output inside the wrapper:
  NO RELEVANT DATA FOUND
  <short description of what kind of information is available in the file>"#;
        assert_eq!(got, expect);
        assert_eq!(
            read_grep_user("h-1", STATS),
            "The file h-1 holds 5000 bytes in 120 lines. Use Read and Grep on it, then answer with the final report."
        );
    }

    #[test]
    fn nonces_differ_per_call() {
        let a = nonce();
        let b = nonce();
        assert_eq!(a.len(), 16);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }
}
