//! Counting a schedule: bytes per rank and per link, steps, and an alpha–beta time estimate.
//! Every figure here is read off the schedule; nothing recomputes chunk sizes.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use serde::Serialize;

use super::kinds::Collective;
use super::schedule::{Schedule, Spec};

/// Bytes one rank sent and received over the whole schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct RankBytes {
    /// The rank.
    pub rank: usize,
    /// Bytes it sent.
    pub bytes_sent: u64,
    /// Bytes it received.
    pub bytes_received: u64,
}

impl RankBytes {
    /// What this rank's port (its NIC or NVLink port) carries: bytes out plus bytes in.
    pub fn port_bytes(&self) -> u64 {
        self.bytes_sent.saturating_add(self.bytes_received)
    }
}

/// Traffic totals of a schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Traffic {
    /// One entry per rank, in rank order.
    pub per_rank: Vec<RankBytes>,
    /// Sum of all bytes sent (= sum received).
    pub total_bytes_sent: u64,
    /// Most bytes carried by one directed link src → dst.
    pub max_link_bytes: u64,
    /// Number of steps.
    pub steps: usize,
}

impl Traffic {
    /// The most bytes any one rank sends (the busiest rank's bytes: the one home of that figure).
    pub fn max_sent(&self) -> u64 {
        self.per_rank
            .iter()
            .map(|r| r.bytes_sent)
            .max()
            .unwrap_or(0)
    }

    /// The most bytes any one rank receives.
    pub fn max_received(&self) -> u64 {
        self.per_rank
            .iter()
            .map(|r| r.bytes_received)
            .max()
            .unwrap_or(0)
    }

    /// The rank whose port carries the most (sent + received; the lowest rank on a tie): naive
    /// all-reduce's root, whose link "carries everything"; None without ranks.
    pub fn busiest_port(&self) -> Option<RankBytes> {
        self.per_rank.iter().copied().max_by(|a, b| {
            a.port_bytes()
                .cmp(&b.port_bytes())
                .then(b.rank.cmp(&a.rank))
        })
    }
}

/// Counts every transfer of `schedule`.
pub fn traffic(schedule: &Schedule) -> Traffic {
    let n = schedule.spec().ranks;
    let mut per_rank: Vec<RankBytes> = (0..n)
        .map(|rank| RankBytes {
            rank,
            bytes_sent: 0,
            bytes_received: 0,
        })
        .collect();
    let mut links = LinkTotals::new(n);
    let mut total: u64 = 0;
    for t in schedule.steps().iter().flat_map(|s| &s.transfers) {
        let bytes = schedule.transfer_bytes(t);
        let (src, dst) = (&mut per_rank[t.src as usize], t.dst as usize);
        src.bytes_sent = src.bytes_sent.saturating_add(bytes);
        per_rank[dst].bytes_received = per_rank[dst].bytes_received.saturating_add(bytes);
        links.add(t.src, t.dst, bytes);
        total = total.saturating_add(bytes);
    }
    let links = links.finish();
    let max_link_bytes = links.values().copied().max().unwrap_or(0);
    Traffic {
        per_rank,
        total_bytes_sent: total,
        max_link_bytes,
        steps: schedule.len(),
    }
}

/// A multiplicative hash for link keys (src << 32 | dst), cheaper than SipHash.
#[derive(Default)]
struct LinkHasher(u64);

impl Hasher for LinkHasher {
    fn write(&mut self, bytes: &[u8]) {
        bytes.iter().for_each(|&b| self.write_u64(u64::from(b)));
    }
    fn write_u64(&mut self, i: u64) {
        self.0 = (self.0.rotate_left(5) ^ i).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
    fn finish(&self) -> u64 {
        // Fold the well-mixed high half down: the table indexes by the low bits, which alone
        // would ignore `src` (many senders to one root would all collide).
        self.0 ^ (self.0 >> 32)
    }
}

/// Bytes per directed link. Each sender caches its latest destination, so the ring's long runs
/// of src → src+1 never touch the map (it dominated `traffic` at N = 1024).
struct LinkTotals {
    last: Vec<(u32, u64)>,
    map: HashMap<u64, u64, BuildHasherDefault<LinkHasher>>,
}

impl LinkTotals {
    const NONE: u32 = u32::MAX;

