//! scripts/gpu-check.sh brings its evidence back whatever happens: a dry run on a machine
//! without a GPU, a step that hangs, and a TERM in the middle each end with summary.txt (every
//! step's line, then one RESULT line matching the exit status) and logs.tar.gz; run against
//! the CPU stand-ins of libcuda and libnccl it passes. The budget and
//! the step cap are small here, so on a GPU machine too this tests the script, not NCCL.

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

fn script(out: &Path, env: &[(&str, &str)]) -> Command {
    let mut c = Command::new("bash");
    c.arg(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/gpu-check.sh"))
        .arg(out)
        .env("RINGLAB_BIN", env!("CARGO_BIN_EXE_ringlab"))
        .env("GPU_CHECK_BUDGET", "60")
        .env("GPU_CHECK_STEP_CAP", "8")
        .envs(env.iter().copied());
    c
}

fn summary(out: &Path) -> String {
    std::fs::read_to_string(out.join("summary.txt")).expect("summary.txt")
}

/// The last line is the RESULT and the exit status agrees with it.
fn result_matches(out: &Path, run: &Output) -> String {
    let s = summary(out);
    let last = s.lines().last().unwrap_or("").to_string();
    assert!(last.starts_with("RESULT: "), "{s}");
    let want = if last == "RESULT: PASS" {
        0
    } else if last.starts_with("RESULT: INCONCLUSIVE") {
        3
    } else {
        1
    };
    assert_eq!(run.status.code(), Some(want), "{s}");
    s
}

fn packed(out: &Path) -> Vec<String> {
    let list = Command::new("tar")
        .arg("-tzf")
        .arg(out.join("logs.tar.gz"))
        .output()
        .expect("tar");
    assert!(list.status.success(), "logs.tar.gz is a readable archive");
    String::from_utf8_lossy(&list.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn a_dry_run_and_a_hanging_step_each_end_with_a_result_and_the_logs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("dry");
    let run = script(&out, &[]).output().expect("run the script");
    let s = result_matches(&out, &run);
    for name in [
        "env",
        "doctor",
        "doctor-json",
        "smoke-sanity-1",
        "sanity-2-shared",
        "bench-sweep",
    ] {
        assert!(
            s.lines().any(|l| l.starts_with(name)),
            "{name} has its line:\n{s}"
        );
    }
    let files = packed(&out);
    assert!(files.iter().any(|f| f.ends_with("doctor.out")), "{files:?}");

    // A step that never ends is stopped at its cap; every other step still reports.
    let out = dir.path().join("hang");
    let run = script(
        &out,
        &[("GPU_CHECK_HANG", "doctor"), ("GPU_CHECK_STEP_CAP", "2")],
    )
    .output()
    .expect("run the script");
    let s = result_matches(&out, &run);
    assert!(s.contains("RESULT: FAIL"), "{s}");
    let doctor = s
        .lines()
        .find(|l| l.starts_with("doctor "))
        .expect("doctor line");
    assert!(doctor.contains("TIMEOUT after 2s"), "{s}");
    for name in ["env", "doctor-json", "smoke-sanity-1", "sanity-2-shared"] {
        assert!(
            s.lines().any(|l| l.starts_with(name)),
            "{name} after the hang:\n{s}"
        );
    }
    assert!(!packed(&out).is_empty());
}

#[test]
fn a_term_in_the_middle_still_brings_back_the_summary_and_the_logs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("term");
    let mut child = script(
        &out,
        &[("GPU_CHECK_HANG", "doctor"), ("GPU_CHECK_STEP_CAP", "60")],
    )
    .spawn()
    .expect("start the script");
    // Wait until it is inside the hanging step.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !std::fs::read_to_string(out.join("summary.txt")).is_ok_and(|s| s.contains("env ")) {
        assert!(Instant::now() < deadline, "the script never got past env");
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(500));
    // SAFETY: kill on our own child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let t0 = Instant::now();
    let status = child.wait().expect("wait");
    assert!(
        // Relative to the step's own cap (GPU_CHECK_STEP_CAP=60 above), not to the runner's speed.
        t0.elapsed() < Duration::from_secs(60) / 2,
        "the trap ran at once, not after the 60 s step"
    );
    assert_eq!(status.code(), Some(1));
    let s = summary(&out);
    assert!(
        s.lines().last() == Some("RESULT: FAIL (stopped by a signal)"),
        "{s}"
    );
    assert!(packed(&out).iter().any(|f| f.ends_with("env.out")));
}

/// A venv whose python3 is a stand-in for torch: `import torch` exits `import_rc`; anything
/// else (the anchor under torch.distributed.run) prints one anchor row.
fn fake_torch_venv(dir: &Path, import_rc: i32) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let venv = dir.join("venv");
    std::fs::create_dir_all(venv.join("bin")).expect("mkdir");
    let py = venv.join("bin/python3");
    std::fs::write(
        &py,
        format!(
            "#!/bin/sh\ncase \"$*\" in\n  *'import torch'*) exit {import_rc} ;;\n  *) echo '{{\"size\": 8, \"busbw_gbps\": 1.0, \"correct\": true}}' ;;\nesac\n"
        ),
    )
    .expect("write python3");
    std::fs::set_permissions(&py, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    venv
}

/// M2: the torch anchor is the control, so it runs even when sanity-2-shared failed (here: no
/// GPU); L7: a torch venv that does not import fails the check instead of dropping the anchor
/// silently.
#[test]
fn the_torch_anchor_runs_whatever_sanity_said_and_a_broken_torch_fails() {
    let dir = tempfile::tempdir().expect("tempdir");
    let venv = fake_torch_venv(dir.path(), 0);
    let out = dir.path().join("anchor");
    let run = script(&out, &[("VIRTUAL_ENV", venv.to_str().expect("utf-8"))])
        .output()
        .expect("run the script");
    let s = result_matches(&out, &run);
    assert!(
        s.lines()
            .any(|l| l.starts_with("torch-anchor-short") && l.contains("exit 0")),
        "the short anchor runs, whatever sanity-2-shared said:\n{s}"
    );

    let broken = tempfile::tempdir().expect("tempdir");
    let venv = fake_torch_venv(broken.path(), 1);
    let out = broken.path().join("broken");
    let run = script(&out, &[("VIRTUAL_ENV", venv.to_str().expect("utf-8"))])
        .output()
        .expect("run the script");
    let s = result_matches(&out, &run);
    assert!(s.contains("'import torch' fails"), "{s}");
    let last = s.lines().last().unwrap_or("");
    assert!(
        last.starts_with("RESULT: FAIL") && last.contains("torch-import"),
        "{s}"
    );
}

/// M3: a step the budget cannot fit makes the result INCONCLUSIVE (exit 3), not a FAIL.
#[test]
fn a_spent_budget_is_inconclusive_not_a_failure() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("spent");
    let run = script(&out, &[("GPU_CHECK_BUDGET", "3")])
        .output()
        .expect("run the script");
    let s = result_matches(&out, &run);
    assert!(s.contains("SKIPPED   (the 3s budget is spent)"), "{s}");
    let last = s.lines().last().unwrap_or("");
    assert!(
        last.starts_with("RESULT: INCONCLUSIVE") && last.contains(":no-time"),
        "{s}"
    );
}
