//! The quiz screen: one item at a time, typed answers graded on Enter, immediate feedback with
//! the explanation and source, `o` to open the lesson at the section the item comes from,
//! missed items coming back, and a summary at the end. Drills and mock interviews
//! ([`super::drill`]) run on the same screen. Every graded answer is saved at once.

use chrono::{DateTime, Utc};
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Wrap};

use crate::course::bank::Bank;
use crate::course::grade::{self, SelfGrade, Verdict, letter};
use crate::course::quiz::{Kind, Unit};
use crate::study::session::{Graded, Mode, Phase, Session};
use crate::study::track::Step;
use crate::tui::app::{Action, App, Outcome, Screen};
use crate::tui::error::ScreenError;
use crate::tui::keys::{Binding, Context, DOWN, Key, UP, bind};
use Key::{Char, Code};
use crossterm::event::KeyCode;

/// A question, or the feedback on an answer.
pub const QUIZ: Context = Context::Own("Quiz and drills");
/// A recall item revealed: grade yourself.
pub const RATE: Context = Context::Own("Grade yourself");
/// The end-of-session summary.
pub const DONE: Context = Context::Own("Session summary");

/// The quiz's own verbs (`Action::Screen`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::FromRepr)]
#[repr(u8)]
pub enum Verb {
    /// The next item (or, at the end, done).
    Next,
    /// Open the lesson at the section the item comes from.
    GotoSource,
    /// Grade a recall item yourself (the amount): 1 Again, 2 Hard, 3 Good, 4 Easy.
    Rate,
    /// After the summary, the next step of the learner's track (the summary names it).
    NextStep,
}

impl Verb {
    /// The action, with an amount (the grade, for `Rate`).
    pub const fn by(self, d: i32) -> Action {
        Action::Screen(crate::tui::app::ScreenId::Quiz, self as u8, d)
    }

    pub const fn act(self) -> Action {
        self.by(0)
    }
}

/// While typing an answer, keys go to the answer line: Enter submits, Esc clears it or leaves.
#[rustfmt::skip]
pub const KEYS: &[Binding] = &[
    // Not Space nor a letter: an answer typed on after it was graded must not skip the next item.
    bind(QUIZ, &[Code(KeyCode::Enter), Code(KeyCode::Right)], "next", Verb::Next.act(), Some((1, "next"))),
    bind(QUIZ, &[Char('o')], "open the lesson there", Verb::GotoSource.act(), Some((1, "open the lesson there"))),
    bind(QUIZ, DOWN, "scroll", Action::Move(1), None),
    bind(QUIZ, UP, "scroll", Action::Move(-1), None),
    bind(DONE, &[Char('n')], "the next step (the summary names it)", Verb::NextStep.act(), None),
    bind(DONE, &[Code(KeyCode::Enter), Char(' ')], "done", Verb::Next.act(), Some((1, "done"))),
    bind(DONE, DOWN, "scroll", Action::Move(1), None),
    bind(DONE, UP, "scroll", Action::Move(-1), None),
    bind(RATE, &[Char('1')], "again", Verb::Rate.by(1), Some((1, "again"))),
    bind(RATE, &[Char('2')], "hard", Verb::Rate.by(2), Some((1, "hard"))),
    bind(RATE, &[Char('3')], "good", Verb::Rate.by(3), Some((1, "good"))),
    bind(RATE, &[Char('4')], "easy", Verb::Rate.by(4), Some((1, "easy"))),
    bind(RATE, &[Char('o')], "open the lesson there", Verb::GotoSource.act(), None),
    bind(RATE, DOWN, "scroll", Action::Move(1), None),
    bind(RATE, UP, "scroll", Action::Move(-1), None),
];
use crate::tui::markdown::inline_code;
use crate::tui::screens::lesson::{LessonState, text_width};
use crate::tui::theme::Theme;

pub struct QuizState {
    pub session: Session,
    pub bank: Bank,
    /// Lines scrolled in the item view.
    pub scroll: usize,
    /// The clock as of the last update (render never reads the clock itself).
    pub now: DateTime<Utc>,
    /// The answer line being edited (mirrors the session's answer text).
    pub answer: crate::tui::field::Field,
    /// The lesson (or drill file) this is the quiz of; None for a drill or a mixed quiz.
    pub deck: Option<String>,
}

