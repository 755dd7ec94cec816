//! Opening a session file: the one place that does.

use std::fs::File;
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::Path;

use crate::fsutil;
use crate::lines::{self, LineEntry, ReadBackError};
use crate::store::FileRecord;

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

/// Opens `<root>/<rel>` (`rel` as [`super::rel_path`] makes it): resolved beneath the
/// workspace root's descriptor, `O_RDONLY|O_NONBLOCK|O_NOFOLLOW|O_CLOEXEC`, then `fstat`
/// on the descriptor: only a regular file is accepted. A FIFO swapped in is an error at
/// once, never a wait; a symlink is never followed.
pub fn open(root: &Path, rel: &str) -> Result<SessionFile, OpenError> {
    match fsutil::open_regular(root, rel) {
        Ok(Some((file, meta))) => Ok(SessionFile { file, meta }),
        Ok(None) => Err(OpenError::Missing),
        Err(e) => Err(OpenError::Unreadable(e)),
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
        lines::read_back(&self.file, entry)
    }

    /// The decoded text of `entry`'s line, checked as [`Self::read_back`] checks it.
    pub fn read_text(&self, entry: &LineEntry) -> Result<String, ReadBackError> {
        self.read_back(entry)
            .map(|bytes| lines::decode(&bytes).into_owned())
    }
}
