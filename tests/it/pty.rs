//! The real binary in a real pseudo-terminal: open a lesson, scroll, search, quit; then check
//! the terminal was handed back (alternate screen left, cursor shown, mouse capture off, raw
//! mode off as `stty` sees it). The same after Ctrl-C and after SIGTERM.

use std::process::Command;
use std::time::Duration;

use expectrl::{Eof, Regex, Session};

struct Run {
    session: Session,
    out: Vec<u8>,
}

impl Run {
    /// Start ringlab under `sh` in a pty of 100x30, in the background of the shell so the
    /// test can signal it; the shell prints its exit status and `stty -a` afterwards.
    fn start() -> Self {
        Self::start_with("--lessons tests/fixtures/tui learn sample")
    }

    fn start_with(args: &str) -> Self {
        let bin = env!("CARGO_BIN_EXE_ringlab");
        let script = format!(
            "stty rows 30 cols 100; echo BEFORE; stty -a; echo END; \
             RINGLAB_HOME=$(mktemp -d) {bin} {args} </dev/tty & \
             echo PID=$!; wait $!; echo EXIT=$?; stty -a; echo DONE"
        );
        let mut cmd = Command::new("sh");
        cmd.arg("-c").arg(script);
        let mut session = Session::spawn(cmd).expect("spawn in a pty");
        session.set_expect_timeout(Some(Duration::from_secs(20)));
        Self {
            session,
            out: Vec::new(),
        }
    }

    fn expect(&mut self, needle: &str) {
        let c = self
            .session
            .expect(needle)
            .unwrap_or_else(|e| panic!("waiting for {needle:?}: {e}\n{}", self.text()));
        self.out.extend_from_slice(c.before());
        self.out.extend_from_slice(c.get(0).unwrap_or_default());
    }

    fn pid(&mut self) -> i32 {
        let c = self.session.expect(Regex(r"PID=(\d+)")).expect("pid");
        let pid = String::from_utf8_lossy(c.get(1).expect("group"))
            .parse()
            .expect("number");
        self.out.extend_from_slice(c.before());
        pid
    }

    fn send(&mut self, keys: &str) {
        self.session.send(keys).expect("send");
        std::thread::sleep(Duration::from_millis(150));
    }

    fn finish(mut self) -> String {
        let c = self.session.expect(Eof).expect("eof");
        self.out.extend_from_slice(c.before());
        self.out.extend_from_slice(c.get(0).unwrap_or_default());
        self.text()
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.out).into_owned()
    }
}

/// The terminal is handed back: every mode entered is left after it was last entered.
fn assert_restored(out: &str, exit: &str) {
    assert!(out.contains(exit), "exit status {exit}:\n{out}");
    let last = |s: &str| out.rfind(s);
    let after = |on: &str, off: &str, what: &str| {
        let on_at = last(on).unwrap_or_else(|| panic!("{what} never entered"));
        let off_at = last(off).unwrap_or_else(|| panic!("{what} never left"));
        assert!(off_at > on_at, "{what} left after it was last entered");
    };
    after("\x1b[?1049h", "\x1b[?1049l", "alternate screen");
    after("\x1b[?25l", "\x1b[?25h", "hidden cursor");
    after("\x1b[?1000h", "\x1b[?1000l", "mouse capture");
    // Raw mode is off: the line discipline is exactly as it was before ringlab started.
    let flags = |s: &str| -> Vec<String> {
        s.split_whitespace()
            .filter(|w| {
                ["icanon", "echo", "isig", "icrnl", "opost", "iexten"]
                    .contains(&w.trim_start_matches('-'))
            })
            .map(str::to_string)
            .collect()
    };
    let before = &out[out.find("BEFORE").expect("stty before")..out.find("END").expect("end")];
    let after = &out[out.rfind(exit).unwrap_or(0)..];
    assert_eq!(
        flags(after),
        flags(before),
        "terminal modes after vs before:\n{after}"
    );
    assert!(flags(before).contains(&"icanon".to_string()), "{before}");
}

#[test]
fn open_scroll_search_quit_restores_the_terminal() {
    let mut r = Run::start();
    r.pid();
    r.expect("A sample lesson");
    r.send("j");
    r.send("]");
    r.send("/needle\r");
    r.expect("needle");
    // `learn sample` opened the lesson: q goes back to the shell.
    r.send("q");
    let out = r.finish();
    assert_restored(&out, "EXIT=0");
}

#[test]
fn ctrl_c_restores_the_terminal() {
    let mut r = Run::start();
    r.pid();
    r.expect("A sample lesson");
    r.send("\x03");
    let out = r.finish();
    // Interrupted: 128 + SIGINT, as a shell reports a program stopped by Ctrl-C.
    assert_restored(&out, "EXIT=130");
}

#[test]
fn sigterm_restores_the_terminal() {
    let mut r = Run::start();
    let pid = r.pid();
    r.expect("A sample lesson");
    let ok = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .expect("kill");
    assert!(ok.success());
    let out = r.finish();
    assert_restored(&out, "EXIT=143");
}

/// A screen opened from the command line is left back to the shell: `ringlab drill --mock`
/// then q exits instead of showing the course map beneath it.
#[test]
fn q_leaves_a_screen_opened_from_the_command_line_to_the_shell() {
    let mut r = Run::start_with("drill --mock");
    r.pid();
    r.expect("Mock interview");
    r.send("\x1b"); // Esc: clears the (empty) answer line, then leaves
    let out = r.finish();
    assert!(!out.contains("Course map") && !out.contains("◐"), "{out}");
    assert_restored(&out, "EXIT=0");
}

/// `ringlab learn ID` is left the same way: q goes back to the shell, not to the map.
#[test]
fn q_leaves_a_lesson_opened_with_learn_to_the_shell() {
    let mut r = Run::start_with("learn collectives");
    r.pid();
    r.expect("The collectives");
    r.send("q");
    let out = r.finish();
    assert!(!out.contains("Course map"), "{out}");
    assert_restored(&out, "EXIT=0");
}
