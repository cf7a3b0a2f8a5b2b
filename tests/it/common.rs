//! What several test modules share now that they run side by side in one process.

use std::process::Command;
use std::sync::{Mutex, MutexGuard};

/// Tests that stage network-namespace clusters (`rlab-*`), or take every cluster down
/// (`lab cleanup`), or count the machine's namespace holders, hold this, one at a time.
static CLUSTERS: Mutex<()> = Mutex::new(());

pub fn clusters() -> MutexGuard<'static, ()> {
    CLUSTERS.lock().unwrap_or_else(|e| e.into_inner())
}

/// The variable a test puts on a process it starts: the launcher's ranks and namespace
/// holders inherit it, so a leftover check counts that test's processes and no other's.
const TAG_ENV: &str = "RINGLAB_TEST_TAG";

/// `cmd`, marked with `tag` (unique to the test).
pub fn tag<'a>(cmd: &'a mut Command, tag: &str) -> &'a mut Command {
    cmd.env(TAG_ENV, tag)
}

/// `VAR=value` for a shell command line that starts a tagged process.
pub fn tag_assignment(tag: &str) -> String {
    format!("{TAG_ENV}={tag}")
}

/// Live processes marked with `tag` whose command line has the argument `arg` (`__rank`,
/// `__netns-holder`).
pub fn tagged(tag: &str, arg: &str) -> Vec<u32> {
    let want = format!("{TAG_ENV}={tag}");
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse::<u32>().ok())
        .filter(|pid| {
            let has = |file: &str, what: &str| {
                std::fs::read(format!("/proc/{pid}/{file}"))
                    .is_ok_and(|c| c.split(|&b| b == 0).any(|a| a == what.as_bytes()))
            };
            has("cmdline", arg) && has("environ", &want)
        })
        .collect()
}

/// Tests that make or remove local accounts, or change who is in a group, hold this, one at a
/// time: useradd and userdel refuse to run while another holds /etc/passwd's lock, and one
/// test's accounts must not turn up as members in another's groups.
static ACCOUNTS: Mutex<()> = Mutex::new(());

pub fn accounts() -> MutexGuard<'static, ()> {
    ACCOUNTS.lock().unwrap_or_else(|e| e.into_inner())
}

/// A second real local account for a test (another uid, no home, no login shell), removed
/// when dropped, whatever the test does. Only root can make one: `make` is None otherwise,
/// or where `useradd`/`runuser` are missing. Hold [`accounts`] around its life.
pub struct Stranger {
    pub name: String,
    pub uid: u32,
}

impl Stranger {
    pub fn make(tag: &str) -> Option<Self> {
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        let have = |c: &str| Command::new(c).arg("--help").output().is_ok();
        if !root || !have("useradd") || !have("runuser") {
            return None;
        }
        let name = format!("rlabt-{tag}-{}", std::process::id() % 100_000);
        let _ = Command::new("userdel").arg(&name).output();
        let made = Command::new("useradd")
            .args(["-M", "-N", "-s", "/usr/sbin/nologin", &name])
            .output()
            .expect("useradd");
        assert!(made.status.success(), "useradd {name}: {made:?}");
        let id = Command::new("id").args(["-u", &name]).output().expect("id");
        let uid = String::from_utf8_lossy(&id.stdout)
            .trim()
            .parse()
            .unwrap_or_else(|e| panic!("id -u {name}: {e}: {id:?}"));
        Some(Self { name, uid })
    }

    /// `args` run as this account (`runuser -u`); its output, after asserting it succeeded.
    pub fn run(&self, args: &[&str]) -> std::process::Output {
        let out = Command::new("runuser")
            .args(["-u", &self.name, "--"])
            .args(args)
            .output()
            .expect("runuser");
        assert!(out.status.success(), "as {}: {args:?}: {out:?}", self.name);
        out
    }
}

impl Drop for Stranger {
    fn drop(&mut self) {
        let _ = Command::new("userdel").arg(&self.name).output();
    }
}

/// `ringlab ARGS` as rank `rank` of a two-rank torchrun-style job on this host's loopback
/// (RANK, WORLD_SIZE, LOCAL_*, MASTER_*, no RINGLAB_TOKEN). `one_per_node`: each rank a node
/// of its own, as on two hosts.
pub fn torchrun_rank(args: &[&str], rank: usize, one_per_node: bool, port: u16) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_ringlab"));
    let (local_rank, local_size) = if one_per_node {
        ("0".to_string(), "1")
    } else {
        (rank.to_string(), "2")
    };
    c.args(args)
        .env_remove("RINGLAB_TOKEN")
        .env("RANK", rank.to_string())
        .env("WORLD_SIZE", "2")
        .env("LOCAL_RANK", local_rank)
        .env("LOCAL_WORLD_SIZE", local_size)
        .env("MASTER_ADDR", "127.0.0.1")
        .env("MASTER_PORT", port.to_string());
    c
}

/// Whether this test may do what needs root here. Not root: under CI (`CI` set, as `.ci/run`
/// sets it, and CI runs as root) that is a failure, not a silent pass; elsewhere the test says
/// on stderr that it did not run, and the caller returns.
pub fn require_root(what: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "{what} needs root, and CI runs as root: this run is not root"
    );
    eprintln!("SKIPPED (needs root): {what}");
    false
}

/// Polls `cond` until it holds, for at most `patience` (a guard against a broken build waiting
/// forever, not a claim about speed: pick it well above any loaded runner's worst case). Returns
/// whether it held. The condition is the synchronisation; no fixed sleep stands in for it.
pub fn wait_until(patience: std::time::Duration, mut cond: impl FnMut() -> bool) -> bool {
    let start = std::time::Instant::now();
    let mut pause = std::time::Duration::from_millis(1);
    loop {
        if cond() {
            return true;
        }
        if start.elapsed() > patience {
            return false;
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(std::time::Duration::from_millis(50));
    }
}

/// Whether the slow tier runs: on CI (`CI` set, as `.ci/run` sets it) and wherever
/// `RINGLAB_SLOW_TESTS=1`. A plain `cargo test` on a laptop runs the fast tier: every test, the
/// property tests and fuzzers with fewer cases, the repeated runs once.
pub fn slow_tier() -> bool {
    let on = |v: &str| std::env::var(v).is_ok_and(|s| !s.is_empty() && s != "0");
    on("CI") || on("RINGLAB_SLOW_TESTS")
}

/// Cases for a property test or fuzzer: `full` in the slow tier, an eighth (at least 16) in the
/// fast one.
pub fn cases(full: u32) -> u32 {
    if slow_tier() {
        full
    } else {
        (full / 8).max(16)
    }
}

/// Repetitions of a run that catch a rare failure: `full` in the slow tier, at most six (every
/// victim and transport pairing of the loops that cycle them) in the fast one.
pub fn repeats(full: usize) -> usize {
    if slow_tier() { full } else { full.min(6) }
}
