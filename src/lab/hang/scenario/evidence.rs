//! Evidence, gathered while the ranks still wait: interface tables, advertised addresses,
//! reachability, log lines and flight recorders, and the rules that name a culprit from them.

use super::*;

/// A doctor finding that names a culprit: (finding, the culprit, a test its evidence must pass).
pub(super) type NcclRule = (
    crate::lab::doctor::Kind,
    Culprit,
    fn(&nccl_log::Msg) -> bool,
);

/// What `doctor --log`'s findings name as a scenario's culprit, in order.
pub(super) const NCCL_RULES: &[NcclRule] = &[
    (
        crate::lab::doctor::Kind::IfnameNoMatch,
        Culprit::IfaceNotFound,
        |_| true,
    ),
    (
        crate::lab::doctor::Kind::NoSocketInterface,
        Culprit::IfaceNotFound,
        |_| true,
    ),
    (
        crate::lab::doctor::Kind::LocalInterface,
        Culprit::UnroutableAddress,
        |_| true,
    ),
    (
        crate::lab::doctor::Kind::ConnectRetry,
        Culprit::ConnectionDropped,
        |m| matches!(m, nccl_log::Msg::Retry(r) if r.error == "Connection timed out"),
    ),
];

/// The culprit NCCL's own log names, read by `doctor --log`'s analyser: each node's ranks'
/// lines as one file (each node has its own host name, as on a real cluster). Returns
/// (culprit, explanation, the lines it rests on).
pub(super) fn nccl_culprit(
    ranks_per_node: usize,
    logs: &BTreeMap<usize, Vec<String>>,
) -> Option<(Culprit, String, Vec<String>)> {
    let mut files: BTreeMap<usize, String> = BTreeMap::new();
    for (rank, lines) in logs {
        let f = files.entry(rank / ranks_per_node.max(1)).or_default();
        for l in lines {
            f.push_str(l);
            f.push('\n');
        }
    }
    let files: Vec<(String, String)> = files
        .into_iter()
        .map(|(n, t)| (format!("node{n}"), t))
        .collect();
    let findings = crate::lab::doctor::analyze(&files);
    NCCL_RULES.iter().find_map(|(kind, culprit, test)| {
        let f = findings.iter().find(|f| f.kind == *kind)?;
        let holds = f
            .evidence
            .iter()
            .any(|(_, _, l)| nccl_log::parse_line(l).is_some_and(|p| test(&p.msg)));
        holds.then(|| {
            (
                *culprit,
                format!("NCCL's log: {}", f.summary),
                f.evidence.iter().map(|(_, _, l)| l.clone()).collect(),
            )
        })
    })
}

/// The address each rank's NCCL said it uses for its sockets (`NET/Socket : Using …`, else
/// `Bootstrap: Using …`), as `addr (iface)`.
pub(super) fn nccl_advertised(logs: &BTreeMap<usize, Vec<String>>) -> BTreeMap<usize, String> {
    let mut out = BTreeMap::new();
    for (rank, lines) in logs {
        let mut best: Option<String> = None;
        for l in lines {
            for (what, name, addr) in crate::lab::doctor::interfaces_used(l) {
                if what == "NET/Socket" || best.is_none() {
                    best = Some(format!("{addr} ({name})"));
                }
            }
        }
        if let Some(b) = best {
            out.insert(*rank, b);
        }
    }
    out
}

