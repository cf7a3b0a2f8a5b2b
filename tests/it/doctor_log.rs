//! `ringlab doctor --log`: each fixture (real NCCL_DEBUG=INFO line shapes) gives the expected
//! findings, with evidence pointing at the right lines, and the right exit code.

use std::process::{Command, Output};

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/nccl_logs");

fn path(name: &str) -> String {
    format!("{DIR}/{name}")
}

fn doctor(files: &[&str], json: bool) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ringlab"));
    cmd.arg("doctor").arg("--log");
    for f in files {
        cmd.arg(path(f));
    }
    if json {
        cmd.arg("--json");
    }
    cmd.output().expect("run ringlab")
}

/// The findings as JSON values, and the exit code.
fn findings(files: &[&str]) -> (Vec<serde_json::Value>, i32) {
    let out = doctor(files, true);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("bad JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)));
    let f = v["findings"].as_array().expect("findings array").clone();
    (f, out.status.code().expect("exit code"))
}

fn kinds(f: &[serde_json::Value]) -> Vec<&str> {
    f.iter()
        .map(|f| f["kind"].as_str().expect("kind"))
        .collect()
}

fn finding<'a>(f: &'a [serde_json::Value], kind: &str) -> &'a serde_json::Value {
    f.iter()
        .find(|f| f["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} finding in {:?}", kinds(f)))
}

/// (file name without the directory, line) of each evidence entry; each entry's text must be
/// that very line of that file.
fn lines(f: &serde_json::Value) -> Vec<(String, usize)> {
    f["evidence"]
        .as_array()
        .expect("evidence")
        .iter()
        .map(|e| {
            let file = e[0].as_str().expect("file");
            let no = e[1].as_u64().expect("line") as usize;
            let text = std::fs::read_to_string(file).expect("read fixture");
            assert_eq!(
                text.lines().nth(no - 1).expect("line exists"),
                e[2].as_str().expect("text"),
                "evidence text is not line {no} of {file}"
            );
            let name = file.rsplit('/').next().expect("name").to_string();
            (name, no)
        })
        .collect()
}

fn at(name: &str, nos: &[usize]) -> Vec<(String, usize)> {
    nos.iter().map(|&n| (name.to_string(), n)).collect()
}

#[test]
fn docker0_across_two_nodes() {
    let log = "docker0-two-nodes.log";
    let (f, code) = findings(&[log]);
    assert_eq!(code, 1);
    let local = finding(&f, "local-interface");
    assert_eq!(lines(local), at(log, &[3, 6, 8, 11]));
    assert!(
        local["fix"]
            .as_str()
            .unwrap()
            .contains("NCCL_SOCKET_IFNAME")
    );
    assert!(local["fix"].as_str().unwrap().contains("^docker0,lo"));
    let retry = finding(&f, "connect-retry");
    assert_eq!(lines(retry), at(log, &[13, 15]));
    let s = retry["summary"].as_str().unwrap();
    assert!(
        s.contains("172.17.0.1") && s.contains("3/34") && s.contains("every node"),
        "{s}"
    );
}

#[test]
fn lo_across_nodes() {
    let log = "lo-across-nodes.log";
    let (f, code) = findings(&[log]);
    assert_eq!(code, 1);
    assert_eq!(kinds(&f), ["local-interface", "connect-retry"]);
    assert_eq!(lines(&f[0]), at(log, &[2, 5]));
    assert!(f[0]["summary"].as_str().unwrap().contains("lo"));
    assert_eq!(lines(&f[1]), at(log, &[7, 9]));
    assert!(f[1]["summary"].as_str().unwrap().contains("127.0.0.1"));
}

#[test]
fn interface_names_differ_across_two_files() {
    let (n0, n1) = ("names-differ-node0.log", "names-differ-node1.log");
    let (f, code) = findings(&[n0, n1]);
    assert_eq!(code, 1);
    assert_eq!(kinds(&f), ["iface-names-differ"]);
    let mut want = at(n0, &[2]);
    want.extend(at(n1, &[2]));
    assert_eq!(lines(&f[0]), want);
    assert!(f[0]["fix"].as_str().unwrap().contains("eno1,eth0"));
    // Either file alone is one host: nothing to compare.
    assert_eq!(findings(&[n0]), (vec![], 0));
}

