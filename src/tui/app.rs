//! The TEA core: one model (`App`), one `Action` enum, `update` (the only place state
//! changes) and `render` (draws a snapshot, never mutates).

use ratatui::Frame;
use ratatui::layout::Rect;

use super::keys::Context;
use super::screens::{
    self,
    help::HelpState,
    lesson::LessonState,
    ring::{RingParams, RingState},
};
pub use super::screens::{Screen, ScreenId};
use super::theme::Theme;
use std::path::PathBuf;

use crate::course::Course;
use crate::study::progress::{self, Progress};

/// Everything the user or a background task can ask for: what every screen understands, and
/// [`Action::Screen`] for a verb of the focused screen's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Quit,
    Back,
    Help,
    /// Show the last messages whole (`m`): a status cut to the hint bar's width is read here.
    Messages,
    Resize(u16, u16),
    /// Move the selection or scroll by lines.
    Move(i32),
    Page(i32),
    Top,
    Bottom,
    Open,
    /// Open this screen, by the opener its file declares (`screens::Opener`).
    OpenScreen(ScreenId),
    Reload,
    /// An edit of the open text field (a typed character, Backspace, Ctrl-W, …).
    Edit(super::field::InputRequest),
    InputSubmit,
    InputCancel,
    /// Animation clock.
    Tick,
    /// Change the focused field's value: +1 next, -1 previous.
    Adjust(i32),
    /// A verb of one screen's own: the screen, its file's `enum Verb` (`Verb::X.by(d)`, read
    /// back with `Verb::from_repr`) and an amount (+1/−1 for verbs that go both ways, else 0).
    /// Only the screen it names reads it.
    Screen(ScreenId, u8, i32),
}

/// Results of background work, sent to the event loop over the app's channel.
pub enum Background {
    /// Syntax highlighting finished loading: every screen lays itself out again with colour.
    HighlightingReady,
    /// A result for the screens of kind `to` on the stack (`msg` is of a type their file
    /// defines: the lab's `LabUpdate`, the hang lab's `HangUpdate`, …).
    For {
        to: ScreenId,
        msg: Box<dyn std::any::Any + Send>,
    },
}

impl Background {
    /// A result for the screens of kind `to`.
    pub fn to(to: ScreenId, msg: impl std::any::Any + Send) -> Self {
        Self::For {
            to,
            msg: Box::new(msg),
        }
    }
}

/// Offer a background result to the screens on the stack it is for.
pub fn receive(app: &mut App, msg: Background) {
    receive_inner(app, msg);
    remember_status(app);
}

fn receive_inner(app: &mut App, msg: Background) {
    for i in 0..app.stack.len() {
        match &msg {
            Background::HighlightingReady => {
                with_screen(app, i, |s, app| s.view_mut().relayout(app));
            }
            Background::For { to, msg } if app.stack[i].id() == *to => {
                with_screen(app, i, |s, app| s.view_mut().receive(msg.as_ref(), app));
            }
            Background::For { .. } => {}
        }
    }
}

/// Run `f` on screen `i` of the stack with the rest of the app at hand. The stack is apart
/// from the app for the call (as helix keeps its `Context` apart from the layers): the screen
/// gets itself and the app, and no stand-in takes its place; what it asks of the stack it
/// returns as an [`Outcome`].
pub fn with_screen<R>(
    app: &mut App,
    i: usize,
    f: impl FnOnce(&mut Screen, &mut App) -> R,
) -> Option<R> {
    let mut stack = std::mem::take(&mut app.stack);
    let r = stack.get_mut(i).map(|screen| f(screen, app));
    app.stack = stack;
    r
}

impl Action {
    /// This action as a verb of screen `of`, whose `Verb::from_repr` is given, with its amount.
    pub fn verb<V>(self, of: ScreenId, from_repr: fn(u8) -> Option<V>) -> Option<(V, i32)> {
        match self {
            Action::Screen(id, v, d) if id == of => from_repr(v).map(|v| (v, d)),
            _ => None,
        }
    }

    /// The action that undoes this one (+1 ↔ −1), for pairing keys in hints.
    pub fn reversed(self) -> Option<Action> {
        Some(match self {
            Action::Move(d) => Action::Move(-d),
            Action::Page(d) => Action::Page(-d),
            Action::Adjust(d) => Action::Adjust(-d),
            Action::Screen(id, v, d) if d != 0 => Action::Screen(id, v, -d),
            _ => return None,
        })
    }
}

