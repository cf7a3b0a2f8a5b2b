//! `ringlab plan` and `ringlab tp` run as a user would: text, JSON, exit codes, clear errors.

use std::process::{Command, Output};

fn ringlab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ringlab"))
        .args(args)
        .env_remove("RINGLAB_LESSONS")
        .output()
        .expect("run ringlab")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).expect("valid JSON on stdout")
}

#[test]
fn tp_llama_70b_tp8_decode_prints_the_lesson_numbers() {
    let o = ringlab(&["tp", "--model", "llama-3.1-70b", "--tp", "8"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    for want in ["16384 B", "160", "28672 B", "4587520 B", "NVLink 4"] {
        assert!(out.contains(want), "missing {want}:\n{out}");
    }
}

#[test]
fn tp_json_carries_the_schedule_counts() {
    let o = ringlab(&[
        "tp",
        "--model",
        "llama-3.1-70b",
        "--tp",
        "8",
        "--tokens",
        "2048",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v = json(&o);
    assert_eq!(v["allreduce_bytes"], 33554432);
    assert_eq!(v["sent_per_gpu_per_allreduce"], 58720256);
    assert_eq!(v["allreduces_per_forward"], 160);
    assert_eq!(v["ring_steps"], 14);
    assert_eq!(v["valid"], true);
    assert_eq!(v["estimates"].as_array().map(Vec::len), Some(4));
}

#[test]
fn tp_that_does_not_divide_the_heads_exits_1_and_says_why() {
    let o = ringlab(&["tp", "--model", "qwen2.5-7b", "--tp", "8"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stdout(&o).contains("does not divide the 28 attention heads"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn unknown_model_lists_the_known_ones() {
    let o = ringlab(&["tp", "--model", "gpt-9", "--tp", "8"]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(
        err.contains("unknown model \"gpt-9\"") && err.contains("llama-3.1-405b"),
        "{err}"
    );
    let o = ringlab(&[
        "plan",
        "--nodes",
        "2",
        "--gpus-per-node",
        "8",
        "--model",
        "nope",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("known models"), "{}", stderr(&o));
}

#[test]
fn custom_model_needs_its_numbers() {
    let o = ringlab(&["tp", "--model", "custom", "--tp", "4"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--hidden"), "{}", stderr(&o));
    let o = ringlab(&[
        "tp",
        "--model",
        "custom",
        "--hidden",
        "4096",
        "--layers",
        "32",
        "--heads",
        "32",
        "--kv-heads",
        "8",
        "--tp",
        "4",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(json(&o)["sent_per_gpu_per_allreduce"], 12288);
}

#[test]
fn bad_values_are_usage_errors() {
    for args in [
        &["tp", "--model", "llama-3.1-8b", "--tp", "0"][..],
        &[
            "tp",
            "--model",
            "llama-3.1-8b",
            "--tp",
            "8",
            "--tokens",
            "0",
        ],
        &[
            "plan",
            "--nodes",
            "0",
            "--gpus-per-node",
            "8",
            "--model",
            "llama-3.1-8b",
        ],
        &[
            "plan",
            "--nodes",
            "2",
            "--gpus-per-node",
            "99",
            "--model",
            "llama-3.1-8b",
        ],
        &[
            "plan",
            "--nodes",
            "2",
            "--gpus-per-node",
            "8",
            "--model",
            "llama-3.1-8b",
            "--backend",
            "slurm",
        ],
        &[
            "plan",
            "--nodes",
            "2",
            "--gpus-per-node",
            "8",
            "--model",
            "llama-3.1-8b",
            "--head-ip",
            "10.0.0",
        ],
        &[
            "plan",
            "--nodes",
            "2",
            "--gpus-per-node",
            "8",
            "--model",
            "llama-3.1-8b",
            "--inter",
            "pigeon",
        ],
    ] {
        let o = ringlab(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(!stderr(&o).is_empty(), "{args:?} gave no message");
        assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
    }
}

#[test]
fn plan_2x8_llama_70b_prints_commands_for_every_node() {
    let o = ringlab(&[
        "plan",
        "--nodes",
        "2",
        "--gpus-per-node",
        "8",
        "--model",
        "llama-3.1-70b",
        "--head-ip",
        "10.0.0.1",
        "--iface",
        "ens5",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    for want in [
        "TP 8 × PP 2",
        "--nnodes 2 --node-rank 0",
        "--node-rank 1",
        "--headless",
        "ray start --head --port=6379",
        "ray start --address=10.0.0.1:6379",
        "--distributed-executor-backend ray",
        "export NCCL_SOCKET_IFNAME=ens5",
        "export GLOO_SOCKET_IFNAME=ens5",
        "export VLLM_HOST_IP=10.0.0.1",
    ] {
        assert!(out.contains(want), "missing {want}:\n{out}");
    }
}

#[test]
fn plan_backend_filter_and_json() {
    let o = ringlab(&[
        "plan",
        "--nodes",
        "2",
        "--gpus-per-node",
        "8",
        "--model",
        "llama-3.1-405b",
        "--backend",
        "ray",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v = json(&o);
    assert_eq!(v["tp"], 8);
    assert_eq!(v["pp"], 2);
    assert_eq!(v["memory"]["fits"], true);
    let launches = v["launches"].as_array().expect("launches");
    assert_eq!(launches.len(), 1);
    assert_eq!(launches[0]["backend"], "ray");
    let text = ringlab(&[
        "plan",
        "--nodes",
        "2",
        "--gpus-per-node",
        "8",
        "--model",
        "llama-3.1-405b",
        "--backend",
        "mp",
    ]);
    assert!(!stdout(&text).contains("ray start"), "{}", stdout(&text));
}

#[test]
fn plan_that_cannot_fit_exits_1() {
    let o = ringlab(&[
        "plan",
        "--nodes",
        "1",
        "--gpus-per-node",
        "8",
        "--model",
        "llama-3.1-405b",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stdout(&o).contains("won't fit"), "{}", stdout(&o));
}

#[test]
fn plan_text_fits_an_80_column_terminal() {
    let o = ringlab(&[
        "plan",
        "--nodes",
        "4",
        "--gpus-per-node",
        "8",
        "--model",
        "mixtral-8x7b",
        "--head-ip",
        "192.168.100.200",
    ]);
    for l in stdout(&o).lines() {
        if l.contains("VLLM_HOST_IP=$(") {
            continue;
        }
        assert!(l.chars().count() <= 80, "too wide: {l}");
    }
}

/// `--tokens` takes a count as sizes are written (`1e3`), and refuses what is not one by name.
#[test]
fn tp_tokens_takes_1e3_and_names_a_bad_count() {
    let args = |t: &str| {
        ringlab(&[
            "tp",
            "--model",
            "llama-3.1-70b",
            "--tp",
            "8",
            "--tokens",
            t,
            "--json",
        ])
    };
    let o = args("1e3");
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(json(&o)["tokens"], 1000);
    for (bad, says) in [
        ("1.5", "not a whole number"),
        ("0", "1..=1048576"),
        ("lots", "\"lots\""),
    ] {
        let o = args(bad);
        assert_eq!(o.status.code(), Some(2), "{bad}");
        assert!(stderr(&o).contains(says), "{bad}: {}", stderr(&o));
        assert!(stderr(&o).contains("--tokens"), "{}", stderr(&o));
    }
}

/// One node names no link between nodes, and a plan that cannot run gives no commands to copy
/// (L25).
#[test]
fn one_node_has_no_between_and_a_plan_that_wont_fit_has_no_launch() {
    let o = ringlab(&[
        "plan",
        "--nodes",
        "1",
        "--gpus-per-node",
        "1",
        "--model",
        "llama-3.1-405b",
    ]);
    let out = stdout(&o);
    assert!(
        out.lines()
            .next()
            .is_some_and(|l| l.ends_with("(NVLink 4 inside)")),
        "{out}"
    );
    assert!(out.contains("WON'T FIT"), "{out}");
    assert!(!out.contains("Launch with"), "{out}");
    assert!(!out.contains("vllm serve"), "{out}");
    assert!(out.contains("No launch commands"), "{out}");
    let o = ringlab(&[
        "plan",
        "--nodes",
        "2",
        "--gpus-per-node",
        "8",
        "--model",
        "llama-3.1-70b",
    ]);
    let out = stdout(&o);
    assert!(out.contains(" between)"), "{out}");
    assert!(out.contains("Launch with"), "{out}");
}
