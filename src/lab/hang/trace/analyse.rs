//! Lining the ranks up by sequence number to name the one that diverged.

use super::*;

/// Who is to blame, in the four ways a rank diverges.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum Culprit {
    /// The rank finished #seq−1 and never called #seq (it skipped a collective, or is busy
    /// elsewhere: a slow data loader, a branch only some ranks take).
    NeverEntered { rank: usize, seq: u64 },
    /// The rank's #seq is another call than the others' #seq (another size, collective,
    /// dtype or root: an uneven last batch, or a skipped collective shifting the rest).
    Mismatch {
        rank: usize,
        seq: u64,
        theirs: Box<Call>,
        others: Box<Call>,
    },
    /// The rank is inside #seq (or stopped) and does not move, while the others wait in it.
    StuckInside {
        rank: usize,
        seq: u64,
        stopped: bool,
    },
    /// The rank's process is gone (exited, killed, out of memory), or left no dump.
    Gone { rank: usize, last_seq: Option<u64> },
}

impl Culprit {
    pub fn rank(&self) -> usize {
        match self {
            Culprit::NeverEntered { rank, .. }
            | Culprit::Mismatch { rank, .. }
            | Culprit::StuckInside { rank, .. }
            | Culprit::Gone { rank, .. } => *rank,
        }
    }

    /// The collective the divergence is at.
    pub fn seq(&self) -> Option<u64> {
        match self {
            Culprit::NeverEntered { seq, .. }
            | Culprit::Mismatch { seq, .. }
            | Culprit::StuckInside { seq, .. } => Some(*seq),
            Culprit::Gone { last_seq, .. } => last_seq.map(|s| s + 1),
        }
    }
}

/// The analysis of a set of dumps.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Analysis {
    pub world: usize,
    /// None: the dumps agree and nothing is pending (no hang in them).
    pub culprit: Option<Culprit>,
    /// The finding in NCCL/PyTorch terms, one paragraph.
    pub explanation: String,
    /// Per rank: the last collective it entered and where it got to.
    pub last: Vec<Option<(u64, State)>>,
    /// Ranks without a dump.
    pub missing: Vec<usize>,
    /// The furthest collective anyone entered: the one the others are waiting in.
    pub front: Option<u64>,
}

/// Line up the ranks by sequence number and name the one that diverged: the first collective
/// ranks called differently, else a rank that is gone, else one behind the front (stuck or
/// stopped in an earlier collective, or never entering the next), else one stopped in the
/// front collective; else nobody in particular.
pub fn analyse(traces: &[RankTrace]) -> Analysis {
    let v = Lineup::of(traces);
    let found = v
        .mismatch(traces)
        .or_else(|| v.gone())
        .map(Ok)
        .unwrap_or_else(|| v.quiet())
        .or_else(|()| v.behind().or_else(|| v.stopped_at_front()).ok_or(()));
    let (culprit, explanation) = match found {
        Ok((c, e)) => (c, e),
        Err(()) => (
            None,
            format!(
                "every rank is inside #{} and none is behind or stopped: look at the transport \
                 (a link that drops packets, a wrong interface) rather than at one rank",
                v.front.unwrap_or(0)
            ),
        ),
    };
    Analysis {
        world: v.world,
        culprit,
        explanation,
        last: v.last,
        missing: v.missing,
        front: v.front,
    }
}

/// The dumps lined up: per rank its trace and the last collective it entered.
struct Lineup<'a> {
    world: usize,
    by_rank: BTreeMap<usize, &'a RankTrace>,
    missing: Vec<usize>,
    last: Vec<Option<(u64, State)>>,
    front: Option<u64>,
}

/// A finding: the culprit (None: nobody in particular) and what the dumps show.
type Found = (Option<Culprit>, String);

impl<'a> Lineup<'a> {
    fn of(traces: &'a [RankTrace]) -> Self {
        let world = traces.iter().map(|t| t.world).max().unwrap_or(0);
        let by_rank: BTreeMap<usize, &RankTrace> = traces.iter().map(|t| (t.rank, t)).collect();
        let missing = (0..world).filter(|r| !by_rank.contains_key(r)).collect();
        let last: Vec<Option<(u64, State)>> = (0..world)
            .map(|r| {
                by_rank
                    .get(&r)
                    .and_then(|t| t.entries.last())
                    .map(|e| (e.seq, e.state))
            })
            .collect();
        let front = last.iter().flatten().map(|(s, _)| *s).max();
        Self {
            world,
            by_rank,
            missing,
            last,
            front,
        }
    }

