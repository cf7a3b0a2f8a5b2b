//! `ringlab bench`: nccl-tests' sweep (sizes, iterations, algbw, busbw, #wrong) over the chosen
//! backend.

use super::*;
use crate::lab::bench::out::{self, Algo, Format, Head, Title};

#[derive(Debug, Clone, clap::Args)]
pub struct BenchArgs {
    #[command(flatten)]
    pub launch: LaunchArgs,
    /// Run as one rank of a launcher's world: auto (when torchrun, srun or mpirun started this
    /// process), none (start ranks here, ignoring any launcher), torchrun, slurm or mpi.
    #[arg(long, default_value = "auto", value_parser = crate::lab::job::world::parse_choice)]
    pub launcher: crate::lab::job::world::Choice,
    #[command(flatten)]
    pub gpu: GpuArgs,
    /// Smallest size in bytes: 32M (bare K/M/G are powers of 1024, as in nccl-tests), 1MiB, 1MB (10^6), 1e6.
    #[arg(short = 'b', long = "minbytes", default_value = "32M", value_parser = parse_size)]
    pub minbytes: u64,
    /// Largest size in bytes.
    #[arg(short = 'e', long = "maxbytes", default_value = "32M", value_parser = parse_size)]
    pub maxbytes: u64,
    /// Multiply the size by this between rows.
    #[arg(short = 'f', long = "stepfactor", default_value_t = 2)]
    pub stepfactor: u64,
    /// Timed iterations per size.
    #[arg(short = 'n', long = "iters", default_value_t = crate::lab::DEFAULT_ITERS as u64, value_parser = clap::value_parser!(u64).range(1..=100000))]
    pub iters: u64,
    /// Warm-up iterations per size (then one more untimed run and a barrier, as nccl-tests).
    #[arg(short = 'w', long = "warmup_iters", default_value_t = crate::lab::DEFAULT_WARMUP as u64, value_parser = clap::value_parser!(u64).range(0..=100000))]
    pub warmup: u64,
    /// Time each row this many times and show the median, with the spread (slowest − fastest)
    /// / median: on a busy machine one run can be off by 3-5×, and a row whose spread is
    /// over 50% is marked as too wide to read.
    #[arg(short = 'R', long = "repeat", default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub repeat: u64,
    /// Check results (1) or not (0).
    #[arg(short = 'c', long = "check", default_value_t = 1, value_parser = clap::value_parser!(u8).range(0..=1))]
    pub check: u8,
    /// Reduction: sum, prod, max, min, avg.
    #[arg(short = 'o', long = "op", default_value = "sum")]
    pub op: Op,
    /// Data type: float, half, bfloat16, double, int32, int64 (or f32, f16, bf16, …).
    #[arg(short = 'd', long = "datatype", default_value = "float")]
    pub dtype: Dtype,
    /// Collective.
    #[arg(long, default_value = "all-reduce")]
    pub coll: Collective,
    /// Algorithm: the schedule the TCP backend executes [default: by size, as NCCL's tuner
    /// picks: recursive-doubling for all-reduces up to 4 KiB, else ring]; on NCCL, forced
    /// through NCCL_ALGO (ring, or tree for all-reduce) [default: NCCL chooses, as in nccl-tests].
    #[arg(long)]
    pub algo: Option<Algorithm>,
    /// Row time from the ranks' times: 0 rank 0's, 1 the mean, 2 the min, 3 the max (nccl-tests' -a).
    #[arg(short = 'a', long = "average", default_value_t = 1, value_parser = clap::value_parser!(u8).range(0..=3))]
    pub average: u8,
    /// Root rank for broadcast and reduce.
    #[arg(short = 'r', long = "root", default_value_t = 0)]
    pub root: usize,
    /// One JSON object per size and placement, then a summary.
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// CSV instead of the table.
    #[arg(long)]
    pub csv: bool,
    /// NCCL only: one process drives all the ranks' GPUs (ncclCommInitAll, like nccl-tests'
    /// `-g N`), the quickest sweep on one machine.
    #[arg(long)]
    pub single_process: bool,
    /// The pairwise sweep: sendrecv between every pair of nodes, one pair at a time, as a
    /// matrix of GB/s with the node in every slow pair marked. Needs --cluster.
    #[arg(long, requires = "cluster")]
    pub pairs: bool,
    /// With --pairs: sweep the nodes of this hang-lab scenario's cluster, staged as the
    /// scenario stages it (its shaped links; `ringlab lab list` names them).
    #[arg(long, value_name = "SCENARIO", requires = "pairs")]
    pub cluster: Option<String>,
    /// With --cluster: network namespaces (netns, root), the emulated cluster, or auto.
    #[arg(long, value_enum, default_value_t = crate::lab::hang::scenario::Mode::Auto, requires = "cluster")]
    pub mode: crate::lab::hang::scenario::Mode,
    /// nccl-tests' -g (GPUs per process): refused with ringlab's way to say it.
    #[arg(short = 'g', long = "ngpus", hide = true, value_name = "N")]
    pub ngpus: Option<String>,
}

