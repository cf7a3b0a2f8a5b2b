//! Files the user names. Reading: with a stated limit per kind of file, opened first (without
//! blocking, so a FIFO never hangs a command) and then checked by the descriptor (a regular
//! file within the limit), so nothing can be swapped in between a check and the open.
//! Writing: to a private temporary file beside the name (`O_CREAT|O_EXCL|O_NOFOLLOW`, mode
//! 0600, an unpredictable name), synced, then renamed over the name and the folder synced. A
//! symbolic link at the name is refused, never followed; an existing file is kept unless the
//! caller was told to replace it, and then its inode is replaced (renamed over), never written
//! into, so a file another user planted in a shared folder never ends up holding what ringlab
//! wrote, and never stays theirs.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The largest NCCL log `doctor --log` reads per file: hours of `NCCL_DEBUG=INFO` with
/// `NCCL_DEBUG_SUBSYS=COLL` from one rank. The doctor holds about 15 bytes per byte of log
/// (every line parsed; tests/it/resource_bounds.rs measures it), so this keeps one file
/// under about 1 GB. Past it the doctor names the file and the limit (cut the log to the
/// part around the hang: `grep -n NCCL`, `tail -c`).
pub const MAX_LOG_BYTES: u64 = 64 << 20;
/// The largest flight-recorder dump `doctor --trace` reads (PyTorch's 2000 entries with
/// their stack frames are a few MiB).
pub const MAX_DUMP_BYTES: u64 = 64 << 20;
/// The largest lesson, drill or scenario file (the longest lesson is under 100 KiB).
pub const MAX_LESSON_BYTES: u64 = 4 << 20;
/// The largest progress file (a year of daily reviews of every item is under 1 MiB).
pub const MAX_PROGRESS_BYTES: u64 = 16 << 20;

/// The mode a written file ends with (less what the umask takes away): read-write for its
/// owner, readable by others, writable by nobody else.
pub const FILE_MODE: u32 = 0o644;

/// Why a file was not written.
#[derive(Debug)]
pub enum WriteError {
    /// Something is at the name and replacing it was not asked for (no `--force`).
    Exists(PathBuf),
    /// The name is a symbolic link: never written through, never replaced.
    Link(PathBuf),
    /// The write failed; the OS error said once.
    Failed { path: PathBuf, error: io::Error },
}

impl std::fmt::Display for WriteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Exists(p) => write!(
                f,
                "{} already exists; kept it (pass --force to replace it)",
                p.display()
            ),
            Self::Link(p) => write!(
                f,
                "{} is a symbolic link: refusing to write through it or to replace it, with or \
                 without --force (remove the link, or name another file)",
                p.display()
            ),
            Self::Failed { path, error } => write!(f, "cannot write {}: {error}", path.display()),
        }
    }
}

// No source: the message already says the OS error, and a chain would say it twice.
impl std::error::Error for WriteError {}

/// Whether `path` may be written: nothing there, or (with `force`) a file or anything else
/// that is not a symbolic link. The name itself is looked at (lstat), never what a link at it
/// points to.
pub fn check_name(path: &Path, force: bool) -> Result<(), WriteError> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => Err(WriteError::Link(path.to_path_buf())),
        Ok(_) if !force => Err(WriteError::Exists(path.to_path_buf())),
        Ok(_) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(error) => Err(WriteError::Failed {
            path: path.to_path_buf(),
            error,
        }),
    }
}

/// Write `bytes` to `path` as a new file of `mode` (less the umask): a private temporary
/// file beside it, synced, renamed over the name, the folder synced. A reader sees the old
/// file or the new one, never a mix. A symbolic link at the name is refused
/// ([`WriteError::Link`]); an existing file is kept ([`WriteError::Exists`]) unless `force`,
/// and then replaced by the new inode (its owner, mode and contents are gone, not reused).
/// Without `force` the rename itself refuses a name that appeared meanwhile.
pub fn write_private_replace(
    path: &Path,
    bytes: &[u8],
    mode: u32,
    force: bool,
) -> Result<(), WriteError> {
    check_name(path, force)?;
    let mut tmp = private_temp(path)?;
    let written = (|| {
        tmp.as_file_mut().write_all(bytes)?;
        tmp.as_file()
            .set_permissions(std::fs::Permissions::from_mode(mode & !umask()))?;
        tmp.as_file().sync_all()
    })();
    written.map_err(|error| WriteError::Failed {
        path: path.to_path_buf(),
        error,
    })?;
    put_in_place(tmp, path, force)?;
    Ok(())
}

