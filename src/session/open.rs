//! Opening a session file: the one place that does.

use std::fs::File;
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::Path;

use crate::store::FileRecord;
use crate::util::fsutil;
use crate::util::lines::{self, LineEntry};

/// Why a stored line could not be read back from its file.
#[derive(Debug)]
pub enum ReadBackError {
    Io(io::Error),
    /// The line's bytes no longer match the digest import stored (or the file is no
    /// longer the one import indexed).
    Changed,
}

/// Why a session file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// No file at its path.
    #[error("No such file or directory")]
    Missing,
    /// It is there but cannot be read as a session file: not a regular file (a FIFO, a
    /// directory), a symlink, a path leading outside the workspace, or an I/O error.
    #[error("{0}")]
    Unreadable(io::Error),
    /// A regular file, but not the one import indexed: another size, or another file
    /// (inode) put in its place.
    #[error("{0}")]
    Changed(&'static str),
}

impl OpenError {
    /// The error as an I/O error (`Missing` as `NotFound`).
    pub fn into_io(self) -> io::Error {
        match self {
            OpenError::Missing => io::Error::from_raw_os_error(libc::ENOENT),
            OpenError::Unreadable(e) => e,
            OpenError::Changed(what) => io::Error::new(io::ErrorKind::InvalidData, what),
        }
    }
}

impl From<OpenError> for ReadBackError {
    fn from(e: OpenError) -> Self {
        match e {
            OpenError::Changed(_) => ReadBackError::Changed,
            other => ReadBackError::Io(other.into_io()),
        }
    }
}

/// A session file opened for reading: a regular file under the workspace root, held by
/// its descriptor. Every read of it is a positioned read of that descriptor.
#[derive(Debug)]
pub struct SessionFile {
    file: File,
    meta: std::fs::Metadata,
}

/// Opens `<root>/<rel>` (`rel` as [`crate::workspace::layout::session_path`] makes it): resolved beneath the
/// workspace root's descriptor, `O_RDONLY|O_NONBLOCK|O_NOFOLLOW|O_CLOEXEC`, then `fstat`
/// on the descriptor: only a regular file is accepted. A FIFO swapped in is an error at
/// once, never a wait; a symlink is never followed.
pub fn open(root: &Path, rel: &str) -> Result<SessionFile, OpenError> {
    opened(fsutil::open_regular(root, rel))
}

fn opened(result: io::Result<Option<(File, std::fs::Metadata)>>) -> Result<SessionFile, OpenError> {
    match result {
        Ok(Some((file, meta))) => Ok(SessionFile { file, meta }),
        Ok(None) => Err(OpenError::Missing),
        Err(e) => Err(OpenError::Unreadable(e)),
    }
}

/// The workspace root held open, for opening many session files in a row as [`open`]
/// opens each (an import stamps every one).
pub struct Sessions(fsutil::HeldRoot);

impl Sessions {
    pub fn open(root: &Path) -> io::Result<Sessions> {
        fsutil::HeldRoot::open(root).map(Sessions)
    }

    /// [`open`] of `rel` beneath this root.
    pub fn file(&self, rel: &str) -> Result<SessionFile, OpenError> {
        opened(self.0.open_regular(rel))
    }
}

/// [`open`], for reading lines import indexed: the file must also be the one `record`
/// describes, by size and identity (its inode, when recorded).
pub fn open_imported(
    root: &Path,
    rel: &str,
    record: &FileRecord,
) -> Result<SessionFile, OpenError> {
    let file = open(root, rel)?;
    if file.size() != record.size {
        return Err(OpenError::Changed("its size changed"));
    }
    if record.inode != 0 && file.meta.ino() != record.inode {
        return Err(OpenError::Changed("another file was put in its place"));
    }
    Ok(file)
}

impl SessionFile {
    /// Its size when it was opened.
    pub fn size(&self) -> u64 {
        self.meta.len()
    }

    /// Its status when it was opened.
    pub fn metadata(&self) -> &std::fs::Metadata {
        &self.meta
    }

    /// Its status now (`fstat` on the descriptor, never the path).
    pub fn stat_again(&self) -> io::Result<std::fs::Metadata> {
        self.file.metadata()
    }

    /// The open file, for the indexer's positioned reads.
    pub fn file(&self) -> &File {
        &self.file
    }

