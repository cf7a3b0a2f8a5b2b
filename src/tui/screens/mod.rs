//! Screens: one file each, declared below and registered with one line in the `screens!` list.
//!
//! A screen is a state type that implements [`View`] (update, render, key contexts, tick,
//! background results, text input) in its own file, with its own keys (`pub const KEYS`, rows
//! under `Context::Own`), its own verbs (`enum Verb`, sent as `Action::Screen`) and, if the
//! course map opens it, its [`Opener`]. The list adds the [`Screen`] variant that holds it and
//! its [`ScreenId`], delegates to it and collects the key tables and openers; this file's
//! drawing code never names a screen. To add one, see "Adding a screen" in the README.

pub mod class_quiz;
#[cfg(test)]
pub mod clock;
pub mod hang;
pub mod home;
pub mod lab;
pub mod lesson;
pub mod notes_view;
pub mod planner;
pub mod present;
pub mod quiz;
pub mod ring;
pub mod stats;
pub mod tpcalc;
pub mod track;

// Helpers that are not screens.
pub mod drill;
pub mod help;
pub mod ring_draw;

use std::time::Duration;

use ratatui::Frame;
use ratatui::layout::{Alignment, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::app::{Action, App, MIN_HEIGHT, MIN_WIDTH, Outcome};
use super::error::ScreenError;
use super::keys::{self, Context};

/// What every screen does. Only `update`, `render` and `contexts` are required.
pub trait View {
    /// Apply an action (the only place the screen's state changes); what the stack should do.
    fn update(&mut self, app: &mut App, action: Action) -> Outcome;
    /// Draw into `area` (everything but the hint bar). Never mutates.
    fn render(&self, app: &App, frame: &mut Frame, area: Rect);
    /// The contexts of its `KEYS` that apply now, most specific first (then Global).
    fn contexts(&self) -> Vec<Context>;
    /// The contexts the `?` overlay lists (all of the screen's states); default: `contexts`.
    fn help_contexts(&self) -> Vec<Context> {
        self.contexts()
    }
    /// How often it wants `Action::Tick` now; None while idle.
    fn tick(&self, _app: &App) -> Option<Duration> {
        None
    }
    /// A result of background work sent to screens of its kind (`Background::to`): a value of
    /// a type its file defines, to downcast.
    fn receive(&mut self, _msg: &dyn std::any::Any, _app: &mut App) {}
    /// The action every key but Ctrl-C sends now, whatever the key table says (a blanked
    /// presentation comes back on any key); None: the key table decides.
    fn on_any_key(&self) -> Option<Action> {
        None
    }
    /// True while typed text goes to a field of the screen instead of the key table.
    fn takes_text(&self) -> bool {
        false
    }
    /// The hint bar's line when the screen owns it (a search or an answer line being typed).
    /// Words the hint bar starts with, before the keys (the next step, at a lesson's end).
    fn hint_lead(&self, _app: &App) -> Option<Vec<Span<'static>>> {
        None
    }

    fn hint_line(&self, _app: &App) -> Option<Line<'static>> {
        None
    }
    /// Lay out again for a new size, a reload or the TeX toggle while below the top.
    fn relayout(&mut self, _app: &App) {}
}

