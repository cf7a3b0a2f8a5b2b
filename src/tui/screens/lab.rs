//! The live lab: choose a collective, algorithm, ranks, type and sizes; run real rank
//! processes over TCP; rows arrive as the ranks report them, beside a busbw-vs-size chart and
//! a per-rank phase board. Esc cancels and kills the ranks.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::symbols::Marker;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Axis, Block, Borders, Chart, Dataset, GraphType, Paragraph, Wrap};

use crate::collective::{Algorithm, Collective, Dtype};
use crate::course::block::LabBlock;
use crate::lab::bench::gpu;
use crate::lab::bench::{Collector, Pairs, Row, sizes};
use crate::lab::job::launch::{self, Launch, Msg};
use crate::lab::{Backend, Event, Job};
use crate::tui::app::{Action, App, Background, Outcome, ScreenId};
use crate::tui::error::ScreenError;
use crate::tui::form::{Form, FormModel, cycle};
use crate::units::format_bytes;

/// The course map opens this screen with `B` (its line in `screens!` names this).
pub const OPENER: crate::tui::screens::Opener = crate::tui::screens::Opener::new(
    &[crate::tui::keys::Key::Char('B')],
    "live lab (bench)",
    Some((3, "live lab")),
    |app, _| {
        let params = app
            .progress
            .lab_place
            .live
            .map(LabParams::as_offered)
            .unwrap_or_default();
        Ok(LabState::new(params).into())
    },
);

/// Sizes the min/max fields step through.
const SIZE_STEPS: [u64; 11] = [
    1 << 10,
    4 << 10,
    16 << 10,
    64 << 10,
    256 << 10,
    1 << 20,
    4 << 20,
    16 << 20,
    64 << 20,
    128 << 20,
    256 << 20,
];
const DTYPES: [Dtype; 6] = [
    Dtype::F32,
    Dtype::F64,
    Dtype::I32,
    Dtype::I64,
    Dtype::F16,
    Dtype::Bf16,
];
const MAX_LAB_RANKS: usize = crate::course::block::MAX_LAB_RANKS;

/// The live lab's fields: the type the progress file keeps them in (where the lab was left),
/// so the form and the file are one fact.
pub type LabParams = crate::study::progress::LiveFields;

impl LabParams {
    /// The fields as the progress file kept them; a size or count the form does not offer (a
    /// hand-edited file) falls back to the default's, so the form never shows what it cannot
    /// step through.
    fn as_offered(self) -> Self {
        let d = LabParams::default();
        let size = |v: u64, dflt: u64| if SIZE_STEPS.contains(&v) { v } else { dflt };
        Self {
            ranks: if (2..=MAX_LAB_RANKS).contains(&self.ranks) {
                self.ranks
            } else {
                d.ranks
            },
            minbytes: size(self.minbytes, d.minbytes),
            maxbytes: size(self.maxbytes, d.maxbytes),
            repeat: if REPEATS.contains(&self.repeat) {
                self.repeat
            } else {
                d.repeat
            },
            ..self
        }
    }
}

/// The runs per size the field steps through.
const REPEATS: [usize; 4] = [1, 3, 5, 10];

impl Default for LabParams {
    fn default() -> Self {
        Self {
            coll: Collective::AllReduce,
            algo: Algorithm::Ring,
            ranks: 2,
            dtype: Dtype::F32,
            minbytes: 1 << 10,
            maxbytes: 64 << 20,
            backend: Backend::Tcp,
            repeat: 1,
        }
    }
}

/// The lab's fields, left to right.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LabField {
    Coll,
    Algo,
    Ranks,
    Type,
    Min,
    Max,
    Runs,
    Backend,
}

impl FormModel for LabParams {
    type Field = LabField;
    const FIELDS: &'static [LabField] = &[
        LabField::Coll,
        LabField::Algo,
        LabField::Ranks,
        LabField::Type,
        LabField::Min,
        LabField::Max,
        LabField::Runs,
        LabField::Backend,
    ];

    fn label(f: LabField) -> &'static str {
        match f {
            LabField::Coll => "coll",
            LabField::Algo => "algo",
            LabField::Ranks => "ranks",
            LabField::Type => "type",
            LabField::Min => "min",
            LabField::Max => "max",
            LabField::Backend => "backend",
            LabField::Runs => "runs",
        }
    }

    fn value(&self, f: LabField) -> String {
        match f {
            LabField::Coll => self.coll.name().to_string(),
            // NCCL picks its own algorithm (NCCL_ALGO aside).
            LabField::Algo if self.backend == Backend::Nccl => "NCCL's choice".to_string(),
            LabField::Algo => self.algo.name().to_string(),
            LabField::Ranks => self.ranks.to_string(),
            LabField::Type => self.dtype.nccl_name().to_string(),
            LabField::Min => format_bytes(self.minbytes),
            LabField::Max => format_bytes(self.maxbytes),
            LabField::Backend => self.backend.name().to_string(),
            LabField::Runs => self.repeat.to_string(),
        }
    }

    fn adjust(&mut self, f: LabField, d: i32) {
        match f {
            LabField::Coll => self.coll = cycle_in(&Collective::ALL, self.coll, d),
            LabField::Algo => self.algo = cycle_in(&Algorithm::ALL, self.algo, d),
            LabField::Ranks => {
                self.ranks = (self.ranks as i32 + d).clamp(2, MAX_LAB_RANKS as i32) as usize
            }
            LabField::Type => self.dtype = cycle_in(&DTYPES, self.dtype, d),
            LabField::Min => {
                self.minbytes = step_size(self.minbytes, d);
                self.maxbytes = self.maxbytes.max(self.minbytes);
            }
            LabField::Max => {
                self.maxbytes = step_size(self.maxbytes, d);
                self.minbytes = self.minbytes.min(self.maxbytes);
            }
            LabField::Backend => {
                self.backend = cycle_in(&[Backend::Tcp, Backend::Nccl], self.backend, d)
            }
            LabField::Runs => self.repeat = crate::tui::form::step(&REPEATS, self.repeat, d),
        }
    }

    /// Every combination the fields can reach runs (min ≤ max is kept by `adjust`).
    type Error = ScreenError;

    fn validate(&mut self) -> Result<(), ScreenError> {
        Ok(())
    }
}