    /// Fills `buf` from `offset` (one positioned read, repeated only for a short read).
    pub fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.file.read_exact_at(buf, offset)
    }

    /// The bytes of `entry`'s line (one positioned read), checked against the digest
    /// import stored for it.
    pub fn read_back(&self, entry: &LineEntry) -> Result<Vec<u8>, ReadBackError> {
        let len = usize::try_from(entry.len).map_err(|_| ReadBackError::Changed)?;
        let mut bytes = vec![0; len];
        self.read_exact_at(&mut bytes, entry.offset)
            .map_err(ReadBackError::Io)?;
        if !lines::matches(&bytes, entry) {
            return Err(ReadBackError::Changed);
        }
        Ok(bytes)
    }

    /// The decoded text of `entry`'s line, checked as [`Self::read_back`] checks it.
    pub fn read_text(&self, entry: &LineEntry) -> Result<String, ReadBackError> {
        self.read_back(entry)
            .map(|bytes| lines::decode(&bytes).into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn record(file: &SessionFile, inode: u64) -> FileRecord {
        FileRecord {
            file_id: 1,
            size: file.size(),
            mtime_ns: 0,
            lines: 1,
            digest: [0; 32],
            ctime_ns: 0,
            inode,
        }
    }

    #[test]
    fn only_regular_files_under_the_root_open_and_never_through_a_symlink() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join("s")).unwrap();
        fs::write(dir.path().join("s/a.jsonl"), "{}\n").unwrap();
        fs::write(outside.path().join("b.jsonl"), "{}\n").unwrap();
        assert_eq!(open(dir.path(), "s/a.jsonl").unwrap().size(), 3);
        assert!(matches!(
            open(dir.path(), "s/none.jsonl"),
            Err(OpenError::Missing)
        ));

        let made = std::process::Command::new("mkfifo")
            .arg(dir.path().join("s/fifo.jsonl"))
            .status()
            .unwrap();
        assert!(made.success());
        // Returns at once: a blocking open would wait here for a writer.
        let err = open(dir.path(), "s/fifo.jsonl").unwrap_err();
        assert_eq!(err.to_string(), "it is not a regular file");

        std::os::unix::fs::symlink("a.jsonl", dir.path().join("s/in.jsonl")).unwrap();
        let err = open(dir.path(), "s/in.jsonl").unwrap_err();
        assert_eq!(err.to_string(), "it is a symlink, not a regular file");
        std::os::unix::fs::symlink(
            outside.path().join("b.jsonl"),
            dir.path().join("s/out.jsonl"),
        )
        .unwrap();
        let err = open(dir.path(), "s/out.jsonl").unwrap_err();
        assert!(err.to_string().contains("outside the workspace"), "{err}");
        assert!(open(dir.path(), "../b.jsonl").is_err());
    }

    #[test]
    fn an_imported_file_must_keep_its_size_and_identity() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("a.jsonl"), "{}\n").unwrap();
        let file = open(dir.path(), "a.jsonl").unwrap();
        let inode = file.metadata().ino();
        assert!(open_imported(dir.path(), "a.jsonl", &record(&file, inode)).is_ok());
        // Unknown identity (a record from before inodes were kept): the size decides.
        assert!(open_imported(dir.path(), "a.jsonl", &record(&file, 0)).is_ok());
        let err = open_imported(dir.path(), "a.jsonl", &record(&file, inode + 1)).unwrap_err();
        assert_eq!(err.to_string(), "another file was put in its place");
        let mut smaller = record(&file, inode);
        smaller.size -= 1;
        let err = open_imported(dir.path(), "a.jsonl", &smaller).unwrap_err();
        assert_eq!(err.to_string(), "its size changed");
    }

    #[test]
    fn a_line_read_back_is_checked_against_its_digest() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("a.jsonl"), "{\"a\":1}\n{\"b\":2}\n").unwrap();
        let file = open(dir.path(), "a.jsonl").unwrap();
        let (sha256, decoded_len) = lines::hash_line(b"{\"b\":2}");
        let entry = LineEntry {
            offset: 8,
            len: 7,
            decoded_len,
            sha256,
        };
        assert_eq!(file.read_text(&entry).unwrap(), "{\"b\":2}");
        let moved = LineEntry { offset: 0, ..entry };
        assert!(matches!(
            file.read_back(&moved),
            Err(ReadBackError::Changed)
        ));
    }
}
