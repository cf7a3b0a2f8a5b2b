//! What the learner has done: progress and (later) review history.
pub mod progress;
