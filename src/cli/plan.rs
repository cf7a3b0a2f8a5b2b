//! `ringlab tp` and `ringlab plan`: the TP calculator and the vLLM launch planner.

use std::io::{self, Write};
use std::process::ExitCode;

use crate::collective::Dtype;
use crate::infer::{
    Backend, ModelConfig, PlanInput, TpQuery, calculate, find_link, find_model, plan,
};

/// Which model: a preset, or `custom` with its numbers (the numbers also override a preset).
#[derive(Debug, Clone, clap::Args)]
pub struct ModelArgs {
    /// Model preset (llama-3.1-8b, llama-3.1-70b, llama-3.1-405b, qwen2.5-7b, qwen2.5-72b,
    /// mixtral-8x7b; a Hugging Face id works too) or `custom`.
    #[arg(long, value_name = "NAME")]
    pub model: String,
    /// hidden_size (required with --model custom).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub hidden: Option<u64>,
    /// num_hidden_layers (required with --model custom).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub layers: Option<u64>,
    /// num_attention_heads (required with --model custom).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub heads: Option<u64>,
    /// num_key_value_heads (default: --heads).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub kv_heads: Option<u64>,
    /// Parameter count for the memory check: 8030261248, 70.6B, 46.7e9.
    #[arg(long, value_parser = parse_params)]
    pub params: Option<u64>,
    /// Element type of weights and activations (bf16, f16, f32; i8/u8 stand in for 8-bit).
    #[arg(long, default_value = "bf16")]
    pub dtype: Dtype,
}

impl ModelArgs {
    pub fn model(&self) -> anyhow::Result<ModelConfig> {
        let mut m = if self.model.trim().eq_ignore_ascii_case("custom") {
            let (Some(h), Some(l), Some(heads)) = (self.hidden, self.layers, self.heads) else {
                anyhow::bail!(
                    "--model custom needs --hidden, --layers and --heads (and usually --kv-heads, --params)"
                );
            };
            ModelConfig::custom(
                h,
                l,
                heads,
                self.kv_heads.unwrap_or(heads),
                self.params.unwrap_or(0),
            )?
        } else {
            find_model(&self.model)?
        };
        let overridden = self.hidden.is_some()
            || self.layers.is_some()
            || self.heads.is_some()
            || self.kv_heads.is_some()
            || self.params.is_some();
        if overridden && m.name != "custom" {
            m.hidden_size = self.hidden.unwrap_or(m.hidden_size);
            m.layers = self.layers.unwrap_or(m.layers);
            m.heads = self.heads.unwrap_or(m.heads);
            m.kv_heads = self.kv_heads.unwrap_or(m.kv_heads);
            m.params = self.params.unwrap_or_else(|| m.computed_params());
            m.name = format!("{} (modified)", m.name);
            m.source = "preset with values from the command line".into();
            m.validate()?;
        }
        Ok(m)
    }
}

/// Parses a parameter count: `8030261248`, `70.6B`, `405b`, `46.7e9`, `500M`.
pub fn parse_params(s: &str) -> Result<u64, BadParams> {
    let t = s.trim();
    let (num, scale) = match t.chars().last().map(|c| c.to_ascii_lowercase()) {
        Some('b') => (&t[..t.len() - 1], 1e9),
        Some('m') => (&t[..t.len() - 1], 1e6),
        _ => (t, 1.0),
    };
    match num.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v * scale < 1e15 => Ok((v * scale).round() as u64),
        _ => Err(BadParams(s.to_string())),
    }
}

/// A parameter count that does not read as one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid parameter count \"{0}\" (examples: 8030261248, 70.6B, 46.7e9)")]
pub struct BadParams(pub String);

/// `--tokens`: a whole count as sizes are written (`2048`, `1e3`), 1 to 1048576.
fn parse_tokens(input: &str) -> Result<u64, String> {
    let n = crate::units::parse_count(input)?;
    if (1..=1_048_576).contains(&n) {
        Ok(n)
    } else {
        Err(format!("{n} is not in 1..=1048576"))
    }
}

