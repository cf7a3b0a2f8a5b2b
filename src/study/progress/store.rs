//! Where progress lives and how it survives: the data folder, loading with migration and
//! quarantine of a corrupt file, the lock, and saving by a temporary file and a rename.

use super::*;
use nix::fcntl::{Flock, FlockArg};

/// Where progress lives: `$RINGLAB_HOME`, else `$XDG_DATA_HOME/ringlab`, else
/// `~/.local/share/ringlab`.
pub fn data_dir() -> PathBuf {
    if let Some(h) = std::env::var_os("RINGLAB_HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(h);
    }
    if let Some(x) = std::env::var_os("XDG_DATA_HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(x).join("ringlab");
    }
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("."), PathBuf::from);
    home.join(".local/share/ringlab")
}

#[derive(Debug, Deserialize)]
pub(super) struct SchemaOnly {
    schema: u32,
}

/// Load progress from `dir`. A missing file is a fresh start; a corrupt or newer one is
/// quarantined (renamed with a timestamp) and reported, never overwritten.
pub fn load(dir: &Path) -> Result<(Progress, Option<LoadNotice>), ProgressError> {
    use crate::files::ReadError;
    remove_stale_temps(dir);
    let path = dir.join(FILE_NAME);
    let limit = crate::files::MAX_PROGRESS_BYTES;
    // Opened first, then checked by its descriptor: a FIFO at the name is refused at once.
    let bytes = match crate::files::read_limited(&path, limit) {
        Ok(b) => b,
        Err(ReadError::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok((Progress::default(), None));
        }
        Err(ReadError::TooBig(len)) => {
            return quarantine(
                &path,
                format!(
                    "is {len} bytes, over the {} a progress file may be",
                    crate::units::format_bytes(limit)
                ),
            );
        }
        Err(ReadError::Io(error)) => {
            return Err(ProgressError::Read {
                path: path.display().to_string(),
                error,
            });
        }
        Err(ReadError::Folder) => {
            return Err(ProgressError::Read {
                path: path.display().to_string(),
                error: std::io::Error::other("a folder, not a file"),
            });
        }
        Err(ReadError::NotRegular) => {
            return Err(ProgressError::Read {
                path: path.display().to_string(),
                error: std::io::Error::other(
                    "not a regular file (a FIFO, socket or device): move it aside",
                ),
            });
        }
    };
    let text = match String::from_utf8(without_bom(bytes)) {
        Ok(t) => t,
        Err(_) => return quarantine(&path, "is not UTF-8 text".into()),
    };
    match serde_json::from_str::<SchemaOnly>(&text) {
        Ok(s) if s.schema > SCHEMA => {
            return quarantine(
                &path,
                format!(
                    "was written by a newer ringlab (schema {} > {SCHEMA})",
                    s.schema
                ),
            );
        }
        _ => {}
    }
    let value = match serde_json::from_str::<serde_json::Value>(&text) {
        Ok(v) => v,
        Err(e) => return quarantine(&path, format!("is corrupt ({e})")),
    };
    let (value, from) = match migrate(value) {
        Ok(m) => m,
        Err(e) => return quarantine(&path, format!("is corrupt ({e})")),
    };
    match serde_json::from_value::<Progress>(value) {
        Ok(p) if from < SCHEMA => {
            let backup = path.with_file_name(format!("{FILE_NAME}.schema{from}.bak"));
            let backup = (backup.exists() || fs::copy(&path, &backup).is_ok()).then_some(backup);
            Ok((p, Some(LoadNotice::Migrated { from, backup })))
        }
        Ok(p) => Ok((p, None)),
        Err(e) => quarantine(&path, format!("is corrupt ({e})")),
    }
}

