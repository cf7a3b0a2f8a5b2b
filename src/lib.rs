//! ringlab: learn how GPUs communicate, then prove it live.
//!
//! Layers (imports point down only):
//! - [`collective`]: pure schedules for every collective × algorithm, simulator, cost model.
//! - [`course`]: lessons, front matter, math, custom blocks, content checks (pure data).
//! - [`infer`]: model presets, the TP calculator and the vLLM launch planner (pure).
//! - [`comm`]: processes and bytes on the wire: store, interfaces, the TCP backend, NCCL.
//! - [`nccl_log`]: NCCL's log as a grammar (typed messages, release profiles): pure.
//! - [`lab`]: experiments from comm: the launcher, the measurement, the hang lab, doctor.
//! - [`study`]: progress, review history, spaced repetition, drills.
//! - [`tui`]: the terminal app (TEA core: model, actions, update, render).
//! - [`cli`]: the command line.
//! - [`units`], [`files`], [`private`]: byte sizes; reading and writing user-named files
//!   safely; private folders in shared places and whose files are "ours".
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

pub mod cli;
pub mod collective;
pub mod comm;
pub mod course;
pub mod files;
pub mod infer;
pub mod lab;
pub mod nccl_log;
pub mod private;
pub mod study;
pub mod tui;
pub mod units;

/// Keep freed heap memory for reuse instead of handing it back to the kernel at once. The app
/// rebuilds large schedules as the learner changes N (N = 1024 is 2.1M transfers, 67 MB); on
/// machines where first-touch page faults are slow (VMs), re-faulting that memory costs more
/// than building the schedule. Called by the binary and the benches, before any allocation.
pub fn tune_allocator() {
    // SAFETY: mallopt only adjusts glibc malloc parameters.
    unsafe {
        libc::mallopt(libc::M_TRIM_THRESHOLD, 512 << 20);
        libc::mallopt(libc::M_MMAP_THRESHOLD, 256 << 20);
    }
}