impl LabParams {
    pub fn from_block(b: &LabBlock) -> Result<Self, ScreenError> {
        let (coll, algo, ranks, minbytes, maxbytes) =
            b.resolve().map_err(ScreenError::block("lab"))?;
        Ok(Self {
            coll,
            algo,
            ranks,
            dtype: Dtype::F32,
            minbytes,
            maxbytes,
            backend: Backend::Tcp,
            repeat: 1,
        })
    }

    fn job(&self) -> Result<Job, ScreenError> {
        Ok(Job {
            backend: self.backend,
            repeat: self.repeat,
            ..Job::bench(
                self.coll,
                self.algo,
                self.dtype,
                sizes(self.minbytes, self.maxbytes, 4).map_err(ScreenError::Sweep)?,
            )
        })
    }
}

/// What the runner thread sends back; the id ties it to one run.
#[derive(Debug, Clone, PartialEq)]
pub enum LabUpdate {
    Msg(u64, Msg),
    /// A line to keep on screen for this run (ranks sharing a GPU).
    Note(u64, String),
    Finished(u64, Result<(), String>),
}

#[derive(Debug, Clone, PartialEq)]
pub enum RunState {
    Idle,
    Running,
    /// `wrong` is None where nothing was checked.
    Done {
        avg_busbw: f64,
        wrong: Option<u64>,
    },
    Failed(String),
    Cancelled,
}

/// One rank on the board: what it is doing and for how long.
#[derive(Debug, Clone)]
pub struct RankRow {
    pub phase: String,
    /// When the phase began.
    pub since: Instant,
    /// Once the rank is finished, cancelled or stopped: the time it shows from then on (a done
    /// rank: how long it ran; a stopped one: how long it had been in its last phase).
    pub frozen: Option<std::time::Duration>,
}

impl RankRow {
    fn new(phase: &str) -> Self {
        Self {
            phase: phase.into(),
            since: Instant::now(),
            frozen: None,
        }
    }

    /// Done ranks in the ok colour, finished-but-not-done ones (cancelled, stopped) in warning,
    /// the running ones in `running`.
    fn style(&self, t: &crate::tui::theme::Theme, running: Style) -> Style {
        match (self.phase.as_str(), self.frozen) {
            ("done", _) => t.ok,
            (_, Some(_)) => t.warn,
            _ => running,
        }
    }

    fn shown_secs(&self) -> f64 {
        self.frozen
            .unwrap_or_else(|| self.since.elapsed())
            .as_secs_f64()
    }
}

pub struct LabState {
    pub params: LabParams,
    pub form: Form,
    pub state: RunState,
    run_id: u64,
    cancel: Option<Arc<AtomicBool>>,
    collector: Option<Collector>,
    /// (out-of-place, in-place) per size, as they complete.
    pub rows: Vec<(Row, Row)>,
    pending: Pairs,
    /// Per rank: its phase and when it started.
    pub phases: Vec<RankRow>,
    pub logs: Vec<String>,
    /// What this run is not (ranks sharing one GPU are not NVLink bandwidth).
    pub note: Option<String>,
    started: Option<Instant>,
}

impl LabState {
    pub fn new(params: LabParams) -> Self {
        Self {
            params,
            form: Form::wrapping(),
            state: RunState::Idle,
            run_id: 0,
            cancel: None,
            collector: None,
            rows: Vec::new(),
            pending: Pairs::default(),
            phases: Vec::new(),
            logs: Vec::new(),
            note: None,
            started: None,
        }
    }

    pub fn running(&self) -> bool {
        self.state == RunState::Running
    }

