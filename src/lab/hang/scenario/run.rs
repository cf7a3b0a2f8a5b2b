//! Running a scenario: the cluster it needs, one staged run under the launcher's watchdog, the
//! fix re-run, and the flight-recorder folders they leave.

use super::*;
use crate::lab::hang::cluster::ClusterError;
use crate::lab::hang::trace::GpuUtil;

/// What one run of the sanity all-reduce on the cluster did.
pub(super) struct RunResult {
    outcome: Outcome,
    /// The run's length, start to end.
    run_s: f64,
    failure: Option<Failure>,
    detected_after: Option<f64>,
    phases: BTreeMap<usize, String>,
    values: Vec<(usize, f64)>,
    evidence: Option<Diagnosis>,
    /// How the ranks' bytes travelled (`P2P`, `SHM`, `NET`, or a mix such as `P2P+NET`), as they reported it.
    transport: Option<crate::comm::cpu::tcp::Transports>,
}

/// The staged cluster (`fix` None) or the staged cluster with a fix applied.
pub(super) fn placement(
    s: &Scenario,
    c: &Cluster,
    fix: Option<&Fix>,
    port: u16,
    nccl: bool,
) -> Placement {
    let mut env: Vec<(String, String)> = vec![("NCCL_DEBUG".into(), "INFO".into())];
    if nccl {
        env.extend(NcclLab::lab_env());
    } else if let Some(r) = s.emulate {
        env.push((crate::comm::emu::log::VERSION_ENV.into(), r.to_string()));
    }
    // A fix replaces the staged variables it names; what it does not mention stays staged.
    let mut merged = s.stage_env.clone();
    if let Some(f) = fix {
        merged.extend(f.env.clone());
    }
    env.extend(merged);
    let wrong: Option<IpAddr> = s.stage_master_addr;
    let use_wrong = !fix.is_some_and(|f| f.master_addr);
    let world = s.nodes * s.ranks_per_node;
    let start = match (!fix.is_some_and(|f| f.start_all), s.stage_start) {
        (true, Some(n)) => n,
        _ => world,
    };
    let store_ip = IpAddr::V4(c.nodes[0].ip);
    Placement {
        nodes: s.nodes,
        netns: (0..s.nodes).filter_map(|i| c.netns_path(i)).collect(),
        mntns: (0..s.nodes).map(|i| c.mntns_path(i)).collect(),
        utsns: (0..s.nodes).map(|i| c.utsns_path(i)).collect(),
        store_bind: SocketAddr::new(c.bind_ip(store_ip), port),
        store_listener: None,
        store_ip,
        store_ip_for_node: (0..s.nodes)
            .map(|i| if i > 0 && use_wrong { wrong } else { None })
            .collect(),
        env_for_node: (0..s.nodes)
            .map(|i| {
                let mut e = env.clone();
                e.extend(c.node_env(i));
                if nccl {
                    // The nodes share this host's name and boot id: without a host id of their
                    // own NCCL would take them for one machine and skip the network.
                    e.push(("NCCL_HOSTID".into(), format!("rlab-node{i}")));
                }
                e
            })
            .collect(),
        ranks_per_node: s.ranks_per_node,
        start,
    }
}

