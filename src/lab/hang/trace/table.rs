//! The table the CLI and the hang screen show: one row per rank around the divergence.

use super::*;

pub(super) fn state_word(s: State) -> &'static str {
    match s {
        State::Scheduled => "scheduled",
        State::Started => "started",
        State::Completed => "completed",
    }
}

/// The dumps side by side around the divergence: one row per collective, one column per
/// rank, `✓` completed, `…` started, `·` scheduled, `—` never entered. Rows with a divergence
/// are marked `◀`.
pub fn table(traces: &[RankTrace], a: &Analysis, rows: usize) -> Vec<Row> {
    let by_rank: BTreeMap<usize, &RankTrace> = traces.iter().map(|t| (t.rank, t)).collect();
    let front = a.front.unwrap_or(0);
    let focus = a.culprit.as_ref().and_then(Culprit::seq).unwrap_or(front);
    let hi = front.max(focus);
    let lo = hi.saturating_sub(rows.saturating_sub(1) as u64).max(1);
    let width = 22;
    let mut out = vec![Row {
        text: format!(
            "  seq  {}",
            (0..a.world)
                .map(|r| format!("{:<width$}", format!("rank {r}")))
                .collect::<String>()
                .trim_end()
        ),
        odd: false,
    }];
    for seq in lo..=hi {
        let mut cells = String::new();
        let mut hashes = BTreeSet::new();
        let mut absent = false;
        for r in 0..a.world {
            let e = by_rank
                .get(&r)
                .and_then(|t| t.entries.iter().find(|e| e.seq == seq));
            let cell = match e {
                Some(e) => {
                    hashes.insert(e.call.hash());
                    format!("{} {}", e.state.mark(), short(&e.call))
                }
                None => {
                    absent = true;
                    "—".into()
                }
            };
            cells.push_str(&format!("{:<width$}", cut(&cell, width - 1)));
        }
        let odd = hashes.len() > 1 || (absent && seq <= front);
        // What the program called it, from the first rank that has it.
        let label = (0..a.world)
            .find_map(|r| {
                by_rank
                    .get(&r)
                    .and_then(|t| t.entries.iter().find(|e| e.seq == seq))
                    .and_then(|e| e.label.clone())
            })
            .unwrap_or_default();
        out.push(Row {
            text: format!("  #{seq:<4}{cells}{label}{}", if odd { "  ◀" } else { "" }),
            odd,
        });
    }
    out
}

/// A row of [`table`]: its text, and whether the ranks disagree there (marked `◀`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Row {
    pub text: String,
    pub odd: bool,
}

/// `s` cut to `max` characters, "…" where it was cut.
pub(super) fn cut(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// "16 KiB f32" (an all-reduce) or "4 KiB f32 broadcast": the call in a table cell.
pub(super) fn short(c: &Call) -> String {
    let elem = c
        .dtype
        .parse::<crate::collective::Dtype>()
        .map_or(1, |d| d.size() as u64);
    let size = format!(
        "{} {}",
        crate::units::format_bytes(c.count.saturating_mul(elem)),
        c.dtype
    );
    // All-reduce is the common case: only other collectives are named.
    if c.coll == "all-reduce" {
        size
    } else {
        format!("{size} {}", c.coll)
    }
}
