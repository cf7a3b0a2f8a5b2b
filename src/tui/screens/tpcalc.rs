//! The TP calculator screen: pick a model, a TP degree and tokens per forward pass; read the
//! bytes and estimated time of TP's all-reduces, all computed by `infer::tp` from schedules.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};

use crate::course::block::TpBlock;
use crate::infer::{Level, ModelConfig, TpQuery, TpReport, calculate, find_model, presets};
use crate::tui::app::{Action, App, Outcome};
use crate::tui::error::ScreenError;
use crate::tui::form::{Form, FormModel, cycle};
use crate::tui::theme::Theme;
use crate::units::{format_bytes, format_seconds};

/// The course map opens this screen with `t` (its line in `screens!` names this).
pub const OPENER: crate::tui::screens::Opener = crate::tui::screens::Opener::new(
    &[crate::tui::keys::Key::Char('t')],
    "TP calculator",
    Some((5, "TP calc")),
    |_, _| TpCalcState::new("llama-3.1-70b", 8, 1).map(Into::into),
);

/// TP degrees ←/→ step through: every degree up to 8 (3, 5, 6 and 7 divide few models' heads:
/// they are there to show what fails), then 12 (across a node) and powers of two.
pub const TP_STEPS: [usize; 12] = [1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 32, 64];
/// Tokens per forward pass: decode steps and prefills.
pub const TOKEN_STEPS: [u64; 8] = [1, 8, 32, 128, 512, 2048, 8192, 32768];
/// GPUs per node.
pub const GPN_STEPS: [usize; 5] = [1, 2, 4, 8, 16];

/// Width of the inputs column (both screens).
pub const FORM_WIDTH: u16 = 32;

/// The editable fields, top to bottom.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TpField {
    Model,
    Tp,
    Tokens,
    GpusPerNode,
}

pub struct TpCalcState {
    pub models: Vec<ModelConfig>,
    pub model: usize,
    pub tp: usize,
    pub tokens: u64,
    pub gpus_per_node: usize,
    pub form: Form,
    pub report: Result<TpReport, ScreenError>,
    /// The results pane's first row shown (PgDn/PgUp).
    pub scroll: u16,
}

pub use crate::tui::form::step;

impl TpCalcState {
    /// Opens on a preset (by name or Hugging Face id).
    pub fn new(model: &str, tp: usize, tokens: u64) -> Result<Self, ScreenError> {
        let m = find_model(model)?;
        let models = presets();
        let idx = models.iter().position(|p| p.name == m.name).unwrap_or(0);
        let mut s = Self {
            models,
            model: idx,
            tp,
            tokens,
            gpus_per_node: 8,
            form: Form::default(),
            report: Err(ScreenError::NoPresets),
            scroll: 0,
        };
        s.recompute();
        s.report.as_ref().map_err(Clone::clone)?;
        Ok(s)
    }

    /// The calculator preset by a ```` ```tp ```` block.
    pub fn from_block(b: &TpBlock) -> Result<Self, ScreenError> {
        Self::new(&b.model, b.tp, b.tokens)
    }

    pub fn current(&self) -> Option<&ModelConfig> {
        self.models.get(self.model)
    }

    fn recompute(&mut self) {
        self.report = match self.current() {
            Some(m) => {
                let mut q = TpQuery::new(m.clone(), self.tp, self.tokens);
                q.gpus_per_node = self.gpus_per_node;
                calculate(&q).map_err(ScreenError::from)
            }
            None => Err(ScreenError::NoPresets),
        };
    }
}

impl FormModel for TpCalcState {
    type Field = TpField;
    const FIELDS: &'static [TpField] = &[
        TpField::Model,
        TpField::Tp,
        TpField::Tokens,
        TpField::GpusPerNode,
    ];

    fn label(f: TpField) -> &'static str {
        match f {
            TpField::Model => "model",
            TpField::Tp => "TP degree",
            TpField::Tokens => "tok/pass",
            TpField::GpusPerNode => "GPUs/node",
        }
    }

    fn value(&self, f: TpField) -> String {
        match f {
            TpField::Model => self.current().map_or("?".into(), |m| m.name.clone()),
            TpField::Tp => self.tp.to_string(),
            TpField::Tokens => self.tokens.to_string(),
            TpField::GpusPerNode => self.gpus_per_node.to_string(),
        }
    }

    fn adjust(&mut self, f: TpField, d: i32) {
        match f {
            TpField::Model => self.model = cycle(self.model, self.models.len(), d),
            TpField::Tp => self.tp = step(&TP_STEPS, self.tp, d),
            TpField::Tokens => self.tokens = step(&TOKEN_STEPS, self.tokens, d),
            TpField::GpusPerNode => self.gpus_per_node = step(&GPN_STEPS, self.gpus_per_node, d),
        }
    }

    type Error = ScreenError;

    fn validate(&mut self) -> Result<(), ScreenError> {
        self.recompute();
        self.report.as_ref().map(|_| ()).map_err(Clone::clone)
    }
}

