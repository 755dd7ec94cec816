//! Parser for the final-report wrapper a model answers with:
//! `<ai-agent-<NONCE>-FINAL format="text"> ... </ai-agent-<NONCE>-FINAL>`.
//!
//! Lenient rules: leading whitespace and one leading `<think>...</think>` block are skipped;
//! the opening tag may appear anywhere after that; the closing tag is optional (the report
//! then runs to the end); the content is trimmed. The nonce must be the one of this call, so
//! a wrapper echoed from another call is not accepted. No opening tag is a typed failure.

/// Why no final report could be taken from a model answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReportError {
    /// The answer holds no opening wrapper tag carrying this call's nonce.
    #[error("no final report produced")]
    NoFinalReport,
}

/// Extracts the final report body for `nonce` from a model answer.
pub fn parse_final_report(answer: &str, nonce: &str) -> Result<String, ReportError> {
    let mut rest = answer.trim_start();
    if let Some(after) = rest.strip_prefix("<think>") {
        rest = match after.find("</think>") {
            Some(end) => &after[end + "</think>".len()..],
            None => return Err(ReportError::NoFinalReport),
        };
    }
    let open = format!("<ai-agent-{nonce}-FINAL format=\"text\">");
    let close = format!("</ai-agent-{nonce}-FINAL>");
    let start = rest.find(&open).ok_or(ReportError::NoFinalReport)? + open.len();
    let body = &rest[start..];
    let body = match body.find(&close) {
        Some(end) => &body[..end],
        None => body,
    };
    Ok(body.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(input: &str, expect: Result<&str, ReportError>) {
        assert_eq!(
            parse_final_report(input, "N1"),
            expect.map(str::to_string),
            "input {input:?}"
        );
    }

    #[test]
    fn table() {
        let ok = |s| Ok(s);
        check(
            "<ai-agent-N1-FINAL format=\"text\">hello</ai-agent-N1-FINAL>",
            ok("hello"),
        );
        check("<ai-agent-N1-FINAL format=\"text\">\n open \n", ok("open"));
        check(
            "<think>x <ai-agent-N1-FINAL format=\"text\">no</think>\n<ai-agent-N1-FINAL format=\"text\">yes</ai-agent-N1-FINAL>",
            ok("yes"),
        );
        check(
            "preamble <ai-agent-N1-FINAL format=\"text\">a</ai-agent-N1-FINAL> tail",
            ok("a"),
        );
        check(
            "<ai-agent-N1-FINAL format=\"text\"></ai-agent-N1-FINAL>",
            ok(""),
        );
        check(
            "<ai-agent-N2-FINAL format=\"text\">other</ai-agent-N2-FINAL>",
            Err(ReportError::NoFinalReport),
        );
        check("just text", Err(ReportError::NoFinalReport));
        check(
            "<think>never closed <ai-agent-N1-FINAL format=\"text\">x",
            Err(ReportError::NoFinalReport),
        );
        check("", Err(ReportError::NoFinalReport));
    }
}
