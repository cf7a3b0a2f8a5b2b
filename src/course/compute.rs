//! The computations a parametric quiz item can name in `answer_from`. Each one builds a
//! [`Spec`], asks [`Schedule::build`] for the schedule and reads the answer off the cost model
//! ([`traffic`], [`estimate`], [`busbw_factor`], …): the quiz never re-derives a formula, so a
//! question and the ring view cannot disagree.

use std::collections::BTreeMap;

use crate::collective::{
    Algorithm, Collective, Link, Schedule, SlowNode, Spec, Topology, algbw_gbps, busbw_factor,
    busbw_gbps, dtree_pipelined_estimate, estimate, estimate_on, estimate_shaped, traffic,
    tree_ring_crossover_bytes,
};

/// Parameter values by name (`N`, `M`, …).
pub type Values = BTreeMap<String, f64>;

/// Why a computation has no answer for the values it was given.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ComputeError {
    #[error("parameter `{0}` is missing")]
    Missing(String),
    #[error("parameter `{0}` = {1} must be a whole number >= 1")]
    NotWhole(String, f64),
    #[error("parameter `{0}` = {1} must be > 0")]
    NotPositive(String, f64),
    #[error("parameter `{0}` = {1} must be >= 0")]
    Negative(String, f64),
    #[error("on N = {0} ranks the tree never beats the ring")]
    TreeNeverBeats(usize),
    #[error(transparent)]
    Schedule(#[from] crate::collective::ScheduleError),
}

/// A named computation and the parameters it reads.
pub struct Computation {
    pub name: &'static str,
    pub params: &'static [&'static str],
    /// What it returns, for authors.
    pub doc: &'static str,
    pub run: fn(&Values) -> Result<f64, ComputeError>,
}

