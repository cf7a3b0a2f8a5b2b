//! What a child does between fork and exec, in one place. Code there may only make
//! async-signal-safe calls on memory prepared before the fork (no allocation, no locks); each
//! helper here keeps to that, and several may be added to one [`Command`] (they run in order).

use std::os::unix::process::CommandExt;
use std::process::Command;

/// The child is killed when the thread that spawned it ends, so that a killed ringlab leaves
/// no rank, holder or lab run behind.
pub fn die_with_parent(cmd: &mut Command) {
    // SAFETY: prctl(PR_SET_PDEATHSIG) is async-signal-safe and only sets a flag on the child.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
}

/// The child enters the namespaces `fds` name (an open `/proc/PID/ns/*` file descriptor and its
/// CLONE_NEW* kind each), in order, before it execs. The caller keeps the files open until the
/// child has been spawned.
pub fn enter_namespaces(cmd: &mut Command, fds: Vec<(i32, libc::c_int)>) {
    if fds.is_empty() {
        return;
    }
    // SAFETY: setns is async-signal-safe; `fds` is moved into the closure before the fork and
    // only read after it.
    unsafe {
        cmd.pre_exec(move || {
            for &(fd, kind) in &fds {
                if libc::setns(fd, kind) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
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
    fn a_namespace_that_cannot_be_entered_fails_the_spawn() {
        let mut cmd = Command::new("true");
        enter_namespaces(&mut cmd, vec![(-1, libc::CLONE_NEWNET)]);
        let err = cmd.status().expect_err("setns(-1) must fail");
        assert_eq!(err.raw_os_error(), Some(libc::EBADF), "{err}");
    }
}
