//! The exported sanity script, run by python3 against a stand-in `torch` package (no GPU, no
//! PyTorch needed): it passes device_id= to init_process_group, so PyTorch creates the NCCL
//! communicator there rather than at the first collective, and it refuses a world of one
//! process even when the environment claimed more.

use std::path::Path;
use std::process::{Command, Output};

const FAKE_TORCH: &str = r#"
class device:
    def __init__(self, kind, index):
        self.kind, self.index = kind, index
    def __repr__(self):
        return f"{self.kind}:{self.index}"

class _Scalar:
    def __init__(self, v):
        self.v = v
    def item(self):
        return self.v

class _Tensor:
    def __init__(self, v):
        self.v = v
    def mean(self):
        return _Scalar(self.v)
    def __eq__(self, other):
        return self.v == other

def ones(n, device=None):
    return _Tensor(1.0)

def all(x):
    return bool(x)

class cuda:
    @staticmethod
    def set_device(d):
        pass
    @staticmethod
    def synchronize():
        pass
"#;

const FAKE_DIST: &str = r#"
import os, sys

class ReduceOp:
    SUM = "sum"

_world = int(os.environ["FAKE_WORLD"])

def init_process_group(backend, device_id=None):
    print(f"fake init backend={backend} device_id={device_id!r}", file=sys.stderr)

def get_rank():
    return 0

def get_world_size():
    return _world

def all_reduce(x, op=None):
    x.v *= _world

def destroy_process_group():
    pass
"#;

fn setup(dir: &Path) -> std::path::PathBuf {
    let pkg = dir.join("torch");
    std::fs::create_dir_all(pkg.join("distributed")).expect("mkdir");
    std::fs::write(pkg.join("__init__.py"), FAKE_TORCH).expect("write");
    std::fs::write(pkg.join("distributed/__init__.py"), FAKE_DIST).expect("write");
    let script = dir.join("nccl_sanity.py");
    let out = Command::new(env!("CARGO_BIN_EXE_ringlab"))
        .args(["export", "sanity-script", "--out"])
        .arg(&script)
        .output()
        .expect("ringlab runs");
    assert!(out.status.success(), "{out:?}");
    script
}

fn run(dir: &Path, script: &Path, env_world: &str, real_world: &str) -> Output {
    Command::new("python3")
        .arg(script)
        .env("PYTHONPATH", dir)
        .env("WORLD_SIZE", env_world)
        .env("LOCAL_RANK", "0")
        .env("FAKE_WORLD", real_world)
        .output()
        .expect("python3 runs")
}

#[test]
fn the_script_binds_the_device_in_init_and_passes_with_two_ranks() {
    let dir = tempfile::tempdir().expect("tmp");
    let script = setup(dir.path());
    let out = run(dir.path(), &script, "2", "2");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("fake init backend=nccl device_id=cuda:0"),
        "{stderr}"
    );
    assert!(stdout.contains("PASS: rank 0 of 2"), "{stdout}");
}

#[test]
fn the_script_refuses_a_world_of_one_found_after_init() {
    let dir = tempfile::tempdir().expect("tmp");
    let script = setup(dir.path());
    let out = run(dir.path(), &script, "2", "1");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("world size is 1 after init_process_group"),
        "{stderr}"
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains("PASS"));
}
