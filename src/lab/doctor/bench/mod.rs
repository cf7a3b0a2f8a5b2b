//! `ringlab doctor --bench FILE...`: read a bench's output (nccl-tests', or ringlab's table,
//! `--csv`, `--json`) and say which rows fall short and what to check next: a #wrong, a size
//! that did not finish, a peak busbw far under what the named link carries (`--link`, the
//! planner's link table), a row well under the sizes below it (a bimodal or noisy run), an
//! in-place row far from its out-of-place twin, and a sweep that stops before the plateau.
//! Pure: text in, findings out. The thresholds are ringlab's, named below.

mod parse;

use serde::Serialize;

use crate::collective::cost::Link;
use crate::units::format_bytes;

pub use parse::{ReadError, read};

/// The smallest size judged for bandwidth: below it a row measures latency (nccl-tests' own
/// tables climb until about here on every fabric), so dips and gaps there mean nothing.
pub const BANDWIDTH_FROM: u64 = 1 << 20;
/// A sweep whose largest size is under this has not reached its plateau on a fast link, so its
/// peak says nothing of the link.
pub const PLATEAU_FROM: u64 = 64 << 20;
/// The peak busbw under this fraction of the link's line rate (per direction, per GPU) is short
/// of the link.
pub const SHORT_OF_LINK: f64 = 0.6;
/// A row under this fraction of the best row at a smaller size (both ≥ [`BANDWIDTH_FROM`]) dips.
pub const DIP: f64 = 0.75;
/// Out-of-place and in-place further apart than this fraction of the larger.
pub const PLACEMENT_GAP: f64 = 0.25;

/// Where a file came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, strum::Display)]
#[serde(rename_all = "kebab-case")]
pub enum Source {
    #[strum(to_string = "nccl-tests table")]
    NcclTests,
    #[strum(to_string = "ringlab bench table")]
    RinglabTable,
    #[strum(to_string = "ringlab bench --csv")]
    RinglabCsv,
    #[strum(to_string = "ringlab bench --json")]
    RinglabJson,
}

/// One placement of a size: nccl-tests' time, algbw, busbw and #wrong (None: N/A).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Placement {
    pub time_us: f64,
    pub algbw: f64,
    pub busbw: f64,
    pub wrong: Option<u64>,
    /// nccl-tests ≤ 2.11's `error` column: the largest deviation from the expected values.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deviation: Option<f64>,
}

/// One size: its out-of-place and in-place placements.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SizeRow {
    pub size: u64,
    pub count: u64,
    pub dtype: String,
    pub redop: String,
    /// The file's line (1-based) that gave the row.
    pub line: usize,
    pub out_of_place: Option<Placement>,
    pub in_place: Option<Placement>,
}

impl SizeRow {
    fn set(&mut self, in_place: bool, p: Placement) {
        if in_place {
            self.in_place = Some(p);
        } else {
            self.out_of_place = Some(p);
        }
    }
    /// The better busbw of the two placements (NaN where neither ran).
    pub fn busbw(&self) -> f64 {
        [self.out_of_place, self.in_place]
            .iter()
            .flatten()
            .map(|p| p.busbw)
            .filter(|b| b.is_finite())
            .fold(f64::NAN, f64::max)
    }
}

/// A bench's output as read.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BenchFile {
    pub name: String,
    pub source: Source,
    /// ringlab's title line, if the table has one.
    pub title: Option<String>,
    /// Ranks (nccl-tests: its `#  Rank` lines).
    pub ranks: Option<usize>,
    /// Hosts among the `#  Rank` lines.
    pub nodes: Option<usize>,
    /// The GPU names the `#  Rank` lines give.
    pub gpus: Vec<String>,
    /// The footer's `Avg bus bandwidth`.
    pub avg_busbw: Option<f64>,
    /// By size, in the file's order.
    pub rows: Vec<SizeRow>,
    /// Sizes that did not finish, and why (ringlab's ERROR/HANG/EXIT lines and JSON); no size:
    /// the run failed before any (nccl-tests' `Test NCCL failure`, or no row at all).
    pub failed: Vec<(Option<u64>, String)>,
}