/// Run time: the evidence is each rank's flight recorder. The launcher knows which processes
/// were stopped or gone (they cannot say so themselves): that goes into their dumps, which are
/// then lined up by sequence number.
pub(super) fn train_evidence(
    s: &Scenario,
    c: &Cluster,
    dir: &std::path::Path,
    f: &Failure,
) -> Diagnosis {
    use crate::lab::hang::trace;
    let mut d = Diagnosis {
        last_logs: f.logs.clone(),
        interfaces: interface_rows(c),
        fix: s.fix.text.clone(),
        ..Default::default()
    };
    let mut traces = match trace::read_paths(&[dir.to_path_buf()]) {
        Ok(t) => t,
        Err(e) => {
            d.explanation = format!("no flight recorder to read: {e}");
            // The usual reason the ranks could not write them: a full /dev/shm (L10).
            if let Some(free) = crate::files::free_bytes(dir)
                && free < 1 << 20
            {
                d.explanation.push_str(&format!(
                    "; {} has {} free, so the ranks could not write their recorders: free it \
                     (`ringlab lab cleanup` removes old ones; `df -h /dev/shm`)",
                    dir.parent().unwrap_or(dir).display(),
                    crate::units::format_bytes(free)
                ));
            }
            return d;
        }
    };
    for t in &mut traces {
        if let Some((_, p)) = f.processes.iter().find(|(r, _)| *r == t.rank) {
            t.process = p.clone();
            // The dump as the watchdog leaves it: with what the launcher saw of the process.
            if let Ok(text) = serde_json::to_string_pretty(&*t) {
                let _ = std::fs::write(dir.join(format!("rank{}.json", t.rank)), text);
            }
        }
    }
    let a = trace::analyse(&traces);
    d.culprit = match &a.culprit {
        Some(trace::Culprit::Mismatch { .. }) => Culprit::CallMismatch,
        Some(trace::Culprit::NeverEntered { .. }) => Culprit::NeverEntered,
        Some(trace::Culprit::StuckInside { .. }) => Culprit::StuckRank,
        Some(trace::Culprit::Gone { .. }) => Culprit::RankGone,
        None => Culprit::Unknown,
    };
    let rank = a.culprit.as_ref().map(trace::Culprit::rank);
    let seq = a.culprit.as_ref().and_then(trace::Culprit::seq);
    // What the program called that collective: the culprit's own label, else the others'.
    let label = seq.and_then(|q| {
        let of = |t: &trace::RankTrace| {
            t.entries
                .iter()
                .find(|e| e.seq == q)
                .and_then(|e| e.label.clone())
        };
        traces
            .iter()
            .find(|t| Some(t.rank) == rank)
            .and_then(of)
            .or_else(|| traces.iter().find_map(of))
    });
    // "step 57" from "step 57 tp mlp": where in the training loop it went wrong.
    let step = label
        .as_deref()
        .and_then(|l| l.split_whitespace().nth(1))
        .map(|n| format!(" at step {n}"))
        .unwrap_or_default();
    d.explanation = match rank {
        Some(r) => format!("rank {r}{step}: {}", a.explanation),
        None => a.explanation.clone(),
    };
    d.trace = Some(TraceEvidence {
        dir: dir.display().to_string(),
        rank,
        seq,
        label,
        table: trace::table(&traces, &a, 6),
        gpu_util: (0..s.nodes * s.ranks_per_node)
            .map(|r| {
                let t = traces.iter().find(|t| t.rank == r);
                let gone = trace::Process::Gone {
                    code: None,
                    signal: None,
                };
                trace::GpuUtil::of(t.map_or(&gone, |t| &t.process), t)
            })
            .collect(),
    });
    d
}

/// What a failed staged run left to read: the scenario, the cluster, the launcher's report,
/// each rank's log lines (parsed) and what each rank advertised in the store.
pub(super) struct Evidence<'a> {
    s: &'a Scenario,
    c: &'a Cluster,
    f: &'a Failure,
    d: &'a Diagnosis,
    logs: &'a [(usize, nccl_log::Line)],
    advertised: &'a [(usize, Option<SocketAddr>)],
    world: usize,
}

impl Evidence<'_> {
    fn node_of(&self, r: usize) -> usize {
        r / self.s.ranks_per_node.max(1)
    }
    fn iface_of(&self, node: usize, ip: &IpAddr) -> Option<String> {
        self.d
            .interfaces
            .iter()
            .find(|i| i.node == node && i.addr == ip.to_string())
            .map(|i| i.name.clone())
    }
    fn log_line(&self, want: impl Fn(&nccl_log::Msg) -> bool) -> Option<(usize, &nccl_log::Line)> {
        self.logs
            .iter()
            .find(|(_, l)| want(&l.msg))
            .map(|(r, l)| (*r, l))
    }
    fn published(&self) -> usize {
        self.advertised.iter().filter(|(_, a)| a.is_some()).count()
    }
}

/// One thing the evidence can show: the culprit, and the test that finds it there (its
/// explanation, from the evidence). The first rule that holds names the culprit.
pub(super) struct Rule {
    culprit: Culprit,
    test: fn(&Evidence) -> Option<String>,
}

pub(super) const RULES: &[Rule] = &[
    Rule {
        culprit: Culprit::ShmFull,
        test: |e| {
            let (r, l) = e.log_line(|m| matches!(m, nccl_log::Msg::ShmFailed { .. }))?;
            Some(format!("rank {r} on node {}: {}", e.node_of(r), l.text))
        },
    },
    Rule {
        culprit: Culprit::IfaceNotFound,
        test: |e| {
            let (r, l) = e.log_line(|m| matches!(m, nccl_log::Msg::NoSocketInterface))?;
            // The rank's own report says what the filter was and what the node has.
            let why =
                e.f.reason
                    .split_once(": ")
                    .map_or(l.text.as_str(), |(_, w)| w);
            Some(format!("rank {r} on node {}: {why}", e.node_of(r)))
        },
    },
    Rule {
        culprit: Culprit::UnroutableAddress,
        test: |e| {
            let (r, a) = e
                .advertised
                .iter()
                .find_map(|(r, a)| a.filter(|a| !cluster::is_fabric(&a.ip())).map(|a| (*r, a)))?;
            let name = e
                .iface_of(e.node_of(r), &a.ip())
                .unwrap_or_else(|| "?".into());
            let everywhere =
                e.c.nodes
                    .iter()
                    .all(|n| e.iface_of(n.index, &a.ip()).is_some());
            Some(format!(
                "rank {r} advertised {a} on {name}{}; a peer that dials it reaches its own node, not rank {r}",
                if everywhere {
                    ", an address every node has"
                } else {
                    ""
                }
            ))
        },
    },
    Rule {
        culprit: Culprit::ConnectionDropped,
        test: |e| {
            let x =
                e.d.reachability.iter().find(|x| {
                    x.result == Reached::TimedOut && x.from_node != e.node_of(x.to_rank)
                })?;
            Some(format!(
                "node {} → rank {} at {}: Connection timed out. The address is on the fabric and \
                 the store's port answered, so the host is up: new connections to the job's \
                 other ports are dropped without a reply (a firewall)",
                x.from_node, x.to_rank, x.addr
            ))
        },
    },
    Rule {
        culprit: Culprit::StoreUnreachable,
        test: |e| {
            let spawned = |p: &crate::lab::Phase| *p == crate::lab::Phase::Spawned;
            if e.published() >= e.f.ranks.len().max(1)
                || !e.f.ranks.iter().any(|(_, p, _)| spawned(p))
            {
                return None;
            }
            let stuck: Vec<String> =
                e.f.ranks
                    .iter()
                    .filter(|(_, p, _)| spawned(p))
                    .map(|(r, _, _)| format!("rank {r} (node {})", e.node_of(*r)))
                    .collect();
            Some(format!(
                "{} never reached the rendezvous store: check --master-addr on that node",
                stuck.join(", ")
            ))
        },
    },
    Rule {
        culprit: Culprit::MissingRank,
        test: |e| {
            if e.published() >= e.world {
                return None;
            }
            let missing: Vec<String> = e
                .advertised
                .iter()
                .filter(|(_, a)| a.is_none())
                .map(|(r, _)| r.to_string())
                .collect();
            Some(format!(
                "world size {}, but rank(s) {} never arrived; the others wait for them",
                e.world,
                missing.join(", ")
            ))
        },
    },
];

