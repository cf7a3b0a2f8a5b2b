//! ```` ```table ```` blocks: per-N tables computed from the schedule module at render time.
//!
//! Every number comes from [`Schedule::build`] and [`traffic`] (and [`busbw_factor`] for that
//! column); nothing here re-derives a closed form, so a lesson's table cannot disagree with the
//! ring view, the quizzes or the benchmark.

use crate::collective::{Algorithm, Collective, Dtype, Schedule, Spec, busbw_factor, traffic};
use crate::units::{format_bytes, parse_size};

use super::block::TableBlock;

/// The columns a table block may ask for, in the order the docs list them.
pub const COLUMNS: [&str; 8] = [
    "ranks",
    "steps",
    "bytes_per_rank",
    "ratio_to_m",
    "total_bytes",
    "busiest_link",
    "busiest_port",
    "busbw_factor",
];

/// Largest rank count a table row may use.
pub const MAX_TABLE_RANKS: usize = 1024;

/// The algorithms the block compares: `algos`, else `algo`, else `ring`.
pub fn algos(t: &TableBlock) -> Vec<String> {
    match (&t.algos, &t.algo) {
        (Some(list), _) => list.clone(),
        (None, Some(a)) => vec![a.clone()],
        (None, None) => vec!["ring".to_string()],
    }
}

fn header(column: &str) -> &'static str {
    match column {
        "ranks" => "N",
        "steps" => "steps",
        "bytes_per_rank" => "bytes per rank",
        "ratio_to_m" => "per rank ÷ M",
        "total_bytes" => "total bytes",
        "busiest_link" => "busiest link (one direction)",
        "busiest_port" => "busiest port (sent + received)",
        "busbw_factor" => "busbw factor",
        _ => "?",
    }
}

/// What a table shows, for its caption: "all-reduce of 1 MiB (f32), ring vs tree".
pub fn caption(t: &TableBlock) -> String {
    let op = t.op.parse::<Collective>().ok();
    let name = op.map_or_else(|| t.op.clone(), |c| c.name().to_string());
    let bytes = parse_size(&t.bytes).map_or_else(|_| t.bytes.clone(), format_bytes);
    if op.is_some_and(Collective::is_point_to_point) {
        format!("{name} of {bytes} ({})", t.dtype)
    } else {
        format!("{name} of {bytes} ({}), {}", t.dtype, algos(t).join(" vs "))
    }
}

/// The header and the rows of a table block, or why it cannot be computed. With more than
/// one algorithm, every column but `ranks` repeats once per algorithm, named after it.
/// Check a table's parameters without building any schedule (what `ringlab check` and lesson
/// loading need; building N = 1024 schedules at start-up would cost tens of milliseconds).
pub fn validate(t: &TableBlock) -> Result<(), String> {
    compute(t, false).map(|_| ())
}

/// The table's header and rows, built from the schedule module. Memoized per process: a
/// lesson re-laid out for another width does not rebuild its schedules.
pub fn rows(t: &TableBlock) -> Result<(Vec<String>, Vec<Vec<String>>), String> {
    type Cached = Result<(Vec<String>, Vec<Vec<String>>), String>;
    static CACHE: std::sync::OnceLock<std::sync::Mutex<std::collections::HashMap<String, Cached>>> =
        std::sync::OnceLock::new();
    let key = format!("{t:?}");
    let cache = CACHE.get_or_init(Default::default);
    if let Some(hit) = cache.lock().ok().and_then(|c| c.get(&key).cloned()) {
        return hit;
    }
    let out = compute(t, true);
    if let Ok(mut c) = cache.lock() {
        c.insert(key, out.clone());
    }
    out
}

