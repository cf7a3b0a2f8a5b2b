//! The hang lab's room: scenarios staged on a virtual cluster ([`cluster`]), the training loop
//! run-time hangs happen in ([`train`]), the flight recorder that tells the ranks apart
//! ([`trace`]), and the scenario files, runs, reports and evidence ([`scenario`]).

pub mod cluster;
pub mod scenario;
pub mod trace;
pub mod train;
