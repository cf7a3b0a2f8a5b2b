//! Reading a bench's output: nccl-tests' table (every release's header), ringlab's table (the
//! same columns), ringlab's `--csv` and `--json`. The table's grammar follows nccl-tests v2.19.6
//! `src/common.cu` (`printf("#  Rank %2d Group %2d Pid %6d on %10s device %2d [%04x:%02x:%02x] %s\n"`
//! per GPU, the column header of `writeResultHeader` in `src/util.cu`, the rows of
//! `writeBenchmarkLinePreamble`/`Body`, `# Out of bounds values : %d %s` and
//! `# Avg bus bandwidth    : %g` in `writeResultFooter`); releases before 2.10 have no `root`
//! column and call `#wrong` `error` (a float, `0e+00`). Lines a launcher prefixes (`mpirun
//! --tag-output`'s `[1,0]<stdout>:`, `srun -l`'s `0: `) are read without the prefix.

use std::collections::BTreeSet;

use super::{BenchFile, Placement, SizeRow, Source};
use crate::lab::bench::out::CSV_HEADER;

/// What could not be read, with where.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ReadError {
    #[error("{file}:{line}: a row of {found} fields where the header has {expected}: {text:?}")]
    Fields {
        file: String,
        line: usize,
        found: usize,
        expected: usize,
        text: String,
    },
    #[error("{file}:{line}: {what} is not a number: {text:?}")]
    Number {
        file: String,
        line: usize,
        what: &'static str,
        text: String,
    },
    #[error("{file}:{line}: not JSON: {why}")]
    Json {
        file: String,
        line: usize,
        why: String,
    },
    #[error(
        "{file}: no rows of a bench here: expected nccl-tests' table (lines like `  1048576  262144  float  sum  -1  ...`), or ringlab bench's table, --csv or --json"
    )]
    NoRows { file: String },
}

/// Where a row's placements start: after size, count, type and, by collective and release,
/// redop and root (nccl-tests ≤ 2.11 print only the columns a collective has, 2.12 on all five).
/// Read from the column header (the index of its first `time`), else from the field count.
fn lead_of_header(words: &[&str]) -> Option<usize> {
    let lead = words.iter().position(|w| *w == "time")?;
    (words.first() == Some(&"size") && words.contains(&"busbw") && (3..=5).contains(&lead))
        .then_some(lead)
}

/// Fields after the leading ones: time, algbw, busbw, #wrong, out of place then in place.
const PLACED: usize = 8;

