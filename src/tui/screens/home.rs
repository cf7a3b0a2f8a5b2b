//! The course map: lessons in order with prerequisites, minutes and progress marks.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Wrap};

use crate::course::lesson::Entry;
use crate::tui::app::{Action, App, Outcome, Screen};
use crate::tui::keys::{BOTTOM, Binding, Context, DOWN, Key, RELOAD, TOP, UP, bind};
use crate::tui::screens::lesson::LessonState;
use Key::{Char, Code};
use crossterm::event::KeyCode;

/// The course map's keys (the screens' openers join them: `screens::OPENER_KEYS`).
pub const OWN: Context = Context::Own("Course map");

/// The course map's own verbs (`Action::Screen`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::FromRepr)]
#[repr(u8)]
pub enum Verb {
    /// Search the course, from the selected lesson on.
    Search,
    /// Present the selected lesson as slides.
    Present,
    /// A quiz on the selected lesson.
    Quiz,
    /// Drill what is due.
    Drill,
    /// A mock interview: recall questions from the drills with their follow-ups.
    Mock,
    /// The next step of the learner's track (the header names it).
    NextStep,
    /// Esc on the map: it does not quit (a second Esc out of a quiz would), q does.
    EscHere,
}

impl Verb {
    pub const fn act(self) -> Action {
        Action::Screen(crate::tui::app::ScreenId::Home, self as u8, 0)
    }
}

#[rustfmt::skip]
pub const KEYS: &[Binding] = &[
    bind(OWN, DOWN, "next lesson", Action::Move(1), Some((6, "next"))),
    bind(OWN, UP, "previous lesson", Action::Move(-1), None),
    bind(OWN, &[Code(KeyCode::Enter), Char('l'), Code(KeyCode::Right)], "open lesson", Action::Open, Some((1, "open"))),
    bind(OWN, TOP, "first lesson", Action::Top, None),
    bind(OWN, BOTTOM, "last lesson", Action::Bottom, None),
    bind(OWN, RELOAD, "reload lessons", Action::Reload, None),
    bind(OWN, &[Code(KeyCode::Esc)], "nothing here (q quits)", Verb::EscHere.act(), None),
    bind(OWN, &[Char('n')], "the next step of your track (the header names it)", Verb::NextStep.act(), Some((1, "next step"))),
    bind(OWN, &[Char('/')], "search the course", Verb::Search.act(), None),
    bind(OWN, &[Char('Q')], "quiz on this lesson", Verb::Quiz.act(), Some((2, "quiz"))),
    bind(OWN, &[Char('D')], "drill what is due", Verb::Drill.act(), Some((2, "drill"))),
    bind(OWN, &[Char('M')], "mock interview (six questions, follow-ups)", Verb::Mock.act(), Some((4, "mock interview"))),
    bind(OWN, &[Char('P')], "present this lesson (slides, for a class)", Verb::Present.act(), Some((5, "present"))),
];

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct HomeState {
    pub selected: usize,
}

pub fn update(s: &mut HomeState, app: &mut App, action: Action) -> Outcome {
    let n = app.course.entries.len();
    if n > 0 {
        s.selected = s.selected.min(n - 1);
    }
    if let Some((verb, _)) = action.verb(crate::tui::app::ScreenId::Home, Verb::from_repr) {
        return on_verb(s, app, verb);
    }
    match action {
        Action::Move(d) if n > 0 => {
            s.selected = s.selected.saturating_add_signed(d as isize).min(n - 1);
        }
        Action::Top => s.selected = 0,
        Action::Bottom => s.selected = n.saturating_sub(1),
        Action::Open if n > 0 => {
            return Outcome::Push(Screen::Lesson(Box::new(LessonState::open_resumed(
                app, s.selected,
            ))));
        }
        // A screen's own opener (declared in its file, named on its `screens!` line).
        Action::OpenScreen(id) => {
            if let Some(o) = crate::tui::screens::opener(id) {
                match (o.open)(app, s.selected) {
                    Ok(screen) => return Outcome::Push(screen),
                    Err(e) => app.status = Some(e.to_string()),
                }
            }
        }
        Action::Back => return Outcome::Pop,
        _ => {}
    }
    Outcome::Stay
}