/// Why a parsed progress file cannot be brought up to [`SCHEMA`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MigrateError {
    #[error("not a JSON object")]
    NotAnObject,
    #[error("no schema number")]
    NoSchema,
    #[error("schema 0 does not exist")]
    SchemaZero,
    #[error("schema {0} is not one this ringlab knows (it writes {SCHEMA})")]
    Unknown(u64),
    #[error("no migration from schema {0}")]
    NoMigration(u32),
}

/// Bring a parsed progress file up to [`SCHEMA`], one version at a time. Returns the upgraded
/// JSON and the schema it was written in.
pub fn migrate(mut v: serde_json::Value) -> Result<(serde_json::Value, u32), MigrateError> {
    let obj = v.as_object_mut().ok_or(MigrateError::NotAnObject)?;
    let from64 = obj
        .get("schema")
        .and_then(serde_json::Value::as_u64)
        .ok_or(MigrateError::NoSchema)?;
    if from64 == 0 {
        return Err(MigrateError::SchemaZero);
    }
    if from64 > u64::from(SCHEMA) {
        return Err(MigrateError::Unknown(from64));
    }
    let from = from64 as u32;
    let mut at = from;
    while at < SCHEMA {
        match at {
            // 1 → 2: per-item review history and FSRS state arrive, empty.
            1 => {
                obj.entry("items")
                    .or_insert_with(|| serde_json::Value::Object(Default::default()));
            }
            _ => return Err(MigrateError::NoMigration(at)),
        }
        at += 1;
        obj.insert("schema".into(), serde_json::Value::from(at));
    }
    Ok((v, from))
}

/// Why a progress file was not imported (each names the file).
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// Not read: missing, too big, not a regular file (the message names it).
    #[error("{0}")]
    Read(String),
    #[error("{} is not UTF-8 text", .0.display())]
    NotUtf8(PathBuf),
    #[error("{} is not valid JSON ({err})", path.display())]
    NotJson {
        path: PathBuf,
        err: serde_json::Error,
    },
    #[error(
        "{} was written by a newer ringlab (schema {schema} > {SCHEMA}); update ringlab first",
        path.display()
    )]
    Newer { path: PathBuf, schema: u64 },
    #[error("{} is not a progress file: {why}", path.display())]
    NotProgress { path: PathBuf, why: String },
    /// What [`Progress::validate`] found.
    #[error("{} was not imported: {why}", path.display())]
    Invalid { path: PathBuf, why: String },
}

/// Read a progress file for import: it must be readable and of this or an older schema.
/// Unlike [`load`] it never moves the file.
pub fn read_file(path: &Path) -> Result<Progress, ImportError> {
    let at = || path.to_path_buf();
    let bytes = crate::files::read_bounded(path, crate::files::MAX_PROGRESS_BYTES, "progress file")
        .map_err(ImportError::Read)?;
    let text = String::from_utf8(without_bom(bytes)).map_err(|_| ImportError::NotUtf8(at()))?;
    let value: serde_json::Value =
        serde_json::from_str(&text).map_err(|err| ImportError::NotJson { path: at(), err })?;
    if let Some(schema) = value.get("schema").and_then(serde_json::Value::as_u64)
        && schema > u64::from(SCHEMA)
    {
        return Err(ImportError::Newer { path: at(), schema });
    }
    let not_progress = |why: String| ImportError::NotProgress { path: at(), why };
    let (value, _) = migrate(value).map_err(|e| not_progress(e.to_string()))?;
    let p: Progress = serde_json::from_value(value).map_err(|e| not_progress(e.to_string()))?;
    p.validate()
        .map_err(|why| ImportError::Invalid { path: at(), why })?;
    Ok(p)
}

/// `bytes` without a leading UTF-8 byte order mark (an editor's, or Windows Notepad's): JSON
/// has none, and a file that starts with one is still progress, not corrupt.
pub(super) fn without_bom(mut bytes: Vec<u8>) -> Vec<u8> {
    if bytes.starts_with(b"\xef\xbb\xbf") {
        bytes.drain(..3);
    }
    bytes
}

