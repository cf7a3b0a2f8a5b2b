//! `ringlab lab`: the hang lab's scenarios on the command line (list, run, cleanup).

use super::*;
use crate::lab::hang::{cluster, scenario};

#[derive(Debug, Clone, clap::Subcommand)]
pub enum HangLab {
    /// The scenarios: a misconfiguration, a run-time hang or a slow job each, staged on a
    /// virtual cluster.
    List,
    /// Stage a scenario, watch it hang (or run slowly), diagnose it; with --fix, apply the fix
    /// and re-run.
    Run(RunArgs),
    /// Remove what crashed or finished runs left behind: namespaces named rlab-* and their
    /// orphaned holders, shared-memory segments of dead ranks, and flight-recorder folders
    /// untouched for 2 minutes (newer ones are kept, and listed: a lab may still be writing).
    Cleanup,
}

/// `ringlab lab run`'s flags.
#[derive(Debug, Clone, clap::Args)]
pub struct RunArgs {
    /// Scenario name (see `ringlab lab list`).
    pub scenario: String,
    /// Apply the scenario's fix and re-run: it must pass.
    #[arg(long)]
    pub fix: bool,
    /// Seconds without progress before the watchdog calls it a hang (default: the scenario's).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=600))]
    pub timeout: Option<u64>,
    /// The report as one JSON object.
    #[arg(long)]
    pub json: bool,
    /// Where the cluster is built: network namespaces when this process may make them
    /// (root), else emulated on loopback addresses (auto); or insist on one.
    #[arg(long, value_enum, default_value_t = crate::lab::hang::scenario::Mode::Auto)]
    pub mode: crate::lab::hang::scenario::Mode,
    /// tcp: ringlab's own ranks (NCCL's behaviour modelled, any machine); nccl: real libnccl
    /// ranks inside the namespaces, one GPU shared where there are fewer GPUs than ranks
    /// (needs GPUs and namespaces: root, or user namespaces).
    #[arg(long, value_enum, default_value_t = Backend::Tcp)]
    pub backend: Backend,
    /// The NCCL release the emulated ranks behave and log as (2.7.0 to 2.28.x; a release
    /// ringlab does not model behaves as the newest modelled one up to it, and the header says
    /// which). Default:
    /// the release this machine's NCCL reports where a GPU lets ringlab load it, else 2.28.9.
    #[arg(long, value_name = "2.MINOR.PATCH", value_parser = parse_nccl_version)]
    pub nccl_version: Option<crate::nccl_log::Release>,
    /// (internal, for the app) every message as a JSON line, then the result.
    #[arg(long, hide = true)]
    pub events: bool,
    /// (internal, for the app) instead of staging, run once with this fix (JSON).
    #[arg(long, hide = true, value_name = "JSON")]
    pub try_fix: Option<String>,
}

pub fn hang_lab(cmd: &HangLab) -> anyhow::Result<ExitCode> {
    match cmd {
        HangLab::List => Ok(list()),
        HangLab::Cleanup => Ok(cleanup()),
        HangLab::Run(args) => run(args),
    }
}

/// A scenario's text for a plain terminal: its inline code marks (`if`) dropped; the screen
/// draws them as code.
fn plain(text: &str) -> String {
    text.replace('`', "")
}

