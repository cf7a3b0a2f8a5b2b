//! The whole NCCL path on the CPU: the real binary driven through stand-ins for libcuda.so.1
//! and libnccl.so.2 (tests/standin/cuda.c and nccl.c, built here with `cc`; see
//! tests/standin/README.md). Every collective on several types and ops at 2 and 3 ranks, on
//! both placements, shared GPUs (`--ranks-per-gpu`) and `--single-process`, with #wrong 0; a NCCL
//! that writes nothing is caught by #wrong; an injected error reads ERROR; a kernel that never
//! completes reads HANG; all-to-all's in-place column reads N/A; the run-time scenarios refuse
//! --backend nccl saying why. Without a C compiler the module says so and tests nothing else
//! (the no-GPU behaviour is tested in gpu_backend.rs). The full matrix (1 140 runs, about an
//! hour on 2 cores) is `tests/standin/drive.sh`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// The two stand-in libraries, built once per test process: the folder holding them, or why
/// there is none.
fn standins() -> Result<&'static Path, &'static str> {
    static DIR: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    DIR.get_or_init(|| {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/standin");
        // Kept for the test process's life: the folder must outlive every test using it.
        let dir = tempfile::Builder::new()
            .prefix("ringlab-standin-")
            .tempdir()
            .map_err(|e| e.to_string())?
            .keep();
        let cc = |soname: &str, file: &str, libs: &[&str]| -> Result<(), String> {
            let out = Command::new("cc")
                .args(["-shared", "-fPIC", "-O1", "-Wall", "-Werror", "-pthread"])
                .args(["-fvisibility=hidden", &format!("-Wl,-soname,{soname}")])
                .arg("-o")
                .arg(dir.join(soname))
                .arg(src.join(file))
                .args(libs)
                .output()
                .map_err(|e| format!("no C compiler (cc): {e}"))?;
            if out.status.success() {
                Ok(())
            } else {
                Err(format!(
                    "cc {file}: {}",
                    String::from_utf8_lossy(&out.stderr)
                ))
            }
        };
        cc("libcuda.so.1", "cuda.c", &[])?;
        cc("libnccl.so.2", "nccl.c", &["-ldl", "-lrt"])?;
        Ok(dir)
    })
    .as_ref()
    .map(PathBuf::as_path)
    .map_err(String::as_str)
}

/// ringlab with the stand-ins in reach and `env` on top.
fn ringlab(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ringlab"))
        .args(args)
        .env("LD_LIBRARY_PATH", dir)
        .env("RINGLAB_NCCL_LIB", dir.join("libnccl.so.2"))
        .env_remove("NCCL_DEBUG")
        .env_remove("NCCL_ALGO")
        .envs(env.iter().copied())
        .output()
        .expect("run ringlab")
}

