//! Single copy between two processes of one node: Linux cross-memory attach
//! (`process_vm_readv(2)`). The sender does not copy a large message into the shared FIFO;
//! it posts a descriptor there (where the bytes lie in its memory, and how many) and the
//! receiver reads them straight into its own buffer, one copy instead of two. Open MPI's
//! shared-memory transport does the same for large messages (CMA, or XPMEM); NCCL's P2P
//! transport reads the peer's GPU buffer directly (`P2P/direct pointer`, `P2P/IPC`, `read`).
//!
//! Who may read whose memory is the kernel's ptrace rule (PTRACE_MODE_ATTACH_REALCREDS): the
//! same user (real, effective and saved ids alike) on a process that is dumpable, or
//! CAP_SYS_PTRACE; Yama's `ptrace_scope` 1 narrows it to descendants, and container seccomp
//! profiles often refuse the call outright. So nothing is assumed: at setup each rank probes
//! each partner (reads a word of known value from it) and falls back to the FIFO where the
//! kernel says no, with the reason in the log. Another user cannot read or write a rank's
//! buffers through this path; that is tested.

use std::io;

/// Messages from this size up go by single copy (smaller ones through the FIFO, where the
/// descriptor's round trip, posted and acknowledged, costs more than the copy it saves).
/// Measured with `ringlab bench --nproc-per-node 2` (see the README's transport table).
pub const MIN: usize = 1 << 20;

/// The threshold in force: [`MIN`], or `RINGLAB_P2P_MIN` (bytes) to measure another; every
/// rank of a job inherits the same environment, and must use the same value.
pub fn min() -> usize {
    static MIN_NOW: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *MIN_NOW.get_or_init(|| {
        std::env::var("RINGLAB_P2P_MIN")
            .ok()
            .and_then(|v| crate::units::parse_size(&v).ok())
            .map_or(MIN, |v| v as usize)
    })
}

/// A descriptor is posted once this much more of a message is ready (or all of it): the
/// receiver pays one system call per descriptor.
pub const QUANTUM: usize = 64 << 10;

/// The most one descriptor covers: the receiver reads it in one call, while the bytes the
/// sender just wrote are still in cache.
pub const MAX_DESC: usize = 256 << 10;

/// NCCL_P2P_DISABLE=1 turns single copy off, as it turns off NCCL's P2P transport.
pub fn disabled_by_env() -> bool {
    std::env::var("NCCL_P2P_DISABLE").is_ok_and(|v| v.trim() == "1")
}

/// Read `local.len()` bytes at `remote` in process `pid` into `local`, all of them or an
/// error (ESRCH: the process is gone; EPERM: the kernel's ptrace rule says no; EFAULT: not
/// mapped there).
pub fn read(pid: libc::pid_t, local: &mut [u8], remote: usize) -> io::Result<()> {
    use nix::sys::uio::{RemoteIoVec, process_vm_readv};
    let pid = nix::unistd::Pid::from_raw(pid);
    let mut done = 0;
    while done < local.len() {
        let len = local.len() - done;
        let r = [RemoteIoVec {
            base: remote + done,
            len,
        }];
        // The kernel checks the remote range against the other process's mappings (EFAULT)
        // and this process's permission to read them (EPERM).
        match process_vm_readv(pid, &mut [io::IoSliceMut::new(&mut local[done..])], &r) {
            Ok(0) => return Err(io::Error::from(io::ErrorKind::UnexpectedEof)),
            Ok(n) => done += n,
            Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// A word of unpredictable value in this process, for partners to probe.
pub struct Probe {
    pub addr: usize,
    pub value: u64,
}

/// This process's probe word (made once, kept for its life).
pub fn probe() -> &'static Probe {
    static WORD: std::sync::OnceLock<(Box<u64>, u64)> = std::sync::OnceLock::new();
    static PROBE: std::sync::OnceLock<Probe> = std::sync::OnceLock::new();
    PROBE.get_or_init(|| {
        let (word, value) = WORD.get_or_init(|| {
            let mut b = [0u8; 8];
            let v = getrandom::fill(&mut b)
                .map(|()| u64::from_le_bytes(b))
                .unwrap_or(0x5eed_cafe_f00d_0001);
            (Box::new(v), v)
        });
        Probe {
            addr: std::ptr::from_ref::<u64>(word) as usize,
            value: *value,
        }
    })
}

/// Whether this process may read process `pid`'s memory: reads its probe word and compares.
pub fn can_read(pid: libc::pid_t, addr: usize, value: u64) -> Result<(), Unreadable> {
    let mut got = [0u8; 8];
    match read(pid, &mut got, addr) {
        Ok(()) if u64::from_le_bytes(got) == value => Ok(()),
        Ok(()) => Err(Unreadable::WrongWord { pid }),
        Err(source) => Err(Unreadable::Refused { pid, source }),
    }
}

/// Why this process cannot read a partner's memory.
#[derive(Debug, thiserror::Error)]
pub enum Unreadable {
    #[error("process {pid}'s probe word reads back wrong")]
    WrongWord { pid: libc::pid_t },
    #[error("process_vm_readv from process {pid}: {source}")]
    Refused { pid: libc::pid_t, source: io::Error },
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This process reading itself goes through the same kernel path as a partner would.
    #[test]
    fn a_process_reads_its_own_probe_word_and_a_wrong_value_is_caught() {
        let p = probe();
        let me = std::process::id() as libc::pid_t;
        assert!(can_read(me, p.addr, p.value).is_ok());
        assert!(can_read(me, p.addr, p.value ^ 1).is_err());
        let mut out = vec![0u8; 1 << 20];
        let src: Vec<u8> = (0..out.len()).map(|i| (i % 251) as u8).collect();
        read(me, &mut out, src.as_ptr() as usize).expect("read");
        assert_eq!(out, src);
        // An unmapped address is an error, not a crash.
        assert!(read(me, &mut out[..8], 8).is_err());
    }
}