#[test]
fn connect_retry_loops() {
    let log = "retry-loop.log";
    let (f, code) = findings(&[log]);
    assert_eq!(code, 1);
    assert_eq!(kinds(&f), ["connect-retry", "connect-retry"]);
    let s0 = f[0]["summary"].as_str().unwrap();
    assert!(
        s0.contains("10.1.0.10<29500>") && s0.contains("Connection refused") && s0.contains("4/34"),
        "{s0}"
    );
    assert!(!s0.contains("every node"), "{s0}");
    assert_eq!(lines(&f[0]), at(log, &[4, 7]));
    let s1 = f[1]["summary"].as_str().unwrap();
    assert!(
        s1.contains("No route to host") && s1.contains("2/34"),
        "{s1}"
    );
    assert_eq!(lines(&f[1]), at(log, &[8, 9]));
}

#[test]
fn no_socket_interface_quotes_the_value() {
    let log = "no-interface.log";
    let (f, code) = findings(&[log]);
    assert_eq!(code, 1);
    // A set NCCL_SOCKET_IFNAME that matches nothing: find-or-fail.
    assert_eq!(kinds(&f), ["ifname-no-match"]);
    assert!(
        f[0]["summary"]
            .as_str()
            .unwrap()
            .contains("NCCL_SOCKET_IFNAME=eth0")
    );
    assert_eq!(lines(&f[0]), at(log, &[2, 3]));
}

#[test]
fn ib_disabled_is_a_diagnostic() {
    // The log shows no InfiniBand hardware: turning IB off costs nothing there, so the
    // finding is a note and the exit status 0.
    let log = "ib-disabled.log";
    let (f, code) = findings(&[log]);
    assert_eq!(code, 0);
    assert_eq!(kinds(&f), ["ib-disabled"]);
    assert_eq!(f[0]["severity"], "note");
    assert_eq!(lines(&f[0]), at(log, &[1, 5]));
    assert!(
        f[0]["fix"]
            .as_str()
            .unwrap()
            .contains("diagnostic, not a fix")
    );
}

#[test]
fn p2p_disabled_is_a_diagnostic() {
    let log = "p2p-disabled.log";
    let (f, code) = findings(&[log]);
    assert_eq!(code, 1);
    assert_eq!(kinds(&f), ["p2p-disabled"]);
    // The two variable lines, and the first connection that went via SHM instead.
    assert_eq!(lines(&f[0]), at(log, &[2, 3, 5]));
    assert!(f[0]["fix"].as_str().unwrap().contains("remove"));
}

#[test]
fn healthy_log_has_no_findings() {
    assert_eq!(findings(&["healthy.log"]), (vec![], 0));
    let out = doctor(&["healthy.log"], false);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("no known misconfiguration found"));
}

#[test]
fn text_output_names_file_and_line() {
    let out = doctor(&["p2p-disabled.log"], false);
    assert_eq!(out.status.code(), Some(1));
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(s.contains("[p2p-disabled]"), "{s}");
    assert!(s.contains("p2p-disabled.log:2: box:610:610"), "{s}");
    assert!(s.contains("fix: "), "{s}");
}

#[test]
fn unreadable_file_exits_2_naming_it() {
    let out = doctor(&["healthy.log", "no-such-file.log"], false);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no-such-file.log"), "{err}");
}

#[test]
fn without_log_it_checks_this_machine_and_explains_what_works() {
    let out = Command::new(env!("CARGO_BIN_EXE_ringlab"))
        .arg("doctor")
        .output()
        .expect("run ringlab");
    assert_eq!(out.status.code(), Some(0));
    let s = String::from_utf8_lossy(&out.stdout);
    for section in ["== GPUs", "== NCCL", "== Network", "== What runs here"] {
        assert!(s.contains(section), "{section}:\n{s}");
    }
    assert!(s.contains("NCCL would use"), "{s}");
    let json = Command::new(env!("CARGO_BIN_EXE_ringlab"))
        .args(["doctor", "--json"])
        .output()
        .expect("run ringlab");
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).expect("json");
    if v["probe"]["driver_lib"] == false {
        // No GPU (CI): a clear explanation, and the TCP labs named as what still works.
        assert!(s.contains("NVIDIA driver: not found"), "{s}");
        assert!(s.contains("--backend tcp"), "{s}");
        assert!(v["nccl_backend"]["Err"].is_string(), "{v:#}");
    } else {
        assert!(s.contains("GPU 0:") || s.contains("no GPU visible"), "{s}");
    }
}