pub fn bench(args: &BenchArgs) -> anyhow::Result<ExitCode> {
    if args.pairs {
        return super::pairs::pairs(args);
    }
    match setup(args)? {
        Ok(s) => run(args, s),
        Err(e) => exit2(e),
    }
}

/// A bench run, made from the flags: where the ranks run, the job they run, and what the GPU
/// preparation found.
struct Setup {
    backend: Backend,
    launch: Launch,
    joined: Option<(crate::lab::job::world::World, Launch)>,
    job: Job,
    /// Ranks in the job, and the reports this process gathers per row.
    world: usize,
    local_reports: usize,
    prepared: Option<gpu::Prepared>,
}

/// The flags made into a run: Err(message) for a flag the run cannot take (exit 2).
fn setup(args: &BenchArgs) -> anyhow::Result<Result<Setup, String>> {
    if let Some(g) = &args.ngpus {
        return Ok(Err(format!(
            "-g {g} is nccl-tests' GPUs per process; ringlab starts one process per rank: use \
             --nproc-per-node {g} (one GPU each with --backend nccl), or --single-process \
             --nproc-per-node {g} for one process driving {g} GPUs as `-g {g}` does"
        )));
    }
    let mut p = match plan(&args.gpu) {
        Ok(p) => p,
        Err(e) => return Ok(Err(e)),
    };
    let mut l = args
        .launch
        .launch(p.default_nproc)
        .map_err(anyhow::Error::msg)?;
    let joined = match joined_world(&args.launch, args.launcher, args.single_process, &l) {
        Ok(w) => w,
        Err(e) => return Ok(Err(e)),
    };
    if let Some((w, launch)) = &joined {
        l = launch.clone();
        let who = if w.rank == 0 {
            " (this rank prints the table)"
        } else {
            ": rank 0 prints the table"
        };
        eprintln!(
            "ringlab bench: {} started this process as rank {} of {}{who}",
            w.launcher, w.rank, w.size
        );
    }
    let devices = match single_process(args, p.backend, &mut l) {
        Ok(d) => d,
        Err(e) => return Ok(Err(e)),
    };
    let (world, local_reports) = if devices > 0 {
        (devices, 1)
    } else if joined.is_some() {
        // Rank 0 receives every rank's rows (Job::one_table).
        (l.world(), l.world())
    } else {
        (l.world(), l.nproc_per_node)
    };
    if args.root >= world {
        anyhow::bail!(
            "--root {} is not a rank: the job has {world} ranks",
            args.root
        );
    }
    let mut job = job_of(args, p.backend, devices)?;
    job.one_table = joined.is_some();
    if let Some(avail) = crate::lab::bench::available_memory()
        && let Err(e) =
            crate::lab::bench::check_memory(&job, world, devices.max(l.nproc_per_node), avail)
    {
        return Ok(Err(e.to_string()));
    }
    let prepared = match prepare(&mut p, &mut job, &mut l, &args.gpu, args.algo) {
        Ok(x) => x,
        Err(e) => return Ok(Err(e)),
    };
    Ok(Ok(Setup {
        backend: p.backend,
        launch: l,
        joined,
        job,
        world,
        local_reports,
        prepared,
    }))
}

