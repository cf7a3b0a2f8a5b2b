//! The TCP backend's tuner: which algorithm runs a call when the user did not name one.
//!
//! NCCL's tuner picks an algorithm and protocol per call from a cost model of each
//! (src/graph/tuning.cc), so small all-reduces run the tree with LL and large ones the ring
//! with Simple. MPI libraries pick by size the same way: MPICH runs recursive doubling for an
//! all-reduce of at most `MPIR_CVAR_ALLREDUCE_SHORT_MSG_SIZE` bytes (default 2048;
//! src/mpi/coll/allreduce/allreduce.c) and Rabenseifner's reduce-scatter + all-gather above.
//! ringlab's choice is between the two schedules it has for that: recursive doubling
//! ([`super::rdouble`]), one message latency per doubling, and the ring, bandwidth-optimal.
//!
//! The threshold is measured, not modelled: `ringlab bench --backend tcp --nproc-per-node 2
//! -b 512 -e 16K -f 2 -n 2000 -w 100 -c 0 --algo ring` against `--algo recursive-doubling` on
//! a 2-core VM (2026-12-06): over TCP recursive doubling took 11.4 µs at 1 KiB and 10.8 µs at
//! 4 KiB against the ring's 15.7 and 17.9, and lost at 16 KiB (26.6 against 23.1); over
//! shared memory it led by 0.1–0.2 µs from 512 B to 4 KiB (0.86–1.66 µs against 1.05–1.89)
//! and was even at 8 KiB. Above that its whole-buffer sends (log2 N · M bytes per rank against
//! the ring's 2·(N−1)/N · M) and the copy an in-place exchange needs make it lose: at 4 MiB
//! it took 1.5–1.8× the ring's time over either transport.

use super::kinds::{Algorithm, Collective};

/// The largest all-reduce, in bytes, that the tuner runs with recursive doubling.
pub const RD_MAX_BYTES: u64 = 4096;

/// The algorithm the tuner picks for a call of `bytes` bytes when the user named none, or
/// `None` to keep the job's (the ring): only all-reduce has a short-message schedule.
pub fn by_size(op: Collective, bytes: u64) -> Option<Algorithm> {
    (op == Collective::AllReduce && bytes <= RD_MAX_BYTES).then_some(Algorithm::RecursiveDoubling)
}

/// How the tuner's rule reads in a table header: "by size: recursive-doubling up to 4 KiB,
/// then ring".
pub fn describe(op: Collective, above: Algorithm) -> String {
    match by_size(op, RD_MAX_BYTES) {
        Some(small) if small != above => format!(
            "by size: {} up to {}, then {}",
            small.name(),
            crate::units::format_bytes(RD_MAX_BYTES),
            above.name()
        ),
        _ => above.name().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_small_all_reduces_change_algorithm() {
        assert_eq!(
            by_size(Collective::AllReduce, 1024),
            Some(Algorithm::RecursiveDoubling)
        );
        assert_eq!(
            by_size(Collective::AllReduce, RD_MAX_BYTES),
            Some(Algorithm::RecursiveDoubling)
        );
        assert_eq!(by_size(Collective::AllReduce, RD_MAX_BYTES + 1), None);
        assert_eq!(by_size(Collective::AllGather, 1024), None);
        assert_eq!(
            describe(Collective::AllReduce, Algorithm::Ring),
            "by size: recursive-doubling up to 4 KiB, then ring"
        );
        assert_eq!(describe(Collective::Broadcast, Algorithm::Ring), "ring");
    }

    /// The lesson and the README say the threshold in words: they say this one (`bench --help`:
    /// `tests/it/cli_words.rs`, which reads the help as printed).
    #[test]
    fn the_words_about_the_tuner_say_its_threshold() {
        let up_to = format!("up to {}", crate::units::format_bytes(RD_MAX_BYTES));
        let header = describe(Collective::AllReduce, Algorithm::Ring);
        for (name, text) in [
            (
                "lesson 09",
                include_str!("../../lessons/09-inside-nccl.md").to_string(),
            ),
            ("README", include_str!("../../README.md").to_string()),
        ] {
            assert!(text.contains(&up_to), "{name} does not say {up_to:?}");
        }
        let lesson = include_str!("../../lessons/09-inside-nccl.md");
        assert!(
            lesson.contains(&format!("`{header}`")),
            "lesson 09 quotes the header"
        );
    }
}
