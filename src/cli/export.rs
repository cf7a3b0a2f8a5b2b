//! `ringlab export`: files to take to a real cluster. `export sanity-script` writes the classic
//! NCCL sanity check (an all-reduce of ones must equal the world size) as a torch.distributed
//! script, and says on stderr how to launch it on one node and on two.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Debug, clap::Subcommand)]
pub enum ExportWhat {
    /// A torch.distributed NCCL sanity script: all-reduce of ones, PASS/FAIL per rank.
    ///
    /// Writes to stdout without --out; the commands to launch it go to stderr.
    SanityScript {
        /// Instead of the bare script, a job for this launcher that carries the script and
        /// runs it, then `ringlab bench` where ringlab is on the nodes: slurm (an sbatch
        /// script), torchrun (a shell script to run on every node) or k8s (a Kubeflow
        /// PyTorchJob with its ConfigMap).
        #[arg(long, value_enum)]
        launcher: Option<ExportLauncher>,
        /// Nodes (pods for k8s) of the job.
        #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=4096))]
        nodes: u32,
        /// GPUs per node: one rank each.
        #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=64))]
        gpus_per_node: u32,
        /// k8s: the container image (it needs PyTorch with CUDA).
        #[arg(long, default_value = "nvcr.io/nvidia/pytorch:24.12-py3")]
        image: String,
        /// Write the script to this file instead of stdout.
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
        /// Overwrite FILE if it exists.
        #[arg(long, requires = "out")]
        force: bool,
    },
}

/// The launchers `export sanity-script --launcher` writes a job for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportLauncher {
    Slurm,
    Torchrun,
    K8s,
}

/// The sanity script as a shell here-document that writes it to `nccl_sanity.py`.
fn heredoc() -> String {
    format!("cat > {SANITY_FILE} <<'RINGLAB_PY'\n{SANITY_SCRIPT}RINGLAB_PY\n")
}

/// An sbatch script: `nodes` nodes × `gpus` tasks, one GPU each (every task sees the node's
/// GPUs and takes the one of its local rank, as the script's LOCAL_RANK expects; with
/// --gpus-per-task each task would see only its own, as cuda:0). torch.distributed reads
/// RANK, WORLD_SIZE and LOCAL_RANK, which srun calls SLURM_PROCID, SLURM_STEP_NUM_TASKS and
/// SLURM_LOCALID; MASTER_ADDR is the job's first host (`scontrol show hostnames`). Each task
/// writes its own log (`%x-%j-%t.out`), the layout `ringlab doctor --log` reads.
pub fn slurm_script(nodes: u32, gpus: u32) -> String {
    format!(
        r#"#!/bin/bash
# NCCL sanity check as a Slurm job, written by `ringlab export sanity-script --launcher slurm`.
# Submit: sbatch nccl_sanity.sbatch   Read:   ringlab doctor --log 'nccl-sanity-*.out'
#SBATCH --job-name=nccl-sanity
#SBATCH --nodes={nodes}
#SBATCH --ntasks-per-node={gpus}
#SBATCH --gpus-per-node={gpus}
#SBATCH --time=00:15:00
#SBATCH --output=%x-%j.out
set -euo pipefail

# Rank 0's host and a port for the rendezvous (torch's TCPStore, then ringlab's store).
export MASTER_ADDR="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)"
export MASTER_PORT=$((15000 + SLURM_JOB_ID % 15000))
export NCCL_DEBUG=INFO
{heredoc}
# Step 1: one task per GPU; every task prints PASS or FAIL.
srun --output=%x-%j-%t.out bash -c   'RANK=$SLURM_PROCID WORLD_SIZE=$SLURM_STEP_NUM_TASKS LOCAL_RANK=$SLURM_LOCALID exec python3 {SANITY_FILE}'

# Step 2: nccl-tests' sweep with ringlab, where it is installed on the nodes (it reads srun's
# variables and runs as one rank per task; rank 0 prints the table).
if command -v ringlab >/dev/null 2>&1; then
  srun --output=%x-%j-bench-%t.out ringlab bench -b 8 -e 1G -f 2
fi
"#,
        heredoc = heredoc()
    )
}

