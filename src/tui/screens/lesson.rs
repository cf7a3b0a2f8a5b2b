//! The lesson reader: scroll, section jumps, `/` search, raw-TeX toggle, and an error panel
//! for a lesson with problems (the rest of the course keeps working).

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use crate::course::Block;
use crate::study::progress::{Place, ReadingNote};
use crate::study::reading::{self, Reading};
use crate::study::track::Step;
use crate::tui::app::{Action, App, Outcome, Screen};
use crate::tui::error::ScreenError;
use crate::tui::keys::{
    BOTTOM, Binding, Context, DOWN, Key, PAGE_DOWN, PAGE_UP, RELOAD, TOP, UP, bind,
};
use crate::tui::markdown::{self, RenderOptions, Rendered};
use crate::tui::screens::ring::{RingParams, RingState};
use Key::{Char, Code};
use crossterm::event::KeyCode;

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
    /// Started from the course map (`/` there): a query this lesson lacks goes straight on
    /// to the next lesson that has it.
    pub course_wide: bool,
    /// The matches `n` steps through in each lesson (by entry, those with any): lines of its
    /// rendered text, as here, so the count is what `n` finds. Drill files are not searched.
    pub course: Vec<(usize, usize)>,
}

pub struct LessonState {
    pub entry: usize,
    pub id: Option<String>,
    pub scroll: usize,
    pub rendered: Rendered,
    /// Plain text of each rendered line, for search.
    pub plain: Vec<String>,
    pub search: Search,
    /// The selected link (index into `rendered.links`): Enter follows it.
    pub link: Option<usize>,
    /// What of the lesson has been on screen long enough to read.
    pub reading: Reading,
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
            link: None,
            reading: Reading::default(),
        };
        s.relayout(app);
        s
    }

    /// [`LessonState::open`] where the learner left it (its section and the line under its
    /// heading); at the top for a lesson never opened.
    pub fn open_resumed(app: &App, entry: usize) -> Self {
        let mut s = Self::open(app, entry);
        if let Some(place) =
            s.id.as_deref()
                .and_then(|id| app.progress.place(id))
                .cloned()
        {
            let base = match place.title.is_empty() {
                true => Some(0),
                false => {
                    let heads = &s.rendered.headings;
                    heads
                        .get(place.section)
                        .filter(|h| h.title == place.title)
                        .or_else(|| heads.iter().find(|h| h.title == place.title))
                        .map(|h| h.line)
                }
            };
            if let Some(base) = base {
                s.scroll = (base + place.line).min(s.max_scroll(app));
            }
        }
        s
    }

    /// Where the reader is: the section at the top of the screen and the line under its heading.
    pub fn place(&self) -> Place {
        match self.current_section() {
            Some(i) => Place {
                section: i,
                title: self.rendered.headings[i].title.clone(),
                line: self.scroll - self.rendered.headings[i].line,
            },
            None => Place {
                section: 0,
                title: String::new(),
                line: self.scroll,
            },
        }
    }

    /// What the reader reports to progress: how much is read, per section, and the place.
    pub fn reading_note(&self) -> ReadingNote {
        ReadingNote {
            read: self.reading.fraction(),
            sections: self.reading.shares(),
            place: Some(self.place()),
        }
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
                    slides: false,
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
        for l in &mut rendered.links {
            l.line += offset;
        }
        self.link = self.link.filter(|&i| i < rendered.links.len());
        lines.append(&mut rendered.lines);
        // Room for the next step under the lesson's last line (drawn by `render`, which knows
        // what comes next).
        if entry.lesson.is_some() {
            lines.extend([Line::raw(""), Line::raw("")]);
        }
        rendered.lines = lines;
        self.plain = rendered.lines.iter().map(line_text).collect();
        // Reading is kept per section across a new layout; a lesson just opened starts from
        // what progress has.
        let shares = if self.reading == Reading::default() {
            self.id
                .as_deref()
                .and_then(|id| app.progress.lessons.get(id))
                .map(|p| p.sections.clone())
                .unwrap_or_default()
        } else {
            self.reading.shares()
        };
        let heads: Vec<usize> = rendered.headings.iter().map(|h| h.line).collect();
        let words = self.plain.iter().map(|l| reading::words(l)).collect();
        self.reading = Reading::new(words, &heads, &shares);
        // Keep the reader at the same relative place across a resize.
        let ratio = self.scroll as f64 / old_len as f64;
        self.scroll = (ratio * rendered.lines.len() as f64) as usize;
        self.rendered = rendered;
        if !self.search.query.is_empty() {
            self.search.hits = find(&self.plain, &self.search.query);
            // Another width or TeX mode wraps every lesson anew: count again.
            self.search.course = course_matches(app, &self.search.query);
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

    /// How far the bottom of the screen has come (the header's percentage; what is read is
    /// [`LessonState::reading`]'s).
    pub fn position(&self, app: &App) -> f64 {
        let n = self.rendered.lines.len();
        if n == 0 {
            return 1.0;
        }
        ((self.scroll + viewport(app)) as f64 / n as f64).min(1.0)
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

impl LessonState {
    /// Every section of the lesson has been read.
    pub fn is_read(&self) -> bool {
        self.reading.fraction() >= crate::study::progress::DONE_FRACTION
    }

    /// The last screen of the lesson is shown.
    pub fn at_end(&self, app: &App) -> bool {
        self.scroll >= self.max_scroll(app)
    }

    /// What comes after this lesson: its quiz until every item is passed, then the next
    /// step of the learner's track.
    pub fn next_step(&self, app: &App) -> Option<Step> {
        let id = self.id.as_deref()?;
        let quiz = Step::Quiz(id.to_string());
        if !app.quiz_of(id).is_empty() && !app.planner().done(&quiz) {
            return Some(quiz);
        }
        app.next_step(Some(&Step::Read(id.to_string())))
            .map(|p| p.step)
    }

    /// Leave the lesson (its reading saved) for the next step.
    fn go_on(&self, app: &mut App) -> Outcome {
        let Some(step) = self.next_step(app) else {
            return Outcome::Stay;
        };
        if let Some(id) = &self.id {
            app.record_lesson(id, &self.reading_note());
        }
        match super::track::open_step(app, &step) {
            Ok(screen) => Outcome::Replace(screen),
            Err(e) => {
                app.status = Some(e.to_string());
                Outcome::Stay
            }
        }
    }

    /// The lesson's last line: "→ Next (Enter): quiz on this lesson".
    fn next_line(&self, app: &App) -> Option<Line<'static>> {
        let step = self.next_step(app)?;
        let t = &app.theme;
        Some(Line::from(vec![
            Span::styled("→ Next (", t.strong),
            Span::styled("Enter", t.key),
            Span::styled("): ", t.strong),
            Span::styled(self.step_words(app, &step), t.accent),
        ]))
    }

    /// A step in words, "quiz on this lesson" for this lesson's quiz.
    fn step_words(&self, app: &App, step: &Step) -> String {
        match step {
            Step::Quiz(id) if Some(id) == self.id.as_ref() => "quiz on this lesson".to_string(),
            s => super::track::step_title(app, s),
        }
    }

    /// "Enter next: quiz on this lesson" at the end of the lesson.
    fn next_hint(&self, app: &App) -> Option<Vec<Span<'static>>> {
        if !self.at_end(app) || self.search.editing {
            return None;
        }
        let step = self.next_step(app)?;
        let what = self.step_words(app, &step);
        let t = &app.theme;
        Some(vec![
            Span::styled("Enter", t.key),
            Span::styled(format!(" next: {what}  "), t.accent),
        ])
    }
}

/// The lines of each lesson's rendered text (at this width) that contain `query`, by entry:
/// what `n` steps through there.
fn course_matches(app: &App, query: &str) -> Vec<(usize, usize)> {
    if query.is_empty() {
        return Vec::new();
    }
    (0..app.course.entries.len())
        .filter(|&i| app.course.entries[i].lesson.is_some())
        .filter_map(|i| {
            let n = find(&LessonState::open(app, i).plain, query).len();
            (n > 0).then_some((i, n))
        })
        .collect()
}

impl LessonState {
    /// "“ring”: match 2 of 9 here · n goes on to 31 in 5 other lessons" (fits 80 columns with
    /// a query of up to a dozen characters).
    fn search_summary(&self) -> String {
        let q = &self.search.query;
        let here = match (self.search.current, self.search.hits.len()) {
            (_, 0) => "no match here".to_string(),
            (Some(c), n) => format!("match {} of {n} here", c + 1),
            (None, n) => format!("{n} here"),
        };
        let others: Vec<_> = self
            .search
            .course
            .iter()
            .filter(|(i, _)| *i != self.entry)
            .collect();
        let total: usize = others.iter().map(|(_, n)| n).sum();
        match others.len() {
            0 => format!("“{q}”: {here} · none in other lessons"),
            k => format!(
                "“{q}”: {here} · n goes on to {total} in {k} other lesson{}",
                if k == 1 { "" } else { "s" }
            ),
        }
    }

    /// The next lesson after this one (or before, `d` < 0), wrapping, whose rendered text has
    /// the query.
    fn next_lesson_with(&self, app: &App, d: i32) -> Option<usize> {
        // (the course's matches were counted when the search was made)
        let n = app.course.entries.len();
        (1..n)
            .map(|k| {
                let k = if d > 0 { k } else { n - k };
                (self.entry + k) % n
            })
            .find(|i| self.search.course.iter().any(|(e, _)| e == i))
    }
}

/// Where a link within the course goes: the entry (a lesson file, or this one for `#anchor`)
/// and the heading index its anchor names.
fn resolve_link(app: &App, here: usize, dest: &str) -> Result<(usize, Option<String>), String> {
    let (file, anchor) = dest.split_once('#').unwrap_or((dest, ""));
    let entry = if file.is_empty() {
        here
    } else {
        let name = std::path::Path::new(file)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        app.course
            .entries
            .iter()
            .position(|e| {
                std::path::Path::new(&e.path)
                    .file_name()
                    .is_some_and(|n| n.to_string_lossy() == name)
            })
            .ok_or_else(|| format!("the link goes to {dest}, which is not in this course"))?
    };
    Ok((entry, (!anchor.is_empty()).then(|| anchor.to_string())))
}

impl LessonState {
    /// Scroll to the heading whose anchor is `anchor`; false when there is none.
    fn scroll_to_anchor(&mut self, app: &App, anchor: &str) -> bool {
        let Some(h) = self
            .rendered
            .headings
            .iter()
            .find(|h| markdown::slug(&h.title) == anchor)
        else {
            return false;
        };
        self.scroll = h.line.min(self.max_scroll(app));
        true
    }

    /// Follow the selected link: another lesson opens on top (q comes back here), an anchor
    /// in this lesson scrolls to it.
    fn follow(&mut self, app: &mut App) -> Outcome {
        let Some(link) = self.link.and_then(|i| self.rendered.links.get(i)).cloned() else {
            return Outcome::Stay;
        };
        let (entry, anchor) = match resolve_link(app, self.entry, &link.dest) {
            Ok(x) => x,
            Err(e) => {
                app.status = Some(e);
                return Outcome::Stay;
            }
        };
        if entry == self.entry {
            if let Some(a) = anchor
                && !self.scroll_to_anchor(app, &a)
            {
                app.status = Some(format!("no heading #{a} in this lesson"));
            }
            self.link = None;
            return Outcome::Stay;
        }
        let mut next = LessonState::open(app, entry);
        if let Some(a) = anchor
            && !next.scroll_to_anchor(app, &a)
        {
            app.status = Some(format!("no heading #{a} there; opened at the top"));
        }
        if app.status.is_none() {
            app.status = Some("q comes back here".into());
        }
        Outcome::Push(Screen::Lesson(Box::new(next)))
    }

    /// Select the next (`d` > 0) or previous link, starting from the screen's top, and bring
    /// it into view.
    fn step_link(&mut self, app: &mut App, d: i32) {
        let links = &self.rendered.links;
        if links.is_empty() {
            app.status = Some("no links in this lesson".into());
            return;
        }
        let end = self.scroll + viewport(app);
        let on_screen = |i: usize| (self.scroll..end).contains(&links[i].line);
        let next = match self.link.filter(|&i| on_screen(i)) {
            Some(i) => (i as i64 + i64::from(d)).rem_euclid(links.len() as i64) as usize,
            None if d > 0 => links
                .iter()
                .position(|l| l.line >= self.scroll)
                .unwrap_or(0),
            None => links
                .iter()
                .rposition(|l| l.line < end)
                .unwrap_or(links.len() - 1),
        };
        self.link = Some(next);
        let line = links[next].line;
        if !(self.scroll..end).contains(&line) {
            self.scroll = line.saturating_sub(2).min(self.max_scroll(app));
        }
        let text = self.plain.get(line).map_or("", |l| l.as_str());
        let shown = text
            .split(markdown::LINK_MARK)
            .nth(1)
            .map(|t| t.split_whitespace().take(4).collect::<Vec<_>>().join(" "))
            .unwrap_or_default();
        app.status = Some(format!(
            "→ {shown} ({}) · Enter follows · f next link",
            links[next].dest
        ));
    }
}

/// The screen an embedded block opens.
fn open_embed(block: &Block) -> Result<Screen, ScreenError> {
    use crate::tui::screens::{planner::PlannerState, tpcalc::TpCalcState};
    match block {
        Block::Ring(r) => RingParams::from_block(r)
            .and_then(RingState::new)
            .map(|r| Screen::Ring(Box::new(r))),
        Block::Tp(t) => TpCalcState::from_block(t).map(|s| Screen::TpCalc(Box::new(s))),
        Block::Plan(p) => PlannerState::from_block(p).map(|s| Screen::Planner(Box::new(s))),
        Block::Lab(l) => crate::tui::screens::lab::LabParams::from_block(l)
            .map(|p| Screen::Lab(Box::new(crate::tui::screens::lab::LabState::new(p)))),
        _ => Err(ScreenError::NothingToOpen),
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

/// Leave this lesson for `entry` with the same query, at its first match (`d` > 0) or its
/// last, reading progress kept.
fn go_on_to(s: &mut LessonState, app: &mut App, entry: usize, d: i32) {
    if let Some(id) = &s.id {
        app.record_lesson(id, &s.reading_note());
    }
    let search = std::mem::take(&mut s.search);
    *s = LessonState::open(app, entry);
    s.search.query = search.query;
    s.search.course_wide = search.course_wide;
    s.search.course = search.course;
    s.search.hits = find(&s.plain, &s.search.query);
    let at = if d > 0 {
        0
    } else {
        s.search.hits.len().saturating_sub(1)
    };
    if let Some(&line) = s.search.hits.get(at) {
        s.search.current = Some(at);
        s.scroll = line.saturating_sub(2).min(s.max_scroll(app));
    }
    app.status = Some(s.search_summary());
}

pub const OWN: Context = Context::Own("Lesson");

/// The lesson reader's own verbs (`Action::Screen`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::FromRepr)]
#[repr(u8)]
pub enum Verb {
    /// Scroll to the next (+1) or previous (-1) section.
    Section,
    /// Start typing a search.
    Search,
    /// Go to the next (+1) or previous (-1) match of the search.
    Match,
    /// Esc clears an active search; with none, it leaves like `q`.
    ClearSearchOrBack,
    /// Math as raw TeX, or rendered.
    ToggleTex,
    /// Select the next (+1) or previous (-1) link within the course.
    Link,
    /// A quiz on this lesson.
    Quiz,
}

impl Verb {
    /// The action, with an amount (+1/−1 for verbs that go both ways).
    pub const fn by(self, d: i32) -> Action {
        Action::Screen(crate::tui::app::ScreenId::Lesson, self as u8, d)
    }

    pub const fn act(self) -> Action {
        self.by(0)
    }
}

#[rustfmt::skip]
pub const KEYS: &[Binding] = &[
    bind(OWN, DOWN, "scroll down", Action::Move(1), Some((4, "scroll"))),
    bind(OWN, UP, "scroll up", Action::Move(-1), None),
    bind(OWN, PAGE_DOWN, "page down", Action::Page(1), Some((1, "page"))),
    bind(OWN, PAGE_UP, "page up", Action::Page(-1), None),
    bind(OWN, TOP, "top", Action::Top, None),
    bind(OWN, BOTTOM, "bottom", Action::Bottom, None),
    bind(OWN, &[Char(']'), Code(KeyCode::Tab)], "next section", Verb::Section.by(1), Some((2, "section"))),
    bind(OWN, &[Char('['), Code(KeyCode::BackTab)], "previous section", Verb::Section.by(-1), None),
    bind(OWN, &[Char('/')], "search", Verb::Search.act(), Some((2, "search"))),
    bind(OWN, &[Char('n')], "next match", Verb::Match.by(1), None),
    bind(OWN, &[Char('N')], "previous match", Verb::Match.by(-1), None),
    bind(OWN, &[Char('t')], "raw TeX on/off", Verb::ToggleTex.act(), None),
    bind(OWN, &[Code(KeyCode::Enter)], "link, ring/TP/planner, or next step", Action::Open, None),
    bind(OWN, RELOAD, "reload lessons", Action::Reload, None),
    bind(OWN, &[Code(KeyCode::Esc)], "clear the search (with none: back)", Verb::ClearSearchOrBack.act(), None),
    bind(OWN, &[Char('f')], "next link (→ glossary, lessons)", Verb::Link.by(1), Some((3, "link"))),
    bind(OWN, &[Char('F')], "select the previous link", Verb::Link.by(-1), None),
    bind(OWN, &[Char('Q')], "quiz on this lesson", Verb::Quiz.act(), Some((3, "quiz"))),
];

pub fn update(s: &mut LessonState, app: &mut App, action: Action) -> Outcome {
    // The time since the app's last action, with this screen on top, went to what it showed.
    if let Some(since) = app.last_action {
        let seconds = app.now.saturating_duration_since(since).as_secs_f64();
        let shown = s.scroll..s.scroll + viewport(app);
        s.reading.credit(shown, seconds, app.read_wpm);
    }
    let outcome = update_inner(s, app, action);
    if let Some(id) = s.id.clone() {
        app.note_lesson(&id, &s.reading_note());
        // A section newly read is saved at once; the rest when the lesson is left.
        let read = s.reading.sections_read();
        if app
            .sections_saved
            .insert(id, read)
            .is_some_and(|was| was != read)
        {
            app.save_progress();
        }
    }
    outcome
}

fn update_inner(s: &mut LessonState, app: &mut App, action: Action) -> Outcome {
    if s.search.editing {
        match action {
            Action::Edit(r) => s.search.field.apply(r),
            Action::InputCancel => s.search.editing = false,
            Action::InputSubmit => submit_search(s, app),
            _ => {}
        }
        return Outcome::Stay;
    }
    let done = match action.verb(crate::tui::app::ScreenId::Lesson, Verb::from_repr) {
        Some((verb, d)) => on_verb(s, app, verb, d),
        None => on_action(s, app, action),
    };
    done.unwrap_or(Outcome::Stay)
}

/// Enter on the search line: the matches, from where the reader is (or the next lesson that
/// has the text, for a search from the course map).
fn submit_search(s: &mut LessonState, app: &mut App) {
    let max = s.max_scroll(app);
    s.search.editing = false;
    s.search.query = s.search.field.value().to_string();
    s.search.hits = find(&s.plain, &s.search.query);
    s.search.course = course_matches(app, &s.search.query);
    s.search.current = s.search.hits.iter().position(|&l| l >= s.scroll).or((!s
        .search
        .hits
        .is_empty())
    .then_some(0));
    if let Some(i) = s.search.current {
        s.scroll = s.search.hits[i].saturating_sub(2).min(max);
    }
    // A search from the course map goes to where the text is.
    if s.search.hits.is_empty()
        && s.search.course_wide
        && let Some(entry) = s.next_lesson_with(app, 1)
    {
        go_on_to(s, app, entry, 1);
        return;
    }
    app.status = Some(s.search_summary());
}

/// What every screen understands; None: the reading position is noted after it.
fn on_action(s: &mut LessonState, app: &mut App, action: Action) -> Option<Outcome> {
    let max = s.max_scroll(app);
    let page = viewport(app).saturating_sub(2).max(1) as isize;
    match action {
        Action::Move(d) => s.scroll = s.scroll.saturating_add_signed(d as isize).min(max),
        Action::Page(d) => s.scroll = s.scroll.saturating_add_signed(d as isize * page).min(max),
        Action::Top => s.scroll = 0,
        Action::Bottom => s.scroll = max,
        Action::Resize(..) | Action::Reload => s.relayout(app),
        Action::Open
            if s.link
                .and_then(|i| s.rendered.links.get(i))
                .is_some_and(|l| (s.scroll..s.scroll + viewport(app)).contains(&l.line)) =>
        {
            return Some(s.follow(app));
        }
        // At the end of the lesson, Enter takes the next step (the hint bar names it).
        Action::Open if s.at_end(app) && s.next_step(app).is_some() => {
            return Some(s.go_on(app));
        }
        Action::Open => match s.visible_embed(app).map(open_embed) {
            Some(Ok(screen)) => return Some(Outcome::Push(screen)),
            Some(Err(e)) => app.status = Some(e.to_string()),
            None => {
                app.status = Some(
                    "nothing to open here: scroll to a ring view, TP calculator or planner".into(),
                )
            }
        },
        Action::Back => return Some(leave(s, app)),
        _ => {}
    }
    None
}

/// Leave the lesson, saving how far it was read and where.
fn leave(s: &LessonState, app: &mut App) -> Outcome {
    if let Some(id) = &s.id {
        app.record_lesson(id, &s.reading_note());
    }
    Outcome::Pop
}

/// The lesson's own verbs; None: the reading position is noted after it.
fn on_verb(s: &mut LessonState, app: &mut App, verb: Verb, d: i32) -> Option<Outcome> {
    let max = s.max_scroll(app);
    match verb {
        Verb::Section => {
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
        Verb::Search => {
            s.search.editing = true;
            s.search.field.clear();
        }
        Verb::Match if !s.search.query.is_empty() => return step_match(s, app, d),
        Verb::Match => app.status = Some("no search: press / to search".into()),
        Verb::ToggleTex => {
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
        Verb::Link => s.step_link(app, d),
        Verb::Quiz => match s.id.as_deref().map(|id| super::quiz::open(app, Some(id))) {
            Some(Ok(q)) => return Some(Outcome::Push(Screen::Quiz(Box::new(q)))),
            Some(Err(e)) => app.status = Some(e.to_string()),
            None => app.status = Some("this file is not a lesson; no quiz".into()),
        },
        Verb::ClearSearchOrBack if !s.search.query.is_empty() => {
            s.search = Search::default();
            app.status = Some("search cleared (Esc or q again leaves the lesson)".into());
            return Some(Outcome::Stay);
        }
        Verb::ClearSearchOrBack => return Some(leave(s, app)),
    }
    None
}

/// The next (+1) or previous (-1) match, going on to the next lesson that has the text past
/// the last (or the first) here.
fn step_match(s: &mut LessonState, app: &mut App, d: i32) -> Option<Outcome> {
    let max = s.max_scroll(app);
    let n = s.search.hits.len() as isize;
    let cur = s.search.current.map(|c| c as isize);
    let past_end = match cur {
        None => true,
        Some(c) => (d > 0 && c + 1 >= n) || (d < 0 && c == 0),
    };
    // Past the last match (or the first, going back), the search goes on in the next
    // lesson that has the text, in course order.
    if past_end && let Some(entry) = s.next_lesson_with(app, d) {
        go_on_to(s, app, entry, d);
        return Some(Outcome::Stay);
    }
    if n > 0 {
        let next = (cur.unwrap_or(0) + d as isize).rem_euclid(n) as usize;
        s.search.current = Some(next);
        s.scroll = s.search.hits[next].saturating_sub(2).min(max);
    }
    app.status = Some(s.search_summary());
    None
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
    let pct = format!("{:>3.0}%", s.position(app) * 100.0);
    let left = format!(" {title}");
    let read = if s.is_read() { "● read  " } else { "" };
    let right = format!("{read}{section}{pct} ");
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
            if i + 1 == s.rendered.lines.len()
                && let Some(next) = s.next_line(app)
            {
                return next;
            }
            let l = match s.link.and_then(|k| s.rendered.links.get(k)) {
                Some(link) if link.line == i => mark_link(l, t.selection),
                _ => l.clone(),
            };
            if !s.search.query.is_empty() && s.search.hits.binary_search(&i).is_ok() {
                highlight(&l, &s.search.query, hit_style)
            } else {
                l
            }
        })
        .collect();
    frame.render_widget(
        Paragraph::new(lines),
        Rect::new(x, area.y + 1, width.min(area.width), h as u16),
    );
}

/// The line with its (first) link marker and the word after it in `style`: the selected link.
fn mark_link(line: &Line<'static>, style: Style) -> Line<'static> {
    let mut out = line.clone();
    if let Some(k) = out
        .spans
        .iter()
        .position(|s| s.content.contains(markdown::LINK_MARK))
    {
        for span in out.spans.iter_mut().skip(k).take(2) {
            span.style = span.style.patch(style);
        }
    }
    out
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

impl crate::tui::screens::View for LessonState {
    fn update(&mut self, app: &mut App, action: Action) -> Outcome {
        update(self, app, action)
    }

    fn render(&self, app: &App, frame: &mut ratatui::Frame, area: ratatui::layout::Rect) {
        render(self, app, frame, area)
    }

    fn contexts(&self) -> Vec<Context> {
        vec![OWN]
    }

    fn takes_text(&self) -> bool {
        self.search.editing
    }

    fn hint_lead(&self, app: &App) -> Option<Vec<Span<'static>>> {
        self.next_hint(app)
    }

    /// Until the lesson is read, a tick a second credits what is on screen (the header says
    /// "● read" when it is, without waiting for a key).
    fn tick(&self, app: &App) -> Option<std::time::Duration> {
        (!self.is_read() && app.help.is_none() && !self.search.editing)
            .then(|| std::time::Duration::from_secs(1))
    }

    fn hint_line(&self, app: &App) -> Option<Line<'static>> {
        if !self.search.editing {
            return None;
        }
        let t = &app.theme;
        let mut spans = vec![Span::styled("/", t.key)];
        spans.extend(self.search.field.spans(Style::default(), t.dim));
        spans.push(Span::styled(
            "   Enter find · Esc cancel · Ctrl-U clear · Ctrl-W word",
            t.dim,
        ));
        Some(Line::from(spans))
    }

    fn relayout(&mut self, app: &App) {
        LessonState::relayout(self, app);
    }
}
