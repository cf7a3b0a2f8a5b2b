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
    /// A screen's own keys ([`crate::tui::screens::View::keys`], defined in its file), with the
    /// title the `?` overlay gives them.
    Own(&'static str),
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
            Self::Own(title) => title,
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

    /// How the key is written: `j`, `↓`, `Space`, `PgDn`, `Ctrl-D`.
    pub fn name(self) -> String {
        match self {
            Key::Char(' ') => "Space".into(),
            Key::Char(c) => c.to_string(),
            Key::Ctrl(c) => format!("Ctrl-{}", c.to_ascii_uppercase()),
            Key::Code(code) => match code {
                KeyCode::Up => "↑".into(),
                KeyCode::Down => "↓".into(),
                KeyCode::Left => "←".into(),
                KeyCode::Right => "→".into(),
                KeyCode::PageUp => "PgUp".into(),
                KeyCode::PageDown => "PgDn".into(),
                KeyCode::BackTab => "S-Tab".into(),
                KeyCode::Backspace => "Bksp".into(),
                KeyCode::F(n) => format!("F{n}"),
                other => other.to_string(),
            },
        }
    }

    fn is_char(self) -> bool {
        matches!(self, Key::Char(c) if c != ' ')
    }

    /// Arrows, Esc, Home, End, Tab: named keys worth showing after a letter (`j/↓`, `q/Esc`).
    fn is_navigation(self) -> bool {
        matches!(
            self,
            Key::Code(
                KeyCode::Up
                    | KeyCode::Down
                    | KeyCode::Left
                    | KeyCode::Right
                    | KeyCode::Esc
                    | KeyCode::Home
                    | KeyCode::End
                    | KeyCode::Tab
            )
        )
    }
}

// Key groups: the same keys do the same thing on every screen, written once.
pub const DOWN: &[Key] = &[Char('j'), Code(KeyCode::Down)];
pub const UP: &[Key] = &[Char('k'), Code(KeyCode::Up)];
pub const PAGE_DOWN: &[Key] = &[Code(KeyCode::PageDown), Char(' '), Ctrl('d')];
pub const PAGE_UP: &[Key] = &[Code(KeyCode::PageUp), Char('b'), Ctrl('u')];
pub const TOP: &[Key] = &[Char('g'), Code(KeyCode::Home)];
pub const BOTTOM: &[Key] = &[Char('G'), Code(KeyCode::End)];
pub const RELOAD: &[Key] = &[Char('R'), Ctrl('r')];
/// The focused field's next and previous value.
pub const NEXT_VALUE: &[Key] = &[Code(KeyCode::Right), Char('l'), Char('+'), Char('=')];
pub const PREV_VALUE: &[Key] = &[Code(KeyCode::Left), Char('h'), Char('-')];
/// What a presentation clicker sends (and the keys people press in front of a class).
pub const CLICKER_NEXT: &[Key] = &[
    Code(KeyCode::PageDown),
    Code(KeyCode::Right),
    Char(' '),
    Code(KeyCode::Down),
    Char('j'),
    Char('l'),
    Char('n'),
];
pub const CLICKER_BACK: &[Key] = &[
    Code(KeyCode::PageUp),
    Code(KeyCode::Left),
    Code(KeyCode::Backspace),
    Code(KeyCode::Up),
    Char('k'),
    Char('h'),
    Char('p'),
];

pub struct Binding {
    pub ctx: Context,
    pub keys: &'static [Key],
    pub desc: &'static str,
    pub action: Action,
    /// In the always-visible hint bar: (priority, short text). Lower priorities come first
    /// and keep their place when the bar is narrow; what does not fit folds into `?` ("more: ?").
    /// None: only in the `?` overlay, which shows everything.
    pub hint: Option<(u8, &'static str)>,
}

impl Binding {
    /// Every key of the binding, as the `?` overlay lists them: `j/↓`.
    pub fn label(&self) -> String {
        self.keys
            .iter()
            .map(|k| k.name())
            .collect::<Vec<_>>()
            .join("/")
    }

