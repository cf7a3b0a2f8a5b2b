//! `ringlab export sanity-script`: the script it writes compiles, and it never clobbers a file.

use std::process::Command;

fn ringlab() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ringlab"))
}

fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("ringlab-export-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

#[test]
fn sanity_script_is_valid_python_and_says_how_to_run_it() {
    let dir = temp_dir("compile");
    let file = dir.join("nccl_sanity.py");
    let out = ringlab()
        .args(["export", "sanity-script", "--out"])
        .arg(&file)
        .output()
        .expect("runs");
    assert!(out.status.success(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("torchrun --nproc-per-node=2"), "{stderr}");
    assert!(stderr.contains("--nnodes 2 --node-rank R"), "{stderr}");
    assert!(stderr.contains("--master-port 29500"), "{stderr}");
    assert!(stderr.contains("NCCL_DEBUG=INFO"), "{stderr}");
    assert!(stderr.contains("NCCL_SOCKET_IFNAME="), "{stderr}");
    assert!(stderr.contains("GLOO_SOCKET_IFNAME="), "{stderr}");

    let script = std::fs::read_to_string(&file).expect("written");
    for needle in [
        "init_process_group(backend=\"nccl\")",
        "LOCAL_RANK",
        "all_reduce",
        "PASS",
        "FAIL",
        "refusing world size 1",
    ] {
        assert!(script.contains(needle), "missing {needle}");
    }
    let compiled = Command::new("python3")
        .args(["-m", "py_compile"])
        .arg(&file)
        .output()
        .expect("python3 runs");
    assert!(
        compiled.status.success(),
        "py_compile: {}",
        String::from_utf8_lossy(&compiled.stderr)
    );

    // The same script on stdout.
    let out = ringlab()
        .args(["export", "sanity-script"])
        .output()
        .expect("runs");
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), script);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sanity_script_refuses_to_overwrite_without_force() {
    let dir = temp_dir("force");
    let file = dir.join("keep.py");
    std::fs::write(&file, "precious\n").expect("write");
    let out = ringlab()
        .args(["export", "sanity-script", "--out"])
        .arg(&file)
        .output()
        .expect("runs");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("already exists") && stderr.contains("--force"),
        "{stderr}"
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "precious\n");

    let out = ringlab()
        .args(["export", "sanity-script", "--force", "--out"])
        .arg(&file)
        .output()
        .expect("runs");
    assert!(out.status.success(), "{out:?}");
    assert!(
        std::fs::read_to_string(&file)
            .unwrap()
            .contains("all_reduce")
    );
    let _ = std::fs::remove_dir_all(&dir);
}

fn export(args: &[&str]) -> String {
    let out = ringlab()
        .args(["export", "sanity-script"])
        .args(args)
        .output()
        .expect("runs");
    assert!(out.status.success(), "{args:?}: {out:?}");
    String::from_utf8(out.stdout).expect("utf-8")
}

/// The script a job carries in its here-document, byte for byte the bare one.
fn carried_script(job: &str) -> &str {
    let start = job.find("<<'RINGLAB_PY'\n").expect("a here-document") + "<<'RINGLAB_PY'\n".len();
    let end = job[start..].find("\nRINGLAB_PY\n").expect("its end") + start + 1;
    &job[start..end]
}

