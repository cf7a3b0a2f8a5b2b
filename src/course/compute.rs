//! The computations a parametric quiz item can name in `answer_from`. Each one builds a
//! [`Spec`], asks [`Schedule::build`] for the schedule and reads the answer off the cost model
//! ([`traffic`], [`estimate`], [`busbw_factor`], …): the quiz never re-derives a formula, so a
//! question and the ring view cannot disagree.

use std::collections::BTreeMap;

use crate::collective::{
    Algorithm, Collective, Link, Schedule, Spec, algbw_gbps, busbw_factor, busbw_gbps, estimate,
    traffic,
};

/// Parameter values by name (`N`, `M`, …).
pub type Values = BTreeMap<String, f64>;

/// A named computation and the parameters it reads.
pub struct Computation {
    pub name: &'static str,
    pub params: &'static [&'static str],
    /// What it returns, for authors.
    pub doc: &'static str,
    pub run: fn(&Values) -> Result<f64, String>,
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
            let per_call = traffic(&s)
                .per_rank
                .iter()
                .map(|r| r.bytes_sent)
                .max()
                .unwrap_or(0);
            Ok(per_call as f64 * (ALLREDUCES_PER_LAYER * l) as f64)
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
            let link = Link {
                name: "quiz",
                latency_us: non_negative(v, "ALPHA")?,
                bandwidth_gbps: positive(v, "BW")?,
                note: "",
            };
            Ok(estimate(&s, &link).total_s * 1e6)
        },
    },
];

/// Megatron-style tensor parallelism: one all-reduce after attention, one after the MLP.
pub const ALLREDUCES_PER_LAYER: usize = 2;

pub fn find(name: &str) -> Option<&'static Computation> {
    COMPUTATIONS.iter().find(|c| c.name == name)
}

pub fn names() -> Vec<&'static str> {
    COMPUTATIONS.iter().map(|c| c.name).collect()
}

fn get(v: &Values, name: &str) -> Result<f64, String> {
    v.get(name)
        .copied()
        .ok_or_else(|| format!("parameter `{name}` is missing"))
}

fn int(v: &Values, name: &str) -> Result<usize, String> {
    let x = get(v, name)?;
    if x.fract() != 0.0 || !(1.0..=1e15).contains(&x) {
        return Err(format!(
            "parameter `{name}` = {x} must be a whole number >= 1"
        ));
    }
    Ok(x as usize)
}

fn positive(v: &Values, name: &str) -> Result<f64, String> {
    let x = get(v, name)?;
    if x > 0.0 {
        Ok(x)
    } else {
        Err(format!("parameter `{name}` = {x} must be > 0"))
    }
}

fn non_negative(v: &Values, name: &str) -> Result<f64, String> {
    let x = get(v, name)?;
    if x >= 0.0 {
        Ok(x)
    } else {
        Err(format!("parameter `{name}` = {x} must be >= 0"))
    }
}

fn build(spec: Spec) -> Result<Schedule, String> {
    Schedule::build(&spec).map_err(|e| e.to_string())
}

/// The schedule of `op`/`algo` on N ranks over an M-byte buffer of `elem`-byte elements.
fn schedule(v: &Values, op: Collective, algo: Algorithm, elem: usize) -> Result<Schedule, String> {
    let (n, m) = (int(v, "N")?, int(v, "M")?);
    build(Spec::new(op, algo, n, m / elem, elem))
}

fn max_sent(v: &Values, op: Collective, algo: Algorithm) -> Result<f64, String> {
    let s = schedule(v, op, algo, 1)?;
    Ok(traffic(&s)
        .per_rank
        .iter()
        .map(|r| r.bytes_sent)
        .max()
        .unwrap_or(0) as f64)
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

    #[test]
    fn bad_parameters_are_errors_not_panics() {
        let c = find("ring_allreduce_bytes_per_rank").expect("known");
        assert!((c.run)(&vals(&[("N", 0.0), ("M", 8.0)])).is_err());
        assert!((c.run)(&vals(&[("N", 2.5), ("M", 8.0)])).is_err());
        assert!((c.run)(&vals(&[("N", 4.0)])).is_err());
    }
}
