//! The lesson reader: scroll, section jumps, `/` search, raw-TeX toggle, and an error panel
//! for a lesson with problems (the rest of the course keeps working).

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use crate::course::Block;
use crate::tui::app::{Action, App, Outcome, Screen};
use crate::tui::markdown::{self, RenderOptions, Rendered};
use crate::tui::screens::ring::{RingParams, RingState};

/// Widest text column: long lines are hard to read, so wide terminals get margins.
pub const MAX_TEXT_WIDTH: u16 = 100;

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Search {
    pub field: crate::tui::field::Field,
    /// The query searched for (the field's text when it was submitted).
    pub query: String,
    pub editing: bool,
    /// Lines that contain the query.
    pub hits: Vec<usize>,
    pub current: Option<usize>,
}

pub struct LessonState {
    pub entry: usize,
    pub id: Option<String>,
    pub scroll: usize,
    pub rendered: Rendered,
    /// Plain text of each rendered line, for search.
    pub plain: Vec<String>,
    pub search: Search,
}

/// Text column width for a terminal width.
pub fn text_width(term_width: u16) -> u16 {
    term_width.saturating_sub(4).clamp(20, MAX_TEXT_WIDTH)
}

/// Lines of content visible at once (terminal minus header and hint bar).
pub fn viewport(app: &App) -> usize {
    app.height.saturating_sub(2).max(1) as usize
}

impl LessonState {
    pub fn open(app: &App, entry: usize) -> Self {
        let mut s = Self {
            entry,
            id: app
                .course
                .entries
                .get(entry)
                .and_then(|e| e.lesson.as_ref())
                .map(|l| l.meta.id.clone()),
            scroll: 0,
            rendered: Rendered::default(),
            plain: Vec::new(),
            search: Search::default(),
        };
        s.relayout(app);
        s
    }

    /// Render the Markdown for the current width and TeX mode. Runs in update, never in
    /// render, so drawing a frame only slices prepared lines.
    pub fn relayout(&mut self, app: &App) {
        if let Some(id) = &self.id
            && let Some(i) = app.course.position_of(id)
        {
            self.entry = i;
        }
        let Some(entry) = app.course.entries.get(self.entry) else {
            self.rendered = Rendered::default();
            self.plain.clear();
            return;
        };
        let t = &app.theme;
        let width = text_width(app.width);
        let old_len = self.rendered.lines.len().max(1);
        let mut lines: Vec<Line<'static>> = Vec::new();
        let errors: Vec<_> = entry.diagnostics.iter().filter(|d| d.is_error()).collect();
        if !errors.is_empty() {
            lines.push(Line::styled(
                format!(
                    "✗ This lesson has {} problem(s) (`ringlab check` shows the same):",
                    errors.len()
                ),
                t.error,
            ));
            for d in errors {
                let mut text = d.to_string();
                text.truncate(
                    text.char_indices()
                        .nth(width as usize)
                        .map_or(text.len(), |(i, _)| i),
                );
                lines.push(Line::styled(text, t.error));
            }
            lines.push(Line::raw(""));
        }
        let offset = lines.len();
        let mut rendered = match &entry.lesson {
            Some(l) => markdown::render(
                &l.body,
                &RenderOptions {
                    width,
                    theme: t,
                    raw_tex: app.raw_tex,
                },
            ),
            None => Rendered::default(),
        };
        for h in &mut rendered.headings {
            h.line += offset;
        }
        for e in &mut rendered.embeds {
            e.line += offset;
        }
        lines.append(&mut rendered.lines);
        rendered.lines = lines;
        self.plain = rendered.lines.iter().map(line_text).collect();
        // Keep the reader at the same relative place across a resize.
        let ratio = self.scroll as f64 / old_len as f64;
        self.scroll = (ratio * rendered.lines.len() as f64) as usize;
        self.rendered = rendered;
        if !self.search.query.is_empty() {
            self.search.hits = find(&self.plain, &self.search.query);
        }
    }

    fn max_scroll(&self, app: &App) -> usize {
        self.rendered.lines.len().saturating_sub(viewport(app))
    }

    /// Scroll so that the body's heading number `index` (from 0) is at the top; `title`
    /// double-checks it (a lesson edited since may have moved it).
    pub fn scroll_to_heading(&mut self, app: &App, index: usize, title: &str) {
        let heads = &self.rendered.headings;
        let found = heads
            .get(index)
            .filter(|h| h.title == title)
            .or_else(|| heads.iter().find(|h| h.title == title))
            .or_else(|| heads.get(index));
        if let Some(h) = found {
            self.scroll = h.line.min(self.max_scroll(app));
        }
    }

    /// Index of the heading the top of the screen is in.
    pub fn current_section(&self) -> Option<usize> {
        self.rendered
            .headings
            .iter()
            .rposition(|h| h.line <= self.scroll)
    }