fn compute(t: &TableBlock, build: bool) -> Result<(Vec<String>, Vec<Vec<String>>), String> {
    let op: Collective = t.op.parse().map_err(|e| format!("op: {e}"))?;
    if t.algo.is_some() && t.algos.is_some() {
        return Err("algos: give either algo or algos, not both".into());
    }
    let key = if t.algos.is_some() { "algos" } else { "algo" };
    let names = algos(t);
    if names.is_empty() {
        return Err("algos: list at least one algorithm".into());
    }
    let algos = names
        .iter()
        .map(|a| a.parse::<Algorithm>())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{key}: {e}"))?;
    let dtype: Dtype = t.dtype.parse().map_err(|e| format!("dtype: {e}"))?;
    let m = parse_size(&t.bytes).map_err(|e| format!("bytes: {e}"))?;
    let elem = dtype.size() as u64;
    if m == 0 || !m.is_multiple_of(elem) {
        return Err(format!(
            "bytes: {} is not a positive multiple of the {}-byte {}",
            t.bytes,
            elem,
            dtype.name()
        ));
    }
    let count =
        usize::try_from(m / elem).map_err(|_| format!("bytes: {} is too large", t.bytes))?;
    if let Some(bad) = t.columns.iter().find(|c| !COLUMNS.contains(&c.as_str())) {
        return Err(format!(
            "columns: unknown column \"{bad}\"; columns are {}",
            COLUMNS.join(", ")
        ));
    }
    if let Some(bad) = t
        .ranks
        .iter()
        .find(|&&n| !(1..=MAX_TABLE_RANKS).contains(&n))
    {
        return Err(format!(
            "ranks: each must be 1..={MAX_TABLE_RANKS}, got {bad}"
        ));
    }

    if !build {
        return Ok((Vec::new(), Vec::new()));
    }
    let many = algos.len() > 1;
    let mut head = Vec::new();
    for c in &t.columns {
        if c == "ranks" || !many {
            head.push(header(c).to_string());
        } else {
            head.extend(algos.iter().map(|a| format!("{}: {}", a.name(), header(c))));
        }
    }

    let mut out = Vec::with_capacity(t.ranks.len());
    for &n in &t.ranks {
        let mut cells_by_algo = Vec::with_capacity(algos.len());
        for &algo in &algos {
            let spec = Spec::new(op, algo, n, count, dtype.size());
            let schedule = Schedule::build(&spec).map_err(|e| format!("{key}: {e}"))?;
            let tr = traffic(&schedule);
            let per_rank = tr.max_sent();
            let cell = |c: &str| match c {
                "steps" => tr.steps.to_string(),
                "bytes_per_rank" => format_bytes(per_rank),
                "ratio_to_m" => format!("{:.3}", per_rank as f64 / m as f64),
                "total_bytes" => format_bytes(tr.total_bytes_sent),
                "busiest_link" => format_bytes(tr.max_link_bytes),
                "busiest_port" => tr.busiest_port().map_or_else(
                    || "-".to_string(),
                    |r| format!("R{}: {}", r.rank, format_bytes(r.port_bytes())),
                ),
                "busbw_factor" => format!("{:.3}", busbw_factor(op, n)),
                _ => n.to_string(),
            };
            cells_by_algo.push(t.columns.iter().map(|c| cell(c)).collect::<Vec<_>>());
        }
        let mut row = Vec::new();
        for (i, c) in t.columns.iter().enumerate() {
            if c == "ranks" || !many {
                row.push(cells_by_algo[0][i].clone());
            } else {
                row.extend(cells_by_algo.iter().map(|cells| cells[i].clone()));
            }
        }
        out.push(row);
    }
    Ok((head, out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::course::{Block, BlockKind};

    fn block(body: &str) -> TableBlock {
        match Block::parse(BlockKind::Table, body) {
            Ok(Block::Table(t)) => t,
            other => panic!("not a table block: {other:?}"),
        }
    }

    #[test]
    fn ring_all_reduce_rows_match_traffic() {
        let t = block(
            "ranks = [2, 4, 8]\nbytes = \"1MiB\"\ncolumns = [\"ranks\", \"steps\", \"bytes_per_rank\", \"ratio_to_m\"]\n",
        );
        let (head, rows) = rows(&t).expect("computes");
        assert_eq!(head, ["N", "steps", "bytes per rank", "per rank ÷ M"]);
        let m = 1u64 << 20;
        for (row, (n, ratio)) in rows.iter().zip([(2, "1.000"), (4, "1.500"), (8, "1.750")]) {
            let spec = Spec::new(
                Collective::AllReduce,
                Algorithm::Ring,
                n,
                (m / 4) as usize,
                4,
            );
            let tr = traffic(&Schedule::build(&spec).unwrap());
            let max = tr.max_sent();
            assert_eq!(row[0], n.to_string());
            assert_eq!(row[1], tr.steps.to_string());
            assert_eq!(row[2], format_bytes(max));
            assert_eq!(row[3], ratio);
        }
    }

    #[test]
    fn several_algorithms_get_a_column_each() {
        let t = block(
            "algos = [\"ring\", \"naive\"]\nranks = [4]\ncolumns = [\"ranks\", \"ratio_to_m\", \"busbw_factor\"]\n",
        );
        let (head, rows) = rows(&t).expect("computes");
        assert_eq!(
            head,
            [
                "N",
                "ring: per rank ÷ M",
                "naive: per rank ÷ M",
                "ring: busbw factor",
                "naive: busbw factor"
            ]
        );
        assert_eq!(rows, [["4", "1.500", "3.000", "1.500", "1.500"]]);
    }

    #[test]
    fn bad_values_are_errors() {
        let mut t = block("ranks = [2]\n");
        t.dtype = "f99".into();
        assert!(rows(&t).unwrap_err().starts_with("dtype"));
        t.dtype = "f32".into();
        t.bytes = "3".into();
        assert!(rows(&t).unwrap_err().starts_with("bytes"));
    }
}
