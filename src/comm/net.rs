//! Socket plumbing shared by the store and the data connections: connecting with NCCL's retry
//! policy (refused or unreachable connects are retried NCCL_SOCKET_RETRY_CNT times, 34 by
//! default, sleeping NCCL_SOCKET_RETRY_SLEEP_MSEC × k, 100 ms by default, each retry logged the
//! way NCCL logs it), and socket tuning for bandwidth.

use std::io;
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::time::Duration;

use super::log;

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

/// Errors NCCL treats as "not there yet": retry.
fn retryable(e: &io::Error) -> bool {
    use io::ErrorKind::*;
    matches!(
        e.kind(),
        ConnectionRefused
            | TimedOut
            | HostUnreachable
            | NetworkUnreachable
            | ConnectionReset
            | AddrNotAvailable
    )
}

/// Connect to `addr`, retrying like NCCL. `connect_timeout` bounds one attempt (a silently
/// dropped SYN would otherwise wait for the kernel's timeout, minutes).
pub fn connect_retry(addr: SocketAddr, connect_timeout: Duration) -> io::Result<TcpStream> {
    let tries = env_num("NCCL_SOCKET_RETRY_CNT", 34);
    let sleep_ms = env_num("NCCL_SOCKET_RETRY_SLEEP_MSEC", 100);
    let mut k = 0;
    loop {
        match super::vnet::connect_timeout(addr, connect_timeout) {
            Ok(s) => return Ok(s),
            Err(e) if retryable(&e) && k < tries => {
                k += 1;
                let wait = sleep_ms * k;
                log::info(&format!(
                    "Call to connect returned {}, retrying",
                    describe(&e)
                ));
                log::warn(&format!(
                    "socketProgress: connect to {addr} returned {}, retrying ({k}/{tries}) after sleep for {wait} msec",
                    describe(&e)
                ));
                std::thread::sleep(Duration::from_millis(wait));
            }
            Err(e) => {
                return Err(io::Error::new(
                    e.kind(),
                    format!("connect to {addr}: {}", describe(&e)),
                ));
            }
        }
    }
}

/// The errno text NCCL prints: "Connection refused", "Connection timed out", …
pub fn describe(e: &io::Error) -> String {
    use io::ErrorKind::*;
    match e.kind() {
        ConnectionRefused => "Connection refused".into(),
        TimedOut => "Connection timed out".into(),
        HostUnreachable => "No route to host".into(),
        NetworkUnreachable => "Network is unreachable".into(),
        ConnectionReset => "Connection reset by peer".into(),
        _ => e.to_string(),
    }
}

/// No Nagle delay, and socket buffers of 256 KiB (the kernel doubles it): measured on loopback
/// here, a modest in-flight window keeps the kernel's pages hot in cache and beat 4 MiB and
/// autotuning at 4 MiB to 256 MiB messages.
pub fn tune(s: &TcpStream) -> io::Result<()> {
    s.set_nodelay(true)?;
    let fd = s.as_raw_fd();
    // RINGLAB_SOCKBUF=0 leaves the kernel's autotuning alone (for experiments).
    let size = env_num("RINGLAB_SOCKBUF", 256 << 10) as libc::c_int;
    if size == 0 {
        return Ok(());
    }
    for opt in [libc::SO_SNDBUF, libc::SO_RCVBUF] {
        // SAFETY: fd is a valid socket; the option value is a c_int that outlives the call.
        unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                opt,
                (&size as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            );
        }
    }
    Ok(())
}
