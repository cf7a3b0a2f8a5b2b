//! Flight recorder: what each rank last did, collective by collective, and the analysis that
//! lines the ranks up by sequence number to name the one that diverged.
//!
//! Every rank numbers its collectives (#1, #2, …) and keeps the last few in a ring buffer:
//! what was called (collective, algorithm, count, dtype, op, root), and when it was scheduled,
//! started and completed. When the watchdog calls a hang, each rank's buffer is written as JSON,
//! one file per rank, the way PyTorch's Flight Recorder dumps its buffer on a timeout.
//! [`analyse`] reads those dumps as PyTorch's `fr_trace` analyser reads its own: it finds the
//! first collective the ranks disagree on and says who is to blame, in one of four ways:
//! the rank that never entered #k, the rank whose #k is a different call, the rank stuck inside
//! #k (stopped, or blocked), and the rank that is gone.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The `format` field of a ringlab dump.
pub const FORMAT: &str = "ringlab-flight-recorder";
/// The dump format's version; a reader refuses newer ones with a message.
pub const VERSION: u32 = 1;
/// Collectives each rank keeps (PyTorch keeps TORCH_FR_BUFFER_SIZE of them).
pub const DEFAULT_ENTRIES: usize = 64;

/// What a rank asked for in one collective: what the TCP backend's header carries.
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
    /// The header hash: FNV-1a over the fields, so peers compare one number per collective.
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

/// How a rank's process stood when the dumps were gathered (the launcher knows; a stopped
/// process cannot say so itself).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", tag = "state")]
pub enum Process {
    #[default]
    Running,
    /// Stopped (SIGSTOP, a debugger): state T in /proc.
    Stopped,
    /// Exited or killed.
    Gone {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        code: Option<i32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signal: Option<i32>,
    },
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

/// A rank's ring buffer of its last collectives, as it runs.
#[derive(Debug, Clone)]
pub struct Recorder {
    rank: usize,
    world: usize,
    capacity: usize,
    next_seq: u64,
    entries: VecDeque<Entry>,
    start: std::time::Instant,
}

impl Recorder {
    pub fn new(rank: usize, world: usize, capacity: usize) -> Self {
        Self {
            rank,
            world,
            capacity: capacity.max(1),
            next_seq: 1,
            entries: VecDeque::new(),
            start: std::time::Instant::now(),
        }
    }

    fn now_ns(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// A collective is called: it gets the next sequence number, which is returned.
    pub fn schedule(&mut self, call: Call, label: Option<String>) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        if self.entries.len() == self.capacity {
            self.entries.pop_front();
        }
        let scheduled_ns = self.now_ns();
        self.entries.push_back(Entry {
            seq,
            call,
            state: State::Scheduled,
            label,
            scheduled_ns,
            started_ns: None,
            completed_ns: None,
        });
        seq
    }

    fn set(&mut self, seq: u64, state: State) {
        let now = self.now_ns();
        if let Some(e) = self.entries.iter_mut().rev().find(|e| e.seq == seq) {
            e.state = state;
            match state {
                State::Started => e.started_ns = Some(now),
                State::Completed => e.completed_ns = Some(now),
                State::Scheduled => {}
            }
        }
    }

    pub fn start(&mut self, seq: u64) {
        self.set(seq, State::Started);
    }

    pub fn complete(&mut self, seq: u64) {
        self.set(seq, State::Completed);
    }

    /// The sequence number the next collective will get.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    pub fn dump(&self) -> RankTrace {
        RankTrace {
            format: FORMAT.into(),
            version: VERSION,
            rank: self.rank,
            world: self.world,
            process: Process::Running,
            entries: self.entries.iter().cloned().collect(),
            source: String::new(),
        }
    }
}

/// The flight recorder as a running rank keeps it on disk: an append-only journal of JSON
/// lines, `rank<r>.jsonl`. The first line says whose it is (`format`, `version`, `rank`,
/// `world`, `capacity`); each later line is one event: a collective scheduled (`seq`, `call`,
/// `label`, `t`), or its new state (`seq`, `state`, `t`). One `write` per event, O(1) however
/// long the buffer, and the last event is on disk even when the process is stopped or killed
/// the next instant. Once the file passes [`JOURNAL_COMPACT_BYTES`] it is rewritten as the
/// buffer now stands (aside, then renamed), so it stays small. [`parse_journal`] replays it.
pub struct JournalFile {
    rec: Recorder,
    path: PathBuf,
    file: std::fs::File,
    written: u64,
}

