//! Handles: the id a compact record gives a trimmed tool payload.
//!
//! A handle describes itself: it is a UUID (version 8) whose 122 free bits hold where
//! the payload is and which line bytes it was cut from, so no table maps handles to
//! payloads and every `serve` on the store, now or after a restart or a re-import of an
//! unchanged file, gives and understands the same handle. Resolving one costs a lookup of
//! its session and one line, never a scan of the session. The bits:
//!
//! | bits | field |
//! |---|---|
//! | 32 | the session: the first 4 bytes of SHA-256 of `project_key`, NUL, `session_ref` |
//! | 32 | the physical line number |
//! | 1 | the list: tool use (0) or tool result (1) |
//! | 15 | the entry's position in that list |
//! | 42 | the first 42 bits of the line's SHA-256 |
//!
//! A line whose stored digest no longer starts with those 42 bits has changed since the
//! handle was given: the handle is stale. Two sessions whose 32-bit keys collide are both
//! tried, and the line digest tells them apart.

use sha2::{Digest, Sha256};

use crate::read::compact::EntryKind;

/// What a handle names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Handle {
    pub session: u32,
    pub line: u32,
    pub kind: EntryKind,
    pub index: u16,
    /// The line digest's first `DIGEST_BITS` bits.
    pub digest: u64,
}

const DIGEST_BITS: u32 = 42;
const INDEX_BITS: u32 = 15;

/// The 32-bit key of a session.
pub fn session_key(project_key: &str, session_ref: &str) -> u32 {
    let mut hasher = Sha256::new();
    hasher.update(project_key.as_bytes());
    hasher.update([0]);
    hasher.update(session_ref.as_bytes());
    let d = hasher.finalize();
    u32::from_be_bytes([d[0], d[1], d[2], d[3]])
}

/// The first `DIGEST_BITS` bits of a line's SHA-256.
pub fn digest_prefix(sha256: &[u8; 32]) -> u64 {
    let mut head = [0u8; 8];
    head.copy_from_slice(&sha256[..8]);
    u64::from_be_bytes(head) >> (64 - DIGEST_BITS)
}

impl Handle {
    /// The handle of entry `index` of `kind` on `line`, when it fits in a handle (lines
    /// up to 2^32 - 1, entries up to 2^15 - 1 per list).
    pub fn new(
        session: u32,
        line: u64,
        kind: EntryKind,
        index: usize,
        sha256: &[u8; 32],
    ) -> Option<Handle> {
        Some(Handle {
            session,
            line: u32::try_from(line).ok()?,
            kind,
            index: u16::try_from(index).ok().filter(|i| *i < 1 << INDEX_BITS)?,
            digest: digest_prefix(sha256),
        })
    }

    fn payload(self) -> u128 {
        let kind = match self.kind {
            EntryKind::ToolUse => 0u128,
            EntryKind::ToolResult => 1,
        };
        (u128::from(self.session) << 90)
            | (u128::from(self.line) << 58)
            | (kind << 57)
            | (u128::from(self.index) << 42)
            | u128::from(self.digest)
    }

    /// The UUID text: `xxxxxxxx-xxxx-8xxx-Vxxx-xxxxxxxxxxxx`, lowercase.
    pub fn to_uuid(self) -> String {
        let p = self.payload();
        // 122 payload bits around the version nibble (bits 76..80) and the variant
        // bits (62..64) of the 128-bit UUID.
        let value = ((p >> 74) << 80)
            | (0x8 << 76)
            | (((p >> 62) & 0xfff) << 64)
            | (0b10 << 62)
            | (p & ((1 << 62) - 1));
        let hex = format!("{value:032x}");
        format!(
            "{}-{}-{}-{}-{}",
            &hex[..8],
            &hex[8..12],
            &hex[12..16],
            &hex[16..20],
            &hex[20..]
        )
    }

