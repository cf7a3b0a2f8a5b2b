//! Nothing another user can reach: a lab run in a shared temporary folder that a stranger has
//! filled beforehand with every name the labs could have used by name (the emulated /dev/shm
//! folders older builds made as `rlab-shm-<pid>-n<i>`, for the next PIDs) uses none of them:
//! not as 0777 folders, not as folders of another user (as root), not as links to a victim's
//! folder. The run still fails as staged and passes with its fix, every planted name is as it
//! was, and the victim's folder is untouched.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Every entry of `dir` with its type, mode and owner (the test's picture of "as it was").
fn picture(dir: &Path) -> Vec<(String, bool, u32, u32, usize)> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .expect("read_dir")
        .flatten()
        .map(|e| {
            let m = std::fs::symlink_metadata(e.path()).expect("lstat");
            let inside = if m.is_dir() {
                std::fs::read_dir(e.path()).map_or(0, |d| d.count())
            } else {
                0
            };
            (
                e.file_name().to_string_lossy().into_owned(),
                m.file_type().is_symlink(),
                m.mode(),
                m.uid(),
                inside,
            )
        })
        .collect();
    v.sort();
    v
}

#[test]
fn a_lab_run_uses_no_name_a_stranger_planted() {
    let _one_at_a_time = crate::common::clusters();
    let shared = tempfile::tempdir().expect("tempdir");
    // A /tmp of our own: everyone may write, the sticky bit keeps names to their owners.
    std::fs::set_permissions(shared.path(), std::fs::Permissions::from_mode(0o1777))
        .expect("chmod 1777");
    let victim = tempfile::tempdir().expect("victim");
    std::fs::write(victim.path().join("keep.txt"), b"the victim's data\n").expect("victim file");
    let nobody = 65534;
    let last: u32 = std::fs::read_to_string("/proc/sys/kernel/ns_last_pid")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(1);
    for pid in last..last + 400 {
        for node in 0..2 {
            let name = shared.path().join(format!("rlab-shm-{pid}-n{node}"));
            if pid % 2 == 0 {
                std::os::unix::fs::symlink(victim.path(), &name).expect("plant a link");
            } else {
                std::fs::create_dir(&name).expect("plant a folder");
                std::fs::set_permissions(&name, std::fs::Permissions::from_mode(0o777))
                    .expect("chmod 0777");
                if is_root() {
                    // As another user would leave it.
                    std::os::unix::fs::chown(&name, Some(nobody), Some(nobody)).expect("chown");
                }
            }
        }
    }
    let before = picture(shared.path());
    let victim_before = picture(victim.path());

    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ringlab"));
    cmd.args([
        "lab",
        "run",
        "small-dev-shm",
        "--mode",
        "emulated",
        "--fix",
        "--json",
    ])
    .env("TMPDIR", shared.path());
    crate::common::tag(&mut cmd, "private-files");
    let out = cmd.output().expect("run ringlab");
    let err = String::from_utf8_lossy(&out.stderr);
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {err}"));
    assert_eq!(v["staged"]["outcome"], "error", "{v:#}");
    assert_eq!(v["diagnosis"]["culprit"], "shm-full", "{v:#}");
    assert_eq!(v["fixed"]["outcome"], "pass", "{v:#}");

    // A run-time hang: its flight recorders go to a fresh private folder.
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ringlab"));
    cmd.args([
        "lab",
        "run",
        "skipped-collective",
        "--mode",
        "emulated",
        "--fix",
        "--json",
    ])
    .env("TMPDIR", shared.path());
    crate::common::tag(&mut cmd, "private-files");
    let out = cmd.output().expect("run ringlab");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(v["fixed"]["outcome"], "pass", "{v:#}");

    assert_eq!(
        picture(shared.path()),
        before,
        "every planted name is as it was, and the runs left nothing behind"
    );

    // Files the user names: a link planted where the export or a recording would go is
    // refused, not written through (with --force too: see the test below).
    let script = shared.path().join("sanity.py");
    std::os::unix::fs::symlink(victim.path().join("keep.txt"), &script).expect("plant");
    let cast = shared.path().join("talk.cast");
    std::os::unix::fs::symlink(victim.path().join("keep.txt"), &cast).expect("plant");
    let before = picture(shared.path());
    let export = Command::new(env!("CARGO_BIN_EXE_ringlab"))
        .args([
            "export",
            "sanity-script",
            "--out",
            &script.display().to_string(),
        ])
        .output()
        .expect("run ringlab");
    assert!(!export.status.success(), "{export:?}");
    let record = Command::new(env!("CARGO_BIN_EXE_ringlab"))
        .args(["present", "--record", &cast.display().to_string()])
        .output()
        .expect("run ringlab");
    assert!(!record.status.success(), "{record:?}");
    assert_eq!(
        picture(shared.path()),
        before,
        "the planted links are untouched"
    );
    assert_eq!(picture(victim.path()), victim_before);
    assert_eq!(
        std::fs::read(victim.path().join("keep.txt")).expect("victim"),
        b"the victim's data\n"
    );
}

