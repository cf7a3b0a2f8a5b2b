//! Properties every schedule must have, for every collective × algorithm.

use proptest::prelude::*;
use ringlab::collective::*;

const CASES: u32 = 64;

fn combos() -> impl Iterator<Item = (Collective, Algorithm)> {
    Collective::ALL
        .into_iter()
        .flat_map(|c| Algorithm::ALL.into_iter().map(move |a| (c, a)))
}

fn build(
    op: Collective,
    algo: Algorithm,
    ranks: usize,
    count: usize,
    elem_size: usize,
    root: usize,
) -> Schedule {
    Schedule::build(&Spec {
        op,
        algo,
        ranks,
        count,
        elem_size,
        root,
    })
    .unwrap()
}

/// Deterministic small values from a seed (xorshift), so cases stay cheap to generate.
fn data(n: usize, count: usize, seed: u64, span: i64) -> Vec<Vec<i64>> {
    let mut x = seed | 1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x % (2 * span as u64 + 1)) as i64 - span
    };
    (0..n)
        .map(|_| (0..count).map(|_| next()).collect())
        .collect()
}

fn expected_steps(op: Collective, algo: Algorithm, n: usize) -> usize {
    if n == 1 {
        return 0;
    }
    let d = n.ilog2() as usize;
    match (op, algo) {
        (Collective::SendRecv, _) => 1,
        (Collective::AllReduce, Algorithm::Ring) => 2 * (n - 1),
        (Collective::ReduceScatter | Collective::AllGather, Algorithm::Ring) => n - 1,
        (Collective::Broadcast | Collective::Reduce, Algorithm::Ring) => 2 * n - 2,
        (Collective::Broadcast | Collective::Reduce, Algorithm::Naive) => 1,
        (_, Algorithm::Naive) => 2,
        (Collective::Broadcast | Collective::Reduce, Algorithm::Tree) => d,
        (_, Algorithm::Tree) => 2 * d,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    #[test]
    fn simulated_result_equals_reference_for_every_combo(
        n in 1usize..64, count in 0usize..2000, root_seed in any::<usize>(), seed in any::<u64>(),
        op in prop::sample::select(Op::ALL.to_vec()),
    ) {
        let root = root_seed % n;
        let inputs = data(n, count, seed, 1000);
        for (coll, algo) in combos() {
            let s = build(coll, algo, n, count, 8, root);
            let out = simulate(&s, op, &inputs).unwrap();
            let want = reference(op, coll, &inputs, root).unwrap();
            prop_assert_eq!(count_wrong(coll, root, &out, &want), Ok(0), "{} {} n={} count={} root={} op={}", coll, algo, n, count, root, op);
        }
    }

    #[test]
    fn f32_sum_of_small_integers_is_exact(n in 1usize..64, count in 0usize..300, seed in any::<u64>()) {
        let inputs: Vec<Vec<f32>> = data(n, count, seed, 16).iter().map(|r| r.iter().map(|&v| v as f32).collect()).collect();
        for (coll, algo) in combos() {
            let s = build(coll, algo, n, count, 4, 0);
            let out = simulate(&s, Op::Sum, &inputs).unwrap();
            let want = reference(Op::Sum, coll, &inputs, 0).unwrap();
            prop_assert_eq!(count_wrong(coll, 0, &out, &want), Ok(0), "{} {}", coll, algo);
        }
    }

    #[test]
    fn schedules_are_well_formed(n in 1usize..64, count in 0usize..1_000_000, root_seed in any::<usize>()) {
        let root = root_seed % n;
        for (coll, algo) in combos() {
            let s = build(coll, algo, n, count, 4, root);
            prop_assert_eq!(s.len(), expected_steps(coll, algo, n), "{} {} n={}", coll, algo, n);
            for (i, step) in s.steps().iter().enumerate() {
                prop_assert_eq!(step.index, i);
                let (phase, k, total) = s.phase_position(i).unwrap();
                prop_assert_eq!(phase, step.phase);
                prop_assert!(1 <= k && k <= total);
                for t in &step.transfers {
                    prop_assert!(t.len > 0 && t.offset + t.len <= count as u64);
                    prop_assert!(t.src != t.dst && (t.src as usize) < n && (t.dst as usize) < n);
                    // Whole chunks only.
                    let chunks = s.chunks_of(t);
                    prop_assert_eq!(s.chunk(chunks.start).start as u64, t.offset);
                    prop_assert_eq!(s.chunk(chunks.end - 1).end as u64, t.offset + t.len);
                }
            }
            prop_assert_eq!(s.phase_position(s.len()), None);
        }
    }

    #[test]
    fn ring_allreduce_sends_2_n_minus_1_over_n_per_rank(
        n in 1usize..64, count in 0usize..1_000_000, elem in prop::sample::select(vec![1usize, 2, 4, 8]),
    ) {
        let t = traffic(&build(Collective::AllReduce, Algorithm::Ring, n, count, elem, 0));
        let m = (count * elem) as u64;
        prop_assert_eq!(t.total_bytes_sent, 2 * (n as u64 - 1) * m);
        let target = ring_allreduce_bytes_per_rank(n, m);
        for r in &t.per_rank {
            // Rank r skips chunk r then chunk r+1: 2M − |c_r| − |c_r+1|, under two elements off.
            prop_assert!((r.bytes_sent as f64 - target).abs() < 2.0 * elem as f64, "{:?} vs {}", r, target);
            prop_assert!((r.bytes_received as f64 - target).abs() < 2.0 * elem as f64);
        }
    }

    #[test]
    fn naive_allreduce_root_carries_n_minus_1_buffers_each_way(
        n in 1usize..64, count in 0usize..1_000_000, root_seed in any::<usize>(),
    ) {
        let root = root_seed % n;
        let t = traffic(&build(Collective::AllReduce, Algorithm::Naive, n, count, 4, root));
        let m = (count * 4) as u64;
        prop_assert_eq!(t.per_rank[root].bytes_received, (n as u64 - 1) * m);
        prop_assert_eq!(t.per_rank[root].bytes_sent, (n as u64 - 1) * m);
        prop_assert_eq!(t.max_link_bytes, if n > 1 { m } else { 0 });
    }

    #[test]
    fn other_totals_are_exact(n in 1usize..64, count in 0usize..1_000_000, root_seed in any::<usize>()) {
        let root = root_seed % n;
        let m = count as u64;
        let n1 = n as u64 - 1;
        for (coll, algo) in combos() {
            let t = traffic(&build(coll, algo, n, count, 1, root));
            let received: u64 = t.per_rank.iter().map(|r| r.bytes_received).sum();
            prop_assert_eq!(received, t.total_bytes_sent);
            let want = match (coll, algo) {
                (Collective::SendRecv, _) => Some(if n > 1 { n as u64 * m } else { 0 }),
                (Collective::Broadcast | Collective::Reduce, _) => Some(n1 * m),
                (Collective::ReduceScatter | Collective::AllGather, Algorithm::Ring) => Some(n1 * m),
                _ => None,
            };
            if let Some(want) = want {
                prop_assert_eq!(t.total_bytes_sent, want, "{} {}", coll, algo);
            }
        }
    }

    #[test]
    fn contributions_start_local_and_end_complete(n in 1usize..=64, count in 0usize..100, root_seed in any::<usize>()) {
        let root = root_seed % n;
        for algo in Algorithm::ALL {
            let s = build(Collective::AllReduce, algo, n, count, 4, root);
            let start = Contributions::after(&s, 0).unwrap();
            let end = Contributions::after(&s, s.len()).unwrap();
            for r in 0..n {
                for c in 0..n {
                    prop_assert_eq!(start.get(r, c), 1u64 << r);
                    prop_assert!(end.is_complete(r, c), "{} n={} rank {} chunk {}", algo, n, r, c);
                }
            }
            let rs = Contributions::after(&build(Collective::ReduceScatter, algo, n, count, 4, root), usize::MAX).unwrap();
            let ag = Contributions::after(&build(Collective::AllGather, algo, n, count, 4, root), usize::MAX).unwrap();
            let bc = Contributions::after(&build(Collective::Broadcast, algo, n, count, 4, root), usize::MAX).unwrap();
            let rd = Contributions::after(&build(Collective::Reduce, algo, n, count, 4, root), usize::MAX).unwrap();
            for r in 0..n {
                prop_assert!(rs.is_complete(r, r));
                prop_assert!(rd.is_complete(root, r));
                for c in 0..n {
                    prop_assert_eq!(ag.get(r, c), 1u64 << c);
                    prop_assert_eq!(bc.get(r, c), 1u64 << root);
                }
            }
        }
    }

    #[test]
    fn chunks_partition_the_buffer(count in 0usize..1_000_000, n in 1usize..5000) {
        let mut at = 0;
        for i in 0..n {
            let r = chunk_range(count, n, i);
            prop_assert_eq!(r.start, at);
            prop_assert_eq!(r.len(), count / n + usize::from(i < count % n));
            if !r.is_empty() {
                prop_assert_eq!(chunk_of(count, n, r.start), Some(i));
                prop_assert_eq!(chunk_of(count, n, r.end - 1), Some(i));
            }
            at = r.end;
        }
        prop_assert_eq!(at, count);
        prop_assert_eq!(chunk_of(count, n, count), None);
    }
}

#[test]
fn busbw_factors_are_nccl_tests() {
    for n in 1..=64usize {
        let f = (n as f64 - 1.0) / n as f64;
        assert_eq!(busbw_factor(Collective::AllReduce, n), 2.0 * f);
        assert_eq!(busbw_factor(Collective::ReduceScatter, n), f);
        assert_eq!(busbw_factor(Collective::AllGather, n), f);
        for c in [
            Collective::Broadcast,
            Collective::Reduce,
            Collective::SendRecv,
        ] {
            assert_eq!(busbw_factor(c, n), 1.0);
        }
    }
}

#[test]
fn bad_specs_are_errors_not_panics() {
    let spec = |ranks, count, elem_size, root| Spec {
        op: Collective::AllReduce,
        algo: Algorithm::Ring,
        ranks,
        count,
        elem_size,
        root,
    };
    assert_eq!(
        Schedule::build(&spec(0, 10, 4, 0)),
        Err(ScheduleError::NoRanks)
    );
    assert!(matches!(
        Schedule::build(&spec(4, 10, 4, 4)),
        Err(ScheduleError::RootOutOfRange { .. })
    ));
    assert!(matches!(
        Schedule::build(&spec(4, 10, 0, 0)),
        Err(ScheduleError::ZeroElemSize)
    ));
    assert!(matches!(
        Schedule::build(&spec(4, usize::MAX, 8, 0)),
        Err(ScheduleError::BufferTooLarge { .. })
    ));
    assert!(matches!(
        Schedule::build(&spec(MAX_RANKS + 1, 10, 4, 0)),
        Err(ScheduleError::TooManyRanks { .. })
    ));
    assert!(matches!(
        Schedule::build(&spec(MAX_RANKS, 10, 4, 0)),
        Err(ScheduleError::TooManyTransfers { .. })
    ));
    // Linear algorithms are fine at the rank limit.
    for algo in [Algorithm::Naive, Algorithm::Tree] {
        let s = Schedule::build(&Spec {
            algo,
            ..spec(MAX_RANKS, 1 << 20, 4, 7)
        })
        .unwrap();
        assert_eq!(
            traffic(&s).total_bytes_sent,
            2 * (MAX_RANKS as u64 - 1) * (4 << 20)
        );
    }
}

#[test]
fn one_rank_means_no_steps() {
    for (coll, algo) in combos() {
        let s = build(coll, algo, 1, 100, 4, 0);
        assert!(s.is_empty(), "{coll} {algo}");
        let out = simulate(&s, Op::Avg, &[vec![3i64; 100]]).unwrap();
        assert_eq!(out, vec![vec![3i64; 100]]);
    }
}

#[test]
fn five_ranks_1003_bytes_matches_the_brief() {
    let s = build(Collective::AllReduce, Algorithm::Ring, 5, 1003, 1, 0);
    let lens: Vec<usize> = (0..5).map(|i| s.chunk(i).len()).collect();
    assert_eq!(lens, [201, 201, 201, 200, 200]);
    let v = serde_json::to_value(report(&s, Dtype::U8)).unwrap();
    assert_eq!(v["total_bytes_sent"], 8024);
    assert_eq!(v["steps"].as_array().map(Vec::len), Some(8));
}
