//! How ranks of one node hand each other memory: as open file descriptors over a Unix-domain
//! socket (`SCM_RIGHTS`), never as names. A name sent over TCP is whatever the sender wants it
//! to be (any file, a link to one); a descriptor is a file the sender itself had open, and the
//! kernel says who the sender is (`SO_PEERCRED`), not a frame.
//!
//! Each rank that may share memory with a partner listens on a Unix socket of its own in the
//! abstract namespace (no file anywhere; an unpredictable name, told to partners in the
//! transport hello). Of each pair of ranks of a node, the lower dials the higher and says its
//! rank; both ends then ask the kernel who is at the other end, and refuse a process of
//! another user. The connection stays up for the communicator's life: the shared-memory
//! segment goes over it at setup, the P2P buffers each time they are registered.
//!
//! A received descriptor is checked before it is mapped ([`check`]): a regular file (a
//! /dev/shm file or a memory file), owned by this process's effective user, of exactly the
//! size the protocol says.

use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};

use nix::errno::Errno;
use nix::sys::socket::{self, ControlMessage, ControlMessageOwned, MsgFlags};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener, UnixStream};
use std::time::{Duration, Instant};

/// What the dialing rank says first: this, then its rank (u32, little-endian).
const INTRO: &[u8; 8] = b"ringlab1";

/// How long one accepted connection may take to say who it is.
const INTRO_WAIT: Duration = Duration::from_secs(5);

/// The kernel's word on the process at the other end of a Unix socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cred {
    pub pid: libc::pid_t,
    pub uid: libc::uid_t,
}

/// Who is at the other end of `s` (for a dialed socket: who listens; for an accepted one:
/// who dialed), as the kernel recorded it.
pub fn peer_cred(s: &impl AsFd) -> io::Result<Cred> {
    let c = socket::getsockopt(s, socket::sockopt::PeerCredentials)?;
    Ok(Cred {
        pid: c.pid(),
        uid: c.uid(),
    })
}

pub use crate::private::euid;

/// A rank's listening socket, and the name partners dial.
pub struct Listener {
    sock: UnixListener,
    name: String,
}

impl Listener {
    /// Listen on a fresh, unpredictable abstract name.
    pub fn bind() -> io::Result<Self> {
        let mut last = io::Error::from(io::ErrorKind::AddrInUse);
        for _ in 0..8 {
            let mut r = [0u8; 12];
            getrandom::fill(&mut r).map_err(|e| io::Error::other(e.to_string()))?;
            let hex: String = r.iter().map(|b| format!("{b:02x}")).collect();
            let name = format!("ringlab-{}-{hex}", std::process::id());
            let addr = SocketAddr::from_abstract_name(name.as_bytes())?;
            match UnixListener::bind_addr(&addr) {
                Ok(sock) => {
                    sock.set_nonblocking(true)?;
                    return Ok(Self { sock, name });
                }
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    pub fn name(&self) -> &str {
        &self.name
    }
}

/// Why pairing up failed: for the caller to put in its error.
fn refuse(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::PermissionDenied, what)
}

/// Connect this rank (`rank`) with each partner of `partners` (rank, the name it listens on):
/// dial those above, accept those below (a dialer of another user is dropped, said at WARN,
/// and waited past), all by `deadline`. Returns per partner the stream and the kernel's word
/// on its process; a partner listening as another user is an error naming it.
pub fn pair_up(
    rank: usize,
    listener: &Listener,
    partners: &[(usize, String)],
    deadline: Instant,
) -> io::Result<Vec<(usize, UnixStream, Cred)>> {
    let me = euid();
    let mut out = Vec::with_capacity(partners.len());
    for (p, name) in partners.iter().filter(|(p, _)| *p > rank) {
        let addr = SocketAddr::from_abstract_name(name.as_bytes())?;
        let mut s = UnixStream::connect_addr(&addr).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("dialing rank {p}'s local socket @{name}: {e}"),
            )
        })?;
        let cred = peer_cred(&s)?;
        if cred.uid != me {
            return Err(refuse(format!(
                "rank {p}'s local socket @{name} belongs to process {} of uid {}, not to this \
                 rank's user (uid {me}): refusing to share memory with it",
                cred.pid, cred.uid
            )));
        }
        let mut intro = INTRO.to_vec();
        intro.extend_from_slice(&u32::try_from(rank).unwrap_or(u32::MAX).to_le_bytes());
        s.write_all(&intro)?;
        out.push((*p, s, cred));
    }
    let mut below: Vec<usize> = partners
        .iter()
        .map(|(p, _)| *p)
        .filter(|&p| p < rank)
        .collect();
    while !below.is_empty() {
        let s = match listener.sock.accept() {
            Ok((s, _)) => s,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if Instant::now() >= deadline {
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!(
                            "rank(s) {below:?} never dialed this rank's local socket @{}",
                            listener.name
                        ),
                    ));
                }
                std::thread::sleep(Duration::from_millis(2));
                continue;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let cred = peer_cred(&s)?;
        if cred.uid != me {
            crate::comm::emu::log::warn(&format!(
                "dropped a connection to this rank's local socket from process {} of uid {} \
                 (not this rank's user, uid {me})",
                cred.pid, cred.uid
            ));
            continue;
        }
        s.set_nonblocking(false)?;
        s.set_read_timeout(Some(INTRO_WAIT))?;
        let mut intro = [0u8; 12];
        let said = (&s).read_exact(&mut intro);
        s.set_read_timeout(None)?;
        let who = match said {
            Ok(()) if &intro[..8] == INTRO => {
                u32::from_le_bytes([intro[8], intro[9], intro[10], intro[11]]) as usize
            }
            _ => {
                crate::comm::emu::log::warn(&format!(
                    "dropped a connection to this rank's local socket from process {}: it did \
                     not say which rank it is",
                    cred.pid
                ));
                continue;
            }
        };
        let Some(k) = below.iter().position(|&p| p == who) else {
            crate::comm::emu::log::warn(&format!(
                "dropped a connection to this rank's local socket from process {}: it says it \
                 is rank {who}, which is not a local partner still expected",
                cred.pid
            ));
            continue;
        };
        below.swap_remove(k);
        out.push((who, s, cred));
    }
    Ok(out)
}

