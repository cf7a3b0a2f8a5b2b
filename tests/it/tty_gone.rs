//! A TUI whose terminal goes away exits (issue 47, item 5). Reproduced as it was found: the
//! terminal closes while keys are still arriving, and no SIGHUP reaches the process (its
//! session is not the terminal's, as when a pane's shell does not pass the hangup on). Reads
//! then return EOF or EIO; before, crossterm retried them for ever at 100 % CPU. Now the app
//! notices, saves progress and exits, 20 times in 20.

use std::io::{Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A pty of 80x24: (master, slave). Both ends are opened close-on-exec from the start (std
/// opens every file so): the other tests of this binary start processes all the time, and a
/// master one of them inherited would keep the pty open after this test closed it.
fn openpty() -> (std::fs::File, OwnedFd) {
    use std::os::unix::fs::OpenOptionsExt;
    let master = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOCTTY)
        .open("/dev/ptmx")
        .expect("open /dev/ptmx");
    let m = master.as_raw_fd();
    let mut name = [0 as libc::c_char; 128];
    // SAFETY: grantpt, unlockpt and ptsname_r on a master just opened; the buffer outlives
    // the call and its length is given.
    unsafe {
        assert_eq!(libc::grantpt(m), 0, "grantpt");
        assert_eq!(libc::unlockpt(m), 0, "unlockpt");
        assert_eq!(
            libc::ptsname_r(m, name.as_mut_ptr(), name.len()),
            0,
            "ptsname_r"
        );
    }
    // SAFETY: ptsname_r wrote a NUL-terminated name into the buffer.
    let path = unsafe { std::ffi::CStr::from_ptr(name.as_ptr()) }
        .to_string_lossy()
        .into_owned();
    let slave = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOCTTY)
        .open(&path)
        .expect("open the slave");
    let ws = libc::winsize {
        ws_row: 24,
        ws_col: 80,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCSWINSZ reads one winsize.
    unsafe { libc::ioctl(slave.as_raw_fd(), libc::TIOCSWINSZ, &ws) };
    (master, OwnedFd::from(slave))
}

/// Read from the master until `needle` shows or `limit` passes (the app's first frame).
fn read_until(master: &mut std::fs::File, needle: &str, limit: Duration) -> String {
    let fd = master.as_raw_fd();
    let start = Instant::now();
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while start.elapsed() < limit {
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one pollfd.
        if unsafe { libc::poll(&mut p, 1, 100) } > 0 {
            match master.read(&mut buf) {
                Ok(n) if n > 0 => seen.extend_from_slice(&buf[..n]),
                _ => break,
            }
            if String::from_utf8_lossy(&seen).contains(needle) {
                break;
            }
        }
    }
    String::from_utf8_lossy(&seen).into_owned()
}

#[test]
fn a_tui_whose_terminal_closes_exits_and_keeps_its_progress() {
    let mut slowest = Duration::ZERO;
    for i in 0..20 {
        let home = tempfile::tempdir().expect("home");
        let (mut master, slave) = openpty();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_ringlab"));
        cmd.args(["learn", "ring-allreduce"])
            .env("RINGLAB_HOME", home.path())
            .env("TERM", "xterm-256color")
            .stdin(Stdio::from(slave.try_clone().expect("dup")))
            .stdout(Stdio::from(slave.try_clone().expect("dup")))
            .stderr(Stdio::from(slave));
        // SAFETY: setsid is async-signal-safe. A session of its own, with no controlling
        // terminal: the kernel sends it no SIGHUP when the pty closes.
        unsafe {
            cmd.pre_exec(|| {
                libc::setsid();
                Ok(())
            });
        }
        let mut child = cmd.spawn().expect("spawn ringlab");
        let frame = read_until(&mut master, "Ring all-reduce", Duration::from_secs(30));
        assert!(
            frame.contains("Ring all-reduce"),
            "run {i}: no first frame:\n{frame}"
        );
        // PgDn PgDn (and q on every other run), then the terminal goes at once.
        let keys: &[u8] = if i % 2 == 0 {
            b"\x1b[6~\x1b[6~q"
        } else {
            b"\x1b[6~\x1b[6~"
        };
        let _ = master.write_all(keys);
        drop(master);
        let closed = Instant::now();
        // A hang would be for ever; this bound only keeps a broken build from waiting so.
        let status = loop {
            if let Some(s) = child.try_wait().expect("wait") {
                break Some(s);
            }
            if closed.elapsed() > Duration::from_secs(20) {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let status = status
            .unwrap_or_else(|| panic!("run {i}: still running 20 s after its terminal closed"));
        // Quit by q (0), or gone with its terminal (129, as on SIGHUP): never a panic (101).
        assert!(
            matches!(status.code(), Some(0 | 129)),
            "run {i}: exit status {status:?}"
        );
        slowest = slowest.max(closed.elapsed());
        assert!(
            home.path().join("progress.json").is_file(),
            "run {i}: the lesson it opened is in its progress"
        );
    }
    println!("slowest exit after the terminal closed: {slowest:?}");
}
