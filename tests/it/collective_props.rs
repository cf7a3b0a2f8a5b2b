//! Properties every schedule must have, for every collective × algorithm.

use proptest::prelude::*;
use ringlab::collective::*;

const CASES: u32 = 64;

/// Every collective × algorithm that has a schedule (the double tree and the two-level ring
/// are all-reduce algorithms).
fn combos() -> impl Iterator<Item = (Collective, Algorithm)> {
    Collective::ALL.into_iter().flat_map(|c| {
        Algorithm::ALL
            .into_iter()
            .filter(move |a| a.supports(c))
            .map(move |a| (c, a))
    })
}

fn with_nodes(
    op: Collective,
    algo: Algorithm,
    ranks: usize,
    count: usize,
    elem_size: usize,
    gpus_per_node: usize,
) -> Schedule {
    Schedule::build(&Spec {
        gpus_per_node,
        ..Spec::new(op, algo, ranks, count, elem_size)
    })
    .unwrap()
}

/// Height of a tree given by parent links (leaves 0).
fn tree_height(n: usize, tree: usize) -> usize {
    let parent = |r: usize| ringlab::collective::dtree::dtree(n, r)[tree].parent;
    (0..n)
        .map(|mut r| {
            let mut up = 0;
            while let Some(p) = parent(r) {
                r = p;
                up += 1;
            }
            up
        })
        .max()
        .unwrap_or(0)
}

