//! What a child does between fork and exec, in one place: the crate's only `pre_exec`. Code
//! there may only make async-signal-safe calls on memory prepared before the fork (no
//! allocation, no locks); each step here keeps to that, and several may be added to one
//! [`Command`] (they run in order).

use std::ffi::CString;
use std::os::unix::process::CommandExt;
use std::process::Command;

/// The things a child may do between fork and exec: each keeps to async-signal-safe calls on
/// memory prepared before the fork.
enum Step {
    /// prctl(PR_SET_PDEATHSIG, SIGKILL).
    DieWithParent,
    /// setns into each (descriptor, CLONE_NEW* kind), in order.
    Enter(Vec<(i32, libc::c_int)>),
    /// unshare a user and a network namespace, map this user to root in it, bring `lo` up.
    UserNamespace { uid_map: CString, gid_map: CString },
}

/// The only `pre_exec` of the crate: `step` runs in the child after fork.
fn before_exec(cmd: &mut Command, step: Step) {
    // SAFETY: every Step does only async-signal-safe calls (prctl, setns, unshare, open,
    // write, close, socket, ioctl) on data moved into the closure before the fork or on the
    // child's stack; nothing allocates or takes a lock.
    unsafe {
        cmd.pre_exec(move || match &step {
            Step::DieWithParent => {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            }
            Step::Enter(fds) => {
                for &(fd, kind) in fds {
                    if libc::setns(fd, kind) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                Ok(())
            }
            Step::UserNamespace { uid_map, gid_map } => {
                if libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                let write = |path: &[u8], data: &[u8]| -> std::io::Result<()> {
                    let fd = libc::open(path.as_ptr().cast(), libc::O_WRONLY);
                    if fd < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    let n = libc::write(fd, data.as_ptr().cast(), data.len());
                    libc::close(fd);
                    if n < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                };
                // setgroups must be denied before an unprivileged gid_map (absent on old kernels).
                let _ = write(b"/proc/self/setgroups\0", b"deny");
                write(b"/proc/self/uid_map\0", uid_map.as_bytes())?;
                write(b"/proc/self/gid_map\0", gid_map.as_bytes())?;
                // The new network namespace starts with its loopback down; bring it up so that
                // a re-run that ends up emulating (its loopback addresses) can still reach itself.
                let sock = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
                if sock < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // ifreq is plain old data (all zeroes is valid); on the stack, no allocation.
                let mut req: libc::ifreq = std::mem::zeroed();
                req.ifr_name[0] = b'l' as libc::c_char;
                req.ifr_name[1] = b'o' as libc::c_char;
                let up = if libc::ioctl(sock, libc::SIOCGIFFLAGS, &mut req) == 0 {
                    req.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
                    libc::ioctl(sock, libc::SIOCSIFFLAGS, &req)
                } else {
                    -1
                };
                let err = std::io::Error::last_os_error();
                libc::close(sock);
                if up != 0 {
                    return Err(err);
                }
                Ok(())
            }
        });
    }
}

/// The child is killed when the thread that spawned it ends, so that a killed ringlab leaves
/// no rank, holder or lab run behind.
pub fn die_with_parent(cmd: &mut Command) {
    before_exec(cmd, Step::DieWithParent);
}

/// The child enters the namespaces `fds` name (an open `/proc/PID/ns/*` file descriptor and its
/// CLONE_NEW* kind each), in order, before it execs. The caller keeps the files open until the
/// child has been spawned.
pub fn enter_namespaces(cmd: &mut Command, fds: Vec<(i32, libc::c_int)>) {
    if !fds.is_empty() {
        before_exec(cmd, Step::Enter(fds));
    }
}

/// The child unshares a user namespace (where this user, `uid`/`gid`, is root) and a network
/// namespace of its own, with its loopback up, before it execs.
pub fn user_and_net_namespace(
    cmd: &mut Command,
    uid: nix::unistd::Uid,
    gid: nix::unistd::Gid,
) -> Result<(), std::ffi::NulError> {
    // Everything the child writes is made before fork: pre_exec must not allocate.
    let uid_map = CString::new(format!("0 {uid} 1"))?;
    let gid_map = CString::new(format!("0 {gid} 1"))?;
    before_exec(cmd, Step::UserNamespace { uid_map, gid_map });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn a_child_enters_the_namespace_it_is_given() {
        // Our own network namespace: entering it is allowed to anyone and changes nothing, but
        // the setns call really runs (a bad descriptor makes the spawn fail, below).
        let f = std::fs::File::open("/proc/self/ns/net").expect("own netns");
        let mut cmd = Command::new("true");
        die_with_parent(&mut cmd);
        enter_namespaces(&mut cmd, vec![(f.as_raw_fd(), libc::CLONE_NEWNET)]);
        let status = cmd.status().expect("spawn");
        assert!(status.success());
    }

    #[test]
    fn this_file_holds_the_crates_only_pre_exec() {
        fn walk(dir: &std::path::Path, found: &mut Vec<std::path::PathBuf>) {
            for e in std::fs::read_dir(dir).expect("src").flatten() {
                let p = e.path();
                if p.is_dir() {
                    walk(&p, found);
                } else if p.extension().is_some_and(|x| x == "rs")
                    && std::fs::read_to_string(&p).is_ok_and(|t| t.contains(".pre_exec("))
                {
                    found.push(p);
                }
            }
        }
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut found = Vec::new();
        walk(&src, &mut found);
        assert_eq!(found, vec![src.join("lab/fork.rs")]);
    }

    #[test]
    fn a_namespace_that_cannot_be_entered_fails_the_spawn() {
        let mut cmd = Command::new("true");
        enter_namespaces(&mut cmd, vec![(-1, libc::CLONE_NEWNET)]);
        let err = cmd.status().expect_err("setns(-1) must fail");
        assert_eq!(err.raw_os_error(), Some(libc::EBADF), "{err}");
    }
}
