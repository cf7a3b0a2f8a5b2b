//! The tensor-parallel calculator: what Megatron-style TP costs in all-reduces for one model.
//!
//! Per forward pass over `tokens` tokens, every transformer layer runs two all-reduces (after
//! attention, after the MLP) of `hidden × tokens` elements. The bytes each GPU sends per
//! all-reduce, and the time estimates, are read off a ring all-reduce [`Schedule`] built for
//! exactly that buffer: nothing here re-derives 2(N−1)/N.

use serde::Serialize;

use super::model::ModelConfig;
use crate::collective::{
    Algorithm, Collective, Dtype, LINK_PRESETS, Link, Schedule, Spec, estimate, traffic,
};

/// Largest TP degree the calculator accepts.
pub const MAX_TP: usize = 1024;
/// Most tokens in one forward pass the calculator accepts (a 1 Mi-token prefill).
pub const MAX_TOKENS: u64 = 1 << 20;
/// Decode rate assumed when none is given, tokens per second.
pub const DEFAULT_TOKENS_PER_S: f64 = 50.0;

/// What to calculate.
#[derive(Debug, Clone, PartialEq)]
pub struct TpQuery {
    pub model: ModelConfig,
    /// TP degree: GPUs that split every layer.
    pub tp: usize,
    /// Tokens in one forward pass: 1 for one decode step of one sequence, the prompt length
    /// for a prefill, the batch size for a batched decode step.
    pub tokens: u64,
    /// Activation element type (bf16 in practice).
    pub dtype: Dtype,
    /// GPUs in one NVLink domain (one node), for the "TP stays inside a node" check.
    pub gpus_per_node: usize,
    /// Token throughput for the per-second figure.
    pub tokens_per_s: f64,
}

impl TpQuery {
    /// bf16, 8 GPUs per node, 50 tokens/s.
    pub fn new(model: ModelConfig, tp: usize, tokens: u64) -> Self {
        Self {
            model,
            tp,
            tokens,
            dtype: Dtype::Bf16,
            gpus_per_node: 8,
            tokens_per_s: DEFAULT_TOKENS_PER_S,
        }
    }
}

/// How serious a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// Fine, said for the record.
    Ok,
    /// Works, with a cost worth knowing.
    Warn,
    /// vLLM would refuse this configuration.
    Error,
}

impl Level {
    /// A mark that reads without colour.
    pub fn mark(self) -> &'static str {
        match self {
            Level::Ok => "✓",
            Level::Warn => "!",
            Level::Error => "✗",
        }
    }
}

/// One validity finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    pub level: Level,
    pub message: String,
}

/// Time for the TP all-reduces on one link, from the alpha–beta estimate of the schedule.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LinkTime {
    pub link: &'static str,
    pub latency_us: f64,
    pub bandwidth_gbps: f64,
    /// One all-reduce: latency part, bandwidth part, total (seconds).
    pub allreduce_latency_s: f64,
    pub allreduce_bandwidth_s: f64,
    pub allreduce_s: f64,
    /// All all-reduces of one forward pass.
    pub per_forward_s: f64,
}

/// The calculator's answer. Byte counts are exact; times are estimates.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TpReport {
    pub model: String,
    pub hf_id: String,
    pub hidden_size: u64,
    pub layers: u64,
    pub heads: u64,
    pub kv_heads: u64,
    pub tp: usize,
    pub tokens: u64,
    pub dtype: &'static str,
    pub dtype_bytes: u64,
    /// Query heads per GPU (heads / tp, rounded down when it does not divide).
    pub heads_per_gpu: u64,
    /// GPUs holding a copy of each KV head (1 unless TP exceeds the KV heads).
    pub kv_replicas: u64,
    /// M: bytes of one all-reduce buffer = hidden × dtype bytes × tokens.
    pub allreduce_bytes: u64,
    /// 2 × layers ([`allreduces_per_forward`]; 0 at TP 1).
    pub allreduces_per_forward: u64,
    /// Steps of one ring all-reduce, from the schedule.
    pub ring_steps: usize,
    /// Bytes the busiest GPU sends in one all-reduce, from the schedule.
    pub sent_per_gpu_per_allreduce: u64,
    /// × all-reduces per forward pass.
    pub sent_per_gpu_per_forward: u64,
    pub tokens_per_s: f64,
    /// Forward passes per second at `tokens_per_s` (tokens_per_s / tokens).
    pub forwards_per_s: f64,
    /// Bytes each GPU sends per second for the TP all-reduces.
    pub sent_per_gpu_per_s: f64,
    pub estimates: Vec<LinkTime>,
    pub checks: Vec<Check>,
    /// False when any check is an error.
    pub valid: bool,
}

