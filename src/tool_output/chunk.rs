//! Byte-based, UTF-8-safe chunking with overlap, rebalanced to a uniform size.
//!
//! Rules: the number of chunks is the fewest that cover the payload with chunks of at most
//! `max` bytes overlapping by `overlap_pct`% of `max`; then the chunk size is rebalanced to
//! the smallest uniform size `s` that still covers the payload with that count and overlap
//! (so there is no tiny last chunk), and the chunk starts are spread evenly from 0 to
//! `len - s`. Both ends are moved down to the nearest char boundary, so each chunk is at most
//! `s <= max` bytes (for `max` of 64 or more, where the 10% overlap exceeds the 3-byte boundary moves), sizes differ by at most 6 bytes, and consecutive chunks touch or
//! overlap. `max` below 4 is raised to 4 so a chunk always holds at least one char.

use crate::util::text::{ceil_char_boundary, floor_char_boundary};

use std::ops::Range;

/// Default overlap between consecutive chunks, in percent of the chunk size.
pub const DEFAULT_OVERLAP_PCT: usize = 10;

/// Splits `payload` into byte ranges as described in the module doc.
pub fn chunk(payload: &str, max: usize, overlap_pct: usize) -> Vec<Range<usize>> {
    let len = payload.len();
    let max = max.max(4);
    let pct = overlap_pct.min(90);
    if len <= max {
        return std::iter::once(0..len).collect();
    }
    let stride_max = (max - max * pct / 100).max(1);
    let n = 1 + (len - max).div_ceil(stride_max);
    let denom = 100 + (100 - pct) * (n - 1);
    let s = (len * 100).div_ceil(denom).clamp(4, max);
    let mut out: Vec<Range<usize>> = Vec::with_capacity(n);
    for i in 0..n {
        let start = i * (len - s) / (n - 1);
        // A start moves up to a char boundary and an end moves down, so a chunk stays
        // within `s`; a start never moves past the previous end, so there is no gap.
        let prev_end = out.last().map_or(0, |r| r.end);
        let a = ceil_char_boundary(payload, start).min(prev_end);
        let b = if i + 1 == n {
            len
        } else {
            floor_char_boundary(payload, start + s)
        };
        let range = a..b;
        out.push(range);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn check(input: &str, max: usize, expect: &[Range<usize>]) {
        assert_eq!(chunk(input, max, 10), expect, "max {max}");
    }

    #[test]
    fn table() {
        check("", 10, std::slice::from_ref(&(0..0)));
        check("abc", 10, std::slice::from_ref(&(0..3)));
        // 25 bytes, max 10, overlap 1: 3 chunks; rebalanced size ceil(2500/280) = 9.
        check(&"x".repeat(25), 10, &[0..9, 8..17, 16..25]);
        check(&"é".repeat(10), 8, &[0..8, 6..14, 12..20]);
    }

    proptest! {
        #[test]
        fn chunks_cover_in_order_within_max(s in "\\PC{0,400}", max in 64usize..200) {
            let r = chunk(&s, max, 10);
            prop_assert_eq!(r[0].start, 0);
            prop_assert_eq!(r.last().map(|x| x.end), Some(s.len()));
            let sizes: Vec<usize> = r.iter().map(|x| x.len()).collect();
            for w in r.windows(2) {
                prop_assert!(w[1].start <= w[0].end);
                prop_assert!(w[1].start > w[0].start);
            }
            for x in &r {
                prop_assert!(x.len() <= max);
                prop_assert!(s.is_char_boundary(x.start) && s.is_char_boundary(x.end));
            }
            let lo = sizes.iter().min().copied().unwrap_or(0);
            let hi = sizes.iter().max().copied().unwrap_or(0);
            prop_assert!(hi - lo <= 6, "sizes {:?}", sizes);
        }
    }
}