pub(super) fn run_once(
    s: &Scenario,
    c: &mut Cluster,
    fix: Option<&Fix>,
    nccl: Option<&NcclLab>,
    on: &mut dyn FnMut(&Msg),
) -> RunResult {
    if s.expect == Expect::Slow {
        return run_slow(s, c, fix, on);
    }
    let (port, store_listener) = match store_port(c) {
        Ok(p) => p,
        Err(e) => return RunResult::setup_error(e),
    };
    if let Err(e) = stage(s, c, fix, port) {
        return RunResult::setup_error(e.to_string());
    }
    let c = &*c;
    let mut l = Launch::single(s.ranks_per_node);
    // Raising the timeout is a choice a learner may try: the watchdog then waits longer.
    let timeout = s.timeout * fix.and_then(|f| f.timeout_factor).unwrap_or(1).max(1);
    l.timeout = Duration::from_secs(timeout);
    let mut place = placement(s, c, fix, port, nccl.is_some());
    place.store_listener = store_listener;
    l.placement = Some(place);
    let (job, trace_dir) = match job_for(s, &mut l, fix, nccl, timeout) {
        Ok(x) => x,
        Err(e) => return RunResult::setup_error(e),
    };
    let started = Instant::now();
    // A run-time hang starts when the loop stops moving, not when the job started.
    let progress = std::cell::Cell::new(started);
    let phases = std::cell::RefCell::new(BTreeMap::new());
    // Every line each rank logged (NCCL's INIT/NET lines come early and would scroll out of
    // the launcher's last lines).
    let logs = std::cell::RefCell::new(BTreeMap::<usize, Vec<String>>::new());
    let mut seen = Seen::default();
    let world = s.nodes * s.ranks_per_node;
    let r = launch::run_with(
        &job,
        &l,
        |m| {
            match m {
                Msg::Event(Event::Beat { .. }) => progress.set(Instant::now()),
                Msg::Event(ev @ (Event::Phase { .. } | Event::Step { .. })) => {
                    progress.set(Instant::now());
                    phases
                        .borrow_mut()
                        .insert(ev.rank(), ev.phase_text().unwrap_or_default());
                }
                Msg::Event(Event::Value { rank, value }) => seen.values.push((*rank, *value)),
                Msg::Event(Event::Transport { transport: t, .. }) => {
                    seen.transport = Some(seen.transport.unwrap_or_default().union(*t));
                }
                Msg::Event(Event::Done { rank }) => {
                    phases.borrow_mut().insert(*rank, "done".into());
                }
                Msg::Log { rank, line } if nccl.is_some() => {
                    logs.borrow_mut()
                        .entry(*rank)
                        .or_default()
                        .push(line.clone());
                }
                _ => {}
            }
            on(m);
        },
        |f, server| {
            // The watchdog has just fired: that is when the hang was detected, counted from
            // the start (init) or from the last progress (a training loop).
            let from = if trace_dir.is_some() {
                progress.get()
            } else {
                started
            };
            seen.detected = Some(from.elapsed().as_secs_f64());
            let mut d = match &trace_dir {
                Some(dir) => train_evidence(s, c, dir, f),
                None => gather(s, c, f, server, world),
            };
            if nccl.is_some() && trace_dir.is_none() {
                nccl_evidence(s, &mut d, &logs.borrow(), &phases.borrow());
            }
            seen.evidence = Some(d);
        },
    );
    // A run that went through leaves no evidence to read: its flight recorders go.
    if r.is_ok()
        && let Some(dir) = &trace_dir
    {
        let _ = std::fs::remove_dir_all(dir);
    }
    seen.result(r, started.elapsed().as_secs_f64(), phases.into_inner())
}

/// A slow scenario's run: its links staged, the job measured (the all-reduce, or the training
/// loop with its flight recorders), and for the staged run the pairwise sweep. `Slow` when the
/// job went through but was not restored ([`slow::restored`]), `Ok` when it was.
fn run_slow(
    s: &Scenario,
    c: &mut Cluster,
    fix: Option<&Fix>,
    on: &mut dyn FnMut(&Msg),
) -> RunResult {
    let started = Instant::now();
    if let Err(e) = slow::stage(s, c, fix) {
        return RunResult::setup_error(e);
    }
    let c = &*c;
    let slow::SlowRun {
        ev,
        values,
        transport,
        failed,
    } = if s.train.is_some() {
        straggle_run(s, c, fix, on)
    } else {
        link_run(s, c, fix, on)
    };
    let (culprit, explanation) = slow::diagnose(s, &ev);
    let outcome = match (&failed, slow::restored(s, c.mode(), &ev)) {
        (Some(_), _) => Outcome::Error,
        (None, true) => Outcome::Ok,
        (None, false) => Outcome::Slow,
    };
    let d = Diagnosis {
        interfaces: interface_rows(c),
        culprit,
        explanation,
        fix: s.fix.text.clone(),
        slow: Some(ev),
        ..Default::default()
    };
    // A job that went through left every rank done.
    let phases = (0..s.nodes * s.ranks_per_node)
        .filter(|_| failed.is_none())
        .map(|r| (r, "done".to_string()))
        .collect();
    RunResult {
        outcome,
        run_s: started.elapsed().as_secs_f64(),
        failure: failed.map(setup_failure),
        detected_after: None,
        phases,
        values,
        evidence: Some(d),
        transport,
    }
}

