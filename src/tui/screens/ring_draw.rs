//! Drawing the ring view: the ring (Canvas) with this step's transfers as arrows, each rank's
//! buffer as chunk cells, bytes-sent counters converging to their final value, and ring vs
//! naive vs tree on the same N and M. Below 100x32 it falls back to a compact table.

use std::f64::consts::PI;

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Style};
use ratatui::symbols::Marker;
use ratatui::text::{Line, Span};
use ratatui::widgets::canvas::{Canvas, Circle, Line as CLine};
use ratatui::widgets::{Block, Borders, Paragraph};

use super::ring::{MAX_DRAWN, RingState, topology_label};
use crate::collective::{Collective, ring_allreduce_bytes_per_rank};
use crate::tui::app::App;
use crate::tui::theme::Theme;
use crate::units::{format_bytes, format_seconds};

/// Colours for ranks' own data (the symbol, a rank digit, carries the meaning without colour).
const RANK_COLORS: [Color; 8] = [
    Color::LightBlue,
    Color::LightGreen,
    Color::LightMagenta,
    Color::LightYellow,
    Color::LightCyan,
    Color::LightRed,
    Color::Blue,
    Color::Green,
];

pub fn render(s: &RingState, app: &App, frame: &mut Frame, area: Rect) {
    let t = &app.theme;
    // `area` is the body above the hint bar: a 100x32 terminal gives it 31 rows and still
    // draws the ring (the README: "below 100x32 it becomes a compact table").
    let compact = area.width < 100 || area.height < 31 || s.params.ranks > MAX_DRAWN;
    // Two header lines, one row per algorithm that has a schedule here, what ◀ marks and
    // the fastest, and the link's note.
    let cmp_h = 4 + s.compare.len().max(3) as u16;
    // Narrated (presenter mode): the caption below the header, every row of it (a wrapped
    // row goes on under its first word, not at column 0), at least two.
    let caption = if s.narrate {
        crate::tui::markdown::keep_indent(
            vec![Line::from(Span::styled(
                format!(" {}", s.caption),
                t.strong,
            ))],
            area.width as usize,
        )
    } else {
        Vec::new()
    };
    let head_h = if s.narrate {
        4 + caption.len().max(2) as u16
    } else {
        3
    };
    let [head, body, cmp] = Layout::vertical([
        Constraint::Length(head_h),
        Constraint::Min(3),
        Constraint::Length(cmp_h),
    ])
    .areas(area);
    let mut head_lines = header(s, t, area.width as usize);
    // Who sends what in this step: the compact table has no ring to draw it on, and a dense
    // step (all-to-all) draws its chords without labels.
    head_lines.push(match &s.typing {
        Some(field) => {
            let mut spans = vec![Span::styled(" message size> ", t.strong)];
            spans.extend(field.spans(t.strong, t.accent));
            spans.push(Span::styled("  Enter sets it · Esc cancels", t.dim));
            Line::from(spans)
        }
        None => step_line(s, t, area.width as usize),
    });
    if s.narrate {
        head_lines.push(Line::raw(""));
        head_lines.extend(caption);
    }
    let head_par = Paragraph::new(head_lines);
    let head_par = if s.narrate {
        head_par.wrap(ratatui::widgets::Wrap { trim: false })
    } else {
        head_par
    };
    frame.render_widget(head_par, head);
    if compact {
        frame.render_widget(
            Paragraph::new(table_lines(s, t, body.height as usize)),
            body,
        );
    } else {
        let [left, right] =
            Layout::horizontal([Constraint::Percentage(42), Constraint::Percentage(58)])
                .areas(body);
        render_ring(s, t, frame, left);
        frame.render_widget(
            Paragraph::new(panel_lines(s, t, right.height as usize)).block(
                Block::default()
                    .borders(Borders::LEFT)
                    .border_style(t.border),
            ),
            right,
        );
    }
    frame.render_widget(Paragraph::new(compare_lines(s, t)), cmp);
}

/// A chunk range as the ring labels it: `c3`, `c0-2`, or `all`.
fn chunk_label(s: &RingState, tr: &crate::collective::Transfer) -> String {
    let n = s.params.ranks;
    let chunks = s.schedule.chunks_of(tr);
    if chunks.len() == n {
        "all".to_string()
    } else if chunks.len() == 1 {
        format!("c{}", chunks.start)
    } else {
        format!("c{}-{}", chunks.start, chunks.end.saturating_sub(1))
    }
}

