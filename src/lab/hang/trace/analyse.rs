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

/// Line up the ranks by sequence number and name the one that diverged.
pub fn analyse(traces: &[RankTrace]) -> Analysis {
    let world = traces.iter().map(|t| t.world).max().unwrap_or(0);
    let by_rank: BTreeMap<usize, &RankTrace> = traces.iter().map(|t| (t.rank, t)).collect();
    let missing: Vec<usize> = (0..world).filter(|r| !by_rank.contains_key(r)).collect();
    let last: Vec<Option<(u64, State)>> = (0..world)
        .map(|r| {
            by_rank
                .get(&r)
                .and_then(|t| t.entries.last())
                .map(|e| (e.seq, e.state))
        })
        .collect();
    let front = last.iter().flatten().map(|(s, _)| *s).max();
    let at = |r: usize, seq: u64| -> Option<&Entry> {
        by_rank
            .get(&r)
            .and_then(|t| t.entries.iter().find(|e| e.seq == seq))
    };
    let describe = |r: usize| -> String {
        match last.get(r).copied().flatten() {
            Some((s, st)) => format!("#{s} {}", state_word(st)),
            None => "no collective yet".into(),
        }
    };
    let done = |culprit: Option<Culprit>, explanation: String| Analysis {
        world,
        culprit,
        explanation,
        last: last.clone(),
        missing: missing.clone(),
        front,
    };

    // 1. The first collective that ranks called differently.
    let seqs: BTreeSet<u64> = traces
        .iter()
        .flat_map(|t| t.entries.iter().map(|e| e.seq))
        .collect();
    for &seq in &seqs {
        let calls: Vec<(usize, &Entry)> = (0..world)
            .filter_map(|r| at(r, seq).map(|e| (r, e)))
            .collect();
        let mut votes: BTreeMap<u64, Vec<usize>> = BTreeMap::new();
        for (r, e) in &calls {
            votes.entry(e.call.hash()).or_default().push(*r);
        }
        if votes.len() < 2 {
            continue;
        }
        // The majority's call is the expected one; ties go to the group with the lowest rank.
        let mut groups: Vec<&Vec<usize>> = votes.values().collect();
        groups.sort_by_key(|g| (std::cmp::Reverse(g.len()), g[0]));
        let expected = groups[0][0];
        let odd = groups[1][0];
        let (Some(theirs), Some(others)) = (at(odd, seq), at(expected, seq)) else {
            continue;
        };
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
        return done(
            Some(Culprit::Mismatch {
                rank: odd,
                seq,
                theirs: Box::new(theirs.call.clone()),
                others: Box::new(others.call.clone()),
            }),
            explanation,
        );
    }

    // 2. A process that is gone, or left no dump.
    let gone = |r: usize| {
        missing.contains(&r)
            || by_rank
                .get(&r)
                .is_some_and(|t| matches!(t.process, Process::Gone { .. }))
    };
    let pending = (0..world).any(|r| {
        last.get(r)
            .copied()
            .flatten()
            .is_some_and(|(_, st)| st != State::Completed)
    });
    if let Some(r) = (0..world).find(|&r| gone(r)) {
        let last_seq = last.get(r).copied().flatten().map(|(s, _)| s);
        let how = match by_rank.get(&r).map(|t| &t.process) {
            Some(Process::Gone {
                signal: Some(sig), ..
            }) => format!("was killed by signal {sig}"),
            Some(Process::Gone { code: Some(c), .. }) => format!("exited with status {c}"),
            Some(_) => "is gone".into(),
            None => "left no dump: it is gone".into(),
        };
        let after = match last.get(r).copied().flatten() {
            Some(_) => format!(" after {}", describe(r)),
            None => String::new(),
        };
        let explanation = format!(
            "rank {r} {how}{after}; the others wait for it in {}. A rank that dies does not \
             take its peers with it: they block in the next collective until a watchdog \
             (PyTorch's ProcessGroupNCCL timeout, or torchrun's elastic agent noticing the exit) \
             ends the job.",
            front.map_or("the next collective".into(), |s| format!("#{s}"))
        );
        return done(Some(Culprit::Gone { rank: r, last_seq }), explanation);
    }
    let Some(front) = front else {
        return done(None, "no collective in the dumps".into());
    };
    if !pending {
        let behind: Vec<usize> = (0..world)
            .filter(|&r| {
                last.get(r)
                    .copied()
                    .flatten()
                    .is_some_and(|(s, _)| s < front)
            })
            .collect();
        if behind.is_empty() {
            return done(
                None,
                format!("every rank completed #{front}: no collective is pending"),
            );
        }
    }
    // 3. A rank behind the front: it never entered the collective the others wait in, or it
    // is stopped or stuck in an earlier one.
    for r in 0..world {
        let Some((seq, st)) = last.get(r).copied().flatten() else {
            continue;
        };
        if seq >= front {
            continue;
        }
        let stopped = by_rank
            .get(&r)
            .is_some_and(|t| t.process == Process::Stopped);
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
            return done(
                Some(Culprit::StuckInside {
                    rank: r,
                    seq,
                    stopped,
                }),
                explanation,
            );
        }
        let next = seq + 1;
        let explanation = format!(
            "rank {r} completed #{seq} and never entered #{next}, which the others are in. It \
             skipped a collective (a branch like `if rank == 0:` around it), or it is busy \
             elsewhere (a slow data loader, a long checkpoint) and the others wait; NCCL's \
             contract is that every rank calls every collective in the same order."
        );
        return done(
            Some(Culprit::NeverEntered { rank: r, seq: next }),
            explanation,
        );
    }
    // 4. Everyone is in the same collective and it does not complete: the one that is stopped
    // inside it, else nobody in particular (the network between them).
    if let Some(r) = (0..world).find(|r| {
        by_rank
            .get(r)
            .is_some_and(|t| t.process == Process::Stopped)
    }) {
        return done(
            Some(Culprit::StuckInside {
                rank: r,
                seq: front,
                stopped: true,
            }),
            format!(
                "rank {r} is stopped (state T) inside #{front}; the others wait in it for its bytes."
            ),
        );
    }
    done(
        None,
        format!(
            "every rank is inside #{front} and none is behind or stopped: look at the transport \
             (a link that drops packets, a wrong interface) rather than at one rank"
        ),
    )
}
