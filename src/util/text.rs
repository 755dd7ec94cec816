//! Byte offsets in UTF-8 text, moved to the nearest character boundary, so that a cut at
//! any byte count never splits a character.

/// The largest character boundary of `s` at or before byte `i` (`s.len()` at most).
pub fn floor_char_boundary(s: &str, i: usize) -> usize {
    let mut i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// The smallest character boundary of `s` at or after byte `i` (`s.len()` at most).
pub fn ceil_char_boundary(s: &str, i: usize) -> usize {
    let mut i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i += 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boundaries_never_split_a_character() {
        let s = "aé€😀"; // 1, 2, 3 and 4 bytes: boundaries 0 1 3 6 10
        let floors: Vec<usize> = (0..=12).map(|i| floor_char_boundary(s, i)).collect();
        let ceils: Vec<usize> = (0..=12).map(|i| ceil_char_boundary(s, i)).collect();
        assert_eq!(floors, [0, 1, 1, 3, 3, 3, 6, 6, 6, 6, 10, 10, 10]);
        assert_eq!(ceils, [0, 1, 3, 3, 6, 6, 6, 10, 10, 10, 10, 10, 10]);
    }
}
