//! Screens: one file each, registered with one line in the `screens!` list below.
//!
//! A screen is a state type that implements [`View`] (update, render, key contexts, tick,
//! background results, text input) in its own file. The list declares the module, adds the
//! [`Screen`] variant that holds it, and delegates to it; `app.rs`, `keys.rs` and this file's
//! drawing code never name a screen. To add one, see "Adding a screen" in the README.

// Helpers that are not screens.
pub mod drill;
pub mod help;
pub mod ring_draw;

use std::time::Duration;

use ratatui::Frame;
use ratatui::layout::{Alignment, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::app::{Action, App, Background, MIN_HEIGHT, MIN_WIDTH, Outcome};
use super::keys::{self, Context};

/// What every screen does. Only `update`, `render` and `contexts` are required.
pub trait View {
    /// Apply an action (the only place the screen's state changes); what the stack should do.
    fn update(&mut self, app: &mut App, action: Action) -> Outcome;
    /// Draw into `area` (everything but the hint bar). Never mutates.
    fn render(&self, app: &App, frame: &mut Frame, area: Rect);
    /// The key contexts that apply now, most specific first (then Global).
    fn contexts(&self) -> Vec<Context>;
    /// Keys of the screen's own, defined in its file with `Context::Own` (looked up before the
    /// shared table); a new screen needs no edit in `keys.rs`.
    fn keys(&self) -> &'static [keys::Binding] {
        &[]
    }
    /// The contexts the `?` overlay lists (all of the screen's states); default: `contexts`.
    fn help_contexts(&self) -> Vec<Context> {
        self.contexts()
    }
    /// How often it wants `Action::Tick` now; None while idle.
    fn tick(&self, _app: &App) -> Option<Duration> {
        None
    }
    /// A result of background work (every screen on the stack is offered each one).
    fn receive(&mut self, _msg: &Background, _app: &mut App) {}
    /// True while typed text goes to a field of the screen instead of the key table.
    fn takes_text(&self) -> bool {
        false
    }
    /// The hint bar's line when the screen owns it (a search or an answer line being typed).
    fn hint_line(&self, _app: &App) -> Option<Line<'static>> {
        None
    }
    /// Lay out again for a new size, a reload or the TeX toggle while below the top.
    fn relayout(&mut self, _app: &App) {}
}

