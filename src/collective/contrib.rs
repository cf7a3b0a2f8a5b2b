//! Who has contributed to what: for the animation, per rank and per chunk, the set of source
//! ranks whose data that cell holds after k steps.
//!
//! It is the simulator again, on sets instead of numbers: each chunk is one element, a copy
//! replaces the receiver's set, a reduce unions into it. The schedule is rebuilt with one element
//! per chunk (the step structure never depends on `count`), so empty chunks of a small buffer
//! still show what they would hold. Sets are `u64` bitsets, so at most 64 ranks.
//!
//! Initial state: rank r's chunks hold {r}, except all-gather (only chunk r holds {r}, the rest
//! nothing yet) and broadcast (only the root's buffer holds {root}). For all-to-all a cell holds
//! {r} where rank r's data sits: at the start every cell of rank r, at the end cell (j, c) holds
//! {c}, the block c meant for j.

use super::kinds::Collective;
use super::schedule::{Schedule, ScheduleError, Spec};
use super::simulate::{SimError, replay};

/// Most ranks a contribution map can track (one bit per rank).
pub const MAX_CONTRIB_RANKS: usize = 64;

/// Why contributions could not be computed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ContribError {
    /// More ranks than bits.
    #[error("contributions are tracked for at most {max} ranks, this schedule has {ranks}")]
    TooManyRanks { ranks: usize, max: usize },
    /// Rebuilding the per-chunk schedule failed.
    #[error(transparent)]
    Schedule(#[from] ScheduleError),
    /// Replaying failed.
    #[error(transparent)]
    Sim(#[from] SimError),
}

/// Per rank, per chunk: the bitset of ranks whose data the cell holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Contributions {
    ranks: usize,
    /// `cells[rank][chunk]`, bit s set = holds data from rank s.
    cells: Vec<Vec<u64>>,
}

impl Contributions {
    /// The state after the first `steps` steps of `schedule` (0 = before anything moved;
    /// `schedule.len()` = finished; larger values are clamped).
    pub fn after(schedule: &Schedule, steps: usize) -> Result<Contributions, ContribError> {
        let spec = schedule.spec();
        let n = spec.ranks;
        if n > MAX_CONTRIB_RANKS {
            return Err(ContribError::TooManyRanks {
                ranks: n,
                max: MAX_CONTRIB_RANKS,
            });
        }
        let unit = Spec {
            count: n,
            elem_size: 1,
            ..*spec
        };
        let rebuilt;
        let per_chunk = if spec.count == n {
            schedule
        } else {
            rebuilt = Schedule::build(&unit)?;
            &rebuilt
        };
        let initial: Vec<Vec<u64>> = (0..n)
            .map(|r| initial_row(spec.coll, spec.root, n, r))
            .collect();
        let cells = replay(per_chunk, &initial, steps, |a, b| a | b)?;
        Ok(Contributions { ranks: n, cells })
    }

    /// Number of ranks (= number of chunks).
    pub fn ranks(&self) -> usize {
        self.ranks
    }

    /// The bitset for `rank`'s `chunk` (0 when out of range).
    pub fn get(&self, rank: usize, chunk: usize) -> u64 {
        self.cells
            .get(rank)
            .and_then(|row| row.get(chunk))
            .copied()
            .unwrap_or(0)
    }

    /// Whether `rank`'s `chunk` holds data from `source`.
    pub fn holds(&self, rank: usize, chunk: usize, source: usize) -> bool {
        source < 64 && self.get(rank, chunk) >> source & 1 == 1
    }

    /// How many ranks' data `rank`'s `chunk` holds.
    pub fn count(&self, rank: usize, chunk: usize) -> u32 {
        self.get(rank, chunk).count_ones()
    }

    /// True when the cell holds data from every rank.
    pub fn is_complete(&self, rank: usize, chunk: usize) -> bool {
        self.count(rank, chunk) as usize == self.ranks
    }
}

fn initial_row(op: Collective, root: usize, n: usize, r: usize) -> Vec<u64> {
    let me = 1u64 << r;
    match op {
        Collective::AllGather => (0..n).map(|c| if c == r { me } else { 0 }).collect(),
        Collective::Broadcast if r != root => vec![0; n],
        _ => vec![me; n],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::{Algorithm, Collective, Spec};

    #[test]
    fn ring_allreduce_cells_fill_up() {
        let s = Schedule::build(&Spec::new(
            Collective::AllReduce,
            Algorithm::Ring,
            4,
            1000,
            4,
        ))
        .unwrap();
        let c0 = Contributions::after(&s, 0).unwrap();
        assert_eq!(c0.get(2, 3), 0b0100);
        // After step 0, rank 1 reduced rank 0's chunk 3 into its own; its chunk 0 is still its own.
        let c1 = Contributions::after(&s, 1).unwrap();
        assert_eq!(c1.get(1, 3), 0b0011);
        assert_eq!(c1.get(1, 0), 0b0010);
        // After reduce-scatter, rank r owns chunk r complete.
        let rs = Contributions::after(&s, 3).unwrap();
        assert!((0..4).all(|r| rs.is_complete(r, r)));
        assert!(!rs.is_complete(0, 1));
        let end = Contributions::after(&s, 99).unwrap();
        assert!((0..4).all(|r| (0..4).all(|c| end.is_complete(r, c))));
    }

    #[test]
    fn more_than_64_ranks_is_an_error() {
        let s = Schedule::build(&Spec::new(
            Collective::AllReduce,
            Algorithm::Naive,
            65,
            10,
            4,
        ))
        .unwrap();
        assert!(matches!(
            Contributions::after(&s, 1),
            Err(ContribError::TooManyRanks { .. })
        ));
    }
}