/// Inputs the calculator cannot work with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TpError {
    #[error("TP degree must be 1..={MAX_TP}, got {0}")]
    Tp(usize),
    #[error("tokens per forward pass must be 1..={MAX_TOKENS}, got {0}")]
    Tokens(u64),
    #[error("tokens per second must be a positive number, got {0}")]
    Rate(String),
    #[error("{0}")]
    Schedule(String),
}

/// Findings about a TP degree for a model on nodes of `gpus_per_node` GPUs.
pub fn tp_checks(model: &ModelConfig, tp: usize, gpus_per_node: usize) -> Vec<Check> {
    let tp64 = tp as u64;
    let mut out = Vec::new();
    let mut push = |level, message: String| out.push(Check { level, message });
    if model.heads.is_multiple_of(tp64) {
        push(
            Level::Ok,
            format!(
                "TP {tp} divides the {} attention heads: {} per GPU",
                model.heads,
                model.heads / tp64
            ),
        );
    } else {
        push(
            Level::Error,
            format!(
                "TP {tp} does not divide the {} attention heads: vLLM refuses to start",
                model.heads
            ),
        );
    }
    if model.kv_heads.is_multiple_of(tp64) {
        push(
            Level::Ok,
            format!(
                "TP {tp} divides the {} KV heads: {} per GPU",
                model.kv_heads,
                model.kv_heads / tp64
            ),
        );
    } else if tp64.is_multiple_of(model.kv_heads) {
        push(
            Level::Warn,
            format!(
                "TP {tp} exceeds the {} KV heads: vLLM stores each KV head on {} GPUs (more KV cache per token)",
                model.kv_heads,
                tp64 / model.kv_heads
            ),
        );
    } else {
        push(
            Level::Error,
            format!(
                "TP {tp} neither divides nor is a multiple of the {} KV heads",
                model.kv_heads
            ),
        );
    }
    if gpus_per_node > 0 && tp > gpus_per_node {
        push(
            Level::Warn,
            format!(
                "TP {tp} is more than the {} of one node: every all-reduce crosses the network",
                crate::units::count(gpus_per_node, "GPU")
            ),
        );
    }
    if !tp.is_power_of_two() {
        push(
            Level::Warn,
            format!("TP {tp} is not a power of two: unusual, and rarely divides real models"),
        );
    }
    out
}

/// A ring all-reduce of one TP buffer: `hidden × tokens` elements on `tp` ranks.
pub fn allreduce_schedule(
    model: &ModelConfig,
    tp: usize,
    tokens: u64,
    dtype: Dtype,
) -> Result<Schedule, TpError> {
    let count = model
        .hidden_size
        .checked_mul(tokens)
        .and_then(|c| usize::try_from(c).ok())
        .ok_or_else(|| TpError::Schedule("hidden size × tokens is too large".into()))?;
    let spec = Spec::new(
        Collective::AllReduce,
        Algorithm::Ring,
        tp,
        count,
        dtype.size(),
    );
    Schedule::build(&spec).map_err(|e| TpError::Schedule(e.to_string()))
}

/// The time estimate for `calls` runs of `schedule` on `link`.
pub fn link_time(schedule: &Schedule, link: &Link, calls: u64) -> LinkTime {
    let e = estimate(schedule, link);
    LinkTime {
        link: link.name,
        latency_us: link.latency_us,
        bandwidth_gbps: link.bandwidth_gbps,
        allreduce_latency_s: e.latency_s,
        allreduce_bandwidth_s: e.bandwidth_s,
        allreduce_s: e.total_s,
        per_forward_s: e.total_s * calls as f64,
    }
}

