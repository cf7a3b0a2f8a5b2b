//! `ringlab doctor --bench`: ringlab's own outputs (table, --csv, --json) read back whole, real
//! nccl-tests outputs from public threads (tests/fixtures/nccl-tests/, each with its URL in
//! SOURCES.md) judged as the thread concluded, and bad input named.

use std::path::Path;
use std::process::{Command, Output};

fn ringlab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ringlab"))
        .args(args)
        .output()
        .expect("run ringlab")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A real 2-rank bench, in each of ringlab's formats, read back by the doctor: the same rows,
/// the same ranks, nothing wrong (the sweep is short, so it says there is no plateau yet).
#[test]
fn ringlabs_own_table_csv_and_json_read_back_alike() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sweep = [
        "bench",
        "--backend",
        "tcp",
        "-b",
        "1M",
        "-e",
        "4M",
        "-n",
        "3",
        "-w",
        "1",
    ];
    let mut peaks = Vec::new();
    for (name, flag) in [
        ("t.txt", None),
        ("c.csv", Some("--csv")),
        ("j.json", Some("--json")),
    ] {
        let mut args = sweep.to_vec();
        args.extend(flag);
        let out = ringlab(&args);
        assert!(out.status.success(), "{}", text(&out));
        let path = dir.path().join(name);
        std::fs::write(&path, &out.stdout).expect("write");
        let p = path.to_string_lossy().into_owned();
        let d = ringlab(&["doctor", "--bench", &p, "--json"]);
        assert_eq!(d.status.code(), Some(0), "{name}: {}", text(&d));
        let v: serde_json::Value = serde_json::from_slice(&d.stdout).expect("json");
        let file = &v[0]["file"];
        assert_eq!(file["ranks"], 2, "{name}: {v:#}");
        let sizes: Vec<u64> = file["rows"]
            .as_array()
            .expect("rows")
            .iter()
            .filter_map(|r| r["size"].as_u64())
            .collect();
        assert_eq!(sizes, [1 << 20, 2 << 20, 4 << 20], "{name}");
        let kinds: Vec<&str> = v[0]["findings"]
            .as_array()
            .expect("findings")
            .iter()
            .filter_map(|f| f["kind"].as_str())
            .collect();
        assert!(kinds.contains(&"no-plateau"), "{name}: {kinds:?}");
        assert!(!kinds.contains(&"wrong"), "{name}: {kinds:?}");
        peaks.push(
            file["rows"][2]["out_of_place"]["busbw"]
                .as_f64()
                .expect("busbw"),
        );
    }
    assert!(peaks.iter().all(|p| *p > 0.0), "{peaks:?}");
}

#[test]
fn an_unknown_link_and_a_file_with_no_rows_are_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    let empty = dir.path().join("notes.txt");
    std::fs::write(&empty, "no numbers here\n").expect("write");
    let e = empty.to_string_lossy().into_owned();
    let out = ringlab(&["doctor", "--bench", &e, "--link", "carrier-pigeon"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("--link: unknown link \"carrier-pigeon\""),
        "{}",
        text(&out)
    );
    let out = ringlab(&["doctor", "--bench", &e]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out).contains("notes.txt: no rows of a bench here"),
        "{}",
        text(&out)
    );
    let out = ringlab(&["doctor", "--link", "ib"]);
    assert_eq!(out.status.code(), Some(2), "--link alone: {}", text(&out));
    assert!(Path::new(&e).exists(), "the doctor never touches its input");
}

const REAL: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/nccl-tests");