/// Accounts made for one test and removed after it, whatever happens.
struct Accounts(Vec<&'static str>, Vec<&'static str>);

impl Drop for Accounts {
    fn drop(&mut self) {
        for u in &self.0 {
            let _ = Command::new("userdel").arg(u).output();
        }
        for g in &self.1 {
            let _ = Command::new("groupdel").arg(g).output();
        }
    }
}

fn run(cmd: &str, args: &[&str]) {
    let out = Command::new(cmd).args(args).output().expect(cmd);
    assert!(out.status.success(), "{cmd} {args:?}: {out:?}");
}

/// The NCCL loader's trust rule reads who really is in a group: a folder writable by the
/// user's own group is trusted only while nobody else is in it, by primary gid (an account
/// made with that gid) or as a listed member. Needs root to make accounts (CI runs as root);
/// without it, the rule is tested on a made-up database in src/comm/nccl/find.rs and here on
/// this machine's real one for the current user.
#[test]
fn the_trust_rule_sees_every_member_of_a_private_group() {
    use ringlab::comm::nccl::find::{UserDb, group_is_private};
    if !is_root() || !have("useradd") || !have("groupadd") {
        // SAFETY: getuid/getgid have no preconditions.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        let db = UserDb::read();
        assert!(
            db.users.iter().any(|(_, u, _)| *u == uid),
            "this user is in the database"
        );
        // Whatever the answer, it agrees with the database's members of the group.
        let others = db.users.iter().any(|(_, u, g)| *g == gid && *u != uid);
        if others {
            assert!(!group_is_private(gid, uid, &db));
        }
        eprintln!("not root or no useradd: the account-making half is skipped");
        return;
    }
    let _one_at_a_time = crate::common::accounts();
    let _accounts = Accounts(
        vec!["rlabt-mallory", "rlabt-eve", "rlabt-alice"],
        vec!["rlabt-alice"],
    );
    run("groupadd", &["rlabt-alice"]);
    run("useradd", &["-M", "-N", "-g", "rlabt-alice", "rlabt-alice"]);
    let id = |name: &str| -> (u32, u32) {
        let db = UserDb::read();
        let (_, u, g) = db
            .users
            .iter()
            .find(|(n, _, _)| n == name)
            .expect("made")
            .clone();
        (u, g)
    };
    let (alice, group) = id("rlabt-alice");
    assert!(
        group_is_private(group, alice, &UserDb::read()),
        "alone in her group"
    );
    // Another account whose primary group is alice's.
    run(
        "useradd",
        &["-M", "-N", "-g", "rlabt-alice", "rlabt-mallory"],
    );
    assert!(
        !group_is_private(group, alice, &UserDb::read()),
        "by primary gid"
    );
    run("userdel", &["rlabt-mallory"]);
    assert!(group_is_private(group, alice, &UserDb::read()));
    // Another account listed as a member in /etc/group.
    run("useradd", &["-M", "-N", "-G", "rlabt-alice", "rlabt-eve"]);
    assert!(
        !group_is_private(group, alice, &UserDb::read()),
        "by /etc/group"
    );
}

fn have(cmd: &str) -> bool {
    Command::new(cmd).arg("--help").output().is_ok()
}

