//! Custom fenced blocks in lessons: ```` ```quiz ````, ```` ```ring ````, ```` ```lab ````,
//! ```` ```tp ```` (TP calculator) and ```` ```plan ```` (launch planner).
//! Their bodies are TOML. Here they parse into typed elements; the screens that bring them to
//! life arrive with their own issues and until then show a placeholder saying what they will be.

use serde::Deserialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BlockKind {
    Quiz,
    Ring,
    Lab,
    /// The TP calculator.
    Tp,
    /// The vLLM launch planner.
    Plan,
}

impl BlockKind {
    /// The fence info string that opens this block, e.g. `ring`.
    pub fn from_info(info: &str) -> Option<Self> {
        match info.split_whitespace().next()? {
            "quiz" => Some(Self::Quiz),
            "ring" => Some(Self::Ring),
            "lab" => Some(Self::Lab),
            "tp" => Some(Self::Tp),
            "plan" => Some(Self::Plan),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Quiz => "quiz",
            Self::Ring => "ring",
            Self::Lab => "lab",
            Self::Tp => "tp",
            Self::Plan => "plan",
        }
    }
}

/// Parameters of an embedded ring view. Defaults match `ringlab ring`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RingBlock {
    #[serde(default = "default_op")]
    pub op: String,
    #[serde(default = "default_algo")]
    pub algo: String,
    #[serde(default = "default_ranks")]
    pub ranks: usize,
    /// Message size, e.g. `"1MiB"`, `"4096"`.
    #[serde(default = "default_bytes")]
    pub bytes: String,
    #[serde(default = "default_dtype")]
    pub dtype: String,
    /// Step to show first (0 = before any transfer).
    #[serde(default)]
    pub step: usize,
}

fn default_op() -> String {
    "all-reduce".into()
}
fn default_algo() -> String {
    "ring".into()
}
fn default_ranks() -> usize {
    4
}
fn default_bytes() -> String {
    "1MiB".into()
}
fn default_dtype() -> String {
    "f32".into()
}

/// A quiz item as far as the foundation needs it: an id, a type and a prompt. The full
/// item model (answers, tolerance, parameters) belongs to the quiz issue.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct QuizBlock {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub prompt: String,
}

/// A preset for the live lab screen.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LabBlock {
    #[serde(default = "default_op")]
    pub coll: String,
    #[serde(default = "default_algo")]
    pub algo: String,
    #[serde(default = "default_lab_ranks")]
    pub ranks: usize,
    #[serde(default = "default_min")]
    pub minbytes: String,
    #[serde(default = "default_max")]
    pub maxbytes: String,
}

fn default_lab_ranks() -> usize {
    2
}
fn default_min() -> String {
    "1K".into()
}
fn default_max() -> String {
    "64M".into()
}

/// A preset for the TP calculator: a model preset, a TP degree, tokens per forward pass.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TpBlock {
    #[serde(default = "default_model")]
    pub model: String,
    #[serde(default = "default_tp")]
    pub tp: usize,
    #[serde(default = "default_tokens")]
    pub tokens: u64,
}

/// A preset for the launch planner.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanBlock {
    #[serde(default = "default_nodes")]
    pub nodes: usize,
    #[serde(default = "default_tp")]
    pub gpus_per_node: usize,
    #[serde(default = "default_model")]
    pub model: String,
    /// `mp` or `ray`.
    #[serde(default = "default_backend")]
    pub backend: String,
}

fn default_model() -> String {
    "llama-3.1-70b".into()
}
fn default_tp() -> usize {
    8
}
fn default_tokens() -> u64 {
    1
}
fn default_nodes() -> usize {
    2
}
fn default_backend() -> String {
    "mp".into()
}