    /// Fraction read: how far the bottom of the screen has come.
    pub fn fraction_read(&self, app: &App) -> f64 {
        let n = self.rendered.lines.len();
        if n == 0 {
            return 1.0;
        }
        ((self.scroll + viewport(app)) as f64 / n as f64).min(1.0)
    }

    /// The first embedded ring view on screen, if any.
    pub fn visible_ring(&self, app: &App) -> Option<&crate::course::block::RingBlock> {
        let end = self.scroll + viewport(app);
        self.rendered.embeds.iter().find_map(|e| match &e.block {
            Block::Ring(r) if e.line + e.height > self.scroll && e.line < end => Some(r),
            _ => None,
        })
    }

    /// The first embedded element that Enter opens (ring view, TP calculator, planner) on screen.
    pub fn visible_embed(&self, app: &App) -> Option<&Block> {
        let end = self.scroll + viewport(app);
        self.rendered
            .embeds
            .iter()
            .find(|e| {
                matches!(
                    e.block,
                    Block::Ring(_) | Block::Tp(_) | Block::Plan(_) | Block::Lab(_)
                ) && e.line + e.height > self.scroll
                    && e.line < end
            })
            .map(|e| &e.block)
    }
}

/// The screen an embedded block opens.
fn open_embed(block: &Block) -> Result<Screen, String> {
    use crate::tui::screens::{planner::PlannerState, tpcalc::TpCalcState};
    match block {
        Block::Ring(r) => RingParams::from_block(r)
            .map_err(|e| format!("this ring block is invalid: {e}"))
            .and_then(RingState::new)
            .map(|r| Screen::Ring(Box::new(r))),
        Block::Tp(t) => TpCalcState::from_block(t).map(|s| Screen::TpCalc(Box::new(s))),
        Block::Plan(p) => PlannerState::from_block(p).map(|s| Screen::Planner(Box::new(s))),
        Block::Lab(l) => crate::tui::screens::lab::LabParams::from_block(l)
            .map_err(|e| format!("this lab block is invalid: {e}"))
            .map(|p| Screen::Lab(Box::new(crate::tui::screens::lab::LabState::new(p)))),
        _ => Err("nothing to open here".into()),
    }
}

fn line_text(l: &Line) -> String {
    l.spans.iter().map(|s| s.content.as_ref()).collect()
}

/// Lines containing `query`, case-insensitively.
pub fn find(plain: &[String], query: &str) -> Vec<usize> {
    let q = query.to_lowercase();
    if q.is_empty() {
        return Vec::new();
    }
    plain
        .iter()
        .enumerate()
        .filter(|(_, l)| l.to_lowercase().contains(&q))
        .map(|(i, _)| i)
        .collect()
}

pub fn update(s: &mut LessonState, app: &mut App, action: Action) -> Outcome {
    let max = s.max_scroll(app);
    let page = viewport(app).saturating_sub(2).max(1) as isize;
    if s.search.editing {
        match action {
            Action::Edit(r) => s.search.field.apply(r),
            Action::InputCancel => s.search.editing = false,
            Action::InputSubmit => {
                s.search.editing = false;
                s.search.query = s.search.field.value().to_string();
                s.search.hits = find(&s.plain, &s.search.query);
                s.search.current = s.search.hits.iter().position(|&l| l >= s.scroll).or((!s
                    .search
                    .hits
                    .is_empty())
                .then_some(0));
                match s.search.current {
                    Some(i) => s.scroll = s.search.hits[i].saturating_sub(2).min(max),
                    None => app.status = Some(format!("no match for “{}”", s.search.query)),
                }
            }
            _ => {}
        }
        return Outcome::Stay;
    }
    match action {
        Action::Move(d) => s.scroll = s.scroll.saturating_add_signed(d as isize).min(max),
        Action::Page(d) => s.scroll = s.scroll.saturating_add_signed(d as isize * page).min(max),
        Action::Top => s.scroll = 0,
        Action::Bottom => s.scroll = max,
        Action::Section(d) => {
            let heads = &s.rendered.headings;
            let target = if d > 0 {
                heads.iter().find(|h| h.line > s.scroll)
            } else {
                heads.iter().rev().find(|h| h.line < s.scroll)
            };
            if let Some(h) = target {
                s.scroll = h.line.min(max);
            }
        }
        Action::SearchStart => {
            s.search.editing = true;
            s.search.field.clear();
        }
        Action::SearchStep(d) if !s.search.hits.is_empty() => {
            let n = s.search.hits.len() as isize;
            let cur = s.search.current.map_or(0, |c| c as isize);
            let next = (cur + d as isize).rem_euclid(n) as usize;
            s.search.current = Some(next);
            s.scroll = s.search.hits[next].saturating_sub(2).min(max);
            app.status = Some(format!("match {} of {}", next + 1, n));
        }
        Action::SearchStep(_) => app.status = Some("no search: press / to search".into()),
        Action::ToggleTex => {
            app.raw_tex = !app.raw_tex;
            s.relayout(app);
            app.status = Some(
                if app.raw_tex {
                    "math shown as raw TeX"
                } else {
                    "math rendered"
                }
                .into(),
            );
        }
        Action::Resize(..) | Action::Reload => s.relayout(app),
        Action::Open => match s.visible_embed(app).map(open_embed) {
            Some(Ok(screen)) => return Outcome::Push(screen),
            Some(Err(e)) => app.status = Some(e),
            None => {
                app.status = Some(
                    "nothing to open here: scroll to a ring view, TP calculator or planner".into(),
                )
            }
        },
        Action::OpenQuiz => match s.id.as_deref().map(|id| super::quiz::open(app, Some(id))) {
            Some(Ok(q)) => return Outcome::Push(Screen::Quiz(Box::new(q))),
            Some(Err(e)) => app.status = Some(e),
            None => app.status = Some("this file is not a lesson; no quiz".into()),
        },
        Action::Back => {
            if let Some(id) = &s.id {
                let f = s.fraction_read(app);
                app.record_reading(id, f);
            }
            return Outcome::Pop;
        }
        _ => {}
    }
    if let Some(id) = &s.id {
        let f = s.fraction_read(app);
        app.note_reading(id, f);
    }
    Outcome::Stay
}

