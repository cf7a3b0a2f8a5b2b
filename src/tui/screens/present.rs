//! Presenter mode (`ringlab present LESSON`, `P` on the course map): a lesson as slides, one
//! section a slide, fitted to the terminal (a section taller than the screen continues on the
//! next slide: nothing scrolls in front of a class), its title set large. Clicker keys move
//! (PgDn/PgUp, →/←, Space), `b` blanks the screen, Enter runs the slide's live block (a
//! narrated ring, the bench, the hang lab, a class quiz), a clock and the elapsed time stay in
//! the top line. Notes terminals (`ringlab present --notes`) follow over a local socket.

use std::sync::Arc;
use std::time::Instant;

use ratatui::Frame;
use ratatui::layout::{Alignment, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use tui_big_text::{BigText, PixelSize};
use unicode_width::UnicodeWidthStr;

use crate::course::Block;
use crate::tui::app::{Action, App, Outcome, Screen, ScreenId};
use crate::tui::error::ScreenError;
use crate::tui::keys::{Binding, Context, Key, bind};
use crate::tui::markdown::{self, RenderOptions, Rendered};
use crate::tui::notes::{Hub, NotesMsg};
use crate::tui::screens::lesson::text_width;
use crate::tui::screens::ring::{RingParams, RingState};
use crate::tui::theme::Theme;
use crossterm::event::KeyCode;

/// One slide: a section, or one screenful of a long one.
#[derive(Debug, Clone)]
pub struct Slide {
    pub title: String,
    /// (part from 1, parts) of a section split over several slides.
    pub part: (usize, usize),
    pub lines: Vec<Line<'static>>,
    /// Live blocks on this slide, in reading order.
    pub embeds: Vec<Block>,
    /// What to say: the section's `<!-- notes: … -->`, else the slide's text.
    pub notes: String,
}

impl Slide {
    /// "Ring all-reduce" or "Ring all-reduce (2/3)".
    pub fn heading(&self) -> String {
        match self.part {
            (_, 1) => self.title.clone(),
            (i, k) => format!("{} ({i}/{k})", self.title),
        }
    }
}

/// How the class sees it: pace of narrated ring views, seconds a class quiz gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PresentOptions {
    pub pace_ms: u64,
    pub countdown_s: u64,
}

impl Default for PresentOptions {
    fn default() -> Self {
        Self {
            pace_ms: 2000,
            countdown_s: 30,
        }
    }
}

pub struct PresentState {
    pub entry: usize,
    pub lesson_id: String,
    pub lesson_title: String,
    pub slides: Vec<Slide>,
    pub index: usize,
    pub blank: bool,
    pub started: Instant,
    /// The same moment on the wall clock (Unix seconds), for notes terminals.
    pub started_unix: i64,
    pub options: PresentOptions,
    /// The theme before presenting: leaving presenter mode gives it back.
    pub previous_theme: Theme,
    pub hub: Option<Arc<Hub>>,
}

/// Rows the slide's title takes for `width` columns: big text in one line, big text over two
/// lines, or one plain bold line when the title is too long for either.
pub fn title_layout(title: &str, width: u16) -> (Option<(PixelSize, Vec<String>)>, u16) {
    let w = width as usize;
    let cols = |s: &str, per: usize| s.chars().count() * per;
    if cols(title, 8) <= w {
        return (Some((PixelSize::HalfHeight, vec![title.to_string()])), 4);
    }
    if cols(title, 4) <= w {
        return (Some((PixelSize::Quadrant, vec![title.to_string()])), 4);
    }
    // Two lines, split at the space nearest the middle.
    let mid = title.chars().count() / 2;
    let split = title
        .char_indices()
        .filter(|(_, c)| *c == ' ')
        .map(|(i, _)| i)
        .min_by_key(|&i| title[..i].chars().count().abs_diff(mid));
    if let Some(i) = split {
        let (a, b) = (title[..i].trim(), title[i..].trim());
        if cols(a, 4).max(cols(b, 4)) <= w {
            return (
                Some((PixelSize::Quadrant, vec![a.to_string(), b.to_string()])),
                8,
            );
        }
    }
    (None, 1)
}

fn line_text(l: &Line) -> String {
    l.spans.iter().map(|s| s.content.as_ref()).collect()
}

