//! Flight recorder: what each rank last did, collective by collective, and the analysis that
//! lines the ranks up by sequence number to name the one that diverged.
//!
//! Every rank numbers its collectives (#1, #2, …) and keeps the last few in a ring buffer:
//! what was called (collective, algorithm, count, dtype, op, root), and when it was scheduled,
//! started and completed. Each rank appends those events to a journal of its own
//! (`rank<r>.jsonl`, [`JournalFile`]), so its last state is on disk even when the process is
//! stopped or gone; PyTorch's Flight Recorder instead dumps its buffer on a timeout, and both
//! are read here.
//! [`analyse`] reads those dumps as PyTorch's `fr_trace` analyser reads its own: it finds the
//! first collective the ranks disagree on and says who is to blame, in one of four ways:
//! the rank that never entered #k, the rank whose #k is a different call, the rank stuck inside
//! #k (stopped, or blocked), and the rank that is gone.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

mod analyse;
mod pickle_depth;
mod pytorch;
mod record;
mod table;
#[cfg(test)]
mod tests;
mod timing;

pub use analyse::*;
use pytorch::*;
pub use record::*;
pub use table::*;
pub use timing::*;

/// The `format` field of a ringlab dump.
pub const FORMAT: &str = "ringlab-flight-recorder";
/// The dump format's version; a reader refuses newer ones with a message.
pub const VERSION: u32 = 1;
/// Collectives each rank keeps (PyTorch keeps TORCH_FR_BUFFER_SIZE of them).
pub const DEFAULT_ENTRIES: usize = 64;

/// What a rank asked for in one collective, as its flight recorder keeps it (PyTorch's
/// entries carry the same fields as text).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Call {
    pub coll: String,
    pub algo: String,
    /// Elements per rank.
    pub count: u64,
    pub dtype: String,
    pub op: String,
    /// The root rank, or -1 where the collective has none.
    pub root: i64,
    /// Tensor shapes where the dump has them (PyTorch's `input_sizes`, e.g. `[[2, 4]]`): two
    /// calls of the same count but another shape are different calls too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shape: Option<String>,
}

impl Call {
    /// A hash of the fields (FNV-1a): the analyser compares one number per collective.
    pub fn hash(&self) -> u64 {
        let text = format!(
            "{}|{}|{}|{}|{}|{}|{}",
            self.coll,
            self.algo,
            self.count,
            self.dtype,
            self.op,
            self.root,
            self.shape.as_deref().unwrap_or("")
        );
        text.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        })
    }

    /// "all-reduce 1048576 × f32 sum" (with the root where there is one).
    pub fn describe(&self) -> String {
        let root = if self.root >= 0 {
            format!(" root {}", self.root)
        } else {
            String::new()
        };
        let shape = self
            .shape
            .as_deref()
            .map(|s| format!(" shape {s}"))
            .unwrap_or_default();
        let op = if self.op.is_empty() {
            String::new()
        } else {
            format!(" {}", self.op)
        };
        format!(
            "{} {} × {}{op}{root}{shape}",
            self.coll, self.count, self.dtype
        )
    }
}

/// Where a collective got to on one rank (PyTorch's Flight Recorder uses the same three).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    /// Called, not yet running (queued behind earlier work).
    Scheduled,
    /// Running: waiting on peers or moving bytes.
    Started,
    Completed,
}

impl State {
    fn mark(self) -> &'static str {
        match self {
            State::Scheduled => "·",
            State::Started => "…",
            State::Completed => "✓",
        }
    }
}

/// One collective in a rank's buffer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// 1-based position among this rank's collectives.
    pub seq: u64,
    pub call: Call,
    pub state: State,
    /// What the program was doing ("step 57 tp attention"); free text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// Nanoseconds since the rank started.
    pub scheduled_ns: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_ns: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_ns: Option<u64>,
}

pub use crate::lab::job::Process;

/// What `nvidia-smi` shows of a rank's GPU while a job hangs under NCCL: the signal engineers
/// read first. A rank inside a collective has launched its kernel, which spins polling for
/// its peers' bytes (near 100 % utilisation, no progress); a rank that never launched the
/// collective (it is elsewhere: a data loader, a branch, a host-side wait, or NCCL's init,
/// which runs on the CPU) leaves its GPU idle at 0 %; a stopped or gone process has nothing of
/// its own to show.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GpuUtil {
    /// Near 100 %: a kernel spinning inside a collective.
    Spinning,
    /// 0 %: no collective launched.
    Idle,
    /// —: the process is stopped or gone.
    NoProcess,
}

/// What the state and GPU columns mean, under the table that shows them.
pub const GPU_LEGEND: &str = "state: R runs, S waits, T stopped · GPU as NCCL leaves it: ~100 % \
                              spinning inside a collective, 0 % never launched it, — no process";

impl GpuUtil {
    /// As the hang screen and `lab run` print it.
    pub fn shown(self) -> &'static str {
        match self {
            GpuUtil::Spinning => "~100 %",
            GpuUtil::Idle => "0 %",
            GpuUtil::NoProcess => "—",
        }
    }

    /// A rank's GPU from its process and its flight recorder: inside a started, uncompleted
    /// collective it spins; otherwise it idles.
    pub fn of(process: &Process, trace: Option<&RankTrace>) -> Self {
        match process {
            Process::Stopped | Process::Gone { .. } => GpuUtil::NoProcess,
            Process::Running => match trace.and_then(|t| t.entries.last()) {
                Some(e) if e.state == State::Started => GpuUtil::Spinning,
                _ => GpuUtil::Idle,
            },
        }
    }
}

