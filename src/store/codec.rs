//! How records become bytes. The only module that knows bincode, so it could be swapped
//! (bincode is flagged unmaintained by RustSec) by changing this file and the schema version.

use std::borrow::Cow;
use std::marker::PhantomData;

use redb::{TypeName, Value};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::error::{CodecError, EncodeError};
use crate::util::lines::LineEntry;

fn config() -> bincode::config::Configuration {
    bincode::config::standard()
}

/// A stored record ([`super::records`]): the value type of one table, as bincode encodes it.
pub trait Record: Serialize + DeserializeOwned + 'static {
    /// What the record is called in a decoding error.
    const WHAT: &'static str;
}

/// The value type of every table holding a [`Record`] `T`: redb's `Value`, as in the
/// bincode wrapper of redb's examples, but lazy: reading a value gives its bytes ([`Encoded`]),
/// decoded when asked, so a damaged record is a [`CodecError`] and never a panic inside
/// redb, and a read that needs part of a record decodes only that part. A record is
/// encoded before it is inserted ([`Encoded::encode`]), so an encoding failure is an error
/// of the write.
///
/// redb records a type name per table and refuses to open a table under another: these
/// tables were created as `&[u8]`, and the bytes are the same, so the name stays `&[u8]`.
/// The record a table holds is checked by the compiler, its layout by `format_tests`.
pub struct Bincode<T>(PhantomData<fn() -> T>);

impl<T> std::fmt::Debug for Bincode<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Bincode<{}>", std::any::type_name::<T>())
    }
}

/// The bytes of one stored record `T`.
pub struct Encoded<'a, T> {
    bytes: Cow<'a, [u8]>,
    record: PhantomData<fn() -> T>,
}

impl<T> std::fmt::Debug for Encoded<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} bytes of {}",
            self.bytes.len(),
            std::any::type_name::<T>()
        )
    }
}

impl<'a, T: Record> Encoded<'a, T> {
    pub fn encode(record: &T) -> Result<Encoded<'static, T>, EncodeError> {
        let bytes = bincode::serde::encode_to_vec(record, config()).map_err(|e| EncodeError {
            what: T::WHAT,
            detail: e.to_string(),
        })?;
        Ok(Encoded {
            bytes: Cow::Owned(bytes),
            record: PhantomData,
        })
    }

    pub fn decode(&self) -> Result<T, CodecError> {
        decode(T::WHAT, &self.bytes)
    }

    /// The bytes in an older layout `U` of the same table, for a migration step.
    pub fn decode_as<U: DeserializeOwned>(&self, what: &'static str) -> Result<U, CodecError> {
        decode(what, &self.bytes)
    }

    /// A view `U` of the record that borrows from its bytes (a layout that skips what a
    /// read does not need), decoded in place.
    pub fn decode_view<'b, U: Deserialize<'b>>(&'b self) -> Result<U, CodecError> {
        decode(T::WHAT, &self.bytes)
    }

    #[cfg(test)]
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Bytes taken as they are, for tests that plant a damaged or old record.
    #[cfg(test)]
    pub fn raw(bytes: &'a [u8]) -> Encoded<'a, T> {
        Encoded {
            bytes: Cow::Borrowed(bytes),
            record: PhantomData,
        }
    }
}

/// redb's `Value` for a value type whose values are their stored bytes, viewed as `$view`
/// (the bytes borrowed as `$data` and wrapped by `$wrap`; `$get` gives them back). Its type
/// name is `&[u8]`, as the tables were created.
macro_rules! bytes_value {
    ([$($generics:tt)*] $value:ty => $view:ty, |$data:ident| $wrap:expr, |$v:ident| $get:expr) => {
        impl<$($generics)*> Value for $value {
            type SelfType<'a>
                = $view
            where
                Self: 'a;
            type AsBytes<'a>
                = &'a [u8]
            where
                Self: 'a;

            fn fixed_width() -> Option<usize> {
                None
            }

            fn from_bytes<'a>($data: &'a [u8]) -> $view
            where
                Self: 'a,
            {
                $wrap
            }

            fn as_bytes<'a, 'b: 'a>($v: &'a Self::SelfType<'b>) -> &'a [u8]
            where
                Self: 'b,
            {
                $get
            }

            fn type_name() -> TypeName {
                <&[u8] as Value>::type_name()
            }
        }
    };
}