/// `--single-process`: one rank process driving as many GPUs as ranks (the devices; 0 without
/// the flag). NCCL only, one machine.
fn single_process(args: &BenchArgs, backend: Backend, l: &mut Launch) -> Result<usize, String> {
    if !args.single_process {
        return Ok(0);
    }
    if backend != Backend::Nccl {
        return Err(
            "--single-process drives this machine's GPUs through NCCL: it needs --backend nccl \
             (or auto on a machine with 2 or more GPUs)"
                .into(),
        );
    }
    if l.nnodes > 1 {
        return Err("--single-process runs on one machine: drop --nnodes".into());
    }
    let d = l.nproc_per_node;
    l.nproc_per_node = 1;
    Ok(d)
}

/// The job the flags ask for.
fn job_of(args: &BenchArgs, backend: Backend, devices: usize) -> anyhow::Result<Job> {
    Ok(Job {
        op: args.op,
        root: args.root,
        iters: args.iters as usize,
        warmup: args.warmup as usize,
        check: args.check == 1,
        backend,
        devices,
        timeout_s: args.launch.timeout,
        repeat: args.repeat as usize,
        tuned: args.algo.is_none(),
        ..Job::bench(
            args.coll,
            args.algo.unwrap_or(Algorithm::Ring),
            args.dtype,
            sizes(args.minbytes, args.maxbytes, args.stepfactor).map_err(anyhow::Error::msg)?,
        )
    })
}

/// The table's header for this run.
fn head(args: &BenchArgs, s: &Setup) -> Head {
    let (job, l) = (&s.job, &s.launch);
    let algo = s.prepared.as_ref().map_or_else(
        || {
            Algo::Ringlab(if job.tuned {
                crate::collective::tune::describe(job.coll, job.algo)
            } else {
                job.algo.name().to_string()
            })
        },
        |x| Algo::Nccl(x.algo_label.clone()),
    );
    let title = Title {
        coll: job.coll.nccl_name(),
        algo,
        ranks: s.world,
        nodes: match &s.joined {
            Some((w, _)) => w.size.div_ceil(w.local_size.max(1)),
            None => l.nnodes,
        },
        backend: s.backend,
        gpus: if job.devices > 0 {
            job.devices
        } else {
            usize::from(s.backend == Backend::Nccl)
        },
        iters: job.iters,
        warmup: job.warmup,
        check: args.check == 1,
    };
    Head {
        title: title.to_string(),
        launcher: s.joined.as_ref().map(|(w, launch)| {
            format!(
                "{} (read {}): a world of {}, {} per node, one rank per process; rank 0's store at {}:{}",
                w.launcher,
                w.read.join(", "),
                w.size,
                w.local_size,
                launch.master_addr,
                launch.master_port
            )
        }),
        shared_gpu: s
            .prepared
            .as_ref()
            .and_then(|x| x.shared_gpu)
            .map(|k| format!("{} ({k} ranks per GPU)", gpu::SHARED_GPU)),
        repeat: job.repeat,
        iters: job.iters,
        // Every rank inherits the launcher's environment, so the launcher reads what they will.
        tuning: crate::comm::cpu::tuning::Tuning::get().changed(),
    }
}

