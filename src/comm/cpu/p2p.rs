//! The P2P transport's two ways to move a large message with one copy, as NCCL's P2P
//! transport maps the peer GPU's buffer (CUDA IPC or cuMem handles) instead of staging it:
//!
//! - **Mapped buffers.** A rank's collective buffers live in an anonymous memory file
//!   (`memfd_create(2)`, no name anywhere, gone with the last process that maps it). It hands
//!   the file's descriptor to its partners on the node over their Unix connection
//!   ([`super::fdpass`]); they map it read-only, and copy or reduce
//!   straight out of it at memcpy speed. A descriptor on the FIFO says which region and
//!   where; the bytes never enter the FIFO.
//! - **Cross-memory attach** ([`super::cma`]) for anything else large (bytes staged aside
//!   for a same-step overwrite, a buffer the caller allocated itself): the receiver reads the
//!   sender's memory with `process_vm_readv(2)`.
//!
//! A handed-over descriptor is mapped only when it is a regular file of this process's user of
//! exactly the announced size. Who may read another process's memory is the kernel's ptrace
//! rule (`process_vm_readv` needs PTRACE_MODE_ATTACH, refused to another user, and to a
//! non-dumpable process's peers without CAP_SYS_PTRACE); the process is the one the kernel
//! names at the other end of the Unix connection, never a pid from a frame. Nothing is
//! assumed: each mapping and each probe is tried at setup, and a refusal falls back (to
//! cross-memory attach, then to the FIFO), said in the log.

use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::Arc;

use super::shm::Mapping;

/// Bytes of one descriptor on the FIFO.
pub const DESC: usize = 24;

/// Where a large message's bytes lie, as the receiver will read them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Desc {
    /// At this address in the sender's memory (cross-memory attach).
    Addr { addr: usize, len: usize },
    /// At this offset in the sender's region `id`, which the receiver has mapped.
    Region { id: u32, off: usize, len: usize },
}

impl Desc {
    pub fn len(self) -> usize {
        match self {
            Desc::Addr { len, .. } | Desc::Region { len, .. } => len,
        }
    }

    pub fn is_empty(self) -> bool {
        self.len() == 0
    }

    /// The same bytes from `k` on.
    pub fn skip(self, k: usize) -> Self {
        match self {
            Desc::Addr { addr, len } => Desc::Addr {
                addr: addr + k,
                len: len - k,
            },
            Desc::Region { id, off, len } => Desc::Region {
                id,
                off: off + k,
                len: len - k,
            },
        }
    }

    pub fn encode(self) -> [u8; DESC] {
        let (kind, id, at, len) = match self {
            Desc::Addr { addr, len } => (1u32, 0u32, addr, len),
            Desc::Region { id, off, len } => (2, id, off, len),
        };
        let mut d = [0u8; DESC];
        d[..4].copy_from_slice(&kind.to_le_bytes());
        d[4..8].copy_from_slice(&id.to_le_bytes());
        d[8..16].copy_from_slice(&(at as u64).to_le_bytes());
        d[16..].copy_from_slice(&(len as u64).to_le_bytes());
        d
    }

    pub fn decode(d: &[u8; DESC]) -> Option<Self> {
        let w4 = |i: usize| u32::from_le_bytes([d[i], d[i + 1], d[i + 2], d[i + 3]]);
        let w8 = |i: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&d[i..i + 8]);
            usize::try_from(u64::from_le_bytes(b)).ok()
        };
        let (at, len) = (w8(8)?, w8(16)?);
        match w4(0) {
            1 => Some(Desc::Addr { addr: at, len }),
            2 => Some(Desc::Region {
                id: w4(4),
                off: at,
                len,
            }),
            _ => None,
        }
    }
}

/// Memory a rank's partners can map: an anonymous memory file, mapped here read-write.
pub struct Region {
    map: Mapping,
    len: usize,
    fd: OwnedFd,
}

impl Region {
    /// `len` bytes (at least one page), zeroed, pages populated.
    pub fn new(len: usize) -> io::Result<Self> {
        use nix::sys::memfd::{MFdFlags, memfd_create};
        let size = len.max(1);
        let fd = memfd_create(c"ringlab-buffer", MFdFlags::MFD_CLOEXEC)?;
        nix::unistd::ftruncate(&fd, size as libc::off_t)?;
        let map = Mapping::new(fd.as_fd(), size, true, true)?;
        Ok(Self { map, len, fd })
    }

