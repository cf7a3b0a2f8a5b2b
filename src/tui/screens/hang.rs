//! The hang lab on screen: pick a scenario, stage it on a cluster of network namespaces, watch
//! the per-rank board until the watchdog calls the hang, read the evidence, take hints in
//! tiers, pick a fix (or type one: `e`, then NAME=value …) and re-run until the all-reduce
//! passes.

use std::time::Instant;

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Wrap};

use crate::lab::Event;
use crate::lab::hang::scenario::{self, Fix, Fixed, LabReport, Scenario};
use crate::lab::hang::trace::{GPU_LEGEND, GpuUtil};
use crate::lab::job::launch::Msg;
use crate::nccl_log::{self, Level, Profile, Release};
use crate::tui::app::{Action, App, Background, Outcome, ScreenId};
use crate::tui::theme::Theme;

/// The course map opens this screen with `H` (its line in `screens!` names this).
pub const OPENER: crate::tui::screens::Opener = crate::tui::screens::Opener::new(
    &[crate::tui::keys::Key::Char('H')],
    "hang lab",
    Some((3, "hang lab")),
    |app, _| Ok(HangState::resumed(app.progress.lab_place.hang.as_deref()).into()),
);

#[derive(Debug, Clone, PartialEq)]
pub enum HangUpdate {
    Msg(u64, Msg),
    Staged(u64, Result<Box<LabReport>, String>),
    Fixed(u64, Result<Box<Fixed>, String>),
}

#[derive(Debug, Clone, PartialEq)]
pub enum Stage {
    Pick,
    Staging,
    Diagnosed,
    Fixing,
    Passed,
}

pub struct HangState {
    pub scenarios: Vec<Scenario>,
    pub selected: usize,
    pub stage: Stage,
    pub report: Option<LabReport>,
    pub choices: Vec<Fix>,
    pub choice: usize,
    pub hints: usize,
    pub last_fix: Option<(String, Fixed)>,
    pub error: Option<String>,
    /// A fix being typed (`e`): environment assignments, NAME=value separated by spaces.
    pub typing: Option<crate::tui::field::Field>,
    /// The text of the fix the running re-run applies.
    trying: String,
    /// Running as root (real namespaces directly), asked once.
    root: bool,
    /// Real libnccl ranks in the namespaces (`n` on the scenario list) instead of ringlab's.
    pub nccl: bool,
    /// Blind mode (`b` on the scenario list), for a class: scenarios are numbered, and the
    /// brief (what was reported) stands in for the story and title (which name the cause).
    pub blind: bool,
    /// The NCCL release the emulated ranks imitate (`v` on the scenario list); None: the
    /// machine's own, else the newest modelled (as `lab run` chooses).
    pub version: Option<Release>,
    /// The evidence panel's first line shown (PgDn/PgUp).
    pub scroll: u16,
    board: Vec<(usize, String, Instant)>,
    /// Per rank: the ≤ 2.23 retry lines seen (each stands for 1000 refused connects).
    legacy_retries: std::collections::BTreeMap<usize, u64>,
    /// Per rank: the last collective it completed (a training loop's sequence number).
    seqs: std::collections::BTreeMap<usize, u64>,
    logs: Vec<String>,
    run: u64,
    started: Option<Instant>,
}

impl HangState {
    pub fn new() -> Self {
        let (scenarios, _) = scenario::all();
        Self {
            scenarios,
            selected: 0,
            stage: Stage::Pick,
            report: None,
            choices: Vec::new(),
            choice: 0,
            hints: 0,
            last_fix: None,
            error: None,
            typing: None,
            trying: String::new(),
            root: nix::unistd::geteuid().is_root(),
            nccl: false,
            blind: false,
            version: None,
            scroll: 0,
            board: Vec::new(),
            legacy_retries: Default::default(),
            seqs: Default::default(),
            logs: Vec::new(),
            run: 0,
            started: None,
        }
    }

    /// The lab with `last` (the scenario last staged, by name) selected, as the learner left
    /// it; the first scenario where there is none or it is no longer shipped.
    pub fn resumed(last: Option<&str>) -> Self {
        let mut s = Self::new();
        s.selected = last
            .and_then(|n| s.scenarios.iter().position(|x| x.name == n))
            .unwrap_or(0);
        s
    }

    pub fn running(&self) -> bool {
        matches!(self.stage, Stage::Staging | Stage::Fixing)
    }

    fn scenario(&self) -> Option<&Scenario> {
        self.scenarios.get(self.selected)
    }

    /// A scenario's heading: its title, or only its number in blind mode.
    fn heading(&self, i: usize, sc: &Scenario) -> String {
        if self.blind {
            format!("Scenario {}", i + 1)
        } else {
            sc.title.clone()
        }
    }

    fn launch(&mut self, app: &mut App, fix: Option<Fix>) {
        let (Some(s), Some(tx)) = (self.scenario().cloned(), app.bg.clone()) else {
            app.status = Some("the hang lab needs the interactive app".into());
            return;
        };
        if fix.is_none() && app.progress.lab_place.hang.as_deref() != Some(s.name.as_str()) {
            // The lab reopens on the scenario last staged.
            app.progress.lab_place.hang = Some(s.name.clone());
            app.save_progress();
        }
        self.run += 1;
        let id = self.run;
        self.trying = fix.as_ref().map_or_else(String::new, |f| f.text.clone());
        self.board.clear();
        self.legacy_retries.clear();
        self.scroll = 0;
        self.seqs.clear();
        self.logs.clear();
        self.error = None;
        self.started = Some(Instant::now());
        self.stage = if fix.is_some() {
            Stage::Fixing
        } else {
            Stage::Staging
        };
        let (nccl, version) = (self.nccl, self.version);
        std::thread::spawn(move || {
            let msg = match run_child(&s.name, fix.as_ref(), nccl, version, id, &tx) {
                Ok(m) => m,
                Err(e) if fix.is_some() => HangUpdate::Fixed(id, Err(e)),
                Err(e) => HangUpdate::Staged(id, Err(e)),
            };
            let _ = tx.send(Background::to(ScreenId::Hang, msg));
        });
    }