/// A shaped-link scenario's run: the all-reduce measured and, for the staged run, the sweep.
fn link_run(
    s: &Scenario,
    c: &Cluster,
    fix: Option<&Fix>,
    on: &mut dyn FnMut(&Msg),
) -> slow::SlowRun {
    let (measured, failed) = match slow::measure(s, c, fix, on) {
        Ok(m) => (Some(m), None),
        Err(e) => (None, Some(e)),
    };
    let transport = measured.as_ref().and_then(|m| m.transport);
    let (ev, sweep_failed) = match (fix, failed.is_some()) {
        (None, false) => slow::gather(s, c, fix, measured, on),
        _ => (slow::gather_measured(s, c, fix, measured), None),
    };
    slow::SlowRun {
        ev,
        values: Vec::new(),
        transport,
        failed: failed.or(sweep_failed),
    }
}

/// The straggler scenario's training loop on the whole cluster, its flight recorders read for
/// each rank's time inside and between collectives, then removed.
fn straggle_run(
    s: &Scenario,
    c: &Cluster,
    fix: Option<&Fix>,
    on: &mut dyn FnMut(&Msg),
) -> slow::SlowRun {
    let mut l = Launch::single(s.ranks_per_node);
    let (job, dir) = match job_for(s, &mut l, fix, None, s.timeout) {
        Ok(x) => x,
        Err(e) => {
            return slow::SlowRun {
                failed: Some(e),
                ..Default::default()
            };
        }
    };
    let nodes: Vec<usize> = (0..s.nodes).collect();
    let r = slow::launch_on(s, c, &nodes, fix, &job, on);
    let (timing, straggler) = dir.as_deref().map(slow::timings).unwrap_or_default();
    if let Some(d) = &dir {
        let _ = std::fs::remove_dir_all(d);
    }
    let ev = slow::SlowEvidence {
        timing,
        straggler,
        ..Default::default()
    };
    match r {
        Ok(seen) => slow::SlowRun {
            ev,
            values: seen.values,
            transport: seen.transport,
            failed: None,
        },
        Err(e) => slow::SlowRun {
            ev,
            failed: Some(e),
            ..Default::default()
        },
    }
}

/// Stage the scenario's faults on the cluster, and what `fix` changes of them: the firewall
/// on the store's port (opened by the fix that opens it), /dev/shm's size or the host's.
fn stage(s: &Scenario, c: &mut Cluster, fix: Option<&Fix>, port: u16) -> Result<(), ClusterError> {
    if s.stage_firewall {
        let open = fix.is_some_and(|f| f.open_firewall);
        for node in 0..s.nodes {
            c.firewall(node, port)
                .and_then(|()| if open { c.open_fabric(node) } else { Ok(()) })?;
        }
    }
    let change = fix.and_then(|f| match (&f.shm_size, f.ipc_host) {
        (_, true) => Some(cluster::ShmChange::Host),
        (Some(size), false) => Some(cluster::ShmChange::Size(size)),
        (None, false) => None,
    });
    if let Some(ch) = change {
        for node in 0..s.nodes {
            c.change_shm(node, ch)?;
        }
    }
    Ok(())
}