pub const MIN_WIDTH: u16 = 80;
pub const MIN_HEIGHT: u16 = 24;

pub struct App {
    pub course: Course,
    pub theme: Theme,
    pub width: u16,
    pub height: u16,
    /// Screen stack: the course map at the bottom, the focused screen on top.
    pub stack: Vec<Screen>,
    pub help: Option<HelpState>,
    pub quit: bool,
    /// The quit came from Ctrl-C (the shell convention is exit status 130).
    pub interrupted: bool,
    /// Stack depth of the screen the command line opened (`ringlab drill`: the drill). Backing
    /// out of it returns to the shell instead of the course map beneath it.
    pub launched: usize,
    /// One line of feedback shown in the hint bar until the next key, or for
    /// [`STATUS_TTL`] when no key comes.
    pub status: Option<String>,
    /// When the status was first seen by a tick or the event loop (None: not yet).
    pub status_since: Option<std::time::Instant>,
    /// The last messages shown (statuses and notices), oldest first: `m` shows them whole.
    pub messages: Vec<String>,
    /// A message that stays on screen, across resizes, until a key dismisses it (the progress
    /// file set aside at start-up); it is in `messages` too.
    pub notice: Option<String>,
    pub raw_tex: bool,
    pub progress: Progress,
    /// Where progress is saved; None keeps it in memory (tests, snapshots).
    pub progress_dir: Option<PathBuf>,
    /// Where background work sends its results (set by the event loop).
    pub bg: Option<tokio::sync::mpsc::UnboundedSender<Background>>,
    /// Each lesson's quiz item ids (what "done" needs besides reading), kept with the course.
    pub quizzes: std::collections::BTreeMap<String, Vec<String>>,
    /// Text a screen asked to copy: the event loop hands it to the terminal's clipboard
    /// (OSC 52) after the next draw.
    pub clipboard: Option<String>,
    /// When the action being handled came, and when the one before it did (None before the
    /// first, and while the `?` overlay covered the screens): the lesson reader credits the
    /// time between to what it showed.
    pub now: std::time::Instant,
    pub last_action: Option<std::time::Instant>,
    /// The reading floor, words per minute ([`crate::study::reading`]).
    pub read_wpm: f64,
    /// Sections read per lesson as last saved (a newly read one saves at once).
    pub sections_saved: std::collections::BTreeMap<String, (usize, usize)>,
}

impl App {
    pub fn new(course: Course, theme: Theme) -> Self {
        let quizzes = crate::course::bank::Bank::from_course(&course).lesson_quizzes();
        Self {
            quizzes,
            progress: Progress::default(),
            progress_dir: None,
            bg: None,
            course,
            theme,
            width: MIN_WIDTH,
            height: MIN_HEIGHT,
            stack: vec![Screen::default()],
            help: None,
            quit: false,
            interrupted: false,
            launched: 1,
            status: None,
            status_since: None,
            messages: Vec::new(),
            notice: None,
            raw_tex: false,
            clipboard: None,
            now: std::time::Instant::now(),
            last_action: None,
            read_wpm: crate::study::reading::DEFAULT_READ_WPM,
            sections_saved: Default::default(),
        }
    }

    /// The track the learner follows.
    pub fn track(&self) -> crate::study::track::TrackId {
        self.progress.track.unwrap_or_default()
    }