    fn new(n: usize) -> Self {
        LinkTotals {
            last: vec![(Self::NONE, 0); n],
            map: HashMap::default(),
        }
    }

    fn add(&mut self, src: u32, dst: u32, bytes: u64) {
        let (cached, acc) = self.last[src as usize];
        if cached != dst {
            self.flush(src, cached, acc);
            self.last[src as usize] = (dst, bytes);
        } else {
            self.last[src as usize].1 = acc.saturating_add(bytes);
        }
    }

    fn flush(&mut self, src: u32, dst: u32, bytes: u64) {
        if dst != Self::NONE {
            let link = self
                .map
                .entry(u64::from(src) << 32 | u64::from(dst))
                .or_insert(0);
            *link = link.saturating_add(bytes);
        }
    }

    fn finish(mut self) -> HashMap<u64, u64, BuildHasherDefault<LinkHasher>> {
        for (src, (dst, bytes)) in std::mem::take(&mut self.last).into_iter().enumerate() {
            self.flush(src as u32, dst, bytes);
        }
        self.map
    }
}

/// Bytes each rank has sent during the first `steps` steps (for the UI's running counters).
pub fn sent_through(schedule: &Schedule, steps: usize) -> Vec<u64> {
    let mut sent = vec![0u64; schedule.spec().ranks];
    for t in schedule
        .steps()
        .iter()
        .take(steps)
        .flat_map(|s| &s.transfers)
    {
        let s = &mut sent[t.src as usize];
        *s = s.saturating_add(schedule.transfer_bytes(t));
    }
    sent
}

/// A link model for the alpha–beta estimate. The presets are assumptions, see `note`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Link {
    /// Short name for menus.
    pub name: &'static str,
    /// Fixed cost per step (alpha), microseconds.
    pub latency_us: f64,
    /// Bandwidth per direction per rank, GB/s (1 GB = 1e9 bytes).
    pub bandwidth_gbps: f64,
    /// Where the numbers come from and what is assumed.
    pub note: &'static str,
}

/// Link presets. Bandwidths are line rates per direction; latencies are assumed round figures.
/// Sources: NVLink 4 on H100 SXM is 18 links, 900 GB/s in both directions together (NVIDIA's
/// H100 datasheet), so 450 GB/s each way; PCIe 5.0 x16 is 32 GT/s × 16 lanes with 128b/130b
/// coding, about 63 GB/s each way; InfiniBand NDR and Ethernet by their line rates. Each note
/// fits under the ring view's comparison table at 80 columns (see the test below).
pub const LINK_PRESETS: [Link; 4] = [
    Link {
        name: "NVLink 4",
        latency_us: 2.0,
        bandwidth_gbps: 450.0,
        note: "450 GB/s each way (H100 datasheet); 2 µs/step assumed",
    },
    Link {
        name: "PCIe 5 x16",
        latency_us: 3.0,
        bandwidth_gbps: 64.0,
        note: "~64 GB/s each way, theoretical; 3 µs/step assumed",
    },
    Link {
        name: "400G InfiniBand",
        latency_us: 5.0,
        bandwidth_gbps: 50.0,
        note: "50 GB/s line rate; 5 µs/step assumed",
    },
    Link {
        name: "100G Ethernet",
        latency_us: 20.0,
        bandwidth_gbps: 12.5,
        note: "12.5 GB/s line rate; 20 µs/step (TCP) assumed",
    },
];

/// An alpha–beta time estimate, in seconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Estimate {
    /// Sum of the per-step latencies (alpha terms).
    pub latency_s: f64,
    /// Sum of the per-step transfer times (beta terms).
    pub bandwidth_s: f64,
    /// latency_s + bandwidth_s.
    pub total_s: f64,
}

/// Models each step as latency + (max over ranks of max(bytes it sends, bytes it receives in the
/// step)) / bandwidth, and sums the steps. Steps with no transfers cost nothing. The one-link
/// case of [`estimate_on`].
pub fn estimate(schedule: &Schedule, link: &Link) -> Estimate {
    estimate_on(schedule, &Topology::flat(*link))
}

