//! A launcher job's secret, where no RINGLAB_TOKEN was given: rank 0 writes a fresh random
//! token to a file only its user can read, in ringlab's home (`RINGLAB_HOME`, else
//! `~/.local/share/ringlab`), `jobs/<launcher>-<hash of the job>.token`; the other ranks,
//! which share that home (clusters mount home folders on every node), read it. The folder and
//! the file are trusted as OpenSSH's StrictModes trusts a key file: this user's, closed to
//! others, never through a link. A file older than this rank's start is a previous run's, and
//! is waited past.

use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use crate::comm::cpu::wire::{Token, new_token, token_from_hex, token_hex};

use super::world::World;

/// Where this job's token file is, in ringlab's home `home`.
pub fn path(home: &Path, w: &World) -> PathBuf {
    let h = super::world::fnv(format!("{}/{}", w.launcher, w.job).as_bytes());
    home.join("jobs")
        .join(format!("{}-{h:016x}.token", w.launcher))
}

/// Why a job's token file could not be made or read.
#[derive(Debug, thiserror::Error)]
pub enum TokenFileError {
    #[error("{}: {err}", path.display())]
    Io { path: PathBuf, err: std::io::Error },
    #[error(
        "{} is not a folder only you can use (mode {mode:o}, owner uid {uid}): refusing to keep a \
         job's token there",
        path.display()
    )]
    OpenFolder { path: PathBuf, mode: u32, uid: u32 },
    #[error(
        "{} is not a file only you can read (mode {mode:o}, owner uid {uid}): refusing its token",
        path.display()
    )]
    OpenFile { path: PathBuf, mode: u32, uid: u32 },
    #[error("{}: {err}", path.display())]
    Write {
        path: PathBuf,
        err: crate::files::WriteError,
    },
    #[error("making a job token: {0}")]
    NewToken(std::io::Error),
    #[error(
        "no token from rank 0 at {} after {secs} s: rank 0 writes it there, so this rank's home \
         must be rank 0's (a shared home folder), or set the same RINGLAB_TOKEN on every node",
        path.display()
    )]
    NoToken { path: PathBuf, secs: u64 },
}

/// An I/O error at `path`.
fn io_at(path: &Path) -> impl FnOnce(std::io::Error) -> TokenFileError + '_ {
    move |err| TokenFileError::Io {
        path: path.to_path_buf(),
        err,
    }
}

/// The folder, made if need be (0700), and refused unless it is this user's and closed to
/// others.
fn folder(dir: &Path) -> Result<(), TokenFileError> {
    std::fs::create_dir_all(dir).map_err(io_at(dir))?;
    let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
    let m = std::fs::symlink_metadata(dir).map_err(io_at(dir))?;
    if !m.is_dir() || m.uid() != crate::private::euid() || m.mode() & 0o077 != 0 {
        return Err(TokenFileError::OpenFolder {
            path: dir.to_path_buf(),
            mode: m.mode() & 0o777,
            uid: m.uid(),
        });
    }
    Ok(())
}

/// Rank 0: a fresh token, written to the job's file (replacing a previous run's).
pub fn create(home: &Path, w: &World) -> Result<Token, TokenFileError> {
    let p = path(home, w);
    folder(p.parent().unwrap_or(Path::new(".")))?;
    let t = new_token().map_err(TokenFileError::NewToken)?;
    crate::files::write_private_replace(&p, token_hex(&t).as_bytes(), 0o600, true).map_err(
        |err| TokenFileError::Write {
            path: p.clone(),
            err,
        },
    )?;
    Ok(t)
}

/// The other ranks: the token rank 0 wrote for this run, waited for up to `wait`.
pub fn read(
    home: &Path,
    w: &World,
    started: SystemTime,
    wait: Duration,
) -> Result<Token, TokenFileError> {
    let p = path(home, w);
    let deadline = Instant::now() + wait;
    loop {
        match read_once(&p, started)? {
            Some(t) => return Ok(t),
            None if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            None => {
                return Err(TokenFileError::NoToken {
                    path: p,
                    secs: wait.as_secs(),
                });
            }
        }
    }
}

/// The file's token if it is there, trusted and of this run (written since `started`, less a
/// minute for clocks that differ between nodes).
fn read_once(p: &Path, started: SystemTime) -> Result<Option<Token>, TokenFileError> {
    let f = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(p)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_at(p)(e)),
    };
    let m = f.metadata().map_err(io_at(p))?;
    if !m.is_file() || m.uid() != crate::private::euid() || m.mode() & 0o077 != 0 {
        return Err(TokenFileError::OpenFile {
            path: p.to_path_buf(),
            mode: m.mode() & 0o777,
            uid: m.uid(),
        });
    }
    let fresh = m
        .modified()
        .is_ok_and(|t| t + Duration::from_secs(60) >= started);
    if !fresh {
        return Ok(None);
    }
    let mut text = String::new();
    std::io::Read::read_to_string(&mut std::io::Read::take(&f, 64), &mut text).map_err(io_at(p))?;
    Ok(token_from_hex(text.trim()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::job::world::Launcher;

    fn world(rank: usize) -> World {
        World {
            launcher: Launcher::Torchrun,
            rank,
            size: 2,
            local_rank: 0,
            local_size: 1,
            master_addr: Some("127.0.0.1".into()),
            master_port: Some(29500),
            read: vec![],
            job: format!("tokentest-{}@127.0.0.1:29500", std::process::id()),
        }
    }

    #[test]
    fn rank_0_writes_a_private_token_the_others_read_and_a_loose_file_is_refused() {
        let held = tempfile::tempdir().expect("home");
        let home = held.path();
        let started = SystemTime::now() - Duration::from_secs(1);
        let t = create(home, &world(0)).expect("rank 0");
        let p = path(home, &world(0));
        assert_eq!(std::fs::metadata(&p).expect("file").mode() & 0o777, 0o600);
        assert_eq!(
            read(home, &world(1), started, Duration::from_secs(1)).ok(),
            Some(t)
        );
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let e = read(home, &world(1), started, Duration::ZERO)
            .expect_err("others could read it")
            .to_string();
        assert!(e.contains("only you can read"), "{e}");
        std::fs::remove_file(&p).expect("rm");
        let e = read(home, &world(1), started, Duration::ZERO)
            .expect_err("not there")
            .to_string();
        assert!(
            e.contains("shared home") && e.contains("RINGLAB_TOKEN"),
            "{e}"
        );
    }
}