/// Send `fds` to the other end of `s`, one per message (a byte of payload each).
pub fn send_fds(s: &UnixStream, fds: &[RawFd]) -> io::Result<()> {
    for fd in fds {
        let byte = [b'F'];
        let iov = [io::IoSlice::new(&byte)];
        let rights = [ControlMessage::ScmRights(std::slice::from_ref(fd))];
        let sent = loop {
            match socket::sendmsg::<()>(s.as_raw_fd(), &iov, &rights, MsgFlags::MSG_NOSIGNAL, None)
            {
                Err(Errno::EINTR) => {}
                other => break other?,
            }
        };
        if sent != 1 {
            return Err(io::ErrorKind::WriteZero.into());
        }
    }
    Ok(())
}

/// Receive one descriptor from the other end of `s` (sent by [`send_fds`]), waiting at most
/// `wait`. A message without exactly one descriptor is an error (any it carried are closed).
pub fn recv_fd(s: &UnixStream, wait: Duration) -> io::Result<OwnedFd> {
    s.set_read_timeout(Some(wait.max(Duration::from_millis(1))))?;
    let mut byte = [0u8; 1];
    let mut iov = [io::IoSliceMut::new(&mut byte)];
    // Room for more than one, so that extra descriptors are seen (and closed), not cut off.
    let mut ctl = nix::cmsg_space!([RawFd; 8]);
    let got = loop {
        // MSG_CMSG_CLOEXEC marks received descriptors close-on-exec.
        match socket::recvmsg::<()>(
            s.as_raw_fd(),
            &mut iov,
            Some(&mut ctl),
            MsgFlags::MSG_CMSG_CLOEXEC,
        ) {
            Err(Errno::EINTR) => {}
            other => break other.map(|m| (m.bytes, m.flags, received_fds(&m))),
        }
    };
    let res = s.set_read_timeout(None);
    let (n, flags, got) = got.map_err(|e| match e {
        Errno::EAGAIN | Errno::ETIMEDOUT => io::Error::new(
            io::ErrorKind::TimedOut,
            format!("no descriptor within {} s", wait.as_secs()),
        ),
        e => e.into(),
    })?;
    res?;
    if n == 0 {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the connection closed before a descriptor came",
        ));
    }
    let mut got = got;
    if flags.contains(MsgFlags::MSG_CTRUNC) || got.len() != 1 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("a message with {} descriptors, expected one", got.len()),
        ));
    }
    got.pop()
        .ok_or_else(|| io::Error::from(io::ErrorKind::InvalidData))
}

