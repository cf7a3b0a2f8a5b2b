//! Model shapes: the handful of `config.json` fields that decide tensor-parallel traffic and
//! memory, for a few public models, plus custom values.
//!
//! Every preset copies its numbers from the model's Hugging Face `config.json` (the `hf_id`
//! below); the parameter count is computed from those fields, and a test pins it to the count
//! the model card publishes.

use serde::Serialize;

/// The shape of a decoder-only transformer, as its `config.json` states it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ModelConfig {
    /// Short name ringlab accepts on the command line, e.g. `llama-3.1-70b`.
    pub name: String,
    /// Hugging Face repository id, used in the launch commands.
    pub hf_id: String,
    /// `hidden_size`: elements in one token's activation vector.
    pub hidden_size: u64,
    /// `num_hidden_layers`.
    pub layers: u64,
    /// `num_attention_heads` (query heads).
    pub heads: u64,
    /// `num_key_value_heads` (grouped-query attention; equal to `heads` without GQA).
    pub kv_heads: u64,
    /// `intermediate_size` of the MLP (of each expert for a mixture of experts). 0 if unknown.
    pub intermediate_size: u64,
    /// `vocab_size`. 0 if unknown.
    pub vocab_size: u64,
    /// `num_local_experts` (1 for a dense model).
    pub experts: u64,
    /// Query/key/value projections carry a bias (Qwen2).
    pub qkv_bias: bool,
    /// `tie_word_embeddings`: the output layer reuses the embedding matrix.
    pub tied_embeddings: bool,
    /// Parameter count: computed from the fields above for presets; given for custom models.
    pub params: u64,
    /// Where the numbers come from.
    pub source: String,
}

/// The preset table: (name, hf_id, hidden, layers, heads, kv_heads, intermediate, vocab,
/// experts, qkv_bias, tied).
type Row = (
    &'static str,
    &'static str,
    u64,
    u64,
    u64,
    u64,
    u64,
    u64,
    u64,
    bool,
    bool,
);

const PRESETS: [Row; 6] = [
    (
        "llama-3.1-8b",
        "meta-llama/Llama-3.1-8B",
        4096,
        32,
        32,
        8,
        14336,
        128256,
        1,
        false,
        false,
    ),
    (
        "llama-3.1-70b",
        "meta-llama/Llama-3.1-70B",
        8192,
        80,
        64,
        8,
        28672,
        128256,
        1,
        false,
        false,
    ),
    (
        "llama-3.1-405b",
        "meta-llama/Llama-3.1-405B",
        16384,
        126,
        128,
        8,
        53248,
        128256,
        1,
        false,
        false,
    ),
    (
        "qwen2.5-7b",
        "Qwen/Qwen2.5-7B",
        3584,
        28,
        28,
        4,
        18944,
        152064,
        1,
        true,
        false,
    ),
    (
        "qwen2.5-72b",
        "Qwen/Qwen2.5-72B",
        8192,
        80,
        64,
        8,
        29568,
        152064,
        1,
        true,
        false,
    ),
    (
        "mixtral-8x7b",
        "mistralai/Mixtral-8x7B-v0.1",
        4096,
        32,
        32,
        8,
        14336,
        32000,
        8,
        false,
        false,
    ),
];

/// Names of every preset, in table order.
pub fn preset_names() -> Vec<&'static str> {
    PRESETS.iter().map(|r| r.0).collect()
}

/// Every preset, in table order.
pub fn presets() -> Vec<ModelConfig> {
    PRESETS.iter().map(from_row).collect()
}

fn from_row(r: &Row) -> ModelConfig {
    let mut m = ModelConfig {
        name: r.0.to_string(),
        hf_id: r.1.to_string(),
        hidden_size: r.2,
        layers: r.3,
        heads: r.4,
        kv_heads: r.5,
        intermediate_size: r.6,
        vocab_size: r.7,
        experts: r.8,
        qkv_bias: r.9,
        tied_embeddings: r.10,
        params: 0,
        source: format!("huggingface.co/{}, config.json", r.1),
    };
    m.params = m.computed_params();
    m
}

/// Why a model name or custom shape was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    /// Not a preset; lists the presets.
    #[error(
        "unknown model \"{name}\"; known models: {known} (or `custom` with --hidden, --layers, --heads, --kv-heads)"
    )]
    Unknown { name: String, known: String },
    /// A custom shape that cannot be a transformer.
    #[error("invalid model shape: {0}")]
    Invalid(String),
}

/// Finds a preset by short name or Hugging Face id, ignoring case (`Llama-3.1-70B`,
/// `meta-llama/Llama-3.1-70B`).
pub fn find_model(name: &str) -> Result<ModelConfig, ModelError> {
    let key = name.trim().to_ascii_lowercase();
    PRESETS
        .iter()
        .find(|r| r.0 == key || r.1.to_ascii_lowercase() == key)
        .map(from_row)
        .ok_or_else(|| ModelError::Unknown {
            name: name.to_string(),
            known: preset_names().join(", "),
        })
}

impl ModelConfig {
    /// A model given by its numbers. `params` may be 0 (unknown): the memory check is then
    /// skipped.
    pub fn custom(
        hidden_size: u64,
        layers: u64,
        heads: u64,
        kv_heads: u64,
        params: u64,
    ) -> Result<Self, ModelError> {
        let m = ModelConfig {
            name: "custom".into(),
            hf_id: "MODEL".into(),
            hidden_size,
            layers,
            heads,
            kv_heads,
            intermediate_size: 0,
            vocab_size: 0,
            experts: 1,
            qkv_bias: false,
            tied_embeddings: false,
            params,
            source: "custom values".into(),
        };
        m.validate()?;
        Ok(m)
    }