/// Where the ranks sit: nodes of `gpus_per_node` GPUs (ranks k·G .. (k+1)·G are node k), a
/// fast link between the GPUs of a node and a slower one, each GPU's own NIC, between nodes.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Topology {
    /// GPUs per node (G); 0 or more than the ranks means one node.
    pub gpus_per_node: usize,
    /// Between GPUs of one node (e.g. NVLink 4).
    pub intra: Link,
    /// Between nodes, per GPU (e.g. one 400G InfiniBand NIC per GPU, as in a DGX H100).
    pub inter: Link,
}

impl Topology {
    /// Every rank on one node, joined by `link`.
    pub fn flat(link: Link) -> Topology {
        Topology {
            gpus_per_node: 0,
            intra: link,
            inter: link,
        }
    }

    /// Nodes of `gpus_per_node` GPUs on NVLink 4, one 400G InfiniBand NIC per GPU between them
    /// (the first and third of [`LINK_PRESETS`]).
    pub fn nvlink_ib(gpus_per_node: usize) -> Topology {
        Topology {
            gpus_per_node,
            intra: LINK_PRESETS[0],
            inter: LINK_PRESETS[2],
        }
    }

    /// Whether `a` and `b` sit on different nodes.
    pub fn crosses(&self, a: usize, b: usize) -> bool {
        self.gpus_per_node > 0 && a / self.gpus_per_node != b / self.gpus_per_node
    }
}

/// The alpha–beta estimate on a [`Topology`]. Per step and per rank, bytes are counted apart on
/// the node's link and on the NIC (a transfer between nodes uses the NIC); the step lasts the
/// largest latency among the links it uses plus the slowest of max(sent, received) / bandwidth
/// over every rank and both links. Steps with no transfers cost nothing.
pub fn estimate_on(schedule: &Schedule, topo: &Topology) -> Estimate {
    estimate_shaped(schedule, topo, &[])
}

/// A node whose link to the others carries less than the topology's NIC: a shaped or degraded
/// link (`tc tbf` on its veth in the slow-job lab), or a NIC that trained at a lower speed.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SlowNode {
    pub node: usize,
    /// GB/s each way.
    pub bandwidth_gbps: f64,
}

/// [`estimate_on`] where some nodes' links are slower: a transfer between nodes moves at the
/// slower of its two ends (the topology's NIC, or a [`SlowNode`]'s rate), and a step lasts its
/// latency plus the longest any rank spends sending or receiving on one link. With no slow
/// node it is [`estimate_on`]. A ring crosses every node's link in every step, so one slow
/// node sets the pace of the whole ring: the slowest link bounds it.
pub fn estimate_shaped(schedule: &Schedule, topo: &Topology, slow: &[SlowNode]) -> Estimate {
    let n = schedule.spec().ranks;
    let node = |r: usize| r.checked_div(topo.gpus_per_node).unwrap_or(0);
    let rate = |src: usize, dst: usize| -> f64 {
        if !topo.crosses(src, dst) {
            return topo.intra.bandwidth_gbps;
        }
        slow.iter()
            .filter(|s| s.node == node(src) || s.node == node(dst))
            .map(|s| s.bandwidth_gbps)
            .fold(topo.inter.bandwidth_gbps, f64::min)
    };
    let (mut latency_s, mut bandwidth_s) = (0.0, 0.0);
    // Seconds each rank spends sending and receiving in the step, per link (0: node, 1: NIC).
    let (mut send, mut recv) = (vec![[0f64; 2]; n], vec![[0f64; 2]; n]);
    for step in schedule.steps().iter().filter(|s| !s.transfers.is_empty()) {
        let mut lat: f64 = 0.0;
        for t in &step.transfers {
            let (a, b) = (t.src as usize, t.dst as usize);
            let k = usize::from(topo.crosses(a, b));
            lat = lat.max([&topo.intra, &topo.inter][k].latency_us * 1e-6);
            let r = rate(a, b);
            let secs = if r > 0.0 {
                schedule.transfer_bytes(t) as f64 / (r * 1e9)
            } else {
                0.0
            };
            send[a][k] += secs;
            recv[b][k] += secs;
        }
        let worst = send
            .iter()
            .chain(&recv)
            .flatten()
            .copied()
            .fold(0.0, f64::max);
        latency_s += lat;
        bandwidth_s += worst;
        for t in &step.transfers {
            (send[t.src as usize], recv[t.dst as usize]) = ([0.0; 2], [0.0; 2]);
        }
    }
    Estimate {
        latency_s,
        bandwidth_s,
        total_s: latency_s + bandwidth_s,
    }
}

