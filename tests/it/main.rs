//! Every integration test, one binary: the modules link once and run side by side (cargo test
//! runs one test binary at a time, so separate binaries would wait out each other's watchdogs).
//! `common` holds what several modules share: the cluster lock and process tags.

mod check;
mod cli_words;
mod collective_props;
mod common;
mod completions;
mod doctor_bench;
mod doctor_log;
mod doctor_realworld;
mod doctor_trace;
mod doctor_versions;
mod emulated_releases;
mod export;
mod export_sanity_run;
mod fuzz_parsers;
mod gpu_backend;
mod gpu_check_script;
mod gpu_standin;
mod hang_lab;
mod hang_pty;
mod launchers;
mod learner_path;
mod lessons_render;
mod markdown_props;
mod plan;
mod present;
mod present_pty;
mod private_files;
mod progress_durability;
mod pty;
mod quiz;
mod resource_bounds;
mod ring_cli;
mod ring_view;
mod strangers;
mod study_pty;
mod study_tui;
mod tcp_backend;
mod tcp_lab;
mod tcp_new_schedules;
mod tpcalc_view;
mod tty_gone;
mod tui;