    fn at(&self, r: usize, seq: u64) -> Option<&'a Entry> {
        self.by_rank
            .get(&r)
            .and_then(|t| t.entries.iter().find(|e| e.seq == seq))
    }

    fn last_of(&self, r: usize) -> Option<(u64, State)> {
        self.last.get(r).copied().flatten()
    }

    fn describe(&self, r: usize) -> String {
        match self.last_of(r) {
            Some((s, st)) => format!("#{s} {}", state_word(st)),
            None => "no collective yet".into(),
        }
    }

    fn stopped(&self, r: usize) -> bool {
        self.by_rank
            .get(&r)
            .is_some_and(|t| t.process == Process::Stopped)
    }

    /// First: the first collective that ranks called differently; the majority's call is the
    /// expected one, ties going to the group with the lowest rank.
    fn mismatch(&self, traces: &[RankTrace]) -> Option<Found> {
        let seqs: BTreeSet<u64> = traces
            .iter()
            .flat_map(|t| t.entries.iter().map(|e| e.seq))
            .collect();
        seqs.into_iter().find_map(|seq| {
            let mut votes: BTreeMap<u64, Vec<usize>> = BTreeMap::new();
            for r in 0..self.world {
                if let Some(e) = self.at(r, seq) {
                    votes.entry(e.call.hash()).or_default().push(r);
                }
            }
            if votes.len() < 2 {
                return None;
            }
            let mut groups: Vec<&Vec<usize>> = votes.values().collect();
            groups.sort_by_key(|g| (std::cmp::Reverse(g.len()), g[0]));
            let (expected, odd) = (groups[0][0], groups[1][0]);
            let (theirs, others) = (self.at(odd, seq)?, self.at(expected, seq)?);
            Some(mismatch_found(odd, expected, seq, theirs, others))
        })
    }

    /// Second: a process that is gone, or left no dump.
    fn gone(&self) -> Option<Found> {
        let r = (0..self.world).find(|&r| {
            self.missing.contains(&r)
                || self
                    .by_rank
                    .get(&r)
                    .is_some_and(|t| matches!(t.process, Process::Gone { .. }))
        })?;
        let last_seq = self.last_of(r).map(|(s, _)| s);
        let how = match self.by_rank.get(&r).map(|t| &t.process) {
            Some(Process::Gone {
                signal: Some(sig), ..
            }) => format!("was killed by signal {sig}"),
            Some(Process::Gone { code: Some(c), .. }) => format!("exited with status {c}"),
            Some(_) => "is gone".into(),
            None => "left no dump: it is gone".into(),
        };
        let after = match self.last_of(r) {
            Some(_) => format!(" after {}", self.describe(r)),
            None => String::new(),
        };
        let explanation = format!(
            "rank {r} {how}{after}; the others wait for it in {}. A rank that dies does not \
             take its peers with it: they block in the next collective until a watchdog \
             (PyTorch's ProcessGroupNCCL timeout, or torchrun's elastic agent noticing the exit) \
             ends the job.",
            self.front
                .map_or("the next collective".into(), |s| format!("#{s}"))
        );
        Some((Some(Culprit::Gone { rank: r, last_seq }), explanation))
    }

    /// Nothing pending: no collective in the dumps, or every rank completed the front one.
    /// Err(()) when something is pending (the search goes on).
    fn quiet(&self) -> Result<Found, ()> {
        let Some(front) = self.front else {
            return Ok((None, "no collective in the dumps".into()));
        };
        let pending = (0..self.world).any(|r| {
            self.last_of(r)
                .is_some_and(|(_, st)| st != State::Completed)
        });
        let behind = (0..self.world).any(|r| self.last_of(r).is_some_and(|(s, _)| s < front));
        if pending || behind {
            return Err(());
        }
        Ok((
            None,
            format!("every rank completed #{front}: no collective is pending"),
        ))
    }

    /// Third: a rank behind the front: it never entered the collective the others wait in, or it
    /// is stopped or stuck in an earlier one.
    fn behind(&self) -> Option<Found> {
        let front = self.front?;
        let (r, seq, st) = (0..self.world).find_map(|r| {
            let (seq, st) = self.last_of(r)?;
            (seq < front).then_some((r, seq, st))
        })?;
        let stopped = self.stopped(r);
        if stopped || st != State::Completed {
            let explanation = format!(
                "rank {r} {} inside #{seq} while the others are in #{front}: it does not move. \
                 Its peers wait for it until their watchdog fires.",
                if stopped {
                    "is stopped (state T: SIGSTOP, a debugger)"
                } else {
                    "is stuck"
                }
            );
            let c = Culprit::StuckInside {
                rank: r,
                seq,
                stopped,
            };
            return Some((Some(c), explanation));
        }
        let next = seq + 1;
        let explanation = format!(
            "rank {r} completed #{seq} and never entered #{next}, which the others are in. It \
             skipped a collective (a branch like `if rank == 0:` around it), or it is busy \
             elsewhere (a slow data loader, a long checkpoint) and the others wait; NCCL's \
             contract is that every rank calls every collective in the same order."
        );
        Some((
            Some(Culprit::NeverEntered { rank: r, seq: next }),
            explanation,
        ))
    }

    /// Last: everyone is in the same collective and it does not complete: the one stopped inside
    /// it.
    fn stopped_at_front(&self) -> Option<Found> {
        let front = self.front?;
        let r = (0..self.world).find(|&r| self.stopped(r))?;
        Some((
            Some(Culprit::StuckInside {
                rank: r,
                seq: front,
                stopped: true,
            }),
            format!(
                "rank {r} is stopped (state T) inside #{front}; the others wait in it for its bytes."
            ),
        ))
    }
}

/// Rank `odd` called collective `seq` differently from rank `expected`.
fn mismatch_found(odd: usize, expected: usize, seq: u64, theirs: &Entry, others: &Entry) -> Found {
    let label = |e: &Entry| {
        e.label
            .as_deref()
            .map(|l| format!(" ({l})"))
            .unwrap_or_default()
    };
    let explanation = format!(
        "rank {odd} is at collective #{seq} {}{}, rank {expected} at #{seq} {}{}. \
         The same collective number is a different call: a rank took another branch (an \
         uneven last batch, a collective skipped or added on some ranks), so the two wait \
         on different operations. NCCL compares nothing across ranks: every rank waits \
         inside its call, its GPU spinning, until a watchdog ends the job (or the wrong \
         bytes are summed). PyTorch's TORCH_DISTRIBUTED_DEBUG=DETAIL checks each call's \
         shapes across ranks and stops at the first that differs.",
        theirs.call.describe(),
        label(theirs),
        others.call.describe(),
        label(others)
    );
    let c = Culprit::Mismatch {
        rank: odd,
        seq,
        theirs: Box::new(theirs.call.clone()),
        others: Box::new(others.call.clone()),
    };
    (Some(c), explanation)
}