/// NCCL's own model of its double binary tree all-reduce on `n` ranks (one per node): the
/// buffer pipelined in many small chunks, so a call pays the latency of one climb up the
/// deeper tree and one fall back down, 2·D hops ([`dtree::depth`](super::dtree::depth),
/// ⌈log2 n⌉), plus the busiest rank's bytes of the double-tree schedule (2·m for even n: half
/// the buffer up and twice down in the tree where it is inner, half up in the other; more for
/// odd n, where rank 0 is inner in both) over the
/// link's bandwidth. The same two counts NCCL's tuning table uses (src/graph/tuning.cc at
/// v2.27.3-1: tree latency grows with 2·log2 nNodes). The step-by-step [`estimate`] of the
/// app's own schedule is larger in latency: that schedule pipelines only the buffer's n chunks,
/// so the first chunk's climb and fall are paid once per step, not hidden.
pub fn dtree_pipelined_estimate(
    n: usize,
    m: usize,
    link: &Link,
) -> Result<Estimate, super::ScheduleError> {
    use super::kinds::Algorithm;
    let s = Schedule::build(&Spec::new(
        Collective::AllReduce,
        Algorithm::DoubleTree,
        n,
        m,
        1,
    ))?;
    let latency_s = if n > 1 {
        2.0 * super::dtree::depth(n) as f64 * link.latency_us * 1e-6
    } else {
        0.0
    };
    let bandwidth_s = if link.bandwidth_gbps > 0.0 {
        traffic(&s).max_sent() as f64 / (link.bandwidth_gbps * 1e9)
    } else {
        0.0
    };
    Ok(Estimate {
        latency_s,
        bandwidth_s,
        total_s: latency_s + bandwidth_s,
    })
}

/// The message size (bytes) below which the pipelined double tree
/// ([`dtree_pipelined_estimate`]) beats the ring's [`estimate`] for an all-reduce on `n`
/// ranks joined by `link`: both are a latency plus bytes × a slope, read off the two schedules
/// at one size, and they cross where `(L_ring − L_tree) / (slope_tree − slope_ring)`. `None`
/// when the tree never wins (no latency saved) or always does (no bandwidth lost).
pub fn tree_ring_crossover_bytes(
    n: usize,
    link: &Link,
) -> Result<Option<f64>, super::ScheduleError> {
    use super::kinds::Algorithm;
    // A multiple of n (and of 2n) so that every chunk is whole and both costs are linear in m.
    let m = 2 * n.max(1) * (1 << 20);
    let ring = estimate(
        &Schedule::build(&Spec::new(Collective::AllReduce, Algorithm::Ring, n, m, 1))?,
        link,
    );
    let tree = dtree_pipelined_estimate(n, m, link)?;
    let saved = ring.latency_s - tree.latency_s;
    let lost = (tree.bandwidth_s - ring.bandwidth_s) / m as f64;
    Ok((saved > 0.0 && lost > 0.0).then(|| saved / lost))
}

/// nccl-tests' bus bandwidth factor: all-reduce 2(n−1)/n; reduce-scatter, all-gather and
/// all-to-all (n−1)/n (nccl-tests src/alltoall.cu, `AlltoAllGetBw`); broadcast, reduce,
/// sendrecv 1. `n == 0` gives 0.
pub fn busbw_factor(op: Collective, n: usize) -> f64 {
    if n == 0 {
        return 0.0;
    }
    let n = n as f64;
    match op {
        Collective::AllReduce => 2.0 * (n - 1.0) / n,
        Collective::ReduceScatter | Collective::AllGather | Collective::AllToAll => (n - 1.0) / n,
        Collective::Broadcast | Collective::Reduce | Collective::SendRecv => 1.0,
    }
}

/// The closed form ring all-reduce approaches: each rank sends 2(n−1)/n · m bytes.
pub fn ring_allreduce_bytes_per_rank(n: usize, m: u64) -> f64 {
    if n == 0 {
        return 0.0;
    }
    2.0 * (n as f64 - 1.0) / n as f64 * m as f64
}

