//! `ringlab bench`, `ringlab sanity` and the hidden `ringlab __rank`: the live labs on the
//! command line, with nccl-tests' flags and table.

use std::io::{self, Write};
use std::process::ExitCode;
use std::time::Duration;

use crate::collective::{Algorithm, Collective, Dtype, Op};
use crate::lab::bench::{Average, Collector, sizes};
use crate::lab::launch::{self, Launch, LaunchError, Msg};
use crate::lab::{Backend, Event, Job, JobKind, gpu, table};
use crate::units::parse_size;

/// Where the ranks run (torchrun's flags).
#[derive(Debug, Clone, clap::Args)]
pub struct LaunchArgs {
    /// Rank processes on this node [default: 2 with tcp; one per GPU with nccl].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=64))]
    pub nproc_per_node: Option<u64>,
    /// Nodes in the job (multi-node needs the same RINGLAB_TOKEN on every node).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=64))]
    pub nnodes: u64,
    /// This node's index, 0..nnodes.
    #[arg(long, default_value_t = 0)]
    pub node_rank: u64,
    /// Address of node 0, where the rendezvous store listens.
    #[arg(long, default_value = "127.0.0.1")]
    pub master_addr: String,
    /// Port of the rendezvous store (0 picks a free one; single node only).
    #[arg(long, default_value_t = 0)]
    pub master_port: u16,
    /// Seconds without progress from a rank before the job is declared hung and killed.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=86400))]
    pub timeout: u64,
}

impl LaunchArgs {
    /// The launch, with `default_nproc` ranks on this node unless --nproc-per-node says.
    pub fn launch(&self, default_nproc: usize) -> Result<Launch, String> {
        if self.node_rank >= self.nnodes {
            return Err(format!(
                "--node-rank {} is not a node: with --nnodes {} it is 0..{}",
                self.node_rank,
                self.nnodes,
                self.nnodes - 1
            ));
        }
        if self.nnodes > 1 && self.master_port == 0 {
            return Err(
                "multi-node jobs need --master-port (the port node 0's store listens on)".into(),
            );
        }
        Ok(Launch {
            nproc_per_node: self
                .nproc_per_node
                .map_or(default_nproc.max(1), |n| n as usize),
            nnodes: self.nnodes as usize,
            node_rank: self.node_rank as usize,
            master_addr: self.master_addr.clone(),
            master_port: self.master_port,
            timeout: Duration::from_secs(self.timeout),
            env: Vec::new(),
            cancel: None,
            placement: None,
        })
    }
}

/// Which backend carries the bytes.
#[derive(Debug, Clone, clap::Args)]
pub struct GpuArgs {
    /// tcp (any machine), nccl (GPUs), or auto (nccl with 2 or more GPUs, else tcp).
    #[arg(long, default_value = "auto", value_parser = ["tcp", "nccl", "auto"])]
    pub backend: String,
    /// NCCL: K local ranks share each GPU, each a host of its own to NCCL (NCCL_HOSTID), so
    /// their bytes cross NET/Socket through host memory. Two ranks on a one-GPU machine:
    /// --ranks-per-gpu 2 --nproc-per-node 2. Not NVLink bandwidth.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=64))]
    pub ranks_per_gpu: Option<u64>,
}

#[derive(Debug, Clone, clap::Args)]
pub struct BenchArgs {
    #[command(flatten)]
    pub launch: LaunchArgs,
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
    #[arg(short = 'n', long = "iters", default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..=100000))]
    pub iters: u64,
    /// Warm-up iterations per size (then one more untimed run and a barrier, as nccl-tests).
    #[arg(short = 'w', long = "warmup_iters", default_value_t = 1)]
    pub warmup: u64,
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
    /// Algorithm: the schedule the TCP backend executes [default: ring]; on NCCL, forced
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
}

#[derive(Debug, Clone, clap::Args)]
pub struct SanityArgs {
    #[command(flatten)]
    pub launch: LaunchArgs,
    #[command(flatten)]
    pub gpu: GpuArgs,
    /// Print {"world_size","pass","ranks":[{"rank","value"}]}.
    #[arg(long)]
    pub json: bool,
}

