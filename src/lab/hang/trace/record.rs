//! Recording: the in-memory recorder a rank keeps and the append-only journal (`rank<r>.jsonl`)
//! it writes, compacted past a size, and reading a journal back.

use super::*;

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
pub(super) struct JournalHead {
    format: String,
    version: u32,
    rank: usize,
    world: usize,
    capacity: usize,
}

#[derive(Serialize, Deserialize)]
pub(super) struct JournalEvent {
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
    pub(super) fn compact(&mut self) -> std::io::Result<()> {
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