fn on_verb(s: &mut HomeState, app: &mut App, verb: Verb) -> Outcome {
    let n = app.course.entries.len();
    match verb {
        // Search the course: the prompt opens in the selected lesson, and a query it lacks
        // goes on to the next lesson that has it (n and N then walk the whole course).
        Verb::Search if n > 0 => {
            let mut l = LessonState::open(app, s.selected);
            l.search.editing = true;
            l.search.course_wide = true;
            app.status = Some("search the course: type, then Enter".into());
            return Outcome::Push(Screen::Lesson(Box::new(l)));
        }
        Verb::Present if n > 0 => {
            match super::present::PresentState::start(app, s.selected, Default::default()) {
                Ok(p) => {
                    p.publish();
                    return Outcome::Push(Screen::Present(Box::new(p)));
                }
                Err(e) => app.status = Some(e.to_string()),
            }
        }
        Verb::Search | Verb::Present => {}
        Verb::Quiz => {
            let id = app
                .course
                .entries
                .get(s.selected)
                .and_then(|e| e.lesson.as_ref())
                .map(|l| l.meta.id.clone());
            match id.map(|id| super::quiz::open(app, Some(&id))) {
                Some(Ok(q)) => return Outcome::Push(Screen::Quiz(Box::new(q))),
                Some(Err(e)) => app.status = Some(e.to_string()),
                None => app.status = Some("this file is not a lesson; no quiz".into()),
            }
        }
        Verb::EscHere if app.stack.len() <= app.launched.max(1) => {
            app.status = Some("q quits ringlab (Esc does not, here)".into())
        }
        // Under a screen the command line opened, the map is not the root: Esc goes back.
        Verb::EscHere => return Outcome::Pop,
        Verb::NextStep => match app.next_step(None) {
            Some(p) => match super::track::open_step(app, &p.step) {
                Ok(screen) => return Outcome::Push(screen),
                Err(e) => app.status = Some(e.to_string()),
            },
            None => app.status = Some("every step of your track is done (T: tracks)".into()),
        },
        Verb::Drill => {
            let d = super::drill::open(app, &super::drill::DrillOptions::default());
            return Outcome::Push(Screen::Quiz(Box::new(d)));
        }
        Verb::Mock => {
            let opts = super::drill::DrillOptions {
                mock: true,
                ..Default::default()
            };
            let d = super::drill::open(app, &opts);
            return Outcome::Push(Screen::Quiz(Box::new(d)));
        }
    }
    Outcome::Stay
}

/// A progress mark that reads without colour: ✓ read and its quiz passed, ● read (quiz to
/// pass), ◐ started, ○ new, ✗ broken.
pub fn mark(app: &App, entry: &Entry) -> &'static str {
    use crate::study::progress::LessonMark;
    if entry.has_errors() {
        return "✗";
    }
    match entry.lesson.as_ref().map(|l| {
        app.progress
            .lesson_state(&l.meta.id, app.quiz_of(&l.meta.id))
    }) {
        Some(LessonMark::Done) => "✓",
        Some(LessonMark::Read) => "●",
        Some(LessonMark::Started) => "◐",
        _ => "○",
    }
}

/// Back on the map from a lesson, a quiz or the tracks: the cursor goes to the lesson of the
/// next step.
pub fn point_at_next_step(app: &mut App) {
    let Some(entry) = app
        .next_step(None)
        .and_then(|p| p.step.lesson().and_then(|id| app.course.position_of(id)))
    else {
        return;
    };
    if let (1, Some(Screen::Home(h))) = (app.stack.len(), app.stack.first_mut()) {
        h.selected = entry;
    }
}

/// " ringlab · Next (n): quiz on lesson 1, The collectives": the header's first line.
fn next_line(app: &App, width: usize) -> Line<'static> {
    let t = &app.theme;
    let mut spans = vec![Span::styled(" ringlab ", t.title)];
    let Some(next) = app.next_step(None) else {
        spans.push(Span::styled(
            "· every step of your track is done (T: tracks)",
            t.ok,
        ));
        return Line::from(spans);
    };
    let title = super::track::step_title(app, &next.step);
    let room = width.saturating_sub(" ringlab · Next (n): ".len());
    spans.extend([
        Span::styled("· Next (", t.strong),
        Span::styled("n", t.key),
        Span::styled("): ", t.strong),
        Span::styled(crate::tui::markdown::ellipsize(&title, room), t.accent),
    ]);
    Line::from(spans)
}