/// The step the view shows: the one just applied (live), or before the first, the first.
fn shown_step(s: &RingState) -> (&[crate::collective::Transfer], bool) {
    let (idx, live) = if s.step == 0 {
        (0, false)
    } else {
        (s.step - 1, true)
    };
    let transfers = s
        .schedule
        .steps()
        .get(idx)
        .map_or(&[][..], |st| st.transfers.as_slice());
    (transfers, live)
}

/// "step 2: R0→R1 c3 · R1→R2 c0 · … (+5 more)": the transfers of the step just applied (or
/// the first, before it), cut to `width` with the count of those left out.
fn step_line(s: &RingState, t: &Theme, width: usize) -> Line<'static> {
    let (transfers, live) = shown_step(s);
    let mut text = if live {
        format!(" step {}:", s.step)
    } else {
        " first step:".to_string()
    };
    for (k, tr) in transfers.iter().enumerate() {
        let sep = if k == 0 { " " } else { " · " };
        let item = format!("{sep}R{}→R{} {}", tr.src, tr.dst, chunk_label(s, tr));
        let rest = transfers.len() - k;
        let tail = format!(" … (+{rest} more)");
        if text.chars().count() + item.chars().count() + tail.chars().count() > width
            && rest > 0
            && k > 0
        {
            text.push_str(&tail);
            return Line::styled(text, t.dim);
        }
        text.push_str(&item);
    }
    if transfers.is_empty() {
        text.push_str(" nothing moves");
    }
    Line::styled(text, t.dim)
}

fn header(s: &RingState, t: &Theme, width: usize) -> Vec<Line<'static>> {
    let phase = s.phase_text();
    // "▶ playing (700 ms/step)" where the row has room for it after the phase, else the
    // short "▶ 700 ms/step": the row is never cut.
    let long = format!("▶ playing ({} ms/step)", s.tick_ms());
    let fits = |x: &str| {
        unicode_width::UnicodeWidthStr::width(format!(" {phase}   {x}").as_str()) <= width
    };
    let state = if s.playing && fits(&long) {
        long
    } else if s.playing {
        format!("▶ {} ms/step", s.tick_ms())
    } else if s.at_end() {
        "■ done".to_string()
    } else {
        "‖ paused".to_string()
    };
    vec![
        Line::from(vec![Span::styled(
            format!(" {}", s.title_within(width.saturating_sub(1))),
            t.title,
        )]),
        Line::from(vec![
            Span::styled(format!(" {phase}"), t.accent),
            Span::styled(format!("   {state}"), t.dim),
        ]),
    ]
}

/// Position of rank r of n on a unit circle, rank 0 at the top, clockwise.
fn pos(r: usize, n: usize) -> (f64, f64) {
    let a = PI / 2.0 - 2.0 * PI * r as f64 / n as f64;
    (a.cos(), a.sin())
}

fn arrow(dx: f64, dy: f64) -> &'static str {
    let a = dy.atan2(dx).to_degrees();
    const DIRS: [&str; 8] = ["→", "↗", "↑", "↖", "←", "↙", "↓", "↘"];
    DIRS[(((a + 360.0 + 22.5) % 360.0) / 45.0) as usize % 8]
}