    /// A report from the runner thread.
    pub fn receive(&mut self, u: HangUpdate, app: &mut App) {
        match u {
            HangUpdate::Msg(id, _) | HangUpdate::Staged(id, _) | HangUpdate::Fixed(id, _)
                if id != self.run => {}
            HangUpdate::Msg(_, Msg::Event(ev @ (Event::Phase { .. } | Event::Step { .. }))) => {
                let (rank, phase) = (ev.rank(), ev.phase_text().unwrap_or_default());
                match self.board.iter_mut().find(|b| b.0 == rank) {
                    Some(b) => *b = (rank, phase, Instant::now()),
                    None => self.board.push((rank, phase, Instant::now())),
                }
                self.board.sort_by_key(|b| b.0);
            }
            HangUpdate::Msg(_, Msg::Log { rank, line }) => {
                let Some(l) = nccl_log::parse_line(&line) else {
                    return;
                };
                // A connect retry shows on the board: "connect to ADDR (retry k/N)". The
                // phase's clock keeps running: a retry is not progress.
                if let nccl_log::Msg::Retry(r) = &l.msg
                    && let Some(b) = self.board.iter_mut().find(|b| b.0 == rank)
                    && b.1.starts_with("connect to ")
                {
                    let base = b.1.split(" (").next().unwrap_or(&b.1).to_string();
                    b.1 = match r.count {
                        Some((k, n)) => format!("{base} (retry {k}/{n})"),
                        None => {
                            let seen = self.legacy_retries.entry(rank).or_insert(0);
                            *seen += 1;
                            format!("{base} ({seen}000 refused)")
                        }
                    };
                }
                self.logs.push(log_row(rank, &l));
                if self.logs.len() > 200 {
                    self.logs.remove(0);
                }
            }
            HangUpdate::Msg(_, Msg::Event(Event::Beat { rank, done })) => {
                self.seqs.insert(rank, done);
            }
            HangUpdate::Msg(..) => {}
            HangUpdate::Staged(_, Ok(r)) => {
                self.choices = self
                    .scenario()
                    .map(scenario::fix_choices)
                    .unwrap_or_default();
                self.choice = 0;
                self.report = Some(*r);
                self.stage = Stage::Diagnosed;
            }
            HangUpdate::Staged(_, Err(e)) | HangUpdate::Fixed(_, Err(e)) => {
                self.error = Some(e);
                self.stage = Stage::Pick;
            }
            HangUpdate::Fixed(_, Ok(f)) => {
                let text = self.trying.clone();
                let passed = f.outcome == scenario::Outcome::Pass;
                if let Some(s) = self.scenario() {
                    let rec = app.progress.labs.entry(s.name.clone()).or_default();
                    rec.attempts += 1;
                    rec.solved |= passed;
                    app.save_progress();
                }
                self.last_fix = Some((text, *f));
                self.stage = if passed {
                    Stage::Passed
                } else {
                    Stage::Diagnosed
                };
            }
        }
    }

    fn reveal_hint(&mut self, app: &mut App) {
        let Some(s) = self.scenario() else { return };
        let (name, tiers) = (s.name.clone(), s.hints.len());
        if self.hints < tiers {
            self.hints += 1;
            // Where the hints do not fit below, they lead the evidence: show its top.
            self.scroll = 0;
            let rec = app.progress.labs.entry(name).or_default();
            rec.hints_seen = rec.hints_seen.max(self.hints);
            // The last tier is the solution: that is recorded.
            rec.revealed_solution |= self.hints == tiers;
            app.save_progress();
        } else {
            app.status = Some("no more hints: the last one was the solution".into());
        }
    }
}

impl Default for HangState {
    fn default() -> Self {
        Self::new()
    }
}

/// Run the lab in a child process (`ringlab lab run NAME --events`), as the CLI does: the app
/// stays out of the cluster's namespaces, and without root the child can build real ones inside
/// a user namespace of its own, which this multithreaded process could not enter. Messages are
/// forwarded as they come; the child dies with the thread that started it.
fn run_child(
    name: &str,
    fix: Option<&Fix>,
    nccl: bool,
    version: Option<Release>,
    id: u64,
    tx: &tokio::sync::mpsc::UnboundedSender<Background>,
) -> Result<HangUpdate, String> {
    use std::io::BufRead;
    let exe = crate::lab::self_exe().map_err(|e| format!("finding ringlab: {e}"))?;
    let mut cmd = std::process::Command::new(exe);
    cmd.args(["lab", "run", name, "--events"]);
    if nccl {
        cmd.args(["--backend", "nccl"]);
    } else if let Some(v) = version {
        cmd.arg("--nccl-version").arg(v.to_string());
    }
    if let Some(f) = fix {
        cmd.arg("--try-fix")
            .arg(serde_json::to_string(f).map_err(|e| e.to_string())?);
    }
    cmd.stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    crate::lab::fork::die_with_parent(&mut cmd);
    let mut child = cmd.spawn().map_err(|e| format!("starting the lab: {e}"))?;
    let err_reader = child.stderr.take().map(|e| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = std::io::Read::read_to_string(&mut std::io::BufReader::new(e), &mut s);
            s
        })
    });
    let mut result = None;
    if let Some(out) = child.stdout.take() {
        for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            match serde_json::from_str::<scenario::StreamLine>(&line) {
                Ok(scenario::StreamLine::Msg(m)) => {
                    let _ = tx.send(Background::to(ScreenId::Hang, HangUpdate::Msg(id, m)));
                }
                Ok(scenario::StreamLine::Report(r)) => {
                    result = Some(Ok(HangUpdate::Staged(id, Ok(r))))
                }
                Ok(scenario::StreamLine::Fixed(f)) => {
                    result = Some(Ok(HangUpdate::Fixed(id, Ok(f))))
                }
                Ok(scenario::StreamLine::Error(e)) => result = Some(Err(e)),
                // A line that is not an event (the child's own diagnostics) is no result.
                Err(_) => {}
            }
        }
    }
    let status = child.wait();
    let stderr = err_reader.and_then(|h| h.join().ok()).unwrap_or_default();
    result.unwrap_or_else(|| {
        // The whole message: its first line says what failed, the rest why and what works.
        let said: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
        let said = said[said.len().saturating_sub(6)..].join("\n");
        Err(format!(
            "the lab ended without a result ({}): {}",
            status.map_or_else(|e| e.to_string(), |s| s.to_string()),
            if said.is_empty() { "no message" } else { &said }
        ))
    })
}

/// A typed fix: `NAME=value` assignments separated by spaces, applied to every rank.
pub fn parse_typed_fix(text: &str) -> Result<Fix, crate::tui::error::ScreenError> {
    use crate::tui::error::ScreenError;
    let mut env = std::collections::BTreeMap::new();
    for word in text.split_whitespace() {
        let (k, v) = word
            .split_once('=')
            .ok_or_else(|| ScreenError::NotAnAssignment(word.to_string()))?;
        let valid = !k.is_empty()
            && !k.starts_with(|c: char| c.is_ascii_digit())
            && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid {
            return Err(ScreenError::NotAVariable(k.to_string()));
        }
        env.insert(k.to_string(), v.to_string());
    }
    if env.is_empty() {
        return Err(ScreenError::NoFix);
    }
    Ok(Fix {
        text: text.split_whitespace().collect::<Vec<_>>().join(" "),
        env,
        ..Default::default()
    })
}

/// "did you mean NCCL_SOCKET_IFNAME?" for a typed name that is NCCL's but for its case
/// (NCCL reads upper-case names only, so the re-run runs without it).
pub fn case_hint(fix: &Fix) -> Option<String> {
    let odd: Vec<String> = fix
        .env
        .keys()
        .filter(|k| {
            let up = k.to_ascii_uppercase();
            up != **k && up.starts_with("NCCL_")
        })
        .map(|k| k.to_ascii_uppercase())
        .collect();
    (!odd.is_empty()).then(|| {
        format!(
            "did you mean {}? Names are case-sensitive: NCCL reads only upper case, so this re-run runs without it",
            odd.join(", ")
        )
    })
}

/// The scenario list's keys, the evidence's (a fix to pick) and those after a PASS: the hint
/// bar shows only keys that do something now (a running job takes none).
const LIST: crate::tui::keys::Context = crate::tui::keys::Context::Own("Hang lab · scenarios");
const EVIDENCE: crate::tui::keys::Context = crate::tui::keys::Context::Own("Hang lab · evidence");
const PASSED: crate::tui::keys::Context = crate::tui::keys::Context::Own("Hang lab · passed");