fn is_blank(l: &Line) -> bool {
    line_text(l).trim().is_empty()
}

/// `<!-- notes: … -->` comments of a lesson body, by the slug of the heading they are under
/// ("" before the first heading).
pub fn section_notes(body: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    let mut heading = String::new();
    let mut fence = false;
    let mut open: Option<String> = None;
    for line in body.lines() {
        let t = line.trim();
        if let Some(buf) = open.as_mut() {
            match t.split_once("-->") {
                Some((last, _)) => {
                    buf.push('\n');
                    buf.push_str(last.trim());
                    let text = buf.trim().to_string();
                    out.push((heading.clone(), text));
                    open = None;
                }
                None => {
                    buf.push('\n');
                    buf.push_str(t);
                }
            }
            continue;
        }
        if t.starts_with("```") || t.starts_with("~~~") {
            fence = !fence;
            continue;
        }
        if fence {
            continue;
        }
        if t.starts_with('#') {
            let title = t.trim_start_matches('#');
            if title.starts_with(' ') {
                heading = markdown::slug(title);
                continue;
            }
        }
        let rest = t
            .strip_prefix("<!-- notes:")
            .or_else(|| t.strip_prefix("<!-- note:"));
        if let Some(rest) = rest {
            match rest.split_once("-->") {
                Some((text, _)) => out.push((heading.clone(), text.trim().to_string())),
                None => open = Some(rest.trim().to_string()),
            }
        }
    }
    out
}

impl PresentState {
    /// Present the course entry `entry` (its lesson must have loaded).
    pub fn open(app: &App, entry: usize, options: PresentOptions) -> Result<Self, ScreenError> {
        let Some(lesson) = app
            .course
            .entries
            .get(entry)
            .and_then(|e| e.lesson.as_ref())
        else {
            return Err(ScreenError::NotALesson);
        };
        let mut s = Self {
            entry,
            lesson_id: lesson.meta.id.clone(),
            lesson_title: lesson.meta.title.clone(),
            slides: Vec::new(),
            index: 0,
            blank: false,
            started: Instant::now(),
            started_unix: chrono::Utc::now().timestamp(),
            options,
            previous_theme: app.theme,
            hub: None,
        };
        s.relayout(app);
        Ok(s)
    }

    /// Switch the app to the projector theme and present entry `entry`; leaving gives the
    /// theme back.
    pub fn start(
        app: &mut App,
        entry: usize,
        options: PresentOptions,
    ) -> Result<Self, ScreenError> {
        let previous = app.theme;
        app.theme = Theme::projector(previous.mono);
        match Self::open(app, entry, options) {
            Ok(mut s) => {
                s.previous_theme = previous;
                Ok(s)
            }
            Err(e) => {
                app.theme = previous;
                Err(e)
            }
        }
    }

    /// Lay the lesson out as slides for the terminal's size, staying on the same section.
    pub fn relayout(&mut self, app: &App) {
        let here = self
            .slides
            .get(self.index)
            .map(|s| (s.title.clone(), s.part.0));
        self.slides = slides(app, self.entry, &self.lesson_title);
        self.index = match here {
            Some((title, part)) => self
                .slides
                .iter()
                .position(|s| s.title == title && s.part.0 == part)
                .or_else(|| self.slides.iter().position(|s| s.title == title))
                .unwrap_or(0),
            None => 0,
        };
        self.index = self.index.min(self.slides.len().saturating_sub(1));
    }

    pub fn current(&self) -> Option<&Slide> {
        self.slides.get(self.index)
    }

    /// What notes terminals are told about the current slide.
    pub fn notes_msg(&self) -> Option<NotesMsg> {
        let s = self.current()?;
        Some(NotesMsg {
            lesson: self.lesson_title.clone(),
            slide: self.index + 1,
            total: self.slides.len(),
            title: s.heading(),
            notes: s.notes.clone(),
            next: self.slides.get(self.index + 1).map(Slide::heading),
            talk_started: Some(self.started_unix),
            answer: None,
        })
    }

    /// Tell notes terminals where the presenter is.
    pub fn publish(&self) {
        if let (Some(hub), Some(msg)) = (&self.hub, self.notes_msg()) {
            hub.publish(&msg);
        }
    }

