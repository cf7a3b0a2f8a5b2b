//! The shared-memory transport: how ranks of one node move bytes without a socket, as NCCL's
//! SHM transport does.
//!
//! Each rank makes one segment in /dev/shm (`mkstemp`: mode 0600, an unpredictable name),
//! reserves its pages with `fallocate` (so a full /dev/shm fails here, with NCCL's message,
//! not later with a SIGBUS), and maps it. The segment holds this rank's doorbell and one
//! inbound FIFO per local partner. Partners map it, say so over their TCP connection, and the
//! owner unlinks it at once: from then on no name is left in /dev/shm, whatever kills the job.
//!
//! A FIFO is a single-producer, single-consumer byte ring: `head` (bytes written, owned by the
//! sender) and `tail` (bytes consumed, owned by the receiver) are monotonic counters on cache
//! lines of their own, the data area a power of two. A sender copies in as much as fits; a
//! receiver copies out, or reduces straight from the ring into its buffer. Nothing else is
//! shared, so no lock is needed: release stores of a counter publish the bytes before it.
//!
//! Waiting is spin-then-sleep: the engine spins while it has a core, then sleeps on its own
//! doorbell (a futex word) until a partner rings it, which every push and every pop does. The
//! doorbell is an event count: the sleeper passes the count it saw before looking, so a ring
//! between its look and its sleep is never lost.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

/// Bytes between the counters: two cache lines, so the adjacent-line prefetcher does not pull
/// the other side's counter along with this one.
const LINE: usize = 128;

/// Where segments live and how their names start (`lab cleanup` looks for these).
pub const DIR: &str = "/dev/shm";
pub const NAME_PREFIX: &str = "ringlab-shm-";

/// Where segments go instead of /dev/shm (the emulated cluster's stand-in for a node's own
/// /dev/shm), and the most bytes they may take there (the size of that node's tmpfs).
pub const DIR_ENV: &str = "RINGLAB_SHM_DIR";
pub const LIMIT_ENV: &str = "RINGLAB_SHM_LIMIT";

/// The folder segments are made in: `RINGLAB_SHM_DIR`, or /dev/shm.
pub fn dir() -> PathBuf {
    std::env::var_os(DIR_ENV)
        .filter(|d| !d.is_empty())
        .map_or_else(|| PathBuf::from(DIR), PathBuf::from)
}

/// The default FIFO size per direction and partner: NCCL's default buffer (NCCL_BUFFSIZE,
/// 4 MiB for its Simple protocol). It is also what a rank reserves in /dev/shm per partner,
/// which is what a container's small /dev/shm runs out of.
pub const DEFAULT_FIFO: usize = 4 << 20;

/// Why `NCCL_BUFFSIZE` gives no FIFO size.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BuffSizeError {
    /// Not a size ([`crate::units::parse_size`]'s words for it).
    #[error("NCCL_BUFFSIZE={value}: {why}")]
    Unreadable { value: String, why: String },
    #[error("NCCL_BUFFSIZE={0}: too large")]
    TooLarge(String),
    #[error("NCCL_BUFFSIZE={0}: at most 1 GiB")]
    OverGiB(String),
}

/// The FIFO size: `NCCL_BUFFSIZE` (NCCL's per-connection buffer, a size like 4M) rounded up
/// to a power of two, at least 64 KiB; or [`DEFAULT_FIFO`]. A bad value is an error naming it.
pub fn fifo_size() -> Result<usize, BuffSizeError> {
    match std::env::var("NCCL_BUFFSIZE") {
        Ok(v) if !v.trim().is_empty() => {
            let n = crate::units::parse_size(&v).map_err(|why| BuffSizeError::Unreadable {
                value: v.clone(),
                why,
            })?;
            let n = usize::try_from(n).map_err(|_| BuffSizeError::TooLarge(v.clone()))?;
            if n > 1 << 30 {
                return Err(BuffSizeError::OverGiB(v));
            }
            Ok(n.max(64 << 10).next_power_of_two())
        }
        _ => Ok(DEFAULT_FIFO),
    }
}

/// The bytes of a segment with `slots` inbound FIFOs of `fifo` bytes each.
pub fn segment_len(slots: usize, fifo: usize) -> usize {
    2 * LINE + slots * (2 * LINE + fifo)
}