fn mkfifo(path: &std::path::Path) {
    let c = std::ffi::CString::new(path.to_str().expect("utf-8")).expect("c");
    // SAFETY: mkfifo with a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

#[test]
fn escape_codes_in_a_log_are_shown_not_obeyed_and_a_fifo_is_refused() {
    let dir = tempfile::tempdir().expect("tmp");
    let log = dir.path().join("evil.log");
    std::fs::write(
        &log,
        "hostA:1:1 [0] NCCL INFO Bootstrap: Using docker0:172.17.0.1<0>\x1b[2J\x1b]0;pwned\x07\n\
         hostB:2:2 [0] NCCL INFO Bootstrap: Using docker0:172.17.0.1<0>\n",
    )
    .expect("write");
    let out = Command::new(env!("CARGO_BIN_EXE_ringlab"))
        .args(["doctor", "--log"])
        .arg(&log)
        .output()
        .expect("run");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(!text.contains('\x1b') && !text.contains('\x07'), "{text:?}");
    assert!(text.contains("\\x1b[2J"), "{text}");
    let fifo = dir.path().join("fifo");
    mkfifo(&fifo);
    let out = Command::new(env!("CARGO_BIN_EXE_ringlab"))
        .args(["doctor", "--log"])
        .arg(&fifo)
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a regular file"));
    // check refuses a FIFO too, and a folder with no lessons is not "no problems".
    let out = Command::new(env!("CARGO_BIN_EXE_ringlab"))
        .arg("check")
        .arg(&fifo)
        .output()
        .expect("run");
    assert_ne!(out.status.code(), Some(0));
    let empty = tempfile::tempdir().expect("empty");
    let out = Command::new(env!("CARGO_BIN_EXE_ringlab"))
        .arg("check")
        .arg(empty.path())
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("nothing to check"));
}

#[test]
fn nvlink_box_with_p2p_connections_is_healthy_and_its_transports_are_counted() {
    assert_eq!(findings(&["nvlink-healthy.log"]), (vec![], 0));
    let out = doctor(&["nvlink-healthy.log"], true);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["transports"][0]["host"], "h100", "{v:#}");
    assert_eq!(v["transports"][0]["counts"][0][0], "p2p", "{v:#}");
    assert_eq!(v["transports"][0]["counts"][0][1], 8, "{v:#}");
    let text = String::from_utf8_lossy(&doctor(&["nvlink-healthy.log"], false).stdout).into_owned();
    assert!(text.contains("h100: 8 P2P"), "{text}");
}

#[test]
fn p2p_off_on_an_nvswitch_box_names_the_variable_the_shm_lines_and_nvls() {
    let log = "nvlink-p2p-off.log";
    let (f, code) = findings(&[log]);
    assert_eq!(code, 1);
    assert_eq!(kinds(&f), ["p2p-disabled"]);
    assert_eq!(lines(&f[0]), at(log, &[3, 5, 7]));
    let s = f[0]["summary"].as_str().unwrap();
    assert!(
        s.contains("5 connection(s) via SHM") && s.contains("NVSwitch"),
        "{s}"
    );
    assert!(
        f[0]["fix"]
            .as_str()
            .unwrap()
            .contains("diagnostic, not a fix")
    );
}

#[test]
fn shm_without_any_p2p_and_no_variable_is_a_fallback_with_nvmls_verdict() {
    let log = "pcie-vm-shm-fallback.log";
    let (f, code) = findings(&[log]);
    assert_eq!(code, 1);
    assert_eq!(kinds(&f), ["shm-fallback"]);
    // The first SHM connection and the first two "P2P is disabled between" lines.
    assert_eq!(lines(&f[0]), at(log, &[4, 5, 8]));
    let s = f[0]["summary"].as_str().unwrap();
    assert!(s.contains("vm7") && s.contains("all 4"), "{s}");
    let fix = f[0]["fix"].as_str().unwrap();
    assert!(
        fix.contains("nvidia-smi topo -m") && fix.contains("ACS"),
        "{fix}"
    );
}

