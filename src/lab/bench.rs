//! `ringlab bench` as data: the sizes nccl-tests would sweep, rows aggregated across ranks,
//! and algbw/busbw exactly as nccl-tests defines them (collective::cost).

use std::collections::BTreeMap;

use serde::Serialize;

use super::{Event, Job};
use crate::collective::{Collective, algbw_gbps, busbw_gbps};

/// nccl-tests' sweep: from `min` multiplying by `factor` while ≤ `max`.
pub fn sizes(min: u64, max: u64, factor: u64) -> Result<Vec<u64>, String> {
    if min == 0 {
        return Err("-b/--minbytes must be at least 1".into());
    }
    if max < min {
        return Err(format!(
            "-e/--maxbytes ({max}) is smaller than -b/--minbytes ({min})"
        ));
    }
    if factor < 2 {
        return Err("-f/--stepfactor must be at least 2".into());
    }
    let mut v = Vec::new();
    let mut s = min;
    while s <= max {
        v.push(s);
        s = match s.checked_mul(factor) {
            Some(n) => n,
            None => break,
        };
    }
    Ok(v)
}

/// One line of the table for one placement: what `--json` prints.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    pub coll: Collective,
    pub backend: &'static str,
    pub algo: &'static str,
    pub ranks: usize,
    pub size: u64,
    pub count: u64,
    #[serde(rename = "type")]
    pub dtype: &'static str,
    pub redop: &'static str,
    pub root: i64,
    pub in_place: bool,
    pub time_us: f64,
    pub algbw_gbps: f64,
    pub busbw_gbps: f64,
    pub wrong: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    pub summary: bool,
    pub avg_busbw_gbps: f64,
    pub wrong_total: u64,
    pub ranks: usize,
    pub backend: &'static str,
}

/// nccl-tests prints `none` for collectives without a reduction and -1 as the root of
/// collectives without one.
pub fn redop_and_root(job: &Job) -> (&'static str, i64) {
    let redop = if job.coll.is_reducing() {
        job.op.name()
    } else {
        "none"
    };
    let root = if job.coll.has_root() {
        job.root as i64
    } else {
        -1
    };
    (redop, root)
}

/// Collects per-rank reports into rows: time is the slowest rank's, #wrong the sum over ranks.
pub struct Collector {
    job: Job,
    ranks: usize,
    /// Ranks on this node: a row is complete when all of them have reported it.
    local_ranks: usize,
    backend: &'static str,
    pending: BTreeMap<(u64, bool), (usize, f64, u64, u64)>,
    pub rows: Vec<Row>,
}

impl Collector {
    pub fn new(job: &Job, ranks: usize, local_ranks: usize, backend: &'static str) -> Self {
        Self {
            local_ranks,
            job: job.clone(),
            ranks,
            backend,
            pending: BTreeMap::new(),
            rows: Vec::new(),
        }
    }

    /// Feed an event; returns a finished row when the last local rank has reported it.
    pub fn feed(&mut self, ev: &Event) -> Option<Row> {
        let Event::Row {
            size,
            count,
            in_place,
            time_us,
            wrong,
            ..
        } = ev
        else {
            return None;
        };
        let e = self
            .pending
            .entry((*size, *in_place))
            .or_insert((0, 0.0, 0, *count));
        e.0 += 1;
        e.1 = e.1.max(*time_us);
        e.2 += wrong;
        if e.0 < self.local_ranks {
            return None;
        }
        let (_, t, w, count) = self.pending.remove(&(*size, *in_place))?;
        let secs = t * 1e-6;
        let (redop, root) = redop_and_root(&self.job);
        let row = Row {
            coll: self.job.coll,
            backend: self.backend,
            algo: self.job.algo.name(),
            ranks: self.ranks,
            size: *size,
            count,
            dtype: self.job.dtype.nccl_name(),
            redop,
            root,
            in_place: *in_place,
            time_us: t,
            algbw_gbps: algbw_gbps(*size, secs),
            busbw_gbps: busbw_gbps(self.job.coll, self.ranks, *size, secs),
            wrong: w,
        };
        self.rows.push(row.clone());
        Some(row)
    }

    pub fn summary(&self) -> Summary {
        let n = self.rows.len().max(1) as f64;
        Summary {
            summary: true,
            avg_busbw_gbps: self.rows.iter().map(|r| r.busbw_gbps).sum::<f64>() / n,
            wrong_total: self.rows.iter().map(|r| r.wrong).sum(),
            ranks: self.ranks,
            backend: self.backend,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sweep_matches_nccl_tests() {
        assert_eq!(
            sizes(1024, 65536, 4).expect("ok"),
            vec![1024, 4096, 16384, 65536]
        );
        assert_eq!(sizes(8, 8, 2).expect("ok"), vec![8]);
        assert!(sizes(0, 8, 2).is_err());
        assert!(sizes(16, 8, 2).expect_err("bad").contains("smaller"));
        assert!(sizes(1, 8, 1).is_err());
    }
}
