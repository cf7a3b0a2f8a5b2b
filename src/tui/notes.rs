//! Presenter notes over a local socket: the presenter (`ringlab present`) publishes where it is
//! (slide, title, what to say, what comes next) as JSON lines on a Unix socket that only its user
//! can open (folder 0700, socket 0600); `ringlab present --notes` in a second terminal reads them.

use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// What the presenter shows now, as the notes terminal receives it (one JSON object a line).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NotesMsg {
    pub lesson: String,
    /// Slide number from 1.
    pub slide: usize,
    pub total: usize,
    pub title: String,
    /// What to say: the section's `<!-- notes: … -->`, else what the slide shows.
    pub notes: String,
    /// The next slide's title; None on the last slide.
    pub next: Option<String>,
    /// When the talk began (Unix seconds): the notes clock counts from it, not from when the
    /// notes terminal opened. Absent from older presenters.
    #[serde(default)]
    pub talk_started: Option<i64>,
    /// During a class quiz: the answer, for the presenter's eyes only (the projector shows it
    /// on a key).
    #[serde(default)]
    pub answer: Option<String>,
}

/// Where the socket lives: `$XDG_RUNTIME_DIR/ringlab/present.sock` (a per-user tmpfs), else
/// `present.sock` in ringlab's home folder.
pub fn socket_path() -> PathBuf {
    if let Some(p) = std::env::var_os("RINGLAB_PRESENT_SOCKET").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    match std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty() && Path::new(d).is_dir()) {
        Some(d) => Path::new(&d).join("ringlab").join("present.sock"),
        None => crate::study::progress::data_dir().join("present.sock"),
    }
}

/// The presenter's end: accepts notes terminals and sends each the current slide, then every
/// change. The socket file is removed when the hub is dropped.
pub struct Hub {
    path: PathBuf,
    clients: Arc<Mutex<Vec<UnixStream>>>,
    last: Arc<Mutex<Option<String>>>,
}

impl Hub {
    /// Listen at `path`. Refuses when another presenter answers there; a stale socket file left
    /// by a presenter that died is replaced.
    pub fn start(path: &Path) -> io::Result<Arc<Hub>> {
        if let Some(dir) = path.parent() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)?;
        }
        if path.exists() {
            if UnixStream::connect(path).is_ok() {
                return Err(io::Error::new(
                    io::ErrorKind::AddrInUse,
                    format!("another presenter is running ({})", path.display()),
                ));
            }
            std::fs::remove_file(path)?;
        }
        let listener = UnixListener::bind(path)?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
        let hub = Arc::new(Hub {
            path: path.to_path_buf(),
            clients: Arc::default(),
            last: Arc::default(),
        });
        let clients = Arc::clone(&hub.clients);
        let last = Arc::clone(&hub.last);
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut c) = conn else { continue };
                let _ = c.set_write_timeout(Some(Duration::from_millis(200)));
                let now = last.lock().ok().and_then(|l| l.clone());
                if let Some(line) = now
                    && c.write_all(line.as_bytes()).is_err()
                {
                    continue;
                }
                if let Ok(mut cs) = clients.lock() {
                    cs.push(c);
                }
            }
        });
        Ok(hub)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Send `msg` to every notes terminal (and to those that connect later); a terminal that
    /// went away is dropped.
    pub fn publish(&self, msg: &NotesMsg) {
        let Ok(mut line) = serde_json::to_string(msg) else {
            return;
        };
        line.push('\n');
        if let Ok(mut l) = self.last.lock() {
            *l = Some(line.clone());
        }
        if let Ok(mut cs) = self.clients.lock() {
            cs.retain_mut(|c| c.write_all(line.as_bytes()).is_ok());
        }
    }

    /// How many notes terminals are connected.
    pub fn listeners(&self) -> usize {
        self.clients.lock().map_or(0, |c| c.len())
    }
}

impl Drop for Hub {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
        // Followers see the end of the stream: the presenter has stopped.
        if let Ok(mut cs) = self.clients.lock() {
            for c in cs.drain(..) {
                let _ = c.shutdown(std::net::Shutdown::Both);
            }
        }
    }
}

/// No presenter listens where the notes terminal looked.
#[derive(Debug, thiserror::Error)]
#[error(
    "no presenter to follow at {} ({source}): start `ringlab present` in another terminal first",
    path.display()
)]
pub struct NoPresenter {
    pub path: std::path::PathBuf,
    pub source: std::io::Error,
}

/// The notes terminal's end: connect to the presenter.
pub fn connect(path: &Path) -> Result<UnixStream, NoPresenter> {
    UnixStream::connect(path).map_err(|source| NoPresenter {
        path: path.to_path_buf(),
        source,
    })
}

/// Read the presenter's messages until it goes away, handing each to `f`; `f(None)` at the end.
pub fn follow(stream: UnixStream, mut f: impl FnMut(Option<NotesMsg>)) {
    follow_until(stream, |m| {
        f(m);
        true
    });
}

/// [`follow`], stopping early when `f` says nobody reads any more (false); its last answer.
fn follow_until(stream: UnixStream, mut f: impl FnMut(Option<NotesMsg>) -> bool) -> bool {
    for line in BufReader::new(stream).lines() {
        let Ok(line) = line else { break };
        if let Ok(msg) = serde_json::from_str::<NotesMsg>(&line)
            && !f(Some(msg))
        {
            return false;
        }
    }
    f(None)
}

/// How often a notes terminal with no presenter looks for one.
const LOOK_AGAIN: Duration = Duration::from_millis(300);

/// Follow whichever presenter listens at `path`, now or later: wait for one to start, follow
/// it until it stops (`f(None)`), then wait for the next. Returns when `f` says nobody reads.
pub fn follow_path(path: &Path, mut f: impl FnMut(Option<NotesMsg>) -> bool) {
    loop {
        match UnixStream::connect(path) {
            Ok(stream) => {
                if !follow_until(stream, &mut f) {
                    return;
                }
            }
            Err(_) => std::thread::sleep(LOOK_AGAIN),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(slide: usize) -> NotesMsg {
        NotesMsg {
            lesson: "sample".into(),
            slide,
            total: 3,
            title: format!("slide {slide}"),
            notes: "say this".into(),
            next: None,
            talk_started: Some(1_700_000_000),
            answer: None,
        }
    }

    #[test]
    fn socket_is_private_and_a_follower_gets_the_current_then_every_slide() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("run").join("present.sock");
        let hub = Hub::start(&path).expect("hub");
        let mode = std::fs::metadata(&path)
            .expect("socket")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let dmode = std::fs::metadata(path.parent().expect("dir"))
            .expect("dir")
            .permissions()
            .mode();
        assert_eq!(dmode & 0o777, 0o700);
        hub.publish(&msg(1));
        let stream = connect(&path).expect("connect");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || follow(stream, |m| drop(tx.send(m))));
        let first = rx.recv_timeout(Duration::from_secs(5)).expect("first");
        assert_eq!(first, Some(msg(1)));
        // Wait until the hub has registered the follower, then move on a slide.
        for _ in 0..100 {
            if hub.listeners() == 1 {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        hub.publish(&msg(2));
        assert_eq!(
            rx.recv_timeout(Duration::from_secs(5)).expect("second"),
            Some(msg(2))
        );
        assert!(Hub::start(&path).is_err(), "a second presenter is refused");
        drop(hub);
        assert!(!path.exists(), "the socket is removed");
    }
}