#[test]
fn socket_instead_of_ib_on_hosts_with_ipoib() {
    let log = "ipoib-socket-fallback.log";
    let (f, code) = findings(&[log]);
    assert_eq!(code, 1);
    assert_eq!(kinds(&f), ["socket-fallback"]);
    // The IPoIB bootstrap line, each host's "No device found" and "Using network Socket",
    // and each process's first `via NET/Socket` connection.
    assert_eq!(lines(&f[0]), at(log, &[1, 4, 6, 7, 9, 10, 12]));
    let s = f[0]["summary"].as_str().unwrap();
    assert!(s.contains("IPoIB interface ib0"), "{s}");
    let fix = f[0]["fix"].as_str().unwrap();
    assert!(
        fix.contains("/dev/infiniband") && fix.contains("IPC_LOCK"),
        "{fix}"
    );
}

#[test]
fn ib_with_gdrdma_is_healthy() {
    assert_eq!(findings(&["ib-gdrdma-healthy.log"]), (vec![], 0));
    let text =
        String::from_utf8_lossy(&doctor(&["ib-gdrdma-healthy.log"], false).stdout).into_owned();
    assert!(
        text.contains("node0: 2 NET/IB (2 with GPUDirect RDMA)"),
        "{text}"
    );
}

#[test]
fn a_container_without_host_networking_advertises_its_bridge_address() {
    let log = "container-bridge.log";
    let (f, code) = findings(&[log]);
    assert_eq!(code, 1);
    assert_eq!(kinds(&f), ["container-bridge", "connect-retry"]);
    assert_eq!(lines(&f[0]), at(log, &[1, 3]));
    let s = f[0]["summary"].as_str().unwrap();
    assert!(s.contains("172.17.0.2") && s.contains("eth0"), "{s}");
    assert!(f[0]["fix"].as_str().unwrap().contains("--network=host"));
}