    fn start(&mut self, app: &mut App) {
        let mut job = match self.params.job() {
            Ok(j) => j,
            Err(e) => {
                app.status = Some(e.to_string());
                return;
            }
        };
        // The lab reopens with the fields last run.
        let fields = Some(self.params);
        if app.progress.lab_place.live != fields {
            app.progress.lab_place.live = fields;
            app.save_progress();
        }
        let Some(tx) = app.bg.clone() else {
            app.status = Some("the lab needs the interactive app (no background channel)".into());
            return;
        };
        self.run_id += 1;
        let id = self.run_id;
        let cancel = Arc::new(AtomicBool::new(false));
        let mut l = Launch::single(self.params.ranks);
        l.cancel = Some(cancel.clone());
        self.cancel = Some(cancel);
        self.collector = Some(Collector::new(
            &job,
            self.params.ranks,
            self.params.ranks,
            job.backend.name(),
        ));
        self.rows.clear();
        self.pending = Pairs::default();
        self.logs.clear();
        self.note = None;
        self.phases = (0..self.params.ranks)
            .map(|_| RankRow::new(STARTING))
            .collect();
        self.state = RunState::Running;
        self.started = Some(Instant::now());
        std::thread::spawn(move || {
            // NCCL: find it and the GPUs first (in a child process), prepared as the CLI does;
            // with fewer GPUs than ranks, the ranks share them (and the screen says so).
            let prepared = if job.backend == Backend::Nccl {
                let m = gpu::machine(gpu::LoadNccl::Asked);
                let k = gpu::ranks_per_gpu_for(l.nproc_per_node, m.gpus());
                let ask = gpu::GpuAsk {
                    ranks_per_gpu: (k > 1).then_some(k),
                    algo: None,
                };
                match gpu::prepare(&mut job, &mut l, m, &ask) {
                    Ok(p) => {
                        for n in &p.notes {
                            let _ = tx.send(Background::to(
                                ScreenId::Lab,
                                LabUpdate::Note(id, n.clone()),
                            ));
                        }
                        Some(p)
                    }
                    Err(e) => {
                        let _ = tx.send(Background::to(
                            ScreenId::Lab,
                            LabUpdate::Finished(id, Err(e)),
                        ));
                        return;
                    }
                }
            } else {
                None
            };
            let r = launch::run(&job, &l, |m| {
                let _ = tx.send(Background::to(ScreenId::Lab, LabUpdate::Msg(id, m.clone())));
            });
            drop(prepared);
            let _ = tx.send(Background::to(
                ScreenId::Lab,
                LabUpdate::Finished(id, r.map_err(|e| e.to_string())),
            ));
        });
    }

    fn stop(&mut self) {
        if let Some(c) = &self.cancel {
            c.store(true, Ordering::Relaxed);
        }
    }

    /// The run is over: every rank not done says so (`cancelled in all-reduce 4 MiB`) and its
    /// clock stops.
    fn freeze(&mut self, why: &str) {
        for p in &mut self.phases {
            if p.frozen.is_none() {
                p.frozen = Some(p.since.elapsed());
                // A rank still "starting" when the job ended never ran (a refused backend).
                p.phase = if p.phase == STARTING {
                    format!("never started ({why} first)")
                } else {
                    format!("{why}: was in {}", p.phase)
                };
            }
        }
    }

    /// A report from the runner thread.
    pub fn receive(&mut self, u: LabUpdate) {
        match u {
            LabUpdate::Msg(id, _) | LabUpdate::Note(id, _) | LabUpdate::Finished(id, _)
                if id != self.run_id => {}
            LabUpdate::Note(_, n) => self.note = Some(n),
            LabUpdate::Msg(_, Msg::Event(ev)) => {
                if let Event::Phase { rank, phase } = &ev
                    && let Some(p) = self.phases.get_mut(*rank)
                    && p.frozen.is_none()
                {
                    *p = RankRow::new(&phase.to_string());
                }
                if let Event::Done { rank } = &ev
                    && let Some(p) = self.phases.get_mut(*rank)
                {
                    p.phase = "done".into();
                    p.frozen = self.started.map(|s| s.elapsed());
                }
                if let Some(pair) = self
                    .collector
                    .as_mut()
                    .and_then(|c| c.feed(&ev))
                    .and_then(|row| self.pending.push(row))
                {
                    self.rows.push(pair);
                }
            }
            LabUpdate::Msg(_, Msg::Log { rank, line }) => {
                self.logs.push(format!("[rank {rank}] {line}"));
                if self.logs.len() > 50 {
                    self.logs.remove(0);
                }
            }
            LabUpdate::Msg(_, Msg::Exit { .. }) => {}
            LabUpdate::Finished(_, r) => {
                self.cancel = None;
                let why = match (&self.state, &r) {
                    (RunState::Cancelled, _) => "cancelled",
                    // The job failed (not a process stopped, as ps's T means).
                    (_, Err(_)) => "the job failed",
                    _ => "ended",
                };
                self.freeze(why);
                self.state = match r {
                    _ if self.state == RunState::Cancelled => RunState::Cancelled,
                    Ok(()) => {
                        let s = self.collector.as_ref().map(Collector::summary);
                        RunState::Done {
                            avg_busbw: s.as_ref().map_or(0.0, |s| s.avg_busbw_gbps),
                            wrong: s.and_then(|s| s.wrong_total),
                        }
                    }
                    Err(e) => RunState::Failed(e),
                };
            }
        }
    }
}

/// The value after (d > 0) or before `cur` in `all`, wrapping.
fn cycle_in<T: Copy + PartialEq>(all: &[T], cur: T, d: i32) -> T {
    let i = all.iter().position(|&x| x == cur).unwrap_or(0);
    all[cycle(i, all.len(), d)]
}

fn step_size(cur: u64, d: i32) -> u64 {
    let i = SIZE_STEPS
        .iter()
        .position(|&s| s >= cur)
        .unwrap_or(SIZE_STEPS.len() - 1) as i32;
    SIZE_STEPS[(i + d).clamp(0, SIZE_STEPS.len() as i32 - 1) as usize]
}