/// A seed for parameter draws that differs between sessions.
pub fn seed(now: DateTime<Utc>) -> u64 {
    now.timestamp_nanos_opt().unwrap_or_default() as u64
}

/// A quiz on one deck (a lesson id or a drill file's id), or on every lesson started so far
/// (all lessons when none is).
pub fn open(app: &App, deck: Option<&str>) -> Result<QuizState, ScreenError> {
    let now = Utc::now();
    open_at(app, deck, now, seed(now))
}

pub fn open_at(
    app: &App,
    deck: Option<&str>,
    now: DateTime<Utc>,
    seed: u64,
) -> Result<QuizState, ScreenError> {
    let bank = Bank::from_course(&app.course);
    let (title, items) = match deck {
        Some(id) => {
            let Some(d) = bank.deck_index(id) else {
                return Err(ScreenError::NoDeck {
                    id: id.to_string(),
                    known: bank.decks.iter().map(|d| d.id.clone()).collect(),
                });
            };
            let items: Vec<usize> = bank
                .in_deck(d)
                .into_iter()
                .filter(|&i| bank.entries[i].inline_of.is_none())
                .collect();
            (bank.decks[d].title.clone(), items)
        }
        None => {
            let started: Vec<usize> = (0..bank.decks.len())
                .filter(|&d| {
                    !bank.decks[d].is_drill && app.progress.lessons.contains_key(&bank.decks[d].id)
                })
                .collect();
            let decks: Vec<usize> = if started.is_empty() {
                (0..bank.decks.len())
                    .filter(|&d| !bank.decks[d].is_drill)
                    .collect()
            } else {
                started
            };
            let items = (0..bank.entries.len())
                .filter(|&i| {
                    decks.contains(&bank.entries[i].deck) && bank.entries[i].inline_of.is_none()
                })
                .collect();
            ("lessons you have started".to_string(), items)
        }
    };
    if items.is_empty() {
        return Err(ScreenError::NoItems(title));
    }
    let mut q = QuizState::new(Session::new(Mode::Quiz, title, items, now, seed), bank, now);
    q.deck = deck.map(str::to_string);
    Ok(q)
}

impl QuizState {
    pub fn new(mut session: Session, bank: Bank, now: DateTime<Utc>) -> Self {
        session.advance(&bank, now);
        QuizState {
            session,
            bank,
            scroll: 0,
            now,
            answer: Default::default(),
            deck: None,
        }
    }

    pub fn contexts(&self) -> Vec<Context> {
        if self.session.finished {
            return vec![DONE];
        }
        match self.session.current.as_ref().map(|c| &c.phase) {
            Some(Phase::Reveal { .. }) => vec![RATE],
            _ => vec![QUIZ],
        }
    }

    /// True while a timer or a session length needs the clock to tick.
    pub fn wants_clock(&self) -> bool {
        !self.session.finished
            && (self.session.ends_at.is_some()
                || (self.session.timer.is_some() && self.session.accepts_input()))
    }
}

/// Save one graded answer right away: quitting after it loses nothing.
fn record(app: &mut App, mode: Mode, g: &Graded, now: DateTime<Utc>) {
    app.progress
        .record_review(&g.id, g.grade, g.correct, mode.name(), Some(g.seconds), now);
    app.save_progress();
}

pub fn update(s: &mut QuizState, app: &mut App, action: Action) -> Outcome {
    update_at(s, app, action, Utc::now())
}