/// A resolved backend and what it means for the launch.
struct Plan {
    backend: Backend,
    /// Ranks per node when --nproc-per-node is not given.
    default_nproc: usize,
    /// The machine, when NCCL runs (it is handed to `gpu::prepare`).
    machine: Option<gpu::Machine>,
}

/// Resolve `--backend`: the probe runs only when NCCL might be used, and loads NCCL only with
/// a GPU to use it on or when asked. Prints which backend and why on stderr; `Err(message)`
/// means exit 2.
fn plan(g: &GpuArgs) -> Result<Plan, String> {
    // Asking for shared GPUs is asking for NCCL.
    let asked = match (g.backend.as_str(), g.ranks_per_gpu) {
        ("tcp", Some(_)) => {
            return Err(
                "--ranks-per-gpu shares GPUs between NCCL ranks: it needs --backend nccl".into(),
            );
        }
        ("auto", Some(_)) => "nccl",
        (b, _) => b,
    };
    if asked == "tcp" {
        return Ok(Plan {
            backend: Backend::Tcp,
            default_nproc: 2,
            machine: None,
        });
    }
    let m = gpu::machine(if asked == "nccl" {
        gpu::LoadNccl::Asked
    } else {
        gpu::LoadNccl::IfGpu
    });
    let (backend, why) = gpu::choose(asked, &m)?;
    eprintln!("# {why}");
    Ok(match backend {
        Backend::Tcp => Plan {
            backend,
            default_nproc: 2,
            machine: None,
        },
        Backend::Nccl => Plan {
            backend,
            default_nproc: m.gpus() * g.ranks_per_gpu.unwrap_or(1) as usize,
            machine: Some(m),
        },
    })
}

/// Prepare an NCCL launch (nothing to do on TCP); the notes go to stderr.
fn prepare(
    p: &mut Plan,
    job: &mut Job,
    l: &mut Launch,
    g: &GpuArgs,
    algo: Option<Algorithm>,
) -> Result<Option<gpu::Prepared>, String> {
    let Some(m) = p.machine.take() else {
        return Ok(None);
    };
    let ask = gpu::GpuAsk {
        ranks_per_gpu: g.ranks_per_gpu.map(|k| k as usize),
        algo,
    };
    let prepared = gpu::prepare(job, l, m, &ask)?;
    if let Some(w) = prepared.machine.two_nccls() {
        eprintln!("# warning: {w}");
    }
    for n in &prepared.notes {
        eprintln!("# note: {n}");
    }
    Ok(Some(prepared))
}

fn exit2(e: String) -> anyhow::Result<ExitCode> {
    eprintln!("ringlab: {e}");
    Ok(ExitCode::from(2))
}

fn fail(e: LaunchError) -> anyhow::Result<ExitCode> {
    match e {
        LaunchError::Setup(s) => anyhow::bail!(s),
        LaunchError::Failed(f) => {
            eprintln!("ringlab: job failed: {f}");
            Ok(ExitCode::from(1))
        }
    }
}

/// NCCL's tuning lines seen since the last table line (algorithm and protocol per call).
#[derive(Default)]
struct Tuning {
    last: Option<(u64, String, String)>,
}

/// Forward a rank's log line to stderr; NCCL's tuning lines are kept for the table instead
/// (there is one per call).
fn forward_log(msg: &Msg, tuning: &mut Tuning) {
    if let Msg::Log { rank, line } = msg {
        if let Some(t) = gpu::tuning_line(line) {
            tuning.last = Some(t);
            return;
        }
        eprintln!("[rank {rank}] {line}");
    }
}