/// A journal longer than this is rewritten as its buffer stands.
pub const JOURNAL_COMPACT_BYTES: u64 = 1 << 20;

#[derive(Serialize, Deserialize)]
struct JournalHead {
    format: String,
    version: u32,
    rank: usize,
    world: usize,
    capacity: usize,
}

#[derive(Serialize, Deserialize)]
struct JournalEvent {
    seq: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    call: Option<Call>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    label: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    state: Option<State>,
    t: u64,
}

impl JournalFile {
    /// Start `path` afresh for `rec` (a journal already there is replaced).
    pub fn create(path: &Path, rec: Recorder) -> std::io::Result<Self> {
        let mut j = Self {
            file: std::fs::File::create(path)?,
            path: path.to_path_buf(),
            rec,
            written: 0,
        };
        j.compact()?;
        Ok(j)
    }

    pub fn recorder(&self) -> &Recorder {
        &self.rec
    }

    fn line(&mut self, v: &impl Serialize) -> std::io::Result<()> {
        use std::io::Write;
        let mut text = serde_json::to_vec(v).map_err(std::io::Error::other)?;
        text.push(b'\n');
        self.file.write_all(&text)?;
        self.written += text.len() as u64;
        Ok(())
    }

    /// The whole buffer as it stands, written aside and renamed over the journal.
    fn compact(&mut self) -> std::io::Result<()> {
        let tmp = self.path.with_extension("jsonl.tmp");
        let mut j = Self {
            file: std::fs::File::create(&tmp)?,
            path: tmp.clone(),
            rec: self.rec.clone(),
            written: 0,
        };
        j.line(&JournalHead {
            format: FORMAT.into(),
            version: VERSION,
            rank: self.rec.rank,
            world: self.rec.world,
            capacity: self.rec.capacity,
        })?;
        for e in &self.rec.entries {
            j.line(&JournalEvent {
                seq: e.seq,
                call: Some(e.call.clone()),
                label: e.label.clone(),
                state: None,
                t: e.scheduled_ns,
            })?;
            for (state, t) in [
                (State::Started, e.started_ns),
                (State::Completed, e.completed_ns),
            ] {
                if let Some(t) = t {
                    j.line(&JournalEvent {
                        seq: e.seq,
                        call: None,
                        label: None,
                        state: Some(state),
                        t,
                    })?;
                }
            }
        }
        std::fs::rename(&tmp, &self.path)?;
        self.file = j.file;
        self.written = j.written;
        Ok(())
    }

    fn after(&mut self) -> std::io::Result<()> {
        if self.written > JOURNAL_COMPACT_BYTES {
            self.compact()?;
        }
        Ok(())
    }

    /// [`Recorder::schedule`], journaled.
    pub fn schedule(&mut self, call: Call, label: Option<String>) -> std::io::Result<u64> {
        let seq = self.rec.schedule(call.clone(), label.clone());
        let t = self.rec.entries.back().map_or(0, |e| e.scheduled_ns);
        self.line(&JournalEvent {
            seq,
            call: Some(call),
            label,
            state: None,
            t,
        })?;
        self.after()?;
        Ok(seq)
    }

    fn set(&mut self, seq: u64, state: State) -> std::io::Result<()> {
        self.rec.set(seq, state);
        // The time the recorder stamped, so the journal replays to the same dump.
        let t = self
            .rec
            .entries
            .iter()
            .rev()
            .find(|e| e.seq == seq)
            .and_then(|e| match state {
                State::Started => e.started_ns,
                State::Completed => e.completed_ns,
                State::Scheduled => Some(e.scheduled_ns),
            })
            .unwrap_or_else(|| self.rec.now_ns());
        self.line(&JournalEvent {
            seq,
            call: None,
            label: None,
            state: Some(state),
            t,
        })?;
        self.after()
    }

    /// [`Recorder::start`], journaled.
    pub fn start(&mut self, seq: u64) -> std::io::Result<()> {
        self.set(seq, State::Started)
    }

    /// [`Recorder::complete`], journaled.
    pub fn complete(&mut self, seq: u64) -> std::io::Result<()> {
        self.set(seq, State::Completed)
    }
}