#[derive(Debug, thiserror::Error)]
pub enum ShmError {
    /// NCCL: `Error: failed to create shared memory file …`
    #[error("Error: failed to create shared memory file {path}, error: {err}")]
    Create { path: String, err: io::Error },
    /// NCCL: `Error: failed to extend /dev/shm/nccl-XXXXXX to N bytes, error: … (28)`
    #[error("Error: failed to extend {path} to {len} bytes, error: {err}")]
    Extend {
        path: String,
        len: usize,
        err: io::Error,
    },
    #[error("Error: could not map {path} size {len}, error: {err}")]
    Map {
        path: String,
        len: usize,
        err: io::Error,
    },
    /// A descriptor a partner handed over that is not what a segment must be.
    #[error("refusing to map {path}: {why}")]
    Refused {
        path: String,
        why: super::fdpass::Unfit,
    },
}

impl ShmError {
    /// The errno behind it (28 is ENOSPC: /dev/shm is full).
    pub fn errno(&self) -> Option<i32> {
        match self {
            Self::Create { err, .. } | Self::Extend { err, .. } | Self::Map { err, .. } => {
                err.raw_os_error()
            }
            Self::Refused { .. } => None,
        }
    }
}

/// A mapped segment. The creator unlinks its name once every partner has mapped it, or on
/// drop, whichever comes first.
pub struct Segment {
    map: Mapping,
    path: PathBuf,
    linked: bool,
    /// The creator's descriptor, which it hands its partners ([`super::fdpass`]).
    fd: Option<std::os::fd::OwnedFd>,
}

/// A shared mapping of a file (read-write, or read-only), unmapped when dropped: the one
/// owner of ringlab's `mmap`/`munmap` (segments here, single-copy regions in [`super::p2p`]).
pub struct Mapping {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain memory; all shared access goes through atomics or the FIFO
// protocol, which gives each byte one writer at a time.
unsafe impl Send for Mapping {}
// SAFETY: as above; `&Mapping` hands out only shared views.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Map `len` bytes (at least 1) of `fd` shared, writable or read-only. `populate`
    /// (MAP_POPULATE) maps every page now, at init, not by a fault the first time a slice passes
    /// over it (a 4 MiB FIFO fed 32 KiB per call would fault through ~128 timed calls).
    pub fn new(fd: BorrowedFd<'_>, len: usize, writable: bool, populate: bool) -> io::Result<Self> {
        let len = len.max(1);
        let prot = if writable {
            libc::PROT_READ | libc::PROT_WRITE
        } else {
            libc::PROT_READ
        };
        let flags = libc::MAP_SHARED | if populate { libc::MAP_POPULATE } else { 0 };
        // SAFETY: a fresh shared mapping of an open file at an address the kernel picks; no
        // existing memory is affected.
        let p = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, flags, fd.as_raw_fd(), 0) };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Self { ptr: p.cast(), len })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The address `at` bytes in (no bounds check: callers check before they dereference).
    pub fn at(&self, at: usize) -> *mut u8 {
        self.ptr.wrapping_add(at)
    }

    /// The mapped bytes. Others (a partner, this rank's own writer) may change them as the
    /// protocol allows; the views are read as the protocol says they are settled.
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: a live mapping of `len` bytes, borrowed no longer than `self`.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    /// The mapped bytes, writable.
    ///
    /// # Safety
    /// The caller is the only writer of these bytes for the borrow (no other view of them
    /// is read or written meanwhile), and the mapping is writable.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn bytes_mut(&self) -> &mut [u8] {
        // SAFETY: a live mapping of `len` bytes; exclusivity is the caller's promise.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: ptr/len are this mapping's, unmapped once; nothing borrows it past its life
        // (views borrow the Mapping; Bell and Fifo live no longer than their segment).
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// A word in a live segment mapping (a FIFO counter, a doorbell word): the one place such a
/// pointer is dereferenced.
struct Word<T>(*const T);

impl<T> Clone for Word<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Word<T> {}

impl<T> Word<T> {
    /// `at` bytes into `map`: in bounds and aligned for T (checked here; mappings are
    /// page-aligned).
    fn new(map: &Mapping, at: usize) -> Option<Self> {
        let fits = at
            .checked_add(std::mem::size_of::<T>())
            .is_some_and(|e| e <= map.len());
        let p = map.at(at).cast::<T>();
        (fits && p.is_aligned()).then_some(Self(p))
    }

