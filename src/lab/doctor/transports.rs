//! The transport each connection of a log used, per host (NCCL's channel lines).

use super::*;

/// The transport of one connection, from an init line such as
/// `Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read`, `Channel 00 : 0[0] -> 1[1] via
/// SHM/direct/direct` (2.30: `via SHM/direct`) or `Channel 00/0 : 7[7] -> 8[0] [send] via
/// NET/IB/0/GDRDMA` (NVIDIA/nccl src/transport/p2p.cc, shm.cc, net.cc at v2.27.3-1:
/// `Channel %02d/%d : %d[%d] -> %d[%d] via %s…`), with the text after `via `.
pub(super) fn parse_transport(m: &Msg) -> Option<(Transport, &str)> {
    let Msg::Channel(c) = m else { return None };
    Some((c.transport()?, &c.via))
}

/// The transports one host's logged connections used, counted by kind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HostTransports {
    pub host: String,
    /// (transport, connections) for each transport seen, in a fixed order.
    pub counts: Vec<(Transport, usize)>,
    /// Network connections that use GPUDirect RDMA (`/GDRDMA`).
    pub gdrdma: usize,
}

/// Per host, how its ranks' connections were made (the `Channel … via …` init lines).
pub fn transports(files: &[(String, String)]) -> Vec<HostTransports> {
    let parsed = parse_files(files);
    let lines = lines_of(&parsed);
    let mut per: BTreeMap<&str, (BTreeMap<Transport, usize>, usize)> = BTreeMap::new();
    for l in &lines {
        if let Some((t, via)) = parse_transport(l.m) {
            let e = per.entry(l.host).or_default();
            *e.0.entry(t).or_default() += 1;
            if via.contains("/GDRDMA") {
                e.1 += 1;
            }
        }
    }
    per.into_iter()
        .map(|(host, (counts, gdrdma))| HostTransports {
            host: host.to_string(),
            counts: counts.into_iter().collect(),
            gdrdma,
        })
        .collect()
}

/// One line of text per host: `n1: 24 P2P, 8 NET/IB (8 with GPUDirect RDMA)`.
pub fn transports_summary(t: &[HostTransports]) -> Vec<String> {
    t.iter()
        .map(|h| {
            let mut s = format!(
                "{}: {}",
                h.host,
                join(h.counts.iter().map(|(t, n)| format!("{n} {}", t.detail())))
            );
            if h.gdrdma > 0 {
                s.push_str(&format!(" ({} with GPUDirect RDMA)", h.gdrdma));
            }
            s
        })
        .collect()
}