    /// The hint bar's label, generated from the keys so it cannot drift from them: the first
    /// key and the first key of the reverse binding when the bar does not show that one
    /// (`j/k`, `+/-`, `PgDn/PgUp`); else the first key, with a named second one after a
    /// letter (`q/Esc`, `g/Home`).
    pub fn short_label(&self) -> String {
        self.short_label_among(BINDINGS)
    }

    /// [`Binding::short_label`] with the reverse looked up in `table` (a screen's own keys).
    pub fn short_label_among(&self, table: &'static [Binding]) -> String {
        let Some(first) = self.keys.first() else {
            return String::new();
        };
        if let Some(p) = self.partner(table) {
            return match p.keys.first() {
                Some(k) => format!("{}/{}", first.name(), k.name()),
                None => first.name(),
            };
        }
        match self.keys.get(1) {
            Some(second) if first.is_char() && second.is_navigation() => {
                format!("{}/{}", first.name(), second.name())
            }
            _ => first.name(),
        }
    }

    /// The binding of the same screen that undoes this one (Move(-1) for Move(1)) when the
    /// hint bar does not show the reverse on its own.
    fn partner(&self, table: &'static [Binding]) -> Option<&'static Binding> {
        let reverse = self.action.reversed()?;
        let mut undo = table
            .iter()
            .filter(|b| b.ctx == self.ctx && b.action == reverse);
        let first = undo.next()?;
        let hinted = first.hint.is_some() || undo.any(|b| b.hint.is_some());
        (!hinted).then_some(first)
    }
}

use Context::*;
use Key::{Char, Code, Ctrl};

/// A binding (for a screen's own table: `bind(Context::Own("Title"), keys, …)`).
pub const fn bind(
    ctx: Context,
    keys: &'static [Key],
    desc: &'static str,
    action: Action,
    hint: Option<(u8, &'static str)>,
) -> Binding {
    Binding {
        ctx,
        keys,
        desc,
        action,
        hint,
    }
}

use bind as b;

pub const BINDINGS: &[Binding] = &[
    // Course map
    b(
        Home,
        DOWN,
        "next lesson",
        Action::Move(1),
        Some((6, "next")),
    ),
    b(Home, UP, "previous lesson", Action::Move(-1), None),
    b(
        Home,
        &[Code(KeyCode::Enter), Char('l'), Code(KeyCode::Right)],
        "open lesson",
        Action::Open,
        Some((1, "open")),
    ),
    b(Home, TOP, "first lesson", Action::Top, None),
    b(Home, BOTTOM, "last lesson", Action::Bottom, None),
    b(Home, RELOAD, "reload lessons", Action::Reload, None),
    // Lesson reader
    b(
        Lesson,
        DOWN,
        "scroll down",
        Action::Move(1),
        Some((4, "scroll")),
    ),
    b(Lesson, UP, "scroll up", Action::Move(-1), None),
    b(
        Lesson,
        PAGE_DOWN,
        "page down",
        Action::Page(1),
        Some((1, "page")),
    ),
    b(Lesson, PAGE_UP, "page up", Action::Page(-1), None),
    b(Lesson, TOP, "top", Action::Top, None),
    b(Lesson, BOTTOM, "bottom", Action::Bottom, None),
    b(
        Lesson,
        &[Char(']'), Code(KeyCode::Tab)],
        "next section",
        Action::Section(1),
        Some((2, "section")),
    ),
    b(
        Lesson,
        &[Char('['), Code(KeyCode::BackTab)],
        "previous section",
        Action::Section(-1),
        None,
    ),
    b(
        Lesson,
        &[Char('/')],
        "search",
        Action::SearchStart,
        Some((2, "search")),
    ),
    b(
        Home,
        &[Char('/')],
        "search the course",
        Action::SearchStart,
        None,
    ),
    b(
        Lesson,
        &[Char('n')],
        "next match",
        Action::SearchStep(1),
        None,
    ),
    b(
        Lesson,
        &[Char('N')],
        "previous match",
        Action::SearchStep(-1),
        None,
    ),
    b(
        Lesson,
        &[Char('t')],
        "raw TeX on/off",
        Action::ToggleTex,
        None,
    ),
    b(
        Lesson,
        &[Code(KeyCode::Enter)],
        "follow link, or open ring/TP/planner",
        Action::Open,
        None,
    ),
    b(Lesson, RELOAD, "reload lessons", Action::Reload, None),
    b(
        Lesson,
        &[Code(KeyCode::Esc)],
        "clear the search (with none: back)",
        Action::ClearSearchOrBack,
        None,
    ),
    b(
        Lesson,
        &[Char('f')],
        "next link (→ glossary, lessons)",
        Action::NextLink(1),
        Some((3, "link")),
    ),
    b(
        Lesson,
        &[Char('F')],
        "select the previous link",
        Action::NextLink(-1),
        None,
    ),
    // Ring view
    b(
        Ring,
        &[Char(' ')],
        "play / pause",
        Action::PlayPause,
        Some((1, "play/pause")),
    ),
    b(
        Ring,
        &[Code(KeyCode::Right), Char('l')],
        "step forward",
        Action::Step(1),
        Some((1, "step")),
    ),
    b(
        Ring,
        &[Code(KeyCode::Left), Char('h')],
        "step back",
        Action::Step(-1),
        Some((1, "back")),
    ),
    b(
        Ring,
        &[Code(KeyCode::PageDown)],
        "step forward (presentation clicker)",
        Action::Step(1),
        None,
    ),
    b(
        Ring,
        &[Code(KeyCode::PageUp)],
        "step back (presentation clicker)",
        Action::Step(-1),
        None,
    ),
    b(Ring, TOP, "first step", Action::Top, None),
    b(Ring, BOTTOM, "last step", Action::Bottom, None),
    b(
        Ring,
        &[Char('+'), Char('=')],
        "more ranks",
        Action::Ranks(1),
        Some((2, "ranks")),
    ),
    b(
        Ring,
        &[Char('-'), Char('_')],
        "fewer ranks",
        Action::Ranks(-1),
        None,
    ),
    b(
        Ring,
        &[Char(']')],
        "faster",
        Action::Speed(1),
        Some((4, "faster")),
    ),
    b(
        Ring,
        &[Char('[')],
        "slower",
        Action::Speed(-1),
        Some((4, "slower")),
    ),
    b(
        Ring,
        &[Char('a')],
        "next algorithm",
        Action::CycleAlgo,
        Some((2, "algorithm")),
    ),
    b(
        Ring,
        &[Char('c')],
        "next collective",
        Action::CycleOp,
        Some((2, "collective")),
    ),
    b(
        Ring,
        &[Char('m')],
        "next message size",
        Action::CycleSize,
        Some((3, "size")),
    ),
    b(
        Ring,
        &[Char('M')],
        "type a message size (3 MiB, 1000000, 1.5 GB)",
        Action::SearchStart,
        None,
    ),
    b(
        Ring,
        &[Char('L')],
        "link for time estimates",
        Action::CycleLink,
        Some((3, "link")),
    ),
    // Quizzes, drills and stats (while typing an answer, keys go to the answer line:
    // Enter submits, Esc clears it or leaves)
    b(
        Home,
        &[Char('Q')],
        "quiz on this lesson",
        Action::OpenQuiz,
        Some((2, "quiz")),
    ),
    b(
        Home,
        &[Char('D')],
        "drill what is due",
        Action::OpenDrill,
        Some((2, "drill")),
    ),
    b(
        Home,
        &[Char('M')],
        "mock interview (six questions, follow-ups)",
        Action::OpenMock,
        Some((4, "mock interview")),
    ),
    b(
        Lesson,
        &[Char('Q')],
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
        "next",
        Action::Next,
        Some((1, "next")),
    ),
    b(
        Quiz,
        &[Char('o')],
        "open the lesson there",
        Action::GotoSource,
        Some((1, "open the lesson there")),
    ),
    b(Quiz, DOWN, "scroll", Action::Move(1), None),
    b(Quiz, UP, "scroll", Action::Move(-1), None),
    b(
        QuizDone,
        &[Code(KeyCode::Enter), Char(' ')],
        "done",
        Action::Next,
        Some((1, "done")),
    ),
    b(QuizDone, DOWN, "scroll", Action::Move(1), None),
    b(QuizDone, UP, "scroll", Action::Move(-1), None),
    b(
        QuizRate,
        &[Char('1')],
        "again",
        Action::Rate(1),
        Some((1, "again")),
    ),
    b(
        QuizRate,
        &[Char('2')],
        "hard",
        Action::Rate(2),
        Some((1, "hard")),
    ),
    b(
        QuizRate,
        &[Char('3')],
        "good",
        Action::Rate(3),
        Some((1, "good")),
    ),
    b(
        QuizRate,
        &[Char('4')],
        "easy",
        Action::Rate(4),
        Some((1, "easy")),
    ),
    b(
        QuizRate,
        &[Char('o')],
        "open the lesson there",
        Action::GotoSource,
        None,
    ),
    b(QuizRate, DOWN, "scroll", Action::Move(1), None),
    b(QuizRate, UP, "scroll", Action::Move(-1), None),
    b(
        Stats,
        &[Char('d'), Char('D')],
        "drill what is due",
        Action::OpenDrill,
        Some((1, "drill what is due")),
    ),
    b(Stats, DOWN, "scroll", Action::Move(1), None),
    b(Stats, UP, "scroll", Action::Move(-1), None),
    // TP calculator and launch planner
    b(
        TpCalc,
        DOWN,
        "choose field",
        Action::Move(1),
        Some((1, "choose field")),
    ),
    b(TpCalc, UP, "previous field", Action::Move(-1), None),
    b(
        TpCalc,
        NEXT_VALUE,
        "change value",
        Action::Adjust(1),
        Some((1, "change value")),
    ),
    b(
        TpCalc,
        PREV_VALUE,
        "previous value",
        Action::Adjust(-1),
        None,
    ),
    b(
        Planner,
        DOWN,
        "choose field",
        Action::Move(1),
        Some((1, "choose field")),
    ),
    b(Planner, UP, "previous field", Action::Move(-1), None),
    b(
        Planner,
        NEXT_VALUE,
        "change value",
        Action::Adjust(1),
        Some((1, "change value")),
    ),
    b(
        Planner,
        PREV_VALUE,
        "previous value",
        Action::Adjust(-1),
        None,
    ),
    b(
        Planner,
        PAGE_DOWN,
        "scroll plan",
        Action::Page(1),
        Some((1, "scroll plan")),
    ),
    b(Planner, PAGE_UP, "scroll up", Action::Page(-1), None),
    b(
        Planner,
        &[Code(KeyCode::Enter)],
        "type the head IP or interface (on its field)",
        Action::Open,
        None,
    ),
    b(
        Planner,
        &[Char('y')],
        "copy the launch commands, plain (clipboard and a file here)",
        Action::Copy,
        Some((2, "copy commands")),
    ),
    // Help overlay
    b(Help, DOWN, "scroll", Action::Move(1), None),
    b(Help, UP, "scroll", Action::Move(-1), None),
    // Live lab
    b(
        Lab,
        &[Code(KeyCode::Enter), Char('r')],
        "run on real processes",
        Action::Open,
        Some((1, "run on real processes")),
    ),
    b(
        Lab,
        DOWN,
        "choose a field",
        Action::Move(1),
        Some((1, "choose a field")),
    ),
    b(Lab, UP, "previous field", Action::Move(-1), None),
    b(
        Lab,
        NEXT_VALUE,
        "change the value",
        Action::Adjust(1),
        Some((1, "change the value")),
    ),
    b(Lab, PREV_VALUE, "previous value", Action::Adjust(-1), None),
    // Hang lab
    b(
        Hang,
        &[Code(KeyCode::Enter)],
        "stage / apply the fix",
        Action::Open,
        Some((1, "stage / apply the fix")),
    ),
    b(Hang, DOWN, "choose", Action::Move(1), Some((1, "choose"))),
    b(Hang, UP, "choose", Action::Move(-1), None),
    b(
        Hang,
        &[Char('h')],
        "next hint",
        Action::Hint,
        Some((1, "next hint")),
    ),
    b(
        Hang,
        &[Char('b')],
        "blind mode: hide what gives the cause away",
        Action::Blind,
        None,
    ),
    b(
        Hang,
        &[Char('n')],
        "ranks: TCP or real NCCL",
        Action::Adjust(1),
        None,
    ),
    b(
        Hang,
        &[Char('e')],
        "type a fix",
        Action::SearchStart,
        Some((1, "type a fix")),
    ),
    b(
        Hang,
        &[Char('v')],
        "emulated NCCL release",
        Action::NcclVersion,
        None,
    ),
    b(
        Hang,
        &[Code(KeyCode::PageDown), Ctrl('d')],
        "scroll the evidence",
        Action::Page(1),
        Some((2, "scroll the evidence")),
    ),
    b(
        Hang,
        &[Code(KeyCode::PageUp), Ctrl('u')],
        "scroll the evidence back",
        Action::Page(-1),
        None,
    ),
    // Presenter mode: what a presentation clicker sends (PgDn/PgUp, →/←, Space, b/.)
    b(
        Home,
        &[Char('P')],
        "present this lesson (slides, for a class)",
        Action::Present,
        Some((5, "present")),
    ),
    // Everywhere
    b(
        Global,
        &[Char('?'), Code(KeyCode::F(1))],
        "help",
        Action::Help,
        Some((1, "help")),
    ),
    b(
        Global,
        &[Char('q'), Code(KeyCode::Esc)],
        "back",
        Action::Back,
        Some((1, "back")),
    ),
    b(Global, &[Ctrl('c')], "quit", Action::Quit, None),
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

/// [`lookup`], a screen's own keys first.
pub fn lookup_with(own: &'static [Binding], contexts: &[Context], ev: &KeyEvent) -> Option<Action> {
    own.iter()
        .find(|b| b.keys.iter().any(|k| k.matches(ev)))
        .map(|b| b.action)
        .or_else(|| lookup(contexts, ev))
}

/// A screen's own keys, then the bindings of these contexts (then Global).
pub fn for_contexts_with<'a>(
    own: &'static [Binding],
    contexts: &'a [Context],
) -> impl Iterator<Item = &'static Binding> + 'a {
    own.iter().chain(for_contexts(contexts))
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
    fn hint_labels_are_generated_from_the_keys_they_name() {
        for b in BINDINGS {
            let label = b.short_label();
            let first = b.keys[0].name();
            assert!(label.starts_with(&first), "{label} for {}", b.desc);
            for part in b.label().split('/').filter(|p| !p.is_empty()) {
                assert!(
                    b.keys.iter().any(|k| k.name() == part),
                    "{part} is not a key of {}",
                    b.desc
                );
            }
        }
        let down = BINDINGS
            .iter()
            .find(|b| b.ctx == TpCalc && b.action == Action::Move(1))
            .expect("binding");
        assert_eq!(
            down.short_label(),
            "j/k",
            "paired with its unhinted reverse"
        );
        let step = BINDINGS
            .iter()
            .find(|b| b.ctx == Ring && b.action == Action::Step(1))
            .expect("binding");
        assert_eq!(step.short_label(), "→", "the reverse has its own hint");
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
