//! The emulated NCCL speaks one release at a time, and the app's own doctor agrees which: every
//! scenario's log, staged as 2.21.5, 2.24.3, 2.27.7 and 2.28.9 (`lab run --nccl-version V`), is
//! read by `doctor --log` as that release, with no line of another release's shape, and each
//! node's lines name its own host.
//!
//! Every start-up scenario runs as all four releases. The four run-time scenarios (200-step
//! training loops, seconds of CPU each) run as two releases each, rotated so that each release
//! is read from two of them: their NCCL lines are the same start-up lines, and the whole matrix
//! would add a minute to CI. The runs use the emulated cluster (any user, no namespaces),
//! several at once; what is checked is the log, not the outcome, so a slow machine cannot make
//! it flaky.

use std::collections::BTreeSet;
use std::process::Command;

const RELEASES: [&str; 4] = ["2.21.5", "2.24.3", "2.27.7", "2.28.9"];

/// The log lines of one staged run (`--events`), in the order the ranks wrote them.
fn staged_log(scenario: &str, version: &str) -> Vec<String> {
    let out = Command::new(env!("CARGO_BIN_EXE_ringlab"))
        .args(["lab", "run", scenario, "--mode", "emulated", "--events"])
        .args(["--nccl-version", version, "--timeout", "1"])
        .output()
        .expect("run ringlab");
    let mut lines = Vec::new();
    for l in String::from_utf8_lossy(&out.stdout).lines() {
        let v: serde_json::Value = serde_json::from_str(l)
            .unwrap_or_else(|e| panic!("{scenario} {version}: not an event ({e}): {l}"));
        if let Some(line) = v["msg"]["log"]["line"].as_str() {
            lines.push(line.to_string());
        }
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        !lines.is_empty(),
        "{scenario} {version}: no log lines ({}); stdout: {}; stderr: {}",
        out.status,
        stdout.lines().rev().take(12).collect::<Vec<_>>().join("\n"),
        String::from_utf8_lossy(&out.stderr)
    );
    lines
}

fn doctor(file: &std::path::Path) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_ringlab"))
        .args(["doctor", "--json", "--log"])
        .arg(file)
        .output()
        .expect("run ringlab doctor");
    assert_ne!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "doctor JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

#[test]
fn every_scenario_logs_as_the_release_asked_and_the_doctor_reads_it_so() {
    let (all, errors) = ringlab::lab::hang::scenario::all();
    assert!(errors.is_empty(), "{errors:?}");
    assert!(all.len() >= 12, "{} scenarios", all.len());
    let dir = tempfile::tempdir().expect("tempdir");
    let mut run_time = 0;
    let mut seen = BTreeSet::new();
    // A slow job's log is a healthy init (its trouble is speed, which no log line shows):
    // tests/it/slow_lab.rs measures those.
    for s in all.iter().filter(|s| !s.slow_job()) {
        let releases: Vec<&str> = if s.run_time() {
            run_time += 1;
            let i = run_time % 2;
            vec![RELEASES[i], RELEASES[i + 2]]
        } else {
            RELEASES.to_vec()
        };
        let logs: Vec<(&str, Vec<String>)> = std::thread::scope(|scope| {
            let runs: Vec<_> = releases
                .iter()
                .map(|v| scope.spawn(move || (*v, staged_log(&s.name, v))))
                .collect();
            runs.into_iter().map(|h| h.join().expect("a run")).collect()
        });
        for (version, lines) in logs {
            seen.insert(version);
            let what = format!("{} as {version}", s.name);
            let minor = version.split('.').nth(1).expect("minor");
            // Each node its own host: n0, n1, ... (a WARN's timestamp is no host).
            let hosts: BTreeSet<String> = lines
                .iter()
                .filter_map(|l| ringlab::nccl_log::parse_line(l))
                .filter(|l| !l.host.is_empty())
                .map(|l| l.host)
                .collect();
            let want: BTreeSet<String> = (0..s.nodes).map(|n| format!("n{n}")).collect();
            assert!(
                hosts.is_subset(&want) && !hosts.is_empty(),
                "{what}: hosts {hosts:?}"
            );
            let banner = format!("NCCL version {version}+");
            assert!(
                lines.iter().any(|l| l.contains(&banner)),
                "{what}: no banner"
            );
            let file = dir.path().join(format!("{}-{version}.log", s.name));
            std::fs::write(&file, lines.join("\n") + "\n").expect("write the log");
            let v = doctor(&file);
            let rel = &v["nccl_release"];
            assert_eq!(
                rel["consistent"],
                true,
                "{what}: {rel:#}\n{}",
                lines.join("\n")
            );
            let summary = rel["summary"].as_str().unwrap_or("");
            assert!(
                summary.contains(&format!("look like NCCL 2.{minor}")),
                "{what}: {summary}"
            );
            // The Bootstrap line has its release's shape (src/bootstrap.cc at v2.8.3-1 and
            // v2.24.3-1).
            if lines
                .iter()
                .any(|l| l.contains("Using ") && l.contains("Bootstrap"))
            {
                let shape = if minor.parse::<u32>().expect("minor") >= 24 {
                    "`Bootstrap: Using …` (NCCL 2.24 or later)"
                } else {
                    "`Bootstrap : Using …` (NCCL 2.8-2.23)"
                };
                assert!(summary.contains(shape), "{what}: {summary}");
            }
        }
    }
    assert!(run_time >= 4, "{run_time} run-time scenarios");
    assert_eq!(seen.len(), RELEASES.len(), "{seen:?}");
}
