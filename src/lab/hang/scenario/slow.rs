//! Slow, not hung: scenarios whose job runs to the end at the speed of its slowest part. A
//! link shaped with tc (`degraded-link`, `bad-node`), the slow one of two NICs picked by NCCL's
//! interface order (`wrong-nic`), or one rank slower at its own work (`straggler`). The
//! evidence is measured, as an engineer would measure it: the all-reduce's busbw beside the
//! model's prediction for the links as they are, the pairwise sendrecv sweep, what each node's
//! links are shaped to, the interface each rank's NCCL chose, and each rank's time inside and
//! between its collectives from the flight recorders.

use super::*;
use crate::collective::{Algorithm, Collective, Dtype};
use crate::comm::cpu::pace::Rate;
use crate::lab::bench::pairs::PairMatrix;
use crate::lab::hang::trace::{RankTiming, Straggler};

/// A slow scenario's measurement and its staged links (`[slow]` in the scenario file).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlowSpec {
    /// The all-reduce measured (f32, sum), bytes; each pair of the sweep sends half of it.
    pub bytes: u64,
    /// Links shaped with tc's token bucket.
    #[serde(default)]
    pub shape: Vec<LinkShape>,
    /// Every node also has this NIC on a data network of its own (10.78.0.0/24), unshaped,
    /// after its other interfaces.
    #[serde(default)]
    pub nic: Option<String>,
}

/// `{ node = 1, iface = "eth0", rate = "200mbit" }`: that node's sends through that interface
/// at that rate; without `node`, every node's.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkShape {
    #[serde(default)]
    pub node: Option<usize>,
    pub iface: String,
    pub rate: Rate,
}

impl LinkShape {
    fn nodes(&self, all: usize) -> std::ops::Range<usize> {
        match self.node {
            Some(n) => n..n + 1,
            None => 0..all,
        }
    }
}

/// The all-reduce as measured: nccl-tests' busbw of its out-of-place row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Measured {
    pub bytes: u64,
    pub ranks: usize,
    pub busbw_gbps: f64,
}

/// What a slow run showed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct SlowEvidence {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured: Option<Measured>,
    /// The model's busbw for the cluster as it ran: the ring's alpha-beta cost from its
    /// schedule, each transfer at the slower of its two ends' links.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted_gbps: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pairs: Option<PairMatrix>,
    /// Per node, its shaped links as `tc qdisc show` lists them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub qdiscs: Vec<(usize, String)>,
    /// Per rank, the interface its NCCL said NET/Socket uses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub chosen: Vec<(usize, String)>,
    /// Per rank, its time inside and between the collectives (the flight recorders).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub timing: Vec<RankTiming>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub straggler: Option<Straggler>,
}

impl SlowEvidence {
    /// The evidence for people: what the CLI prints and the lab screen shows.
    pub fn lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(m) = &self.measured {
            out.push(format!(
                "all-reduce {} on {} ranks: busbw {:.3} GB/s measured",
                crate::units::format_bytes(m.bytes),
                m.ranks,
                m.busbw_gbps
            ));
        }
        if let Some(p) = self.predicted_gbps {
            out.push(format!(
                "the model, with each link at its rate: {p:.3} GB/s (the ring is bounded by its slowest link)"
            ));
        }
        if let Some(p) = &self.pairs {
            out.extend(p.lines("node"));
        }
        for (node, q) in &self.qdiscs {
            out.push(format!("node {node}: {q}"));
        }
        for (rank, iface) in &self.chosen {
            out.push(format!("rank {rank}: NET/Socket uses {iface}"));
        }
        if !self.timing.is_empty() {
            out.push(
                "per rank, over the collectives all ranks completed (flight recorders):".into(),
            );
            for t in &self.timing {
                out.push(format!(
                    "  rank {}: {:>8.1} ms inside collectives, {:>8.1} ms between them",
                    t.rank,
                    t.inside_ns as f64 / 1e6,
                    t.between_ns as f64 / 1e6
                ));
            }
        }
        out
    }
}

