//! The vocabulary: which collective, which algorithm, which element type, which reduction.
//!
//! Every enum has `ALL`, `name()` (the spelling ringlab prints), `Display`, `FromStr` (which also
//! accepts the nccl-tests spellings) and, where the UI cycles through values, `next()`.

use std::fmt;
use std::str::FromStr;

/// A string did not name a known value; the message lists the valid spellings.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} \"{input}\"; expected one of: {valid}")]
pub struct ParseError {
    /// What was being parsed ("collective", "algorithm", "dtype", "op").
    pub what: &'static str,
    /// The rejected input, verbatim.
    pub input: String,
    /// The canonical spellings, comma separated.
    pub valid: String,
}

/// Lower-cases and drops `-`, `_`, `/` and spaces, so "All_Reduce" and "all-reduce" compare equal.
fn squash(s: &str) -> String {
    s.trim()
        .chars()
        .filter(|c| !matches!(c, '-' | '_' | '/' | ' '))
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

fn parse_error(
    what: &'static str,
    input: &str,
    names: impl Iterator<Item = &'static str>,
) -> ParseError {
    ParseError {
        what,
        input: input.to_string(),
        valid: names.collect::<Vec<_>>().join(", "),
    }
}

/// Implements `Display` via `name()` and a `next()` that cycles through `ALL`.
macro_rules! vocabulary {
    ($t:ty) => {
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }
        impl $t {
            /// The next value in `ALL`, wrapping around (for keys that cycle through values).
            pub fn next(self) -> Self {
                let i = Self::ALL.iter().position(|&x| x == self).unwrap_or(0);
                Self::ALL[(i + 1) % Self::ALL.len()]
            }
        }
    };
}

/// A collective operation: one call every rank makes together.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Collective {
    /// Every rank ends with the element-wise reduction of all buffers.
    AllReduce,
    /// The reduction, split in N chunks; rank r keeps chunk r.
    ReduceScatter,
    /// Rank r contributes chunk r; every rank ends with all chunks in rank order.
    AllGather,
    /// The root's buffer is copied to every rank.
    Broadcast,
    /// The reduction lands on the root only.
    Reduce,
    /// Point to point: rank r sends its buffer to rank (r+1) mod N (nccl-tests' sendrecv shift).
    SendRecv,
    /// Every rank sends a distinct block to every other rank: block j of rank r's buffer is
    /// what r means for j, and it lands in block r of rank j's buffer (nccl-tests' alltoall).
    AllToAll,
}

impl Collective {
    /// Every collective, in menu order.
    pub const ALL: [Collective; 7] = [
        Collective::AllReduce,
        Collective::ReduceScatter,
        Collective::AllGather,
        Collective::Broadcast,
        Collective::Reduce,
        Collective::SendRecv,
        Collective::AllToAll,
    ];

    /// The canonical name: "all-reduce", "reduce-scatter", "all-gather", "broadcast", "reduce",
    /// "sendrecv", "all-to-all".
    pub fn name(self) -> &'static str {
        match self {
            Collective::AllReduce => "all-reduce",
            Collective::ReduceScatter => "reduce-scatter",
            Collective::AllGather => "all-gather",
            Collective::Broadcast => "broadcast",
            Collective::Reduce => "reduce",
            Collective::SendRecv => "sendrecv",
            Collective::AllToAll => "all-to-all",
        }
    }

    /// The nccl-tests binary stem: "all_reduce", "reduce_scatter", ..., "sendrecv", "alltoall".
    pub fn nccl_name(self) -> &'static str {
        match self {
            Collective::AllReduce => "all_reduce",
            Collective::ReduceScatter => "reduce_scatter",
            Collective::AllGather => "all_gather",
            Collective::Broadcast => "broadcast",
            Collective::Reduce => "reduce",
            Collective::SendRecv => "sendrecv",
            Collective::AllToAll => "alltoall",
        }
    }

    /// The NCCL call that runs it, as NCCL's own messages name it: `ncclAllReduce`; all-to-all
    /// and send/recv are groups of `ncclSend`/`ncclRecv`.
    pub fn nccl_api(self) -> &'static str {
        match self {
            Collective::AllReduce => "ncclAllReduce",
            Collective::ReduceScatter => "ncclReduceScatter",
            Collective::AllGather => "ncclAllGather",
            Collective::Broadcast => "ncclBroadcast",
            Collective::Reduce => "ncclReduce",
            Collective::SendRecv => "ncclSend/ncclRecv",
            Collective::AllToAll => "ncclSend/ncclRecv (all-to-all)",
        }
    }

    /// True when the collective combines data with an [`Op`] (all-reduce, reduce-scatter, reduce).
    pub fn is_reducing(self) -> bool {
        matches!(
            self,
            Collective::AllReduce | Collective::ReduceScatter | Collective::Reduce
        )
    }

    /// True for the point-to-point patterns (send/recv, all-to-all): one schedule of sends,
    /// whatever the algorithm.
    pub fn is_point_to_point(self) -> bool {
        matches!(self, Collective::SendRecv | Collective::AllToAll)
    }

    /// True when the collective has a root rank (broadcast, reduce).
    pub fn has_root(self) -> bool {
        matches!(self, Collective::Broadcast | Collective::Reduce)
    }
}
vocabulary!(Collective);