    fn get(&self) -> &T {
        // SAFETY: in bounds and aligned (Word::new); the owner keeps the segment mapped as
        // long as the Bell or Fifo holding this word; T is an atomic, so sharing it with other
        // processes is what it is for.
        unsafe { &*self.0 }
    }
}

impl Segment {
    /// Make a new segment of `len` bytes in `dir` (0600, unpredictable name, pages reserved).
    pub fn create(dir: &Path, len: usize) -> Result<Self, ShmError> {
        let template = dir.join(format!("{NAME_PREFIX}{}-XXXXXX", std::process::id()));
        let shown = template.display().to_string();
        // mkstemp fills in the X's and creates the file with mode 0600.
        let (fd, path) = nix::unistd::mkstemp(&template).map_err(|e| ShmError::Create {
            path: shown,
            err: e.into(),
        })?;
        let shown = path.display().to_string();
        if let Err(err) = reserve(dir, &fd, len) {
            let _ = std::fs::remove_file(&path);
            return Err(ShmError::Extend {
                path: shown,
                len,
                err,
            });
        }
        match Mapping::new(fd.as_fd(), len, true, true) {
            Ok(map) => Ok(Self {
                map,
                path,
                linked: true,
                fd: Some(fd),
            }),
            Err(err) => {
                let _ = std::fs::remove_file(&path);
                Err(ShmError::Map {
                    path: shown,
                    len,
                    err,
                })
            }
        }
    }

    /// Map a partner's segment from the descriptor it handed over ([`super::fdpass`]), which
    /// must be a regular file of this process's user of exactly `len` bytes; `shown` names it
    /// in messages. Nothing is opened by name: a name is whatever the sender wants it to be.
    pub fn from_fd(fd: std::os::fd::OwnedFd, len: usize, shown: &str) -> Result<Self, ShmError> {
        super::fdpass::check(&fd, len).map_err(|why| ShmError::Refused {
            path: shown.to_string(),
            why,
        })?;
        let map = Mapping::new(fd.as_fd(), len, true, true).map_err(|err| ShmError::Map {
            path: shown.to_string(),
            len,
            err,
        })?;
        Ok(Self {
            map,
            path: PathBuf::from(shown),
            linked: false,
            fd: None,
        })
    }

    /// The creator's descriptor, to hand to partners (None for a partner's segment).
    pub fn fd(&self) -> Option<BorrowedFd<'_>> {
        self.fd.as_ref().map(AsFd::as_fd)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Every partner has mapped it: remove the name now, so that nothing is left whatever
    /// ends the job. On an emulated node the name stays until the segment is dropped: a tmpfs
    /// counts a mapped file's pages after its name is gone, the emulated budget counts names.
    pub fn release_name(&mut self) {
        if std::env::var_os(LIMIT_ENV).is_none() {
            self.unlink();
        }
    }

    /// Remove the name (the mapping stays). Only the creator does this.
    pub fn unlink(&mut self) {
        if self.linked {
            let _ = std::fs::remove_file(&self.path);
            self.linked = false;
        }
    }

    /// This segment's doorbell (the segment is at least 2 * LINE bytes).
    pub fn bell(&self) -> Option<Bell> {
        Some(Bell {
            seq: Word::new(&self.map, 0)?,
            waiters: Word::new(&self.map, LINE)?,
        })
    }

    /// Inbound FIFO `slot` of `fifo` bytes.
    pub fn fifo(&self, slot: usize, fifo: usize) -> Option<Fifo> {
        let at = 2 * LINE + slot * (2 * LINE + fifo);
        if at + 2 * LINE + fifo > self.len() || !fifo.is_power_of_two() {
            return None;
        }
        // LINE-aligned offsets in a page-aligned mapping; the data area checked above.
        Some(Fifo {
            head: Word::new(&self.map, at)?,
            tail: Word::new(&self.map, at + LINE)?,
            ack: Word::new(&self.map, at + LINE + 64)?,
            data: self.map.at(at + 2 * LINE),
            cap: fifo,
        })
    }
}