    pub fn fd(&self) -> i32 {
        self.fd.as_raw_fd()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The address range this region occupies here.
    pub fn span(&self) -> std::ops::Range<usize> {
        let at = self.map.at(0) as usize;
        at..at + self.len
    }
}

/// A partner's region, mapped here read-only.
pub struct PeerRegion {
    pub id: u32,
    map: Mapping,
    len: usize,
}

impl PeerRegion {
    /// Map a partner's region from the descriptor it handed over ([`super::fdpass`]): a
    /// regular file of this process's user of exactly `len` bytes (a region is at least one
    /// byte), or an error saying what it is instead.
    pub fn from_fd(fd: OwnedFd, len: usize, id: u32) -> io::Result<Self> {
        super::fdpass::check(&fd, len.max(1))
            .map_err(|why| io::Error::new(io::ErrorKind::PermissionDenied, why))?;
        let map = Mapping::new(fd.as_fd(), len, false, false)?;
        Ok(Self { id, map, len })
    }

    /// `len` bytes at `off`, or None when they are not all inside. The sender does not change
    /// these bytes until this rank acknowledges them.
    pub fn get(&self, off: usize, len: usize) -> Option<&[u8]> {
        let end = off.checked_add(len)?;
        self.map.bytes()[..self.len].get(off..end)
    }
}

/// A collective buffer: in a region partners may map, or on the heap where there is no
/// partner to share it with (or no memory file could be made).
pub enum SharedBuf {
    Region(Arc<Region>),
    Heap(super::reduce::AlignedBuf),
}

impl Default for SharedBuf {
    fn default() -> Self {
        SharedBuf::Heap(super::reduce::AlignedBuf::default())
    }
}

impl SharedBuf {
    pub fn bytes(&self) -> &[u8] {
        match self {
            // The communicator holds the other Arc only to keep it mapped (and its address
            // unused) while partners may read it.
            SharedBuf::Region(r) => &r.map.bytes()[..r.len],
            SharedBuf::Heap(b) => b.bytes(),
        }
    }

    pub fn bytes_mut(&mut self) -> &mut [u8] {
        match self {
            SharedBuf::Region(r) => {
                // SAFETY: a writable mapping; this rank writes only through this one handle
                // (the other Arc only keeps it mapped), and partners read only what a
                // descriptor has published, acknowledging before it changes.
                let all = unsafe { r.map.bytes_mut() };
                &mut all[..r.len]
            }
            SharedBuf::Heap(b) => b.bytes_mut(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptors_round_trip_and_skip() {
        for d in [
            Desc::Addr {
                addr: 0x7fff_0000_1000,
                len: 65536,
            },
            Desc::Region {
                id: 3,
                off: 4096,
                len: 262_144,
            },
        ] {
            assert_eq!(Desc::decode(&d.encode()), Some(d));
            assert_eq!(d.skip(1000).len(), d.len() - 1000);
        }
        assert_eq!(Desc::decode(&[0u8; DESC]), None);
    }

    /// A region mapped again through /proc (as a partner maps it) shows what was written,
    /// and an offset outside it is refused.
    #[test]
    fn a_region_is_seen_through_proc_and_bounds_are_checked() {
        let r = Arc::new(Region::new(1 << 16).expect("region"));
        let mut buf = SharedBuf::Region(r.clone());
        buf.bytes_mut()[100..104].copy_from_slice(&[1, 2, 3, 4]);
        // SAFETY: the region's fd is open for the borrow; it is duplicated, not taken.
        let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(r.fd()) }
            .try_clone_to_owned()
            .expect("dup");
        let peer = PeerRegion::from_fd(fd, r.len(), 7).expect("map");
        assert_eq!(peer.get(100, 4), Some(&[1u8, 2, 3, 4][..]));
        assert!(peer.get((1 << 16) - 2, 4).is_none());
        assert!(peer.get(usize::MAX, 2).is_none());
    }
}