/// The job a run launches: the sanity all-reduce (on NCCL where `nccl` says so), or a
/// run-time scenario's training loop, each rank keeping its flight recorder in a fresh folder
/// (returned); the right fix removes the staged fault.
fn job_for(
    s: &Scenario,
    l: &mut Launch,
    fix: Option<&Fix>,
    nccl: Option<&NcclLab>,
    timeout: u64,
) -> Result<(Job, Option<std::path::PathBuf>), String> {
    let mut job = Job::sanity();
    if let Some(n) = nccl {
        l.env.extend(n.env.iter().cloned());
        job.backend = crate::lab::Backend::Nccl;
        job.ranks_per_gpu = n.ranks_per_gpu;
        job.timeout_s = timeout + 5;
        if fix.is_some() {
            // A fix run is meant to pass: a real NCCL init that takes longer than the
            // scenario's short watchdog must not read as a hang (L8). Staged runs keep it.
            l.nccl_init_grace = FIX_NCCL_INIT_GRACE;
            job.timeout_s = job.timeout_s.max(FIX_NCCL_INIT_GRACE.as_secs() + 5);
        }
    }
    let Some(spec) = &s.train else {
        return Ok((job, None));
    };
    let dir = fresh_trace_dir(&s.name).map_err(|e| e.to_string())?;
    let mut spec = spec.clone();
    spec.trace_dir = Some(dir.display().to_string());
    if fix.is_some_and(|f| f.remove_fault) {
        spec.fault = None;
    }
    let mut job = Job::train(spec);
    // The ranks' own wait for a neighbour's header outlasts the launcher's watchdog.
    job.timeout_s = timeout + 10;
    Ok((job, Some(dir)))
}

/// What a run saw while it ran: the ranks' values, their transports, the evidence gathered
/// when the watchdog fired, and when that was.
#[derive(Default)]
struct Seen {
    values: Vec<(usize, f64)>,
    transport: Option<crate::comm::cpu::tcp::Transports>,
    evidence: Option<Diagnosis>,
    detected: Option<f64>,
}

impl Seen {
    /// The run's result from the launch's, `run_s` seconds after it started.
    fn result(
        self,
        r: Result<(), LaunchError>,
        run_s: f64,
        phases: BTreeMap<usize, String>,
    ) -> RunResult {
        let (outcome, failure) = match r {
            Ok(()) => (Outcome::Ok, None),
            Err(LaunchError::Failed(f)) => {
                let outcome = if f.kind == crate::lab::job::launch::FailKind::Hang {
                    Outcome::Hang
                } else {
                    Outcome::Error
                };
                (outcome, Some(*f))
            }
            Err(LaunchError::Setup(e)) => (Outcome::Error, Some(setup_failure(e))),
        };
        RunResult {
            outcome,
            run_s,
            detected_after: failure.as_ref().map(|_| self.detected.unwrap_or(run_s)),
            failure,
            phases,
            values: self.values,
            evidence: self.evidence,
            transport: self.transport,
        }
    }
}

/// A failure of the setup, before any rank ran.
fn setup_failure(reason: String) -> Failure {
    Failure {
        kind: crate::lab::job::launch::FailKind::Error,
        reason,
        ranks: Vec::new(),
        logs: Vec::new(),
        processes: Vec::new(),
        states: Vec::new(),
    }
}

impl RunResult {
    fn setup_error(reason: String) -> Self {
        Self {
            outcome: Outcome::Error,
            run_s: 0.0,
            failure: Some(setup_failure(reason)),
            detected_after: None,
            phases: BTreeMap::new(),
            values: Vec::new(),
            evidence: None,
            transport: None,
        }
    }
}

/// Every node's interfaces, as the evidence lists them.
pub(super) fn interface_rows(c: &Cluster) -> Vec<IfaceRow> {
    c.nodes
        .iter()
        .flat_map(|n| {
            c.interfaces(n.index).into_iter().map(|i| IfaceRow {
                node: n.index,
                name: i.name,
                addr: i.addr.to_string(),
            })
        })
        .collect()
}

