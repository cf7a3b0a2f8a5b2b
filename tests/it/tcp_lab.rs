//! The live lab over TCP: real rank processes launched by the real binary, every collective ×
//! dtype × algorithm on 2, 3 and 4 ranks with uneven counts, both placements, each checked
//! element by element; plus what must go wrong cleanly.

use std::process::{Command, Output};
use std::time::{Duration, Instant};

fn ringlab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ringlab"))
        .args(args)
        .env_remove("NCCL_DEBUG")
        .output()
        .expect("run ringlab")
}

fn ringlab_env(env: &[(&str, &str)], args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ringlab"))
        .args(args)
        .env_remove("NCCL_DEBUG")
        .envs(env.iter().copied())
        .output()
        .expect("run ringlab")
}

fn json_lines(out: &Output) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// Runs a bench and asserts every row of both placements checked with 0 wrong. Single copy
/// starts at 4 KiB here (1 MiB by default), so the 1000 B rows and most 8000 B rows go
/// through the shared-memory FIFO and the 64000 B rows by single copy: both paths, every case.
fn bench_clean(coll: &str, algo: &str, dtype: &str, op: &str, ranks: usize) {
    let n = ranks.to_string();
    // 1000 B .. 64000 B: element counts that do not divide by 3 or 4, and a count < N for int64.
    let out = ringlab_env(
        &[("RINGLAB_P2P_MIN", "4K")],
        &[
            "bench",
            "--backend",
            "tcp",
            "--nproc-per-node",
            &n,
            "-b",
            "1000",
            "-e",
            "64000",
            "-f",
            "8",
            "-n",
            "2",
            "-w",
            "1",
            "--coll",
            coll,
            "--algo",
            algo,
            "-d",
            dtype,
            "-o",
            op,
            "--json",
        ],
    );
    let rows = json_lines(&out);
    let ctx = format!(
        "{coll} {algo} {dtype} {op} N={ranks}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{ctx}");
    let data: Vec<_> = rows.iter().filter(|r| r.get("summary").is_none()).collect();
    assert_eq!(data.len(), 3 * 2, "3 sizes × 2 placements: {ctx}");
    for r in &data {
        assert_eq!(r["wrong"], 0, "{r} {ctx}");
        assert_eq!(r["ranks"], ranks, "{ctx}");
        // Ranks of one node move their bytes through shared memory.
        assert_eq!(r["transport"], "P2P", "{r} {ctx}");
    }
    let summary = rows.last().expect("summary");
    assert_eq!(summary["summary"], true);
    assert_eq!(summary["wrong_total"], 0);
}

#[test]
fn every_collective_algorithm_and_dtype_is_exact() {
    let colls = [
        "all-reduce",
        "reduce-scatter",
        "all-gather",
        "broadcast",
        "reduce",
        "sendrecv",
    ];
    let algos = ["ring", "naive", "tree"];
    let dtypes = ["float", "double", "int32", "int64", "half", "bfloat16"];
    let mut k = 0;
    for coll in colls {
        for algo in algos {
            for dtype in dtypes {
                bench_clean(coll, algo, dtype, "sum", 2 + k % 3);
                k += 1;
            }
        }
    }
}

#[test]
fn every_reduction_op_is_exact() {
    for op in ["sum", "prod", "max", "min", "avg"] {
        for (dtype, ranks) in [("float", 3), ("int32", 4), ("bfloat16", 2)] {
            bench_clean("all-reduce", "ring", dtype, op, ranks);
        }
        bench_clean("reduce-scatter", "tree", "int64", op, 3);
    }
}

#[test]
fn rooted_collectives_honour_the_root() {
    for coll in ["broadcast", "reduce"] {
        for algo in ["ring", "naive", "tree"] {
            let out = ringlab(&[
                "bench",
                "--backend",
                "tcp",
                "--nproc-per-node",
                "4",
                "-b",
                "4K",
                "-e",
                "4K",
                "-n",
                "1",
                "--coll",
                coll,
                "--algo",
                algo,
                "-r",
                "2",
                "--json",
            ]);
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let rows = json_lines(&out);
            assert_eq!(rows[0]["root"], 2);
            assert_eq!(rows.last().expect("summary")["wrong_total"], 0);
        }
    }
}

#[test]
fn the_table_looks_like_nccl_tests() {
    let out = ringlab(&[
        "bench",
        "--backend",
        "tcp",
        "--nproc-per-node",
        "2",
        "-b",
        "1K",
        "-e",
        "64K",
        "-f",
        "4",
        "-n",
        "2",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("#wrong"), "{text}");
    assert!(text.contains("# Out of bounds values : 0 OK"), "{text}");
    assert!(text.contains("# Avg bus bandwidth"), "{text}");
    let rows: Vec<Vec<&str>> = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows.len(), 4, "1K, 4K, 16K, 64K: {text}");
    assert_eq!(&rows[0][..5], ["1024", "256", "float", "sum", "-1"]);
    assert_eq!(rows[0][8], "0");
    assert_eq!(rows[0][12], "0");
    assert!(
        text.contains("#  Transport: P2P, single copy between the ranks of this node"),
        "{text}"
    );
}