    fn go(&mut self, index: usize) {
        let index = index.min(self.slides.len().saturating_sub(1));
        if index != self.index {
            self.index = index;
            self.publish();
        }
    }
}

/// The slides of a lesson for the app's terminal size.
fn slides(app: &App, entry: usize, lesson_title: &str) -> Vec<Slide> {
    let Some(lesson) = app
        .course
        .entries
        .get(entry)
        .and_then(|e| e.lesson.as_ref())
    else {
        return Vec::new();
    };
    let width = text_width(app.width);
    let rendered = markdown::render(
        &lesson.body,
        &RenderOptions {
            width,
            theme: &app.theme,
            raw_tex: app.raw_tex,
            slides: true,
        },
    );
    let notes = section_notes(&lesson.body);
    let mut out = Vec::new();
    for (title, start, end) in sections(&rendered, lesson_title) {
        let pages = section_pages(app, &rendered, &title, start, end);
        let slug = markdown::slug(&title);
        let said: Vec<&str> = notes
            .iter()
            .filter(|(h, _)| *h == slug || (start == 0 && h.is_empty()))
            .map(|(_, n)| n.as_str())
            .collect();
        let k = pages.len();
        for (i, (a, b)) in pages.into_iter().enumerate() {
            let lines: Vec<Line<'static>> = rendered.lines[a..b].to_vec();
            let embeds = rendered
                .embeds
                .iter()
                .filter(|e| (a..b.max(a + 1)).contains(&e.line))
                .map(|e| e.block.clone())
                .collect();
            let notes = if said.is_empty() {
                unwrap_text(lines.iter().map(line_text), 8)
            } else {
                said.join("\n\n")
            };
            out.push(Slide {
                title: title.clone(),
                part: (i + 1, k),
                lines,
                embeds,
                notes,
            });
        }
    }
    out
}

/// The lesson's sections as (title, first row, end row): they start at level-1 and level-2
/// headings (deeper ones stay inside), after the heading's rows (the big title replaces the
/// heading, its wrapped rows and its rule); text before the first heading is a section titled
/// as the lesson.
fn sections(rendered: &Rendered, lesson_title: &str) -> Vec<(String, usize, usize)> {
    let heads: Vec<(usize, usize, String)> = rendered
        .headings
        .iter()
        .filter(|h| h.level <= 2)
        .map(|h| (h.line, h.rows.max(1), h.title.clone()))
        .collect();
    let mut sections: Vec<(String, usize, usize)> = Vec::new();
    let first = heads.first().map_or(rendered.lines.len(), |h| h.0);
    let lead_in = rendered.lines[..first].iter().any(|l| !is_blank(l));
    if lead_in || heads.is_empty() {
        sections.push((lesson_title.to_string(), 0, first));
    }
    for (i, (line, rows, title)) in heads.iter().enumerate() {
        let end = heads.get(i + 1).map_or(rendered.lines.len(), |h| h.0);
        sections.push((title.clone(), (line + rows).min(end), end));
    }
    sections
}

/// A section's pages (first and end row of each), as many as the screen needs.
fn section_pages(
    app: &App,
    rendered: &Rendered,
    title: &str,
    start: usize,
    end: usize,
) -> Vec<(usize, usize)> {
    // Body rows: the screen less the top line, the title, a gap and the hint bar.
    let screen_h = app.height.saturating_sub(1);
    let body_h = |heading: &str| {
        let (_, rows) = title_layout(heading, app.width.saturating_sub(4));
        screen_h.saturating_sub(2 + rows).max(3) as usize
    };
    let mut from = start;
    while from < end && is_blank(&rendered.lines[from]) {
        from += 1;
    }
    let mut to = end;
    while to > from && is_blank(&rendered.lines[to - 1]) {
        to -= 1;
    }
    // A section that does not fit is split; its title then carries "(i/k)", which may take
    // more rows: paginate again until every page's title leaves room for its body.
    // The rows a page has under its title: a split section's titles carry "(i/k)", which
    // may take fewer rows than the bare title (set large) or more.
    let room = |k: usize| {
        if k <= 1 {
            body_h(title)
        } else {
            (1..=k)
                .map(|i| body_h(&format!("{title} ({i}/{k})")))
                .min()
                .unwrap_or(1)
        }
    };
    let mut rows = body_h(title);
    let mut pages = paginate(rendered, from, to, rows);
    for _ in 0..6 {
        let want = room(pages.len());
        if want == rows {
            break;
        }
        rows = want;
        pages = paginate(rendered, from, to, rows);
    }
    // Never more than a page's title leaves room for, whatever the loop settled on.
    if room(pages.len()) < rows {
        rows = room(pages.len());
        pages = paginate(rendered, from, to, rows);
    }
    pages
}