/// A shell script for every node of a torchrun job: NODE_RANK 0 on the head node.
pub fn torchrun_script(nodes: u32, gpus: u32) -> String {
    format!(
        r#"#!/bin/bash
# NCCL sanity check under torchrun, written by `ringlab export sanity-script --launcher torchrun`.
# Run on every node, at the same time:
#   NODE_RANK=0 MASTER_ADDR=<head node's address> bash run_nccl_sanity.sh   # on the head node
#   NODE_RANK=1 MASTER_ADDR=<head node's address> bash run_nccl_sanity.sh   # on the next, ...
# Set NCCL_SOCKET_IFNAME (and GLOO_SOCKET_IFNAME) to the NIC that reaches the other nodes.
set -euo pipefail
NNODES="${{NNODES:-{nodes}}}"
NPROC="${{NPROC:-{gpus}}}"
NODE_RANK="${{NODE_RANK:?set NODE_RANK: 0 on the head node, 1..$((NNODES - 1)) on the others}}"
MASTER_ADDR="${{MASTER_ADDR:?set MASTER_ADDR to the address of the head node}}"
MASTER_PORT="${{MASTER_PORT:-29500}}"
export NCCL_DEBUG="${{NCCL_DEBUG:-INFO}}"
{heredoc}
run() {{
  torchrun --nnodes "$NNODES" --node-rank "$NODE_RANK" --nproc-per-node "$NPROC"     --master-addr "$MASTER_ADDR" --master-port "$MASTER_PORT" "$@"
}}
# Step 1: every rank prints PASS or FAIL.
run {SANITY_FILE}
# Step 2: nccl-tests' sweep with ringlab, where it is installed (one rank per worker;
# rank 0 prints the table; its store takes the port after torchrun's).
if command -v ringlab >/dev/null 2>&1; then
  run --no-python ringlab bench -b 8 -e 1G -f 2
fi
"#,
        heredoc = heredoc()
    )
}

/// A Kubeflow PyTorchJob (kubeflow.org/v1, training-operator) and the ConfigMap carrying the
/// script. The operator gives each pod RANK (the pod's index, the master 0), MASTER_ADDR and
/// MASTER_PORT (pkg/controller.v1/pytorch/envvar.go, master.go at v1.8.1); torchrun is given
/// them explicitly, so older operators without the PET_* variables work too. /dev/shm is a
/// memory emptyDir: a container's default 64 MiB is too small for NCCL's SHM transport.
pub fn k8s_manifest(nodes: u32, gpus: u32, image: &str) -> String {
    let script: String = SANITY_SCRIPT
        .lines()
        .map(|l| {
            if l.is_empty() {
                "\n".to_string()
            } else {
                format!("    {l}\n")
            }
        })
        .collect();
    let replica = |kind: &str, replicas: u32| {
        format!(
            r#"    {kind}:
      replicas: {replicas}
      restartPolicy: OnFailure
      template:
        spec:
          containers:
            - name: pytorch
              image: {image:?}
              command: ["bash", "-c"]
              args:
                - >-
                  torchrun --nnodes={nodes} --nproc-per-node={gpus}
                  --node-rank=$(RANK) --master-addr=$(MASTER_ADDR) --master-port=$(MASTER_PORT)
                  /workspace/{SANITY_FILE}
                  && if command -v ringlab >/dev/null 2>&1; then
                  torchrun --nnodes={nodes} --nproc-per-node={gpus}
                  --node-rank=$(RANK) --master-addr=$(MASTER_ADDR) --master-port=$(MASTER_PORT)
                  --no-python ringlab bench -b 8 -e 1G -f 2; fi
              env:
                - name: NCCL_DEBUG
                  value: INFO
              resources:
                limits:
                  nvidia.com/gpu: {gpus}
              volumeMounts:
                - name: script
                  mountPath: /workspace
                - name: dshm
                  mountPath: /dev/shm
          volumes:
            - name: script
              configMap:
                name: nccl-sanity
            - name: dshm
              emptyDir:
                medium: Memory
"#
        )
    };
    let mut out = format!(
        r#"# NCCL sanity check as a Kubeflow PyTorchJob, written by
# `ringlab export sanity-script --launcher k8s`: {nodes} pod(s) x {gpus} GPU(s).
# Apply: kubectl apply -f nccl_sanity.yaml   Read: kubectl logs -l training.kubeflow.org/job-name=nccl-sanity
apiVersion: v1
kind: ConfigMap
metadata:
  name: nccl-sanity
data:
  {SANITY_FILE}: |
{script}---
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: nccl-sanity
spec:
  pytorchReplicaSpecs:
"#
    );
    out.push_str(&replica("Master", 1));
    if nodes > 1 {
        out.push_str(&replica("Worker", nodes - 1));
    }
    out
}

