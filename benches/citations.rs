//! Citation extraction throughput on assistant text, beside plain `regex` scans of the
//! same bytes:
//! - `extract`: `citations::extract` on every message (JSON attempt, CRLF normalisation,
//!   the four marker patterns, contexts, dedup, ordering);
//! - `regex, marker only`: one `find_iter` of `\*\*Evidence\*\*:` per message (the least
//!   any marker scan can do);
//! - `regex, Ralph's patterns`: Ralph's four marker patterns run one after another with
//!   `captures_iter`, as a direct port would (no JSON, no contexts, no dedup).
//!
//! The corpus is generated (deterministic): messages of 0.5–8 KB of prose and code, one in
//! four citing (markers of every type, some with a JSON evidence block), a quarter of them
//! with CRLF line ends. `cargo bench --bench citations [-- <MB>]` (default 64 MB); prints
//! best of 5 per scan.

use std::hint::black_box;
use std::time::Instant;

use evidence_store::harness::{Options, extract};
use regex::Regex;

const WORDS: &[&str] = &[
    "the",
    "function",
    "returns",
    "an",
    "error",
    "when",
    "config",
    "is",
    "missing",
    "so",
    "we",
    "check",
    "path",
    "before",
    "reading",
    "tests",
    "pass",
    "now",
    "validation",
    "token",
    "é",
    "données",
    "ok:",
    "src/lib.rs",
    "`cargo`",
    "**bold**",
    "Evidence",
    "-",
    "x = 42;",
];

/// A deterministic generator (xorshift, shared with the tests), so runs compare.
#[path = "../tests/it/common/rng.rs"]
mod rng;
use rng::Rng;

fn message(rng: &mut Rng, i: usize) -> String {
    let target = 512 + rng.below(8 * 1024 - 512);
    let mut text = String::with_capacity(target + 512);
    while text.len() < target {
        for _ in 0..(8 + rng.below(20)) {
            text.push_str(WORDS[rng.below(WORDS.len())]);
            text.push(' ');
        }
        text.push_str(if rng.below(6) == 0 { "\n\n" } else { "\n" });
        if rng.below(15) == 0 {
            text.push_str("```rust\nfn main() { println!(\"hi\"); }\n```\n");
        }
    }
    if i.is_multiple_of(4) {
        let n = i % 97;
        text.push_str(&format!(
            "\n**Evidence**: src/mod_{n}/file.py:{}-{}\n**Evidence**: tests/test_{n}.py::test_case - PASS\n\
             **Evidence**: pytest tests/test_api.py::test_{n} - FAIL\n**Evidence**: [Doc {n}](https://example.com/{n})\n\
             **Evidence**:\n```bash\ncargo test --lib m{n}\ntest result: ok\n```\n",
            n + 1,
            n + 5
        ));
        if i.is_multiple_of(16) {
            text.push_str(&format!(
                "\n```json\n{{\"evidence\": [{{\"type\": \"file\", \"reference\": \"src/j{n}.rs:3\", \"context\": \"c\"}}]}}\n```\n"
            ));
        }
    }
    if i % 4 == 1 {
        text = text.replace('\n', "\r\n");
    }
    text
}

fn best_of<F: FnMut() -> usize>(runs: usize, mut f: F) -> (f64, usize) {
    let mut best = f64::MAX;
    let mut found = 0;
    for _ in 0..runs {
        let start = Instant::now();
        found = black_box(f());
        best = best.min(start.elapsed().as_secs_f64());
    }
    (best, found)
}

fn main() {
    let mb: usize = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .find_map(|a| a.parse().ok())
        .unwrap_or(64);
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut messages = Vec::new();
    let mut bytes = 0;
    while bytes < mb << 20 {
        let m = message(&mut rng, messages.len());
        bytes += m.len();
        messages.push(m);
    }
    let mbytes = bytes as f64 / (1 << 20) as f64;
    let options = Options::default();
    let marker = Regex::new(r"\*\*Evidence\*\*:").unwrap_or_else(|e| panic!("{e}"));
    let ralph = [
        r"(?m)\*\*Evidence\*\*:\s*([a-zA-Z0-9_/\.\-]+:\d+(?::\d+)?(?:-\d+)?)",
        r"(?ms)\*\*Evidence\*\*:\s*```(?:bash|sh)\n(.*?)\n```",
        r"(?m)\*\*Evidence\*\*:\s*pytest\s+([a-zA-Z0-9_/\.\-:]+)\s+-\s+(PASS|FAIL)",
        r"(?m)\*\*Evidence\*\*:\s*\[([^\]]+)\]\(([^)]+)\)",
    ]
    .map(|p| Regex::new(p).unwrap_or_else(|e| panic!("{e}")));

    println!(
        "corpus: {} messages, {mbytes:.1} MiB of assistant text",
        messages.len()
    );
    println!("| scan | seconds | MiB/s | citations or matches |");
    println!("|---|---|---|---|");
    let row = |name: &str, (seconds, found): (f64, usize)| {
        println!(
            "| {name} | {seconds:.3} | {:.0} | {found} |",
            mbytes / seconds
        );
    };
    row(
        "`citations::extract`",
        best_of(5, || {
            messages.iter().map(|m| extract(m, &options).len()).sum()
        }),
    );
    row(
        "`regex`, marker only (`find_iter`)",
        best_of(5, || {
            messages.iter().map(|m| marker.find_iter(m).count()).sum()
        }),
    );
    row(
        "`regex`, Ralph's four patterns (`captures_iter`)",
        best_of(5, || {
            messages
                .iter()
                .map(|m| {
                    ralph
                        .iter()
                        .map(|r| r.captures_iter(m).count())
                        .sum::<usize>()
                })
                .sum()
        }),
    );
}
