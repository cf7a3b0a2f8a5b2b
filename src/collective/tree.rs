//! Binary-tree schedules. Virtual rank v = (r − root) mod N, laid out as a heap: the parent of v
//! is (v−1)/2, its children 2v+1 and 2v+2, its level ⌊log2(v+1)⌋. With D = ⌊log2 N⌋ levels below
//! the root, one "sweep" takes D steps, one step per level (leaves first going up, the root's
//! children first going down).
//!
//! - reduce: sweep up, each node sends its whole (partially reduced) buffer to its parent, which
//!   reduces. D steps. broadcast: sweep down, whole buffers copied. D steps.
//! - all-reduce: reduce then broadcast, 2D steps.
//! - reduce-scatter: reduce, then a scatter sweep down: a parent sends each child the chunks of
//!   the ranks in the child's subtree. 2D steps.
//! - all-gather: a gather sweep up (each node forwards the chunks of its subtree), then a
//!   broadcast sweep down of the chunks outside the child's subtree. 2D steps.
//!
//! Chunk sets are sent as few contiguous element ranges as possible (adjacent chunks merged).

use std::ops::Range;

use super::kinds::Collective;
use super::schedule::{Builder, Phase, chunks_span, push};

/// Appends the tree schedule for `b.spec` (N ≥ 2, collective other than sendrecv).
pub(super) fn build(b: &mut Builder) {
    match b.spec.coll {
        Collective::AllReduce => {
            sweep_up(b, Phase::Reduce, Payload::Whole);
            sweep_down(b, Phase::Broadcast, Payload::Whole);
        }
        Collective::ReduceScatter => {
            sweep_up(b, Phase::Reduce, Payload::Whole);
            sweep_down(b, Phase::Scatter, Payload::Subtree);
        }
        Collective::AllGather => {
            sweep_up(b, Phase::Gather, Payload::Subtree);
            sweep_down(b, Phase::Broadcast, Payload::OutsideSubtree);
        }
        Collective::Broadcast => sweep_down(b, Phase::Broadcast, Payload::Whole),
        Collective::Reduce => sweep_up(b, Phase::Reduce, Payload::Whole),
        Collective::SendRecv | Collective::AllToAll => {}
    }
}

/// What crosses the edge between a node and its parent.
#[derive(Clone, Copy)]
enum Payload {
    Whole,
    /// The chunks of the ranks in the child's subtree.
    Subtree,
    /// Every chunk except those of the child's subtree.
    OutsideSubtree,
}

/// Virtual ranks at `level`: 2^level − 1 .. 2^(level+1) − 1, cut at n.
fn level_nodes(n: usize, level: u32) -> Range<usize> {
    ((1usize << level) - 1).min(n)..((1usize << (level + 1)) - 1).min(n)
}

fn sweep_up(b: &mut Builder, phase: Phase, payload: Payload) {
    let depth = b.spec.ranks.ilog2();
    for level in (1..=depth).rev() {
        edges(b, phase, level, payload, true);
    }
}

fn sweep_down(b: &mut Builder, phase: Phase, payload: Payload) {
    let depth = b.spec.ranks.ilog2();
    for level in 1..=depth {
        edges(b, phase, level, payload, false);
    }
}

/// One step: every node at `level` exchanges `payload` with its parent (up: node → parent).
fn edges(b: &mut Builder, phase: Phase, level: u32, payload: Payload, up: bool) {
    let (n, count, root) = (b.spec.ranks, b.spec.count, b.spec.root);
    let nodes = level_nodes(n, level);
    let reduce = up && matches!(phase, Phase::Reduce);
    let mut ranges = Vec::new();
    let t = b.step(phase, nodes.len());
    for v in nodes {
        let (node, parent) = ((v + root) % n, ((v - 1) / 2 + root) % n);
        let (src, dst) = if up { (node, parent) } else { (parent, node) };
        ranges.clear();
        match payload {
            Payload::Whole => ranges.push(0..n),
            Payload::Subtree => subtree_chunks(n, root, v, &mut ranges),
            Payload::OutsideSubtree => {
                subtree_chunks(n, root, v, &mut ranges);
                complement(n, &mut ranges);
            }
        }
        for chunks in &ranges {
            push(t, src, dst, chunks_span(count, n, chunks.clone()), reduce);
        }
    }
}

/// The chunk indices (= real ranks) of v's subtree as sorted, merged ranges.
fn subtree_chunks(n: usize, root: usize, v: usize, out: &mut Vec<Range<usize>>) {
    let (mut lo, mut hi) = (v, v + 1);
    while lo < n {
        // Rotate virtual [lo, min(hi,n)) by root into real ranks; it may wrap once.
        let (a, b) = ((lo + root) % n, (hi.min(n) - 1 + root) % n + 1);
        if a < b {
            out.push(a..b);
        } else {
            out.push(a..n);
            out.push(0..b);
        }
        (lo, hi) = (2 * lo + 1, 2 * hi + 1);
    }
    out.sort_by_key(|r| r.start);
    let mut merged: Vec<Range<usize>> = Vec::with_capacity(out.len());
    for r in out.drain(..) {
        match merged.last_mut() {
            Some(last) if last.end == r.start => last.end = r.end,
            _ => merged.push(r),
        }
    }
    *out = merged;
}

/// Replaces sorted disjoint ranges within 0..n by their complement.
fn complement(n: usize, ranges: &mut Vec<Range<usize>>) {
    let mut out = Vec::with_capacity(ranges.len() + 1);
    let mut at = 0;
    for r in ranges.iter() {
        if r.start > at {
            out.push(at..r.start);
        }
        at = r.end;
    }
    if at < n {
        out.push(at..n);
    }
    *ranges = out;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::{Algorithm, Schedule, Spec};

    #[test]
    fn subtrees_in_heap_layout() {
        let mut v = Vec::new();
        subtree_chunks(7, 0, 1, &mut v);
        assert_eq!(v, vec![1..2, 3..5]);
        v.clear();
        subtree_chunks(7, 5, 2, &mut v); // virtual {2,5,6} → real {0,3,4}
        assert_eq!(v, vec![0..1, 3..5]);
        complement(7, &mut v);
        assert_eq!(v, vec![1..3, 5..7]);
    }

    #[test]
    fn tree_allreduce_has_2_log2_n_steps() {
        let s =
            Schedule::build(&Spec::new(Collective::AllReduce, Algorithm::Tree, 8, 16, 4)).unwrap();
        assert_eq!(s.len(), 6);
        // Deepest level first: virtual 7 → 3 (only node at level 3).
        let first: Vec<_> = s.steps()[0]
            .transfers
            .iter()
            .map(|t| (t.src, t.dst, t.reduce))
            .collect();
        assert_eq!(first, vec![(7, 3, true)]);
        let last: Vec<_> = s.steps()[5]
            .transfers
            .iter()
            .map(|t| (t.src, t.dst, t.reduce))
            .collect();
        assert_eq!(last, vec![(3, 7, false)]);
    }
}