/// Reserve `len` bytes of the new segment file `fd` in `dir` now: on a full tmpfs this fails
/// with ENOSPC, where a plain ftruncate would succeed and the first touch beyond the space
/// would be a SIGBUS. An emulated node's budget ([`LIMIT_ENV`]) fails the same way when it
/// would be exceeded; it is checked and taken under a lock on the folder, as a tmpfs does it
/// atomically: two ranks must not both see the other's file still empty.
fn reserve(dir: &Path, fd: &OwnedFd, len: usize) -> io::Result<()> {
    let limit = std::env::var(LIMIT_ENV)
        .ok()
        .and_then(|l| l.parse::<u64>().ok());
    let _budget_lock = limit.and_then(|_| lock_dir(dir));
    if limit.is_some_and(|limit| used_bytes(dir) + len as u64 > limit) {
        return Err(io::Error::from_raw_os_error(libc::ENOSPC));
    }
    loop {
        match nix::fcntl::posix_fallocate(fd, 0, len as libc::off_t) {
            Err(nix::errno::Errno::EINTR) => {}
            other => return Ok(other?),
        }
    }
}

/// An exclusive lock on the folder `dir` (released when dropped); None where it cannot be had.
fn lock_dir(dir: &Path) -> Option<std::fs::File> {
    let f = std::fs::File::open(dir).ok()?;
    // flock(LOCK_EX): blocks until the lock is ours.
    loop {
        match f.lock() {
            Ok(()) => return Some(f),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
}

/// Bytes the files in `dir` take (for an emulated node's /dev/shm budget).
fn used_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

impl Drop for Segment {
    fn drop(&mut self) {
        self.unlink();
    }
}

/// A rank's doorbell: an event count, and a count of sleepers. A partner that has pushed or
/// popped looks at the sleepers and, only if there is one, bumps the count and wakes it; so a
/// busy pair never writes each other's doorbell. The sleeper arms first (says it may sleep),
/// looks for work once more, then sleeps on the count it saw when arming: a fence on both
/// sides means either the partner sees the sleeper or the sleeper sees the partner's bytes.
#[derive(Clone, Copy)]
pub struct Bell {
    seq: Word<AtomicU32>,
    waiters: Word<AtomicU32>,
}

// SAFETY: see Mapping; a Bell is used only while its segment is mapped.
unsafe impl Send for Bell {}

impl Bell {
    fn seq(&self) -> &AtomicU32 {
        self.seq.get()
    }
    fn waiters(&self) -> &AtomicU32 {
        self.waiters.get()
    }

    /// Ring (after a push or pop): wake the owner if it may be asleep.
    pub fn ring(&self) {
        std::sync::atomic::fence(Ordering::SeqCst);
        if self.waiters().load(Ordering::Relaxed) > 0 {
            self.seq().fetch_add(1, Ordering::SeqCst);
            futex(self.seq(), libc::FUTEX_WAKE, i32::MAX as u32, None);
        }
    }

    /// The owner may sleep: from now on partners ring for real. Look for work once more,
    /// then [`Bell::wait`] on what this returns, or [`Bell::disarm`].
    pub fn arm(&self) -> u32 {
        self.waiters().fetch_add(1, Ordering::SeqCst);
        std::sync::atomic::fence(Ordering::SeqCst);
        self.seq().load(Ordering::SeqCst)
    }

    /// Sleep until a partner rings after [`Bell::arm`] returned `seen` (at once if one has),
    /// or `timeout` passes. The bell stays armed.
    pub fn wait(&self, seen: u32, timeout: Duration) {
        futex(self.seq(), libc::FUTEX_WAIT, seen, Some(timeout));
    }

    /// Back to work: partners stop ringing for real.
    pub fn disarm(&self) {
        self.waiters().fetch_sub(1, Ordering::SeqCst);
    }
}

fn futex(word: &AtomicU32, op: i32, val: u32, timeout: Option<Duration>) {
    let ts = timeout.map(|t| libc::timespec {
        tv_sec: t.as_secs() as libc::time_t,
        tv_nsec: t.subsec_nanos() as libc::c_long,
    });
    let ts_ptr = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: word is a live 4-byte aligned atomic in a shared mapping (not FUTEX_PRIVATE:
    // the waker is another process); ts_ptr is null or points at a live timespec.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            op,
            val,
            ts_ptr,
            std::ptr::null::<u32>(),
            0u32,
        );
    }
}

/// One direction of one pair: a byte FIFO in the receiver's segment.
pub struct Fifo {
    head: Word<AtomicU64>,
    tail: Word<AtomicU64>,
    /// Single-copy bytes the receiver has read straight out of the sender's memory (on the
    /// receiver's line, beside `tail`): how the sender learns its buffer may change again.
    ack: Word<AtomicU64>,
    data: *mut u8,
    cap: usize,
}

// SAFETY: see Segment; the owner keeps the segment alive as long as its FIFOs.
unsafe impl Send for Fifo {}

impl Fifo {
    fn head(&self) -> &AtomicU64 {
        self.head.get()
    }
    fn tail(&self) -> &AtomicU64 {
        self.tail.get()
    }
    fn ack_word(&self) -> &AtomicU64 {
        self.ack.get()
    }

    /// Sender: all of `src` or nothing (a descriptor is never split).
    pub fn push_whole(&self, src: &[u8]) -> bool {
        let free = self.cap - self.pending();
        src.len() <= free && self.push(src) == src.len()
    }

    /// Receiver: `n` more bytes read from the sender's memory.
    pub fn ack(&self, n: usize) {
        self.ack_word().fetch_add(n as u64, Ordering::Release);
    }

    /// Sender: the single-copy bytes read so far (ever, on this FIFO).
    pub fn acked(&self) -> u64 {
        self.ack_word().load(Ordering::Acquire)
    }

    /// Sender: copy in as much of `src` as fits; returns the bytes taken.
    pub fn push(&self, src: &[u8]) -> usize {
        let h = self.head().load(Ordering::Relaxed);
        let t = self.tail().load(Ordering::Acquire);
        let free = self.cap - (h - t) as usize;
        let n = src.len().min(free);
        if n == 0 {
            return 0;
        }
        let at = (h as usize) & (self.cap - 1);
        let first = n.min(self.cap - at);
        // SAFETY: [at, at+first) and [0, n-first) lie in the data area and are free: the
        // receiver reads only below head, and these are at or above it and below tail + cap.
        unsafe {
            std::ptr::copy_nonoverlapping(src.as_ptr(), self.data.add(at), first);
            std::ptr::copy_nonoverlapping(src.as_ptr().add(first), self.data, n - first);
        }
        self.head().store(h + n as u64, Ordering::Release);
        n
    }

    /// Receiver: the bytes waiting, as one or two slices (the second when they wrap), at most
    /// `max` in all.
    pub fn peek(&self, max: usize) -> (&[u8], &[u8]) {
        let t = self.tail().load(Ordering::Relaxed);
        let h = self.head().load(Ordering::Acquire);
        let n = ((h - t) as usize).min(max);
        let at = (t as usize) & (self.cap - 1);
        let first = n.min(self.cap - at);
        // SAFETY: [t, t+n) has been published by the sender (Acquire on head) and is not
        // written again until tail passes it, which only this receiver does.
        unsafe {
            (
                std::slice::from_raw_parts(self.data.add(at), first),
                std::slice::from_raw_parts(self.data, n - first),
            )
        }
    }

    /// Receiver: release `n` bytes taken with [`Fifo::peek`].
    pub fn consume(&self, n: usize) {
        let t = self.tail().load(Ordering::Relaxed);
        self.tail().store(t + n as u64, Ordering::Release);
    }

    /// Receiver: copy out up to `dst.len()` bytes; returns how many.
    pub fn pop_into(&self, dst: &mut [u8]) -> usize {
        let (a, b) = self.peek(dst.len());
        let n = a.len() + b.len();
        dst[..a.len()].copy_from_slice(a);
        dst[a.len()..n].copy_from_slice(b);
        self.consume(n);
        n
    }

    /// Bytes written and not yet consumed.
    pub fn pending(&self) -> usize {
        (self.head().load(Ordering::Acquire) - self.tail().load(Ordering::Acquire)) as usize
    }
}

/// One local partner: where to write to it, where to read from it, how to wake it, and its TCP
/// connection (which carries no bytes of a collective, but closes when it dies).
pub struct Pipe {
    pub tx: Fifo,
    pub rx: Fifo,
    pub peer_bell: Bell,
    pub fd: i32,
    /// Single copy from the partner ([`super::cma`]): its pid, when this rank reads large
    /// messages straight out of its memory.
    pub cma_from: Option<libc::pid_t>,
    /// Single copy to the partner: it reads this rank's large messages where they lie.
    pub cma_to: bool,
}

/// What identifies a node to the transport selection: ranks with the same host and the same
/// /dev/shm use SHM (NCCL: hostHash, then shmDev).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Locality {
    /// NCCL_HOSTID, or the launcher's node name, or hostname + boot id.
    pub host: String,
    /// st_dev of /dev/shm: containers with private /dev/shm mounts differ here.
    pub shm_dev: u64,
    /// SHM allowed here (not NCCL_SHM_DISABLE=1).
    pub shm: bool,
}