/// Declares each screen's module, the [`Screen`] variant holding its state, and the delegation.
macro_rules! screens {
    ($( $(#[$doc:meta])* $variant:ident($module:ident::$state:ident), )*) => {
        $( pub mod $module; )*

        /// The screens on the stack.
        pub enum Screen {
            $( $(#[$doc])* $variant(Box<$module::$state>), )*
        }

        impl Screen {
            pub fn view(&self) -> &dyn View {
                match self {
                    $( Screen::$variant(s) => s.as_ref(), )*
                }
            }

            pub fn view_mut(&mut self) -> &mut dyn View {
                match self {
                    $( Screen::$variant(s) => s.as_mut(), )*
                }
            }
        }

        $(
            impl From<$module::$state> for Screen {
                fn from(s: $module::$state) -> Self {
                    Screen::$variant(Box::new(s))
                }
            }
        )*
    };
}

screens! {
    /// The course map.
    Home(home::HomeState),
    Lesson(lesson::LessonState),
    Ring(ring::RingState),
    /// A quiz, a drill session or a mock interview.
    Quiz(quiz::QuizState),
    Stats(stats::StatsState),
    TpCalc(tpcalc::TpCalcState),
    Planner(planner::PlannerState),
    /// The live lab (real rank processes over TCP).
    Lab(lab::LabState),
    /// The hang lab.
    Hang(hang::HangState),
    /// Presenter mode: a lesson as slides.
    Present(present::PresentState),
    /// Presenter mode: a quiz for a class (no grading, nothing recorded).
    ClassQuiz(class_quiz::ClassQuizState),
    /// The notes terminal following a presenter.
    Notes(notes_view::NotesState),
}

impl Default for Screen {
    fn default() -> Self {
        home::HomeState::default().into()
    }
}

pub fn render(app: &App, frame: &mut Frame) {
    let area = frame.area();
    if app.too_small() {
        render_too_small(app, frame, area);
        return;
    }
    let body = Rect::new(area.x, area.y, area.width, area.height.saturating_sub(1));
    if let Some(s) = app.stack.last() {
        s.view().render(app, frame, body);
    }
    if let Some(h) = &app.help {
        help::render(h, app, frame, body);
    }
    let bar = Rect::new(area.x, area.bottom().saturating_sub(1), area.width, 1);
    frame.render_widget(hint_bar(app, bar.width), bar);
}

fn render_too_small(app: &App, frame: &mut Frame, area: Rect) {
    let msg = format!(
        "terminal too small: need {MIN_WIDTH}x{MIN_HEIGHT}, have {}x{}",
        area.width, area.height
    );
    let y = area.y + area.height / 2;
    let line = Rect::new(
        area.x,
        y.min(area.bottom().saturating_sub(1)),
        area.width,
        1,
    );
    frame.render_widget(
        Paragraph::new(Line::styled(msg, app.theme.warn)).alignment(Alignment::Center),
        line,
    );
}

/// The always-visible key-hint bar, gathered from the key table of what has focus.
fn hint_bar(app: &App, width: u16) -> Paragraph<'static> {
    let t = &app.theme;
    if app.help.is_none()
        && let Some(line) = app.stack.last().and_then(|s| s.view().hint_line(app))
    {
        return Paragraph::new(line);
    }
    let mut spans = Vec::new();
    if let Some(s) = &app.status {
        // A status longer than the bar ends at a word with an ellipsis, never mid-word.
        let w = width as usize;
        let shown = if unicode_width::UnicodeWidthStr::width(s.as_str()) + 2 <= w {
            s.clone()
        } else {
            let cut = crate::tui::markdown::ellipsize(s, w.saturating_sub(1));
            let body = cut.trim_end_matches('…');
            let cut = match body.rfind(' ') {
                Some(i) if i > w / 2 => format!("{}…", body[..i].trim_end()),
                _ => cut,
            };
            // The status takes the whole bar until the next key; the keys come back then.
            return Paragraph::new(Line::from(Span::styled(cut, t.accent)));
        };
        spans.push(Span::styled(format!("{shown}  "), t.accent));
    }
    let own = app.own_keys();
    let label = |b: &keys::Binding| match b.ctx {
        keys::Context::Own(_) => b.short_label_among(own),
        _ => b.short_label(),
    };
    let bar = |b: &keys::Binding| b.hint.map_or(b.desc, |(_, short)| short);
    let w = |b: &keys::Binding| label(b).chars().count() + bar(b).chars().count() + 3;
    // The screen's keys by priority; back and help always show, help as "more: ?" when some
    // keys did not fit (the overlay lists them all).
    let all: Vec<&keys::Binding> = keys::for_contexts_with(own, &app.contexts()).collect();
    let mut local: Vec<&keys::Binding> = all
        .iter()
        .copied()
        .filter(|b| b.ctx != keys::Context::Global && b.hint.is_some())
        .collect();
    local.sort_by_key(|b| b.hint.map_or(u8::MAX, |(p, _)| p));
    // A global key every one of whose keys the screen has taken for itself (the live lab's
    // q/Esc cancel a run) is not shown: it would promise what those keys no longer do.
    let shadowed = |b: &keys::Binding| {
        b.keys
            .iter()
            .all(|k| own.iter().any(|o| o.keys.contains(k)))
    };
    let global: Vec<&keys::Binding> = all
        .iter()
        .copied()
        .filter(|b| b.ctx == keys::Context::Global && b.hint.is_some() && !shadowed(b))
        .collect();
    // "more: ?" is two columns wider than "? help".
    let reserved: usize = global.iter().map(|b| w(b)).sum::<usize>() + 2;
    let mut used: usize = spans.iter().map(|s| s.width()).sum::<usize>() + reserved;
    let mut shown = Vec::new();
    let mut folded = false;
    for b in local {
        if used + w(b) > width as usize {
            folded = true;
            continue;
        }
        used += w(b);
        shown.push(b);
    }
    for b in shown {
        spans.push(Span::styled(label(b), t.key));
        spans.push(Span::styled(format!(" {}  ", bar(b)), t.dim));
    }
    for b in global {
        if folded && b.action == super::app::Action::Help {
            spans.push(Span::styled("more: ", t.dim));
            spans.push(Span::styled("?", t.key));
            spans.push(Span::raw("  "));
        } else {
            spans.push(Span::styled(label(b), t.key));
            spans.push(Span::styled(format!(" {}  ", bar(b)), t.dim));
        }
    }
    Paragraph::new(Line::from(spans))
}
