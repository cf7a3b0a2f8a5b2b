//! A plan as text: the report `ringlab plan` prints and the planner screen shows, with long
//! commands split into `\`-continued shell lines.

use super::*;

/// Splits a long command at ` --` into `\`-continued lines of at most `width` columns.
pub fn shell_lines(cmd: &str, width: usize, indent: &str) -> Vec<String> {
    let mut parts: Vec<String> = Vec::new();
    for (i, piece) in cmd.split(" --").enumerate() {
        parts.push(if i == 0 {
            piece.to_string()
        } else {
            format!("--{piece}")
        });
    }
    let mut lines: Vec<String> = Vec::new();
    let mut cur = indent.to_string();
    let mut first = true;
    for p in parts {
        let sep = if first { "" } else { " " };
        if !first && cur.chars().count() + sep.len() + p.chars().count() + 2 > width {
            lines.push(format!("{cur} \\"));
            cur = format!("{indent}    {p}");
        } else {
            cur.push_str(sep);
            cur.push_str(&p);
        }
        first = false;
    }
    lines.push(cur);
    lines
}

impl Plan {
    /// The commands alone, plain, for copying: each node's exports and commands under a
    /// `# node N (role)` comment, long commands `\`-continued at 80 columns.
    pub fn commands_text(&self, backend: Backend) -> Option<String> {
        let l = self.launch(backend)?;
        let mut s = String::new();
        for (i, st) in l.steps.iter().enumerate() {
            if i > 0 {
                s.push('\n');
            }
            let _ = writeln!(s, "# node {} ({})", st.node, st.role);
            for e in &st.env {
                let _ = writeln!(s, "export {}={}", e.name, e.value);
            }
            for cmd in &st.commands {
                for line in shell_lines(cmd, 80, "") {
                    let _ = writeln!(s, "{line}");
                }
            }
        }
        Some(s)
    }

    /// The launch commands as a script to keep (the planner's `y` writes it): a shebang, a
    /// header saying which step runs on which node, and a required step argument, so that run
    /// as it is it starts one step on this node and never every node's commands on one host.
    pub fn script_text(&self, backend: Backend) -> Option<String> {
        let l = self.launch(backend)?;
        let n = l.steps.len();
        let mut s = String::from("#!/bin/sh\n");
        let _ = writeln!(
            s,
            "# {} on {} × {}, launched with {backend} (from ringlab's planner).",
            self.model,
            crate::units::count(self.nodes, "node"),
            crate::units::count(self.gpus_per_node, "GPU"),
        );
        let _ = writeln!(
            s,
            "# Run each step on its node, in order: sh THIS-FILE STEP"
        );
        for (i, st) in l.steps.iter().enumerate() {
            let _ = writeln!(s, "#   step {}: on node {} ({})", i + 1, st.node, st.role);
        }
        s.push_str("set -eu\n");
        let _ = writeln!(
            s,
            "step=\"${{1:?usage: sh $0 STEP (1 to {n}, each on the node the header names)}}\""
        );
        s.push_str("case \"$step\" in\n");
        for (i, st) in l.steps.iter().enumerate() {
            let _ = writeln!(s, "{})", i + 1);
            for e in &st.env {
                let _ = writeln!(s, "  export {}={}", e.name, e.value);
            }
            for cmd in &st.commands {
                for line in shell_lines(cmd, 80, "  ") {
                    let _ = writeln!(s, "{line}");
                }
            }
            s.push_str("  ;;\n");
        }
        let _ = writeln!(
            s,
            "*)\n  echo \"no step $step in this plan: 1 to {n}\" >&2\n  exit 2\n  ;;\nesac"
        );
        Some(s)
    }

    /// The launch steps for one backend.
    pub fn launch(&self, backend: Backend) -> Option<&Launch> {
        self.launches.iter().find(|l| l.backend == backend)
    }

    /// The plan as text (at most 80 columns); `backend` None prints both launches.
    pub fn to_text(&self, backend: Option<Backend>) -> String {
        self.text_for_width(backend, 80)
    }