/// Rows `from..to` in pages of at most `rows` (at least one page, maybe empty).
fn paginate(rendered: &Rendered, from: usize, to: usize, rows: usize) -> Vec<(usize, usize)> {
    let mut pages: Vec<(usize, usize)> = Vec::new();
    let mut at = from;
    while at < to {
        let mut stop = (at + rows).min(to);
        // Do not cut a live block or a table in two when it fits on the next page.
        if stop < to
            && let Some(e) = rendered
                .embeds
                .iter()
                .find(|e| e.line < stop && e.line + e.height > stop && e.line > at)
            && e.height <= rows
        {
            stop = e.line;
        }
        // Do not cut a paragraph or a table in two when the page can end at the blank
        // line before it and still be at least half full.
        if stop < to
            && !is_blank(&rendered.lines[stop])
            && !is_blank(&rendered.lines[stop - 1])
            && let Some(b) = (at + rows / 2..stop)
                .rev()
                .find(|&i| is_blank(&rendered.lines[i]))
        {
            stop = b;
        }
        pages.push((at, stop));
        at = stop;
        while at < to && is_blank(&rendered.lines[at]) {
            at += 1;
        }
    }
    if pages.is_empty() {
        pages.push((from, from));
    }
    pages
}

/// A slide's text for a notes terminal of any width: the slide's wrapped rows joined back
/// into paragraphs (a list item or a table row stays a line of its own), at most `max` of them.
/// How a row of a table or a live block's box starts.
const BOX_EDGES: [char; 6] = ['│', '┌', '├', '└', '┆', '|'];

fn unwrap_text(rows: impl Iterator<Item = String>, max: usize) -> String {
    // Blocks of rows between blank rows.
    let mut blocks: Vec<Vec<String>> = vec![Vec::new()];
    for row in rows {
        if row.trim().is_empty() {
            blocks.push(Vec::new());
        } else if let Some(b) = blocks.last_mut() {
            b.push(row);
        }
    }
    let mut out: Vec<String> = Vec::new();
    let mut boxed = false;
    for block in blocks.into_iter().filter(|b| !b.is_empty()) {
        // A table or a live block's box does not survive another width (a notes terminal
        // would cut it): it is left to the projector, and the notes say it is there.
        if block[0].trim().starts_with(BOX_EDGES) {
            boxed = true;
            continue;
        }
        // Display math (a fraction's bar) and other aligned rows keep their rows and columns.
        if block
            .iter()
            .any(|r| r.contains('─') || r.trim().contains("  "))
        {
            out.extend(block.iter().map(|r| r.trim_end().to_string()));
            continue;
        }
        let mut open = false;
        for row in &block {
            let r = row.trim();
            if r.starts_with(BOX_EDGES) {
                boxed = true;
                open = false;
                continue;
            }
            let starts_item = r.starts_with(['•', '-'])
                || r.split_once(". ")
                    .is_some_and(|(n, _)| n.chars().all(|c| c.is_ascii_digit()));
            match out.last_mut() {
                Some(last) if open && !starts_item => {
                    last.push(' ');
                    last.push_str(r);
                }
                _ => out.push(r.to_string()),
            }
            open = true;
        }
    }
    out.truncate(max);
    if boxed {
        out.push("(and a table or live block, on the slide)".into());
    }
    out.join("\n")
}

