//! Screens: one file each, registered with one line in the `screens!` list below.
//!
//! A screen is a state type that implements [`View`] (update, render, key contexts, tick,
//! background results, text input) in its own file, with its own keys and, if the course map
//! opens it, its [`Opener`]. The list declares the module, adds the [`Screen`] variant that
//! holds it, delegates to it and collects the openers; this file's drawing code never names a
//! screen. Not yet so for older screens: `keys.rs` keeps a context for each of those whose keys
//! predate `Context::Own`, and `app.rs` names the Home screen (the bottom of the stack), the TP
//! calculator and planner the command line opens directly, and the lab, hang and notes screens'
//! background messages. To add one, see "Adding a screen" in the README.

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

/// How the course map opens a screen: a key on the map and what it builds. A screen declares
/// its opener in its own file and names it on its `screens!` line (`opens OPENER`); the map's
/// keys, its `?` overlay and its routing all read [`OPENERS`].
pub struct Opener {
    /// Context [`Context::Home`], action `Action::OpenScreen(name)`.
    pub binding: keys::Binding,
    /// Build the screen; the map's selected entry is at hand. An error goes to the status line.
    pub open: fn(&mut App, usize) -> Result<Screen, String>,
}

impl Opener {
    /// An opener for screen `name` on `key`, described as `desc`, shown in the hint bar as
    /// `hint` (priority, short text) or only in `?` (None).
    pub const fn new(
        name: &'static str,
        key: &'static [keys::Key],
        desc: &'static str,
        hint: Option<(u8, &'static str)>,
        open: fn(&mut App, usize) -> Result<Screen, String>,
    ) -> Self {
        Self {
            binding: keys::bind(Context::Home, key, desc, Action::OpenScreen(name), hint),
            open,
        }
    }
}

/// The opener whose key sends `action`, if any.
pub fn opener_for(action: Action) -> Option<&'static Opener> {
    OPENERS.iter().copied().find(|o| o.binding.action == action)
}

/// Declares each screen's module, the [`Screen`] variant holding its state, the delegation and,
/// for a screen the course map opens, its opener.
macro_rules! screens {
    ($( $(#[$doc:meta])* $variant:ident($module:ident::$state:ident) $(opens $opener:ident)?, )*) => {
        $( pub mod $module; )*

        /// Every screen's opener, in list order.
        pub const OPENERS: &[&Opener] = &[ $( $( &$module::$opener, )? )* ];

        /// The openers' keys: the course map's own key table.
        pub static OPENER_KEYS: &[keys::Binding] = &[ $( $( $module::$opener.binding, )? )* ];

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
        Line::styled(crate::tui::markdown::ellipsize(status, w), t.accent)
    }
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
    use crate::tui::keys::{BINDINGS, Binding, Key};

    fn shared(ctx: Context) -> impl Iterator<Item = &'static Binding> {
        BINDINGS.iter().filter(move |b| b.ctx == ctx)
    }

    #[test]
    fn openers_take_no_key_the_map_or_every_screen_already_has() {
        let taken: Vec<(Key, &str)> = shared(Context::Global)
            .chain(shared(Context::Home))
            .flat_map(|b| b.keys.iter().map(move |k| (*k, b.desc)))
            .collect();
        let mut seen: Vec<(Key, &str)> = Vec::new();
        for o in OPENERS {
            assert_eq!(o.binding.ctx, Context::Home, "{}", o.binding.desc);
            for k in o.binding.keys {
                if let Some((_, what)) = taken.iter().chain(&seen).find(|(t, _)| t == k) {
                    panic!(
                        "{:?} opens {:?} but already means {what:?}",
                        k, o.binding.desc
                    );
                }
                seen.push((*k, o.binding.desc));
            }
        }
        assert!(OPENERS.len() >= 6, "{} openers", OPENERS.len());
        assert_eq!(OPENER_KEYS.len(), OPENERS.len());
    }

    #[test]
    fn no_own_key_hides_help_or_quit() {
        let tables: [(&str, &[Binding]); 4] = [
            ("course map", OPENER_KEYS),
            ("present", present::KEYS),
            ("class quiz", class_quiz::KEYS),
            ("notes", notes_view::KEYS),
        ];
        for (name, table) in tables {
            for b in table {
                for k in [Key::Char('?'), Key::Ctrl('c')] {
                    assert!(!b.keys.contains(&k), "{name}: {:?} takes {k:?}", b.desc);
                }
            }
        }
    }

    #[test]
    fn every_open_screen_key_has_an_opener_and_each_opens_its_screen() {
        let mut app = App::new(
            crate::course::Course::embedded(),
            crate::tui::theme::Theme::color(),
        );
        let bound = BINDINGS
            .iter()
            .chain(present::KEYS)
            .chain(OPENER_KEYS)
            .filter(|b| matches!(b.action, Action::OpenScreen(_)));
        for b in bound {
            assert!(opener_for(b.action).is_some(), "{:?}: no opener", b.action);
        }
        for o in OPENERS {
            let Action::OpenScreen(name) = o.binding.action else {
                panic!("{}: not an OpenScreen action", o.binding.desc);
            };
            let screen = (o.open)(&mut app, 0).unwrap_or_else(|e| panic!("{name}: {e}"));
            // The screen it built is the one it is named for: its variant's name.
            let variant = match screen {
                Screen::Ring(_) => "Ring",
                Screen::Stats(_) => "Stats",
                Screen::TpCalc(_) => "TpCalc",
                Screen::Planner(_) => "Planner",
                Screen::Lab(_) => "Lab",
                Screen::Hang(_) => "Hang",
                Screen::Clock(_) => "Clock",
                _ => "another screen",
            };
            assert_eq!(variant, name);
        }
    }

    /// The README's "Adding a screen" is this crate's clock.rs, word for word, with its line in
    /// the list; the file is formatted (cargo fmt does not reach files declared in a macro).
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
        assert_eq!(blocks.len(), 2, "a file and a list line");
        let file =
            std::fs::read_to_string(format!("{root}/src/tui/screens/clock.rs")).expect("clock.rs");
        assert_eq!(blocks[0], file, "the README's screen is clock.rs as it is");
        let list = std::fs::read_to_string(format!("{root}/src/tui/screens/mod.rs")).expect("mod");
        let line = blocks[1].trim();
        assert!(
            list.lines().any(|l| l.trim() == line),
            "{line:?} is not in the screens list"
        );
        // The key it binds is on the course map.
        let mut app = App::new(
            crate::course::Course::embedded(),
            crate::tui::theme::Theme::color(),
        );
        let ev = crossterm::event::KeyEvent::new(
            crossterm::event::KeyCode::Char('c'),
            crossterm::event::KeyModifiers::NONE,
        );
        let home = home::HomeState::default();
        let action = keys::lookup_with(home.keys(), &home.contexts(), &ev);
        assert_eq!(action, Some(Action::OpenScreen("Clock")));
        let screen = opener_for(Action::OpenScreen("Clock"))
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
