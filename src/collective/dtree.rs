//! NCCL's double binary tree for all-reduce, pipelined.
//!
//! The trees are NCCL's (src/graph/trees.cc): [`btree`] is `ncclGetBtree`, a binary tree rooted
//! at rank 0 whose inner nodes are the even ranks and whose leaves are the odd ones; [`dtree`]
//! is `ncclGetDtree`: the first tree is that btree, the second is its mirror (rank r plays
//! N−1−r) when N is even, so every rank is an inner node in at most one tree, and the btree
//! shifted by one (rank r plays r−1) when N is odd, which makes rank 0 inner in both.
//!
//! The data: the buffer's N chunks ([`chunk_range`](super::chunk_range)) are split in two
//! halves, chunks 0..⌈N/2⌉ on tree 0 and the rest on tree 1, and each tree pipelines its chunks
//! one at a time: a node of height h (leaves 0) sends chunk k up to its parent, which reduces
//! it, in step h + k; the root (height H) sends chunk k down in step H + k and a node at depth
//! d forwards it in step H + d + k. So a tree of height H with K chunks takes 2H + K − 1 steps,
//! later chunks still going up while earlier ones come down ("reduce + broadcast" steps). Both
//! trees run at once; the schedule is as long as the longer one.

use super::schedule::{Builder, Phase, chunks_span, push};

/// One rank's place in a tree: its parent and children (NCCL's u, d0, d1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TreeNode {
    /// The parent, `None` at the root.
    pub parent: Option<usize>,
    /// Up to two children (d0 then d1 in NCCL's order).
    pub children: [Option<usize>; 2],
}

impl TreeNode {
    /// An inner node has at least one child.
    pub fn is_inner(&self) -> bool {
        self.children.iter().any(Option::is_some)
    }

    fn map(self, f: impl Fn(usize) -> usize) -> TreeNode {
        TreeNode {
            parent: self.parent.map(&f),
            children: self.children.map(|c| c.map(&f)),
        }
    }
}

/// `ncclGetBtree(nranks, rank)`, line by line (the tree is rooted at rank 0).
pub fn btree(n: usize, rank: usize) -> TreeNode {
    let (n, rank) = (n as i64, rank as i64);
    let mut bit = 1i64;
    while bit < n {
        if bit & rank != 0 {
            break;
        }
        bit <<= 1;
    }
    let some = |x: i64| (x >= 0).then_some(x as usize);
    if rank == 0 {
        return TreeNode {
            parent: None,
            children: [None, if n > 1 { some(bit >> 1) } else { None }],
        };
    }
    let mut up = (rank ^ bit) | (bit << 1);
    if up >= n {
        up = rank ^ bit;
    }
    let mut lowbit = bit >> 1;
    let down0 = if lowbit == 0 { -1 } else { rank - lowbit };
    let mut down1 = if lowbit == 0 { -1 } else { rank + lowbit };
    while down1 >= n {
        down1 = if lowbit == 0 { -1 } else { rank + lowbit };
        lowbit >>= 1;
    }
    TreeNode {
        parent: some(up),
        children: [some(down0), some(down1)],
    }
}

/// `ncclGetDtree(nranks, rank)`: rank's place in tree 0 (the btree) and in tree 1 (the btree
/// mirrored for even N, shifted by one for odd N).
pub fn dtree(n: usize, rank: usize) -> [TreeNode; 2] {
    let first = btree(n, rank);
    let second = if n % 2 == 1 {
        btree(n, (rank + n - 1) % n).map(|x| (x + 1) % n)
    } else {
        btree(n, n - 1 - rank).map(|x| n - 1 - x)
    };
    [first, second]
}

/// The depth of the deeper of the two trees on `n` ranks (the root at 0): the number of hops a
/// chunk climbs from the farthest leaf, and again falls back down. ⌈log2 n⌉ for the btree.
pub fn depth(n: usize) -> usize {
    (0..2)
        .map(|t| shape(n, t).depth.into_iter().max().unwrap_or(0))
        .max()
        .unwrap_or(0)
}

/// One tree's shape: per rank its parent, its height (leaves 0) and its depth (root 0).
struct Shape {
    parent: Vec<Option<usize>>,
    height: Vec<usize>,
    depth: Vec<usize>,
    root: usize,
}

fn shape(n: usize, tree: usize) -> Shape {
    let nodes: Vec<TreeNode> = (0..n).map(|r| dtree(n, r)[tree]).collect();
    let root = nodes.iter().position(|t| t.parent.is_none()).unwrap_or(0);
    let mut depth = vec![0; n];
    let mut order = vec![root];
    let mut i = 0;
    while i < order.len() {
        let v = order[i];
        for c in nodes[v].children.into_iter().flatten() {
            depth[c] = depth[v] + 1;
            order.push(c);
        }
        i += 1;
    }
    let mut height = vec![0; n];
    for &v in order.iter().rev() {
        if let Some(p) = nodes[v].parent {
            height[p] = height[p].max(height[v] + 1);
        }
    }
    Shape {
        parent: nodes.iter().map(|t| t.parent).collect(),
        height,
        depth,
        root,
    }
}

