//! The real quiz in a real pseudo-terminal: answer one item, then SIGKILL the process (no
//! chance to save on the way out). The answer is on disk anyway.

use std::process::Command;
use std::time::Duration;

use expectrl::{Eof, Regex, Session};
use ringlab::study::progress;

#[test]
fn an_answer_survives_a_sigkill_right_after_it() {
    let home = tempfile::tempdir().expect("home");
    let bin = env!("CARGO_BIN_EXE_ringlab");
    let script = format!(
        "stty rows 24 cols 80; RINGLAB_HOME={} {bin} --lessons tests/fixtures/quiz quiz basics </dev/tty & \
         echo PID=$!; wait $!; echo EXIT=$?",
        home.path().display()
    );
    let mut cmd = Command::new("sh");
    cmd.arg("-c").arg(script);
    let mut s = Session::spawn(cmd).expect("spawn in a pty");
    s.set_expect_timeout(Some(Duration::from_secs(20)));
    let c = s.expect(Regex(r"PID=(\d+)")).expect("pid");
    let pid: i32 = String::from_utf8_lossy(c.get(1).expect("group"))
        .parse()
        .expect("number");
    s.expect("How many steps").expect("the first item is shown");
    s.send("c").expect("type");
    std::thread::sleep(Duration::from_millis(100));
    s.send("\r").expect("submit");
    s.expect("Not quite").expect("feedback");
    let killed = Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(killed.success());
    s.expect(Eof).expect("the shell ends");
    let (p, notice) = progress::load(home.path()).expect("load");
    assert_eq!(notice, None);
    let rec = &p.items["basics-steps"];
    assert_eq!(rec.reviews.len(), 1);
    assert_eq!(rec.reviews[0].correct, Some(false));
}