fn render_ring(s: &RingState, t: &Theme, frame: &mut Frame, area: Rect) {
    let n = s.params.ranks;
    let (transfers, live) = shown_step(s);
    let line_color = if t.mono {
        Color::Reset
    } else if live {
        Color::Yellow
    } else {
        Color::DarkGray
    };
    let label_style = if live { t.warn } else { t.dim };
    let node_style = t.strong;
    // Chunk labels only where they do not pile up: a chord through the middle of the circle
    // (all-to-all's "shift by N/2", a naive hub's spokes) would print its label over the
    // others' ("c103"); the step line under the header lists every transfer anyway.
    let label_each = transfers.len() <= n;
    let canvas = Canvas::default()
        .block(Block::default().title(Span::styled(" ring ", t.h2)))
        .marker(Marker::Braille)
        .x_bounds([-1.4, 1.4])
        .y_bounds([-1.3, 1.3])
        .paint(move |ctx| {
            ctx.draw(&Circle {
                x: 0.0,
                y: 0.0,
                radius: 1.0,
                color: if t.mono {
                    Color::Reset
                } else {
                    Color::DarkGray
                },
            });
            ctx.layer();
            for tr in transfers.iter().take(64) {
                let (x1, y1) = pos(tr.src as usize, n);
                let (x2, y2) = pos(tr.dst as usize, n);
                let (sx, sy) = (x1 + (x2 - x1) * 0.18, y1 + (y2 - y1) * 0.18);
                let (ex, ey) = (x1 + (x2 - x1) * 0.78, y1 + (y2 - y1) * 0.78);
                ctx.draw(&CLine {
                    x1: sx,
                    y1: sy,
                    x2: ex,
                    y2: ey,
                    color: line_color,
                });
                ctx.print(ex, ey, Span::styled(arrow(x2 - x1, y2 - y1), label_style));
                let (mx, my) = ((sx + ex) / 2.0 * 0.8, (sy + ey) / 2.0 * 0.8);
                if label_each && mx.hypot(my) > 0.3 {
                    let label = chunk_label(s, tr);
                    ctx.print(mx, my, Span::styled(label, label_style));
                }
            }
            ctx.layer();
            // One terminal cell in canvas units: a label is printed from its left edge, so a
            // label left of the circle ends a cell short of it, and one on the axis is centred.
            let cell = 2.8 / f64::from(area.width.max(1));
            for r in 0..n {
                let (x, y) = pos(r, n);
                let label = format!("R{r}");
                let w = label.chars().count() as f64 * cell;
                let lx = if x < -0.2 {
                    x * 1.1 - w - cell
                } else if x > 0.2 {
                    x * 1.1 + cell
                } else {
                    x - w / 2.0
                };
                ctx.print(lx, y * 1.14, Span::styled(label, node_style));
            }
        });
    frame.render_widget(canvas, area);
}

/// One cell of a rank's buffer: `·` nothing yet, a rank digit for one rank's data, `Σk` for a
/// partial sum of k ranks, `all` when it holds every rank's data.
fn cell(s: &RingState, t: &Theme, rank: usize, chunk: usize) -> Span<'static> {
    let Some(c) = &s.contrib else {
        return Span::raw("   ");
    };
    let n = s.params.ranks;
    let k = c.count(rank, chunk) as usize;
    let mask = c.get(rank, chunk);
    if k == 0 {
        Span::styled(" · ", t.dim)
    } else if k == n && n > 1 {
        Span::styled(
            if n > 9 { "all" } else { " ■ " },
            if t.mono {
                t.strong
            } else {
                t.ok.add_modifier(ratatui::style::Modifier::BOLD)
            },
        )
    } else if k == 1 {
        let src = mask.trailing_zeros() as usize;
        let style = if t.mono {
            Style::new()
        } else {
            Style::new().fg(RANK_COLORS[src % RANK_COLORS.len()])
        };
        Span::styled(format!("{src:^3x}"), style)
    } else {
        Span::styled(format!("Σ{k:<2}"), t.warn)
    }
}

const LEGEND: &str = " · nothing yet  0-f that rank's own data  Σk sum of k ranks  ■ all N";

/// The bound the counters converge to, for all-reduce: 2(N−1)/N·M.
fn bound(s: &RingState) -> Option<String> {
    (s.params.coll == Collective::AllReduce).then(|| {
        let m = s.params.count() as u64 * s.params.dtype.size() as u64;
        format!(
            "2(N−1)/N·M = {}",
            format_bytes(ring_allreduce_bytes_per_rank(s.params.ranks, m).round() as u64)
        )
    })
}

/// Which ranks get a row when there is room for `rows`: all, or the first and last few.
fn shown_ranks(n: usize, rows: usize) -> Vec<Option<usize>> {
    if n <= rows {
        return (0..n).map(Some).collect();
    }
    let head = rows.saturating_sub(1) / 2;
    let tail = rows.saturating_sub(1) - head;
    (0..head)
        .map(Some)
        .chain([None])
        .chain((n - tail..n).map(Some))
        .collect()
}

fn sent_span(s: &RingState, t: &Theme, r: usize) -> Span<'static> {
    let fin = s.traffic.per_rank.get(r).map_or(0, |x| x.bytes_sent);
    let sent = s.sent.get(r).copied().unwrap_or(0);
    Span::styled(
        format!("{:>10} / {}", format_bytes(sent), format_bytes(fin)),
        if sent == fin { t.ok } else { t.base },
    )
}