fn list() -> ExitCode {
    let (all, bad) = scenario::all();
    for s in &all {
        println!("{:<26} {}", s.name, plain(&s.title));
    }
    for b in &bad {
        eprintln!("{}: {}", b.file, b.message);
    }
    if bad.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

fn cleanup() -> ExitCode {
    let mut removed = cluster::cleanup_all();
    let (traces, kept) = scenario::remove_old_trace_dirs();
    removed.extend(traces);
    removed.extend(crate::comm::cpu::shm::remove_orphans(std::path::Path::new(
        crate::comm::cpu::shm::DIR,
    )));
    if removed.is_empty() {
        println!(
            "nothing to clean up{}",
            if kept.is_empty() { "" } else { " now" }
        );
    }
    for r in removed {
        println!("removed {r}");
    }
    if !kept.is_empty() {
        println!(
            "kept {} flight-recorder folder(s) changed in the last {} s (a lab may still \
             be writing them; `ringlab doctor --trace DIR` reads them; run cleanup again \
             later to remove them):",
            kept.len(),
            scenario::TRACE_DIR_QUIET.as_secs()
        );
        for k in kept {
            println!("  {k}");
        }
    }
    ExitCode::SUCCESS
}

/// Why `--backend nccl` cannot run this scenario as asked, if it cannot.
fn refused_on_nccl(args: &RunArgs, s: &scenario::Scenario) -> Option<String> {
    if args.backend != Backend::Nccl {
        return None;
    }
    if args.nccl_version.is_some() {
        return Some(
            "lab run: --nccl-version sets the release the emulated ranks imitate; with \
             --backend nccl the real library speaks for itself"
                .into(),
        );
    }
    // The run-time scenarios run ringlab's own training loop (its header check and flight
    // recorder are the lesson): say so instead of quietly running TCP ranks.
    if s.train.is_some() {
        let nic: Vec<String> = scenario::all()
            .0
            .into_iter()
            .filter(|x| x.train.is_none())
            .map(|x| x.name)
            .collect();
        return Some(format!(
            "lab run {}: a run-time hang in ringlab's own training loop (its ranks, header \
             check and flight recorder are what the scenario teaches); --backend nccl runs \
             the NIC scenarios on real NCCL: {}. Run this one without --backend nccl",
            s.name,
            nic.join(", ")
        ));
    }
    if args.mode == scenario::Mode::Emulated {
        return Some(
            "lab run --backend nccl needs real network namespaces: NCCL reads the kernel's \
             interfaces, and the emulated cluster exists only for ringlab's own TCP ranks"
                .into(),
        );
    }
    None
}

/// What a run prints of its ranks' progress: nothing (`--json`), every message as a line
/// (`--events`, for the app), or the phases, every 50th training step and NCCL's lines.
fn progress(json: bool, stream: bool) -> impl FnMut(&Msg) {
    move |m: &Msg| {
        if stream {
            println!("{}", scenario::StreamLine::Msg(m.clone()).to_line());
            let _ = io::stdout().flush();
            return;
        }
        if json {
            return;
        }
        match m {
            // A training loop reports every step: print the first and every 50th.
            Msg::Event(Event::Step { step, .. }) if *step != 1 && step % 50 != 0 => {}
            Msg::Event(ev @ (Event::Phase { .. } | Event::Step { .. })) => {
                let phase = ev.phase_text().unwrap_or_default();
                println!("  rank {}: {phase}", ev.rank());
            }
            Msg::Log { rank, line } if line.contains("NCCL") => {
                println!("  [rank {rank}] {line}")
            }
            _ => {}
        }
    }
}

fn run(args: &RunArgs) -> anyhow::Result<ExitCode> {
    let mut s = scenario::find(&args.scenario)?;
    if let Some(why) = refused_on_nccl(args, &s) {
        return exit2(why);
    }
    // NCCL: its GPUs and library first, before anything is staged.
    let gpu_machine = if args.backend == Backend::Nccl {
        let m = crate::lab::bench::gpu::machine(crate::lab::bench::gpu::LoadNccl::Asked);
        if let Some(why) = m.nccl_unavailable() {
            return exit2(format!("lab run --backend nccl: {why}"));
        }
        Some(m)
    } else {
        None
    };
    let (json, stream) = (args.json || args.events, args.events);
    if let Some(t) = args.timeout {
        s.timeout = t;
    }
    let emulated = (args.backend != Backend::Nccl).then(|| emulated_release(args.nccl_version));
    if let Some((r, _)) = &emulated {
        s.emulate = Some(*r);
    }
    if !json {
        println!(
            "# {}: {}\n{}\n# staging on {} nodes × {} rank(s); watchdog after {} s without progress",
            s.name,
            plain(&s.title),
            plain(&s.story),
            s.nodes,
            s.ranks_per_node,
            s.timeout
        );
        if let Some((r, why)) = &emulated {
            let p = crate::nccl_log::Profile::nearest(*r);
            println!("# emulated NCCL: {} ({why})", p.describe(*r));
        }
    }
    let mut on = progress(json, stream);
    let cluster = match scenario::cluster_here(&s, args.mode) {
        Ok(c) => c,
        Err(scenario::NoCluster::RanInUserNamespace(code)) => return Ok(ExitCode::from(code)),
        Err(scenario::NoCluster::Refused(e)) => {
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
            ranks_per_gpu: crate::lab::bench::gpu::ranks_per_gpu_for(s.ranks_per_node, m.gpus()),
        }),
        None => None,
    };
    if let Some(fix_json) = &args.try_fix {
        let f: scenario::Fix =
            serde_json::from_str(fix_json).map_err(|e| anyhow::anyhow!("--try-fix: {e}"))?;
        let fixed = scenario::try_fix_on(&s, cluster, &f, nccl.as_ref(), &mut on);
        println!("{}", scenario::StreamLine::Fixed(Box::new(fixed)).to_line());
        return Ok(ExitCode::SUCCESS);
    }
    if !json {
        println!("{}", cluster_line(&cluster, s.nodes));
    }
    let report = scenario::run_on(&s, cluster, args.fix, nccl.as_ref(), &mut on);
    if stream {
        println!(
            "{}",
            scenario::StreamLine::Report(Box::new(report.clone())).to_line()
        );
    } else if json {
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

/// The line that says what the cluster is.
fn cluster_line(cluster: &cluster::Cluster, nodes: usize) -> String {
    match &cluster.emulated_because {
        Some(why) => format!(
            "# EMULATED cluster ({why}): the nodes are processes on this host with virtual interfaces on loopback addresses"
        ),
        None => format!(
            "# cluster: {nodes} network namespaces (rlab-*){}",
            if cluster::in_user_namespace() {
                ", inside an unprivileged user namespace"
            } else {
                ""
            }
        ),
    }
}

/// `--nccl-version`: any 2.x.y ringlab models; the error names the range.
fn parse_nccl_version(
    s: &str,
) -> Result<crate::nccl_log::Release, crate::nccl_log::release::ReleaseError> {
    crate::nccl_log::Release::parse(s)
}

/// The release the emulated ranks imitate, and why that one: the flag, else the NCCL this
/// machine has (where a GPU lets ringlab load it), else the newest modelled.
fn emulated_release(asked: Option<crate::nccl_log::Release>) -> (crate::nccl_log::Release, String) {
    use crate::nccl_log::{Profile, Release};
    if let Some(r) = asked {
        return (r, "--nccl-version".into());
    }
    let m = crate::lab::bench::gpu::machine(crate::lab::bench::gpu::LoadNccl::IfGpu);
    match m.probe.nccl_version.as_deref().map(Release::parse) {
        Some(Ok(r)) => (
            r,
            "the NCCL this machine has; --nccl-version to choose".into(),
        ),
        _ => (
            Profile::NEWEST.release,
            "no NCCL loaded here; --nccl-version to choose another".into(),
        ),
    }
}

fn print_report(r: &crate::lab::hang::scenario::LabReport) {
    let st = &r.staged;
    if let Some(why) = &r.emulated_because {
        println!(
            "\n# EMULATED cluster: {why}.\n# The nodes are processes on this host; each sees a virtual interface table mapped\n# onto loopback addresses, and connects are routed as its kernel would route them."
        );
    }
    let run_time = r.diagnosis.trace.is_some();
    println!(
        "\n== staged: {} ({})",
        st.outcome.name().to_uppercase(),
        crate::lab::hang::scenario::timing(st, run_time)
    );
    if let Some(reason) = &st.reason {
        println!("{reason}");
    }
    for rr in &st.ranks {
        println!(
            "  rank {} (node {}): {:<40} state {:<5} GPU {:<6} advertised {}",
            rr.rank,
            rr.node,
            rr.phase,
            rr.state.map_or_else(|| "-".to_string(), |s| s.to_string()),
            rr.gpu_util
                .map_or("-", crate::lab::hang::trace::GpuUtil::shown),
            rr.advertised.as_deref().unwrap_or("-")
        );
    }
    if st.ranks.iter().any(|rr| rr.gpu_util.is_some()) {
        println!("  {}", crate::lab::hang::trace::GPU_LEGEND);
    }
    let d = &r.diagnosis;
    if let Some(sl) = &d.slow {
        println!("\n== evidence: measured");
        for l in sl.lines() {
            println!("  {l}");
        }
    }
    if let Some(t) = &d.trace {
        println!(
            "\n== evidence: flight recorders lined up by collective number (✓ completed, … started, · scheduled, — never entered)"
        );
        for row in &t.table {
            println!("{}", row.text);
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
        if !d.reachability.is_empty() {
            println!("== evidence: can node i reach each advertised address?");
        }
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
            f.outcome.name().to_uppercase(),
            f.allreduce_correct
        );
        for l in f.slow.iter().flat_map(|sl| sl.lines()) {
            println!("  {l}");
        }
    }
    println!(
        "\n# the cluster, {}:",
        if r.mode == cluster::ClusterMode::Netns {
            "in iproute2 commands"
        } else {
            "as emulated"
        }
    );
    for c in &r.commands {
        println!("  {c}");
    }
}
