//! Keys are data: one table feeds input handling, the key-hint bar and the `?` overlay.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::app::Action;

/// Where a binding applies. The focused screen offers its contexts, then `Global`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Context {
    Global,
    Home,
    Lesson,
    Ring,
    Help,
    /// Quiz or drill: feedback on an answer, or the summary.
    Quiz,
    /// Recall item revealed: grade yourself.
    QuizRate,
    /// The end-of-session summary.
    QuizDone,
    Stats,
    /// The TP calculator.
    TpCalc,
    /// The vLLM launch planner.
    Planner,
    /// The live lab.
    Lab,
    /// The hang lab.
    Hang,
    /// Presenter mode: slides.
    Present,
    /// Presenter mode: a class quiz.
    ClassQuiz,
    /// The notes terminal.
    Notes,
}

impl Context {
    pub fn title(self) -> &'static str {
        match self {
            Self::Global => "Everywhere",
            Self::Home => "Course map",
            Self::Lesson => "Lesson",
            Self::Ring => "Ring view",
            Self::Help => "Help",
            Self::Quiz => "Quiz and drills",
            Self::QuizRate => "Grade yourself",
            Self::QuizDone => "Session summary",
            Self::Stats => "Study stats",
            Self::TpCalc => "TP calculator",
            Self::Planner => "Launch planner",
            Self::Lab => "Live lab",
            Self::Hang => "Hang lab",
            Self::Present => "Presenter mode",
            Self::ClassQuiz => "Class quiz",
            Self::Notes => "Presenter notes",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    Char(char),
    Ctrl(char),
    Code(KeyCode),
}

impl Key {
    fn matches(self, ev: &KeyEvent) -> bool {
        let ctrl = ev.modifiers.contains(KeyModifiers::CONTROL);
        match self {
            Key::Ctrl(c) => ctrl && ev.code == KeyCode::Char(c),
            Key::Char(c) => !ctrl && ev.code == KeyCode::Char(c),
            Key::Code(code) => !ctrl && ev.code == code,
        }
    }
}

pub struct Binding {
    pub ctx: Context,
    pub keys: &'static [Key],
    /// How the keys are shown: `j/↓`.
    pub label: &'static str,
    pub desc: &'static str,
    pub action: Action,
    /// In the always-visible hint bar: (priority, short text). Lower priorities come first
    /// and keep their place when the bar is narrow; what does not fit folds into `?` ("more: ?").
    /// None: only in the `?` overlay, which shows everything.
    pub hint: Option<(u8, &'static str)>,
}

use Context::*;
use Key::{Char, Code, Ctrl};

const fn b(
    ctx: Context,
    keys: &'static [Key],
    label: &'static str,
    desc: &'static str,
    action: Action,
    hint: Option<(u8, &'static str)>,
) -> Binding {
    Binding {
        ctx,
        keys,
        label,
        desc,
        action,
        hint,
    }
}

pub const BINDINGS: &[Binding] = &[
    // Course map
    b(
        Home,
        &[Char('j'), Code(KeyCode::Down)],
        "j/↓",
        "next lesson",
        Action::Move(1),
        Some((6, "next")),
    ),
    b(
        Home,
        &[Char('k'), Code(KeyCode::Up)],
        "k/↑",
        "previous lesson",
        Action::Move(-1),
        None,
    ),
    b(
        Home,
        &[Code(KeyCode::Enter), Char('l'), Code(KeyCode::Right)],
        "Enter",
        "open lesson",
        Action::Open,
        Some((1, "open")),
    ),
    b(
        Home,
        &[Char('g'), Code(KeyCode::Home)],
        "g/Home",
        "first lesson",
        Action::Top,
        None,
    ),
    b(
        Home,
        &[Char('G'), Code(KeyCode::End)],
        "G/End",
        "last lesson",
        Action::Bottom,
        None,
    ),
    b(
        Home,
        &[Char('r')],
        "r",
        "ring all-reduce view",
        Action::OpenRing,
        Some((3, "ring view")),
    ),
    b(
        Home,
        &[Ctrl('r'), Char('R')],
        "R",
        "reload lessons",
        Action::Reload,
        None,
    ),
    // Lesson reader
    b(
        Lesson,
        &[Char('j'), Code(KeyCode::Down)],
        "j/↓",
        "scroll down",
        Action::Move(1),
        Some((4, "scroll")),
    ),
    b(
        Lesson,
        &[Char('k'), Code(KeyCode::Up)],
        "k/↑",
        "scroll up",
        Action::Move(-1),
        None,
    ),
    b(
        Lesson,
        &[Code(KeyCode::PageDown), Char(' '), Ctrl('d')],
        "PgDn/Space",
        "page down",
        Action::Page(1),
        Some((1, "page")),
    ),
    b(
        Lesson,
        &[Code(KeyCode::PageUp), Char('b'), Ctrl('u')],
        "PgUp/b",
        "page up",
        Action::Page(-1),
        None,
    ),
    b(
        Lesson,
        &[Char('g'), Code(KeyCode::Home)],
        "g/Home",
        "top",
        Action::Top,
        None,
    ),
    b(
        Lesson,
        &[Char('G'), Code(KeyCode::End)],
        "G/End",
        "bottom",
        Action::Bottom,
        None,
    ),
    b(
        Lesson,
        &[Char(']'), Code(KeyCode::Tab)],
        "]/Tab",
        "next section",
        Action::Section(1),
        Some((2, "next section")),
    ),
    b(
        Lesson,
        &[Char('['), Code(KeyCode::BackTab)],
        "[/S-Tab",
        "previous section",
        Action::Section(-1),
        None,
    ),
    b(
        Lesson,
        &[Char('/')],
        "/",
        "search",
        Action::SearchStart,
        Some((2, "search")),
    ),
    b(
        Lesson,
        &[Char('n')],
        "n",
        "next match",
        Action::SearchStep(1),
        None,
    ),
    b(
        Lesson,
        &[Char('N')],
        "N",
        "previous match",
        Action::SearchStep(-1),
        None,
    ),
    b(
        Lesson,
        &[Char('t')],
        "t",
        "raw TeX on/off",
        Action::ToggleTex,
        None,
    ),
    b(
        Lesson,
        &[Code(KeyCode::Enter)],
        "Enter",
        "follow link, or open ring/TP/planner",
        Action::Open,
        None,
    ),
    b(
        Lesson,
        &[Ctrl('r'), Char('R')],
        "R",
        "reload lessons",
        Action::Reload,
        None,
    ),
    b(
        Lesson,
        &[Char('f')],
        "f",
        "next link (→ glossary, lessons)",
        Action::NextLink(1),
        Some((3, "link")),
    ),
    b(
        Lesson,
        &[Char('F')],
        "F",
        "select the previous link",
        Action::NextLink(-1),
        None,
    ),
    // Ring view
    b(
        Ring,
        &[Char(' ')],
        "Space",
        "play / pause",
        Action::PlayPause,
        Some((1, "play/pause")),
    ),
    b(
        Ring,
        &[Code(KeyCode::Right), Char('l')],
        "→/l",
        "step forward",
        Action::Step(1),
        Some((1, "step")),
    ),
    b(
        Ring,
        &[Code(KeyCode::Left), Char('h')],
        "←/h",
        "step back",
        Action::Step(-1),
        Some((1, "back")),
    ),
    b(
        Ring,
        &[Code(KeyCode::PageDown)],
        "PgDn",
        "step forward (presentation clicker)",
        Action::Step(1),
        None,
    ),
    b(
        Ring,
        &[Code(KeyCode::PageUp)],
        "PgUp",
        "step back (presentation clicker)",
        Action::Step(-1),
        None,
    ),
    b(
        Ring,
        &[Code(KeyCode::Home), Char('g')],
        "Home",
        "first step",
        Action::Top,
        None,
    ),
    b(
        Ring,
        &[Code(KeyCode::End), Char('G')],
        "End",
        "last step",
        Action::Bottom,
        None,
    ),
    b(
        Ring,
        &[Char('+'), Char('=')],
        "+/−",
        "more / fewer ranks",
        Action::Ranks(1),
        Some((2, "ranks")),
    ),
    b(
        Ring,
        &[Char('-'), Char('_')],
        "-",
        "fewer ranks",
        Action::Ranks(-1),
        None,
    ),
    b(
        Ring,
        &[Char(']')],
        "]",
        "faster",
        Action::Speed(1),
        Some((4, "faster")),
    ),
    b(
        Ring,
        &[Char('[')],
        "[",
        "slower",
        Action::Speed(-1),
        Some((4, "slower")),
    ),
    b(
        Ring,
        &[Char('a')],
        "a",
        "next algorithm",
        Action::CycleAlgo,
        Some((2, "algorithm")),
    ),
    b(
        Ring,
        &[Char('c')],
        "c",
        "next collective",
        Action::CycleOp,
        Some((2, "collective")),
    ),
    b(
        Ring,
        &[Char('m')],
        "m",
        "next message size",
        Action::CycleSize,
        Some((3, "size")),
    ),
    b(
        Ring,
        &[Char('L')],
        "L",
        "link for time estimates",
        Action::CycleLink,
        Some((3, "link")),
    ),
    // Quizzes, drills and stats (while typing an answer, keys go to the answer line:
    // Enter submits, Esc clears it or leaves)
    b(
        Home,
        &[Char('Q')],
        "Q",
        "quiz on this lesson",
        Action::OpenQuiz,
        Some((2, "quiz")),
    ),
    b(
        Home,
        &[Char('D')],
        "D",
        "drill what is due",
        Action::OpenDrill,
        Some((2, "drill")),
    ),
    b(
        Home,
        &[Char('S')],
        "S",
        "study stats",
        Action::OpenStats,
        Some((4, "stats")),
    ),
    b(
        Home,
        &[Char('B')],
        "B",
        "live lab (bench)",
        Action::OpenLab,
        Some((3, "live lab")),
    ),
    b(
        Home,
        &[Char('H')],
        "H",
        "hang lab",
        Action::OpenHang,
        Some((3, "hang lab")),
    ),
    b(
        Home,
        &[Char('M')],
        "M",
        "mock interview (six questions, follow-ups)",
        Action::OpenMock,
        Some((4, "mock interview")),
    ),
    b(
        Lesson,
        &[Char('Q')],
        "Q",
        "quiz on this lesson",
        Action::OpenQuiz,
        Some((3, "quiz")),
    ),
    b(
        Quiz,
        &[
            Code(KeyCode::Enter),
            Char(' '),
            Char('l'),
            Code(KeyCode::Right),
        ],
        "Enter",
        "next",
        Action::Next,
        Some((1, "next")),
    ),
    b(
        Quiz,
        &[Char('o')],
        "o",
        "open the lesson there",
        Action::GotoSource,
        Some((1, "open the lesson there")),
    ),
    b(
        Quiz,
        &[Char('j'), Code(KeyCode::Down)],
        "j/↓",
        "scroll",
        Action::Move(1),
        None,
    ),
    b(
        Quiz,
        &[Char('k'), Code(KeyCode::Up)],
        "k/↑",
        "scroll",
        Action::Move(-1),
        None,
    ),
    b(
        QuizDone,
        &[Code(KeyCode::Enter), Char(' ')],
        "Enter",
        "done",
        Action::Next,
        Some((1, "done")),
    ),
    b(
        QuizDone,
        &[Char('j'), Code(KeyCode::Down)],
        "j/↓",
        "scroll",
        Action::Move(1),
        None,
    ),
    b(
        QuizDone,
        &[Char('k'), Code(KeyCode::Up)],
        "k/↑",
        "scroll",
        Action::Move(-1),
        None,
    ),
    b(
        QuizRate,
        &[Char('1')],
        "1",
        "again",
        Action::Rate(1),
        Some((1, "again")),
    ),
    b(
        QuizRate,
        &[Char('2')],
        "2",
        "hard",
        Action::Rate(2),
        Some((1, "hard")),
    ),
    b(
        QuizRate,
        &[Char('3')],
        "3",
        "good",
        Action::Rate(3),
        Some((1, "good")),
    ),
    b(
        QuizRate,
        &[Char('4')],
        "4",
        "easy",
        Action::Rate(4),
        Some((1, "easy")),
    ),
    b(
        QuizRate,
        &[Char('o')],
        "o",
        "open the lesson there",
        Action::GotoSource,
        None,
    ),
    b(
        QuizRate,
        &[Char('j'), Code(KeyCode::Down)],
        "j/↓",
        "scroll",
        Action::Move(1),
        None,
    ),
    b(
        QuizRate,
        &[Char('k'), Code(KeyCode::Up)],
        "k/↑",
        "scroll",
        Action::Move(-1),
        None,
    ),
    b(
        Stats,
        &[Char('d'), Char('D')],
        "d",
        "drill what is due",
        Action::OpenDrill,
        Some((1, "drill what is due")),
    ),
    b(
        Stats,
        &[Char('j'), Code(KeyCode::Down)],
        "j/↓",
        "scroll",
        Action::Move(1),
        None,
    ),
    b(
        Stats,
        &[Char('k'), Code(KeyCode::Up)],
        "k/↑",
        "scroll",
        Action::Move(-1),
        None,
    ),
    // TP calculator and launch planner
    b(
        Home,
        &[Char('t')],
        "t",
        "TP calculator",
        Action::OpenTpCalc,
        Some((5, "TP calc")),
    ),
    b(
        Home,
        &[Char('p')],
        "p",
        "vLLM launch planner",
        Action::OpenPlanner,
        Some((5, "planner")),
    ),
    b(
        TpCalc,
        &[Char('j'), Code(KeyCode::Down)],
        "j/k",
        "choose field",
        Action::Move(1),
        Some((1, "choose field")),
    ),
    b(
        TpCalc,
        &[Char('k'), Code(KeyCode::Up)],
        "k/↑",
        "previous field",
        Action::Move(-1),
        None,
    ),
    b(
        TpCalc,
        &[Char('l'), Code(KeyCode::Right), Char('+'), Char('=')],
        "←/→",
        "change value",
        Action::Adjust(1),
        Some((1, "change value")),
    ),
    b(
        TpCalc,
        &[Char('h'), Code(KeyCode::Left), Char('-')],
        "←/h",
        "previous value",
        Action::Adjust(-1),
        None,
    ),
    b(
        Planner,
        &[Char('j'), Code(KeyCode::Down)],
        "j/k",
        "choose field",
        Action::Move(1),
        Some((1, "choose field")),
    ),
    b(
        Planner,
        &[Char('k'), Code(KeyCode::Up)],
        "k/↑",
        "previous field",
        Action::Move(-1),
        None,
    ),
    b(
        Planner,
        &[Char('l'), Code(KeyCode::Right), Char('+'), Char('=')],
        "←/→",
        "change value",
        Action::Adjust(1),
        Some((1, "change value")),
    ),
    b(
        Planner,
        &[Char('h'), Code(KeyCode::Left), Char('-')],
        "←/h",
        "previous value",
        Action::Adjust(-1),
        None,
    ),
    b(
        Planner,
        &[Code(KeyCode::PageDown), Char(' '), Ctrl('d')],
        "PgDn/PgUp",
        "scroll plan",
        Action::Page(1),
        Some((1, "scroll plan")),
    ),
    b(
        Planner,
        &[Code(KeyCode::PageUp), Char('b'), Ctrl('u')],
        "PgUp/b",
        "scroll up",
        Action::Page(-1),
        None,
    ),
    // Help overlay
    b(
        Help,
        &[Char('j'), Code(KeyCode::Down)],
        "j/↓",
        "scroll",
        Action::Move(1),
        None,
    ),
    b(
        Help,
        &[Char('k'), Code(KeyCode::Up)],
        "k/↑",
        "scroll",
        Action::Move(-1),
        None,
    ),
    // Live lab
    b(
        Lab,
        &[Code(KeyCode::Enter), Char('r')],
        "Enter",
        "run on real processes",
        Action::Open,
        Some((1, "run on real processes")),
    ),
    b(
        Lab,
        &[Char('j'), Code(KeyCode::Down)],
        "↑↓",
        "choose a field",
        Action::Move(1),
        Some((1, "choose a field")),
    ),
    b(
        Lab,
        &[Char('k'), Code(KeyCode::Up)],
        "k/↑",
        "previous field",
        Action::Move(-1),
        None,
    ),
    b(
        Lab,
        &[Char('l'), Code(KeyCode::Right)],
        "←→",
        "change the value",
        Action::Adjust(1),
        Some((1, "change the value")),
    ),
    b(
        Lab,
        &[Char('h'), Code(KeyCode::Left)],
        "h/←",
        "previous value",
        Action::Adjust(-1),
        None,
    ),
    // Hang lab
    b(
        Hang,
        &[Code(KeyCode::Enter)],
        "Enter",
        "stage / apply the fix",
        Action::Open,
        Some((1, "stage / apply the fix")),
    ),
    b(
        Hang,
        &[Char('j'), Code(KeyCode::Down)],
        "↑↓",
        "choose",
        Action::Move(1),
        Some((1, "choose")),
    ),
    b(
        Hang,
        &[Char('k'), Code(KeyCode::Up)],
        "k/↑",
        "choose",
        Action::Move(-1),
        None,
    ),
    b(
        Hang,
        &[Char('h')],
        "h",
        "next hint",
        Action::Hint,
        Some((1, "next hint")),
    ),
    b(
        Hang,
        &[Char('b')],
        "b",
        "blind mode: hide what gives the cause away",
        Action::Blind,
        None,
    ),
    b(
        Hang,
        &[Char('n')],
        "n",
        "ranks: TCP or real NCCL",
        Action::Adjust(1),
        None,
    ),
    b(
        Hang,
        &[Char('e')],
        "e",
        "type a fix",
        Action::SearchStart,
        Some((1, "type a fix")),
    ),
    // Presenter mode: what a presentation clicker sends (PgDn/PgUp, →/←, Space, b/.)
    b(
        Home,
        &[Char('P')],
        "P",
        "present this lesson (slides, for a class)",
        Action::Present,
        Some((5, "present")),
    ),
    b(
        Present,
        &[
            Code(KeyCode::PageDown),
            Code(KeyCode::Right),
            Char(' '),
            Code(KeyCode::Down),
            Char('j'),
            Char('l'),
            Char('n'),
        ],
        "→/PgDn/Space",
        "next slide",
        Action::Page(1),
        Some((1, "next")),
    ),
    b(
        Present,
        &[
            Code(KeyCode::PageUp),
            Code(KeyCode::Left),
            Code(KeyCode::Backspace),
            Code(KeyCode::Up),
            Char('k'),
            Char('h'),
            Char('p'),
        ],
        "←/PgUp",
        "previous slide",
        Action::Page(-1),
        Some((1, "back")),
    ),
    b(
        Present,
        &[Code(KeyCode::Home), Char('g')],
        "Home",
        "first slide",
        Action::Top,
        None,
    ),
    b(
        Present,
        &[Code(KeyCode::End), Char('G')],
        "End",
        "last slide",
        Action::Bottom,
        None,
    ),
    b(
        Present,
        &[Char('b'), Char('.'), Char('B')],
        "b",
        "blank the screen (any key brings it back)",
        Action::Blank,
        Some((2, "blank")),
    ),
    b(
        Present,
        &[Code(KeyCode::Enter)],
        "Enter",
        "run this slide's live block (ring, lab, quiz)",
        Action::Open,
        Some((2, "live block")),
    ),
    b(
        Present,
        &[Char('r')],
        "r",
        "narrated ring all-reduce",
        Action::OpenRing,
        Some((3, "ring")),
    ),
    b(
        Present,
        &[Char('L')],
        "L",
        "live lab: the bench and its busbw chart",
        Action::OpenLab,
        None,
    ),
    b(
        Present,
        &[Char('H')],
        "H",
        "hang lab: staging to PASS",
        Action::OpenHang,
        None,
    ),
    b(
        Present,
        &[Char('Q')],
        "Q",
        "class quiz on this lesson",
        Action::OpenQuiz,
        Some((3, "class quiz")),
    ),
    b(
        ClassQuiz,
        &[
            Code(KeyCode::PageDown),
            Code(KeyCode::Right),
            Char(' '),
            Code(KeyCode::Enter),
            Char('l'),
        ],
        "Space/→",
        "show the answer, then the next question",
        Action::Next,
        Some((1, "answer / next")),
    ),
    b(
        ClassQuiz,
        &[Code(KeyCode::PageUp), Code(KeyCode::Left), Char('h')],
        "←/PgUp",
        "previous question",
        Action::Page(-1),
        Some((2, "previous")),
    ),
    b(
        Notes,
        &[Char('j'), Code(KeyCode::Down)],
        "j/↓",
        "scroll the notes",
        Action::Move(1),
        Some((1, "scroll")),
    ),
    b(
        Notes,
        &[Char('k'), Code(KeyCode::Up)],
        "k/↑",
        "scroll up",
        Action::Move(-1),
        None,
    ),
    // Everywhere
    b(
        Global,
        &[Char('?'), Code(KeyCode::F(1))],
        "?",
        "help",
        Action::Help,
        Some((1, "help")),
    ),
    b(
        Global,
        &[Char('q'), Code(KeyCode::Esc)],
        "q/Esc",
        "back",
        Action::Back,
        Some((1, "back")),
    ),
    b(Global, &[Ctrl('c')], "Ctrl-C", "quit", Action::Quit, None),
];

/// The action bound to `ev` in the first of `contexts` that binds it (then Global).
pub fn lookup(contexts: &[Context], ev: &KeyEvent) -> Option<Action> {
    contexts
        .iter()
        .chain(std::iter::once(&Global))
        .find_map(|ctx| {
            BINDINGS
                .iter()
                .find(|b| b.ctx == *ctx && b.keys.iter().any(|k| k.matches(ev)))
        })
        .map(|b| b.action)
}

/// Bindings of these contexts (then Global), in table order.
pub fn for_contexts(contexts: &[Context]) -> impl Iterator<Item = &'static Binding> + '_ {
    contexts
        .iter()
        .chain(std::iter::once(&Global))
        .flat_map(|ctx| BINDINGS.iter().filter(move |b| b.ctx == *ctx))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    #[test]
    fn screen_binding_wins_over_global() {
        assert_eq!(
            lookup(&[Lesson], &key(KeyCode::Char('j'))),
            Some(Action::Move(1))
        );
        assert_eq!(
            lookup(&[Lesson], &key(KeyCode::Char('q'))),
            Some(Action::Back)
        );
    }

    #[test]
    fn ctrl_c_quits_everywhere() {
        let ev = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
        for ctx in [Home, Lesson, Ring, Help] {
            assert_eq!(lookup(&[ctx], &ev), Some(Action::Quit));
        }
    }

    #[test]
    fn no_key_is_bound_twice_in_one_context() {
        for a in BINDINGS {
            for b in BINDINGS {
                if std::ptr::eq(a, b) || a.ctx != b.ctx {
                    continue;
                }
                for k in a.keys {
                    assert!(!b.keys.contains(k), "{:?} bound twice in {:?}", k, a.ctx);
                }
            }
        }
    }
}