/// What to launch each exported job with.
fn launcher_help(l: ExportLauncher, file: &str) -> String {
    match l {
        ExportLauncher::Slurm => format!(
            "Submit it: sbatch {file}\nEach task writes nccl-sanity-JOB-TASK.out: every one \
             should say PASS; `ringlab doctor --log 'nccl-sanity-*.out'` reads them all.\n"
        ),
        ExportLauncher::Torchrun => format!(
            "Run it on every node at once, NODE_RANK=0 on the head node:\n\
             \x20 NODE_RANK=0 MASTER_ADDR=HEAD_IP bash {file}\n"
        ),
        ExportLauncher::K8s => format!(
            "Apply it (the Kubeflow training operator must be installed): kubectl apply -f {file}\n\
             Logs: kubectl logs -l training.kubeflow.org/job-name=nccl-sanity\n"
        ),
    }
}

/// The default file name the launch commands use when the script goes to stdout.
pub const SANITY_FILE: &str = "nccl_sanity.py";

/// The script `ringlab export sanity-script` writes.
pub const SANITY_SCRIPT: &str = r#"#!/usr/bin/env python3
"""NCCL sanity check, written by `ringlab export sanity-script`.

Every rank all-reduces (sums) a tensor of ones; the result must equal the world size on every
element. A pass means data really crossed between the GPUs. Run it under torchrun with at least
two processes: with one, the all-reduce has nobody to talk to and proves nothing.

    torchrun --nproc-per-node=2 nccl_sanity.py
"""
import os
import socket
import sys

import torch
import torch.distributed as dist