/// Transport selection as NCCL logs it, down NCCL's ladder: ranks of one node use P2P (single
/// copy), each channel named at INFO with NCCL's line; NCCL_P2P_DISABLE=1 leaves SHM;
/// NCCL_SHM_DISABLE=1 sends everything over the network (NET/Socket); the bench says which
/// in its header and its JSON.
#[test]
fn transports_are_chosen_and_logged_like_nccl() {
    let run = |env: &[(&str, &str)]| {
        Command::new(env!("CARGO_BIN_EXE_ringlab"))
            .args([
                "bench",
                "--backend",
                "tcp",
                "--nproc-per-node",
                "2",
                "-b",
                "1M",
                "-e",
                "1M",
                "-n",
                "2",
                "--json",
            ])
            .envs(env.iter().copied())
            .output()
            .expect("run ringlab")
    };
    let p2p = run(&[("NCCL_DEBUG", "INFO")]);
    let log = String::from_utf8_lossy(&p2p.stderr);
    assert!(p2p.status.success(), "{log}");
    for line in [
        "Channel 00/0 : 0[0] -> 1[1] via P2P/CMA",
        "Channel 00/0 : 1[1] -> 0[0] via P2P/CMA",
    ] {
        assert!(log.contains(line), "{line}: {log}");
    }
    assert!(
        !log.contains("via SHM") && !log.contains("via NET"),
        "{log}"
    );
    let rows = json_lines(&p2p);
    assert!(
        !rows.is_empty() && rows.iter().all(|r| r["transport"] == "P2P"),
        "{log}"
    );
    let shm = run(&[("NCCL_DEBUG", "INFO"), ("NCCL_P2P_DISABLE", "1")]);
    let log = String::from_utf8_lossy(&shm.stderr);
    assert!(
        log.contains("NCCL_P2P_DISABLE set by environment to 1."),
        "{log}"
    );
    assert!(shm.status.success(), "{log}");
    assert!(
        log.contains("Channel 00 : 0[0] -> 1[1] via SHM/direct/direct"),
        "{log}"
    );
    assert!(
        log.contains("Channel 00 : 1[1] -> 0[0] via SHM/direct/direct"),
        "{log}"
    );
    assert!(!log.contains("via NET"), "{log}");
    assert!(
        json_lines(&shm).iter().all(|r| r["transport"] == "SHM"),
        "{log}"
    );
    let net = run(&[("NCCL_DEBUG", "INFO"), ("NCCL_SHM_DISABLE", "1")]);
    let log = String::from_utf8_lossy(&net.stderr);
    assert!(net.status.success(), "{log}");
    assert!(
        log.contains("NCCL_SHM_DISABLE set by environment to 1."),
        "{log}"
    );
    assert!(
        log.contains("Channel 00/0 : 0[0] -> 1[1] [send] via NET/Socket/0"),
        "{log}"
    );
    assert!(
        log.contains("Channel 00/0 : 1[1] -> 0[0] [receive] via NET/Socket/0"),
        "{log}"
    );
    assert!(!log.contains("via SHM"), "{log}");
    let rows = json_lines(&net);
    assert!(rows.len() >= 2, "{log}");
    assert!(
        rows.iter()
            .all(|r| r["transport"] == "NET" && r["wrong"] != 1),
        "{rows:?}"
    );
    // A bad buffer size is refused, naming the variable.
    let bad = run(&[("NCCL_BUFFSIZE", "lots")]);
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(!bad.status.success());
    assert!(err.contains("NCCL_BUFFSIZE=lots"), "{err}");
}

