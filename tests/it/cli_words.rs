//! The small lies a newcomer trips over on the command line: an error said once, a size's
//! error listing only size units, nccl-tests' -g pointed at ringlab's flags, a recording that
//! never overwrites a file unasked, a non-terminal hint that names the command's own --json,
//! and all-to-all's count as nccl-tests prints it.

use std::process::{Command, Output};

fn ringlab(args: &[&str]) -> Output {
    let home = tempfile::tempdir().expect("tempdir");
    Command::new(env!("CARGO_BIN_EXE_ringlab"))
        .args(args)
        .env("RINGLAB_HOME", home.path())
        .output()
        .expect("run ringlab")
}

fn err(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_missing_lessons_path_is_said_once() {
    let out = ringlab(&["check", "no-such-dir"]);
    let e = err(&out);
    assert!(!out.status.success());
    assert_eq!(e.matches("No such file or directory").count(), 1, "{e}");
    assert_eq!(e.matches("no-such-dir").count(), 1, "{e}");
}

#[test]
fn a_size_with_a_wrong_unit_lists_size_units_only() {
    let out = ringlab(&["bench", "-b", "1X"]);
    let e = err(&out);
    assert_eq!(out.status.code(), Some(2), "{e}");
    assert!(e.contains("unknown unit “X”") && e.contains("KiB"), "{e}");
    assert!(
        !e.contains("GB/s") && !e.contains("ms"),
        "no rates or times: {e}"
    );
}

#[test]
fn nccl_tests_dash_g_points_at_ringlabs_flags() {
    let out = ringlab(&["bench", "-g", "8"]);
    let e = err(&out);
    assert_eq!(out.status.code(), Some(2), "{e}");
    assert!(
        e.contains("--nproc-per-node 8") && e.contains("--single-process"),
        "{e}"
    );
}

#[test]
fn a_recording_keeps_an_existing_file_unless_forced() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cast = dir.path().join("talk.cast");
    std::fs::write(&cast, b"last week's talk").expect("write");
    let out = ringlab(&["present", "--record", &cast.display().to_string()]);
    let e = err(&out);
    assert_eq!(out.status.code(), Some(2), "{e}");
    assert!(e.contains("exists: kept") && e.contains("--force"), "{e}");
    assert_eq!(std::fs::read(&cast).expect("kept"), b"last week's talk");
    // --force gets past the check (and then needs a terminal, which a test has not).
    let out = ringlab(&[
        "present",
        "--record",
        &cast.display().to_string(),
        "--force",
    ]);
    assert!(err(&out).contains("need a terminal"), "{}", err(&out));
}

#[test]
fn screens_without_a_terminal_name_the_json_of_each_command() {
    let out = ringlab(&["stats"]);
    let e = err(&out);
    assert_eq!(out.status.code(), Some(2), "{e}");
    assert!(e.contains("`ringlab stats --json`"), "{e}");
}

