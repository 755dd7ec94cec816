//! The `auto` router: picks the extraction strategy from the payload's size and shape and
//! from what the language model in reach can do.
//!
//! Rules, in order:
//! 1. No model at all: nothing but `truncate` can run, so the answer is the truncate
//!    fallback with the no-model reason.
//! 2. The payload fits in `max_chunks` chunks, or its average line is longer than
//!    `long_line_bytes` (line-oriented reading is of little use): full-chunked. For long
//!    lines full-chunked may then use up to [`FORCED_MAX_CHUNKS`] chunks, map and reduce.
//!    Otherwise read-grep.
//! 3. A strategy that cannot run is replaced, never attempted:
//!    - full-chunked needing more chunks than it may use goes to read-grep, unless the
//!      payload is one huge line (read-grep has nothing to navigate): truncate fallback;
//!    - read-grep without a model that takes tool definitions goes to full-chunked when the
//!      payload fits in `max_chunks`, else to the truncate fallback.

use super::Mode;
use super::chunk;
pub use super::engine::FORCED_MAX_CHUNKS;

/// Default most chunks `auto` lets full-chunked use: one, a single pass without reduce.
pub const DEFAULT_MAX_CHUNKS: usize = 1;
/// Default average line size above which `auto` picks full-chunked whatever the size.
pub const DEFAULT_LONG_LINE_BYTES: usize = 1000;

/// Size and shape of one payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stats {
    pub bytes: usize,
    /// Lines as a text editor counts them: a last line without `\n` counts; empty text has 0.
    pub lines: usize,
    /// Estimated tokens, at the one bytes-a-token figure of [`super::context`].
    pub tokens: usize,
}

impl Stats {
    pub fn of(text: &str) -> Stats {
        let newlines = memchr::memchr_iter(b'\n', text.as_bytes()).count();
        let lines = newlines + usize::from(!text.is_empty() && !text.ends_with('\n'));
        Stats {
            bytes: text.len(),
            lines,
            tokens: super::context::tokens_for(text.len()),
        }
    }

    /// Average bytes per line (the whole size when there is at most one line).
    pub fn avg_line_bytes(&self) -> usize {
        self.bytes / self.lines.max(1)
    }
}

/// The router's thresholds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RouteConfig {
    /// Most chunks `auto` lets full-chunked use.
    pub max_chunks: usize,
    /// Average line size above which full-chunked is picked whatever the size.
    pub long_line_bytes: usize,
    /// Bytes of payload one map call can take.
    pub chunk_bytes: usize,
}

/// What the model in reach can do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Abilities {
    /// Some model answers plain prompts.
    pub model: bool,
    /// That model also takes tool definitions and answers with tool calls.
    pub tools: bool,
}

/// The router's verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// Run this strategy.
    Run(Mode),
    /// Nothing better can run: the truncate fallback, with this reason.
    Fallback(String),
}

/// Chunks full-chunked needs for `bytes` of payload with `chunk_bytes` per chunk and the
/// default overlap (the same arithmetic as [`chunk::chunk`]).
pub fn chunks_needed(bytes: usize, chunk_bytes: usize) -> usize {
    let max = chunk_bytes.max(4);
    if bytes <= max {
        return 1;
    }
    let stride = (max - max * chunk::DEFAULT_OVERLAP_PCT / 100).max(1);
    1 + (bytes - max).div_ceil(stride)
}

/// The reason a strategy needing a model cannot run when there is none.
pub const NO_MODEL: &str =
    "no language model: the client does not support sampling and no endpoint is configured";

/// Whether the payload's lines are long: its average line is over `long_line_bytes`.
pub fn long_lines(stats: Stats, long_line_bytes: usize) -> bool {
    stats.avg_line_bytes() > long_line_bytes
}

/// Most chunks full-chunked may use when `auto` picked it: `max_chunks`, or
/// [`FORCED_MAX_CHUNKS`] for a payload of long lines.
pub fn auto_chunk_limit(stats: Stats, max_chunks: usize, long_line_bytes: usize) -> usize {
    if long_lines(stats, long_line_bytes) {
        FORCED_MAX_CHUNKS.max(max_chunks)
    } else {
        max_chunks.max(1)
    }
}

