//! Custom fenced blocks in lessons: ```` ```quiz ````, ```` ```ring ````, ```` ```lab ````,
//! ```` ```tp ```` (TP calculator), ```` ```plan ```` (launch planner) and ```` ```table ````
//! (a table computed from the schedule module, see [`super::table`]).
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
    /// A table whose rows are computed from the collective schedules.
    Table,
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
            "table" => Some(Self::Table),
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
            Self::Table => "table",
        }
    }
}

/// A quiz block in the reader: what kind of question, the prompt as a learner would see it
/// (with the draw it shows, which each attempt draws anew), and the key that takes the quiz.
fn quiz_placeholder(q: &QuizBlock) -> String {
    let draw = q
        .draw
        .as_ref()
        .map(|d| format!(" (one draw of {d}; each attempt draws anew)"))
        .unwrap_or_default();
    format!(
        "quiz ({}): {}{draw} — press Q to take this lesson's quiz",
        q.kind_title, q.shown
    )
}

/// A quiz block on a slide: the question as the class reads it, and how the presenter asks it.
fn quiz_slide(q: &QuizBlock) -> String {
    format!(
        "quiz ({}): {} — Enter asks the class",
        q.kind_title, q.shown
    )
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

/// Most ranks the ring view draws (and a lesson's ring block may ask for).
pub const MAX_RING_RANKS: usize = 1024;

/// Most ranks a lesson's live-lab preset may start on one machine.
pub const MAX_LAB_RANKS: usize = 8;

/// What a ring block asks for, checked: the one validation `ringlab check` and the reader
/// share.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingShape {
    pub op: crate::collective::Collective,
    pub algo: crate::collective::Algorithm,
    pub ranks: usize,
    pub bytes: u64,
    pub dtype: crate::collective::Dtype,
}

impl RingBlock {
    /// The block's values, or what is wrong with them, with the key it concerns.
    pub fn resolve(&self) -> Result<RingShape, (&'static str, String)> {
        use crate::collective::{Schedule, Spec};
        let shape = RingShape {
            op: self.op.parse().map_err(|e| ("op", format!("{e}")))?,
            algo: self.algo.parse().map_err(|e| ("algo", format!("{e}")))?,
            ranks: self.ranks,
            bytes: crate::units::parse_size(&self.bytes).map_err(|e| ("bytes", e))?,
            dtype: self.dtype.parse().map_err(|e| ("dtype", format!("{e}")))?,
        };
        if !(1..=MAX_RING_RANKS).contains(&shape.ranks) {
            return Err((
                "ranks",
                format!("ranks must be 1..={MAX_RING_RANKS}, got {}", shape.ranks),
            ));
        }
        let count = usize::try_from(shape.bytes / shape.dtype.size() as u64)
            .map_err(|_| ("bytes", format!("{} bytes is too large", shape.bytes)))?;
        // What the schedule module would refuse, without building it (this runs at load).
        Schedule::check(&Spec::new(
            shape.op,
            shape.algo,
            shape.ranks,
            count,
            shape.dtype.size(),
        ))
        .map_err(|e| ("bytes", e.to_string()))?;
        Ok(shape)
    }
}

