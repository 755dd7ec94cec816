//! Untrusted text as the page shows it: HTML-escaped (by maud's escaper), isolated from
//! the text around it, and with every invisible control character made visible.
//!
//! - Each spliced text is its own `<bdi>`: a right-to-left label, or one holding a
//!   directional override, cannot reorder the key, count or link beside it.
//! - The characters a reader cannot see, or that rearrange what they see, are shown as
//!   `\uXXXX` in a marked span: C0 controls but tab and newline (NUL among them, which
//!   would make the page invalid HTML), DEL, C1 controls, and the bidirectional
//!   embeddings, overrides, isolates and marks. In an attribute (a tooltip) they are the
//!   same `\uXXXX` as plain text.

use std::fmt::Write as _;

use maud::{Escaper, Render};

/// Whether `c` is shown as a visible escape rather than as itself.
pub fn hidden(c: char) -> bool {
    matches!(
        c,
        '\0'..='\u{8}'
            | '\u{b}'..='\u{1f}'
            | '\u{7f}'..='\u{9f}'
            | '\u{61c}'
            | '\u{200e}'
            | '\u{200f}'
            | '\u{202a}'..='\u{202e}'
            | '\u{2066}'..='\u{2069}'
    )
}

/// Untrusted text in the page's body: `<bdi>`, escaped, hidden characters made visible.
pub struct T<'a>(pub &'a str);

impl Render for T<'_> {
    fn render_to(&self, out: &mut String) {
        out.push_str("<bdi>");
        body(out, self.0);
        out.push_str("</bdi>");
    }
}

/// Untrusted text cut at `max` bytes (at a character boundary), saying how long it was
/// when it was cut.
pub struct Cut<'a>(pub &'a str, pub usize);

impl Render for Cut<'_> {
    fn render_to(&self, out: &mut String) {
        let (shown, was_cut) = super::cut(self.0, self.1);
        T(shown).render_to(out);
        if was_cut {
            let _ = write!(
                out,
                "<span class=\"cut\"> … cut at {} of {} bytes</span>",
                shown.len(),
                self.0.len()
            );
        }
    }
}

fn body(out: &mut String, text: &str) {
    let mut rest = text;
    while let Some(at) = rest.find(hidden) {
        let _ = Escaper::new(out).write_str(&rest[..at]);
        let c = rest[at..].chars().next().unwrap_or('\0');
        let _ = write!(out, "<span class=\"esc\">\\u{:04x}</span>", u32::from(c));
        rest = &rest[at + c.len_utf8()..];
    }
    let _ = Escaper::new(out).write_str(rest);
}

/// Untrusted text for an attribute (maud escapes it there): hidden characters written
/// as `\uXXXX`, the text cut at `max` bytes with `…`.
pub fn attr(text: &str, max: usize) -> String {
    let (shown, was_cut) = super::cut(text, max);
    let mut out = String::with_capacity(shown.len() + 4);
    for c in shown.chars() {
        if hidden(c) {
            let _ = write!(out, "\\u{:04x}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    if was_cut {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_and_direction_marks_become_visible_escapes_inside_an_isolate() {
        let shown = T("a\0b\u{202e}c<d>\te\n").render().into_string();
        assert_eq!(
            shown,
            "<bdi>a<span class=\"esc\">\\u0000</span>b<span class=\"esc\">\\u202e</span>c&lt;d&gt;\te\n</bdi>"
        );
        assert_eq!(attr("x\u{2066}y\u{7f}", 100), "x\\u2066y\\u007f");
        assert_eq!(attr("héllo", 2), "h…");
        let cut = Cut("abcdef", 3).render().into_string();
        assert_eq!(
            cut,
            "<bdi>abc</bdi><span class=\"cut\"> … cut at 3 of 6 bytes</span>"
        );
    }
}