def main() -> int:
    world_env = int(os.environ.get("WORLD_SIZE", "1"))
    if world_env < 2:
        print(
            "nccl_sanity: refusing world size 1: a one-rank all-reduce moves no data and proves "
            "nothing. Launch at least two processes, e.g. torchrun --nproc-per-node=2 "
            + os.path.basename(sys.argv[0]),
            file=sys.stderr,
        )
        return 2

    local_rank = int(os.environ.get("LOCAL_RANK", "0"))  # set by torchrun
    device = torch.device("cuda", local_rank)
    torch.cuda.set_device(device)  # one GPU per process
    # Waits until every rank joins the TCPStore rendezvous (MASTER_ADDR:MASTER_PORT): a hang
    # here is the rendezvous. Without device_id, PyTorch creates the NCCL communicator lazily, at
    # the first collective, so a bad NCCL interface would hang in all_reduce below instead;
    # device_id makes it create the communicator now (torch.distributed.init_process_group).
    try:
        dist.init_process_group(backend="nccl", device_id=device)
    except TypeError:  # an older PyTorch without device_id=: the communicator comes lazily
        dist.init_process_group(backend="nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    if world < 2:
        print(
            f"nccl_sanity: world size is {world} after init_process_group: a one-rank "
            "all-reduce moves no data and proves nothing; launch at least two processes",
            file=sys.stderr,
        )
        dist.destroy_process_group()
        return 2

    x = torch.ones(1 << 20, device="cuda")
    dist.all_reduce(x, op=dist.ReduceOp.SUM)  # in place, result on every rank
    torch.cuda.synchronize()
    mean = x.mean().item()
    ok = mean == float(world) and bool(torch.all(x == world))
    verdict = "PASS" if ok else "FAIL"
    print(
        f"{verdict}: rank {rank} of {world} on {socket.gethostname()} (cuda:{local_rank}): "
        f"mean = {mean:g}, expected {world}",
        flush=True,
    )

    dist.destroy_process_group()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
"#;

/// How to launch the script at `file` on one node and on two.
pub fn launch_help(file: &str) -> String {
    format!(
        "One node, two GPUs (use --nproc-per-node=8 for all eight):\n\
         \x20 torchrun --nproc-per-node=2 {file}\n\
         \n\
         Two nodes: run on both, R = 0 on the head node (HEAD_IP) and 1 on the other; set the\n\
         interface to the NIC that reaches the other node (see `ip -br addr`):\n\
         \x20 NCCL_DEBUG=INFO NCCL_SOCKET_IFNAME=eth0 GLOO_SOCKET_IFNAME=eth0 \\\n\
         \x20   torchrun --nnodes 2 --node-rank R --nproc-per-node=8 \\\n\
         \x20   --master-addr HEAD_IP --master-port 29500 {file}\n\
         \n\
         Every rank prints PASS or FAIL; a run that prints nothing is hanging: read the\n\
         NCCL INFO lines for the interface it chose (lesson 7, `ringlab learn debugging-hangs`).\n"
    )
}

pub fn export(what: &ExportWhat) -> anyhow::Result<ExitCode> {
    match what {
        ExportWhat::SanityScript {
            launcher,
            nodes,
            gpus_per_node,
            image,
            out,
            force,
        } => {
            let (text, default_name) = match launcher {
                None => (SANITY_SCRIPT.to_string(), SANITY_FILE),
                Some(ExportLauncher::Slurm) => {
                    (slurm_script(*nodes, *gpus_per_node), "nccl_sanity.sbatch")
                }
                Some(ExportLauncher::Torchrun) => (
                    torchrun_script(*nodes, *gpus_per_node),
                    "run_nccl_sanity.sh",
                ),
                Some(ExportLauncher::K8s) => (
                    k8s_manifest(*nodes, *gpus_per_node, image),
                    "nccl_sanity.yaml",
                ),
            };
            let file = write_out(&text, default_name, out.as_deref(), *force)?;
            match launcher {
                None => eprint!("{}", launch_help(&file)),
                Some(l) => eprint!("{}", launcher_help(*l, &file)),
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// `text` to stdout, or to `out` (never over an existing file without `force`); returns the
/// name to use in the launch help.
fn write_out(
    text: &str,
    default_name: &str,
    out: Option<&Path>,
    force: bool,
) -> anyhow::Result<String> {
    Ok(match out {
        None => {
            let mut stdout = io::stdout().lock();
            stdout.write_all(text.as_bytes())?;
            stdout.flush()?;
            default_name.to_string()
        }
        Some(path) => {
            // A private temporary file renamed over the name: never written through a link
            // planted there, never into a file someone else made (see `files`).
            match crate::files::write_private_replace(
                path,
                text.as_bytes(),
                crate::files::FILE_MODE,
                force,
            ) {
                Ok(()) => {}
                Err(crate::files::WriteError::Exists(_)) => anyhow::bail!(
                    "{} already exists; not overwriting it (pass --force to replace it)",
                    path.display()
                ),
                Err(e) => anyhow::bail!("{e}"),
            }
            eprintln!("ringlab export: wrote {}", path.display());
            path.display().to_string()
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_script_creates_the_communicator_in_init_and_checks_the_world_after_it() {
        let s = SANITY_SCRIPT;
        let init = s
            .find("dist.init_process_group(backend=\"nccl\", device_id=device)")
            .expect("device_id= passed");
        let check = s
            .find("if world < 2:")
            .expect("world size checked after init");
        let reduce = s.find("dist.all_reduce(").expect("all_reduce");
        assert!(init < check && check < reduce);
        assert!(s.contains("torch.device(\"cuda\", local_rank)"));
        // The check before init (no torchrun variables) stays too.
        assert!(s.find("refusing world size 1").expect("env check") < init);
    }
}
