//! The labs reopen as they were left (issue 45, resume): the hang lab on the scenario last
//! staged, the live lab with the fields last run, across a restart of the app, in a terminal.

use crate::hang_pty::Term;

fn started_in(home: &std::path::Path) -> Term {
    let home = home.to_str().expect("a UTF-8 temp path");
    Term::start_with(40, 120, &[("RINGLAB_HOME", home)])
}

#[test]
fn the_hang_lab_reopens_on_the_scenario_last_staged() {
    let _one = crate::common::clusters();
    let (all, _) = ringlab::lab::hang::scenario::all();
    let pos = all
        .iter()
        .position(|s| s.name == "silent-drop")
        .expect("scenario");
    let home = tempfile::tempdir().expect("home");
    let mut t = started_in(home.path());
    t.open_hang_lab();
    t.select(0, pos, &all[pos]);
    t.send("\r");
    t.wait("staged run", 60);
    t.send("\x03");
    drop(t);
    // A new app: H opens on silent-drop, not on the first scenario.
    let mut t = started_in(home.path());
    t.open_hang_lab();
    let title: String = all[pos].title.chars().take(30).collect();
    let c = t.wait(&title, 10);
    assert!(
        c.lines().any(|l| l.contains('▶') && l.contains(&title)),
        "{c}"
    );
    t.send("\x03");
}

#[test]
fn the_live_lab_reopens_with_the_fields_last_run() {
    let home = tempfile::tempdir().expect("home");
    let mut t = started_in(home.path());
    t.wait("Course", 20);
    t.send("B");
    t.wait("ranks", 10);
    // To the ranks field, two up (2 → 4 ranks), and run.
    t.send("jjll");
    t.wait("▶ranks:  4", 10);
    t.send("\r");
    t.send("\x03");
    drop(t);
    let mut t = started_in(home.path());
    t.wait("Course", 20);
    t.send("B");
    let c = t.wait("ranks:", 10);
    assert!(c.contains("ranks:  4 "), "{c}");
    t.send("\x03");
}