/// algbw in GB/s (1e9) for `bytes` in `seconds`; 0 when seconds is not positive.
pub fn algbw_gbps(bytes: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        bytes as f64 / seconds / 1e9
    } else {
        0.0
    }
}

/// busbw in GB/s: algbw × [`busbw_factor`].
pub fn busbw_gbps(op: Collective, n: usize, bytes: u64, seconds: f64) -> f64 {
    algbw_gbps(bytes, seconds) * busbw_factor(op, n)
}

#[cfg(test)]
mod tests {

    #[test]
    fn every_link_note_fits_the_ring_view_at_80_columns() {
        for l in LINK_PRESETS {
            let status = format!(" {}: {}", l.name, l.note);
            assert!(status.chars().count() <= 78, "{status}");
        }
    }
    use super::*;
    use crate::collective::{Algorithm, Spec};

    fn link(alpha_us: f64, gbps: f64) -> Link {
        Link {
            name: "test",
            latency_us: alpha_us,
            bandwidth_gbps: gbps,
            note: "",
        }
    }

    /// The crossover is where N(N−1−log2 N)·α/β says (lesson 09), computed from the two
    /// schedules: at 8 nodes, 5 µs and 25 GB/s, 4 MB, where both take 350 µs.
    #[test]
    fn the_tree_ring_crossover_is_read_off_both_schedules() {
        let l = link(5.0, 25.0);
        let x = tree_ring_crossover_bytes(8, &l).unwrap().unwrap();
        assert!((x - 4e6).abs() < 1.0, "{x}");
        let ring = estimate(
            &Schedule::build(&Spec::new(
                Collective::AllReduce,
                Algorithm::Ring,
                8,
                4_000_000,
                1,
            ))
            .unwrap(),
            &l,
        );
        let tree = dtree_pipelined_estimate(8, 4_000_000, &l).unwrap();
        assert!((ring.total_s * 1e6 - 350.0).abs() < 1e-6, "{ring:?}");
        assert!((tree.total_s * 1e6 - 350.0).abs() < 1e-6, "{tree:?}");
        // 16 nodes, 50 GB/s: 16 × 11 × 5 µs × 50 GB/s = 44 MB.
        let x = tree_ring_crossover_bytes(16, &link(5.0, 50.0))
            .unwrap()
            .unwrap();
        assert!((x - 44e6).abs() < 1.0, "{x}");
        // No latency to save: the tree never wins.
        assert_eq!(
            tree_ring_crossover_bytes(8, &link(0.0, 25.0)).unwrap(),
            None
        );
    }

    /// 2·⌈log2 N⌉ hops and the busiest rank's 2·M, for even and odd N.
    #[test]
    fn the_pipelined_tree_pays_two_depths_and_twice_the_buffer() {
        for (n, depth) in [(2, 1), (4, 2), (8, 3), (16, 4), (5, 3)] {
            assert_eq!(crate::collective::dtree::depth(n), depth, "N = {n}");
            let m = 2 * n * 1024;
            let e = dtree_pipelined_estimate(n, m, &link(1.0, 1.0)).unwrap();
            assert!((e.latency_s - 2e-6 * depth as f64).abs() < 1e-12, "N = {n}");
            // Odd N: rank 0 is inner in both trees and sends more than 2·M.
            let most = if n % 2 == 0 { 2.0 } else { 3.0 };
            assert!(
                e.bandwidth_s * 1e9 <= most * m as f64 + 1.0,
                "N = {n}: {e:?}"
            );
            // Two ranks only swap halves: each sends M; from 4 on an inner rank sends ≥ 1.5·M.
            let least = if n == 2 { 1.0 } else { 1.5 };
            assert!(e.bandwidth_s * 1e9 >= least * m as f64, "N = {n}: {e:?}");
        }
    }

    #[test]
    fn ring_allreduce_sends_2_n_minus_1_over_n() {
        let s = Schedule::build(&Spec::new(
            Collective::AllReduce,
            Algorithm::Ring,
            5,
            1003,
            1,
        ))
        .unwrap();
        let t = traffic(&s);
        assert_eq!(t.total_bytes_sent, 8024);
        assert_eq!(t.steps, 8);
        // Rank r sends every chunk but r (reduce-scatter) and every chunk but r+1 (all-gather):
        // 2M − |c_r| − |c_r+1|, within two elements of 2·4/5·1003 = 1604.8 (chunks 201,201,201,200,200).
        let sent: Vec<u64> = t.per_rank.iter().map(|r| r.bytes_sent).collect();
        assert_eq!(sent, vec![1604, 1604, 1605, 1606, 1605]);
        assert_eq!(sent_through(&s, 0), vec![0; 5]);
        assert_eq!(sent_through(&s, 99).iter().sum::<u64>(), 8024);
    }