/// [`update`] with the clock passed in (tests).
pub fn update_at(s: &mut QuizState, app: &mut App, action: Action, now: DateTime<Utc>) -> Outcome {
    s.now = now;
    let mode = s.session.mode;
    let verb = action.verb(crate::tui::app::ScreenId::Quiz, Verb::from_repr);
    if s.session.finished {
        return match action {
            Action::Back | Action::InputSubmit | Action::InputCancel => Outcome::Pop,
            _ if matches!(verb, Some((Verb::Next, _))) => Outcome::Pop,
            _ if matches!(verb, Some((Verb::NextStep, _))) => go_on(s, app),
            Action::Move(d) => {
                s.scroll = s.scroll.saturating_add_signed(d as isize);
                Outcome::Stay
            }
            _ => Outcome::Stay,
        };
    }
    if s.session.accepts_input() {
        let Some(cur) = s.session.current.as_mut() else {
            return Outcome::Stay;
        };
        match action {
            Action::Edit(r) => {
                // The field follows the session's answer (a new item starts empty).
                if s.answer.value() != cur.input {
                    s.answer.set(&cur.input);
                }
                s.answer.apply(r);
                cur.input = s.answer.value().to_string();
            }
            Action::InputCancel if cur.input.is_empty() => return Outcome::Pop,
            Action::InputCancel => {
                cur.input.clear();
                s.answer.clear();
                cur.note = None;
            }
            Action::InputSubmit => {
                if let Some(g) = s.session.submit(&s.bank, now) {
                    record(app, mode, &g, now);
                }
                // The verdict (or the model answer) starts under the question.
                s.scroll = 0;
            }
            Action::Tick => {
                if let Some(g) = s.session.tick(&s.bank, now) {
                    record(app, mode, &g, now);
                }
            }
            Action::Back => return Outcome::Pop,
            _ => {}
        }
        return Outcome::Stay;
    }
    match (verb, action) {
        (Some((Verb::Next, _)), _)
            if matches!(
                s.session.current.as_ref().map(|c| &c.phase),
                Some(Phase::Feedback { .. }) | None
            ) =>
        {
            s.session.advance(&s.bank, now);
            s.scroll = 0;
        }
        (Some((Verb::Rate, n)), _) => {
            let grade = u8::try_from(n).ok().and_then(SelfGrade::from_number);
            if let Some(g) = grade.and_then(|g| s.session.rate(&s.bank, g, now)) {
                record(app, mode, &g, now);
                // The grade is drawn at the top, under the question: show it.
                s.scroll = 0;
            }
        }
        (Some((Verb::GotoSource, _)), _) => return goto_source(s, app),
        (_, Action::Move(d)) => s.scroll = s.scroll.saturating_add_signed(d as isize),
        (_, Action::Back) => return Outcome::Pop,
        _ => {}
    }
    Outcome::Stay
}

/// The step the learner has just done: this lesson's quiz, or the mock interview.
pub fn this_step(s: &QuizState) -> Option<Step> {
    match s.session.mode {
        Mode::Quiz => s.deck.clone().map(Step::Quiz),
        Mode::Mock => Some(Step::Mock),
        Mode::Drill => None,
    }
}

/// What comes after this session on the learner's track.
pub fn next_step(s: &QuizState, app: &App) -> Option<Step> {
    app.next_step(this_step(s).as_ref()).map(|p| p.step)
}

/// From the summary to the next step (the course map under it).
fn go_on(s: &QuizState, app: &mut App) -> Outcome {
    let Some(step) = next_step(s, app) else {
        app.status = Some("every step of your track is done".into());
        return Outcome::Stay;
    };
    match super::track::open_step(app, &step) {
        Ok(screen) => Outcome::Replace(screen),
        Err(e) => {
            app.status = Some(e.to_string());
            Outcome::Stay
        }
    }
}

/// "n lesson 3, Tensor parallelism" on the summary's hint bar.
fn next_hint(s: &QuizState, app: &App) -> Option<Vec<Span<'static>>> {
    if !s.session.finished {
        return None;
    }
    let step = next_step(s, app)?;
    let t = &app.theme;
    Some(vec![
        Span::styled("n", t.key),
        Span::styled(
            format!(" next: {}  ", super::track::step_title(app, &step)),
            t.accent,
        ),
    ])
}

/// Open the lesson behind the current item, scrolled to the heading its block sits under.
fn goto_source(s: &QuizState, app: &mut App) -> Outcome {
    let Some(e) = s
        .session
        .current
        .as_ref()
        .and_then(|c| s.bank.entries.get(c.entry))
    else {
        return Outcome::Stay;
    };
    let lesson = s
        .bank
        .deck_of(e)
        .and_then(|d| if d.is_drill { None } else { Some(d.id.clone()) })
        .and_then(|id| app.course.position_of(&id));
    let Some(idx) = lesson else {
        app.status = Some(format!(
            "this item is a drill ({}:{}); its source: {}",
            e.path, e.line, e.item.source
        ));
        return Outcome::Stay;
    };
    let mut l = LessonState::open(app, idx);
    if let Some(sec) = &e.section {
        l.scroll_to_heading(app, sec.index, &sec.title);
    }
    Outcome::Push(Screen::Lesson(Box::new(l)))
}