impl FromStr for Collective {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, ParseError> {
        match squash(s).as_str() {
            "allreduce" => Ok(Collective::AllReduce),
            "reducescatter" => Ok(Collective::ReduceScatter),
            "allgather" => Ok(Collective::AllGather),
            "broadcast" | "bcast" => Ok(Collective::Broadcast),
            "reduce" => Ok(Collective::Reduce),
            "sendrecv" | "p2p" => Ok(Collective::SendRecv),
            "alltoall" | "a2a" => Ok(Collective::AllToAll),
            _ => Err(parse_error(
                "collective",
                s,
                Self::ALL.iter().map(|c| c.name()),
            )),
        }
    }
}

/// How the collective is carried out: which rank sends what to whom, step by step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// Neighbour to neighbour around a ring; bandwidth-optimal for all-reduce.
    Ring,
    /// Everything through one hub rank (the root); its links carry (N−1)·M each way.
    Naive,
    /// A binary tree (heap layout rooted at the root): log-depth, whole buffers per edge.
    Tree,
    /// NCCL's double binary tree (src/graph/trees.cc), pipelined chunk by chunk: two trees,
    /// each carrying half the buffer. All-reduce only, as in NCCL.
    DoubleTree,
    /// Two-level (hierarchical) ring for nodes × GPUs: reduce-scatter inside each node,
    /// all-reduce between the ranks with the same local index, all-gather inside each node.
    /// All-reduce only.
    TwoLevel,
    /// Recursive doubling: log2 N pairwise exchanges of the whole buffer, the latency-optimal
    /// short-message all-reduce of MPI libraries (not an NCCL algorithm). All-reduce only.
    RecursiveDoubling,
}

impl Algorithm {
    /// Every algorithm, in menu order.
    pub const ALL: [Algorithm; 6] = [
        Algorithm::Ring,
        Algorithm::Naive,
        Algorithm::Tree,
        Algorithm::DoubleTree,
        Algorithm::TwoLevel,
        Algorithm::RecursiveDoubling,
    ];

    /// The canonical name: "ring", "naive", "tree", "double-tree", "two-level",
    /// "recursive-doubling".
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Ring => "ring",
            Algorithm::Naive => "naive",
            Algorithm::Tree => "tree",
            Algorithm::DoubleTree => "double-tree",
            Algorithm::TwoLevel => "two-level",
            Algorithm::RecursiveDoubling => "recursive-doubling",
        }
    }

    /// The name in at most 12 columns, for tables ("rec-doubling"; it parses back).
    pub fn short_name(self) -> &'static str {
        match self {
            Algorithm::RecursiveDoubling => "rec-doubling",
            a => a.name(),
        }
    }

    /// Whether this algorithm has a schedule for `op`. Send/recv and all-to-all are point to
    /// point patterns with one schedule whatever the algorithm; the double tree and the
    /// two-level ring are all-reduce algorithms (NCCL runs its tree only for all-reduce).
    pub fn supports(self, op: Collective) -> bool {
        match self {
            Algorithm::Ring | Algorithm::Naive | Algorithm::Tree => true,
            Algorithm::DoubleTree | Algorithm::TwoLevel | Algorithm::RecursiveDoubling => {
                op == Collective::AllReduce || op.is_point_to_point()
            }
        }
    }
}
vocabulary!(Algorithm);