    /// What the tracks need to know of the course and progress.
    pub fn planner(&self) -> crate::study::track::Planner<'_> {
        crate::study::track::Planner {
            course: &self.course,
            quizzes: &self.quizzes,
            progress: &self.progress,
        }
    }

    /// The next step on the learner's track after `after` (where they just were).
    pub fn next_step(
        &self,
        after: Option<&crate::study::track::Step>,
    ) -> Option<crate::study::track::Planned> {
        self.planner().next(self.track(), after)
    }

    /// A lesson's quiz item ids (none for a lesson without a quiz).
    pub fn quiz_of(&self, lesson: &str) -> &[String] {
        self.quizzes.get(lesson).map_or(&[], Vec::as_slice)
    }

    /// Open a lesson on top of the course map. Unknown ids return the known ones.
    pub fn open_lesson(&mut self, id: &str) -> Result<(), Vec<String>> {
        let Some(idx) = self.course.position_of(id) else {
            return Err(self.course.ids().iter().map(|s| s.to_string()).collect());
        };
        if let Some(Screen::Home(h)) = self.stack.first_mut() {
            h.selected = idx;
        }
        let state = LessonState::open_resumed(self, idx);
        self.stack.push(state.into());
        Ok(())
    }

    /// Remember what the reader reports of a lesson (in memory).
    pub fn note_lesson(&mut self, id: &str, note: &progress::ReadingNote) {
        self.progress.note_lesson(id, note, chrono::Utc::now());
    }

    /// Remember what the reader reports of a lesson and save, reporting a failed save.
    pub fn record_lesson(&mut self, id: &str, note: &progress::ReadingNote) {
        self.note_lesson(id, note);
        self.save_progress();
    }

    pub fn save_progress(&mut self) {
        if let Some(dir) = &self.progress_dir {
            match progress::save(dir, &mut self.progress) {
                Ok(Some(notice)) => self.status = Some(notice.to_string()),
                Ok(None) => {}
                Err(e) => self.status = Some(format!("{e}")),
            }
        }
    }

    /// Show `msg` until a key dismisses it, and keep it with the messages (`m`).
    pub fn set_notice(&mut self, msg: String) {
        remember(self, &msg);
        self.notice = Some(msg);
    }

    /// Mark the screen now on top as the one the command line opened: leaving it quits.
    pub fn launched_here(&mut self) {
        self.launched = self.stack.len();
    }

    /// Open the ring view on top of the course map.
    pub fn open_ring(&mut self, params: RingParams) -> Result<(), super::error::ScreenError> {
        let state = RingState::new(params)?;
        self.stack.push(state.into());
        Ok(())
    }

    pub fn too_small(&self) -> bool {
        self.width < MIN_WIDTH || self.height < MIN_HEIGHT
    }

    /// The key contexts of what has focus, most specific first.
    pub fn contexts(&self) -> Vec<Context> {
        if self.help.is_some() {
            return vec![Context::Help];
        }
        self.stack
            .last()
            .map_or_else(Vec::new, |s| s.view().contexts())
    }

    /// The key tables of what has focus: the focused screen's (none while the help overlay is
    /// open) and the course map's openers (theirs is the course map's context).
    pub fn key_tables(&self) -> Vec<&'static [super::keys::Binding]> {
        match (&self.help, self.stack.last()) {
            (None, Some(s)) => vec![screens::OPENER_KEYS, s.keys()],
            _ => Vec::new(),
        }
    }

    /// The bindings of what has focus, in the order the hint bar and lookups read them.
    pub fn bindings(&self) -> Vec<&'static super::keys::Binding> {
        super::keys::active(&self.key_tables(), &self.contexts()).collect()
    }

    /// Is a presentation running under the screen on top (`ringlab present`, or `P`)?
    pub fn presenting(&self) -> bool {
        self.stack.iter().any(|s| s.id() == ScreenId::Present)
    }

    /// True while text input goes to a prompt instead of the key table.
    pub fn prompt_open(&self) -> bool {
        self.stack.last().is_some_and(|s| s.view().takes_text())
    }

    /// How often the app wants a Tick (a running animation); None when idle.
    pub fn tick_interval(&self) -> Option<std::time::Duration> {
        self.stack.last().and_then(|s| s.view().tick(self))
    }

    /// The area screens draw into: all but the hint bar.
    pub fn body_area(&self) -> Rect {
        Rect::new(0, 0, self.width, self.height.saturating_sub(1))
    }
}

/// How many messages `m` keeps.
pub const MESSAGES_KEPT: usize = 50;

/// Keep `msg` with the last messages (once, when it repeats the newest).
fn remember(app: &mut App, msg: &str) {
    if app.messages.last().is_some_and(|m| m == msg) {
        return;
    }
    app.messages.push(msg.to_string());
    if app.messages.len() > MESSAGES_KEPT {
        app.messages.remove(0);
    }
}

/// Keep the status now shown with the last messages.
fn remember_status(app: &mut App) {
    if let Some(s) = app.status.clone() {
        remember(app, &s);
    }
}

/// How long a status message stays when no key comes.
pub const STATUS_TTL: std::time::Duration = std::time::Duration::from_secs(3);

/// When the shown status message should go, if one is shown (the event loop wakes then).
pub fn status_deadline(app: &mut App) -> Option<std::time::Instant> {
    app.status.as_ref()?;
    // A status set outside `update` (at start-up) is kept with the messages too.
    remember_status(app);
    let since = *app.status_since.get_or_insert_with(std::time::Instant::now);
    Some(since + STATUS_TTL)
}

