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