impl FromStr for Algorithm {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, ParseError> {
        match squash(s).as_str() {
            "ring" => Ok(Algorithm::Ring),
            "naive" | "linear" | "star" => Ok(Algorithm::Naive),
            "tree" | "binarytree" => Ok(Algorithm::Tree),
            "doubletree" | "dbtree" | "dtree" | "doublebinarytree" => Ok(Algorithm::DoubleTree),
            "twolevel" | "2level" | "hier" | "hierarchical" => Ok(Algorithm::TwoLevel),
            "recursivedoubling" | "rd" | "recdoubling" => Ok(Algorithm::RecursiveDoubling),
            _ => Err(parse_error(
                "algorithm",
                s,
                Self::ALL.iter().map(|a| a.name()),
            )),
        }
    }
}

/// Element type of the buffers (only its size matters to a schedule).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum Dtype {
    U8,
    I8,
    I32,
    U32,
    I64,
    U64,
    F16,
    Bf16,
    F32,
    F64,
}

impl Dtype {
    /// Every dtype.
    pub const ALL: [Dtype; 10] = [
        Dtype::U8,
        Dtype::I8,
        Dtype::I32,
        Dtype::U32,
        Dtype::I64,
        Dtype::U64,
        Dtype::F16,
        Dtype::Bf16,
        Dtype::F32,
        Dtype::F64,
    ];

    /// Size of one element in bytes.
    pub fn size(self) -> usize {
        match self {
            Dtype::U8 | Dtype::I8 => 1,
            Dtype::F16 | Dtype::Bf16 => 2,
            Dtype::I32 | Dtype::U32 | Dtype::F32 => 4,
            Dtype::I64 | Dtype::U64 | Dtype::F64 => 8,
        }
    }

    /// The Rust-style name: "u8", "i8", "i32", "u32", "i64", "u64", "f16", "bf16", "f32", "f64".
    pub fn name(self) -> &'static str {
        match self {
            Dtype::U8 => "u8",
            Dtype::I8 => "i8",
            Dtype::I32 => "i32",
            Dtype::U32 => "u32",
            Dtype::I64 => "i64",
            Dtype::U64 => "u64",
            Dtype::F16 => "f16",
            Dtype::Bf16 => "bf16",
            Dtype::F32 => "f32",
            Dtype::F64 => "f64",
        }
    }

    /// The nccl-tests `-d` / "type" column spelling: "uint8", "int8", ..., "half", "bfloat16", "float", "double".
    pub fn nccl_name(self) -> &'static str {
        match self {
            Dtype::U8 => "uint8",
            Dtype::I8 => "int8",
            Dtype::I32 => "int32",
            Dtype::U32 => "uint32",
            Dtype::I64 => "int64",
            Dtype::U64 => "uint64",
            Dtype::F16 => "half",
            Dtype::Bf16 => "bfloat16",
            Dtype::F32 => "float",
            Dtype::F64 => "double",
        }
    }
}
vocabulary!(Dtype);

impl FromStr for Dtype {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, ParseError> {
        let key = squash(s);
        let found = Self::ALL
            .into_iter()
            .find(|d| key == d.name() || key == d.nccl_name());
        let alias = match key.as_str() {
            "char" => Some(Dtype::I8),
            "fp16" | "float16" => Some(Dtype::F16),
            "fp32" | "float32" => Some(Dtype::F32),
            "fp64" | "float64" => Some(Dtype::F64),
            _ => None,
        };
        found
            .or(alias)
            .ok_or_else(|| parse_error("dtype", s, Self::ALL.iter().map(|d| d.name())))
    }
}

/// Reduction operator (nccl-tests `-o`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// Element-wise sum (integers wrap on overflow).
    Sum,
    /// Element-wise product (integers wrap on overflow).
    Prod,
    /// Element-wise maximum.
    Max,
    /// Element-wise minimum.
    Min,
    /// Sum, then divide by the number of ranks once at the end (integers truncate).
    Avg,
}

impl Op {
    /// Every op.
    pub const ALL: [Op; 5] = [Op::Sum, Op::Prod, Op::Max, Op::Min, Op::Avg];

    /// "sum", "prod", "max", "min", "avg" (the nccl-tests spellings too).
    pub fn name(self) -> &'static str {
        match self {
            Op::Sum => "sum",
            Op::Prod => "prod",
            Op::Max => "max",
            Op::Min => "min",
            Op::Avg => "avg",
        }
    }
}
vocabulary!(Op);