pub fn update(s: &mut LabState, app: &mut App, action: Action) -> Outcome {
    match action {
        Action::Move(_) | Action::Adjust(_) if !s.running() => {
            if let Some(e) = s.form.update(&mut s.params, action) {
                app.status = Some(e);
            }
            // A changed field starts a new setup: the last run's verdict (cancelled, done,
            // failed) no longer describes it; its rows stay until the next run.
            if matches!(action, Action::Adjust(_)) {
                s.state = RunState::Idle;
            }
        }
        Action::Open if !s.running() => s.start(app),
        Action::Open => app.status = Some("already running: Esc cancels".into()),
        Action::Back if s.running() => {
            s.stop();
            s.state = RunState::Cancelled;
            s.freeze("cancelled");
            app.status = Some("cancelled: the ranks were killed".into());
        }
        Action::Back => return Outcome::Pop,
        Action::Quit => s.stop(),
        _ => {}
    }
    Outcome::Stay
}

/// The parameters, the focused one marked with ▶ and reverse video; they wrap at a field's
/// boundary, so every field (the backend too) stays on screen at 80 columns.
fn field_lines(s: &LabState, t: &crate::tui::theme::Theme, width: u16) -> Vec<Vec<Span<'static>>> {
    let mut field_lines: Vec<Vec<Span<'static>>> = vec![vec![Span::styled(" Live lab ", t.title)]];
    for (i, &f) in LabParams::FIELDS.iter().enumerate() {
        let (name, v) = (LabParams::label(f), s.params.value(f));
        let focus = i == s.form.focus && !s.running();
        let pair = [
            Span::styled(format!("{}{name}: ", if focus { "▶" } else { " " }), t.dim),
            Span::styled(format!(" {v} "), if focus { t.selection } else { t.strong }),
        ];
        let w: usize = pair.iter().map(|s| s.width()).sum();
        let line_w = |l: &Vec<Span<'static>>| l.iter().map(|s| s.width()).sum::<usize>();
        if field_lines
            .last()
            .is_some_and(|l| line_w(l) + w > width as usize)
        {
            field_lines.push(vec![Span::raw("          ")]);
        }
        if let Some(l) = field_lines.last_mut() {
            l.extend(pair);
        }
    }
    field_lines
}

/// The run's state under the parameters: how to start, the time running, the verdict.
fn status_span(s: &LabState, t: &crate::tui::theme::Theme, width: u16) -> Span<'static> {
    match &s.state {
        RunState::Idle => Span::styled(" Enter runs · ↑↓ choose a field · ←→ change it", t.dim),
        RunState::Running => Span::styled(
            format!(
                " running… {:.1} s · Esc cancels",
                s.started.map_or(0.0, |x| x.elapsed().as_secs_f64())
            ),
            t.accent,
        ),
        RunState::Done { avg_busbw, wrong } => Span::styled(
            match wrong {
                Some(0) => format!(" done: avg busbw {avg_busbw:.3} GB/s · #wrong 0 ✓"),
                Some(w) => format!(" done: avg busbw {avg_busbw:.3} GB/s · #wrong {w} ✗"),
                None => format!(" done: avg busbw {avg_busbw:.3} GB/s · results not checked"),
            },
            if wrong.unwrap_or(0) == 0 {
                t.ok
            } else {
                t.error
            },
        ),
        // One row: cut at a word with "m: whole" when longer (the whole error is in `m`).
        RunState::Failed(e) => {
            let line = format!(" ✗ {}", e.lines().next().unwrap_or(""));
            let w = usize::from(width);
            Span::styled(
                if unicode_width::UnicodeWidthStr::width(line.as_str()) <= w {
                    line
                } else {
                    let rows: Vec<&'static Binding> = KEYS.iter().collect();
                    let tail = format!("  {}: whole", crate::tui::keys::messages_key(&rows).name());
                    format!(
                        "{}{tail}",
                        crate::tui::markdown::ellipsize(&line, w.saturating_sub(tail.len()))
                    )
                },
                t.error,
            )
        }
        RunState::Cancelled => Span::styled(" cancelled", t.warn),
    }
}