/// Checks a tp/plan block's values against what the calculator and planner accept; the error
/// points at the offending key's line.
fn check_infer(kind: BlockKind, body: &str, block: &Block) -> Result<(), BlockError> {
    use crate::infer::{find_model, plan, tp};
    let fail = |key: &str, message: String| {
        let line = body
            .lines()
            .position(|l| l.trim_start().starts_with(key))
            .map_or(1, |i| i + 1);
        Err(BlockError {
            line,
            col: 1,
            message: format!("```{} block: {message}", kind.name()),
        })
    };
    let (model, ranges): (&str, Vec<(&str, u64, u64, u64)>) = match block {
        Block::Tp(b) => (
            &b.model,
            vec![
                ("tp", b.tp as u64, 1, tp::MAX_TP as u64),
                ("tokens", b.tokens, 1, tp::MAX_TOKENS),
            ],
        ),
        Block::Plan(b) => {
            if let Err(e) = b.backend.parse::<crate::infer::Backend>() {
                return fail("backend", e);
            }
            (
                &b.model,
                vec![
                    ("nodes", b.nodes as u64, 1, plan::MAX_NODES as u64),
                    (
                        "gpus_per_node",
                        b.gpus_per_node as u64,
                        1,
                        plan::MAX_GPUS_PER_NODE as u64,
                    ),
                ],
            )
        }
        _ => return Ok(()),
    };
    if let Err(e) = find_model(model) {
        return fail("model", e.to_string());
    }
    for (key, v, lo, hi) in ranges {
        if !(lo..=hi).contains(&v) {
            return fail(key, format!("{key} must be {lo}..={hi}, got {v}"));
        }
    }
    Ok(())
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Block {
    Quiz(QuizBlock),
    Ring(RingBlock),
    Lab(LabBlock),
    Tp(TpBlock),
    Plan(PlanBlock),
}

/// A malformed block: 1-based line within the block body, column, and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockError {
    pub line: usize,
    pub col: usize,
    pub message: String,
}

impl Block {
    pub fn kind(&self) -> BlockKind {
        match self {
            Self::Quiz(_) => BlockKind::Quiz,
            Self::Ring(_) => BlockKind::Ring,
            Self::Lab(_) => BlockKind::Lab,
            Self::Tp(_) => BlockKind::Tp,
            Self::Plan(_) => BlockKind::Plan,
        }
    }

    /// Parse a block body. Errors carry a position relative to the first body line (1-based).
    pub fn parse(kind: BlockKind, body: &str) -> Result<Self, BlockError> {
        fn de<T: serde::de::DeserializeOwned>(
            kind: BlockKind,
            body: &str,
        ) -> Result<T, BlockError> {
            toml::from_str::<T>(body).map_err(|e| {
                let (line, col) = e
                    .span()
                    .map(|s| offset_to_line_col(body, s.start))
                    .unwrap_or((1, 1));
                BlockError {
                    line,
                    col,
                    message: format!("malformed ```{} block: {}", kind.name(), e.message()),
                }
            })
        }
        match kind {
            BlockKind::Quiz => {
                // The full item check (answers, tolerance, choices, template parameters).
                let q = de(kind, body)?;
                super::quiz::parse(body).map_err(|e| BlockError {
                    line: e.line,
                    col: e.col,
                    message: e.message,
                })?;
                Ok(Self::Quiz(q))
            }
            BlockKind::Ring => de(kind, body).map(Self::Ring),
            BlockKind::Lab => de(kind, body).map(Self::Lab),
            BlockKind::Tp | BlockKind::Plan => {
                let block = match kind {
                    BlockKind::Tp => Self::Tp(de(kind, body)?),
                    _ => Self::Plan(de(kind, body)?),
                };
                check_infer(kind, body, &block)?;
                Ok(block)
            }
        }
    }