pub(super) fn gather(
    s: &Scenario,
    c: &Cluster,
    f: &Failure,
    server: Option<&crate::comm::cpu::store::StoreServer>,
    world: usize,
) -> Diagnosis {
    let mut d = Diagnosis {
        last_logs: f.logs.clone(),
        interfaces: interface_rows(c),
        ..Default::default()
    };
    let advertised: Vec<(usize, Option<SocketAddr>)> = (0..world)
        .map(|r| {
            (
                r,
                server
                    .and_then(|sv| sv.peek(&format!("addr/{r}")))
                    .and_then(|a| a.parse().ok()),
            )
        })
        .collect();
    for (r, a) in &advertised {
        let Some(a) = a else { continue };
        for n in &c.nodes {
            d.reachability.push(Reach {
                from_node: n.index,
                to_rank: *r,
                addr: a.to_string(),
                result: c.probe(n.index, *a),
            });
        }
    }
    let logs: Vec<(usize, nccl_log::Line)> = f
        .logs
        .iter()
        .flat_map(|(r, l)| {
            l.iter()
                .filter_map(move |x| nccl_log::parse_line(x).map(|p| (*r, p)))
        })
        .collect();
    let ev = Evidence {
        s,
        c,
        f,
        d: &d,
        logs: &logs,
        advertised: &advertised,
        world,
    };
    let (culprit, explanation) = RULES
        .iter()
        .find_map(|rule| (rule.test)(&ev).map(|why| (rule.culprit, why)))
        .unwrap_or((
            Culprit::Unknown,
            "no known misconfiguration in the evidence".to_string(),
        ));
    d.culprit = culprit;
    d.explanation = explanation;
    d.fix = s.fix.text.clone();
    d
}

/// On NCCL the ranks publish nothing in ringlab's store: the evidence is NCCL's own log.
/// Its culprit (from `doctor --log`'s analyser) comes first; a rank that never started is a
/// missing rank; otherwise what the store saw stands (a rank stuck before the rendezvous).
pub(super) fn nccl_evidence(
    s: &Scenario,
    d: &mut Diagnosis,
    logs: &BTreeMap<usize, Vec<String>>,
    phases: &BTreeMap<usize, String>,
) {
    let world = s.nodes * s.ranks_per_node;
    d.advertised = nccl_advertised(logs).into_iter().collect();
    if let Some((culprit, explanation, lines)) = nccl_culprit(s.ranks_per_node, logs) {
        d.culprit = culprit;
        d.explanation = explanation;
        // The lines it rests on, under the rank that logged the first of them.
        let first = lines.first().cloned().unwrap_or_default();
        let rank = logs
            .iter()
            .find(|(_, ls)| ls.contains(&first))
            .map_or(0, |(r, _)| *r);
        d.last_logs = vec![(rank, lines)];
        return;
    }
    let missing: Vec<String> = (0..world)
        .filter(|r| !phases.contains_key(r))
        .map(|r| r.to_string())
        .collect();
    if !missing.is_empty() && missing.len() < world {
        d.culprit = Culprit::MissingRank;
        d.explanation = format!(
            "world size {world}, but rank(s) {} never started; the others wait inside ncclCommInitRank for them",
            missing.join(", ")
        );
    } else if d.culprit == Culprit::MissingRank {
        // The store-based guess: no NCCL rank publishes an address there.
        d.culprit = Culprit::Unknown;
        d.explanation = "no known misconfiguration in NCCL's log".into();
    }
}
