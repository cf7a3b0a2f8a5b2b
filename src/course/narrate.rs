//! Captions for a collective played step by step, generated from its schedule: "step 3 of 6:
//! each rank sends one chunk to its right neighbour, which adds it to its own: R2 now holds Σ3
//! of c1". Nothing is written per algorithm: who sends to whom, how much, and what the receiver
//! ends up holding are read from the step's transfers and from [`Contributions`].

use crate::collective::{Collective, Contributions, MAX_CONTRIB_RANKS, Schedule, Spec, Transfer};

/// The caption of step `step` (0-based) of `schedule`: what its transfers do, and what one
/// receiver holds once it is done. None past the end.
pub fn caption(schedule: &Schedule, step: usize) -> Option<String> {
    let s = schedule.steps().get(step)?;
    let spec = *schedule.spec();
    let n = spec.ranks;
    let total = schedule.len();
    let phase = match schedule.phase_position(step) {
        Some((p, i, k)) if k < total => format!(" ({p} {i} of {k})"),
        _ => String::new(),
    };
    let head = format!("step {} of {total}{phase}", step + 1);
    // The same steps with one element per chunk: every chunk exists, whatever the count.
    let unit = Spec {
        count: n,
        elem_size: 1,
        ..spec
    };
    let rebuilt = Schedule::build(&unit).ok();
    let per_chunk = rebuilt.as_ref().unwrap_or(schedule);
    let transfers: &[Transfer] = per_chunk
        .steps()
        .get(step)
        .map_or(&s.transfers[..], |st| &st.transfers[..]);
    if transfers.is_empty() {
        return Some(format!("{head}: nothing moves in this step"));
    }
    let what = movement(per_chunk, transfers, n);
    let one = transfers.iter().all(|t| per_chunk.chunks_of(t).len() == 1);
    let it = if one { "it" } else { "them" };
    // Several named receivers ("to R1, R2 and R3") take the plural verb.
    let receivers = what.rsplit(" to ").next().unwrap_or("");
    let many = receivers.contains(" and R")
        || receivers.ends_with("other ranks")
        || what.matches('→').count() > 1;
    let (add, store) = if many {
        ("add", "store")
    } else {
        ("adds", "stores")
    };
    let verb = if transfers.iter().all(|t| t.reduce) {
        format!(
            "{add} {it} to {}",
            if many { "their own" } else { "its own" }
        )
    } else if transfers.iter().all(|t| !t.reduce) {
        format!("{store} {it}")
    } else {
        format!("{add} or {store} {it}")
    };
    let holds = holding(per_chunk, transfers, step, n, spec.coll);
    Some(format!("{head}: {what}, which {verb}{holds}"))
}

/// "each rank sends one chunk to its right neighbour", "R1, R2 and R3 send one chunk to R0", …
fn movement(schedule: &Schedule, ts: &[Transfer], n: usize) -> String {
    let mut srcs: Vec<u32> = ts.iter().map(|t| t.src).collect();
    srcs.sort_unstable();
    srcs.dedup();
    let mut dsts: Vec<u32> = ts.iter().map(|t| t.dst).collect();
    dsts.sort_unstable();
    dsts.dedup();
    let sizes: Vec<usize> = ts.iter().map(|t| schedule.chunks_of(t).len()).collect();
    let unit = if schedule.spec().coll == Collective::AllToAll {
        "block"
    } else {
        "chunk"
    };
    let amount = match sizes.first() {
        Some(&k) if sizes.iter().all(|&x| x == k) => match k {
            1 => format!("one {unit}"),
            k => format!("{k} {unit}s"),
        },
        _ => format!("{unit}s"),
    };
    let one_each = srcs.len() == ts.len();
    let who = if srcs.len() == n && n > 1 {
        "each rank sends".to_string()
    } else if srcs.len() == 1 {
        format!("R{} sends", srcs[0])
    } else {
        format!("{} send", ranks_list(&srcs))
    };
    let shift = |t: &Transfer| (t.dst as usize + n - t.src as usize) % n.max(1);
    let first = shift(&ts[0]);
    let to = if ts.len() == 1 || dsts.len() == 1 {
        format!("R{}", dsts[0])
    } else if srcs.len() == 1 {
        ranks_list(&dsts)
    } else if one_each && ts.iter().all(|t| shift(t) == first) {
        match first {
            1 => "its right neighbour".to_string(),
            d if d + 1 == n => "its left neighbour".to_string(),
            d => format!("the rank {d} places to its right"),
        }
    } else if ts.len().is_multiple_of(srcs.len()) && srcs.len() == n {
        match ts.len() / srcs.len() {
            1 => "one other rank".to_string(),
            k => format!("{k} other ranks"),
        }
    } else if ts.len() <= 4 {
        let pairs: Vec<String> = ts
            .iter()
            .map(|t| format!("R{}→R{}", t.src, t.dst))
            .collect();
        return format!("{who} {amount} ({})", pairs.join(", "));
    } else {
        ranks_list(&dsts)
    };
    format!("{who} {amount} to {to}")
}

