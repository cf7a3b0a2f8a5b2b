//! `ringlab bench` started by a cluster launcher runs as one rank of the launcher's world:
//! torchrun (with the exact environment torch/distributed's elastic agent gives each worker),
//! Open MPI's `mpirun`, and Slurm's `srun` on a real one-host cluster
//! (scripts/slurm/one-host.sh). Each test checks one table (rank 0's), the world size, #wrong
//! 0 and nothing left running. Where the launcher is not installed the test runs the two
//! processes with the variables that launcher sets (scripts/slurm/FACTS.md) and says so; CI
//! installs Open MPI and Slurm, so there the real ones run.

use std::process::{Command, Output, Stdio};

use crate::common::{tag, tagged};

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_ringlab")
}

const BENCH: [&str; 11] = [
    "bench",
    "--backend",
    "tcp",
    "-b",
    "1K",
    "-e",
    "64K",
    "-f",
    "8",
    "-n",
    "3",
];

/// Rank 0's JSON rows: 3 sizes × 2 placements, every one for `world` ranks and 0 wrong.
fn assert_one_table(stdout: &str, world: usize) {
    let rows: Vec<serde_json::Value> = stdout
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).expect("a JSON row"))
        .filter(|r: &serde_json::Value| r.get("summary").is_none())
        .collect();
    assert_eq!(
        rows.len(),
        6,
        "one table of 3 sizes x 2 placements: {stdout}"
    );
    for r in &rows {
        assert_eq!(r["ranks"], world, "{r}");
        assert_eq!(r["wrong"], 0, "{r}");
        assert!(r["time_us"].as_f64().is_some_and(|t| t > 0.0), "{r}");
    }
}

/// Start one process per rank with `env(rank)` on top of this one's, wait for all.
fn by_hand(
    world: usize,
    env: impl Fn(usize) -> Vec<(String, String)>,
    tag_name: &str,
) -> Vec<Output> {
    let children: Vec<_> = (0..world)
        .map(|r| {
            let mut c = Command::new(bin());
            tag(&mut c, tag_name)
                .args(BENCH)
                .arg("--json")
                .envs(env(r))
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            c.spawn().expect("start a rank process")
        })
        .collect();
    children
        .into_iter()
        .map(|c| c.wait_with_output().expect("wait"))
        .collect()
}

fn check_by_hand(outs: &[Output], world: usize, tag_name: &str) {
    for (r, o) in outs.iter().enumerate() {
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "rank {r}: {stderr}");
        assert!(
            stderr.contains(&format!("as rank {r} of {world}")),
            "rank {r}: {stderr}"
        );
        let stdout = String::from_utf8_lossy(&o.stdout);
        if r == 0 {
            assert_one_table(&stdout, world);
        } else {
            assert!(
                stdout.trim().is_empty(),
                "rank {r} prints nothing: {stdout}"
            );
        }
    }
    assert!(
        tagged(tag_name, "__rank").is_empty(),
        "a rank was left running"
    );
}

/// torchrun's agent store, held on MASTER_PORT as the agent holds it while its workers run,
/// at a port P whose next one (ringlab's store under the agent) is free too. Below Linux's
/// ephemeral range (32768 up), where the other tests' port-0 sockets land; even ports only,
/// so two tests here never take each other's P + 1.
fn agent_store() -> (std::net::TcpListener, u16) {
    let start = (std::process::id() % 5000) as u16;
    (0..5000u16)
        .map(|k| 20000 + 2 * ((start + k) % 5000))
        .find_map(|p| {
            let held = std::net::TcpListener::bind(("127.0.0.1", p)).ok()?;
            std::net::TcpListener::bind(("127.0.0.1", p + 1)).ok()?;
            Some((held, p))
        })
        .expect("two free ports below 30000")
}

