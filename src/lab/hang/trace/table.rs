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
/// are marked `◀` at their start (where a narrow terminal cuts no mark). Columns are one
/// space wider than their widest cell (at most 22), so four ranks and a label fit 80 columns.
pub fn table(traces: &[RankTrace], a: &Analysis, rows: usize) -> Vec<Row> {
    let by_rank: BTreeMap<usize, &RankTrace> = traces.iter().map(|t| (t.rank, t)).collect();
    let front = a.front.unwrap_or(0);
    let focus = a.culprit.as_ref().and_then(Culprit::seq).unwrap_or(front);
    let hi = front.max(focus);
    let lo = hi.saturating_sub(rows.saturating_sub(1) as u64).max(1);
    let entry = |r: usize, seq: u64| {
        by_rank
            .get(&r)
            .and_then(|t| t.entries.iter().find(|e| e.seq == seq))
    };
    // Each row's cells first, so the column width is known before anything is written.
    let cells: Vec<(u64, Vec<Option<String>>)> = (lo..=hi)
        .map(|seq| {
            let row = (0..a.world)
                .map(|r| entry(r, seq).map(|e| format!("{} {}", e.state.mark(), short(&e.call))))
                .collect();
            (seq, row)
        })
        .collect();
    let widest = cells
        .iter()
        .flat_map(|(_, row)| row.iter().flatten())
        .map(|c| c.chars().count())
        .chain((0..a.world).map(|r| format!("rank {r}").len()))
        .max()
        .unwrap_or(0);
    let width = (widest + 1).min(22);
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
    for (seq, row) in cells {
        let hashes: BTreeSet<_> = (0..a.world)
            .filter_map(|r| entry(r, seq).map(|e| e.call.hash()))
            .collect();
        let absent = row.iter().any(Option::is_none);
        let text: String = row
            .iter()
            .map(|c| format!("{:<width$}", cut(c.as_deref().unwrap_or("—"), width - 1)))
            .collect();
        let odd = hashes.len() > 1 || (absent && seq <= front);
        // What the program called it, from the first rank that has it.
        let label = (0..a.world)
            .find_map(|r| entry(r, seq).and_then(|e| e.label.clone()))
            .unwrap_or_default();
        out.push(Row {
            text: format!("{}#{seq:<4}{text}{label}", if odd { "◀ " } else { "  " }),
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