/// The text with a launcher's per-line prefix taken off.
fn unprefixed(line: &str) -> &str {
    let l = line.trim_start();
    if let Some(rest) = l.strip_prefix('[')
        && let Some(end) = rest.find(">:")
        && rest[..end].contains("]<std")
    {
        return &rest[end + 2..];
    }
    match l.split_once(": ") {
        Some((n, rest)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => rest,
        _ => line,
    }
}

/// How a JSON line opens (ringlab's `--json`).
const JSON_LINE: char = '{';

/// Reads one file's text (`name` for messages).
pub fn read(name: &str, text: &str) -> Result<BenchFile, ReadError> {
    let first = text.lines().map(str::trim).find(|l| !l.is_empty());
    let file = match first {
        Some(l) if l.starts_with(JSON_LINE) => json(name, text)?,
        Some(l) if l == CSV_HEADER => csv(name, text)?,
        _ => table(name, text)?,
    };
    if file.rows.is_empty() && file.failed.is_empty() {
        return Err(ReadError::NoRows { file: name.into() });
    }
    Ok(file)
}

/// What a table's comment lines say of the run.
#[derive(Default)]
struct Heads {
    lead: Option<usize>,
    /// The column after busbw is `error` (≤ 2.11: a deviation), not `#wrong` (a count).
    deviation: bool,
    coll: Option<String>,
    started: bool,
    devices: Vec<(String, String)>,
    avg: Option<f64>,
    ringlab: Option<String>,
    ranks_said: Option<usize>,
    nodes_said: Option<usize>,
}

impl Heads {
    fn comment(&mut self, c: &str) {
        let words: Vec<&str> = c.split_whitespace().collect();
        if let Some(lead) = lead_of_header(&words) {
            self.lead = Some(lead);
            self.deviation = words.get(lead + 3) == Some(&"error");
        } else if let Some(c) = c.strip_prefix("Collective test starting:") {
            self.coll = Some(c.trim().trim_end_matches("_perf").to_string());
        } else if words.first() == Some(&"nThread") {
            self.started = true;
        } else if words.first() == Some(&"Rank") {
            self.started = true;
            // `Rank  0 Group  0 Pid  1234 on   host-a device  0 [0x18] NVIDIA H100 80GB HBM3`
            let host = words
                .iter()
                .position(|w| *w == "on")
                .and_then(|i| words.get(i + 1));
            let gpu = c.split_once(']').map(|(_, g)| g.trim());
            if let (Some(h), Some(g)) = (host, gpu) {
                self.devices.push((h.to_string(), g.to_string()));
            }
        } else if let Some(v) = c.strip_prefix("Avg bus bandwidth") {
            self.avg = v.trim_start_matches([' ', ':']).trim().parse().ok();
        } else if let Some(t) = c.strip_prefix("ringlab bench: ") {
            self.ringlab = Some(t.to_string());
            // `…, 4 ranks on 2 node(s), …`
            let on = t.split(", ").find_map(|p| p.split_once(" ranks on "));
            self.ranks_said = on.and_then(|(n, _)| n.trim().parse().ok());
            self.nodes_said = on
                .and_then(|(_, k)| k.split_whitespace().next())
                .and_then(|k| k.parse().ok());
        }
    }
}

fn table(name: &str, text: &str) -> Result<BenchFile, ReadError> {
    let mut heads = Heads::default();
    let mut rows = Vec::new();
    let mut failed = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = unprefixed(raw).trim();
        if let Some(c) = line.strip_prefix('#') {
            heads.comment(c.trim());
            continue;
        }
        if let Some(at) = line.find("Test NCCL failure").or(line.find("Test timeout")) {
            failed.push((None, line[at..].to_string()));
            continue;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        let Some(size) = words.first().and_then(|w| w.parse::<u64>().ok()) else {
            continue;
        };
        if let Some(reason) = failed_row(&words) {
            failed.push((Some(size), reason));
            continue;
        }
        if words.len() < 8 {
            continue; // a number at the start of some other line: not a row
        }
        rows.push(table_row(name, i + 1, &words, heads.lead, heads.deviation)?);
    }
    if rows.is_empty() && failed.is_empty() && heads.started {
        failed.push((None, stopped(text)));
    }
    if heads.deviation {
        judge_deviations(&mut rows, heads.devices.len());
    }
    let hosts: BTreeSet<&str> = heads.devices.iter().map(|(h, _)| h.as_str()).collect();
    let gpus: BTreeSet<&str> = heads.devices.iter().map(|(_, g)| g.as_str()).collect();
    Ok(BenchFile {
        name: name.into(),
        source: if heads.ringlab.is_some() {
            Source::RinglabTable
        } else {
            Source::NcclTests
        },
        title: heads.ringlab.clone().or(heads.coll.clone()),
        ranks: (!heads.devices.is_empty())
            .then_some(heads.devices.len())
            .or(heads.ranks_said),
        nodes: (!hosts.is_empty())
            .then_some(hosts.len())
            .or(heads.nodes_said),
        gpus: gpus.into_iter().map(String::from).collect(),
        avg_busbw: heads.avg,
        rows,
        failed,
    })
}

/// ringlab's line for a size that did not finish: `  16777216  ERROR: rank 1 …`.
fn failed_row(words: &[&str]) -> Option<String> {
    let second = words.get(1)?;
    ["ERROR:", "HANG:", "EXIT:"]
        .contains(second)
        .then(|| words[1..].join(" "))
}

fn table_row(
    name: &str,
    line: usize,
    w: &[&str],
    lead: Option<usize>,
    deviation: bool,
) -> Result<SizeRow, ReadError> {
    let lead = lead.unwrap_or(w.len().saturating_sub(PLACED));
    if w.len() != lead + PLACED || !(3..=5).contains(&lead) {
        return Err(ReadError::Fields {
            file: name.into(),
            line,
            found: w.len(),
            expected: lead.clamp(3, 5) + PLACED,
            text: w.join(" "),
        });
    }
    let num = |what: &'static str, s: &str| -> Result<f64, ReadError> {
        if s == "N/A" {
            return Ok(f64::NAN);
        }
        s.parse::<f64>().map_err(|_| ReadError::Number {
            file: name.into(),
            line,
            what,
            text: s.into(),
        })
    };
    let placement = |at: usize| -> Result<Placement, ReadError> {
        // `%g`: a million wrong values print as `1.04858e+06`. Releases ≤ 2.11 print the
        // largest deviation (`2e-07`) instead, judged once the file's ranks are known.
        let (wrong, dev) = match w[at + 3] {
            "N/A" => (None, None),
            s if deviation => (None, Some(num("error", s)?)),
            s => (Some(num("#wrong", s)? as u64), None),
        };
        Ok(Placement {
            time_us: num("time", w[at])?,
            algbw: num("algbw", w[at + 1])?,
            busbw: num("busbw", w[at + 2])?,
            wrong,
            deviation: dev,
        })
    };
    let redop = w[3..lead]
        .iter()
        .find(|f| f.parse::<f64>().is_err())
        .map_or("", |f| *f);
    Ok(SizeRow {
        size: num("size", w[0])? as u64,
        count: num("count", w[1])? as u64,
        dtype: w[2].to_string(),
        redop: redop.to_string(),
        line,
        out_of_place: Some(placement(lead)?),
        in_place: Some(placement(lead + 4)?),
    })
}

