//! The `tool_output` extraction module (no MCP lives here) and the handles it reads by.
//!
//! [`handles`] finds what a handle names in the store and the session file; everything
//! else here is the extraction itself.
//!
//! Pure pieces: [`truncate`], the `truncate` strategy and the fallback form every other
//! strategy falls back to when it cannot execute; [`report`], the lenient parser of the
//! model's final-report wrapper (no report is a typed failure, which triggers the fallback);
//! [`chunk`], uniform overlapping byte ranges for the map step; [`route`], the `auto`
//! router; [`prompts`], the map, reduce and read-grep prompts; [`Mode`] and the
//! success/failure body formats.
//!
//! [`engine`] runs a strategy against a [`model::Model`] (an async trait; the OpenAI-
//! compatible endpoint lives in [`model::openai`], MCP sampling in the MCP adapter).

pub mod chunk;
pub mod context;
pub mod engine;
pub mod handles;
pub mod lookup;
pub mod model;
pub mod prompts;
pub mod report;
pub mod route;
pub mod service;
pub mod settings;
pub mod text_tools;
pub mod truncate;

/// Extraction strategy, spelled as the tool's `mode` input enumerates it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Auto,
    FullChunked,
    ReadGrep,
    Truncate,
}

impl Mode {
    /// The name as the input schema spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Auto => "auto",
            Mode::FullChunked => "full-chunked",
            Mode::ReadGrep => "read-grep",
            Mode::Truncate => "truncate",
        }
    }

    /// Parses a schema name; anything else is `None`.
    pub fn parse(name: &str) -> Option<Mode> {
        match name {
            "auto" => Some(Mode::Auto),
            "full-chunked" => Some(Mode::FullChunked),
            "read-grep" => Some(Mode::ReadGrep),
            "truncate" => Some(Mode::Truncate),
            _ => None,
        }
    }
}

/// The success body: `ABSTRACT FROM TOOL OUTPUT <TOOL_NAME> WITH HANDLE <h>, STRATEGY:<mode>:`
/// followed by a blank line and the extracted text.
pub fn format_success(tool_name: &str, handle: &str, mode_used: Mode, text: &str) -> String {
    format!(
        "ABSTRACT FROM TOOL OUTPUT {tool_name} WITH HANDLE {handle}, STRATEGY:{}:\n\n{text}",
        mode_used.as_str()
    )
}

/// The failure body: `TOOL_OUTPUT FAILED FOR <TOOL_NAME> WITH HANDLE <h>, STRATEGY:<mode>:`
/// followed by a blank line and the error.
pub fn format_failure(tool_name: &str, handle: &str, mode_used: Mode, error: &str) -> String {
    format!(
        "TOOL_OUTPUT FAILED FOR {tool_name} WITH HANDLE {handle}, STRATEGY:{}:\n\n{error}",
        mode_used.as_str()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_round_trip_their_schema_names() {
        for m in [
            Mode::Auto,
            Mode::FullChunked,
            Mode::ReadGrep,
            Mode::Truncate,
        ] {
            assert_eq!(Mode::parse(m.as_str()), Some(m));
        }
        assert_eq!(Mode::parse("Truncate"), None);
    }

    #[test]
    fn success_and_failure_formats_are_exact() {
        assert_eq!(
            format_success("grep", "h1", Mode::FullChunked, "body"),
            "ABSTRACT FROM TOOL OUTPUT grep WITH HANDLE h1, STRATEGY:full-chunked:\n\nbody"
        );
        assert_eq!(
            format_failure("grep", "h1", Mode::ReadGrep, "no model"),
            "TOOL_OUTPUT FAILED FOR grep WITH HANDLE h1, STRATEGY:read-grep:\n\nno model"
        );
    }
}