/// "course 0/35 (T)": the track followed and how many of its steps are done.
fn track_span(app: &App) -> String {
    let track = app.track();
    let steps = app.planner().steps(track);
    let short = match track {
        crate::study::track::TrackId::Course => "course",
        crate::study::track::TrackId::Interview => "interview sprint",
    };
    let done = steps.iter().filter(|p| p.done).count();
    format!("{short} {done}/{} (T)", steps.len())
}

/// How much of a started lesson (◐) is read, in place of its minutes: "40% read".
fn partial(app: &App, e: &Entry, mark: &str) -> Option<String> {
    let l = e.lesson.as_ref().filter(|_| mark == "◐")?;
    let f = app.progress.read_fraction(&l.meta.id)?;
    Some(format!("{:.0}% read", (f * 100.0).floor()))
}

/// " 3 of 17 lessons done · hang lab: 1 of 12 scenarios solved (H)": the course's progress
/// and the hang lab's (its list marks each solved scenario ✓).
fn progress_line(app: &App) -> Line<'static> {
    let t = &app.theme;
    let lessons = app
        .course
        .entries
        .iter()
        .filter(|e| e.lesson.is_some())
        .count();
    let done = app
        .course
        .entries
        .iter()
        .filter(|e| mark(app, e) == "✓")
        .count();
    let names = crate::lab::hang::scenario::names();
    let solved = names
        .iter()
        .filter(|n| app.progress.labs.get(*n).is_some_and(|r| r.solved))
        .count();
    Line::from(vec![
        Span::styled(format!(" {done} of {lessons} lessons done"), t.dim),
        Span::styled(" · ", t.dim),
        Span::styled(track_span(app), t.dim),
        Span::styled(" · ", t.dim),
        Span::styled(format!("hang lab {solved}/{} solved", names.len()), t.dim),
        Span::styled(" (H)", t.dim),
    ])
}

pub fn render(s: &HomeState, app: &App, frame: &mut Frame, area: Rect) {
    let t = &app.theme;
    let [head, body] = Layout::vertical([Constraint::Length(2), Constraint::Min(1)]).areas(area);
    frame.render_widget(
        Paragraph::new(vec![
            next_line(app, usize::from(area.width)),
            progress_line(app),
        ]),
        head,
    );
    // The list takes what its longest title needs (up to 58 %); a wide terminal gives the rest
    // to the lesson's details rather than to blank list columns.
    let longest = app
        .course
        .entries
        .iter()
        .map(|e| unicode_width::UnicodeWidthStr::width(e.title()))
        .max()
        .unwrap_or(30);
    // At least the legend's width ("  ✓ read, quiz passed  ● read, quiz to do" and a border).
    let list_w = ((longest + 22).max(44) as u16).min(body.width * 58 / 100);
    let [list, detail] =
        Layout::horizontal([Constraint::Length(list_w), Constraint::Min(1)]).areas(body);
    let mut lines = Vec::new();
    for (i, e) in app.course.entries.iter().enumerate() {
        let sel = i == s.selected;
        let (num, minutes) = match &e.lesson {
            Some(l) => (
                format!("{:>2}.", l.meta.order),
                format!("{:>3} min", l.meta.minutes),
            ),
            None => (" ?.".into(), "       ".into()),
        };
        let title_w = (list.width as usize).saturating_sub(21);
        let title = crate::tui::markdown::ellipsize(e.title(), title_w);
        let m = mark(app, e);
        let row = format!(
            "{} {m} {num} {title:<title_w$} {:>8}",
            if sel { "▶" } else { " " },
            partial(app, e, m).unwrap_or(minutes)
        );
        lines.push(if sel {
            Line::styled(row, t.selection)
        } else if e.has_errors() {
            Line::styled(row, t.error)
        } else {
            Line::raw(row)
        });
    }
    if lines.is_empty() {
        lines.push(Line::styled("  no lessons found", t.warn));
    }
    lines.push(Line::raw(""));
    lines.push(Line::styled(
        "  ✓ read, quiz passed  ● read, quiz to do",
        t.dim,
    ));
    lines.push(Line::styled(
        "  ◐ part read (%)  ○ new  ✗ has errors",
        t.dim,
    ));
    let top = s
        .selected
        .saturating_sub(list.height.saturating_sub(5) as usize);
    frame.render_widget(
        Paragraph::new(lines).scroll((top as u16, 0)).block(
            Block::default()
                .borders(Borders::RIGHT)
                .border_style(t.border)
                .title(Span::styled(" Course ", t.h2)),
        ),
        list,
    );
    if let Some(e) = app.course.entries.get(s.selected) {
        render_detail(
            app,
            e,
            frame,
            detail.inner(ratatui::layout::Margin::new(1, 0)),
        );
    }
}

