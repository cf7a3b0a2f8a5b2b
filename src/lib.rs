//! ringlab: learn how GPUs communicate, then prove it live.
//!
//! Layers (imports point down only):
//! - [`collective`]: pure schedules for every collective × algorithm, simulator, cost model.
//! - [`course`]: lessons, front matter, math, custom blocks, content checks (pure data).
//! - [`tui`]: the terminal app (TEA core: model, actions, update, render).
//! - [`cli`]: the command line.
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

pub mod cli;
pub mod collective;
pub mod comm;
pub mod course;
pub mod infer;
pub mod lab;
pub mod study;
pub mod tui;
pub mod units;