#[test]
fn all_to_all_rows_count_per_peer_as_nccl_tests() {
    let out = ringlab(&[
        "bench",
        "--backend",
        "tcp",
        "--nproc-per-node",
        "2",
        "-b",
        "64K",
        "-e",
        "64K",
        "-n",
        "1",
        "-w",
        "0",
        "--coll",
        "all-to-all",
        "--json",
    ]);
    assert!(out.status.success(), "{}", err(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    let row: serde_json::Value =
        serde_json::from_str(text.lines().next().expect("a row")).expect("json");
    assert_eq!(row["count"], 8192, "64 KiB of f32 over 2 peers: {row}");
    assert_eq!(row["wrong"], 0, "{row}");
}

/// `… | head` closes the pipe early: every command ends quietly with SIGPIPE's status.
#[test]
fn a_closed_pipe_ends_quietly() {
    use std::io::Read;
    use std::process::Stdio;
    for args in [
        &["completions", "bash"][..],
        &["ring", "--json", "--ranks", "64"][..],
    ] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_ringlab"))
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        // Read a few bytes, then close our end, as `head -c 10` does.
        let mut first = [0u8; 10];
        let mut stdout = child.stdout.take().expect("stdout");
        stdout.read_exact(&mut first).expect("some output");
        drop(stdout);
        let out = child.wait_with_output().expect("wait");
        let e = String::from_utf8_lossy(&out.stderr);
        assert!(
            !e.contains("panicked") && !e.contains("error"),
            "{args:?}: {e}"
        );
        assert!(
            out.status.code() == Some(141) || out.status.success(),
            "{args:?}: {:?}",
            out.status
        );
    }
}

#[test]
fn sanity_says_how_the_bytes_moved() {
    let out = ringlab(&["sanity", "--backend", "tcp", "--nproc-per-node", "2"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", err(&out));
    assert!(text.contains("Transport: P2P, single copy"), "{text}");
    let out = Command::new(env!("CARGO_BIN_EXE_ringlab"))
        .args([
            "sanity",
            "--backend",
            "tcp",
            "--nproc-per-node",
            "2",
            "--json",
        ])
        .env("NCCL_SHM_DISABLE", "1")
        .output()
        .expect("run");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["transport"], "NET", "{v}");
    assert_eq!(v["pass"], true, "{v}");
}

/// RINGLAB_LAB_TIMEOUT sets every scenario's watchdog (a demo's shorter wait); a bad value is
/// refused naming the variable.
#[test]
fn the_lab_watchdog_can_be_set_for_every_scenario() {
    let out = Command::new(env!("CARGO_BIN_EXE_ringlab"))
        .args(["lab", "run", "docker0", "--mode", "emulated"])
        .env("RINGLAB_LAB_TIMEOUT", "2")
        .output()
        .expect("run");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("watchdog after 2 s without progress"),
        "{text}"
    );
    assert!(text.contains("HANG"), "{text}{}", err(&out));
    let out = Command::new(env!("CARGO_BIN_EXE_ringlab"))
        .args(["lab", "list"])
        .env("RINGLAB_LAB_TIMEOUT", "soon")
        .output()
        .expect("run");
    assert!(
        err(&out).contains("RINGLAB_LAB_TIMEOUT: `soon` is not a watchdog time"),
        "{}",
        err(&out)
    );
}

/// What a lesson folder or a flight-recorder dump says is shown, never obeyed (finding L1): an
/// escape sequence in a quiz prompt (one that retitles the terminal, one that clears it) comes
/// out of `quiz --list` as `\x1b…` text, not as the bytes.
#[test]
fn escape_sequences_in_a_lesson_are_shown_not_sent_to_the_terminal() {
    let tmp = tempfile::tempdir().expect("tmp");
    let src = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/quiz/01-basics.md"
    ))
    .expect("fixture");
    // TOML basic strings take \u escapes: the file holds the escape characters themselves.
    let evil = src.replace(
        "How many steps does a ring all-reduce take on 4 ranks?",
        "How many steps\\u001b]2;PWNED\\u0007\\u001b[2J?",
    );
    std::fs::write(tmp.path().join("01-basics.md"), evil).expect("write");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ringlab"))
        .args(["quiz", "--list", "--lessons"])
        .arg(tmp.path())
        .output()
        .expect("run");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !out.stdout.contains(&0x1b),
        "raw ESC reached the terminal:\n{text}"
    );
    assert!(text.contains("\\x1b]2;PWNED\\x07\\x1b[2J"), "{text}");
}

/// `bench --help` says the tuner's threshold, the one `collective::tune` uses (read from the
/// help as printed, not from the CLI's source file: a re-wrap of a doc comment cannot break it).
#[test]
fn bench_help_says_the_tuners_threshold() {
    let out = ringlab(&["bench", "--help"]);
    assert!(out.status.success(), "{}", err(&out));
    let help = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    let up_to = format!(
        "up to {}",
        ringlab::units::format_bytes(ringlab::collective::tune::RD_MAX_BYTES)
    );
    assert!(
        help.contains(&up_to),
        "bench --help does not say {up_to:?}:\n{help}"
    );
}

/// `--help` says the hang lab has run-time scenarios too, and `--nccl-version`'s rule is said
/// the same way in its help and in the header a run prints (L29).
#[test]
fn help_names_the_run_time_scenarios_and_one_release_rule() {
    // Words, as clap wraps them at the terminal's width.
    let out = |o: Output| {
        String::from_utf8_lossy(&o.stdout)
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    let top = out(ringlab(&["--help"]));
    assert!(top.contains("run-time hangs"), "{top}");
    let lab = out(ringlab(&["lab", "--help"]));
    assert!(!lab.contains("a NIC misconfiguration each"), "{lab}");
    let run = out(ringlab(&["lab", "run", "--help"]));
    assert!(run.contains("the newest modelled one up to it"), "{run}");
    let p = ringlab::nccl_log::Profile::parse("2.23.0").expect("modelled");
    let said = p.describe(ringlab::nccl_log::Release::parse("2.23.0").expect("release"));
    assert!(
        said.contains("behaving as 2.21.5 (the newest release ringlab models up to it)"),
        "{said}"
    );
}
