//! The rendezvous store: a small key/value service over TCP, hosted by the launcher (like
//! torchrun's TCPStore). Ranks publish their listening addresses and read their peers'.
//! Every connection must open with this job's hello; strangers are dropped and logged.

use std::collections::HashMap;
use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::comm::cpu::net::connect_retry;
use crate::comm::cpu::wire::{Hello, Role, Token, WireError, read_frame, write_frame};
use crate::comm::emu::log;

#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "lowercase")]
enum Request {
    Set { key: String, value: String },
    Get { key: String, timeout_ms: u64 },
    Add { key: String, delta: i64 },
}

#[derive(Debug, Serialize, Deserialize)]
struct Reply {
    ok: bool,
    #[serde(default)]
    value: Option<String>,
    #[serde(default)]
    error: Option<String>,
}

#[derive(Default)]
struct Shared {
    map: Mutex<HashMap<String, String>>,
    changed: Condvar,
}

/// A running store; dropping it stops accepting.
pub struct StoreServer {
    addr: SocketAddr,
    listener: Arc<TcpListener>,
    shared: Arc<Shared>,
    stop: Arc<AtomicBool>,
    /// Connections refused for a bad hello (wrong token, version, garbage).
    pub rejected: Arc<std::sync::atomic::AtomicUsize>,
}

impl StoreServer {
    pub fn start(bind: SocketAddr, token: Token) -> io::Result<Self> {
        Self::serve(Arc::new(TcpListener::bind(bind)?), token)
    }

