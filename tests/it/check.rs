//! `ringlab check`: one fixture folder per malformed case, each caught with its file:line:col.

use std::process::Command;

fn check(case: &str) -> (i32, String) {
    let dir = format!("tests/fixtures/check/{case}");
    let out = Command::new(env!("CARGO_BIN_EXE_ringlab"))
        .args(["check", &dir])
        .output()
        .expect("run ringlab check");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

fn assert_reports(case: &str, expected: &[&str]) {
    let (code, out) = check(case);
    assert_eq!(code, 1, "{case}: exit code; output:\n{out}");
    for e in expected {
        assert!(out.contains(e), "{case}: expected `{e}` in:\n{out}");
    }
    assert_eq!(
        out.lines().count(),
        expected.len(),
        "{case}: exactly these problems:\n{out}"
    );
}

const D: &str = "tests/fixtures/check";

#[test]
fn missing_front_matter_is_reported_at_1_1() {
    assert_reports(
        "missing-front-matter",
        &[&format!(
            "{D}/missing-front-matter/lesson.md:1:1: error: missing front matter"
        )],
    );
}

#[test]
fn bad_toml_in_front_matter_points_at_the_error() {
    assert_reports(
        "bad-toml",
        &[&format!(
            "{D}/bad-toml/lesson.md:3:11: error: bad front matter"
        )],
    );
}

#[test]
fn missing_title_is_reported() {
    assert_reports(
        "missing-field",
        &[&format!(
            "{D}/missing-field/lesson.md:2:1: error: bad front matter: missing field `title`"
        )],
    );
}

#[test]
fn duplicate_ids_point_at_the_second_file() {
    assert_reports(
        "duplicate-id",
        &[&format!(
            "{D}/duplicate-id/b.md:2:1: error: duplicate lesson id `a`"
        )],
    );
}

#[test]
fn unknown_prerequisite_points_at_the_key() {
    assert_reports(
        "unknown-prereq",
        &[&format!(
            "{D}/unknown-prereq/lesson.md:5:1: error: unknown prerequisite `nope`"
        )],
    );
}

#[test]
fn prerequisite_cycle_is_reported_in_every_file_on_it() {
    assert_reports(
        "cycle",
        &[
            &format!("{D}/cycle/a.md:5:1: error: prerequisite cycle: a → b → a"),
            &format!("{D}/cycle/b.md:5:1: error: prerequisite cycle: b → a → b"),
        ],
    );
}

#[test]
fn malformed_fenced_block_points_inside_the_block() {
    assert_reports(
        "malformed-block",
        &[&format!(
            "{D}/malformed-block/lesson.md:14:9: error: malformed ```ring block"
        )],
    );
}

#[test]
fn wrongly_typed_block_value_is_reported() {
    assert_reports(
        "wrong-type-in-block",
        &[&format!(
            "{D}/wrong-type-in-block/lesson.md:13:9: error: malformed ```ring block: invalid type"
        )],
    );
}

#[test]
fn unclosed_fence_is_reported_at_the_opener() {
    assert_reports(
        "unclosed-fence",
        &[&format!(
            "{D}/unclosed-fence/lesson.md:10:1: error: unclosed fenced block"
        )],
    );
}

#[test]
fn broken_internal_link_is_reported() {
    assert_reports(
        "broken-link",
        &[&format!(
            "{D}/broken-link/lesson.md:10:5: error: broken link: no lesson file `missing.md`"
        )],
    );
}

#[test]
fn broken_section_link_is_reported() {
    assert_reports(
        "broken-anchor",
        &[&format!(
            "{D}/broken-anchor/lesson.md:10:5: error: broken link: `lesson.md` has no section `#no-such-section`"
        )],
    );
}

#[test]
fn unclosed_math_is_reported_at_the_opener() {
    assert_reports(
        "unclosed-math",
        &[&format!(
            "{D}/unclosed-math/lesson.md:10:13: error: unclosed"
        )],
    );
}

#[test]
fn a_good_course_passes() {
    let (code, out) = check("good");
    assert_eq!(code, 0, "{out}");
    assert!(out.is_empty(), "{out}");
}

#[test]
fn the_shipped_lessons_pass() {
    let out = Command::new(env!("CARGO_BIN_EXE_ringlab"))
        .args(["check", "lessons"])
        .output()
        .expect("run ringlab check");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn a_missing_path_is_a_clear_error_not_a_panic() {
    let out = Command::new(env!("CARGO_BIN_EXE_ringlab"))
        .args(["check", "no/such/dir"])
        .output()
        .expect("run ringlab check");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no/such/dir"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn quiz_without_answer_is_reported_at_the_block() {
    assert_reports(
        "quiz-missing-answer",
        &[&format!(
            "{D}/quiz-missing-answer/lesson.md:13:1: error: quiz item `a-pick`: missing `answer`"
        )],
    );
}

#[test]
fn numeric_quiz_without_tolerance_is_reported() {
    assert_reports(
        "quiz-numeric-no-tolerance",
        &[&format!(
            "{D}/quiz-numeric-no-tolerance/lesson.md:16:10: error: quiz item `a-bytes`: numeric item without `tolerance`"
        )],
    );
}

#[test]
fn quiz_answer_outside_the_choices_points_at_the_answer() {
    assert_reports(
        "quiz-answer-not-a-choice",
        &[&format!(
            "{D}/quiz-answer-not-a-choice/lesson.md:17:10: error: quiz item `a-pick`: answer 3 is not among the 3 choices"
        )],
    );
}

#[test]
fn unknown_template_parameter_points_into_the_prompt() {
    assert_reports(
        "quiz-unknown-param",
        &[&format!(
            "{D}/quiz-unknown-param/lesson.md:15:43: error: quiz item `a-ring`: unknown parameter `NN` in template"
        )],
    );
}

#[test]
fn duplicate_quiz_ids_across_lessons_and_drills_are_reported() {
    assert_reports(
        "quiz-duplicate-id",
        &[&format!(
            "{D}/quiz-duplicate-id/drills/interview.md:6:1: error: duplicate quiz item id `shared-id` (also at {D}/quiz-duplicate-id/lesson.md:13)"
        )],
    );
}

#[test]
fn blocks_the_reader_would_refuse_are_check_errors_too() {
    let (code, out) = check("reader-rejects");
    assert_eq!(code, 1, "{out}");
    for want in [
        "lesson.md:14:1: error: ```ring block:",
        "lesson.md:18:1: error: ```ring block: ranks must be 1..=1024, got 1000000",
        "lesson.md:22:1: error: ```lab block: ranks must be 2..=8, got 100000",
        "lesson.md:27:1: error: ```lab block: -e/--maxbytes (1024) is smaller than -b/--minbytes (67108864)",
    ] {
        assert!(out.contains(want), "expected `{want}` in:\n{out}");
    }
    assert_eq!(out.lines().count(), 4, "{out}");
}

/// `ringlab check labs` validates hang-lab scenario files as the lab loads them: a typo in a
/// culprit or an address is `file:line:col: error:`, and the shipped scenarios are clean.
#[test]
fn scenario_files_are_checked_with_their_line() {
    let run = |arg: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_ringlab"))
            .args(["check", arg])
            .output()
            .expect("run ringlab check");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, out, err) = run("labs");
    assert_eq!(code, 0, "{out}{err}");
    assert!(err.contains("scenario file(s): no problems"), "{err}");
    let dir = tempfile::tempdir().expect("tmp");
    let good = std::fs::read_to_string("labs/docker0.toml").expect("docker0");
    std::fs::write(dir.path().join("ok.toml"), &good).expect("write");
    let bad = good.replace(
        "culprit = \"unroutable-address\"",
        "culprit = \"unroutable-adress\"",
    );
    std::fs::write(dir.path().join("typo.toml"), bad).expect("write");
    let (code, out, _) = run(&dir.path().display().to_string());
    assert_eq!(code, 1, "{out}");
    let line = out.lines().next().unwrap_or_default();
    assert!(
        line.contains("typo.toml:") && line.contains(": error: "),
        "{out}"
    );
    assert!(line.contains("unroutable-adress"), "{out}");
    assert_eq!(out.lines().count(), 1, "only the bad file: {out}");
}

/// One lesson over the size limit stops neither `check` nor `--lessons` (finding L7): it is
/// reported as an error and the other files are checked, or loaded.
#[test]
fn an_oversized_lesson_is_reported_and_the_rest_still_checked() {
    let tmp = tempfile::tempdir().expect("tmp");
    for f in ["01-sample.md", "02-second.md"] {
        std::fs::copy(
            format!("{}/tests/fixtures/tui/{f}", env!("CARGO_MANIFEST_DIR")),
            tmp.path().join(f),
        )
        .expect("copy");
    }
    let big = tmp.path().join("03-big.md");
    std::fs::write(&big, vec![b'a'; 5 << 20]).expect("write");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ringlab"))
        .arg("check")
        .arg(tmp.path())
        .output()
        .expect("run");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(
        stderr.contains("03-big.md") && stderr.contains("over the 4 MiB"),
        "{stdout}"
    );
    assert!(
        stderr.contains("2 lesson file(s)"),
        "the others were checked: {stderr}"
    );
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ringlab"))
        .args(["quiz", "--list", "--lessons"])
        .arg(tmp.path())
        .output()
        .expect("run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("skipped a lesson file"));
}
