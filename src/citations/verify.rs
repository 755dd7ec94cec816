//! The verification rule for a file citation, without I/O: what a reference names, and
//! what a file's line count says about it. Reading the file is the caller's part.
//!
//! A file reference is `<path>:<first>`, `<path>:<first>-<last>`, `<path>:<first>:<last>`
//! or `<path>:<first>:<n>-<last>` (the marker pattern's forms; the range is from the
//! first number to the last), or, for a JSON citation of type `file`, a bare `<path>`
//! (checked for existence only). The path is everything before the first `:`.

/// The outcome of checking one citation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Status {
    /// The file exists inside the project and the line or range is within it.
    Ok,
    /// The path names nothing inside the project.
    MissingFile,
    /// The file exists but has fewer lines than cited (or the range is empty or starts at 0).
    LineOutOfRange,
    /// The path leads outside the project directory (absolute elsewhere, `..`, a symlink).
    OutsideProject,
    /// Not checked: not a file citation, no working directory, not a regular file, or
    /// unreadable.
    Unchecked,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::MissingFile => "missing_file",
            Status::LineOutOfRange => "line_out_of_range",
            Status::OutsideProject => "outside_project",
            Status::Unchecked => "unchecked",
        }
    }
}

/// What a file reference names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileRef<'a> {
    pub path: &'a str,
    /// The cited lines, inclusive, 1-based as written; `None` for a bare path.
    pub lines: Option<(u64, u64)>,
}

/// The path and lines of a file reference; `None` when it is not one (empty path, or a
/// line part that is not ASCII digits in one of the forms).
pub fn file_reference(reference: &str) -> Option<FileRef<'_>> {
    let reference = reference.trim();
    let (path, rest) = match reference.split_once(':') {
        Some((path, rest)) => (path, Some(rest)),
        None => (reference, None),
    };
    if path.is_empty() {
        return None;
    }
    let Some(rest) = rest else {
        return Some(FileRef { path, lines: None });
    };
    let (numbers, last) = match rest.split_once('-') {
        Some((numbers, last)) => (numbers, Some(number(last)?)),
        None => (rest, None),
    };
    let mut parts = numbers.split(':');
    let first = number(parts.next()?)?;
    let second = match parts.next() {
        Some(text) => Some(number(text)?),
        None => None,
    };
    if parts.next().is_some() {
        return None;
    }
    let last = last.or(second).unwrap_or(first);
    Some(FileRef {
        path,
        lines: Some((first, last)),
    })
}

fn number(text: &str) -> Option<u64> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// Whether `lines` fit a file of `line_count` physical lines (Python `splitlines`).
pub fn line_status(lines: Option<(u64, u64)>, line_count: u64) -> Status {
    match lines {
        None => Status::Ok,
        Some((first, last)) if first >= 1 && first <= last && last <= line_count => Status::Ok,
        Some(_) => Status::LineOutOfRange,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(reference: &str, expect: Option<(&str, Option<(u64, u64)>)>) {
        let got = file_reference(reference).map(|r| (r.path, r.lines));
        assert_eq!(got, expect, "{reference:?}");
    }

    #[test]
    fn reference_forms() {
        check("src/a.py:42", Some(("src/a.py", Some((42, 42)))));
        check("src/a.py:42-45", Some(("src/a.py", Some((42, 45)))));
        check("src/a.py:42:47", Some(("src/a.py", Some((42, 47)))));
        check("src/a.py:42:47-50", Some(("src/a.py", Some((42, 50)))));
        check(" src/a.py ", Some(("src/a.py", None)));
        check("/abs/a.py:1", Some(("/abs/a.py", Some((1, 1)))));
        check(":1", None);
        check("", None);
        check("a.py:", None);
        check("a.py:x", None);
        check("a.py:1-", None);
        check("a.py:1:2:3", None);
        check("a.py:\u{0661}", None);
        check("a.py:99999999999999999999999", None);
        check("tests/test_a.py::test_x - PASS", None);
    }

    #[test]
    fn line_ranges() {
        assert_eq!(line_status(Some((1, 1)), 1), Status::Ok);
        assert_eq!(line_status(Some((3, 5)), 5), Status::Ok);
        assert_eq!(line_status(Some((3, 6)), 5), Status::LineOutOfRange);
        assert_eq!(line_status(Some((0, 1)), 5), Status::LineOutOfRange);
        assert_eq!(line_status(Some((4, 2)), 5), Status::LineOutOfRange);
        assert_eq!(line_status(Some((1, 1)), 0), Status::LineOutOfRange);
        assert_eq!(line_status(None, 0), Status::Ok);
    }

    impl Status {
        const ALL: [Status; 5] = [
            Status::Ok,
            Status::MissingFile,
            Status::LineOutOfRange,
            Status::OutsideProject,
            Status::Unchecked,
        ];

        fn parse(name: &str) -> Option<Status> {
            Status::ALL.into_iter().find(|s| s.as_str() == name)
        }
    }

    #[test]
    fn status_names_round_trip() {
        for s in Status::ALL {
            assert_eq!(Status::parse(s.as_str()), Some(s));
        }
        assert_eq!(Status::parse("OK"), None);
    }
}