/// The hang lab's own verbs (`Action::Screen`), each named for what it does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::FromRepr)]
#[repr(u8)]
pub enum Verb {
    /// Reveal the next hint tier.
    NextHint,
    /// Blind mode on/off (scenarios numbered, the cause kept out of the story).
    ToggleBlind,
    /// The ranks: ringlab's TCP backend or real NCCL.
    ToggleNccl,
    /// Start typing a fix.
    TypeFix,
    /// The next NCCL release the emulated ranks imitate.
    NextRelease,
}

impl Verb {
    pub const fn act(self) -> Action {
        Action::Screen(crate::tui::app::ScreenId::Hang, self as u8, 0)
    }
}

use crate::tui::keys::{Binding, DOWN, Key, UP, bind};
use Key::{Char, Code, Ctrl};
use crossterm::event::KeyCode;

#[rustfmt::skip]
pub const KEYS: &[Binding] = &[
    bind(LIST, &[Code(KeyCode::Enter)], "stage the scenario", Action::Open, Some((1, "stage it"))),
    bind(LIST, DOWN, "choose a scenario", Action::Move(1), Some((1, "choose"))),
    bind(LIST, UP, "choose a scenario", Action::Move(-1), None),
    bind(LIST, &[Char('b')], "blind mode: hide what gives the cause away", Verb::ToggleBlind.act(), None),
    bind(LIST, &[Char('n')], "ranks: TCP or real NCCL", Verb::ToggleNccl.act(), None),
    bind(LIST, &[Char('v')], "emulated NCCL release", Verb::NextRelease.act(), None),
    bind(LIST, &[Code(KeyCode::PageDown), Ctrl('d')], "scroll the list and story a page", Action::Page(1), Some((2, "scroll"))),
    bind(LIST, &[Code(KeyCode::PageUp), Ctrl('u')], "scroll back a page", Action::Page(-1), None),
    bind(EVIDENCE, &[Code(KeyCode::Enter)], "re-run the job with the fix", Action::Open, Some((1, "apply the fix"))),
    bind(EVIDENCE, DOWN, "choose a fix", Action::Move(1), Some((1, "choose"))),
    bind(EVIDENCE, UP, "choose a fix", Action::Move(-1), None),
    bind(EVIDENCE, &[Char('h')], "next hint", Verb::NextHint.act(), Some((1, "next hint"))),
    bind(EVIDENCE, &[Char('e')], "type a fix", Verb::TypeFix.act(), Some((1, "type a fix"))),
    bind(EVIDENCE, &[Code(KeyCode::PageDown), Ctrl('d')], "scroll the evidence a page", Action::Page(1), Some((2, "scroll"))),
    bind(EVIDENCE, &[Code(KeyCode::PageUp), Ctrl('u')], "scroll back a page", Action::Page(-1), None),
    bind(PASSED, &[Code(KeyCode::Enter)], "another scenario", Action::Open, Some((1, "another scenario"))),
    bind(PASSED, &[Char('h')], "next hint", Verb::NextHint.act(), Some((1, "next hint"))),
    bind(PASSED, &[Code(KeyCode::PageDown), Ctrl('d')], "scroll the evidence a page", Action::Page(1), Some((2, "scroll"))),
    bind(PASSED, &[Code(KeyCode::PageUp), Ctrl('u')], "scroll back a page", Action::Page(-1), None),
];

pub fn update(s: &mut HangState, app: &mut App, action: Action) -> Outcome {
    if let Some(t) = &mut s.typing {
        match action {
            Action::Edit(r) => t.apply(r),
            Action::InputCancel => s.typing = None,
            Action::InputSubmit => match parse_typed_fix(t.value()) {
                Ok(fix) => {
                    s.typing = None;
                    let hint = case_hint(&fix);
                    s.launch(app, Some(fix));
                    if hint.is_some() {
                        app.status = hint;
                    }
                }
                Err(e) => app.status = Some(e.to_string()),
            },
            _ => {}
        }
        return Outcome::Stay;
    }
    if let Some((verb, _)) = action.verb(crate::tui::app::ScreenId::Hang, Verb::from_repr) {
        on_verb(s, app, verb);
        return Outcome::Stay;
    }
    match (&s.stage, action) {
        (_, Action::Back) if s.running() => {
            app.status = Some("the run ends by itself at the watchdog's timeout".into())
        }
        (Stage::Pick, Action::Back) => return Outcome::Pop,
        (_, Action::Back) => {
            s.stage = Stage::Pick;
            s.scroll = 0;
            s.report = None;
            s.last_fix = None;
            s.hints = 0;
        }
        (Stage::Pick, Action::Move(d)) => {
            let n = s.scenarios.len().max(1) as i32;
            s.selected = (s.selected as i32 + d).rem_euclid(n) as usize;
            // Another story: read it from its top.
            s.scroll = 0;
        }
        (Stage::Diagnosed | Stage::Passed, Action::Page(d)) => {
            let body = body_area(app.body_area());
            s.scroll = Diagnosis::new(s, &app.theme, body).ev.page(s.scroll, d);
        }
        (Stage::Pick, Action::Page(d)) => {
            s.scroll = pick_pane(s, app, body_area(app.body_area())).page(s.scroll, d);
        }
        (Stage::Pick, Action::Open) => {
            s.hints = 0;
            s.last_fix = None;
            s.launch(app, None);
        }
        (Stage::Diagnosed, Action::Move(d)) => {
            let n = s.choices.len().max(1) as i32;
            s.choice = (s.choice as i32 + d).rem_euclid(n) as usize;
        }
        (Stage::Diagnosed, Action::Open) => {
            let fix = s.choices.get(s.choice).cloned();
            if fix.is_some() {
                s.launch(app, fix);
            }
        }
        (Stage::Passed, Action::Open) => s.stage = Stage::Pick,
        _ => {}
    }
    Outcome::Stay
}

fn on_verb(s: &mut HangState, app: &mut App, verb: Verb) {
    match (&s.stage, verb) {
        (Stage::Pick, Verb::ToggleNccl) => {
            s.nccl = !s.nccl;
            // A refusal of the other ranks' kind no longer applies.
            s.error = None;
            app.status = Some(if s.nccl {
                "ranks: real NCCL (needs GPUs and real namespaces)".into()
            } else {
                "ranks: ringlab's TCP backend (NCCL's behaviour modelled; any machine)".into()
            });
        }
        (Stage::Pick, Verb::NextRelease) => next_release(s, app),
        (Stage::Pick, Verb::ToggleBlind) => {
            s.blind = !s.blind;
            app.status = Some(if s.blind {
                "blind: scenarios numbered, only what was reported is shown".into()
            } else {
                "stories shown".into()
            });
        }
        // Blind mode hides what the list and the story give away; once a scenario runs, its
        // evidence is the lesson. Say so rather than ignore the key.
        (_, Verb::ToggleBlind) => {
            app.status = Some("blind mode is set on the list: q goes back to it".into());
        }
        (Stage::Diagnosed | Stage::Passed, Verb::NextHint) => s.reveal_hint(app),
        (Stage::Diagnosed, Verb::TypeFix) => s.typing = Some(Default::default()),
        _ => {}
    }
}

