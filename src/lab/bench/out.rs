//! The bench's output, one writer per format, as nccl-tests keeps its output apart from its
//! timing loop (nccl-tests v2.19.6 `src/util.h`: `writeResultHeader`,
//! `writeBenchmarkLinePreamble/Body/Terminator`, `writeResultFooter`; `jsonOutputInit` and
//! `jsonOutputFinalize` in `src/util.cu`). The command hands each finished row to the writer;
//! the writer decides what a row looks like: nccl-tests' table (a line per size, once its
//! out-of-place and in-place rows are both in), CSV, or JSON lines.

use std::io::{self, Write};

use super::{Pairs, Row, Summary, measure::WIDE_SPREAD, table};
use crate::lab::job::launch::FailKind;

/// `--csv`'s header line: the columns of each line, in order (`doctor --bench` reads by it).
pub const CSV_HEADER: &str = "coll,backend,algo,ranks,size,count,type,redop,root,in_place,time_us,algbw_gbps,busbw_gbps,wrong";

/// The output formats (`--csv`, `--json`, else the table).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Table,
    Csv,
    Json,
}

/// The algorithm a table's title names: ringlab's (a schedule's name, or the tuner's rule) or
/// NCCL's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Algo {
    Ringlab(String),
    Nccl(super::gpu::NcclAlgo),
}

impl std::fmt::Display for Algo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Algo::Ringlab(a) => f.write_str(a),
            Algo::Nccl(a) => write!(f, "{a}"),
        }
    }
}

/// What the table's header says of the run: nccl-tests' first line, in ringlab's words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Title {
    /// NCCL's name of the collective (`all_reduce`).
    pub coll: &'static str,
    pub algo: Algo,
    pub ranks: usize,
    pub nodes: usize,
    pub backend: crate::lab::Backend,
    /// nccl-tests' nGpus: GPUs per process.
    pub gpus: usize,
    pub iters: usize,
    pub warmup: usize,
    pub check: bool,
}

impl std::fmt::Display for Title {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let algo = match &self.algo {
            Algo::Nccl(super::gpu::NcclAlgo::Choice) => "algorithm: NCCL's choice".to_string(),
            a => a.to_string(),
        };
        // "tcp" names how ranks find each other, not how bytes move (that is the Transport
        // line): say what the ranks are.
        let backend = match self.backend {
            crate::lab::Backend::Tcp => "tcp (ranks are CPU processes)",
            crate::lab::Backend::Nccl => "nccl",
        };
        write!(
            f,
            "ringlab bench: {} ({algo}), {} ranks on {} node(s), backend {backend}, nThread 1 \
             nGpus {} iters {} warmup {} check {}",
            self.coll,
            self.ranks,
            self.nodes,
            self.gpus,
            self.iters,
            self.warmup,
            u8::from(self.check)
        )
    }
}

/// The table's header: the title, then what a reader must know before the numbers.
#[derive(Debug, Clone, Default)]
pub struct Head {
    pub title: String,
    /// Under a launcher: how this world was read.
    pub launcher: Option<String>,
    /// Ranks share a GPU: say the bytes crossed host memory.
    pub shared_gpu: Option<String>,
    /// `-R K`, and `-n`: each time is a median of K runs.
    pub repeat: usize,
    pub iters: usize,
    /// The data path's experiment switches set away from their defaults (`NAME=value`):
    /// a table measured with them is not the default's.
    pub tuning: Vec<String>,
}

/// One format's writer: the header, each finished row (with the NCCL tuning line the ranks
/// logged for it, if any), a size that did not finish, and the footer.
pub trait RowWriter {
    fn header(&mut self, head: &Head) -> io::Result<()>;
    fn row(&mut self, row: Row, tuning: Option<(u64, String, String)>) -> io::Result<()>;
    fn failed(&mut self, size: u64, kind: FailKind, reason: &str) -> io::Result<()>;
    fn footer(&mut self, s: &Summary) -> io::Result<()>;
}

/// The writer for `format` on `out`; `repeat` is `-R`.
pub fn writer<'w>(
    format: Format,
    out: Box<dyn Write + 'w>,
    repeat: usize,
) -> Box<dyn RowWriter + 'w> {
    match format {
        Format::Table => Box::new(TableWriter {
            out,
            pairs: Pairs::default(),
            transport_shown: false,
            repeat,
            tuning: None,
        }),
        Format::Csv => Box::new(CsvWriter { out }),
        Format::Json => Box::new(JsonWriter { out }),
    }
}

