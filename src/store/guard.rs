//! The store boundary: redb may panic on a damaged file (an index out of bounds in its
//! allocator, an invalid UTF-8 key), so every call into redb runs inside [`guard`], which
//! turns such a panic, and redb's own corruption and disk errors, into a [`StoreError`]
//! that names the store file.

use std::cell::{Cell, RefCell};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Once;

use super::StoreError;

thread_local! {
    /// How many [`guard`]s are active on this thread: a panic inside one is reported as a
    /// damaged store, so the default hook's message is not printed.
    static GUARDED: Cell<u32> = const { Cell::new(0) };
    /// Where the last guarded panic happened, for the error's detail.
    static LOCATION: RefCell<Option<String>> = const { RefCell::new(None) };
}

static HOOK: Once = Once::new();

/// Installs (once per process) a panic hook that stays quiet for panics a guard catches
/// and defers to the previous hook for every other panic.
fn install_hook() {
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if GUARDED.with(Cell::get) > 0 {
                let location = info
                    .location()
                    .map(|l| format!("{}:{}", short_file(l.file()), l.line()));
                LOCATION.with(|slot| *slot.borrow_mut() = location);
                return;
            }
            previous(info);
        }));
    });
}

/// `…/redb-4.6.0/src/tree_store/btree_base.rs` → `redb-4.6.0/src/tree_store/btree_base.rs`.
fn short_file(file: &str) -> &str {
    file.find("redb-").map_or(file, |i| &file[i..])
}

/// Runs `f`, a call into redb, for the store shown as `shown`: a panic becomes
/// [`StoreError::Damaged`], and so do redb's corruption errors; a full disk becomes
/// [`StoreError::DiskFull`].
pub(crate) fn guard<T>(
    shown: &str,
    f: impl FnOnce() -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    install_hook();
    GUARDED.with(|g| g.set(g.get() + 1));
    let outcome = catch_unwind(AssertUnwindSafe(f));
    GUARDED.with(|g| g.set(g.get().saturating_sub(1)));
    match outcome {
        Ok(result) => result.map_err(|e| classify(shown, e)),
        Err(payload) => {
            let message = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_owned());
            let location = LOCATION.with(|slot| slot.borrow_mut().take());
            let detail = match location {
                Some(at) => format!("redb failed at {at}: {message}"),
                None => format!("redb failed: {message}"),
            };
            tracing::debug!(store = shown, %detail, "store damaged");
            Err(StoreError::Damaged {
                path: shown.to_owned(),
                detail,
            })
        }
    }
}

/// Gives redb's corruption and disk-full errors the store's path and their own kind.
pub(crate) fn classify(shown: &str, e: StoreError) -> StoreError {
    let StoreError::Db(db) = &e else {
        return match e {
            StoreError::Codec(c) => StoreError::Damaged {
                path: shown.to_owned(),
                detail: c.to_string(),
            },
            other => other,
        };
    };
    match db.as_ref() {
        redb::Error::Corrupted(detail) => StoreError::Damaged {
            path: shown.to_owned(),
            detail: detail.clone(),
        },
        // A table missing from a store whose schema is current, a table whose stored type no longer matches its definition, or a lock poisoned
        // by an earlier panic, only happen to a damaged file in this store.
        redb::Error::TableTypeMismatch { .. }
        | redb::Error::TypeDefinitionChanged { .. }
        | redb::Error::TableIsMultimap(_)
        | redb::Error::TableIsNotMultimap(_)
        | redb::Error::TableDoesNotExist(_)
        | redb::Error::UpgradeRequired(_)
        | redb::Error::LockPoisoned(_) => StoreError::Damaged {
            path: shown.to_owned(),
            detail: db.to_string(),
        },
        // redb's "Not a redb database" on a file that is the store, or a page reference
        // past the end of the file.
        redb::Error::Io(io)
            if matches!(
                io.kind(),
                std::io::ErrorKind::InvalidData | std::io::ErrorKind::UnexpectedEof
            ) =>
        {
            StoreError::Damaged {
                path: shown.to_owned(),
                detail: io.to_string(),
            }
        }
        redb::Error::Io(io)
            if let Some(timed_out) = io
                .get_ref()
                .and_then(|inner| inner.downcast_ref::<super::backend::LockWaitTimedOut>()) =>
        {
            StoreError::Busy {
                path: shown.to_owned(),
                waited_secs: timed_out.waited_secs,
            }
        }
        redb::Error::Io(io) if is_disk_full(io) => StoreError::DiskFull {
            path: shown.to_owned(),
            detail: io.to_string(),
        },
        _ => e,
    }
}

pub(crate) fn is_disk_full(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::StorageFull || e.kind() == std::io::ErrorKind::QuotaExceeded
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_inside_a_guard_is_a_damaged_store() {
        let err = guard("/s/store.redb", || -> Result<(), StoreError> {
            let v: Vec<u8> = Vec::new();
            let i = v.len() + 3;
            let _ = v[i];
            Ok(())
        })
        .expect_err("the panic is caught");
        let text = err.to_string();
        assert!(
            text.starts_with("the store at /s/store.redb is damaged: redb failed at "),
            "{text}"
        );
        assert!(text.contains("index out of bounds"), "{text}");
        assert!(
            text.ends_with("; run evidence-store verify or evidence-store import --rebuild"),
            "{text}"
        );
    }
}