/// The selected lesson's details; what does not fit ends in a line that says so, never
/// mid-list without a word.
fn render_detail(app: &App, e: &Entry, frame: &mut Frame, area: Rect) {
    let t = &app.theme;
    let mut lines = detail_lines(app, e, area.width as usize);
    let rows = |l: &[Line<'static>]| {
        Paragraph::new(l.to_vec())
            .wrap(Wrap { trim: false })
            .line_count(area.width)
    };
    if rows(&lines) > area.height as usize {
        let text = |l: &Line| {
            l.spans
                .first()
                .map_or(String::new(), |s| s.content.to_string())
        };
        let mut cut = None;
        while !lines.is_empty() && rows(&lines) + 1 > area.height as usize {
            cut = lines.pop();
        }
        // A wrapped objective goes whole: drop the rows of it that did fit.
        if cut.is_some_and(|c| text(&c).starts_with("  ")) {
            while lines.last().is_some_and(|l| text(l).starts_with("  ")) {
                lines.pop();
            }
            lines.pop();
        }
        lines.push(Line::styled("… more: Enter opens the lesson", t.dim));
    }
    frame.render_widget(Paragraph::new(lines).wrap(Wrap { trim: false }), area);
}

fn detail_lines(app: &App, e: &Entry, width: usize) -> Vec<Line<'static>> {
    let t = &app.theme;
    let mut out = Vec::new();
    match &e.lesson {
        Some(l) => {
            out.push(Line::styled(l.meta.title.clone(), t.h1));
            out.push(Line::styled(
                format!("about {} minutes", l.meta.minutes),
                t.dim,
            ));
            out.push(Line::raw(""));
            let needs = if l.meta.prerequisites.is_empty() {
                "nothing: start here".to_string()
            } else {
                l.meta
                    .prerequisites
                    .iter()
                    .map(|p| {
                        app.course
                            .lessons()
                            .find(|x| &x.meta.id == p)
                            .map_or_else(|| p.clone(), |x| x.meta.title.clone())
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            out.extend(crate::tui::markdown::hanging(
                Span::styled("Needs: ", t.strong),
                vec![Span::raw(needs)],
                width,
            ));
            // Quiz mastery: what "done" still needs.
            let quiz = app.quiz_of(&l.meta.id);
            if !quiz.is_empty() {
                let passed = quiz.iter().filter(|i| app.progress.item_passed(i)).count();
                out.push(Line::from(vec![
                    Span::styled("Quiz: ", t.strong),
                    Span::styled(
                        format!("{passed} of {} passed", quiz.len()),
                        if passed == quiz.len() { t.ok } else { t.base },
                    ),
                    Span::styled(" (Q takes it)", t.dim),
                ]));
            }
            out.push(Line::raw(""));
            out.push(Line::styled("You will be able to", t.strong));
            // A wrapped objective stays under its text, not under its bullet.
            for o in &l.meta.objectives {
                out.extend(crate::tui::markdown::hanging(
                    Span::raw("• "),
                    vec![Span::raw(o.clone())],
                    width,
                ));
            }
        }
        None => out.push(Line::styled(e.path.clone(), t.h1)),
    }
    let errors: Vec<_> = e.diagnostics.iter().filter(|d| d.is_error()).collect();
    if !errors.is_empty() {
        out.push(Line::raw(""));
        out.push(Line::styled(
            format!("✗ {} problem(s) in this file", errors.len()),
            t.error,
        ));
        for d in errors.iter().take(4) {
            out.push(Line::styled(d.to_string(), t.error));
        }
    }
    out
}

impl crate::tui::screens::View for HomeState {
    fn update(&mut self, app: &mut App, action: Action) -> Outcome {
        update(self, app, action)
    }

    fn render(&self, app: &App, frame: &mut ratatui::Frame, area: ratatui::layout::Rect) {
        render(self, app, frame, area)
    }

    fn contexts(&self) -> Vec<Context> {
        vec![OWN]
    }
}