/// [`write_private_replace`] for a file written as it goes (a recording): the private
/// temporary file, still empty, is renamed over the name at once (with the same rules) and
/// returned for writing.
pub fn create_private_replace(path: &Path, mode: u32, force: bool) -> Result<File, WriteError> {
    check_name(path, force)?;
    let tmp = private_temp(path)?;
    tmp.as_file()
        .set_permissions(std::fs::Permissions::from_mode(mode & !umask()))
        .map_err(|error| WriteError::Failed {
            path: path.to_path_buf(),
            error,
        })?;
    put_in_place(tmp, path, force)
}

/// The folder a path's last component lives in (`.` for a bare name).
fn folder_of(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// A new file beside `path` that nobody else can have made or can open: `O_CREAT|O_EXCL|
/// O_NOFOLLOW`, mode 0600, named `.NAME.tmp-PID-` and 12 random characters (PID lets a later
/// run remove what a killed one left; the random part makes the name unpredictable).
fn private_temp(path: &Path) -> Result<tempfile::NamedTempFile, WriteError> {
    let failed = |error| WriteError::Failed {
        path: path.to_path_buf(),
        error,
    };
    let name = path.file_name().ok_or_else(|| {
        failed(io::Error::new(
            io::ErrorKind::InvalidInput,
            "the path names no file",
        ))
    })?;
    // Room for the rest of the temporary name within a file system's 255 bytes.
    let name: String = name.to_string_lossy().chars().take(64).collect();
    let prefix = format!(".{name}.tmp-{}-", std::process::id());
    tempfile::Builder::new()
        .prefix(&prefix)
        .rand_bytes(12)
        .make_in(folder_of(path), |p| {
            OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                .open(p)
        })
        .map_err(failed)
}

/// Rename the temporary file over `path` (`force`), or to it only while nothing is there
/// (no `force`: `RENAME_NOREPLACE`, else a hard link), then sync the folder. A failed rename
/// removes the temporary file.
fn put_in_place(
    tmp: tempfile::NamedTempFile,
    path: &Path,
    force: bool,
) -> Result<File, WriteError> {
    let placed = if force {
        tmp.persist(path)
    } else {
        tmp.persist_noclobber(path)
    };
    let file = placed.map_err(|e| {
        if e.error.kind() == io::ErrorKind::AlreadyExists {
            WriteError::Exists(path.to_path_buf())
        } else {
            WriteError::Failed {
                path: path.to_path_buf(),
                error: e.error,
            }
        }
    })?;
    File::open(folder_of(path))
        .and_then(|d| d.sync_all())
        .map_err(|error| WriteError::Failed {
            path: path.to_path_buf(),
            error,
        })?;
    Ok(file)
}

/// This process's umask, read without changing it (`/proc/self/status`; 022 where that does
/// not say).
fn umask() -> u32 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Umask:"))
                .and_then(|v| u32::from_str_radix(v.trim(), 8).ok())
        })
        .unwrap_or(0o022)
}

/// Why a file was not read.
#[derive(Debug)]
pub enum ReadError {
    /// Opening or reading failed (`NotFound` included).
    Io(io::Error),
    /// A folder, where a file was wanted.
    Folder,
    /// A FIFO, socket or device.
    NotRegular,
    /// Bigger than the limit (the size found).
    TooBig(u64),
}

/// Open `path` to read (links followed, as the user named it) and check by the descriptor
/// that it is a regular file of at most `limit` bytes. The open does not block: a FIFO opens
/// at once (`O_NONBLOCK`) and is then refused, as is a socket or a device.
pub fn open_regular(path: &Path, limit: u64) -> Result<(File, u64), ReadError> {
    let f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            // A socket cannot be opened.
            Some(libc::ENXIO) => ReadError::NotRegular,
            _ => ReadError::Io(e),
        })?;
    let m = f.metadata().map_err(ReadError::Io)?;
    if m.is_dir() {
        return Err(ReadError::Folder);
    }
    if !m.is_file() {
        return Err(ReadError::NotRegular);
    }
    if m.len() > limit {
        return Err(ReadError::TooBig(m.len()));
    }
    Ok((f, m.len()))
}