/// nccl-tests' table: a line per size once both placements are in.
struct TableWriter<'w> {
    out: Box<dyn Write + 'w>,
    pairs: Pairs,
    transport_shown: bool,
    repeat: usize,
    /// NCCL's tuning line for the size being written, kept until its line is.
    tuning: Option<(u64, String, String)>,
}

impl RowWriter for TableWriter<'_> {
    fn header(&mut self, h: &Head) -> io::Result<()> {
        writeln!(self.out, "{}", table::header(&h.title))?;
        if let Some(l) = &h.launcher {
            writeln!(self.out, "# Launcher: {l}")?;
        }
        if let Some(n) = &h.shared_gpu {
            writeln!(self.out, "# {n}")?;
        }
        if !h.tuning.is_empty() {
            writeln!(
                self.out,
                "# Tuning (not the defaults): {}",
                h.tuning.join(", ")
            )?;
        }
        if h.repeat > 1 {
            writeln!(
                self.out,
                "# each time: the median of {} timed runs of {} iterations; spread = (slowest - fastest) / median",
                h.repeat, h.iters
            )?;
        }
        Ok(())
    }
    fn row(&mut self, row: Row, tuning: Option<(u64, String, String)>) -> io::Result<()> {
        self.tuning = tuning.or(self.tuning.take());
        let Some((o, row)) = self.pairs.push(row) else {
            return Ok(());
        };
        let tuning = self.tuning.take();
        if !self.transport_shown
            && let Some(t) = &row.transport
        {
            self.transport_shown = true;
            writeln!(self.out, "{}", table::transport_line(t))?;
        }
        writeln!(self.out, "{}", table::line(&o, &row))?;
        if let Some(n) = spread_note(&o, &row, self.repeat) {
            writeln!(self.out, "{n}")?;
        }
        if let Some((bytes, algo, proto)) = tuning {
            writeln!(
                self.out,
                "#   NCCL's log: {bytes} bytes -> Algo {algo} proto {proto}"
            )?;
        }
        self.out.flush()
    }
    fn failed(&mut self, size: u64, kind: FailKind, reason: &str) -> io::Result<()> {
        writeln!(
            self.out,
            "{}",
            table::failed_line(size, kind.label(), reason)
        )
    }
    fn footer(&mut self, s: &Summary) -> io::Result<()> {
        writeln!(self.out, "{}", table::footer(s))
    }
}

/// CSV: a header line, then a line per row; an unchecked #wrong is an empty field (nccl-tests'
/// N/A, JSON's null).
struct CsvWriter<'w> {
    out: Box<dyn Write + 'w>,
}

impl RowWriter for CsvWriter<'_> {
    fn header(&mut self, _: &Head) -> io::Result<()> {
        writeln!(self.out, "{CSV_HEADER}")
    }
    fn row(&mut self, row: Row, _: Option<(u64, String, String)>) -> io::Result<()> {
        writeln!(
            self.out,
            "{},{},{},{},{},{},{},{},{},{},{:.3},{:.4},{:.4},{}",
            row.coll.name(),
            row.backend,
            row.algo,
            row.ranks,
            row.size,
            row.count,
            row.dtype,
            row.redop,
            row.root,
            row.in_place,
            row.time_us,
            row.algbw_gbps,
            row.busbw_gbps,
            row.wrong.map_or(String::new(), |w| w.to_string())
        )?;
        self.out.flush()
    }
    fn failed(&mut self, _: u64, _: FailKind, _: &str) -> io::Result<()> {
        Ok(())
    }
    fn footer(&mut self, _: &Summary) -> io::Result<()> {
        Ok(())
    }
}

/// JSON lines: a row per line, a size that did not finish, and the summary last.
struct JsonWriter<'w> {
    out: Box<dyn Write + 'w>,
}

