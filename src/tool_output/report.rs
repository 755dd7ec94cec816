//! Parser for the final-report wrapper a model answers with:
//! `<ai-agent-<NONCE>-FINAL format="text"> ... </ai-agent-<NONCE>-FINAL>`.
//!
//! Lenient rules: leading whitespace and one leading `<think>...</think>` block are skipped;
//! the opening tag may appear anywhere after that; the closing tag is optional (the report
//! then runs to the end, and the caller says so in its answer); the content is trimmed. The
//! nonce must be the one of this call, so a wrapper echoed from another call is not
//! accepted. A wrapper whose body is the prompt's own example (`...`) is an echo of the
//! prompt, not a report: the next wrapper counts, and an answer holding only echoes has no
//! report. No report is a typed failure.

/// Why no final report could be taken from a model answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReportError {
    /// The answer holds no opening wrapper tag carrying this call's nonce.
    #[error("no final report produced")]
    NoFinalReport,
    /// Every wrapper in the answer only repeats the prompt's example.
    #[error("no final report produced (the answer only repeated the prompt's example wrapper)")]
    ExampleEcho,
}

/// A final report taken from a model answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// The wrapper's content, trimmed.
    pub text: String,
    /// Whether the closing tag was there; without it the report may be cut short.
    pub closed: bool,
}

/// The body of the prompt's example wrapper, and its one-character spelling.
fn is_example(body: &str) -> bool {
    matches!(body, "..." | "…")
}

/// Extracts the final report for `nonce` from a model answer.
pub fn parse_final_report(answer: &str, nonce: &str) -> Result<Report, ReportError> {
    let mut rest = answer.trim_start();
    if let Some(after) = rest.strip_prefix("<think>") {
        rest = match after.find("</think>") {
            Some(end) => &after[end + "</think>".len()..],
            None => return Err(ReportError::NoFinalReport),
        };
    }
    let open = format!("<ai-agent-{nonce}-FINAL format=\"text\">");
    let close = format!("</ai-agent-{nonce}-FINAL>");
    let mut echoed = false;
    while let Some(at) = rest.find(&open) {
        let body = &rest[at + open.len()..];
        let (text, closed, next) = match body.find(&close) {
            Some(end) => (&body[..end], true, &body[end + close.len()..]),
            None => (body, false, ""),
        };
        let text = text.trim();
        if is_example(text) {
            echoed = true;
            rest = next;
            continue;
        }
        return Ok(Report {
            text: text.to_string(),
            closed,
        });
    }
    Err(if echoed {
        ReportError::ExampleEcho
    } else {
        ReportError::NoFinalReport
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(input: &str, expect: Result<(&str, bool), ReportError>) {
        assert_eq!(
            parse_final_report(input, "N1"),
            expect.map(|(text, closed)| Report {
                text: text.to_string(),
                closed
            }),
            "input {input:?}"
        );
    }

    #[test]
    fn table() {
        let ok = |s| Ok((s, true));
        let open = |s| Ok((s, false));
        check(
            "<ai-agent-N1-FINAL format=\"text\">hello</ai-agent-N1-FINAL>",
            ok("hello"),
        );
        check(
            "<ai-agent-N1-FINAL format=\"text\">\n open \n",
            open("open"),
        );
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

    #[test]
    fn the_prompts_example_wrapper_is_no_report() {
        // The example as the prompt writes it, echoed alone: no report.
        check(
            "<ai-agent-N1-FINAL format=\"text\"> ... </ai-agent-N1-FINAL>",
            Err(ReportError::ExampleEcho),
        );
        check(
            "Emit exactly one wrapper:\n  <ai-agent-N1-FINAL format=\"text\">…</ai-agent-N1-FINAL>\nok",
            Err(ReportError::ExampleEcho),
        );
        check(
            "<ai-agent-N1-FINAL format=\"text\"> ...",
            Err(ReportError::ExampleEcho),
        );
        // The example, then a report of the model's own: the report.
        check(
            "<ai-agent-N1-FINAL format=\"text\"> ... </ai-agent-N1-FINAL>\n\
             <ai-agent-N1-FINAL format=\"text\">37</ai-agent-N1-FINAL>",
            Ok(("37", true)),
        );
        // Dots within a real report are content.
        check(
            "<ai-agent-N1-FINAL format=\"text\">a ... b</ai-agent-N1-FINAL>",
            Ok(("a ... b", true)),
        );
    }
}
