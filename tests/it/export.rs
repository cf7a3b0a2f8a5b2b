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