pub fn render(s: &LabState, app: &App, frame: &mut Frame, area: Rect) {
    let t = &app.theme;
    // In front of a class: the chart fills the middle and the board is set large.
    let class = app.presenting();
    let board_h = if class {
        (s.params.ranks as u16 * crate::tui::bigboard::GLYPH_H + 1).min(area.height / 2)
    } else {
        (s.params.ranks as u16 + 2).min(10)
    };
    let field_lines = field_lines(s, t, area.width);
    let head_h = field_lines.len() as u16 + 2;
    let [head, mid, board] = Layout::vertical([
        Constraint::Length(head_h),
        Constraint::Min(6),
        Constraint::Length(board_h),
    ])
    .areas(area);
    let status = status_span(s, t, area.width);
    let mut head_lines: Vec<Line> = field_lines.into_iter().map(Line::from).collect();
    head_lines.push(Line::from(status));
    frame.render_widget(Paragraph::new(head_lines), head);
    let board_title = match s.collector.as_ref().and_then(|c| c.transport()) {
        // How the ranks' bytes travel, as they reported it.
        Some(tr) => format!(" ranks · transport {tr} "),
        None => " ranks ".to_string(),
    };
    if class {
        render_chart(s, app, frame, mid);
        let block = Block::default()
            .borders(Borders::TOP)
            .border_style(t.border)
            .title(Span::styled(board_title, t.h2));
        let inner = block.inner(board);
        frame.render_widget(block, board);
        crate::tui::bigboard::render(frame, inner, &big_rows(s, t));
        return;
    }
    // A column between them, so the chart's y labels do not read as a table column.
    let [table, chart] = Layout::horizontal([Constraint::Length(TABLE_WIDTH), Constraint::Min(20)])
        .spacing(1)
        .areas(mid);
    frame.render_widget(
        Paragraph::new(crate::tui::markdown::keep_indent(
            table_lines(s, t),
            usize::from(table.width),
        ))
        .wrap(Wrap { trim: false })
        .block(
            Block::default()
                .borders(Borders::TOP)
                .border_style(t.border)
                // The halves' names in their chart lines' colours: the table heads the legend.
                .title(Line::from(vec![
                    Span::styled(" ", t.h2),
                    Span::styled("out-of-place", chart_styles(t).0.patch(t.h2)),
                    Span::styled(" | ", t.h2),
                    Span::styled("in-place", chart_styles(t).1.patch(t.h2)),
                    Span::styled(", as nccl-tests ", t.h2),
                ])),
        ),
        table,
    );
    render_chart(s, app, frame, chart);
    frame.render_widget(
        Paragraph::new(board_lines(s, t)).block(
            Block::default()
                .borders(Borders::TOP)
                .border_style(t.border)
                .title(Span::styled(board_title, t.h2)),
        ),
        board,
    );
}

/// Columns the table needs: size, then time, busbw and #wrong out of place and in place (49),
/// and one column of space before the chart's axis.
const TABLE_WIDTH: u16 = 50;

fn table_lines(s: &LabState, t: &crate::tui::theme::Theme) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    if let Some(n) = &s.note {
        out.push(Line::styled(n.clone(), t.warn));
    }
    // nccl-tests' column order: out-of-place first, then in-place; algbw is in the CLI table.
    out.push(Line::styled(
        format!(
            "{:>9} {:>8} {:>6} {:>2} │ {:>8} {:>6} {:>2}",
            "size", "time us", "busbw", "#w", "time us", "busbw", "#w"
        ),
        t.strong,
    ));
    for (o, i) in &s.rows {
        let shown = |w: Option<u64>| w.map_or("-".to_string(), |w| w.to_string());
        let style = if o.wrong.unwrap_or(0) + i.wrong.unwrap_or(0) == 0 {
            t.base
        } else {
            t.error
        };
        out.push(Line::styled(
            format!(
                "{:>9} {:>8.1} {:>6.2} {:>2} │ {:>8.1} {:>6.2} {:>2}",
                format_bytes(o.size),
                o.time_us,
                o.busbw_gbps,
                shown(o.wrong),
                i.time_us,
                i.busbw_gbps,
                shown(i.wrong)
            ),
            style,
        ));
    }
    if s.rows.is_empty() && s.running() {
        out.push(Line::styled("  waiting for the first size…", t.dim));
    }
    out.extend(spread_lines(s, t));
    out
}

/// Under rows timed several times: how many sizes spread too wide to read (a busy machine),
/// as `bench -R` says it; with one run a size, that one run is all there is.
fn spread_lines(s: &LabState, t: &crate::tui::theme::Theme) -> Vec<Line<'static>> {
    use crate::lab::bench::measure::WIDE_SPREAD;
    let runs = s.params.repeat;
    if s.rows.is_empty() {
        return Vec::new();
    }
    if runs < 2 {
        return vec![Line::styled(
            " one run a size: the runs field gives medians and their spread",
            t.dim,
        )];
    }
    let wide = s
        .rows
        .iter()
        .filter(|(o, i)| {
            [o.spread, i.spread]
                .iter()
                .any(|x| x.is_some_and(|x| x > WIDE_SPREAD))
        })
        .count();
    if wide == 0 {
        return vec![Line::styled(
            format!(" medians of {runs} runs a size"),
            t.dim,
        )];
    }
    vec![Line::styled(
        format!(
            " ! medians of {runs} runs; at {} the runs spread over {:.0}%: too wide to read, this machine is busy; compare medians, or run again",
            crate::units::count(wide, "size"),
            WIDE_SPREAD * 100.0
        ),
        t.warn,
    )]
}

/// The out-of-place and in-place lines' styles: told apart by colour, and without colour by
/// their marks (braille, dots).
fn chart_styles(t: &crate::tui::theme::Theme) -> (Style, Style) {
    if t.mono {
        (Style::new(), Style::new())
    } else {
        (t.accent, t.ok)
    }
}