/// The hint bar while the answer line has focus.
pub fn input_hints(app: &App) -> Line<'static> {
    let t = &app.theme;
    let mut spans = Vec::new();
    if let Some(s) = &app.status {
        spans.push(Span::styled(format!("{s}  "), t.accent));
    }
    spans.extend([
        Span::styled("Enter", t.key),
        Span::styled(" submit  ", t.dim),
        Span::styled("Esc", t.key),
        Span::styled(" clear, then leave  ", t.dim),
        Span::styled("Ctrl-U/W", t.key),
        Span::styled(" clear/word  ", t.dim),
        Span::styled("Ctrl-C", t.key),
        Span::styled(" quit", t.dim),
    ]);
    Line::from(spans)
}

pub fn render(s: &QuizState, app: &App, frame: &mut Frame, area: Rect) {
    let t = &app.theme;
    let (left, right) = super::drill::header(s, app);
    let pad = (area.width as usize).saturating_sub(left.chars().count() + right.chars().count());
    frame.render_widget(
        Paragraph::new(Line::from(vec![
            Span::styled(left, t.title),
            Span::raw(" ".repeat(pad)),
            Span::styled(right, t.dim),
        ])),
        Rect::new(area.x, area.y, area.width, 1),
    );
    let width = text_width(area.width);
    let x = area.x + area.width.saturating_sub(width) / 2;
    let body = Rect::new(
        x,
        area.y + 2,
        width.min(area.width),
        area.height.saturating_sub(2),
    );
    let lines = if s.session.finished {
        super::drill::summary_lines(s, app, usize::from(body.width))
    } else {
        item_lines(s, app, usize::from(body.width))
    };
    // How many rows the wrapped text needs.
    let rows = Paragraph::new(lines.clone())
        .wrap(Wrap { trim: false })
        .line_count(body.width.max(1));
    // Text that does not fit leaves its last row to the "↓ more" marker, which never covers
    // a word.
    let text_h = if rows > usize::from(body.height) {
        body.height.saturating_sub(1)
    } else {
        body.height
    };
    // Scrolled at most to the last screenful (a scroll kept from a longer view shows no blank).
    let top = s.scroll.min(rows.saturating_sub(usize::from(text_h)));
    let more = rows > top + usize::from(text_h);
    frame.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .scroll((top.min(u16::MAX as usize) as u16, 0)),
        Rect {
            height: text_h,
            ..body
        },
    );
    if more && body.height > 0 {
        let tag = " ↓ more: j ";
        let tw = tag.chars().count() as u16;
        frame.render_widget(
            Paragraph::new(Span::styled(tag, t.accent)),
            Rect::new(
                area.right().saturating_sub(tw + 1),
                body.bottom().saturating_sub(1),
                tw.min(area.width),
                1,
            ),
        );
    }
}

fn kind_label(kind: Kind, unit: Option<Unit>) -> String {
    match (kind, unit) {
        (Kind::Numeric, Some(u)) => format!("numeric · answer in {}", u.shown()),
        (Kind::Single, _) => "one answer".into(),
        (Kind::Multi, _) => "all that apply".into(),
        (Kind::Order, _) => "put in order".into(),
        (k, _) => k.name().into(),
    }
}