impl RowWriter for JsonWriter<'_> {
    fn header(&mut self, _: &Head) -> io::Result<()> {
        Ok(())
    }
    fn row(&mut self, row: Row, _: Option<(u64, String, String)>) -> io::Result<()> {
        let s = serde_json::to_string(&row).map_err(io::Error::other)?;
        writeln!(self.out, "{s}")?;
        self.out.flush()
    }
    fn failed(&mut self, size: u64, kind: FailKind, reason: &str) -> io::Result<()> {
        let v = serde_json::json!({"size": size, "outcome": kind, "reason": reason});
        writeln!(self.out, "{v}")
    }
    fn footer(&mut self, s: &Summary) -> io::Result<()> {
        let s = serde_json::to_string(s).map_err(io::Error::other)?;
        writeln!(self.out, "{s}")
    }
}

/// Under a row timed several times (`-R`): the spread of both placements, and a warning
/// when it is too wide for one run to mean much.
fn spread_note(o: &Row, i: &Row, repeat: usize) -> Option<String> {
    if repeat < 2 {
        return None;
    }
    let pct =
        |s: Option<f64>| s.map_or_else(|| "n/a".to_string(), |s| format!("{:.0}%", s * 100.0));
    let wide = [o.spread, i.spread]
        .iter()
        .any(|s| s.is_some_and(|s| s > WIDE_SPREAD));
    Some(format!(
        "#   spread over {repeat} runs: out-of-place {}, in-place {}{}",
        pct(o.spread),
        pct(i.spread),
        if wide {
            " -- too wide to read: this machine is busy; compare medians, or run again"
        } else {
            ""
        }
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::Collective;

    fn row(in_place: bool, wrong: Option<u64>) -> Row {
        Row {
            coll: Collective::AllReduce,
            backend: "tcp",
            algo: "ring".into(),
            ranks: 2,
            size: 1024,
            count: 256,
            dtype: "float",
            redop: "sum",
            root: -1,
            in_place,
            time_us: 10.0,
            algbw_gbps: 0.1,
            busbw_gbps: 0.1,
            wrong,
            transport: None,
            shared_gpu: false,
            spread: None,
        }
    }

    /// Each format's writer, into a buffer the test reads back.
    fn written(format: Format, f: impl FnOnce(&mut dyn RowWriter)) -> String {
        let mut buf = Vec::new();
        {
            let mut w = writer(format, Box::new(&mut buf), 1);
            f(w.as_mut());
        }
        String::from_utf8(buf).expect("utf-8")
    }

    #[test]
    fn the_title_reads_as_nccl_tests_first_line() {
        let t = Title {
            coll: "all_reduce",
            algo: Algo::Nccl(crate::lab::bench::gpu::NcclAlgo::Choice),
            ranks: 2,
            nodes: 1,
            backend: crate::lab::Backend::Tcp,
            gpus: 0,
            iters: 20,
            warmup: 1,
            check: true,
        };
        assert_eq!(
            t.to_string(),
            "ringlab bench: all_reduce (algorithm: NCCL's choice), 2 ranks on 1 node(s), backend \
             tcp (ranks are CPU processes), nThread 1 nGpus 0 iters 20 warmup 1 check 1"
        );
    }

    /// The table writes a size once both placements are in; CSV leaves an unchecked #wrong
    /// empty; JSON says a size that did not finish with its outcome's word.
    #[test]
    fn each_format_writes_rows_as_its_readers_expect() {
        // NCCL's tuning line may come with either row of the size: it is written with the pair.
        let table = written(Format::Table, |w| {
            w.row(
                row(false, Some(0)),
                Some((1024, "RING".into(), "LL".into())),
            )
            .expect("row");
            w.row(row(true, None), None).expect("row");
        });
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 2, "{table}");
        assert!(lines[0].trim_end().ends_with("N/A"), "{table}");
        assert!(lines[1].contains("Algo RING proto LL"), "{table}");
        let csv = written(Format::Csv, |w| {
            w.row(row(true, None), None).expect("row");
        });
        assert!(csv.trim_end().ends_with(','), "{csv}");
        let json = written(Format::Json, |w| {
            w.failed(4096, FailKind::Hang, "rank 1 stopped")
                .expect("failed");
        });
        let v: serde_json::Value = serde_json::from_str(json.trim()).expect("json");
        assert_eq!(v["outcome"], "hang", "{v}");
        assert_eq!(v["size"], 4096, "{v}");
    }
}