    /// Serve on a listener the caller already bound.
    pub fn serve(listener: Arc<TcpListener>, token: Token) -> io::Result<Self> {
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let rejected = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let shared = Arc::new(Shared::default());
        let (stop2, rejected2) = (stop.clone(), rejected.clone());
        let (listener2, shared2) = (listener.clone(), shared.clone());
        std::thread::Builder::new()
            .name("store".into())
            .spawn(move || {
                let greeters = Arc::new(crate::comm::cpu::net::Greeters::new(PENDING_PER_ADDRESS));
                let active = Arc::new(std::sync::atomic::AtomicUsize::new(0));
                for conn in listener2.incoming() {
                    if stop2.load(Ordering::Relaxed) {
                        break;
                    }
                    let Ok(conn) = conn else { continue };
                    let peer = conn
                        .peer_addr()
                        .map_or_else(|_| "?".into(), |a| a.to_string());
                    // Bounded: a flood of strangers cannot take a thread each.
                    if active.load(Ordering::Relaxed) >= MAX_CONNECTIONS {
                        rejected2.fetch_add(1, Ordering::Relaxed);
                        log::warn(&format!(
                            "store: dropped connection from {peer}: {MAX_CONNECTIONS} connections already open"
                        ));
                        continue;
                    }
                    let ticket = match greeters.admit(&conn) {
                        Ok(t) => t,
                        Err(e) => {
                            log::warn(&format!("store: dropped connection from {peer}: {e}"));
                            continue;
                        }
                    };
                    active.fetch_add(1, Ordering::Relaxed);
                    let (shared, rejected) = (shared2.clone(), rejected2.clone());
                    let (greeters2, active2) = (greeters.clone(), active.clone());
                    let greeted = move || {
                        greeters2.greeted(ticket);
                    };
                    let who = peer.clone();
                    let spawned = std::thread::Builder::new()
                        .name("store-conn".into())
                        .spawn(move || {
                            let peer = who;
                            if let Err(e) = serve(conn, &token, &shared, greeted) {
                                if matches!(
                                    e,
                                    WireError::BadMagic(_)
                                        | WireError::BadVersion { .. }
                                        | WireError::BadToken
                                        | WireError::BadRole(_)
                                        | WireError::FrameTooLarge(_)
                                ) {
                                    rejected.fetch_add(1, Ordering::Relaxed);
                                }
                                if !matches!(&e, WireError::Io(io) if io.kind() == io::ErrorKind::UnexpectedEof)
                                {
                                    log::warn(&format!(
                                        "store: dropped connection from {peer}: {e}"
                                    ));
                                }
                            }
                            active2.fetch_sub(1, Ordering::Relaxed);
                        });
                    if spawned.is_err() {
                        greeters.greeted(ticket);
                        active.fetch_sub(1, Ordering::Relaxed);
                        log::warn(&format!("store: dropped connection from {peer}: no thread for it"));
                    }
                }
            })?;
        Ok(Self {
            addr,
            listener,
            shared,
            stop,
            rejected,
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Read a key directly (the launcher inspects what ranks published).
    pub fn peek(&self, key: &str) -> Option<String> {
        self.shared.map.lock().ok()?.get(key).cloned()
    }
}

impl Drop for StoreServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Wake the accept loop (shutdown makes a blocked accept return), wherever it listens.
        let fd = std::os::fd::AsRawFd::as_raw_fd(&*self.listener);
        let _ = nix::sys::socket::shutdown(fd, nix::sys::socket::Shutdown::Both);
    }
}

/// How long a rank waits for a key or a barrier: an hour, i.e. until the launcher's watchdog
/// (seconds) or the user ends a hung job; never the reason a job ends.
pub const PATIENCE: std::time::Duration = std::time::Duration::from_secs(3600);

/// Connections the store serves at once (each has a thread).
pub const MAX_CONNECTIONS: usize = 1024;

/// Connections from one address that may be greeting the store at once; beyond that a newer
/// one closes the longest-silent ([`crate::comm::cpu::net::Greeters`]).
pub const PENDING_PER_ADDRESS: usize = 16;

/// Busy-poll `conn` until it has something to read or `spin` has passed.
fn spin_until_readable(conn: &TcpStream, spin: Duration) {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    use std::os::fd::AsFd;
    let start = Instant::now();
    let mut pfd = [PollFd::new(conn.as_fd(), PollFlags::POLLIN)];
    while start.elapsed() < spin {
        // A zero timeout never blocks; an error ends the spin as readiness does.
        if !matches!(poll(&mut pfd, PollTimeout::ZERO), Ok(0)) {
            return;
        }
        std::hint::spin_loop();
    }
}

fn serve(
    mut conn: TcpStream,
    token: &Token,
    shared: &Shared,
    greeted: impl FnOnce(),
) -> Result<(), WireError> {
    let hello = conn
        .set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(WireError::from)
        .and_then(|()| Hello::read_checked(&mut conn, token));
    greeted();
    let hello = hello?;
    if hello.role != Role::Store {
        return Err(WireError::BadRole(hello.role as u8));
    }
    conn.set_read_timeout(None)?;
    // Replies go out at once (the client waits for each one).
    conn.set_nodelay(true)?;
    loop {
        let frame = match read_frame(&mut conn) {
            Ok(f) => f,
            Err(WireError::Io(e)) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(e) => return Err(e),
        };
        let req: Request =
            serde_json::from_slice(&frame).map_err(|e| WireError::Malformed(e.to_string()))?;
        let reply = handle(req, shared);
        let bytes = serde_json::to_vec(&reply).map_err(|e| WireError::Malformed(e.to_string()))?;
        write_frame(&mut conn, &bytes)?;
    }
}

fn handle(req: Request, shared: &Shared) -> Reply {
    let ok = |value: Option<String>| Reply {
        ok: true,
        value,
        error: None,
    };
    let Ok(mut map) = shared.map.lock() else {
        return Reply {
            ok: false,
            value: None,
            error: Some("store poisoned".into()),
        };
    };
    match req {
        Request::Set { key, value } => {
            map.insert(key, value);
            shared.changed.notify_all();
            ok(None)
        }
        Request::Add { key, delta } => {
            let n = map
                .get(&key)
                .and_then(|v| v.parse::<i64>().ok())
                .unwrap_or(0)
                + delta;
            map.insert(key, n.to_string());
            shared.changed.notify_all();
            ok(Some(n.to_string()))
        }
        Request::Get { key, timeout_ms } => {
            let deadline = Instant::now() + Duration::from_millis(timeout_ms);
            loop {
                if let Some(v) = map.get(&key) {
                    return ok(Some(v.clone()));
                }
                let now = Instant::now();
                if now >= deadline {
                    return Reply {
                        ok: false,
                        value: None,
                        error: Some(format!("timed out waiting for key `{key}`")),
                    };
                }
                match shared.changed.wait_timeout(map, deadline - now) {
                    Ok((m, _)) => map = m,
                    Err(_) => {
                        return Reply {
                            ok: false,
                            value: None,
                            error: Some("store poisoned".into()),
                        };
                    }
                }
            }
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("rendezvous store at {addr}: {source}")]
    Connect { addr: SocketAddr, source: io::Error },
    #[error("rendezvous store: {0}")]
    Wire(#[from] WireError),
    #[error("rendezvous store: {0}")]
    Refused(String),
}

pub struct StoreClient {
    conn: TcpStream,
    /// Busy-poll this long for each reply before sleeping in the kernel (barriers between
    /// timed runs: a rank that sleeps there, and its vCPU, come back slow).
    spin: Duration,
}

impl StoreClient {
    pub fn connect(addr: SocketAddr, token: &Token, rank: u32) -> Result<Self, StoreError> {
        let mut conn = connect_retry(addr, Duration::from_secs(5))
            .map_err(|source| StoreError::Connect { addr, source })?;
        conn.set_nodelay(true).map_err(WireError::from)?;
        use std::io::Write;
        conn.write_all(
            &Hello {
                token: *token,
                role: Role::Store,
                rank,
            }
            .encode(),
        )
        .map_err(WireError::from)?;
        Ok(Self {
            conn,
            spin: Duration::ZERO,
        })
    }

    fn call(&mut self, req: &Request) -> Result<Option<String>, StoreError> {
        let bytes = serde_json::to_vec(req).map_err(|e| WireError::Malformed(e.to_string()))?;
        write_frame(&mut self.conn, &bytes)?;
        if !self.spin.is_zero() {
            spin_until_readable(&self.conn, self.spin);
        }
        let reply: Reply = serde_json::from_slice(&read_frame(&mut self.conn)?)
            .map_err(|e| WireError::Malformed(e.to_string()))?;
        if reply.ok {
            Ok(reply.value)
        } else {
            Err(StoreError::Refused(reply.error.unwrap_or_default()))
        }
    }

    pub fn set(&mut self, key: &str, value: &str) -> Result<(), StoreError> {
        self.call(&Request::Set {
            key: key.into(),
            value: value.into(),
        })
        .map(|_| ())
    }

    /// Wait up to `timeout` for `key`.
    pub fn get(&mut self, key: &str, timeout: Duration) -> Result<String, StoreError> {
        self.call(&Request::Get {
            key: key.into(),
            timeout_ms: timeout.as_millis() as u64,
        })?
        .ok_or_else(|| StoreError::Refused(format!("no value for `{key}`")))
    }

    pub fn add(&mut self, key: &str, delta: i64) -> Result<i64, StoreError> {
        let v = self
            .call(&Request::Add {
                key: key.into(),
                delta,
            })?
            .unwrap_or_default();
        v.parse()
            .map_err(|_| StoreError::Refused(format!("`{key}` is not a counter")))
    }

    /// Every one of `world` ranks arrives before any leaves.
    pub fn barrier(
        &mut self,
        name: &str,
        world: usize,
        timeout: Duration,
    ) -> Result<(), StoreError> {
        let n = self.add(&format!("barrier/{name}/count"), 1)?;
        if n as usize == world {
            self.set(&format!("barrier/{name}/done"), "1")?;
        }
        self.get(&format!("barrier/{name}/done"), timeout)
            .map(|_| ())
    }

    /// [`StoreClient::barrier`], busy-polling up to `spin` for each reply before sleeping:
    /// the barrier right before a timed run, where ranks leave within microseconds of each
    /// other and a sleeping rank would wake slow into the timed loop.
    pub fn barrier_spinning(
        &mut self,
        name: &str,
        world: usize,
        timeout: Duration,
        spin: Duration,
    ) -> Result<(), StoreError> {
        self.spin = spin;
        let r = self.barrier(name, world, timeout);
        self.spin = Duration::ZERO;
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn set_get_add_and_barrier_across_threads() {
        let token = [1u8; 16];
        let server =
            StoreServer::start("127.0.0.1:0".parse().expect("addr"), token).expect("start");
        let addr = server.addr();
        let handles: Vec<_> = (0..3)
            .map(|r| {
                std::thread::spawn(move || {
                    let mut c = StoreClient::connect(addr, &token, r).expect("connect");
                    c.set(&format!("addr/{r}"), &format!("host{r}"))
                        .expect("set");
                    c.barrier("b", 3, Duration::from_secs(5)).expect("barrier");
                    c.get(&format!("addr/{}", (r + 1) % 3), Duration::from_secs(5))
                        .expect("get")
                })
            })
            .collect();
        let got: Vec<String> = handles
            .into_iter()
            .map(|h| h.join().expect("join"))
            .collect();
        assert_eq!(got, vec!["host1", "host2", "host0"]);
    }

    #[test]
    fn a_client_without_the_token_is_dropped() {
        let token = [1u8; 16];
        let server =
            StoreServer::start("127.0.0.1:0".parse().expect("addr"), token).expect("start");
        let mut s = TcpStream::connect(server.addr()).expect("connect");
        s.write_all(
            &Hello {
                token: [2u8; 16],
                role: Role::Store,
                rank: 0,
            }
            .encode(),
        )
        .expect("write");
        let mut buf = [0u8; 1];
        // The server closes the connection instead of answering.
        assert_eq!(s.read(&mut buf).unwrap_or(0), 0);
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(server.rejected.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn get_times_out_with_a_clear_error() {
        let token = [1u8; 16];
        let server =
            StoreServer::start("127.0.0.1:0".parse().expect("addr"), token).expect("start");
        let mut c = StoreClient::connect(server.addr(), &token, 0).expect("connect");
        let e = c
            .get("never", Duration::from_millis(50))
            .expect_err("timeout");
        assert!(
            e.to_string().contains("timed out waiting for key `never`"),
            "{e}"
        );
    }
}
