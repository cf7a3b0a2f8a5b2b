//! The job runtime, below the rooms that use it: the launcher and its watchdog
//! ([`launch`]), a launcher's world (torchrun, srun, mpirun: [`world`]) and the job's token
//! file ([`token_file`]). The bench and the hang lab both run jobs through it; it names
//! neither.

pub mod launch;
pub mod token_file;
pub mod world;

use std::fmt;

use serde::{Deserialize, Serialize};

/// Why a run stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// The backend reported an error (NCCL's code and reason, a socket error…).
    Error(String),
    /// Work did not finish within the rank's own watchdog timeout.
    Hang(String),
}

impl Fault {
    pub fn is_hang(&self) -> bool {
        matches!(self, Self::Hang(_))
    }
    pub fn message(&self) -> &str {
        match self {
            Self::Error(m) | Self::Hang(m) => m,
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Error(m) => write!(f, "{m}"),
            Self::Hang(m) => write!(f, "HANG: {m}"),
        }
    }
}

/// A rank's process as `/proc/PID/stat` gives it when the job failed (proc(5): `R` running,
/// `S` sleeping, which is a rank blocked in a socket or a futex, `D` in uninterruptible wait,
/// `T` stopped, `t` stopped by a tracer), or gone (exited, a zombie, or no such process).
/// Written and read as the letter, or `gone`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "String", from = "String")]
pub enum ProcState {
    Running,
    Sleeping,
    DiskWait,
    Stopped,
    Gone,
    /// Any other letter the kernel gives (`I` idle, `W`, …).
    Other(char),
}

impl ProcState {
    /// From the state letter; `Z` and `X` (a zombie, dead) are gone.
    pub fn from_letter(c: char) -> ProcState {
        match c {
            'R' => ProcState::Running,
            'S' => ProcState::Sleeping,
            'D' => ProcState::DiskWait,
            'T' | 't' => ProcState::Stopped,
            'Z' | 'X' => ProcState::Gone,
            other => ProcState::Other(other),
        }
    }
    /// A rank that cannot make progress by itself: stopped or gone.
    pub fn is_dead_or_stopped(self) -> bool {
        matches!(self, ProcState::Stopped | ProcState::Gone)
    }
}

impl std::fmt::Display for ProcState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProcState::Running => f.write_str("R"),
            ProcState::Sleeping => f.write_str("S"),
            ProcState::DiskWait => f.write_str("D"),
            ProcState::Stopped => f.write_str("T"),
            ProcState::Gone => f.write_str("gone"),
            ProcState::Other(c) => write!(f, "{c}"),
        }
    }
}

impl From<ProcState> for String {
    fn from(s: ProcState) -> String {
        s.to_string()
    }
}

impl From<String> for ProcState {
    fn from(s: String) -> ProcState {
        let mut chars = s.chars();
        match (chars.next(), chars.next()) {
            (Some(c), None) => ProcState::from_letter(c),
            _ => ProcState::Gone,
        }
    }
}

/// How a rank's process stood when the dumps were gathered (the launcher knows; a stopped
/// process cannot say so itself).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", tag = "state")]
pub enum Process {
    #[default]
    Running,
    /// Stopped (SIGSTOP, a debugger): state T in /proc.
    Stopped,
    /// Exited or killed.
    Gone {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        code: Option<i32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signal: Option<i32>,
    },
}
