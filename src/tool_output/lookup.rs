//! What a handle names, as the `tool_output` tool needs it: the payload text and its
//! producing tool, or why there is none.

use super::prompts::Source;

/// The answer to "what does this handle name?".
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    /// The payload and the tool that produced it.
    Found { text: String, source: Source },
    /// The handle was issued, but the line it points into changed on disk since.
    Stale { tool_name: String, detail: String },
    /// No stored output has this handle.
    Unknown,
}

/// The success body for a handle no stored output has: a normal answer, not an error,
/// saying what was searched.
pub fn unknown_body(handle: &str, mode: super::Mode) -> String {
    super::format_success(
        "unknown",
        handle,
        mode,
        &format!(
            "No stored tool output has the handle {handle}. Handles are the \"handle\" values of \
             trimmed tool_results and tool_uses entries in compact read_session_lines records of \
             this workspace; copy one exactly."
        ),
    )
}

/// The failure body for a stale handle.
pub fn stale_body(
    tool_name: &str,
    handle: &str,
    mode: super::Mode,
    detail: &str,
    cap: usize,
) -> String {
    super::engine::failure(
        tool_name,
        handle,
        mode,
        &format!(
            "The stored output of this handle is stale: {detail}. Read the session lines again \
             (read_session_lines, compact) to get a current handle."
        ),
        cap,
    )
}

/// Resolves `handle` against the store behind `service`.
pub fn resolve(_service: &crate::service::Service, _handle: &str) -> Lookup {
    Lookup::Unknown
}