/// What the NCCL search makes of the library in `dir`: found, or the refusal's words.
fn nccl_verdict(dir: &Path) -> Result<(), String> {
    use ringlab::comm::nccl::find::{FindError, LinkAt, Place, find_in};
    let place = Place {
        dir: dir.to_path_buf(),
        how: "LD_LIBRARY_PATH".into(),
    };
    match find_in(&[place], &LinkAt::Private) {
        Ok(_) => Ok(()),
        Err(e @ FindError::Untrusted { .. }) => Err(e.to_string()),
        Err(e) => panic!("neither found nor refused: {e}"),
    }
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

/// A library where it usually lives: a folder, 0755, holding `libnccl.so.2`, 0644, both the
/// invoker's (root's, in CI), in a 0755 folder so other accounts can reach it.
fn library_tree() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let top = tempfile::tempdir().expect("tempdir");
    chmod(top.path(), 0o755);
    let dir = top.path().join("lib");
    std::fs::create_dir(&dir).expect("mkdir");
    chmod(&dir, 0o755);
    let lib = dir.join("libnccl.so.2");
    std::fs::write(&lib, b"\x7fELF trusted").expect("write");
    chmod(&lib, 0o644);
    (top, dir, lib)
}

/// Give `who` (`u:ID` or `g:ID`) read and write on `path` through its POSIX ACL, as an
/// administrator would with setfacl; where setfacl is missing, by writing the attribute it
/// writes (entries sorted by tag, a mask covering the named entry).
fn grant(path: &Path, who: &str) {
    if have("setfacl") {
        let perm = if path.is_dir() { "rwx" } else { "rw" };
        return run(
            "setfacl",
            &["-m", &format!("{who}:{perm}"), &path.display().to_string()],
        );
    }
    let (tag, id) = who.split_once(':').expect("u:ID or g:ID");
    let id: u32 = id.parse().expect("a numeric id");
    let mode = std::fs::metadata(path).expect("stat").mode();
    let any = u32::MAX;
    let mut entries = vec![(0x01u16, (mode >> 6) & 7, any)];
    if tag == "u" {
        entries.push((0x02, 6, id));
    }
    entries.push((0x04, (mode >> 3) & 7, any));
    if tag == "g" {
        entries.push((0x08, 6, id));
    }
    entries.extend([(0x10, 6 | ((mode >> 3) & 7), any), (0x20, mode & 7, any)]);
    let mut value = 2u32.to_le_bytes().to_vec();
    for (t, p, i) in entries {
        value.extend(t.to_le_bytes());
        value.extend((p as u16).to_le_bytes());
        value.extend(i.to_le_bytes());
    }
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).expect("path");
    // SAFETY: NUL-terminated name and path; `value` is read for its length only.
    let rc = unsafe {
        libc::setxattr(
            c.as_ptr(),
            c"system.posix_acl_access".as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            0,
        )
    };
    assert_eq!(rc, 0, "setxattr: {}", std::io::Error::last_os_error());
}

/// Drop every ACL entry of `path` but those the mode shows.
fn drop_acl(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).expect("path");
    // SAFETY: NUL-terminated name and path.
    let rc = unsafe { libc::removexattr(c.as_ptr(), c"system.posix_acl_access".as_ptr()) };
    assert_eq!(rc, 0, "removexattr: {}", std::io::Error::last_os_error());
}