/// Shared-memory segments do not outlive their job: ranks unlink them once every partner has
/// mapped them (and their buffers are nameless memory files), so a launcher killed with
/// SIGKILL mid-run leaves none, and `lab cleanup`
/// removes those of ranks that died before that point (and only those).
#[test]
fn shared_memory_segments_never_outlive_the_job() {
    // It ends with `lab cleanup`, which also takes clusters down.
    let _clusters = crate::common::clusters();
    let segments_of = |pids: &[u32]| -> Vec<String> {
        std::fs::read_dir("/dev/shm")
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| {
                        pids.iter()
                            .any(|p| n.starts_with(&format!("ringlab-shm-{p}-")))
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut launcher = Command::new(env!("CARGO_BIN_EXE_ringlab"))
        .args([
            "bench",
            "--backend",
            "tcp",
            "--nproc-per-node",
            "2",
            "-b",
            "4M",
            "-e",
            "4M",
            "-n",
            "100000",
            "-c",
            "0",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn");
    let kids = ranks_of(&launcher, 2);
    assert_eq!(kids.len(), 2, "two rank processes");
    // Each rank maps its own two buffers and its partner's (the P2P transport's regions):
    // anonymous memory files, with no name in /dev/shm or anywhere else to be left behind.
    let regions = |k: u32| {
        std::fs::read_to_string(format!("/proc/{k}/maps"))
            .unwrap_or_default()
            .matches("/memfd:ringlab-buffer")
            .count()
    };
    let mapped = crate::common::wait_until(Duration::from_secs(120), || {
        kids.iter().all(|&k| regions(k) >= 4)
    });
    let counts: Vec<usize> = kids.iter().map(|&k| regions(k)).collect();
    assert!(mapped, "buffer regions per rank: {counts:?}");
    // Mid-run (the partners' regions are mapped): the segments are already unlinked.
    assert!(segments_of(&kids).is_empty(), "{:?}", segments_of(&kids));
    let _ = launcher.kill();
    let _ = launcher.wait();
    // Each rank asked for SIGKILL when its launcher dies (PR_SET_PDEATHSIG): they go on their own.
    let gone =
        crate::common::wait_until(Duration::from_secs(60), || kids.iter().all(|&k| !alive(k)));
    assert!(gone, "a rank outlived its launcher: {kids:?}");
    assert!(segments_of(&kids).is_empty());
    // A rank killed between making its segment and its partners mapping it leaves a name
    // behind: cleanup removes it (its process is gone) and keeps a live process's.
    let dead = std::path::Path::new("/dev/shm").join("ringlab-shm-4194305-Zz9aQ1");
    let live =
        std::path::Path::new("/dev/shm").join(format!("ringlab-shm-{}-Zz9aQ2", std::process::id()));
    std::fs::write(&dead, b"x").expect("write");
    std::fs::write(&live, b"x").expect("write");
    let out = ringlab(&["lab", "cleanup"]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{said}");
    assert!(!dead.exists(), "{said}");
    assert!(
        said.contains("shared-memory segment /dev/shm/ringlab-shm-4194305-Zz9aQ1"),
        "{said}"
    );
    assert!(live.exists(), "a live process's segment stays");
    let _ = std::fs::remove_file(&live);
}

#[test]
fn sanity_passes_with_four_ranks_and_refuses_one() {
    let out = ringlab(&["sanity", "--nproc-per-node", "4", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = &json_lines(&out)[0];
    assert_eq!(v["world_size"], 4);
    assert_eq!(v["pass"], true);
    assert_eq!(v["ranks"].as_array().map(Vec::len), Some(4));
    for r in v["ranks"].as_array().expect("ranks") {
        assert_eq!(r["value"], 4.0);
    }
    let one = ringlab(&["sanity", "--nproc-per-node", "1"]);
    assert_eq!(one.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&one.stderr).contains("proves nothing"));
}

/// `--csv`: a header, then one line per size and placement, every field in its column, the
/// bandwidths those of the JSON rows' definition (algbw = size / time).
#[test]
fn csv_has_a_header_and_a_line_per_size_and_placement() {
    let out = ringlab(&bench_args("2", ("1K", "4K", "2"), "2", &["--csv"]));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
    let head: Vec<&str> = lines[0].split(',').collect();
    assert_eq!(head[0], "coll", "{text}");
    assert!(
        head.contains(&"busbw_gbps") && head.contains(&"wrong"),
        "{text}"
    );
    let rows: Vec<Vec<&str>> = lines[1..].iter().map(|l| l.split(',').collect()).collect();
    // 1K, 2K, 4K, each out of place and in place.
    assert_eq!(rows.len(), 6, "{text}");
    let col = |name: &str| head.iter().position(|h| *h == name).expect(name);
    for r in &rows {
        assert_eq!(r.len(), head.len(), "{r:?}");
        assert_eq!(r[col("coll")], "all-reduce");
        assert_eq!(r[col("ranks")], "2");
        assert_eq!(r[col("wrong")], "0");
        let size: f64 = r[col("size")].parse().expect("size");
        let us: f64 = r[col("time_us")].parse().expect("time");
        let algbw: f64 = r[col("algbw_gbps")].parse().expect("algbw");
        assert!(
            (algbw - size / us / 1e3).abs() <= 1e-3 + algbw * 0.01,
            "{r:?}"
        );
    }
    let placements: Vec<&str> = rows.iter().map(|r| r[col("in_place")]).collect();
    assert_eq!(
        placements,
        ["false", "true", "false", "true", "false", "true"]
    );
}

/// A job of two launchers (two "nodes" of two ranks on this host, as on two machines): both
/// finish, every row counts 4 ranks and 0 wrong, and each launcher reports its own ranks.
#[test]
fn two_launchers_make_one_job_that_checks_clean() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("port")
        .local_addr()
        .expect("addr")
        .port()
        .to_string();
    let node = |rank: &str| {
        Command::new(env!("CARGO_BIN_EXE_ringlab"))
            .args([
                "bench",
                "--backend",
                "tcp",
                "--nnodes",
                "2",
                "--node-rank",
                rank,
            ])
            .args(["--nproc-per-node", "2", "--master-addr", "127.0.0.1"])
            .args(["--master-port", &port, "-b", "1K", "-e", "64K", "-f", "8"])
            .args(["-n", "2", "--json", "--timeout", "30"])
            .env("RINGLAB_TOKEN", "00112233445566778899aabbccddeeff")
            .env("NCCL_SOCKET_IFNAME", "lo")
            .env_remove("NCCL_DEBUG")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn a launcher")
    };
    let (a, b) = (node("0"), node("1"));
    for (name, child) in [("node 0", a), ("node 1", b)] {
        let out = child.wait_with_output().expect("wait");
        let ctx = format!("{name}: {}", String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "{ctx}");
        let rows = json_lines(&out);
        let data: Vec<_> = rows.iter().filter(|r| r.get("summary").is_none()).collect();
        // 1K, 8K and 64K, both placements.
        assert_eq!(data.len(), 6, "{ctx}");
        for r in data {
            assert_eq!(r["ranks"], 4, "{r} {ctx}");
            assert_eq!(r["wrong"], 0, "{r} {ctx}");
        }
    }
}

#[test]
fn bad_flags_and_sizes_give_clear_errors() {
    for (args, needle) in [
        (&["bench", "-b", "12Q"][..], "invalid size"),
        (&["bench", "-b", "1M", "-e", "1K"][..], "smaller than"),
        (&["bench", "--coll", "allfoo"][..], "expected one of"),
        (&["bench", "-d", "float128"][..], "float128"),
        (&["bench", "--nproc-per-node", "0"][..], "nproc-per-node"),
        (&["bench", "--backend", "cuda"][..], "invalid value 'cuda'"),
        (&["bench", "-r", "5"][..], "not a rank"),
        (
            &[
                "bench",
                "--nnodes",
                "2",
                "--node-rank",
                "2",
                "--master-port",
                "29500",
            ][..],
            "not a node",
        ),
    ] {
        let out = ringlab(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains(needle),
            "{args:?}: expected `{needle}` in {err}"
        );
        assert!(!err.contains("panicked"), "{err}");
    }
}

/// The launcher's rank processes, once `n` of them are up (or what there is after 10 s).
fn ranks_of(launcher: &std::process::Child, n: usize) -> Vec<u32> {
    let start = Instant::now();
    let mut kids = Vec::new();
    while kids.len() < n && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
        kids = children_of(launcher.id());
    }
    kids
}

fn children_of(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| s.split_whitespace().nth(2).is_none_or(|st| st != "Z"))
        .unwrap_or(false)
}

#[test]
fn a_rank_killed_mid_run_fails_the_job_fast_with_no_orphans() {
    let launcher = Command::new(env!("CARGO_BIN_EXE_ringlab"))
        .args([
            "bench",
            "--backend",
            "tcp",
            "--nproc-per-node",
            "3",
            "-b",
            "16M",
            "-e",
            "16M",
            "-n",
            "100000",
            "-c",
            "0",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    let kids = ranks_of(&launcher, 3);
    assert_eq!(kids.len(), 3, "three rank processes");
    std::thread::sleep(Duration::from_millis(800));
    let victim = kids[1];
    let killed = Instant::now();
    assert!(
        Command::new("kill")
            .args(["-KILL", &victim.to_string()])
            .status()
            .expect("kill")
            .success()
    );
    let out = launcher.wait_with_output().expect("wait");
    let took = killed.elapsed();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    // Fast means by the dead rank's own signal (its exit, its peers' closed connections),
    // not by the watchdog (no HANG): a semantic bound, not a wall-clock one.
    assert!(
        !err.contains("HANG"),
        "the watchdog, not the failure, ended it ({took:?}): {err}"
    );
    assert!(
        err.contains("killed by a signal")
            || err.contains("closed the connection")
            || err.contains("reset by peer"),
        "{err}"
    );
    // The size that was running gets a row saying why it stopped, not a silent gap.
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("16777216  ERROR: ") || table.contains("16777216  EXIT: "),
        "{table}"
    );
    let gone =
        crate::common::wait_until(Duration::from_secs(60), || kids.iter().all(|&k| !alive(k)));
    assert!(gone, "a rank process outlived the job: {kids:?}");
}

#[test]
fn a_missing_rank_is_declared_hung_by_the_watchdog() {
    // World size 2 across two "nodes", but only node 0 is started: rank 0 waits for a peer
    // that never comes, like NCCL's bootstrap. The watchdog must say so and clean up.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("port")
        .local_addr()
        .expect("addr")
        .port();
    let out = Command::new(env!("CARGO_BIN_EXE_ringlab"))
        .args([
            "sanity",
            "--nnodes",
            "2",
            "--node-rank",
            "0",
            "--nproc-per-node",
            "1",
            "--master-addr",
            "127.0.0.1",
        ])
        .args(["--master-port", &port.to_string(), "--timeout", "2"])
        .env("RINGLAB_TOKEN", "00112233445566778899aabbccddeeff")
        .env("NCCL_SOCKET_IFNAME", "lo")
        .env("GLOO_SOCKET_IFNAME", "lo")
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("HANG"), "{err}");
    assert!(err.contains("rank 0"), "{err}");
}

#[test]
fn a_closed_pipe_ends_the_launcher_quietly_not_with_a_panic() {
    for close_stdout in [false, true] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_ringlab"))
            .args([
                "bench",
                "--backend",
                "tcp",
                "-b",
                "1K",
                "-e",
                "64K",
                "-n",
                "2",
            ])
            .env("NCCL_DEBUG", "INFO")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn");
        // The reader goes away at once, like `| head -0`.
        if close_stdout {
            drop(child.stdout.take());
        } else {
            drop(child.stderr.take());
        }
        let out = child.wait_with_output().expect("wait");
        assert_eq!(
            out.status.code(),
            Some(141),
            "closed {}: {}",
            if close_stdout { "stdout" } else { "stderr" },
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// The rank a rank process is, from its environment.
fn rank_of(pid: u32) -> Option<usize> {
    let env = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    env.split(|b| *b == 0)
        .find_map(|kv| kv.strip_prefix(b"RINGLAB_RANK="))
        .and_then(|v| std::str::from_utf8(v).ok()?.parse().ok())
}

#[test]
fn a_long_healthy_row_is_not_a_hang_but_a_stopped_rank_is_named() {
    // Seconds of 4 MiB all-reduces per placement against a 1 s watchdog: the ranks report
    // progress as iterations complete, so the watchdog sees a live job.
    let row_of = |iters: usize| {
        Command::new(env!("CARGO_BIN_EXE_ringlab"))
            .args([
                "bench",
                "--backend",
                "tcp",
                "-b",
                "4M",
                "-e",
                "4M",
                "--json",
            ])
            .args([
                "-n",
                &iters.to_string(),
                "-w",
                "0",
                "-c",
                "0",
                "--timeout",
                "1",
            ])
            .output()
            .expect("run")
    };
    // How long one all-reduce takes on this machine now, so that the row lasts about 3 s
    // however fast or loaded it is.
    let probe = row_of(20);
    let per_iter_us = serde_json::from_str::<serde_json::Value>(
        String::from_utf8_lossy(&probe.stdout)
            .lines()
            .next()
            .unwrap_or("{}"),
    )
    .ok()
    .and_then(|v| v["time_us"].as_f64())
    .unwrap_or(4000.0)
    .max(1.0);
    let iters = ((3e6 / per_iter_us) as usize).clamp(250, 20_000);
    let out = row_of(iters);
    assert!(
        out.status.success(),
        "a healthy run was called a hang: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let row: serde_json::Value = serde_json::from_str(
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .next()
            .expect("a row"),
    )
    .expect("json");
    let secs = row["time_us"].as_f64().expect("time") * iters as f64 / 1e6;
    assert!(
        secs > 1.2,
        "the row took {secs:.2} s: too quick to test the watchdog"
    );
    // SIGSTOP one rank: everyone stops making progress, and the stopped one is named.
    let launcher = Command::new(env!("CARGO_BIN_EXE_ringlab"))
        .args(["bench", "--backend", "tcp", "-b", "1M", "-e", "1M"])
        .args(["-n", "100000", "-c", "0", "--timeout", "2"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    let kids = ranks_of(&launcher, 2);
    std::thread::sleep(Duration::from_millis(800));
    let victim = *kids.iter().max_by_key(|p| rank_of(**p)).expect("a rank");
    let rank = rank_of(victim).expect("its rank");
    assert!(
        Command::new("kill")
            .args(["-STOP", &victim.to_string()])
            .status()
            .expect("kill")
            .success()
    );
    let out = launcher.wait_with_output().expect("wait");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains(&format!("rank {rank} is stopped")), "{err}");
}

#[test]
fn a_sweep_bigger_than_memory_is_refused_before_any_rank_starts() {
    let out = Command::new(env!("CARGO_BIN_EXE_ringlab"))
        .args(["bench", "--backend", "tcp", "-b", "10G", "-e", "1T"])
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("GiB available") && err.contains("-e/--maxbytes"),
        "{err}"
    );
    assert!(!err.contains("memory allocation"), "{err}");
    // Before any rank: no rank's words and no table (a rank would have printed its header).
    assert!(!err.contains("rank 0"), "{err}");
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn a_rank_that_cannot_allocate_reports_an_error_instead_of_aborting() {
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ringlab"));
    cmd.args([
        "bench",
        "--backend",
        "tcp",
        "-b",
        "512M",
        "-e",
        "512M",
        "-n",
        "1",
    ]);
    // SAFETY: setrlimit only lowers this child's (and its ranks') address-space limit.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: 1536 << 20,
                rlim_max: 1536 << 20,
            };
            libc::setrlimit(libc::RLIMIT_AS, &lim);
            Ok(())
        });
    }
    let out = cmd.output().expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("allocating"), "{err}");
    assert!(!err.contains("memory allocation of"), "an abort: {err}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("536870912  ERROR: "));
}

#[test]
fn a_stranger_on_the_store_is_dropped_and_logged_at_warn() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("port")
        .local_addr()
        .expect("addr")
        .port();
    // Node 1 never comes, so the job waits (2 s) while a stranger knocks on the store.
    let launcher = Command::new(env!("CARGO_BIN_EXE_ringlab"))
        .args([
            "sanity",
            "--nnodes",
            "2",
            "--node-rank",
            "0",
            "--nproc-per-node",
            "1",
        ])
        .args([
            "--master-addr",
            "127.0.0.1",
            "--master-port",
            &port.to_string(),
        ])
        .args(["--timeout", "2"])
        .env("RINGLAB_TOKEN", "00112233445566778899aabbccddeeff")
        .env("NCCL_SOCKET_IFNAME", "lo")
        .env("GLOO_SOCKET_IFNAME", "lo")
        .env("NCCL_DEBUG", "WARN")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    let start = Instant::now();
    let mut knocked = false;
    while !knocked && start.elapsed() < Duration::from_secs(2) {
        if let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) {
            let _ = std::io::Write::write_all(&mut s, &[b'x'; 64]);
            knocked = true;
        } else {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    assert!(knocked, "the store never listened");
    let out = launcher.wait_with_output().expect("wait");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("NCCL WARN store: dropped connection from 127.0.0.1"),
        "{err}"
    );
}

/// From NCCL 2.22 ring connections are made at the first collective (runtime connect), so
/// the emulated channel lines come after `Init COMPLETE`; up to 2.21, and with
/// NCCL_RUNTIME_CONNECT=0, during init, before it.
#[test]
fn channel_lines_come_where_the_release_makes_its_connections() {
    let log_of = |env: &[(&str, &str)]| -> String {
        let out = Command::new(env!("CARGO_BIN_EXE_ringlab"))
            .args([
                "bench",
                "--backend",
                "tcp",
                "--nproc-per-node",
                "2",
                "-b",
                "64K",
                "-e",
                "64K",
                "-n",
                "1",
                "-w",
                "0",
            ])
            .env("NCCL_DEBUG", "INFO")
            .envs(env.iter().copied())
            .output()
            .expect("run ringlab");
        let log = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{log}");
        log
    };
    // Rank 0's lines: where its first channel line stands against its Init COMPLETE.
    let order = |log: &str| -> (usize, usize) {
        let lines: Vec<&str> = log.lines().collect();
        let channel = lines
            .iter()
            .position(|l| l.contains("Channel 00/0 : 0[0] -> 1[1] via P2P/CMA"))
            .unwrap_or_else(|| panic!("no channel line: {log}"));
        let complete = lines
            .iter()
            .position(|l| l.contains("rank 0 nranks 2") && l.contains("Init COMPLETE"))
            .unwrap_or_else(|| panic!("no Init COMPLETE: {log}"));
        (channel, complete)
    };
    let (ch, done) = order(&log_of(&[("RINGLAB_NCCL_VERSION", "2.28.9")]));
    assert!(ch > done, "2.28.9 connects at the first collective");
    let (ch, done) = order(&log_of(&[("RINGLAB_NCCL_VERSION", "2.21.5")]));
    assert!(ch < done, "2.21.5 connects during init");
    let (ch, done) = order(&log_of(&[
        ("RINGLAB_NCCL_VERSION", "2.28.9"),
        ("NCCL_RUNTIME_CONNECT", "0"),
    ]));
    assert!(ch < done, "NCCL_RUNTIME_CONNECT=0 connects during init");
}

/// `-R K` times every row K times: JSON rows carry the spread, and the table says under each
/// row how wide it was (a noisy machine's single run can be off by several times).
#[test]
fn repeated_rows_show_their_spread() {
    let bench = |extra: &[&str]| {
        let mut args = vec!["bench", "--nproc-per-node", "2", "-b", "1K", "-n", "5"];
        args.extend_from_slice(extra);
        let out = ringlab(&args);
        assert!(out.status.success(), "{out:?}");
        out
    };
    let rows: Vec<serde_json::Value> =
        json_lines(&bench(&["-e", "4K", "-f", "4", "-R", "3", "--json"]))
            .into_iter()
            .filter(|v| v["summary"] != true)
            .collect();
    assert_eq!(rows.len(), 4);
    for r in &rows {
        assert!(r["spread"].as_f64().is_some_and(|s| s >= 0.0), "{r}");
    }
    let out = bench(&["-e", "1K", "-R", "3"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("the median of 3 timed runs"), "{text}");
    assert!(
        text.contains("#   spread over 3 runs: out-of-place "),
        "{text}"
    );
    // Without -R nothing changes: no spread in the rows.
    let out = bench(&["-e", "1K", "--json"]);
    assert!(!String::from_utf8_lossy(&out.stdout).contains("spread"));
}

/// `ringlab bench --backend tcp` on `ranks` ranks, sizes `b` to `e` by factor `f`, `n` timed
/// iterations, then `extra`.
fn bench_args<'a>(
    ranks: &'a str,
    (b, e, f): (&'a str, &'a str, &'a str),
    n: &'a str,
    extra: &[&'a str],
) -> Vec<&'a str> {
    let mut args = vec![
        "bench",
        "--backend",
        "tcp",
        "--nproc-per-node",
        ranks,
        "-b",
        b,
        "-e",
        e,
        "-f",
        f,
        "-n",
        n,
    ];
    args.extend_from_slice(extra);
    args
}

/// [`bench_args`] with `--json`: whether it succeeded, its data rows (not the summary), and
/// its stderr to say what went wrong.
fn bench_json(
    ranks: &str,
    sizes: (&str, &str, &str),
    n: &str,
    extra: &[&str],
) -> (bool, Vec<serde_json::Value>, String) {
    let mut args = bench_args(ranks, sizes, n, extra);
    args.push("--json");
    let out = ringlab(&args);
    let rows = json_lines(&out)
        .into_iter()
        .filter(|r| r.get("summary").is_none())
        .collect();
    (
        out.status.success(),
        rows,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// 64 ranks on a 2-core machine, several times over: no rank leaves while a partner is still
/// in the last collective (the closing barrier), and a partner that has finished its part and
/// left is not mistaken for a dead one. Before, about half such runs failed at the last row
/// with "rank K closed the connection during reduce-scatter step 1".
#[test]
fn sixty_four_ranks_finish_together_run_after_run() {
    for run in 0..4 {
        let (ok, rows, err) = bench_json("64", ("1K", "16K", "4"), "2", &["-w", "0"]);
        let ctx = format!("run {run}: {err}");
        assert!(ok, "{ctx}");
        assert_eq!(rows.len(), 3 * 2, "{ctx}");
        assert!(rows.iter().all(|r| r["wrong"] == 0), "{ctx}: {rows:?}");
    }
}

/// Messages past the single-copy threshold (1 MiB) at its default: read out of the partner's
/// mapped buffer (a copy, or a reduction straight from it) or, for bytes staged aside, by
/// cross-memory attach; every collective exact in both placements, on 3 and 4 ranks.
#[test]
fn large_messages_go_by_single_copy_and_stay_exact() {
    for (coll, ranks) in [
        ("all-reduce", "3"),
        ("reduce-scatter", "4"),
        ("all-gather", "3"),
        ("all-to-all", "4"),
        ("broadcast", "3"),
        ("reduce", "4"),
    ] {
        let (ok, rows, err) =
            bench_json(ranks, ("5M", "10M", "2"), "2", &["-w", "1", "--coll", coll]);
        let ctx = format!("{coll} N={ranks}: {err}");
        assert!(ok, "{ctx}");
        assert_eq!(rows.len(), 2 * 2, "{ctx}");
        for r in &rows {
            assert_eq!(r["wrong"], 0, "{r} {ctx}");
            assert_eq!(r["transport"], "P2P", "{r} {ctx}");
        }
    }
}

/// Without `--algo` the tuner picks each all-reduce's schedule by its size (recursive doubling
/// up to 4 KiB, the ring above), every row says which ran, and both check out; `--algo ring`
/// turns the tuner off. Three ranks: the fold of a rank that is not a power of two too.
#[test]
fn the_tuner_runs_small_all_reduces_with_recursive_doubling() {
    for (extra, small) in [
        (&[][..], "recursive-doubling"),
        (&["--algo", "ring"][..], "ring"),
    ] {
        let (ok, rows, err) = bench_json("3", ("1K", "16K", "4"), "3", extra);
        assert!(ok, "{extra:?}: {err}");
        let algos: Vec<(u64, &str)> = rows
            .iter()
            .map(|r| (r["size"].as_u64().unwrap(), r["algo"].as_str().unwrap()))
            .collect();
        assert_eq!(algos.len(), 6, "{rows:?}");
        for (size, algo) in algos {
            let want = if size <= 4096 { small } else { "ring" };
            assert_eq!(algo, want, "{extra:?} at {size} B");
        }
        assert!(rows.iter().all(|r| r["wrong"] == 0), "{rows:?}");
    }
    let out = ringlab(&bench_args("2", ("1K", "1K", "2"), "2", &[]));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("(by size: recursive-doubling up to 4 KiB, then ring)"),
        "{text}"
    );
}

/// Ctrl-Z then `fg` of the launcher is no hang (finding M2): the ranks wait on its pipes while
/// it is stopped, so when it runs again every progress clock starts afresh. A 3 s stop of a
/// job whose watchdog is 2 s, then 2.5 s more of running: no HANG, and it ends cleanly on SIGINT.
#[test]
fn stopping_and_continuing_the_launcher_is_not_a_hang() {
    let child = Command::new(env!("CARGO_BIN_EXE_ringlab"))
        .args([
            "bench",
            "--backend",
            "tcp",
            "--nproc-per-node",
            "2",
            "-b",
            "4M",
            "-e",
            "4M",
            "-n",
            "100000",
            "--timeout",
            "2",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    let pid = child.id().to_string();
    let signal = |sig: &str| {
        let ok = Command::new("kill")
            .args([sig, &pid])
            .status()
            .expect("kill");
        assert!(ok.success(), "kill {sig}");
    };
    // The pauses are the scenario itself (a stop longer than the watchdog), not a wait for
    // a condition.
    std::thread::sleep(Duration::from_secs(1));
    signal("-STOP");
    std::thread::sleep(Duration::from_secs(3));
    signal("-CONT");
    std::thread::sleep(Duration::from_millis(2500));
    signal("-INT");
    let out = child.wait_with_output().expect("wait");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!text.contains("HANG"), "a stop read as a hang:\n{text}");
}

/// The ranks a launcher started (its pid in RINGLAB_PARENT), by rank.
fn rank_pids(parent: u32) -> Vec<(usize, i32)> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in dir.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(env) = std::fs::read(e.path().join("environ")) else {
            continue;
        };
        let vars: Vec<String> = env
            .split(|&b| b == 0)
            .map(|v| String::from_utf8_lossy(v).into_owned())
            .collect();
        if !vars.contains(&format!("RINGLAB_PARENT={parent}")) {
            continue;
        }
        if let Some(r) = vars
            .iter()
            .find_map(|v| v.strip_prefix("RINGLAB_RANK="))
            .and_then(|r| r.parse().ok())
        {
            out.push((r, pid));
        }
    }
    out.sort();
    out
}

/// A kill of any rank at any moment names the killed rank first (finding M1): 20 kills, of
/// rank 0 or 1, from the moment both exist to well into the run, on every transport (SHM and
/// P2P within the node, sockets with NCCL_SHM_DISABLE=1, SHM with NCCL_P2P_DISABLE=1). Before,
/// the survivor's broken pipe was often reported as the cause.
#[test]
fn a_killed_rank_is_named_first_on_every_transport() {
    let transports: [&[(&str, &str)]; 3] = [
        &[],
        &[("NCCL_SHM_DISABLE", "1")],
        &[("NCCL_P2P_DISABLE", "1")],
    ];
    for i in 0..crate::common::repeats(20) {
        let victim = i % 2;
        let child = Command::new(env!("CARGO_BIN_EXE_ringlab"))
            .args([
                "bench",
                "--backend",
                "tcp",
                "--nproc-per-node",
                "2",
                "-b",
                "16M",
                "-e",
                "16M",
                "-n",
                "200",
                "--timeout",
                "30",
            ])
            .envs(transports[i % 3].iter().copied())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn");
        let start = Instant::now();
        let pids = loop {
            let p = rank_pids(child.id());
            if p.len() == 2 || start.elapsed() > Duration::from_secs(30) {
                break p;
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        assert_eq!(pids.len(), 2, "run {i}: both ranks started");
        // When to kill is the scenario: from at once to 0.6 s into the run.
        std::thread::sleep(Duration::from_millis((i as u64 * 37) % 600));
        let pid = pids[victim].1;
        // SAFETY: kill sends a signal to a process this test started (a rank of its job).
        unsafe { libc::kill(pid, libc::SIGKILL) };
        let out = child.wait_with_output().expect("wait");
        let err = String::from_utf8_lossy(&out.stderr);
        let failed = err
            .lines()
            .find_map(|l| l.split_once("job failed: ").map(|(_, r)| r.to_string()))
            .unwrap_or_else(|| panic!("run {i}: no failure line:\n{err}"));
        assert!(
            failed.starts_with(&format!("rank {victim} was killed")),
            "run {i} ({:?}), killed rank {victim}: {failed}",
            transports[i % 3]
        );
    }
}

/// Two ranks of one launcher job given different -n fail at once, naming the flag, instead
/// of waiting out the timeout (finding L2).
#[test]
fn ranks_given_different_call_counts_are_told_at_once() {
    // A port free now (a fixed guess could sit in the ephemeral range, taken by any socket).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let rank = |r: usize, iters: &str| {
        crate::common::torchrun_rank(
            &[
                "bench",
                "--backend",
                "tcp",
                "-b",
                "4K",
                "-e",
                "4K",
                "-n",
                iters,
                "--timeout",
                "60",
            ],
            r,
            false,
            port,
        )
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn")
    };
    let mut zero = rank(0, "100");
    let one = rank(1, "200").wait_with_output().expect("rank 1");
    let err = String::from_utf8_lossy(&one.stderr);
    let _ = zero.kill();
    let _ = zero.wait();
    assert!(!one.status.success());
    assert!(err.contains("-n 200 where rank 0 has 100"), "{err}");
    // Told, not timed out: the message names the flag, no HANG.
    assert!(!err.contains("HANG"), "{err}");
}

/// `-w` is bounded as `-n` is (finding L5), and a one-rank table says that busbw is 0 by
/// definition (L8).
#[test]
fn warmup_is_bounded_and_a_one_rank_table_says_what_it_is() {
    let out = ringlab(&["bench", "-w", "99999999999"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--warmup_iters") && err.contains("0..=100000"),
        "{err}"
    );
    let out = ringlab(&[
        "bench",
        "--backend",
        "tcp",
        "--nproc-per-node",
        "1",
        "-b",
        "1K",
        "-e",
        "1K",
        "-n",
        "2",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("one rank moves no data") && err.contains("busbw is 0"),
        "{err}"
    );
}

/// A table measured with an experiment switch set says so in its header; a default run says
/// nothing (`comm::cpu::tuning`).
#[test]
fn a_table_names_the_experiment_switches_it_was_measured_with() {
    let args = [
        "bench",
        "--backend",
        "tcp",
        "-b",
        "64K",
        "-e",
        "64K",
        "-n",
        "3",
        "-w",
        "1",
    ];
    let out = ringlab_env(
        &[("RINGLAB_SEND_SLICE", "0"), ("RINGLAB_TCP_CC", "system")],
        &args,
    );
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        table.contains(
            "# Tuning (not the defaults): RINGLAB_SEND_SLICE=0 (unbounded), RINGLAB_TCP_CC=system"
        ),
        "{table}"
    );
    let plain = ringlab(&args);
    let table = String::from_utf8_lossy(&plain.stdout);
    assert!(plain.status.success());
    assert!(!table.contains("# Tuning"), "{table}");
}