/// One rank's dump.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RankTrace {
    pub format: String,
    pub version: u32,
    pub rank: usize,
    pub world: usize,
    #[serde(default)]
    pub process: Process,
    /// Oldest first.
    pub entries: Vec<Entry>,
    /// Where it was read from (not part of the file).
    #[serde(skip)]
    pub source: String,
}

/// A dump that cannot be read, naming the file (and line and column for bad JSON).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceError {
    pub file: String,
    pub message: String,
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.file, self.message)
    }
}

/// Read one dump from its text.
pub fn parse(file: &str, text: &str) -> Result<RankTrace, TraceError> {
    let err = |message: String| TraceError {
        file: file.to_string(),
        message,
    };
    let v: serde_json::Value = serde_json::from_str(text)
        .map_err(|e| err(format!("{}:{}: not JSON: {e}", e.line(), e.column())))?;
    match v.get("format").and_then(|f| f.as_str()) {
        Some(FORMAT) => {}
        Some(other) => return Err(err(format!("format `{other}`, expected `{FORMAT}`"))),
        None => return Err(err(format!("no `format` field: not a {FORMAT} dump"))),
    }
    let version = v.get("version").and_then(|x| x.as_u64()).unwrap_or(0);
    if version == 0 || version > u64::from(VERSION) {
        return Err(err(format!(
            "dump version {version}; this ringlab reads version {VERSION}"
        )));
    }
    let mut t: RankTrace = serde_json::from_value(v).map_err(|e| err(e.to_string()))?;
    if t.world == 0 || t.rank >= t.world {
        return Err(err(format!("rank {} of world {}", t.rank, t.world)));
    }
    if t.entries.windows(2).any(|w| w[1].seq <= w[0].seq) {
        return Err(err("entries are not in increasing sequence order".into()));
    }
    t.source = file.to_string();
    Ok(t)
}

/// Is this file name one a folder of dumps holds: ringlab's `rank<r>.json` and its running
/// journal `rank<r>.jsonl`, PyTorch's pickles
/// (`*.pkl`, or `comm_lib_trace_rank_<r>` / `nccl_trace_rank_<r>` without an extension) and
/// their JSON form?
fn is_dump_name(f: &Path) -> bool {
    let name = f
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    f.extension()
        .is_some_and(|x| x == "json" || x == "jsonl" || x == "pkl")
        && name != "case.json"
        || name.starts_with("comm_lib_trace_rank_")
        || name.starts_with("nccl_trace_rank_")
}

/// Read dumps from files and folders (every dump a folder holds, see [`is_dump_name`]). Two
/// dumps of one rank (a pickle and its JSON): the first in name order is kept.
pub fn read_paths(paths: &[PathBuf]) -> Result<Vec<RankTrace>, TraceError> {
    let mut files = Vec::new();
    for p in paths {
        if p.is_dir() {
            let mut found: Vec<PathBuf> = std::fs::read_dir(p)
                .map_err(|e| TraceError {
                    file: p.display().to_string(),
                    message: e.to_string(),
                })?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|f| is_dump_name(f))
                .collect();
            found.sort();
            if found.is_empty() {
                return Err(TraceError {
                    file: p.display().to_string(),
                    message: "no flight-recorder dumps in this folder (rank<r>.json, *.pkl, \
                              comm_lib_trace_rank_<r>)"
                        .into(),
                });
            }
            files.extend(found);
        } else {
            files.push(p.clone());
        }
    }
    let mut out: Vec<RankTrace> = Vec::new();
    for f in files {
        let t = read_file(&f)?;
        if !out.iter().any(|o| o.rank == t.rank) {
            out.push(t);
        }
    }
    // PyTorch dumps do not say the world size; the ranks seen do.
    let world = out
        .iter()
        .map(|t| t.world.max(t.rank + 1))
        .max()
        .unwrap_or(0);
    for t in &mut out {
        t.world = t.world.max(world);
    }
    Ok(out)
}

fn read_file(f: &Path) -> Result<RankTrace, TraceError> {
    let name = f.display().to_string();
    let err = |message: String| TraceError {
        file: name.clone(),
        message,
    };
    let bytes = crate::files::read_bounded(f, crate::files::MAX_DUMP_BYTES, "flight-recorder dump")
        .map_err(err)?;
    // A pickle starts with its PROTO opcode; anything else is read as JSON.
    if bytes.first() == Some(&0x80) {
        let deep = pickle_depth::depth(&bytes, pickle_depth::MAX_DEPTH);
        if deep > pickle_depth::MAX_DEPTH {
            return Err(err(format!(
                "not a flight-recorder dump: its values nest more than {} deep (PyTorch's nest \
                 about 5)",
                pickle_depth::MAX_DEPTH
            )));
        }
        let v: serde_pickle::Value = serde_pickle::value_from_slice(
            &bytes,
            // Shared objects (memo references) are common in PyTorch's pickles.
            serde_pickle::DeOptions::new().replace_recursive_structures(),
        )
        .map_err(|e| err(format!("not a readable pickle: {e}")))?;
        return from_pytorch(&name, &pickle_to_json(v));
    }
    let text =
        String::from_utf8(bytes).map_err(|_| err("neither a pickle nor UTF-8 JSON".into()))?;
    if f.extension().is_some_and(|x| x == "jsonl") {
        return parse_journal(&name, &text);
    }
    let v: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| err(format!("{}:{}: not JSON: {e}", e.line(), e.column())))?;
    if v.get("format").is_none() && v.get("entries").is_some() && v.get("version").is_some() {
        return from_pytorch(&name, &v);
    }
    parse(&name, &text)
}