/// The screen the slide's live block opens: a narrated ring, the bench, the hang lab, a class
/// quiz on the block's item, the TP calculator or the planner.
fn open_live(s: &PresentState, app: &App, block: &Block) -> Result<Screen, ScreenError> {
    use crate::tui::screens::{planner::PlannerState, tpcalc::TpCalcState};
    match block {
        Block::Ring(r) => {
            RingParams::from_block(r).and_then(|p| narrated_ring(p, s.options.pace_ms))
        }
        Block::Quiz(q) => super::class_quiz::ClassQuizState::open(
            app,
            &s.lesson_id,
            Some(&q.id),
            s.options.countdown_s,
        )
        .map(|c| Screen::ClassQuiz(Box::new(c.with_notes(s.hub.clone(), s.notes_msg())))),
        Block::Lab(l) => crate::tui::screens::lab::LabParams::from_block(l)
            .map(|p| Screen::Lab(Box::new(crate::tui::screens::lab::LabState::new(p)))),
        Block::Tp(t) => TpCalcState::from_block(t).map(|s| Screen::TpCalc(Box::new(s))),
        Block::Plan(p) => PlannerState::from_block(p).map(|s| Screen::Planner(Box::new(s))),
        Block::Table(_) => Err(ScreenError::TableOnSlide),
    }
}

/// A ring view that plays itself at `pace_ms` per step, with a caption for every step.
pub fn narrated_ring(params: RingParams, pace_ms: u64) -> Result<Screen, ScreenError> {
    let mut r = RingState::new(params)?.narrated();
    r.speed = super::ring::speed_for(pace_ms);
    r.playing = !r.schedule.is_empty();
    Ok(Screen::Ring(Box::new(r)))
}

pub fn update(s: &mut PresentState, app: &mut App, action: Action) -> Outcome {
    let n = s.slides.len();
    if s.blank && !matches!(action, Action::Tick | Action::Resize(..) | Action::Quit) {
        // Any key brings the slide back, and only that (as `b` on a projector remote does).
        s.blank = false;
        return Outcome::Stay;
    }
    match action.verb(crate::tui::app::ScreenId::Present, Verb::from_repr) {
        Some((Verb::Blank, _)) => s.blank = true,
        Some((Verb::ClassQuiz, _)) => return class_quiz(s, app),
        None => {}
    }
    match action {
        Action::Page(d) | Action::Move(d) => {
            let next = s.index.saturating_add_signed(d as isize);
            if d > 0 && s.index + 1 >= n {
                app.status = Some("last slide: q ends the presentation".into());
            }
            s.go(next);
        }
        Action::Top => s.go(0),
        Action::Bottom => s.go(n.saturating_sub(1)),
        Action::Resize(..) | Action::Reload => {
            s.relayout(app);
            s.publish();
        }
        Action::Open => {
            let block = s.current().and_then(|sl| {
                sl.embeds
                    .iter()
                    .find(|b| !matches!(b, Block::Table(_)))
                    .cloned()
            });
            match block {
                Some(b) => match open_live(s, app, &b) {
                    Ok(screen) => return Outcome::Push(screen),
                    Err(e) => app.status = Some(e.to_string()),
                },
                None => {
                    app.status =
                        Some("no live block on this slide: r opens a ring, Q a class quiz".into())
                }
            }
        }
        // The ring a presenter opens is narrated at the talk's pace; other screens open as
        // the course map opens them.
        Action::OpenScreen(ScreenId::Ring) => {
            match narrated_ring(RingParams::default(), s.options.pace_ms) {
                Ok(screen) => return Outcome::Push(screen),
                Err(e) => app.status = Some(e.to_string()),
            }
        }
        Action::OpenScreen(id) => {
            if let Some(o) = crate::tui::screens::opener(id) {
                match (o.open)(app, 0) {
                    Ok(screen) => return Outcome::Push(screen),
                    Err(e) => app.status = Some(e.to_string()),
                }
            }
        }
        Action::Back => {
            app.theme = s.previous_theme;
            return Outcome::Pop;
        }
        _ => {}
    }
    Outcome::Stay
}

/// A class quiz on the lesson, its slide's notes following it.
fn class_quiz(s: &PresentState, app: &mut App) -> Outcome {
    match super::class_quiz::ClassQuizState::open(app, &s.lesson_id, None, s.options.countdown_s) {
        Ok(c) => {
            let c = c.with_notes(s.hub.clone(), s.notes_msg());
            Outcome::Push(Screen::ClassQuiz(Box::new(c)))
        }
        Err(e) => {
            app.status = Some(e.to_string());
            Outcome::Stay
        }
    }
}

