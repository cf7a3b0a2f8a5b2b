//! Ring schedules. Rank r's right neighbour is (r+1) mod N.
//!
//! - reduce-scatter: N−1 steps; in step s rank r sends chunk (r−1−s) mod N to r+1, which reduces
//!   it, so chunk r ends fully reduced on rank r (nccl-tests' layout).
//! - all-gather: N−1 steps; in step s rank r sends chunk (r−s) mod N to r+1 (copy), so rank r
//!   first sends the chunk it owns.
//! - all-reduce: reduce-scatter then all-gather, 2(N−1) steps.
//! - broadcast / reduce: a pipelined chain through all N ranks, the buffer cut into the same N
//!   chunks. Hop h (h = 0..N−2) sends chunk c in step h + c, so there are N + (N−1) − 1 = 2N−2
//!   steps. Broadcast's chain starts at the root (root → root+1 → …); reduce's chain starts at
//!   root+1 and ends at the root, each hop reducing into the receiver.

use super::kinds::Collective;
use super::schedule::{Builder, Phase, Transfer, chunk_range, push};

/// (offset, len) of every chunk, computed once: the inner loops below run N² times.
fn chunk_table(count: usize, n: usize) -> Vec<(u64, u64)> {
    (0..n)
        .map(|i| chunk_range(count, n, i))
        .map(|r| (r.start as u64, r.len() as u64))
        .collect()
}

/// Every rank r sends chunk (first + r) mod N to r+1: the shape of every ring step.
fn ring_step(b: &mut Builder, phase: Phase, table: &[(u64, u64)], first: usize, reduce: bool) {
    let n = table.len();
    let t = b.step(phase, n);
    let chunks = table[first..].iter().chain(&table[..first]);
    for (r, &(offset, len)) in chunks.enumerate() {
        if len > 0 {
            let dst = if r + 1 == n { 0 } else { r + 1 };
            t.push(Transfer {
                src: r as u32,
                dst: dst as u32,
                offset,
                len,
                reduce,
                dst_offset: None,
            });
        }
    }
}

/// Appends the ring schedule for `b.spec` (N ≥ 2, collective other than sendrecv).
pub(super) fn build(b: &mut Builder) {
    let s = b.spec;
    match s.coll {
        Collective::AllReduce => {
            b.steps.reserve_exact(2 * (s.ranks - 1));
            reduce_scatter(b);
            all_gather(b);
        }
        Collective::ReduceScatter => reduce_scatter(b),
        Collective::AllGather => all_gather(b),
        Collective::Broadcast => chain(b, s.root, Phase::Broadcast, false),
        Collective::Reduce => chain(b, s.root + 1, Phase::Reduce, true),
        Collective::SendRecv | Collective::AllToAll => {}
    }
}

fn reduce_scatter(b: &mut Builder) {
    let table = chunk_table(b.spec.count, b.spec.ranks);
    let n = table.len();
    for s in 0..n - 1 {
        // Rank 0 sends chunk (−1−s) mod N.
        ring_step(b, Phase::ReduceScatter, &table, n - 1 - s, true);
    }
}

fn all_gather(b: &mut Builder) {
    let table = chunk_table(b.spec.count, b.spec.ranks);
    let n = table.len();
    for s in 0..n - 1 {
        // Rank 0 sends chunk (−s) mod N.
        ring_step(b, Phase::AllGather, &table, (n - s) % n, false);
    }
}

