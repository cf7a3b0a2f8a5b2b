//! Who could have written a library before it is loaded: the trust rule of the NCCL search.
//!
//! The model is OpenSSH's StrictModes (`safe_path` in its misc.c, which sshd applies to
//! `authorized_keys` and every folder above it): each entry must belong to the invoking user or
//! root, and no other account may write it. Two relaxations OpenSSH does not make, both sound:
//! a sticky folder (such as /tmp: nobody may rename or remove a name another user owns there,
//! and what lies below it is checked itself), and group write for a group that provably has no
//! member but the invoker and root, counting both the members listed in the group database and
//! every account whose primary group it is (gid 0 included: being root's group proves nothing).
//! Where OpenSSH looks only at the mode, this also reads the POSIX access ACL: its named
//! entries do not show in the mode (with an ACL, the mode's group bits are the ACL's mask), so
//! a named user or group with write is judged like the owning group. Whatever cannot be
//! established (a group the database does not list, an ACL that cannot be read) refuses.

use std::cell::OnceCell;
use std::ffi::CString;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Mutex;

/// Where an entry's ACL is read from: its path (a link is never followed) or an open file.
#[derive(Debug, Clone, Copy)]
pub(super) enum At<'a> {
    Path(&'a Path),
    Fd(BorrowedFd<'a>),
}

/// What is wrong with one entry on a path, if anything (`None`: only `uid` and root can change
/// it). A symlink's own mode means nothing: only its owner counts.
pub(super) fn entry_problem(
    p: &Path,
    m: &std::fs::Metadata,
    at: At<'_>,
    uid: u32,
) -> Option<String> {
    let what = if m.file_type().is_symlink() {
        "link"
    } else if m.is_dir() {
        "folder"
    } else {
        "file"
    };
    let it = format!("the {what} {}", p.display());
    if m.uid() != uid && m.uid() != 0 {
        return Some(format!(
            "{it} belongs to uid {}, not to you (uid {uid}) or root",
            m.uid()
        ));
    }
    let mode = m.mode();
    // A sticky folder (/tmp): others may add names to it but not replace one the invoker or
    // root owns, and the entry below it is checked itself; so who else may write it (by mode,
    // group or ACL) changes nothing.
    let sticky = m.is_dir() && mode & 0o1000 != 0;
    if m.file_type().is_symlink() || sticky {
        return None;
    }
    if mode & 0o002 != 0 {
        return Some(format!(
            "{it} is writable by every user (mode {:o})",
            mode & 0o7777
        ));
    }
    let db = OnceCell::new();
    let db = || db.get_or_init(UserDb::read);
    let why = match read_acl(at) {
        Err(e) => Some(format!(
            "{it}: its ACL cannot be read ({e}), so who may write it cannot be told"
        )),
        Ok(Some(acl)) => acl_problem(&it, &acl, m.gid(), uid, db),
        Ok(None) if mode & 0o020 != 0 => group_problem(m.gid(), uid, db())
            .map(|(name, why)| format!("{it} is writable by group {name}, which {why}")),
        Ok(None) => None,
    };
    why.map(|w| format!("{w} (mode {:o})", mode & 0o7777))
}

/// Why an ACL lets another account write, if it does. Every entry with write counts, whatever
/// the mask says (the simplest sound rule): a named user other than the invoker and root
/// refuses; the owning group and a named group must have no other member.
fn acl_problem<'a>(
    it: &str,
    acl: &[AclEntry],
    owner_group: u32,
    uid: u32,
    db: impl Fn() -> &'a UserDb,
) -> Option<String> {
    for e in acl.iter().filter(|e| e.perm & ACL_WRITE != 0) {
        match e.tag {
            ACL_USER if e.id != uid && e.id != 0 => {
                return Some(format!(
                    "{it}: an ACL gives user {} write",
                    db().user_label(e.id)
                ));
            }
            ACL_GROUP_OBJ => {
                if let Some((name, why)) = group_problem(owner_group, uid, db()) {
                    return Some(format!("{it} is writable by group {name}, which {why}"));
                }
            }
            ACL_GROUP => {
                if let Some((name, why)) = group_problem(e.id, uid, db()) {
                    return Some(format!(
                        "{it}: an ACL gives group {name} write, and that group {why}"
                    ));
                }
            }
            _ => {}
        }
    }
    None
}

