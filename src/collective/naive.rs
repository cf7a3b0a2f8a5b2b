//! Naive (linear, hub) schedules: everything goes through the root, the hub.
//!
//! - all-reduce: step 1 (reduce) every other rank sends its whole buffer to the root, which
//!   reduces; step 2 (broadcast) the root sends the result to every other rank. The root receives
//!   (N−1)·M and sends (N−1)·M. 2 steps.
//! - reduce-scatter: reduce as above, then (scatter) the root sends chunk r to rank r. 2 steps.
//! - all-gather: (gather) rank r sends chunk r to the root, then (broadcast) the root sends each
//!   rank every chunk but its own (up to two ranges). 2 steps.
//! - broadcast: the root sends M to every other rank. 1 step.
//! - reduce: every other rank sends M to the root, which reduces. 1 step.

use super::kinds::Collective;
use super::schedule::{Builder, Phase, chunk_range, push};

/// Appends the naive schedule for `b.spec` (N ≥ 2, collective other than sendrecv).
pub(super) fn build(b: &mut Builder) {
    let s = b.spec;
    let (n, count, root) = (s.ranks, s.count, s.root);
    let others = move || (0..n).filter(move |&r| r != root);
    match s.coll {
        Collective::AllReduce => {
            to_root(b, Phase::Reduce, true);
            let t = b.step(Phase::Broadcast, n - 1);
            others().for_each(|r| push(t, root, r, 0..count, false));
        }
        Collective::ReduceScatter => {
            to_root(b, Phase::Reduce, true);
            let t = b.step(Phase::Scatter, n - 1);
            others().for_each(|r| push(t, root, r, chunk_range(count, n, r), false));
        }
        Collective::AllGather => {
            let t = b.step(Phase::Gather, n - 1);
            others().for_each(|r| push(t, r, root, chunk_range(count, n, r), false));
            let t = b.step(Phase::Broadcast, 2 * (n - 1));
            for r in others() {
                let own = chunk_range(count, n, r);
                push(t, root, r, 0..own.start, false);
                push(t, root, r, own.end..count, false);
            }
        }
        Collective::Broadcast => {
            let t = b.step(Phase::Broadcast, n - 1);
            others().for_each(|r| push(t, root, r, 0..count, false));
        }
        Collective::Reduce => to_root(b, Phase::Reduce, true),
        Collective::SendRecv | Collective::AllToAll => {}
    }
}

/// One step: every non-root rank sends its whole buffer to the root.
fn to_root(b: &mut Builder, phase: Phase, reduce: bool) {
    let (n, count, root) = (b.spec.ranks, b.spec.count, b.spec.root);
    let t = b.step(phase, n - 1);
    (0..n)
        .filter(|&r| r != root)
        .for_each(|r| push(t, r, root, 0..count, reduce));
}

#[cfg(test)]
mod tests {
    use crate::collective::{Algorithm, Collective, Phase, Schedule, Spec};

    #[test]
    fn naive_allreduce_funnels_through_rank_0() {
        let s = Schedule::build(&Spec::new(
            Collective::AllReduce,
            Algorithm::Naive,
            4,
            10,
            4,
        ))
        .unwrap();
        assert_eq!(s.len(), 2);
        let up: Vec<_> = s.steps()[0]
            .transfers
            .iter()
            .map(|t| (t.src, t.dst, t.len, t.reduce))
            .collect();
        assert_eq!(
            up,
            vec![(1, 0, 10, true), (2, 0, 10, true), (3, 0, 10, true)]
        );
        let down: Vec<_> = s.steps()[1]
            .transfers
            .iter()
            .map(|t| (t.src, t.dst, t.len, t.reduce))
            .collect();
        assert_eq!(
            down,
            vec![(0, 1, 10, false), (0, 2, 10, false), (0, 3, 10, false)]
        );
        assert_eq!(s.steps()[1].phase, Phase::Broadcast);
    }

    #[test]
    fn naive_allgather_sends_each_rank_everything_but_its_own_chunk() {
        let s = Schedule::build(&Spec {
            root: 1,
            ..Spec::new(Collective::AllGather, Algorithm::Naive, 3, 9, 1)
        })
        .unwrap();
        let down: Vec<_> = s.steps()[1]
            .transfers
            .iter()
            .map(|t| (t.dst, t.offset, t.len))
            .collect();
        assert_eq!(down, vec![(0, 3, 6), (2, 0, 6)]);
    }
}