/// ": R2 now holds Σ3 of c1" for the receiver that has gathered the most, or nothing when the
/// contributions cannot be tracked (more than 64 ranks). Receivers left in the same state are
/// named together ("every rank now holds the full sum of the chunk it received (Σ4)", "R1, R2 and R3
/// now have every chunk finished (Σ4)"), never one of them as if it were alone.
fn holding(schedule: &Schedule, ts: &[Transfer], step: usize, n: usize, op: Collective) -> String {
    if n > MAX_CONTRIB_RANKS {
        return String::new();
    }
    let Ok(after) = Contributions::after(schedule, step + 1) else {
        return String::new();
    };
    let chunk_of = |t: &Transfer| {
        let dst = t.dst_range();
        if op == Collective::AllToAll {
            Some(dst.start)
        } else {
            crate::collective::chunk_of(schedule.spec().count, n, dst.start)
        }
    };
    // The receiving cell with the most contributions (the first such transfer on a tie).
    let mut best: Option<(u32, usize, u32)> = None;
    for t in ts {
        let Some(chunk) = chunk_of(t) else { continue };
        let k = after.count(t.dst as usize, chunk);
        if best.is_none_or(|(_, _, b)| k > b) {
            best = Some((t.dst, chunk, k));
        }
    }
    let Some((r, c, k)) = best else {
        return String::new();
    };
    let reduced_at = |r: u32| ts.iter().find(|t| t.dst == r).is_some_and(|t| t.reduce);
    let reduced = reduced_at(r);
    let mut receivers: Vec<u32> = ts.iter().map(|t| t.dst).collect();
    receivers.sort_unstable();
    receivers.dedup();
    // Who is left as `r` is: the same words (but for the name) from every receiver.
    let alike = |words: &dyn Fn(u32) -> Option<String>| -> Vec<u32> {
        let mine = words(r);
        receivers
            .iter()
            .copied()
            .filter(|&x| mine.is_some() && words(x) == mine)
            .collect()
    };
    let chunks_phrase = |x: u32| several_chunks(schedule, ts, &after, x, op);
    if let Some(words) = chunks_phrase(r) {
        return named(&alike(&chunks_phrase), n, &words);
    }
    // One chunk each: alike when each receiver's chunk holds as many contributions, taken the
    // same way.
    let one_chunk = |x: u32| -> Option<String> {
        let t = ts.iter().find(|t| t.dst == x)?;
        let kx = after.count(x as usize, chunk_of(t)?);
        Some(format!("{kx} {}", reduced_at(x)))
    };
    let group = alike(&one_chunk);
    if group.len() > 1 {
        let each = "the chunk it received";
        let words = if reduced && k as usize == n {
            format!("now holds the full sum of {each} (Σ{k})")
        } else if reduced {
            format!("now holds Σ{k} of {each}")
        } else if op.is_reducing() && k as usize == n {
            format!("now has {each} finished (Σ{k})")
        } else {
            format!("now has {each}")
        };
        return named(&group, n, &words);
    }
    one_receiver(r, c, k, n, reduced, op)
}

/// A receiver of several chunks at once (naive, tree) described as a whole: what every chunk
/// it received holds now, not one of them. None for one chunk (or all-to-all's blocks).
fn several_chunks(
    schedule: &Schedule,
    ts: &[Transfer],
    after: &Contributions,
    r: u32,
    op: Collective,
) -> Option<String> {
    let n = schedule.spec().ranks;
    let mut got: Vec<usize> = ts
        .iter()
        .filter(|t| t.dst == r)
        .flat_map(|t| schedule.chunks_of(t))
        .collect();
    got.sort_unstable();
    got.dedup();
    if op == Collective::AllToAll || got.len() < 2 {
        return None;
    }
    let counts: Vec<u32> = got.iter().map(|&c| after.count(r as usize, c)).collect();
    let which = if got.len() == n {
        "every chunk".to_string()
    } else {
        format!("each of its {} chunks", got.len())
    };
    let full = counts.iter().all(|&x| x as usize == n);
    let reduced = ts.iter().find(|t| t.dst == r).is_some_and(|t| t.reduce);
    Some(match (reduced, full) {
        (true, true) => format!("now holds the full sum of {which} (Σ{n})"),
        (true, false) if counts.iter().all(|&x| x == counts[0]) => {
            format!("now holds Σ{} of {which}", counts[0])
        }
        (true, false) => format!("now holds partial sums of {which}"),
        (false, true) if op.is_reducing() => format!("now has {which} finished (Σ{n})"),
        (false, _) => format!("now has {which}"),
    })
}