/// The group's name and why it is not provably the invoker's and root's alone, if it is not.
fn group_problem(group: u32, uid: u32, db: &UserDb) -> Option<(String, String)> {
    let why = match group_others(group, uid, db) {
        Ok(others) if others.is_empty() => return None,
        Ok(others) => format!("has other members: {}", others.join(", ")),
        Err(e) => format!("cannot be shown to have no other member: {e}"),
    };
    Some((db.group_label(group), why))
}

/// ACL entry tags (`<linux/posix_acl.h>`).
pub const ACL_USER_OBJ: u16 = 0x01;
pub const ACL_USER: u16 = 0x02;
pub const ACL_GROUP_OBJ: u16 = 0x04;
pub const ACL_GROUP: u16 = 0x08;
pub const ACL_MASK: u16 = 0x10;
pub const ACL_OTHER: u16 = 0x20;
/// The write bit of an entry's permissions.
pub const ACL_WRITE: u16 = 0x02;
/// The version in the header of `system.posix_acl_access`.
const ACL_VERSION: u32 = 2;

/// One entry of a POSIX ACL as the kernel stores it: tag, permissions (r 4, w 2, x 1) and, for
/// a named user or group, its uid or gid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AclEntry {
    pub tag: u16,
    pub perm: u16,
    pub id: u32,
}

/// Why an entry's access ACL could not be read or parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AclError {
    #[error("{0} bytes, shorter than the header")]
    Short(usize),
    #[error("version {0}, not {ACL_VERSION}")]
    Version(u32),
    #[error("{0} bytes of entries, not a whole number of 8-byte entries")]
    Ragged(usize),
    #[error("an entry with the unknown tag {0:#x}")]
    UnknownTag(u16),
    #[error("a NUL byte in the path")]
    NulInPath,
    /// getxattr's errno.
    #[error("{}", std::io::Error::from_raw_os_error(*.0))]
    Read(i32),
    #[error("its size kept changing while it was read")]
    Unstable,
}

/// Parse the value of the `system.posix_acl_access` attribute: a little-endian u32 version
/// (2), then 8-byte entries (u16 tag, u16 permissions, u32 id). Anything else is an error.
pub fn parse_acl(bytes: &[u8]) -> Result<Vec<AclEntry>, AclError> {
    let (head, rest) = bytes
        .split_first_chunk::<4>()
        .ok_or(AclError::Short(bytes.len()))?;
    let version = u32::from_le_bytes(*head);
    if version != ACL_VERSION {
        return Err(AclError::Version(version));
    }
    if rest.len() % 8 != 0 {
        return Err(AclError::Ragged(rest.len()));
    }
    let known = [
        ACL_USER_OBJ,
        ACL_USER,
        ACL_GROUP_OBJ,
        ACL_GROUP,
        ACL_MASK,
        ACL_OTHER,
    ];
    rest.chunks_exact(8)
        .map(|c| {
            let e = AclEntry {
                tag: u16::from_le_bytes([c[0], c[1]]),
                perm: u16::from_le_bytes([c[2], c[3]]),
                id: u32::from_le_bytes([c[4], c[5], c[6], c[7]]),
            };
            if known.contains(&e.tag) {
                Ok(e)
            } else {
                Err(AclError::UnknownTag(e.tag))
            }
        })
        .collect()
}

