//! Tracks: the whole course, or an interview sprint of about two hours, each step with its
//! minutes and a mark for what is done; Enter follows the selected track (the course map's
//! "Next:" comes from it). Also the path's verbs every screen uses: what the next step is,
//! its name, and opening it.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use crate::study::track::{self, Planned, Step, TrackId};
use crate::tui::app::{Action, App, Outcome, Screen};
use crate::tui::error::ScreenError;
use crate::tui::keys::{BOTTOM, Binding, Context, DOWN, Key, PAGE_DOWN, PAGE_UP, TOP, UP, bind};
use Key::Code;
use crossterm::event::KeyCode;

/// The course map opens this screen with `T`.
pub const OPENER: crate::tui::screens::Opener = crate::tui::screens::Opener::new(
    &[Key::Char('T')],
    "tracks: the whole course, or an interview sprint",
    None,
    |app, _| Ok(TrackState::new(app).into()),
);

pub const OWN: Context = Context::Own("Tracks");

#[rustfmt::skip]
pub const KEYS: &[Binding] = &[
    bind(OWN, DOWN, "next track", Action::Move(1), Some((2, "choose"))),
    bind(OWN, UP, "previous track", Action::Move(-1), None),
    bind(OWN, TOP, "first track", Action::Top, None),
    bind(OWN, BOTTOM, "last track", Action::Bottom, None),
    bind(OWN, PAGE_DOWN, "scroll the steps down", Action::Page(1), Some((3, "scroll"))),
    bind(OWN, PAGE_UP, "scroll the steps up", Action::Page(-1), None),
    bind(OWN, &[Code(KeyCode::Enter)], "follow this track", Action::Open, Some((1, "follow this track"))),
];

pub struct TrackState {
    pub selected: usize,
    /// Lines the steps are scrolled by.
    pub scroll: usize,
}

impl TrackState {
    /// On the track the learner follows.
    pub fn new(app: &App) -> Self {
        let now = app.track();
        Self {
            selected: TrackId::ALL.iter().position(|t| *t == now).unwrap_or(0),
            scroll: 0,
        }
    }

    fn track(&self) -> TrackId {
        TrackId::ALL[self.selected.min(TrackId::ALL.len() - 1)]
    }
}

/// "lesson 3, Tensor parallelism" for a lesson id (the id itself if the course lacks it).
fn lesson_name(app: &App, id: &str) -> String {
    app.course.lessons().find(|l| l.meta.id == id).map_or_else(
        || id.to_string(),
        |l| format!("lesson {}, {}", l.meta.order, l.meta.title),
    )
}

/// A step in words: "lesson 3, Tensor parallelism", "quiz on lesson 1, The collectives",
/// "hang lab: Pinned to docker0", "a mock interview".
pub fn step_title(app: &App, step: &Step) -> String {
    match step {
        Step::Read(id) => lesson_name(app, id),
        Step::Quiz(id) => format!("quiz on {}", lesson_name(app, id)),
        Step::Lab(name, _) => {
            let title = crate::lab::hang::scenario::all()
                .0
                .into_iter()
                .find(|s| &s.name == name)
                .map_or_else(|| name.clone(), |s| s.title);
            format!("hang lab: {title}")
        }
        Step::Mock => "a mock interview".into(),
    }
}

/// The screen a step opens: the lesson where it was left, its quiz, the hang lab on the
/// scenario, a mock interview.
pub fn open_step(app: &App, step: &Step) -> Result<Screen, ScreenError> {
    use super::lesson::LessonState;
    Ok(match step {
        Step::Read(id) => match app.course.position_of(id) {
            Some(i) => LessonState::open_resumed(app, i).into(),
            None => return Err(ScreenError::NothingToOpen),
        },
        Step::Quiz(id) => super::quiz::open(app, Some(id))?.into(),
        Step::Lab(name, _) => {
            let mut h = super::hang::HangState::default();
            if let Some(i) = h.scenarios.iter().position(|s| &s.name == name) {
                h.selected = i;
            }
            h.into()
        }
        Step::Mock => {
            let opts = super::drill::DrillOptions {
                mock: true,
                ..Default::default()
            };
            super::drill::open(app, &opts).into()
        }
    })
}