/// Finding H1 (a) and (c): an ACL entry lets another account write a library (or a folder
/// above it) while the mode shows no "other" write. The search refuses it, naming the entry
/// and the path; without the ACL, or with one naming only the invoker, it loads. An owner may
/// set ACLs on their own files, so this needs no root; as root (CI) it also shows the attack
/// is real: the other account (nobody) writes the library.
#[test]
fn a_library_an_acl_lets_another_account_write_is_refused() {
    let (_top, dir, lib) = library_tree();
    assert_eq!(
        nccl_verdict(&dir),
        Ok(()),
        "a 0755/0644 tree of the invoker's"
    );
    // SAFETY: getuid has no preconditions.
    let me = unsafe { libc::getuid() };
    // Another account: nobody, unless that is who runs this.
    let other = if me == 65534 { 65533 } else { 65534 };
    // (a) An ACL giving another user write on the library.
    grant(&lib, &format!("u:{other}"));
    let mode = std::fs::metadata(&lib).expect("stat").mode() & 0o777;
    assert_eq!(mode, 0o664, "with an ACL the group bits are its mask");
    if is_root() && have("setpriv") {
        let evil = format!("printf evil > '{}'", lib.display());
        let (uid, gid) = (format!("--reuid={other}"), format!("--regid={other}"));
        let out = Command::new("setpriv")
            .args([&uid, &gid, "--clear-groups", "sh", "-c", &evil])
            .output()
            .expect("setpriv");
        assert!(
            out.status.success(),
            "the ACL lets uid {other} write: {out:?}"
        );
    }
    let e = nccl_verdict(&dir).expect_err("another user may write the library");
    let said = format!("the file {}: an ACL gives user ", lib.display());
    assert!(e.contains(&said) && e.contains(&format!("{other}")), "{e}");
    assert!(e.starts_with("refusing to load"), "{e}");
    drop_acl(&lib);
    chmod(&lib, 0o644);
    assert_eq!(nccl_verdict(&dir), Ok(()), "the ACL gone");
    // An ACL naming the invoker only: nobody else may write.
    grant(&lib, &format!("u:{me}"));
    assert_eq!(nccl_verdict(&dir), Ok(()), "an ACL for the invoker");
    drop_acl(&lib);
    chmod(&lib, 0o644);
    // (c) The same on the folder above: whoever writes it can swap the library's name.
    grant(&dir, &format!("u:{other}"));
    let e = nccl_verdict(&dir).expect_err("another user may write the folder");
    let said = format!("the folder {}: an ACL gives user ", dir.display());
    assert!(e.contains(&said), "{e}");
    drop_acl(&dir);
    chmod(&dir, 0o755);
    // A named group with write (nogroup: nobody's primary group; or one the database does not
    // know), on the library.
    grant(&lib, &format!("g:{other}"));
    let e = nccl_verdict(&dir).expect_err("a group with another member may write");
    assert!(e.contains("an ACL gives group "), "{e}");
    drop_acl(&lib);
    chmod(&lib, 0o644);
    assert_eq!(nccl_verdict(&dir), Ok(()));
}

/// Finding H1 (b): gid 0 is a group like any other. A group-writable library (or folder) is
/// trusted only while its group has no member but the invoker and root, counting members
/// listed in /etc/group and accounts whose primary group it is. Root alone in group root, and
/// a group with nobody in it, are fine; `usermod -aG root OTHER` makes the library refused,
/// naming the member. The full test needs root (CI runs as root: it makes accounts and
/// changes group root); without it, the membership rule is checked on /etc/passwd- and
/// /etc/group-like files written here and read back.
#[test]
fn a_group_writable_library_is_refused_while_its_group_has_another_member() {
    use ringlab::comm::nccl::find::{UserDb, group_others};
    if !is_root()
        || !["useradd", "usermod", "gpasswd", "groupadd"]
            .iter()
            .all(|c| have(c))
    {
        let files = tempfile::tempdir().expect("tempdir");
        let (passwd, group) = (files.path().join("passwd"), files.path().join("group"));
        std::fs::write(
            &passwd,
            "root:x:0:0::/root:/bin/sh\nalice:x:1000:1000::/:/bin/sh\n",
        )
        .expect("write");
        std::fs::write(&group, "root:x:0:alice\nalice:x:1000:\nsolo:x:2000:\n").expect("write");
        let read = |p: &Path| std::fs::read_to_string(p).expect("read");
        let db = UserDb::parse(&read(&passwd), &read(&group));
        assert_eq!(group_others(0, 0, &db), Ok(vec!["alice".to_string()]));
        assert_eq!(
            group_others(0, 1000, &db),
            Ok(vec![]),
            "alice and root only"
        );
        assert_eq!(group_others(2000, 0, &db), Ok(vec![]), "nobody in it");
        assert!(group_others(3000, 0, &db).is_err(), "an unknown group");
        eprintln!("not root or no useradd: the accounts half needs root; checked the rule");
        return;
    }
    let _one_at_a_time = crate::common::accounts();
    let (other, solo) = ("rlabt-h1-other", "rlabt-h1-solo");
    let _accounts = Accounts(vec![other], vec![solo]);
    run("useradd", &["-M", "-N", other]);
    let (_top, dir, lib) = library_tree();
    assert_eq!(nccl_verdict(&dir), Ok(()), "root:root 0755/0644");
    chmod(&lib, 0o664);
    let root_alone = group_others(0, 0, &UserDb::read()).is_ok_and(|o| o.is_empty());
    if root_alone {
        assert_eq!(nccl_verdict(&dir), Ok(()), "group root, root alone in it");
    } else {
        eprintln!("group root has members on this machine: its root-alone case is skipped");
    }
    run("usermod", &["-aG", "root", other]);
    if have("runuser") {
        let evil = format!("printf evil > '{}'", lib.display());
        let out = Command::new("runuser")
            .args(["-u", other, "--", "sh", "-c", &evil])
            .output()
            .expect("runuser");
        assert!(
            out.status.success(),
            "group root lets {other} write: {out:?}"
        );
    }
    let e = nccl_verdict(&dir).expect_err("a member of group root may write");
    let said = format!(
        "the file {} is writable by group root, which has other members: ",
        lib.display()
    );
    assert!(e.contains(&said) && e.contains(other), "{e}");
    // A group-writable folder is the same: the folder is named.
    chmod(&lib, 0o644);
    chmod(&dir, 0o775);
    let e = nccl_verdict(&dir).expect_err("a member of group root may write the folder");
    assert!(
        e.contains(&format!(
            "the folder {} is writable by group root",
            dir.display()
        )),
        "{e}"
    );
    run("gpasswd", &["-d", other, "root"]);
    if root_alone {
        assert_eq!(nccl_verdict(&dir), Ok(()), "the member gone");
    }
    // A group with nobody in it is private; a member makes it shared.
    run("groupadd", &[solo]);
    for p in [&dir, &lib] {
        run("chgrp", &[solo, &p.display().to_string()]);
    }
    chmod(&lib, 0o664);
    assert_eq!(nccl_verdict(&dir), Ok(()), "a group nobody else is in");
    run("usermod", &["-aG", solo, other]);
    let e = nccl_verdict(&dir).expect_err("a group with another member");
    assert!(
        e.contains(&format!(
            "writable by group {solo}, which has other members: {other}"
        )),
        "{e}"
    );
}

