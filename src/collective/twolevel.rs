//! The two-level (hierarchical) ring all-reduce for P nodes × G GPUs (N = P·G; rank p·G + i is
//! GPU i of node p; G is [`Spec::node_size`](super::Spec::node_size)).
//!
//! The buffer's N chunks are grouped in G node-chunks of P consecutive chunks: node-chunk i is
//! chunks i·P .. (i+1)·P.
//! 1. intra-node reduce-scatter, G−1 steps: a ring inside every node over the node-chunks, so
//!    GPU i ends with node-chunk i summed over its node (NVLink);
//! 2. inter-node all-reduce, 2(P−1) steps: for every i at once, a ring all-reduce of node-chunk
//!    i among the P ranks with local index i (one per node), over its P chunks (the NIC);
//! 3. intra-node all-gather, G−1 steps: the finished node-chunks go round each node again.
//!
//! Each rank sends 2(G−1)/G·M over NVLink but only 2(P−1)/P·M/G over its NIC, against a flat
//! ring where every step waits for the node-crossing hops (see `cost::Topology`).

use super::schedule::{Builder, Phase, chunks_span, push};

/// Appends the two-level all-reduce for `b.spec` (N ≥ 2, N a multiple of the node size).
pub(super) fn build(b: &mut Builder) {
    let (n, count) = (b.spec.ranks, b.spec.count);
    let g = b.spec.node_size().max(1);
    let p = n / g;
    let node_chunk = |i: usize| chunks_span(count, n, i * p..(i + 1) * p);
    let sub_chunk = |i: usize, j: usize| chunks_span(count, n, i * p + j..i * p + j + 1);
    // 1. Within each node, GPU i sends node-chunk (i − 1 − s) mod G to GPU i + 1.
    for s in 0..g - 1 {
        let t = b.step(Phase::IntraReduceScatter, n);
        for node in 0..p {
            for i in 0..g {
                let c = (i + 2 * g - 1 - s) % g;
                push(t, node * g + i, node * g + (i + 1) % g, node_chunk(c), true);
            }
        }
    }
    // 2. Among GPUs i of every node: a ring reduce-scatter then all-gather of node-chunk i.
    for (reduce, first) in [(true, p - 1), (false, 0)] {
        for s in 0..p - 1 {
            let t = b.step(Phase::InterAllReduce, n);
            for node in 0..p {
                let j = (node + 2 * p + first - s) % p;
                for i in 0..g {
                    let (src, dst) = (node * g + i, (node + 1) % p * g + i);
                    push(t, src, dst, sub_chunk(i, j), reduce);
                }
            }
        }
    }
    // 3. Within each node, GPU i sends node-chunk (i − s) mod G to GPU i + 1.
    for s in 0..g - 1 {
        let t = b.step(Phase::IntraAllGather, n);
        for node in 0..p {
            for i in 0..g {
                let c = (i + g - s) % g;
                push(
                    t,
                    node * g + i,
                    node * g + (i + 1) % g,
                    node_chunk(c),
                    false,
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::collective::{Algorithm, Collective, Op, Phase, Schedule, Spec, simulate};

    fn two_level(n: usize, g: usize, count: usize) -> Schedule {
        Schedule::build(&Spec {
            gpus_per_node: g,
            ..Spec::new(Collective::AllReduce, Algorithm::TwoLevel, n, count, 1)
        })
        .expect("two-level")
    }

    #[test]
    fn odd_node_shapes_are_said_in_words() {
        use crate::collective::node_shape_note;
        assert_eq!(node_shape_note(8), None);
        assert_eq!(node_shape_note(1), None);
        let nine = node_shape_note(9).unwrap();
        assert!(nine.contains("3 nodes of 3 GPUs"), "{nine}");
        let seven = node_shape_note(7).unwrap();
        assert!(seven.contains("7 nodes of 1 GPU"), "{seven}");
        assert!(seven.contains("ring over nodes"), "{seven}");
        let fifteen = node_shape_note(15).unwrap();
        assert!(fifteen.contains("3 nodes of 5 GPUs"), "{fifteen}");
    }

    #[test]
    fn two_nodes_of_four_take_2x3_plus_2x1_steps() {
        let s = two_level(8, 4, 16);
        assert_eq!(s.len(), 8);
        assert_eq!(s.phase_position(0), Some((Phase::IntraReduceScatter, 1, 3)));
        assert_eq!(s.phase_position(4), Some((Phase::InterAllReduce, 2, 2)));
        assert_eq!(s.phase_position(7), Some((Phase::IntraAllGather, 3, 3)));
        // Inter-node steps only pair GPU i of node 0 with GPU i of node 1.
        assert!(
            s.steps()[3..5]
                .iter()
                .flat_map(|st| &st.transfers)
                .all(|t| { t.src % 4 == t.dst % 4 && t.src / 4 != t.dst / 4 })
        );
        let ins: Vec<Vec<i64>> = (0..8)
            .map(|r| (0..16).map(|i| (r * 100 + i) as i64).collect())
            .collect();
        let out = simulate(&s, Op::Sum, &ins).expect("simulate");
        let want: Vec<i64> = (0..16).map(|i| 2800 + 8 * i).collect();
        assert!(out.iter().all(|b| *b == want));
    }

    #[test]
    fn default_node_size_is_two_nodes_for_even_n() {
        let s = Schedule::build(&Spec::new(
            Collective::AllReduce,
            Algorithm::TwoLevel,
            16,
            16,
            1,
        ))
        .expect("default");
        assert_eq!(s.spec().node_size(), 8);
        assert_eq!(s.len(), 2 * 7 + 2);
        let e = Schedule::build(&Spec {
            gpus_per_node: 3,
            ..Spec::new(Collective::AllReduce, Algorithm::TwoLevel, 8, 8, 1)
        })
        .expect_err("8 is not nodes of 3");
        assert!(e.to_string().contains("nodes of 3"), "{e}");
    }
}