/// A new folder, readable only by this user, for one run's flight recorders: in /dev/shm where
/// there is one (memory: the ranks rewrite their recorder three times per collective, which on
/// a disk file system costs more than the collective), else the temporary folder.
pub(super) fn fresh_trace_dir(scenario: &str) -> std::io::Result<std::path::PathBuf> {
    // Folders of earlier runs age out on their own (L10): a day is long enough to read them
    // again with `doctor --trace`, and `lab cleanup` takes them sooner.
    let _ = remove_trace_dirs_quiet_for(TRACE_DIR_KEEP);
    let shm = std::path::Path::new("/dev/shm");
    // A /dev/shm with no room would leave the ranks unable to write their recorders: the
    // temporary folder then, slower but there.
    let roomy = crate::files::free_bytes(shm).is_none_or(|free| free >= TRACE_DIR_ROOM);
    let base = if shm.is_dir()
        && roomy
        && std::fs::metadata(shm).is_ok_and(|m| !m.permissions().readonly())
    {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    };
    crate::private::fresh_dir(&base, &format!("ringlab-trace-{scenario}-"))
}

/// How long a flight-recorder folder must be untouched before `lab cleanup` takes it: a
/// running lab rewrites its folder at every collective.
pub const TRACE_DIR_QUIET: std::time::Duration = std::time::Duration::from_secs(120);

/// Flight-recorder folders this user's earlier labs left (a failed run keeps its dumps for
/// `doctor --trace`), untouched for [`TRACE_DIR_QUIET`]. Returns what was removed, and the
/// folders kept because they changed more recently (a lab may still be writing them).
pub fn remove_old_trace_dirs() -> (Vec<String>, Vec<String>) {
    remove_trace_dirs_quiet_for(TRACE_DIR_QUIET)
}

/// How long a run's flight-recorder folder is kept before a later run removes it.
pub const TRACE_DIR_KEEP: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

/// The room a run's flight recorders need in /dev/shm (a few hundred KiB, with margin).
const TRACE_DIR_ROOM: u64 = 8 << 20;

/// [`remove_old_trace_dirs`], for folders untouched for `quiet`.
fn remove_trace_dirs_quiet_for(quiet: std::time::Duration) -> (Vec<String>, Vec<String>) {
    use std::os::unix::fs::MetadataExt;
    let me = crate::private::euid();
    let mut removed = Vec::new();
    let mut kept = Vec::new();
    for base in [std::path::PathBuf::from("/dev/shm"), std::env::temp_dir()] {
        let Ok(entries) = std::fs::read_dir(&base) else {
            continue;
        };
        for e in entries.flatten() {
            let path = e.path();
            let ours = e
                .file_name()
                .to_string_lossy()
                .starts_with("ringlab-trace-");
            let Ok(m) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            if !ours || !m.is_dir() || m.uid() != me {
                continue;
            }
            let old = m
                .modified()
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age > quiet);
            if !old {
                kept.push(path.display().to_string());
            } else if std::fs::remove_dir_all(&path).is_ok() {
                removed.push(format!("flight recorders {}", path.display()));
            }
        }
    }
    (removed, kept)
}

/// The store's port: the master port in fresh namespaces; on the emulated cluster, which
/// shares this host's loopback with everything else (other runs, other tests), a port the
/// kernel picks, bound here and handed to the store as it is: a port found free and released
/// could be taken by anyone before the store binds it again.
pub(super) fn store_port(
    c: &Cluster,
) -> Result<(u16, Option<std::sync::Arc<std::net::TcpListener>>), String> {
    store_port_on(c, 0)
}