impl BenchFile {
    fn empty(name: &str, source: Source) -> BenchFile {
        BenchFile {
            name: name.into(),
            source,
            title: None,
            ranks: None,
            nodes: None,
            gpus: Vec::new(),
            avg_busbw: None,
            rows: Vec::new(),
            failed: Vec::new(),
        }
    }
    /// The row of `size` (made from `v`'s count, type and redop when new).
    fn row_for(&mut self, size: u64, line: usize, v: &serde_json::Value) -> &mut SizeRow {
        let at = match self.rows.iter().position(|r| r.size == size) {
            Some(i) => i,
            None => {
                self.rows.push(SizeRow {
                    size,
                    count: v["count"].as_u64().unwrap_or(0),
                    dtype: v["type"].as_str().unwrap_or("").to_string(),
                    redop: v["redop"].as_str().unwrap_or("").to_string(),
                    line,
                    out_of_place: None,
                    in_place: None,
                });
                self.rows.len() - 1
            }
        };
        &mut self.rows[at]
    }
    /// The row with the highest busbw.
    pub fn peak(&self) -> Option<&SizeRow> {
        self.rows
            .iter()
            .filter(|r| r.busbw().is_finite())
            .max_by(|a, b| a.busbw().total_cmp(&b.busbw()))
    }
}

/// How much a finding matters, most first: an error fails `doctor --bench` (exit 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warn,
    Info,
}

/// What the doctor says of a bench's rows.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Finding {
    /// Results that differ from the expected values.
    Wrong {
        size: u64,
        in_place: bool,
        wrong: u64,
        /// nccl-tests ≤ 2.11: the deviation that passed its bound.
        #[serde(skip_serializing_if = "Option::is_none")]
        deviation: Option<f64>,
        line: usize,
    },
    /// A size that did not finish.
    Failed { size: Option<u64>, reason: String },
    /// The peak busbw is far under what the link carries.
    ShortOfLink {
        size: u64,
        busbw: f64,
        link: &'static str,
        line_rate: f64,
        line: usize,
    },
    /// A row well under the best row at a smaller size.
    Dip {
        size: u64,
        busbw: f64,
        best_below: f64,
        best_size: u64,
        line: usize,
    },
    /// Out-of-place and in-place far apart.
    PlacementGap {
        size: u64,
        out_of_place: f64,
        in_place: f64,
        line: usize,
    },
    /// The sweep ends before the bandwidth plateau.
    NoPlateau { largest: u64 },
}

impl Finding {
    pub fn severity(&self) -> Severity {
        match self {
            Finding::Wrong { .. } | Finding::Failed { .. } | Finding::ShortOfLink { .. } => {
                Severity::Error
            }
            Finding::Dip { .. } | Finding::PlacementGap { .. } => Severity::Warn,
            Finding::NoPlateau { .. } => Severity::Info,
        }
    }

    /// One line: what the rows show.
    pub fn what(&self) -> String {
        let gb = |v: f64| format!("{v:.1} GB/s");
        match self {
            Finding::Wrong {
                size,
                in_place,
                wrong,
                deviation,
                line,
            } => format!(
                "{} at {} ({}, line {line}): results differ from the expected values",
                match deviation {
                    Some(d) => format!("error (largest deviation) {d:e}, over nccl-tests' bound,"),
                    None => format!("#wrong {wrong}"),
                },
                format_bytes(*size),
                if *in_place {
                    "in-place"
                } else {
                    "out-of-place"
                }
            ),
            Finding::Failed {
                size: Some(size),
                reason,
            } => {
                format!("{} did not finish: {reason}", format_bytes(*size))
            }
            Finding::Failed { size: None, reason } => format!("the run failed: {reason}"),
            Finding::ShortOfLink {
                size,
                busbw,
                link,
                line_rate,
                line,
            } => format!(
                "peak busbw {} at {} (line {line}) is {:.0}% of {link}'s {} each way",
                gb(*busbw),
                format_bytes(*size),
                100.0 * busbw / line_rate,
                gb(*line_rate)
            ),
            Finding::Dip {
                size,
                busbw,
                best_below,
                best_size,
                line,
            } => format!(
                "{} reaches {} (line {line}), {:.0}% of the {} that {} reached",
                format_bytes(*size),
                gb(*busbw),
                100.0 * busbw / best_below,
                gb(*best_below),
                format_bytes(*best_size)
            ),
            Finding::PlacementGap {
                size,
                out_of_place,
                in_place,
                line,
            } => format!(
                "{} (line {line}): out-of-place {} but in-place {}",
                format_bytes(*size),
                gb(*out_of_place),
                gb(*in_place)
            ),
            Finding::NoPlateau { largest } => format!(
                "the sweep stops at {}: busbw has not reached its plateau, so the peak says \
                 little of the link",
                format_bytes(*largest)
            ),
        }
    }