/// Real nccl-tests outputs quoted in public threads (machine output only; the URL, the machine
/// and what the thread concluded for each are in tests/fixtures/nccl-tests/SOURCES.md), each
/// judged as its thread concluded: (file, --link, exit, finding kinds in order, ranks, nodes,
/// peak busbw).
#[test]
fn real_nccl_tests_outputs_are_judged_as_their_threads_concluded() {
    type Case = (
        &'static str,
        Option<&'static str>,
        i32,
        &'static [&'static str],
        Option<u64>,
        Option<u64>,
        Option<f64>,
    );
    let cases: &[Case] = &[
        (
            "h100-4gpu-nvswitch-allreduce.txt",
            Some("nvlink"),
            0,
            &[],
            None,
            None,
            Some(370.75),
        ),
        // One in-place sample under its twin: a warning to rerun, not a failure.
        (
            "a100-4gpu-nvswitch-allreduce-inplace-dip.txt",
            None,
            0,
            &["placement-gap"],
            None,
            None,
            Some(234.74),
        ),
        (
            "a40-2gpu-nvlink-bridge-allreduce.txt",
            None,
            0,
            &[],
            None,
            None,
            Some(47.49),
        ),
        (
            "a100-8gpu-nvlink-sendrecv-inplace-na.txt",
            None,
            0,
            &[],
            None,
            None,
            Some(195.56),
        ),
        (
            "h100-16gpu-2node-a3mega-tcpxo-allreduce.txt",
            None,
            0,
            &[],
            Some(16),
            Some(2),
            Some(338.82),
        ),
        (
            "h100-16gpu-2node-p5-efa-allreduce-tagged.txt",
            Some("ib"),
            0,
            &[],
            None,
            None,
            Some(482.82),
        ),
        // NVLink there, P2P disabled: a few GB/s where NVLink carries hundreds.
        (
            "h100-4gpu-p2p-disabled-allreduce.txt",
            Some("nvlink"),
            1,
            &["short-of-link"],
            None,
            None,
            None,
        ),
        (
            "a100-4gpu-p2p-disabled-allreduce.txt",
            Some("nvlink"),
            1,
            &["short-of-link"],
            None,
            None,
            Some(5.2),
        ),
        (
            "a40-4gpu-p2p-disabled-cross-socket-allreduce.txt",
            Some("pcie"),
            1,
            &["short-of-link"],
            None,
            None,
            None,
        ),
        (
            "a40-2gpu-p2p-disabled-same-socket-allreduce.txt",
            Some("pcie"),
            1,
            &["short-of-link"],
            None,
            None,
            None,
        ),
        (
            "t4-2node-g4dn-efa-allreduce-tagged-interleaved.txt",
            None,
            0,
            &[],
            Some(2),
            Some(2),
            None,
        ),
        // Wrong values from 2 MiB on, and the busbw of those rows collapses with them.
        (
            "gh200-16gpu-4node-slingshot-allreduce-wrong.txt",
            None,
            1,
            &["wrong", "dip"],
            Some(16),
            Some(4),
            None,
        ),
        (
            "v100-12gpu-dgx2-allgather-old-error-column.txt",
            None,
            1,
            &["wrong", "placement-gap"],
            Some(12),
            Some(1),
            None,
        ),
        // Deviations of 2e-07 on 12 ranks of float: under nccl-tests' bound, so nothing wrong.
        (
            "v100-12gpu-dgx2-allreduce-old-format.txt",
            None,
            0,
            &[],
            Some(12),
            Some(1),
            Some(123.57),
        ),
        (
            "a6000-2node-test-nccl-failure.txt",
            None,
            1,
            &["failed"],
            Some(4),
            Some(2),
            None,
        ),
        (
            "gtx1080ti-4gpu-allreduce-hang-old-format.txt",
            None,
            1,
            &["failed"],
            Some(4),
            Some(1),
            None,
        ),
    ];
    for &(name, link, exit, kinds, ranks, nodes, peak) in cases {
        let path = format!("{REAL}/{name}");
        let mut args = vec!["doctor", "--bench", path.as_str(), "--json"];
        if let Some(l) = link {
            args.extend(["--link", l]);
        }
        let out = ringlab(&args);
        assert_eq!(out.status.code(), Some(exit), "{name}: {}", text(&out));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
        let mut seen: Vec<&str> = v[0]["findings"]
            .as_array()
            .expect("findings")
            .iter()
            .filter_map(|f| f["kind"].as_str())
            .collect();
        seen.dedup();
        assert_eq!(seen, kinds, "{name}");
        let file = &v[0]["file"];
        assert_eq!(file["ranks"].as_u64(), ranks, "{name}");
        assert_eq!(file["nodes"].as_u64(), nodes, "{name}");
        if let Some(p) = peak {
            let best = file["rows"]
                .as_array()
                .expect("rows")
                .iter()
                .flat_map(|r| [&r["out_of_place"]["busbw"], &r["in_place"]["busbw"]])
                .filter_map(|b| b.as_f64())
                .fold(0.0, f64::max);
            assert!(
                (best - p).abs() < 0.01,
                "{name}: peak {best}, the table says {p}"
            );
        }
    }
}

/// The unchecked in-place half of sendrecv reads N/A (null), not 0, and a million wrong
/// values printed by `%g` (`1.04858e+06`) read as the count they are.
#[test]
fn na_and_exponent_wrong_counts_read_as_nccl_tests_meant_them() {
    let out = ringlab(&[
        "doctor",
        "--bench",
        &format!("{REAL}/a100-8gpu-nvlink-sendrecv-inplace-na.txt"),
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    for r in v[0]["file"]["rows"].as_array().expect("rows") {
        assert!(r["in_place"]["wrong"].is_null(), "{r}");
        assert_eq!(r["out_of_place"]["wrong"], 0, "{r}");
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let f = dir.path().join("big.txt");
    std::fs::write(
        &f,
        "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n\
         \x20  67108864      16777216     float     sum      -1   1000.0   67.11  117.44  1.04858e+06   1000.0   67.11  117.44      0\n",
    )
    .expect("write");
    let out = ringlab(&["doctor", "--bench", &f.to_string_lossy(), "--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v[0]["findings"][0]["wrong"], 1048580, "{v:#}");
}