/// The stand-ins, or `None` after saying why this machine cannot build them. A compiler that
/// is there but fails is a test failure, not a skip.
fn dir() -> Option<&'static Path> {
    match standins() {
        Ok(d) => Some(d),
        Err(e) if e.starts_with("no C compiler") => {
            eprintln!("skipped: {e}; the stand-in NCCL path is not tested here");
            None
        }
        Err(e) => panic!("{e}"),
    }
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The rows and the summary of a `--json` bench.
fn bench(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> (Output, Vec<serde_json::Value>) {
    let mut all = vec![
        "bench",
        "--backend",
        "nccl",
        "-b",
        "1K",
        "-e",
        "8K",
        "-f",
        "8",
        "-n",
        "2",
        "-w",
        "1",
        "--json",
    ];
    all.extend_from_slice(args);
    let out = ringlab(dir, &all, env);
    let rows = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    (out, rows)
}

fn wrong_total(rows: &[serde_json::Value]) -> Option<u64> {
    rows.iter()
        .find(|r| r["summary"] == true)
        .and_then(|r| r["wrong_total"].as_u64())
}

#[test]
fn sanity_runs_on_every_placement() {
    let Some(d) = dir() else { return };
    for (args, gpus) in [
        (&["--nproc-per-node", "2"][..], "2"),
        (&["--nproc-per-node", "3"][..], "3"),
        (&["--nproc-per-node", "2", "--ranks-per-gpu", "2"][..], "1"),
    ] {
        let mut all = vec!["sanity", "--backend", "nccl", "--json"];
        all.extend_from_slice(args);
        let out = ringlab(d, &all, &[("STANDIN_GPUS", gpus)]);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{args:?}: {e}: {}", text(&out)));
        assert_eq!(v["pass"], true, "{args:?}: {v}");
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", text(&out));
    }
}

/// Every collective on a reduced type × op grid at 2 ranks, and each collective's first
/// combination at 3 ranks (uneven neighbours, a middle rank), both placements checked: 0 wrong,
/// and every size has both rows (all-to-all's in-place one as N/A).
#[test]
fn every_collective_is_exact_at_two_and_three_ranks() {
    let Some(d) = dir() else { return };
    let grid: &[(&str, &[&str], &[&str])] = &[
        (
            "all-reduce",
            &["float", "bfloat16", "int32"],
            &["sum", "avg", "max"],
        ),
        ("reduce-scatter", &["half", "uint8"], &["sum", "prod"]),
        ("reduce", &["double"], &["min", "avg"]),
        ("all-gather", &["float", "int64"], &["sum"]),
        ("broadcast", &["bfloat16"], &["sum"]),
        ("send-recv", &["float"], &["sum"]),
        ("all-to-all", &["float", "int8"], &["sum"]),
    ];
    for ranks in ["2", "3"] {
        for (coll, types, ops) in grid {
            let (types, ops) = if ranks == "3" {
                (&types[..1], &ops[..1])
            } else {
                (*types, *ops)
            };
            for t in types {
                for o in ops {
                    let (out, rows) = bench(
                        d,
                        &["--nproc-per-node", ranks, "--coll", coll, "-d", t, "-o", o],
                        &[("STANDIN_GPUS", ranks)],
                    );
                    let what = format!("{ranks} ranks {coll} {t} {o}");
                    assert_eq!(out.status.code(), Some(0), "{what}: {}", text(&out));
                    assert_eq!(wrong_total(&rows), Some(0), "{what}: {}", text(&out));
                    let sized: Vec<_> = rows.iter().filter(|r| r["size"].is_u64()).collect();
                    assert_eq!(sized.len(), 4, "{what}: two sizes × two placements");
                    for r in sized {
                        let in_place = r["in_place"] == true;
                        if *coll == "all-to-all" && in_place {
                            assert!(r["time_us"].is_null(), "{what}: N/A in place: {r}");
                        } else {
                            assert!(r["time_us"].as_f64().is_some_and(|t| t > 0.0), "{r}");
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn shared_gpus_and_a_single_process_are_exact_too() {
    let Some(d) = dir() else { return };
    for (args, gpus) in [
        (
            &[
                "--nproc-per-node",
                "2",
                "--ranks-per-gpu",
                "2",
                "--coll",
                "all-reduce",
            ][..],
            "1",
        ),
        (
            &[
                "--nproc-per-node",
                "3",
                "--ranks-per-gpu",
                "2",
                "--coll",
                "all-gather",
            ][..],
            "2",
        ),
        (
            &[
                "--single-process",
                "--nproc-per-node",
                "3",
                "--coll",
                "reduce-scatter",
                "-d",
                "bfloat16",
            ][..],
            "3",
        ),
        (
            &[
                "--single-process",
                "--nproc-per-node",
                "2",
                "--coll",
                "all-to-all",
            ][..],
            "2",
        ),
    ] {
        let (out, rows) = bench(d, args, &[("STANDIN_GPUS", gpus)]);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", text(&out));
        assert_eq!(wrong_total(&rows), Some(0), "{args:?}: {}", text(&out));
    }
}

/// What the checks are for: a NCCL that moves nothing is caught by #wrong, an error from NCCL
/// reads ERROR with NCCL's words, a kernel that never completes reads HANG on every rank.
#[test]
fn faults_read_as_nccl_tests_and_the_watchdog_say() {
    let Some(d) = dir() else { return };
    let (out, rows) = bench(
        d,
        &["--nproc-per-node", "2"],
        &[("STANDIN_GPUS", "2"), ("STANDIN_NCCL_LAZY", "1")],
    );
    assert!(
        wrong_total(&rows).is_some_and(|w| w > 0),
        "a lazy NCCL must show #wrong: {}",
        text(&out)
    );
    assert_ne!(out.status.code(), Some(0), "{}", text(&out));

    let out = ringlab(
        d,
        &[
            "bench",
            "--backend",
            "nccl",
            "--nproc-per-node",
            "2",
            "-b",
            "1K",
            "-e",
            "1K",
            "-n",
            "2",
            "-w",
            "1",
        ],
        &[("STANDIN_GPUS", "2"), ("STANDIN_NCCL_FAIL_AT", "2")],
    );
    let t = text(&out);
    assert_ne!(out.status.code(), Some(0), "{t}");
    assert!(
        t.contains("ERROR") && t.contains("ncclAllReduce failed"),
        "{t}"
    );
    assert!(!t.contains("HANG: HANG") && !t.contains("panicked"), "{t}");

    let out = ringlab(
        d,
        &[
            "bench",
            "--backend",
            "nccl",
            "--nproc-per-node",
            "2",
            "-b",
            "1K",
            "-e",
            "1K",
            "-n",
            "2",
            "-w",
            "1",
            "--timeout",
            "4",
        ],
        &[("STANDIN_GPUS", "2"), ("STANDIN_CUDA_STUCK", "2")],
    );
    let t = text(&out);
    assert_ne!(out.status.code(), Some(0), "{t}");
    assert!(t.contains("HANG"), "{t}");
    assert!(!t.contains("HANG: HANG") && !t.contains("panicked"), "{t}");
}

#[test]
fn the_run_time_scenarios_refuse_nccl_saying_why() {
    let Some(d) = dir() else { return };
    let out = ringlab(
        d,
        &["lab", "run", "skipped-collective", "--backend", "nccl"],
        &[("STANDIN_GPUS", "2")],
    );
    let t = text(&out);
    assert_eq!(out.status.code(), Some(2), "{t}");
    assert!(
        t.contains("ringlab's own training loop") && t.contains("docker0"),
        "{t}"
    );
}