pub const OWN: crate::tui::keys::Context = crate::tui::keys::Context::Own("TP calculator");

use crate::tui::keys::{Binding, DOWN, NEXT_VALUE, PAGE_DOWN, PAGE_UP, PREV_VALUE, UP, bind};

#[rustfmt::skip]
pub const KEYS: &[Binding] = &[
    bind(OWN, DOWN, "choose field", Action::Move(1), Some((1, "choose field"))),
    bind(OWN, UP, "previous field", Action::Move(-1), None),
    bind(OWN, NEXT_VALUE, "change value", Action::Adjust(1), Some((1, "change value"))),
    bind(OWN, PREV_VALUE, "previous value", Action::Adjust(-1), None),
    bind(OWN, PAGE_DOWN, "scroll the results a page", Action::Page(1), Some((2, "scroll"))),
    bind(OWN, PAGE_UP, "scroll the results back", Action::Page(-1), None),
];

pub fn update(s: &mut TpCalcState, app: &mut App, action: Action) -> Outcome {
    match action {
        Action::Move(_) | Action::Adjust(_) => {
            let mut form = s.form;
            if let Some(e) = form.update(s, action) {
                app.status = Some(e);
            }
            s.form = form;
        }
        Action::Page(d) => {
            s.scroll = results_pane(s, &app.theme, app.body_area()).page(s.scroll, d);
        }
        Action::Back => return Outcome::Pop,
        _ => {}
    }
    Outcome::Stay
}

fn model_lines(m: &ModelConfig, t: &Theme) -> Vec<Line<'static>> {
    let params = if m.params > 0 {
        format!("{:.2} B params", m.params as f64 / 1e9)
    } else {
        "params unknown".into()
    };
    vec![
        Line::styled(m.hf_id.clone(), t.h3),
        Line::raw(format!("hidden {}, {} layers", m.hidden_size, m.layers)),
        Line::raw(format!("{} heads, {} KV heads", m.heads, m.kv_heads)),
        Line::styled(params, t.dim),
    ]
}

fn check_style(level: Level, t: &Theme) -> ratatui::style::Style {
    match level {
        Level::Ok => t.ok,
        Level::Warn => t.warn,
        Level::Error => t.error,
    }
}

/// Passes per second, with as many decimals as they need (50, 6.25, 0.0244).
fn passes(x: f64) -> String {
    let s = if x >= 100.0 {
        format!("{x:.0}")
    } else if x >= 1.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.4}")
    };
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// The results, and apart from them the link table (its blank line, header, rows and note),
/// which a short pane shows with at least one row under its header or not at all.
fn result_lines(r: &TpReport, t: &Theme, width: usize) -> (Vec<Line<'static>>, Vec<Line<'static>>) {
    // A value that wraps stays in the value column.
    let kv = |k: &str, v: String| {
        crate::tui::markdown::hanging(
            Span::styled(format!("{k:<20}"), t.dim),
            vec![Span::raw(v)],
            width,
        )
    };
    // "4587520 B (4.38 MiB)"; a count under a KiB needs no gloss.
    let bytes = |b: u64| {
        if b < 1024 {
            format!("{b} B")
        } else {
            format!("{b} B ({})", format_bytes(b))
        }
    };
    let rows = vec![
        kv(
            "bytes/all-reduce",
            if r.tp == 1 {
                // One GPU holds whole layers: there is nothing to add up across GPUs.
                "none at TP 1".to_string()
            } else {
                bytes(r.allreduce_bytes)
            },
        ),
        kv(
            "all-reduces/pass",
            crate::infer::tp::allreduces_per_forward_text(r.layers, r.tp),
        ),
        kv("ring steps each", r.ring_steps.to_string()),
        kv(
            "sent/GPU/all-reduce",
            format!("{} B", r.sent_per_gpu_per_allreduce),
        ),
        kv("sent/GPU/pass", bytes(r.sent_per_gpu_per_forward)),
        kv(
            "sent/GPU/second",
            // The rate is the whole model's, not one sequence's (a pass may carry several
            // tokens): "total" says so; passes/s follow in the line below.
            format!(
                "{} at {} tok/s total",
                crate::infer::tp::format_rate(r.sent_per_gpu_per_s),
                r.tokens_per_s,
            ),
        ),
        kv(
            "passes/second",
            format!(
                "{} ({} tok/s ÷ {} tok/pass)",
                passes(r.forwards_per_s),
                r.tokens_per_s,
                r.tokens
            ),
        ),
    ];
    let mut out: Vec<Line<'static>> = rows.into_iter().flatten().collect();
    // The checks before the link table: on a short terminal the table gives way, never the
    // verdict on the TP degree.
    out.push(Line::raw(""));
    for c in &r.checks {
        let style = check_style(c.level, t);
        out.extend(crate::tui::markdown::hanging(
            Span::styled(format!("{} ", c.level.mark()), style),
            vec![Span::styled(c.message.clone(), style)],
            width,
        ));
    }
    let mut table = vec![
        Line::raw(""),
        Line::styled(
            format!(
                "{:<15}{:>10}{:>10}{:>11}",
                "link", "latency", "one AR", "per pass"
            ),
            t.strong,
        ),
    ];
    for e in &r.estimates {
        table.push(Line::raw(format!(
            "{:<15}{:>10}{:>10}{:>11}",
            e.link,
            format_seconds(e.allreduce_latency_s),
            format_seconds(e.allreduce_s),
            format_seconds(e.per_forward_s)
        )));
    }
    table.push(Line::styled(
        "estimates: ring alpha-beta; per-step latencies assumed",
        t.dim,
    ));
    (out, table)
}