/// Picks the strategy `auto` runs.
pub fn route(stats: Stats, config: RouteConfig, abilities: Abilities) -> Route {
    if !abilities.model {
        return Route::Fallback(NO_MODEL.to_string());
    }
    let needed = chunks_needed(stats.bytes, config.chunk_bytes);
    let limit = auto_chunk_limit(stats, config.max_chunks, config.long_line_bytes);
    if needed <= limit {
        return Route::Run(Mode::FullChunked);
    }
    let too_many = || {
        format!(
            "full-chunked needs {needed} chunks of {} bytes, more than {}",
            config.chunk_bytes,
            if long_lines(stats, config.long_line_bytes) {
                format!("the {limit} allowed for long lines")
            } else {
                format!("max_chunks {limit}")
            }
        )
    };
    if stats.lines <= 1 {
        return Route::Fallback(format!(
            "{}, and a single line of {} bytes leaves read-grep nothing to navigate",
            too_many(),
            stats.bytes
        ));
    }
    if !abilities.tools {
        return Route::Fallback(format!(
            "{}, and the model cannot call the Read and Grep tools that read-grep needs",
            too_many()
        ));
    }
    Route::Run(Mode::ReadGrep)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CFG: RouteConfig = RouteConfig {
        max_chunks: 1,
        long_line_bytes: 1000,
        chunk_bytes: 1000,
    };
    const ALL: Abilities = Abilities {
        model: true,
        tools: true,
    };
    const PLAIN: Abilities = Abilities {
        model: true,
        tools: false,
    };
    const NONE: Abilities = Abilities {
        model: false,
        tools: false,
    };

    fn stats(bytes: usize, lines: usize) -> Stats {
        Stats {
            bytes,
            lines,
            tokens: crate::tool_output::context::tokens_for(bytes),
        }
    }

    #[test]
    fn stats_estimate_tokens_at_the_figure_chunks_are_sized_by() {
        // 2.5 bytes a token, rounded up: the map prompt's estimate and the chunk sizes agree.
        assert_eq!(Stats::of(&"x".repeat(100)).tokens, 40);
        assert_eq!(Stats::of("abc").tokens, 2);
        assert_eq!(Stats::of("").tokens, 0);
    }

    fn check(s: Stats, cfg: RouteConfig, ab: Abilities, expect: &str) {
        let got = match route(s, cfg, ab) {
            Route::Run(m) => m.as_str().to_string(),
            Route::Fallback(r) => format!("fallback: {r}"),
        };
        assert_eq!(got, expect, "stats {s:?} cfg {cfg:?} abilities {ab:?}");
    }

    #[test]
    fn stats_count_lines_like_an_editor() {
        assert_eq!(Stats::of(""), stats(0, 0));
        assert_eq!(Stats::of("a"), stats(1, 1));
        assert_eq!(Stats::of("a\n"), stats(2, 1));
        assert_eq!(Stats::of("a\nb"), stats(3, 2));
        assert_eq!(Stats::of("a\nb\n\n"), stats(5, 3));
        assert_eq!(stats(5000, 2).avg_line_bytes(), 2500);
        assert_eq!(stats(0, 0).avg_line_bytes(), 0);
    }

    #[test]
    fn chunks_needed_matches_the_chunker() {
        for (len, max) in [
            (0, 10),
            (10, 10),
            (11, 10),
            (25, 10),
            (1000, 64),
            (5000, 999),
        ] {
            let text = "x".repeat(len);
            assert_eq!(
                chunks_needed(len, max),
                chunk::chunk(&text, max, chunk::DEFAULT_OVERLAP_PCT).len(),
                "len {len} max {max}"
            );
        }
    }

    #[test]
    fn table() {
        let many = RouteConfig {
            max_chunks: 10,
            ..CFG
        };
        let fb_lines =
            "fallback: full-chunked needs 3 chunks of 1000 bytes, more than max_chunks 1";
        // Fits in one chunk: full-chunked, whatever the shape.
        check(stats(900, 50), CFG, ALL, "full-chunked");
        check(stats(900, 1), CFG, ALL, "full-chunked");
        check(stats(900, 50), CFG, PLAIN, "full-chunked");
        // Too big, many short lines: read-grep.
        check(stats(2500, 100), CFG, ALL, "read-grep");
        // Too big, but the average line is over long_line_bytes: full-chunked, map and
        // reduce, one huge line or a few.
        check(stats(2500, 2), CFG, ALL, "full-chunked");
        check(stats(2500, 1), CFG, ALL, "full-chunked");
        check(stats(2500, 2), CFG, PLAIN, "full-chunked");
        // Exactly long_line_bytes a line is not over it.
        check(stats(2000, 2), CFG, ALL, "read-grep");
        // A higher long_line_bytes turns the long lines back into lines to navigate.
        let high = RouteConfig {
            long_line_bytes: 5000,
            ..CFG
        };
        check(stats(2500, 2), high, ALL, "read-grep");
        check(
            stats(2500, 1),
            high,
            ALL,
            &format!(
                "{fb_lines}, and a single line of 2500 bytes leaves read-grep nothing to navigate"
            ),
        );
        // Long lines needing more chunks than allowed even so.
        let huge = 1000 * (FORCED_MAX_CHUNKS + 5);
        let fb_long = format!(
            "fallback: full-chunked needs {} chunks of 1000 bytes, more than the {FORCED_MAX_CHUNKS} allowed for long lines",
            chunks_needed(huge, 1000)
        );
        check(stats(huge, 3), CFG, ALL, "read-grep");
        check(
            stats(huge, 1),
            CFG,
            ALL,
            &format!(
                "{fb_long}, and a single line of {huge} bytes leaves read-grep nothing to navigate"
            ),
        );
        check(
            stats(huge, 3),
            CFG,
            PLAIN,
            &format!(
                "{fb_long}, and the model cannot call the Read and Grep tools that read-grep needs"
            ),
        );
        // More chunks allowed: short lines go to full-chunked too.
        check(stats(2500, 100), many, ALL, "full-chunked");
        // A model without tool calls cannot run read-grep.
        check(
            stats(2500, 100),
            CFG,
            PLAIN,
            &format!(
                "{fb_lines}, and the model cannot call the Read and Grep tools that read-grep needs"
            ),
        );
        check(stats(2500, 100), many, PLAIN, "full-chunked");
        // No model: nothing but the fallback.
        check(stats(10, 1), CFG, NONE, &format!("fallback: {NO_MODEL}"));
        // max_chunks 0 is read as 1.
        check(
            stats(900, 3),
            RouteConfig {
                max_chunks: 0,
                ..CFG
            },
            ALL,
            "full-chunked",
        );
    }

    #[test]
    fn long_lines_raise_the_chunks_auto_allows() {
        assert_eq!(auto_chunk_limit(stats(5000, 2), 1, 1000), FORCED_MAX_CHUNKS);
        assert_eq!(auto_chunk_limit(stats(5000, 5), 1, 1000), 1);
        assert_eq!(auto_chunk_limit(stats(5000, 5), 0, 1000), 1);
        assert_eq!(auto_chunk_limit(stats(5000, 2), 100, 1000), 100);
    }
}