/// The descriptors a received message carried, each now owned here (closed when dropped). A
/// message whose control data the kernel cut short (MSG_CTRUNC) yields none: nix does not walk
/// it, and what it held is close-on-exec and refused by the caller.
fn received_fds(m: &socket::RecvMsg<'_, '_, ()>) -> Vec<OwnedFd> {
    let Ok(cmsgs) = m.cmsgs() else {
        return Vec::new();
    };
    cmsgs
        .filter_map(|c| match c {
            ControlMessageOwned::ScmRights(fds) => Some(fds),
            _ => None,
        })
        .flatten()
        // SAFETY: each SCM_RIGHTS descriptor is newly open in this process and taken over
        // exactly once, here.
        .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) })
        .collect()
}

/// Why a received descriptor may not be mapped as a partner's memory.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unfit {
    #[error("fstat: {0}")]
    Stat(Errno),
    #[error("not a regular file (file type {0:o})")]
    NotRegular(u32),
    #[error("a file owned by uid {owner}, not this rank's user (uid {me})")]
    Owner { owner: u32, me: u32 },
    #[error("{size} bytes, expected exactly {want}")]
    Size { size: i64, want: usize },
}

/// Whether a received descriptor may be mapped as `len` bytes of a partner's memory: a
/// regular file (a /dev/shm file or a memory file), owned by this process's effective user,
/// exactly `len` bytes. The error says what it is instead.
pub fn check(fd: &impl AsFd, len: usize) -> Result<(), Unfit> {
    let st = nix::sys::stat::fstat(fd).map_err(Unfit::Stat)?;
    let me = euid();
    let kind = st.st_mode & libc::S_IFMT;
    if kind != libc::S_IFREG {
        return Err(Unfit::NotRegular(kind));
    }
    if st.st_uid != me {
        return Err(Unfit::Owner {
            owner: st.st_uid,
            me,
        });
    }
    if u64::try_from(st.st_size).ok() != Some(len as u64) {
        return Err(Unfit::Size {
            size: st.st_size,
            want: len,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    fn file_of(len: u64) -> (tempfile::NamedTempFile, std::fs::File) {
        let t = tempfile::NamedTempFile::new().expect("temp file");
        t.as_file().set_len(len).expect("set_len");
        let f = t.reopen().expect("reopen");
        (t, f)
    }

    #[test]
    fn a_descriptor_crosses_a_unix_socket_and_is_checked() {
        let (a, b) = UnixStream::pair().expect("pair");
        assert_eq!(peer_cred(&a).expect("cred").pid, std::process::id() as i32);
        let (_t, f) = file_of(4096);
        send_fds(&a, &[f.as_raw_fd()]).expect("send");
        let got = recv_fd(&b, Duration::from_secs(5)).expect("recv");
        assert_eq!(check(&got, 4096), Ok(()));
        let e = check(&got, 4097).expect_err("wrong size").to_string();
        assert!(e.contains("4096 bytes, expected exactly 4097"), "{e}");
        // A pipe is not memory.
        let (r, _w) = nix::unistd::pipe().expect("pipe");
        let e = check(&r.as_fd(), 0).expect_err("a pipe").to_string();
        assert!(e.contains("not a regular file"), "{e}");
        // A message without a descriptor is refused, not taken for one.
        (&a).write_all(b"x").expect("write");
        let e = recv_fd(&b, Duration::from_secs(5)).expect_err("no fd");
        assert!(e.to_string().contains("0 descriptors"), "{e}");
        // Nothing sent: a timeout that says so.
        let e = recv_fd(&b, Duration::from_millis(50)).expect_err("nothing");
        assert_eq!(e.kind(), io::ErrorKind::TimedOut, "{e}");
    }

    /// As root: a file of another uid is refused, whatever its size.
    #[test]
    fn a_file_of_another_user_is_refused() {
        if euid() != 0 {
            eprintln!("skipped: needs root to chown a file to another uid");
            return;
        }
        let (t, f) = file_of(4096);
        std::os::unix::fs::chown(t.path(), Some(65534), Some(65534)).expect("chown");
        let e = check(&f, 4096)
            .expect_err("another user's file")
            .to_string();
        assert!(e.contains("owned by uid 65534"), "{e}");
    }

    #[test]
    fn ranks_pair_up_by_kernel_credentials() {
        let hi = Listener::bind().expect("bind");
        let lo = Listener::bind().expect("bind");
        let name = hi.name().to_string();
        let lo_name = lo.name().to_string();
        let deadline = Instant::now() + Duration::from_secs(10);
        let t = std::thread::spawn(move || pair_up(1, &hi, &[(0, lo_name)], deadline));
        let mine = pair_up(0, &lo, &[(1, name)], deadline).expect("rank 0");
        let theirs = t.join().expect("thread").expect("rank 1");
        assert_eq!(mine.len(), 1);
        assert_eq!(theirs.len(), 1);
        assert_eq!(mine[0].0, 1);
        assert_eq!(theirs[0].0, 0);
        assert_eq!(theirs[0].2.pid, std::process::id() as i32);
        // A rank that never dials is named when the deadline passes.
        let alone = Listener::bind().expect("bind");
        let e = pair_up(
            1,
            &alone,
            &[(0, "unused".into())],
            Instant::now() + Duration::from_millis(50),
        )
        .expect_err("nobody dials");
        assert!(e.to_string().contains("[0] never dialed"), "{e}");
    }

    /// A python3 of uid 65534 running `script`, once it has printed its first line.
    fn other_user(script: &str) -> Option<std::process::Child> {
        use std::io::BufRead;
        use std::os::unix::process::CommandExt;
        let py = std::path::Path::new("/usr/bin/python3");
        if euid() != 0 || !py.exists() {
            eprintln!("skipped: needs root and /usr/bin/python3 to act as another user");
            return None;
        }
        let mut child = std::process::Command::new(py)
            .env_clear()
            .arg("-c")
            .arg(script)
            .uid(65534)
            .gid(65534)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("python3 as uid 65534");
        let out = child.stdout.take().expect("stdout");
        let mut line = String::new();
        std::io::BufReader::new(out)
            .read_line(&mut line)
            .expect("its first line");
        assert_eq!(line.trim(), "ready", "python3 as uid 65534 said {line:?}");
        Some(child)
    }

    /// A dialer of another user is dropped (the rank it claims is still awaited), and a
    /// listener of another user is refused before anything is sent to it.
    #[test]
    fn a_process_of_another_user_is_refused_at_either_end() {
        let l = Listener::bind().expect("bind");
        let dial = format!(
            "import socket,struct,sys,time\n\
             s=socket.socket(socket.AF_UNIX)\n\
             s.connect('\\0{}')\n\
             s.sendall(b'ringlab1'+struct.pack('<I',0))\n\
             print('ready',flush=True)\n\
             time.sleep(5)\n",
            l.name()
        );
        let Some(mut child) = other_user(&dial) else {
            return;
        };
        let e = pair_up(
            1,
            &l,
            &[(0, "unused".into())],
            Instant::now() + Duration::from_millis(300),
        )
        .expect_err("another user's dialer");
        let _ = child.kill();
        let _ = child.wait();
        assert!(e.to_string().contains("[0] never dialed"), "{e}");

        let name = format!("ringlab-test-{}", std::process::id());
        let listen = format!(
            "import socket,time\n\
             s=socket.socket(socket.AF_UNIX)\n\
             s.bind('\\0{name}')\n\
             s.listen(4)\n\
             print('ready',flush=True)\n\
             time.sleep(5)\n"
        );
        let Some(mut child) = other_user(&listen) else {
            return;
        };
        let mine = Listener::bind().expect("bind");
        let e = pair_up(
            0,
            &mine,
            &[(1, name)],
            Instant::now() + Duration::from_secs(5),
        )
        .expect_err("another user's listener");
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{e}");
        assert!(e.to_string().contains("of uid 65534"), "{e}");
    }
}
