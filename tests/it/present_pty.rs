//! Presenter mode in real pseudo-terminals, read through a terminal emulator (vt100) so the
//! assertions see the screen as a person does: walk a lesson slide by slide with clicker keys,
//! play a narrated ring, record an asciicast and parse it back; a notes terminal follows the
//! presenter over its socket.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use expectrl::Session;

const ROWS: u16 = 30;
const COLS: u16 = 100;

struct Term {
    session: Session,
    vt: vt100::Parser,
}

fn parser() -> vt100::Parser {
    vt100::Parser::new(
        std::num::NonZeroU16::new(ROWS).expect("rows"),
        std::num::NonZeroU16::new(COLS).expect("cols"),
        0,
    )
}

impl Term {
    /// `ringlab ARGS` in a 100x30 pty, with its own home and presenter socket.
    fn start(args: &str, home: &Path) -> Self {
        let bin = env!("CARGO_BIN_EXE_ringlab");
        let script = format!("stty rows {ROWS} cols {COLS}; {bin} {args} </dev/tty; echo EXIT=$?");
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg(script)
            .env("RINGLAB_HOME", home)
            .env("RINGLAB_PRESENT_SOCKET", home.join("present.sock"))
            .env_remove("NO_COLOR");
        let session = Session::spawn(cmd).expect("spawn in a pty");
        Self {
            session,
            vt: parser(),
        }
    }

    fn pump(&mut self) {
        let mut buf = [0u8; 16 << 10];
        while let Ok(n) = self.session.try_read(&mut buf) {
            if n == 0 {
                break;
            }
            self.vt.process(&buf[..n]);
        }
    }

    /// Wait until the screen shows `needle`; the screen's text.
    fn wait(&mut self, needle: &str) -> String {
        self.wait_all(&[needle])
    }

    /// Wait until the screen shows every one of `needles` (a frame can arrive in parts: its
    /// footer before its body).
    fn wait_all(&mut self, needles: &[&str]) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            self.pump();
            let c = self.vt.screen().contents();
            if needles.iter().all(|n| c.contains(n)) {
                return c;
            }
            assert!(
                Instant::now() < deadline,
                "waiting for {needles:?}; the screen shows:\n{c}"
            );
            std::thread::sleep(Duration::from_millis(30));
        }
    }

    /// Wait until the screen no longer shows `needle`.
    fn wait_gone(&mut self, needle: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            self.pump();
            let c = self.vt.screen().contents();
            if !c.contains(needle) {
                return c;
            }
            assert!(Instant::now() < deadline, "{needle:?} stays:\n{c}");
            std::thread::sleep(Duration::from_millis(30));
        }
    }

    fn send(&mut self, keys: &str) {
        self.session.send(keys).expect("send");
    }
}

const PGDN: &str = "\x1b[6~";
const PGUP: &str = "\x1b[5~";
const RIGHT: &str = "\x1b[C";

#[test]
fn presenter_walks_a_lesson_plays_a_narrated_ring_and_records_a_cast() {
    let home = tempfile::tempdir().expect("tempdir");
    let cast = home.path().join("talk.cast");
    let mut t = Term::start(
        &format!(
            "--lessons tests/fixtures/tui present sample --pace 80 --record {}",
            cast.display()
        ),
        home.path(),
    );
    t.wait_all(&["slide 1/4", "Ring all-reduce sends"]);
    t.send(PGDN);
    // Slide 2 is the table of 2(N−1)/N; its row for N = 4 reads 1.500.
    t.wait_all(&["slide 2/4", "1.500"]);
    t.send(RIGHT);
    t.wait("slide 3/4");
    t.send(" ");
    t.wait("slide 4/4");
    t.send(PGUP);
    let code = t.wait("slide 3/4");
    assert!(code.contains("dist.all_reduce"), "{code}");
    // Enter runs the slide's ring block, narrated, at 80 ms a step.
    t.send("\r");
    let done = t.wait("step 6 of 6");
    assert!(done.contains("all-gather"), "{done}");
    t.send("q");
    t.wait("slide 3/4");
    // b blanks the screen; any key brings it back.
    t.send("b");
    t.wait_gone("slide 3/4");
    t.send("x");
    t.wait("slide 3/4");
    t.send("q");
    t.wait("EXIT=0");

    // The recording: asciicast v2, a header then timed events, in order.
    let text = std::fs::read_to_string(&cast).expect("the recording exists");
    let mut lines = text.lines();
    let header: serde_json::Value =
        serde_json::from_str(lines.next().expect("header")).expect("header is JSON");
    assert_eq!(header["version"], 2);
    assert_eq!(header["width"], COLS);
    assert_eq!(header["height"], ROWS);
    assert!(
        header["timestamp"]
            .as_i64()
            .is_some_and(|t| t > 1_600_000_000)
    );
    let mut vt = parser();
    let mut last = 0.0;
    let mut seen = Vec::new();
    let mut events = 0;
    for line in lines {
        let ev: serde_json::Value = serde_json::from_str(line).expect("event is JSON");
        let ev = ev.as_array().expect("event is an array");
        assert_eq!(ev.len(), 3, "{line}");
        let at = ev[0].as_f64().expect("time");
        assert!(at >= last, "times run forward: {at} after {last}");
        last = at;
        let kind = ev[1].as_str().expect("kind");
        assert!(kind == "o" || kind == "r", "{line}");
        if kind == "o" {
            vt.process(ev[2].as_str().expect("data").as_bytes());
            let screen = vt.screen().contents();
            for needle in ["slide 1/4", "slide 2/4", "step 6 of 6", "1.500"] {
                if screen.contains(needle) && !seen.contains(&needle) {
                    seen.push(needle);
                }
            }
        }
        events += 1;
    }
    assert!(events > 5, "{events} events");
    assert!(last > 0.0);
    for needle in ["slide 1/4", "slide 2/4", "step 6 of 6", "1.500"] {
        assert!(
            seen.contains(&needle),
            "{needle:?} never shown in the recording"
        );
    }
}