/// Appends the pipelined double-tree all-reduce for `b.spec` (N ≥ 2).
pub(super) fn build(b: &mut Builder) {
    let (n, count) = (b.spec.ranks, b.spec.count);
    let half = n.div_ceil(2);
    let trees = [(shape(n, 0), 0..half), (shape(n, 1), half..n)];
    let steps = trees
        .iter()
        .map(|(s, chunks)| 2 * s.height[s.root] + chunks.len().max(1) - 1)
        .max()
        .unwrap_or(0);
    // Which kinds of move each step has, whether or not its chunks are empty.
    let (mut up, mut down) = (vec![false; steps], vec![false; steps]);
    let mut moves: Vec<Vec<(usize, usize, usize, bool)>> = vec![Vec::new(); steps];
    for (s, chunks) in &trees {
        let h = s.height[s.root];
        for (k, chunk) in chunks.clone().enumerate() {
            for v in 0..n {
                let Some(p) = s.parent[v] else { continue };
                let at = s.height[v] + k;
                up[at] = true;
                moves[at].push((v, p, chunk, true));
                let at = h + s.depth[p] + k;
                down[at] = true;
                moves[at].push((p, v, chunk, false));
            }
        }
    }
    for (i, m) in moves.into_iter().enumerate() {
        let phase = match (up[i], down[i]) {
            (true, true) => Phase::ReduceBroadcast,
            (false, true) => Phase::Broadcast,
            _ => Phase::Reduce,
        };
        let t = b.step(phase, m.len());
        for (src, dst, chunk, reduce) in m {
            push(t, src, dst, chunks_span(count, n, chunk..chunk + 1), reduce);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::{Algorithm, Collective, Phase, Schedule, Spec};

    /// The first diagram of trees.cc: 14 ranks, 0 → 8 → {4, 12}, 12 → {10, 13}.
    #[test]
    fn btree_matches_nccls_diagram() {
        assert_eq!(btree(14, 0).children, [None, Some(8)]);
        assert_eq!(btree(14, 8).children, [Some(4), Some(12)]);
        assert_eq!(btree(14, 12).children, [Some(10), Some(13)]);
        assert_eq!(btree(14, 13).parent, Some(12));
        assert_eq!(btree(14, 6).children, [Some(5), Some(7)]);
        assert!(!btree(14, 7).is_inner());
    }

    /// Even N mirrors (12 ranks: tree 1 rooted at 11 → 3 → 7), odd N shifts (13 ranks:
    /// tree 1 rooted at 1 → 9 → {5, 0}), as the second and third diagrams of trees.cc.
    #[test]
    fn second_tree_is_mirrored_for_even_and_shifted_for_odd_n() {
        assert_eq!(dtree(12, 11)[1].parent, None);
        assert_eq!(dtree(12, 11)[1].children, [None, Some(3)]);
        assert_eq!(dtree(12, 3)[1].children, [Some(7), Some(1)]);
        assert_eq!(dtree(13, 1)[1].parent, None);
        assert_eq!(dtree(13, 9)[1].children, [Some(5), Some(0)]);
        assert_eq!(dtree(13, 0)[1].children, [Some(11), None]);
    }

    #[test]
    fn inner_in_at_most_one_tree_for_even_n_and_rank_0_in_both_for_odd() {
        for n in (2..=64).step_by(2) {
            for r in 0..n {
                let [a, b] = dtree(n, r);
                assert!(!(a.is_inner() && b.is_inner()), "N={n} rank {r}");
            }
        }
        for n in (3..=63).step_by(2) {
            let [a, b] = dtree(n, 0);
            assert!(a.is_inner() && b.is_inner(), "N={n}");
        }
    }

    #[test]
    fn pipelined_steps_are_2h_plus_k_minus_1() {
        // N = 8: tree 0 is 0 → 4 → {2, 6}, 2 → {1, 3}, 6 → {5, 7}: height 3; 4 chunks per tree:
        // 2·3 + 4 − 1 = 9 steps.
        let s = Schedule::build(&Spec::new(
            Collective::AllReduce,
            Algorithm::DoubleTree,
            8,
            8,
            1,
        ))
        .expect("dbtree");
        assert_eq!(s.len(), 9);
        assert_eq!(s.steps()[0].phase, Phase::Reduce);
        assert_eq!(s.steps()[3].phase, Phase::ReduceBroadcast);
        assert_eq!(s.steps()[8].phase, Phase::Broadcast);
        // Every chunk goes up and comes down every edge once: 2 × 7 edges × 8 chunks.
        assert_eq!(s.transfer_count(), 112);
    }
}