/// `path`'s bytes, at most `limit` of them ([`open_regular`]); the size is checked again while
/// reading (a file that grows meanwhile).
pub fn read_limited(path: &Path, limit: u64) -> Result<Vec<u8>, ReadError> {
    let (f, len) = open_regular(path, limit)?;
    let mut buf = Vec::with_capacity(len as usize);
    f.take(limit + 1)
        .read_to_end(&mut buf)
        .map_err(ReadError::Io)?;
    if buf.len() as u64 > limit {
        return Err(ReadError::TooBig(buf.len() as u64));
    }
    Ok(buf)
}

/// `path`'s bytes, at most `limit` of them: anything larger, or anything but a regular
/// file, is an error naming the file, its size and the limit for `what`.
pub fn read_bounded(path: &Path, limit: u64, what: &str) -> Result<Vec<u8>, String> {
    read_limited(path, limit).map_err(|e| read_error(path, limit, what, &e))
}

/// What a [`ReadError`] says about `path`, a `what` with `limit`.
pub fn read_error(path: &Path, limit: u64, what: &str, e: &ReadError) -> String {
    let shown = path.display();
    match e {
        ReadError::Io(e) => format!("cannot read {shown}: {e}"),
        ReadError::Folder => format!("{shown} is a folder, not a file"),
        ReadError::NotRegular => {
            format!("{shown} is not a regular file (a FIFO, socket or device): refusing to read it")
        }
        ReadError::TooBig(len) => format!(
            "{shown} is {len} bytes, over the {} a {what} may be ({limit} bytes): refusing to \
             read it",
            crate::units::format_bytes(limit),
        ),
    }
}