/// A pipelined chain: position p is rank (start + p) mod N; hop h goes from position h to h+1.
fn chain(b: &mut Builder, start: usize, phase: Phase, reduce: bool) {
    let table = chunk_table(b.spec.count, b.spec.ranks);
    let n = table.len();
    let (hops, chunks) = (n - 1, n);
    for s in 0..hops + chunks - 1 {
        // Hops h with 0 <= s − h < chunks.
        let first = (s + 1).saturating_sub(chunks);
        let last = s.min(hops - 1);
        let t = b.step(phase, last + 1 - first);
        for h in first..=last {
            let src = (start + h) % n;
            let dst = (start + h + 1) % n;
            let (offset, len) = table[s - h];
            push(
                t,
                src,
                dst,
                offset as usize..(offset + len) as usize,
                reduce,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::collective::{Algorithm, Collective, Phase, Schedule, Spec};

    fn ring(op: Collective, n: usize, count: usize) -> Schedule {
        Schedule::build(&Spec::new(op, Algorithm::Ring, n, count, 1)).unwrap()
    }

    fn moves(s: &Schedule, step: usize) -> Vec<(u32, u32, u64, u64, bool)> {
        s.steps()[step]
            .transfers
            .iter()
            .map(|t| (t.src, t.dst, t.offset, t.len, t.reduce))
            .collect()
    }

    #[test]
    fn n4_allreduce_step0_is_the_textbook_ring() {
        let s = ring(Collective::AllReduce, 4, 8);
        assert_eq!(s.len(), 6);
        // rank r sends chunk (r-1) mod 4 (2 elements each) to r+1, receiver reduces.
        assert_eq!(
            moves(&s, 0),
            vec![
                (0, 1, 6, 2, true),
                (1, 2, 0, 2, true),
                (2, 3, 2, 2, true),
                (3, 0, 4, 2, true)
            ]
        );
        // Last reduce-scatter step: rank r sends chunk (r+1) mod 4 to r+1, which then owns it reduced.
        assert_eq!(moves(&s, 2)[0], (0, 1, 2, 2, true));
        // First all-gather step: rank r sends its own (finished) chunk r.
        assert_eq!(
            moves(&s, 3),
            vec![
                (0, 1, 0, 2, false),
                (1, 2, 2, 2, false),
                (2, 3, 4, 2, false),
                (3, 0, 6, 2, false)
            ]
        );
        assert_eq!(s.phase_position(1), Some((Phase::ReduceScatter, 2, 3)));
        assert_eq!(s.phase_position(5), Some((Phase::AllGather, 3, 3)));
        assert_eq!(s.phase_position(6), None);
    }

    #[test]
    fn uneven_chunks_are_exact() {
        let s = ring(Collective::AllReduce, 5, 1003);
        let lens: Vec<usize> = (0..5).map(|i| s.chunk(i).len()).collect();
        assert_eq!(lens, vec![201, 201, 201, 200, 200]);
        let total: u64 = s
            .steps()
            .iter()
            .flat_map(|st| &st.transfers)
            .map(|t| t.len)
            .sum();
        assert_eq!(total, 2 * 4 * 1003);
    }

    #[test]
    fn broadcast_chain_pipelines_in_2n_minus_2_steps() {
        let s = Schedule::build(&Spec {
            root: 2,
            ..Spec::new(Collective::Broadcast, Algorithm::Ring, 4, 4, 1)
        })
        .unwrap();
        assert_eq!(s.len(), 6);
        assert_eq!(moves(&s, 0), vec![(2, 3, 0, 1, false)]);
        assert_eq!(moves(&s, 1), vec![(2, 3, 1, 1, false), (3, 0, 0, 1, false)]);
        assert_eq!(moves(&s, 5), vec![(0, 1, 3, 1, false)]);
    }

    #[test]
    fn reduce_chain_ends_at_the_root() {
        let s = Schedule::build(&Spec {
            root: 1,
            ..Spec::new(Collective::Reduce, Algorithm::Ring, 3, 3, 1)
        })
        .unwrap();
        assert_eq!(s.len(), 4);
        assert_eq!(moves(&s, 0), vec![(2, 0, 0, 1, true)]);
        assert_eq!(moves(&s, 3), vec![(0, 1, 2, 1, true)]);
    }

    #[test]
    fn fewer_elements_than_ranks_omits_empty_transfers_but_keeps_steps() {
        let s = ring(Collective::AllReduce, 4, 2);
        assert_eq!(s.len(), 6);
        assert!(
            s.steps()
                .iter()
                .flat_map(|st| &st.transfers)
                .all(|t| t.len == 1)
        );
        let s0 = ring(Collective::AllGather, 4, 0);
        assert_eq!(s0.len(), 3);
        assert_eq!(s0.transfer_count(), 0);
    }
}