/// Drop the status message once it has been shown for [`STATUS_TTL`].
pub fn expire_status(app: &mut App, now: std::time::Instant) {
    if app
        .status_since
        .is_some_and(|since| now.saturating_duration_since(since) >= STATUS_TTL)
    {
        app.status = None;
        app.status_since = None;
    }
}

pub fn update(app: &mut App, action: Action) {
    update_at(app, action, std::time::Instant::now());
}

/// [`update`] with the clock passed in (tests of reading time).
pub fn update_at(app: &mut App, action: Action, now: std::time::Instant) {
    app.now = now;
    handle(app, action);
    remember_status(app);
    app.last_action = app.help.is_none().then_some(now);
}

fn handle(app: &mut App, action: Action) {
    // A notice stays until a key dismisses it; that key does nothing else (Ctrl-C still quits).
    if app.notice.is_some() && !matches!(action, Action::Tick | Action::Resize(..) | Action::Quit) {
        app.notice = None;
        return;
    }
    // A key ends the status message; ticks and resizes leave it for its few seconds.
    match action {
        Action::Tick => {
            let _ = status_deadline(app);
            expire_status(app, std::time::Instant::now());
        }
        Action::Resize(..) => {}
        _ => {
            app.status = None;
            app.status_since = None;
        }
    }
    let before = app.status.clone();
    match action {
        Action::Quit => {
            app.quit = true;
            app.interrupted = true;
            return;
        }
        Action::Resize(w, h) => {
            app.width = w;
            app.height = h;
        }
        Action::Help => {
            app.help = match app.help {
                Some(_) => None,
                None => Some(HelpState::default()),
            };
            return;
        }
        Action::Messages => {
            app.help = match app.help {
                Some(HelpState { messages: true, .. }) => None,
                _ => Some(HelpState {
                    messages: true,
                    ..Default::default()
                }),
            };
            return;
        }
        _ => {}
    }
    if let Some(help) = app.help.as_mut() {
        match action {
            Action::Back => app.help = None,
            Action::Move(d) => help.scroll = help.scroll.saturating_add_signed(d as isize),
            _ => {}
        }
        return;
    }
    if action == Action::Reload {
        reload(app);
    }
    let tex = app.raw_tex;
    let top = app.stack.len().saturating_sub(1);
    let outcome =
        with_screen(app, top, |s, app| s.view_mut().update(app, action)).unwrap_or(Outcome::Pop);
    // Every screen below the top keeps its layout current too.
    if matches!(action, Action::Resize(..) | Action::Reload) || app.raw_tex != tex {
        for i in 0..top {
            with_screen(app, i, |s, app| s.view_mut().relayout(app));
        }
    }
    // A new message starts its own few seconds.
    if app.status != before {
        app.status_since = None;
    }
    match outcome {
        Outcome::Stay => {}
        Outcome::Pop => {
            if app.stack.len() > app.launched.max(1) {
                let left = app.stack.pop().map(|s| s.id());
                if matches!(
                    left,
                    Some(ScreenId::Lesson | ScreenId::Quiz | ScreenId::Track)
                ) {
                    screens::home::point_at_next_step(app);
                }
            } else {
                app.quit = true;
            }
        }
        Outcome::Push(s) => app.stack.push(s),
        Outcome::Replace(s) => {
            app.stack.truncate(1);
            app.launched = 1;
            app.stack.push(s);
        }
    }
}

fn reload(app: &mut App) {
    match app.course.reload() {
        Ok(c) => {
            let errors = c.entries.iter().filter(|e| e.has_errors()).count();
            app.quizzes = crate::course::bank::Bank::from_course(&c).lesson_quizzes();
            app.course = c;
            app.status = Some(match errors {
                0 => format!("reloaded {} lessons", app.course.entries.len()),
                n => format!("reloaded: {n} lesson file(s) have errors"),
            });
        }
        Err(e) => app.status = Some(format!("reload failed: {e}")),
    }
}

/// What a screen's update asks of the stack.
pub enum Outcome {
    Stay,
    Pop,
    Push(Screen),
    /// Go on along the path: every screen above the course map goes, this one opens on it
    /// (q then comes back to the map).
    Replace(Screen),
}

pub fn render(app: &App, frame: &mut Frame) {
    screens::render(app, frame);
}
