//! Where each rank's time went: inside its collectives (from start to completion) and between
//! them (its own work: compute, data loading, the host). A straggler hides in plain sight here:
//! every other rank waits for it inside the collectives, so their time inside grows while the
//! straggler's is the shortest, and its time between collectives is the longest. Compared over
//! the collectives every rank completed, so like is set against like. ringlab's reading.

use serde::Serialize;

use super::RankTrace;

/// The straggler's time between collectives against the median of the others' must pass this
/// ratio (ringlab's threshold: a rank 1.5× slower at its own work).
pub const STRAGGLER: f64 = 1.5;

/// One rank's time over the collectives every rank completed.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct RankTiming {
    pub rank: usize,
    /// Collectives counted (completed on every rank, with start and completion times).
    pub collectives: usize,
    /// From start to completion, summed.
    pub inside_ns: u64,
    /// From one counted collective's completion to the next one's start, summed over
    /// consecutive collectives.
    pub between_ns: u64,
}

/// A rank slower at its own work than the rest, and what that does to the others.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct Straggler {
    pub rank: usize,
    pub between_ns: u64,
    /// The median over the other ranks.
    pub others_between_ns: u64,
    pub inside_ns: u64,
    pub others_inside_ns: u64,
}

/// The sequence numbers every rank completed with both times, ascending.
fn common(traces: &[RankTrace]) -> Vec<u64> {
    let done = |t: &RankTrace| -> std::collections::BTreeSet<u64> {
        t.entries
            .iter()
            .filter(|e| e.started_ns.is_some() && e.completed_ns.is_some())
            .map(|e| e.seq)
            .collect()
    };
    let mut sets = traces.iter().map(done);
    let Some(first) = sets.next() else {
        return Vec::new();
    };
    sets.fold(first, |acc, s| &acc & &s).into_iter().collect()
}

/// Each rank's time inside and between the collectives all ranks completed.
pub fn timing(traces: &[RankTrace]) -> Vec<RankTiming> {
    let seqs = common(traces);
    traces
        .iter()
        .map(|t| {
            let span = |seq: u64| {
                t.entries
                    .iter()
                    .find(|e| e.seq == seq)
                    .and_then(|e| Some((e.started_ns?, e.completed_ns?)))
            };
            let spans: Vec<(u64, (u64, u64))> =
                seqs.iter().filter_map(|&s| Some((s, span(s)?))).collect();
            let inside_ns = spans.iter().map(|(_, (a, b))| b.saturating_sub(*a)).sum();
            let between_ns = spans
                .windows(2)
                .filter(|w| w[1].0 == w[0].0 + 1)
                .map(|w| w[1].1.0.saturating_sub(w[0].1.1))
                .sum();
            RankTiming {
                rank: t.rank,
                collectives: spans.len(),
                inside_ns,
                between_ns,
            }
        })
        .collect()
}

fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

/// The rank whose time between collectives is the longest, at least [`STRAGGLER`] × the
/// others' median, and whose time inside is the shortest: the others waited for it.
pub fn straggler(t: &[RankTiming]) -> Option<Straggler> {
    let slow = t
        .iter()
        .filter(|r| r.collectives >= 2)
        .max_by_key(|r| r.between_ns)?;
    let others: Vec<&RankTiming> = t.iter().filter(|r| r.rank != slow.rank).collect();
    if others.is_empty() || others.iter().any(|o| o.inside_ns < slow.inside_ns) {
        return None;
    }
    let others_between_ns = median(others.iter().map(|o| o.between_ns).collect());
    let others_inside_ns = median(others.iter().map(|o| o.inside_ns).collect());
    (slow.between_ns as f64 >= STRAGGLER * others_between_ns.max(1) as f64).then_some(Straggler {
        rank: slow.rank,
        between_ns: slow.between_ns,
        others_between_ns,
        inside_ns: slow.inside_ns,
        others_inside_ns,
    })
}

impl Straggler {
    /// One paragraph for people.
    pub fn explain(&self) -> String {
        let ms = |ns: u64| ns as f64 / 1e6;
        format!(
            "rank {} spends {:.1} ms between collectives (its own work) against a median of {:.1} \
             ms on the others, and {:.1} ms inside them against {:.1} ms: the others wait inside \
             each collective for it. A straggler: its GPU, clocks, data loading or host is slower; \
             the collectives only show where the others waited",
            self.rank,
            ms(self.between_ns),
            ms(self.others_between_ns),
            ms(self.inside_ns),
            ms(self.others_inside_ns)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::hang::trace::{Call, Entry, State};

    const MS: u64 = 1_000_000;

    /// A rank that computes `work` ms, then waits in an all-reduce until every rank has
    /// arrived (the slowest rank's arrival) plus `wire` ms, for `steps` steps.
    fn world(work: &[u64], wire: u64, steps: u64) -> Vec<RankTrace> {
        let mut clock = 0;
        let mut entries = vec![Vec::new(); work.len()];
        for seq in 1..=steps {
            let arrive: Vec<u64> = work.iter().map(|w| clock + w * MS).collect();
            let done = arrive.iter().max().copied().unwrap_or(0) + wire * MS;
            for (r, e) in entries.iter_mut().enumerate() {
                e.push(Entry {
                    seq,
                    call: Call {
                        coll: "all_reduce".into(),
                        algo: "ring".into(),
                        count: 1024,
                        dtype: "f32".into(),
                        op: "sum".into(),
                        root: -1,
                        shape: None,
                    },
                    state: State::Completed,
                    label: None,
                    scheduled_ns: arrive[r],
                    started_ns: Some(arrive[r]),
                    completed_ns: Some(done),
                });
            }
            clock = done;
        }
        entries
            .into_iter()
            .enumerate()
            .map(|(rank, entries)| RankTrace {
                format: super::super::FORMAT.into(),
                version: super::super::VERSION,
                rank,
                world: work.len(),
                process: Default::default(),
                entries,
                source: format!("rank{rank}.json"),
            })
            .collect()
    }

    #[test]
    fn a_rank_three_times_slower_has_the_least_time_inside_and_is_named() {
        let t = timing(&world(&[10, 10, 30, 10], 2, 20));
        assert_eq!(
            t[2].inside_ns,
            20 * 2 * MS,
            "the straggler waits only for the wire"
        );
        assert_eq!(t[0].inside_ns, 20 * 22 * MS, "the others wait for it");
        // Between two collectives: a rank's own work plus its wait for the others to leave.
        assert_eq!(t[2].between_ns, 19 * 30 * MS);
        let s = straggler(&t).expect("a straggler");
        assert_eq!(s.rank, 2);
        assert!(
            s.explain().contains("rank 2 spends 570.0 ms"),
            "{}",
            s.explain()
        );
    }

    #[test]
    fn an_even_world_has_no_straggler_and_unfinished_calls_are_not_counted() {
        let mut w = world(&[10, 11, 10, 12], 2, 10);
        assert_eq!(straggler(&timing(&w)), None);
        // Rank 3's last call never completed: the last call counts for nobody.
        if let Some(e) = w[3].entries.last_mut() {
            e.state = State::Started;
            e.completed_ns = None;
        }
        assert!(timing(&w).iter().all(|r| r.collectives == 9));
    }
}