fn render_chart(s: &LabState, app: &App, frame: &mut Frame, area: Rect) {
    let t = &app.theme;
    // No axis before there is a point to put on it.
    if !s
        .rows
        .iter()
        .any(|(o, i)| o.busbw_gbps.is_finite() || i.busbw_gbps.is_finite())
    {
        frame.render_widget(empty_chart(t), area);
        return;
    }
    // Both placements, as the table has them (N/A rows, NaN, are left out).
    let pts = |in_place: bool| -> Vec<(f64, f64)> {
        s.rows
            .iter()
            .map(|(o, i)| if in_place { i } else { o })
            .filter(|r| r.busbw_gbps.is_finite())
            .map(|r| ((r.size as f64).log2(), r.busbw_gbps))
            .collect()
    };
    let (out_pts, in_pts) = (pts(false), pts(true));
    let (x0, x1) = (
        (s.params.minbytes as f64).log2(),
        (s.params.maxbytes as f64)
            .log2()
            .max((s.params.minbytes as f64).log2() + 1.0),
    );
    let ymax = out_pts
        .iter()
        .chain(&in_pts)
        .map(|p| p.1)
        .fold(0.1, f64::max)
        * 1.15;
    let (out_style, in_style) = chart_styles(t);
    let data = [
        Dataset::default()
            .name("out-of-place")
            .marker(Marker::Braille)
            .graph_type(GraphType::Line)
            .style(out_style)
            .data(&out_pts),
        Dataset::default()
            .name("in-place")
            .marker(if t.mono { Marker::Dot } else { Marker::Braille })
            .graph_type(GraphType::Line)
            .style(in_style)
            .data(&in_pts),
    ];
    let lbl = |v: f64| Span::styled(format_bytes(v.exp2().round() as u64), t.dim);
    // ratatui shows the legend box (its longest name and a border each side, two rows and a
    // border each side) when it is at most a third of the chart's width and half its height;
    // this asks for a margin over that, so that a chart has the box or the title's legend.
    let legend_w = "out-of-place".len() as u16 + 2;
    let legend_fits = area.width >= 3 * legend_w + 12 && area.height >= 14;
    let chart = Chart::new(data.to_vec())
        .block(
            Block::default()
                .borders(Borders::TOP)
                .border_style(t.border)
                .title(Line::styled(
                    match (t.mono, legend_fits) {
                        (false, true) => " busbw (GB/s) vs size (log) ",
                        // The table's header names the halves in these lines' colours.
                        (false, false) => " busbw (GB/s) ",
                        // Without colour the marks tell the lines apart; the box cannot.
                        (true, true) => " busbw (GB/s) vs size (log): ⣿ out-of-place  • in-place ",
                        (true, false) => " busbw: ⣿ out • in ",
                    },
                    t.h2,
                )),
        )
        .x_axis(Axis::default().bounds([x0, x1]).labels(vec![
            lbl(x0),
            lbl((x0 + x1) / 2.0),
            lbl(x1),
        ]))
        .y_axis(Axis::default().bounds([0.0, ymax]).labels(vec![
            Span::styled("0", t.dim),
            Span::styled(format!("{:.2}", ymax / 2.0), t.dim),
            Span::styled(format!("{ymax:.2}"), t.dim),
        ]))
        // The legend box only where it covers at most a third of the plot's width and half
        // its height; a narrow chart (80 columns) would draw its lines through it. Then the
        // title says which line is which: the table's header has the same colours, and
        // without colour the marks tell them apart.
        .legend_position(
            (legend_fits && !t.mono).then_some(ratatui::widgets::LegendPosition::TopLeft),
        )
        .hidden_legend_constraints((Constraint::Ratio(1, 3), Constraint::Ratio(1, 2)));
    frame.render_widget(chart, area);
}

/// The chart's place before its first row: what will be drawn there.
fn empty_chart(t: &crate::tui::theme::Theme) -> Paragraph<'static> {
    Paragraph::new(Line::styled(
        " busbw (GB/s) vs size: drawn as the rows come in",
        t.dim,
    ))
    .wrap(ratatui::widgets::Wrap { trim: true })
    .block(
        Block::default()
            .borders(Borders::TOP)
            .border_style(t.border),
    )
}

/// The board in large type: "R0 done 1.2s", one row per rank.
fn big_rows(s: &LabState, t: &crate::tui::theme::Theme) -> Vec<(String, Style)> {
    s.phases
        .iter()
        .enumerate()
        .map(|(r, p)| {
            (
                format!("R{r} {} {:.1}s", p.phase, p.shown_secs()),
                p.style(t, t.strong),
            )
        })
        .collect()
}

fn board_lines(s: &LabState, t: &crate::tui::theme::Theme) -> Vec<Line<'static>> {
    let mut out: Vec<Line> = s
        .phases
        .iter()
        .enumerate()
        .map(|(r, p)| {
            let style = p.style(t, t.base);
            Line::from(vec![
                Span::styled(format!(" rank {r:<2} "), t.strong),
                Span::styled(format!("{:<48}", p.phase), style),
                Span::styled(format!(" {:>6.1} s", p.shown_secs()), t.dim),
            ])
        })
        .collect();
    if let Some(l) = s.logs.last() {
        out.push(Line::styled(format!(" {l}"), t.dim));
    }
    if out.is_empty() {
        out.push(Line::styled(
            " no run yet: each rank will be a process of its own (rendezvous: a store)",
            t.dim,
        ));
    }
    out
}

/// A rank's row before its first phase arrives.
const STARTING: &str = "starting";

const LAB: crate::tui::keys::Context = crate::tui::keys::Context::Own("Live lab");
/// While ranks run, q and Esc cancel the run (they do not leave the screen).
const RUNNING: crate::tui::keys::Context = crate::tui::keys::Context::Own("Live lab, running");

use crate::tui::keys::{Binding, DOWN, Key, NEXT_VALUE, PREV_VALUE, UP, bind};
use crossterm::event::KeyCode;