/// Megatron-style tensor parallelism: one all-reduce after attention's output projection, one
/// after the MLP's down projection. The one home of "two all-reduces per layer".
pub const ALLREDUCES_PER_LAYER: u64 = 2;

/// [`ALLREDUCES_PER_LAYER`] in words, for screens and help.
pub const ALLREDUCES_PER_LAYER_TEXT: &str = "two all-reduces per layer";

/// All-reduces in one forward pass: [`ALLREDUCES_PER_LAYER`] per layer, none at TP 1 where one
/// GPU holds whole layers.
pub fn allreduces_per_forward(layers: u64, tp: usize) -> u64 {
    if tp > 1 {
        ALLREDUCES_PER_LAYER.saturating_mul(layers)
    } else {
        0
    }
}

/// How the count of all-reduces per forward pass comes about, for display.
pub fn allreduces_per_forward_text(layers: u64, tp: usize) -> String {
    match allreduces_per_forward(layers, tp) {
        0 => "0 (TP 1: each GPU holds whole layers, nothing to all-reduce)".into(),
        n => format!("{n} ({ALLREDUCES_PER_LAYER} × {layers} layers)"),
    }
}

/// Runs the calculator.
pub fn calculate(q: &TpQuery) -> Result<TpReport, TpError> {
    if !(1..=MAX_TP).contains(&q.tp) {
        return Err(TpError::Tp(q.tp));
    }
    if !(1..=MAX_TOKENS).contains(&q.tokens) {
        return Err(TpError::Tokens(q.tokens));
    }
    if !(q.tokens_per_s.is_finite() && q.tokens_per_s > 0.0) {
        return Err(TpError::Rate(q.tokens_per_s.to_string()));
    }
    let m = &q.model;
    let schedule = allreduce_schedule(m, q.tp, q.tokens, q.dtype)?;
    let t = traffic(&schedule);
    let per_ar = t.max_sent();
    let calls = allreduces_per_forward(m.layers, q.tp);
    let per_forward = per_ar.saturating_mul(calls);
    let forwards_per_s = q.tokens_per_s / q.tokens as f64;
    let checks = tp_checks(m, q.tp, q.gpus_per_node);
    let tp64 = q.tp as u64;
    Ok(TpReport {
        model: m.name.clone(),
        hf_id: m.hf_id.clone(),
        hidden_size: m.hidden_size,
        layers: m.layers,
        heads: m.heads,
        kv_heads: m.kv_heads,
        tp: q.tp,
        tokens: q.tokens,
        dtype: q.dtype.name(),
        dtype_bytes: q.dtype.size() as u64,
        heads_per_gpu: m.heads / tp64,
        kv_replicas: if tp64 > m.kv_heads && tp64.is_multiple_of(m.kv_heads) {
            tp64 / m.kv_heads
        } else {
            1
        },
        allreduce_bytes: schedule.spec().bytes(),
        allreduces_per_forward: calls,
        ring_steps: t.steps,
        sent_per_gpu_per_allreduce: per_ar,
        sent_per_gpu_per_forward: per_forward,
        tokens_per_s: q.tokens_per_s,
        forwards_per_s,
        sent_per_gpu_per_s: per_forward as f64 * forwards_per_s,
        estimates: LINK_PRESETS
            .iter()
            .map(|l| link_time(&schedule, l, calls))
            .collect(),
        valid: checks.iter().all(|c| c.level != Level::Error),
        checks,
    })
}

