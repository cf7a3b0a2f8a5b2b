//! `ringlab ring --coll`: the collective has one name everywhere (`--op` is the reduction in
//! `bench`); `ring --op` still works, with a note that it is deprecated.

use std::process::{Command, Output};

fn ring(args: &[&str]) -> Output {
    let home = tempfile::tempdir().expect("tempdir");
    Command::new(env!("CARGO_BIN_EXE_ringlab"))
        .arg("ring")
        .args(args)
        .env("RINGLAB_HOME", home.path())
        .output()
        .expect("run ringlab")
}

fn collective(out: &Output) -> String {
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let text = v.to_string();
    assert!(out.status.success(), "{text}");
    text
}

#[test]
fn coll_names_the_collective() {
    let out = ring(&["--coll", "broadcast", "--ranks", "4", "--json"]);
    assert!(out.status.success());
    assert!(collective(&out).contains("broadcast"));
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn op_still_works_with_a_deprecation_note() {
    let out = ring(&["--op", "broadcast", "--ranks", "4", "--json"]);
    let new = ring(&["--coll", "broadcast", "--ranks", "4", "--json"]);
    assert_eq!(out.stdout, new.stdout, "the same schedule");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("deprecated") && err.contains("--coll"),
        "{err}"
    );
}

#[test]
fn op_and_coll_together_are_refused() {
    let out = ring(&["--op", "broadcast", "--coll", "reduce", "--json"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--coll") && err.contains("--op"), "{err}");
}

#[test]
fn default_is_all_reduce() {
    let out = ring(&["--json"]);
    assert!(collective(&out).contains("all-reduce"));
}