/// The default (the machine's, else the newest), then each modelled release.
fn next_release(s: &mut HangState, app: &mut App) {
    let at = s
        .version
        .and_then(|v| nccl_log::PROFILES.iter().position(|p| p.release == v));
    s.version = match at {
        None => nccl_log::PROFILES.first().map(|p| p.release),
        Some(i) => nccl_log::PROFILES.get(i + 1).map(|p| p.release),
    };
    app.status = Some(match s.version {
        Some(v) => {
            format!("emulated ranks log and retry as NCCL {v} (`lab run --nccl-version {v}`)")
        }
        None => "emulated ranks imitate this machine's NCCL, else the newest modelled".into(),
    });
}

/// The screen's title rows and its body.
fn areas(area: Rect) -> [Rect; 2] {
    Layout::vertical([Constraint::Length(2), Constraint::Min(3)]).areas(area)
}

/// The body of the screen drawn in `area`.
fn body_area(area: Rect) -> Rect {
    areas(area)[1]
}

pub fn render(s: &HangState, app: &App, frame: &mut Frame, area: Rect) {
    let t = &app.theme;
    let [head, body] = areas(area);
    let title = s
        .scenario()
        .map_or_else(|| "no scenarios".into(), |x| s.heading(s.selected, x));
    let stage = match s.stage {
        Stage::Pick => "choose a scenario · Enter stages it".to_string(),
        Stage::Staging => format!(
            "staged, running… {:.1} s (the watchdog decides)",
            s.started.map_or(0.0, |x| x.elapsed().as_secs_f64())
        ),
        Stage::Diagnosed => {
            "evidence in · h for a hint · ↑↓ pick a fix · Enter re-runs with it".into()
        }
        Stage::Fixing => format!(
            "re-running with the fix… {:.1} s",
            s.started.map_or(0.0, |x| x.elapsed().as_secs_f64())
        ),
        Stage::Passed => "PASS · Enter for another scenario".into(),
    };
    frame.render_widget(
        Paragraph::new(vec![
            Line::from(
                std::iter::once(Span::styled(" Hang lab · ", t.title))
                    .chain(crate::tui::markdown::inline_code(&title, t.strong, t.code))
                    // Blind mode hides the causes: say that it is on, and how to leave it.
                    .chain(
                        s.blind
                            .then(|| Span::styled(" · blind mode on (b turns it off)", t.warn)),
                    )
                    .collect::<Vec<_>>(),
            ),
            Line::styled(format!(" {stage}"), t.accent),
        ]),
        head,
    );
    let board = matches!(s.stage, Stage::Staging | Stage::Fixing);
    if board && app.presenting() && !s.board.is_empty() {
        // In front of a class: the ranks' phases large, the newest log lines below.
        let front = s.seqs.values().copied().max();
        let rows: Vec<(String, ratatui::style::Style)> = s
            .board
            .iter()
            .map(|(rank, phase, since)| {
                let style = match front.zip(s.seqs.get(rank).copied()) {
                    Some((front, n)) if n < front => t.warn,
                    _ => t.strong,
                };
                let seq = s
                    .seqs
                    .get(rank)
                    .map(|n| format!(" #{n}"))
                    .unwrap_or_default();
                (
                    format!("R{rank}{seq} {phase} {:.0}s", since.elapsed().as_secs_f64()),
                    style,
                )
            })
            .collect();
        let block = Block::default()
            .borders(Borders::TOP)
            .border_style(t.border);
        let inner = block.inner(body);
        frame.render_widget(block, body);
        let logs_h = 4.min(inner.height / 3);
        let [big, logs] =
            Layout::vertical([Constraint::Min(1), Constraint::Length(logs_h)]).areas(inner);
        crate::tui::bigboard::render(frame, big, &rows);
        let tail: Vec<Line> = s
            .logs
            .iter()
            .rev()
            .take(logs_h as usize)
            .rev()
            .map(|l| Line::styled(format!(" {l}"), t.dim))
            .collect();
        frame.render_widget(Paragraph::new(tail), logs);
        return;
    }
    let lines = match s.stage {
        Stage::Pick => {
            frame.render_widget(pick_block(t), body);
            return pick_pane(s, app, body).render(s.scroll, "scenarios and story", t, frame);
        }
        Stage::Staging | Stage::Fixing => board_lines(s, t, body),
        Stage::Diagnosed | Stage::Passed => return render_diagnosis(s, t, frame, body),
    };
    // Wrapped lines keep their indent; what does not fit says how much (never cut silently).
    let lines = crate::tui::form::fit_lines(lines, body.width, body.height.saturating_sub(1), t);
    frame.render_widget(
        Paragraph::new(lines).wrap(Wrap { trim: false }).block(
            Block::default()
                .borders(Borders::TOP)
                .border_style(t.border),
        ),
        body,
    );
}

fn pick_block(t: &Theme) -> Block<'static> {
    Block::default()
        .borders(Borders::TOP)
        .border_style(t.border)
}

/// The scenario list and the selected story, laid out in the body (it scrolls with PgDn).
fn pick_pane(s: &HangState, app: &App, body: Rect) -> crate::tui::scroll::Pane {
    let t = &app.theme;
    crate::tui::scroll::Pane::new(pick_lines(s, t, &app.progress), pick_block(t).inner(body))
}

fn pick_lines(
    s: &HangState,
    t: &Theme,
    progress: &crate::study::progress::Progress,
) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    if let Some(e) = &s.error {
        // Every line: the first says what failed, the rest why, and what works instead.
        for (i, l) in e.lines().enumerate() {
            let mark = if i == 0 { "✗" } else { " " };
            out.push(Line::styled(format!(" {mark} {l}"), t.error));
        }
        out.push(Line::raw(""));
    }
    for (i, sc) in s.scenarios.iter().enumerate() {
        let sel = i == s.selected;
        // The title as text (its `code` marks dropped) in a 44-column field, cut with an
        // ellipsis rather than pushed past its column.
        // ✓: solved before (kept in progress with hints seen and attempts).
        let solved = progress.labs.get(&sc.name).is_some_and(|r| r.solved);
        let row = format!(
            "{} {} {:<42}",
            if sel { "▶" } else { " " },
            if solved { "✓" } else { " " },
            // 41 columns of title and at least one space before the name.
            crate::tui::markdown::ellipsize(&s.heading(i, sc).replace('`', ""), 41)
        );
        // The name `ringlab lab run` takes, dimmed; blind mode hides it (it names the cause).
        let name = if s.blind {
            String::new()
        } else {
            format!(" lab run {}", sc.name)
        };
        out.push(Line::from(vec![
            Span::styled(row, if sel { t.selection } else { t.base }),
            Span::styled(name, t.dim),
        ]));
    }
    if let Some(sc) = s.scenario() {
        out.push(Line::raw(""));
        let story = if s.blind { &sc.brief } else { &sc.story };
        out.push(Line::from(crate::tui::markdown::inline_code(
            story, t.base, t.code,
        )));
        out.push(Line::raw(""));
        out.push(Line::styled(
            format!(
                "{} nodes × {} rank{} each; {} Ranks: {} (n switches; b: blind mode for a class).",
                sc.nodes,
                sc.ranks_per_node,
                if sc.ranks_per_node == 1 { "" } else { "s" },
                if sc.slow_job() {
                    format!("the job runs to the end, measured (a watchdog of {} s without progress guards it).", sc.timeout)
                } else {
                    format!("a hang is declared after {} s without progress.", sc.timeout)
                },
                if s.nccl {
                    "real NCCL"
                } else {
                    "ringlab's TCP backend"
                }
            ),
            t.dim,
        ));
        if !s.nccl {
            out.push(Line::styled(
                match s.version {
                    Some(v) => format!(
                        "Emulated NCCL: {} (v: another release).",
                        Profile::nearest(v).describe(v)
                    ),
                    None => "Emulated NCCL: this machine's release where a GPU lets ringlab load it, else the newest modelled (v: choose one).".to_string(),
                },
                t.dim,
            ));
        }
        out.push(Line::styled(
            if s.root {
                "The nodes are real network namespaces (running as root)."
            } else {
                "Not root: the lab makes its namespaces inside a user namespace of its own where \
                 the kernel allows it; where not, the nodes are EMULATED (processes on this host, \
                 virtual interfaces on loopback addresses), and the diagnosis says so."
            },
            t.dim,
        ));
    }
    out
}