impl TpReport {
    /// The report as plain text for the terminal (at most 80 columns).
    pub fn to_text(&self) -> String {
        use crate::units::{format_bytes, format_seconds};
        use std::fmt::Write;
        let mut s = String::new();
        let _ = writeln!(s, "{} ({})", self.model, self.hf_id);
        let _ = writeln!(
            s,
            "hidden {}, {} layers, {} heads, {} KV heads",
            self.hidden_size, self.layers, self.heads, self.kv_heads
        );
        let _ = writeln!(
            s,
            "TP {} · {} token(s) per forward pass · {}\n",
            self.tp, self.tokens, self.dtype
        );
        let rows = [
            (
                "bytes per all-reduce (hidden × dtype × tokens)",
                format!(
                    "{} B ({})",
                    self.allreduce_bytes,
                    format_bytes(self.allreduce_bytes)
                ),
            ),
            (
                "all-reduces per forward pass",
                allreduces_per_forward_text(self.layers, self.tp),
            ),
            ("ring steps per all-reduce", self.ring_steps.to_string()),
            (
                "sent per GPU per all-reduce (schedule)",
                format!("{} B", self.sent_per_gpu_per_allreduce),
            ),
            (
                "sent per GPU per forward pass",
                format!(
                    "{} B ({})",
                    self.sent_per_gpu_per_forward,
                    format_bytes(self.sent_per_gpu_per_forward)
                ),
            ),
            (
                "sent per GPU per second",
                format!(
                    "{} at {} tokens/s",
                    format_rate(self.sent_per_gpu_per_s),
                    self.tokens_per_s
                ),
            ),
        ];
        for (k, v) in rows {
            let _ = writeln!(s, "  {k:<47} {v}");
        }
        let _ = writeln!(
            s,
            "\nEstimated all-reduce time (ring, alpha-beta; latencies are assumptions):"
        );
        let _ = writeln!(
            s,
            "  {:<16} {:>11} {:>11} {:>11} {:>12}",
            "", "latency", "bandwidth", "one", "per forward"
        );
        let _ = writeln!(
            s,
            "  {:<16} {:>11} {:>11} {:>11} {:>12}",
            "link", "part", "part", "all-reduce", "pass"
        );
        for e in &self.estimates {
            let _ = writeln!(
                s,
                "  {:<16} {:>11} {:>11} {:>11} {:>12}",
                e.link,
                format_seconds(e.allreduce_latency_s),
                format_seconds(e.allreduce_bandwidth_s),
                format_seconds(e.allreduce_s),
                format_seconds(e.per_forward_s)
            );
        }
        let _ = writeln!(s);
        for c in &self.checks {
            s.push_str(&super::wrap(
                &c.message,
                78,
                &format!("{} ", c.level.mark()),
                "  ",
            ));
        }
        s
    }
}