    /// The plan as text, its wrapped lines at most `width` columns (the header lines and the
    /// worker's address expression may be longer).
    pub fn text_for_width(&self, backend: Option<Backend>, width: usize) -> String {
        let wrap_at = width.saturating_sub(2).max(20);
        let mut s = String::new();
        // One node has no link between nodes to name.
        let links = if self.nodes == 1 {
            format!("{} inside", self.intra_link)
        } else {
            format!("{} inside, {} between", self.intra_link, self.inter_link)
        };
        let _ = writeln!(
            s,
            "{} on {} × {} ({links})",
            self.model,
            crate::units::count(self.nodes, "node"),
            crate::units::count(self.gpus_per_node, "GPU"),
        );
        let (lo, hi) = self.layers_per_stage;
        let layers = if lo == hi {
            format!("{lo}")
        } else {
            format!("{lo}-{hi}")
        };
        let _ = writeln!(
            s,
            "TP {} × PP {} = {} of {} · {layers} layers per stage\n",
            self.tp,
            self.pp,
            self.gpus_used,
            crate::units::count(self.total_gpus, "GPU")
        );
        let _ = writeln!(s, "Why:");
        for r in &self.reasons {
            s.push_str(&crate::infer::wrap(r, wrap_at, "  - ", "    "));
        }
        self.memory_text(&mut s);
        self.comm_text(&mut s);
        if !self.checks.is_empty() {
            let _ = writeln!(s, "\nChecks:");
            for ch in &self.checks {
                s.push_str(&crate::infer::wrap(
                    &ch.message,
                    wrap_at,
                    &format!("  {} ", ch.level.mark()),
                    "    ",
                ));
            }
        }
        self.launch_text(&mut s, backend, width);
        s
    }

    /// The memory section: the weights against the budget.
    fn memory_text(&self, s: &mut String) {
        let gb = |b: u64| format!("{:.1} GB", b as f64 / 1e9);
        let m = &self.memory;
        let _ = writeln!(
            s,
            "\nMemory ({}, vLLM may use {} of each GPU):",
            self.dtype, GPU_MEMORY_UTILIZATION
        );
        match m.fits {
            None => {
                let _ = writeln!(s, "  parameter count unknown: not checked");
            }
            Some(fits) => {
                let _ = writeln!(
                    s,
                    "  weights {} · per GPU {} of a {} budget",
                    gb(m.weight_bytes),
                    gb(m.per_gpu_bytes),
                    gb(m.budget_bytes)
                );
                let _ = writeln!(
                    s,
                    "  {}",
                    if fits {
                        format!(
                            "fits: {} per GPU left for the KV cache",
                            gb(m.headroom_bytes.max(0) as u64)
                        )
                    } else {
                        "WON'T FIT".to_string()
                    }
                );
            }
        }
    }

    /// The communication section: TP's all-reduces, PP's hand-offs, TP across nodes.
    fn comm_text(&self, s: &mut String) {
        use crate::units::format_seconds;
        let c = &self.comm;
        let _ = writeln!(s, "\nCommunication per decode token (estimates):");
        if c.tp_allreduces == 0 {
            // TP 1: each GPU holds whole layers.
            let _ = writeln!(s, "  TP: none at TP 1 (no all-reduce)");
        } else {
            let _ = writeln!(
                s,
                "  TP: {} all-reduces of {} B on {}: {}",
                c.tp_allreduces,
                c.tp_allreduce_bytes,
                c.tp_link,
                format_seconds(c.tp_per_token_s)
            );
        }
        if c.pp_handoffs > 0 {
            let _ = writeln!(
                s,
                "  PP: {} of {} B on {}: {}",
                crate::units::count(c.pp_handoffs as usize, "handoff"),
                c.pp_handoff_bytes,
                c.pp_link,
                format_seconds(c.pp_per_token_s)
            );
        }
        if let Some(t) = c.tp_across_nodes_per_token_s {
            let _ = writeln!(
                s,
                "  (TP {} across nodes instead, paced by {}: {})",
                self.gpus_used,
                c.pp_link,
                format_seconds(t)
            );
        }
    }

    /// The launch commands for `backend` (every backend where None), shell lines within `width`.
    fn launch_text(&self, s: &mut String, backend: Option<Backend>, width: usize) {
        // A plan that cannot run gets no commands to copy.
        if !self.valid || self.memory.fits == Some(false) {
            let why = if self.valid {
                "the weights won't fit"
            } else {
                "a check above failed (✗)"
            };
            let _ = writeln!(s, "\nNo launch commands: {why}; change the plan first.");
            return;
        }
        for l in &self.launches {
            if backend.is_some_and(|b| b != l.backend) {
                continue;
            }
            let _ = writeln!(
                s,
                "\nLaunch with {}{}:",
                l.backend,
                match (l.backend, self.nodes) {
                    (_, 1) => "",
                    (Backend::Mp, _) => " (every node runs vllm serve; workers --headless)",
                    (Backend::Ray, _) => " (form the Ray cluster, then serve once on the head)",
                }
            );
            for st in &l.steps {
                let _ = writeln!(s, "  # node {} ({})", st.node, st.role);
                for e in &st.env {
                    let _ = writeln!(s, "  export {}={}", e.name, e.value);
                }
                for cmd in &st.commands {
                    for line in shell_lines(cmd, width.max(40), "  ") {
                        let _ = writeln!(s, "{line}");
                    }
                }
            }
        }
    }
}