fn board_lines(s: &HangState, t: &Theme, body: Rect) -> Vec<Line<'static>> {
    // A training loop: each rank's collective number races ahead, until one stops. The number
    // is the last collective the rank completed (the flight recorder also lists the ones it
    // started or scheduled after it, so its newest number can be higher).
    let front = s.seqs.values().copied().max();
    let mut out = vec![Line::styled(
        if front.is_some() {
            " rank  phase                                    last done     since"
        } else {
            " rank  phase                                              since"
        },
        t.strong,
    )];
    for (rank, phase, since) in &s.board {
        let mut line = vec![Span::styled(format!(" {rank:<5} "), t.strong)];
        match (front, s.seqs.get(rank)) {
            (Some(f), seq) => {
                line.push(Span::raw(format!("{phase:<40}")));
                let n = seq.copied().unwrap_or(0);
                line.push(Span::styled(
                    format!(" #{n:<11}"),
                    if n < f { t.warn } else { t.base },
                ));
            }
            (None, _) => line.push(Span::raw(format!("{phase:<50}"))),
        }
        line.push(Span::styled(
            format!(" {:>5.1} s", since.elapsed().as_secs_f64()),
            t.dim,
        ));
        out.push(Line::from(line));
    }
    out.push(Line::raw(""));
    // The newest log lines in the rows left, one row each (a long one ends in "…"; the
    // evidence keeps each rank's last lines whole once the run ends).
    let room = usize::from(body.height.saturating_sub(1)).saturating_sub(out.len());
    let width = usize::from(body.width);
    for l in s.logs.iter().rev().take(room.min(10)).rev() {
        out.push(Line::styled(
            crate::tui::markdown::ellipsize(&format!(" {l}"), width),
            t.dim,
        ));
    }
    out
}

/// The diagnosed screen laid out in its body: the evidence above (it scrolls), the actions
/// below; drawing and scrolling both read it.
struct Diagnosis {
    act: Paragraph<'static>,
    act_area: Rect,
    /// The actions' rows, and those shown (their top gives way first).
    act_n: u16,
    act_h: u16,
    ev: crate::tui::scroll::Pane,
}

impl Diagnosis {
    fn new(s: &HangState, t: &Theme, body: Rect) -> Self {
        let inner = Self::block(t).inner(body);
        let keep = |l| crate::tui::markdown::keep_indent(l, inner.width as usize);
        let para = |l| Paragraph::new(keep(l)).wrap(Wrap { trim: false });
        let rows = |p: &Paragraph| u16::try_from(p.line_count(inner.width)).unwrap_or(u16::MAX);
        // The evidence keeps a few rows; the actions take what they need of the rest. When
        // the hints do not fit above the verdict and the fix list, they go to the top of the
        // evidence (which scrolls), and a line here says so.
        let room = inner.height.saturating_sub(5.min(inner.height));
        let (hints, actions) = (hint_lines(s, t), action_lines(s, t, inner.width));
        let with_hints = para(hints.iter().cloned().chain(actions.clone()).collect());
        let (act, evidence) = if rows(&with_hints) <= room || hints.is_empty() {
            (with_hints, evidence_lines(s, t, inner.width))
        } else {
            let note = Line::styled(
                format!(
                    " {} at the top of the evidence (PgUp)",
                    crate::units::count(hints.len(), "hint line")
                ),
                t.accent,
            );
            let mut ev = hints;
            ev.push(Line::raw(""));
            ev.extend(evidence_lines(s, t, inner.width));
            (para(std::iter::once(note).chain(actions).collect()), ev)
        };
        let act_n = rows(&act);
        // Still too many (a long verdict on a short terminal): its top gives way, never the
        // fix list at the bottom.
        let act_h = act_n.min(room);
        let [ev_area, act_area] =
            Layout::vertical([Constraint::Min(0), Constraint::Length(act_h)]).areas(inner);
        let ev = crate::tui::scroll::Pane::new(evidence, ev_area);
        Self {
            act,
            act_area,
            act_n,
            act_h,
            ev,
        }
    }

    fn block(t: &Theme) -> Block<'static> {
        Block::default()
            .borders(Borders::TOP)
            .border_style(t.border)
    }
}

/// The diagnosed screen: the evidence above (scrolls with PgDn/PgUp), and below it, always in
/// view, the hints, the last re-run's verdict and the fix list.
fn render_diagnosis(s: &HangState, t: &Theme, frame: &mut Frame, body: Rect) {
    let d = Diagnosis::new(s, t, body);
    frame.render_widget(Diagnosis::block(t), body);
    frame.render_widget(
        d.act.scroll((d.act_n.saturating_sub(d.act_h), 0)),
        d.act_area,
    );
    d.ev.render(s.scroll, "evidence", t, frame);
}

/// The evidence: the staged run (its outcome and timing, the error it ended in, each rank's
/// phase and process state, the flight recorders or the network, the ranks' last log lines),
/// and a failed re-run's own below it. The hints point here, so the staged evidence stays.
fn evidence_lines(s: &HangState, t: &Theme, width: u16) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    let Some(r) = &s.report else { return out };
    let run_time = s.scenario().is_some_and(Scenario::run_time);
    if let Some(why) = &r.emulated_because {
        out.push(Line::styled(
            format!(" EMULATED cluster ({why}): nodes are processes on this host, interfaces are loopback addresses"),
            t.warn,
        ));
    }
    out.push(Line::styled(
        format!(
            " staged run: {} ({})",
            r.staged.outcome.name().to_uppercase(),
            scenario::timing(&r.staged, run_time)
        ),
        t.error,
    ));
    if let Some(reason) = &r.staged.reason {
        for l in reason.lines().filter(|l| !l.trim().is_empty()).take(4) {
            out.push(Line::styled(format!("   {l}"), t.error));
        }
    }
    if let Some(line) = stuck_line(&r.staged) {
        out.push(Line::raw(line));
    }
    if !r.staged.ranks.is_empty() {
        out.push(Line::styled(
            format!(
                "  {:<4} {:<5} {:<32} {:<5} {:<6}",
                "rank", "node", "phase", "state", "GPU"
            ),
            t.strong,
        ));
        for rr in &r.staged.ranks {
            let state = rr.state.map_or_else(|| "-".to_string(), |s| s.to_string());
            let stuck = rr.state.is_some_and(|s| s.is_dead_or_stopped());
            let gpu = rr.gpu_util.map_or("-", GpuUtil::shown);
            out.push(Line::from(vec![
                Span::raw(format!("  {:<4} {:<5} {:<32} ", rr.rank, rr.node, rr.phase)),
                Span::styled(format!("{state:<5} "), if stuck { t.error } else { t.base }),
                Span::styled(
                    gpu.to_string(),
                    if rr.gpu_util == Some(GpuUtil::Idle) {
                        t.error
                    } else {
                        t.base
                    },
                ),
            ]));
        }
        // A job that ran to the end (slowly) left no GPU to describe.
        if r.staged.ranks.iter().any(|rr| rr.gpu_util.is_some()) {
            out.push(Line::styled(format!("  {GPU_LEGEND}"), t.dim));
        }
    }
    out.push(Line::styled(" evidence from the staged run", t.h2));
    out.extend(evidence_of(&r.diagnosis, t, width));
    if let Some((text, f)) = &s.last_fix
        && (f.evidence.is_some() || f.reason.is_some())
    {
        out.push(Line::raw(""));
        out.push(Line::styled(
            format!(" evidence from the re-run with {text}"),
            t.h2,
        ));
        for l in f.reason.iter().flat_map(|r| r.lines()) {
            if !l.trim().is_empty() {
                out.push(Line::styled(format!("   {l}"), t.error));
            }
        }
    }
    if let Some((_, f)) = &s.last_fix
        && let Some(d) = &f.evidence
    {
        if d.culprit != scenario::Culprit::Unknown && !d.explanation.is_empty() {
            out.push(Line::raw(format!(
                "  what it shows: {} — {}",
                d.culprit.title(),
                d.explanation
            )));
        }
        out.extend(evidence_of(d, t, width));
    }
    out
}