/// nccl-tests ≤ 2.11 counted a row wrong when its largest deviation passed the type's bound
/// times (ranks − 1) (nccl-tests v2.11.0 `src/common.cu:110-127`, `:464`); with the ranks
/// unknown, as for two.
fn judge_deviations(rows: &mut [SizeRow], ranks: usize) {
    for r in rows {
        let bound = match r.dtype.as_str() {
            "half" | "float16" | "bfloat16" => 1e-2,
            "float" | "float32" => 1e-5,
            "double" | "float64" => 1e-12,
            _ => 1e-200,
        } * ranks.saturating_sub(1).max(1) as f64;
        for p in [&mut r.out_of_place, &mut r.in_place].into_iter().flatten() {
            if let Some(d) = p.deviation {
                p.wrong = Some(u64::from(d > bound));
            }
        }
    }
}

/// Why a table that began (its header, its ranks) has no row: the last line it printed.
fn stopped(text: &str) -> String {
    let last = text
        .lines()
        .map(|l| unprefixed(l).trim())
        .rfind(|l| !l.is_empty() && *l != "#")
        .unwrap_or("");
    format!(
        "no row after the header: the run failed or hung before its first size finished (its \
         last line: {last:?})"
    )
}

/// ringlab's `--json`: a row per line (`in_place` tells the placement), a failed size, the
/// summary last.
fn json(name: &str, text: &str) -> Result<BenchFile, ReadError> {
    let mut file = BenchFile::empty(name, Source::RinglabJson);
    for (i, l) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let v: serde_json::Value = serde_json::from_str(l).map_err(|e| ReadError::Json {
            file: name.into(),
            line: i + 1,
            why: e.to_string(),
        })?;
        if v.get("summary").is_some() {
            file.avg_busbw = v["avg_busbw_gbps"].as_f64();
            file.ranks = v["ranks"].as_u64().map(|n| n as usize);
            continue;
        }
        let Some(size) = v["size"].as_u64() else {
            continue;
        };
        if let Some(reason) = v["reason"].as_str() {
            file.failed.push((Some(size), reason.to_string()));
            continue;
        }
        let p = Placement {
            time_us: v["time_us"].as_f64().unwrap_or(f64::NAN),
            algbw: v["algbw_gbps"].as_f64().unwrap_or(f64::NAN),
            busbw: v["busbw_gbps"].as_f64().unwrap_or(f64::NAN),
            wrong: v["wrong"].as_u64(),
            deviation: None,
        };
        file.ranks = file.ranks.or(v["ranks"].as_u64().map(|n| n as usize));
        let row = file.row_for(size, i + 1, &v);
        row.set(v["in_place"].as_bool().unwrap_or(false), p);
    }
    Ok(file)
}

/// ringlab's `--csv`: the columns of [`CSV_HEADER`] (an unchecked #wrong is empty), found by
/// name, so the writer and this reader share one list.
fn csv(name: &str, text: &str) -> Result<BenchFile, ReadError> {
    let names: Vec<&str> = CSV_HEADER.split(',').collect();
    let at = |col: &str| names.iter().position(|n| *n == col).unwrap_or(0);
    let mut file = BenchFile::empty(name, Source::RinglabCsv);
    for (i, l) in text.lines().enumerate().skip(1) {
        let f: Vec<&str> = l.trim().split(',').collect();
        if f.len() == 1 && f[0].is_empty() {
            continue;
        }
        if f.len() != names.len() {
            return Err(ReadError::Fields {
                file: name.into(),
                line: i + 1,
                found: f.len(),
                expected: names.len(),
                text: l.into(),
            });
        }
        let num = |what: &'static str| {
            f[at(what)].parse::<f64>().map_err(|_| ReadError::Number {
                file: name.into(),
                line: i + 1,
                what,
                text: f[at(what)].into(),
            })
        };
        let size = num("size")? as u64;
        file.ranks = f[at("ranks")].parse().ok().or(file.ranks);
        let p = Placement {
            time_us: num("time_us")?,
            algbw: num("algbw_gbps")?,
            busbw: num("busbw_gbps")?,
            wrong: if f[at("wrong")].is_empty() {
                None
            } else {
                Some(num("wrong")? as u64)
            },
            deviation: None,
        };
        let v = serde_json::json!({
            "count": num("count")? as u64, "type": f[at("type")], "redop": f[at("redop")]
        });
        file.row_for(size, i + 1, &v)
            .set(f[at("in_place")] == "true", p);
    }
    Ok(file)
}