pub fn render(s: &LessonState, app: &App, frame: &mut Frame, area: Rect) {
    let t = &app.theme;
    let width = text_width(area.width);
    let x = area.x + (area.width.saturating_sub(width)) / 2;
    // Header: where am I.
    let title = app
        .course
        .entries
        .get(s.entry)
        .map_or("lesson", |e| e.title());
    let section = s
        .current_section()
        .map(|i| format!("§ {}  ", s.rendered.headings[i].title))
        .unwrap_or_default();
    let pct = format!("{:>3.0}%", s.fraction_read(app) * 100.0);
    let left = format!(" {title}");
    let right = format!("{section}{pct} ");
    let pad = (area.width as usize).saturating_sub(left.chars().count() + right.chars().count());
    let header = if pad > 0 {
        Line::from(vec![
            Span::styled(left, t.title),
            Span::raw(" ".repeat(pad)),
            Span::styled(right, t.dim),
        ])
    } else {
        Line::styled(left, t.title)
    };
    frame.render_widget(
        Paragraph::new(header),
        Rect::new(area.x, area.y, area.width, 1),
    );
    let h = area.height.saturating_sub(1) as usize;
    let hit_style = t.search_hit;
    let lines: Vec<Line> = s
        .rendered
        .lines
        .iter()
        .enumerate()
        .skip(s.scroll)
        .take(h)
        .map(|(i, l)| {
            if !s.search.query.is_empty() && s.search.hits.binary_search(&i).is_ok() {
                highlight(l, &s.search.query, hit_style)
            } else {
                l.clone()
            }
        })
        .collect();
    frame.render_widget(
        Paragraph::new(lines),
        Rect::new(x, area.y + 1, width.min(area.width), h as u16),
    );
}

/// The line with every case-insensitive occurrence of `query` restyled.
fn highlight(line: &Line<'static>, query: &str, style: Style) -> Line<'static> {
    let q: Vec<char> = query.chars().flat_map(char::to_lowercase).collect();
    let mut cells: Vec<(char, Style)> = Vec::new();
    for span in &line.spans {
        for c in span.content.chars() {
            cells.push((c, line.style.patch(span.style)));
        }
    }
    let lower: Vec<char> = cells
        .iter()
        .map(|(c, _)| c.to_lowercase().next().unwrap_or(*c))
        .collect();
    let mut i = 0;
    while !q.is_empty() && i + q.len() <= lower.len() {
        if lower[i..i + q.len()] == q[..] {
            for cell in &mut cells[i..i + q.len()] {
                cell.1 = cell.1.patch(style);
            }
            i += q.len();
        } else {
            i += 1;
        }
    }
    let mut spans: Vec<Span<'static>> = Vec::new();
    let mut cur = String::new();
    let mut cur_style = None;
    for (c, st) in cells {
        if cur_style != Some(st) && !cur.is_empty() {
            spans.push(Span::styled(
                std::mem::take(&mut cur),
                cur_style.unwrap_or_default(),
            ));
        }
        cur_style = Some(st);
        cur.push(c);
    }
    if !cur.is_empty() {
        spans.push(Span::styled(cur, cur_style.unwrap_or_default()));
    }
    Line::from(spans)
}
