//! `ringlab doctor --trace`: flight-recorder dumps lined up by collective number, the rank that
//! diverged named. Real PyTorch Flight Recorder dumps (gloo, torch 2.15.0, made on CPU by
//! scripts/make-flight-recorder-fixtures.py) in both their pickle and JSON forms, ringlab's own
//! dumps from a staged run-time hang, and malformed input.

use std::path::Path;
use std::process::Command;

const FR: &str = "tests/fixtures/flight-recorder";

fn doctor(args: &[&str]) -> (i32, serde_json::Value, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_ringlab"))
        .arg("doctor")
        .args(args)
        .output()
        .expect("run ringlab doctor");
    let v = serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
    (
        out.status.code().unwrap_or(-1),
        v,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Every case folder says who diverged (`case.json`, written by the fixture script): the
/// analysis must name the same rank and collective, from the pickles and from the JSON.
#[test]
fn real_pytorch_dumps_name_the_rank_that_diverged() {
    let mut cases = 0;
    for dir in std::fs::read_dir(FR).expect("fixtures") {
        let dir = dir.expect("entry").path();
        let Ok(case) = std::fs::read_to_string(dir.join("case.json")) else {
            continue;
        };
        cases += 1;
        let case: serde_json::Value = serde_json::from_str(&case).expect("case.json");
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut pickles: Vec<String> = std::fs::read_dir(&dir)
            .expect("case dir")
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "pkl"))
            .map(|p| p.display().to_string())
            .collect();
        pickles.sort();
        let folder = dir.display().to_string();
        let mut forms = vec![vec!["--trace".to_string(), folder]];
        if !pickles.is_empty() {
            forms.push(
                std::iter::once("--trace".to_string())
                    .chain(pickles)
                    .collect(),
            );
        }
        for form in forms {
            let mut args: Vec<&str> = form.iter().map(String::as_str).collect();
            args.push("--json");
            let (code, v, err) = doctor(&args);
            let diverged = &case["diverged"];
            if diverged.is_null() {
                assert_eq!(code, 0, "{name} {args:?}: {v:#} {err}");
                assert!(v["culprit"].is_null(), "{name}: {v:#}");
                continue;
            }
            assert_eq!(code, 1, "{name} {args:?}: {v:#} {err}");
            let c = &v["culprit"];
            assert_eq!(c["rank"], diverged["rank"], "{name} {args:?}: {v:#}");
            let seq = c["seq"]
                .as_u64()
                .or_else(|| c["last_seq"].as_u64().map(|s| s + 1));
            if let Some(want) = diverged["seq"].as_u64()
                && c["kind"] != "gone"
            {
                assert_eq!(seq, Some(want), "{name} {args:?}: {v:#}");
            }
            let kind = diverged["kind"].as_str().unwrap_or("");
            let expect = match kind {
                "never entered" => "never-entered",
                k if k.contains("mismatch") || k.contains("size") || k.contains("shape") => {
                    "mismatch"
                }
                k if k.contains("gone") => "gone",
                other => other,
            };
            assert_eq!(c["kind"], expect, "{name} ({kind}) {args:?}: {v:#}");
        }
    }
    assert!(cases >= 5, "fixture cases read: {cases}");
}

#[test]
fn bad_dumps_are_named_and_refused_without_a_panic() {
    let tmp = tempfile::tempdir().expect("tmp");
    let write = |name: &str, text: &[u8]| {
        let p = tmp.path().join(name);
        std::fs::write(&p, text).expect("write");
        p.display().to_string()
    };
    for (name, text, says) in [
        (
            "rank0.json",
            &b"{\"format\": \"ringlab-flight-recorder\", \"version\": 1, "[..],
            "rank0.json: 1:",
        ),
        (
            "rank1.json",
            &b"{\"format\": \"something-else\"}"[..],
            "expected `ringlab-flight-recorder`",
        ),
        (
            "rank2.pkl",
            &b"\x80\x02garbage"[..],
            "not a readable pickle",
        ),
        (
            "rank3.json",
            &b"{\"version\": \"1.4\", \"entries\": []}"[..],
            "version 1.4",
        ),
        (
            "noname.json",
            &b"{\"version\": \"2.10\", \"entries\": []}"[..],
            "does not end with the rank",
        ),
    ] {
        let p = write(name, text);
        let (code, _, err) = doctor(&["--trace", &p]);
        assert_eq!(code, 2, "{name}: {err}");
        assert!(err.contains(name) && err.contains(says), "{name}: {err}");
        std::fs::remove_file(&p).expect("rm");
    }
    let (code, _, err) = doctor(&["--trace", &tmp.path().display().to_string()]);
    assert_eq!(code, 2);
    assert!(err.contains("no flight-recorder dumps"), "{err}");
    let (code, _, err) = doctor(&["--trace", "/nonexistent/ringlab-dumps"]);
    assert_eq!(code, 2, "{err}");
}

