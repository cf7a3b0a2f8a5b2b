//! The TEA core: one model (`App`), one `Action` enum, `update` (the only place state
//! changes) and `render` (draws a snapshot, never mutates).

use ratatui::Frame;
use ratatui::layout::Rect;

use super::keys::Context;
pub use super::screens::Screen;
use super::screens::{
    self,
    help::HelpState,
    lesson::LessonState,
    ring::{RingParams, RingState},
};
use super::theme::Theme;
use std::path::PathBuf;

use crate::course::Course;
use crate::study::progress::{self, Progress};

/// Everything the user or a background task can ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Quit,
    Back,
    Help,
    Resize(u16, u16),
    /// Move the selection or scroll by lines.
    Move(i32),
    Page(i32),
    Top,
    Bottom,
    Open,
    /// Open the screen of this name, by the opener its file declares (`screens::Opener`).
    OpenScreen(&'static str),
    Reload,
    Section(i32),
    SearchStart,
    SearchStep(i32),
    /// Lesson: Esc clears an active search; with none, it leaves like `q`.
    ClearSearchOrBack,
    ToggleTex,
    /// Lesson: select the next (+1) or previous (-1) link within the course.
    NextLink(i32),
    /// An edit of the open text field (a typed character, Backspace, Ctrl-W, …).
    Edit(super::field::InputRequest),
    InputSubmit,
    InputCancel,
    // Ring view
    PlayPause,
    Step(i32),
    Ranks(i32),
    Speed(i32),
    CycleAlgo,
    CycleOp,
    CycleSize,
    CycleLink,
    /// Animation clock.
    Tick,
    // Quizzes, drills, stats
    OpenQuiz,
    OpenDrill,
    /// A mock interview: recall questions from the drills with their follow-ups.
    OpenMock,
    /// Next quiz item.
    Next,
    /// Open the lesson at the section a quiz item comes from.
    GotoSource,
    /// Grade a recall item yourself: 1 Again, 2 Hard, 3 Good, 4 Easy.
    Rate(u8),
    /// Reveal the next hint tier.
    Hint,
    /// Hang lab: blind mode on/off (scenarios numbered, the cause kept out of the story).
    Blind,
    /// Hang lab: the next NCCL release the emulated ranks imitate.
    NcclVersion,
    /// Change the focused field's value: +1 next, -1 previous.
    Adjust(i32),
    /// Presenter mode: present the selected lesson as slides.
    Present,
    /// Presenter mode: blank the screen (any key brings it back).
    Blank,
    /// Copy what the screen offers (the planner: its launch commands, plain).
    Copy,
}

/// Results of background work, sent to the event loop over the app's channel.
#[derive(Debug, Clone, PartialEq)]
pub enum Background {
    Lab(screens::lab::LabUpdate),
    /// Syntax highlighting finished loading: lay lessons out again with colour.
    HighlightingReady,
    Hang(screens::hang::HangUpdate),
    /// The presenter moved (None: it stopped).
    Notes(Option<super::notes::NotesMsg>),
}

/// Offer a background result to every screen on the stack (each takes what is its own).
pub fn receive(app: &mut App, msg: Background) {
    for i in 0..app.stack.len() {
        with_screen(app, i, |s, app| s.view_mut().receive(&msg, app));
    }
}

/// Run `f` on screen `i` of the stack with the rest of the app at hand: the screen is taken
/// out for the call (a course map stands in) and put back after it.
pub fn with_screen<R>(
    app: &mut App,
    i: usize,
    f: impl FnOnce(&mut Screen, &mut App) -> R,
) -> Option<R> {
    let slot = app.stack.get_mut(i)?;
    let mut screen = std::mem::take(slot);
    let r = f(&mut screen, app);
    if let Some(slot) = app.stack.get_mut(i) {
        *slot = screen;
    }
    Some(r)
}

impl Action {
    /// The action that undoes this one (+1 ↔ −1), for pairing keys in hints.
    pub fn reversed(self) -> Option<Action> {
        Some(match self {
            Action::Move(d) => Action::Move(-d),
            Action::Page(d) => Action::Page(-d),
            Action::Step(d) => Action::Step(-d),
            Action::Section(d) => Action::Section(-d),
            Action::SearchStep(d) => Action::SearchStep(-d),
            Action::NextLink(d) => Action::NextLink(-d),
            Action::Ranks(d) => Action::Ranks(-d),
            Action::Speed(d) => Action::Speed(-d),
            Action::Adjust(d) => Action::Adjust(-d),
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
            raw_tex: false,
            clipboard: None,
        }
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
        let state = LessonState::open(self, idx);
        self.stack.push(state.into());
        Ok(())
    }

    /// Remember how far a lesson has been read (in memory).
    pub fn note_reading(&mut self, id: &str, fraction: f64) {
        self.progress.note_reading(id, fraction, chrono::Utc::now());
    }

    /// Remember how far a lesson has been read and save, reporting a failed save.
    pub fn record_reading(&mut self, id: &str, fraction: f64) {
        self.note_reading(id, fraction);
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

    /// Mark the screen now on top as the one the command line opened: leaving it quits.
    pub fn launched_here(&mut self) {
        self.launched = self.stack.len();
    }

    /// Open the ring view on top of the course map.
    pub fn open_ring(&mut self, params: RingParams) -> Result<(), String> {
        let state = RingState::new(params)?;
        self.stack.push(state.into());
        Ok(())
    }

    /// Open the TP calculator on top of the stack.
    pub fn open_tpcalc(&mut self, model: &str, tp: usize, tokens: u64) -> Result<(), String> {
        let state = screens::tpcalc::TpCalcState::new(model, tp, tokens)?;
        self.stack.push(state.into());
        Ok(())
    }

    /// Open the launch planner on top of the stack.
    pub fn open_planner(
        &mut self,
        model: &str,
        nodes: usize,
        gpus_per_node: usize,
        backend: crate::infer::Backend,
    ) -> Result<(), String> {
        let state = screens::planner::PlannerState::new(model, nodes, gpus_per_node, backend)?;
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
            .map_or_else(|| vec![Context::Home], |s| s.view().contexts())
    }

    /// The focused screen's own keys (none while the help overlay is open).
    pub fn own_keys(&self) -> &'static [super::keys::Binding] {
        match (&self.help, self.stack.last()) {
            (None, Some(s)) => s.view().keys(),
            _ => &[],
        }
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

/// How long a status message stays when no key comes.
pub const STATUS_TTL: std::time::Duration = std::time::Duration::from_secs(3);

/// When the shown status message should go, if one is shown (the event loop wakes then).
pub fn status_deadline(app: &mut App) -> Option<std::time::Instant> {
    app.status.as_ref()?;
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
    let top = app.stack.len().saturating_sub(1);
    let outcome =
        with_screen(app, top, |s, app| s.view_mut().update(app, action)).unwrap_or(Outcome::Pop);
    // Every screen below the top keeps its layout current too.
    if let Action::Resize(..) | Action::Reload | Action::ToggleTex = action {
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
                app.stack.pop();
            } else {
                app.quit = true;
            }
        }
        Outcome::Push(s) => app.stack.push(s),
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
}

pub fn render(app: &App, frame: &mut Frame) {
    screens::render(app, frame);
}