/// Write progress to a file the user names (export): a private temporary file renamed over
/// the name ([`crate::files::write_private_replace`]); a link at the name is refused, never
/// followed; an existing file is kept unless `force`.
pub fn write_file(path: &Path, progress: &Progress, force: bool) -> Result<(), ProgressError> {
    let bytes = to_json(path, progress)?;
    crate::files::write_private_replace(path, &bytes, crate::files::FILE_MODE, force)
        .map_err(ProgressError::from_write)
}

/// The file's bytes: pretty-printed, or compact where pretty would pass the limit the loader
/// reads ([`crate::files::MAX_PROGRESS_BYTES`]); more than that even compact is refused, so
/// nothing is saved that the next start would set aside.
pub(super) fn to_json(path: &Path, progress: &Progress) -> Result<Vec<u8>, ProgressError> {
    encode(progress, crate::files::MAX_PROGRESS_BYTES).map_err(|e| match e {
        Ok(len) => ProgressError::TooBig {
            path: path.display().to_string(),
            len,
        },
        Err(e) => ProgressError::Write {
            path: path.display().to_string(),
            error: std::io::Error::other(e),
        },
    })
}

/// [`to_json`] for a `limit`: the bytes, or the compact size past it (`Err(Ok(len))`).
pub(super) fn encode(
    progress: &Progress,
    limit: u64,
) -> Result<Vec<u8>, Result<u64, serde_json::Error>> {
    let mut bytes = serde_json::to_vec_pretty(progress).map_err(Err)?;
    if bytes.len() as u64 >= limit {
        bytes = serde_json::to_vec(progress).map_err(Err)?;
    }
    bytes.push(b'\n');
    if bytes.len() as u64 > limit {
        return Err(Ok(bytes.len() as u64));
    }
    Ok(bytes)
}

pub(super) fn quarantine(
    path: &Path,
    reason: String,
) -> Result<(Progress, Option<LoadNotice>), ProgressError> {
    let stamp = Utc::now().format("%Y%m%dT%H%M%S%.3fZ");
    let moved_to = path.with_file_name(format!("{FILE_NAME}.quarantined-{stamp}"));
    fs::rename(path, &moved_to).map_err(|error| ProgressError::Write {
        path: moved_to.display().to_string(),
        error,
    })?;
    Ok((
        Progress::default(),
        Some(LoadNotice::Quarantined { reason, moved_to }),
    ))
}

/// What stands in the way of keeping progress in `dir`: a folder that cannot be read, is
/// read-only, or a file system that is full. Empty when saving should work.
pub fn storage_warnings(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let shown = dir.display();
    if !dir.exists() {
        return out;
    }
    if let Err(e) = fs::read_dir(dir) {
        out.push(format!("cannot read the progress folder {shown}: {e}"));
    }
    if let Err(e) = nix::unistd::access(dir, nix::unistd::AccessFlags::W_OK) {
        out.push(format!(
            "the progress folder {shown} is read-only ({}): progress will not be saved",
            std::io::Error::from(e)
        ));
    }
    if let Some(free) = crate::files::free_bytes(dir)
        && free < 1 << 20
    {
        out.push(format!(
            "the file system of {shown} is full ({free} bytes free): progress will not be saved"
        ));
    }
    out
}

/// The advisory lock every read-merge-write of `dir`'s progress holds (flock on
/// `dir/.progress.lock`; released when the file closes, also when a process dies). None where
/// the file system has no locks (an NFS home without lockd): the save goes ahead unlocked, as
/// before locks existed, rather than never.
pub(super) fn lock(dir: &Path) -> Result<Option<Flock<File>>, ProgressError> {
    use nix::errno::Errno;
    let path = dir.join(".progress.lock");
    let err = |error| ProgressError::Write {
        path: path.display().to_string(),
        error,
    };
    fs::create_dir_all(dir).map_err(err)?;
    let mut f = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(err)?;
    loop {
        match Flock::lock(f, FlockArg::LockExclusive) {
            Ok(locked) => return Ok(Some(locked)),
            Err((back, Errno::EINTR)) => f = back,
            Err((_, Errno::ENOLCK | Errno::EOPNOTSUPP)) => return Ok(None),
            Err((_, e)) => return Err(err(e.into())),
        }
    }
}