/// Run the job and write its rows as they finish; exit 1 when a checked row had #wrong.
fn run(args: &BenchArgs, s: Setup) -> anyhow::Result<ExitCode> {
    // Under a launcher only rank 0 prints the table; the others print only errors.
    let quiet = s.joined.as_ref().is_some_and(|(w, _)| w.rank != 0);
    let format = match (args.json, args.csv) {
        (true, _) => Format::Json,
        (_, true) => Format::Csv,
        _ => Format::Table,
    };
    let out: Box<dyn Write> = if quiet {
        Box::new(io::sink())
    } else {
        Box::new(io::stdout().lock())
    };
    let mut w = out::writer(format, out, s.job.repeat);
    if s.world == 1 && !quiet {
        // L8: a one-rank table reads like a real measurement; say what it is.
        eprintln!(
            "ringlab bench: note: one rank moves no data between ranks, so busbw is 0 by \
             definition (nccl-tests prints the same); --nproc-per-node 2 or more measures a link"
        );
    }
    w.header(&head(args, &s))?;
    let mut collector = Collector::new(&s.job, s.world, s.local_reports, s.backend.name())
        .with_average(Average::from_flag(args.average).unwrap_or_default());
    // NCCL's rows say who chose; the TCP backend's say the schedule each one ran.
    if let Some(p) = &s.prepared {
        collector = collector.with_algo(p.algo_label.to_string());
    }
    let mut io_err = None;
    let mut tuning = Tuning::default();
    let result = launch::run(&s.job, &s.launch, |msg| {
        forward_log(msg, &mut tuning);
        let Msg::Event(ev @ (Event::Row { .. } | Event::Transport { .. })) = msg else {
            return;
        };
        if let Some(row) = collector.feed(ev)
            && let Err(e) = w.row(row, tuning.last.take())
        {
            io_err.get_or_insert(e);
        }
    });
    drop(s.prepared);
    if let Some(e) = io_err {
        return Err(e.into());
    }
    if let Err(e) = result {
        if let LaunchError::Failed(f) = &e
            && let Some(size) = collector.unfinished_size()
        {
            w.failed(size, f.kind, f.reason.lines().next().unwrap_or(""))?;
        }
        return fail(e);
    }
    let summary = collector.summary();
    w.footer(&summary)?;
    Ok(if summary.wrong_total.unwrap_or(0) == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// The launcher's world this process joins (`--launcher`), and the launch that runs its one
/// rank (with `base`'s environment, cancel flag and timeout); None when ringlab starts the
/// ranks itself. Errors name the flag or variable.
pub(super) fn joined_world(
    launch: &LaunchArgs,
    launcher: crate::lab::job::world::Choice,
    single_process: bool,
    base: &Launch,
) -> Result<Option<(crate::lab::job::world::World, Launch)>, String> {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let Some(w) = launcher.world(&env)? else {
        return Ok(None);
    };
    let who = format!(
        "{} started this process as rank {} of {}",
        w.launcher, w.rank, w.size
    );
    if launch.nproc_per_node.is_some() || launch.nnodes > 1 || single_process {
        return Err(format!(
            "{who}: ringlab runs it as that one rank, so --nproc-per-node, --nnodes and \
             --single-process do not apply (the launcher sets the world; or pass --launcher \
             none to start ranks here)"
        ));
    }
    let master_addr = match &w.master_addr {
        Some(a) => a.clone(),
        None if launch.master_addr != "127.0.0.1" => launch.master_addr.clone(),
        None => {
            return Err(format!(
                "{who}, on more than one node, and nothing says where rank 0 is: set \
                 MASTER_ADDR (or pass --master-addr) to rank 0's host"
            ));
        }
    };
    let token = match std::env::var("RINGLAB_TOKEN") {
        Ok(hex) => crate::comm::cpu::wire::token_from_hex(&hex)
            .ok_or("RINGLAB_TOKEN must be 32 hex digits")?,
        // One host: the store and the ranks admit only this uid's connections from this host
        // (comm::owner), so the derived token only keeps two jobs apart.
        Err(_) if w.local_size >= w.size => w.token(),
        // Across hosts: rank 0's private token file in ringlab's home, which the others share.
        Err(_) if !launch.insecure_token => {
            let home = crate::study::progress::data_dir();
            let wait = Duration::from_secs(launch.timeout);
            let made = if w.rank == 0 {
                crate::lab::job::token_file::create(&home, &w)
            } else {
                crate::lab::job::token_file::read(&home, &w, std::time::SystemTime::now(), wait)
            };
            made.map_err(|e| {
                format!(
                    "{who}, across hosts, and RINGLAB_TOKEN is not set: {e}. Without a secret the \
                     token would be derived from public values ({}), so anyone who can reach the \
                     store could join: set the same RINGLAB_TOKEN on every node (`export \
                     RINGLAB_TOKEN=$(openssl rand -hex 16)` before the launcher), or pass \
                     --insecure-token to run anyway",
                    w.read.join(", ")
                )
            })?
        }
        Err(_) => {
            eprintln!(
                "ringlab: warning: --insecure-token: this job's token is derived from {}, which \
                 anyone who can reach the store can derive too: a stranger can join it",
                w.read.join(", ")
            );
            w.token()
        }
    };
    let launch = Launch {
        nproc_per_node: 1,
        nnodes: w.size,
        node_rank: w.rank,
        master_addr,
        master_port: w.port(),
        token: Some(token),
        local: Some((w.local_rank, w.local_size)),
        timeout: base.timeout,
        nccl_init_grace: base.nccl_init_grace,
        env: base.env.clone(),
        cancel: base.cancel.clone(),
        placement: None,
    };
    Ok(Some((w, launch)))
}
