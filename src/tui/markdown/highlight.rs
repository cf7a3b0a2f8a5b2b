//! Syntax highlighting of code blocks (syntect), loaded lazily and memoized.

use super::*;

pub(super) struct Highlighting {
    pub(super) syntaxes: SyntaxSet,
    pub(super) theme: SyntaxTheme,
}

/// Load the syntax-highlighting assets now (tens of milliseconds, once per process), e.g. on a
/// background thread at start-up, so the first lesson with code renders without that delay.
pub fn preload_highlighting() {
    highlighting();
}

pub(super) static ASSETS: OnceLock<Highlighting> = OnceLock::new();
pub(super) static DEFER: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Draw code plain until syntect's assets are loaded (about 70 ms), instead of waiting for
/// them: the interactive app loads them on a thread and lays lessons out again when ready.
pub fn defer_highlighting() {
    DEFER.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// Whether code blocks can be highlighted now.
pub fn highlighting_ready() -> bool {
    ASSETS.get().is_some()
}

/// Syntect's bundled syntaxes and theme, loaded once.
pub(super) fn highlighting() -> &'static Highlighting {
    ASSETS.get_or_init(|| {
        let mut themes = ThemeSet::load_defaults().themes;
        let theme = themes
            .remove("base16-eighties.dark")
            .or_else(|| themes.into_values().next())
            .unwrap_or_default();
        Highlighting {
            syntaxes: SyntaxSet::load_defaults_newlines(),
            theme,
        }
    })
}

/// The syntax for a fence's language, or `None` for plain text.
pub(super) fn syntax_for<'s>(syntaxes: &'s SyntaxSet, lang: &str) -> Option<&'s SyntaxReference> {
    let lang = lang.to_ascii_lowercase();
    let token = match lang.as_str() {
        "" | "text" | "txt" | "plain" | "plaintext" | "output" => return None,
        "cu" | "cuda" | "c++" | "cuh" => "cpp",
        "sh" | "shell" | "console" | "zsh" | "shell-session" => "bash",
        "py" | "python3" => "python",
        "rs" => "rust",
        other => other,
    };
    syntaxes.find_syntax_by_token(token)
}

/// A highlighted code block: per line, styled pieces without the line ending.
pub(super) type Highlighted = Vec<Vec<(Style, String)>>;

/// Highlight a code block, or `None` for plain text. Syntect (fancy-regex) needs about a
/// millisecond for a few lines, so results are memoized: a lesson re-laid out for another
/// width, or opened again, costs nothing here.
pub(super) fn highlight(lang: &str, body: &str) -> Option<Arc<Highlighted>> {
    static CACHE: OnceLock<Mutex<HashMap<String, Arc<Highlighted>>>> = OnceLock::new();
    const CACHE_ENTRIES: usize = 512;
    if DEFER.load(std::sync::atomic::Ordering::Relaxed) && !highlighting_ready() {
        return None;
    }
    let assets = highlighting();
    let syntax = syntax_for(&assets.syntaxes, lang)?;
    let cache = CACHE.get_or_init(Mutex::default);
    let key = format!("{lang}\n{body}");
    if let Some(hit) = cache.lock().ok().and_then(|c| c.get(&key).cloned()) {
        return Some(hit);
    }
    let mut highlighter = HighlightLines::new(syntax, &assets.theme);
    let mut lines = Vec::new();
    for raw in LinesWithEndings::from(body) {
        let line = code_text(raw);
        let pieces = highlighter.highlight_line(&line, &assets.syntaxes).ok()?;
        let pieces = pieces
            .into_iter()
            .map(|(style, text)| {
                (
                    syntect_style(style),
                    text.trim_end_matches(['\n', '\r']).to_string(),
                )
            })
            .filter(|(_, text)| !text.is_empty())
            .collect();
        lines.push(pieces);
    }
    let lines = Arc::new(lines);
    if let Ok(mut cache) = cache.lock() {
        if cache.len() >= CACHE_ENTRIES {
            cache.clear();
        }
        cache.insert(key, Arc::clone(&lines));
    }
    Some(lines)
}

pub(super) fn syntect_style(style: syntect::highlighting::Style) -> Style {
    let fg = style.foreground;
    let mut out = Style::new().fg(Color::Rgb(fg.r, fg.g, fg.b));
    if style.font_style.contains(FontStyle::BOLD) {
        out = out.add_modifier(Modifier::BOLD);
    }
    if style.font_style.contains(FontStyle::ITALIC) {
        out = out.add_modifier(Modifier::ITALIC);
    }
    out
}

/// Tabs to four spaces, other control characters (but the newline) removed.
pub(super) fn code_text(line: &str) -> Cow<'_, str> {
    if !line.chars().any(|c| c.is_control() && c != '\n') {
        return Cow::Borrowed(line);
    }
    let mut out = String::with_capacity(line.len() + 8);
    for c in line.chars() {
        match c {
            '\t' => out.push_str("    "),
            '\n' => out.push('\n'),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}