fn build(
    coll: Collective,
    algo: Algorithm,
    ranks: usize,
    count: usize,
    elem_size: usize,
    root: usize,
) -> Schedule {
    Schedule::build(&Spec {
        coll,
        algo,
        ranks,
        count,
        elem_size,
        root,
        gpus_per_node: 0,
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
        (Collective::AllToAll, _) => n / 2,
        // Each tree: 2·height + (its chunks) − 1; tree 0 has ⌈N/2⌉ chunks, tree 1 ⌊N/2⌋.
        (_, Algorithm::DoubleTree) => (2 * tree_height(n, 0) + n.div_ceil(2) - 1)
            .max(2 * tree_height(n, 1) + (n / 2).max(1) - 1),
        (_, Algorithm::TwoLevel) => {
            let g = default_gpus_per_node(n);
            2 * (g - 1) + 2 * (n / g - 1)
        }
        (Collective::AllReduce, Algorithm::Ring) => 2 * (n - 1),
        (Collective::ReduceScatter | Collective::AllGather, Algorithm::Ring) => n - 1,
        (Collective::Broadcast | Collective::Reduce, Algorithm::Ring) => 2 * n - 2,
        (Collective::Broadcast | Collective::Reduce, Algorithm::Naive) => 1,
        (_, Algorithm::Naive) => 2,
        (Collective::Broadcast | Collective::Reduce, Algorithm::Tree) => d,
        (_, Algorithm::Tree) => 2 * d,
        // log2 of the largest power of two ≤ N exchanges, and a fold in and out when N is not
        // one.
        (_, Algorithm::RecursiveDoubling) => d + if n.is_power_of_two() { 0 } else { 2 },
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(crate::common::cases(CASES)))]

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
                    prop_assert!(t.dst_range().end <= count);
                    prop_assert_eq!(t.dst_offset.is_some(), coll == Collective::AllToAll);
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
                // Every rank sends N−1 blocks of ⌊M/N⌋.
                (Collective::AllToAll, _) => Some(n as u64 * n1 * (m / n as u64)),
                // Every chunk goes up and down each of the N−1 edges of its tree.
                (Collective::AllReduce, Algorithm::DoubleTree) => Some(2 * n1 * m),
                // Per step every node-chunk (intra) or sub-chunk (inter) moves once: M per
                // node and step inside, M per step between: 2P(G−1)M + 2(P−1)M.
                (Collective::AllReduce, Algorithm::TwoLevel) => {
                    let g = default_gpus_per_node(n) as u64;
                    let p = n as u64 / g;
                    Some(2 * p * (g - 1) * m + 2 * (p - 1) * m)
                }
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
            let a2a = Contributions::after(&build(Collective::AllToAll, algo, n, count, 4, root), usize::MAX).unwrap();
            for r in 0..n {
                for c in 0..n {
                    prop_assert_eq!(a2a.get(r, c), 1u64 << c, "all-to-all rank {} block {}", r, c);
                }
            }
            if !algo.supports(Collective::ReduceScatter) {
                continue;
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
        assert_eq!(busbw_factor(Collective::AllToAll, n), f);
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
        coll: Collective::AllReduce,
        algo: Algorithm::Ring,
        ranks,
        count,
        elem_size,
        root,
        gpus_per_node: 0,
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
    assert!(matches!(
        Schedule::build(&Spec {
            coll: Collective::Broadcast,
            algo: Algorithm::DoubleTree,
            ..spec(4, 10, 4, 0)
        }),
        Err(ScheduleError::Unsupported { .. })
    ));
    assert!(matches!(
        Schedule::build(&Spec {
            algo: Algorithm::TwoLevel,
            gpus_per_node: 4,
            ..spec(6, 10, 4, 0)
        }),
        Err(ScheduleError::BadNodeShape { .. })
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

/// Every shape of nodes × GPUs, every op, several element types: the two-level ring gives the
/// definition's answer.
fn check_two_level<T: Element>(inputs: &[Vec<T>], g: usize, op: Op) -> Result<(), TestCaseError> {
    let (n, count) = (inputs.len(), inputs[0].len());
    let s = with_nodes(
        Collective::AllReduce,
        Algorithm::TwoLevel,
        n,
        count,
        std::mem::size_of::<T>(),
        g,
    );
    prop_assert_eq!(s.len(), 2 * (g - 1) + 2 * (n / g - 1));
    let out = simulate(&s, op, inputs).unwrap();
    let want = reference(op, Collective::AllReduce, inputs, 0).unwrap();
    prop_assert_eq!(
        count_wrong(Collective::AllReduce, 0, &out, &want),
        Ok(0),
        "{}x{} count={} op={}",
        n / g,
        g,
        count,
        op
    );
    Ok(())
}

fn check_new_schedules<T: Element>(inputs: &[Vec<T>], op: Op) -> Result<(), TestCaseError> {
    let (n, count) = (inputs.len(), inputs[0].len());
    for (coll, algo) in [
        (Collective::AllToAll, Algorithm::Ring),
        (Collective::AllReduce, Algorithm::DoubleTree),
        (Collective::AllReduce, Algorithm::TwoLevel),
    ] {
        let s = build(coll, algo, n, count, std::mem::size_of::<T>(), 0);
        let out = simulate(&s, op, inputs).unwrap();
        let want = reference(op, coll, inputs, 0).unwrap();
        prop_assert_eq!(
            count_wrong(coll, 0, &out, &want),
            Ok(0),
            "{} {} n={} count={} op={}",
            coll,
            algo,
            n,
            count,
            op
        );
    }
    Ok(())
}

fn typed<T>(n: usize, count: usize, seed: u64, f: impl Fn(i64) -> T) -> Vec<Vec<T>> {
    data(n, count, seed, 8)
        .into_iter()
        .map(|r| r.into_iter().map(&f).collect())
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(crate::common::cases(CASES)))]

    #[test]
    fn two_level_is_right_for_every_node_shape(
        p in 1usize..7, g in 1usize..9, count in 0usize..500, seed in any::<u64>(),
        op in prop::sample::select(Op::ALL.to_vec()),
    ) {
        let n = p * g;
        check_two_level(&data(n, count, seed, 1000), g, op)?;
        check_two_level(&typed(n, count, seed, |v| v as u8), g, op)?;
        check_two_level(&typed(n, count, seed, |v| v as f32), g, Op::Sum)?;
    }

    #[test]
    fn new_schedules_are_right_in_every_dtype(
        n in 1usize..40, count in 0usize..700, seed in any::<u64>(),
        op in prop::sample::select(Op::ALL.to_vec()),
    ) {
        check_new_schedules(&typed(n, count, seed, |v| v as u8), op)?;
        check_new_schedules(&typed(n, count, seed, |v| v as i8), op)?;
        check_new_schedules(&typed(n, count, seed, |v| v as i32), op)?;
        check_new_schedules(&typed(n, count, seed, |v| v as u64), op)?;
        // Float products of 40 factors round differently in another order: sum, max, min, avg.
        let float_op = if op == Op::Prod { Op::Sum } else { op };
        check_new_schedules(&typed(n, count, seed, |v| v as f64), float_op)?;
        check_new_schedules(&typed(n, count, seed, |v| v as f32), Op::Max)?;
    }

    /// Unique values everywhere: rank j's block r is exactly rank r's block j, and nothing
    /// past the N whole blocks moves.
    #[test]
    fn alltoall_delivers_each_peers_block_for_me(n in 1usize..48, count in 0usize..3000) {
        let inputs: Vec<Vec<i64>> = (0..n)
            .map(|r| (0..count).map(|i| (r * 1_000_000 + i) as i64).collect())
            .collect();
        let s = build(Collective::AllToAll, Algorithm::Ring, n, count, 8, 0);
        let out = simulate(&s, Op::Sum, &inputs).unwrap();
        let b = count / n;
        for j in 0..n {
            for r in 0..n {
                prop_assert_eq!(&out[j][r * b..(r + 1) * b], &inputs[r][j * b..(j + 1) * b]);
            }
            prop_assert_eq!(&out[j][n * b..], &inputs[j][n * b..]);
        }
        let t = traffic(&s);
        for r in &t.per_rank {
            prop_assert_eq!(r.bytes_sent, (n as u64 - 1) * b as u64 * 8);
        }
    }

    /// NCCL's trees.cc: for even N every rank is inner in at most one tree; for odd N the
    /// second tree is shifted, so rank 0 is inner in both. Both trees span every rank.
    #[test]
    fn double_tree_inner_nodes(n in 2usize..3000) {
        use ringlab::collective::dtree::dtree;
        let nodes: Vec<_> = (0..n).map(|r| dtree(n, r)).collect();
        for (r, [a, b]) in nodes.iter().enumerate() {
            if n % 2 == 0 {
                prop_assert!(!(a.is_inner() && b.is_inner()), "N={} rank {}", n, r);
            }
            for (t, node) in [a, b].into_iter().enumerate() {
                for c in node.children.into_iter().flatten() {
                    prop_assert_eq!(nodes[c][t].parent, Some(r));
                }
            }
        }
        if n % 2 == 1 && n > 2 {
            prop_assert!(nodes[0][0].is_inner() && nodes[0][1].is_inner());
        }
        for t in 0..2 {
            prop_assert_eq!(nodes.iter().filter(|x| x[t].parent.is_none()).count(), 1);
            prop_assert!(tree_height(n, t) <= 2 * n.ilog2() as usize + 1);
        }
    }
}
