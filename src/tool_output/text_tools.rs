//! The [`TextTools`] the server gives the read-grep sub-agent: numbered lines and regex
//! matches over one payload, within the byte cap, saying when an answer was cut.

use super::engine::TextTools;

/// Bytes shown around a match on a line longer than this window.
const WINDOW: usize = 200;

pub struct Tools;

fn floor(s: &str, mut i: usize) -> usize {
    i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil(s: &str, mut i: usize) -> usize {
    i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i += 1;
    }
    i
}

/// Appends `piece` when it fits within `cap`; false when it does not.
fn push_capped(out: &mut String, piece: &str, cap: usize) -> bool {
    if out.len() + piece.len() > cap {
        return false;
    }
    out.push_str(piece);
    true
}

impl TextTools for Tools {
    fn read(&self, text: &str, start_line: u64, end_line: u64, cap: usize) -> String {
        let total = text.lines().count() as u64;
        if start_line > total || end_line < start_line {
            return format!("(no lines {start_line}-{end_line}: the file has {total} lines)\n");
        }
        let budget = cap.saturating_sub(120);
        let mut out = String::new();
        for (i, line) in text.lines().enumerate() {
            let n = i as u64 + 1;
            if n < start_line {
                continue;
            }
            if n > end_line {
                break;
            }
            let shown = if line.len() > budget / 2 {
                let cut = floor(line, budget / 2);
                format!(
                    "{n}: {}[... line cut at byte {cut} of {}]\n",
                    &line[..cut],
                    line.len()
                )
            } else {
                format!("{n}: {line}\n")
            };
            if !push_capped(&mut out, &shown, budget) {
                out.push_str(&format!(
                    "[cut at the size cap: continue with start_line {n}]\n"
                ));
                return out;
            }
        }
        out
    }

    fn grep(
        &self,
        text: &str,
        pattern: &str,
        context_lines: usize,
        max_matches: usize,
        cap: usize,
    ) -> Result<String, String> {
        let re = regex::Regex::new(pattern).map_err(|e| format!("bad pattern: {e}"))?;
        let lines: Vec<&str> = text.lines().collect();
        let budget = cap.saturating_sub(120);
        let mut out = String::new();
        let mut matches = 0usize;
        for (i, line) in lines.iter().enumerate() {
            let Some(m) = re.find(line) else { continue };
            matches += 1;
            if matches > max_matches {
                out.push_str(&format!(
                    "[stopped after {max_matches} matches: raise max_matches or narrow the pattern]\n"
                ));
                return Ok(out);
            }
            let mut block = String::new();
            if line.len() > WINDOW * 2 {
                let a = floor(line, m.start().saturating_sub(WINDOW / 2));
                let b = ceil(line, m.end() + WINDOW / 2);
                block.push_str(&format!("{}@{}: ...{}...\n", i + 1, m.start(), &line[a..b]));
            } else {
                let lo = i.saturating_sub(context_lines);
                let hi = i.saturating_add(context_lines).min(lines.len() - 1);
                for (j, l) in lines.iter().enumerate().take(hi + 1).skip(lo) {
                    let sep = if j == i { ':' } else { '-' };
                    block.push_str(&format!("{}{sep} {l}\n", j + 1));
                }
            }
            if !push_capped(&mut out, &block, budget) {
                out.push_str(&format!(
                    "[cut at the size cap after {} matches: narrow the pattern or Read around line {}]\n",
                    matches - 1,
                    i + 1
                ));
                return Ok(out);
            }
        }
        if matches == 0 {
            out.push_str(&format!("(no line matches {pattern:?})\n"));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_and_grep() {
        let t = Tools;
        assert_eq!(t.read("a\nb\nc\n", 2, 3, 1000), "2: b\n3: c\n");
        assert_eq!(
            t.read("a\n", 5, 6, 1000),
            "(no lines 5-6: the file has 1 lines)\n"
        );
        assert_eq!(
            t.grep("a\nxb\nc\n", "x", 1, 5, 1000).unwrap(),
            "1- a\n2: xb\n3- c\n"
        );
        assert!(
            t.grep("a", "(", 0, 5, 1000)
                .unwrap_err()
                .starts_with("bad pattern")
        );
        let long = format!("{}NEEDLE{}", "a".repeat(1000), "b".repeat(1000));
        let got = t.grep(&long, "NEEDLE", 0, 5, 1000).unwrap();
        assert!(got.starts_with("1@1000: ...") && got.len() < 420, "{got}");
        let many = "x\n".repeat(100);
        assert!(
            t.grep(&many, "x", 0, 3, 1000)
                .unwrap()
                .contains("stopped after 3")
        );
        assert!(t.read(&many, 1, 100, 200).contains("cut at the size cap"));
        // Absurd numbers are clamped, not overflowed.
        assert_eq!(
            t.grep("a\nx\n", "x", usize::MAX, usize::MAX, 1000).unwrap(),
            "1- a\n2: x\n"
        );
        assert_eq!(t.read("a\n", 1, u64::MAX, 1000), "1: a\n");
    }
}
