//! Reading files the user names.

use std::io::Read;
use std::path::Path;

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

/// Create `path`, or replace the regular file there (truncating it), but never write
/// through a symbolic link planted at that name: a link is an error (ELOOP, "Too many
/// levels of symbolic links"), which callers report with the path.
pub fn create_replacing(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
}

/// `path`'s bytes, at most `limit` of them: anything larger, or anything but a regular
/// file, is an error naming the file, its size and the limit for `what`. The size is
/// checked before reading and again while reading (a file that grows meanwhile).
pub fn read_bounded(path: &Path, limit: u64, what: &str) -> Result<Vec<u8>, String> {
    regular_file(path)?;
    let shown = path.display();
    let f = std::fs::File::open(path).map_err(|e| format!("cannot read {shown}: {e}"))?;
    let too_big = |len: u64| {
        format!(
            "{shown} is {} bytes, over the {} a {what} may be ({} bytes): refusing to read it",
            len,
            crate::units::format_bytes(limit),
            limit
        )
    };
    let len = f
        .metadata()
        .map_err(|e| format!("cannot read {shown}: {e}"))?
        .len();
    if len > limit {
        return Err(too_big(len));
    }
    let mut buf = Vec::with_capacity(len as usize);
    f.take(limit + 1)
        .read_to_end(&mut buf)
        .map_err(|e| format!("cannot read {shown}: {e}"))?;
    if buf.len() as u64 > limit {
        return Err(too_big(buf.len() as u64));
    }
    Ok(buf)
}

/// Refuse anything but a regular file (after links): a FIFO or a device given where a
/// file is read would block forever or read without end.
pub fn regular_file(path: &Path) -> Result<(), String> {
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() => Ok(()),
        Ok(m) if m.is_dir() => Err(format!("{} is a folder, not a file", path.display())),
        Ok(_) => Err(format!(
            "{} is not a regular file (a FIFO, socket or device): refusing to read it",
            path.display()
        )),
        Err(e) => Err(format!("cannot read {}: {e}", path.display())),
    }
}