/// A rank's buffers are readable by its partners through /proc/PID/fd (the mapped regions) and
/// process_vm_readv (cross-memory attach), and by nobody else: the kernel's ptrace rules say
/// who. As root the test asks as another user (nobody, 65534): both are refused. Without root
/// it tests the closest real thing it can: a rank process that is not dumpable refuses both
/// to the same user, which is the same check (ptrace_may_access) failing on another of its
/// conditions.
#[test]
fn another_user_cannot_read_a_ranks_buffers() {
    use ringlab::comm::cpu::p2p::Region;
    use std::ffi::CString;
    let secret = 0x5ec7_e7ab_cdef_0123u64;
    // The target: this process as root; a forked, non-dumpable child otherwise.
    let root = is_root();
    let region = Region::new(4096).expect("a region");
    let mut buf = ringlab::comm::cpu::p2p::SharedBuf::Region(std::sync::Arc::new(region));
    let ringlab::comm::cpu::p2p::SharedBuf::Region(r) = &buf else {
        unreachable!("made as a region")
    };
    let (fd, addr) = (r.fd(), r.span().start);
    buf.bytes_mut()[..8].copy_from_slice(&secret.to_le_bytes());
    let mut pipe = [0i32; 2];
    // SAFETY: pipe writes two fds into the array.
    assert_eq!(unsafe { libc::pipe(pipe.as_mut_ptr()) }, 0);
    // SAFETY: getpid has no preconditions.
    let parent = unsafe { libc::getpid() };
    let proc_path = |pid: i32| CString::new(format!("/proc/{pid}/fd/{fd}")).expect("path");
    let parent_path = proc_path(parent);
    // What a reader reports: bit 0 its process_vm_readv got the secret, bit 1 its open of the
    // region's /proc entry succeeded.
    // SAFETY: the child only makes system calls (no allocation) and ends with _exit.
    let child = unsafe { libc::fork() };
    assert!(child >= 0, "fork");
    if child == 0 {
        // SAFETY: plain system calls on memory prepared before fork; the child ends in _exit.
        unsafe {
            let verdict: u8 = if root {
                // The reader: another user.
                if libc::setgid(65534) != 0 || libc::setuid(65534) != 0 {
                    libc::_exit(3);
                }
                let mut got = 0u64;
                let l = libc::iovec {
                    iov_base: (&raw mut got).cast(),
                    iov_len: 8,
                };
                let rv = libc::iovec {
                    iov_base: addr as *mut libc::c_void,
                    iov_len: 8,
                };
                let read = libc::process_vm_readv(parent, &l, 1, &rv, 1, 0) == 8 && got == secret;
                let opened = libc::open(parent_path.as_ptr(), libc::O_RDONLY) >= 0;
                u8::from(read) | (u8::from(opened) << 1)
            } else {
                // The target: not dumpable, then wait for the reader.
                libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
                let b = [0xffu8];
                libc::write(pipe[1], b.as_ptr().cast(), 1);
                libc::sleep(30);
                0
            };
            libc::write(pipe[1], [verdict].as_ptr().cast(), 1);
            libc::_exit(0);
        }
    }
    // SAFETY: the parent's copy of the write end; the child holds its own.
    unsafe { libc::close(pipe[1]) };
    let mut b = [0u8; 1];
    // SAFETY: reading one byte from our pipe into a one-byte buffer.
    let n = unsafe { libc::read(pipe[0], b.as_mut_ptr().cast(), 1) };
    assert_eq!(
        n, 1,
        "the child ended without a word (as root: could not become nobody)"
    );
    let verdict = if root {
        b[0]
    } else {
        // This process reads the non-dumpable child (its copy of the region and the secret).
        let read = ringlab::comm::cpu::cma::can_read(child, addr, secret).is_ok();
        let opened = std::fs::File::open(format!("/proc/{child}/fd/{fd}")).is_ok();
        // SAFETY: our own child.
        unsafe { libc::kill(child, libc::SIGKILL) };
        u8::from(read) | (u8::from(opened) << 1)
    };
    let mut status = 0;
    // SAFETY: reaping our own child.
    unsafe { libc::waitpid(child, &mut status, 0) };
    // SAFETY: closing our own pipe end.
    unsafe { libc::close(pipe[0]) };
    assert_eq!(
        verdict & 1,
        0,
        "process_vm_readv read a rank's memory (root: {root})"
    );
    assert_eq!(
        verdict & 2,
        0,
        "another process opened a rank's buffer through /proc (root: {root})"
    );
    // And its partners (the same user) can, from the descriptor handed to them: the region
    // is real, not refused to all.
    // SAFETY: the region's fd is open for the borrow; it is duplicated, not taken.
    let dup = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) }
        .try_clone_to_owned()
        .expect("dup");
    assert!(
        ringlab::comm::cpu::p2p::PeerRegion::from_fd(dup, 4096, 0).is_ok(),
        "a partner's view"
    );
}