fn bar(s: &RingState, t: &Theme, r: usize, width: usize) -> Span<'static> {
    let fin = s.traffic.per_rank.get(r).map_or(0, |x| x.bytes_sent);
    let sent = s.sent.get(r).copied().unwrap_or(0);
    let filled = if fin == 0 {
        width
    } else {
        (sent as f64 / fin as f64 * width as f64).round() as usize
    };
    Span::styled(
        format!(
            "{}{}",
            "█".repeat(filled.min(width)),
            "░".repeat(width.saturating_sub(filled))
        ),
        t.accent,
    )
}

fn grid_header(s: &RingState, t: &Theme) -> Line<'static> {
    let mut head = vec![Span::styled(" rank ", t.strong)];
    for c in 0..s.params.ranks {
        head.push(Span::styled(format!("c{c:<2x}"), t.dim));
    }
    Line::from(head)
}

fn grid_row(s: &RingState, t: &Theme, r: usize) -> Vec<Span<'static>> {
    let mut spans = vec![Span::styled(format!(" R{r:<3} "), t.strong)];
    if s.contrib.is_some() {
        for c in 0..s.params.ranks {
            spans.push(cell(s, t, r, c));
        }
    }
    spans
}

/// Wide layout, right side: the buffer grid, then the counters with bars.
fn panel_lines(s: &RingState, t: &Theme, height: usize) -> Vec<Line<'static>> {
    let n = s.params.ranks;
    let mut out = vec![
        Line::styled(
            format!(" Buffers after step {} (rank × chunk)", s.step),
            t.h2,
        ),
        grid_header(s, t),
    ];
    for r in 0..n {
        out.push(Line::from(grid_row(s, t, r)));
    }
    // The panel is narrower than the legend at 100 columns: two rows, never cut.
    match LEGEND.split_once("  Σk") {
        Some((a, b)) => {
            out.push(Line::styled(a, t.dim));
            out.push(Line::styled(format!(" Σk{b}"), t.dim));
        }
        None => out.push(Line::styled(LEGEND, t.dim)),
    }
    out.push(Line::raw(""));
    let mut title = vec![Span::styled(" Bytes sent so far / in all", t.h2)];
    if let Some(b) = bound(s) {
        title.push(Span::styled(format!("   ring bound {b}"), t.dim));
    }
    out.push(Line::from(title));
    let rows = height.saturating_sub(out.len());
    for r in shown_ranks(n, rows) {
        out.push(match r {
            Some(r) => Line::from(vec![
                Span::styled(format!(" R{r:<3} "), t.strong),
                bar(s, t, r, 16),
                Span::raw(" "),
                sent_span(s, t, r),
            ]),
            None => Line::styled("  ⋮", t.dim),
        });
    }
    out
}

/// Compact layout (80x24, or N too large to draw): one row per rank, cells then counters.
fn table_lines(s: &RingState, t: &Theme, height: usize) -> Vec<Line<'static>> {
    let n = s.params.ranks;
    let mut out = Vec::new();
    if s.contrib.is_some() {
        let mut head = grid_header(s, t);
        head.spans
            .push(Span::styled("   sent so far / in all", t.strong));
        out.push(head);
    } else {
        out.push(Line::styled(
            format!(" N = {n}: buffers are drawn up to {MAX_DRAWN} ranks; the bytes are exact"),
            t.dim,
        ));
        out.push(Line::styled(" rank   sent so far / in all", t.strong));
    }
    let rows = height.saturating_sub(out.len() + 1).max(1);
    for r in shown_ranks(n, rows) {
        out.push(match r {
            Some(r) => {
                let mut spans = grid_row(s, t, r);
                spans.push(Span::raw("  "));
                spans.push(sent_span(s, t, r));
                Line::from(spans)
            }
            None => Line::styled(format!("  ⋮   ({} ranks in all)", n), t.dim),
        });
    }
    // Ranks reach the ring bound only where this schedule sends that much (ring, two-level);
    // for the others it is a yardstick.
    let reaches = {
        let m = s.params.count() as f64 * s.params.dtype.size() as f64;
        let b = ring_allreduce_bytes_per_rank(s.params.ranks, m as u64);
        (s.traffic.max_sent() as f64 - b).abs() <= 2.0 * s.params.dtype.size() as f64
    };
    let legend = match (s.contrib.is_some(), bound(s)) {
        (true, Some(b)) if out.len() + 2 <= height => {
            out.push(Line::styled(LEGEND, t.dim));
            if reaches {
                format!(" each rank's bytes sent converge to the ring bound {b}")
            } else {
                format!(" the ring bound {b}, to compare with each rank's bytes sent")
            }
        }
        (true, Some(b)) => format!(" ■ all N  Σk sum of k ranks  bound {b}"),
        (true, None) => LEGEND.to_string(),
        (false, Some(b)) if reaches => format!(" each rank converges to the ring bound {b}"),
        (false, Some(b)) => format!(" the ring bound {b}, to compare with each rank"),
        (false, None) => String::new(),
    };
    out.push(Line::styled(legend, t.dim));
    out
}

