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

/// The congestion control the data connections use unless `RINGLAB_TCP_CC` names another
/// (`system` keeps the kernel's default). Many kernels default to BBR, which paces every send
/// with a timer at its running estimate of the path's bandwidth; on loopback and on a lossless
/// fabric that estimate only throttles the stream (measured here, loopback, 2 ranks: 1 MiB
/// all-reduce 1.9 GB/s under BBR, 2.8 GB/s under reno with the same buffers). Reno does not
/// pace, and unprivileged processes may always choose it.
pub const TCP_CC: &str = "reno";

/// No Nagle delay, a congestion control that does not pace ([`TCP_CC`]), and socket buffers
/// left to the kernel's autotuning (a fixed size turns autotuning off, and a stock
/// net.core.wmem_max caps it near 208 KiB; measured here under reno, 1-4 MiB all-reduce ran
/// about 1.5x faster autotuned than with 256 KiB buffers, and no slower than with 4 MiB).
pub fn tune(s: &TcpStream) -> io::Result<()> {
    s.set_nodelay(true)?;
    let fd = s.as_raw_fd();
    let cc = std::env::var("RINGLAB_TCP_CC").unwrap_or_else(|_| TCP_CC.to_string());
    if !cc.is_empty() && cc != "system" {
        // SAFETY: fd is a valid socket; the option value is a byte string that outlives the call.
        let rc = unsafe {
            libc::setsockopt(
                fd,
                libc::IPPROTO_TCP,
                libc::TCP_CONGESTION,
                cc.as_ptr().cast(),
                cc.len() as libc::socklen_t,
            )
        };
        if rc != 0 {
            log::warn(&format!(
                "NET/Socket : cannot use congestion control `{cc}` (RINGLAB_TCP_CC): {}; keeping the system default",
                io::Error::last_os_error()
            ));
        }
    }
    // RINGLAB_SOCKBUF=N fixes both buffers at N bytes (for experiments); unset or 0 autotunes.
    let size = env_num("RINGLAB_SOCKBUF", 0) as libc::c_int;
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

/// The congestion control a connected socket uses.
pub fn congestion_control(s: &TcpStream) -> io::Result<String> {
    let mut buf = [0u8; 16];
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: buf and len are valid for the call; the kernel writes at most len bytes.
    let rc = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            buf.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    let name = &buf[..(len as usize).min(buf.len())];
    let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
    Ok(String::from_utf8_lossy(&name[..end]).into_owned())
}

/// Connections that have not greeted yet, per source address: the one admission rule the
/// store and every rank's listener share. Up to `cap` may greet at once from one address (ranks
/// of one node share it with whatever else runs there); beyond that a newcomer closes the
/// longest-silent one, once that has been silent past [`GREETING_GRACE`] (a real peer greets
/// at once, so only strangers are ever that old).
pub struct Greeters {
    cap: usize,
    next: std::sync::atomic::AtomicU64,
    pending: std::sync::Mutex<
        std::collections::HashMap<std::net::IpAddr, std::collections::VecDeque<Waiting>>,
    >,
}

/// A connection still greeting: its id, a handle to close it, since when.
type Waiting = (u64, TcpStream, std::time::Instant);

/// How long a connection may stay silent before a newer one from its address may close it.
pub const GREETING_GRACE: Duration = Duration::from_millis(250);

impl Greeters {
    pub fn new(cap: usize) -> Self {
        Self {
            cap,
            next: std::sync::atomic::AtomicU64::new(0),
            pending: Default::default(),
        }
    }

    /// Take `conn` in (closing the longest-silent one from its address if over the cap);
    /// returns its ticket for [`Greeters::greeted`], or why it could not be taken in.
    pub fn admit(&self, conn: &TcpStream) -> io::Result<Ticket> {
        let ip = conn.peer_addr()?.ip();
        let handle = conn.try_clone()?;
        let id = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut p = self
            .pending
            .lock()
            .map_err(|_| io::Error::other("greeting table poisoned"))?;
        let q = p.entry(ip).or_default();
        if q.len() >= self.cap
            && q.front()
                .is_some_and(|(_, _, t)| t.elapsed() > GREETING_GRACE)
            && let Some((_, old, _)) = q.pop_front()
        {
            let _ = old.shutdown(std::net::Shutdown::Both);
        }
        q.push_back((id, handle, std::time::Instant::now()));
        Ok(Ticket { ip, id })
    }

    /// The connection of `t` has greeted (or failed to): forget it. False when it had been
    /// closed meanwhile as the longest-silent, so what it said must not be used.
    pub fn greeted(&self, t: Ticket) -> bool {
        let Ok(mut p) = self.pending.lock() else {
            return false;
        };
        let Some(q) = p.get_mut(&t.ip) else {
            return false;
        };
        let ours = q.iter().any(|(i, _, _)| *i == t.id);
        q.retain(|(i, _, _)| *i != t.id);
        ours
    }
}

/// A connection taken in by [`Greeters::admit`].
#[derive(Debug, Clone, Copy)]
pub struct Ticket {
    ip: std::net::IpAddr,
    id: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn tuned_sockets_use_a_congestion_control_that_does_not_pace() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (b, _) = l.accept().unwrap();
        // Untuned, the socket has the kernel's default (BBR on some machines, cubic on others).
        let before = congestion_control(&a).unwrap();
        assert!(!before.is_empty());
        for s in [&a, &b] {
            tune(s).unwrap();
            assert_eq!(congestion_control(s).unwrap(), TCP_CC);
            assert!(s.nodelay().unwrap());
        }
    }
}