#[derive(Debug, clap::Args)]
pub struct TpArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// TP degree: GPUs that split every layer.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub tp: u64,
    /// Tokens per forward pass: 1 = one decode step, 2048 = a 2048-token prefill.
    #[arg(long, default_value_t = 1, value_parser = parse_tokens)]
    pub tokens: u64,
    /// Token throughput for the bytes-per-second figure.
    #[arg(long, default_value_t = crate::infer::tp::DEFAULT_TOKENS_PER_S, value_name = "N")]
    pub tokens_per_s: f64,
    /// GPUs per node (one NVLink domain), for the TP-inside-a-node check.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub gpus_per_node: u64,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct PlanArgs {
    /// Number of nodes (machines).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=64))]
    pub nodes: u64,
    /// GPUs in each node.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=16))]
    pub gpus_per_node: u64,
    #[command(flatten)]
    pub model: ModelArgs,
    /// Executor backend to print commands for: mp or ray (default: both).
    #[arg(long, value_parser = |s: &str| s.parse::<Backend>())]
    pub backend: Option<Backend>,
    /// The head node's IP address (HEAD_IP in the commands when not given).
    #[arg(long, value_name = "IP")]
    pub head_ip: Option<String>,
    /// Network interface the nodes reach each other on.
    #[arg(long, default_value = "eth0", value_name = "NAME")]
    pub iface: String,
    /// Memory of one GPU in GB, as sold (the 80 GB class is taken as nvidia-smi reports it; other sizes as GB × 10^9 B).
    #[arg(long, default_value_t = 80.0, value_name = "GB")]
    pub gpu_mem: f64,
    /// Link inside a node: nvlink or pcie.
    #[arg(long, default_value = "nvlink", value_parser = find_link)]
    pub intra: usize,
    /// Link between nodes: ib or ethernet.
    #[arg(long, default_value = "ib", value_parser = find_link)]
    pub inter: usize,
    /// Print the plan as JSON.
    #[arg(long)]
    pub json: bool,
}

fn print_json<T: serde::Serialize>(value: &T) -> anyhow::Result<()> {
    let mut out = io::BufWriter::new(io::stdout().lock());
    serde_json::to_writer_pretty(&mut out, value)?;
    writeln!(out)?;
    out.flush()?;
    Ok(())
}

fn print_text(text: &str) -> anyhow::Result<()> {
    let mut out = io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(())
}

/// Exit 0 when valid, 1 when vLLM would refuse the configuration.
fn verdict(valid: bool) -> ExitCode {
    if valid {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

pub fn tp(args: &TpArgs) -> anyhow::Result<ExitCode> {
    let mut q = TpQuery::new(args.model.model()?, args.tp as usize, args.tokens);
    q.dtype = args.model.dtype;
    q.tokens_per_s = args.tokens_per_s;
    q.gpus_per_node = args.gpus_per_node as usize;
    let r = calculate(&q)?;
    if args.json {
        print_json(&r)?;
    } else {
        print_text(&r.to_text())?;
    }
    Ok(verdict(r.valid))
}

pub fn plan_cmd(args: &PlanArgs) -> anyhow::Result<ExitCode> {
    let mut input = PlanInput::new(
        args.model.model()?,
        args.nodes as usize,
        args.gpus_per_node as usize,
    );
    input.dtype = args.model.dtype;
    input.gpu_mem_gb = args.gpu_mem;
    input.intra = args.intra;
    input.inter = args.inter;
    input.head_ip = args.head_ip.clone();
    input.iface = args.iface.clone();
    let mut p = plan(&input)?;
    if args.json {
        if let Some(b) = args.backend {
            p.launches.retain(|l| l.backend == b);
        }
        print_json(&p)?;
    } else {
        print_text(&p.to_text(args.backend))?;
    }
    Ok(verdict(p.valid))
}

#[cfg(test)]
mod tests {
    use super::parse_params;

    #[test]
    fn params_parse_with_suffixes() {
        assert_eq!(parse_params("8030261248"), Ok(8_030_261_248));
        assert_eq!(parse_params("70.6B"), Ok(70_600_000_000));
        assert_eq!(parse_params("46.7e9"), Ok(46_700_000_000));
        assert_eq!(parse_params("500m"), Ok(500_000_000));
        assert!(parse_params("lots").is_err());
        assert!(parse_params("-1").is_err());
    }
}
