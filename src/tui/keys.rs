//! Keys are data: one table feeds input handling, the key-hint bar and the `?` overlay.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::app::Action;

/// Where a binding applies: the focused screen's contexts first, then `Global`. Screens keep
/// their keys in their own files (`pub const KEYS`, rows under `Own("Title")`); this file keeps
/// only what applies everywhere and the `?` overlay's own keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Context {
    Global,
    /// The `?` overlay.
    Help,
    /// A screen's own keys, with the title the `?` overlay gives them.
    Own(&'static str),
}

impl Context {
    pub fn title(self) -> &'static str {
        match self {
            Self::Global => "Everywhere",
            Self::Help => "Help",
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
    /// letter (`q/Esc`, `g/Home`). The reverse is looked up among `rows` (what has focus).
    pub fn short_label(&self, rows: &[&'static Binding]) -> String {
        let Some(first) = self.keys.first() else {
            return String::new();
        };
        if let Some(p) = self.partner(rows) {
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
    fn partner(&self, rows: &[&'static Binding]) -> Option<&'static Binding> {
        let reverse = self.action.reversed()?;
        let mut undo = rows
            .iter()
            .copied()
            .filter(|b| b.ctx == self.ctx && b.action == reverse);
        let first = undo.next()?;
        let hinted = first.hint.is_some() || undo.any(|b| b.hint.is_some());
        (!hinted).then_some(first)
    }
}

use Key::{Char, Code, Ctrl};

/// A binding (a screen's table: `bind(OWN, keys, …)`).
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

const HELP: Context = Context::Help;
const GLOBAL: Context = Context::Global;

/// What applies on every screen, and the `?` overlay's keys.
#[rustfmt::skip]
pub const BINDINGS: &[Binding] = &[
    bind(HELP, DOWN, "scroll", Action::Move(1), None),
    bind(HELP, UP, "scroll", Action::Move(-1), None),
    bind(GLOBAL, &[Char('?'), Code(KeyCode::F(1))], "help", Action::Help, Some((1, "help"))),
    bind(GLOBAL, &[Char('q'), Code(KeyCode::Esc)], "back", Action::Back, Some((1, "back"))),
    bind(GLOBAL, &[Ctrl('c')], "quit", Action::Quit, None),
    // Ctrl-L where a screen has `m` for itself (the ring view's message size).
    bind(GLOBAL, MESSAGES, "last messages, whole", Action::Messages, None),
];

/// The keys that show the last messages.
pub const MESSAGES: &[Key] = &[Char('m'), Ctrl('l')];

/// The key that shows the last messages on the screen that has focus: the first of
/// [`MESSAGES`] that its own table leaves free.
pub fn messages_key(rows: &[&'static Binding]) -> Key {
    let free = |k: &&Key| {
        !rows
            .iter()
            .any(|b| b.ctx != Context::Global && b.keys.contains(k))
    };
    MESSAGES
        .iter()
        .find(free)
        .or(MESSAGES.last())
        .copied()
        .unwrap_or(Char('m'))
}

/// The rows of `tables` (what has focus: a screen's table, the course map's openers) that apply
/// in `contexts`, then this file's rows for them and `Global`: context by context, in table order.
pub fn active<'a>(
    tables: &'a [&'static [Binding]],
    contexts: &'a [Context],
) -> impl Iterator<Item = &'static Binding> + 'a {
    contexts
        .iter()
        .chain(std::iter::once(&Context::Global))
        .flat_map(move |ctx| {
            tables
                .iter()
                .copied()
                .chain(std::iter::once(BINDINGS))
                .flat_map(move |t| t.iter().filter(move |b| b.ctx == *ctx))
        })
}

/// The action bound to `ev` by the first of the [`active`] rows that binds it.
pub fn lookup(
    tables: &[&'static [Binding]],
    contexts: &[Context],
    ev: &KeyEvent,
) -> Option<Action> {
    active(tables, contexts)
        .find(|b| b.keys.iter().any(|k| k.matches(ev)))
        .map(|b| b.action)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tui::screens::{ALL_KEYS, lesson, ring, tpcalc};

    fn key(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    /// Every row: this file's and every screen's table.
    fn every_row() -> impl Iterator<Item = &'static Binding> {
        ALL_KEYS.iter().copied().chain([BINDINGS]).flatten()
    }

    #[test]
    fn screen_binding_wins_over_global() {
        let lesson = [lesson::OWN];
        assert_eq!(
            lookup(&[lesson::KEYS], &lesson, &key(KeyCode::Char('j'))),
            Some(Action::Move(1))
        );
        assert_eq!(
            lookup(&[lesson::KEYS], &lesson, &key(KeyCode::Char('q'))),
            Some(Action::Back)
        );
    }

    #[test]
    fn ctrl_c_quits_everywhere() {
        let ev = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
        assert_eq!(lookup(&[], &[Context::Help], &ev), Some(Action::Quit));
        for table in ALL_KEYS {
            for b in *table {
                assert_eq!(lookup(&[table], &[b.ctx], &ev), Some(Action::Quit));
            }
        }
    }

    #[test]
    fn hint_labels_are_generated_from_the_keys_they_name() {
        for table in ALL_KEYS.iter().copied().chain([BINDINGS]) {
            let rows: Vec<&'static Binding> = table.iter().collect();
            for b in table {
                let label = b.short_label(&rows);
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
        }
        let rows = |t: &'static [Binding]| t.iter().collect::<Vec<_>>();
        let down = tpcalc::KEYS
            .iter()
            .find(|b| b.action == Action::Move(1))
            .expect("binding");
        assert_eq!(
            down.short_label(&rows(tpcalc::KEYS)),
            "j/k",
            "paired with its unhinted reverse"
        );
        let step = ring::KEYS
            .iter()
            .find(|b| b.action == ring::Verb::Step.by(1))
            .expect("binding");
        assert_eq!(
            step.short_label(&rows(ring::KEYS)),
            "→",
            "the reverse has its own hint"
        );
    }

    #[test]
    fn no_key_is_bound_twice_in_one_context() {
        for a in every_row() {
            for b in every_row() {
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