/// [`store_port`] on node `node` (a job of some of the nodes has its store on its first).
pub(super) fn store_port_on(
    c: &Cluster,
    node: usize,
) -> Result<(u16, Option<std::sync::Arc<std::net::TcpListener>>), String> {
    let ip = c
        .nodes
        .get(node)
        .map(|n| IpAddr::V4(n.ip))
        .ok_or_else(|| format!("no node {node}"))?;
    if c.mode() == cluster::ClusterMode::Netns {
        // Bound inside the node's namespace (a socket stays in the namespace it was made in),
        // at the fixed port the firewall scenarios stage their rules for.
        let ns = c
            .netns_path(node)
            .ok_or_else(|| format!("node {node} has no network namespace"))?;
        let addr = SocketAddr::new(c.bind_ip(ip), MASTER_PORT);
        let l = cluster::in_netns(&ns, move || std::net::TcpListener::bind(addr))
            .map_err(|e| format!("entering node {node}: {e}"))?
            .map_err(|e| format!("binding the store on {addr} in node {node}: {e}"))?;
        return Ok((MASTER_PORT, Some(std::sync::Arc::new(l))));
    }
    let ip = c.bind_ip_on(node, ip);
    std::net::TcpListener::bind(SocketAddr::new(ip, 0))
        .and_then(|l| Ok((l.local_addr()?.port(), Some(std::sync::Arc::new(l)))))
        .map_err(|e| format!("binding the store on {ip}: {e}"))
}

/// Why there is no cluster to run on here.
pub enum NoCluster {
    /// This process was not root: the run went on in a user namespace of its own, re-executed,
    /// and ended with this exit code.
    RanInUserNamespace(u8),
    /// No cluster can be made as asked (the message says why and what to do).
    Refused(String),
}

/// The cluster for `s` on this machine, as `mode` asks: namespaces where this process may make
/// them; not root, the same command again inside an unprivileged user namespace of its own
/// (first, where that works); else the emulated cluster, saying why.
pub fn cluster_here(s: &Scenario, mode: Mode) -> Result<Cluster, NoCluster> {
    let mut why_emulated = None;
    if crate::private::euid() != 0 && mode != Mode::Emulated && !cluster::in_user_namespace() {
        match cluster::rerun_in_user_namespace() {
            Ok(st) => {
                return Err(NoCluster::RanInUserNamespace(
                    st.code().map_or(1, |c| c.clamp(0, 255) as u8),
                ));
            }
            Err(e) if mode == Mode::Netns => {
                return Err(NoCluster::Refused(format!(
                    "not root, and {e}; run as root, or pass --mode emulated"
                )));
            }
            Err(e) => why_emulated = Some(format!("not root, and {e}")),
        }
    }
    match why_emulated {
        Some(why) => Cluster::emulated(s.nodes, &s.fabric, &why),
        None => cluster_for(s, mode),
    }
    .map_err(|e| NoCluster::Refused(e.to_string()))
}

/// Build the cluster `s` needs: namespaces where they can be made (and, for a firewall, where
/// iptables is there), else the emulated cluster, saying why.
pub fn cluster_for(s: &Scenario, mode: Mode) -> Result<Cluster, ClusterError> {
    let netns = || -> Result<(), ClusterError> {
        cluster::available()?;
        if s.stage_firewall {
            cluster::firewall_available()?;
        }
        Ok(())
    };
    let shm = s.stage_shm.as_deref();
    let emulate = |why: &str| Cluster::emulated_with_shm(s.nodes, &s.fabric, why, shm);
    match mode {
        Mode::Emulated => emulate("asked for with --mode emulated"),
        Mode::Netns => {
            netns().map_err(|e| ClusterError::NetnsAsked(Box::new(e)))?;
            Cluster::create_with_shm(s.nodes, &s.fabric, shm)
        }
        Mode::Auto => match netns() {
            Ok(()) => Cluster::create_with_shm(s.nodes, &s.fabric, shm)
                .or_else(|e| emulate(&e.to_string())),
            Err(e) => emulate(&e.to_string()),
        },
    }
}

