//! The slow-job lab end to end: each scenario runs slowly as staged, its evidence names the
//! slow node, interface or rank, and its fix restores the job; on the namespace cluster (tc's
//! token bucket on a veth: needs root, which CI has) and on the emulated cluster (the ranks'
//! pacer: any user). Without root the namespace half is the emulated half again, said so.

use std::process::{Command, Output};

use ringlab::lab::bench::pairs::PairMatrix;
use serde_json::Value;

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// The modes this user can run: both as root, the emulated one otherwise.
fn modes() -> Vec<&'static str> {
    if is_root() {
        vec!["netns", "emulated"]
    } else {
        eprintln!("not root: the namespace cluster's runs are skipped, the emulated ones run");
        vec!["emulated"]
    }
}

fn ringlab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ringlab"))
        .args(args)
        .output()
        .expect("run ringlab")
}

fn json_of(out: &Output, what: &str) -> Value {
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.trim()).unwrap_or_else(|e| {
        panic!(
            "{what}: {e}: {text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// `lab run NAME --fix --json --mode MODE`, its report; nothing of it outlives it.
fn lab_run(name: &str, mode: &str) -> Value {
    // Only namespaces need the cluster lock (the other tests' checks for leftover holders are
    // machine-wide); an emulated run's processes are tagged and checked as its own.
    let _one = (mode == "netns").then(crate::common::clusters);
    let tag = format!("slow_lab-{name}-{mode}");
    let out = crate::common::tag(&mut Command::new(env!("CARGO_BIN_EXE_ringlab")), &tag)
        .args(["lab", "run", name, "--fix", "--json", "--mode", mode])
        .output()
        .expect("run ringlab");
    for what in ["__rank", "__netns-holder"] {
        let left = crate::common::tagged(&tag, what);
        assert!(left.is_empty(), "{name} ({mode}): {what} left: {left:?}");
    }
    let v = json_of(&out, name);
    assert_eq!(out.status.code(), Some(0), "{name} ({mode}): {v:#}");
    assert_eq!(v["mode"], mode, "{v:#}");
    assert_eq!(v["staged"]["outcome"], "slow", "{name} ({mode}): {v:#}");
    assert_eq!(v["fixed"]["outcome"], "pass", "{name} ({mode}): {v:#}");
    v
}

fn pairs_of(v: &Value) -> PairMatrix {
    serde_json::from_value(v.clone()).unwrap_or_else(|e| panic!("{e}: {v:#}"))
}

#[test]
fn a_degraded_link_bounds_the_ring_as_the_model_predicts_and_the_fix_restores_it() {
    for mode in modes() {
        let v = lab_run("degraded-link", mode);
        let d = &v["diagnosis"];
        assert_eq!(d["culprit"], "slow-link", "{mode}: {v:#}");
        let slow = &d["slow"];
        let measured = slow["measured"]["busbw_gbps"].as_f64().expect("measured");
        let predicted = slow["predicted_gbps"].as_f64().expect("predicted");
        // The issue's tolerance: the measured busbw within ±25 % of the model's prediction.
        let ratio = measured / predicted;
        assert!(
            (0.75..=1.25).contains(&ratio),
            "{mode}: measured {measured} GB/s, predicted {predicted} ({ratio:.2}×)"
        );
        // The sweep names node 1, the one shaped, and the qdisc is there and only there.
        assert_eq!(pairs_of(&slow["pairs"]).outlier(), Some(1), "{mode}: {v:#}");
        let qdiscs = slow["qdiscs"].as_array().expect("qdiscs");
        assert!(
            !qdiscs.is_empty() && qdiscs.iter().all(|q| q[0] == 1),
            "{qdiscs:?}"
        );
        assert!(
            d["explanation"].as_str().unwrap_or("").contains("node 1"),
            "{d:#}"
        );
        // Fixed: no longer bounded by the link, over twice what it carried.
        let after = v["fixed"]["slow"]["measured"]["busbw_gbps"]
            .as_f64()
            .expect("fixed measured");
        assert!(
            after > 2.0 * predicted,
            "{mode}: {after} after, {predicted} bound"
        );
    }
}

/// bad-node end to end: the ring hides the node, the lab's sweep names it, and draining it
/// (its link fixed) passes where draining another would not.
#[test]
fn the_bad_node_is_found_by_the_sweep_and_only_its_fix_passes() {
    for mode in modes() {
        let v = lab_run("bad-node", mode);
        let d = &v["diagnosis"];
        assert_eq!(d["culprit"], "slow-link", "{mode}: {v:#}");
        assert_eq!(
            pairs_of(&d["slow"]["pairs"]).outlier(),
            Some(2),
            "{mode}: {v:#}"
        );
        assert!(d["explanation"].as_str().unwrap_or("").contains("node 2"));
    }
    let wrong = r#"{"text":"Drain node 0 and fix its link: x","unshape":0}"#;
    let out = ringlab(&[
        "lab",
        "run",
        "bad-node",
        "--json",
        "--mode",
        "emulated",
        "--try-fix",
        wrong,
    ]);
    let f = json_of(&out, "try-fix");
    assert_eq!(f["fixed"]["outcome"], "slow", "{f:#}");
}

#[test]
fn the_pairwise_sweep_marks_the_degraded_node_every_time() {
    let mode = if is_root() { "netns" } else { "emulated" };
    for run in 0..4 {
        let _one = crate::common::clusters();
        let out = ringlab(&[
            "bench",
            "--pairs",
            "--cluster",
            "bad-node",
            "--mode",
            mode,
            "--json",
        ]);
        let v = json_of(&out, "bench --pairs");
        assert_eq!(out.status.code(), Some(0), "{v:#}");
        assert_eq!(v["mode"], mode);
        let m = pairs_of(&v["matrix"]);
        assert_eq!(m.pairs.len(), 6, "4 nodes, 6 pairs: {v:#}");
        assert_eq!(m.outlier(), Some(2), "run {run}: {v:#}");
        assert_eq!(v["outlier"], 2);
    }
    // The fifth run as people read it: the table marks the row and names the node.
    let _one = crate::common::clusters();
    let out = ringlab(&["bench", "--pairs", "--cluster", "bad-node", "--mode", mode]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    let marked: Vec<&str> = text.lines().filter(|l| l.contains('◀')).collect();
    assert_eq!(marked.len(), 1, "{text}");
    assert!(marked[0].trim_start().starts_with('2'), "{text}");
    assert!(text.contains("node 2 is in every slow pair"), "{text}");
    // A scenario without links to sweep is refused by name.
    let out = ringlab(&["bench", "--pairs", "--cluster", "docker0"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("stages no links") && err.contains("bad-node"),
        "{err}"
    );
    let out = ringlab(&["bench", "--pairs", "--cluster", "nonesuch"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no scenario `nonesuch`"));
}

#[test]
fn the_wrong_nic_is_named_and_turning_off_infiniband_changes_nothing() {
    for mode in modes() {
        let v = lab_run("wrong-nic", mode);
        let d = &v["diagnosis"];
        assert_eq!(d["culprit"], "wrong-nic", "{mode}: {v:#}");
        let chosen = d["slow"]["chosen"].as_array().expect("chosen");
        assert_eq!(chosen.len(), 2, "{v:#}");
        // NCCL's order, unset: ib* first.
        assert!(chosen.iter().all(|c| c[1] == "ib0"), "{chosen:?}");
        // No node stands out: every pair is slow alike.
        assert_eq!(pairs_of(&d["slow"]["pairs"]).outlier(), None);
        assert!(
            v["fixed"]["slow"]["chosen"]
                .as_array()
                .is_some_and(|c| c.iter().all(|c| c[1] == "eth0"))
        );
        // NCCL is on sockets already: turning InfiniBand off leaves ib0 first. Still slow
        // (the same verdict on either cluster: once, on the emulated one).
        if mode != "emulated" {
            continue;
        }
        let fix = r#"{"text":"Turn off InfiniBand, use sockets: NCCL_IB_DISABLE=1","env":{"NCCL_IB_DISABLE":"1"}}"#;
        let out = ringlab(&[
            "lab",
            "run",
            "wrong-nic",
            "--json",
            "--mode",
            mode,
            "--try-fix",
            fix,
        ]);
        let f = json_of(&out, "try-fix");
        assert_eq!(f["fixed"]["outcome"], "slow", "{f:#}");
    }
}

#[test]
fn the_straggler_is_the_rank_with_the_least_time_inside_collectives() {
    for mode in modes() {
        let v = lab_run("straggler", mode);
        let d = &v["diagnosis"];
        assert_eq!(d["culprit"], "straggler", "{mode}: {v:#}");
        assert_eq!(d["slow"]["straggler"]["rank"], 1, "{v:#}");
        let timing = d["slow"]["timing"].as_array().expect("timing");
        let inside = |r: usize| timing[r]["inside_ns"].as_u64().unwrap_or(0);
        let between = |r: usize| timing[r]["between_ns"].as_u64().unwrap_or(0);
        for r in [0, 2, 3] {
            assert!(inside(r) > inside(1), "{timing:?}");
            assert!(between(r) < between(1), "{timing:?}");
        }
        // Fixed: nobody straggles.
        assert!(v["fixed"]["slow"]["straggler"].is_null(), "{v:#}");
    }
}

/// Kill the lab with SIGKILL while its shaped links carry a job: nothing it made outlives it
/// (the namespaces, their veths and qdiscs go with their holders; the emulated ranks with
/// their launcher).
#[test]
fn nothing_is_left_behind_when_the_lab_is_killed() {
    use std::io::{BufRead, BufReader};
    for mode in modes() {
        let _one = (mode == "netns").then(crate::common::clusters);
        let mut child = crate::common::tag(
            Command::new(env!("CARGO_BIN_EXE_ringlab"))
                .args(["lab", "run", "bad-node", "--mode", mode]),
            "slow_lab-kill",
        )
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn");
        let out = child.stdout.take().expect("stdout");
        // Until a rank of the measured job has started: the links are shaped by then.
        let started = BufReader::new(out)
            .lines()
            .map_while(Result::ok)
            .any(|l| l.contains("init done"));
        assert!(started, "{mode}: the lab ended before its job started");
        child.kill().expect("SIGKILL");
        let _ = child.wait();
        let gone = crate::common::wait_until(std::time::Duration::from_secs(20), || {
            crate::common::tagged("slow_lab-kill", "__rank").is_empty()
                && crate::common::tagged("slow_lab-kill", "__netns-holder").is_empty()
        });
        assert!(gone, "{mode}: ranks or namespace holders outlived the lab");
        if is_root() {
            // Nothing in this namespace: no veth of the lab's, no token bucket.
            let links = Command::new("ip")
                .args(["-o", "link"])
                .output()
                .expect("ip");
            let links = String::from_utf8_lossy(&links.stdout);
            assert!(
                !links
                    .lines()
                    .any(|l| l.contains("rlab-") || l.contains(": m0@")),
                "{links}"
            );
            let q = Command::new("tc")
                .args(["qdisc", "show"])
                .output()
                .expect("tc");
            assert!(!String::from_utf8_lossy(&q.stdout).contains("tbf"));
        }
    }
}

/// The lab screen end to end in a pseudo-terminal: stage degraded-link, read the measurement
/// beside the model's prediction and the sweep, pick the right fix from the list, see it pass.
#[test]
fn the_screen_shows_the_measurement_beside_the_model_and_the_fix_passes() {
    use ringlab::lab::hang::scenario;
    let _one = crate::common::clusters();
    let (all, _) = scenario::all();
    let pos = all
        .iter()
        .position(|s| s.name == "degraded-link")
        .expect("scenario");
    let s = &all[pos];
    let right = scenario::fix_choices(s)
        .iter()
        .position(|f| f == &s.fix)
        .expect("the right fix is a choice");
    let tag = "slow_lab-screen";
    let mut t = crate::hang_pty::Term::start_with(50, 160, &[("RINGLAB_TEST_TAG", tag)]);
    t.open_hang_lab();
    t.select(0, pos, s);
    t.send("\r");
    // A bound for a broken screen only: the runs are real jobs on a loaded runner.
    let c = t.wait("the model, with each link at its rate", 300);
    if std::env::var_os("SHOW").is_some() {
        eprintln!("{c}");
    }
    assert!(c.contains("staged run: SLOW"), "{c}");
    assert!(c.contains("busbw") && c.contains("GB/s measured"), "{c}");
    for _ in 0..right {
        t.send("j");
    }
    t.send("\r");
    t.wait("PASS with", 300);
    t.send("\x03");
    // The app's lab and its namespaces end with it, before the next test builds a cluster.
    let gone = crate::common::wait_until(std::time::Duration::from_secs(30), || {
        crate::common::tagged(tag, "__netns-holder").is_empty()
            && crate::common::tagged(tag, "__rank").is_empty()
    });
    assert!(gone, "the lab's processes outlived the app");
}

/// A shape a rank cannot read stops it with the variable named, not a silent full-speed run.
#[test]
fn an_unreadable_link_shape_is_refused_by_name() {
    for (value, says) in [
        ("lo=0mbit", "above 0"),
        ("lo", "IFACE=RATE"),
        ("lo=fast", "not a rate"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_ringlab"))
            .args([
                "bench",
                "--nproc-per-node",
                "2",
                "-b",
                "1K",
                "-e",
                "1K",
                "-n",
                "1",
            ])
            .env("RINGLAB_SHAPE", value)
            .env("NCCL_SHM_DISABLE", "1")
            .output()
            .expect("run ringlab");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_ne!(out.status.code(), Some(0), "{value}: {err}");
        assert!(
            err.contains("RINGLAB_SHAPE") && err.contains(says),
            "{value}: {err}"
        );
    }
}
