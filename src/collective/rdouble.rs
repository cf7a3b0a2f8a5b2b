//! Recursive doubling for all-reduce: the latency-optimal schedule MPI libraries run for short
//! messages (MPICH's `MPIR_Allreduce_intra_recursive_doubling`, Open MPI's
//! `ompi_coll_base_allreduce_intra_recursivedoubling`; Thakur, Rabenseifner and Gropp,
//! "Optimization of Collective Communication Operations in MPICH", 2005). NCCL has no such
//! algorithm: its short-message answer is the tree with the LL protocol.
//!
//! With N a power of two, step k pairs rank r with rank r XOR 2^k; the two swap their whole
//! buffers and both reduce. After log2 N steps every rank holds the sum of all N. Each step is
//! one message latency, so the schedule takes log2 N latencies against the ring's 2·(N−1); but
//! each rank sends the whole buffer every step, log2 N · M bytes against the ring's
//! 2·(N−1)/N · M: cheap in latency, dear in bandwidth, which is why a tuner runs it only for
//! small messages.
//!
//! N not a power of two: with P the largest power of two below N, ranks P..N first fold their
//! buffers into ranks 0..N−P (a reduce step), ranks 0..P run the exchanges, and the folded ranks
//! get the result back (a broadcast step). MPICH and Open MPI pair the extra ranks with their
//! neighbours instead (even ranks into odd); the shape, two extra steps, is the same.

use super::schedule::{Builder, Phase, push};

/// The largest power of two not above `n` (n ≥ 1): the ranks that exchange.
pub fn exchangers(n: usize) -> usize {
    if n == 0 { 0 } else { 1 << n.ilog2() }
}

/// Appends the recursive-doubling all-reduce for `b.spec` (N ≥ 2).
pub(super) fn build(b: &mut Builder) {
    let (n, count) = (b.spec.ranks, b.spec.count);
    let p = exchangers(n);
    let extra = n - p;
    if extra > 0 {
        let t = b.step(Phase::Reduce, extra);
        (p..n).for_each(|r| push(t, r, r - p, 0..count, true));
    }
    let mut dist = 1;
    while dist < p {
        let t = b.step(Phase::Exchange, p);
        (0..p).for_each(|r| push(t, r, r ^ dist, 0..count, true));
        dist <<= 1;
    }
    if extra > 0 {
        let t = b.step(Phase::Broadcast, extra);
        (p..n).for_each(|r| push(t, r - p, r, 0..count, false));
    }
}

#[cfg(test)]
mod tests {
    use super::exchangers;
    use crate::collective::{
        Algorithm, Collective, Op, Phase, Schedule, Spec, count_wrong, reference, simulate, traffic,
    };

    fn rd(n: usize, m: usize) -> Schedule {
        Schedule::build(&Spec::new(
            Collective::AllReduce,
            Algorithm::RecursiveDoubling,
            n,
            m,
            4,
        ))
        .expect("recursive doubling builds")
    }

    #[test]
    fn a_power_of_two_takes_log2_n_exchanges_of_the_whole_buffer() {
        let s = rd(8, 16);
        assert_eq!(s.len(), 3);
        for (k, step) in s.steps().iter().enumerate() {
            assert_eq!(step.phase, Phase::Exchange);
            let pairs: Vec<_> = step.transfers.iter().map(|t| (t.src, t.dst)).collect();
            assert_eq!(pairs.len(), 8);
            assert!(
                pairs.iter().all(|&(a, b)| a ^ b == 1 << k),
                "step {k}: {pairs:?}"
            );
            assert!(step.transfers.iter().all(|t| t.len == 16 && t.reduce));
        }
        // Each rank sends log2 N · M elements: 3 · 16 · 4 bytes.
        assert_eq!(traffic(&s).max_sent(), 3 * 16 * 4);
    }

    #[test]
    fn other_sizes_fold_the_extra_ranks_in_and_out() {
        assert_eq!(exchangers(6), 4);
        assert_eq!(exchangers(8), 8);
        let s = rd(6, 5);
        let phases: Vec<_> = s.steps().iter().map(|s| s.phase).collect();
        assert_eq!(
            phases,
            [
                Phase::Reduce,
                Phase::Exchange,
                Phase::Exchange,
                Phase::Broadcast
            ]
        );
        let fold: Vec<_> = s.steps()[0]
            .transfers
            .iter()
            .map(|t| (t.src, t.dst, t.reduce))
            .collect();
        assert_eq!(fold, [(4, 0, true), (5, 1, true)]);
        let back: Vec<_> = s.steps()[3]
            .transfers
            .iter()
            .map(|t| (t.src, t.dst, t.reduce))
            .collect();
        assert_eq!(back, [(0, 4, false), (1, 5, false)]);
    }

    #[test]
    fn every_rank_ends_with_the_full_sum() {
        for n in 2..=9 {
            let s = rd(n, 7);
            let ins: Vec<Vec<i64>> = (0..n)
                .map(|r| (0..7).map(|i| (r * 100 + i) as i64).collect())
                .collect();
            let out = simulate(&s, Op::Sum, &ins).expect("simulates");
            let want = reference(Op::Sum, Collective::AllReduce, &ins, 0).expect("reference");
            assert_eq!(out, want, "{n} ranks");
            assert_eq!(count_wrong(Collective::AllReduce, 0, &out, &want), Ok(0));
        }
    }
}
