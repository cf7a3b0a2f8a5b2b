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
        // Kept for the test process's life (the folder must outlive every test using it), so
        // in cargo's scratch folder for integration tests, not in /tmp.
        let dir = tempfile::Builder::new()
            .prefix("ringlab-standin-")
            .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
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
    let mut all = vec!["-b", "1K", "-e", "8K", "-f", "8", "-n", "2", "-w", "1"];
    all.extend_from_slice(args);
    bench_only(dir, &all, env)
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
/// and every size has both rows (in-place send/recv and all-to-all timed, their #wrong N/A).
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
                        // H2, L2: in-place send/recv and all-to-all are timed, never checked
                        // (nccl-tests' N/A: their sends and receives race on a GPU).
                        let unchecked = r["in_place"] == true
                            && (*coll == "all-to-all" || *coll == "send-recv");
                        assert!(r["time_us"].as_f64().is_some_and(|t| t > 0.0), "{r}");
                        assert_eq!(r["wrong"].is_null(), unchecked, "{what}: {r}");
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
        // L12: the rows of ranks that share a GPU say so in JSON too.
        let shared = args.contains(&"--ranks-per-gpu");
        for r in rows.iter().filter(|r| r["summary"] != true) {
            assert_eq!(r["shared_gpu"] == true, shared, "{args:?}: {r}");
        }
    }
}

/// L6 and L10: a sweep that does not fit the GPU is refused before anything starts, with the
/// numbers; an NCCL_ALGO the ranks inherit is shown as such, not as NCCL's own choice.
#[test]
fn gpu_memory_is_checked_and_an_inherited_nccl_algo_is_shown() {
    let Some(d) = dir() else { return };
    let out = ringlab(
        d,
        &[
            "bench",
            "--backend",
            "nccl",
            "--nproc-per-node",
            "2",
            "-b",
            "1G",
            "-e",
            "1G",
        ],
        &[("STANDIN_GPUS", "2"), ("STANDIN_GPU_MEM_GB", "1")],
    );
    let t = text(&out);
    assert_eq!(out.status.code(), Some(2), "{t}");
    assert!(
        t.contains("2.0 GiB of GPU memory per rank") && t.contains("the GPU has 1.0 GiB"),
        "{t}"
    );

    let (out, rows) = bench(
        d,
        &["--nproc-per-node", "2"],
        &[("STANDIN_GPUS", "2"), ("NCCL_ALGO", "Tree")],
    );
    let t = text(&out);
    assert_eq!(out.status.code(), Some(0), "{t}");
    assert!(
        t.contains("NCCL_ALGO=Tree is set in this environment"),
        "{t}"
    );
    let row = rows
        .iter()
        .find(|r| r["summary"] != true)
        .unwrap_or_else(|| panic!("no rows: {t}"));
    assert_eq!(row["algo"], "NCCL_ALGO=Tree", "{row}");
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
        // L3: the context's last release waits for the stuck kernel, as a real teardown may:
        // the rank's report must already be out by then.
        &[
            ("STANDIN_GPUS", "2"),
            ("STANDIN_CUDA_STUCK", "2"),
            ("STANDIN_CUDA_RELEASE_WAITS", "1"),
        ],
    );
    let t = text(&out);
    assert_ne!(out.status.code(), Some(0), "{t}");
    assert!(
        t.contains("HANG: rank")
            && t.contains("gave up waiting")
            && t.contains("aborted its communicator"),
        "the rank's own report, sent before CUDA's teardown: {t}"
    );
    assert!(!t.contains("killed the job"), "{t}");
    assert!(!t.contains("HANG: HANG") && !t.contains("panicked"), "{t}");
}

/// M1 and L16: creating the CUDA context has an allowance of its own, so a slow first context
/// does not eat the job's short watchdog; and an NCCL init that never completes (a rank that
/// never joins) is aborted by each rank itself after its patience, through a non-blocking
/// communicator, with NCCL's state in the report, not killed from outside.
#[test]
fn init_has_its_own_allowance_and_a_stuck_init_is_aborted_by_the_ranks() {
    let Some(d) = dir() else { return };
    let sanity = |timeout: &str, env: &[(&str, &str)]| {
        ringlab(
            d,
            &[
                "sanity",
                "--backend",
                "nccl",
                "--nproc-per-node",
                "2",
                "--timeout",
                timeout,
                "--json",
            ],
            env,
        )
    };
    let out = sanity(
        "2",
        &[("STANDIN_GPUS", "2"), ("STANDIN_CUDA_CTX_DELAY_MS", "3000")],
    );
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out)));
    assert_eq!(
        v["pass"],
        true,
        "a 3 s CUDA context under --timeout 2: {}",
        text(&out)
    );

    let out = sanity(
        "4",
        &[("STANDIN_GPUS", "2"), ("STANDIN_NCCL_INIT_STUCK", "1")],
    );
    let t = text(&out);
    assert_ne!(out.status.code(), Some(0), "{t}");
    assert!(
        t.contains("ncclCommInitRankConfig still in progress after 3 s"),
        "the rank's own patience (3/4 of --timeout) ends the init: {t}"
    );
    assert!(
        t.contains("aborted the communicator") && t.contains("HANG"),
        "{t}"
    );
    assert!(
        !t.contains("killed the job"),
        "the rank, not the launcher, calls it: {t}"
    );
    assert!(!t.contains("panicked"), "{t}");
}