pub fn render(s: &TpCalcState, app: &App, frame: &mut Frame, area: Rect) {
    let t = &app.theme;
    let full = area;
    let [head, body] = Layout::vertical([Constraint::Length(2), Constraint::Min(1)]).areas(area);
    frame.render_widget(
        Paragraph::new(Line::from(vec![
            Span::styled(" TP calculator ", t.title),
            Span::styled(
                format!(
                    "— {}, every forward pass",
                    crate::infer::tp::ALLREDUCES_PER_LAYER_TEXT
                ),
                t.dim,
            ),
        ])),
        head,
    );
    let [left, right] =
        Layout::horizontal([Constraint::Length(FORM_WIDTH), Constraint::Min(20)]).areas(body);
    let mut lines = s.form.lines(s, t);
    lines.push(Line::raw(""));
    if let Some(m) = s.current() {
        lines.extend(model_lines(m, t));
    }
    frame.render_widget(
        Paragraph::new(lines).block(
            Block::default()
                .borders(Borders::RIGHT)
                .border_style(t.border)
                .title(Span::styled(" Inputs ", t.h2)),
        ),
        left,
    );
    let area = results_area(right);
    frame.render_widget(
        Block::default().title(Span::styled(" Per GPU, from the schedule ", t.h2)),
        area,
    );
    results_pane(s, t, full).render(s.scroll, "results", t, frame);
}

/// The results' area, right of the inputs (its first row is the title).
fn results_area(right: Rect) -> Rect {
    right.inner(ratatui::layout::Margin::new(1, 0))
}

/// The results laid out under their title in the screen drawn in `area`: the numbers, the
/// checks, then the link table; what does not fit scrolls (PgDn/PgUp).
fn results_pane(s: &TpCalcState, t: &Theme, area: Rect) -> crate::tui::scroll::Pane {
    let [_, body] = Layout::vertical([Constraint::Length(2), Constraint::Min(1)]).areas(area);
    let [_, right] =
        Layout::horizontal([Constraint::Length(FORM_WIDTH), Constraint::Min(20)]).areas(body);
    let area = results_area(right);
    let (main, table) = match &s.report {
        Ok(r) => result_lines(r, t, area.width as usize),
        Err(e) => (vec![Line::styled(e.to_string(), t.error)], Vec::new()),
    };
    let text = Rect {
        y: area.y + 1,
        height: area.height.saturating_sub(1),
        ..area
    };
    crate::tui::scroll::Pane::new(main.into_iter().chain(table).collect(), text)
}

impl crate::tui::screens::View for TpCalcState {
    fn update(&mut self, app: &mut App, action: Action) -> Outcome {
        update(self, app, action)
    }

    fn render(&self, app: &App, frame: &mut ratatui::Frame, area: ratatui::layout::Rect) {
        render(self, app, frame, area)
    }

    fn contexts(&self) -> Vec<crate::tui::keys::Context> {
        vec![OWN]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_moves_through_the_list_and_clamps() {
        assert_eq!(step(&TP_STEPS, 8, 1), 12);
        assert_eq!(step(&TP_STEPS, 8, -1), 7);
        assert_eq!(step(&TP_STEPS, 64, 1), 64);
        assert_eq!(step(&TP_STEPS, 1, -1), 1);
        assert_eq!(step(&TP_STEPS, 10, 1), 12, "off-list values join the list");
        assert_eq!(step(&TP_STEPS, 4, 1), 5, "5 is a step too");
    }

    #[test]
    fn unknown_model_is_an_error() {
        assert!(TpCalcState::new("gpt-9", 8, 1).is_err());
    }
}