/// The access ACL of an entry: `None` where it has none (ENODATA) or its filesystem has no
/// ACLs (ENOTSUP, which is EOPNOTSUPP on Linux); an error for anything else.
pub(super) fn read_acl(at: At<'_>) -> Result<Option<Vec<AclEntry>>, AclError> {
    enum Target {
        Path(CString),
        Fd(i32),
    }
    let target = match at {
        At::Path(p) => {
            Target::Path(CString::new(p.as_os_str().as_bytes()).map_err(|_| AclError::NulInPath)?)
        }
        At::Fd(fd) => Target::Fd(fd.as_raw_fd()),
    };
    let get = |buf: &mut [u8]| -> isize {
        let name = c"system.posix_acl_access";
        let (data, len) = (buf.as_mut_ptr().cast(), buf.len());
        // SAFETY: `name` and the path are NUL-terminated and live across the call; the kernel
        // writes at most `len` bytes at `data` (none when the buffer is empty).
        unsafe {
            match &target {
                Target::Path(c) => libc::lgetxattr(c.as_ptr(), name.as_ptr(), data, len),
                Target::Fd(fd) => libc::fgetxattr(*fd, name.as_ptr(), data, len),
            }
        }
    };
    let mut buf = vec![0u8; 1024];
    // An ACL that grows between asking its size and reading it is asked again, a few times.
    for _ in 0..4 {
        let n = get(&mut buf);
        if let Ok(n) = usize::try_from(n) {
            buf.truncate(n);
            return parse_acl(&buf).map(Some);
        }
        let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
        match errno {
            libc::ENODATA | libc::ENOTSUP => return Ok(None),
            libc::ERANGE => {
                let need = usize::try_from(get(&mut [])).map_err(|_| AclError::Read(errno))?;
                buf = vec![0u8; need.max(1)];
            }
            _ => return Err(AclError::Read(errno)),
        }
    }
    Err(AclError::Unstable)
}

/// The user and group databases, as far as the trust rule needs them.
#[derive(Debug, Default, Clone)]
pub struct UserDb {
    /// (user name, uid, primary gid) of every account.
    pub users: Vec<(String, u32, u32)>,
    /// (group name, gid, listed members) of every group.
    pub groups: Vec<(String, u32, Vec<String>)>,
}

/// The `*ent` iterators share one position per process: one reader at a time.
static ENUMERATING: Mutex<()> = Mutex::new(());

impl UserDb {
    /// Every account and group this machine knows: what NSS enumerates (files, and LDAP or
    /// SSSD where they enumerate) together with /etc/passwd and /etc/group as written. An
    /// account in either counts: more members can only refuse more.
    pub fn read() -> Self {
        let mut db = Self::enumerate();
        let file = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
        let files = Self::parse(&file("/etc/passwd"), &file("/etc/group"));
        db.users.extend(files.users);
        db.groups.extend(files.groups);
        db
    }

    /// Accounts and groups in the formats of /etc/passwd (`name:x:uid:gid:…`) and /etc/group
    /// (`name:x:gid:member,member`); lines that are not such entries (comments, NIS `+`
    /// lines, damaged ones) are skipped.
    pub fn parse(passwd: &str, group: &str) -> Self {
        let users = passwd
            .lines()
            .filter_map(|l| {
                let f: Vec<&str> = l.trim_end().split(':').collect();
                let (name, uid, gid) = (f.first()?, f.get(2)?, f.get(3)?);
                Some((name.to_string(), uid.parse().ok()?, gid.parse().ok()?))
            })
            .collect();
        let groups = group
            .lines()
            .filter_map(|l| {
                let f: Vec<&str> = l.trim_end().split(':').collect();
                let (name, gid) = (f.first()?, f.get(2)?.parse().ok()?);
                let members = f
                    .get(3)
                    .map(|m| m.split(',').map(str::trim).filter(|m| !m.is_empty()))
                    .into_iter()
                    .flatten()
                    .map(String::from)
                    .collect();
                Some((name.to_string(), gid, members))
            })
            .collect();
        Self { users, groups }
    }

