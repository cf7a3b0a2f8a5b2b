//! One theme constant for the whole app. `NO_COLOR` selects a monochrome theme that still
//! shows selection and emphasis through modifiers (reverse video, bold, underline) and symbols.

use ratatui::style::{Color, Modifier, Style};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Theme {
    /// True when colours are off (NO_COLOR); widgets must then carry meaning with symbols.
    pub mono: bool,
    pub base: Style,
    pub dim: Style,
    pub title: Style,
    pub h1: Style,
    pub h2: Style,
    pub h3: Style,
    pub emphasis: Style,
    pub strong: Style,
    pub code: Style,
    pub code_block: Style,
    pub link: Style,
    pub quote: Style,
    pub math: Style,
    pub border: Style,
    pub selection: Style,
    pub search_hit: Style,
    pub key: Style,
    pub error: Style,
    pub warn: Style,
    pub ok: Style,
    pub accent: Style,
    pub placeholder: Style,
}

impl Theme {
    pub const fn color() -> Self {
        let base = Style::new();
        Self {
            mono: false,
            base,
            dim: Style::new().fg(Color::DarkGray),
            title: Style::new().fg(Color::Cyan).add_modifier(Modifier::BOLD),
            h1: Style::new().fg(Color::Cyan).add_modifier(Modifier::BOLD),
            h2: Style::new()
                .fg(Color::LightBlue)
                .add_modifier(Modifier::BOLD),
            h3: Style::new().fg(Color::Blue).add_modifier(Modifier::BOLD),
            emphasis: Style::new().add_modifier(Modifier::ITALIC),
            strong: Style::new().add_modifier(Modifier::BOLD),
            code: Style::new().fg(Color::Yellow),
            code_block: Style::new().fg(Color::Gray),
            link: Style::new()
                .fg(Color::LightBlue)
                .add_modifier(Modifier::UNDERLINED),
            quote: Style::new().fg(Color::Gray).add_modifier(Modifier::ITALIC),
            math: Style::new().fg(Color::LightMagenta),
            border: Style::new().fg(Color::DarkGray),
            selection: Style::new()
                .fg(Color::Black)
                .bg(Color::Cyan)
                .add_modifier(Modifier::BOLD),
            search_hit: Style::new().fg(Color::Black).bg(Color::Yellow),
            key: Style::new().fg(Color::Cyan).add_modifier(Modifier::BOLD),
            error: Style::new().fg(Color::Red).add_modifier(Modifier::BOLD),
            warn: Style::new().fg(Color::Yellow),
            ok: Style::new().fg(Color::Green),
            accent: Style::new().fg(Color::Magenta),
            placeholder: Style::new()
                .fg(Color::DarkGray)
                .add_modifier(Modifier::ITALIC),
        }
    }

    pub const fn mono() -> Self {
        let plain = Style::new();
        let bold = Style::new().add_modifier(Modifier::BOLD);
        Self {
            mono: true,
            base: plain,
            dim: Style::new().add_modifier(Modifier::DIM),
            title: bold,
            h1: Style::new()
                .add_modifier(Modifier::BOLD)
                .add_modifier(Modifier::UNDERLINED),
            h2: bold,
            h3: bold,
            emphasis: Style::new().add_modifier(Modifier::ITALIC),
            strong: bold,
            code: plain,
            code_block: plain,
            link: Style::new().add_modifier(Modifier::UNDERLINED),
            quote: Style::new().add_modifier(Modifier::ITALIC),
            math: plain,
            border: plain,
            selection: Style::new()
                .add_modifier(Modifier::REVERSED)
                .add_modifier(Modifier::BOLD),
            search_hit: Style::new().add_modifier(Modifier::REVERSED),
            key: bold,
            error: bold,
            warn: bold,
            ok: plain,
            accent: bold,
            placeholder: Style::new().add_modifier(Modifier::ITALIC),
        }
    }

    /// For a projector, read from the back of a room: no dark grey (it vanishes), no dim text,
    /// bold headings and keys in saturated colours; `mono` keeps NO_COLOR's rules (meaning in
    /// modifiers and symbols) without the DIM modifier.
    pub const fn projector(mono: bool) -> Self {
        let bold = Style::new().add_modifier(Modifier::BOLD);
        if mono {
            let mut t = Self::mono();
            t.dim = Style::new();
            t.border = Style::new();
            t.placeholder = Style::new();
            t.quote = Style::new();
            t.base = bold;
            t.strong = bold.add_modifier(Modifier::UNDERLINED);
            return t;
        }
        let mut t = Self::color();
        t.base = Style::new().fg(Color::White);
        t.dim = Style::new().fg(Color::Gray);
        t.title = Style::new()
            .fg(Color::LightYellow)
            .add_modifier(Modifier::BOLD);
        t.h1 = t.title;
        t.h2 = Style::new()
            .fg(Color::LightCyan)
            .add_modifier(Modifier::BOLD);
        t.h3 = t.h2;
        t.strong = Style::new().fg(Color::White).add_modifier(Modifier::BOLD);
        t.code = Style::new()
            .fg(Color::LightYellow)
            .add_modifier(Modifier::BOLD);
        t.code_block = Style::new().fg(Color::White);
        t.math = Style::new()
            .fg(Color::LightMagenta)
            .add_modifier(Modifier::BOLD);
        t.border = Style::new().fg(Color::Gray);
        t.quote = Style::new().fg(Color::White).add_modifier(Modifier::ITALIC);
        t.key = Style::new()
            .fg(Color::LightCyan)
            .add_modifier(Modifier::BOLD);
        t.warn = Style::new()
            .fg(Color::LightYellow)
            .add_modifier(Modifier::BOLD);
        t.ok = Style::new()
            .fg(Color::LightGreen)
            .add_modifier(Modifier::BOLD);
        t.error = Style::new()
            .fg(Color::LightRed)
            .add_modifier(Modifier::BOLD);
        t.accent = Style::new()
            .fg(Color::LightMagenta)
            .add_modifier(Modifier::BOLD);
        t.placeholder = Style::new().fg(Color::Gray).add_modifier(Modifier::ITALIC);
        t
    }

    /// Honour NO_COLOR (any non-empty value, per no-color.org).
    pub fn from_env() -> Self {
        if no_color() {
            Self::mono()
        } else {
            Self::color()
        }
    }
}

/// NO_COLOR is set to a non-empty value (no-color.org).
pub fn no_color() -> bool {
    matches!(std::env::var_os("NO_COLOR"), Some(v) if !v.is_empty())
}