pub const COMPUTATIONS: &[Computation] = &[
    Computation {
        name: "ring_allreduce_bytes_per_rank",
        params: &["N", "M"],
        doc: "bytes the busiest rank sends in a ring all-reduce of M bytes on N ranks",
        run: |v| max_sent(v, Collective::AllReduce, Algorithm::Ring),
    },
    Computation {
        name: "ring_reduce_scatter_bytes_per_rank",
        params: &["N", "M"],
        doc: "bytes the busiest rank sends in a ring reduce-scatter of an M-byte buffer",
        run: |v| max_sent(v, Collective::ReduceScatter, Algorithm::Ring),
    },
    Computation {
        name: "ring_allgather_bytes_per_rank",
        params: &["N", "M"],
        doc: "bytes the busiest rank sends in a ring all-gather of an M-byte result",
        run: |v| max_sent(v, Collective::AllGather, Algorithm::Ring),
    },
    Computation {
        name: "naive_allreduce_root_bytes",
        params: &["N", "M"],
        doc: "bytes the root sends in a naive (reduce to root, then broadcast) all-reduce",
        run: |v| {
            let s = schedule(v, Collective::AllReduce, Algorithm::Naive, 1)?;
            Ok(traffic(&s).per_rank.first().map_or(0, |r| r.bytes_sent) as f64)
        },
    },
    Computation {
        name: "ring_allreduce_steps",
        params: &["N"],
        doc: "number of steps of a ring all-reduce on N ranks",
        run: |v| {
            let n = int(v, "N")?;
            let s = build(Spec::new(Collective::AllReduce, Algorithm::Ring, n, n, 1))?;
            Ok(traffic(&s).steps as f64)
        },
    },
    Computation {
        name: "allreduce_busbw_factor",
        params: &["N"],
        doc: "nccl-tests' all-reduce bus bandwidth factor for N ranks",
        run: |v| Ok(busbw_factor(Collective::AllReduce, int(v, "N")?)),
    },
    Computation {
        name: "busbw",
        params: &["N", "M", "T"],
        doc: "all-reduce busbw in GB/s for M bytes in T microseconds on N ranks",
        run: |v| {
            let t = positive(v, "T")?;
            Ok(busbw_gbps(
                Collective::AllReduce,
                int(v, "N")?,
                int(v, "M")? as u64,
                t * 1e-6,
            ))
        },
    },
    Computation {
        name: "algbw",
        params: &["M", "T"],
        doc: "algbw in GB/s for M bytes in T microseconds",
        run: |v| Ok(algbw_gbps(int(v, "M")? as u64, positive(v, "T")? * 1e-6)),
    },
    Computation {
        name: "tp_decode_bytes_per_token",
        params: &["H", "B", "L", "TP"],
        doc: "bytes each GPU sends per decode token for a model with hidden size H, B bytes per \
              element and L layers under tensor parallelism TP (two ring all-reduces per layer)",
        run: |v| {
            let (h, b, l, tp) = (int(v, "H")?, int(v, "B")?, int(v, "L")?, int(v, "TP")?);
            let s = build(Spec::new(Collective::AllReduce, Algorithm::Ring, tp, h, b))?;
            let per_call = traffic(&s).max_sent();
            let calls = crate::infer::tp::allreduces_per_forward(l as u64, tp);
            Ok(per_call as f64 * calls as f64)
        },
    },
    Computation {
        name: "tp_allreduce_payload_bytes",
        params: &["H", "B", "S"],
        doc: "bytes in one tensor-parallel all-reduce for S tokens of hidden size H, B bytes each",
        run: |v| {
            let spec = Spec::new(
                Collective::AllReduce,
                Algorithm::Ring,
                2,
                int(v, "H")?.saturating_mul(int(v, "S")?),
                int(v, "B")?,
            );
            build(spec).map(|s| s.spec().bytes() as f64)
        },
    },
    Computation {
        name: "ring_allreduce_time_us",
        params: &["N", "M", "ALPHA", "BW"],
        doc: "alpha-beta estimate in microseconds of a ring all-reduce of M bytes on N ranks, \
              ALPHA microseconds per step and BW GB/s per link",
        run: |v| {
            let s = schedule(v, Collective::AllReduce, Algorithm::Ring, 1)?;
            Ok(estimate(&s, &quiz_link(v)?).total_s * 1e6)
        },
    },
    Computation {
        name: "ring_allreduce_time_us_one_slow_link",
        params: &["N", "M", "ALPHA", "BW", "SLOW"],
        doc: "the ring all-reduce estimate in microseconds when every link runs at BW GB/s               except rank 0's, at SLOW GB/s: each transfer at the slower of its two ends, each               step as long as its slowest transfer (the slow-job lab's model)",
        run: |v| {
            let s = schedule(v, Collective::AllReduce, Algorithm::Ring, 1)?;
            let topo = Topology {
                gpus_per_node: 1,
                ..Topology::flat(quiz_link(v)?)
            };
            let slow = [SlowNode {
                node: 0,
                bandwidth_gbps: positive(v, "SLOW")?,
            }];
            Ok(estimate_shaped(&s, &topo, &slow).total_s * 1e6)
        },
    },
    Computation {
        name: "dtree_allreduce_time_us",
        params: &["N", "M", "ALPHA", "BW"],
        doc: "NCCL's model of its pipelined double binary tree all-reduce, in microseconds: \
              2 x depth latencies of ALPHA us plus the busiest rank's bytes (about 2M) at BW GB/s",
        run: |v| {
            let e = dtree_pipelined_estimate(int(v, "N")?, int(v, "M")?, &quiz_link(v)?)?;
            Ok(e.total_s * 1e6)
        },
    },
    Computation {
        name: "tree_ring_crossover_bytes",
        params: &["N", "ALPHA", "BW"],
        doc: "the all-reduce size in bytes below which the pipelined double tree beats the ring \
              on N ranks, ALPHA us per hop, BW GB/s links (alpha-beta model)",
        run: |v| {
            let n = int(v, "N")?;
            tree_ring_crossover_bytes(n, &quiz_link(v)?)?.ok_or(ComputeError::TreeNeverBeats(n))
        },
    },
    Computation {
        name: "alltoall_busbw_factor",
        params: &["N"],
        doc: "nccl-tests' all-to-all bus bandwidth factor for N ranks, (N-1)/N",
        run: |v| Ok(busbw_factor(Collective::AllToAll, int(v, "N")?)),
    },
    Computation {
        name: "alltoall_bytes_per_rank",
        params: &["N", "M"],
        doc: "bytes the busiest rank sends in an all-to-all of an M-byte buffer on N ranks \
              (N-1 blocks of M/N, rounded down to whole blocks as nccl-tests does)",
        run: |v| max_sent(v, Collective::AllToAll, Algorithm::Ring),
    },
    Computation {
        name: "dbtree_allreduce_steps",
        params: &["N"],
        doc: "steps of NCCL's double binary tree all-reduce on N ranks, pipelined over the \
              buffer's N chunks (half on each tree)",
        run: |v| {
            let n = int(v, "N")?;
            let s = build(Spec::new(
                Collective::AllReduce,
                Algorithm::DoubleTree,
                n,
                n,
                1,
            ))?;
            Ok(s.len() as f64)
        },
    },
    Computation {
        name: "two_level_allreduce_time_us",
        params: &["NODES", "GPUS", "M"],
        doc: "alpha-beta estimate in microseconds of a two-level ring all-reduce of M bytes on \
              NODES nodes of GPUS GPUs (NVLink 4 inside, one 400G InfiniBand NIC per GPU)",
        run: |v| on_nodes(v, Algorithm::TwoLevel),
    },
    Computation {
        name: "flat_ring_allreduce_time_us_on_nodes",
        params: &["NODES", "GPUS", "M"],
        doc: "the same estimate for one flat ring through all NODES x GPUS ranks",
        run: |v| on_nodes(v, Algorithm::Ring),
    },
    Computation {
        name: "two_level_nic_bytes_per_rank",
        params: &["NODES", "GPUS", "M"],
        doc: "bytes each rank sends over its NIC in a two-level ring all-reduce of M bytes",
        run: |v| {
            let (s, topo) = nodes_schedule(v, Algorithm::TwoLevel)?;
            let nic = s
                .steps()
                .iter()
                .flat_map(|st| &st.transfers)
                .filter(|t| t.src == 0 && topo.crosses(0, t.dst as usize))
                .map(|t| s.transfer_bytes(t))
                .sum::<u64>();
            Ok(nic as f64)
        },
    },
];