/// How the course map opens a screen: a key on the map and what it builds. A screen declares
/// its opener in its own file and names it on its `screens!` line (`opens OPENER`); the map's
/// keys ([`OPENER_KEYS`]), its `?` overlay and its routing ([`opener`]) all read [`OPENERS`].
pub struct Opener {
    pub key: &'static [keys::Key],
    pub desc: &'static str,
    /// In the hint bar: (priority, short text); None: only in `?`.
    pub hint: Option<(u8, &'static str)>,
    /// Build the screen; the map's selected entry is at hand. An error goes to the status line.
    pub open: fn(&mut App, usize) -> Result<Screen, ScreenError>,
}

impl Opener {
    /// An opener on `key`, described as `desc`, shown in the hint bar as `hint` (priority,
    /// short text) or only in `?` (None).
    pub const fn new(
        key: &'static [keys::Key],
        desc: &'static str,
        hint: Option<(u8, &'static str)>,
        open: fn(&mut App, usize) -> Result<Screen, ScreenError>,
    ) -> Self {
        Self {
            key,
            desc,
            hint,
            open,
        }
    }
}

/// The opener of screen `id`, if the course map opens it.
pub fn opener(id: ScreenId) -> Option<&'static Opener> {
    OPENERS.iter().find(|(of, _)| *of == id).map(|(_, o)| *o)
}

/// Builds, from the list of screens: the [`Screen`] variant holding each one's state and its
/// [`ScreenId`], the delegation, every key table ([`ALL_KEYS`]) and the openers.
macro_rules! screens {
    ($( $(#[$doc:meta])* $variant:ident($module:ident::$state:ident) $(opens $opener:ident)?, )*) => {
        /// Every opener with the screen it opens, in list order.
        pub const OPENERS: &[(ScreenId, &Opener)] =
            &[ $( $( (ScreenId::$variant, &$module::$opener), )? )* ];

        /// The openers' keys: the course map's, besides its own `KEYS`.
        pub const OPENER_KEYS: &[keys::Binding] = &[ $( $( keys::bind(
            home::OWN,
            $module::$opener.key,
            $module::$opener.desc,
            Action::OpenScreen(ScreenId::$variant),
            $module::$opener.hint,
        ), )? )* ];

        /// Every screen's key table, and the openers'.
        pub const ALL_KEYS: &[&[keys::Binding]] = &[ $( $module::KEYS, )* OPENER_KEYS ];

        /// The screens on the stack.
        pub enum Screen {
            $( $(#[$doc])* $variant(Box<$module::$state>), )*
        }

        /// Which screen a [`Screen`] is (where background results go, what a key opens).
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum ScreenId {
            $( $(#[$doc])* $variant, )*
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

            pub fn id(&self) -> ScreenId {
                match self {
                    $( Screen::$variant(_) => ScreenId::$variant, )*
                }
            }

            /// The screen's key table (its file's `KEYS`).
            pub fn keys(&self) -> &'static [keys::Binding] {
                match self {
                    $( Screen::$variant(_) => $module::KEYS, )*
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

/// The list of screens, written once. The README's example screen (`clock.rs`) joins it in test
/// builds, where it is compiled and tested; it is never shipped.
macro_rules! all_screens {
    ($($example:tt)*) => {
        screens! {
            /// The course map.
            Home(home::HomeState),
            Lesson(lesson::LessonState),
            Ring(ring::RingState) opens OPENER,
            /// A quiz, a drill session or a mock interview.
            Quiz(quiz::QuizState),
            Stats(stats::StatsState) opens OPENER,
            /// The tracks: the whole course, an interview sprint.
            Track(track::TrackState) opens OPENER,
            TpCalc(tpcalc::TpCalcState) opens OPENER,
            Planner(planner::PlannerState) opens OPENER,
            /// The live lab (real rank processes over TCP).
            Lab(lab::LabState) opens OPENER,
            /// The hang lab.
            Hang(hang::HangState) opens OPENER,
            /// Presenter mode: a lesson as slides.
            Present(present::PresentState),
            /// Presenter mode: a quiz for a class (no grading, nothing recorded).
            ClassQuiz(class_quiz::ClassQuizState),
            /// The notes terminal following a presenter.
            Notes(notes_view::NotesState),
            $($example)*
        }
    };
}

#[cfg(test)]
all_screens! {
    Clock(clock::ClockState) opens OPENER,
}

#[cfg(not(test))]
all_screens! {}

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
    if let Some(n) = &app.notice {
        help::render_notice(n, app, frame, body);
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

/// The hint bar while a screen's one-line text field is open (a typed size, an address, a
/// fix): the field's own keys, after the status when there is one (a refused value says why).
pub fn typing_hint(app: &App, enter: &str) -> Line<'static> {
    let t = &app.theme;
    let keys = vec![
        Span::styled("Enter", t.key),
        Span::styled(format!(" {enter}  "), t.dim),
        Span::styled("Esc", t.key),
        Span::styled(" cancel  ", t.dim),
        Span::styled("Ctrl-U/W", t.key),
        Span::styled(" clear/word", t.dim),
    ];
    let Some(status) = &app.status else {
        return Line::from(keys);
    };
    // The status first; the keys only where they fit after it (the field's own line names
    // Enter and Esc too), and a status too long for the bar ends in an ellipsis.
    let w = app.width as usize;
    let keys_w: usize = keys.iter().map(Span::width).sum();
    let status_w = unicode_width::UnicodeWidthStr::width(status.as_str());
    if status_w + 2 + keys_w <= w {
        let mut spans = vec![Span::styled(format!("{status}  "), t.accent)];
        spans.extend(keys);
        Line::from(spans)
    } else {
        // The field takes `m` now: Esc leaves it first (the message stays in the list).
        cut_status(app, status, w, true)
    }
}

/// A status too long for the bar: cut at a word with an ellipsis, and the key that shows it
/// whole (`m`, or Ctrl-L where the screen has `m`) at the end.
fn cut_status(app: &App, status: &str, w: usize, typing: bool) -> Line<'static> {
    let t = &app.theme;
    let key = keys::messages_key(&app.bindings()).name();
    let key = if typing { format!("Esc, {key}") } else { key };
    let whole = format!("  {key}: whole");
    let room = w.saturating_sub(unicode_width::UnicodeWidthStr::width(whole.as_str()) + 1);
    let cut = crate::tui::markdown::ellipsize(status, room);
    let body = cut.trim_end_matches('…');
    let cut = match body.rfind(' ') {
        Some(i) if i > room / 2 => format!("{}…", body[..i].trim_end()),
        _ => cut,
    };
    Line::from(vec![
        Span::styled(cut, t.accent),
        Span::styled("  ", t.dim),
        Span::styled(key, t.key),
        Span::styled(": whole", t.dim),
    ])
}

/// The always-visible key-hint bar, gathered from the key table of what has focus.
fn hint_bar(app: &App, width: u16) -> Paragraph<'static> {
    let mut spans = Vec::new();
    if let Some(p) = hint_override(app, width, &mut spans) {
        return p;
    }
    key_hints(app, width, spans)
}

/// What the bar shows instead of the keys (a notice, the screen's own line, a status that
/// fills it), or None with the status and the screen's lead pushed onto `spans`.
fn hint_override(
    app: &App,
    width: u16,
    spans: &mut Vec<Span<'static>>,
) -> Option<Paragraph<'static>> {
    let t = &app.theme;
    // A notice takes the next key, whatever it is: the bar promises nothing else.
    if app.notice.is_some() {
        return Some(Paragraph::new(Line::from(vec![
            Span::styled("any key", t.key),
            Span::styled(" dismisses the notice  ", t.dim),
            Span::styled("Ctrl-C", t.key),
            Span::styled(" quit", t.dim),
        ])));
    }
    if app.help.is_none()
        && let Some(line) = app.stack.last().and_then(|s| s.view().hint_line(app))
    {
        return Some(Paragraph::new(line));
    }
    if let Some(s) = &app.status {
        // A status longer than the bar ends at a word with an ellipsis, never mid-word.
        let w = width as usize;
        let shown = if unicode_width::UnicodeWidthStr::width(s.as_str()) + 2 <= w {
            s.clone()
        } else {
            // The status takes the whole bar until the next key; the keys come back then.
            return Some(Paragraph::new(cut_status(app, s, w, false)));
        };
        spans.push(Span::styled(format!("{shown}  "), t.accent));
    }
    if app.help.is_none()
        && let Some(lead) = app.stack.last().and_then(|s| s.view().hint_lead(app))
    {
        spans.extend(lead);
    }
    None
}

/// The keys of what has focus after `spans` (a status, a lead), by priority, as many as fit;
/// back and help always, help as "more: ?" when some did not fit.
fn key_hints(app: &App, width: u16, mut spans: Vec<Span<'static>>) -> Paragraph<'static> {
    let t = &app.theme;
    let all = app.bindings();
    // On the screen that quits (the course map, or what the command line opened), "back" is
    // "quit", shown with the keys the screen has not taken for itself (the map keeps Esc).
    let at_root = app.stack.len() <= app.launched.max(1);
    let own = |k: &keys::Key| {
        all.iter()
            .any(|o| o.ctx != keys::Context::Global && o.keys.contains(k))
    };
    let quits = |b: &keys::Binding| at_root && b.action == super::app::Action::Back;
    let label = |b: &keys::Binding| {
        if quits(b) {
            let free: Vec<String> = b
                .keys
                .iter()
                .filter(|k| !own(k))
                .map(|k| k.name())
                .collect();
            free.join("/")
        } else {
            b.short_label(&all)
        }
    };
    let bar = |b: &keys::Binding| match b.hint {
        _ if quits(b) => "quit",
        Some((_, short)) => short,
        None => b.desc,
    };
    let w = |b: &keys::Binding| label(b).chars().count() + bar(b).chars().count() + 3;
    // The screen's keys by priority; back and help always show, help as "more: ?" when some
    // keys did not fit (the overlay lists them all).
    let mut local: Vec<&keys::Binding> = all
        .iter()
        .copied()
        .filter(|b| b.ctx != keys::Context::Global && b.hint.is_some())
        .collect();
    local.sort_by_key(|b| b.hint.map_or(u8::MAX, |(p, _)| p));
    // A global key every one of whose keys the screen has taken for itself (the live lab's
    // q/Esc cancel a run) is not shown: it would promise what those keys no longer do.
    let shadowed = |b: &keys::Binding| {
        b.keys.iter().all(|k| {
            all.iter()
                .any(|o| o.ctx != keys::Context::Global && o.keys.contains(k))
        })
    };
    let global: Vec<&keys::Binding> = all
        .iter()
        .copied()
        .filter(|b| b.ctx == keys::Context::Global && b.hint.is_some() && !shadowed(b))
        .collect();
    // "more: ?" is two columns wider than "? help".
    let reserved: usize = global.iter().map(|b| w(b)).sum::<usize>() + 2;
    // A status that leaves no room for the global keys takes the bar alone (until the next
    // key), rather than cutting "q/Esc back" mid-word.
    let status_w: usize = spans.iter().map(|s| s.width()).sum();
    if status_w > 0 && status_w + reserved > width as usize {
        return Paragraph::new(Line::from(spans));
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tui::keys::{BINDINGS, Key};

    #[test]
    fn openers_take_no_key_the_map_or_every_screen_already_has() {
        let taken: Vec<(Key, &str)> = BINDINGS
            .iter()
            .filter(|b| b.ctx == Context::Global)
            .chain(home::KEYS)
            .flat_map(|b| b.keys.iter().map(move |k| (*k, b.desc)))
            .collect();
        let mut seen: Vec<(Key, &str)> = Vec::new();
        for b in OPENER_KEYS {
            assert_eq!(b.ctx, home::OWN, "{}", b.desc);
            for k in b.keys {
                if let Some((_, what)) = taken.iter().chain(&seen).find(|(t, _)| t == k) {
                    panic!("{:?} opens {:?} but already means {what:?}", k, b.desc);
                }
                seen.push((*k, b.desc));
            }
        }
        assert!(OPENERS.len() >= 6, "{} openers", OPENERS.len());
        assert_eq!(OPENER_KEYS.len(), OPENERS.len());
    }

    /// Every screen's table, whatever its state (the live lab's running keys too).
    #[test]
    fn no_own_key_hides_help_or_quit() {
        for table in ALL_KEYS {
            for b in *table {
                for k in [Key::Char('?'), Key::Ctrl('c')] {
                    assert!(
                        !b.keys.contains(&k),
                        "{}: {:?} takes {k:?}",
                        b.ctx.title(),
                        b.desc
                    );
                }
            }
        }
        let rows = || ALL_KEYS.iter().copied().flatten();
        assert!(
            rows().any(|b| b.desc.starts_with("cancel the run")),
            "the lab's, running"
        );
        assert!(
            rows().any(|b| b.ctx == Context::Own("Clock")),
            "the README's example"
        );
    }

    #[test]
    fn every_open_screen_key_has_an_opener_and_each_opens_its_screen() {
        let mut app = App::new(
            crate::course::Course::embedded(),
            crate::tui::theme::Theme::color(),
        );
        let bound = ALL_KEYS.iter().copied().flatten();
        for b in bound {
            if let Action::OpenScreen(id) = b.action {
                assert!(opener(id).is_some(), "{id:?}: no opener");
            }
        }
        for (id, o) in OPENERS {
            let screen = (o.open)(&mut app, 0).unwrap_or_else(|e| panic!("{id:?}: {e}"));
            assert_eq!(screen.id(), *id);
        }
    }

    /// The README's "Adding a screen" is this crate's clock.rs, word for word, with its line in
    /// the list; the file is formatted as rustfmt would.
    #[test]
    fn readme_example_is_the_clock_screen() {
        let root = env!("CARGO_MANIFEST_DIR");
        let readme = std::fs::read_to_string(format!("{root}/README.md")).expect("README");
        let section = readme
            .split("### Adding a screen")
            .nth(1)
            .expect("the README has an Adding a screen section");
        let blocks: Vec<&str> = section
            .split("```rust\n")
            .skip(1)
            .map(|b| b.split("```").next().unwrap_or(""))
            .take(2)
            .collect();
        assert_eq!(blocks.len(), 2, "a file and its lines in mod.rs");
        let file =
            std::fs::read_to_string(format!("{root}/src/tui/screens/clock.rs")).expect("clock.rs");
        assert_eq!(blocks[0], file, "the README's screen is clock.rs as it is");
        let list = std::fs::read_to_string(format!("{root}/src/tui/screens/mod.rs")).expect("mod");
        for line in blocks[1].lines().map(str::trim).filter(|l| !l.is_empty()) {
            assert!(
                list.lines().any(|l| l.trim() == line),
                "{line:?} is not in screens/mod.rs"
            );
        }
        // The key it binds is on the course map.
        let mut app = App::new(
            crate::course::Course::embedded(),
            crate::tui::theme::Theme::color(),
        );
        let ev = crossterm::event::KeyEvent::new(
            crossterm::event::KeyCode::Char('c'),
            crossterm::event::KeyModifiers::NONE,
        );
        let action = keys::lookup(&app.key_tables(), &app.contexts(), &ev);
        assert_eq!(action, Some(Action::OpenScreen(ScreenId::Clock)));
        let screen = opener(ScreenId::Clock)
            .map(|o| (o.open)(&mut app, 0))
            .expect("an opener");
        assert!(matches!(screen, Ok(Screen::Clock(_))));
        // Formatted as rustfmt would, where rustfmt is installed (it is in CI).
        match std::process::Command::new("rustfmt")
            .args(["--check", "--edition", "2024"])
            .arg(format!("{root}/src/tui/screens/clock.rs"))
            .output()
        {
            Ok(out) => assert!(
                out.status.success(),
                "clock.rs is not formatted:\n{}",
                String::from_utf8_lossy(&out.stdout)
            ),
            Err(e) => eprintln!("rustfmt not run ({e}); the README and the file still agree"),
        }
    }
}
