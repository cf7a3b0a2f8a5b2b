//! Progress is never lost: a process saving in a loop is SIGKILLed at random moments hundreds
//! of times, and the file is always a whole progress file (the old state or the new one),
//! never corrupt, empty or gone backwards. Plus export / import through the CLI.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ringlab::study::progress::{self, Progress};

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_ringlab")
}

/// A small xorshift generator: random kill moments without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn read_whole(dir: &Path) -> Option<Progress> {
    let path = dir.join(progress::FILE_NAME);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => panic!("cannot read {}: {e}", path.display()),
    };
    assert!(!text.trim().is_empty(), "progress file is empty");
    let p: Progress = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("progress file is corrupt ({e}):\n{text}"));
    assert_eq!(p.schema, progress::SCHEMA);
    Some(p)
}

#[test]
fn sigkill_at_random_moments_never_corrupts_progress() {
    let dir = tempfile::tempdir().expect("tempdir");
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64)
        | 1;
    let mut rng = Rng(seed);
    let start = Instant::now();
    let (mut kills, mut last) = (0u32, 0usize);
    while kills < 400 && start.elapsed() < Duration::from_secs(15) {
        let mut child = Command::new(bin())
            .arg("__progress-stress")
            .arg(dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn the writer");
        std::thread::sleep(Duration::from_micros(rng.next() % 25_000));
        if let Some(status) = child.try_wait().expect("poll") {
            let out = child.wait_with_output().expect("output");
            panic!(
                "the writer stopped on its own ({status}): {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        child.kill().expect("SIGKILL");
        child.wait().expect("reap");
        kills += 1;
        if let Some(p) = read_whole(dir.path()) {
            let n = p.review_count();
            assert!(
                n >= last,
                "progress went backwards: {n} < {last} (seed {seed})"
            );
            last = n;
        }
    }
    eprintln!("{kills} kills, {last} saves survived (seed {seed})");
    assert!(kills >= 100, "only {kills} kills in the time allowed");
    assert!(last > 0, "the writer never finished a save");
    // Loading is clean: nothing quarantined, nothing migrated.
    let (p, notice) = progress::load(dir.path()).expect("load");
    assert_eq!(notice, None);
    assert_eq!(p.review_count(), last);
    let quarantined = std::fs::read_dir(dir.path())
        .expect("list")
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().contains("quarantined"))
        .count();
    assert_eq!(quarantined, 0);
}

#[test]
fn export_then_import_merges_and_the_newer_review_wins() {
    let home = tempfile::tempdir().expect("home");
    let other = tempfile::tempdir().expect("other");
    let run = |home: &Path, args: &[&str]| {
        let out = Command::new(bin())
            .args(args)
            .env("RINGLAB_HOME", home)
            .output()
            .expect("run ringlab");
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    // Two machines' histories, written by the stress writer (3 and 5 reviews).
    for (dir, n) in [(home.path(), "3"), (other.path(), "5")] {
        let out = Command::new(bin())
            .args([
                "__progress-stress",
                &dir.display().to_string(),
                "--iterations",
                n,
            ])
            .output()
            .expect("run");
        assert!(out.status.success());
    }
    let file = other.path().join("export.json");
    let msg = run(
        other.path(),
        &["progress", "export", &file.display().to_string()],
    );
    assert!(msg.contains("5 reviews"), "{msg}");
    let msg = run(
        home.path(),
        &["progress", "import", &file.display().to_string()],
    );
    assert!(msg.contains("imported"), "{msg}");
    let (p, _) = progress::load(home.path()).expect("load");
    // stress-0..2 are on both sides (the other's are newer); stress-3, stress-4 are new.
    assert_eq!(p.items.len(), 5);
    assert_eq!(p.review_count(), 8);
    let theirs = progress::read_file(&file).expect("export reads back");
    for id in ["stress-0", "stress-1", "stress-2"] {
        assert_eq!(p.items[id].card, theirs.items[id].card, "{id}: newer wins");
    }
    // Importing the same file again changes nothing.
    run(
        home.path(),
        &["progress", "import", &file.display().to_string()],
    );
    let (q, _) = progress::load(home.path()).expect("load");
    assert_eq!(q, p);
}

#[test]
fn importing_a_corrupt_file_is_a_clear_error_and_keeps_progress() {
    let home = tempfile::tempdir().expect("home");
    let bad = home.path().join("bad.json");
    std::fs::write(&bad, "{ nope").expect("write");
    let out = Command::new(bin())
        .args(["progress", "import", &bad.display().to_string()])
        .env("RINGLAB_HOME", home.path())
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bad.json") && err.contains("not valid JSON"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    assert!(bad.exists(), "the file is left where it was");
}

/// A progress file with `n` items named `{prefix}-{i}`, one review each.
fn items_file(path: &Path, prefix: &str, n: usize) {
    let dir = tempfile::tempdir().expect("tmp");
    let out = Command::new(bin())
        .args([
            "__progress-stress",
            &dir.path().display().to_string(),
            "--iterations",
            "1",
        ])
        .output()
        .expect("run");
    assert!(out.status.success());
    let (one, _) = progress::load(dir.path()).expect("load");
    let rec = one.items.values().next().expect("one item").clone();
    let mut p = Progress::default();
    for i in 0..n {
        p.items.insert(format!("{prefix}-{i}"), rec.clone());
    }
    progress::write_file(path, &p, false).expect("write");
}

#[test]
fn two_ringlabs_saving_at_once_lose_nothing() {
    let files = tempfile::tempdir().expect("files");
    let a = files.path().join("a.json");
    let b = files.path().join("b.json");
    items_file(&a, "a", 400);
    items_file(&b, "b", 400);
    for round in 0..10 {
        let home = tempfile::tempdir().expect("home");
        let spawn = |f: &Path| {
            Command::new(bin())
                .args(["progress", "import", &f.display().to_string()])
                .env("RINGLAB_HOME", home.path())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn")
        };
        let (x, y) = (spawn(&a), spawn(&b));
        for c in [x, y] {
            let out = c.wait_with_output().expect("wait");
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let (p, _) = progress::load(home.path()).expect("load");
        assert_eq!(p.items.len(), 800, "round {round}: an import was lost");
    }
}

#[test]
fn export_keeps_an_existing_file_unless_forced() {
    let home = tempfile::tempdir().expect("home");
    let file = home.path().join("out.json");
    std::fs::write(&file, "precious").expect("write");
    let run = |extra: &[&str]| {
        Command::new(bin())
            .args(["progress", "export", &file.display().to_string()])
            .args(extra)
            .env("RINGLAB_HOME", home.path())
            .output()
            .expect("run")
    };
    let out = run(&[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--force"));
    assert_eq!(std::fs::read_to_string(&file).expect("read"), "precious");
    assert!(run(&["--force"]).status.success());
    assert!(progress::read_file(&file).is_ok());
}

/// `progress export` into a folder that does not exist is refused, as `export sanity-script
/// --out` is: no folder is made for a mistyped path.
#[test]
fn export_refuses_a_missing_folder_and_makes_none() {
    let home = tempfile::tempdir().expect("home");
    let file = home.path().join("no-such-dir/sub/x.json");
    let out = Command::new(bin())
        .args(["progress", "export", &file.display().to_string()])
        .env("RINGLAB_HOME", home.path())
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no-such-dir/sub/x.json"), "{err}");
    assert!(!home.path().join("no-such-dir").exists(), "no folder made");
}

/// Importing one's own export: every item is "unchanged (identical)", none "kept (newer
/// here)".
#[test]
fn importing_your_own_export_says_unchanged() {
    let home = tempfile::tempdir().expect("home");
    let mut p = Progress::default();
    let now = chrono::Utc::now();
    for id in ["a", "b"] {
        p.record_review(
            id,
            ringlab::course::grade::SelfGrade::Good,
            Some(true),
            "quiz",
            None,
            now,
        );
    }
    progress::save(home.path(), &mut p).expect("save");
    let file = home.path().join("x.json");
    let run = |verb: &str| {
        Command::new(bin())
            .args(["progress", verb, &file.display().to_string()])
            .env("RINGLAB_HOME", home.path())
            .output()
            .expect("run")
    };
    assert!(run("export").status.success());
    let out = run("import");
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("0 kept (newer here), 2 unchanged (identical)"),
        "{err}"
    );
}

#[test]
fn stats_json_warns_when_progress_cannot_be_saved() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    let base = tempfile::tempdir().expect("tmp");
    std::fs::set_permissions(base.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let home = base.path().join("home");
    std::fs::create_dir(&home).expect("mkdir");
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    // A copy of the binary that another user may run (the build folder may be private).
    let exe = base.path().join("ringlab");
    std::fs::copy(bin(), &exe).expect("copy");
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let mut cmd = Command::new(&exe);
    cmd.args(["stats", "--json"])
        .env("RINGLAB_HOME", &home)
        .env("HOME", base.path());
    if root {
        // Root may write anywhere: ask as nobody, for whom a root-owned 0755 folder is read-only.
        std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        cmd.uid(65534).gid(65534);
    } else {
        std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o555)).expect("chmod");
    }
    let out = cmd.output().expect("run");
    let _ = std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o755));
    assert!(out.status.success(), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let w = v["warnings"].as_array().expect("warnings");
    assert!(
        w.iter()
            .any(|x| x.as_str().is_some_and(|s| s.contains("read-only"))),
        "{v:#}"
    );
}

/// `ringlab ARGS` with `home` as its home, given `secs` to finish (a read that blocks is
/// killed and fails the test); its exit code and stderr.
fn run_within(home: &Path, args: &[&str], secs: u64) -> (Option<i32>, String) {
    use std::io::Read;
    let mut child = Command::new(bin())
        .args(args)
        .env("RINGLAB_HOME", home)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let deadline = Instant::now() + Duration::from_secs(secs);
    let status = loop {
        if let Some(s) = child.try_wait().expect("poll") {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{args:?} still running after {secs} s (blocked on a FIFO?)");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        e.read_to_string(&mut err).expect("stderr");
    }
    (status.code(), err)
}

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.to_str().expect("utf-8")).expect("c");
    // SAFETY: mkfifo with a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

/// A FIFO where a file is read (no writer ever comes) is refused at once: given to `progress
/// import`, `doctor --log`, `check`, or standing at ringlab's own progress.json (which blocked
/// every command that loads progress before: it was checked by name, then read).
#[test]
fn a_fifo_is_refused_at_once_wherever_a_file_is_read() {
    let home = tempfile::tempdir().expect("home");
    let fifo = home.path().join("fifo");
    mkfifo(&fifo);
    let f = fifo.display().to_string();
    for args in [
        &["progress", "import", &f][..],
        &["doctor", "--log", &f][..],
        &["check", &f][..],
    ] {
        let (code, err) = run_within(home.path(), args, 20);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(err.contains("not a regular file"), "{args:?}: {err}");
    }
    mkfifo(&home.path().join(progress::FILE_NAME));
    let out = home.path().join("out.json").display().to_string();
    let (code, err) = run_within(home.path(), &["progress", "export", &out], 20);
    assert_ne!(code, Some(0), "{err}");
    assert!(err.contains("not a regular file"), "{err}");
    assert_eq!(
        err.matches("not a regular file").count(),
        1,
        "said once: {err}"
    );
}

/// A progress file that starts with a UTF-8 byte order mark (an editor saved it so) loads,
/// is not moved aside, and imports.
#[test]
fn a_progress_file_with_a_byte_order_mark_loads() {
    let home = tempfile::tempdir().expect("home");
    let files = tempfile::tempdir().expect("files");
    let plain = files.path().join("plain.json");
    items_file(&plain, "bom", 3);
    let mut bytes = b"\xef\xbb\xbf".to_vec();
    bytes.extend(std::fs::read(&plain).expect("read"));
    std::fs::write(home.path().join(progress::FILE_NAME), &bytes).expect("write");
    let out = files.path().join("out.json").display().to_string();
    let (code, err) = run_within(home.path(), &["progress", "export", &out], 30);
    assert_eq!(code, Some(0), "{err}");
    assert!(!err.contains("quarantined"), "{err}");
    assert!(err.contains("3 item(s)"), "{err}");
    assert!(
        home.path().join(progress::FILE_NAME).exists(),
        "not moved aside"
    );
    let other = tempfile::tempdir().expect("other");
    let bom = files.path().join("bom.json");
    std::fs::write(&bom, &bytes).expect("write");
    let (code, err) = run_within(
        other.path(),
        &["progress", "import", &bom.display().to_string()],
        30,
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("3 new item(s)"), "{err}");
}

/// An import within the 16 MiB a file may be, but past what progress may hold (here one item
/// with 10 001 reviews, and an id of 300 bytes), is refused with the reason and the limit,
/// and the progress there is as it was: nothing is saved that the next start would set aside.
#[test]
fn an_oversized_import_is_refused_with_a_reason() {
    let home = tempfile::tempdir().expect("home");
    let files = tempfile::tempdir().expect("files");
    let mine = files.path().join("mine.json");
    items_file(&mine, "mine", 2);
    let m = mine.display().to_string();
    assert_eq!(
        run_within(home.path(), &["progress", "import", &m], 30).0,
        Some(0)
    );
    let saved = std::fs::read(home.path().join(progress::FILE_NAME)).expect("saved");

    let (p, _) = progress::load(home.path()).expect("load");
    let one = p.items.values().next().expect("an item").clone();
    let mut busy = one.clone();
    busy.reviews = (0..10_001)
        .map(|i| {
            let mut r = one.reviews[0].clone();
            r.at += chrono::Duration::minutes(i);
            r
        })
        .collect();
    let mut big = Progress::default();
    big.items.insert("busy".into(), busy);
    let file = files.path().join("big.json");
    std::fs::write(&file, serde_json::to_vec(&big).expect("json")).expect("write");
    let (code, err) = run_within(
        home.path(),
        &["progress", "import", &file.display().to_string()],
        60,
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("10001 reviews") && err.contains("over the 10000"),
        "{err}"
    );
    let mut long = Progress::default();
    long.items.insert("x".repeat(300), one);
    std::fs::write(&file, serde_json::to_vec(&long).expect("json")).expect("write");
    let (code, err) = run_within(
        home.path(),
        &["progress", "import", &file.display().to_string()],
        30,
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("300 bytes") && err.contains("at most 256"),
        "{err}"
    );
    assert_eq!(
        std::fs::read(home.path().join(progress::FILE_NAME)).expect("read"),
        saved,
        "progress as it was"
    );
}
