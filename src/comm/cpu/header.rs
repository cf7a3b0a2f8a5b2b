//! The header every collective opens with on each link, ahead of its bytes: which call this
//! is on the communicator and what it is. Ranks that disagree (a size, a type, a collective,
//! a call one of them skipped) fail at the first header with both calls named, instead of
//! reducing garbage or waiting forever for bytes that never come. This check is ringlab's
//! (`ringlab bench`, `sanity` and the live lab): gloo sends such a preamble with every message;
//! NCCL compares no call across ranks and checks only sizes, on one path (NET/Socket's
//! "message truncated : receiving N bytes instead of M", v2.28.9
//! src/transport/net_socket.cc:565). The hang lab's training loop behaves as NCCL does
//! instead (src/lab/hang/train.rs).
//!
//! It travels in the same direction as the data and just before it, so it costs no round
//! trip: a rank that receives from a peer reads that peer's header first.

use crate::collective::{Algorithm, Collective, Dtype, Op, Spec};

/// Bytes on the wire.
pub const LEN: usize = 32;

const MAGIC: [u8; 4] = *b"RLC1";

/// One call as the wire carries it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// The call's number on this communicator (0 first).
    pub seq: u32,
    pub coll: u8,
    pub algo: u8,
    pub dtype: u8,
    pub op: u8,
    pub count: u64,
    pub root: u32,
    pub ranks: u32,
    pub gpus_per_node: u32,
}

fn index_of<T: PartialEq>(all: &[T], x: &T) -> u8 {
    all.iter()
        .position(|a| a == x)
        .and_then(|i| u8::try_from(i).ok())
        .unwrap_or(u8::MAX)
}

fn name_at<T: Copy>(all: &[T], i: u8, name: impl Fn(T) -> &'static str) -> String {
    all.get(usize::from(i))
        .map_or_else(|| format!("unknown({i})"), |&x| name(x).to_string())
}

impl Header {
    pub fn new(seq: u32, spec: &Spec, dtype: Dtype, op: Op) -> Self {
        let u32_of = |v: usize| u32::try_from(v).unwrap_or(u32::MAX);
        Self {
            seq,
            coll: index_of(&Collective::ALL, &spec.coll),
            algo: index_of(&Algorithm::ALL, &spec.algo),
            dtype: index_of(&Dtype::ALL, &dtype),
            op: index_of(&Op::ALL, &op),
            count: spec.count as u64,
            root: u32_of(spec.root),
            ranks: u32_of(spec.ranks),
            gpus_per_node: u32_of(spec.gpus_per_node),
        }
    }

    pub fn encode(&self) -> [u8; LEN] {
        let mut b = [0u8; LEN];
        b[0..4].copy_from_slice(&MAGIC);
        b[4..8].copy_from_slice(&self.seq.to_le_bytes());
        b[8] = self.coll;
        b[9] = self.algo;
        b[10] = self.dtype;
        b[11] = self.op;
        b[12..20].copy_from_slice(&self.count.to_le_bytes());
        b[20..24].copy_from_slice(&self.root.to_le_bytes());
        b[24..28].copy_from_slice(&self.ranks.to_le_bytes());
        b[28..32].copy_from_slice(&self.gpus_per_node.to_le_bytes());
        b
    }

    /// None: not a header at all (the peer's bytes are out of step with this rank's calls).
    pub fn decode(b: &[u8; LEN]) -> Option<Self> {
        if b[0..4] != MAGIC {
            return None;
        }
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let mut count = [0u8; 8];
        count.copy_from_slice(&b[12..20]);
        Some(Self {
            seq: u32_at(4),
            coll: b[8],
            algo: b[9],
            dtype: b[10],
            op: b[11],
            count: u64::from_le_bytes(count),
            root: u32_at(20),
            ranks: u32_at(24),
            gpus_per_node: u32_at(28),
        })
    }

    /// "call #3: all-reduce (ring) of 262144 × f32, sum, root 0, 4 ranks".
    pub fn describe(&self) -> String {
        let coll = name_at(&Collective::ALL, self.coll, Collective::name);
        let algo = name_at(&Algorithm::ALL, self.algo, Algorithm::name);
        let dtype = name_at(&Dtype::ALL, self.dtype, Dtype::name);
        let op = name_at(&Op::ALL, self.op, Op::name);
        format!(
            "call #{}: {coll} ({algo}) of {} × {dtype}, {op}, root {}, {} ranks",
            self.seq, self.count, self.root, self.ranks
        )
    }
}

/// What a rank says when a peer's header is not its own: both calls, or the bytes that came
/// where a header belonged.
pub fn mismatch(me: usize, mine: &Header, peer: usize, theirs: &[u8; LEN]) -> String {
    match Header::decode(theirs) {
        Some(h) => format!(
            "rank {me} and rank {peer} called different collectives: rank {me} {}; rank \
             {peer} {} (every rank must make the same calls in the same order). This is \
             ringlab's call check, not NCCL's: NCCL compares nothing across ranks and would \
             wait until a watchdog ended the job",
            mine.describe(),
            h.describe()
        ),
        None => format!(
            "rank {peer} sent bytes where rank {me} expected the header of its {} (first \
             bytes {:02x?}): the ranks are out of step",
            mine.describe(),
            &theirs[..8]
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(count: usize) -> Spec {
        Spec::new(Collective::AllReduce, Algorithm::Ring, 4, count, 4)
    }

    #[test]
    fn a_header_survives_the_wire_and_names_its_call() {
        let h = Header::new(7, &spec(262_144), Dtype::F32, Op::Sum);
        let back = Header::decode(&h.encode()).expect("decodes");
        assert_eq!(back, h);
        assert_eq!(
            back.describe(),
            "call #7: all-reduce (ring) of 262144 × f32, sum, root 0, 4 ranks"
        );
    }

    #[test]
    fn a_mismatch_names_both_calls_and_garbage_is_called_out_of_step() {
        let a = Header::new(3, &spec(1024), Dtype::F32, Op::Sum);
        let b = Header::new(3, &spec(4096), Dtype::F32, Op::Sum);
        let m = mismatch(0, &a, 1, &b.encode());
        assert!(
            m.contains("rank 0 call #3: all-reduce (ring) of 1024 × f32"),
            "{m}"
        );
        assert!(
            m.contains("rank 1 call #3: all-reduce (ring) of 4096 × f32"),
            "{m}"
        );
        let g = mismatch(0, &a, 1, &[0x3f; LEN]);
        assert!(g.contains("out of step"), "{g}");
    }
}