/// Bytes per second in decimal units: "229 MB/s", "1.50 GB/s".
pub fn format_rate(bytes_per_s: f64) -> String {
    if bytes_per_s == 0.0 {
        return "0 B/s".into();
    }
    let (v, u) = if bytes_per_s >= 1e9 {
        (bytes_per_s / 1e9, "GB/s")
    } else if bytes_per_s >= 1e6 {
        (bytes_per_s / 1e6, "MB/s")
    } else if bytes_per_s >= 1e3 {
        (bytes_per_s / 1e3, "kB/s")
    } else {
        (bytes_per_s, "B/s")
    };
    if v >= 100.0 {
        format!("{v:.0} {u}")
    } else {
        format!("{v:.2} {u}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::infer::model::find_model;

    fn report(model: &str, tp: usize, tokens: u64) -> TpReport {
        let m = find_model(model).expect("preset");
        calculate(&TpQuery::new(m, tp, tokens)).expect("calculates")
    }

    #[test]
    fn llama_70b_tp8_decode_matches_lesson_02() {
        let r = report("llama-3.1-70b", 8, 1);
        assert_eq!(r.allreduce_bytes, 16384);
        assert_eq!(r.allreduces_per_forward, 160);
        assert_eq!(r.ring_steps, 14);
        assert_eq!(r.sent_per_gpu_per_allreduce, 28672);
        assert_eq!(r.sent_per_gpu_per_forward, 4_587_520);
        assert!(r.valid);
        // 50 tokens/s × 4587520 B.
        assert_eq!(r.sent_per_gpu_per_s, 229_376_000.0);
    }

    #[test]
    fn tp_1_has_no_all_reduces() {
        let r = report("llama-3.1-8b", 1, 1);
        assert_eq!(r.allreduces_per_forward, 0);
        assert_eq!(r.sent_per_gpu_per_forward, 0);
        assert!(r.estimates.iter().all(|e| e.per_forward_s == 0.0));
        assert!(r.to_text().contains("0 (TP 1"), "{}", r.to_text());
        assert_eq!(report("llama-3.1-8b", 2, 1).allreduces_per_forward, 64);
    }

    #[test]
    fn prefill_of_2048_tokens_sends_1_75_times_32_mib() {
        let r = report("llama-3.1-70b", 8, 2048);
        assert_eq!(r.allreduce_bytes, 33_554_432);
        assert_eq!(r.sent_per_gpu_per_allreduce, 58_720_256);
        assert_eq!(r.forwards_per_s, 50.0 / 2048.0);
    }

    #[test]
    fn per_gpu_bytes_come_from_the_schedule() {
        // 8B at TP 4: count 4096 elements over 4 ranks; 6 steps of 1024 × 2 B.
        let r = report("llama-3.1-8b", 4, 1);
        assert_eq!(r.sent_per_gpu_per_allreduce, 6 * 1024 * 2);
        assert_eq!(r.allreduces_per_forward, 64);
    }

    #[test]
    fn nvlink_estimate_is_14_steps_of_latency_plus_chunks() {
        let r = report("llama-3.1-70b", 8, 1);
        let nv = &r.estimates[0];
        assert_eq!(nv.link, "NVLink 4");
        // 14 steps × 2 µs; 14 × 2048 B / 450 GB/s.
        assert!((nv.allreduce_latency_s - 28e-6).abs() < 1e-12);
        assert!((nv.allreduce_bandwidth_s - 14.0 * 2048.0 / 450e9).abs() < 1e-15);
        assert!((nv.per_forward_s - 160.0 * nv.allreduce_s).abs() < 1e-12);
        // Slower links cost more per forward pass.
        assert!(r.estimates[1].per_forward_s > nv.per_forward_s);
    }

    #[test]
    fn tp_must_divide_the_heads() {
        let r = report("llama-3.1-70b", 3, 1);
        assert!(!r.valid);
        assert!(r.checks.iter().any(|c| c.level == Level::Error
            && c.message.contains("does not divide the 64 attention heads")));
    }

    #[test]
    fn tp_above_kv_heads_replicates_them() {
        let r = report("llama-3.1-70b", 16, 1);
        assert!(r.valid, "vLLM replicates KV heads when TP is a multiple");
        assert_eq!(r.kv_replicas, 2);
        assert!(
            r.checks
                .iter()
                .any(|c| c.level == Level::Warn && c.message.contains("more than the 8 GPUs"))
        );
    }

    #[test]
    fn qwen_7b_has_28_heads_so_tp_8_fails() {
        let r = report("qwen2.5-7b", 8, 1);
        assert!(!r.valid);
        assert!(report("qwen2.5-7b", 4, 1).valid);
    }

    #[test]
    fn tp_1_sends_nothing() {
        let r = report("llama-3.1-8b", 1, 1);
        assert_eq!(r.sent_per_gpu_per_allreduce, 0);
        assert_eq!(r.ring_steps, 0);
        assert_eq!(r.estimates[0].per_forward_s, 0.0);
    }

    #[test]
    fn bad_inputs_are_errors_not_panics() {
        let m = find_model("llama-3.1-8b").expect("preset");
        assert_eq!(
            calculate(&TpQuery::new(m.clone(), 0, 1)),
            Err(TpError::Tp(0))
        );
        assert_eq!(
            calculate(&TpQuery::new(m.clone(), 8, 0)),
            Err(TpError::Tokens(0))
        );
        let mut q = TpQuery::new(m, 8, 1);
        q.tokens_per_s = -1.0;
        assert!(matches!(calculate(&q), Err(TpError::Rate(_))));
    }

    #[test]
    fn text_fits_80_columns() {
        let text = report("llama-3.1-405b", 16, 1).to_text();
        for l in text.lines() {
            assert!(l.chars().count() <= 80, "{l}");
        }
    }

    #[test]
    fn rates_read_in_decimal_units() {
        assert_eq!(format_rate(229_376_000.0), "229 MB/s");
        assert_eq!(format_rate(1.5e9), "1.50 GB/s");
    }
}
