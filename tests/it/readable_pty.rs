//! Reading at 80x24 in a real pseudo-terminal (read through vt100, as a learner sees it): PgDn
//! scrolls the panes that outgrow the screen, `m` shows a message the bar cut, the notice of a
//! progress file set aside stays across a resize until a key, and a bad `--record` path is
//! said once.

use std::process::Command;
use std::time::Duration;

use expectrl::Session;

use crate::hang_pty::Term;

const PGDN: &str = "\x1b[6~";

#[test]
fn pgdn_scrolls_the_hang_story_and_the_tp_calculator_at_80x24() {
    let (all, _) = ringlab::lab::hang::scenario::all();
    let pos = all
        .iter()
        .position(|s| s.name == "skipped-collective")
        .expect("scenario");
    let mut t = Term::start(24, 80);
    t.open_hang_lab();
    t.select(0, pos, &all[pos]);
    let top = t.wait("scenarios and story lines 1–", 10);
    assert!(!top.contains("and why."), "{top}");
    t.send(PGDN);
    t.wait("and why.", 10);
    t.send("q");
    t.wait("Course", 10);
    // The TP calculator at TP 64: the link table is below the screen, PgDn brings it.
    t.send("t");
    t.wait("TP calculator", 10);
    t.send("j");
    for _ in 0..20 {
        t.send("l");
    }
    let top = t.wait("◀ 64 ▶", 10);
    assert!(!top.contains("100G Ethernet"), "{top}");
    t.send(PGDN);
    t.wait("100G Ethernet", 10);
    t.wait("estimates: ring alpha-beta", 10);
}

#[test]
fn the_progress_notice_stays_across_a_resize_and_m_shows_it_again() {
    let home = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        home.path().join("progress.json"),
        "{\"schema\":2,\"lessons\":{\n",
    )
    .expect("write");
    let dir = home.path().to_string_lossy().into_owned();
    let mut t = Term::start_with(24, 80, &[("RINGLAB_HOME", dir.as_str())]);
    t.wait("started fresh", 20);
    t.resize(30, 100);
    let after = t.wait("Course", 10);
    assert!(
        after.contains("started fresh"),
        "a resize keeps it:\n{after}"
    );
    t.send("j");
    let gone = t.screen();
    assert!(
        crate::common::wait_until(Duration::from_secs(10), || !t
            .screen()
            .contains("started fresh")),
        "a key dismisses it:\n{gone}"
    );
    t.send("m");
    let shown = t.wait("Messages", 10);
    assert!(shown.contains("quarantined"), "{shown}");
}

#[test]
fn a_bad_record_path_is_said_once() {
    let bin = env!("CARGO_BIN_EXE_ringlab");
    let mut cmd = Command::new("sh");
    cmd.arg("-c").arg(format!(
        "stty rows 24 cols 80; {bin} present --record /no-such-dir-ringlab/t.cast </dev/tty; echo EXIT=$?"
    ));
    let mut s = Session::spawn(cmd).expect("spawn in a pty");
    s.set_expect_timeout(Some(Duration::from_secs(20)));
    let c = s.expect("EXIT=").expect("it ends");
    let out = String::from_utf8_lossy(c.before()).into_owned();
    assert_eq!(
        out.matches("cannot write the recording").count(),
        1,
        "{out}"
    );
    assert!(!out.contains("terminal error"), "{out}");
}

/// A refusal longer than the bar while a size is typed in the ring view names the way to read
/// it whole (Esc, then Ctrl-L: the ring view keeps `m` for its sizes); it shows whole (M8).
#[test]
fn a_cut_refusal_in_the_ring_view_is_read_whole_with_ctrl_l() {
    let mut t = Term::start(24, 80);
    t.wait("Course", 20);
    t.send("r");
    t.wait("all-reduce · ring", 10);
    t.send("M");
    t.wait("message size>", 10);
    t.send("3 ms\r");
    let cut = t.wait("Esc, Ctrl-L: whole", 10);
    assert!(cut.contains('…'), "{cut}");
    t.send("\x1b");
    t.send("\x0c");
    let shown = t.wait("Messages", 10);
    assert!(shown.contains("not a size"), "{shown}");
    assert!(shown.contains("examples"), "{shown}");
}