/// The all-reduce of M bytes (u8) on NODES × GPUS ranks, and the NVLink + InfiniBand topology.
fn nodes_schedule(v: &Values, algo: Algorithm) -> Result<(Schedule, Topology), ComputeError> {
    let (nodes, gpus, m) = (int(v, "NODES")?, int(v, "GPUS")?, int(v, "M")?);
    let spec = Spec {
        gpus_per_node: gpus,
        ..Spec::new(
            Collective::AllReduce,
            algo,
            nodes.saturating_mul(gpus),
            m,
            1,
        )
    };
    Ok((build(spec)?, Topology::nvlink_ib(gpus)))
}

fn on_nodes(v: &Values, algo: Algorithm) -> Result<f64, ComputeError> {
    let (s, topo) = nodes_schedule(v, algo)?;
    Ok(estimate_on(&s, &topo).total_s * 1e6)
}

pub fn find(name: &str) -> Option<&'static Computation> {
    COMPUTATIONS.iter().find(|c| c.name == name)
}

pub fn names() -> Vec<&'static str> {
    COMPUTATIONS.iter().map(|c| c.name).collect()
}

fn get(v: &Values, name: &str) -> Result<f64, ComputeError> {
    v.get(name)
        .copied()
        .ok_or_else(|| ComputeError::Missing(name.into()))
}

fn int(v: &Values, name: &str) -> Result<usize, ComputeError> {
    let x = get(v, name)?;
    if x.fract() != 0.0 || !(1.0..=1e15).contains(&x) {
        return Err(ComputeError::NotWhole(name.into(), x));
    }
    Ok(x as usize)
}

/// The link of an alpha-beta item: ALPHA microseconds per step, BW GB/s.
fn quiz_link(v: &Values) -> Result<Link, ComputeError> {
    Ok(Link {
        name: "quiz",
        latency_us: non_negative(v, "ALPHA")?,
        bandwidth_gbps: positive(v, "BW")?,
        note: "",
    })
}

