//! What the learner has done: progress, review history, spaced repetition and study sessions.
pub mod progress;
pub mod reading;
pub mod session;
pub mod srs;
pub mod track;
