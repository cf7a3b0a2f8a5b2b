//! The JSON report of `ringlab ring --json`: the schedule, its traffic and the busbw factor.
//!
//! Shape (offset/len in elements, bytes = count × element size):
//! `{"op","algo","ranks","bytes","dtype","steps":[{"index","phase","transfers":[{"src","dst",
//! "offset","len","reduce"}]}],"per_rank":[{"rank","bytes_sent","bytes_received"}],
//! "total_bytes_sent","max_link_bytes","busbw_factor"}`, and `"gpus_per_node"` for the
//! two-level all-reduce (the node shape it was built for).

use serde::Serialize;

use super::cost::{RankBytes, busbw_factor, traffic};
use super::kinds::Dtype;
use super::schedule::{Schedule, Step};

/// A serializable view of one schedule (borrows its steps).
#[derive(Debug, Clone, Serialize)]
pub struct Report<'a> {
    /// Collective name, e.g. "all-reduce".
    pub op: &'static str,
    /// Algorithm name, e.g. "ring".
    pub algo: &'static str,
    /// Number of ranks.
    pub ranks: usize,
    /// Bytes in each rank's buffer (count × element size).
    pub bytes: u64,
    /// Element type name, e.g. "f32".
    pub dtype: &'static str,
    /// Every step and its transfers.
    pub steps: &'a [Step],
    /// Bytes sent and received per rank.
    pub per_rank: Vec<RankBytes>,
    /// Sum of all bytes sent.
    pub total_bytes_sent: u64,
    /// Most bytes on one directed link.
    pub max_link_bytes: u64,
    /// nccl-tests' busbw factor for this collective and rank count.
    pub busbw_factor: f64,
    /// GPUs per node of the two-level all-reduce (absent for every other algorithm).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpus_per_node: Option<usize>,
}

/// Builds the report. `dtype` only names the type: byte counts use the schedule's `elem_size`,
/// so build the spec with `elem_size = dtype.size()`.
pub fn report(schedule: &Schedule, dtype: Dtype) -> Report<'_> {
    let spec = schedule.spec();
    let t = traffic(schedule);
    Report {
        op: spec.coll.name(),
        algo: spec.algo.name(),
        ranks: spec.ranks,
        bytes: spec.bytes(),
        dtype: dtype.name(),
        steps: schedule.steps(),
        per_rank: t.per_rank,
        total_bytes_sent: t.total_bytes_sent,
        max_link_bytes: t.max_link_bytes,
        busbw_factor: busbw_factor(spec.coll, spec.ranks),
        gpus_per_node: (spec.algo == super::kinds::Algorithm::TwoLevel).then(|| spec.node_size()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::{Algorithm, Collective, Spec};

    #[test]
    fn json_has_exactly_the_documented_shape() {
        let s = Schedule::build(&Spec::new(
            Collective::AllReduce,
            Algorithm::Ring,
            5,
            1003,
            1,
        ))
        .unwrap();
        let v = serde_json::to_value(report(&s, Dtype::U8)).unwrap();
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        let mut want = vec![
            "op",
            "algo",
            "ranks",
            "bytes",
            "dtype",
            "steps",
            "per_rank",
            "total_bytes_sent",
            "max_link_bytes",
            "busbw_factor",
        ];
        want.sort_unstable();
        let mut keys = keys;
        keys.sort_unstable();
        assert_eq!(keys, want);
        assert_eq!(v["op"], "all-reduce");
        assert_eq!(v["bytes"], 1003);
        assert_eq!(v["dtype"], "u8");
        assert_eq!(v["total_bytes_sent"], 8024);
        assert_eq!(v["busbw_factor"], 1.6);
        assert_eq!(v["steps"][0]["phase"], "reduce-scatter");
        assert_eq!(v["steps"][4]["phase"], "all-gather");
        let t = &v["steps"][0]["transfers"][0];
        assert_eq!(
            *t,
            serde_json::json!({"src": 0, "dst": 1, "offset": 803, "len": 200, "reduce": true})
        );
        assert_eq!(
            v["per_rank"][3],
            serde_json::json!({"rank": 3, "bytes_sent": 1606, "bytes_received": 1605})
        );
    }
}