/// "3 of 10 steps · 1 h 35 min left" (or "all 10 steps done").
pub fn track_progress(steps: &[Planned]) -> String {
    let done = steps.iter().filter(|s| s.done).count();
    let left: u32 = steps.iter().filter(|s| !s.done).map(|s| s.minutes).sum();
    if done == steps.len() {
        format!("all {} steps done", steps.len())
    } else {
        format!(
            "{done} of {} steps · {} left",
            steps.len(),
            track::duration(left)
        )
    }
}

pub fn update(s: &mut TrackState, app: &mut App, action: Action) -> Outcome {
    let n = TrackId::ALL.len();
    match action {
        Action::Move(d) => {
            s.selected = s.selected.saturating_add_signed(d as isize).min(n - 1);
            s.scroll = 0;
        }
        Action::Top => s.selected = 0,
        Action::Bottom => s.selected = n - 1,
        Action::Page(d) => {
            s.scroll = s
                .scroll
                .saturating_add_signed(d as isize * (viewport(app) as isize).max(1));
        }
        Action::Open => {
            let t = s.track();
            app.progress.track = Some(t);
            app.save_progress();
            if app.status.is_none() {
                app.status = Some(format!("following {}", t.title()));
            }
            return Outcome::Pop;
        }
        Action::Back => return Outcome::Pop,
        _ => {}
    }
    Outcome::Stay
}

/// Rows the steps have on screen (under the header and the tracks).
fn viewport(app: &App) -> usize {
    usize::from(app.height).saturating_sub(4 + TrackId::ALL.len() + 2)
}

pub fn render(s: &TrackState, app: &App, frame: &mut Frame, area: Rect) {
    let t = &app.theme;
    let planner = app.planner();
    let mut head = vec![
        Line::styled(" Tracks: a path through the course", t.title),
        Line::raw(""),
    ];
    for (i, id) in TrackId::ALL.iter().enumerate() {
        let steps = planner.steps(*id);
        let following = if *id == app.track() { " (yours)" } else { "" };
        let row = format!(
            "{} {}{following}  ·  {}",
            if i == s.selected { "▶" } else { " " },
            id.title(),
            track_progress(&steps)
        );
        head.push(if i == s.selected {
            Line::styled(row, t.selection)
        } else {
            Line::raw(row)
        });
    }
    head.push(Line::raw(""));
    let steps = planner.steps(s.track());
    let next = planner.next(s.track(), None).map(|p| p.step);
    let rows: Vec<Line> = steps
        .iter()
        .enumerate()
        .map(|(k, p)| {
            let mark = match (p.done, Some(&p.step) == next.as_ref()) {
                (true, _) => Span::styled("✓", t.ok),
                (false, true) => Span::styled("→", t.accent),
                (false, false) => Span::raw(" "),
            };
            let what = step_title(app, &p.step);
            // At most 80 columns: the minutes stay near their step on a wide terminal.
            let title_w = usize::from(area.width.min(80)).saturating_sub(16);
            let what = crate::tui::markdown::ellipsize(&what, title_w);
            Line::from(vec![
                Span::raw("  "),
                mark,
                Span::raw(format!(" {:>2}. {what:<title_w$}", k + 1)),
                Span::styled(format!("{:>4} min", p.minutes), t.dim),
            ])
        })
        .collect();
    let top = s.scroll.min(rows.len().saturating_sub(viewport(app)));
    let head_h = head.len() as u16;
    frame.render_widget(
        Paragraph::new(head),
        Rect::new(area.x, area.y, area.width, head_h.min(area.height)),
    );
    let body_h = area.height.saturating_sub(head_h + 1);
    let more = rows.len() > top + usize::from(body_h);
    frame.render_widget(
        Paragraph::new(rows).scroll((top as u16, 0)),
        Rect::new(area.x, area.y + head_h, area.width, body_h),
    );
    let foot = if more {
        format!(
            " ↓ {} more steps: PgDn · → the next step",
            steps.len() - top - usize::from(body_h)
        )
    } else {
        " → the next step · the course map's header names it".to_string()
    };
    frame.render_widget(
        Paragraph::new(Line::styled(foot, t.dim)),
        Rect::new(area.x, area.bottom().saturating_sub(1), area.width, 1),
    );
}

impl crate::tui::screens::View for TrackState {
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