fn bash_syntax_ok(text: &str) {
    let mut c = Command::new("bash")
        .arg("-n")
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("bash");
    use std::io::Write;
    c.stdin
        .take()
        .expect("stdin")
        .write_all(text.as_bytes())
        .expect("write");
    let o = c.wait_with_output().expect("bash -n");
    assert!(
        o.status.success(),
        "bash -n: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn the_slurm_job_carries_the_script_and_maps_sruns_variables() {
    let bare = export(&[]);
    let job = export(&[
        "--launcher",
        "slurm",
        "--nodes",
        "4",
        "--gpus-per-node",
        "8",
    ]);
    bash_syntax_ok(&job);
    assert_eq!(carried_script(&job), bare);
    for needle in [
        "#SBATCH --nodes=4",
        "#SBATCH --ntasks-per-node=8",
        "#SBATCH --gpus-per-node=8",
        "scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n 1",
        "RANK=$SLURM_PROCID WORLD_SIZE=$SLURM_STEP_NUM_TASKS LOCAL_RANK=$SLURM_LOCALID",
        "srun --output=%x-%j-%t.out",
        "srun --output=%x-%j-bench-%t.out ringlab bench",
    ] {
        assert!(job.contains(needle), "missing {needle}:\n{job}");
    }
    // Every #SBATCH line comes before the first command, or sbatch ignores it.
    let first_cmd = job.find("set -euo pipefail").expect("commands");
    assert!(job.rfind("#SBATCH").expect("directives") < first_cmd);
}

#[test]
fn the_torchrun_job_runs_on_every_node_and_refuses_without_its_rank() {
    let job = export(&[
        "--launcher",
        "torchrun",
        "--nodes",
        "2",
        "--gpus-per-node",
        "4",
    ]);
    bash_syntax_ok(&job);
    assert_eq!(carried_script(&job), export(&[]));
    assert!(job.contains("NNODES=\"${NNODES:-2}\""), "{job}");
    assert!(job.contains("NPROC=\"${NPROC:-4}\""), "{job}");
    assert!(job.contains("run --no-python ringlab bench"), "{job}");
    // Without NODE_RANK it stops before anything runs, saying what to set.
    let dir = tempfile::tempdir().expect("tempdir");
    let o = Command::new("bash")
        .args(["-c", &job])
        .current_dir(dir.path())
        .env_remove("NODE_RANK")
        .output()
        .expect("bash");
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("set NODE_RANK"), "{err}");
    assert!(!dir.path().join("nccl_sanity.py").exists());
}

#[test]
fn the_k8s_manifest_parses_and_has_what_a_pytorchjob_needs() {
    use yaml_rust2::YamlLoader;
    let text = export(&["--launcher", "k8s", "--nodes", "3", "--gpus-per-node", "8"]);
    let docs = YamlLoader::load_from_str(&text).expect("valid YAML");
    assert_eq!(docs.len(), 2, "a ConfigMap and a PyTorchJob");
    let cm = &docs[0];
    assert_eq!(cm["kind"].as_str(), Some("ConfigMap"));
    assert_eq!(
        cm["data"]["nccl_sanity.py"].as_str(),
        Some(export(&[]).as_str()),
        "the ConfigMap carries the script byte for byte"
    );
    let job = &docs[1];
    assert_eq!(job["apiVersion"].as_str(), Some("kubeflow.org/v1"));
    assert_eq!(job["kind"].as_str(), Some("PyTorchJob"));
    assert_eq!(job["metadata"]["name"].as_str(), Some("nccl-sanity"));
    let specs = &job["spec"]["pytorchReplicaSpecs"];
    assert_eq!(specs["Master"]["replicas"].as_i64(), Some(1));
    assert_eq!(specs["Worker"]["replicas"].as_i64(), Some(2));
    for kind in ["Master", "Worker"] {
        let pod = &specs[kind]["template"]["spec"];
        let c = &pod["containers"][0];
        assert_eq!(c["name"].as_str(), Some("pytorch"), "the operator's name");
        assert!(c["image"].as_str().is_some_and(|i| !i.is_empty()));
        assert_eq!(c["resources"]["limits"]["nvidia.com/gpu"].as_i64(), Some(8));
        let args = c["args"][0].as_str().expect("the command line");
        assert!(args.contains("--nnodes=3 --nproc-per-node=8"), "{args}");
        assert!(args.contains("--node-rank=$(RANK)"), "{args}");
        assert!(args.contains("/workspace/nccl_sanity.py"), "{args}");
        let mounts = c["volumeMounts"].as_vec().expect("mounts");
        assert!(
            mounts
                .iter()
                .any(|m| m["mountPath"].as_str() == Some("/dev/shm"))
        );
        let vols = pod["volumes"].as_vec().expect("volumes");
        assert!(vols.iter().any(|v| {
            v["name"].as_str() == Some("dshm") && v["emptyDir"]["medium"].as_str() == Some("Memory")
        }));
    }
    // One pod: no Worker replica.
    let one = YamlLoader::load_from_str(&export(&["--launcher", "k8s", "--nodes", "1"]))
        .expect("valid YAML");
    assert!(one[1]["spec"]["pytorchReplicaSpecs"]["Worker"].is_badvalue());
}
