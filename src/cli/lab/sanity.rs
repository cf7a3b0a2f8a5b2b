//! `ringlab sanity`: the classic NCCL check, an all-reduce of ones that must equal the world size.

use super::*;

#[derive(Debug, Clone, clap::Args)]
pub struct SanityArgs {
    #[command(flatten)]
    pub launch: LaunchArgs,
    /// Run as one rank of a launcher's world: auto (when torchrun, srun or mpirun started this
    /// process), none, torchrun, slurm or mpi. Each rank then checks its own result; rank 0
    /// prints it.
    #[arg(long, default_value = "auto", value_parser = crate::lab::job::world::parse_choice)]
    pub launcher: crate::lab::job::world::Choice,
    #[command(flatten)]
    pub gpu: GpuArgs,
    /// Print {"world_size","pass","ranks":[{"rank","value"}]}.
    #[arg(long)]
    pub json: bool,
}

pub fn sanity(args: &SanityArgs) -> anyhow::Result<ExitCode> {
    let mut p = match plan(&args.gpu) {
        Ok(p) => p,
        Err(e) => return exit2(e),
    };
    let mut l = args
        .launch
        .launch(p.default_nproc)
        .map_err(anyhow::Error::msg)?;
    let joined = match super::bench::joined_world(&args.launch, args.launcher, false, &l) {
        Ok(w) => w,
        Err(e) => return exit2(e),
    };
    if let Some((w, launch)) = &joined {
        l = launch.clone();
        eprintln!(
            "ringlab sanity: {} started this process as rank {} of {}",
            w.launcher, w.rank, w.size
        );
    }
    // Under a launcher every rank checks its own all-reduce; only rank 0 prints.
    let quiet = joined.as_ref().is_some_and(|(w, _)| w.rank != 0);
    let world = l.world();
    if world < 2 && p.backend == Backend::Tcp {
        eprintln!(
            "ringlab sanity: refusing world size 1: a one-rank all-reduce moves no data and proves nothing \
(the bare `python` trap). Use --nproc-per-node 2 or more."
        );
        return Ok(ExitCode::from(2));
    }
    let mut job = Job {
        backend: p.backend,
        timeout_s: args.launch.timeout,
        ..Job::sanity()
    };
    let prepared = match prepare(&mut p, &mut job, &mut l, &args.gpu, None) {
        Ok(x) => x,
        Err(e) => return exit2(e),
    };
    let mut values: Vec<(usize, f64)> = Vec::new();
    let mut transport: Option<crate::comm::cpu::tcp::Transports> = None;
    let mut tuning = Tuning::default();
    let result = launch::run(&job, &l, |msg| {
        forward_log(msg, &mut tuning);
        match msg {
            Msg::Event(Event::Value { rank, value }) => values.push((*rank, *value)),
            Msg::Event(Event::Transport { transport: t, .. }) => {
                transport = Some(transport.unwrap_or_default().union(*t));
            }
            _ => {}
        }
    });
    // How the bytes moved, as bench says it (NCCL ranks report none: their log says it).
    drop(prepared);
    if let Err(e) = result {
        return fail(e);
    }
    values.sort_by_key(|v| v.0);
    // NCCL at world 1 runs (a smoke test of init, launch and teardown on one GPU) but proves
    // no communication: a 1-rank in-place all-reduce launches nothing at all (NVIDIA/nccl
    // v2.28.9-1 `src/enqueue.cc:2569-2571`, `src/device/onerank.cu:51`). It says so (L3).
    let trivial = world < 2;
    let pass = values.len() == l.nproc_per_node && values.iter().all(|(_, v)| *v == world as f64);
    if quiet {
        if !pass {
            eprintln!("ringlab sanity: FAIL on this rank: {values:?} (expect {world})");
        }
    } else if args.json {
        let ranks: Vec<_> = values
            .iter()
            .map(|(r, v)| serde_json::json!({"rank": r, "value": v}))
            .collect();
        println!(
            "{}",
            serde_json::json!({"world_size": world, "pass": pass, "trivial": trivial, "ranks": ranks, "ranks_per_gpu": job.ranks_per_gpu, "transport": transport})
        );
    } else {
        for (r, v) in &values {
            println!("rank {r}: all_reduce(ones) = {v}  (expect {world})");
        }
        if let Some(t) = &transport {
            println!(
                "{}",
                crate::lab::bench::table::transport_line(t).trim_start_matches("# ")
            );
        }
        println!("{}: world size {world}", if pass { "PASS" } else { "FAIL" });
        if trivial && pass {
            println!(
                "(trivial: world size 1 moves no data; NCCL launches nothing for a one-rank \
                 in-place all-reduce, so this proves init, launch and teardown only)"
            );
        }
    }
    Ok(if pass {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