#[rustfmt::skip]
pub const KEYS: &[Binding] = &[
    bind(LAB, &[Key::Code(KeyCode::Enter), Key::Char('r')], "run on real processes", Action::Open, Some((1, "run on real processes"))),
    bind(LAB, DOWN, "choose a field", Action::Move(1), Some((1, "choose a field"))),
    bind(LAB, UP, "previous field", Action::Move(-1), None),
    bind(LAB, NEXT_VALUE, "change the value", Action::Adjust(1), Some((1, "change the value"))),
    bind(LAB, PREV_VALUE, "previous value", Action::Adjust(-1), None),
    bind(RUNNING, &[Key::Char('q'), Key::Code(KeyCode::Esc)], "cancel the run (the ranks are killed)", Action::Back, Some((1, "cancel the run"))),
];

// The screen registry's view of the live lab (see screens/mod.rs).
impl crate::tui::screens::View for LabState {
    fn update(&mut self, app: &mut App, action: Action) -> Outcome {
        update(self, app, action)
    }

    fn render(&self, app: &App, frame: &mut ratatui::Frame, area: ratatui::layout::Rect) {
        render(self, app, frame, area)
    }

    fn contexts(&self) -> Vec<crate::tui::keys::Context> {
        if self.running() {
            vec![RUNNING]
        } else {
            vec![LAB]
        }
    }

    fn help_contexts(&self) -> Vec<crate::tui::keys::Context> {
        if self.running() {
            vec![RUNNING, LAB]
        } else {
            vec![LAB]
        }
    }

    // Elapsed times on the phase board move while ranks run.
    fn tick(&self, _app: &App) -> Option<std::time::Duration> {
        self.running()
            .then(|| std::time::Duration::from_millis(250))
    }