/// A whole job's logs as Slurm writes them (`%x-%j-%t.out`, one per task): a folder or a
/// quoted pattern reads them all, in task order, with the findings of the files named one by
/// one; an empty folder or a pattern that matches nothing exits 2 naming it.
#[test]
fn a_jobs_log_folder_or_pattern_reads_every_rank() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (task, fixture) in [(0, "names-differ-node0.log"), (1, "names-differ-node1.log")] {
        std::fs::copy(
            path(fixture),
            dir.path().join(format!("nccl-sanity-12-{task}.out")),
        )
        .expect("copy");
    }
    std::fs::write(dir.path().join(".hidden"), "not a log").expect("write");
    let run = |arg: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_ringlab"))
            .args(["doctor", "--json", "--log", arg])
            .output()
            .expect("run ringlab");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "{arg}: bad JSON ({e}): {}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
        (v, out.status.code())
    };
    let (by_files, code) = findings(&["names-differ-node0.log", "names-differ-node1.log"]);
    let want: Vec<&str> = kinds(&by_files);
    assert!(!want.is_empty(), "the fixtures have findings");
    let folder = dir.path().to_str().expect("utf-8");
    let pattern = format!("{folder}/nccl-sanity-*.out");
    for arg in [folder, pattern.as_str()] {
        let (v, c) = run(arg);
        assert_eq!(c, Some(code), "{arg}");
        let files: Vec<&str> = v["files"]
            .as_array()
            .expect("files")
            .iter()
            .filter_map(|f| f.as_str())
            .collect();
        assert_eq!(files.len(), 2, "{arg}: {files:?}");
        assert!(
            files[0].ends_with("-0.out") && files[1].ends_with("-1.out"),
            "{files:?}"
        );
        let f = v["findings"].as_array().expect("findings").clone();
        assert_eq!(kinds(&f), want, "{arg}");
    }
    let empty = tempfile::tempdir().expect("tempdir");
    for (arg, needle) in [
        (
            empty.path().to_str().expect("utf-8").to_string(),
            "no log files",
        ),
        (format!("{folder}/*.nothing"), "no file matches"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_ringlab"))
            .args(["doctor", "--log", &arg])
            .output()
            .expect("run ringlab");
        assert_eq!(out.status.code(), Some(2), "{arg}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle) && err.contains(&arg), "{err}");
    }
}

/// What is not a log is refused with a message naming it and exit 2, never read as one: a
/// binary, a file over the size limit (a 2 GB sparse file costs no disk), and text with no
/// NCCL line at all.
#[test]
fn a_binary_a_huge_file_and_garbage_each_exit_2_with_a_reason() {
    let tmp = tempfile::tempdir().expect("tmp");
    let bin = tmp.path().join("core.bin");
    let mut bytes: Vec<u8> = (0..4096u32).map(|i| (i * 7919 % 251) as u8).collect();
    bytes[100] = 0;
    std::fs::write(&bin, &bytes).expect("write");
    let huge = tmp.path().join("huge.log");
    let f = std::fs::File::create(&huge).expect("create");
    f.set_len(2 << 30).expect("a sparse 2 GiB file");
    let garbage = tmp.path().join("garbage.log");
    std::fs::write(
        &garbage,
        "Epoch 1: loss 2.31\nTraceback (most recent call last):\n  File \"x.py\"\nKeyError: 3\n",
    )
    .expect("write");
    for (p, says) in [
        (&bin, "not a text log"),
        (&huge, "over the"),
        (&garbage, "no NCCL log line"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_ringlab"))
            .args(["doctor", "--log"])
            .arg(p)
            .output()
            .expect("run");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{}: {err}", p.display());
        assert!(
            err.contains(says) && err.contains(&p.display().to_string()),
            "{}: {err}",
            p.display()
        );
        assert!(out.stdout.is_empty(), "nothing printed as a result");
    }
}

/// Every WARN line is named through NCCL's message table, or listed as not in it: in the
/// JSON, each with its file and line; an unknown one is a note (exit 0), never dropped.
#[test]
fn every_warn_line_is_named_or_listed() {
    let tmp = tempfile::tempdir().expect("tmp");
    let p = tmp.path().join("r0.log");
    std::fs::write(
        &p,
        "h:1:1 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n\
         \n\
         h:1:1 [0] init.cc:904 NCCL WARN Duplicate GPU detected : rank 0 and rank 1 both on CUDA device 3b000\n\
         \n\
         h:1:1 [0] foo.cc:1 NCCL WARN Something no NCCL release ever printed\n",
    )
    .expect("write");
    let out = Command::new(env!("CARGO_BIN_EXE_ringlab"))
        .args(["doctor", "--json", "--log"])
        .arg(&p)
        .output()
        .expect("run");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let w = v["warnings"].as_array().expect("warnings");
    assert_eq!(w.len(), 2, "{v:#}");
    assert_eq!(w[0]["line"], 3);
    assert_eq!(w[0]["named"]["id"], "duplicate-gpu", "{v:#}");
    assert!(
        w[0]["named"]["site"]
            .as_str()
            .unwrap_or("")
            .starts_with("2.28.9 init.cc:")
    );
    assert!(w[1]["named"].is_null(), "{v:#}");
    let f = v["findings"].as_array().expect("findings");
    let kinds: Vec<&str> = f.iter().filter_map(|f| f["kind"].as_str()).collect();
    assert_eq!(kinds, ["duplicate-gpu", "unknown-warning"], "{v:#}");
    assert_eq!(f[1]["severity"], "note");
    assert_eq!(f[1]["evidence"][0][1], 5);
    assert_eq!(out.status.code(), Some(1), "the duplicate GPU is an error");
}

/// `doctor --log` holds to a budget across all its files, not only per file (finding L6): a
/// file that would take the total past it is skipped and named, and the others are read.
#[test]
fn files_past_the_total_budget_are_skipped_and_named() {
    let tmp = tempfile::tempdir().expect("tmp");
    let small = |n: &str| {
        let p = tmp.path().join(n);
        std::fs::write(
            &p,
            "h:1:1 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n",
        )
        .expect("w");
        p
    };
    let (a, c) = (small("r0.log"), small("r2.log"));
    // Sparse: its size counts against the budget without costing disk; it is never read.
    let b = tmp.path().join("r1.log");
    std::fs::File::create(&b)
        .expect("create")
        .set_len(130 << 20)
        .expect("size");
    let out = Command::new(env!("CARGO_BIN_EXE_ringlab"))
        .args(["doctor", "--log"])
        .args([&a, &b, &c])
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("skipped") && err.contains("r1.log"), "{err}");
    assert!(err.contains("read 2 file(s)"), "{err}");
}
