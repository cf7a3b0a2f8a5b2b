//! All-to-all: block j of rank r (what r means for j) goes to block r of rank j.
//!
//! Blocks are [`block_range`]: ⌊count/N⌋ elements each. Step s (s = 1..=⌊N/2⌋) pairs every rank
//! with the ranks at ring distance s: rank r sends block r+s to rank r+s and block r−s to rank
//! r−s (one transfer when those are the same rank, s = N/2), and receives theirs into the same
//! blocks, so a block is overwritten in the very step it leaves (transfers of a step read the
//! state before it) and the exchange works in one buffer. Rank r keeps block r. This is the
//! pairwise exchange of Thakur, Rabenseifner and Gropp (2005), done both ways at once; NCCL
//! launches all N−1 sends and receives of a rank together (nccl-tests src/alltoall.cu: one
//! ncclGroupStart / ncclSend + ncclRecv per peer / ncclGroupEnd). Each rank sends (N−1)·⌊M/N⌋.

use super::schedule::{Builder, Phase, Transfer, block_range};

/// Appends the all-to-all schedule for `b.spec` (N ≥ 2).
pub(super) fn build(b: &mut Builder) {
    let (n, count) = (b.spec.ranks, b.spec.count);
    let len = block_range(count, n, 0).len() as u64;
    for s in 1..=n / 2 {
        let t = b.step(Phase::AllToAll, 2 * n);
        if len == 0 {
            continue;
        }
        for r in 0..n {
            let right = (r + s) % n;
            let left = (r + n - s) % n;
            let peers = if right == left {
                vec![right]
            } else {
                vec![right, left]
            };
            for j in peers {
                t.push(Transfer {
                    src: r as u32,
                    dst: j as u32,
                    offset: j as u64 * len,
                    len,
                    reduce: false,
                    dst_offset: Some(r as u64 * len),
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::collective::{Algorithm, Collective, Op, Schedule, Spec, simulate, traffic};

    fn a2a(n: usize, count: usize) -> Schedule {
        Schedule::build(&Spec::new(
            Collective::AllToAll,
            Algorithm::Ring,
            n,
            count,
            1,
        ))
        .expect("all-to-all")
    }

    #[test]
    fn every_block_lands_at_the_senders_index_on_its_owner() {
        // Rank r's element i holds 100·r + i: after, rank j's block r holds r's block j.
        let (n, count) = (4, 8);
        let s = a2a(n, count);
        assert_eq!(s.len(), 2);
        let ins: Vec<Vec<i64>> = (0..n)
            .map(|r| (0..count).map(|i| (100 * r + i) as i64).collect())
            .collect();
        let out = simulate(&s, Op::Sum, &ins).expect("simulate");
        assert_eq!(out[0], vec![0, 1, 100, 101, 200, 201, 300, 301]);
        assert_eq!(out[2], vec![4, 5, 104, 105, 204, 205, 304, 305]);
    }

    #[test]
    fn each_rank_sends_n_minus_1_blocks_and_keeps_the_tail() {
        // N = 5, count 23: blocks of ⌊23/5⌋ = 4, tail of 3 never moves; 4 blocks × 4 = 16 sent.
        let s = a2a(5, 23);
        assert_eq!(s.len(), 2);
        let t = traffic(&s);
        assert!(t.per_rank.iter().all(|r| r.bytes_sent == 16));
        assert!(t.per_rank.iter().all(|r| r.bytes_received == 16));
        assert_eq!(s.defined_range(3), 0..20);
        // Even N: the partner at distance N/2 is one rank, one transfer each way.
        let s = a2a(4, 4);
        assert_eq!(s.steps()[1].transfers.len(), 4);
    }
}