    fn receive(&mut self, msg: &dyn std::any::Any, app: &mut App) {
        if let Some(u) = msg.downcast_ref::<LabUpdate>() {
            LabState::receive(self, u.clone());
            // The whole error goes with the messages (`m`): the header has one row for it.
            if let (LabUpdate::Finished(..), RunState::Failed(e)) = (u, &self.state) {
                app.status = Some(e.split_whitespace().collect::<Vec<_>>().join(" "));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::bench::Row;
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;

    /// Fields kept in the progress file that the form cannot step to (a hand edit) reopen as
    /// the default's; the rest as they were.
    #[test]
    fn kept_fields_the_form_does_not_offer_fall_back() {
        let kept = LabParams {
            coll: Collective::AllGather,
            ranks: 999,
            minbytes: 12345,
            maxbytes: 1 << 20,
            repeat: 7,
            ..LabParams::default()
        };
        let d = LabParams::default();
        let open = kept.as_offered();
        assert_eq!(open.coll, Collective::AllGather);
        assert_eq!(open.maxbytes, 1 << 20);
        assert_eq!(
            (open.ranks, open.minbytes, open.repeat),
            (d.ranks, d.minbytes, d.repeat)
        );
        assert_eq!(d.as_offered(), d);
    }

    #[test]
    fn the_screen_runs_what_bench_runs_with_no_flags() {
        use clap::Parser;
        let cli = crate::cli::Cli::try_parse_from(["ringlab", "bench"]).expect("parse");
        let Some(crate::cli::Command::Bench(args)) = cli.command else {
            panic!("not bench");
        };
        let screen = LabParams {
            coll: Collective::AllReduce,
            algo: Algorithm::Ring,
            ranks: 2,
            dtype: Dtype::F32,
            minbytes: 1024,
            maxbytes: 4096,
            backend: Backend::Tcp,
            repeat: 3,
        }
        .job()
        .expect("job");
        assert_eq!(screen.iters as u64, args.iters, "nccl-tests' -n 20");
        // The runs field is the CLI's -R.
        assert_eq!(screen.repeat, 3);
        assert_eq!(screen.warmup as u64, args.warmup, "nccl-tests' -w 1");
        assert_eq!(screen.op, args.op);
        assert_eq!(screen.check, args.check == 1);
    }

    fn row(in_place: bool, time_us: f64, busbw: f64, wrong: Option<u64>) -> Row {
        Row {
            coll: Collective::AllReduce,
            backend: "tcp",
            algo: "ring".into(),
            ranks: 2,
            size: 1 << 20,
            count: 1 << 18,
            dtype: "float",
            redop: "sum",
            root: -1,
            in_place,
            time_us,
            algbw_gbps: busbw,
            busbw_gbps: busbw,
            wrong,
            transport: Some(crate::comm::cpu::tcp::Transports::only(
                crate::comm::cpu::tcp::Transport::Shm,
            )),
            shared_gpu: false,
            spread: None,
        }
    }

    fn screen(s: &LabState, app: &App) -> String {
        let mut term = Terminal::new(TestBackend::new(80, 24)).expect("terminal");
        term.draw(|f| render(s, app, f, f.area())).expect("draw");
        format!("{}", term.backend())
    }

    fn app() -> App {
        App::new(
            crate::course::Course::embedded(),
            crate::tui::theme::Theme::color(),
        )
    }

    #[test]
    fn the_table_puts_out_of_place_first_as_nccl_tests_does() {
        let app = app();
        let mut s = LabState::new(LabParams::default());
        s.rows.push((
            row(false, 111.0, 7.25, Some(0)),
            row(true, 222.0, 3.5, Some(1)),
        ));
        let text = screen(&s, &app);
        assert!(text.contains("out-of-place | in-place"), "{text}");
        let line = text
            .lines()
            .find(|l| l.contains("1 MiB"))
            .unwrap_or_else(|| panic!("no row:\n{text}"));
        let (oop, inp) = line.split_once('│').expect("two halves");
        assert!(oop.contains("111.0") && oop.contains("7.25"), "{line}");
        assert!(inp.contains("222.0") && inp.contains("3.50"), "{line}");
    }

    /// The ranks say how their bytes travel; the table's title shows it.
    #[test]
    fn the_table_names_the_transport_the_ranks_report() {
        let app = app();
        let mut s = LabState::new(LabParams::default());
        s.collector = Some(Collector::new(&crate::lab::Job::sanity(), 2, 2, "tcp"));
        assert!(!screen(&s, &app).contains("transport"));
        for rank in 0..2 {
            s.receive(LabUpdate::Msg(
                0,
                Msg::Event(Event::Transport {
                    rank,
                    transport: crate::comm::cpu::tcp::Transports::only(
                        crate::comm::cpu::tcp::Transport::Shm,
                    ),
                }),
            ));
        }
        let text = screen(&s, &app);
        assert!(text.contains("transport SHM"), "{text}");
    }

    /// A failure longer than the header's row is cut with the key that shows it whole, and
    /// the whole error is with the messages (M8: "no NVIDIA driver here: libcuda.s").
    #[test]
    fn a_long_failure_is_cut_with_a_way_to_read_it() {
        let mut app = app();
        let mut s = LabState::new(LabParams::default());
        s.state = RunState::Running;
        let e = "lab run --backend nccl: the nccl backend needs GPUs and NCCL: no NVIDIA driver \
                 here: libcuda.so.1 cannot be loaded (ringlab doctor says what it found)";
        crate::tui::screens::View::receive(
            &mut s,
            &LabUpdate::Finished(0, Err(e.to_string())),
            &mut app,
        );
        let text = screen(&s, &app);
        assert!(text.contains("…  m: whole"), "{text}");
        assert!(
            app.status
                .as_deref()
                .is_some_and(|m| m.ends_with("says what it found)")),
            "{:?}",
            app.status
        );
    }

    /// Sizes timed several times show medians; a spread too wide to read says the machine is
    /// busy, as `bench -R` does (M12).
    #[test]
    fn a_wide_spread_over_several_runs_says_the_machine_is_busy() {
        let app = app();
        let mut s = LabState::new(LabParams {
            repeat: 5,
            ..LabParams::default()
        });
        let (mut o, mut i) = (
            row(false, 10.0, 1.0, Some(0)),
            row(true, 10.0, 1.0, Some(0)),
        );
        o.spread = Some(0.1);
        i.spread = Some(0.1);
        s.rows.push((o.clone(), i.clone()));
        let calm = screen(&s, &app);
        assert!(calm.contains("medians of 5 runs a size"), "{calm}");
        i.spread = Some(2.4);
        s.rows.push((o, i));
        let busy = screen(&s, &app);
        assert!(busy.contains("at 1 size the runs spread"), "{busy}");
        assert!(busy.contains("busy; compare medians"), "{busy}");
    }

    /// A refused job (no GPU for the nccl backend) says its ranks never started, not that
    /// they "stopped"; before any row the chart draws no axis (L24).
    #[test]
    fn a_refused_job_says_its_ranks_never_started_and_no_axis_without_data() {
        let app = app();
        let mut s = LabState::new(LabParams::default());
        let text = screen(&s, &app);
        assert!(text.contains("as the rows come in"), "{text}");
        assert!(!text.contains("0.06"), "no axis yet: {text}");
        s.state = RunState::Running;
        s.phases = vec![RankRow::new(STARTING), RankRow::new("connect")];
        s.receive(LabUpdate::Finished(0, Err("no GPU".into())));
        assert_eq!(s.phases[0].phase, "never started (the job failed first)");
        assert_eq!(s.phases[1].phase, "the job failed: was in connect");
    }

    #[test]
    fn after_esc_the_board_says_cancelled_and_done_ranks_show_their_time() {
        let mut app = app();
        let mut s = LabState::new(LabParams::default());
        s.state = RunState::Running;
        s.started = Some(Instant::now() - std::time::Duration::from_secs(3));
        s.phases = vec![RankRow::new("starting"), RankRow::new("all-reduce 1 MiB")];
        s.receive(LabUpdate::Msg(0, Msg::Event(Event::Done { rank: 0 })));
        update(&mut s, &mut app, Action::Back);
        assert_eq!(s.state, RunState::Cancelled);
        assert_eq!(s.phases[0].phase, "done");
        assert!(
            s.phases[0].shown_secs() >= 3.0,
            "a done rank shows how long it ran, not 0.0 s"
        );
        assert_eq!(s.phases[1].phase, "cancelled: was in all-reduce 1 MiB");
        let text = screen(&s, &app);
        assert!(
            text.contains("cancelled: was in all-reduce 1 MiB"),
            "{text}"
        );
        assert!(!text.contains("running…"), "{text}");
        // The runner's own report afterwards changes nothing.
        s.receive(LabUpdate::Finished(0, Ok(())));
        assert_eq!(s.state, RunState::Cancelled);
        assert_eq!(s.phases[1].phase, "cancelled: was in all-reduce 1 MiB");
    }
}
