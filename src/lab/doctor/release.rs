//! Which NCCL release a log was written by, from the shapes of its lines.

use super::*;

/// Which NCCL release the logs look like they come from, and the lines that say so.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReleaseGuess {
    pub summary: String,
    /// Whether every host's lines fit one release range.
    pub consistent: bool,
    pub evidence: Vec<(String, usize, String)>,
}

/// The NCCL release the lines' shapes point to (the bootstrap line, the connect-retry lines,
/// a `NCCL version` line), per host; None when no line tells.
pub fn nccl_release(files: &[(String, String)]) -> Option<ReleaseGuess> {
    let parsed = parse_files(files);
    let lines = lines_of(&parsed);
    // Per host: each distinct shape once, with its first line.
    let mut per_host: BTreeMap<&str, BTreeMap<String, (Releases, &Line)>> = BTreeMap::new();
    for l in &lines {
        if let Some((shape, r)) = l.p.releases() {
            per_host
                .entry(l.host)
                .or_default()
                .entry(shape)
                .or_insert((r, l));
        }
    }
    if per_host.is_empty() {
        return None;
    }
    let mut evidence = Vec::new();
    let mut verdicts: BTreeMap<&str, Option<Releases>> = BTreeMap::new();
    for (host, shapes) in &per_host {
        let mut range = Some(Releases::new(0, Releases::OPEN));
        for (r, l) in shapes.values() {
            range = range.and_then(|x| x.meet(*r));
            evidence.push(l.evidence());
        }
        verdicts.insert(host, range);
    }
    evidence.sort();
    evidence.dedup();
    let shapes = |host: &str| -> String {
        join(
            per_host[host]
                .iter()
                .map(|(shape, (r, _))| format!("{shape} ({r})")),
        )
    };
    // Hosts whose ranges overlap may well run one release: only disjoint ranges disagree.
    let overall = verdicts
        .values()
        .try_fold(Releases::new(0, Releases::OPEN), |acc, v| acc.meet((*v)?));
    let (summary, consistent) = match overall {
        Some(r) => {
            let all: BTreeMap<String, Releases> = per_host
                .values()
                .flat_map(|m| m.iter().map(|(s, (r, _))| (s.clone(), *r)))
                .collect();
            (
                format!(
                    "these logs look like {r}: {}",
                    join(all.iter().map(|(s, r)| format!("{s} ({r})")))
                ),
                true,
            )
        }
        _ => {
            let mixed: Vec<&str> = verdicts
                .iter()
                .filter(|(_, v)| v.is_none())
                .map(|(h, _)| *h)
                .collect();
            let mut parts = Vec::new();
            for h in &mixed {
                parts.push(format!(
                    "{h}'s lines fit no single NCCL release: {} (logs of several releases \
                     mixed, or lines not written by NCCL itself)",
                    shapes(h)
                ));
            }
            let fitting: Vec<String> = verdicts
                .iter()
                .filter_map(|(h, v)| v.map(|r| format!("{h} looks like {r}")))
                .collect();
            if !fitting.is_empty() {
                parts.push(join(&fitting));
            }
            if mixed.is_empty() {
                parts.push(
                    "the hosts run different NCCL releases; every rank of a job should load \
                     the same one"
                        .into(),
                );
            }
            (parts.join("; "), false)
        }
    };
    Some(ReleaseGuess {
        summary,
        consistent,
        evidence,
    })
}
