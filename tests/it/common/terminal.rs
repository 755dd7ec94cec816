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

/// Runs `command` with stdin, stdout and stderr on a terminal, as when typed at a shell:
/// once what it wrote contains `wait_for`, `keys` are typed (`b"\x04"`: Ctrl-D, the end
/// of input). Its exit status and everything it wrote. Panics (killing it) when
/// `wait_for` has not shown or the command has not ended 60 s on.
pub fn run_typing(mut command: Command, wait_for: &str, keys: &[u8]) -> (ExitStatus, String) {
    use std::io::Write;
    use std::sync::mpsc;
    if !command.get_envs().any(|(key, _)| key == "TERM") {
        command.env("TERM", "xterm");
    }
    let (master, slave) = open();
    command
        .stdin(slave.try_clone().expect("dup"))
        .stdout(slave.try_clone().expect("dup"))
        .stderr(slave.try_clone().expect("dup"));
    let mut child = command.spawn().expect("command starts");
    drop(command);
    drop(slave);
    let mut keyboard = master.try_clone().expect("dup");
    let (tx, rx) = mpsc::channel::<Vec<u8>>();
    let reader = std::thread::spawn(move || {
        let mut master = master;
        let mut buf = [0u8; 8192];
        loop {
            match master.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    if tx.send(buf[..n].to_vec()).is_err() {
                        break;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                // EIO once every copy of the terminal's other side is closed.
                Err(_) => break,
            }
        }
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut bytes = Vec::new();
    let mut typed = false;
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok(chunk) => {
                bytes.extend_from_slice(&chunk);
                if !typed && String::from_utf8_lossy(&bytes).contains(wait_for) {
                    keyboard.write_all(keys).expect("typed");
                    typed = true;
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "no {wait_for:?} or no end within 60 s: {}",
                    String::from_utf8_lossy(&bytes)
                );
            }
        }
    }
    let _ = reader.join();
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