/// L9: in single-process mode every GPU's collective is launched inside one group, and NCCL
/// puts the work on the streams only at ncclGroupEnd: a progress mark (an event recorded on
/// the stream) must come after that, or it completes before the work it stands for.
#[test]
fn progress_marks_come_after_the_group_that_launches_the_work() {
    let Some(d) = dir() else { return };
    let out = ringlab(
        d,
        &[
            "bench",
            "--backend",
            "nccl",
            "--single-process",
            "--nproc-per-node",
            "2",
            "-b",
            "1K",
            "-e",
            "1K",
            "-n",
            "300",
            "-w",
            "0",
        ],
        &[("STANDIN_GPUS", "2"), ("STANDIN_TRACE", "1")],
    );
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    let (mut open, mut marks) = (0i32, 0);
    for line in t.lines() {
        if line.contains("ncclGroupStart (") {
            open += 1;
        } else if line.contains("ncclGroupEnd (") {
            open -= 1;
        } else if line.contains("cuEventRecord(") {
            marks += 1;
            assert_eq!(open, 0, "a progress mark recorded inside a group: {line}");
        }
    }
    assert!(
        marks > 0,
        "300 calls make at least one mark (one per 256): {t}"
    );
}

/// L14: NCCL's result codes are read as the C int they are: a code newer than the ones this
/// build knows is reported by number, with NCCL's own text, never as an enum value it is not.
#[test]
fn an_unknown_result_code_is_reported_by_number() {
    let Some(d) = dir() else { return };
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
        &[
            ("STANDIN_GPUS", "2"),
            ("STANDIN_NCCL_FAIL_AT", "2"),
            ("STANDIN_NCCL_FAIL_CODE", "42"),
        ],
    );
    let t = text(&out);
    assert_ne!(out.status.code(), Some(0), "{t}");
    assert!(
        t.contains("ncclAllReduce failed: an ncclResult_t this build does not know (42): unknown result code"),
        "{t}"
    );
    assert!(!t.contains("panicked"), "{t}");
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

/// A `bench --backend nccl --json` with only `args` (no default sizes): its rows and summary.
fn bench_only(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> (Output, Vec<serde_json::Value>) {
    let mut all = vec!["bench", "--backend", "nccl", "--json"];
    all.extend_from_slice(args);
    let out = ringlab(dir, &all, env);
    let rows = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    (out, rows)
}

/// The rows of `--json` output that are rows (not the summary).
fn sized(rows: &[serde_json::Value]) -> Vec<&serde_json::Value> {
    rows.iter().filter(|r| r["size"].is_u64()).collect()
}

/// H1: on the stand-ins (NCCL 2.28's non-blocking semantics: every call on a non-blocking
/// communicator returns ncclInProgress and launches on a thread) an 8 B all-reduce costs well
/// under a millisecond per call, blocking or not. One rank, out of place: the stand-in's work
/// is one copy on the stream, no other process to wait for, so what the row times is the call
/// path itself. The bound is the defect's floor, not a timing budget: a 1 ms sleep per poll
/// made every such call 1000 µs or more, every run, by construction; so a run slowed by a
/// loaded machine is tried again (up to 10 times), which cannot hide that floor.
#[test]
fn a_small_collective_costs_well_under_a_millisecond_per_call_blocking_or_not() {
    let Some(d) = dir() else { return };
    let args = [
        "--nproc-per-node",
        "1",
        "-b",
        "8",
        "-e",
        "8",
        "-n",
        "200",
        "-w",
        "5",
    ];
    for blocking in [None, Some("0"), Some("1")] {
        let mut env = vec![("STANDIN_GPUS", "1")];
        env.extend(blocking.map(|b| ("NCCL_COMM_BLOCKING", b)));
        let what = format!("NCCL_COMM_BLOCKING={blocking:?}");
        let mut seen = Vec::new();
        for _ in 0..10 {
            let (out, rows) = bench_only(d, &args, &env);
            assert_eq!(out.status.code(), Some(0), "{what}: {}", text(&out));
            let t = sized(&rows)
                .iter()
                .find(|r| r["in_place"] == false)
                .and_then(|r| r["time_us"].as_f64())
                .unwrap_or_else(|| panic!("{what}: no out-of-place row: {}", text(&out)));
            seen.push(t);
            if t < 1000.0 {
                break;
            }
        }
        assert!(
            seen.last().is_some_and(|t| *t < 1000.0),
            "{what}: µs per call, each try: {seen:?}"
        );
    }
}

/// H2, L1: in-place send/recv reads N/A in the table and null in JSON, and the race the
/// stand-in plays (a receive landing before its send reads the buffer) is not counted: the run
/// passes. `-c 0` rows read N/A and the summary null: unchecked is not clean.
#[test]
fn unchecked_rows_read_na_not_zero() {
    let Some(d) = dir() else { return };
    let args = [
        "-b",
        "64K",
        "-e",
        "1M",
        "-f",
        "16",
        "--coll",
        "send-recv",
        "-n",
        "2",
    ];
    let env = [("STANDIN_GPUS", "2")];
    let (out, rows) = bench_only(d, &args, &env);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(wrong_total(&rows), Some(0), "{}", text(&out));
    for r in sized(&rows) {
        assert_eq!(r["wrong"].is_null(), r["in_place"] == true, "{r}");
    }
    let mut table: Vec<&str> = vec!["bench", "--backend", "nccl", "-w", "1"];
    table.extend(args);
    let out = ringlab(d, &table, &env);
    let t = text(&out);
    let lines: Vec<&str> = t
        .lines()
        .filter(|l| l.trim_start().starts_with("65536"))
        .collect();
    assert!(
        lines.len() == 1 && lines[0].trim_end().ends_with("N/A") && !lines[0].contains("ERROR"),
        "{t}"
    );

    let (out, rows) = bench(d, &["-c", "0"], &env);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        sized(&rows).iter().all(|r| r["wrong"].is_null()),
        "{rows:?}"
    );
    let summary = rows.iter().find(|r| r["summary"] == true).expect("summary");
    assert!(summary["wrong_total"].is_null(), "{summary}");
    let out = ringlab(
        d,
        &[
            "bench",
            "--backend",
            "nccl",
            "-c",
            "0",
            "-b",
            "1K",
            "-e",
            "1K",
            "-n",
            "2",
        ],
        &env,
    );
    let t = text(&out);
    assert!(t.contains("Out of bounds values : N/A"), "{t}");
}