/// The current item: where it is from, prompt, choices, answer line or feedback.
/// `width`: the columns the text wraps in.
pub fn item_lines(s: &QuizState, app: &App, width: usize) -> Vec<Line<'static>> {
    let t = &app.theme;
    let mut out: Vec<Line<'static>> = Vec::new();
    let Some(cur) = &s.session.current else {
        return out;
    };
    let Some(e) = s.bank.entries.get(cur.entry) else {
        return out;
    };
    out.push(meta_line(s, e, cur, t));
    out.push(Line::raw(""));
    let inst = match &cur.instance {
        Ok(i) => i,
        Err(msg) => {
            out.push(Line::styled(
                format!("This item cannot be shown: {msg}"),
                t.error,
            ));
            return out;
        }
    };
    out.push(Line::from(inline_code(&inst.prompt, t.strong, t.code)));
    // Asked aloud (a mock interview's follow-up): no choices to pick from, graded as recall.
    let kind = if s.session.asked_aloud(&s.bank) {
        Kind::Recall
    } else {
        e.item.kind
    };
    if !e.item.choices.is_empty() && kind != Kind::Recall {
        out.push(Line::raw(""));
        for (i, c) in e.item.choices.iter().enumerate() {
            // A choice that wraps stays in its column under its letter.
            out.extend(crate::tui::markdown::hanging(
                Span::styled(format!("  {}) ", letter(i)), t.key),
                inline_code(c, t.base, t.code),
                width,
            ));
        }
    }
    out.push(Line::raw(""));
    match &cur.phase {
        Phase::Asking => asking_lines(&mut out, s, (e, kind), cur, t),
        Phase::Reveal { timed_out } => reveal_lines(&mut out, app, e, cur, inst, *timed_out, width),
        Phase::Feedback {
            verdict,
            grade: g,
            timed_out,
        } => feedback_lines(
            &mut out,
            app,
            (e, kind),
            cur,
            inst,
            (verdict, *g, *timed_out),
        ),
    }
    out
}

/// Where the item is from, its kind, and whether it comes again or follows up.
fn meta_line(
    s: &QuizState,
    e: &crate::course::bank::Entry,
    cur: &crate::study::session::Current,
    t: &Theme,
) -> Line<'static> {
    let deck = s.bank.deck_of(e).map_or("", |d| d.title.as_str());
    let section = e
        .section
        .as_ref()
        .map_or_else(|| deck.to_string(), |sec| format!("{deck} § {}", sec.title));
    let mut meta = vec![Span::styled(section, t.dim)];
    let kind = if s.session.asked_aloud(&s.bank) {
        Kind::Recall
    } else {
        e.item.kind
    };
    meta.push(Span::styled(
        format!("  ·  {}", kind_label(kind, e.item.unit)),
        t.dim,
    ));
    if cur.attempt > 1 {
        meta.push(Span::styled("  ·  again", t.warn));
    }
    if cur.follow_up_of.is_some() {
        meta.push(Span::styled("  ·  follow-up", t.accent));
    }
    Line::from(meta)
}

/// The answer line, how to answer, the time left and a note on the last try.
fn asking_lines(
    out: &mut Vec<Line<'static>>,
    s: &QuizState,
    (e, kind): (&crate::course::bank::Entry, Kind),
    cur: &crate::study::session::Current,
    t: &Theme,
) {
    // The order hint's example has every item, as the grader's refusal asks.
    let order_hint;
    let hint = match kind {
        Kind::Recall => "answer aloud (or type notes), then Enter for the model answer",
        Kind::Single => "a letter or number, e.g. b",
        Kind::Multi => "letters or numbers, e.g. a c",
        Kind::Order => {
            order_hint = format!(
                "all {} letters, first to last, e.g. {}",
                e.item.choices.len(),
                crate::course::grade::example_order(e.item.choices.len())
            );
            order_hint.as_str()
        }
        Kind::Numeric => crate::course::grade::numeric_hint(e.item.unit),
    };
    let mut line = vec![Span::styled("› ", t.key)];
    if s.answer.value() == cur.input {
        line.extend(s.answer.spans(Style::default(), t.accent));
    } else {
        line.extend([Span::raw(cur.input.clone()), Span::styled("▏", t.accent)]);
    }
    out.push(Line::from(line));
    out.push(Line::styled(format!("  {hint}"), t.dim));
    if let Some(left) = s.session.time_left {
        out.push(Line::styled(
            format!("  ⏱ {left} s left: answer aloud as in an interview"),
            t.warn,
        ));
    }
    if let Some(n) = &cur.note {
        out.push(Line::styled(format!("  {n}"), t.warn));
    }
}