/// "14:05 · 12:31 in" from the wall clock and the seconds since the talk began.
pub fn clock_text(secs: u64) -> String {
    let now = chrono::Local::now().format("%H:%M");
    format!("{now} · {:02}:{:02} in", secs / 60, secs % 60)
}

pub fn render(s: &PresentState, app: &App, frame: &mut Frame, area: Rect) {
    let t = &app.theme;
    if s.blank {
        return;
    }
    let Some(slide) = s.current() else {
        frame.render_widget(
            Paragraph::new(Line::styled("This lesson has no slides.", t.warn)),
            area,
        );
        return;
    };
    // Top line: where we are, the clock.
    let left = format!(
        " {} · slide {}/{}",
        s.lesson_title,
        s.index + 1,
        s.slides.len()
    );
    let right = format!("{} ", clock_text(s.started.elapsed().as_secs()));
    let pad = (area.width as usize).saturating_sub(left.width() + right.width());
    frame.render_widget(
        Paragraph::new(Line::from(vec![
            Span::styled(left, t.dim),
            Span::raw(" ".repeat(pad)),
            Span::styled(right, t.dim),
        ])),
        Rect::new(area.x, area.y, area.width, 1),
    );
    let inner_w = area.width.saturating_sub(4);
    let heading = slide.heading();
    let (big, rows) = title_layout(&heading, inner_w);
    let title_area = Rect::new(area.x + 2, area.y + 1, inner_w, rows.min(area.height));
    match big {
        Some((size, lines)) => {
            let widget = BigText::builder()
                .pixel_size(size)
                .style(t.title)
                .lines(lines.into_iter().map(Line::from).collect::<Vec<_>>())
                .alignment(Alignment::Center)
                .build();
            frame.render_widget(widget, title_area);
        }
        None => frame.render_widget(
            Paragraph::new(Line::styled(heading, t.title)).alignment(Alignment::Center),
            title_area,
        ),
    }
    let top = area.y + 1 + rows + 1;
    let h = area.bottom().saturating_sub(top);
    let width = text_width(area.width);
    let x = area.x + area.width.saturating_sub(width) / 2;
    frame.render_widget(
        Paragraph::new(slide.lines.clone()),
        Rect::new(x, top, width.min(area.width), h),
    );
}

const OWN: Context = Context::Own("Presenter mode");

/// The presenter's own verbs (`Action::Screen`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::FromRepr)]
#[repr(u8)]
pub enum Verb {
    /// Blank the screen (any key brings it back).
    Blank,
    /// A class quiz on the lesson.
    ClassQuiz,
}

impl Verb {
    pub const fn act(self) -> Action {
        Action::Screen(crate::tui::app::ScreenId::Present, self as u8, 0)
    }
}

use crate::tui::keys::{BOTTOM, CLICKER_BACK, CLICKER_NEXT, TOP};
use Key::{Char, Code};

/// This screen's keys (the `?` overlay lists them under its title).
#[rustfmt::skip]
pub const KEYS: &[Binding] = &[
    bind(OWN, CLICKER_NEXT, "next slide", Action::Page(1), Some((1, "next"))),
    bind(OWN, CLICKER_BACK, "previous slide", Action::Page(-1), Some((1, "back"))),
    bind(OWN, TOP, "first slide", Action::Top, None),
    bind(OWN, BOTTOM, "last slide", Action::Bottom, None),
    bind(OWN, &[Char('b'), Char('.'), Char('B')], "blank the screen (any key brings it back)", Verb::Blank.act(), Some((2, "blank"))),
    bind(OWN, &[Code(KeyCode::Enter)], "run this slide's live block (ring, lab, quiz)", Action::Open, Some((2, "live block"))),
    bind(OWN, &[Char('r')], "narrated ring all-reduce", Action::OpenScreen(ScreenId::Ring), Some((3, "ring"))),
    bind(OWN, &[Char('L')], "live lab: the bench and its busbw chart", Action::OpenScreen(ScreenId::Lab), None),
    bind(OWN, &[Char('H')], "hang lab: staging to PASS", Action::OpenScreen(ScreenId::Hang), None),
    bind(OWN, &[Char('Q')], "class quiz on this lesson", Verb::ClassQuiz.act(), Some((3, "class quiz"))),
];