/// `--record FILE --force` over a file someone else left there (0666, in a shared sticky
/// folder) replaces its inode: the recording is a new file of ours, not theirs written into.
/// As root the file is planted by a second real account made for the test; without root by
/// the test itself (then that the owner changes needs root to show).
#[test]
fn recording_over_a_planted_file_replaces_its_inode() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let _one_at_a_time = crate::common::accounts();
    let stranger = crate::common::Stranger::make("cast");
    let home = tempfile::tempdir().expect("tempdir");
    let shared = tempfile::tempdir().expect("shared");
    std::fs::set_permissions(shared.path(), std::fs::Permissions::from_mode(0o1777))
        .expect("chmod 1777");
    let cast = shared.path().join("talk.cast");
    let plant = format!("umask 0; echo theirs > {}", cast.display());
    match &stranger {
        Some(s) => {
            s.run(&["sh", "-c", &plant]);
        }
        None => {
            let out = Command::new("sh")
                .args(["-c", &plant])
                .output()
                .expect("sh");
            assert!(out.status.success(), "{out:?}");
        }
    }
    let old = std::fs::metadata(&cast).expect("planted");
    let mut t = Term::start(
        &format!(
            "--lessons tests/fixtures/tui present sample --record {} --force",
            cast.display()
        ),
        home.path(),
    );
    t.wait("slide 1/4");
    t.send("q");
    t.wait("EXIT=0");
    let new = std::fs::symlink_metadata(&cast).expect("recorded");
    assert!(new.is_file());
    assert_ne!(new.ino(), old.ino(), "a new inode, not theirs written into");
    // SAFETY: geteuid has no preconditions.
    assert_eq!(new.uid(), unsafe { libc::geteuid() });
    assert_eq!(new.mode() & 0o022, 0, "nobody else may write it");
    let text = std::fs::read_to_string(&cast).expect("read");
    assert!(text.starts_with("{") && !text.contains("theirs"), "{text}");
}

#[test]
fn a_notes_terminal_follows_the_presenter() {
    let home = tempfile::tempdir().expect("tempdir");
    let mut presenter = Term::start("--lessons tests/fixtures/tui present sample", home.path());
    presenter.wait("slide 1/4");
    let sock = home.path().join("present.sock");
    assert!(sock.exists(), "the presenter listens");
    let mut notes = Term::start("--lessons tests/fixtures/tui present --notes", home.path());
    let now = notes.wait("slide 1/4");
    assert!(now.contains("A sample lesson"), "{now}");
    assert!(now.contains("NEXT Numbers"), "{now}");
    // What to say: the slide's text when the section has no notes.
    assert!(now.contains("Ring all-reduce sends"), "{now}");
    presenter.send(PGDN);
    let moved = notes.wait("slide 2/4");
    assert!(moved.contains("NOW  Numbers"), "{moved}");
    assert!(moved.contains("NEXT Code"), "{moved}");
    presenter.send("q");
    presenter.wait("EXIT=0");
    notes.wait("presenter has stopped");
    assert!(!sock.exists(), "the socket is removed");
    // A presenter started again: the notes follow it, not left on "stopped" (L12).
    let mut again = Term::start("--lessons tests/fixtures/tui present sample", home.path());
    again.wait("slide 1/4");
    notes.wait_gone("presenter has stopped");
    notes.wait("slide 1/4");
    again.send("q");
    again.wait("EXIT=0");
    notes.send("q");
    notes.wait("EXIT=0");
}

/// Notes started before the presenter wait for it, saying where they look, and follow it
/// once it starts (L12).
#[test]
fn notes_started_first_wait_for_the_presenter() {
    let home = tempfile::tempdir().expect("tempdir");
    let mut notes = Term::start("--lessons tests/fixtures/tui present --notes", home.path());
    let waiting = notes.wait("Waiting for a presenter");
    assert!(waiting.contains("ringlab present"), "{waiting}");
    let mut presenter = Term::start("--lessons tests/fixtures/tui present sample", home.path());
    presenter.wait("slide 1/4");
    notes.wait("slide 1/4");
    presenter.send("q");
    presenter.wait("EXIT=0");
    notes.send("q");
    notes.wait("EXIT=0");
}

#[test]
fn an_unknown_lesson_lists_the_known_ones() {
    let home = tempfile::tempdir().expect("tempdir");
    let out = Command::new(env!("CARGO_BIN_EXE_ringlab"))
        .args(["--lessons", "tests/fixtures/tui", "present", "nope"])
        .env("RINGLAB_HOME", home.path())
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no lesson `nope`"), "{err}");
    assert!(err.contains("sample"), "{err}");
}