/// Stage the scenario's links on `c`: its second NIC (once), its shaped links; a fix that
/// replaces a node's link (`unshape = NODE`) takes that node's shapes off.
pub fn stage(s: &Scenario, c: &mut Cluster, fix: Option<&Fix>) -> Result<(), String> {
    let Some(spec) = &s.slow else { return Ok(()) };
    if let Some(nic) = &spec.nic
        && !c.interfaces(0).iter().any(|i| &i.name == nic)
    {
        c.add_nic(nic).map_err(|e| e.to_string())?;
    }
    let unshape = fix.and_then(|f| f.unshape);
    for sh in &spec.shape {
        for n in sh.nodes(s.nodes) {
            if unshape == Some(n) {
                c.unshape(n, &sh.iface)
            } else {
                c.shape(n, &sh.iface, sh.rate)
            }
            .map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}

/// The per-frame share of a shaped link left for TCP's payload on the namespace cluster: tc's
/// tbf counts whole Ethernet frames (`qdisc_pkt_len`), 1514 bytes for 1448 of payload at MTU
/// 1500 with TCP timestamps. The emulated pacer counts payload itself.
const FRAME_PAYLOAD: f64 = 1448.0 / 1514.0;

/// The model's busbw for an all-reduce of `bytes` on the cluster with `shapes` on the links
/// ranks use (`iface`): ring schedule, one rank per node, the veth links otherwise unbounded.
pub fn predict(
    s: &Scenario,
    bytes: u64,
    iface: Option<&str>,
    mode: cluster::ClusterMode,
    unshaped: Option<usize>,
) -> Option<f64> {
    use crate::collective::cost::{Link, SlowNode, Topology, busbw_gbps, estimate_shaped};
    let spec = s.slow.as_ref()?;
    let world = s.nodes * s.ranks_per_node;
    let count = (bytes as usize / Dtype::F32.size()).max(world);
    let sched = crate::collective::Schedule::build(&crate::collective::schedule::Spec::new(
        Collective::AllReduce,
        Algorithm::Ring,
        world,
        count,
        Dtype::F32.size(),
    ))
    .ok()?;
    let veth = Link {
        name: "veth",
        latency_us: 20.0,
        bandwidth_gbps: f64::INFINITY,
        note: "a veth pair: bounded by the CPUs, not by a rate",
    };
    let topo = Topology {
        gpus_per_node: s.ranks_per_node,
        intra: veth,
        inter: veth,
    };
    let share = match mode {
        cluster::ClusterMode::Netns => FRAME_PAYLOAD,
        cluster::ClusterMode::Emulated => 1.0,
    };
    let slow: Vec<SlowNode> = spec
        .shape
        .iter()
        .filter(|sh| iface.is_none_or(|i| i == sh.iface))
        .flat_map(|sh| {
            sh.nodes(s.nodes)
                .filter(|&n| unshaped != Some(n))
                .map(|node| SlowNode {
                    node,
                    bandwidth_gbps: sh.rate.gbps() * share,
                })
        })
        .collect();
    if slow.is_empty() {
        return None;
    }
    let e = estimate_shaped(&sched, &topo, &slow);
    let bytes = sched.spec().bytes();
    (e.total_s > 0.0).then(|| busbw_gbps(Collective::AllReduce, world, bytes, e.total_s))
}

/// What one measured job saw: each rank's out-of-place time (µs), elements found wrong, its
/// log lines and (a training loop) its last value.
#[derive(Default)]
pub(super) struct Seen {
    times: Vec<f64>,
    wrong: u64,
    logs: BTreeMap<usize, Vec<String>>,
    pub(super) values: Vec<(usize, f64)>,
    pub(super) transport: Option<crate::comm::cpu::tcp::Transports>,
}

/// Run `job` on the nodes `nodes` of `c` (one rank each, the store on the first), as staged
/// (and fixed by `fix`); returns what it saw, or why it failed.
pub(super) fn launch_on(
    s: &Scenario,
    c: &Cluster,
    nodes: &[usize],
    fix: Option<&Fix>,
    job: &Job,
    on: &mut dyn FnMut(&Msg),
) -> Result<Seen, String> {
    let first = *nodes.first().ok_or("no nodes")?;
    let (port, listener) = store_port_on(c, first)?;
    let full = placement(s, c, fix, port, false);
    let pick = |v: &[Option<String>]| nodes.iter().map(|&n| v.get(n).cloned().flatten()).collect();
    let store_ip = IpAddr::V4(c.nodes[first].ip);
    let place = Placement {
        nodes: nodes.len(),
        netns: nodes.iter().filter_map(|&n| c.netns_path(n)).collect(),
        mntns: pick(&full.mntns),
        utsns: pick(&full.utsns),
        store_bind: SocketAddr::new(c.bind_ip_on(first, store_ip), port),
        store_listener: listener,
        store_ip,
        store_ip_for_node: vec![None; nodes.len()],
        env_for_node: nodes
            .iter()
            .map(|&n| full.env_for_node.get(n).cloned().unwrap_or_default())
            .collect(),
        ranks_per_node: s.ranks_per_node,
        start: nodes.len() * s.ranks_per_node,
    };
    let mut l = Launch::single(s.ranks_per_node);
    l.timeout = Duration::from_secs(s.timeout);
    l.placement = Some(place);
    let mut seen = Seen::default();
    let r = launch::run_with(
        job,
        &l,
        |m| {
            match m {
                Msg::Event(Event::Row {
                    in_place,
                    time_us,
                    wrong,
                    ..
                }) => {
                    seen.wrong += wrong.unwrap_or(0);
                    if !in_place {
                        seen.times.push(*time_us);
                    }
                }
                Msg::Event(Event::Value { rank, value }) => seen.values.push((*rank, *value)),
                Msg::Event(Event::Transport { transport: t, .. }) => {
                    seen.transport = Some(seen.transport.unwrap_or_default().union(*t));
                }
                Msg::Log { rank, line } => seen.logs.entry(*rank).or_default().push(line.clone()),
                _ => {}
            }
            on(m);
        },
        |_, _| {},
    );
    r.map_err(|e| e.to_string())?;
    if seen.wrong > 0 {
        return Err(format!(
            "{} elements of the results were wrong (the bytes arrived damaged or misplaced)",
            seen.wrong
        ));
    }
    Ok(seen)
}

/// nccl-tests' busbw of a row of `size` (its bytes as the bench counts them,
/// [`crate::lab::row_bytes`]): the slowest rank's time.
fn busbw(coll: Collective, size: u64, ranks: usize, times: &[f64]) -> Option<f64> {
    let t = times
        .iter()
        .copied()
        .filter(|t| t.is_finite())
        .reduce(f64::max)?;
    let bytes = crate::lab::row_bytes(coll, size, Dtype::F32.size(), ranks);
    (t > 0.0).then(|| crate::collective::cost::busbw_gbps(coll, ranks, bytes, t * 1e-6))
}

/// Does `tc qdisc show` (as gathered in `qdiscs`) shape `iface` on some node?
fn shaped(qdiscs: &[(usize, String)], iface: &str) -> bool {
    let dev = format!("dev {iface} ");
    qdiscs.iter().any(|(_, q)| q.contains(&dev))
}

/// A bench job of one size: `iters` timed after one warm-up, three times over, the row's time
/// the median of the three (`bench -R 3`): one stall of a busy host does not make a link slow.
fn bench_job(coll: Collective, bytes: u64, iters: usize, timeout: u64) -> Job {
    let mut job = Job::bench(coll, Algorithm::Ring, Dtype::F32, vec![bytes]);
    job.iters = iters;
    job.warmup = 1;
    job.repeat = 3;
    job.timeout_s = timeout + 10;
    job
}

/// The all-reduce as measured, the interface each rank's NCCL chose, how its bytes went.
pub(super) struct Measurement {
    pub(super) measured: Measured,
    pub(super) chosen: Vec<(usize, String)>,
    pub(super) transport: Option<crate::comm::cpu::tcp::Transports>,
}

/// What a slow run gives the report: its evidence, the training loop's last values, how the
/// bytes went, and why it failed, if it did.
#[derive(Default)]
pub(super) struct SlowRun {
    pub(super) ev: SlowEvidence,
    pub(super) values: Vec<(usize, f64)>,
    pub(super) transport: Option<crate::comm::cpu::tcp::Transports>,
    pub(super) failed: Option<String>,
}

/// The all-reduce on every node, measured; and the interface each rank's NCCL chose.
pub(super) fn measure(
    s: &Scenario,
    c: &Cluster,
    fix: Option<&Fix>,
    on: &mut dyn FnMut(&Msg),
) -> Result<Measurement, String> {
    let spec = s.slow.as_ref().ok_or("not a slow scenario")?;
    let job = bench_job(Collective::AllReduce, spec.bytes, 1, s.timeout);
    let nodes: Vec<usize> = (0..s.nodes).collect();
    let seen = launch_on(s, c, &nodes, fix, &job, on)?;
    let ranks = s.nodes * s.ranks_per_node;
    let busbw_gbps = busbw(Collective::AllReduce, spec.bytes, ranks, &seen.times)
        .ok_or("the all-reduce reported no time")?;
    let chosen = seen
        .logs
        .iter()
        .filter_map(|(r, lines)| lines.iter().find_map(|l| net_iface(l)).map(|i| (*r, i)))
        .collect();
    Ok(Measurement {
        measured: Measured {
            bytes: spec.bytes,
            ranks,
            busbw_gbps,
        },
        chosen,
        transport: seen.transport,
    })
}

/// The interface of a `NET/Socket : Using [0]eth0:10.77.0.1<0>` line.
fn net_iface(line: &str) -> Option<String> {
    let parsed = crate::nccl_log::parse_line(line)?;
    match crate::nccl_log::parse_msg(&parsed.text) {
        crate::nccl_log::Msg::Using {
            what: crate::nccl_log::UsingWhat::NetSocket,
            ifaces,
        } => ifaces.first().map(|i| i.name.clone()),
        _ => None,
    }
}

/// The pairwise sweep: sendrecv of half the all-reduce's bytes between every pair of nodes,
/// one pair at a time (`ringlab bench --pairs --cluster SCENARIO` runs the same).
pub fn sweep(
    s: &Scenario,
    c: &Cluster,
    fix: Option<&Fix>,
    on: &mut dyn FnMut(&Msg),
) -> Result<PairMatrix, String> {
    let spec = s.slow.as_ref().ok_or("not a slow scenario")?;
    let bytes = (spec.bytes / 2).max(4);
    let job = bench_job(Collective::SendRecv, bytes, 1, s.timeout);
    let mut pairs = Vec::new();
    for (a, b) in PairMatrix::order(s.nodes) {
        let seen = launch_on(s, c, &[a, b], fix, &job, on)
            .map_err(|e| format!("the pair {a}-{b}: {e}"))?;
        if let Some(g) = busbw(Collective::SendRecv, bytes, 2, &seen.times) {
            pairs.push((a, b, g));
        }
    }
    Ok(PairMatrix {
        nodes: s.nodes,
        bytes,
        pairs,
    })
}

/// Per node, its shaped links as tc lists them.
fn qdiscs(c: &Cluster) -> Vec<(usize, String)> {
    (0..c.nodes.len())
        .flat_map(|n| c.qdiscs(n).into_iter().map(move |q| (n, q)))
        .collect()
}

/// Name what the evidence shows: the node in every slow pair, the slow interface every rank
/// chose while a faster one sits unused, or the rank slower at its own work.
pub(super) fn diagnose(s: &Scenario, ev: &SlowEvidence) -> (Culprit, String) {
    if let Some(st) = &ev.straggler {
        return (Culprit::Straggler, st.explain());
    }
    if let Some(n) = ev.pairs.as_ref().and_then(PairMatrix::outlier) {
        let p = ev.pairs.as_ref();
        let (lo, hi) = p.and_then(PairMatrix::range).unwrap_or((0.0, 0.0));
        return (
            Culprit::SlowLink,
            format!(
                "node {n} is in every slow pair ({lo:.3} GB/s against up to {hi:.3} between the \
                 others): its link is degraded, and a ring crosses every node's link, so the \
                 whole all-reduce runs at its pace; check its port (on real hardware: ethtool's \
                 speed, mlxlink, the switch counters) and take it out or fix it"
            ),
        );
    }
    let shaped = |i: &str| shaped(&ev.qdiscs, i);
    let used: Vec<&String> = ev.chosen.iter().map(|(_, i)| i).collect();
    let shaped_used = used.iter().find(|i| shaped(i));
    // The nodes' NICs: the fabric and the second one; the fast one is neither shaped nor used.
    let fabric = s.fabric.first().cloned().unwrap_or_else(|| "eth0".into());
    let nics = [Some(fabric), s.slow.as_ref().and_then(|x| x.nic.clone())];
    let fast = nics
        .into_iter()
        .flatten()
        .find(|n| !shaped(n) && !used.contains(&n));
    if let (Some(slow), Some(fast)) = (shaped_used, fast) {
        let pairs = if ev.pairs.is_some() {
            "every pair is equally slow, so no node is to blame: the path is. "
        } else {
            ""
        };
        return (
            Culprit::WrongNic,
            format!(
                "{pairs}Every rank's NET/Socket uses {slow}, a slow interface NCCL's order \
                 picked, while {fast} sits unused: name it (NCCL_SOCKET_IFNAME={fast})"
            ),
        );
    }
    (Culprit::Unknown, String::new())
}

/// The flight recorders' timings of a training run (the straggler scenario).
pub(super) fn timings(dir: &std::path::Path) -> (Vec<RankTiming>, Option<Straggler>) {
    use crate::lab::hang::trace;
    match trace::read_paths(&[dir.to_path_buf()]) {
        Ok(traces) => {
            let t = trace::timing(&traces);
            let st = trace::straggler(&t);
            (t, st)
        }
        Err(_) => (Vec::new(), None),
    }
}

/// A slow scenario's evidence after its measured run: the sweep and the links' shapes.
pub(super) fn gather(
    s: &Scenario,
    c: &Cluster,
    fix: Option<&Fix>,
    measured: Option<Measurement>,
    on: &mut dyn FnMut(&Msg),
) -> (SlowEvidence, Option<String>) {
    let mut ev = gather_measured(s, c, fix, measured);
    let mut failed = None;
    match sweep(s, c, fix, on) {
        Ok(p) => ev.pairs = Some(p),
        Err(e) => failed = Some(e),
    }
    (ev, failed)
}

/// [`gather`] without the sweep: a fix's re-run shows its measurement and its links.
pub(super) fn gather_measured(
    s: &Scenario,
    c: &Cluster,
    fix: Option<&Fix>,
    measured: Option<Measurement>,
) -> SlowEvidence {
    let mut ev = SlowEvidence {
        qdiscs: qdiscs(c),
        ..Default::default()
    };
    if let Some(m) = measured {
        let iface = m.chosen.first().map(|(_, i)| i.clone());
        let unshaped = fix.and_then(|f| f.unshape);
        ev.predicted_gbps = predict(s, m.measured.bytes, iface.as_deref(), c.mode(), unshaped);
        ev.measured = Some(m.measured);
        ev.chosen = m.chosen;
    }
    ev
}

/// The busbw a slow scenario's staged links allow at most: the verdict's fallback bar where
/// the ranks named no interface (a run restored beats it twice over: ringlab's bar).
pub fn slow_bound(s: &Scenario, mode: cluster::ClusterMode) -> Option<f64> {
    let spec = s.slow.as_ref()?;
    predict(s, spec.bytes, None, mode, None)
}

/// A run's verdict, from its evidence: restored when no interface the ranks' NET/Socket used
/// is shaped on any node (`tc qdisc show` lists no token bucket on the path), for a
/// straggler when the flight recorders show none. Not from the busbw alone: on a loaded host
/// a healthy run over loopback can be starved to a shaped link's speed, and a verdict that
/// flips with the machine's load would teach the wrong lesson (the busbw is reported beside
/// it). Without the ranks' interface lines, the busbw against twice the staged bound.
pub(super) fn restored(s: &Scenario, mode: cluster::ClusterMode, ev: &SlowEvidence) -> bool {
    if s.train.is_some() {
        return ev.straggler.is_none() && !ev.timing.is_empty();
    }
    if !ev.chosen.is_empty() {
        return !ev.chosen.iter().any(|(_, iface)| shaped(&ev.qdiscs, iface));
    }
    match (slow_bound(s, mode), &ev.measured) {
        (Some(bound), Some(m)) => m.busbw_gbps > 2.0 * bound,
        _ => false,
    }
}

/// Fixes a learner might reach for when a job is slow: the right one and tempting wrong ones
/// that change nothing here (more time, a restart, turning off an InfiniBand transport NCCL is
/// not using) or break it (an exclusion list that lets lo win). The right one is never first.
pub fn fix_choices(s: &Scenario) -> Vec<Fix> {
    let env = |what: &str, k: &str, v: &str| Fix {
        text: format!("{what}: {k}={v}"),
        env: [(k.to_string(), v.to_string())].into_iter().collect(),
        ..Default::default()
    };
    let more_time = Fix {
        text: "Give the job more time: init_process_group(timeout=timedelta(minutes=30))".into(),
        timeout_factor: Some(2),
        ..Default::default()
    };
    let restart = Fix {
        text: "Restart from the last checkpoint: run the same job again".into(),
        ..Default::default()
    };
    let mut v = match (&s.train, s.slow.as_ref().and_then(|x| x.nic.as_ref())) {
        (Some(_), _) => vec![
            more_time,
            env("Turn off GPU peer-to-peer copies", "NCCL_P2P_DISABLE", "1"),
            restart,
        ],
        (None, Some(_)) => vec![
            env("Turn off InfiniBand, use sockets", "NCCL_IB_DISABLE", "1"),
            env(
                "Keep NCCL off the Docker bridge",
                "NCCL_SOCKET_IFNAME",
                "^docker0",
            ),
            restart,
        ],
        // Every node's link is a choice: the fix is only right on the node the evidence names.
        (None, None) => {
            let mut v = vec![more_time];
            v.extend((0..s.nodes).map(|n| match s.fix.unshape {
                Some(k) if k == n => s.fix.clone(),
                _ => Fix {
                    text: s.fix.text.replace(
                        &format!("node {}", s.fix.unshape.unwrap_or(usize::MAX)),
                        &format!("node {n}"),
                    ),
                    unshape: Some(n),
                    ..Default::default()
                },
            }));
            return v;
        }
    };
    let at = 1 + s.name.len() % v.len();
    v.insert(at.min(v.len()), s.fix.clone());
    v
}
