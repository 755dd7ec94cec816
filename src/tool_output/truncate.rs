//! The `truncate` strategy: keep the top and the bottom of a payload and replace the middle
//! with `\n[···TRUNCATED N bytes···]\n`.
//!
//! Rules:
//! - A payload within the cap is returned unchanged.
//! - The marker is used only for payloads of [`MARKER_MIN_BYTES`] bytes or more; a shorter
//!   payload over the cap is cut at the cap (on a char boundary) without a marker.
//! - N counts the payload bytes removed (not chars, not the marker itself).
//! - The marker sits on its own line: a newline before and after it.
//! - The kept bytes are split evenly between top and bottom (top gets the odd byte less);
//!   the top ends and the bottom starts on char boundaries, so the output is valid UTF-8 and
//!   never longer than the cap.

use crate::util::text::{ceil_char_boundary, floor_char_boundary};

/// Default byte cap for a tool response body.
pub const DEFAULT_MAX_BYTES: usize = 12288;
/// Payloads shorter than this are never marked, only cut.
pub const MARKER_MIN_BYTES: usize = 512;

fn marker(n: usize) -> String {
    format!("\n[···TRUNCATED {n} bytes···]\n")
}

/// Truncates `payload` to at most `cap` bytes.
pub fn truncate(payload: &str, cap: usize) -> String {
    if payload.len() <= cap {
        return payload.to_string();
    }
    if payload.len() < MARKER_MIN_BYTES {
        return payload[..floor_char_boundary(payload, cap)].to_string();
    }
    // The marker is sized for the largest possible N, so the real marker never overflows.
    let reserve = marker(payload.len()).len();
    if reserve >= cap {
        return payload[..floor_char_boundary(payload, cap)].to_string();
    }
    let budget = cap - reserve;
    let top = floor_char_boundary(payload, budget / 2);
    let bottom_start = ceil_char_boundary(payload, payload.len() - (budget - budget / 2));
    let removed = bottom_start - top;
    format!(
        "{}{}{}",
        &payload[..top],
        marker(removed),
        &payload[bottom_start..]
    )
}

/// The fallback form: `WARNING: tool_output fallback to truncate (<reason>).` on its own
/// line, then the truncated payload; the whole answer stays within `cap`. The warning line
/// takes at most half of `cap`: a longer reason is cut on a character boundary and ends
/// with `…`, so the payload always keeps the other half.
pub fn truncate_fallback(payload: &str, reason: &str, cap: usize) -> String {
    const FRAME: usize = "WARNING: tool_output fallback to truncate ().\n".len();
    let room = (cap / 2).saturating_sub(FRAME);
    let cut;
    let reason = if reason.len() <= room {
        reason
    } else {
        let end = floor_char_boundary(reason, room.saturating_sub("…".len()));
        cut = format!("{}…", &reason[..end]);
        cut.as_str()
    };
    let prefix = format!("WARNING: tool_output fallback to truncate ({reason}).\n");
    let rest = cap.saturating_sub(prefix.len());
    let mut out = prefix;
    out.push_str(&truncate(payload, rest));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(input: &str, cap: usize, expect: &str) {
        let got = truncate(input, cap);
        assert_eq!(got, expect);
        assert!(got.len() <= cap.max(input.len().min(cap)));
    }

    #[test]
    fn table() {
        let a600 = "a".repeat(300) + &"b".repeat(300);
        // marker sized for N=600 is 35 bytes (each middle dot is 2 bytes)
        let reserve = marker(600).len();
        let budget = 100 - reserve;
        let cases: Vec<(String, usize, String)> = vec![
            ("short".into(), 10, "short".into()),
            ("x".repeat(20), 5, "xxxxx".into()),
            (
                a600.clone(),
                100,
                format!(
                    "{}\n[···TRUNCATED {} bytes···]\n{}",
                    "a".repeat(budget / 2),
                    600 - budget,
                    "b".repeat(budget - budget / 2)
                ),
            ),
            ("é".repeat(300), 7, "ééé".into()),
        ];
        for (input, cap, expect) in cases {
            check(&input, cap, &expect);
        }
    }

    #[test]
    fn exact_bytes_of_one_case() {
        let input = "a".repeat(300) + &"b".repeat(300);
        assert_eq!(
            truncate(&input, 60),
            format!(
                "{}\n[···TRUNCATED 575 bytes···]\n{}",
                "a".repeat(12),
                "b".repeat(13)
            )
        );
    }

    #[test]
    fn multibyte_split_stays_utf8_and_within_cap() {
        let input = "é€😀".repeat(200);
        for cap in 40..120 {
            let got = truncate(&input, cap);
            assert!(got.len() <= cap, "cap {cap}: {}", got.len());
            assert!(got.contains("TRUNCATED"));
        }
    }

    #[test]
    fn fallback_has_prefix_and_stays_within_cap() {
        let input = "z".repeat(1000);
        let got = truncate_fallback(&input, "model failed", 200);
        assert!(got.starts_with("WARNING: tool_output fallback to truncate (model failed).\n"));
        assert!(got.len() <= 200);
        assert_eq!(
            truncate_fallback("ok", "r", 200),
            "WARNING: tool_output fallback to truncate (r).\nok"
        );
    }

    #[test]
    fn a_long_reason_is_cut_so_the_answer_stays_within_cap() {
        let reason = "é".repeat(2000);
        for cap in [0, 10, 100, 1024, 4000] {
            let got = truncate_fallback(&"z".repeat(5000), &reason, cap);
            assert!(got.len() <= cap.max(60), "cap {cap}: {} bytes", got.len());
            let warning = got.split('\n').next().unwrap_or_default();
            assert!(warning.len() <= (cap / 2).max(60), "cap {cap}: {warning}");
        }
        let got = truncate_fallback("payload", &"r".repeat(600), 1024);
        assert!(got.starts_with(&format!(
            "WARNING: tool_output fallback to truncate ({}…).\n",
            "r".repeat(512 - 46 - 3)
        )));
        assert!(got.ends_with("\npayload"));
    }
}