    /// Parses a handle's UUID text (either case); `None` for anything else.
    pub fn parse(text: &str) -> Option<Handle> {
        let b = text.as_bytes();
        if b.len() != 36 || [8, 13, 18, 23].iter().any(|&i| b[i] != b'-') {
            return None;
        }
        let hex: String = text.chars().filter(|c| *c != '-').collect();
        if hex.len() != 32 || !hex.bytes().all(|c| c.is_ascii_hexdigit()) {
            return None;
        }
        let value = u128::from_str_radix(&hex, 16).ok()?;
        if (value >> 76) & 0xf != 0x8 || (value >> 62) & 0b11 != 0b10 {
            return None;
        }
        let p = ((value >> 80) << 74) | (((value >> 64) & 0xfff) << 62) | (value & ((1 << 62) - 1));
        let field = |shift: u32, bits: u32| (p >> shift) & ((1u128 << bits) - 1);
        Some(Handle {
            session: u32::try_from(field(90, 32)).ok()?,
            line: u32::try_from(field(58, 32)).ok()?,
            kind: if field(57, 1) == 1 {
                EntryKind::ToolResult
            } else {
                EntryKind::ToolUse
            },
            index: u16::try_from(field(42, INDEX_BITS)).ok()?,
            digest: u64::try_from(field(0, DIGEST_BITS)).ok()?,
        })
    }

    /// Whether a line with this digest is the line the handle was given for.
    pub fn matches(&self, sha256: &[u8; 32]) -> bool {
        digest_prefix(sha256) == self.digest
    }
}

/// `text` without one trailing file extension (a dot and 1 to 8 ASCII letters or digits,
/// such as `.txt`, `.log`, `.json`): a model may write a handle as a file name.
pub fn strip_extension(text: &str) -> &str {
    match text.rsplit_once('.') {
        Some((stem, ext))
            if !stem.is_empty()
                && (1..=8).contains(&ext.len())
                && ext.bytes().all(|b| b.is_ascii_alphanumeric()) =>
        {
            stem
        }
        _ => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_round_trip_and_are_uuids_v8() {
        let sha: [u8; 32] = std::array::from_fn(|i| (i as u8).wrapping_mul(37).wrapping_add(11));
        for (line, kind, index) in [
            (1, EntryKind::ToolUse, 0),
            (u64::from(u32::MAX), EntryKind::ToolResult, (1 << 15) - 1),
            (123_456, EntryKind::ToolResult, 3),
        ] {
            let h = Handle::new(session_key("P", "S0001"), line, kind, index, &sha).unwrap();
            let text = h.to_uuid();
            assert_eq!(text.len(), 36);
            assert_eq!(&text[14..15], "8", "{text}");
            assert!(matches!(&text[19..20], "8" | "9" | "a" | "b"), "{text}");
            assert_eq!(Handle::parse(&text), Some(h));
            assert_eq!(Handle::parse(&text.to_uppercase()), Some(h));
            assert!(h.matches(&sha));
            let mut other = sha;
            other[4] ^= 1;
            assert!(!h.matches(&other));
        }
    }

    #[test]
    fn what_is_not_a_handle() {
        let sha = [7u8; 32];
        let h = Handle::new(1, 2, EntryKind::ToolUse, 3, &sha)
            .unwrap()
            .to_uuid();
        let v4 = format!("{}4{}", &h[..14], &h[15..]);
        for bad in [
            "",
            "x",
            "../../etc/passwd",
            &h[..35],
            &format!("{h}0"),
            &v4,
            &h.replace('-', "_"),
        ] {
            assert_eq!(Handle::parse(bad), None, "{bad}");
        }
        assert_eq!(Handle::new(1, 1 << 32, EntryKind::ToolUse, 0, &sha), None);
        assert_eq!(Handle::new(1, 1, EntryKind::ToolUse, 1 << 15, &sha), None);
    }

    #[test]
    fn one_file_extension_is_stripped() {
        let h = "0a1b2c3d-0000-8000-8000-000000000000";
        for (given, want) in [
            (format!("{h}.txt"), h),
            (format!("{h}.log"), h),
            (format!("{h}.json"), h),
            (h.to_string(), h),
            ("log-1.txt".to_string(), "log-1"),
            (".txt".to_string(), ".txt"),
            (format!("{h}.a b"), &format!("{h}.a b")[..]),
        ] {
            assert_eq!(strip_extension(&given), want, "{given}");
        }
        assert_eq!(strip_extension(&format!("{h}.txt.gz")), format!("{h}.txt"));
    }

    #[test]
    fn sessions_have_distinct_keys() {
        assert_ne!(session_key("P", "S0001"), session_key("P", "S0002"));
        assert_ne!(session_key("P1", "S"), session_key("P", "1S"));
    }
}