    /// What to check next.
    pub fn next(&self) -> &'static str {
        match self {
            Finding::Wrong { .. } => {
                "rerun with -c 1 on each GPU pair (CUDA_VISIBLE_DEVICES) to find the one that \
                 corrupts; rerun with NCCL_PROTO=Simple: rows that turn right name a protocol that \
                 corrupts on this fabric (its network plugin's settings); check `nvidia-smi -q -d \
                 ECC,ROW_REMAPPER` and Xid errors in `dmesg`; mixed NCCL or driver versions across \
                 nodes also give wrong results"
            }
            Finding::Failed { .. } => {
                "read the reason above; for a hang, `ringlab doctor --log` on the ranks' \
                 NCCL_DEBUG=INFO logs and `doctor --trace` on their flight recorders"
            }
            Finding::ShortOfLink { .. } => {
                "run with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,GRAPH and read the transport \
                 (`via P2P/IPC`, `NET/IB`, or `NET/Socket`: sockets on an InfiniBand cluster is \
                 the usual 10x) and the interface NCCL chose; `nvidia-smi topo -m` and \
                 `nvidia-smi -q` (PCIe Generation, Link Width) for each GPU; below NCCL, \
                 `ib_write_bw --use_cuda` between nodes and nvbandwidth inside one"
            }
            Finding::Dip { .. } => {
                "rerun with -R 5 (or nccl-tests' -n with more iterations): a dip that moves \
                 between runs is noise from a shared node or fabric (other jobs, CPU frequency); \
                 one that stays is an algorithm or protocol switch (NCCL_DEBUG_SUBSYS=TUNING says \
                 which) or a congested link"
            }
            Finding::PlacementGap { .. } => {
                "in-place and out-of-place move the same bytes: a lasting gap is a buffer \
                 registration or memory placement effect (NCCL_DEBUG=INFO shows the buffers), a \
                 passing one is noise; rerun with -R 5"
            }
            Finding::NoPlateau { .. } => "rerun up to -e 1G (nccl-tests: -e 8G on 8 GPUs or more)",
        }
    }
}

/// The findings for one file, most serious first, then by size; `link` is what the GPUs'
/// traffic crosses (NVLink inside a node, each GPU's NIC across nodes).
pub fn findings(file: &BenchFile, link: Option<&Link>) -> Vec<Finding> {
    let mut out = Vec::new();
    wrong_and_failed(file, &mut out);
    short_of_link(file, link, &mut out);
    dips(file, &mut out);
    gaps(file, &mut out);
    out.sort_by_key(|f| f.severity());
    out
}

fn wrong_and_failed(file: &BenchFile, out: &mut Vec<Finding>) {
    for r in &file.rows {
        for (in_place, p) in [(false, r.out_of_place), (true, r.in_place)] {
            if let Some(p) = p
                && let Some(wrong) = p.wrong.filter(|&w| w > 0)
            {
                out.push(Finding::Wrong {
                    size: r.size,
                    in_place,
                    wrong,
                    deviation: p.deviation,
                    line: r.line,
                });
            }
        }
    }
    for (size, reason) in &file.failed {
        out.push(Finding::Failed {
            size: *size,
            reason: reason.clone(),
        });
    }
}

