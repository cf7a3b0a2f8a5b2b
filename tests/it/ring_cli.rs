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

/// A message smaller than one element is refused, not drawn as M = 0; a partial element is
/// dropped with a note saying what was used.
#[test]
fn bytes_are_whole_elements_or_refused() {
    let out = ring(&["--bytes", "3", "--json"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--bytes 3") && err.contains("f32"), "{err}");
    assert!(out.stdout.is_empty());

    let out = ring(&["--bytes", "1001", "--json"]);
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(v["bytes"], 1000, "{v}");
    assert!(err.contains("using 1000 B (250 elements)"), "{err}");

    // u8 takes any whole byte count, silently.
    let out = ring(&["--bytes", "1001", "--dtype", "u8", "--json"]);
    assert!(out.status.success() && out.stderr.is_empty());
}

/// `--algo` is refused where it does not apply instead of being relabelled.
#[test]
fn algo_is_refused_where_it_does_not_apply() {
    for (coll, algo) in [
        ("all-to-all", "tree"),
        ("sendrecv", "ring"),
        ("broadcast", "double-tree"),
    ] {
        let out = ring(&["--coll", coll, "--algo", algo, "--json"]);
        assert_eq!(out.status.code(), Some(2), "{coll} {algo}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(&format!("--algo {algo}")), "{err}");
    }
    // Without --algo, all-to-all runs its one schedule.
    assert!(ring(&["--coll", "all-to-all", "--json"]).status.success());
    // --help lists every algorithm.
    let help = Command::new(env!("CARGO_BIN_EXE_ringlab"))
        .args(["ring", "--help"])
        .output()
        .expect("help");
    let help = String::from_utf8_lossy(&help.stdout);
    for a in ringlab::collective::Algorithm::ALL {
        assert!(help.contains(a.name()), "{a:?} missing from --help");
    }
}

#[test]
fn gpus_per_node_sets_the_two_level_shape_or_is_refused() {
    let json = |args: &[&str]| -> serde_json::Value {
        let out = ring(args);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).expect("JSON")
    };
    let base = ["--ranks", "8", "--algo", "two-level", "--json"];
    // Default 8 = 2 nodes × 4: reduce-scatter 3 + across 2×1 + all-gather 3 = 8 steps.
    let default = json(&base);
    assert_eq!(default["gpus_per_node"], 4);
    assert_eq!(default["steps"].as_array().map(Vec::len), Some(8));
    // 4 nodes × 2: 1 + 2×3 + 1 = 8 steps too, but the across phase is a 4-node ring.
    let mut four = base.to_vec();
    four.extend(["--gpus-per-node", "2"]);
    let four = json(&four);
    assert_eq!(four["gpus_per_node"], 2);
    assert_ne!(
        four["steps"], default["steps"],
        "another shape, another schedule"
    );
    // One node of 8: the across phase is empty.
    let mut one = base.to_vec();
    one.extend(["--gpus-per-node", "8"]);
    assert_eq!(json(&one)["gpus_per_node"], 8);

    // A shape that does not divide N is refused, naming the flag and what would work.
    let out = ring(&[
        "--ranks",
        "8",
        "--algo",
        "two-level",
        "--gpus-per-node",
        "3",
        "--json",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--gpus-per-node 3 does not divide --ranks 8"),
        "{err}"
    );
    assert!(err.contains("1, 2, 4, 8"), "{err}");

    // An odd N without a shape says what it chose.
    let out = ring(&["--ranks", "7", "--algo", "two-level", "--json"]);
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("7 nodes of 1 GPU"), "{err}");
    let out = ring(&["--ranks", "9", "--algo", "two-level", "--json"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("3 nodes of 3 GPUs"), "{err}");
    // Other algorithms carry no node shape in their JSON.
    assert!(
        json(&["--ranks", "8", "--json"])
            .get("gpus_per_node")
            .is_none()
    );
}