/// A recall item revealed: the notes typed, the model answer, and the grades to choose from.
fn reveal_lines(
    out: &mut Vec<Line<'static>>,
    app: &App,
    e: &crate::course::bank::Entry,
    cur: &crate::study::session::Current,
    inst: &crate::course::quiz::Instance,
    timed_out: bool,
    width: usize,
) {
    let t = &app.theme;
    if timed_out {
        out.push(Line::styled("⏱ Time is up.", t.warn));
    }
    if !cur.input.trim().is_empty() {
        out.extend(crate::tui::markdown::hanging(
            Span::styled("Your notes: ", t.dim),
            vec![Span::styled(cur.input.trim().to_string(), t.dim)],
            width,
        ));
    }
    out.push(Line::styled("Model answer", t.h2));
    out.push(Line::raw(grade::describe_answer(&e.item, inst)));
    out.push(Line::raw(""));
    explanation(out, app, &inst.explanation, &e.item.source);
    out.push(Line::raw(""));
    out.push(Line::from(vec![
        Span::styled("How well did you know it?  ", t.strong),
        Span::styled("1", t.key),
        Span::raw(" again  "),
        Span::styled("2", t.key),
        Span::raw(" hard  "),
        Span::styled("3", t.key),
        Span::raw(" good  "),
        Span::styled("4", t.key),
        Span::raw(" easy"),
    ]));
}

/// An answered item: the verdict (or the grade given), the answer and the explanation.
fn feedback_lines(
    out: &mut Vec<Line<'static>>,
    app: &App,
    (e, kind): (&crate::course::bank::Entry, Kind),
    cur: &crate::study::session::Current,
    inst: &crate::course::quiz::Instance,
    (verdict, g, timed_out): (&Verdict, SelfGrade, bool),
) {
    let t = &app.theme;
    let (mark, style) = match (verdict, kind) {
        (_, Kind::Recall) => (format!("Graded {}", g.name()), t.accent),
        (Verdict::Correct, _) => ("✓ Correct".to_string(), t.ok),
        (_, _) if timed_out => ("⏱ Time is up".to_string(), t.warn),
        (Verdict::Unanswered, _) => ("✗ Given up".to_string(), t.error),
        _ => ("✗ Not quite".to_string(), t.error),
    };
    let mut first = vec![Span::styled(mark, style)];
    if kind != Kind::Recall {
        if !cur.input.trim().is_empty() {
            first.push(Span::styled(
                format!("  you said {}", cur.input.trim()),
                t.dim,
            ));
        }
        out.push(Line::from(first));
        out.push(Line::from(vec![
            Span::styled("Answer: ", t.strong),
            Span::raw(grade::describe_answer(&e.item, inst)),
        ]));
    } else {
        out.push(Line::from(first));
    }
    out.push(Line::raw(""));
    explanation(out, app, &inst.explanation, &e.item.source);
    if g == SelfGrade::Again {
        out.push(Line::raw(""));
        out.push(Line::styled(
            "It will come back later in this session.",
            t.dim,
        ));
    }
}

fn explanation(out: &mut Vec<Line<'static>>, app: &App, text: &str, source: &str) {
    let t = &app.theme;
    if !text.is_empty() {
        out.push(Line::raw(text.to_string()));
    }
    if !source.is_empty() {
        out.push(Line::from(vec![
            Span::styled("Source: ", t.dim),
            Span::styled(source.to_string(), t.dim),
        ]));
    }
}

impl crate::tui::screens::View for QuizState {
    fn update(&mut self, app: &mut App, action: Action) -> Outcome {
        update(self, app, action)
    }

    fn render(&self, app: &App, frame: &mut ratatui::Frame, area: ratatui::layout::Rect) {
        render(self, app, frame, area)
    }

    fn contexts(&self) -> Vec<Context> {
        QuizState::contexts(self)
    }

    fn help_contexts(&self) -> Vec<Context> {
        vec![QUIZ, RATE, DONE]
    }

    fn tick(&self, app: &App) -> Option<std::time::Duration> {
        (self.wants_clock() && app.help.is_none()).then(|| std::time::Duration::from_secs(1))
    }

    fn takes_text(&self) -> bool {
        self.session.accepts_input()
    }

    fn hint_lead(&self, app: &App) -> Option<Vec<Span<'static>>> {
        next_hint(self, app)
    }

    fn hint_line(&self, app: &App) -> Option<Line<'static>> {
        self.session.accepts_input().then(|| input_hints(app))
    }
}
