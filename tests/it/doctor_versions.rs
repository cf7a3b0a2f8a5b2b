//! `ringlab doctor --log` on logs of three NCCL releases: each release's retry and bootstrap
//! line forms are recognised, and the report says which release range the log looks like.
//! Forms: NVIDIA/nccl src/bootstrap.cc and src/misc/socket.cc at v2.21.5-1, v2.25.1-1, v2.27.3-1.

use std::process::Command;

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/nccl_logs");

fn run(name: &str, json: bool) -> (String, i32) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ringlab"));
    cmd.args(["doctor", "--log"]).arg(format!("{DIR}/{name}"));
    if json {
        cmd.arg("--json");
    }
    let out = cmd.output().expect("run ringlab");
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        out.status.code().expect("exit code"),
    )
}

fn json(name: &str) -> serde_json::Value {
    let (out, code) = run(name, true);
    assert_eq!(code, 1, "{out}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("bad JSON ({e}): {out}"))
}

fn retry(v: &serde_json::Value) -> &serde_json::Value {
    v["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .find(|f| f["kind"] == "connect-retry")
        .unwrap_or_else(|| panic!("no connect-retry in {v}"))
}

fn evidence_lines(f: &serde_json::Value) -> Vec<u64> {
    f["evidence"]
        .as_array()
        .expect("evidence")
        .iter()
        .map(|e| e[1].as_u64().expect("line"))
        .collect()
}

#[test]
fn nccl_2_21_legacy_lines_docker0_and_the_give_up() {
    let v = json("nccl-2.21-docker0.log");
    let rel = &v["nccl_release"];
    assert_eq!(rel["consistent"], true, "{rel}");
    let s = rel["summary"].as_str().expect("summary");
    assert!(s.contains("look like NCCL 2.21"), "{s}");
    assert!(s.contains("`Bootstrap : Using …` (NCCL 2.8-2.23)"), "{s}");
    let kinds: Vec<&str> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["local-interface", "connect-retry"]);
    let r = retry(&v);
    let s = r["summary"].as_str().unwrap();
    assert!(s.contains("gpu-b") && s.contains("does not print"), "{s}");
    assert!(
        s.contains("about 3000 attempts") && s.contains("gave up"),
        "{s}"
    );
    assert_eq!(evidence_lines(r), [4, 6, 7]);
}

#[test]
fn nccl_2_25_counted_lines_without_address() {
    let v = json("nccl-2.25-retry.log");
    let s = v["nccl_release"]["summary"].as_str().unwrap();
    assert!(s.contains("look like NCCL 2.25"), "{s}");
    assert!(s.contains("(no address) (NCCL 2.24-2.26)"), "{s}");
    let r = retry(&v);
    let s = r["summary"].as_str().unwrap();
    assert!(
        s.contains("reached 3/34") && s.contains("does not print"),
        "{s}"
    );
    assert_eq!(evidence_lines(r), [6, 8]);
}

#[test]
fn nccl_2_27_lines_name_the_address() {
    let v = json("nccl-2.27-retry.log");
    let s = v["nccl_release"]["summary"].as_str().unwrap();
    assert!(s.contains("look like NCCL 2.27"), "{s}");
    let r = retry(&v);
    let s = r["summary"].as_str().unwrap();
    assert!(
        s.contains("connect to 10.3.0.1<41877>") && s.contains("gave up"),
        "{s}"
    );
    assert!(r["fix"].as_str().unwrap().contains("nothing listens"));
    assert_eq!(evidence_lines(r), [6, 7, 8]);
}

#[test]
fn text_output_names_the_release_with_its_lines() {
    let (out, code) = run("nccl-2.25-retry.log", false);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("NCCL release: these logs look like NCCL 2.25"),
        "{out}"
    );
    assert!(
        out.contains("nccl-2.25-retry.log:3: node0:7001:7001"),
        "{out}"
    );
    // A log without a line that tells says nothing about the release.
    let dir = tempfile::tempdir().expect("tmp");
    let log = dir.path().join("quiet.log");
    std::fs::write(
        &log,
        "a:1:1 [0] NCCL INFO NCCL_P2P_DISABLE set by environment to 1.\n",
    )
    .expect("write");
    let out = Command::new(env!("CARGO_BIN_EXE_ringlab"))
        .args(["doctor", "--log"])
        .arg(&log)
        .output()
        .expect("run");
    let out = String::from_utf8_lossy(&out.stdout);
    assert!(out.contains("[p2p-disabled]"), "{out}");
    assert!(!out.contains("NCCL release:"), "{out}");
}

#[test]
fn the_healthy_fixture_is_one_release() {
    let (out, code) = run("healthy.log", true);
    assert_eq!(code, 0, "{out}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(v["nccl_release"]["consistent"], true, "{v}");
}

#[test]
fn the_shm_line_form_narrows_the_release() {
    // `via SHM/direct/direct` is NCCL 2.29 or earlier (src/transport/shm.cc@v2.29.7-1); with
    // the version line the log is consistent with 2.27.
    let v = json("nvlink-p2p-off.log");
    let rel = &v["nccl_release"];
    assert_eq!(rel["consistent"], true, "{rel}");
    let s = rel["summary"].as_str().expect("summary");
    assert!(s.contains("`via SHM/…/…` (NCCL 2.29 or earlier)"), "{s}");
    assert!(s.contains("look like NCCL 2.27"), "{s}");
}

/// A real-shaped 2.28 log: the WARN comes after an empty line with a `[%F %T]` timestamp and
/// `misc/socket.cc:582` (src/debug.cc and src/misc/socket.cc at v2.28.9-1), and the error
/// travels up as `file:line -> 6` INFO lines (socket.cc:674 and :723 are the NCCLCHECKs of
/// socketProgressState and ncclSocketConnect there). Read right: two hosts (the timestamp is no
/// host), the release from the banner, the culprit, and the retry count.
#[test]
fn a_2_28_log_with_timestamped_warns_and_error_traces_is_read_right() {
    let v = json("nccl-2.28-docker0.log");
    let rel = &v["nccl_release"];
    assert_eq!(rel["consistent"], true, "{rel}");
    let s = rel["summary"].as_str().expect("summary");
    assert!(s.contains("look like NCCL 2.28"), "{s}");
    assert!(
        s.contains("`NCCL version 2.28.9+cuda13.0` (NCCL 2.28)"),
        "{s}"
    );
    let kinds: Vec<&str> = v["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .map(|f| f["kind"].as_str().expect("kind"))
        .collect();
    assert_eq!(kinds, ["local-interface", "connect-retry"], "{v:#}");
    let local = v["findings"][0]["summary"].as_str().expect("summary");
    assert!(
        local.contains("spans 2 hosts (gpu-a, gpu-b)") && !local.contains("[2026"),
        "{local}"
    );
    let r = retry(&v);
    let s = r["summary"].as_str().expect("summary");
    assert!(
        s.contains("5 retry line(s)") && s.contains("reached 5/34"),
        "{s}"
    );
    assert!(s.contains("gave up"), "{s}");
    // The retries' first and last, and the WARN that ends them (after its empty line).
    assert_eq!(evidence_lines(r), [7, 11, 13]);
}