    fn enumerate() -> Self {
        let _one = ENUMERATING.lock().unwrap_or_else(|e| e.into_inner());
        let mut db = UserDb::default();
        let text = |p: *const libc::c_char| {
            // SAFETY: a NUL-terminated string from the entry just returned, copied at once.
            unsafe { std::ffi::CStr::from_ptr(p) }
                .to_string_lossy()
                .into_owned()
        };
        // SAFETY: the *ent iterators return pointers into static storage, read at once and
        // copied; ENUMERATING keeps every other reader of them in this process out meanwhile.
        unsafe {
            libc::setpwent();
            while let Some(pw) = libc::getpwent().as_ref() {
                db.users.push((text(pw.pw_name), pw.pw_uid, pw.pw_gid));
            }
            libc::endpwent();
            libc::setgrent();
            while let Some(gr) = libc::getgrent().as_ref() {
                let mut members = Vec::new();
                let mut m = gr.gr_mem;
                while !m.is_null() && !(*m).is_null() {
                    members.push(text(*m));
                    m = m.add(1);
                }
                db.groups.push((text(gr.gr_name), gr.gr_gid, members));
            }
            libc::endgrent();
        }
        db
    }

    /// "alice (uid 1003)", or "uid 1003" for an account the database does not know.
    fn user_label(&self, uid: u32) -> String {
        match self.users.iter().find(|(_, u, _)| *u == uid) {
            Some((name, _, _)) => format!("{name} (uid {uid})"),
            None => format!("uid {uid}"),
        }
    }

    /// The group's name, or its number where the database does not know it.
    fn group_label(&self, gid: u32) -> String {
        match self.groups.iter().find(|(_, g, _)| *g == gid) {
            Some((name, _, _)) => name.clone(),
            None => gid.to_string(),
        }
    }
}

/// Every account in `group` other than `uid` and root (uid 0), by name: those listed as its
/// members (a listed name no account has counts too) and those whose primary group it is.
/// Empty: only the invoker and root can use it. An error where that cannot be established:
/// the group, or the invoker, is not in the database.
pub fn group_others(group: u32, uid: u32, db: &UserDb) -> Result<Vec<String>, String> {
    if !db.users.iter().any(|(_, u, _)| *u == uid) {
        return Err(format!("the user database does not list you (uid {uid})"));
    }
    if !db.groups.iter().any(|(_, g, _)| *g == group) {
        return Err(format!("gid {group} is not in the group database"));
    }
    let ours = |u: u32| u == uid || u == 0;
    let mut others: Vec<String> = db
        .groups
        .iter()
        .filter(|(_, g, _)| *g == group)
        .flat_map(|(_, _, members)| members)
        .filter(|m| {
            let mut accounts = db.users.iter().filter(|(n, _, _)| n == *m).peekable();
            accounts.peek().is_none() || accounts.any(|(_, u, _)| !ours(*u))
        })
        .cloned()
        .collect();
    others.extend(
        db.users
            .iter()
            .filter(|(_, u, g)| *g == group && !ours(*u))
            .map(|(n, _, _)| n.clone()),
    );
    others.sort();
    others.dedup();
    Ok(others)
}

