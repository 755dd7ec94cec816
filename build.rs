//! Records the commit the binary is built from, for `--version`: `git rev-parse --short
//! HEAD` when the source is a git checkout and git is installed, else "unknown" (a
//! source tarball, or `cargo install` from a copy without `.git`).

use std::process::Command;

fn main() {
    let commit = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|out| out.status.success())
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .map(|text| text.trim().to_owned())
        .filter(|text| !text.is_empty() && text.bytes().all(|b| b.is_ascii_hexdigit()))
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=EVIDENCE_STORE_COMMIT={commit}");
    // A new commit (or a checkout of another branch) moves HEAD or the ref it names;
    // only files that exist are watched (a missing one would rerun this every build).
    let git_path = |name: &str| {
        Command::new("git")
            .args(["rev-parse", "--git-path", name])
            .output()
            .ok()
            .filter(|out| out.status.success())
            .and_then(|out| String::from_utf8(out.stdout).ok())
            .map(|text| std::path::PathBuf::from(text.trim()))
    };
    let mut watched = vec![git_path("HEAD"), git_path("packed-refs")];
    if let Some(head) = watched[0]
        .as_ref()
        .and_then(|p| std::fs::read_to_string(p).ok())
        && let Some(reference) = head.trim().strip_prefix("ref: ")
    {
        watched.push(git_path(reference));
    }
    for path in watched.into_iter().flatten().filter(|p| p.exists()) {
        println!("cargo:rerun-if-changed={}", path.display());
    }
    println!("cargo:rerun-if-changed=build.rs");
}