/// ": R2 now holds Σ3 of c1": the one receiver `r` of chunk `c`, holding `k` of `n`.
fn one_receiver(r: u32, c: usize, k: u32, n: usize, reduced: bool, op: Collective) -> String {
    if reduced {
        if k as usize == n {
            format!(": R{r} now holds the full sum Σ{k} of c{c}")
        } else {
            format!(": R{r} now holds Σ{k} of c{c}")
        }
    } else if op.is_reducing() && k as usize == n {
        format!(": R{r} now has the finished c{c} (Σ{k})")
    } else {
        format!(": R{r} now has c{c}")
    }
}

/// ": R1 now has …", ": R1, R2 and R3 now have …", ": every rank now has …" (`words` as said
/// of one rank: "now has", "now holds", "its").
fn named(who: &[u32], n: usize, words: &str) -> String {
    match who {
        [one] => format!(": R{one} {words}"),
        _ if who.len() == n => format!(": every rank {words}"),
        _ => {
            let plural = words
                .replacen("now holds", "now hold", 1)
                .replacen("now has", "now have", 1)
                .replace("the chunk it received", "the chunk each received")
                .replace("each of its ", "each of their ");
            format!(": {} {plural}", ranks_list(who))
        }
    }
}

/// "R1", "R1 and R2", "R1, R2 and R3", or "7 ranks" past five.
fn ranks_list(rs: &[u32]) -> String {
    match rs {
        [] => "no rank".into(),
        [a] => format!("R{a}"),
        _ if rs.len() > 5 => format!("{} ranks", rs.len()),
        [init @ .., last] => {
            let head: Vec<String> = init.iter().map(|r| format!("R{r}")).collect();
            format!("{} and R{last}", head.join(", "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::{Algorithm, Spec};

    fn sched(op: Collective, algo: Algorithm, n: usize) -> Schedule {
        Schedule::build(&Spec::new(op, algo, n, 1 << 10, 4)).expect("schedule")
    }

    #[test]
    fn ring_all_reduce_step_names_neighbour_and_partial_sum() {
        let s = sched(Collective::AllReduce, Algorithm::Ring, 4);
        let c = caption(&s, 2).expect("caption");
        assert!(c.starts_with("step 3 of 6 (reduce-scatter 3 of 3)"), "{c}");
        assert!(
            c.contains("each rank sends one chunk to its right neighbour"),
            "{c}"
        );
        assert!(c.contains("which adds it to its own"), "{c}");
        // Every rank finishes its chunk in the same step: all of them are named.
        assert!(
            c.contains("every rank now holds the full sum of the chunk it received (Σ4)"),
            "{c}"
        );
        let g = caption(&s, 3).expect("caption");
        assert!(g.contains("which stores it"), "{g}");
        assert!(g.contains("finished"), "{g}");
    }

    #[test]
    fn second_step_holds_two_contributions() {
        let s = sched(Collective::AllReduce, Algorithm::Ring, 4);
        let c = caption(&s, 1).expect("caption");
        assert!(
            c.contains("every rank now holds Σ3 of the chunk it received"),
            "{c}"
        );
        let c0 = caption(&s, 0).expect("caption");
        assert!(
            c0.contains("every rank now holds Σ2 of the chunk it received"),
            "{c0}"
        );
    }

    #[test]
    fn every_collective_and_algorithm_has_a_caption_for_every_step() {
        for op in Collective::ALL {
            for algo in Algorithm::ALL {
                if !algo.supports(op) {
                    continue;
                }
                let Ok(s) = Schedule::build(&Spec::new(op, algo, 4, 1 << 10, 4)) else {
                    continue;
                };
                for i in 0..s.len() {
                    let c = caption(&s, i).expect("caption");
                    assert!(c.starts_with(&format!("step {} of {}", i + 1, s.len())));
                    assert!(c.len() < 200, "{c}");
                }
                assert!(caption(&s, s.len()).is_none());
            }
        }
    }

    #[test]
    fn naive_reduce_names_the_hub() {
        let s = sched(Collective::AllReduce, Algorithm::Naive, 4);
        let c = caption(&s, 0).expect("caption");
        assert!(c.contains("R1, R2 and R3 send"), "{c}");
        assert!(c.contains("to R0, which adds them to its own"), "{c}");
        assert!(
            c.contains("R0 now holds the full sum of every chunk (Σ4)"),
            "{c}"
        );
        let b = caption(&s, 1).expect("caption");
        assert!(
            b.contains("R1, R2 and R3 now have every chunk finished (Σ4)"),
            "{b}"
        );
        assert!(
            b.contains("R0 sends 4 chunks to R1, R2 and R3, which store them"),
            "{b}"
        );
    }

    #[test]
    fn large_rings_skip_what_is_held() {
        let s = sched(Collective::AllReduce, Algorithm::Ring, 100);
        let c = caption(&s, 0).expect("caption");
        assert!(!c.contains("now holds"), "{c}");
        assert!(c.contains("each rank sends"), "{c}");
    }
}