impl FromStr for Op {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, ParseError> {
        match squash(s).as_str() {
            "sum" => Ok(Op::Sum),
            "prod" | "product" => Ok(Op::Prod),
            "max" => Ok(Op::Max),
            "min" => Ok(Op::Min),
            "avg" | "mean" => Ok(Op::Avg),
            _ => Err(parse_error("op", s, Self::ALL.iter().map(|o| o.name()))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_through_from_str() {
        for c in Collective::ALL {
            assert_eq!(c.name().parse::<Collective>(), Ok(c));
            assert_eq!(c.nccl_name().parse::<Collective>(), Ok(c));
        }
        for a in Algorithm::ALL {
            assert_eq!(a.name().parse::<Algorithm>(), Ok(a));
            assert_eq!(a.short_name().parse::<Algorithm>(), Ok(a));
            assert!(a.short_name().len() <= 12, "{a}");
        }
        for d in Dtype::ALL {
            assert_eq!(d.name().parse::<Dtype>(), Ok(d));
            assert_eq!(d.nccl_name().parse::<Dtype>(), Ok(d));
        }
        for o in Op::ALL {
            assert_eq!(o.name().parse::<Op>(), Ok(o));
        }
    }

    #[test]
    fn nccl_tests_spellings_are_accepted() {
        assert_eq!("allreduce".parse::<Collective>(), Ok(Collective::AllReduce));
        assert_eq!(
            "All_Gather".parse::<Collective>(),
            Ok(Collective::AllGather)
        );
        assert_eq!("send-recv".parse::<Collective>(), Ok(Collective::SendRecv));
        assert_eq!("float".parse::<Dtype>(), Ok(Dtype::F32));
        assert_eq!("half".parse::<Dtype>(), Ok(Dtype::F16));
        assert_eq!("bfloat16".parse::<Dtype>(), Ok(Dtype::Bf16));
    }

    #[test]
    fn parse_error_lists_valid_values() {
        let e = "scatter".parse::<Collective>().unwrap_err().to_string();
        assert!(e.contains("\"scatter\""), "{e}");
        assert!(
            e.contains(
                "all-reduce, reduce-scatter, all-gather, broadcast, reduce, sendrecv, all-to-all"
            ),
            "{e}"
        );
        let e = "float8".parse::<Dtype>().unwrap_err().to_string();
        assert!(e.contains("bf16"), "{e}");
    }

    #[test]
    fn next_cycles_through_all() {
        assert_eq!(Algorithm::Tree.next(), Algorithm::DoubleTree);
        assert_eq!(Algorithm::TwoLevel.next(), Algorithm::RecursiveDoubling);
        assert_eq!(Algorithm::RecursiveDoubling.next(), Algorithm::Ring);
        assert_eq!("rd".parse::<Algorithm>(), Ok(Algorithm::RecursiveDoubling));
        assert_eq!("alltoall".parse::<Collective>(), Ok(Collective::AllToAll));
        assert_eq!("dbtree".parse::<Algorithm>(), Ok(Algorithm::DoubleTree));
        assert_eq!("hierarchical".parse::<Algorithm>(), Ok(Algorithm::TwoLevel));
        let mut c = Collective::AllReduce;
        for _ in 0..Collective::ALL.len() {
            c = c.next();
        }
        assert_eq!(c, Collective::AllReduce);
    }

    #[test]
    fn dtype_sizes() {
        assert_eq!(Dtype::F32.size(), 4);
        assert_eq!(Dtype::Bf16.size(), 2);
        assert_eq!(Dtype::U64.size(), 8);
        assert_eq!(Dtype::I8.size(), 1);
    }
}

/// Names on the wire and in JSON: the same spellings the CLI takes.
macro_rules! serde_by_name {
    ($($t:ty),*) => {$(
        impl serde::Serialize for $t {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.name())
            }
        }
        impl<'de> serde::Deserialize<'de> for $t {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = <String as serde::Deserialize>::deserialize(d)?;
                s.parse().map_err(|e: ParseError| serde::de::Error::custom(e.to_string()))
            }
        }
    )*};
}
serde_by_name!(Collective, Algorithm, Dtype, Op);
