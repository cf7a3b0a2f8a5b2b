//! The pairwise sweep: nccl-tests' sendrecv between every pair of nodes (or ranks), one pair at a
//! time, as a fabric is checked when a job is slow and nobody knows where: a degraded node is
//! the one whose every pair is slow. The runs are the caller's (a 2-rank `sendrecv` bench per
//! pair); this file holds the matrix, its outlier and its table.

use serde::{Deserialize, Serialize};

/// A node is the outlier when even its best pair reaches less than this share of the other
/// nodes' best (median): every path through it is slow (ringlab's threshold).
pub const OUTLIER: f64 = 0.5;

/// The sweep's results: each pair's busbw (sendrecv's busbw is its algbw).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairMatrix {
    /// Nodes (or ranks) swept, 0..nodes.
    pub nodes: usize,
    /// Bytes each side sent per iteration.
    pub bytes: u64,
    /// (a, b, GB/s) for a < b; a pair that did not run is absent.
    pub pairs: Vec<(usize, usize, f64)>,
}

impl PairMatrix {
    /// Every pair a < b of `nodes`, in the order the sweep runs them.
    pub fn order(nodes: usize) -> Vec<(usize, usize)> {
        (0..nodes)
            .flat_map(|a| (a + 1..nodes).map(move |b| (a, b)))
            .collect()
    }

    /// The pair's GB/s, either way round.
    pub fn get(&self, a: usize, b: usize) -> Option<f64> {
        let (a, b) = (a.min(b), a.max(b));
        self.pairs
            .iter()
            .find(|(x, y, _)| (*x, *y) == (a, b))
            .map(|p| p.2)
    }

    /// Each node's best pair (None for a node with no pair measured).
    fn best(&self) -> Vec<Option<f64>> {
        (0..self.nodes)
            .map(|n| {
                (0..self.nodes)
                    .filter(|&m| m != n)
                    .filter_map(|m| self.get(n, m))
                    .reduce(f64::max)
            })
            .collect()
    }

    /// The node whose best pair is under [`OUTLIER`] × the median of the others' best: every
    /// path through it is slow. None when no node stands out (all slow alike, or all fine).
    pub fn outlier(&self) -> Option<usize> {
        let best = self.best();
        let (n, worst) = best
            .iter()
            .enumerate()
            .filter_map(|(n, b)| b.map(|b| (n, b)))
            .min_by(|x, y| x.1.total_cmp(&y.1))?;
        let mut others: Vec<f64> = best
            .iter()
            .enumerate()
            .filter(|(m, _)| *m != n)
            .filter_map(|(_, b)| *b)
            .collect();
        others.sort_by(f64::total_cmp);
        let median = *others.get(others.len() / 2)?;
        (worst < OUTLIER * median).then_some(n)
    }

    /// The slowest and fastest pair, GB/s.
    pub fn range(&self) -> Option<(f64, f64)> {
        let v = self.pairs.iter().map(|p| p.2);
        Some((v.clone().reduce(f64::min)?, v.reduce(f64::max)?))
    }

    /// The matrix as a table, GB/s, the outlier's row marked: what `bench --pairs` prints and
    /// the lab's evidence shows.
    pub fn lines(&self, what: &str) -> Vec<String> {
        let out = self.outlier();
        let mut lines = vec![format!(
            "sendrecv busbw (GB/s) between every pair of {what}s, {} each way, one pair at a time",
            crate::units::format_bytes(self.bytes)
        )];
        let head: String = (0..self.nodes).map(|m| format!("{m:>8}")).collect();
        lines.push(format!("  {what:>6} {head}"));
        for n in 0..self.nodes {
            let cells: String = (0..self.nodes)
                .map(|m| match (n == m, self.get(n, m)) {
                    (true, _) => format!("{:>8}", "-"),
                    (false, Some(v)) => format!("{v:>8.3}"),
                    (false, None) => format!("{:>8}", "?"),
                })
                .collect();
            let mark = if out == Some(n) {
                "  ◀ every pair slow"
            } else {
                ""
            };
            lines.push(format!("  {n:>6} {cells}{mark}"));
        }
        lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matrix(nodes: usize, f: impl Fn(usize, usize) -> f64) -> PairMatrix {
        PairMatrix {
            nodes,
            bytes: 1 << 20,
            pairs: PairMatrix::order(nodes)
                .into_iter()
                .map(|(a, b)| (a, b, f(a, b)))
                .collect(),
        }
    }

    #[test]
    fn the_node_in_every_slow_pair_is_the_outlier() {
        let slow = |n: usize| move |a: usize, b: usize| if a == n || b == n { 0.02 } else { 0.4 };
        for nodes in [3, 4, 8] {
            for n in 0..nodes {
                assert_eq!(
                    matrix(nodes, slow(n)).outlier(),
                    Some(n),
                    "{nodes} nodes, {n}"
                );
            }
        }
        // All slow alike (the wrong NIC everywhere), or all fine: nobody stands out.
        assert_eq!(matrix(4, |_, _| 0.02).outlier(), None);
        assert_eq!(
            matrix(4, |a, b| 0.4 + 0.01 * (a + b) as f64).outlier(),
            None
        );
        // One slow pair alone is a link, not a node: both its ends still have a fast pair.
        let one = matrix(4, |a, b| if (a, b) == (1, 2) { 0.02 } else { 0.4 });
        assert_eq!(one.outlier(), None);
    }

    #[test]
    fn the_table_marks_the_outlier_and_reads_either_way_round() {
        let m = matrix(3, |a, b| if a == 1 || b == 1 { 0.023 } else { 0.5 });
        assert_eq!(m.get(2, 1), m.get(1, 2));
        let lines = m.lines("node");
        assert_eq!(lines.len(), 5);
        assert!(lines[3].contains("◀"), "{lines:?}");
        assert!(!lines[2].contains("◀") && !lines[4].contains("◀"));
        assert!(lines[3].contains("0.023"), "{}", lines[3]);
        assert_eq!(m.range(), Some((0.023, 0.5)));
    }
}