    /// Checks the shape is a possible transformer: everything positive, heads divide the
    /// hidden size, KV heads divide the query heads.
    pub fn validate(&self) -> Result<(), ModelError> {
        let bad = |m: String| Err(ModelError::Invalid(m));
        if self.hidden_size == 0 || self.layers == 0 || self.heads == 0 || self.kv_heads == 0 {
            return bad("hidden size, layers, heads and KV heads must all be at least 1".into());
        }
        if !self.hidden_size.is_multiple_of(self.heads) {
            return bad(format!(
                "{} heads do not divide hidden size {}",
                self.heads, self.hidden_size
            ));
        }
        if !self.heads.is_multiple_of(self.kv_heads) {
            return bad(format!(
                "{} KV heads do not divide {} query heads",
                self.kv_heads, self.heads
            ));
        }
        Ok(())
    }

    /// Elements per attention head: hidden / heads.
    pub fn head_dim(&self) -> u64 {
        self.hidden_size / self.heads.max(1)
    }

    /// Parameters implied by the config, for a Llama-style decoder (gated MLP of three
    /// matrices, RMSNorm, grouped-query attention): embeddings (twice unless tied), per layer
    /// q/k/v/o projections (+ biases), experts × 3 × hidden × intermediate, the router, two
    /// norms, and the final norm. 0 when intermediate or vocabulary size is unknown.
    pub fn computed_params(&self) -> u64 {
        if self.intermediate_size == 0 || self.vocab_size == 0 {
            return 0;
        }
        let h = self.hidden_size;
        let kv = self.kv_heads * self.head_dim();
        let embed = self.vocab_size * h * if self.tied_embeddings { 1 } else { 2 };
        let attn = h * h * 2 + h * kv * 2 + if self.qkv_bias { h + 2 * kv } else { 0 };
        let mlp = self.experts * 3 * h * self.intermediate_size;
        let router = if self.experts > 1 {
            h * self.experts
        } else {
            0
        };
        let norms = 2 * h;
        embed + self.layers * (attn + mlp + router + norms) + h
    }

    /// Bytes of weights at `bytes_per_param` (2 for bf16).
    pub fn weight_bytes(&self, bytes_per_param: u64) -> u64 {
        self.params.saturating_mul(bytes_per_param)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn billions(m: &ModelConfig) -> f64 {
        m.params as f64 / 1e9
    }

    #[test]
    fn presets_carry_their_config_json_shapes() {
        let shape = |n: &str| {
            let m = find_model(n).expect("preset");
            (m.hidden_size, m.layers, m.heads, m.kv_heads)
        };
        assert_eq!(shape("llama-3.1-8b"), (4096, 32, 32, 8));
        assert_eq!(shape("llama-3.1-70b"), (8192, 80, 64, 8));
        assert_eq!(shape("llama-3.1-405b"), (16384, 126, 128, 8));
        assert_eq!(shape("qwen2.5-7b"), (3584, 28, 28, 4));
        assert_eq!(shape("qwen2.5-72b"), (8192, 80, 64, 8));
        assert_eq!(shape("mixtral-8x7b"), (4096, 32, 32, 8));
    }

    #[test]
    fn computed_params_match_the_published_counts() {
        // Model cards: 8.03B, 70.6B, 405B (406B on the hub), 7.61B, 72.7B, 46.7B.
        let expect = [
            ("llama-3.1-8b", 8_030_261_248u64),
            ("llama-3.1-70b", 70_553_706_496),
            ("llama-3.1-405b", 405_853_388_800),
            ("qwen2.5-7b", 7_615_616_512),
            ("qwen2.5-72b", 72_706_203_648),
            ("mixtral-8x7b", 46_702_792_704),
        ];
        for (name, params) in expect {
            let m = find_model(name).expect("preset");
            assert_eq!(m.params, params, "{name}: {}", billions(&m));
        }
    }

    #[test]
    fn lookup_ignores_case_and_accepts_the_hub_id() {
        assert_eq!(
            find_model("Llama-3.1-70B").expect("name").name,
            "llama-3.1-70b"
        );
        assert_eq!(
            find_model("meta-llama/Llama-3.1-70B").expect("id").name,
            "llama-3.1-70b"
        );
    }

    #[test]
    fn unknown_model_lists_the_known_ones() {
        let e = find_model("gpt-5").expect_err("unknown");
        let msg = e.to_string();
        assert!(
            msg.contains("gpt-5") && msg.contains("llama-3.1-70b"),
            "{msg}"
        );
    }

    #[test]
    fn custom_shapes_are_validated() {
        assert!(ModelConfig::custom(4096, 32, 32, 8, 0).is_ok());
        assert!(ModelConfig::custom(4096, 32, 0, 8, 0).is_err());
        assert!(
            ModelConfig::custom(4096, 32, 30, 8, 0).is_err(),
            "30 ∤ 4096"
        );
        assert!(ModelConfig::custom(4096, 32, 32, 6, 0).is_err(), "6 ∤ 32");
    }

    #[test]
    fn llama_70b_weighs_141_gb_in_bf16() {
        let m = find_model("llama-3.1-70b").expect("preset");
        assert_eq!(m.weight_bytes(2), 141_107_412_992);
    }
}
