//! The hang lab end to end: every scenario hangs (or fails) as staged, is diagnosed with the
//! right culprit, and passes with its fix, on a real cluster of network namespaces. Needs root
//! (CI runs as root); without it the lab must refuse clearly, and that is what is tested.

use std::process::{Command, Output};
use std::time::{Duration, Instant};

fn ringlab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ringlab"))
        .args(args)
        .output()
        .expect("run ringlab")
}

/// The tests in this file build clusters; one at a time keeps their checks about leftovers
/// meaningful.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn holders() -> Vec<u32> {
    std::fs::read_dir("/proc")
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_string_lossy().parse::<u32>().ok())
                .filter(|pid| {
                    std::fs::read(format!("/proc/{pid}/cmdline"))
                        .map(|c| c.split(|&b| b == 0).any(|a| a == b"__netns-holder"))
                        .unwrap_or(false)
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn every_scenario_hangs_as_staged_and_passes_with_its_fix() {
    let _one_at_a_time = serial();
    if !is_root() {
        let out = ringlab(&["lab", "run", "docker0"]);
        assert_eq!(out.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&out.stderr).contains("run as root"));
        return;
    }
    let list = ringlab(&["lab", "list"]);
    let names: Vec<String> = String::from_utf8_lossy(&list.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect();
    assert!(names.len() >= 6, "{names:?}");
    for name in names {
        let out = ringlab(&["lab", "run", &name, "--fix", "--json"]);
        let text = String::from_utf8_lossy(&out.stdout);
        let v: serde_json::Value =
            serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("{name}: {e}: {text}"));
        assert_eq!(out.status.code(), Some(0), "{name}: {v:#}");
        assert_eq!(v["mode"], "netns");
        let outcome = v["staged"]["outcome"].as_str().unwrap_or("");
        assert!(outcome == "hang" || outcome == "error", "{name}: {v:#}");
        assert!(
            !v["diagnosis"]["culprit"]
                .as_str()
                .unwrap_or("unknown")
                .contains("unknown"),
            "{name}: {v:#}"
        );
        assert!(
            !v["diagnosis"]["interfaces"]
                .as_array()
                .is_none_or(Vec::is_empty),
            "{name}"
        );
        assert_eq!(v["fixed"]["outcome"], "pass", "{name}: {v:#}");
        assert_eq!(v["fixed"]["allreduce_correct"], true, "{name}");
        if outcome == "hang" {
            let after = v["staged"]["detected_after_s"].as_f64().unwrap_or(f64::MAX);
            assert!(after < 15.0, "{name}: detected after {after} s");
        }
    }
    assert!(
        holders().is_empty(),
        "namespace holders left behind: {:?}",
        holders()
    );
}

#[test]
fn docker0_names_the_culprit_with_evidence() {
    let _one_at_a_time = serial();
    if !is_root() {
        return assert_eq!(
            ringlab(&["lab", "run", "docker0", "--json"]).status.code(),
            Some(2)
        );
    }
    let out = ringlab(&["lab", "run", "docker0", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["staged"]["outcome"], "hang");
    assert_eq!(v["diagnosis"]["culprit"], "unroutable-address");
    assert!(
        v["diagnosis"]["explanation"]
            .as_str()
            .unwrap_or("")
            .contains("172.17.0.1"),
        "{v:#}"
    );
    // The matrix shows the trap: each node reaches "its" 172.17.0.1, never the other's.
    let reach = v["diagnosis"]["reachability"].as_array().expect("matrix");
    assert!(
        reach.iter().any(|r| r["result"] == "Connection refused"),
        "{v:#}"
    );
    assert!(v.get("fixed").is_none());
}

#[test]
fn killing_the_launcher_leaves_no_namespace_or_process() {
    let _one_at_a_time = serial();
    if !is_root() {
        return;
    }
    let mut child = Command::new(env!("CARGO_BIN_EXE_ringlab"))
        .args(["lab", "run", "lo-across-nodes", "--timeout", "30"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn");
    let start = Instant::now();
    while holders().len() < 3 && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(holders().len() >= 3, "cluster never came up");
    std::thread::sleep(Duration::from_millis(1500));
    child.kill().expect("SIGKILL the launcher");
    let _ = child.wait();
    let start = Instant::now();
    while !holders().is_empty() && start.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(holders().is_empty(), "holders outlived the launcher");
    let ranks = Command::new("pgrep")
        .args(["-f", "ringlab __rank"])
        .output()
        .expect("pgrep");
    assert!(
        ranks.stdout.is_empty(),
        "ranks outlived the launcher: {}",
        String::from_utf8_lossy(&ranks.stdout)
    );
}

#[test]
fn the_watchdog_gives_no_false_positive_on_healthy_runs() {
    for i in 0..20 {
        let out = ringlab(&[
            "sanity",
            "--nproc-per-node",
            "3",
            "--timeout",
            "3",
            "--json",
        ]);
        assert!(
            out.status.success(),
            "run {i}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn cleanup_is_safe_to_run_any_time() {
    let _one_at_a_time = serial();
    let out = ringlab(&["lab", "cleanup"]);
    assert!(out.status.success());
}

#[test]
fn ctrl_c_in_the_tui_mid_run_leaves_no_namespace_or_process() {
    let _one_at_a_time = serial();
    if !is_root() {
        return;
    }
    let bin = env!("CARGO_BIN_EXE_ringlab");
    let home = std::env::temp_dir().join(format!("ringlab-hang-pty-{}", std::process::id()));
    let mut cmd = Command::new("sh");
    cmd.arg("-c").arg(format!(
        "stty rows 34 cols 110; RINGLAB_HOME={} exec {bin}",
        home.display()
    ));
    let mut p = expectrl::Session::spawn(cmd).expect("pty");
    p.set_expect_timeout(Some(Duration::from_secs(20)));
    p.expect("Course").expect("course map");
    p.send("H").expect("open the hang lab");
    p.expect("docker0").expect("scenario list");
    p.send("\r").expect("stage");
    let start = Instant::now();
    while holders().len() < 3 && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(holders().len() >= 3, "the cluster came up");
    p.send("\x03").expect("Ctrl-C");
    p.expect(expectrl::Eof).expect("app exits");
    let start = Instant::now();
    while !holders().is_empty() && start.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(holders().is_empty(), "namespace holders outlived the app");
    let ranks = Command::new("pgrep")
        .args(["-f", "ringlab __rank"])
        .output()
        .expect("pgrep");
    assert!(ranks.stdout.is_empty(), "ranks outlived the app");
}