/// Where the staged run stopped: the rank the others wait for (one stopped in that phase,
/// else one still alive in it); a run that ended in an error has no stuck rank, only a place.
fn stuck_line(staged: &scenario::Staged) -> Option<String> {
    use crate::lab::job::ProcState;
    let p = staged.stuck_phase.as_ref()?;
    if staged.outcome == scenario::Outcome::Error {
        return Some(format!(" the job ended at: {p}"));
    }
    let at = || staged.ranks.iter().filter(|rr| &rr.phase == p);
    let who = at()
        .find(|rr| rr.state == Some(ProcState::Stopped))
        .or_else(|| at().find(|rr| !rr.state.is_some_and(ProcState::is_dead_or_stopped)));
    Some(match who {
        Some(rr) => format!(" rank {} is stuck in: {p}", rr.rank),
        None => format!(" stuck in: {p}"),
    })
}

/// One run's evidence: the flight recorders (run time) or the interfaces and who reached
/// what (start-up), then each rank's last log lines, the WARNs marked.
fn evidence_of(d: &scenario::Diagnosis, t: &Theme, width: u16) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    if let Some(sl) = &d.slow {
        out.extend(sl.lines().into_iter().map(|l| Line::raw(format!("  {l}"))));
    }
    if let Some(tr) = &d.trace {
        out.push(Line::styled(
            "  flight recorders by collective number (✓ completed … started · scheduled — never entered; ◀ the ranks disagree)",
            t.strong,
        ));
        // One row per line: a row wider than the pane ends in "…" (doctor --trace prints
        // it whole), never wrapped under the first column.
        for row in &tr.table {
            out.push(Line::styled(
                crate::tui::markdown::ellipsize(&row.text, usize::from(width)),
                if row.odd { t.error } else { t.base },
            ));
        }
        out.push(Line::styled(
            format!(
                "  dumps: {} (ringlab doctor --trace reads them, rows whole)",
                tr.dir
            ),
            t.dim,
        ));
    } else {
        let nodes = d
            .interfaces
            .iter()
            .map(|i| i.node)
            .max()
            .map_or(0, |m| m + 1);
        for n in 0..nodes {
            let list: Vec<String> = d
                .interfaces
                .iter()
                .filter(|i| i.node == n && !i.addr.contains(':'))
                .map(|i| format!("{} {}", i.name, i.addr))
                .collect();
            out.push(Line::raw(format!(
                "  node {n} interfaces: {}",
                list.join(" · ")
            )));
        }
        if !d.reachability.is_empty() {
            out.push(Line::styled(
                "  can node i reach what each rank advertised?",
                t.strong,
            ));
        }
        for x in &d.reachability {
            let st = if x.result == scenario::Reached::Ok {
                t.ok
            } else {
                t.warn
            };
            out.push(Line::from(vec![
                Span::raw(format!(
                    "  node {} → rank {} at {:<22} ",
                    x.from_node, x.to_rank, x.addr
                )),
                Span::styled(x.result.to_string(), st),
            ]));
        }
    }
    if !d.last_logs.is_empty() {
        out.push(Line::styled(
            "  each rank's last log lines (▶ a WARN, or a line that is not NCCL's):",
            t.strong,
        ));
    }
    for (rank, lines) in &d.last_logs {
        for l in lines.iter().rev().take(3).rev() {
            let (telling, text) = match nccl_log::parse_line(l) {
                Some(p) => (p.level == Level::Warn, log_row(*rank, &p)),
                None => (true, format!("[rank {rank}] {}", l.trim())),
            };
            out.push(Line::styled(
                format!("  {} {text}", if telling { "▶" } else { " " }),
                if telling { t.error } else { t.dim },
            ));
        }
    }
    out
}

/// A rank's log line as the screen shows it: the host that wrote it first, as NCCL's own
/// prefix has it (lesson 07 reads the host at the start of each line), then the rank.
fn log_row(rank: usize, l: &nccl_log::Line) -> String {
    let host = if l.host.is_empty() {
        String::new()
    } else {
        format!("{}: ", l.host)
    };
    format!("{host}[rank {rank}] {} {}", l.level.tag(), l.text)
}

/// The hints taken, and the diagnosis once every hint is out.
fn hint_lines(s: &HangState, t: &Theme) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    let (Some(r), Some(sc)) = (&s.report, s.scenario()) else {
        return out;
    };
    for h in sc.hints.iter().take(s.hints) {
        let mut spans = vec![Span::styled(" hint: ", t.accent)];
        spans.extend(crate::tui::markdown::inline_code(h, t.accent, t.code));
        out.push(Line::from(spans));
    }
    if s.hints > 0 && s.hints == sc.hints.len() {
        out.push(Line::styled(
            format!(
                " diagnosis: {} — {}",
                r.diagnosis.culprit.title(),
                r.diagnosis.explanation
            ),
            t.strong,
        ));
    }
    out
}

/// Below the evidence, always in view: the last re-run's verdict (its error cut to `width`
/// columns, whole in the evidence) and the fix list (or the fix being typed).
fn action_lines(s: &HangState, t: &Theme, width: u16) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    let Some(r) = &s.report else { return out };
    let per_node = s.scenario().map_or(1, |sc| sc.ranks_per_node);
    if let Some(sc) = s.scenario()
        && let Some((text, f)) = &s.last_fix
    {
        out.extend(verdict_lines(
            text,
            f,
            &r.diagnosis,
            per_node,
            &sc.pass_claim(),
            t,
            usize::from(width),
        ));
    }
    if let Some(typed) = &s.typing {
        out.push(Line::styled(
            " type a fix: NAME=value … (Enter runs it · Esc cancels · Ctrl-U clears)",
            t.h2,
        ));
        let mut spans = vec![Span::styled(" fix> ", t.strong)];
        spans.extend(typed.spans(t.strong, t.accent));
        out.push(Line::from(spans));
    } else if s.stage == Stage::Diagnosed {
        out.push(Line::styled(
            " pick a fix (Enter re-runs the job with it), or e to type one:",
            t.h2,
        ));
        for (i, c) in s.choices.iter().enumerate() {
            let sel = i == s.choice;
            let base = if sel { t.selection } else { t.base };
            // Inline code (`if`) drawn as code, its marks dropped.
            let mut spans = vec![Span::styled(if sel { "▶ " } else { "  " }, base)];
            spans.extend(crate::tui::markdown::inline_code(&c.text, base, t.code));
            out.push(Line::from(spans));
        }
    }
    out
}