/// What torchrun's elastic agent sets for each worker (torch/distributed/elastic/agent/server/
/// local_elastic_agent.py, `_start_workers`), for `--nproc-per-node 2 --no-python`.
fn torchrun_env(rank: usize, world: usize, port: u16) -> Vec<(String, String)> {
    [
        ("RANK", rank.to_string()),
        ("GROUP_RANK", "0".into()),
        ("ROLE_RANK", rank.to_string()),
        ("ROLE_NAME", "default".into()),
        ("LOCAL_RANK", rank.to_string()),
        ("LOCAL_WORLD_SIZE", world.to_string()),
        ("WORLD_SIZE", world.to_string()),
        ("GROUP_WORLD_SIZE", "1".into()),
        ("ROLE_WORLD_SIZE", world.to_string()),
        ("MASTER_ADDR", "127.0.0.1".into()),
        ("MASTER_PORT", port.to_string()),
        ("TORCHELASTIC_RESTART_COUNT", "0".into()),
        ("TORCHELASTIC_MAX_RESTARTS", "0".into()),
        ("TORCHELASTIC_RUN_ID", "none".into()),
        ("TORCHELASTIC_USE_AGENT_STORE", "False".into()),
        ("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1".into()),
        ("OMP_NUM_THREADS", "1".into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

#[test]
fn torchrun_workers_form_one_world_and_rank_0_prints_one_table() {
    // torchrun's agent serves its TCPStore on MASTER_PORT while the workers run: hold it.
    let (agent_store, port) = agent_store();
    let outs = by_hand(2, |r| torchrun_env(r, 2, port), "launch-torchrun");
    check_by_hand(&outs, 2, "launch-torchrun");
    drop(agent_store);
    // The real torchrun, where torch is installed.
    if Command::new("torchrun")
        .arg("--help")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        let o = Command::new("torchrun")
            .args(["--nproc-per-node", "2", "--no-python", bin()])
            .args(BENCH)
            .arg("--json")
            .output()
            .expect("torchrun");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert_one_table(&String::from_utf8_lossy(&o.stdout), 2);
    } else {
        eprintln!("torchrun is not installed here: its workers' environment was set by hand");
    }
}

#[test]
fn mpirun_ranks_form_one_world_and_rank_0_prints_one_table() {
    let has_mpirun = Command::new("mpirun")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_mpirun {
        eprintln!(
            "mpirun is not installed here (CI installs openmpi-bin): Open MPI's variables set by hand"
        );
        let outs = by_hand(
            2,
            |r| {
                [
                    ("OMPI_COMM_WORLD_RANK", r.to_string()),
                    ("OMPI_COMM_WORLD_SIZE", "2".into()),
                    ("OMPI_COMM_WORLD_LOCAL_RANK", r.to_string()),
                    ("OMPI_COMM_WORLD_LOCAL_SIZE", "2".into()),
                    ("PMIX_NAMESPACE", format!("test{}", std::process::id())),
                ]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect()
            },
            "launch-mpi",
        );
        check_by_hand(&outs, 2, "launch-mpi");
        return;
    }
    for np in ["2", "4"] {
        let mut c = Command::new("mpirun");
        tag(&mut c, "launch-mpirun")
            .args(["--allow-run-as-root", "--oversubscribe", "-np", np, bin()])
            .args(BENCH)
            .arg("--json")
            .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
        let o = c.output().expect("mpirun");
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "-np {np}: {stderr}");
        // Every rank's stdout reaches mpirun's: still one table.
        assert_one_table(&String::from_utf8_lossy(&o.stdout), np.parse().unwrap());
        assert!(
            tagged("launch-mpirun", "__rank").is_empty(),
            "a rank was left running"
        );
    }
}

/// A real one-host Slurm cluster where Slurm is installed, this is root and the slow tier runs
/// (bringing up slurmctld, slurmd and munge takes most of a minute); else srun's variables set
/// by hand.
#[test]
fn srun_tasks_form_one_world_and_rank_0_prints_one_table() {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/slurm/one-host.sh");
    let root = unsafe { libc::geteuid() } == 0;
    // `srun --version` wants a configuration; being on PATH is the question here.
    let has_slurm = ["srun", "sbatch", "slurmctld", "slurmd", "munged"]
        .iter()
        .all(|t| {
            Command::new("sh")
                .args(["-c", &format!("command -v {t}")])
                .output()
                .is_ok_and(|o| o.status.success())
        });
    if !(root && has_slurm && crate::common::slow_tier()) {
        eprintln!(
            "no Slurm here (or not root, or the fast tier; CI installs slurm-wlm and runs the \
             slow tier): srun's task variables set by hand"
        );
        // No MASTER_PORT: every task derives the same one from the job and step.
        let outs = by_hand(
            2,
            |r| {
                [
                    ("SLURM_JOB_ID", format!("{}", std::process::id())),
                    ("SLURM_STEP_ID", "0".into()),
                    ("SLURM_PROCID", r.to_string()),
                    ("SLURM_LOCALID", r.to_string()),
                    ("SLURM_NTASKS", "2".into()),
                    ("SLURM_STEP_NUM_TASKS", "2".into()),
                    ("SLURM_STEP_NUM_NODES", "1".into()),
                    ("SLURM_STEP_NODELIST", "localhost".into()),
                ]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect()
            },
            "launch-srun",
        );
        check_by_hand(&outs, 2, "launch-srun");
        return;
    }
    let _guard = crate::common::clusters();
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path().to_str().expect("utf-8 path");
    let up = Command::new("bash")
        .args([script, "up", d])
        // Wait for slurmctld's first scheduling pass, so sbatch --wait does not back off.
        .env("ONEHOST_WAIT_SCHED", "1")
        .output()
        .expect("one-host.sh up");
    assert!(
        up.status.success(),
        "slurm up: {}",
        String::from_utf8_lossy(&up.stderr)
    );
    let conf = format!("{d}/slurm.conf");
    let run = |args: &[&str]| {
        let mut c = Command::new(args[0]);
        tag(&mut c, "launch-slurm")
            .args(&args[1..])
            .env("SLURM_CONF", &conf);
        c.output().expect("a Slurm command")
    };
    let srun: Vec<&str> = ["timeout", "120", "srun", "-N1", "-n2", bin()]
        .into_iter()
        .chain(BENCH)
        .chain(["--json"])
        .collect();
    let o = run(&srun);
    let srun_ok = o.status.success();
    let srun_out = String::from_utf8_lossy(&o.stdout).into_owned();
    let srun_err = String::from_utf8_lossy(&o.stderr).into_owned();
    // sbatch: the batch script itself is no rank (SLURM_PROCID=0 but no step), its srun is.
    let job = dir.path().join("job.sh");
    std::fs::write(
        &job,
        format!(
            "#!/bin/bash\nsrun -n2 {} {} --json > {d}/out.json\n",
            bin(),
            BENCH.join(" ")
        ),
    )
    .expect("job script");
    let b = run(&[
        "timeout",
        "120",
        "sbatch",
        "--wait",
        "-n2",
        "-o",
        &format!("{d}/job.log"),
        job.to_str().unwrap_or(""),
    ]);
    let batch_out = std::fs::read_to_string(dir.path().join("out.json")).unwrap_or_default();
    let batch_log = std::fs::read_to_string(dir.path().join("job.log")).unwrap_or_default();
    let down = Command::new("bash")
        .args([script, "down", d])
        .output()
        .expect("one-host.sh down");
    assert!(srun_ok, "srun: {srun_err}");
    assert_one_table(&srun_out, 2);
    assert!(
        b.status.success(),
        "sbatch: {} {batch_log}",
        String::from_utf8_lossy(&b.stderr)
    );
    assert_one_table(&batch_out, 2);
    assert!(
        down.status.success(),
        "slurm down: {}",
        String::from_utf8_lossy(&down.stderr)
    );
    assert!(
        tagged("launch-slurm", "__rank").is_empty(),
        "a rank was left running"
    );
}

#[test]
fn bad_launcher_environments_are_refused_naming_the_variable() {
    let run = |env: &[(&str, &str)], extra: &[&str]| {
        let o = Command::new(bin())
            .args(BENCH)
            .args(extra)
            .envs(env.iter().copied())
            .output()
            .expect("ringlab");
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let (code, err) = run(&[("RANK", "0")], &[]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("RANK is set but WORLD_SIZE is not"), "{err}");
    let (code, err) = run(&[("RANK", "2"), ("WORLD_SIZE", "2")], &[]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("RANK=2 is not below WORLD_SIZE=2"), "{err}");
    let (code, err) = run(
        &[
            ("RANK", "0"),
            ("WORLD_SIZE", "2"),
            ("MASTER_ADDR", "127.0.0.1"),
        ],
        &["--nproc-per-node", "2"],
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("--nproc-per-node") && err.contains("--launcher none"),
        "{err}"
    );
    let (code, err) = run(&[], &["--launcher", "slurm"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("SLURM_STEP_ID"), "{err}");
    let (code, err) = run(&[], &["--launcher", "pbs"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("`pbs` is not a launcher"), "{err}");
    // A batch script's variables (no step) and --launcher none: ringlab starts its own ranks.
    for (env, extra) in [
        (
            &[
                ("SLURM_PROCID", "0"),
                ("SLURM_NTASKS", "2"),
                ("SLURM_JOB_ID", "5"),
            ][..],
            &[][..],
        ),
        (
            &[("RANK", "1"), ("WORLD_SIZE", "2")][..],
            &["--launcher", "none"][..],
        ),
    ] {
        let o = Command::new(bin())
            .args(BENCH)
            .args(["--nproc-per-node", "2", "--json"])
            .args(extra)
            .envs(env.iter().copied())
            .output()
            .expect("ringlab");
        assert!(
            o.status.success(),
            "{env:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert_one_table(&String::from_utf8_lossy(&o.stdout), 2);
    }
}

/// `sanity` under a launcher: each process checks its rank's all-reduce of ones; rank 0
/// prints one verdict for the world, the others nothing.
#[test]
fn sanity_under_torchrun_checks_one_world() {
    let (agent_store, port) = agent_store();
    let children: Vec<_> = (0..2)
        .map(|r| {
            let mut c = Command::new(bin());
            tag(&mut c, "launch-sanity")
                .args(["sanity", "--backend", "tcp", "--json"])
                .envs(torchrun_env(r, 2, port))
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            c.spawn().expect("start a rank process")
        })
        .collect();
    let outs: Vec<Output> = children
        .into_iter()
        .map(|c| c.wait_with_output().expect("wait"))
        .collect();
    for (r, o) in outs.iter().enumerate() {
        assert!(
            o.status.success(),
            "rank {r}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let v: serde_json::Value =
        serde_json::from_slice(&outs[0].stdout).expect("rank 0 prints one JSON verdict");
    assert_eq!(v["world_size"], 2, "{v}");
    assert_eq!(v["pass"], true, "{v}");
    assert_eq!(v["ranks"][0]["value"], 2.0, "{v}");
    assert!(outs[1].stdout.is_empty(), "rank 1 prints nothing");
    drop(agent_store);
    assert!(
        tagged("launch-sanity", "__rank").is_empty(),
        "a rank was left running"
    );
}