/// Bytes free for this user in the file system holding `path` (statvfs), where it can be
/// asked.
pub fn free_bytes(path: &Path) -> Option<u64> {
    let st = nix::sys::statvfs::statvfs(path).ok()?;
    Some(st.blocks_available().saturating_mul(st.fragment_size()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    fn temps_left(dir: &Path) -> Vec<String> {
        std::fs::read_dir(dir)
            .expect("list")
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains(".tmp-"))
            .collect()
    }

    #[test]
    fn a_new_file_is_written_with_its_mode_and_no_temp_file_stays() {
        let dir = tempfile::tempdir().expect("tmp");
        let f = dir.path().join("out.txt");
        write_private_replace(&f, b"hello\n", FILE_MODE, false).expect("write");
        assert_eq!(std::fs::read(&f).expect("read"), b"hello\n");
        let m = std::fs::metadata(&f).expect("meta");
        assert_eq!(m.mode() & 0o7777, FILE_MODE & !umask());
        assert!(temps_left(dir.path()).is_empty());
        // A bare name is written in the current folder's terms (its folder is ".").
        assert_eq!(folder_of(Path::new("x.json")), Path::new("."));
    }

    #[test]
    fn an_existing_file_is_kept_without_force_and_its_inode_replaced_with_it() {
        let dir = tempfile::tempdir().expect("tmp");
        let f = dir.path().join("out.txt");
        std::fs::write(&f, "theirs").expect("write");
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o666)).expect("chmod");
        let before = std::fs::metadata(&f).expect("meta").ino();
        match write_private_replace(&f, b"mine", FILE_MODE, false) {
            Err(WriteError::Exists(p)) => assert_eq!(p, f),
            other => panic!("kept expected: {other:?}"),
        }
        assert_eq!(std::fs::read_to_string(&f).expect("read"), "theirs");
        write_private_replace(&f, b"mine", FILE_MODE, true).expect("force");
        let m = std::fs::metadata(&f).expect("meta");
        assert_ne!(m.ino(), before, "a new inode, not the old one written into");
        assert_eq!(m.mode() & 0o777, FILE_MODE & !umask(), "not the old 0666");
        assert_eq!(std::fs::read_to_string(&f).expect("read"), "mine");
        assert!(temps_left(dir.path()).is_empty());
    }

    #[test]
    fn a_link_at_the_name_is_refused_with_and_without_force() {
        let dir = tempfile::tempdir().expect("tmp");
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "the victim's").expect("write");
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&victim, &link).expect("link");
        let dangling = dir.path().join("dangling");
        let nowhere = dir.path().join("not-yet");
        std::os::unix::fs::symlink(&nowhere, &dangling).expect("link");
        for force in [false, true] {
            for name in [&link, &dangling] {
                let e = write_private_replace(name, b"x", FILE_MODE, force).expect_err("a link");
                assert!(matches!(e, WriteError::Link(_)), "{e:?}");
                assert!(e.to_string().contains("symbolic link"), "{e}");
                let e = create_private_replace(name, FILE_MODE, force).expect_err("a link");
                assert!(matches!(e, WriteError::Link(_)), "{e:?}");
            }
        }
        assert_eq!(
            std::fs::read_to_string(&victim).expect("read"),
            "the victim's"
        );
        assert!(
            !nowhere.exists(),
            "nothing made where the dangling link points"
        );
        assert!(
            std::fs::symlink_metadata(&link)
                .expect("lstat")
                .file_type()
                .is_symlink()
        );
        assert!(temps_left(dir.path()).is_empty());
    }

    #[test]
    fn a_stream_is_renamed_into_place_at_once() {
        let dir = tempfile::tempdir().expect("tmp");
        let f = dir.path().join("talk.cast");
        std::fs::write(&f, "old").expect("write");
        let before = std::fs::metadata(&f).expect("meta").ino();
        assert!(matches!(
            create_private_replace(&f, FILE_MODE, false),
            Err(WriteError::Exists(_))
        ));
        let mut out = create_private_replace(&f, FILE_MODE, true).expect("create");
        assert_eq!(std::fs::read(&f).expect("read"), b"", "in place, empty");
        out.write_all(b"frame\n").expect("write");
        assert_eq!(std::fs::read(&f).expect("read"), b"frame\n");
        assert_ne!(std::fs::metadata(&f).expect("meta").ino(), before);
        assert!(temps_left(dir.path()).is_empty());
    }

    #[test]
    fn a_failed_write_says_the_os_error_once_and_leaves_nothing() {
        let dir = tempfile::tempdir().expect("tmp");
        let f = dir.path().join("no-such-folder").join("out.txt");
        let e = write_private_replace(&f, b"x", FILE_MODE, true).expect_err("no folder");
        let said = format!("{:#}", anyhow::Error::new(e));
        assert_eq!(said.matches("os error 2").count(), 1, "{said}");
        assert!(said.contains("no-such-folder"), "{said}");
    }

    #[test]
    fn a_fifo_socket_folder_or_oversized_file_is_refused_without_blocking() {
        let dir = tempfile::tempdir().expect("tmp");
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().expect("utf-8")).expect("c");
        // SAFETY: mkfifo with a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        // No writer ever comes: a blocking open would never return.
        let (tx, rx) = std::sync::mpsc::channel();
        let p = fifo.clone();
        std::thread::spawn(move || {
            let _ = tx.send(read_bounded(&p, 1 << 20, "log"));
        });
        let e = rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("answered at once")
            .expect_err("a FIFO");
        assert!(e.contains("not a regular file"), "{e}");
        let sock = dir.path().join("sock");
        let _l = std::os::unix::net::UnixListener::bind(&sock).expect("bind");
        let e = read_bounded(&sock, 1 << 20, "log").expect_err("a socket");
        assert!(e.contains("not a regular file"), "{e}");
        let e = read_bounded(dir.path(), 1 << 20, "log").expect_err("a folder");
        assert!(e.contains("is a folder"), "{e}");
        let big = dir.path().join("big");
        std::fs::write(&big, vec![b'x'; 2048]).expect("write");
        let e = read_bounded(&big, 1024, "log").expect_err("too big");
        assert!(e.contains("2048 bytes") && e.contains("1024 bytes"), "{e}");
        assert_eq!(read_bounded(&big, 2048, "log").expect("fits").len(), 2048);
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&big, &link).expect("link");
        assert_eq!(
            read_bounded(&link, 2048, "log")
                .expect("links are followed on reading")
                .len(),
            2048
        );
    }
}
