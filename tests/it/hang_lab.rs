//! The hang lab end to end: every scenario hangs (or fails) as staged, is diagnosed with the
//! right culprit, and passes with its fix, on a real cluster of network namespaces (needs root;
//! CI runs as root) and on the emulated cluster (any user). Without root the namespace tests
//! check that `--mode netns` refuses clearly and that auto mode falls back to emulation.

use std::process::{Command, Output};
use std::time::{Duration, Instant};

fn ringlab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ringlab"))
        .args(args)
        .output()
        .expect("run ringlab")
}

/// The watchdog these loops use: 2 s without progress instead of each scenario's 6, through
/// the variable a learner would set (what is tested is the hang and its diagnosis, not the
/// wait; `silent_drop_times_out_instead_of_being_refused` and the TUI tests keep the
/// scenarios' own times).
const QUICK_WATCHDOG: (&str, &str) = ("RINGLAB_LAB_TIMEOUT", "2");

/// The tests in this file build clusters; one at a time (with every other module's) keeps
/// their checks about leftovers meaningful.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    crate::common::clusters()
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

fn scenario_names() -> Vec<String> {
    let list = ringlab(&["lab", "list"]);
    let mut names: Vec<String> = String::from_utf8_lossy(&list.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect();
    assert!(names.len() >= 7, "{names:?}");
    assert!(names.iter().any(|n| n == "silent-drop"), "{names:?}");
    // Slow jobs run to the end: tests/it/slow_lab.rs measures them, on both clusters.
    let (all, _) = ringlab::lab::hang::scenario::all();
    names.retain(|n| !all.iter().any(|s| &s.name == n && s.slow_job()));
    names
}

fn iptables_present() -> bool {
    Command::new("iptables")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// How a scenario's passing run moves its bytes: P2P (single copy) between ranks of one node,
/// NET between nodes (two nodes of two ranks: both).
fn expected_transport(name: &str) -> &'static str {
    let (all, _) = ringlab::lab::hang::scenario::all();
    let s = all.iter().find(|s| s.name == name).expect("scenario");
    match (s.nodes > 1, s.ranks_per_node > 1) {
        (true, true) => "P2P+NET",
        (true, false) => "NET",
        (false, _) => "P2P",
    }
}

/// How a scenario's staged run ends: what its file expects (hang, error, or slow).
fn expected_outcome(name: &str) -> String {
    let (all, _) = ringlab::lab::hang::scenario::all();
    let s = all.iter().find(|s| s.name == name).expect("scenario");
    serde_json::to_value(s.expect.outcome())
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

#[test]
fn every_scenario_hangs_as_staged_and_passes_with_its_fix() {
    let _one_at_a_time = serial();
    if !is_root() {
        // Not root: real namespaces inside a user namespace where the kernel allows it,
        // else a clear refusal (netns) or the emulated cluster (auto), saying why.
        let out = ringlab(&["lab", "run", "docker0", "--json"]);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
        if v["mode"] == "emulated" {
            assert!(v["emulated_because"].is_string(), "{v:#}");
            let out = ringlab(&["lab", "run", "docker0", "--mode", "netns"]);
            assert_eq!(out.status.code(), Some(2));
            assert!(String::from_utf8_lossy(&out.stderr).contains("run as root"));
        } else {
            assert_eq!(v["mode"], "netns", "{v:#}");
            assert_eq!(out.status.code(), Some(0), "{v:#}");
        }
        return;
    }
    for name in scenario_names() {
        let out = Command::new(env!("CARGO_BIN_EXE_ringlab"))
            .args(["lab", "run", &name, "--fix", "--json"])
            .env(QUICK_WATCHDOG.0, QUICK_WATCHDOG.1)
            .output()
            .expect("run ringlab");
        let text = String::from_utf8_lossy(&out.stdout);
        let v: serde_json::Value =
            serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("{name}: {e}: {text}"));
        assert_eq!(out.status.code(), Some(0), "{name}: {v:#}");
        if name == "silent-drop" && !iptables_present() {
            // The drop rule needs iptables (.ci/run installs it); without it auto mode
            // emulates the drop and says why.
            assert_eq!(v["mode"], "emulated", "{v:#}");
            assert!(
                v["emulated_because"]
                    .as_str()
                    .unwrap_or("")
                    .contains("iptables"),
                "{v:#}"
            );
        } else {
            assert_eq!(v["mode"], "netns", "{name}: {v:#}");
        }
        let outcome = v["staged"]["outcome"].as_str().unwrap_or("");
        assert_eq!(outcome, expected_outcome(&name), "{name}: {v:#}");
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
        // Ranks of one namespace node share memory; nodes talk over the network.
        assert_eq!(
            v["fixed"]["transport"],
            expected_transport(&name),
            "{name}: {v:#}"
        );
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

/// The tag of the emulated-cluster test's processes.
const EMULATED: &str = "hang_lab-emulated";

/// The emulated cluster: the same scenarios, expectations and fixes, for any user.
#[test]
fn every_scenario_behaves_the_same_on_the_emulated_cluster() {
    for name in scenario_names() {
        let out = crate::common::tag(&mut Command::new(env!("CARGO_BIN_EXE_ringlab")), EMULATED)
            .args(["lab", "run", &name, "--fix", "--json", "--mode", "emulated"])
            .env(QUICK_WATCHDOG.0, QUICK_WATCHDOG.1)
            .output()
            .expect("run ringlab");
        let text = String::from_utf8_lossy(&out.stdout);
        let v: serde_json::Value =
            serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("{name}: {e}: {text}"));
        assert_eq!(out.status.code(), Some(0), "{name}: {v:#}");
        assert_eq!(v["mode"], "emulated");
        assert!(
            v["emulated_because"]
                .as_str()
                .unwrap_or("")
                .contains("--mode emulated")
        );
        let outcome = v["staged"]["outcome"].as_str().unwrap_or("");
        assert_eq!(outcome, expected_outcome(&name), "{name}: {v:#}");
        assert_eq!(v["fixed"]["outcome"], "pass", "{name}: {v:#}");
        assert_eq!(v["fixed"]["allreduce_correct"], true, "{name}");
        assert_eq!(
            v["fixed"]["transport"],
            expected_transport(&name),
            "{name}: {v:#}"
        );
        // Every node sees its own table, with the docker0 trap on each.
        let ifs = v["diagnosis"]["interfaces"].as_array().expect("interfaces");
        let docker0 = ifs.iter().filter(|i| i["name"] == "docker0").count();
        let nodes = ringlab::lab::hang::scenario::all()
            .0
            .iter()
            .find(|s| s.name == name)
            .map_or(2, |s| s.nodes);
        assert!(docker0 >= nodes, "{name}: {v:#}");
    }
    // Other tests run their own ranks: count this test's.
    let leftovers = crate::common::tagged(EMULATED, "__rank");
    assert!(leftovers.is_empty(), "emulated ranks left: {leftovers:?}");
}

#[test]
fn the_emulated_docker0_trap_is_refused_not_crossed() {
    let out = ringlab(&["lab", "run", "docker0", "--json", "--mode", "emulated"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["staged"]["outcome"], "hang");
    assert_eq!(v["diagnosis"]["culprit"], "unroutable-address");
    let reach = v["diagnosis"]["reachability"].as_array().expect("matrix");
    // Each node reaches its own 172.17.0.1 and is refused on the other's.
    for r in reach {
        let own = r["from_node"] == r["to_rank"];
        assert_eq!(
            r["result"],
            if own { "ok" } else { "Connection refused" },
            "{v:#}"
        );
    }
}

#[test]
fn silent_drop_times_out_instead_of_being_refused() {
    let _one_at_a_time = serial();
    let mode = if is_root() && iptables_present() {
        "netns"
    } else {
        "emulated"
    };
    let out = ringlab(&["lab", "run", "silent-drop", "--json", "--mode", mode]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(out.status.code(), Some(0), "{v:#}");
    assert_eq!(v["staged"]["outcome"], "hang");
    assert!(
        v["staged"]["stuck_phase"]
            .as_str()
            .unwrap_or("")
            .starts_with("connect to 10.77.0.1:"),
        "{v:#}"
    );
    assert_eq!(v["diagnosis"]["culprit"], "connection-dropped");
    let reach = v["diagnosis"]["reachability"].as_array().expect("matrix");
    assert!(
        reach.iter().any(|r| r["from_node"] == 1
            && r["to_rank"] == 0
            && r["result"] == "Connection timed out"),
        "{v:#}"
    );
}

#[test]
fn docker0_names_the_culprit_with_evidence() {
    let _one_at_a_time = serial();
    // Auto mode: namespaces as root, the emulated cluster otherwise.
    let out = ringlab(&["lab", "run", "docker0", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["mode"], if is_root() { "netns" } else { "emulated" });
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
    if !crate::common::require_root("killing the launcher of a namespace cluster") {
        return;
    }
    let tag = "hang_lab-kill-launcher";
    let mut child = crate::common::tag(&mut Command::new(env!("CARGO_BIN_EXE_ringlab")), tag)
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
    // Each rank dies of its parent's death (PR_SET_PDEATHSIG): give the kernel the moment it
    // takes to deliver and reap, as for the holders.
    let start = Instant::now();
    let mut ranks = crate::common::tagged(tag, "__rank");
    while !ranks.is_empty() && start.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(50));
        ranks = crate::common::tagged(tag, "__rank");
    }
    assert!(ranks.is_empty(), "ranks outlived the launcher: {ranks:?}");
}

#[test]
fn the_watchdog_gives_no_false_positive_on_healthy_runs() {
    for i in 0..crate::common::repeats(20) {
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

const TUI_TAG: &str = "hang_lab-ctrl-c";

#[test]
fn ctrl_c_in_the_tui_mid_run_leaves_no_namespace_or_process() {
    let _one_at_a_time = serial();
    if !crate::common::require_root("Ctrl-C in the TUI mid-run on a namespace cluster") {
        return;
    }
    let bin = env!("CARGO_BIN_EXE_ringlab");
    // Removed when the test ends, whatever happens.
    let held = tempfile::Builder::new()
        .prefix("ringlab-hang-pty-")
        .tempdir()
        .expect("a home");
    let home = held.path();
    let mut cmd = Command::new("sh");
    cmd.arg("-c").arg(format!(
        "stty rows 34 cols 110; RINGLAB_HOME={} {} exec {bin}",
        home.display(),
        crate::common::tag_assignment(TUI_TAG)
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
    // A rank killed with its launcher (parent-death signal), or one still starting that finds
    // its launcher gone, needs a moment on a loaded machine; one alive 5 s later outlived it.
    let start = Instant::now();
    let mut ranks = crate::common::tagged(TUI_TAG, "__rank");
    while !ranks.is_empty() && start.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(50));
        ranks = crate::common::tagged(TUI_TAG, "__rank");
    }
    assert!(ranks.is_empty(), "ranks outlived the app: {ranks:?}");
}

/// An unprivileged user gets real namespaces: `lab run` re-runs itself inside a user namespace
/// of its own, where it may make network namespaces, veth links and iptables rules. Run as
/// root, the test drops to `nobody` (uid 65534) with a copy of the binary that user can run.
#[test]
fn an_unprivileged_user_gets_namespaces_through_a_user_namespace() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    if !is_root() {
        // The non-root path is the first test's; here we need root to become somebody else.
        let out = ringlab(&["lab", "run", "silent-drop", "--json"]);
        assert!(out.status.code().is_some());
        return;
    }
    let _one_at_a_time = serial();
    let dir = tempfile::tempdir().expect("tmp");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let bin = dir.path().join("ringlab");
    std::fs::copy(env!("CARGO_BIN_EXE_ringlab"), &bin).expect("copy the binary");
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    // What the kernel allows nobody, asked through util-linux when it is installed.
    let userns = Command::new("unshare")
        .args(["-r", "-n", "true"])
        .uid(65534)
        .gid(65534)
        .status()
        .ok()
        .map(|s| s.success());
    for name in ["docker0", "silent-drop"] {
        let out = Command::new(&bin)
            .args(["lab", "run", name, "--fix", "--json"])
            .current_dir(dir.path())
            .env("HOME", dir.path())
            .uid(65534)
            .gid(65534)
            .output()
            .expect("run as nobody");
        let text = String::from_utf8_lossy(&out.stdout);
        let v: serde_json::Value = serde_json::from_str(text.trim()).unwrap_or_else(|e| {
            panic!(
                "{name}: {e}: {text} {}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
        assert_eq!(out.status.code(), Some(0), "{name}: {v:#}");
        assert_eq!(v["fixed"]["outcome"], "pass", "{name}: {v:#}");
        // silent-drop puts an iptables rule in a namespace: without iptables it is emulated.
        let firewall = name != "silent-drop" || iptables_present();
        if let Some(works) = userns {
            let want = if works && firewall {
                "netns"
            } else {
                "emulated"
            };
            assert_eq!(v["mode"], want, "{name}: unshare -r -n says {works}: {v:#}");
        }
        if v["mode"] == "netns" {
            let ifs = v["diagnosis"]["interfaces"].as_array().expect("interfaces");
            assert!(
                ifs.iter().filter(|i| i["name"] == "docker0").count() >= 2,
                "{name}: {v:#}"
            );
        } else {
            assert_eq!(v["mode"], "emulated", "{name}: {v:#}");
            let why = v["emulated_because"].as_str().unwrap_or("");
            assert!(
                why.contains("user namespaces") || (!firewall && why.contains("iptables")),
                "{name}: {v:#}"
            );
        }
    }
    assert!(holders().is_empty(), "holders left: {:?}", holders());
}

/// The screen end to end in a pseudo-terminal: stage docker0, wait for the evidence, type the
/// fix, and see the all-reduce pass. The lab runs as a child of the app (namespaces as root,
/// a user namespace or the emulated cluster otherwise).
#[test]
fn the_tui_walks_a_learner_from_hang_to_pass() {
    let _one_at_a_time = serial();
    let bin = env!("CARGO_BIN_EXE_ringlab");
    // Removed when the test ends, whatever happens.
    let held = tempfile::Builder::new()
        .prefix("ringlab-hang-walk-")
        .tempdir()
        .expect("a home");
    let home = held.path();
    let mut cmd = Command::new("sh");
    cmd.arg("-c").arg(format!(
        "stty rows 40 cols 120; RINGLAB_HOME={} exec {bin}",
        home.display()
    ));
    let mut p = expectrl::Session::spawn(cmd).expect("pty");
    p.set_expect_timeout(Some(Duration::from_secs(40)));
    p.expect("Course").expect("course map");
    p.send("H").expect("open the hang lab");
    p.expect("docker0").expect("scenario list");
    p.send("\r").expect("stage");
    // ratatui rewrites only the cells that change, so match text on lines that appear whole.
    p.expect("or e to type one")
        .expect("the watchdog calls the hang, evidence in");
    p.send("e").expect("type a fix");
    p.send("NCCL_SOCKET_IFNAME=eth0").expect("the fix");
    p.send("\r").expect("run it");
    p.expect("PASS with NCCL_SOCKET_IFNAME=eth0")
        .expect("the all-reduce passes with the typed fix");
    p.send("\x03").expect("Ctrl-C");
    p.expect(expectrl::Eof).expect("app exits");
    let progress = std::fs::read_to_string(home.join("progress.json")).unwrap_or_default();
    assert!(
        progress.contains("docker0"),
        "the attempt is recorded: {progress}"
    );
}

/// A wrong fix is judged by what its re-run showed, not by a blanket "not the cause":
/// `^docker0` in the docker0 scenario is half right (NCCL now advertises lo, which the other
/// node cannot reach either) and the verdict says so; a typed interface that does not exist
/// shows the error itself.
#[test]
fn a_wrong_fix_says_what_the_rerun_showed_and_why_it_still_fails() {
    use ringlab::lab::hang::scenario::{Diagnosis, Fixed, IfaceRow, Reach};
    use ringlab::tui::screens::hang::verdict_lines;
    let _one_at_a_time = serial();
    let try_fix = |value: &str| -> Fixed {
        let fix = format!(
            r#"{{"text":"NCCL_SOCKET_IFNAME={value}","env":{{"NCCL_SOCKET_IFNAME":"{value}"}}}}"#
        );
        let out = ringlab(&["lab", "run", "docker0", "--try-fix", &fix, "--json"]);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
        serde_json::from_value(v["fixed"].clone()).expect("a fixed report")
    };
    let text = |lines: Vec<ratatui::text::Line<'static>>| -> String {
        lines
            .iter()
            .map(|l| {
                l.spans
                    .iter()
                    .map(|s| s.content.as_ref())
                    .collect::<String>()
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    // The staged run's evidence: every rank advertised docker0's 172.17.0.1.
    let staged = Diagnosis {
        interfaces: vec![IfaceRow {
            node: 0,
            name: "docker0".into(),
            addr: "172.17.0.1".into(),
        }],
        reachability: vec![Reach {
            from_node: 1,
            to_rank: 0,
            addr: "172.17.0.1:4000".into(),
            result: ringlab::lab::hang::scenario::Reached::Refused,
        }],
        culprit: ringlab::lab::hang::scenario::Culprit::UnroutableAddress,
        ..Default::default()
    };
    let theme = ringlab::tui::theme::Theme::from_env();

    let f = try_fix("^docker0");
    assert_eq!(
        f.outcome,
        ringlab::lab::hang::scenario::Outcome::Hang,
        "{f:?}"
    );
    let ev = f.evidence.as_ref().expect("the re-run's own evidence");
    let now = ev.advertised_by_rank(1);
    assert_eq!(now.len(), 2, "{now:?}");
    assert!(now.iter().all(|l| l.ends_with("(lo)")), "{now:?}");
    let v = text(verdict_lines(
        "NCCL_SOCKET_IFNAME=^docker0",
        &f,
        &staged,
        1,
        "the all-reduce of ones gave the world size on every rank",
        &theme,
        usize::MAX,
    ));
    assert!(v.contains("still HANGS (the watchdog fired after"), "{v}");
    assert!(v.contains("advertised now: rank 0: 127.0.0.1:"), "{v}");
    assert!(v.contains("why it still fails"), "{v}");
    assert!(v.contains("changed what happens, but not enough"), "{v}");
    assert!(!v.contains("not the cause"), "{v}");

    let f = try_fix("eth1");
    assert_eq!(
        f.outcome,
        ringlab::lab::hang::scenario::Outcome::Error,
        "{f:?}"
    );
    let v = text(verdict_lines(
        "NCCL_SOCKET_IFNAME=eth1",
        &f,
        &staged,
        1,
        "the all-reduce of ones gave the world size on every rank",
        &theme,
        usize::MAX,
    ));
    assert!(v.contains("still FAILS with an error"), "{v}");
    // Neither node has eth1: whichever rank looks first fails, and the error is shown.
    assert!(v.contains("error: rank ") && v.contains(" failed"), "{v}");
    assert!(v.contains("no socket interface found"), "{v}");
}

/// A run-time hang on screen, end to end in a pseudo-terminal: the training loop races, one
/// rank stops, the watchdog fires, the flight recorders are lined up with the stopped rank
/// named, and the right fix (chosen from the list, among "more time") re-runs to PASS.
#[test]
fn the_tui_walks_a_run_time_hang_from_the_watchdog_to_pass() {
    use ringlab::lab::hang::scenario;
    let _one_at_a_time = serial();
    let (all, _) = scenario::all();
    let pos = all
        .iter()
        .position(|s| s.name == "stopped-rank")
        .expect("scenario");
    let s = &all[pos];
    let right = scenario::fix_choices(s)
        .iter()
        .position(|f| f == &s.fix)
        .expect("the right fix is a choice");
    // The screen as a terminal shows it (a vt100 emulator), not the byte stream: ratatui
    // redraws only the cells that change, so a line's text need not pass by in one piece.
    let mut t = crate::hang_pty::Term::start(50, 160);
    t.open_hang_lab();
    t.select(0, pos, s);
    t.send("\r");
    t.wait("collective", 90);
    // The staged run and the fix run are real jobs: on a loaded 2-core runner a 200-step loop
    // of four ranks can take minutes. The scenario's own watchdog bounds a hang; this bound is
    // only there so that a broken screen does not wait forever.
    t.wait("flight recorders by collective number", 400);
    for _ in 0..right {
        t.send("j");
    }
    t.send("\r");
    t.wait("PASS with", 400);
    t.send("\x03");
}

/// A call that differs across ranks (an uneven last batch) does what it does under NCCL,
/// which compares nothing across ranks: every rank waits inside its own all-reduce until the
/// watchdog fires. The flight recorders then name the rank and the step, and every rank's GPU
/// reads as NCCL leaves it: spinning inside the collective.
#[test]
fn a_mismatched_call_hangs_as_under_nccl_and_the_recorders_name_it() {
    let out = Command::new(env!("CARGO_BIN_EXE_ringlab"))
        .args([
            "lab",
            "run",
            "uneven-last-batch",
            "--json",
            "--mode",
            "emulated",
        ])
        .env(QUICK_WATCHDOG.0, QUICK_WATCHDOG.1)
        .output()
        .expect("run ringlab");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(v["staged"]["outcome"], "hang", "{v:#}");
    assert_eq!(v["diagnosis"]["culprit"], "call-mismatch", "{v:#}");
    assert_eq!(v["diagnosis"]["trace"]["rank"], 1, "{v:#}");
    assert!(
        v["diagnosis"]["trace"]["label"]
            .as_str()
            .unwrap_or("")
            .starts_with("step 120"),
        "{v:#}"
    );
    let explanation = v["diagnosis"]["explanation"].as_str().unwrap_or("");
    assert!(explanation.contains("2048 × f32"), "{explanation}");
    for rr in v["staged"]["ranks"].as_array().expect("ranks") {
        assert_eq!(
            rr["gpu_util"], "spinning",
            "every rank is inside a collective: {rr}"
        );
    }
}

/// Twenty (slow tier; six in the fast one) healthy 200-step training loops (four ranks, two nodes, a header check before each
/// of the 600 collectives) and not one false alarm from the watchdog or the header check.
#[test]
fn twenty_healthy_training_loops_raise_no_false_alarm() {
    let fix = r#"{"text":"healthy","remove_fault":true}"#;
    for i in 0..crate::common::repeats(20) {
        let out = ringlab(&[
            "lab",
            "run",
            "stopped-rank",
            "--try-fix",
            fix,
            "--mode",
            "emulated",
            "--json",
        ]);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("run {i}: {e}: {}", String::from_utf8_lossy(&out.stderr)));
        assert_eq!(v["fixed"]["outcome"], "pass", "run {i}: {v:#}");
        assert_eq!(v["fixed"]["allreduce_correct"], true, "run {i}");
    }
}

/// `lab cleanup` removes flight-recorder folders earlier labs left, but not one a running lab
/// is still writing (touched in the last two minutes).
#[test]
fn cleanup_removes_old_flight_recorders_only() {
    // `lab cleanup` also takes down clusters: never while another test stages one.
    let _one_at_a_time = serial();
    let base = std::env::temp_dir();
    let old = base.join(format!("ringlab-trace-test-old-{}", std::process::id()));
    let fresh = base.join(format!("ringlab-trace-test-fresh-{}", std::process::id()));
    for d in [&old, &fresh] {
        std::fs::create_dir_all(d).expect("mkdir");
        std::fs::write(d.join("rank0.json"), "{}").expect("write");
    }
    let touched = Command::new("touch")
        .args(["-d", "10 minutes ago"])
        .arg(&old)
        .status()
        .expect("touch");
    assert!(touched.success());
    let out = ringlab(&["lab", "cleanup"]);
    assert!(out.status.success());
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(!old.exists(), "{said}");
    assert!(fresh.exists(), "a folder in use is kept");
    // And the learner is told why it is still there.
    assert!(
        said.contains("kept") && said.contains(&fresh.display().to_string()),
        "{said}"
    );
    assert!(!said.contains("nothing to clean up\n"), "{said}");
    let _ = std::fs::remove_dir_all(&fresh);
}

/// A container's small /dev/shm: eight ranks of one node cannot all reserve their
/// shared-memory buffers, the one that cannot fails init with NCCL's message, and each fix a
/// learner might pick is judged by its own re-run: a bigger /dev/shm or the host's passes over
/// SHM; NCCL_SHM_DISABLE=1 passes too, but over sockets (it shows the cause, it does not fix
/// it); turning off P2P changes nothing. On namespaces (root) and on the emulated cluster.
#[test]
fn a_small_dev_shm_fails_init_and_only_room_fixes_it_on_shm() {
    use ringlab::lab::hang::scenario;
    let _one_at_a_time = serial();
    let (all, _) = scenario::all();
    let s = all
        .iter()
        .find(|s| s.name == "small-dev-shm")
        .expect("scenario");
    // The story's numbers are the transport's: two ring neighbours per rank, one FIFO each.
    let need = ringlab::comm::cpu::shm::segment_len(2, ringlab::comm::cpu::shm::DEFAULT_FIFO);
    assert!(s.symptom.contains(&need.to_string()), "{}", s.symptom);
    let lesson = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/lessons/10-containers-launchers.md"
    ))
    .expect("lesson 10");
    assert!(
        lesson.contains(&format!("{need} bytes per rank")),
        "lesson 10 gives the per-rank reservation the transport makes"
    );
    let modes: &[&str] = if is_root() {
        &["netns", "emulated"]
    } else {
        &["emulated"]
    };
    for mode in modes {
        let out = ringlab(&["lab", "run", "small-dev-shm", "--json", "--mode", mode]);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
        assert_eq!(v["staged"]["outcome"], "error", "{mode}: {v:#}");
        assert_eq!(v["diagnosis"]["culprit"], "shm-full", "{mode}: {v:#}");
        let why = v["diagnosis"]["explanation"].as_str().unwrap_or("");
        assert!(
            why.contains("failed to extend")
                && why.contains(&format!("to {need} bytes"))
                && why.contains("No space left on device"),
            "{mode}: {why}"
        );
        for f in scenario::fix_choices(s) {
            let json = serde_json::to_string(&f).expect("fix");
            let out = ringlab(&[
                "lab",
                "run",
                "small-dev-shm",
                "--mode",
                mode,
                "--try-fix",
                &json,
            ]);
            let last = String::from_utf8_lossy(&out.stdout)
                .lines()
                .last()
                .unwrap_or("")
                .to_string();
            let got: serde_json::Value = serde_json::from_str(&last)
                .unwrap_or_else(|e| panic!("{e}: {last} {}", String::from_utf8_lossy(&out.stderr)));
            let fixed = &got["fixed"];
            let (outcome, transport) = if f.env.contains_key("NCCL_SHM_DISABLE") {
                ("pass", Some("NET"))
            } else if f.ipc_host || f.shm_size.is_some() {
                ("pass", Some("P2P"))
            } else {
                ("error", None)
            };
            assert_eq!(fixed["outcome"], outcome, "{mode} {}: {fixed:#}", f.text);
            if let Some(t) = transport {
                assert_eq!(fixed["transport"], t, "{mode} {}: {fixed:#}", f.text);
            }
        }
    }
    // No segment outlives its rank (a running test's ranks may hold theirs for a moment).
    let stale: Vec<String> = std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| {
                    n.strip_prefix("ringlab-shm-")
                        .and_then(|r| r.split('-').next())
                        .is_some_and(|pid| !std::path::Path::new(&format!("/proc/{pid}")).exists())
                })
                .collect()
        })
        .unwrap_or_default();
    assert!(stale.is_empty(), "left in /dev/shm: {stale:?}");
}

/// The cursor starts on the first fix: the right one is never there, so a second Enter does
/// not solve a scenario unread (stopped-rank and missing-rank had it first).
#[test]
fn the_right_fix_is_never_where_the_cursor_starts() {
    use ringlab::lab::hang::scenario;
    let (all, _) = scenario::all();
    for s in &all {
        let choices = scenario::fix_choices(s);
        let at = choices.iter().position(|f| f == &s.fix);
        assert!(
            at.is_some_and(|i| i > 0),
            "{}: the right fix at {at:?} of {choices:?}",
            s.name
        );
    }
}