fn short_of_link(file: &BenchFile, link: Option<&Link>, out: &mut Vec<Finding>) {
    let largest = file.rows.iter().map(|r| r.size).max().unwrap_or(0);
    if largest < PLATEAU_FROM && !file.rows.is_empty() {
        out.push(Finding::NoPlateau { largest });
        return;
    }
    let (Some(link), Some(peak)) = (link, file.peak()) else {
        return;
    };
    if peak.busbw() < SHORT_OF_LINK * link.bandwidth_gbps {
        out.push(Finding::ShortOfLink {
            size: peak.size,
            busbw: peak.busbw(),
            link: link.name,
            line_rate: link.bandwidth_gbps,
            line: peak.line,
        });
    }
}

fn dips(file: &BenchFile, out: &mut Vec<Finding>) {
    let mut rows: Vec<&SizeRow> = file
        .rows
        .iter()
        .filter(|r| r.size >= BANDWIDTH_FROM && r.busbw().is_finite())
        .collect();
    rows.sort_by_key(|r| r.size);
    let mut best: Option<&SizeRow> = None;
    for r in rows {
        if let Some(b) = best
            && r.busbw() < DIP * b.busbw()
        {
            out.push(Finding::Dip {
                size: r.size,
                busbw: r.busbw(),
                best_below: b.busbw(),
                best_size: b.size,
                line: r.line,
            });
        }
        if best.is_none_or(|b| r.busbw() > b.busbw()) {
            best = Some(r);
        }
    }
}

fn gaps(file: &BenchFile, out: &mut Vec<Finding>) {
    for r in file.rows.iter().filter(|r| r.size >= BANDWIDTH_FROM) {
        let (Some(o), Some(i)) = (r.out_of_place, r.in_place) else {
            continue;
        };
        let hi = o.busbw.max(i.busbw);
        if o.busbw.is_finite()
            && i.busbw.is_finite()
            && hi > 0.0
            && (o.busbw - i.busbw).abs() > PLACEMENT_GAP * hi
        {
            out.push(Finding::PlacementGap {
                size: r.size,
                out_of_place: o.busbw,
                in_place: i.busbw,
                line: r.line,
            });
        }
    }
}

/// The report for people: what was read, the peak, then each finding and what to check next.
pub fn render(file: &BenchFile, link: Option<&Link>, found: &[Finding]) -> String {
    let mut s = format!("{}: {}", file.name, file.source);
    let mut about = Vec::new();
    if let Some(n) = file.ranks {
        about.push(format!("{n} ranks"));
    }
    if let Some(n) = file.nodes {
        about.push(format!("{n} node(s)"));
    }
    about.extend(file.gpus.iter().cloned());
    if !about.is_empty() {
        s += &format!(" ({})", about.join(", "));
    }
    let sizes: Vec<u64> = file.rows.iter().map(|r| r.size).collect();
    if let (Some(lo), Some(hi)) = (sizes.iter().min(), sizes.iter().max()) {
        s += &format!(
            ", {} sizes {}..{}",
            sizes.len(),
            format_bytes(*lo),
            format_bytes(*hi)
        );
    }
    s.push('\n');
    if let Some(p) = file.peak() {
        s += &format!(
            "  peak busbw {:.1} GB/s at {}",
            p.busbw(),
            format_bytes(p.size)
        );
        if let Some(l) = link {
            s += &format!(
                "; {} carries {:.1} GB/s each way ({:.0}%)",
                l.name,
                l.bandwidth_gbps,
                100.0 * p.busbw() / l.bandwidth_gbps
            );
        }
        s.push('\n');
    }
    if found.is_empty() {
        s += "  nothing wrong found in the rows\n";
    }
    // Each finding's line; what to check next once, after the last of its kind in a row.
    for (i, f) in found.iter().enumerate() {
        let mark = match f.severity() {
            Severity::Error => "✗",
            Severity::Warn => "!",
            Severity::Info => "·",
        };
        s += &format!("  {mark} {}\n", f.what());
        let same = |g: &Finding| std::mem::discriminant(g) == std::mem::discriminant(f);
        if !found.get(i + 1).is_some_and(same) {
            s += &format!("      next: {}\n", f.next());
        }
    }
    s
}

#[cfg(test)]
mod tests;