/// Save `progress` to `dir` without losing what another ringlab saved meanwhile: under the
/// lock, the file is read again and merged into `progress` by item (the newer review wins,
/// histories are united, as import does), cards that could not be scheduled are repaired,
/// and the result is written atomically. `progress` ends as what was written. Returns what
/// the re-read found worth telling (a file that had turned corrupt is moved aside, never
/// overwritten).
pub fn save(dir: &Path, progress: &mut Progress) -> Result<Option<LoadNotice>, ProgressError> {
    let _guard = lock(dir)?;
    let (disk, notice) = load(dir)?;
    progress.merge(&disk);
    progress.repair(Utc::now());
    save_as(dir, FILE_NAME, progress)?;
    Ok(notice.filter(|n| matches!(n, LoadNotice::Quarantined { .. })))
}

/// Where a chain of symlinks at `path` ends (relative targets resolved against each link's
/// folder; at most 40 hops, as the kernel allows).
pub(super) fn resolve_links(path: &Path) -> PathBuf {
    let mut p = path.to_path_buf();
    for _ in 0..40 {
        match fs::read_link(&p) {
            Ok(t) => p = p.parent().map_or(t.clone(), |d| d.join(&t)),
            Err(_) => break,
        }
    }
    p
}

/// Leftover `.progress.json.tmp-PID-RANDOM` files (`.progress.json.tmp-PID` from older builds)
/// of processes that no longer exist (a save killed between write and rename).
pub(super) fn remove_stale_temps(dir: &Path) {
    // A symlinked progress file is written next to its target: look there too.
    let target = resolve_links(&dir.join(FILE_NAME));
    let (tdir, tname) = match (target.parent(), target.file_name()) {
        (Some(d), Some(n)) => (d.to_path_buf(), n.to_string_lossy().into_owned()),
        _ => (dir.to_path_buf(), FILE_NAME.to_string()),
    };
    if tdir != dir || tname != FILE_NAME {
        remove_stale_temps_named(&tdir, &tname);
    }
    remove_stale_temps_named(dir, FILE_NAME);
}

pub(super) fn remove_stale_temps_named(dir: &Path, name: &str) {
    let Ok(rd) = fs::read_dir(dir) else {
        return;
    };
    let prefix = format!(".{name}.tmp-");
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix(&prefix)
            .and_then(|p| p.split('-').next())
            .and_then(|p| p.parse::<i32>().ok())
        else {
            continue;
        };
        // Signal "none" only asks whether the process exists.
        let gone = pid > 0
            && nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None)
                == Err(nix::errno::Errno::ESRCH);
        if gone {
            let _ = fs::remove_file(e.path());
        }
    }
}

/// Write ringlab's own progress file atomically: a reader sees the old file or the new one,
/// never a mix or nothing. A symbolic link the user made at `dir/name` is written through:
/// the link stays and its target is replaced, by a private temporary file beside the target
/// renamed over it ([`crate::files::write_private_replace`]). Only this file is followed;
/// files the user names for export never are ([`write_file`]).
pub(super) fn save_as(dir: &Path, name: &str, progress: &Progress) -> Result<(), ProgressError> {
    let path = dir.join(name);
    fs::create_dir_all(dir).map_err(|error| ProgressError::Write {
        path: path.display().to_string(),
        error,
    })?;
    let target = resolve_links(&path);
    let bytes = to_json(&target, progress)?;
    crate::files::write_private_replace(&target, &bytes, crate::files::FILE_MODE, true)
        .map_err(ProgressError::from_write)
}
