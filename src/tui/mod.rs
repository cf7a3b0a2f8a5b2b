//! The terminal app: a tokio event loop over crossterm's events (read on a thread of their
//! own, see [`key_reader`]) feeding a TEA core.

pub mod app;
pub mod bigboard;
pub mod error;
pub mod field;
pub mod form;
pub mod keys;
pub mod markdown;
pub mod notes;
pub mod record;
pub mod screens;
pub mod scroll;
pub mod term;
pub mod theme;

use std::io::{self, IsTerminal};

use crossterm::event::{Event, KeyEventKind, MouseEventKind};
use std::time::Duration;

use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use tokio::sync::mpsc;

pub use app::{Action, App};

/// Why the TUI cannot start.
#[derive(Debug, thiserror::Error)]
pub enum TuiError {
    #[error(
        "ringlab's screens need a terminal, but stdout is not a TTY.\n\
         Run it in a terminal, or use a non-interactive command: `ringlab check`, `ringlab ring --json`, \
         `ringlab stats --json`, `ringlab quiz --list`, `ringlab tp --json`."
    )]
    NotATerminal,
    #[error("terminal error: {0}")]
    Io(#[from] io::Error),
    /// The recording (`--record`) cannot be written: its message says so, once.
    #[error(transparent)]
    Record(io::Error),
}

/// Map one terminal event to an action, given what has focus.
pub fn map_event(app: &App, ev: &Event) -> Option<Action> {
    match ev {
        Event::Resize(w, h) => Some(Action::Resize(*w, *h)),
        Event::Mouse(m) => match m.kind {
            MouseEventKind::ScrollDown => Some(Action::Move(3)),
            MouseEventKind::ScrollUp => Some(Action::Move(-3)),
            _ => None,
        },
        Event::Key(k) if k.kind != KeyEventKind::Release => {
            use crossterm::event::{KeyCode, KeyModifiers};
            if k.modifiers.contains(KeyModifiers::CONTROL) && k.code == KeyCode::Char('c') {
                return Some(Action::Quit);
            }
            // A screen may take every key for now (Ctrl-C still quits).
            if app.help.is_none()
                && let Some(a) = app.stack.last().and_then(|s| s.view().on_any_key())
            {
                return Some(a);
            }
            if app.prompt_open() {
                return match k.code {
                    KeyCode::Enter => Some(Action::InputSubmit),
                    KeyCode::Esc => Some(Action::InputCancel),
                    _ => field::request(k).map(Action::Edit),
                };
            }
            keys::lookup(&app.key_tables(), &app.contexts(), k)
        }
        _ => None,
    }
}

/// How the app ended, for the process's exit status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// The user left (q, Esc).
    Done,
    /// Ctrl-C, or SIGINT: exit status 130 by the shell's convention.
    Interrupted,
    /// Ended by this signal (SIGTERM, SIGHUP): exit status 128 + its number.
    Signal(i32),
}

impl Exit {
    pub fn status(self) -> u8 {
        match self {
            Exit::Done => 0,
            Exit::Interrupted => 128 + libc::SIGINT as u8,
            Exit::Signal(n) => 128u8.saturating_add(n as u8),
        }
    }
}

/// What a run does besides drawing the app.
#[derive(Default)]
pub struct RunOptions {
    /// Record the session as an asciicast v2 file.
    pub record: Option<std::path::PathBuf>,
    /// Replace a file already at `record` (`--force`; a link there is refused either way).
    pub replace_record: bool,
    /// Follow a presenter: its slides arrive on this socket (`ringlab present --notes`).
    pub follow: Option<std::path::PathBuf>,
}

/// Run the app until the user quits. Restores the terminal on every way out.
pub fn run(app: App) -> Result<Exit, TuiError> {
    run_with(app, RunOptions::default())
}

/// [`run`], recording or following a presenter as `opts` says.
pub fn run_with(app: App, opts: RunOptions) -> Result<Exit, TuiError> {
    if !io::stdout().is_terminal() || !io::stdin().is_terminal() {
        return Err(TuiError::NotATerminal);
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(event_loop(app, opts))
}

type Term = Terminal<CrosstermBackend<record::Tee<io::Stdout>>>;

/// The exit of a terminal that went away (its pane killed, its input failed): as on SIGHUP.
const GONE: Exit = Exit::Signal(libc::SIGHUP);

/// The signals that end the app, and the exit each gives.
struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
}

