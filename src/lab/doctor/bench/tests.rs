use super::*;
use crate::collective::cost::LINK_PRESETS;

/// A table as nccl-tests v2.19.6 prints it (the column header of `writeResultHeader`), with
/// numbers made for the test: 8 GPUs on one host.
fn nccl_tests(rows: &[(u64, f64, f64, &str)]) -> String {
    let mut t = String::from(
        "# nThread 1 nGpus 8 minBytes 1048576 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0\n#\n",
    );
    for r in 0..8 {
        t += &format!(
            "#  Rank  {r} Group  0 Pid   4242 on     node-a device  {r} [0x{:02x}] NVIDIA H100 80GB HBM3\n",
            0x18 + r
        );
    }
    t += "#\n#                                                              out-of-place                       in-place          \n";
    t += "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n";
    t += "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       \n";
    for &(size, oop, ip, wrong) in rows {
        t += &format!(
            "{size:>12}  {:>12}     float     sum      -1   100.0   {:.2}  {oop:.2}  {wrong:>5}   100.0   {:.2}  {ip:.2}  {wrong:>5}\n",
            size / 4,
            oop / 1.75,
            ip / 1.75
        );
    }
    t += "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 123.4 \n#\n";
    t
}

const MIB: u64 = 1 << 20;

#[test]
fn a_healthy_nvlink_run_reads_whole_and_has_nothing_to_say() {
    let text = nccl_tests(&[
        (MIB, 60.0, 61.0, "0"),
        (16 * MIB, 300.0, 298.0, "0"),
        (64 * MIB, 420.0, 421.0, "0"),
        (128 * MIB, 440.0, 441.0, "0"),
    ]);
    let f = read("h100.txt", &text).expect("reads");
    assert_eq!(f.source, Source::NcclTests);
    assert_eq!((f.ranks, f.nodes), (Some(8), Some(1)));
    assert_eq!(f.gpus, vec!["NVIDIA H100 80GB HBM3".to_string()]);
    assert_eq!(f.avg_busbw, Some(123.4));
    assert_eq!(f.rows.len(), 4);
    assert_eq!(f.peak().map(|r| r.size), Some(128 * MIB));
    assert_eq!(findings(&f, Some(&LINK_PRESETS[0])), vec![]);
}

#[test]
fn a_run_far_under_its_link_a_dip_a_gap_and_a_wrong_count_are_each_named() {
    let text = nccl_tests(&[
        (MIB, 5.0, 5.0, "0"),
        (16 * MIB, 20.0, 20.0, "0"),
        (32 * MIB, 9.0, 21.0, "0"),
        (64 * MIB, 22.0, 22.0, "3"),
    ]);
    let f = read("slow.txt", &text).expect("reads");
    let found = findings(&f, Some(&LINK_PRESETS[0]));
    let kinds: Vec<&str> = found
        .iter()
        .map(|f| match f {
            Finding::Wrong { .. } => "wrong",
            Finding::ShortOfLink { .. } => "short",
            Finding::PlacementGap { .. } => "gap",
            Finding::NoPlateau { .. } => "no-plateau",
            Finding::Dip { .. } => "dip",
            Finding::Failed { .. } => "failed",
        })
        .collect();
    assert_eq!(kinds, ["wrong", "wrong", "short", "gap"], "{found:?}");
    // The dip at 32 MiB is the out-of-place row only; the row's best (in-place) holds up.
    let text = render(&f, Some(&LINK_PRESETS[0]), &found);
    assert!(
        text.contains("#wrong 3 at 64 MiB (out-of-place, line"),
        "{text}"
    );
    assert!(
        text.contains("is 5% of NVLink 4's 450.0 GB/s each way"),
        "{text}"
    );
}

#[test]
fn a_noisy_run_dips_and_a_short_sweep_says_it_has_no_plateau() {
    let text = nccl_tests(&[
        (MIB, 40.0, 40.0, "0"),
        (2 * MIB, 80.0, 80.0, "0"),
        (4 * MIB, 50.0, 51.0, "0"),
        (8 * MIB, 120.0, 119.0, "0"),
    ]);
    let f = read("noisy.txt", &text).expect("reads");
    let found = findings(&f, None);
    assert!(
        matches!(found[0], Finding::Dip { size, best_size, .. } if size == 4 * MIB && best_size == 2 * MIB),
        "{found:?}"
    );
    assert!(matches!(found.last(), Some(Finding::NoPlateau { largest }) if *largest == 8 * MIB));
}

#[test]
fn an_old_release_without_root_and_a_launchers_prefix_still_read() {
    // nccl-tests before 2.10: no root column, `error` a float; mpirun --tag-output's prefix.
    let text = "\
[1,0]<stdout>:#       size         count      type   redop     time   algbw   busbw  error     time   algbw   busbw  error
[1,0]<stdout>:#        (B)    (elements)                       (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
[1,0]<stdout>:    67108864      16777216     float     sum   1234.5   54.36  95.13  0e+00   1230.1   54.56  95.47  2e+00
";
    let f = read("old.txt", text).expect("reads");
    assert_eq!(f.rows.len(), 1);
    let r = &f.rows[0];
    assert_eq!((r.size, r.count), (64 * MIB, 16 * MIB));
    assert_eq!(r.in_place.and_then(|p| p.wrong), Some(2));
    assert_eq!(r.busbw(), 95.47);
}

#[test]
fn bad_input_names_the_file_and_line() {
    let text = nccl_tests(&[(MIB, 5.0, 5.0, "0")]).replace("  5.00  ", "  fast  ");
    let e = read("bad.txt", &text).expect_err("a word where busbw goes");
    assert!(
        e.to_string()
            .starts_with("bad.txt:15: busbw is not a number"),
        "{e}"
    );
    let e = read("empty.txt", "hello\n").expect_err("no rows");
    assert!(matches!(e, ReadError::NoRows { .. }), "{e}");
    let e = read("j.json", "{\"size\": 1\n").expect_err("broken JSON");
    assert!(e.to_string().starts_with("j.json:1: not JSON"), "{e}");
}