/// Is `group` provably nobody's but `uid`'s and root's ([`group_others`] finds no one)?
pub fn group_is_private(group: u32, uid: u32, db: &UserDb) -> bool {
    group_others(group, uid, db).is_ok_and(|o| o.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn db(users: &[(&str, u32, u32)], groups: &[(&str, u32, &[&str])]) -> UserDb {
        UserDb {
            users: users
                .iter()
                .map(|(n, u, g)| (n.to_string(), *u, *g))
                .collect(),
            groups: groups
                .iter()
                .map(|(n, g, m)| (n.to_string(), *g, m.iter().map(|x| x.to_string()).collect()))
                .collect(),
        }
    }

    #[test]
    fn a_private_group_has_nobody_else_in_it() {
        // alice's own group, nobody else: private.
        let alone = db(
            &[("alice", 1000, 1000), ("bob", 1001, 1001)],
            &[("alice", 1000, &[])],
        );
        assert!(group_is_private(1000, 1000, &alone));
        // mallory was made with alice's gid as his primary group: he can write where it can.
        let by_primary = db(
            &[("alice", 1000, 1000), ("mallory", 1002, 1000)],
            &[("alice", 1000, &[])],
        );
        assert_eq!(
            group_others(1000, 1000, &by_primary),
            Ok(vec!["mallory".into()])
        );
        // listed as a member in /etc/group (and no such account: still someone else).
        let by_member = db(&[("alice", 1000, 1000)], &[("alice", 1000, &["mallory"])]);
        assert!(!group_is_private(1000, 1000, &by_member));
        // alice listed in her own group is still alone; a shared group is not hers.
        let listed_self = db(&[("alice", 1000, 1000)], &[("alice", 1000, &["alice"])]);
        assert!(group_is_private(1000, 1000, &listed_self));
        let users = db(
            &[("alice", 1000, 100), ("bob", 1001, 100)],
            &[("users", 100, &[])],
        );
        assert!(!group_is_private(100, 1000, &users));
        // A group or an invoker the database does not know: cannot be told, so not private.
        assert!(group_others(7, 1000, &alone).is_err());
        assert!(group_others(1000, 4242, &alone).is_err());
    }

    /// The finding H1 (b): gid 0 is a group like any other. Root alone in it is fine, for root
    /// and for any invoker; an account added to it (`usermod -aG root alice`) or made with it as
    /// primary group is someone else.
    #[test]
    fn group_root_counts_its_members_from_etc_group_and_etc_passwd() {
        let passwd = "root:x:0:0:root:/root:/bin/bash\n\
                      daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n\
                      # a comment\n\
                      alice:x:1000:1000::/home/alice:/bin/sh\n\
                      +::::::\n\
                      broken line\n";
        let alone = UserDb::parse(passwd, "root:x:0:\nalice:x:1000:\n");
        assert_eq!(alone.users.len(), 3, "{alone:?}");
        assert_eq!(group_others(0, 0, &alone), Ok(vec![]));
        assert_eq!(
            group_others(0, 1000, &alone),
            Ok(vec![]),
            "root alone is fine"
        );
        let listed = UserDb::parse(passwd, "root:x:0:root,alice\n");
        assert_eq!(group_others(0, 0, &listed), Ok(vec!["alice".into()]));
        assert_eq!(
            group_others(0, 1000, &listed),
            Ok(vec![]),
            "the invoker is fine"
        );
        let primary = UserDb::parse(
            &format!("{passwd}toor:x:0:0::/:/bin/sh\nop:x:1001:0::/:/bin/sh\n"),
            "root:x:0:\n",
        );
        assert_eq!(group_others(0, 0, &primary), Ok(vec!["op".into()]));
        // Spaces and CRLF around member names, several lines for one gid.
        let twice = UserDb::parse(passwd, "root:x:0:\r\nwheel:x:0: daemon , \n");
        assert_eq!(group_others(0, 0, &twice), Ok(vec!["daemon".into()]));
    }

    fn acl_bytes(entries: &[(u16, u16, u32)]) -> Vec<u8> {
        let mut b = ACL_VERSION.to_le_bytes().to_vec();
        for (tag, perm, id) in entries {
            b.extend(tag.to_le_bytes());
            b.extend(perm.to_le_bytes());
            b.extend(id.to_le_bytes());
        }
        b
    }

    /// The attribute as `setfacl -m u:nobody:rw` leaves it (read back with getfattr), and what
    /// the parser makes of damaged ones.
    #[test]
    fn an_acl_is_parsed_from_the_kernels_bytes() {
        let real = "0200000001000600ffffffff02000600feff000004000400ffffffff\
                    10000600ffffffff20000400ffffffff";
        let bytes: Vec<u8> = (0..real.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&real[i..i + 2], 16).expect("hex"))
            .collect();
        let acl = parse_acl(&bytes).expect("parsed");
        assert_eq!(acl.len(), 5);
        assert_eq!(
            acl[1],
            AclEntry {
                tag: ACL_USER,
                perm: 6,
                id: 65534
            }
        );
        assert_eq!(
            acl,
            parse_acl(&acl_bytes(&[
                (ACL_USER_OBJ, 6, u32::MAX),
                (ACL_USER, 6, 65534),
                (ACL_GROUP_OBJ, 4, u32::MAX),
                (ACL_MASK, 6, u32::MAX),
                (ACL_OTHER, 4, u32::MAX),
            ]))
            .expect("built")
        );
        assert!(parse_acl(&[2, 0]).is_err(), "short header");
        assert!(parse_acl(&[1, 0, 0, 0]).is_err(), "version 1");
        assert!(parse_acl(&bytes[..bytes.len() - 3]).is_err(), "a cut entry");
        assert!(
            parse_acl(&acl_bytes(&[(0x40, 6, 1)])).is_err(),
            "unknown tag"
        );
        assert_eq!(parse_acl(&acl_bytes(&[])), Ok(vec![]));
    }

    #[test]
    fn an_acl_entry_for_another_account_with_write_refuses_naming_it() {
        let db = db(
            &[("root", 0, 0), ("me", 1000, 1000), ("mallory", 1003, 1003)],
            &[
                ("root", 0, &[]),
                ("me", 1000, &[]),
                ("staff", 50, &["mallory"]),
            ],
        );
        let check = |entries: &[(u16, u16, u32)], owner_group: u32| {
            let acl = parse_acl(&acl_bytes(entries)).expect("built");
            acl_problem("the file /l/libnccl.so.2", &acl, owner_group, 1000, || &db)
        };
        let base = [
            (ACL_USER_OBJ, 6, 0),
            (ACL_GROUP_OBJ, 4, 0),
            (ACL_MASK, 6, 0),
        ];
        let with = |e: (u16, u16, u32)| [&base[..], &[e]].concat();
        assert_eq!(
            check(&with((ACL_USER, 6, 1003)), 0).as_deref(),
            Some("the file /l/libnccl.so.2: an ACL gives user mallory (uid 1003) write")
        );
        let unknown = check(&with((ACL_USER, 2, 4242)), 0).expect("refused");
        assert!(unknown.ends_with("gives user uid 4242 write"), "{unknown}");
        let group = check(&with((ACL_GROUP, 6, 50)), 0).expect("refused");
        assert!(
            group.ends_with(
                "an ACL gives group staff write, and that group has other members: mallory"
            ),
            "{group}"
        );
        // Read only, or for the invoker, root or a group only they are in: nobody else writes.
        assert_eq!(check(&with((ACL_USER, 4, 1003)), 0), None);
        assert_eq!(check(&with((ACL_USER, 6, 1000)), 0), None);
        assert_eq!(check(&with((ACL_USER, 7, 0)), 0), None);
        assert_eq!(check(&with((ACL_GROUP, 6, 1000)), 0), None);
        // The owning group's own entry with write: judged like group write without an ACL.
        let owning = check(&[(ACL_USER_OBJ, 6, 0), (ACL_GROUP_OBJ, 6, 0)], 50).expect("refused");
        assert!(
            owning.ends_with("is writable by group staff, which has other members: mallory"),
            "{owning}"
        );
    }

    #[test]
    fn a_file_without_an_acl_reads_as_none() {
        let dir = tempfile::tempdir().expect("tmp");
        let f = dir.path().join("plain");
        std::fs::write(&f, b"x").expect("write");
        assert_eq!(read_acl(At::Path(&f)), Ok(None));
        let open = std::fs::File::open(&f).expect("open");
        use std::os::fd::AsFd;
        assert_eq!(read_acl(At::Fd(open.as_fd())), Ok(None));
        assert!(read_acl(At::Path(&dir.path().join("absent"))).is_err());
    }
}