/// Replay a journal ([`JournalFile`]) into the dump it stands for. A last line without its
/// newline is an event cut off by the end of the process, and is left out; any other bad line
/// is an error naming it.
pub fn parse_journal(file: &str, text: &str) -> Result<RankTrace, TraceError> {
    let err = |message: String| TraceError {
        file: file.to_string(),
        message,
    };
    let complete = text.ends_with('\n');
    let lines: Vec<&str> = text.lines().collect();
    let n = lines.len();
    let mut it = lines.iter().enumerate().filter(|(k, l)| {
        // The last line, unterminated: an event the process did not finish writing.
        !(l.trim().is_empty() || (*k + 1 == n && !complete))
    });
    let (_, head) = it
        .next()
        .ok_or_else(|| err("an empty journal: no header line".into()))?;
    let head: JournalHead = serde_json::from_str(head)
        .map_err(|e| err(format!("1:{}: not a journal header: {e}", e.column())))?;
    if head.format != FORMAT {
        return Err(err(format!(
            "format `{}`, expected `{FORMAT}`",
            head.format
        )));
    }
    if head.version == 0 || head.version > VERSION {
        return Err(err(format!(
            "journal version {}; this ringlab reads version {VERSION}",
            head.version
        )));
    }
    if head.world == 0 || head.rank >= head.world {
        return Err(err(format!("rank {} of world {}", head.rank, head.world)));
    }
    let mut rec = Recorder::new(head.rank, head.world, head.capacity);
    for (k, l) in it {
        let ev: JournalEvent = serde_json::from_str(l).map_err(|e| {
            err(format!(
                "{}:{}: not a journal event: {e}",
                k + 1,
                e.column()
            ))
        })?;
        match (ev.call, ev.state) {
            (Some(call), None) => {
                // A compacted journal starts at the oldest collective its buffer kept.
                if rec.next_seq == 1 && rec.entries.is_empty() && ev.seq >= 1 {
                    rec.next_seq = ev.seq;
                }
                if ev.seq != rec.next_seq {
                    return Err(err(format!(
                        "{}: collective #{} scheduled where #{} was next",
                        k + 1,
                        ev.seq,
                        rec.next_seq
                    )));
                }
                rec.next_seq += 1;
                if rec.entries.len() == rec.capacity {
                    rec.entries.pop_front();
                }
                rec.entries.push_back(Entry {
                    seq: ev.seq,
                    call,
                    state: State::Scheduled,
                    label: ev.label,
                    scheduled_ns: ev.t,
                    started_ns: None,
                    completed_ns: None,
                });
            }
            (None, Some(state)) => {
                if let Some(e) = rec.entries.iter_mut().rev().find(|e| e.seq == ev.seq) {
                    e.state = state;
                    match state {
                        State::Started => e.started_ns = Some(ev.t),
                        State::Completed => e.completed_ns = Some(ev.t),
                        State::Scheduled => {}
                    }
                }
            }
            _ => {
                return Err(err(format!(
                    "{}: an event is either a call or a state, not both or neither",
                    k + 1
                )));
            }
        }
    }
    let mut t = rec.dump();
    t.source = file.to_string();
    Ok(t)
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

/// A pickle's plain data as JSON (PyTorch's dumps hold only dicts, lists, tuples, strings,
/// numbers, booleans and None).
fn pickle_to_json(v: serde_pickle::Value) -> serde_json::Value {
    use serde_json::Value as J;
    use serde_pickle::Value as P;
    let key = |k: serde_pickle::HashableValue| match k {
        serde_pickle::HashableValue::String(s) => s,
        other => format!("{other:?}"),
    };
    match v {
        P::None => J::Null,
        P::Bool(b) => J::Bool(b),
        P::I64(i) => J::from(i),
        P::Int(i) => J::String(i.to_string()),
        P::F64(f) => serde_json::Number::from_f64(f).map_or(J::Null, J::Number),
        P::Bytes(b) => J::String(String::from_utf8_lossy(&b).into_owned()),
        P::String(s) => J::String(s),
        P::List(l) | P::Tuple(l) => J::Array(l.into_iter().map(pickle_to_json).collect()),
        P::Set(s) | P::FrozenSet(s) => J::Array(s.into_iter().map(|h| J::String(key(h))).collect()),
        P::Dict(d) => J::Object(
            d.into_iter()
                .map(|(k, v)| (key(k), pickle_to_json(v)))
                .collect(),
        ),
    }
}

/// PyTorch's dtype names as ringlab's.
fn torch_dtype(name: &str) -> String {
    match name {
        "Float" => "f32",
        "Half" => "f16",
        "BFloat16" => "bf16",
        "Double" => "f64",
        "Int" => "i32",
        "Long" => "i64",
        "Byte" => "u8",
        "Char" => "i8",
        other => other,
    }
    .to_string()
}

/// A PyTorch Flight Recorder dump (the pickle, or its JSON form) as a rank's trace. The rank is
/// the number the file name ends with (`rank1.pkl`, `comm_lib_trace_rank_1`); entries are
/// lined up by `collective_seq_id`. gloo never moves an entry's `state` past "scheduled":
/// `retired` (left the in-flight list) counts as completed, an entry still in flight as
/// started.
fn from_pytorch(file: &str, v: &serde_json::Value) -> Result<RankTrace, TraceError> {
    let err = |message: String| TraceError {
        file: file.to_string(),
        message,
    };
    let version = v.get("version").and_then(|x| x.as_str()).unwrap_or("?");
    let major = version
        .split('.')
        .next()
        .and_then(|m| m.parse::<u32>().ok());
    if major != Some(2) {
        return Err(err(format!(
            "PyTorch Flight Recorder version {version}; ringlab reads the 2.x dumps (collective_seq_id)"
        )));
    }
    let stem = Path::new(file)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let digits: String = stem
        .chars()
        .rev()
        .take_while(char::is_ascii_digit)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    let rank: usize = digits.parse().map_err(|_| {
        err("the file name does not end with the rank (rank1.pkl, …_rank_1)".into())
    })?;
    // The default group's ranks, "[0, 1, 2]", where the dump has them.
    let world = v
        .get("pg_config")
        .and_then(|p| p.as_object())
        .and_then(|m| {
            m.values()
                .find_map(|g| g.get("ranks").and_then(|r| r.as_str()))
        })
        .map_or(0, |r| {
            r.split(',')
                .filter(|x| !x.trim().trim_matches(['[', ']']).is_empty())
                .count()
        });
    let entries = v
        .get("entries")
        .and_then(|e| e.as_array())
        .cloned()
        .unwrap_or_default();
    let mut out = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        let field = |k: &str| e.get(k);
        let Some(seq) = field("collective_seq_id").and_then(serde_json::Value::as_u64) else {
            return Err(err(format!("entry {i}: no collective_seq_id")));
        };
        if field("is_p2p").and_then(serde_json::Value::as_bool) == Some(true) {
            continue;
        }
        let name = field("profiling_name")
            .and_then(|x| x.as_str())
            .unwrap_or("?");
        let (lib, op) = name.rsplit_once(':').unwrap_or(("", name));
        let sizes = field("input_sizes").cloned().unwrap_or_default();
        let count: u64 = sizes
            .as_array()
            .map(|ts| {
                ts.iter()
                    .map(|t| {
                        t.as_array()
                            .map_or(0, |d| d.iter().filter_map(|x| x.as_u64()).product::<u64>())
                    })
                    .sum()
            })
            .unwrap_or(0);
        let dtype = field("input_dtypes")
            .and_then(|d| d.as_array())
            .and_then(|d| d.first())
            .and_then(|d| d.as_str())
            .map_or_else(|| "?".into(), torch_dtype);
        let retired = field("retired")
            .and_then(serde_json::Value::as_bool)
            .unwrap_or(false);
        let state = match field("state").and_then(|s| s.as_str()) {
            Some("completed") => State::Completed,
            _ if retired => State::Completed,
            Some("started") => State::Started,
            // gloo: in flight is as far as it says.
            _ if lib == "gloo" => State::Started,
            _ => State::Scheduled,
        };
        let ns = |k: &str| {
            field(k)
                .and_then(serde_json::Value::as_u64)
                .filter(|&t| t > 0)
        };
        out.push(Entry {
            seq,
            call: Call {
                coll: op.split_whitespace().next().unwrap_or(op).replace('_', "-"),
                algo: lib.to_string(),
                count,
                dtype,
                op: String::new(),
                root: -1,
                shape: Some(sizes.to_string()),
            },
            state,
            label: Some(name.to_string()),
            scheduled_ns: ns("time_created_ns").unwrap_or(0),
            started_ns: ns("time_discovered_started_ns"),
            completed_ns: ns("time_discovered_completed_ns"),
        });
    }
    out.sort_by_key(|e| e.seq);
    out.dedup_by_key(|e| e.seq);
    Ok(RankTrace {
        format: "pytorch-flight-recorder".into(),
        version: VERSION,
        rank,
        world: world.max(rank + 1),
        process: Process::Running,
        entries: out,
        source: file.to_string(),
    })
}

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
             on different operations. NCCL itself would not notice: it would wait forever or \
             exchange the wrong bytes. ringlab's header check (and PyTorch's \
             TORCH_DISTRIBUTED_DEBUG=DETAIL) stops at the first such call.",
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