    #[test]
    fn naive_root_link_carries_everything() {
        let s = Schedule::build(&Spec::new(
            Collective::AllReduce,
            Algorithm::Naive,
            4,
            100,
            4,
        ))
        .unwrap();
        let t = traffic(&s);
        assert_eq!(t.per_rank[0].bytes_received, 1200);
        assert_eq!(t.per_rank[0].bytes_sent, 1200);
        assert_eq!(t.max_link_bytes, 400);
    }

    #[test]
    fn naive_root_port_carries_everything_ring_spreads_it() {
        let m = 1 << 20;
        let port = |algo| {
            let s = Schedule::build(&Spec::new(Collective::AllReduce, algo, 4, m, 1))
                .expect("schedule");
            traffic(&s).busiest_port().expect("ranks")
        };
        let naive = port(Algorithm::Naive);
        assert_eq!(naive.rank, 0);
        assert_eq!(
            naive.port_bytes(),
            2 * 3 * m as u64,
            "2(N-1)M through the root"
        );
        let ring = port(Algorithm::Ring);
        assert_eq!(ring.port_bytes(), 3 * m as u64, "4(N-1)/N·M on every port");
        assert!(ring.port_bytes() < naive.port_bytes());
    }

    #[test]
    fn estimate_is_latency_plus_busiest_rank_per_step() {
        let s = Schedule::build(&Spec::new(
            Collective::AllReduce,
            Algorithm::Naive,
            4,
            250,
            4,
        ))
        .unwrap();
        let link = Link {
            name: "t",
            latency_us: 1.0,
            bandwidth_gbps: 1.0,
            note: "",
        };
        let e = estimate(&s, &link);
        // Two steps; the root receives 3000 B, then sends 3000 B.
        assert!((e.latency_s - 2e-6).abs() < 1e-12);
        assert!((e.bandwidth_s - 6e-6).abs() < 1e-12);
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    /// 2 nodes × 8 GPUs, M = 16e6 B (N = 16 chunks of 1e6 B); NVLink 4 (2 µs, 450 GB/s) inside,
    /// 400G InfiniBand (5 µs, 50 GB/s) per GPU between nodes.
    ///
    /// Flat ring: 2(N−1) = 30 steps; in each, ranks 7 → 8 and 15 → 0 cross on the NIC, so every
    /// step costs 5 µs + 1e6 / 50e9 s = 5 + 20 = 25 µs: 750 µs in all.
    /// Two-level: 7 intra reduce-scatter steps of one node-chunk (2 chunks, 2e6 B) on NVLink,
    /// 2 µs + 2e6 / 450e9 s = 2 + 4.444… µs each; 2 inter-node steps (ring of 2 nodes over the
    /// node-chunk's 2 chunks of 1e6 B) on the NIC, 25 µs each; 7 intra all-gather steps as the
    /// first. Latency 14·2 + 2·5 = 38 µs, bandwidth 14·4.444… + 2·20 = 102.222… µs: 140.222… µs.
    #[test]
    fn two_level_beats_the_flat_ring_across_two_nodes_of_eight() {
        let topo = Topology::nvlink_ib(8);
        let spec = |algo| Spec {
            gpus_per_node: 8,
            ..Spec::new(Collective::AllReduce, algo, 16, 16_000_000, 1)
        };
        let flat = Schedule::build(&spec(Algorithm::Ring)).unwrap();
        let e = estimate_on(&flat, &topo);
        assert_eq!(flat.len(), 30);
        assert!(close(e.latency_s, 150e-6), "{e:?}");
        assert!(close(e.bandwidth_s, 600e-6), "{e:?}");
        assert!(close(e.total_s, 750e-6), "{e:?}");
        let two = Schedule::build(&spec(Algorithm::TwoLevel)).unwrap();
        let e = estimate_on(&two, &topo);
        assert_eq!(two.len(), 16);
        assert!(close(e.latency_s, 38e-6), "{e:?}");
        assert!(
            close(e.bandwidth_s, 14.0 * 2e6 / 450e9 + 2.0 * 20e-6),
            "{e:?}"
        );
        assert!((e.total_s * 1e6 - 140.2222).abs() < 1e-3, "{e:?}");
        // On one node (everything NVLink) the estimate is the plain one.
        let one = estimate_on(&flat, &Topology::flat(LINK_PRESETS[0]));
        assert_eq!(one, estimate(&flat, &LINK_PRESETS[0]));
        // Each rank's NIC carries 2(P−1)/P · M/G = 2e6 B in the two-level ring.
        let nic: u64 = two
            .steps()
            .iter()
            .flat_map(|s| &s.transfers)
            .filter(|t| t.src == 3 && topo.crosses(3, t.dst as usize))
            .map(|t| two.transfer_bytes(t))
            .sum();
        assert_eq!(nic, 2_000_000);
    }

    /// All-to-all, N = 4, M = 4000 B: each rank sends 3 blocks of 1000 B; busbw factor 3/4
    /// (nccl-tests AlltoAllGetBw: (nranks−1)/nranks).
    #[test]
    fn alltoall_busbw_factor_is_n_minus_1_over_n() {
        assert_eq!(busbw_factor(Collective::AllToAll, 4), 0.75);
        assert_eq!(busbw_factor(Collective::AllToAll, 8), 0.875);
        let s = Schedule::build(&Spec::new(
            Collective::AllToAll,
            Algorithm::Ring,
            4,
            4000,
            1,
        ))
        .unwrap();
        let t = traffic(&s);
        assert!(t.per_rank.iter().all(|r| r.bytes_sent == 3000));
        // 4000 B in 1 ms: algbw 0.004 GB/s, busbw 0.003 GB/s.
        assert!(close(
            busbw_gbps(Collective::AllToAll, 4, 4000, 1e-3),
            0.003
        ));
    }

    #[test]
    fn busbw_factors_match_nccl_tests() {
        assert_eq!(busbw_factor(Collective::AllReduce, 8), 1.75);
        assert_eq!(busbw_factor(Collective::AllGather, 4), 0.75);
        assert_eq!(busbw_factor(Collective::SendRecv, 2), 1.0);
        assert_eq!(ring_allreduce_bytes_per_rank(4, 1000), 1500.0);
    }

    /// Nodes of one rank each on 50 GB/s NICs, one node at 12.5: every algorithm's shaped
    /// estimate is the unshaped one where nothing is slow, and the ring's equals the ring on
    /// links all at 12.5 (the slowest link bounds the ring).
    #[test]
    fn the_slowest_link_bounds_the_ring() {
        let topo = Topology {
            gpus_per_node: 1,
            intra: link(2.0, 450.0),
            inter: link(5.0, 50.0),
        };
        let m = 64 << 20;
        for algo in [
            Algorithm::Ring,
            Algorithm::DoubleTree,
            Algorithm::RecursiveDoubling,
        ] {
            let s = Schedule::build(&Spec::new(Collective::AllReduce, algo, 8, m, 1))
                .expect("schedule");
            let plain = estimate_on(&s, &topo);
            let shaped = estimate_shaped(&s, &topo, &[]);
            assert!((plain.total_s - shaped.total_s).abs() < 1e-12, "{algo:?}");
        }
        let ring = Schedule::build(&Spec::new(Collective::AllReduce, Algorithm::Ring, 8, m, 1))
            .expect("ring");
        let slow = [SlowNode {
            node: 3,
            bandwidth_gbps: 12.5,
        }];
        let shaped = estimate_shaped(&ring, &topo, &slow);
        let all_slow = estimate_on(
            &ring,
            &Topology {
                inter: link(5.0, 12.5),
                ..topo
            },
        );
        assert!(
            (shaped.total_s - all_slow.total_s).abs() < 1e-12,
            "{shaped:?} {all_slow:?}"
        );
        let healthy = estimate_on(&ring, &topo);
        assert!(
            shaped.bandwidth_s > 3.9 * healthy.bandwidth_s,
            "{shaped:?} {healthy:?}"
        );
    }
}