/// Files the user names (`progress export`, `export sanity-script --out`, `present --record`)
/// in a shared sticky folder where another user planted the names first. A link at the name
/// (to a file of the victim's, or to a name that does not exist yet) is refused with and
/// without `--force`, and neither the link nor what it points to changes; a file at the name
/// is kept without `--force` and, with it, replaced by a new inode (a private temporary file
/// renamed over it), so it ends ours, 0644 at most, with nothing of the planter's left in it;
/// temporary names planted for the next PIDs are never used. As root the names are planted by
/// a second real account made for the test (and removed after it); without root the test
/// plants them itself: the same refusals and the same new inode, but that the file changes
/// owner, and that its planter can no longer write it, needs root to show.
#[test]
fn names_planted_in_a_shared_folder_are_refused_or_replaced_never_written_through() {
    use std::os::unix::fs::MetadataExt;
    let _one_at_a_time = crate::common::accounts();
    let stranger = crate::common::Stranger::make("plant");
    let shared = tempfile::tempdir().expect("tempdir");
    std::fs::set_permissions(shared.path(), std::fs::Permissions::from_mode(0o1777))
        .expect("chmod 1777");
    let vault = tempfile::tempdir().expect("victim");
    let victim = vault.path().join("keep.txt");
    std::fs::write(&victim, b"the victim's data\n").expect("victim file");
    let ghost = vault.path().join("made-by-ringlab");
    let home = tempfile::tempdir().expect("home");
    let at = |name: &str| shared.path().join(name).display().to_string();
    let plant = |args: &[&str]| match &stranger {
        Some(s) => {
            s.run(args);
        }
        None => run(args[0], &args[1..]),
    };
    let (victim_s, ghost_s) = (victim.display().to_string(), ghost.display().to_string());
    plant(&["ln", "-s", &victim_s, &at("progress.json")]);
    plant(&["ln", "-s", &ghost_s, &at("p2.json")]);
    plant(&["ln", "-s", &victim_s, &at("nccl_sanity.py")]);
    plant(&["ln", "-s", &victim_s, &at("talk.cast")]);
    plant(&["ln", "-s", &ghost_s, &at("ghost.cast")]);
    let dir = shared.path().display().to_string();
    plant(&[
        "sh",
        "-c",
        &format!(
            "umask 0; cd {dir} && echo theirs > theirs.json && echo theirs > theirs.py && \
             last=$(cat /proc/sys/kernel/ns_last_pid); \
             for p in $(seq $last $((last + 300))); do echo theirs > .exp.json.tmp-$p; done"
        ),
    ]);
    let before = picture(shared.path());
    let ringlab = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_ringlab"))
            .args(args)
            .env("RINGLAB_HOME", home.path())
            .output()
            .expect("run ringlab");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    for force in [&[][..], &["--force"][..]] {
        for (args, name) in [
            (&["progress", "export"][..], "progress.json"),
            (&["progress", "export"][..], "p2.json"),
            (&["export", "sanity-script", "--out"][..], "nccl_sanity.py"),
            (&["present", "--record"][..], "talk.cast"),
            (&["present", "--record"][..], "ghost.cast"),
        ] {
            let mut a = args.to_vec();
            let path = at(name);
            a.push(&path);
            a.extend_from_slice(force);
            let (code, err) = ringlab(&a);
            assert_ne!(code, Some(0), "{a:?} wrote through the link: {err}");
            assert!(err.contains("symbolic link"), "{a:?}: {err}");
        }
    }
    assert_eq!(
        picture(shared.path()),
        before,
        "the planted names are as they were"
    );
    assert_eq!(
        std::fs::read(&victim).expect("victim"),
        b"the victim's data\n"
    );
    assert!(
        !ghost.exists(),
        "nothing was made where a dangling link points"
    );

    // A file at the name: kept without --force; with it, replaced by a new inode of ours.
    let planter = stranger.as_ref().map(|s| s.uid);
    for (args, name, holds) in [
        (&["progress", "export"][..], "theirs.json", "\"schema\""),
        (
            &["export", "sanity-script", "--out"][..],
            "theirs.py",
            "all_reduce",
        ),
    ] {
        let path = at(name);
        let old = std::fs::metadata(&path).expect("planted");
        let mut a = args.to_vec();
        a.push(&path);
        let (code, err) = ringlab(&a);
        assert_ne!(code, Some(0), "{err}");
        assert!(err.contains("--force"), "{err}");
        assert_eq!(std::fs::read_to_string(&path).expect("kept"), "theirs\n");
        a.push("--force");
        let (code, err) = ringlab(&a);
        assert_eq!(code, Some(0), "{a:?}: {err}");
        let new = std::fs::symlink_metadata(&path).expect("written");
        assert!(new.is_file());
        assert_ne!(
            new.ino(),
            old.ino(),
            "{name}: a new inode, not theirs written into"
        );
        // SAFETY: geteuid has no preconditions.
        assert_eq!(new.uid(), unsafe { libc::geteuid() }, "{name} is ours");
        assert_eq!(new.mode() & 0o022, 0, "{name}: nobody else may write it");
        let text = std::fs::read_to_string(&path).expect("read");
        assert!(text.contains(holds) && !text.contains("theirs"), "{text}");
        if let Some(s) = &stranger {
            let tried = Command::new("runuser")
                .args([
                    "-u",
                    &s.name,
                    "--",
                    "sh",
                    "-c",
                    &format!("echo evil >> {path}"),
                ])
                .output()
                .expect("runuser");
            assert!(
                !tried.status.success(),
                "the planter can no longer write {name}"
            );
            assert_ne!(Some(new.uid()), planter);
        }
    }
    // The planted temporary names: the export used none of them.
    let (code, err) = ringlab(&["progress", "export", &at("exp.json")]);
    assert_eq!(code, Some(0), "{err}");
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    let exp = std::fs::symlink_metadata(at("exp.json")).expect("exported");
    assert_eq!((exp.uid(), exp.mode() & 0o022), (me, 0));
    for entry in picture(shared.path()) {
        if entry.0.starts_with(".exp.json.tmp-") {
            assert!(before.contains(&entry), "{entry:?} was touched");
        } else {
            assert!(!entry.0.contains(".tmp-"), "left behind: {entry:?}");
        }
    }
}