/// Stage `s` on `c` (from [`cluster_for`]), run it, diagnose; with `fix`, apply the fix and run
/// again.
pub fn run_on(
    s: &Scenario,
    mut c: Cluster,
    fix: bool,
    nccl: Option<&NcclLab>,
    on: &mut dyn FnMut(&Msg),
) -> LabReport {
    let staged = run_once(s, &mut c, None, nccl, on);
    let ranks = (0..s.nodes * s.ranks_per_node)
        .map(|r| RankReport {
            rank: r,
            node: r / s.ranks_per_node,
            phase: staged
                .phases
                .get(&r)
                .cloned()
                .unwrap_or_else(|| "not started".into()),
            advertised: None,
            state: staged
                .failure
                .as_ref()
                .and_then(|f| f.states.iter().find(|(pr, _)| *pr == r).map(|(_, p)| *p)),
            gpu_util: None,
        })
        .collect::<Vec<_>>();
    let mut diagnosis = staged.evidence.clone().unwrap_or_default();
    let ranks = ranks
        .into_iter()
        .map(|mut rr| {
            rr.advertised = diagnosis
                .reachability
                .iter()
                .find(|x| x.to_rank == rr.rank)
                .map(|x| x.addr.clone())
                .or_else(|| {
                    diagnosis
                        .advertised
                        .iter()
                        .find(|(r, _)| *r == rr.rank)
                        .map(|(_, a)| a.clone())
                });
            rr.gpu_util = gpu_util(staged.outcome, &diagnosis, &rr);
            rr
        })
        .collect();
    if diagnosis.fix.is_empty() {
        diagnosis.fix = s.fix.text.clone();
    }
    // The most telling stuck phase: a rank dialing someone, else the first stuck rank's.
    let stuck_phase = staged.failure.as_ref().and_then(|f| {
        f.ranks
            .iter()
            .find(|(_, p, _)| {
                matches!(
                    p,
                    crate::lab::Phase::Setup(crate::comm::Setup::Connect { .. })
                )
            })
            .or(f.ranks.first())
            .map(|(_, p, _)| p.to_string())
    });
    let report_staged = Staged {
        outcome: staged.outcome,
        run_s: staged.run_s,
        stuck_phase,
        detected_after_s: staged.detected_after,
        ranks,
        reason: staged.failure.as_ref().map(|f| f.reason.clone()),
        transport: staged.transport,
    };
    let fixed = fix.then(|| fixed_run(s, &mut c, &s.fix, nccl, on));
    LabReport {
        scenario: s.name.clone(),
        mode: c.mode(),
        emulated_because: c.emulated_because.clone(),
        staged: report_staged,
        diagnosis,
        fixed,
        commands: c.commands.clone(),
    }
}

/// A stuck rank's GPU as NCCL would leave it: from its flight recorder in a run-time hang;
/// before the first collective (a hang in NCCL's init, which runs on the CPU) idle, unless the
/// process is stopped or gone. None where the run did not get stuck.
fn gpu_util(outcome: Outcome, d: &Diagnosis, rr: &RankReport) -> Option<GpuUtil> {
    if matches!(outcome, Outcome::Ok | Outcome::Pass | Outcome::Slow) {
        return None;
    }
    if let Some(t) = &d.trace {
        return t.gpu_util.get(rr.rank).copied();
    }
    Some(if rr.state.is_some_and(|s| s.is_dead_or_stopped()) {
        GpuUtil::NoProcess
    } else {
        GpuUtil::Idle
    })
}

pub(super) fn fixed_run(
    s: &Scenario,
    c: &mut Cluster,
    fix: &Fix,
    nccl: Option<&NcclLab>,
    on: &mut dyn FnMut(&Msg),
) -> Fixed {
    let r = run_once(s, c, Some(fix), nccl, on);
    let world = (s.nodes * s.ranks_per_node) as f64;
    // A measured all-reduce checks its own results (a wrong element fails the run).
    let bench = s.expect == Expect::Slow && s.train.is_none();
    let correct = (bench && r.failure.is_none())
        || (r.values.len() == s.nodes * s.ranks_per_node
            && r.values.iter().all(|(_, v)| *v == world));
    let passed = r.outcome == Outcome::Ok && correct;
    Fixed {
        outcome: if passed { Outcome::Pass } else { r.outcome },
        allreduce_correct: correct,
        reason: r.failure.map(|f| f.to_string()),
        detected_after_s: if passed { None } else { r.detected_after },
        run_s: r.run_s,
        slow: r.evidence.as_ref().and_then(|d| d.slow.clone()),
        evidence: if passed { None } else { r.evidence },
        transport: r.transport,
    }
}