impl Signals {
    fn new() -> io::Result<Self> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Self {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
            hup: signal(SignalKind::hangup())?,
        })
    }

    async fn recv(&mut self) -> Exit {
        tokio::select! {
            _ = self.term.recv() => Exit::Signal(libc::SIGTERM),
            _ = self.int.recv() => Exit::Interrupted,
            _ = self.hup.recv() => Exit::Signal(libc::SIGHUP),
        }
    }
}

/// The reader stops within its poll interval when the loop ends, however it ends.
struct StopReader(std::sync::Arc<std::sync::atomic::AtomicBool>);

impl Drop for StopReader {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Start the background work the app begins with: syntax highlighting loads on a thread (the
/// first frame does not wait for it), and a followed presenter's slides arrive on another.
fn start_background(
    tx: &mpsc::UnboundedSender<app::Background>,
    follow: Option<std::path::PathBuf>,
) {
    if !markdown::highlighting_ready() {
        markdown::defer_highlighting();
        let tx = tx.clone();
        std::thread::spawn(move || {
            markdown::preload_highlighting();
            let _ = tx.send(app::Background::HighlightingReady);
        });
    }
    if let Some(path) = follow {
        let tx = tx.clone();
        // A presenter that is not there yet, or that stops, is waited for: the notes follow
        // whichever presenter starts next.
        std::thread::spawn(move || {
            notes::follow_path(&path, |m| {
                tx.send(app::Background::to(app::ScreenId::Notes, m))
                    .is_ok()
            })
        });
    }
}

/// Draw when something changed, then hand a copy the app asked for to the terminal's
/// clipboard (OSC 52: where the terminal allows it; the screen that asked also wrote a plain
/// file and said where). False: the terminal is gone.
fn show(terminal: &mut Term, app: &mut App, dirty: &mut bool) -> bool {
    if *dirty {
        if terminal.draw(|f| app::render(app, f)).is_err() {
            return false;
        }
        *dirty = false;
    }
    match app.clipboard.take() {
        Some(text) => crossterm::execute!(
            terminal.backend_mut(),
            crossterm::clipboard::CopyToClipboard::to_clipboard_from(text)
        )
        .is_ok(),
        None => true,
    }
}

/// Apply a terminal event and whatever else is already waiting (one frame for a burst);
/// true when the app changed.
fn apply_events(
    app: &mut App,
    first: Event,
    events: &mut mpsc::UnboundedReceiver<io::Result<Event>>,
    recording: &record::Shared,
) -> bool {
    let mut dirty = false;
    let mut next = Some(first);
    while let Some(ev) = next {
        if let Event::Resize(w, h) = ev {
            recording.borrow_mut().resize(w, h);
        }
        dirty |= handle(app, &ev);
        next = match events.try_recv() {
            Ok(Ok(ev)) => Some(ev),
            _ => None,
        };
    }
    dirty
}

async fn event_loop(mut app: App, opts: RunOptions) -> Result<Exit, TuiError> {
    let (w, h) = crossterm::terminal::size()?;
    let recorder = match &opts.record {
        Some(path) => Some(
            record::Recorder::create(path, w, h, opts.replace_record).map_err(TuiError::Record)?,
        ),
        None => None,
    };
    let _guard = term::TerminalGuard::enter()?;
    let recording = record::Recording::shared(recorder);
    let mut terminal = Terminal::new(CrosstermBackend::new(record::Tee::new(
        io::stdout(),
        recording.clone(),
    )))?;
    let size = terminal.size()?;
    app::update(&mut app, Action::Resize(size.width, size.height));
    // Background work (a running lab) reports back over this channel.
    let (tx, mut rx) = mpsc::unbounded_channel::<app::Background>();
    start_background(&tx, opts.follow);
    app.bg = Some(tx);
    let (mut events, reader_stop) = key_reader();
    let _stop_reader = StopReader(reader_stop);
    let mut signals = Signals::new()?;
    let mut dirty = true;
    let mut exit = Exit::Done;
    // The terminal can go away without a SIGHUP reaching this process (its pane killed, its
    // shell not passing the signal on): reads then return EOF or EIO, which crossterm's reader
    // retries for ever. So the loop asks the terminal itself every half second.
    let mut alive = tokio::time::interval(Duration::from_millis(500));
    alive.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    // When the next tick is due: kept across turns of the loop, so the half-second check
    // above does not restart a longer tick (a 1 s one never came); a screen asking for a
    // shorter one gets it sooner.
    let mut tick_at: Option<tokio::time::Instant> = None;
    while !app.quit {
        // A frame or a clipboard write that cannot reach the terminal: it is gone.
        if !show(&mut terminal, &mut app, &mut dirty) {
            exit = GONE;
            break;
        }
        let tick = app.tick_interval();
        tick_at = tick.map(|d| {
            let fresh = tokio::time::Instant::now() + d;
            tick_at.map_or(fresh, |at| at.min(fresh))
        });
        let status_until = app::status_deadline(&mut app);
        tokio::select! {
            ev = events.recv() => match ev {
                Some(Ok(ev)) => dirty |= apply_events(&mut app, ev, &mut events, &recording),
                // The terminal's input failed or ended: save and leave, as on SIGHUP.
                Some(Err(_)) | None => { exit = GONE; break }
            },
            _ = alive.tick() => {
                if term::gone() {
                    exit = GONE;
                    break;
                }
            }
            Some(msg) = rx.recv() => {
                app::receive(&mut app, msg);
                // Coalesce a burst of reports into one frame.
                while let Ok(msg) = rx.try_recv() {
                    app::receive(&mut app, msg);
                }
                dirty = true;
            }
            _ = async {
                if let Some(at) = tick_at {
                    tokio::time::sleep_until(at).await
                }
            }, if tick_at.is_some() => {
                tick_at = None;
                app::update(&mut app, Action::Tick);
                dirty = true;
            }
            _ = async {
                if let Some(at) = status_until {
                    tokio::time::sleep_until(tokio::time::Instant::from_std(at)).await
                }
            }, if status_until.is_some() => {
                app::expire_status(&mut app, std::time::Instant::now());
                dirty = true;
            }
            signalled = signals.recv() => { exit = signalled; break }
        }
    }
    finish(app, terminal, &recording, exit)
}

/// Save, show the cursor again and say how the app ended (or that the recording failed).
fn finish(
    mut app: App,
    mut terminal: Term,
    recording: &record::Shared,
    mut exit: Exit,
) -> Result<Exit, TuiError> {
    if app.interrupted {
        exit = Exit::Interrupted;
    }
    app.save_progress();
    // ratatui's Terminal shows the cursor again when dropped and, when that write fails,
    // prints to stderr with eprintln!, which panics on a terminal that is gone (the user may
    // quit and close it at once). Show it here; where that fails nothing can be shown there
    // any more, and the process takes the terminal down instead of dropping it.
    if terminal.show_cursor().is_err() {
        std::mem::forget(terminal);
    }
    let failed = recording.borrow_mut().error.take();
    if let Some(e) = failed {
        return Err(TuiError::Record(io::Error::new(
            e.kind(),
            format!("the recording stopped: {e}"),
        )));
    }
    Ok(exit)
}

/// Terminal events, read on a thread of their own and sent to the loop. crossterm 0.29 reads
/// a terminal that has gone away (a hung-up pty: read gives 0 or EIO) in a loop it never
/// leaves (src/event/source/unix/mio.rs, `try_read`), and its EventStream does that read on
/// the caller's thread: the loop then never came back to notice the terminal was gone. On a
/// thread of its own that spin blocks nothing: the loop's liveness check still runs, saves and
/// exits. The flag stops the thread when the loop ends (it polls every 100 ms).
fn key_reader() -> (
    mpsc::UnboundedReceiver<io::Result<Event>>,
    std::sync::Arc<std::sync::atomic::AtomicBool>,
) {
    use std::sync::atomic::Ordering;
    let (tx, rx) = mpsc::unbounded_channel();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stopping = stop.clone();
    let spawned = std::thread::Builder::new()
        .name("keys".into())
        .spawn(move || {
            while !stopping.load(Ordering::Relaxed) {
                let ev = match crossterm::event::poll(Duration::from_millis(100)) {
                    Ok(false) => continue,
                    Ok(true) => crossterm::event::read(),
                    Err(e) => Err(e),
                };
                let failed = ev.is_err();
                if tx.send(ev).is_err() || failed {
                    return;
                }
            }
        });
    if let Err(e) = spawned {
        // No thread: the loop sees the channel closed, as a terminal gone, and says why.
        crate::comm::emu::log::warn(&format!("no thread to read the terminal: {e}"));
    }
    (rx, stop)
}

fn handle(app: &mut App, ev: &Event) -> bool {
    match map_event(app, ev) {
        Some(a) => {
            app::update(app, a);
            true
        }
        None => false,
    }
}
