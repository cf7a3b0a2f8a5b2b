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
    let out = ringlab(&["__gpu-probe", "--nccl"], &[]);
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
fn a_wheel_with_only_libnccl_so_2_is_linked_in_a_private_folder_that_goes_with_the_run() {
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
    let name = std::path::Path::new(linked)
        .file_name()
        .and_then(|n| n.to_str())
        .expect("a name");
    assert!(linked.starts_with(tmp.to_str().expect("utf-8")), "{linked}");
    // A fresh random name (src/private.rs): not the old predictable ringlab-nccl-UID.
    assert!(
        name.starts_with("ringlab-nccl-") && name.len() == "ringlab-nccl-".len() + 12,
        "{name}"
    );
    assert!(
        !std::path::Path::new(linked).exists(),
        "the private folder is removed when the run ends"
    );
    // The fake library does not load: the probe says so instead of crashing.
    assert_eq!(v["probe"]["nccl_lib"], false, "{v:#}");
}

/// A stand-in libnccl.so.2 built from C: it answers ncclGetVersion with 2.32.3 and, when it is
/// loaded, its constructor writes a line to $FAKE_NCCL_MARK. None without a C compiler.
fn fake_nccl(dir: &std::path::Path) -> Option<std::path::PathBuf> {
    let src = dir.join("fake.c");
    std::fs::write(
        &src,
        "#include <stdio.h>\n#include <stdlib.h>\n\
         __attribute__((constructor)) static void mark(void) {\n\
           const char *p = getenv(\"FAKE_NCCL_MARK\");\n\
           if (p) { FILE *f = fopen(p, \"a\"); if (f) { fputs(\"loaded\\n\", f); fclose(f); } }\n\
         }\n\
         int ncclGetVersion(int *v) { *v = 23203; return 0; }\n",
    )
    .expect("write");
    let lib = dir.join("libnccl.so.2");
    let ok = Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&lib)
        .arg(&src)
        .status()
        .is_ok_and(|s| s.success());
    ok.then_some(lib)
}

#[test]
fn nccl_is_loaded_only_when_asked_or_with_a_gpu_and_doctor_reports_its_version() {
    if probe()["driver_lib"] == true {
        eprintln!("a driver is present: auto may load NCCL here; the no-GPU rule is not testable");
        return;
    }
    let root = tempfile::tempdir().expect("tmp");
    let Some(lib) = fake_nccl(root.path()) else {
        eprintln!("no C compiler: the load rule is covered by nccl::may_load_nccl's unit test");
        return;
    };
    let mark = root.path().join("loaded");
    let env = [
        ("RINGLAB_NCCL_LIB", lib.to_str().expect("utf-8")),
        ("FAKE_NCCL_MARK", mark.to_str().expect("utf-8")),
    ];
    // auto without a driver: NCCL's code must not run (it could be anyone's library).
    let out = ringlab(&["sanity", "--json"], &env);
    no_panic(&out);
    assert!(out.status.success(), "{out:?}");
    assert!(
        !mark.exists(),
        "sanity --backend auto loaded NCCL without a GPU"
    );
    // doctor is asked to look: it loads NCCL and reports ncclGetVersion.
    let out = ringlab(&["doctor", "--json"], &env);
    no_panic(&out);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert!(mark.exists(), "doctor loads NCCL: {v:#}");
    assert_eq!(v["probe"]["nccl_version"], "2.32.3", "{v:#}");
    assert!(
        v["nccl_found"]
            .as_str()
            .is_some_and(|f| f.contains("RINGLAB_NCCL_LIB")),
        "{v:#}"
    );
}

/// The real libnccl.so.2 of the nvidia-nccl-cu13 wheel, where `scripts/fetch-nccl-wheel.sh`
/// (run by .ci/run) put it, or where RINGLAB_TEST_NCCL_LIB says.
fn wheel_lib() -> Option<(std::path::PathBuf, String)> {
    let lib = std::env::var_os("RINGLAB_TEST_NCCL_LIB")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("target/nccl-wheel/nvidia/nccl/lib/libnccl.so.2")
        });
    let version = std::fs::read_to_string(lib.parent()?.join("../../../VERSION"))
        .ok()
        .map(|v| v.trim().to_string())
        .unwrap_or_default();
    lib.exists().then_some((lib, version))
}

#[test]
fn the_real_nccl_wheel_loads_and_answers_its_version_without_a_gpu() {
    let Some((lib, version)) = wheel_lib() else {
        eprintln!(
            "skipped: no nvidia-nccl wheel at target/nccl-wheel (scripts/fetch-nccl-wheel.sh fetches it from PyPI; .ci/run does)"
        );
        return;
    };
    let out = ringlab(
        &["doctor", "--json"],
        &[("RINGLAB_NCCL_LIB", lib.to_str().expect("utf-8"))],
    );
    no_panic(&out);
    assert!(out.status.success(), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["probe"]["nccl_lib"], true, "{v:#}");
    let got = v["probe"]["nccl_version"].as_str().unwrap_or("");
    assert!(got.starts_with("2."), "{v:#}");
    // Every entry point ringlab resolves itself (src/comm/nccl/mod.rs `api`) is in the real library.
    assert_eq!(
        v["probe"]["errors"],
        serde_json::json!([]),
        "the real NCCL lacks an entry point: {v:#}"
    );
    if !version.is_empty() {
        assert_eq!(
            got, version,
            "ncclGetVersion agrees with the wheel's version"
        );
    }
    let text = ringlab(
        &["doctor"],
        &[("RINGLAB_NCCL_LIB", lib.to_str().expect("utf-8"))],
    );
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains(&format!("version {got} (ncclGetVersion")),
        "{text}"
    );
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

#[test]
fn the_hang_lab_on_nccl_refuses_clearly_without_a_gpu() {
    if gpus() > 0 {
        eprintln!("GPUs here: the NCCL hang lab runs in scripts/gpu-check.sh");
        return;
    }
    let out = ringlab(
        &["lab", "run", "docker0", "--backend", "nccl", "--json"],
        &[],
    );
    no_panic(&out);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("lab run --backend nccl"), "{err}");
    assert!(err.contains("needs NVIDIA GPUs"), "{err}");
    assert!(out.stdout.is_empty(), "nothing staged: {out:?}");
}

#[test]
fn more_ranks_than_gpus_or_a_tcp_shared_gpu_are_refused_with_the_way_out() {
    let out = ringlab(&["sanity", "--backend", "tcp", "--ranks-per-gpu", "2"], &[]);
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
            "--coll",
            "all-gather",
            "--algo",
            "tree",
        ],
        &[],
    );
    no_panic(&out);
    assert_eq!(out.status.code(), Some(2));
}
