//! Every reader of a file somebody else wrote has a stated size limit (ringlab::files): past it
//! the command names the file, its size and the limit, and reads nothing (a sparse file of
//! limit + 1 bytes proves it: reading it would take seconds and the limit in memory). Under
//! the limit, memory stays in proportion: a large real NCCL log is read under an address-space
//! limit (what `prlimit --as` sets) and its peak resident size is measured.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Output};

use ringlab::files::{MAX_DUMP_BYTES, MAX_LESSON_BYTES, MAX_LOG_BYTES, MAX_PROGRESS_BYTES};

fn ringlab(args: &[&str], home: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ringlab"))
        .args(args)
        .env("RINGLAB_HOME", home)
        .output()
        .expect("run ringlab")
}

/// A sparse file of `len` bytes: no disk, no time.
fn sparse(path: &Path, len: u64) {
    let f = std::fs::File::create(path).expect("create");
    f.set_len(len).expect("set_len");
}

fn says_too_big(out: &Output, file: &Path, limit: u64) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(
        err.contains(&file.display().to_string()),
        "names the file: {err}"
    );
    assert!(
        err.contains(&format!("{} bytes", limit + 1)) && err.contains(&format!("({limit} bytes)")),
        "gives the size and the limit: {err}"
    );
}

#[test]
fn a_file_past_its_limit_is_named_and_not_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path().join("home");

    let log = dir.path().join("rank0.log");
    sparse(&log, MAX_LOG_BYTES + 1);
    let out = ringlab(&["doctor", "--log", &log.display().to_string()], &home);
    assert_eq!(out.status.code(), Some(2));
    says_too_big(&out, &log, MAX_LOG_BYTES);

    let dump = dir.path().join("rank0.json");
    sparse(&dump, MAX_DUMP_BYTES + 1);
    let out = ringlab(&["doctor", "--trace", &dump.display().to_string()], &home);
    assert_eq!(out.status.code(), Some(2));
    says_too_big(&out, &dump, MAX_DUMP_BYTES);

    let lessons = dir.path().join("lessons");
    std::fs::create_dir(&lessons).expect("mkdir");
    let lesson = lessons.join("01-big.md");
    sparse(&lesson, MAX_LESSON_BYTES + 1);
    let out = ringlab(&["check", &lessons.display().to_string()], &home);
    says_too_big(&out, &lesson, MAX_LESSON_BYTES);

    let progress = dir.path().join("progress.json");
    sparse(&progress, MAX_PROGRESS_BYTES + 1);
    let out = ringlab(
        &["progress", "import", &progress.display().to_string()],
        &home,
    );
    says_too_big(&out, &progress, MAX_PROGRESS_BYTES);

    // The app's own progress file past the limit is moved aside, kept, and the app starts.
    std::fs::create_dir_all(&home).expect("home");
    let own = home.join(ringlab::study::progress::FILE_NAME);
    sparse(&own, MAX_PROGRESS_BYTES + 1);
    let out = ringlab(&["stats", "--json"], &home);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("over the"), "{err}");
    let kept = std::fs::read_dir(&home).expect("home").flatten().any(|e| {
        e.file_name().to_string_lossy().contains("quarantined")
            && e.metadata()
                .is_ok_and(|m| m.len() == MAX_PROGRESS_BYTES + 1)
    });
    assert!(kept, "the oversized file is kept beside, not lost");
}

/// Run `cmd` under an address-space limit of `limit` bytes; its exit status and peak resident
/// size in bytes (getrusage of the child, from wait4).
fn run_limited(cmd: &mut Command, limit: u64) -> (i32, u64) {
    // SAFETY: setrlimit is async-signal-safe; the closure touches nothing else.
    unsafe {
        cmd.pre_exec(move || {
            let r = libc::rlimit {
                rlim_cur: limit,
                rlim_max: limit,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &r) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = cmd
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn");
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value for wait4 to fill.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waits for our own child, which std's Child will not wait for again (it is
    // forgotten below).
    let pid = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    std::mem::forget(child);
    assert!(pid > 0, "wait4: {}", std::io::Error::last_os_error());
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    };
    (code, usage.ru_maxrss as u64 * 1024)
}

#[test]
fn a_large_log_is_read_in_memory_proportional_to_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sample = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/nccl_logs/docker0-two-nodes.log"
    ))
    .expect("fixture");
    // 8 MiB of a real log: the docker0 fixture again and again.
    let size: usize = 8 << 20;
    let mut big = Vec::with_capacity(size + sample.len());
    while big.len() < size {
        big.extend_from_slice(&sample);
    }
    let log = dir.path().join("big.log");
    std::fs::write(&log, &big).expect("write");
    let limit = 24 * big.len() as u64 + (1 << 30);
    let (code, peak) = run_limited(
        Command::new(env!("CARGO_BIN_EXE_ringlab")).args([
            "doctor",
            "--log",
            &log.display().to_string(),
        ]),
        limit,
    );
    // 1: findings (the docker0 trap), read whole under the limit.
    assert_eq!(
        code, 1,
        "doctor read the log under a {limit}-byte address-space limit"
    );
    assert!(
        peak < 20 * big.len() as u64 + (64 << 20),
        "peak resident {peak} bytes for a {}-byte log",
        big.len()
    );
    eprintln!(
        "doctor --log on {} MiB: peak resident {} MiB ({:.1}x the log)",
        big.len() >> 20,
        peak >> 20,
        peak as f64 / big.len() as f64
    );
}

/// The memory refusal echoes -e as a size, not only in bytes (L27).
#[test]
fn the_memory_refusal_names_the_size_as_written() {
    let e = ringlab::lab::bench::MemoryError::Host {
        max: 4 << 30,
        per_rank: 5 * (4 << 30),
        buffers: 5,
        local_ranks: 2,
        need: 10 * (4 << 30),
        available: 8 << 30,
    };
    let said = e.to_string();
    assert!(said.starts_with("-e 4 GiB (4294967296 B) needs"), "{said}");
}