impl crate::tui::screens::View for PresentState {
    fn update(&mut self, app: &mut App, action: Action) -> Outcome {
        update(self, app, action)
    }

    fn render(&self, app: &App, frame: &mut ratatui::Frame, area: ratatui::layout::Rect) {
        render(self, app, frame, area)
    }

    fn contexts(&self) -> Vec<crate::tui::keys::Context> {
        vec![OWN]
    }

    // The clock and the elapsed time move.
    fn tick(&self, _app: &App) -> Option<std::time::Duration> {
        Some(std::time::Duration::from_secs(1))
    }

    // A blank screen is blank: no hint bar either.
    fn hint_line(&self, _app: &App) -> Option<Line<'static>> {
        self.blank.then(Line::default)
    }

    // Blanked, any key brings the slide back.
    fn on_any_key(&self) -> Option<Action> {
        self.blank.then(|| Verb::Blank.act())
    }

    fn relayout(&mut self, app: &App) {
        PresentState::relayout(self, app);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slide_without_notes_gives_its_paragraphs_unwrapped() {
        let rows = [
            "In lesson 1 all-reduce was a black box: every",
            "rank gets the sum out.",
            "",
            "• one item that",
            "  wraps",
            "• two",
            "│ a │ b │",
            "│ 1 │ 2 │",
        ];
        let text = unwrap_text(rows.iter().map(|r| r.to_string()), 8);
        assert_eq!(
            text,
            "In lesson 1 all-reduce was a black box: every rank gets the sum out.\n\
             • one item that wraps\n• two\n(and a table or live block, on the slide)"
        );
        assert_eq!(
            unwrap_text(rows[..5].iter().map(|r| r.to_string()), 1)
                .lines()
                .count(),
            1
        );
    }

    /// Display math keeps its rows and their columns in the notes (joined, it was noise).
    #[test]
    fn display_math_keeps_its_rows_in_the_notes() {
        let rows = [
            "  The ring sends",
            "",
            "        N−1",
            "  2 · ───── · M",
            "         N",
            "",
            "  each.",
        ];
        let text = unwrap_text(rows.iter().map(|r| r.to_string()), 8);
        assert_eq!(
            text,
            "The ring sends\n        N−1\n  2 · ───── · M\n         N\neach."
        );
    }

    #[test]
    fn notes_comments_are_found_under_their_heading() {
        let body = "# Title\n<!-- notes: welcome everyone -->\n## Ring `all-reduce`\ntext\n\
                    <!-- notes:\nask who has\nseen NCCL\n-->\n```\n<!-- notes: not in code -->\n```\n";
        let n = section_notes(body);
        assert_eq!(
            n,
            vec![
                ("title".to_string(), "welcome everyone".to_string()),
                (
                    "ring-all-reduce".to_string(),
                    "ask who has\nseen NCCL".to_string()
                ),
            ]
        );
    }

    #[test]
    fn long_titles_fall_back_to_smaller_big_text_then_plain() {
        assert_eq!(title_layout("Numbers", 100).1, 4);
        let (big, rows) = title_layout("Two all-reduces per transformer layer", 100);
        assert_eq!(rows, 8);
        assert!(matches!(big, Some((PixelSize::Quadrant, ref l)) if l.len() == 2));
        assert_eq!(title_layout(&"x".repeat(300), 100).1, 1);
    }

    /// The big title replaces the heading: no slide starts with the heading's rule or a
    /// wrapped title row (a stray "──────" under each title was the bug).
    #[test]
    fn no_slide_starts_with_the_headings_rule() {
        let mut app = App::new(
            crate::course::Course::embedded(),
            crate::tui::theme::Theme::color(),
        );
        app.width = 80;
        app.height = 24;
        for (entry, e) in app.course.entries.iter().enumerate() {
            let title = e.lesson.as_ref().map_or("", |l| l.meta.title.as_str());
            for s in slides(&app, entry, title) {
                let first = s.lines.iter().map(line_text).find(|l| !l.trim().is_empty());
                if let Some(first) = first {
                    let t = first.trim();
                    assert!(
                        !t.chars().all(|c| c == '─' || c == '═'),
                        "{title}: slide “{}” starts with a rule",
                        s.title
                    );
                }
            }
        }
    }
}