/// What a re-run with a fix showed: PASS, or how it still failed (the error itself, what each
/// rank advertised this time, the re-run's own diagnosis) and whether the fix changed anything.
pub fn verdict_lines(
    text: &str,
    f: &Fixed,
    staged: &scenario::Diagnosis,
    ranks_per_node: usize,
    claim: &str,
    t: &Theme,
    width: usize,
) -> Vec<Line<'static>> {
    if f.outcome == scenario::Outcome::Pass {
        let mut out = vec![Line::styled(format!(" ✓ PASS with {text}: {claim}"), t.ok)];
        if let Some(tr) = &f.transport {
            out.push(Line::raw(format!("   transport: {tr}")));
        }
        // Passing by moving off shared memory proves the cause; the node still lacks room.
        if staged.culprit == scenario::Culprit::ShmFull
            && f.transport
                == Some(crate::comm::cpu::tcp::Transports::only(
                    crate::comm::cpu::tcp::Transport::NET,
                ))
        {
            out.push(Line::styled(
                "   but every byte of this node now goes through sockets: that proves /dev/shm was the cause, it does not fix it (give the container room: --shm-size or --ipc=host)",
                t.warn,
            ));
        }
        return out;
    }
    let how = match f.outcome {
        scenario::Outcome::Hang => "still HANGS",
        scenario::Outcome::Error => "still FAILS with an error",
        scenario::Outcome::Ok => "completes, but the all-reduce is WRONG",
        scenario::Outcome::Pass => "passes",
        scenario::Outcome::Slow => "is still SLOW",
    };
    // What the time measures: the watchdog counts from the last progress in a training loop
    // (from the start at init); an error ends the run when it comes.
    let run_time = f.evidence.as_ref().is_some_and(|d| d.trace.is_some());
    let after = match (f.outcome, f.detected_after_s) {
        (scenario::Outcome::Hang, Some(x)) if run_time => {
            format!(" (the watchdog fired after {x:.1} s without progress)")
        }
        (scenario::Outcome::Hang, Some(x)) => format!(" (the watchdog fired after {x:.1} s)"),
        (scenario::Outcome::Error, _) if f.run_s > 0.0 => {
            format!(" ({:.1} s after the start)", f.run_s)
        }
        _ => String::new(),
    };
    let mut out = vec![Line::styled(
        format!(" ✗ the re-run with {text} {how}{after}"),
        t.error,
    )];
    if let Some(reason) = f.reason.as_deref().and_then(|r| r.lines().next()) {
        // One row: the ✗ line above and the fix list below stay in view; the whole error is
        // with the re-run's evidence.
        let line = format!("   error: {reason}");
        out.push(Line::raw(
            if unicode_width::UnicodeWidthStr::width(line.as_str()) <= width {
                line
            } else {
                let tail = " (whole in the evidence ↑)";
                let head = width.saturating_sub(unicode_width::UnicodeWidthStr::width(tail));
                format!("{}{tail}", crate::tui::markdown::ellipsize(&line, head))
            },
        ));
    }
    let Some(d) = &f.evidence else { return out };
    let now = d.advertised_by_rank(ranks_per_node);
    if !now.is_empty() {
        out.push(Line::raw(format!("   advertised now: {}", now.join(" · "))));
    }
    // The culprit's name here; its whole explanation is with the re-run's evidence above.
    if d.culprit != scenario::Culprit::Unknown {
        out.push(Line::raw(format!(
            "   why it still fails: {} (the re-run's evidence is above)",
            d.culprit.title()
        )));
    }
    let same = d.culprit == staged.culprit
        && d.advertised_ifaces(ranks_per_node) == staged.advertised_ifaces(ranks_per_node);
    out.push(Line::styled(
        if same {
            "   no change from the staged run: this setting does not touch what breaks the job"
        } else {
            "   it changed what happens, but not enough: compare with the staged run above"
        },
        t.warn,
    ));
    out
}

impl crate::tui::screens::View for HangState {
    fn update(&mut self, app: &mut App, action: Action) -> Outcome {
        update(self, app, action)
    }

    fn render(&self, app: &App, frame: &mut ratatui::Frame, area: ratatui::layout::Rect) {
        render(self, app, frame, area)
    }

    fn contexts(&self) -> Vec<crate::tui::keys::Context> {
        match self.stage {
            Stage::Pick => vec![LIST],
            Stage::Diagnosed => vec![EVIDENCE],
            Stage::Passed => vec![PASSED],
            // The job runs to its watchdog: only the global keys.
            Stage::Staging | Stage::Fixing => Vec::new(),
        }
    }

    fn help_contexts(&self) -> Vec<crate::tui::keys::Context> {
        vec![LIST, EVIDENCE, PASSED]
    }

    fn tick(&self, _app: &App) -> Option<std::time::Duration> {
        self.running()
            .then(|| std::time::Duration::from_millis(250))
    }

    fn takes_text(&self) -> bool {
        self.typing.is_some()
    }

