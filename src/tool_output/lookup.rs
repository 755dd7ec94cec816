//! What a handle names, as the `tool_output` tool needs it: the payload text and its
//! producing tool, or why there is none.

use super::prompts::Source;

/// The answer to "what does this handle name?".
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    /// The payload and the tool that produced it.
    Found { text: String, source: Source },
    /// The handle was issued, but what it named is no longer there as it was; `detail`
    /// says why and what to do.
    Stale { tool_name: String, detail: String },
    /// No stored output has this handle; `nearest`, when set, is a handle one or two
    /// characters away from it.
    Unknown { nearest: Option<String> },
}

/// What to say of a handle no stored output has.
/// A handle longer than [`crate::util::text::ECHO_MAX`] bytes is repeated cut.
pub fn unknown_text(handle: &str, nearest: Option<&str>) -> String {
    let handle = crate::util::text::echo_cut(handle);
    match nearest {
        Some(n) => format!(
            "No stored tool output has the handle {handle}, but {n} differs from it in one or \
             two characters: most likely it was mistyped. Copy handles exactly."
        ),
        None => format!(
            "No stored tool output has the handle {handle}. Handles are the \"handle\" values of \
             trimmed tool_results and tool_uses entries in compact read_session_lines records of \
             this workspace; copy one exactly."
        ),
    }
}

/// The success body for a handle no stored output has: a normal answer, not an error,
/// saying what was searched.
pub fn unknown_body(handle: &str, nearest: Option<&str>, mode: super::Mode, cap: usize) -> String {
    let shown = crate::util::text::echo_cut(handle);
    let body = super::format_success("unknown", &shown, mode, &unknown_text(handle, nearest));
    super::truncate::truncate(&body, cap)
}

/// The failure body for a stale handle; `detail` ends with its advice.
pub fn stale_body(
    tool_name: &str,
    handle: &str,
    mode: super::Mode,
    detail: &str,
    cap: usize,
) -> String {
    super::engine::failure(
        tool_name,
        &crate::util::text::echo_cut(handle),
        mode,
        &format!("The stored output of this handle is stale: {detail}."),
        cap,
    )
}

/// The debug-only stand-in for handles, for end-to-end tests of the extraction
/// without a session (see `test_payload`); `None` in release builds.
pub fn test_lookup(handle: &str) -> Option<Lookup> {
    #[cfg(debug_assertions)]
    {
        test_payload(handle)
    }
    #[cfg(not(debug_assertions))]
    {
        let _ = handle;
        None
    }
}

/// Debug builds only, for end-to-end tests of the extraction without a session: with
/// `EVIDENCE_STORE_TEST_PAYLOADS=DIR`, a handle of letters, digits, `-` and `_` names the
/// file `DIR/<handle>`; `DIR/<handle>.tool` holds the tool name (else `unknown`) and
/// `DIR/<handle>.stale`, when present, makes the handle stale with that file's text.
#[cfg(debug_assertions)]
fn test_payload(handle: &str) -> Option<Lookup> {
    let dir = crate::util::test_hooks::payloads_dir()?;
    let safe = !handle.is_empty()
        && handle.len() <= 128
        && handle
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if !safe {
        return None;
    }
    let read = |suffix: &str| std::fs::read_to_string(dir.join(format!("{handle}{suffix}"))).ok();
    let text = read("")?;
    let tool_name = read(".tool").map_or_else(|| "unknown".to_string(), |t| t.trim().to_string());
    if let Some(detail) = read(".stale") {
        return Some(Lookup::Stale {
            tool_name,
            detail: detail.trim().to_string(),
        });
    }
    Some(Lookup::Found {
        text,
        source: Source {
            tool_name,
            tool_args_json: read(".args").unwrap_or_else(|| "null".to_string()),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_stay_within_the_cap_whatever_the_handle() {
        let handle = "h".repeat(100_000);
        assert!(unknown_body(&handle, None, crate::tool_output::Mode::Auto, 12288).len() <= 12288);
        assert!(
            stale_body(
                "Bash",
                &handle,
                crate::tool_output::Mode::Auto,
                "changed",
                12288
            )
            .len()
                <= 12288
        );
        assert!(
            unknown_body("h", None, crate::tool_output::Mode::Auto, 12288)
                .ends_with("copy one exactly.")
        );
    }
}