fn state_word(s: State) -> &'static str {
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
fn cut(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// "16 KiB f32" (an all-reduce) or "4 KiB f32 broadcast": the call in a table cell.
fn short(c: &Call) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn call(count: u64) -> Call {
        Call {
            coll: "all-reduce".into(),
            algo: "ring".into(),
            count,
            dtype: "f32".into(),
            op: "sum".into(),
            root: -1,
            shape: None,
        }
    }

    /// `world` ranks each run `calls` (counts) and stop at `upto[r]` with state `st[r]`.
    fn run(world: usize, calls: &[u64], upto: &[(usize, State)]) -> Vec<RankTrace> {
        (0..world)
            .map(|r| {
                let mut rec = Recorder::new(r, world, 8);
                let (n, st) = upto[r];
                for (i, &c) in calls.iter().enumerate().take(n) {
                    let seq = rec.schedule(call(c), Some(format!("call {i}")));
                    if i + 1 < n || st != State::Scheduled {
                        rec.start(seq);
                    }
                    if i + 1 < n || st == State::Completed {
                        rec.complete(seq);
                    }
                }
                rec.dump()
            })
            .collect()
    }

    /// The journal replays to the recorder's own dump, across a compaction, and a last line
    /// cut off mid-write is left out; a bad line is named.
    #[test]
    fn a_journal_replays_to_the_dump_and_survives_a_cut_off_line() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("rank1.jsonl");
        let mut j = JournalFile::create(&path, Recorder::new(1, 4, 3)).expect("create");
        for k in 0..5u64 {
            let seq = j
                .schedule(call(k + 1), Some(format!("step {k}")))
                .expect("schedule");
            j.start(seq).expect("start");
            if k < 4 {
                j.complete(seq).expect("complete");
            }
        }
        let text = std::fs::read_to_string(&path).expect("read");
        let back = parse_journal("rank1.jsonl", &text).expect("parse");
        let want = j.recorder().dump();
        assert_eq!(back.entries, want.entries);
        assert_eq!((back.rank, back.world), (1, 4));
        assert_eq!(back.entries.len(), 3, "the capacity holds");
        // Compacted, it reads the same.
        j.compact().expect("compact");
        let text2 = std::fs::read_to_string(&path).expect("read");
        assert!(text2.len() < text.len());
        assert_eq!(
            parse_journal("x", &text2).expect("parse").entries,
            want.entries
        );
        // A process killed mid-line: that event is missing, nothing else.
        let cut = format!("{text}{{\"seq\":5,\"sta");
        assert_eq!(
            parse_journal("x", &cut).expect("parse").entries,
            want.entries
        );
        // A bad line in the middle is an error naming its line.
        let mut lines: Vec<&str> = text.lines().collect();
        lines[2] = "{not json";
        let e = parse_journal("rank1.jsonl", &(lines.join("\n") + "\n")).expect_err("bad");
        assert!(e.to_string().starts_with("rank1.jsonl: 3:"), "{e}");
    }

    #[test]
    fn the_recorder_keeps_the_last_entries_in_order() {
        let mut rec = Recorder::new(0, 2, 3);
        for i in 0..5 {
            let s = rec.schedule(call(i), None);
            rec.start(s);
            rec.complete(s);
        }
        let d = rec.dump();
        let seqs: Vec<u64> = d.entries.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, [3, 4, 5]);
        assert!(d.entries.iter().all(|e| e.state == State::Completed));
        assert!(
            d.entries
                .iter()
                .all(|e| e.started_ns.is_some() && e.completed_ns >= e.started_ns)
        );
        let text = serde_json::to_string(&d).expect("json");
        assert_eq!(
            parse("x.json", &text).expect("reads back").entries,
            d.entries
        );
    }

    #[test]
    fn the_rank_that_never_entered_is_named() {
        use State::*;
        // Ranks 0, 2, 3 are inside #5; rank 1 completed #4 and never called #5.
        let t = run(
            4,
            &[4, 4, 4, 4, 4],
            &[(5, Started), (4, Completed), (5, Started), (5, Started)],
        );
        let a = analyse(&t);
        assert_eq!(a.culprit, Some(Culprit::NeverEntered { rank: 1, seq: 5 }));
        assert!(
            a.explanation.contains("never entered #5"),
            "{}",
            a.explanation
        );
        let rows = table(&t, &a, 3);
        assert!(
            rows.iter().any(|r| r.odd
                && r.text.starts_with("  #5")
                && r.text.contains('—')
                && r.text.ends_with('◀')),
            "{rows:#?}"
        );
    }

    #[test]
    fn a_different_call_at_the_same_number_is_named() {
        use State::*;
        let mut t = run(3, &[4, 4, 4], &[(3, Started), (3, Started), (3, Started)]);
        // Rank 2's #3 is a smaller all-reduce (an uneven last batch).
        t[2].entries[2].call.count = 2;
        let a = analyse(&t);
        match &a.culprit {
            Some(Culprit::Mismatch {
                rank,
                seq,
                theirs,
                others,
            }) => {
                assert_eq!((*rank, *seq), (2, 3));
                assert_eq!((theirs.count, others.count), (2, 4));
            }
            other => panic!("{other:?}"),
        }
        assert!(
            a.explanation.contains("rank 2 is at collective #3"),
            "{}",
            a.explanation
        );
    }

    #[test]
    fn a_stopped_rank_and_a_gone_rank_are_named() {
        use State::*;
        let mut t = run(3, &[4; 6], &[(6, Started), (4, Started), (6, Started)]);
        t[1].process = Process::Stopped;
        let a = analyse(&t);
        assert_eq!(
            a.culprit,
            Some(Culprit::StuckInside {
                rank: 1,
                seq: 4,
                stopped: true
            })
        );
        let mut t = run(3, &[4; 6], &[(6, Started), (6, Started), (3, Completed)]);
        t[2].process = Process::Gone {
            code: Some(137),
            signal: None,
        };
        let a = analyse(&t);
        assert_eq!(
            a.culprit,
            Some(Culprit::Gone {
                rank: 2,
                last_seq: Some(3)
            })
        );
        assert!(
            a.explanation.contains("exited with status 137"),
            "{}",
            a.explanation
        );
        // No dump at all from rank 2: gone as well.
        let t = run(3, &[4; 6], &[(6, Started), (6, Started), (3, Completed)]);
        let a = analyse(&t[..2]);
        assert_eq!(a.missing, [2]);
        assert_eq!(
            a.culprit,
            Some(Culprit::Gone {
                rank: 2,
                last_seq: None
            })
        );
    }

    #[test]
    fn healthy_dumps_blame_nobody() {
        use State::*;
        let t = run(4, &[4; 10], &[(10, Completed); 4]);
        let a = analyse(&t);
        assert_eq!(a.culprit, None, "{}", a.explanation);
        // Ranks one collective apart while running (one has started #10, the others not
        // yet) is not a divergence either when nothing is stuck behind.
        let t = run(2, &[4; 10], &[(10, Started), (10, Started)]);
        assert_eq!(analyse(&t).culprit, None);
    }

    #[test]
    fn bad_dumps_are_refused_with_the_file_and_place() {
        let e = parse("r0.json", "{\"format\": ").expect_err("truncated");
        assert!(e.to_string().starts_with("r0.json: 1:"), "{e}");
        let e = parse("r0.json", "{\"format\":\"other\"}").expect_err("other format");
        assert!(
            e.message.contains("expected `ringlab-flight-recorder`"),
            "{e}"
        );
        let e = parse(
            "r0.json",
            &format!("{{\"format\":\"{FORMAT}\",\"version\":9}}"),
        )
        .expect_err("newer");
        assert!(e.message.contains("version 9"), "{e}");
        let e = parse(
            "r0.json",
            &format!(
                "{{\"format\":\"{FORMAT}\",\"version\":1,\"rank\":4,\"world\":2,\"entries\":[]}}"
            ),
        )
        .expect_err("rank out of range");
        assert!(e.message.contains("rank 4 of world 2"), "{e}");
    }
}
