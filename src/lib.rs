//! ringlab: learn how GPUs communicate, then prove it live.
//!
//! Layers (imports point down only):
//! - [`collective`]: pure schedules for every collective × algorithm, simulator, cost model.
//! - [`course`]: lessons, front matter, math, custom blocks, content checks (pure data).
//! - [`infer`]: model presets, the TP calculator and the vLLM launch planner (pure).
//! - [`comm`]: processes and bytes on the wire: store, interfaces, the TCP backend, NCCL.
//! - [`nccl_log`]: NCCL's log as a grammar (typed messages, release profiles): pure.
//! - [`lab`]: experiments from comm: the launcher, the measurement, the hang lab, doctor.
//! - [`study`]: progress, review history, spaced repetition, drills.
//! - [`tui`]: the terminal app (TEA core: model, actions, update, render).
//! - [`cli`]: the command line.
//! - [`units`], [`files`]: byte sizes; reading user-named files safely.
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

pub mod cli;
pub mod collective;
pub mod comm;
pub mod course;
pub mod infer;
pub mod lab;
pub mod nccl_log;
pub mod private;
pub mod study;
pub mod tui;
pub mod units;

/// Reading files the user names.
pub mod files {
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
}

/// Keep freed heap memory for reuse instead of handing it back to the kernel at once. The app
/// rebuilds large schedules as the learner changes N (N = 1024 is 2.1M transfers, 67 MB); on
/// machines where first-touch page faults are slow (VMs), re-faulting that memory costs more
/// than building the schedule. Called by the binary and the benches, before any allocation.
pub fn tune_allocator() {
    // SAFETY: mallopt only adjusts glibc malloc parameters.
    unsafe {
        libc::mallopt(libc::M_TRIM_THRESHOLD, 512 << 20);
        libc::mallopt(libc::M_MMAP_THRESHOLD, 256 << 20);
    }
}