bytes_value!([T: Record] Bincode<T> => Encoded<'a, T>, |data| Encoded {
    bytes: Cow::Borrowed(data),
    record: PhantomData,
}, |value| &value.bytes);

/// `value` in a layout of its own (an older one), for tests that plant old records.
#[cfg(test)]
pub fn encode_as<U: Serialize>(value: &U) -> Vec<u8> {
    bincode::serde::encode_to_vec(value, config()).unwrap_or_else(|e| panic!("{e}"))
}

/// Decodes a whole value; its strings may borrow from `bytes`.
fn decode<'b, T: Deserialize<'b>>(what: &'static str, bytes: &'b [u8]) -> Result<T, CodecError> {
    match bincode::serde::borrow_decode_from_slice(bytes, config()) {
        Ok((value, used)) if used == bytes.len() => Ok(value),
        Ok((_, used)) => Err(CodecError {
            what,
            detail: format!("{} trailing bytes", bytes.len() - used),
        }),
        Err(e) => Err(CodecError {
            what,
            detail: e.to_string(),
        }),
    }
}

/// Lines per `line_blocks` value: a 2000-line read touches at most three blocks, and a
/// block (56 KiB) is small enough to rewrite cheaply.
pub const LINES_PER_BLOCK: u64 = 1024;
/// Bytes of one packed [`LineEntry`]: offset, len, decoded_len (u64 LE each), SHA-256.
pub const ENTRY_BYTES: usize = 56;

/// The value type of the `line_blocks` table: line entries are fixed-size and read in
/// bulk, so a block is packed by hand ([`encode_lines`]) rather than through bincode. Its
/// type name is `&[u8]`, as the table was created (see [`Bincode`]).
#[derive(Debug)]
pub struct PackedLines;

/// One stored block of packed line entries.
#[derive(Debug)]
pub struct LineBlock<'a>(Cow<'a, [u8]>);

impl LineBlock<'_> {
    pub fn pack(entries: &[LineEntry]) -> LineBlock<'static> {
        LineBlock(Cow::Owned(encode_lines(entries)))
    }

    pub fn bytes(&self) -> &[u8] {
        &self.0
    }

    pub fn entries(&self) -> Result<Vec<LineEntry>, CodecError> {
        decode_lines(&self.0)
    }

    /// The entries `skip..skip + take` of the block (fewer where the block ends first).
    pub fn range(
        &self,
        skip: u64,
        take: u64,
    ) -> Result<impl Iterator<Item = LineEntry> + '_, CodecError> {
        decode_lines_range(&self.0, skip, take)
    }
}

bytes_value!([] PackedLines => LineBlock<'a>, |data| LineBlock(Cow::Borrowed(data)), |value| &value.0);

/// Packs line entries: offset, len, decoded_len (u64 LE each), SHA-256, one after another.
pub fn encode_lines(entries: &[LineEntry]) -> Vec<u8> {
    let mut out = Vec::with_capacity(entries.len() * ENTRY_BYTES);
    for e in entries {
        out.extend_from_slice(&e.offset.to_le_bytes());
        out.extend_from_slice(&e.len.to_le_bytes());
        out.extend_from_slice(&e.decoded_len.to_le_bytes());
        out.extend_from_slice(&e.sha256);
    }
    out
}

/// The entries `skip..skip + take` of a block (fewer where the block ends first).
pub fn decode_lines_range(
    bytes: &[u8],
    skip: u64,
    take: u64,
) -> Result<impl Iterator<Item = LineEntry> + '_, CodecError> {
    let entries = decode_lines_iter(bytes)?;
    let skip = usize::try_from(skip).unwrap_or(usize::MAX);
    let take = usize::try_from(take).unwrap_or(usize::MAX);
    Ok(entries.skip(skip).take(take))
}

pub fn decode_lines(bytes: &[u8]) -> Result<Vec<LineEntry>, CodecError> {
    Ok(decode_lines_iter(bytes)?.collect())
}

