//! The NCCL backend from the outside. Without a GPU (CI) every entry point must say so
//! clearly (exit 2, no panic), auto must fall back to tcp and say why, and the launcher must
//! find NCCL the way it would on a GPU machine (a fake library tree). With GPUs (the probe says
//! so) the same tests run the real thing: sanity and a short bench on NCCL.

use std::process::{Command, Output};

fn ringlab(args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ringlab"))
        .args(args)
        .envs(env.iter().copied())
        .output()
        .expect("run ringlab")
}

fn probe() -> serde_json::Value {
    let out = ringlab(&["__gpu-probe"], &[]);
    assert!(out.status.success(), "{out:?}");
    serde_json::from_slice(&out.stdout).expect("probe JSON")
}

fn gpus() -> usize {
    probe()["gpus"].as_array().map_or(0, Vec::len)
}

fn no_panic(out: &Output) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn nccl_bench_and_sanity_report_absence_or_run() {
    for args in [
        &[
            "bench",
            "--backend",
            "nccl",
            "-b",
            "1M",
            "-e",
            "4M",
            "-f",
            "2",
            "-n",
            "5",
        ][..],
        &["sanity", "--backend", "nccl"][..],
    ] {
        let out = ringlab(args, &[]);
        no_panic(&out);
        let err = String::from_utf8_lossy(&out.stderr);
        if gpus() == 0 {
            assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
            assert!(err.contains("needs NVIDIA GPUs and NCCL"), "{err}");
            assert!(err.contains("--backend tcp"), "what still works: {err}");
        } else {
            // A GPU machine: the real NCCL run must pass with 0 wrong.
            assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
            assert!(err.contains("backend nccl"), "{err}");
        }
    }
}

#[test]
fn auto_falls_back_to_tcp_and_says_why() {
    let out = ringlab(&["sanity", "--json"], &[]);
    no_panic(&out);
    let err = String::from_utf8_lossy(&out.stderr);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["pass"], true, "{v:#} {err}");
    if gpus() < 2 {
        assert!(err.contains("# backend tcp (auto:"), "{err}");
    } else {
        assert!(err.contains("# backend nccl (auto"), "{err}");
    }
    // --backend tcp never probes and never mentions the GPU.
    let out = ringlab(&["sanity", "--backend", "tcp"], &[]);
    assert!(out.status.success());
    assert!(!String::from_utf8_lossy(&out.stderr).contains("# backend"));
}

#[test]
fn the_probe_never_panics_and_matches_the_machine() {
    let p = probe();
    if p["driver_lib"] == false {
        assert!(p["gpus"].as_array().is_some_and(Vec::is_empty), "{p:#}");
        assert!(p["driver_version"].is_null());
    }
}

#[test]
fn a_wheel_with_only_libnccl_so_2_is_linked_for_the_ranks() {
    let root = tempfile::tempdir().expect("tmp");
    let lib = root.path().join("site/nvidia/nccl/lib");
    std::fs::create_dir_all(&lib).expect("mkdir");
    std::fs::write(lib.join("libnccl.so.2"), b"not really a library").expect("write");
    let tmp = root.path().join("tmp");
    std::fs::create_dir_all(&tmp).expect("mkdir");
    let out = ringlab(
        &["doctor", "--json"],
        &[
            ("LD_LIBRARY_PATH", lib.to_str().expect("utf-8")),
            ("TMPDIR", tmp.to_str().expect("utf-8")),
        ],
    );
    no_panic(&out);
    assert!(out.status.success(), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let found = v["nccl_found"].as_str().unwrap_or("");
    assert!(found.contains("libnccl.so.2"), "{v:#}");
    assert!(found.contains("LD_LIBRARY_PATH"), "{v:#}");
    let linked = v["nccl_linked_in"].as_str().expect("a private link dir");
    assert!(linked.starts_with(tmp.to_str().expect("utf-8")), "{linked}");
    let link = std::path::Path::new(linked).join("libnccl.so");
    assert_eq!(
        std::fs::read(&link).expect("the link resolves"),
        b"not really a library"
    );
    // The fake library does not load: the probe says so instead of crashing.
    assert_eq!(v["probe"]["nccl_lib"], false, "{v:#}");
}

#[test]
fn a_naive_algorithm_is_refused_for_nccl_or_absence_reported() {
    let out = ringlab(&["bench", "--backend", "nccl", "--algo", "naive"], &[]);
    no_panic(&out);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    if gpus() > 0 {
        assert!(err.contains("NCCL has no such algorithm"), "{err}");
    } else {
        assert!(err.contains("needs NVIDIA GPUs"), "{err}");
    }
}

#[test]
fn single_process_mode_is_nccl_only_and_reports_absence_cleanly() {
    let out = ringlab(&["bench", "--backend", "tcp", "--single-process"], &[]);
    no_panic(&out);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("needs --backend nccl"),
        "{out:?}"
    );
    let out = ringlab(
        &[
            "bench",
            "--backend",
            "nccl",
            "--single-process",
            "-b",
            "1M",
            "-e",
            "1M",
        ],
        &[],
    );
    no_panic(&out);
    if gpus() == 0 {
        assert_eq!(out.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&out.stderr).contains("needs NVIDIA GPUs"));
    } else {
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        assert!(String::from_utf8_lossy(&out.stdout).contains("# Out of bounds values : 0 OK"));
    }
}
