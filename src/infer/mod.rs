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
    for word in units_kept(text) {
        let word = word.as_str();
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

/// The words of `text`, a number kept with the unit after it ("77.0 GB", "4.49 ms,"), so a
/// line never ends in a number whose unit starts the next.
fn units_kept(text: &str) -> Vec<String> {
    const UNITS: [&str; 19] = [
        "B", "kB", "KB", "MB", "GB", "TB", "KiB", "MiB", "GiB", "s", "ms", "µs", "us", "ns", "B/s",
        "kB/s", "MB/s", "GB/s", "%",
    ];
    let mut out: Vec<String> = Vec::new();
    for word in text.split_whitespace() {
        let bare = word.trim_end_matches([',', '.', ';', ':', ')']);
        let after_number = out.last().is_some_and(|prev| {
            let p = prev.trim_start_matches(['(', '~', '≈']);
            !p.is_empty() && p.chars().all(|c| c.is_ascii_digit() || c == '.')
        });
        match out.last_mut() {
            Some(prev) if after_number && UNITS.contains(&bare) => {
                prev.push(' ');
                prev.push_str(word);
            }
            _ => out.push(word.to_string()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::wrap;

    #[test]
    fn a_number_stays_with_its_unit() {
        assert_eq!(
            wrap("per GPU 8.8 GB of a 77.0 GB budget", 24, "", ""),
            "per GPU 8.8 GB of a\n77.0 GB budget\n"
        );
        assert_eq!(wrap("NVLink 4: 0 s", 12, "", ""), "NVLink 4:\n0 s\n");
        // A number that is not followed by a unit breaks as any word.
        assert_eq!(wrap("TP 8 x", 4, "", ""), "TP 8\nx\n");
    }

    #[test]
    fn wrap_breaks_at_words_and_indents() {
        assert_eq!(wrap("aa bb cc", 5, "- ", "  "), "- aa\n  bb\n  cc\n");
        assert_eq!(wrap("aa bb cc", 8, "- ", "  "), "- aa bb\n  cc\n");
        assert_eq!(wrap("aa bb", 80, "", ""), "aa bb\n");
    }
}