/// The environment variable the launcher sets to tell nodes of one machine apart (namespace
/// or emulated nodes): NCCL would see one host, a real cluster has one host per node.
pub const NODE_ENV: &str = "RINGLAB_NODE";

impl Locality {
    /// This process's locality; `shm`: shared memory allowed (see [`disabled_by_env`]).
    pub fn here(shm: bool) -> Self {
        use std::os::unix::fs::MetadataExt;
        let host = match (std::env::var("NCCL_HOSTID"), std::env::var(NODE_ENV)) {
            (Ok(id), _) if !id.is_empty() => id,
            (_, Ok(node)) if !node.is_empty() => {
                format!("{}/node{node}", crate::comm::emu::log::hostname())
            }
            _ => {
                let boot =
                    std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap_or_default();
                format!("{}{}", crate::comm::emu::log::hostname(), boot.trim())
            }
        };
        let shm_dev = std::fs::metadata(dir()).map(|m| m.dev()).unwrap_or(0);
        Self { host, shm_dev, shm }
    }

    /// Both ends must allow it and share a host and a /dev/shm.
    pub fn shm_with(&self, other: &Self) -> bool {
        self.shm && other.shm && self.host == other.host && self.shm_dev == other.shm_dev
    }
}

/// NCCL_SHM_DISABLE=1: every partner goes over the network, even on this node.
pub fn disabled_by_env() -> bool {
    std::env::var("NCCL_SHM_DISABLE").is_ok_and(|v| v.trim() == "1")
}

