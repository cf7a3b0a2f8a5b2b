//! `ringlab export`: files to take to a real cluster. `export sanity-script` writes the classic
//! NCCL sanity check (an all-reduce of ones must equal the world size) as a torch.distributed
//! script, and says on stderr how to launch it on one node and on two.

use std::fs::OpenOptions;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Debug, clap::Subcommand)]
pub enum ExportWhat {
    /// A torch.distributed NCCL sanity script: all-reduce of ones, PASS/FAIL per rank.
    ///
    /// Writes to stdout without --out; the commands to launch it go to stderr.
    SanityScript {
        /// Write the script to this file instead of stdout.
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
        /// Overwrite FILE if it exists.
        #[arg(long, requires = "out")]
        force: bool,
    },
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
        ExportWhat::SanityScript { out, force } => sanity_script(out.as_deref(), *force),
    }
}

fn sanity_script(out: Option<&Path>, force: bool) -> anyhow::Result<ExitCode> {
    let file = match out {
        None => {
            let mut stdout = io::stdout().lock();
            stdout.write_all(SANITY_SCRIPT.as_bytes())?;
            stdout.flush()?;
            SANITY_FILE.to_string()
        }
        Some(path) => {
            let opened = if force {
                // Replaces a file, never writes through a link planted at the name.
                crate::files::create_replacing(path)
            } else {
                OpenOptions::new().write(true).create_new(true).open(path)
            };
            let mut f = match opened {
                Ok(f) => f,
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => anyhow::bail!(
                    "{} already exists; not overwriting it (pass --force to replace it)",
                    path.display()
                ),
                Err(e) => anyhow::bail!("cannot write {}: {e}", path.display()),
            };
            f.write_all(SANITY_SCRIPT.as_bytes())?;
            f.flush()?;
            eprintln!("ringlab export: wrote {}", path.display());
            path.display().to_string()
        }
    };
    eprint!("{}", launch_help(&file));
    Ok(ExitCode::SUCCESS)
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
