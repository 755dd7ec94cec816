//! The kinds of the store's errors ([`Kind`]): decided from the variant and the OS error
//! redb carries, which its error type does not expose as a source.

use super::error::{OpenError, StoreError};
use crate::util::kind::Kind;

impl StoreError {
    pub fn kind(&self) -> Kind {
        match self {
            StoreError::Busy { .. } => Kind::StoreBusy,
            StoreError::Db(e) => redb_kind(e),
            _ => Kind::Lasting,
        }
    }
}

impl OpenError {
    pub fn kind(&self) -> Kind {
        match self {
            OpenError::CreateDir { source, .. } => Kind::of_io(source),
            OpenError::Database { source, .. } => redb_kind(source),
            OpenError::Store(e) => e.kind(),
            OpenError::Gated { .. } => Kind::StoreBusy,
            _ => Kind::Lasting,
        }
    }
}

fn redb_kind(e: &redb::Error) -> Kind {
    match e {
        redb::Error::Io(io) => Kind::of_io(io),
        redb::Error::Backend(inner) => Kind::of_chain(inner.as_ref()),
        _ => Kind::Lasting,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_is_decided_by_the_variant_not_the_message() {
        let busy = StoreError::Busy {
            path: "s".into(),
            waited_secs: 1,
        };
        assert_eq!(busy.kind(), Kind::StoreBusy);
        assert_eq!(OpenError::Store(busy).kind(), Kind::StoreBusy);
        let reworded = StoreError::Inconsistent("the wait's bound sets how long to wait".into());
        assert_eq!(reworded.kind(), Kind::Lasting);
    }

    #[test]
    fn too_many_open_files_inside_redb_is_a_shortage() {
        let emfile = std::io::Error::from_raw_os_error(libc::EMFILE);
        let db = StoreError::Db(Box::new(redb::Error::Io(emfile)));
        assert_eq!(db.kind(), Kind::Shortage);
        let open = OpenError::Database {
            path: "s".into(),
            source: Box::new(redb::Error::Io(std::io::Error::from_raw_os_error(
                libc::ENFILE,
            ))),
        };
        assert_eq!(open.kind(), Kind::Shortage);
    }
}