pub fn bench(args: &BenchArgs) -> anyhow::Result<ExitCode> {
    let mut p = match plan(&args.gpu) {
        Ok(p) => p,
        Err(e) => return exit2(e),
    };
    let backend = p.backend.name();
    let mut l = args
        .launch
        .launch(p.default_nproc)
        .map_err(anyhow::Error::msg)?;
    // Single-process mode: one rank process, as many GPUs as ranks.
    let devices = if args.single_process {
        if p.backend != Backend::Nccl {
            return exit2(
                "--single-process drives this machine's GPUs through NCCL: it needs --backend nccl \
                 (or auto on a machine with 2 or more GPUs)"
                    .into(),
            );
        }
        if l.nnodes > 1 {
            return exit2("--single-process runs on one machine: drop --nnodes".into());
        }
        let d = l.nproc_per_node;
        l.nproc_per_node = 1;
        d
    } else {
        0
    };
    let (world, local_reports) = if devices > 0 {
        (devices, 1)
    } else {
        (l.world(), l.nproc_per_node)
    };
    if args.root >= world {
        anyhow::bail!(
            "--root {} is not a rank: the job has {world} ranks",
            args.root
        );
    }
    let mut job = Job {
        kind: JobKind::Bench,
        coll: args.coll,
        algo: args.algo.unwrap_or(Algorithm::Ring),
        op: args.op,
        dtype: args.dtype,
        root: args.root,
        sizes: sizes(args.minbytes, args.maxbytes, args.stepfactor).map_err(anyhow::Error::msg)?,
        iters: args.iters as usize,
        warmup: args.warmup as usize,
        check: args.check == 1,
        backend: p.backend,
        devices,
        ranks_per_gpu: 1,
        timeout_s: args.launch.timeout,
        train: None,
    };
    if let Some(avail) = crate::lab::bench::available_memory()
        && let Err(e) =
            crate::lab::bench::check_memory(&job, world, devices.max(l.nproc_per_node), avail)
    {
        return exit2(e);
    }
    let prepared = match prepare(&mut p, &mut job, &mut l, &args.gpu, args.algo) {
        Ok(x) => x,
        Err(e) => return exit2(e),
    };
    let algo_label = prepared.as_ref().map_or(job.algo.name(), |x| x.algo_label);
    let mut out = io::stdout().lock();
    let title = format!(
        "ringlab bench: {} ({}), {} ranks on {} node(s), backend {backend}, nThread 1 nGpus {} iters {} warmup {} check {}",
        job.coll.nccl_name(),
        if algo_label == "nccl" {
            "algorithm: NCCL's choice"
        } else {
            algo_label
        },
        world,
        l.nnodes,
        if devices > 0 {
            devices
        } else {
            usize::from(p.backend == Backend::Nccl)
        },
        job.iters,
        job.warmup,
        args.check
    );
    let shared = prepared
        .as_ref()
        .and_then(|x| x.notes.iter().find(|n| n.starts_with(gpu::SHARED_GPU)));
    if args.csv {
        writeln!(
            out,
            "coll,backend,algo,ranks,size,count,type,redop,root,in_place,time_us,algbw_gbps,busbw_gbps,wrong"
        )?;
    } else if !args.json {
        writeln!(out, "{}", table::header(&title))?;
        if let Some(n) = shared {
            writeln!(out, "# {n}")?;
        }
    }
    let mut collector = Collector::new(&job, world, local_reports, backend)
        .with_average(Average::from_flag(args.average).unwrap_or_default())
        .with_algo(algo_label);
    let mut pending_out = None;
    let mut io_err = None;
    let mut tuning = Tuning::default();
    let mut transport_shown = false;
    let result = launch::run(&job, &l, |msg| {
        forward_log(msg, &mut tuning);
        if let Msg::Event(ev @ Event::Transport { .. }) = msg {
            collector.feed(ev);
            return;
        }
        let Msg::Event(ev @ Event::Row { .. }) = msg else {
            return;
        };
        let Some(row) = collector.feed(ev) else {
            return;
        };
        let r = if args.json {
            serde_json::to_string(&row)
                .map_err(io::Error::other)
                .and_then(|s| writeln!(out, "{s}"))
        } else if args.csv {
            writeln!(
                out,
                "{},{},{},{},{},{},{},{},{},{},{:.3},{:.4},{:.4},{}",
                row.coll.name(),
                row.backend,
                row.algo,
                row.ranks,
                row.size,
                row.count,
                row.dtype,
                row.redop,
                row.root,
                row.in_place,
                row.time_us,
                row.algbw_gbps,
                row.busbw_gbps,
                row.wrong
            )
        } else if !row.in_place {
            pending_out = Some(row);
            Ok(())
        } else {
            if !transport_shown && let Some(t) = &row.transport {
                transport_shown = true;
                let _ = writeln!(out, "{}", table::transport_line(t));
            }
            match pending_out.take() {
                Some(o) => writeln!(out, "{}", table::line(&o, &row)).and_then(|_| {
                    match tuning.last.take() {
                        Some((bytes, algo, proto)) => writeln!(
                            out,
                            "#   NCCL's log: {bytes} bytes -> Algo {algo} proto {proto}"
                        ),
                        None => Ok(()),
                    }
                }),
                None => Ok(()),
            }
        };
        let _ = out.flush();
        if let Err(e) = r {
            io_err.get_or_insert(e);
        }
    });
    drop(prepared);
    if let Some(e) = io_err {
        return Err(e.into());
    }
    if let Err(e) = result {
        if let LaunchError::Failed(f) = &e
            && let Some(size) = collector.unfinished_size()
        {
            let reason = f.reason.lines().next().unwrap_or("");
            if args.json {
                writeln!(
                    out,
                    "{}",
                    serde_json::json!({"size": size, "outcome": f.kind, "reason": reason})
                )?;
            } else if !args.csv {
                writeln!(out, "{}", table::failed_line(size, f.kind.label(), reason))?;
            }
        }
        return fail(e);
    }
    let summary = collector.summary();
    if args.json {
        writeln!(out, "{}", serde_json::to_string(&summary)?)?;
    } else if !args.csv {
        writeln!(out, "{}", table::footer(&summary))?;
    }
    Ok(if summary.wrong_total == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
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
    let mut tuning = Tuning::default();
    let result = launch::run(&job, &l, |msg| {
        forward_log(msg, &mut tuning);
        if let Msg::Event(Event::Value { rank, value }) = msg {
            values.push((*rank, *value));
        }
    });
    drop(prepared);
    if let Err(e) = result {
        return fail(e);
    }
    values.sort_by_key(|v| v.0);
    let pass = values.len() == l.nproc_per_node && values.iter().all(|(_, v)| *v == world as f64);
    if args.json {
        let ranks: Vec<_> = values
            .iter()
            .map(|(r, v)| serde_json::json!({"rank": r, "value": v}))
            .collect();
        println!(
            "{}",
            serde_json::json!({"world_size": world, "pass": pass, "ranks": ranks, "ranks_per_gpu": job.ranks_per_gpu})
        );
    } else {
        for (r, v) in &values {
            println!("rank {r}: all_reduce(ones) = {v}  (expect {world})");
        }
        println!("{}: world size {world}", if pass { "PASS" } else { "FAIL" });
    }
    Ok(if pass {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

#[derive(Debug, Clone, clap::Args)]
pub struct LoopbackArgs {
    /// Bytes each side sends.
    #[arg(long, default_value = "1G", value_parser = parse_size)]
    pub bytes: u64,
    /// (internal) connect to this port as the second process.
    #[arg(long)]
    pub connect: Option<u16>,
}

/// Each side sends `bytes` while receiving as many: a send thread and a receive loop, 4 MiB
/// writes and reads.
fn stream_both_ways(s: std::net::TcpStream, bytes: u64) -> io::Result<()> {
    use std::io::Read;
    let mut tx = s.try_clone()?;
    let sender = std::thread::spawn(move || -> io::Result<()> {
        let buf = vec![7u8; 4 << 20];
        let mut left = bytes;
        while left > 0 {
            let n = left.min(buf.len() as u64) as usize;
            tx.write_all(&buf[..n])?;
            left -= n as u64;
        }
        Ok(())
    });
    let mut rx = s;
    let mut buf = vec![0u8; 4 << 20];
    let mut left = bytes;
    while left > 0 {
        let want = left.min(buf.len() as u64) as usize;
        let n = rx.read(&mut buf[..want])?;
        if n == 0 {
            return Err(io::Error::from(io::ErrorKind::UnexpectedEof));
        }
        left -= n as u64;
    }
    sender
        .join()
        .map_err(|_| io::Error::other("sender panicked"))?
}

/// The loopback ceiling: two processes streaming both ways at once over 127.0.0.1.
pub fn loopback(args: &LoopbackArgs) -> anyhow::Result<ExitCode> {
    if let Some(port) = args.connect {
        let s = std::net::TcpStream::connect(("127.0.0.1", port))?;
        crate::comm::net::tune(&s)?;
        stream_both_ways(s, args.bytes)?;
        return Ok(ExitCode::SUCCESS);
    }
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let port = listener.local_addr()?.port();
    let mut child = std::process::Command::new(std::env::current_exe()?)
        .args([
            "__loopback",
            "--bytes",
            &args.bytes.to_string(),
            "--connect",
            &port.to_string(),
        ])
        .spawn()?;
    let (s, _) = listener.accept()?;
    crate::comm::net::tune(&s)?;
    let t0 = std::time::Instant::now();
    stream_both_ways(s, args.bytes)?;
    let secs = t0.elapsed().as_secs_f64();
    child.wait()?;
    println!(
        "{}",
        serde_json::json!({"bytes": args.bytes, "seconds": secs, "per_direction_gbps": args.bytes as f64 / secs / 1e9})
    );
    Ok(ExitCode::SUCCESS)
}

#[derive(Debug, Clone, clap::Subcommand)]
pub enum HangLab {
    /// The scenarios: a NIC misconfiguration each, staged on a virtual cluster.
    List,
    /// Stage a scenario, watch it hang, diagnose it; with --fix, apply the fix and re-run.
    Run {
        /// Scenario name (see `ringlab lab list`).
        scenario: String,
        /// Apply the scenario's fix and re-run: it must pass.
        #[arg(long)]
        fix: bool,
        /// Seconds without progress before the watchdog calls it a hang (default: the scenario's).
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..=600))]
        timeout: Option<u64>,
        /// The report as one JSON object.
        #[arg(long)]
        json: bool,
        /// Where the cluster is built: network namespaces when this process may make them
        /// (root), else emulated on loopback addresses (auto); or insist on one.
        #[arg(long, value_enum, default_value_t = crate::lab::scenario::Mode::Auto)]
        mode: crate::lab::scenario::Mode,
        /// tcp: ringlab's own ranks (NCCL's behaviour modelled, any machine); nccl: real libnccl
        /// ranks inside the namespaces, one GPU shared where there are fewer GPUs than ranks
        /// (needs GPUs and namespaces: root, or user namespaces).
        #[arg(long, default_value = "tcp", value_parser = ["tcp", "nccl"])]
        backend: String,
        /// (internal, for the app) every message as a JSON line, then the result.
        #[arg(long, hide = true)]
        events: bool,
        /// (internal, for the app) instead of staging, run once with this fix (JSON).
        #[arg(long, hide = true, value_name = "JSON")]
        try_fix: Option<String>,
    },
    /// Remove namespaces a crashed run left behind (everything named rlab-*).
    Cleanup,
}

pub fn hang_lab(cmd: &HangLab) -> anyhow::Result<ExitCode> {
    use crate::lab::{cluster, scenario};
    match cmd {
        HangLab::List => {
            let (all, bad) = scenario::all();
            for s in &all {
                println!("{:<26} {}", s.name, s.title);
            }
            for b in &bad {
                eprintln!("{}: {}", b.file, b.message);
            }
            Ok(if bad.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        HangLab::Cleanup => {
            let mut removed = cluster::cleanup_all();
            removed.extend(scenario::remove_old_trace_dirs());
            removed.extend(crate::comm::shm::remove_orphans(std::path::Path::new(
                crate::comm::shm::DIR,
            )));
            if removed.is_empty() {
                println!("nothing to clean up");
            }
            for r in removed {
                println!("removed {r}");
            }
            Ok(ExitCode::SUCCESS)
        }
        HangLab::Run {
            scenario: name,
            fix,
            timeout,
            json,
            mode,
            backend,
            events,
            try_fix,
        } => {
            let mut s = scenario::find(name).map_err(anyhow::Error::msg)?;
            // NCCL: its GPUs and library first, before anything is staged.
            let gpu_machine = if backend == "nccl" {
                let m = crate::lab::gpu::machine(crate::lab::gpu::LoadNccl::Asked);
                if let Some(why) = m.nccl_unavailable() {
                    return exit2(format!("lab run --backend nccl: {why}"));
                }
                if *mode == scenario::Mode::Emulated {
                    return exit2(
                        "lab run --backend nccl needs real network namespaces: NCCL reads the \
                         kernel's interfaces, and the emulated cluster exists only for ringlab's \
                         own TCP ranks"
                            .into(),
                    );
                }
                Some(m)
            } else {
                None
            };
            let json = &(*json || *events);
            if let Some(t) = timeout {
                s.timeout = *t;
            }
            if !json {
                println!(
                    "# {}: {}\n{}\n# staging on {} nodes × {} rank(s); watchdog after {} s without progress",
                    s.name, s.title, s.story, s.nodes, s.ranks_per_node, s.timeout
                );
            }
            let quiet = *json;
            let stream = *events;
            let mut on = |m: &Msg| {
                if stream {
                    println!("{}", scenario::StreamLine::Msg(m.clone()).to_line());
                    let _ = io::stdout().flush();
                    return;
                }
                if quiet {
                    return;
                }
                match m {
                    // A training loop reports every step: print every 50th.
                    Msg::Event(Event::Phase { phase, .. })
                        if phase.strip_prefix("step ").is_some_and(|p| {
                            p.split('/')
                                .next()
                                .and_then(|n| n.parse::<usize>().ok())
                                .is_some_and(|n| n != 1 && n % 50 != 0)
                        }) => {}
                    Msg::Event(Event::Phase { rank, phase }) => println!("  rank {rank}: {phase}"),
                    Msg::Log { rank, line } if line.contains("NCCL") => {
                        println!("  [rank {rank}] {line}")
                    }
                    _ => {}
                }
            };
            // Not root: try real namespaces inside a user namespace of our own first.
            let mut why_emulated = None;
            // SAFETY: geteuid has no preconditions.
            let root = unsafe { libc::geteuid() } == 0;
            if !root && *mode != scenario::Mode::Emulated && !cluster::in_user_namespace() {
                match cluster::rerun_in_user_namespace() {
                    Ok(st) => {
                        return Ok(ExitCode::from(
                            st.code().map_or(1, |c| c.clamp(0, 255) as u8),
                        ));
                    }
                    Err(e) if *mode == scenario::Mode::Netns => {
                        eprintln!(
                            "ringlab lab: not root, and {e}; run as root, or pass --mode emulated"
                        );
                        return Ok(ExitCode::from(2));
                    }
                    Err(e) => why_emulated = Some(format!("not root, and {e}")),
                }
            }
            let cluster = match why_emulated {
                Some(why) => Ok(cluster::Cluster::emulated(s.nodes, &s.fabric, &why)),
                None => scenario::cluster_for(&s, *mode),
            };
            let cluster = match cluster {
                Ok(c) => c,
                Err(e) => {
                    if stream {
                        println!("{}", scenario::StreamLine::Error(e.clone()).to_line());
                    }
                    eprintln!("ringlab lab: {e}");
                    return Ok(ExitCode::from(2));
                }
            };
            let nccl = match &gpu_machine {
                Some(_) if cluster.emulated_because.is_some() => {
                    let why = cluster.emulated_because.clone().unwrap_or_default();
                    return exit2(format!(
                        "lab run --backend nccl needs real network namespaces, and here: {why}"
                    ));
                }
                Some(m) => Some(scenario::NcclLab {
                    env: m.rank_env(),
                    ranks_per_gpu: crate::lab::gpu::ranks_per_gpu_for(s.ranks_per_node, m.gpus()),
                }),
                None => None,
            };
            if let Some(fix_json) = try_fix {
                let f: scenario::Fix = serde_json::from_str(fix_json)
                    .map_err(|e| anyhow::anyhow!("--try-fix: {e}"))?;
                let fixed = scenario::try_fix_on(&s, cluster, &f, nccl.as_ref(), &mut on);
                println!("{}", scenario::StreamLine::Fixed(Box::new(fixed)).to_line());
                return Ok(ExitCode::SUCCESS);
            }
            if !json {
                match &cluster.emulated_because {
                    Some(why) => println!(
                        "# EMULATED cluster ({why}): the nodes are processes on this host with virtual interfaces on loopback addresses"
                    ),
                    None => println!(
                        "# cluster: {} network namespaces (rlab-*){}",
                        s.nodes,
                        if cluster::in_user_namespace() {
                            ", inside an unprivileged user namespace"
                        } else {
                            ""
                        }
                    ),
                }
            }
            let report = scenario::run_on(&s, cluster, *fix, nccl.as_ref(), &mut on);
            if stream {
                println!(
                    "{}",
                    scenario::StreamLine::Report(Box::new(report.clone())).to_line()
                );
            } else if *json {
                println!("{}", serde_json::to_string(&report)?);
            } else {
                print_report(&report);
            }
            Ok(if scenario::as_expected(&s, &report) {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
    }
}

fn print_report(r: &crate::lab::scenario::LabReport) {
    let st = &r.staged;
    if let Some(why) = &r.emulated_because {
        println!(
            "\n# EMULATED cluster: {why}.\n# The nodes are processes on this host; each sees a virtual interface table mapped\n# onto loopback addresses, and connects are routed as its kernel would route them."
        );
    }
    println!(
        "\n== staged: {}{}",
        st.outcome.to_uppercase(),
        st.detected_after_s
            .map(|s| format!(" (detected after {s:.1} s)"))
            .unwrap_or_default()
    );
    if let Some(reason) = &st.reason {
        println!("{reason}");
    }
    for rr in &st.ranks {
        println!(
            "  rank {} (node {}): {:<40} advertised {}",
            rr.rank,
            rr.node,
            rr.phase,
            rr.advertised.as_deref().unwrap_or("-")
        );
    }
    let d = &r.diagnosis;
    if let Some(t) = &d.trace {
        println!(
            "\n== evidence: flight recorders lined up by collective number (✓ completed, … started, · scheduled, — never entered)"
        );
        for row in &t.table {
            println!("{row}");
        }
        println!(
            "  (the dumps: {}; `ringlab doctor --trace {}` reads them again)",
            t.dir, t.dir
        );
    } else {
        println!("\n== evidence: interfaces");
        for i in &d.interfaces {
            println!("  node {}  {:<8} {}", i.node, i.name, i.addr);
        }
        println!("== evidence: can node i reach each advertised address?");
        for x in &d.reachability {
            println!(
                "  node {} → rank {} at {:<22} {}",
                x.from_node, x.to_rank, x.addr, x.result
            );
        }
    }
    for (rank, lines) in &d.last_logs {
        for l in lines.iter().rev().take(3).rev() {
            println!("  [rank {rank}] {l}");
        }
    }
    println!(
        "\n== diagnosis: {} ({})\n  {}\n  fix: {}",
        d.culprit.title(),
        d.culprit,
        d.explanation,
        d.fix
    );
    if let Some(f) = &r.fixed {
        println!(
            "\n== after the fix: {} (all-reduce correct: {})",
            f.outcome.to_uppercase(),
            f.allreduce_correct
        );
    }
    println!(
        "\n# the cluster, {}:",
        if r.mode == "netns" {
            "in iproute2 commands"
        } else {
            "as emulated"
        }
    );
    for c in &r.commands {
        println!("  {c}");
    }
}