fn compare_lines(s: &RingState, t: &Theme) -> Vec<Line<'static>> {
    const WORDS: [&str; 10] = [
        "no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
    ];
    let k = s.compare.len();
    let ways = if s.params.coll.is_point_to_point() {
        // All-to-all and send/recv have one pattern whatever the algorithm.
        "one schedule".to_string()
    } else {
        match WORDS.get(k) {
            Some(w) if k == 1 => format!("{w} way"),
            Some(w) => format!("{w} ways"),
            None => crate::units::count(k, "way"),
        }
    };
    let mut out = vec![
        Line::from(vec![
            Span::styled(format!(" Same N and M, {ways}"), t.h2),
            Span::styled(
                format!(
                    "   time on {} (L: link)",
                    topology_label(s.schedule.spec(), s.link)
                ),
                t.dim,
            ),
        ]),
        Line::styled(
            format!(
                " {:<12} {:>6} {:>14} {:>14} {:>14} {:>11}",
                "algo", "steps", "max sent/rank", "max recv/rank", "busiest port", "est. time"
            ),
            t.strong,
        ),
    ];
    for c in &s.compare {
        let row = format!(
            " {:<12} {:>6} {:>14} {:>14} {:>14} {:>11}",
            algo_label(s.params.coll, c.algo),
            c.steps,
            format_bytes(c.max_sent),
            format_bytes(c.max_received),
            match c.busiest_port {
                None => "-".to_string(),
                Some(r) if c.ports_even => format!("each {}", format_bytes(r.port_bytes())),
                Some(r) => format!("R{} {}", r.rank, format_bytes(r.port_bytes())),
            },
            c.estimate(s.link)
                .map_or_else(|| "-".to_string(), |e| format_seconds(e.total_s)),
        );
        let shown = c.algo == s.params.algo;
        out.push(Line::from(vec![
            Span::styled(row, if shown { t.accent } else { t.base }),
            Span::styled(if shown { "  ◀" } else { "" }, t.dim),
        ]));
    }
    out.push(Line::styled(compare_note(s), t.dim));
    // Where the estimates' numbers come from, under the table (L changes it).
    out.push(Line::styled(format!(" {}", link_note(s)), t.dim));
    out
}

/// Under the comparison: what `◀` marks, and which algorithm is fastest here and why when it
/// is not the ring (a small message is latency-bound: each step costs a link's latency α).
fn compare_note(s: &RingState) -> String {
    let fastest = s
        .compare
        .iter()
        .filter_map(|c| c.estimate(s.link).map(|e| (c, e.total_s)))
        .min_by(|a, b| a.1.total_cmp(&b.1));
    let mut note = " ◀ drawn above".to_string();
    if let Some((c, _)) = fastest
        && s.compare.len() > 1
    {
        let why = if c.algo == crate::collective::Algorithm::Ring {
            String::new()
        } else if c.steps < s.schedule.len() {
            format!(" ({} steps: latency α dominates at this M)", c.steps)
        } else {
            String::new()
        };
        note.push_str(&format!(
            " · fastest: {}{why}",
            algo_label(s.params.coll, c.algo)
        ));
    }
    note
}

/// The comparison row's name: the algorithm, or for the point-to-point patterns the pattern.
fn algo_label(
    op: crate::collective::Collective,
    algo: crate::collective::Algorithm,
) -> &'static str {
    match op {
        crate::collective::Collective::AllToAll => "pairwise",
        crate::collective::Collective::SendRecv => "direct",
        _ => algo.short_name(),
    }
}

/// What the estimates assume for the chosen link: its source and its per-step latency.
pub fn link_note(s: &RingState) -> String {
    match crate::collective::cost::LINK_PRESETS.get(s.link) {
        Some(l) => format!("{}: {}", l.name, l.note),
        None => {
            let t = super::ring::topology(s.schedule.spec(), s.link);
            format!(
                "{} inside a node, {} between (a NIC per GPU)",
                t.intra.name, t.inter.name
            )
        }
    }
}
