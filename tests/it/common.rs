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
