//! Entering and leaving the terminal's special modes. Whatever happens (normal exit, error,
//! panic, Ctrl-C, SIGTERM) the terminal is handed back as it was: main screen, cooked mode,
//! cursor shown, mouse capture off.

use std::io::{self, Write};
use std::sync::Once;

use crossterm::cursor::{Hide, Show};
use crossterm::event::{DisableMouseCapture, EnableMouseCapture};
use crossterm::execute;
use crossterm::terminal::{
    EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode,
};

/// Restores the terminal when dropped.
pub struct TerminalGuard(());

impl TerminalGuard {
    pub fn enter() -> io::Result<Self> {
        install_panic_hook();
        enable_raw_mode()?;
        let guard = Self(());
        execute!(io::stdout(), EnterAlternateScreen, EnableMouseCapture, Hide)?;
        Ok(guard)
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        restore();
    }
}

/// Leave every mode we entered. Safe to call more than once.
pub fn restore() {
    let mut out = io::stdout();
    let _ = execute!(out, DisableMouseCapture, LeaveAlternateScreen, Show);
    let _ = disable_raw_mode();
    let _ = out.flush();
}

/// Has the terminal gone away (its pty closed, the session hung up)? A hung-up terminal
/// answers every `tcgetattr` with EIO (Linux's `hung_up_tty_ioctl`), and `poll` reports
/// POLLHUP on it; a terminal that is merely idle does neither.
pub fn gone() -> bool {
    let fd = libc::STDIN_FILENO;
    let mut t = std::mem::MaybeUninit::<libc::termios>::uninit();
    // SAFETY: tcgetattr writes a termios into the buffer it is given, or fails.
    let attr_failed = unsafe { libc::tcgetattr(fd, t.as_mut_ptr()) } != 0;
    let attr_gone = attr_failed
        && matches!(
            io::Error::last_os_error().raw_os_error(),
            Some(libc::EIO | libc::ENOTTY | libc::EBADF | libc::ENXIO)
        );
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one pollfd, a zero timeout: poll only fills in revents.
    let n = unsafe { libc::poll(&mut p, 1, 0) };
    let hung = n > 0 && p.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0;
    attr_gone || hung
}

fn install_panic_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            previous(info);
        }));
    });
}