fn decode_lines_iter(bytes: &[u8]) -> Result<impl Iterator<Item = LineEntry> + '_, CodecError> {
    if !bytes.len().is_multiple_of(ENTRY_BYTES) {
        return Err(CodecError {
            what: "line block",
            detail: format!("{} bytes is not a whole number of entries", bytes.len()),
        });
    }
    let u64_at = |chunk: &[u8], at: usize| {
        let mut word = [0u8; 8];
        word.copy_from_slice(&chunk[at..at + 8]);
        u64::from_le_bytes(word)
    };
    Ok(bytes.chunks_exact(ENTRY_BYTES).map(move |chunk| {
        let mut sha256 = [0u8; 32];
        sha256.copy_from_slice(&chunk[24..56]);
        LineEntry {
            offset: u64_at(chunk, 0),
            len: u64_at(chunk, 8),
            decoded_len: u64_at(chunk, 16),
            sha256,
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_blocks_round_trip() {
        let entries: Vec<LineEntry> = (0..5u8)
            .map(|i| LineEntry {
                offset: u64::from(i) << 40,
                len: u64::from(i) * 3,
                decoded_len: u64::from(i) * 3 + 1,
                sha256: [i; 32],
            })
            .collect();
        let bytes = encode_lines(&entries);
        assert_eq!(decode_lines(&bytes).unwrap(), entries);
        assert!(decode_lines(&[0; 55]).is_err());
        for (skip, take) in [(0, 5), (1, 3), (4, 9), (5, 1), (0, 0), (2, u64::MAX)] {
            let got: Vec<LineEntry> = decode_lines_range(&bytes, skip, take).unwrap().collect();
            let want: Vec<LineEntry> = entries
                .iter()
                .skip(skip as usize)
                .take(take.min(5) as usize)
                .cloned()
                .collect();
            assert_eq!(got, want, "skip {skip} take {take}");
        }
    }

    type Tuple = (String, Vec<u64>, Option<bool>);

    impl Record for Tuple {
        const WHAT: &'static str = "test";
    }

    #[test]
    fn records_round_trip_and_reject_garbage() {
        let value: Tuple = (String::from("P-1"), vec![1u64, 2, 3], Some(true));
        let encoded = Encoded::encode(&value).unwrap();
        assert_eq!(encoded.decode().unwrap(), value);
        let bytes = encoded.bytes();
        let mut longer = bytes.to_vec();
        longer.push(0);
        assert!(Encoded::<Tuple>::raw(&longer).decode().is_err());
        assert!(Encoded::<Tuple>::raw(&bytes[..2]).decode().is_err());
    }

    /// A record serde cannot encode.
    #[derive(Deserialize)]
    struct Unencodable;

    impl Serialize for Unencodable {
        fn serialize<S: serde::Serializer>(&self, _: S) -> Result<S::Ok, S::Error> {
            Err(serde::ser::Error::custom("refused"))
        }
    }

    impl Record for Unencodable {
        const WHAT: &'static str = "unencodable";
    }

    /// An encoding failure is an error, never an empty value stored in its place.
    #[test]
    fn an_encoding_failure_is_an_error() {
        let err = Encoded::encode(&Unencodable).expect_err("refused");
        let text = err.to_string();
        assert!(
            text.starts_with("the unencodable record cannot be encoded: ")
                && text.contains("refused"),
            "{text}"
        );
        let dir = tempfile::tempdir().unwrap();
        let store = super::super::Store::open(
            &dir.path().join("s.redb"),
            crate::util::wait::DEFAULT_TIMEOUT,
        )
        .unwrap();
        let mut writer = store.writer().unwrap();
        let table: redb::TableDefinition<&str, Bincode<Unencodable>> =
            redb::TableDefinition::new("unencodable");
        let err = writer.put(table, "k", &Unencodable).expect_err("refused");
        assert!(matches!(err, super::super::StoreError::Encode(_)), "{err}");
    }

    /// The wrappers keep the type name the tables were created with, so stores written
    /// before them still open.
    #[test]
    fn the_value_wrappers_keep_the_byte_slice_type_name() {
        let bytes = <&[u8] as Value>::type_name();
        assert!(<Bincode<Tuple> as Value>::type_name() == bytes);
        assert!(<PackedLines as Value>::type_name() == bytes);
        assert_eq!(
            <Bincode<Tuple> as Value>::fixed_width(),
            <&[u8] as Value>::fixed_width()
        );
    }
}