    fn hint_line(&self, app: &App) -> Option<ratatui::text::Line<'static>> {
        self.typing
            .is_some()
            .then(|| super::typing_hint(app, "runs it"))
    }

    fn receive(&mut self, msg: &dyn std::any::Any, app: &mut App) {
        if let Some(u) = msg.downcast_ref::<HangUpdate>() {
            HangState::receive(self, u.clone(), app);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blind_mode_says_it_is_on() {
        use ratatui::{Terminal, backend::TestBackend};
        let app = App::new(
            crate::course::Course::embedded(),
            crate::tui::theme::Theme::color(),
        );
        let mut s = HangState::new();
        let draw = |s: &HangState| {
            let mut term = Terminal::new(TestBackend::new(80, 24)).expect("terminal");
            term.draw(|f| render(s, &app, f, f.area())).expect("draw");
            format!("{}", term.backend())
        };
        assert!(!draw(&s).contains("blind mode on (b turns it off)"));
        s.blind = true;
        let text = draw(&s);
        assert!(text.contains("blind mode on (b turns it off)"), "{text}");
        assert!(
            !text.contains("lab run docker0"),
            "blind mode hides the names: {text}"
        );
    }

    #[test]
    fn list_rows_keep_their_columns_and_show_no_code_marks() {
        let s = HangState::new();
        let t = crate::tui::theme::Theme::color();
        let mut progress = crate::study::progress::Progress::default();
        progress.labs.insert(
            "docker0".into(),
            crate::study::progress::LabRecord {
                solved: true,
                ..Default::default()
            },
        );
        let rows: Vec<String> = pick_lines(&s, &t, &progress)
            .iter()
            .map(|l| l.spans.iter().map(|sp| sp.content.as_ref()).collect())
            .filter(|r: &String| r.contains(" lab run "))
            .collect();
        assert!(rows.len() >= 10, "{rows:?}");
        for r in &rows {
            let col = r.find(" lab run ").map(|b| r[..b].chars().count());
            assert_eq!(col, Some(46), "the name column moved: {r:?}");
            assert!(!r.contains("▶✓"), "the marks apart: {r:?}");
            assert!(!r.contains('`'), "{r:?}");
        }
        assert!(
            rows.iter().any(|r| r.contains('…')),
            "a long title is cut with an ellipsis: {rows:?}"
        );
        let solved: Vec<&String> = rows.iter().filter(|r| r.contains('✓')).collect();
        assert_eq!(solved.len(), 1, "{rows:?}");
        assert!(solved[0].contains("lab run docker0"), "{solved:?}");
    }

    #[test]
    fn connect_retries_show_on_the_board() {
        use crate::nccl_log::{Msg as N, Retry, Writer};
        let w = Writer {
            host: "n1".into(),
            pid: 7,
            tid: 7,
            dev: 0,
        };
        let retry = |k: Option<u64>| {
            N::Retry(Retry {
                func: Some("socketPollConnect".into()),
                addr: Some("172.17.0.1<4000>".into()),
                error: "Connection refused".into(),
                count: k.map(|k| (k, 34)),
                sleep_ms: Some(100),
            })
        };
        let mut s = HangState::new();
        s.run = 1;
        s.board
            .push((1, "connect to 172.17.0.1:4000".into(), Instant::now()));
        let mut app = App::new(
            crate::course::Course::embedded(),
            crate::tui::theme::Theme::color(),
        );
        let p = Profile::NEWEST;
        for k in [1, 2] {
            let line = w.line(p, Level::Info, ("misc/socket.cc", 1), None, &retry(Some(k)));
            s.receive(HangUpdate::Msg(1, Msg::Log { rank: 1, line }), &mut app);
        }
        assert_eq!(s.board[0].1, "connect to 172.17.0.1:4000 (retry 2/34)");
        // A ≤ 2.23 line has no count: each stands for 1000 refused connects.
        let old = Profile::parse("2.21.5").expect("modelled");
        for _ in 0..3 {
            let msg = retry(None).as_printed_by(old);
            let line = w.line(old, Level::Info, ("misc/socket.cc", 1), None, &msg);
            s.receive(HangUpdate::Msg(1, Msg::Log { rank: 1, line }), &mut app);
        }
        assert_eq!(s.board[0].1, "connect to 172.17.0.1:4000 (3000 refused)");
        assert!(
            s.logs.iter().all(|l| l.starts_with("n1: [rank 1] INFO ")),
            "{:?}",
            s.logs
        );
    }

    #[test]
    fn presenting_sets_the_staging_board_large() {
        let mut app = App::new(
            crate::course::Course::embedded(),
            crate::tui::theme::Theme::color(),
        );
        let mut s = HangState::new();
        s.stage = Stage::Staging;
        s.board.push((0, "accept".into(), Instant::now()));
        s.board.push((1, "connect".into(), Instant::now()));
        let draw = |app: &App, s: &HangState| {
            let mut term =
                ratatui::Terminal::new(ratatui::backend::TestBackend::new(140, 40)).expect("term");
            term.draw(|f| render(s, app, f, f.area())).expect("draw");
            format!("{}", term.backend())
        };
        let desk = draw(&app, &s);
        assert!(desk.contains("connect"), "{desk}");
        crate::tui::app::update(&mut app, Action::Resize(140, 40));
        crate::tui::app::update(&mut app, crate::tui::screens::home::Verb::Present.act());
        assert!(app.presenting());
        let class = draw(&app, &s);
        assert!(!class.contains("connect"), "set in large type: {class}");
        assert!(class.contains('▀') || class.contains('▄'), "{class}");
    }

    #[test]
    fn typed_fixes_are_environment_assignments() {
        let f = parse_typed_fix("  NCCL_SOCKET_IFNAME=eth0,eno1   NCCL_DEBUG=INFO ").expect("ok");
        assert_eq!(
            f.env.get("NCCL_SOCKET_IFNAME").map(String::as_str),
            Some("eth0,eno1")
        );
        assert_eq!(f.env.get("NCCL_DEBUG").map(String::as_str), Some("INFO"));
        assert_eq!(f.text, "NCCL_SOCKET_IFNAME=eth0,eno1 NCCL_DEBUG=INFO");
        // `^docker0,lo` is a value like any other.
        assert!(parse_typed_fix("NCCL_SOCKET_IFNAME=^docker0,lo").is_ok());
        assert!(
            parse_typed_fix("eth0")
                .expect_err("no =")
                .to_string()
                .contains("NAME=value")
        );
        assert!(
            parse_typed_fix("9X=1")
                .expect_err("bad name")
                .to_string()
                .contains("not an environment")
        );
        assert!(parse_typed_fix("   ").is_err());
    }

    /// The header names the rank the others wait for (a stopped one), never rank 0 because it
    /// comes first; a run that ended in an error has no stuck rank (H1, M13).
    #[test]
    fn the_stuck_line_names_the_rank_everyone_waits_for() {
        use crate::lab::job::ProcState;
        let rank = |r: usize, state: ProcState| scenario::RankReport {
            rank: r,
            node: r / 2,
            phase: "step 80/200".into(),
            advertised: None,
            state: Some(state),
            gpu_util: None,
        };
        let mut staged = scenario::Staged {
            outcome: scenario::Outcome::Hang,
            stuck_phase: Some("step 80/200".into()),
            detected_after_s: Some(6.0),
            run_s: 7.0,
            ranks: vec![
                rank(0, ProcState::Sleeping),
                rank(1, ProcState::Sleeping),
                rank(2, ProcState::Sleeping),
                rank(3, ProcState::Stopped),
            ],
            reason: None,
            transport: None,
        };
        assert_eq!(
            stuck_line(&staged).as_deref(),
            Some(" rank 3 is stuck in: step 80/200")
        );
        staged.outcome = scenario::Outcome::Error;
        staged.ranks = (0..4).map(|r| rank(r, ProcState::Gone)).collect();
        assert_eq!(
            stuck_line(&staged).as_deref(),
            Some(" the job ended at: step 80/200")
        );
    }

    /// A refusal of real NCCL goes when `n` switches back (L21).
    #[test]
    fn switching_the_ranks_back_clears_their_refusal() {
        let mut app = App::new(
            crate::course::Course::embedded(),
            crate::tui::theme::Theme::color(),
        );
        let mut s = HangState::new();
        s.nccl = true;
        s.error = Some("lab run --backend nccl: no GPU here".into());
        update(&mut s, &mut app, Verb::ToggleNccl.act());
        assert!(!s.nccl);
        assert_eq!(s.error, None);
    }

    #[test]
    fn a_typed_name_that_is_ncclish_but_for_case_gets_a_hint() {
        let f = parse_typed_fix("nccl_socket_ifname=eth0").expect("ok");
        let hint = case_hint(&f).expect("a hint");
        assert!(hint.contains("did you mean NCCL_SOCKET_IFNAME?"), "{hint}");
        let f = parse_typed_fix("NCCL_SOCKET_IFNAME=eth0 MY_VAR=1").expect("ok");
        assert_eq!(case_hint(&f), None);
    }
}