/// Try a fix (the scenario's, or one the learner picked) on a freshly staged cluster `c` (from
/// [`cluster_for`]).
pub fn try_fix_on(
    s: &Scenario,
    mut c: Cluster,
    fix: &Fix,
    nccl: Option<&NcclLab>,
    on: &mut dyn FnMut(&Msg),
) -> Fixed {
    fixed_run(s, &mut c, fix, nccl, on)
}

/// What a fix run on NCCL gives the ranks' init, whatever the scenario's watchdog.
const FIX_NCCL_INIT_GRACE: Duration = Duration::from_secs(30);

/// Fixes a learner might reach for: the right one and tempting wrong ones, in a stable order.
pub fn fix_choices(s: &Scenario) -> Vec<Fix> {
    if s.expect == Expect::Slow {
        return slow::fix_choices(s);
    }
    // Every choice reads alike, "what it does: the setting", the wrong ones as the right one.
    let env = |what: &str, k: &str, v: &str| Fix {
        text: format!("{what}: {k}={v}"),
        env: [(k.to_string(), v.to_string())].into_iter().collect(),
        ..Default::default()
    };
    let mut v = if s.stage_shm.is_some() {
        vec![
            env(
                "Keep NCCL off shared memory, use sockets",
                "NCCL_SHM_DISABLE",
                "1",
            ),
            env("Turn off GPU peer-to-peer copies", "NCCL_P2P_DISABLE", "1"),
            Fix {
                text: "Share the host's IPC namespace and its /dev/shm: docker run --ipc=host"
                    .into(),
                ipc_host: true,
                ..Default::default()
            },
            s.fix.clone(),
        ]
    } else if s.train.is_some() {
        vec![
            Fix {
                text: "Give the job more time: init_process_group(timeout=timedelta(minutes=30))"
                    .into(),
                timeout_factor: Some(2),
                ..Default::default()
            },
            env("Turn off GPU peer-to-peer copies", "NCCL_P2P_DISABLE", "1"),
            Fix {
                text: "Restart from the last checkpoint: run the same job again".into(),
                ..Default::default()
            },
            s.fix.clone(),
        ]
    } else {
        vec![
            env("Turn off GPU peer-to-peer copies", "NCCL_P2P_DISABLE", "1"),
            env("Turn off InfiniBand, use sockets", "NCCL_IB_DISABLE", "1"),
            env(
                "Keep NCCL off the Docker bridge",
                "NCCL_SOCKET_IFNAME",
                "^docker0",
            ),
            s.fix.clone(),
        ]
    };
    // Choices that do the same thing are one choice.
    let effect = |f: &Fix| Fix {
        text: String::new(),
        ..f.clone()
    };
    v.dedup_by(|a, b| effect(a) == effect(b));
    // A stable position for the right answer, never the first (where the cursor starts: a
    // second Enter must not solve the scenario unread) and not always the last.
    if let Some(r) = v.pop() {
        let at = if v.is_empty() {
            0
        } else {
            1 + s.name.len() % v.len()
        };
        v.insert(at.min(v.len()), r);
    }
    v
}

/// Did the run end as the scenario expects? (Staged: its symptom and culprit; fixed: pass.)
pub fn as_expected(s: &Scenario, r: &LabReport) -> bool {
    r.staged.outcome == s.expect.outcome()
        && r.diagnosis.culprit == s.culprit
        && r.fixed.as_ref().is_none_or(|f| f.outcome == Outcome::Pass)
}
