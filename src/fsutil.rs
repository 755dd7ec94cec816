//! Atomic file replacement: a reader sees the old file or the new one, never a mix, and
//! a crash leaves at most a stray temp file that the next write replaces.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// What [`temp_path`] appends to a file name.
pub const TEMP_SUFFIX: &str = ".tmp";

/// The temp file used while replacing `path` (prompt-diary uses the same name).
pub fn temp_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(TEMP_SUFFIX);
    path.with_file_name(name)
}

/// Writes `bytes` to `path` atomically and durably: temp file in the same directory,
/// fsync, rename over the target, fsync the directory. Parent directories are created.
pub fn atomic_write(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    fs::create_dir_all(dir)?;
    let temp = temp_path(path);
    let result = (|| {
        let mut file = File::create(&temp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        fs::rename(&temp, path)?;
        File::open(dir)?.sync_all()
    })();
    if result.is_err() {
        let _ = fs::remove_file(&temp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_whole_file_and_leaves_no_temp() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a/b/card.json");
        atomic_write(&path, b"{}\n").unwrap();
        atomic_write(&path, b"{\"x\": 1}\n").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"{\"x\": 1}\n");
        assert!(!temp_path(&path).exists());
        assert_eq!(temp_path(&path).file_name().unwrap(), "card.json.tmp");
    }
}
