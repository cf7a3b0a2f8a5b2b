//! `ringlab doctor --log` on real NCCL logs from public threads (tests/fixtures/realworld/*:
//! the log as posted, the thread, and the cause it established). Prints `right / partial /
//! silent / wrong of N`; fails on any wrong (a false alarm or a contradicting finding), on a
//! score below the one recorded in score.toml, and below 90 % right on the cases whose log
//! shows the cause.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/realworld");

/// Findings the doctor may always add: NCCL's own warnings, named or listed.
const ALWAYS_ALLOWED: [&str; 2] = ["nccl-warning", "unknown-warning"];

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    url: String,
    nccl: String,
    launcher: String,
    cause: String,
    shows_cause: bool,
    expect: Vec<String>,
    #[serde(default)]
    allow: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Verdict {
    Right,
    Partial,
    Silent,
    Wrong,
}

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Score {
    right: usize,
}

fn cases() -> Vec<(PathBuf, Case)> {
    let mut v: Vec<(PathBuf, Case)> = std::fs::read_dir(DIR)
        .expect("the corpus folder")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("case.toml").is_file())
        .map(|p| {
            let text = std::fs::read_to_string(p.join("case.toml")).expect("case.toml");
            let case: Case =
                toml::from_str(&text).unwrap_or_else(|e| panic!("{}/case.toml: {e}", p.display()));
            (p, case)
        })
        .collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

/// (kind, severity) of each finding, and the exit code.
fn doctor(dir: &Path) -> (Vec<(String, String)>, i32) {
    let out = Command::new(env!("CARGO_BIN_EXE_ringlab"))
        .args(["doctor", "--json", "--log"])
        .arg(dir.join("log.txt"))
        .output()
        .expect("run ringlab");
    let code = out.status.code().expect("exit code");
    if code == 2 {
        return (Vec::new(), code);
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{}: bad JSON ({e}): {}",
            dir.display(),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let f = v["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .map(|f| {
            (
                f["kind"].as_str().expect("kind").to_string(),
                f["severity"].as_str().expect("severity").to_string(),
            )
        })
        .collect();
    (f, code)
}

fn judge(case: &Case, found: &[(String, String)]) -> (Verdict, Vec<String>) {
    let kinds: BTreeSet<&str> = found.iter().map(|(k, _)| k.as_str()).collect();
    let healthy = case.expect.is_empty();
    // A wrong finding: an error (exit 1) that is neither expected nor allowed; on a healthy
    // log, NCCL's own warnings at error severity are false alarms too.
    let wrong: Vec<String> = found
        .iter()
        .filter(|(k, sev)| {
            sev == "error"
                && !case.expect.contains(k)
                && !case.allow.contains(k)
                && (healthy || !ALWAYS_ALLOWED.contains(&k.as_str()))
        })
        .map(|(k, _)| k.clone())
        .collect();
    let hit = case
        .expect
        .iter()
        .filter(|k| kinds.contains(k.as_str()))
        .count();
    let v = if !wrong.is_empty() {
        Verdict::Wrong
    } else if hit == case.expect.len() {
        Verdict::Right
    } else if hit > 0 {
        Verdict::Partial
    } else {
        Verdict::Silent
    };
    (v, wrong)
}

#[test]
fn the_doctor_names_the_causes_of_real_logs() {
    let all = cases();
    assert!(
        all.len() >= 40,
        "{} cases: the corpus holds at least 40",
        all.len()
    );
    let mut counts = [0usize; 4];
    let (mut shown, mut shown_right) = (0, 0);
    let mut report = String::new();
    let mut causes = BTreeSet::new();
    for (dir, case) in &all {
        assert!(
            case.url.starts_with("https://github.com/") && !case.cause.is_empty(),
            "{}: a thread and a cause",
            dir.display()
        );
        assert!(!case.nccl.is_empty() && !case.launcher.is_empty());
        causes.extend(case.expect.iter().cloned());
        let (found, code) = doctor(dir);
        let (v, wrong) = judge(case, &found);
        counts[v as usize] += 1;
        if case.shows_cause {
            shown += 1;
            shown_right += usize::from(v == Verdict::Right);
        }
        let name = dir.file_name().map(|n| n.to_string_lossy().into_owned());
        report.push_str(&format!(
            "{:<8} {:<34} exit {code}  expect {:?}  found {:?}{}\n",
            format!("{v:?}").to_lowercase(),
            name.unwrap_or_default(),
            case.expect,
            found
                .iter()
                .map(|(k, s)| format!("{k}:{s}"))
                .collect::<Vec<_>>(),
            if wrong.is_empty() {
                String::new()
            } else {
                format!("  WRONG: {wrong:?}")
            }
        ));
    }
    let [right, partial, silent, wrong] = counts;
    let n = all.len();
    println!("{report}");
    println!(
        "realworld: {right} right / {partial} partial / {silent} silent / {wrong} wrong of {n}; \
         {shown_right} of {shown} right where the log shows the cause; {} causes",
        causes.len()
    );
    assert_eq!(
        wrong, 0,
        "no false alarm, no contradicting finding:\n{report}"
    );
    let score: Score = toml::from_str(
        &std::fs::read_to_string(Path::new(DIR).join("score.toml")).expect("score.toml"),
    )
    .expect("score.toml");
    assert!(
        right >= score.right,
        "right fell to {right} from the recorded {}:\n{report}",
        score.right
    );
    assert!(
        shown_right * 10 >= shown * 9,
        "{shown_right} of {shown} right where the log shows the cause: under 90 %:\n{report}"
    );
    assert!(causes.len() >= 15, "{} causes: at least 15", causes.len());
    // The README states the score: it is this run's, not a number typed once and left.
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).expect("README");
    let readme = readme.split_whitespace().collect::<Vec<_>>().join(" ");
    let healthy = all.iter().filter(|(_, c)| c.expect.is_empty()).count();
    for said in [
        format!("holds {n} logs"),
        format!("none, for {healthy} healthy logs"),
        format!("**{right} right, {partial} partial, {silent} silent, {wrong} wrong of {n}**"),
        format!("{shown_right} of {shown} right where"),
        format!("({} causes)", causes.len()),
    ] {
        assert!(readme.contains(&said), "README should say `{said}`");
    }
}

/// The README's counts of NCCL's message table are the table's.
#[test]
fn the_readme_counts_the_message_table_as_it_is() {
    let t = ringlab::nccl_log::warnings::Table::shipped();
    let sites = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/src/nccl_log/warns-v2.28.9.txt"
    ))
    .expect("the list");
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).expect("README");
    let flat = readme.split_whitespace().collect::<Vec<_>>().join(" ");
    for said in [
        format!("{} rows in {} families", t.rows.len(), t.families.len()),
        format!(
            "the {} WARN calls of 2.28.9",
            sites.lines().filter(|l| !l.trim().is_empty()).count()
        ),
    ] {
        assert!(flat.contains(&said), "README should say `{said}`");
    }
}

/// What the corpus is for: every launcher prefix the doctor reads is in it.
#[test]
fn the_corpus_covers_the_launchers() {
    let launchers: BTreeSet<String> = cases().into_iter().map(|(_, c)| c.launcher).collect();
    for l in ["mpirun", "srun", "torchrun", "none"] {
        assert!(launchers.contains(l), "no {l} case: {launchers:?}");
    }
}