    /// One line saying what this block is and what it will become.
    pub fn placeholder(&self) -> String {
        match self {
            Self::Quiz(q) => format!(
                "quiz item `{}` ({}): {} — press Q to take this lesson's quiz",
                q.id, q.kind, q.prompt
            ),
            Self::Ring(r) => format!(
                "ring view: {} with {} on {} ranks, {} of {} — open it with `ringlab ring`",
                r.op, r.algo, r.ranks, r.bytes, r.dtype
            ),
            Self::Lab(l) => format!(
                "live lab: {} ({}) on {} ranks, {}..{} — the lab screen arrives with the TCP lab issue",
                l.coll, l.algo, l.ranks, l.minbytes, l.maxbytes
            ),
            Self::Tp(t) => format!(
                "TP calculator: {} at TP {}, {} token(s) per forward pass — press Enter to open it \
                 (or `ringlab tp --model {} --tp {} --tokens {}`)",
                t.model, t.tp, t.tokens, t.model, t.tp, t.tokens
            ),
            Self::Plan(p) => format!(
                "launch planner: {} on {} node(s) × {} GPUs ({}) — press Enter to open it \
                 (or `ringlab plan --nodes {} --gpus-per-node {} --model {}`)",
                p.model, p.nodes, p.gpus_per_node, p.backend, p.nodes, p.gpus_per_node, p.model
            ),
        }
    }
}

/// Byte offset → (line, col), both 1-based; col counts chars.
pub fn offset_to_line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = &text[..text.floor_char_boundary(offset)];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_block_parses_with_defaults() {
        let b = Block::parse(BlockKind::Ring, "ranks = 8\n").expect("parses");
        let Block::Ring(r) = b else {
            panic!("not a ring block")
        };
        assert_eq!(r.ranks, 8);
        assert_eq!(r.op, "all-reduce");
        assert_eq!(r.bytes, "1MiB");
    }

    #[test]
    fn malformed_block_reports_line_and_col() {
        let e = Block::parse(BlockKind::Ring, "ranks = 8\nbytes = \n").expect_err("must fail");
        assert_eq!(e.line, 2);
        assert!(e.message.contains("```ring"), "{}", e.message);
    }

    #[test]
    fn unknown_field_is_an_error() {
        let e = Block::parse(BlockKind::Ring, "rank = 8\n").expect_err("must fail");
        assert!(e.message.contains("rank"), "{}", e.message);
    }

    #[test]
    fn tp_and_plan_blocks_parse_with_defaults() {
        let Ok(Block::Tp(t)) = Block::parse(BlockKind::Tp, "model = \"llama-3.1-8b\"\n") else {
            panic!("not a tp block")
        };
        assert_eq!((t.model.as_str(), t.tp, t.tokens), ("llama-3.1-8b", 8, 1));
        let Ok(Block::Plan(p)) = Block::parse(BlockKind::Plan, "nodes = 4\n") else {
            panic!("not a plan block")
        };
        assert_eq!((p.nodes, p.gpus_per_node, p.backend.as_str()), (4, 8, "mp"));
        assert_eq!(BlockKind::from_info("tp"), Some(BlockKind::Tp));
        assert_eq!(BlockKind::from_info("plan"), Some(BlockKind::Plan));
    }

    #[test]
    fn tp_and_plan_blocks_reject_unknown_models_and_bad_values_with_the_line() {
        let e = Block::parse(BlockKind::Tp, "tp = 8\nmodel = \"gpt-9\"\n").expect_err("unknown");
        assert_eq!(e.line, 2);
        assert!(e.message.contains("known models"), "{}", e.message);
        let e = Block::parse(BlockKind::Tp, "tp = 0\n").expect_err("tp 0");
        assert!(e.message.contains("tp must be"), "{}", e.message);
        let e = Block::parse(BlockKind::Plan, "backend = \"slurm\"\n").expect_err("backend");
        assert!(e.message.contains("mp or ray"), "{}", e.message);
        let e = Block::parse(BlockKind::Plan, "gpus = 8\n").expect_err("unknown key");
        assert!(e.message.contains("gpus"), "{}", e.message);
    }

    #[test]
    fn offset_maps_to_line_and_col() {
        assert_eq!(offset_to_line_col("ab\ncd", 4), (2, 2));
        assert_eq!(offset_to_line_col("ab\ncd", 0), (1, 1));
    }
}