fn positive(v: &Values, name: &str) -> Result<f64, ComputeError> {
    let x = get(v, name)?;
    if x > 0.0 {
        Ok(x)
    } else {
        Err(ComputeError::NotPositive(name.into(), x))
    }
}

fn non_negative(v: &Values, name: &str) -> Result<f64, ComputeError> {
    let x = get(v, name)?;
    if x >= 0.0 {
        Ok(x)
    } else {
        Err(ComputeError::Negative(name.into(), x))
    }
}

fn build(spec: Spec) -> Result<Schedule, ComputeError> {
    Ok(Schedule::build(&spec)?)
}

/// The schedule of `op`/`algo` on N ranks over an M-byte buffer of `elem`-byte elements.
fn schedule(
    v: &Values,
    op: Collective,
    algo: Algorithm,
    elem: usize,
) -> Result<Schedule, ComputeError> {
    let (n, m) = (int(v, "N")?, int(v, "M")?);
    build(Spec::new(op, algo, n, m / elem, elem))
}

fn max_sent(v: &Values, op: Collective, algo: Algorithm) -> Result<f64, ComputeError> {
    let s = schedule(v, op, algo, 1)?;
    Ok(traffic(&s).max_sent() as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vals(pairs: &[(&str, f64)]) -> Values {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    fn run(name: &str, pairs: &[(&str, f64)]) -> f64 {
        (find(name).expect("known").run)(&vals(pairs)).expect("runs")
    }

    #[test]
    fn answers_come_from_the_schedule() {
        assert_eq!(
            run(
                "ring_allreduce_bytes_per_rank",
                &[("N", 8.0), ("M", 67108864.0)]
            ),
            117440512.0
        );
        assert_eq!(run("ring_allreduce_steps", &[("N", 8.0)]), 14.0);
        assert_eq!(run("allreduce_busbw_factor", &[("N", 8.0)]), 1.75);
        assert_eq!(
            run(
                "tp_decode_bytes_per_token",
                &[("H", 8192.0), ("B", 2.0), ("L", 80.0), ("TP", 8.0)]
            ),
            4587520.0
        );
        let bw = run("busbw", &[("N", 8.0), ("M", 536870912.0), ("T", 2560.0)]);
        assert!((bw - 367.0).abs() < 0.1, "{bw}");
        assert_eq!(
            run("naive_allreduce_root_bytes", &[("N", 4.0), ("M", 1000.0)]),
            3000.0
        );
    }

    /// Lesson 09's numbers, from the code: the crossover of `inside-nccl-crossover` (4 MB at
    /// 8 nodes, 5 µs, 25 GB/s; its explanation works with the values drawn), the 44 MB of its 16-node illustration, and the 189 µs (ring) and
    /// 82 µs (tree) of a 1 MiB all-reduce there.
    #[test]
    fn lesson_09s_tree_ring_figures_are_the_cost_models() {
        let x = run(
            "tree_ring_crossover_bytes",
            &[("N", 8.0), ("ALPHA", 5.0), ("BW", 25.0)],
        );
        assert!((x - 4e6).abs() < 1.0, "{x}");
        let x = run(
            "tree_ring_crossover_bytes",
            &[("N", 16.0), ("ALPHA", 5.0), ("BW", 50.0)],
        );
        assert!((x - 44e6).abs() < 1.0, "{x}");
        let mib = [("N", 16.0), ("M", 1048576.0), ("ALPHA", 5.0), ("BW", 50.0)];
        let ring = run("ring_allreduce_time_us", &mib);
        let tree = run("dtree_allreduce_time_us", &mib);
        assert_eq!((ring.round(), tree.round()), (189.0, 82.0), "{ring} {tree}");
        let lesson = include_str!("../../lessons/09-inside-nccl.md");
        for figure in [
            "= 44$ MB",
            "ring needs about 189 µs",
            "the tree about 82 µs",
        ] {
            assert!(lesson.contains(figure), "lesson 09 says {figure:?}");
        }
        let e = (find("tree_ring_crossover_bytes").expect("known").run)(&vals(&[
            ("N", 8.0),
            ("ALPHA", 0.0),
            ("BW", 25.0),
        ]));
        assert!(e.is_err_and(|e| e.to_string().contains("never beats")));
    }

    /// 2 nodes × 8 GPUs, M = 16e6 B: flat ring 30 steps × (5 µs + 1e6 B / 50 GB/s) = 750 µs;
    /// two-level 14 × (2 µs + 2e6 B / 450 GB/s) + 2 × 25 µs = 140.222 µs, and each NIC carries
    /// 2(P−1)/P · M/G = 2e6 B (collective::cost's test derives the same figures).
    #[test]
    fn new_schedules_answer_from_their_schedules() {
        assert_eq!(run("alltoall_busbw_factor", &[("N", 8.0)]), 0.875);
        assert_eq!(
            run("alltoall_bytes_per_rank", &[("N", 8.0), ("M", 8000.0)]),
            7000.0
        );
        // N = 8: trees of height 3, 4 chunks each: 2·3 + 4 − 1.
        assert_eq!(run("dbtree_allreduce_steps", &[("N", 8.0)]), 9.0);
        let p = [("NODES", 2.0), ("GPUS", 8.0), ("M", 16e6)];
        let flat = run("flat_ring_allreduce_time_us_on_nodes", &p);
        assert!((flat - 750.0).abs() < 1e-6, "{flat}");
        let two = run("two_level_allreduce_time_us", &p);
        assert!((two - 140.2222).abs() < 1e-3, "{two}");
        assert_eq!(run("two_level_nic_bytes_per_rank", &p), 2e6);
        // Lesson 09's two-level quiz states the flat ring's time and the two links in words.
        let lesson = include_str!("../../lessons/09-inside-nccl.md");
        assert!(lesson.contains(&format!("takes {} µs for 16 MB on 2 × 8", flat.round())));
        let t = Topology::nvlink_ib(8);
        let (nv, ib) = (t.intra, t.inter);
        for link in [
            format!(
                "({} µs, {} GB/s per step)",
                nv.latency_us, nv.bandwidth_gbps
            ),
            format!("({} µs, {} GB/s)", ib.latency_us, ib.bandwidth_gbps),
        ] {
            assert!(lesson.contains(&link), "lesson 09 says {link:?}");
        }
    }

    #[test]
    fn one_slow_link_sets_the_pace_of_the_whole_ring() {
        // Lesson 18's table: 1 GiB on 8 ranks, 5 us per step, 50 GB/s links with one at 25.
        let at = |slow: f64| {
            run(
                "ring_allreduce_time_us_one_slow_link",
                &[
                    ("N", 8.0),
                    ("M", 1073741824.0),
                    ("ALPHA", 5.0),
                    ("BW", 50.0),
                    ("SLOW", slow),
                ],
            )
        };
        let uniform = |bw: f64| {
            run(
                "ring_allreduce_time_us",
                &[("N", 8.0), ("M", 1073741824.0), ("ALPHA", 5.0), ("BW", bw)],
            )
        };
        // The one slow link sets every step: the ring takes what a ring of such links takes.
        assert!((at(25.0) - uniform(25.0)).abs() < 1e-6);
        assert!((at(25.0) - 75231.93).abs() < 0.01, "{}", at(25.0));
        assert!((at(50.0) - 37650.96).abs() < 0.01, "{}", at(50.0));
        // A faster "slow" link changes nothing: the others bound it.
        assert!((at(100.0) - uniform(50.0)).abs() < 1e-6);
    }

    #[test]
    fn bad_parameters_are_errors_not_panics() {
        let c = find("ring_allreduce_bytes_per_rank").expect("known");
        assert!((c.run)(&vals(&[("N", 0.0), ("M", 8.0)])).is_err());
        assert!((c.run)(&vals(&[("N", 2.5), ("M", 8.0)])).is_err());
        assert!((c.run)(&vals(&[("N", 4.0)])).is_err());
    }
}
