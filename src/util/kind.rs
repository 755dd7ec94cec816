//! What kind of failure an error is. Whether a later call tries again is decided by the
//! kind, which each error type derives from its variant and the OS error it carries,
//! never by the wording of its message.

use std::error::Error;
use std::io;

/// A failure's kind, as far as retrying goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A lock on the store held by another writer past the wait's bound.
    StoreBusy,
    /// A shortage that goes away by itself: too many open files in this process
    /// (EMFILE) or in the system (ENFILE).
    Shortage,
    /// Lasts until someone fixes it.
    Lasting,
}

impl Kind {
    /// The kind of an I/O error: a shortage by its OS error code, otherwise lasting.
    pub fn of_io(e: &io::Error) -> Kind {
        match e.raw_os_error() {
            Some(code) if code == libc::EMFILE || code == libc::ENFILE => Kind::Shortage,
            _ => Kind::Lasting,
        }
    }

    /// The kind of the first I/O error in `e`'s source chain (`e` included) that is not
    /// lasting; lasting when there is none.
    pub fn of_chain(e: &(dyn Error + 'static)) -> Kind {
        let mut next = Some(e);
        while let Some(e) = next {
            if let Some(io) = e.downcast_ref::<io::Error>() {
                let kind = Kind::of_io(io);
                if kind != Kind::Lasting {
                    return kind;
                }
            }
            next = e.source();
        }
        Kind::Lasting
    }

    /// `self`, or `other` when `self` is lasting: the kind of a failure with two causes.
    pub fn or(self, other: Kind) -> Kind {
        match self {
            Kind::Lasting => other,
            kind => kind,
        }
    }

    /// A later attempt may succeed without anyone fixing anything.
    pub fn is_transient(self) -> bool {
        self != Kind::Lasting
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn too_many_open_files_is_a_shortage_by_its_code_whatever_the_text() {
        for code in [libc::EMFILE, libc::ENFILE] {
            assert_eq!(
                Kind::of_io(&io::Error::from_raw_os_error(code)),
                Kind::Shortage
            );
        }
        assert_eq!(
            Kind::of_io(&io::Error::from_raw_os_error(libc::ENOENT)),
            Kind::Lasting
        );
        // The text of a shortage, without its code, is not one.
        assert_eq!(
            Kind::of_io(&io::Error::other("Too many open files (os error 24)")),
            Kind::Lasting
        );
    }
}