/// Segments this user's ranks left behind whose creating process is gone (a segment normally
/// lives only until every partner has mapped it). Returns what was removed.
pub fn remove_orphans(dir: &Path) -> Vec<String> {
    use std::os::unix::fs::MetadataExt;
    let me = nix::unistd::geteuid().as_raw();
    let mut removed = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return removed;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix(NAME_PREFIX) else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        let path = e.path();
        let mine = std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_file() && m.uid() == me);
        let alive = Path::new(&format!("/proc/{pid}")).exists();
        if mine && !alive && std::fs::remove_file(&path).is_ok() {
            removed.push(format!("shared-memory segment {}", path.display()));
        }
    }
    removed
}

/// Remove the segments process `pid` made in `dir` (the launcher calls it for a rank it has
/// reaped: a rank killed between making a segment and its partners mapping it leaves the
/// name). Returns what was removed.
pub fn remove_of(dir: &Path, pid: u32) -> Vec<String> {
    let prefix = format!("{NAME_PREFIX}{pid}-");
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .filter(|e| std::fs::remove_file(e.path()).is_ok())
        .map(|e| format!("shared-memory segment {}", e.path().display()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A folder of the test's own, removed when the test ends.
    fn tmp() -> tempfile::TempDir {
        tempfile::Builder::new()
            .prefix("ringlab-shm-test-")
            .tempdir()
            .expect("a temporary folder")
    }

    #[test]
    fn a_segment_is_private_unpredictable_and_unlinked_on_drop() {
        use std::os::unix::fs::PermissionsExt;
        let held = tmp();
        let dir = held.path();
        let a = Segment::create(dir, segment_len(1, 4096)).expect("create");
        let b = Segment::create(dir, segment_len(1, 4096)).expect("create");
        assert_ne!(a.path(), b.path());
        let mode = std::fs::metadata(a.path())
            .expect("stat")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let name = a
            .path()
            .file_name()
            .expect("name")
            .to_string_lossy()
            .into_owned();
        assert!(name.starts_with(NAME_PREFIX), "{name}");
        let p = a.path().to_path_buf();
        drop(a);
        assert!(!p.exists());
        drop(b);
    }

    #[test]
    fn bytes_go_through_a_wrapping_fifo_in_order() {
        let held = tmp();
        let dir = held.path();
        let mut mine = Segment::create(dir, segment_len(1, 65536)).expect("create");
        let fd = mine
            .fd()
            .expect("the creator holds its descriptor")
            .try_clone_to_owned()
            .expect("dup");
        let theirs = Segment::from_fd(fd, mine.len(), "the test's segment").expect("map");
        mine.unlink();
        let tx = theirs.fifo(0, 65536).expect("fifo");
        let rx = mine.fifo(0, 65536).expect("fifo");
        let data: Vec<u8> = (0..1_000_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let mut out = vec![0u8; data.len()];
        let (mut sent, mut got) = (0, 0);
        let mut k = 0usize;
        while got < data.len() {
            // Odd sizes, so the ring wraps at every offset.
            let take = [1, 4093, 65536, 333, 70000][k % 5];
            k += 1;
            sent += tx.push(&data[sent..(sent + take).min(data.len())]);
            let want = [17, 65536, 999][k % 3];
            let end = (got + want).min(out.len());
            got += rx.pop_into(&mut out[got..end]);
            assert!(tx.push(&[]) == 0);
        }
        assert_eq!(out, data);
        assert_eq!(rx.pending(), 0);
    }

    #[test]
    fn a_full_tmpfs_fails_with_nccls_message() {
        let e = ShmError::Extend {
            path: "/dev/shm/ringlab-shm-1-abcdef".into(),
            len: 4096,
            err: io::Error::from_raw_os_error(libc::ENOSPC),
        };
        let s = e.to_string();
        assert!(
            s.starts_with("Error: failed to extend /dev/shm/ringlab-shm-1-abcdef to 4096 bytes"),
            "{s}"
        );
        assert!(s.contains("No space left on device"), "{s}");
        assert_eq!(e.errno(), Some(libc::ENOSPC));
    }

    #[test]
    fn orphans_of_dead_processes_are_removed_and_live_ones_kept() {
        let held = tmp();
        let dir = held.path();
        let live = Segment::create(dir, 4096).expect("create");
        // A name as a rank that died would have left it (pid 0 has no /proc entry... use an
        // impossible pid).
        let dead = dir.join(format!("{NAME_PREFIX}4194305-abcdef"));
        std::fs::write(&dead, b"x").expect("write");
        let removed = remove_orphans(dir);
        assert!(!dead.exists(), "{removed:?}");
        assert!(live.path().exists());
        assert_eq!(removed.len(), 1, "{removed:?}");
    }

    #[test]
    fn a_reaped_ranks_segments_are_removed_and_no_one_elses() {
        let held = tmp();
        let dir = held.path();
        let of = |pid: &str, tail: &str| dir.join(format!("{NAME_PREFIX}{pid}-{tail}"));
        let gone = [of("4194306", "aaaaaa"), of("4194306", "bbbbbb")];
        let other = of("41943060", "cccccc");
        for p in gone.iter().chain([&other]) {
            std::fs::write(p, b"x").expect("write");
        }
        let removed = remove_of(dir, 4194306);
        assert_eq!(removed.len(), 2, "{removed:?}");
        assert!(gone.iter().all(|p| !p.exists()), "{removed:?}");
        assert!(
            other.exists(),
            "a pid with the same leading digits is someone else"
        );
        let _ = std::fs::remove_file(other);
    }

    #[test]
    fn locality_needs_the_same_host_and_shm_and_both_willing() {
        let a = Locality {
            host: "h".into(),
            shm_dev: 1,
            shm: true,
        };
        assert!(a.shm_with(&a.clone()));
        assert!(!a.shm_with(&Locality {
            host: "g".into(),
            ..a.clone()
        }));
        assert!(!a.shm_with(&Locality {
            shm_dev: 2,
            ..a.clone()
        }));
        assert!(!a.shm_with(&Locality {
            shm: false,
            ..a.clone()
        }));
    }
}