/// A staged run-time hang leaves one dump per rank; `doctor --trace` reads them back and names
/// the same rank the lab did.
#[test]
fn the_labs_own_dumps_read_back() {
    let out = Command::new(env!("CARGO_BIN_EXE_ringlab"))
        .args([
            "lab",
            "run",
            "skipped-collective",
            "--json",
            "--mode",
            "emulated",
        ])
        // The hang is what is read here, not the wait for it: a 2 s watchdog.
        .env("RINGLAB_LAB_TIMEOUT", "2")
        .output()
        .expect("lab run");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    // As under NCCL, the skipped call is no error: every rank waits until the watchdog.
    assert_eq!(v["staged"]["outcome"], "hang", "{v:#}");
    let t = &v["diagnosis"]["trace"];
    assert_eq!(t["rank"], 2, "{v:#}");
    assert!(
        t["label"].as_str().unwrap_or("").starts_with("step 57"),
        "{v:#}"
    );
    let dir = t["dir"].as_str().expect("dir");
    assert!(Path::new(dir).join("rank0.json").is_file());
    let (code, d, err) = doctor(&["--trace", dir, "--json"]);
    assert_eq!(code, 1, "{d:#} {err}");
    assert_eq!(d["culprit"]["rank"], 2, "{d:#}");
    assert_eq!(d["culprit"]["kind"], "mismatch", "{d:#}");
    // The ranks' own journals (one appended line per event) say the same without the dumps
    // the watchdog wrote beside them.
    for r in 0..4 {
        assert!(
            Path::new(dir).join(format!("rank{r}.jsonl")).is_file(),
            "{r}"
        );
        let _ = std::fs::remove_file(Path::new(dir).join(format!("rank{r}.json")));
    }
    let (code, d, err) = doctor(&["--trace", dir, "--json"]);
    assert_eq!(code, 1, "{d:#} {err}");
    assert_eq!(d["culprit"]["rank"], 2, "{d:#}");
    assert_eq!(d["culprit"]["kind"], "mismatch", "{d:#}");
    let _ = std::fs::remove_dir_all(dir);
}

/// A small pickle of lists nested 8 000 to 200 000 deep (16 KB to 400 KB) is refused with a
/// reason and exit 2; it overflowed the stack and aborted the process before (finding M3).
#[test]
fn a_deeply_nested_pickle_is_refused_not_a_stack_overflow() {
    let tmp = tempfile::tempdir().expect("tmp");
    for n in [8_000usize, 200_000] {
        let p = tmp.path().join(format!("deep{n}.pkl"));
        let mut b = vec![0x80, 2];
        b.extend(std::iter::repeat_n(b']', n));
        b.extend(std::iter::repeat_n(b'a', n - 1));
        b.push(b'.');
        std::fs::write(&p, b).expect("write");
        let (code, _, err) = doctor(&["--trace", &p.display().to_string()]);
        assert_eq!(code, 2, "{n}: {err}");
        assert!(err.contains("nest more than"), "{n}: {err}");
    }
}

/// ringlab's own dumps of a world where rank 1 computes three times longer each step: the
/// doctor's time per rank shows the others waiting inside the collectives and names rank 1 the
/// straggler, in the text and in the JSON; no rank diverged, so the exit is 0.
#[test]
fn a_straggler_is_named_from_the_time_each_rank_spends_inside_and_between() {
    let dir = tempfile::tempdir().expect("tempdir");
    let work_ms = [10u64, 30, 10];
    let ms = 1_000_000u64;
    let mut entries = vec![Vec::new(); 3];
    let mut clock = 0;
    for seq in 1..=10u64 {
        let done = clock + 30 * ms + 2 * ms;
        for (r, e) in entries.iter_mut().enumerate() {
            let start = clock + work_ms[r] * ms;
            e.push(serde_json::json!({
                "seq": seq,
                "call": {"coll": "all_reduce", "algo": "ring", "count": 1024, "dtype": "f32",
                         "op": "sum", "root": -1},
                "state": "completed",
                "scheduled_ns": start, "started_ns": start, "completed_ns": done,
            }));
        }
        clock = done;
    }
    for (rank, e) in entries.into_iter().enumerate() {
        let v = serde_json::json!({"format": "ringlab-flight-recorder", "version": 1,
                                   "rank": rank, "world": 3, "entries": e});
        std::fs::write(dir.path().join(format!("rank{rank}.json")), v.to_string()).expect("write");
    }
    let d = dir.path().to_string_lossy().into_owned();
    let (code, v, err) = doctor(&["--trace", &d, "--json"]);
    assert_eq!(code, 0, "{err} {v:#}");
    assert_eq!(v["straggler"]["rank"], 1, "{v:#}");
    let inside: Vec<u64> = v["timing"]
        .as_array()
        .expect("timing")
        .iter()
        .filter_map(|t| t["inside_ns"].as_u64())
        .collect();
    assert_eq!(inside, [10 * 22 * ms, 10 * 2 * ms, 10 * 22 * ms]);
    let out = Command::new(env!("CARGO_BIN_EXE_ringlab"))
        .args(["doctor", "--trace", &d])
        .output()
        .expect("run");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("Straggler: rank 1 spends 270.0 ms between"),
        "{text}"
    );
}
