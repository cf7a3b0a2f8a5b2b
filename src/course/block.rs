//! Custom fenced blocks in lessons: ```` ```quiz ````, ```` ```ring ````, ```` ```lab ````.
//! Their bodies are TOML. Here they parse into typed elements; the screens that bring them to
//! life arrive with their own issues and until then show a placeholder saying what they will be.

use serde::Deserialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BlockKind {
    Quiz,
    Ring,
    Lab,
}

impl BlockKind {
    /// The fence info string that opens this block, e.g. `ring`.
    pub fn from_info(info: &str) -> Option<Self> {
        match info.split_whitespace().next()? {
            "quiz" => Some(Self::Quiz),
            "ring" => Some(Self::Ring),
            "lab" => Some(Self::Lab),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Quiz => "quiz",
            Self::Ring => "ring",
            Self::Lab => "lab",
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

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Block {
    Quiz(QuizBlock),
    Ring(RingBlock),
    Lab(LabBlock),
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
    fn offset_maps_to_line_and_col() {
        assert_eq!(offset_to_line_col("ab\ncd", 4), (2, 2));
        assert_eq!(offset_to_line_col("ab\ncd", 0), (1, 1));
    }
}
