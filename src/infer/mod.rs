//! Inference-serving arithmetic: model shapes, the tensor-parallel calculator and the vLLM
//! launch planner. Pure data in, plain data out; every byte count of a collective is read off
//! a [`crate::collective::Schedule`].
//!
//! - [`model`]: presets with their `config.json` numbers, and custom shapes.
//! - [`tp`]: bytes and estimated time of TP's all-reduces per forward pass.
//! - [`plan`]: TP and PP for a cluster, a memory check, and the commands for every node.

pub mod model;
pub mod plan;
pub mod tp;

pub use model::{ModelConfig, ModelError, find_model, preset_names, presets};
pub use plan::{Backend, Plan, PlanError, PlanInput, find_link, plan};
pub use tp::{Check, Level, TpError, TpQuery, TpReport, calculate};

/// Word-wraps `text` to `width` columns: the first line starts with `first`, the rest with
/// `rest`. Ends with a newline. A word longer than the width stays whole.
pub fn wrap(text: &str, width: usize, first: &str, rest: &str) -> String {
    let mut out = String::new();
    let mut line = first.to_string();
    let mut empty = true;
    for word in text.split_whitespace() {
        let w = line.chars().count();
        if !empty && w + 1 + word.chars().count() > width {
            out.push_str(line.trim_end());
            out.push('\n');
            line = rest.to_string();
            empty = true;
        }
        if !empty {
            line.push(' ');
        }
        line.push_str(word);
        empty = false;
    }
    out.push_str(line.trim_end());
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::wrap;

    #[test]
    fn wrap_breaks_at_words_and_indents() {
        assert_eq!(wrap("aa bb cc", 5, "- ", "  "), "- aa\n  bb\n  cc\n");
        assert_eq!(wrap("aa bb cc", 8, "- ", "  "), "- aa bb\n  cc\n");
        assert_eq!(wrap("aa bb", 80, "", ""), "aa bb\n");
    }
}
