//! The store boundary: redb may panic on a damaged file (an index out of bounds in its
//! allocator, an invalid UTF-8 key), so every call into redb runs inside [`guard`], which
//! turns such a panic, and redb's own corruption and disk errors, into a [`StoreError`]
//! that names the store file.

use std::cell::{Cell, RefCell};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Once;

use super::error::StoreError;

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

/// Drops a redb value inside the guard: after redb panicked once, its destructors may
/// panic too (a poisoned lock), and that must not abort the process.
pub(super) fn guarded_drop<T>(shown: &str, value: T) {
    let _ = guard(shown, move || {
        drop(value);
        Ok(())
    });
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

    /// Functions that open a table outside a guard of their own, each only ever called
    /// inside a guard (checked below), with the reason.
    const GUARDED_BY_CALLER: &[(&str, &str)] = &[
        (
            "table",
            "the lookups' table opener: every caller opens inside a guard",
        ),
        (
            "ensure_current",
            "the schema check, run inside the open's guard",
        ),
        ("read_version", "called by ensure_current"),
        ("create_tables", "called by ensure_current"),
        ("file_ctime", "a migration step, run by ensure_current"),
        (
            "checksum_documents",
            "a migration step, run by ensure_current",
        ),
        ("citation_tables", "a migration step, run by ensure_current"),
        (
            "record_workspace_contract",
            "a migration step, run by ensure_current",
        ),
        (
            "retake_citations",
            "a migration step, run by ensure_current",
        ),
    ];

    /// The store's source without comments and without its test code.
    fn store_sources() -> Vec<(String, String)> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/store");
        let mut out = Vec::new();
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if !name.ends_with(".rs") || name.contains("tests") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let code = text
                .split("#[cfg(test)]\nmod tests")
                .next()
                .unwrap_or_default();
            let code: String = code
                .lines()
                .map(|line| line.find("//").map_or(line, |at| &line[..at]))
                .collect::<Vec<_>>()
                .join("\n");
            out.push((name, code));
        }
        out.sort();
        out
    }

    /// Where the bracket opened at `open` closes.
    fn closing(code: &[u8], open: usize) -> usize {
        let mut depth = 0i64;
        for (at, byte) in code.iter().enumerate().skip(open) {
            match byte {
                b'(' | b'{' | b'[' => depth += 1,
                b')' | b'}' | b']' => {
                    depth -= 1;
                    if depth == 0 {
                        return at;
                    }
                }
                _ => {}
            }
        }
        code.len()
    }

    /// Byte ranges of the arguments of every call that runs its closure inside a guard.
    fn guarded_spans(code: &str) -> Vec<(usize, usize)> {
        let mut spans = Vec::new();
        for call in ["guard::guard(", "self.with_db("] {
            for (at, _) in code.match_indices(call) {
                let open = at + call.len() - 1;
                spans.push((open, closing(code.as_bytes(), open)));
            }
        }
        spans
    }

    /// Every function with a body: (name, body start, body end).
    fn functions(code: &str) -> Vec<(String, usize, usize)> {
        let bytes = code.as_bytes();
        let mut out = Vec::new();
        for (at, _) in code.match_indices("fn ") {
            if at > 0 && (bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_') {
                continue;
            }
            let name: String = code[at + 3..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            let mut depth = 0i64;
            let mut body = None;
            for (i, byte) in bytes.iter().enumerate().skip(at) {
                match byte {
                    b'(' | b'[' => depth += 1,
                    b')' | b']' => depth -= 1,
                    b';' if depth == 0 => break,
                    b'{' if depth == 0 => {
                        body = Some(i);
                        break;
                    }
                    _ => {}
                }
            }
            if let Some(start) = body {
                out.push((name, start, closing(bytes, start)));
            }
        }
        out
    }

    /// The innermost function holding `at`.
    fn enclosing(functions: &[(String, usize, usize)], at: usize) -> Option<&str> {
        functions
            .iter()
            .filter(|(_, start, end)| *start < at && at < *end)
            .min_by_key(|(_, start, end)| end - start)
            .map(|(name, _, _)| name.as_str())
    }

    fn inside(spans: &[(usize, usize)], at: usize) -> bool {
        spans.iter().any(|(start, end)| *start < at && at < *end)
    }

    /// Every redb table the store opens is opened inside [`guard`] (so a panic or a
    /// corruption error of redb becomes the damaged-store error): directly, or in one of
    /// the functions of `GUARDED_BY_CALLER`, whose every call is inside a guard.
    #[test]
    fn every_table_is_opened_inside_the_guard() {
        let sources = store_sources();
        let allowed: Vec<&str> = GUARDED_BY_CALLER.iter().map(|(name, _)| *name).collect();
        let mut unguarded = Vec::new();
        let mut used = std::collections::BTreeSet::new();
        for (file, code) in &sources {
            let spans = guarded_spans(code);
            let functions = functions(code);
            for opener in ["open_table(", ".table("] {
                for (at, _) in code.match_indices(opener) {
                    if inside(&spans, at) {
                        continue;
                    }
                    let line = code[..at].lines().count();
                    match enclosing(&functions, at) {
                        Some(name) if allowed.contains(&name) => {
                            used.insert(name.to_owned());
                        }
                        name => unguarded
                            .push(format!("{file}:{line} in fn {}", name.unwrap_or("(none)"))),
                    }
                }
            }
        }
        assert_eq!(
            unguarded,
            Vec::<String>::new(),
            "tables opened outside the guard"
        );
        for name in &allowed {
            assert!(
                used.contains(*name),
                "{name} no longer opens a table: drop it from the list"
            );
            for (file, code) in &sources {
                let spans = guarded_spans(code);
                let functions = functions(code);
                let call = format!("{name}(");
                for (at, _) in code.match_indices(&call) {
                    let before = code[..at].chars().next_back().unwrap_or(' ');
                    if before.is_alphanumeric() || before == '_' || code[..at].ends_with("fn ") {
                        continue;
                    }
                    let caller = enclosing(&functions, at);
                    let line = code[..at].lines().count();
                    assert!(
                        inside(&spans, at) || caller.is_some_and(|c| allowed.contains(&c)),
                        "{file}:{line}: {name} is called outside a guard (in fn {caller:?})"
                    );
                }
            }
        }
    }
}
