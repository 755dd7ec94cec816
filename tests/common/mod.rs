//! Helpers shared by the integration tests: temp workspaces and the real binary.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub const BIN: &str = env!("CARGO_BIN_EXE_evidence-store");
pub const PROJECT: &str = "Demo-0123456789ab";

/// A prepared workspace in a temp dir, starting as a copy of `examples/workspace`.
pub struct Workspace {
    pub dir: tempfile::TempDir,
}

impl Workspace {
    pub fn example() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        copy_dir(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/workspace"),
            dir.path(),
        );
        Workspace { dir }
    }

    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    pub fn write(&self, rel: &str, bytes: impl AsRef<[u8]>) {
        let path = self.path(rel);
        std::fs::create_dir_all(path.parent().expect("has parent")).expect("mkdir");
        std::fs::write(path, bytes).expect("write");
    }

    pub fn read(&self, rel: &str) -> Vec<u8> {
        std::fs::read(self.path(rel)).expect("read")
    }

    pub fn store(&self) -> PathBuf {
        self.path(".evidence-store/store.redb")
    }

    /// Runs the binary with `--workspace` set to this workspace.
    pub fn run(&self, args: &[&str]) -> Output {
        Command::new(BIN)
            .args(args)
            .arg("--workspace")
            .arg(self.root())
            .env_remove("PROMPT_DIARY_WORKSPACE")
            .env_remove("RUST_LOG")
            .output()
            .expect("binary runs")
    }

    /// Runs the binary and insists it succeeds; returns stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "{args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("utf-8 stdout")
    }

    /// Runs the binary and insists it fails; returns stderr.
    pub fn fails(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(!out.status.success(), "{args:?} should fail");
        String::from_utf8(out.stderr).expect("utf-8 stderr")
    }

    /// Replaces `root` in text with `<W>`, so snapshots do not depend on the temp dir.
    pub fn redact(&self, text: &str) -> String {
        text.replace(&self.root().display().to_string(), "<W>")
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read example") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).expect("copy");
        }
    }
}
