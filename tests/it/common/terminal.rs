//! Runs the binary with stdout and stderr on a pseudo-terminal of its own and returns
//! everything it wrote there: the master side is read until the command and everything
//! it started have closed the terminal, so no output is lost however slowly the command
//! runs (script(1) stops copying on its own schedule once the command has exited).

use std::fs::File;
use std::io::Read;
use std::os::fd::FromRawFd;
use std::process::{Command, ExitStatus, Stdio};

/// Runs `command` (stdin empty) on a 250-column terminal; its exit status and output.
/// `TERM` is `xterm` unless the command sets or removes it, so that what is drawn does
/// not depend on the environment the tests run in.
pub fn run(mut command: Command) -> (ExitStatus, String) {
    if !command.get_envs().any(|(key, _)| key == "TERM") {
        command.env("TERM", "xterm");
    }
    let (mut master, slave) = open();
    command
        .stdin(Stdio::null())
        .stdout(slave.try_clone().expect("dup"))
        .stderr(slave.try_clone().expect("dup"));
    let mut child = command.spawn().expect("command starts");
    // The command's copies of the terminal are the only ones left open after these.
    drop(command);
    drop(slave);
    let mut bytes = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match master.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => bytes.extend_from_slice(&buf[..n]),
            // Linux answers EIO once every copy of the terminal's other side is closed,
            // after what was written to it has been read.
            Err(e) if e.raw_os_error() == Some(libc::EIO) => break,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => panic!("reading the terminal: {e}"),
        }
    }
    let status = child.wait().expect("waits");
    (status, String::from_utf8_lossy(&bytes).into_owned())
}

/// A new pseudo-terminal: its master side and the terminal itself.
fn open() -> (File, File) {
    let mut master: libc::c_int = -1;
    let mut slave: libc::c_int = -1;
    let size = libc::winsize {
        ws_row: 50,
        ws_col: 250,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: openpty writes two new descriptors into the given ints and reads `size`.
    let rc = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            &size,
        )
    };
    assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: both descriptors were just opened and are owned by nothing else.
    unsafe { (File::from_raw_fd(master), File::from_raw_fd(slave)) }
}
