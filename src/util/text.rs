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

/// Most bytes of a caller's string (a handle, a pattern, an argument) that an answer
/// repeats.
pub const ECHO_MAX: usize = 200;

/// `s` as an answer repeats it: whole up to [`ECHO_MAX`] bytes, else its first bytes and
/// a note that it was cut, so that no answer grows with what the caller sent.
pub fn echo_cut(s: &str) -> std::borrow::Cow<'_, str> {
    if s.len() <= ECHO_MAX {
        return s.into();
    }
    let cut = floor_char_boundary(s, ECHO_MAX);
    format!(
        "{}... (cut: {cut} of its {} bytes shown)",
        &s[..cut],
        s.len()
    )
    .into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_echoes_are_cut_and_say_so() {
        assert_eq!(echo_cut("abc"), "abc");
        let long = "é".repeat(150);
        assert_eq!(
            echo_cut(&long),
            format!("{}... (cut: 200 of its 300 bytes shown)", "é".repeat(100))
        );
    }

    #[test]
    fn boundaries_never_split_a_character() {
        let s = "aé€😀"; // 1, 2, 3 and 4 bytes: boundaries 0 1 3 6 10
        let floors: Vec<usize> = (0..=12).map(|i| floor_char_boundary(s, i)).collect();
        let ceils: Vec<usize> = (0..=12).map(|i| ceil_char_boundary(s, i)).collect();
        assert_eq!(floors, [0, 1, 1, 3, 3, 3, 6, 6, 6, 6, 10, 10, 10]);
        assert_eq!(ceils, [0, 1, 3, 3, 6, 6, 6, 10, 10, 10, 10, 10, 10]);
    }
}
