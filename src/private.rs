//! Folders in places other users share (/tmp, /dev/shm, `$TMPDIR`): every one the labs, the
//! recorder or the NCCL loader makes there is new (an unpredictable name, created with
//! `mkdir`, which fails on anything already there, a symlink included), private (0700) and
//! checked after it is made: ours, a real folder, closed to group and others. Nothing is ever
//! reused by name, so a stranger who pre-creates the names a run might use gets nothing.

use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// This process's effective user: whose files and connections are "ours".
pub fn euid() -> libc::uid_t {
    nix::unistd::geteuid().as_raw()
}

/// A new private folder `base/PREFIXxxxxxxxxxxxx` (12 random characters), kept until the
/// caller removes it. Errors name the folder.
pub fn fresh_dir(base: &Path, prefix: &str) -> io::Result<PathBuf> {
    let dir = tempfile::Builder::new()
        .prefix(prefix)
        .rand_bytes(12)
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir_in(base)
        .map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("making a private folder in {}: {e}", base.display()),
            )
        })?
        .keep();
    if let Err(e) = check_private_dir(&dir) {
        let _ = std::fs::remove_dir(&dir);
        return Err(e);
    }
    Ok(dir)
}

/// Is `dir` a folder (not a link to one) owned by this user and closed to everyone else?
pub fn check_private_dir(dir: &Path) -> io::Result<()> {
    let m = std::fs::symlink_metadata(dir)?;
    let me = euid();
    let why = if !m.file_type().is_dir() {
        Some("is not a folder".to_string())
    } else if m.uid() != me {
        Some(format!("belongs to uid {}, not to you (uid {me})", m.uid()))
    } else if m.mode() & 0o077 != 0 {
        Some(format!(
            "is open to other users (mode {:o})",
            m.mode() & 0o7777
        ))
    } else {
        None
    };
    match why {
        None => Ok(()),
        Some(why) => Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("{} {why}", dir.display()),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fresh_dir_is_private_new_and_unpredictable() {
        let base = tempfile::tempdir().expect("tempdir");
        let a = fresh_dir(base.path(), "ringlab-x-").expect("fresh");
        let b = fresh_dir(base.path(), "ringlab-x-").expect("fresh");
        assert_ne!(a, b);
        for d in [&a, &b] {
            let m = std::fs::symlink_metadata(d).expect("stat");
            assert!(m.is_dir());
            assert_eq!(m.mode() & 0o777, 0o700, "{}", d.display());
            let name = d.file_name().unwrap().to_string_lossy().into_owned();
            assert!(
                name.starts_with("ringlab-x-") && name.len() == 10 + 12,
                "{name}"
            );
        }
    }

    #[test]
    fn an_open_or_foreign_folder_is_not_private() {
        let base = tempfile::tempdir().expect("tempdir");
        let open = base.path().join("open");
        std::fs::create_dir(&open).expect("mkdir");
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).expect("chmod");
        let e = check_private_dir(&open).expect_err("0777 is not private");
        assert!(e.to_string().contains("open to other users"), "{e}");
        let link = base.path().join("link");
        let private = fresh_dir(base.path(), "p-").expect("fresh");
        std::os::unix::fs::symlink(&private, &link).expect("symlink");
        let e = check_private_dir(&link).expect_err("a link is not a folder");
        assert!(e.to_string().contains("not a folder"), "{e}");
        check_private_dir(&private).expect("ours");
    }
}