/// NCCL_COMM_BLOCKING=0 makes even ncclCommInitAll's communicators non-blocking
/// (envConfigOverride): `--single-process` polls them instead of failing with ncclInProgress.
#[test]
fn single_process_runs_with_non_blocking_communicators_forced() {
    let Some(d) = dir() else { return };
    let (out, rows) = bench(
        d,
        &[
            "--single-process",
            "--nproc-per-node",
            "2",
            "--coll",
            "all-gather",
        ],
        &[("STANDIN_GPUS", "2"), ("NCCL_COMM_BLOCKING", "0")],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(wrong_total(&rows), Some(0), "{}", text(&out));
}

/// M1: a launch whose connect never completes is a HANG, on a blocking communicator (the
/// launcher's watchdog) and on a non-blocking one (the rank's own settle, then its abort),
/// never an ERROR.
#[test]
fn a_connect_that_never_completes_is_a_hang_not_an_error() {
    let Some(d) = dir() else { return };
    // Unset: the split's blocking child, where the stuck call never returns and the
    // launcher's watchdog ends it; 1: all blocking; 0: the rank's own settle, then its abort.
    for blocking in [None, Some("1"), Some("0")] {
        let mut env = vec![("STANDIN_GPUS", "2"), ("STANDIN_NCCL_CONNECT_STUCK", "3")];
        env.extend(blocking.map(|b| ("NCCL_COMM_BLOCKING", b)));
        let args = [
            "bench",
            "--backend",
            "nccl",
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
        ];
        let out = ringlab(d, &args, &env);
        let t = text(&out);
        assert_eq!(out.status.code(), Some(1), "{t}");
        assert!(
            t.contains("HANG: rank") && !t.contains("ERROR"),
            "NCCL_COMM_BLOCKING={blocking:?}: {t}"
        );
    }
}

/// L3, L9: world 1 on NCCL says it proved no communication; an asynchronous error raised by
/// the last (here the only) call, read on an idle stream, fails the run instead of passing it.
#[test]
fn a_trivial_world_says_so_and_a_late_async_error_is_not_lost() {
    let Some(d) = dir() else { return };
    let out = ringlab(
        d,
        &[
            "sanity",
            "--backend",
            "nccl",
            "--nproc-per-node",
            "1",
            "--json",
        ],
        &[("STANDIN_GPUS", "1")],
    );
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out)));
    assert_eq!(v["pass"], true, "{v}");
    assert_eq!(v["trivial"], true, "{v}");

    let out = ringlab(
        d,
        &["sanity", "--backend", "nccl", "--nproc-per-node", "2"],
        &[("STANDIN_GPUS", "2"), ("STANDIN_NCCL_ASYNC_ERROR", "1")],
    );
    let t = text(&out);
    assert_ne!(out.status.code(), Some(0), "{t}");
    assert!(
        t.contains("asynchronous error") && !t.contains("PASS"),
        "{t}"
    );
}

/// L4: on a machine with a driver, a doctor report that says NCCL cannot run exits 1.
#[test]
fn the_machine_report_fails_where_a_gpu_cannot_run_nccl() {
    let Some(d) = dir() else { return };
    let out = ringlab(d, &["doctor"], &[("STANDIN_GPUS", "2")]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let missing = d.join("no-such-libnccl.so.2");
    let out = ringlab(
        d,
        &["doctor"],
        &[
            ("STANDIN_GPUS", "2"),
            ("RINGLAB_NCCL_LIB", missing.to_str().expect("utf-8")),
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
}