impl LabBlock {
    /// The block's values, or what is wrong with them, with the key it concerns: the one
    /// validation `ringlab check` and the live lab share.
    #[allow(clippy::type_complexity)]
    pub fn resolve(
        &self,
    ) -> Result<
        (
            crate::collective::Collective,
            crate::collective::Algorithm,
            usize,
            u64,
            u64,
        ),
        (&'static str, String),
    > {
        let coll = self.coll.parse().map_err(|e| ("coll", format!("{e}")))?;
        let algo = self.algo.parse().map_err(|e| ("algo", format!("{e}")))?;
        if !(2..=MAX_LAB_RANKS).contains(&self.ranks) {
            return Err((
                "ranks",
                format!("ranks must be 2..={MAX_LAB_RANKS}, got {}", self.ranks),
            ));
        }
        let min = crate::units::parse_size(&self.minbytes).map_err(|e| ("minbytes", e))?;
        let max = crate::units::parse_size(&self.maxbytes).map_err(|e| ("maxbytes", e))?;
        crate::units::sweep(min, max, 4).map_err(|e| ("maxbytes", e))?;
        Ok((coll, algo, self.ranks, min, max))
    }
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
    /// The prompt as a reader sees it: parameters filled with one sample draw (set when the
    /// block is parsed).
    #[serde(skip)]
    pub shown: String,
    /// What the learner does, in words ("pick one", "a number").
    #[serde(skip)]
    pub kind_title: String,
    /// The parameters of the sample draw in `shown` ("M = 4194304, N = 4"), for a
    /// parametric item.
    #[serde(skip)]
    pub draw: Option<String>,
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

/// A table of per-N numbers computed from [`crate::collective`] at render time, so the prose
/// and the code cannot disagree. Rows come from [`super::table::rows`].
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TableBlock {
    #[serde(default = "default_op")]
    pub op: String,
    /// One algorithm (default `ring`); use `algos` instead to compare several side by side.
    #[serde(default)]
    pub algo: Option<String>,
    #[serde(default)]
    pub algos: Option<Vec<String>>,
    /// One row per rank count, each 1..=1024.
    #[serde(default = "default_table_ranks")]
    pub ranks: Vec<usize>,
    /// Message size M per rank, e.g. `"1MiB"`.
    #[serde(default = "default_bytes")]
    pub bytes: String,
    #[serde(default = "default_dtype")]
    pub dtype: String,
    /// Columns, from [`super::table::COLUMNS`].
    #[serde(default = "default_table_columns")]
    pub columns: Vec<String>,
}

fn default_table_ranks() -> Vec<usize> {
    vec![2, 4, 8, 16, 32, 64]
}
fn default_table_columns() -> Vec<String> {
    ["ranks", "steps", "bytes_per_rank", "ratio_to_m"]
        .map(String::from)
        .to_vec()
}

/// Checks a table block's columns and rank counts, then computes it once so that any other
/// problem (an unknown collective, a size that does not parse) is a check error too.
fn check_table(body: &str, t: &TableBlock) -> Result<(), BlockError> {
    use super::table::{COLUMNS, MAX_TABLE_RANKS, validate};
    let fail = |key: &str, message: String| {
        let line = body
            .lines()
            .position(|l| {
                let l = l.trim_start();
                l.strip_prefix(key)
                    .is_some_and(|rest| rest.trim_start().starts_with('='))
            })
            .map_or(1, |i| i + 1);
        Err(BlockError {
            line,
            col: 1,
            message: format!("```table block: {message}"),
        })
    };
    if let Some(bad) = t.columns.iter().find(|c| !COLUMNS.contains(&c.as_str())) {
        return fail(
            "columns",
            format!(
                "unknown column \"{bad}\"; columns are {}",
                COLUMNS.join(", ")
            ),
        );
    }
    if t.columns.is_empty() {
        return fail("columns", "columns must name at least one column".into());
    }
    if t.ranks.is_empty() {
        return fail("ranks", "ranks must list at least one rank count".into());
    }
    if let Some(bad) = t
        .ranks
        .iter()
        .find(|&&n| !(1..=MAX_TABLE_RANKS).contains(&n))
    {
        return fail(
            "ranks",
            format!("ranks must each be 1..={MAX_TABLE_RANKS}, got {bad}"),
        );
    }
    if let Err(e) = validate(t) {
        let key = ["algos", "algo", "op", "bytes", "dtype"]
            .into_iter()
            .find(|k| e.starts_with(k))
            .unwrap_or("op");
        return fail(key, e);
    }
    Ok(())
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
    Table(TableBlock),
}

/// An error about `key`, at the line that sets it (the block's first line when it is a
/// default).
fn key_error(kind: BlockKind, body: &str, key: &str, message: &str) -> BlockError {
    let line = body
        .lines()
        .position(|l| {
            l.trim_start()
                .strip_prefix(key)
                .is_some_and(|rest| rest.trim_start().starts_with('='))
        })
        .map_or(1, |i| i + 1);
    BlockError {
        line,
        col: 1,
        message: format!("```{} block: {message}", kind.name()),
    }
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
            Self::Table(_) => BlockKind::Table,
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
                let mut q: QuizBlock = de(kind, body)?;
                let item = super::quiz::parse(body).map_err(|e| BlockError {
                    line: e.line,
                    col: e.col,
                    message: e.message,
                })?;
                q.kind_title = item.kind.title().to_string();
                (q.shown, q.draw) = match item.instantiate(0) {
                    Ok(inst) if item.is_parametric() => (
                        inst.prompt,
                        Some(
                            inst.values
                                .iter()
                                .map(|(k, v)| format!("{k} = {}", super::quiz::format_number(*v)))
                                .collect::<Vec<_>>()
                                .join(", "),
                        ),
                    ),
                    _ => (item.prompt.clone(), None),
                };
                Ok(Self::Quiz(q))
            }
            BlockKind::Ring => {
                let b: RingBlock = de(kind, body)?;
                b.resolve()
                    .map_err(|(key, e)| key_error(kind, body, key, &e))?;
                Ok(Self::Ring(b))
            }
            BlockKind::Lab => {
                let b: LabBlock = de(kind, body)?;
                b.resolve()
                    .map_err(|(key, e)| key_error(kind, body, key, &e))?;
                Ok(Self::Lab(b))
            }
            BlockKind::Tp | BlockKind::Plan => {
                let block = match kind {
                    BlockKind::Tp => Self::Tp(de(kind, body)?),
                    _ => Self::Plan(de(kind, body)?),
                };
                check_infer(kind, body, &block)?;
                Ok(block)
            }
            BlockKind::Table => {
                let t = de(kind, body)?;
                check_table(body, &t)?;
                Ok(Self::Table(t))
            }
        }
    }

    /// One line saying what this block is and what it will become.
    /// The box a slide shows for the block: as [`placeholder`](Self::placeholder), but worded
    /// for a projector (a quiz is asked of the class, no desk keys or draw notes).
    pub fn slide_placeholder(&self) -> String {
        match self {
            Self::Quiz(q) => quiz_slide(q),
            other => other.placeholder(),
        }
    }

    pub fn placeholder(&self) -> String {
        match self {
            Self::Quiz(q) => quiz_placeholder(q),
            Self::Ring(r) => format!(
                "ring view: {} with {} on {} ranks, {} of {} — press Enter to open it \
                 (or `ringlab ring --coll {} --algo {} --ranks {} --bytes {}`)",
                r.op, r.algo, r.ranks, r.bytes, r.dtype, r.op, r.algo, r.ranks, r.bytes
            ),
            Self::Lab(l) => format!(
                "live lab: {} ({}) on {} ranks, {}..{} — press Enter to run it on real processes",
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
            Self::Table(t) => format!(
                "table: {} ({}) for N = {:?}, M = {} of {}, computed from the schedule module",
                t.op,
                super::table::algos(t).join(", "),
                t.ranks,
                t.bytes,
                t.dtype
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
    fn table_block_parses_and_rejects_bad_columns_and_ranks() {
        let Ok(Block::Table(t)) = Block::parse(BlockKind::Table, "ranks = [2, 4]\n") else {
            panic!("not a table block")
        };
        assert_eq!(t.ranks, vec![2, 4]);
        assert_eq!(BlockKind::from_info("table"), Some(BlockKind::Table));
        let e = Block::parse(
            BlockKind::Table,
            "ranks = [2]\ncolumns = [\"ranks\", \"speed\"]\n",
        )
        .expect_err("unknown column");
        assert_eq!(e.line, 2);
        assert!(
            e.message.contains("unknown column \"speed\""),
            "{}",
            e.message
        );
        let e = Block::parse(BlockKind::Table, "ranks = [2, 2048]\n").expect_err("too many");
        assert!(e.message.contains("1..=1024"), "{}", e.message);
        let e = Block::parse(BlockKind::Table, "ranks = [0]\n").expect_err("zero");
        assert!(e.message.contains("got 0"), "{}", e.message);
        let e = Block::parse(BlockKind::Table, "rank = [2]\n").expect_err("unknown key");
        assert!(e.message.contains("rank"), "{}", e.message);
        let e = Block::parse(BlockKind::Table, "op = \"all-reduce\"\nalgo = \"spiral\"\n")
            .expect_err("unknown algo");
        assert_eq!(e.line, 2, "{}", e.message);
    }

    #[test]
    fn offset_maps_to_line_and_col() {
        assert_eq!(offset_to_line_col("ab\ncd", 4), (2, 2));
        assert_eq!(offset_to_line_col("ab\ncd", 0), (1, 1));
    }
}
