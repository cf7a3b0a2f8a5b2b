//! Why a screen cannot open, or why a value set or typed on one is refused. Each fact has its
//! variant; the status line (or the CLI) shows its text.

use crate::collective::ScheduleError;
use crate::infer::{ModelError, PlanError, TpError};
use crate::units::format_bytes;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScreenError {
    #[error("ranks must be 1..={max}, got {got}")]
    Ranks { got: usize, max: usize },
    #[error(
        "{gpus_per_node} GPUs per node does not divide {ranks} ranks: every node holds the same number of GPUs"
    )]
    NodeSize { gpus_per_node: usize, ranks: usize },
    #[error(transparent)]
    Schedule(#[from] ScheduleError),
    /// A typed size that does not parse (the parser's words).
    #[error("{0}")]
    Size(String),
    #[error("{} is less than one {elem}-byte element", format_bytes(*bytes))]
    BelowElement { bytes: u64, elem: usize },
    #[error("{} is more than the view draws (at most {})", format_bytes(*bytes), format_bytes(*max))]
    AboveView { bytes: u64, max: u64 },
    /// A lesson's block (`kind`: ring, lab) with a value that does not resolve: which and why.
    #[error("this {kind} block is invalid: {why}")]
    Block {
        kind: &'static str,
        field: &'static str,
        why: String,
    },
    /// A size range the bench does not sweep (the sweep's words).
    #[error("{0}")]
    Sweep(String),
    #[error(transparent)]
    Model(#[from] ModelError),
    #[error(transparent)]
    Tp(#[from] TpError),
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// A plan refused for a typed field's value: said with the fields' names, not the flags.
    #[error("{}", typed_plan_error(.0))]
    TypedField(PlanError),
    /// A backend name the planner does not know (the parser's words).
    #[error("{0}")]
    Backend(String),
    #[error("type an interface name")]
    NoInterface,
    #[error("no model presets")]
    NoPresets,
    #[error("no lesson or drill deck `{id}`; known: {}", known.join(", "))]
    NoDeck { id: String, known: Vec<String> },
    #[error("no quiz deck for `{0}`")]
    NoQuizDeck(String),
    #[error("“{0}” has no quiz items yet")]
    NoItems(String),
    #[error("this file is not a lesson (it has errors): nothing to present")]
    NotALesson,
    #[error("a table is already on the slide")]
    TableOnSlide,
    #[error("nothing to open here")]
    NothingToOpen,
    /// A word of a typed fix that is not `NAME=value`.
    #[error("`{0}`: expected NAME=value, e.g. NCCL_SOCKET_IFNAME=eth0")]
    NotAnAssignment(String),
    #[error("`{0}` is not an environment variable name")]
    NotAVariable(String),
    #[error("type NAME=value, e.g. NCCL_SOCKET_IFNAME=eth0")]
    NoFix,
}

/// The plan speaks in `ringlab plan`'s flags; on the planner's screen the fields have names.
fn typed_plan_error(e: &PlanError) -> String {
    e.to_string()
        .replace("--head-ip ", "head IP ")
        .replace("--iface ", "interface ")
}

impl ScreenError {
    /// A block whose `field` does not resolve (`resolve`'s (field, why)).
    pub fn block(kind: &'static str) -> impl Fn((&'static str, String)) -> Self {
        move |(field, why)| Self::Block { kind, field, why }
    }
}
