//! `--record FILE.cast`: what the app writes to the terminal, as an asciicast v2 file (the
//! format asciinema's player and `agg` read): a header line `{"version": 2, "width": W,
//! "height": H, "timestamp": …}`, then one `[seconds, "o", text]` line per flushed frame and
//! `[seconds, "r", "WxH"]` on a resize.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::time::Instant;

/// Writes asciicast v2 events to a file.
pub struct Recorder {
    out: BufWriter<File>,
    start: Instant,
    /// Bytes written since the last frame; a UTF-8 sequence cut at a flush waits here.
    pending: Vec<u8>,
    last: f64,
}

impl Recorder {
    /// Create `path` and write the header for a `width` × `height` terminal. The file is made
    /// private and renamed over the name (`files::create_private_replace`): a link at the name
    /// is refused, an existing file kept unless `replace`.
    pub fn create(path: &Path, width: u16, height: u16, replace: bool) -> io::Result<Self> {
        use crate::files::{self, WriteError};
        let file = files::create_private_replace(path, files::FILE_MODE, replace).map_err(|e| {
            let kind = match &e {
                WriteError::Exists(_) => io::ErrorKind::AlreadyExists,
                WriteError::Link(_) => io::ErrorKind::InvalidInput,
                WriteError::Failed { error, .. } => error.kind(),
            };
            let said = match e {
                WriteError::Failed { error, .. } => {
                    format!("cannot write the recording {}: {error}", path.display())
                }
                e => e.to_string(),
            };
            io::Error::new(kind, said)
        })?;
        let mut out = BufWriter::new(file);
        let header = serde_json::json!({
            "version": 2,
            "width": width,
            "height": height,
            "timestamp": chrono::Utc::now().timestamp(),
            "title": "ringlab",
            "env": {"TERM": std::env::var("TERM").unwrap_or_else(|_| "xterm-256color".into())},
        });
        serde_json::to_writer(&mut out, &header)?;
        out.write_all(b"\n")?;
        out.flush()?;
        Ok(Self {
            out,
            start: Instant::now(),
            pending: Vec::new(),
            last: 0.0,
        })
    }

    /// Seconds since the start, never less than the previous event's.
    fn now(&mut self) -> f64 {
        let t = self.start.elapsed().as_secs_f64().max(self.last);
        self.last = t;
        t
    }

    fn event(&mut self, kind: &str, data: &str) -> io::Result<()> {
        let t = (self.now() * 1e6).round() / 1e6;
        serde_json::to_writer(&mut self.out, &serde_json::json!([t, kind, data]))?;
        self.out.write_all(b"\n")?;
        self.out.flush()
    }

    /// Terminal output (buffered until the next [`Recorder::frame`]).
    pub fn output(&mut self, bytes: &[u8]) {
        self.pending.extend_from_slice(bytes);
    }

    /// Write what was output since the last frame as one event.
    pub fn frame(&mut self) -> io::Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let valid = match std::str::from_utf8(&self.pending) {
            Ok(_) => self.pending.len(),
            // An incomplete sequence at the end waits for the rest; invalid bytes are replaced.
            Err(e) if e.error_len().is_none() => e.valid_up_to(),
            Err(_) => self.pending.len(),
        };
        let rest = self.pending.split_off(valid);
        let text = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending = rest;
        self.event("o", &text)
    }

    /// The terminal is now `width` × `height`.
    pub fn resize(&mut self, width: u16, height: u16) -> io::Result<()> {
        self.frame()?;
        self.event("r", &format!("{width}x{height}"))
    }
}

/// A recording shared between the terminal writer and the event loop (which reports resizes
/// and, at the end, the first error).
#[derive(Default)]
pub struct Recording {
    pub recorder: Option<Recorder>,
    /// The first error of the recording (the app goes on; it is reported at the end).
    pub error: Option<io::Error>,
}

pub type Shared = std::rc::Rc<std::cell::RefCell<Recording>>;

impl Recording {
    pub fn shared(recorder: Option<Recorder>) -> Shared {
        std::rc::Rc::new(std::cell::RefCell::new(Recording {
            recorder,
            error: None,
        }))
    }

    fn check(&mut self, r: io::Result<()>) {
        if let Err(e) = r {
            self.error.get_or_insert(e);
            self.recorder = None;
        }
    }

    pub fn resize(&mut self, width: u16, height: u16) {
        if let Some(rec) = &mut self.recorder {
            let r = rec.resize(width, height);
            self.check(r);
        }
    }

    fn frame(&mut self) {
        if let Some(rec) = &mut self.recorder {
            let r = rec.frame();
            self.check(r);
        }
    }
}

/// The terminal writer: everything goes to `inner`, and a copy to the recording.
pub struct Tee<W: Write> {
    pub inner: W,
    pub recording: Shared,
}

impl<W: Write> Tee<W> {
    pub fn new(inner: W, recording: Shared) -> Self {
        Self { inner, recording }
    }
}

impl<W: Write> Write for Tee<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        if let Some(r) = &mut self.recording.borrow_mut().recorder {
            r.output(&buf[..n]);
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.recording.borrow_mut().frame();
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recording_is_a_header_then_timed_output_events() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("demo.cast");
        let rec = Recorder::create(&path, 100, 30, false).expect("create");
        let shared = Recording::shared(Some(rec));
        let mut tee = Tee::new(Vec::new(), shared.clone());
        tee.write_all("hello ".as_bytes()).expect("write");
        // A multi-byte character cut between two flushes stays whole.
        let sigma = "Σ".as_bytes();
        tee.write_all(&sigma[..1]).expect("write");
        tee.flush().expect("flush");
        tee.write_all(&sigma[1..]).expect("write");
        tee.flush().expect("flush");
        shared.borrow_mut().resize(120, 40);
        drop(tee);
        drop(shared);
        let text = std::fs::read_to_string(&path).expect("read");
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).expect("json line"))
            .collect();
        assert_eq!(lines[0]["version"], 2);
        assert_eq!(lines[0]["width"], 100);
        assert_eq!(lines[0]["height"], 30);
        assert_eq!(lines[1][1], "o");
        assert_eq!(lines[1][2], "hello ");
        assert_eq!(lines[2][2], "Σ");
        assert_eq!(lines[3][1], "r");
        assert_eq!(lines[3][2], "120x40");
        let times: Vec<f64> = lines[1..]
            .iter()
            .map(|l| l[0].as_f64().expect("time"))
            .collect();
        assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
    }
}
