//! Width-aware Markdown → ratatui lines for lessons.
//!
//! [`render`] walks pulldown-cmark events (tables, strikethrough, task lists and math enabled,
//! after [`math::rewrite_delimiters`]) and lays every block out for a given width:
//!
//! - headings: `#` bold with a full-width `═` rule, `##` with a `─` underline, deeper ones bold;
//!   each is recorded as a [`HeadingRef`] for section jumps;
//! - paragraphs: greedy word wrap (unicode-width aware, over-long words broken), emphasis,
//!   strong, strikethrough and inline code as styled spans;
//! - lists: `•`/`◦`/`▪` bullets and `1.` numbers with a hanging indent, nested; task markers;
//! - block quotes: a `│ ` gutter in `theme.quote`;
//! - tables: box drawing, columns shrunk (widest first) and cells wrapped to fit;
//! - code blocks: syntect highlighting (no colour in `theme.mono`) behind a `  │ ` gutter,
//!   long lines wrapped with a `  ┆ ` gutter;
//! - ```` ```quiz ````, ```` ```ring ````, ```` ```lab ```` blocks: a bordered placeholder box and
//!   an [`EmbedRef`], or the parse error in `theme.error`;
//! - ```` ```table ```` blocks: a box-drawn table computed from the schedule module, captioned;
//! - links: external ones followed by a dim ` (url)`, internal ones marked `→`;
//! - math through [`math::inline`] / [`math::display`] (display centred), or raw TeX;
//! - rules, images as `[image: alt]`; HTML is dropped (`<br>` becomes a line break).
//!
//! Blocks are separated by one blank line, and no line is ever wider than the width.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use pulldown_cmark::{Alignment, CodeBlockKind, Event, HeadingLevel, Parser, Tag, TagEnd};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use syntect::easy::HighlightLines;
use syntect::highlighting::{FontStyle, Theme as SyntaxTheme, ThemeSet};
use syntect::parsing::{SyntaxReference, SyntaxSet};
use syntect::util::LinesWithEndings;
use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

use crate::course::math;
use crate::course::{Block, BlockKind};
use crate::tui::theme::Theme;

pub struct RenderOptions<'a> {
    pub width: u16,
    pub theme: &'a Theme,
    /// Show math as raw TeX instead of Unicode.
    pub raw_tex: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeadingRef {
    /// Index into `Rendered::lines`.
    pub line: usize,
    pub level: u8,
    pub title: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct EmbedRef {
    /// First line of the block in `Rendered::lines`, and how many lines it occupies.
    pub line: usize,
    pub height: usize,
    pub block: Block,
}

#[derive(Debug, Default, Clone)]
pub struct Rendered {
    pub lines: Vec<Line<'static>>,
    pub headings: Vec<HeadingRef>,
    pub embeds: Vec<EmbedRef>,
    /// Links within the course (marked `→`), in reading order: they can be followed.
    pub links: Vec<LinkRef>,
}

/// A link to another lesson or a heading (`11-glossary.md#rank`, `#ring`), where it is drawn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkRef {
    /// Index into `Rendered::lines` of the line with its `→` marker.
    pub line: usize,
    pub dest: String,
}

/// The anchor of a heading as Markdown hosts write it: lowercase, spaces to hyphens,
/// punctuation dropped ("World size" → `world-size`, "Bus bandwidth (busbw)" →
/// `bus-bandwidth-busbw`).
pub fn slug(title: &str) -> String {
    title
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' | '-' => Some('-'),
            c if c.is_alphanumeric() || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// Render a lesson body for `opts.width` columns.
pub fn render(markdown: &str, opts: &RenderOptions) -> Rendered {
    let src = math::rewrite_delimiters(markdown);
    let mut renderer = Renderer::new(opts);
    for event in Parser::new_ext(&src, math::markdown_options()) {
        renderer.event(event);
    }
    renderer.finish()
}

/// `s` cut to `max` display columns, with "…" where it was cut.
pub fn ellipsize(s: &str, max: usize) -> String {
    if str_width(s) <= max {
        return s.to_string();
    }
    let mut out = String::new();
    let mut used = 0;
    for c in s.chars() {
        let w = unicode_width::UnicodeWidthChar::width(c).unwrap_or(0);
        if used + w + 1 > max {
            break;
        }
        out.push(c);
        used += w;
    }
    let mut out = out.trim_end().to_string();
    if max > 0 {
        out.push('…');
    }
    out
}

/// A short text with `inline code` drawn as code and its backticks dropped (scenario stories,
/// hints, quiz prompts shown outside the lesson renderer).
pub fn inline_code(text: &str, base: Style, code: Style) -> Vec<Span<'static>> {
    let mut out = Vec::new();
    let mut parts = text.split('`').peekable();
    let mut in_code = false;
    while let Some(p) = parts.next() {
        // An unmatched trailing backtick stays as typed.
        let last = parts.peek().is_none();
        if in_code && last {
            out.push(Span::styled(format!("`{p}"), base));
        } else if !p.is_empty() {
            out.push(Span::styled(
                p.to_string(),
                if in_code { code } else { base },
            ));
        }
        in_code = !in_code;
    }
    out
}

/// Plain text of rendered lines (tests, search, snapshots).
pub fn plain_lines(rendered: &Rendered) -> Vec<String> {
    rendered
        .lines
        .iter()
        .map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect())
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Text measurement and wrapping
// ---------------------------------------------------------------------------------------------

fn str_width(s: &str) -> usize {
    UnicodeWidthStr::width(s)
}

/// Byte length and width of the longest prefix of `s` that fits in `max` columns. A character
/// is never split from the zero-width marks (or ZWJ-joined characters) that follow it. With
/// `force`, at least one such cluster is taken even if it does not fit.
fn fit_prefix(s: &str, max: usize, force: bool) -> (usize, usize) {
    let (mut end, mut used) = (0, 0);
    let mut chars = s.char_indices().peekable();
    while let Some((start, c)) = chars.next() {
        let mut stop = start + c.len_utf8();
        let mut joined = c == '\u{200d}';
        while let Some(&(at, next)) = chars.peek() {
            if !(joined || next.width() == Some(0)) {
                break;
            }
            joined = next == '\u{200d}';
            stop = at + next.len_utf8();
            chars.next();
        }
        let w = str_width(s.get(start..stop).unwrap_or(""));
        if used + w > max && !(force && end == 0) {
            break;
        }
        end = stop;
        used += w;
    }
    (end, used)
}

/// Tabs become spaces and other control characters disappear.
fn sanitize(text: &str) -> Cow<'_, str> {
    if !text.chars().any(char::is_control) {
        return Cow::Borrowed(text);
    }
    Cow::Owned(
        text.chars()
            .filter_map(|c| match c {
                '\t' | '\n' | '\r' => Some(' '),
                c if c.is_control() => None,
                c => Some(c),
            })
            .collect(),
    )
}

/// Styled inline content waiting to be laid out.
#[derive(Debug, Clone)]
enum Frag {
    Text(String, Style),
    Break,
}

fn plain_text(frags: &[Frag]) -> String {
    let mut text = String::new();
    for frag in frags {
        match frag {
            Frag::Text(t, _) => text.push_str(t),
            Frag::Break => text.push(' '),
        }
    }
    text.replace('\u{a0}', " ").trim().to_string()
}

/// One line under construction; adjacent pieces of the same style share a span.
#[derive(Default)]
struct LineBuf {
    spans: Vec<Span<'static>>,
    width: usize,
}

impl LineBuf {
    fn push(&mut self, text: &str, style: Style, width: usize) {
        match self.spans.last_mut() {
            Some(last) if last.style == style => last.content.to_mut().push_str(text),
            _ => self.spans.push(Span::styled(text.to_string(), style)),
        }
        self.width += width;
    }
}

/// Greedy word wrapper over styled fragments. Words may span several styles; only `' '`
/// breaks (math uses no-break spaces to stay in one piece).
struct Wrapper<'t> {
    width: usize,
    lines: Vec<Vec<Span<'static>>>,
    line: LineBuf,
    word: Vec<(&'t str, Style)>,
    word_width: usize,
    space: Option<Style>,
}

/// Wrap fragments to at most `width` columns per line.
fn wrap(frags: &[Frag], width: usize) -> Vec<Vec<Span<'static>>> {
    let mut w = Wrapper {
        width: width.max(1),
        lines: Vec::new(),
        line: LineBuf::default(),
        word: Vec::new(),
        word_width: 0,
        space: None,
    };
    for frag in frags {
        match frag {
            Frag::Text(text, style) => w.text(text, *style),
            Frag::Break => w.hard_break(),
        }
    }
    w.finish()
}

/// Below this many free columns a too-long word starts on a fresh line instead.
const MIN_FILL: usize = 8;

impl<'t> Wrapper<'t> {
    fn text(&mut self, text: &'t str, style: Style) {
        let mut rest = text;
        while let Some(i) = rest.find(' ') {
            self.word_piece(rest.get(..i).unwrap_or(""), style);
            self.flush_word();
            self.space = Some(style);
            rest = rest.get(i + 1..).unwrap_or("");
        }
        self.word_piece(rest, style);
    }

    fn word_piece(&mut self, piece: &'t str, style: Style) {
        if !piece.is_empty() {
            self.word.push((piece, style));
            self.word_width += str_width(piece);
        }
    }

    fn flush_word(&mut self) {
        if self.word.is_empty() {
            return;
        }
        let mut space = self.space.take().filter(|_| self.line.width > 0);
        let needed = self.word_width + usize::from(space.is_some());
        let fits = self.line.width + needed <= self.width;
        // A word that must be broken anyway may start on this line if enough room is left.
        let fill_here = self.word_width > self.width
            && self.width.saturating_sub(self.line.width + 1) >= MIN_FILL;
        if self.line.width > 0 && !fits && !fill_here {
            self.new_line();
            space = None;
        }
        if let Some(style) = space {
            self.line.push(" ", style, 1);
        }
        let word = std::mem::take(&mut self.word);
        for (piece, style) in word {
            self.push_breaking(piece, style);
        }
        self.word_width = 0;
    }

    /// Push text, breaking it across lines wherever it reaches the width.
    fn push_breaking(&mut self, text: &str, style: Style) {
        let mut rest = text;
        while !rest.is_empty() {
            let free = self.width.saturating_sub(self.line.width);
            let (len, w) = fit_prefix(rest, free, self.line.width == 0);
            if len == 0 {
                self.new_line();
                continue;
            }
            self.line.push(rest.get(..len).unwrap_or(""), style, w);
            rest = rest.get(len..).unwrap_or("");
        }
    }

    fn new_line(&mut self) {
        let line = std::mem::take(&mut self.line);
        self.lines.push(line.spans);
    }

    fn hard_break(&mut self) {
        self.flush_word();
        self.new_line();
        self.space = None;
    }

    fn finish(mut self) -> Vec<Vec<Span<'static>>> {
        self.flush_word();
        if !self.line.spans.is_empty() {
            self.new_line();
        }
        self.lines
    }
}

/// Cut spans to at most `max` columns.
fn truncate_spans(spans: Vec<Span<'static>>, max: usize) -> Vec<Span<'static>> {
    let mut out = Vec::with_capacity(spans.len());
    let mut used = 0;
    for span in spans {
        let w = span.width();
        if used + w <= max {
            used += w;
            out.push(span);
            continue;
        }
        let (len, _) = fit_prefix(&span.content, max - used, false);
        if len > 0 {
            out.push(Span::styled(
                span.content.get(..len).unwrap_or("").to_string(),
                span.style,
            ));
        }
        break;
    }
    out
}

/// The last line of defence: whatever happened above, a line never exceeds `width`.
fn fit_line(line: Line<'static>, width: usize) -> Line<'static> {
    if line.width() <= width {
        return line;
    }
    let mut spans = truncate_spans(line.spans, width);
    // Width is not always additive (emoji sequences); trim until it really fits.
    while Line::from(spans.clone()).width() > width {
        let Some(last) = spans.last_mut() else { break };
        last.content.to_mut().pop();
        if last.content.is_empty() {
            spans.pop();
        }
    }
    Line::from(spans)
}

fn pad_to(spans: &mut Vec<Span<'static>>, used: usize, width: usize) {
    if width > used {
        spans.push(Span::raw(" ".repeat(width - used)));
    }
}

fn spans_width(spans: &[Span<'_>]) -> usize {
    spans.iter().map(Span::width).sum()
}

// ---------------------------------------------------------------------------------------------
// Syntax highlighting
// ---------------------------------------------------------------------------------------------

struct Highlighting {
    syntaxes: SyntaxSet,
    theme: SyntaxTheme,
}

/// Load the syntax-highlighting assets now (tens of milliseconds, once per process), e.g. on a
/// background thread at start-up, so the first lesson with code renders without that delay.
pub fn preload_highlighting() {
    highlighting();
}

static ASSETS: OnceLock<Highlighting> = OnceLock::new();
static DEFER: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

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
fn highlighting() -> &'static Highlighting {
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
fn syntax_for<'s>(syntaxes: &'s SyntaxSet, lang: &str) -> Option<&'s SyntaxReference> {
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
type Highlighted = Vec<Vec<(Style, String)>>;

/// Highlight a code block, or `None` for plain text. Syntect (fancy-regex) needs about a
/// millisecond for a few lines, so results are memoized: a lesson re-laid out for another
/// width, or opened again, costs nothing here.
fn highlight(lang: &str, body: &str) -> Option<Arc<Highlighted>> {
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

fn syntect_style(style: syntect::highlighting::Style) -> Style {
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
fn code_text(line: &str) -> Cow<'_, str> {
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

// ---------------------------------------------------------------------------------------------
// The renderer
// ---------------------------------------------------------------------------------------------

/// Content columns kept free of gutters, however deep the nesting.
const MIN_CONTENT: usize = 12;
const BULLETS: [&str; 3] = ["•", "◦", "▪"];

enum Container {
    Quote,
    Item {
        marker: String,
        width: usize,
        used: bool,
    },
}

impl Container {
    fn width(&self) -> usize {
        match self {
            Self::Quote => 2,
            Self::Item { width, .. } => *width,
        }
    }
}

/// What marks a link within the course: an arrow glued to the link text.
pub const LINK_MARK: &str = "→\u{a0}";

struct Link {
    dest: String,
    /// Where the link text starts in the inline buffer.
    start: usize,
}

struct Table {
    aligns: Vec<Alignment>,
    rows: Vec<Vec<Vec<Frag>>>,
    current: Vec<Vec<Frag>>,
    in_head: bool,
}

struct Renderer<'o> {
    width: usize,
    theme: &'o Theme,
    raw_tex: bool,
    out: Rendered,
    containers: Vec<Container>,
    /// One entry per open list: the next number of an ordered list.
    lists: Vec<Option<u64>>,
    styles: Vec<Style>,
    inline: Vec<Frag>,
    links: Vec<Link>,
    /// Destinations of the internal links drawn so far, in order.
    internal: Vec<String>,
    /// Fence info and body of the code block being read.
    code: Option<(String, String)>,
    /// Alt text of the image being read.
    image: Option<String>,
    table: Option<Table>,
    in_heading: bool,
    pending_blank: bool,
}

impl<'o> Renderer<'o> {
    fn new(opts: &RenderOptions<'o>) -> Self {
        Self {
            width: usize::from(opts.width).max(1),
            theme: opts.theme,
            raw_tex: opts.raw_tex,
            out: Rendered::default(),
            containers: Vec::new(),
            lists: Vec::new(),
            styles: Vec::new(),
            inline: Vec::new(),
            links: Vec::new(),
            internal: Vec::new(),
            code: None,
            image: None,
            table: None,
            in_heading: false,
            pending_blank: false,
        }
    }

    fn finish(mut self) -> Rendered {
        self.flush_inline();
        // Each internal link drew one `→` marker: pair them up, in order, with where they
        // landed after wrapping.
        let mut dests = std::mem::take(&mut self.internal).into_iter();
        for (i, line) in self.out.lines.iter().enumerate() {
            for span in &line.spans {
                for _ in span.content.matches(LINK_MARK) {
                    if let Some(dest) = dests.next() {
                        self.out.links.push(LinkRef { line: i, dest });
                    }
                }
            }
        }
        self.out
    }

    fn event(&mut self, event: Event<'_>) {
        match event {
            Event::Start(tag) => self.start(tag),
            Event::End(tag) => self.end(tag),
            Event::Text(text) => self.text(&text),
            Event::Code(code) => {
                let style = self.style().patch(self.theme.code);
                self.push_frag(&code, style);
            }
            Event::InlineMath(tex) => self.inline_math(&tex),
            Event::DisplayMath(tex) => self.display_math(&tex),
            Event::Html(html) | Event::InlineHtml(html) => {
                if is_line_break_tag(&html) {
                    self.inline.push(Frag::Break);
                }
            }
            Event::SoftBreak => self.text(" "),
            Event::HardBreak => self.inline.push(Frag::Break),
            Event::Rule => {
                self.start_block();
                let rule = "─".repeat(self.avail());
                self.emit_line(vec![Span::styled(rule, self.theme.border)]);
                self.pending_blank = true;
            }
            Event::FootnoteReference(name) => self.text(&format!("[{name}]")),
            Event::TaskListMarker(done) => {
                let (mark, style) = if done {
                    ("[x] ", self.theme.ok)
                } else {
                    ("[ ] ", self.theme.dim)
                };
                self.push_frag(mark, style);
            }
        }
    }

    fn start(&mut self, tag: Tag<'_>) {
        match tag {
            Tag::Paragraph => self.start_block(),
            Tag::Heading { level, .. } => {
                self.start_block();
                self.in_heading = true;
                let style = match level {
                    HeadingLevel::H1 => self.theme.h1,
                    HeadingLevel::H2 => self.theme.h2,
                    _ => self.theme.h3,
                };
                self.styles.push(style);
            }
            Tag::BlockQuote(_) => {
                self.start_block();
                self.containers.push(Container::Quote);
            }
            Tag::CodeBlock(kind) => {
                self.start_block();
                let info = match kind {
                    CodeBlockKind::Fenced(info) => info.to_string(),
                    CodeBlockKind::Indented => String::new(),
                };
                self.code = Some((info, String::new()));
            }
            Tag::List(first) => {
                self.start_block();
                self.lists.push(first);
            }
            Tag::Item => self.start_item(),
            Tag::Table(aligns) => {
                self.start_block();
                self.table = Some(Table {
                    aligns,
                    rows: Vec::new(),
                    current: Vec::new(),
                    in_head: false,
                });
            }
            Tag::TableHead => {
                if let Some(table) = &mut self.table {
                    table.in_head = true;
                }
            }
            Tag::TableCell => {
                self.inline.clear();
                let head = self.table.as_ref().is_some_and(|t| t.in_head);
                self.styles.push(if head {
                    self.theme.strong
                } else {
                    Style::new()
                });
            }
            Tag::Emphasis => self.styles.push(self.theme.emphasis),
            Tag::Strong => self.styles.push(self.theme.strong),
            Tag::Strikethrough => self
                .styles
                .push(Style::new().add_modifier(Modifier::CROSSED_OUT)),
            Tag::Superscript | Tag::Subscript => self.styles.push(Style::new()),
            Tag::Link { dest_url, .. } => self.start_link(&dest_url),
            Tag::Image { .. } => self.image = Some(String::new()),
            _ => {}
        }
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Paragraph => {
                self.flush_inline();
                self.pending_blank = true;
            }
            TagEnd::Heading(level) => self.end_heading(level),
            TagEnd::BlockQuote(_) => {
                self.flush_inline();
                if matches!(self.containers.last(), Some(Container::Quote)) {
                    self.containers.pop();
                }
                self.pending_blank = true;
            }
            TagEnd::CodeBlock => self.end_code_block(),
            TagEnd::List(_) => {
                self.flush_inline();
                self.lists.pop();
                // Nested lists end inside an item; only a whole list is a block of its own.
                self.pending_blank = self.lists.is_empty();
            }
            TagEnd::Item => self.end_item(),
            TagEnd::TableCell => {
                self.styles.pop();
                let cell = std::mem::take(&mut self.inline);
                if let Some(table) = &mut self.table {
                    table.current.push(cell);
                }
            }
            TagEnd::TableHead | TagEnd::TableRow => {
                if let Some(table) = &mut self.table {
                    let row = std::mem::take(&mut table.current);
                    table.rows.push(row);
                    table.in_head = false;
                }
            }
            TagEnd::Table => self.end_table(),
            TagEnd::Emphasis
            | TagEnd::Strong
            | TagEnd::Strikethrough
            | TagEnd::Superscript
            | TagEnd::Subscript => {
                self.styles.pop();
            }
            TagEnd::Link => self.end_link(),
            TagEnd::Image => {
                if let Some(alt) = self.image.take() {
                    let text = format!("[image: {}]", alt.trim());
                    self.push_frag(&text, self.theme.dim);
                }
            }
            _ => {}
        }
    }

    // -- inline content ------------------------------------------------------------------------

    fn style(&self) -> Style {
        let in_quote = self
            .containers
            .iter()
            .any(|c| matches!(c, Container::Quote));
        let base = if in_quote {
            self.theme.quote
        } else {
            self.theme.base
        };
        self.styles.iter().fold(base, |acc, s| acc.patch(*s))
    }

    fn text(&mut self, text: &str) {
        if let Some((_, body)) = &mut self.code {
            body.push_str(text);
            return;
        }
        let style = self.style();
        self.push_frag(text, style);
    }

    fn push_frag(&mut self, text: &str, style: Style) {
        let text = sanitize(text);
        if let Some(alt) = &mut self.image {
            alt.push_str(&text);
        } else if !text.is_empty() {
            self.inline.push(Frag::Text(text.into_owned(), style));
        }
    }

    fn inline_math(&mut self, tex: &str) {
        let style = self.style().patch(self.theme.math);
        let text = if self.raw_tex {
            format!("${tex}$")
        } else {
            math::inline(tex).replace(' ', "\u{a0}")
        };
        self.push_frag(&text, style);
    }

    fn display_math(&mut self, tex: &str) {
        let style = self.style().patch(self.theme.math);
        if self.raw_tex || self.image.is_some() {
            self.raw_display_math(tex, style);
            return;
        }
        if self.in_heading || self.table.is_some() {
            // No room to stack here: keep it in the line.
            self.push_frag(&math::inline(tex).replace(' ', "\u{a0}"), style);
            return;
        }
        let lines = math::display(tex);
        let avail = self.avail();
        let widest = lines.iter().map(|l| str_width(l)).max().unwrap_or(0);
        self.flush_inline();
        if widest > avail {
            // Too wide to stack: fall back to the wrapped one-line form.
            self.push_frag(&math::inline(tex), style);
            self.flush_inline();
            return;
        }
        for line in lines {
            let indent = " ".repeat((avail - str_width(&line)) / 2);
            self.emit_line(vec![Span::raw(indent), Span::styled(line, style)]);
        }
    }

    fn raw_display_math(&mut self, tex: &str, style: Style) {
        if !self.inline.is_empty() {
            self.inline.push(Frag::Break);
        }
        let raw = format!("$${tex}$$");
        for (i, line) in raw.split('\n').enumerate() {
            if i > 0 {
                self.inline.push(Frag::Break);
            }
            self.push_frag(line, style);
        }
        self.inline.push(Frag::Break);
    }

    fn start_link(&mut self, dest: &str) {
        if !is_external(dest) {
            let style = self
                .style()
                .patch(self.theme.link)
                .remove_modifier(Modifier::UNDERLINED);
            self.push_frag(LINK_MARK, style);
            self.internal.push(dest.to_string());
        }
        self.styles.push(self.theme.link);
        self.links.push(Link {
            dest: dest.to_string(),
            start: self.inline.len(),
        });
    }

    fn end_link(&mut self) {
        self.styles.pop();
        let Some(link) = self.links.pop() else { return };
        if !is_external(&link.dest) {
            return;
        }
        let text = plain_text(self.inline.get(link.start..).unwrap_or_default());
        let bare = link.dest.strip_prefix("mailto:").unwrap_or(&link.dest);
        if text != link.dest && text != bare {
            let url = format!(" ({})", link.dest);
            self.push_frag(&url, self.theme.dim);
        }
    }

    // -- blocks and lines ----------------------------------------------------------------------

    /// Columns taken by gutters and list indents (capped so content keeps `MIN_CONTENT`).
    fn prefix_width(&self) -> usize {
        let total: usize = self.containers.iter().map(Container::width).sum();
        total.min(self.width.saturating_sub(MIN_CONTENT.min(self.width)))
    }

    /// Columns available to content on the current line.
    fn avail(&self) -> usize {
        self.width.saturating_sub(self.prefix_width()).max(1)
    }

    /// Gutters and list markers for the next line; a list marker shows on its item's first
    /// content line only, and blank lines keep just the quote bars.
    fn prefix(&mut self, blank: bool) -> Vec<Span<'static>> {
        let width = self.prefix_width();
        let (quote, marker) = (self.theme.quote, self.theme.accent);
        let mut spans = Vec::with_capacity(self.containers.len());
        for container in &mut self.containers {
            match container {
                Container::Quote => spans.push(Span::styled("│ ", quote)),
                Container::Item {
                    marker: text, used, ..
                } if !*used && !blank => {
                    *used = true;
                    spans.push(Span::styled(text.clone(), marker));
                }
                Container::Item { width, .. } => spans.push(Span::raw(" ".repeat(*width))),
            }
        }
        let mut spans = truncate_spans(spans, width);
        if blank {
            while spans.last().is_some_and(|s| s.content.trim().is_empty()) {
                spans.pop();
            }
            if let Some(last) = spans.last_mut() {
                *last = Span::styled(last.content.trim_end().to_string(), last.style);
            }
        }
        spans
    }

    fn push_line(&mut self, line: Line<'static>) {
        self.out.lines.push(fit_line(line, self.width));
    }

    fn emit_line(&mut self, content: Vec<Span<'static>>) {
        let mut spans = self.prefix(false);
        spans.extend(content);
        self.push_line(Line::from(spans));
    }

    fn blank_line(&mut self) {
        let spans = self.prefix(true);
        self.push_line(Line::from(spans));
    }

    /// Before a block: finish pending inline text, then separate with a blank line.
    fn start_block(&mut self) {
        self.flush_inline();
        if self.pending_blank && !self.out.lines.is_empty() {
            self.blank_line();
        }
        self.pending_blank = false;
    }

    fn flush_inline(&mut self) {
        if self.inline.is_empty() {
            return;
        }
        let frags = std::mem::take(&mut self.inline);
        for line in wrap(&frags, self.avail()) {
            self.emit_line(line);
        }
    }

    fn end_heading(&mut self, level: HeadingLevel) {
        self.styles.pop();
        self.in_heading = false;
        let frags = std::mem::take(&mut self.inline);
        let line = self.out.lines.len();
        let avail = self.avail();
        let lines = wrap(&frags, avail);
        let title_width = lines.iter().map(|l| spans_width(l)).max().unwrap_or(0);
        for l in lines {
            self.emit_line(l);
        }
        let rule = match level {
            HeadingLevel::H1 => Some(("═", avail, self.theme.h1)),
            HeadingLevel::H2 => Some(("─", title_width, self.theme.h2)),
            _ => None,
        };
        if let Some((ch, n, style)) = rule.filter(|r| r.1 > 0) {
            let style = style.remove_modifier(Modifier::UNDERLINED);
            self.emit_line(vec![Span::styled(ch.repeat(n), style)]);
        }
        self.out.headings.push(HeadingRef {
            line,
            level: heading_number(level),
            title: plain_text(&frags),
        });
        self.pending_blank = true;
    }

    fn start_item(&mut self) {
        let depth = self.lists.len().saturating_sub(1);
        let marker = match self.lists.last_mut() {
            Some(Some(n)) => {
                let m = format!("{n}. ");
                *n = n.saturating_add(1);
                m
            }
            _ => format!("{} ", BULLETS[depth % BULLETS.len()]),
        };
        let width = str_width(&marker);
        self.containers.push(Container::Item {
            marker,
            width,
            used: false,
        });
    }

    fn end_item(&mut self) {
        self.flush_inline();
        if let Some(Container::Item { used, .. }) = self.containers.last() {
            if !*used {
                self.emit_line(Vec::new()); // an empty item still shows its marker
            }
            self.containers.pop();
        }
    }

    // -- code blocks and embeds ----------------------------------------------------------------

    fn end_code_block(&mut self) {
        let Some((info, body)) = self.code.take() else {
            return;
        };
        match BlockKind::from_info(&info) {
            Some(kind) => self.embed(kind, &body),
            None => self.code_block(&info, &body),
        }
        self.pending_blank = true;
    }

    fn code_block(&mut self, info: &str, body: &str) {
        let lang = info.split_whitespace().next().unwrap_or("");
        let width = self.avail().saturating_sub(4).max(1);
        if body.is_empty() {
            self.code_rows(&[], width);
            return;
        }
        let highlighted = if self.theme.mono {
            None
        } else {
            highlight(lang, body)
        };
        match highlighted {
            Some(lines) => {
                for line in lines.iter() {
                    let pieces: Vec<(Style, &str)> = line
                        .iter()
                        .map(|(style, text)| (*style, text.as_str()))
                        .collect();
                    self.code_rows(&pieces, width);
                }
            }
            None => {
                for raw in LinesWithEndings::from(body) {
                    let line = code_text(raw);
                    self.code_rows(&[(self.theme.code_block, &line)], width);
                }
            }
        }
    }

    /// One source line of code, wrapped at `width` behind a gutter.
    fn code_rows(&mut self, pieces: &[(Style, &str)], width: usize) {
        let mut rows = Wrapper {
            width,
            lines: Vec::new(),
            line: LineBuf::default(),
            word: Vec::new(),
            word_width: 0,
            space: None,
        };
        for (style, text) in pieces {
            rows.push_breaking(text.trim_end_matches(['\n', '\r']), *style);
        }
        let mut lines = rows.finish();
        if lines.is_empty() {
            lines.push(Vec::new());
        }
        for (i, row) in lines.into_iter().enumerate() {
            let gutter = if i == 0 { "  │ " } else { "  ┆ " };
            let mut spans = vec![Span::styled(gutter, self.theme.border)];
            spans.extend(row);
            self.emit_line(spans);
        }
    }

    fn embed(&mut self, kind: BlockKind, body: &str) {
        let first = self.out.lines.len();
        match Block::parse(kind, body) {
            Ok(Block::Table(t)) => match crate::course::table::rows(&t) {
                Ok((head, rows)) => self.computed_table(head, rows),
                Err(e) => self.boxed(kind.name(), &e, self.theme.error),
            },
            Ok(block) => {
                self.boxed(kind.name(), &block.placeholder(), self.theme.placeholder);
                let height = self.out.lines.len() - first;
                self.out.embeds.push(EmbedRef {
                    line: first,
                    height,
                    block,
                });
            }
            Err(e) => {
                let text = format!("line {}, col {}: {}", e.line, e.col, e.message);
                self.boxed(kind.name(), &text, self.theme.error);
            }
        }
    }

    /// A ```` ```table ```` block: drawn like any Markdown table (numbers right-aligned), with a
    /// dim caption saying where the numbers come from.
    fn computed_table(&mut self, head: Vec<String>, rows: Vec<Vec<String>>) {
        let cell = |text: String, style: Style| vec![Frag::Text(text, style)];
        let mut grid = vec![
            head.into_iter()
                .map(|h| cell(h, self.theme.strong))
                .collect(),
        ];
        grid.extend(
            rows.into_iter()
                .map(|r| r.into_iter().map(|c| cell(c, Style::new())).collect()),
        );
        let columns = grid.first().map_or(0, Vec::len);
        self.table = Some(Table {
            aligns: vec![Alignment::Right; columns],
            rows: grid,
            current: Vec::new(),
            in_head: false,
        });
        self.end_table();
        let caption = [Frag::Text(
            "computed from the schedule module".to_string(),
            self.theme.dim,
        )];
        for line in wrap(&caption, self.avail()) {
            self.emit_line(line);
        }
    }

    /// A full-width box titled `title` holding wrapped `text`.
    fn boxed(&mut self, title: &str, text: &str, style: Style) {
        let width = self.avail().max(6);
        let inner = width - 4;
        let border = self.theme.border;
        let title = format!(" {title} ");
        let top_fill = width.saturating_sub(2 + str_width(&title));
        self.emit_line(vec![
            Span::styled("┌", border),
            Span::styled(title, border.add_modifier(Modifier::BOLD)),
            Span::styled(format!("{}┐", "─".repeat(top_fill)), border),
        ]);
        // `inline code` in a box's text is drawn as code, as in the lesson around it.
        let frags: Vec<Frag> = inline_code(&sanitize(text), style, self.theme.code)
            .into_iter()
            .map(|s| Frag::Text(s.content.into_owned(), s.style))
            .collect();
        for row in wrap(&frags, inner) {
            let used = spans_width(&row);
            let mut spans = vec![Span::styled("│ ", border)];
            spans.extend(row);
            pad_to(&mut spans, used, inner);
            spans.push(Span::styled(" │", border));
            self.emit_line(spans);
        }
        let bottom = format!("└{}┘", "─".repeat(width - 2));
        self.emit_line(vec![Span::styled(bottom, border)]);
    }

    // -- tables --------------------------------------------------------------------------------

    fn end_table(&mut self) {
        let Some(table) = self.table.take() else {
            return;
        };
        self.pending_blank = true;
        let columns = table
            .rows
            .iter()
            .map(Vec::len)
            .max()
            .unwrap_or(0)
            .max(table.aligns.len());
        if columns == 0 {
            return;
        }
        let avail = self.avail();
        let overhead = 3 * columns + 1;
        if avail < overhead + 3 * columns {
            self.table_as_text(&table);
            return;
        }
        let natural: Vec<usize> = (0..columns)
            .map(|c| {
                let cells = table.rows.iter().filter_map(|r| r.get(c));
                cells
                    .map(|cell| natural_width(cell))
                    .max()
                    .unwrap_or(0)
                    .max(1)
            })
            .collect();
        let widths = fit_columns(&natural, avail - overhead);
        self.table_border('┌', '┬', '┐', &widths);
        for (r, row) in table.rows.iter().enumerate() {
            self.table_row(row, &widths, &table.aligns);
            if r == 0 && table.rows.len() > 1 {
                self.table_border('├', '┼', '┤', &widths);
            }
        }
        self.table_border('└', '┴', '┘', &widths);
    }

    fn table_border(&mut self, left: char, mid: char, right: char, widths: &[usize]) {
        let mut s = String::new();
        s.push(left);
        for (i, w) in widths.iter().enumerate() {
            if i > 0 {
                s.push(mid);
            }
            s.extend(std::iter::repeat_n('─', w + 2));
        }
        s.push(right);
        self.emit_line(vec![Span::styled(s, self.theme.border)]);
    }

    fn table_row(&mut self, row: &[Vec<Frag>], widths: &[usize], aligns: &[Alignment]) {
        let empty = Vec::new();
        let cells: Vec<Vec<Vec<Span<'static>>>> = widths
            .iter()
            .enumerate()
            .map(|(c, w)| wrap(row.get(c).unwrap_or(&empty), *w))
            .collect();
        let height = cells.iter().map(Vec::len).max().unwrap_or(0).max(1);
        let border = self.theme.border;
        for i in 0..height {
            let mut spans = vec![Span::styled("│ ", border)];
            for (c, w) in widths.iter().enumerate() {
                if c > 0 {
                    spans.push(Span::styled(" │ ", border));
                }
                let content = cells
                    .get(c)
                    .and_then(|l| l.get(i))
                    .cloned()
                    .unwrap_or_default();
                let align = aligns.get(c).copied().unwrap_or(Alignment::None);
                aligned(&mut spans, content, *w, align);
            }
            spans.push(Span::styled(" │", border));
            self.emit_line(spans);
        }
    }

    /// Too narrow for a grid: one wrapped line per row, cells separated by ` │ `.
    fn table_as_text(&mut self, table: &Table) {
        for row in &table.rows {
            let mut frags = Vec::new();
            for (c, cell) in row.iter().enumerate() {
                if c > 0 {
                    frags.push(Frag::Text(" │ ".to_string(), self.theme.border));
                }
                frags.extend(cell.iter().cloned());
            }
            for line in wrap(&frags, self.avail()) {
                self.emit_line(line);
            }
        }
    }
}

/// Width of a cell laid out on one line.
fn natural_width(cell: &[Frag]) -> usize {
    wrap(cell, usize::MAX / 4)
        .iter()
        .map(|l| spans_width(l))
        .max()
        .unwrap_or(0)
}

/// Column widths summing to at most `target`: the widest columns shrink first.
fn fit_columns(natural: &[usize], target: usize) -> Vec<usize> {
    if natural.iter().sum::<usize>() <= target {
        return natural.to_vec();
    }
    let total_at = |cap: usize| natural.iter().map(|&n| n.min(cap)).sum::<usize>();
    let (mut lo, mut hi) = (1, natural.iter().copied().max().unwrap_or(1));
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if total_at(mid) <= target {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    let mut widths: Vec<usize> = natural.iter().map(|&n| n.min(lo)).collect();
    let mut left = target.saturating_sub(widths.iter().sum());
    for (w, &n) in widths.iter_mut().zip(natural) {
        if left > 0 && *w < n {
            *w += 1;
            left -= 1;
        }
    }
    widths
}

fn aligned(
    spans: &mut Vec<Span<'static>>,
    content: Vec<Span<'static>>,
    width: usize,
    align: Alignment,
) {
    let free = width.saturating_sub(spans_width(&content));
    let left = match align {
        Alignment::Right => free,
        Alignment::Center => free / 2,
        Alignment::Left | Alignment::None => 0,
    };
    if left > 0 {
        spans.push(Span::raw(" ".repeat(left)));
    }
    spans.extend(content);
    if free > left {
        spans.push(Span::raw(" ".repeat(free - left)));
    }
}

fn heading_number(level: HeadingLevel) -> u8 {
    match level {
        HeadingLevel::H1 => 1,
        HeadingLevel::H2 => 2,
        HeadingLevel::H3 => 3,
        HeadingLevel::H4 => 4,
        HeadingLevel::H5 => 5,
        HeadingLevel::H6 => 6,
    }
}

fn is_external(dest: &str) -> bool {
    ["http://", "https://", "mailto:", "ftp://"]
        .iter()
        .any(|p| dest.starts_with(p))
}

fn is_line_break_tag(html: &str) -> bool {
    let tag: String = html
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect::<String>()
        .to_lowercase();
    matches!(tag.as_str(), "<br>" | "<br/>")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::course::block::RingBlock;

    fn render_with(md: &str, width: u16, theme: &Theme) -> Rendered {
        render(
            md,
            &RenderOptions {
                width,
                theme,
                raw_tex: false,
            },
        )
    }

    fn text_of(md: &str, width: u16) -> Vec<String> {
        plain_lines(&render_with(md, width, &Theme::color()))
    }

    fn assert_fits(r: &Rendered, width: usize) {
        for (i, line) in r.lines.iter().enumerate() {
            assert!(
                line.width() <= width,
                "line {i} is {} wide: {line:?}",
                line.width()
            );
        }
    }

    #[test]
    fn heading_gives_a_heading_ref() {
        let r = render_with(
            "intro\n\n# Ring all-reduce\n\n## Cost *model*\n\ntext",
            40,
            &Theme::color(),
        );
        let lines = plain_lines(&r);
        assert_eq!(
            r.headings[0],
            HeadingRef {
                line: 2,
                level: 1,
                title: "Ring all-reduce".into()
            }
        );
        assert_eq!(lines[2], "Ring all-reduce");
        assert_eq!(lines[3], "═".repeat(40));
        assert_eq!(r.headings[1].level, 2);
        assert_eq!(r.headings[1].title, "Cost model");
        assert_eq!(lines[r.headings[1].line + 1], "─".repeat(10));
    }

    #[test]
    fn paragraphs_wrap_at_the_width() {
        let md = "The ring all-reduce sends every chunk around the ring twice: once to reduce and \
                  once to gather, so each rank moves 2(N-1)/N of the data.\nSoft break here.";
        let r = render_with(md, 24, &Theme::color());
        assert_fits(&r, 24);
        let lines = plain_lines(&r);
        assert!(lines.len() > 4);
        assert_eq!(lines[0], "The ring all-reduce");
        assert!(lines.iter().any(|l| l.contains("break here.")));
        let words: Vec<String> = lines
            .iter()
            .flat_map(|l| l.split(' '))
            .map(String::from)
            .collect();
        assert!(words.contains(&"all-reduce".to_string()));
    }

    #[test]
    fn long_words_and_wide_characters_are_broken() {
        let md = format!(
            "{} 全角文字の長い行がここにあります全角文字の長い行 😀😀😀😀😀😀😀😀😀😀😀",
            "x".repeat(70)
        );
        let r = render_with(&md, 20, &Theme::color());
        assert_fits(&r, 20);
        assert_eq!(plain_lines(&r)[0], "x".repeat(20));
    }

    #[test]
    fn styles_for_inline_markup() {
        let r = render_with("*em* **strong** ~~gone~~ `code`", 40, &Theme::color());
        let spans = &r.lines[0].spans;
        let style_of = |t: &str| {
            spans
                .iter()
                .find(|s| s.content.contains(t))
                .map(|s| s.style)
        };
        assert!(style_of("em").is_some_and(|s| s.add_modifier.contains(Modifier::ITALIC)));
        assert!(style_of("strong").is_some_and(|s| s.add_modifier.contains(Modifier::BOLD)));
        assert!(style_of("gone").is_some_and(|s| s.add_modifier.contains(Modifier::CROSSED_OUT)));
        assert_eq!(style_of("code").map(|s| s.fg), Some(Theme::color().code.fg));
    }

    #[test]
    fn lists_have_markers_and_hanging_indent() {
        let md = "- first item that is long enough to wrap around\n  - nested\n- second\n\n3. three\n4. four";
        let lines = text_of(md, 24);
        assert_eq!(lines[0], "• first item that is");
        assert_eq!(lines[1], "  long enough to wrap");
        assert_eq!(lines[3], "  ◦ nested");
        assert_eq!(lines[4], "• second");
        assert_eq!(lines[5], "");
        assert_eq!(lines[6], "3. three");
        assert_eq!(lines[7], "4. four");
    }

    #[test]
    fn quotes_have_a_gutter() {
        let lines = text_of("> quoted text\n>\n> more", 30);
        assert_eq!(lines, vec!["│ quoted text", "│", "│ more"]);
    }

    #[test]
    fn table_uses_box_drawing_and_fits() {
        let md = "| Collective | Bytes sent per rank | Steps |\n|:--|--:|:-:|\n\
                  | all-reduce | 2(N-1)/N · S | 2(N-1) |\n| all-gather | (N-1)/N · S | N-1 |";
        let wide = text_of(md, 80);
        assert!(
            wide[0].starts_with('┌') && wide[0].ends_with('┐'),
            "{wide:?}"
        );
        assert!(wide[2].starts_with('├'), "{wide:?}");
        assert!(wide.last().is_some_and(|l| l.starts_with('└')));
        assert!(wide[1].contains("Collective"));
        assert_eq!(wide.len(), 6);
        let widths: Vec<usize> = wide.iter().map(|l| str_width(l)).collect();
        assert!(widths.iter().all(|&w| w == widths[0]));

        let r = render_with(md, 28, &Theme::color());
        assert_fits(&r, 28);
        let narrow = plain_lines(&r);
        assert!(narrow.len() > 6, "cells wrap: {narrow:?}");
        assert!(narrow.iter().all(|l| str_width(l) == str_width(&narrow[0])));
        // header bold
        assert!(
            r.lines[1].spans.iter().any(
                |s| s.content.contains("Coll") && s.style.add_modifier.contains(Modifier::BOLD)
            )
        );
    }

    #[test]
    fn code_is_highlighted_in_colour_only() {
        let md = "```rust\nfn main() { let x = 1; }\n```";
        let colour = render_with(md, 40, &Theme::color());
        let has_rgb = colour.lines[0]
            .spans
            .iter()
            .any(|s| matches!(s.style.fg, Some(Color::Rgb(..))));
        assert!(has_rgb, "{:?}", colour.lines[0]);
        assert!(plain_lines(&colour)[0].starts_with("  │ fn main()"));

        let mono = render_with(md, 40, &Theme::mono());
        for span in mono.lines.iter().flat_map(|l| l.spans.iter()) {
            assert_eq!((span.style.fg, span.style.bg), (None, None), "{span:?}");
        }
    }

    #[test]
    fn long_code_lines_wrap_within_width() {
        let md = format!("```python\nprint('{}')\n```", "a".repeat(60));
        let r = render_with(&md, 30, &Theme::color());
        assert_fits(&r, 30);
        let lines = plain_lines(&r);
        assert!(lines.len() >= 3);
        assert!(lines[1].starts_with("  ┆ "));
    }

    #[test]
    fn math_inline_and_display() {
        let lines = text_of(r"Each rank sends $\frac{N-1}{N}$ of it and \(x^2\).", 60);
        assert_eq!(lines[0], "Each rank sends (N−1)/N of it and x².");

        let lines = text_of("$$2\\cdot\\frac{N-1}{N}\\cdot M$$", 21);
        // centred within 21 columns; the trailing padding belongs to the math span
        let expected =
            ["         N−1", "      2·─────·M", "          N"].map(|l| format!("{l:<15}"));
        assert_eq!(lines, expected);

        let raw = render(
            r"see $\alpha$ and $$\beta$$",
            &RenderOptions {
                width: 40,
                theme: &Theme::color(),
                raw_tex: true,
            },
        );
        let raw = plain_lines(&raw);
        assert_eq!(raw, vec![r"see $\alpha$ and", r"$$\beta$$"]);
    }

    #[test]
    fn display_math_in_headings_and_tables_stays_inline() {
        let lines = text_of("# Cost $$\\frac{a}{b}$$\n\n| x |\n|---|\n| $$y^2$$ |", 30);
        assert_eq!(lines[0], "Cost a/b");
        assert_eq!(lines[3], "┌────┐");
        assert_eq!(lines[6], "│ y² │");
    }

    #[test]
    fn ring_block_becomes_an_embed() {
        let md = "text\n\n```ring\nranks = 8\n```\n\nafter";
        let r = render_with(md, 50, &Theme::color());
        assert_eq!(r.embeds.len(), 1);
        let embed = &r.embeds[0];
        assert_eq!(embed.line, 2);
        let lines = plain_lines(&r);
        assert!(lines[2].starts_with("┌ ring ─"), "{lines:?}");
        assert!(lines[embed.line + embed.height - 1].starts_with('└'));
        assert_eq!(lines[embed.line + embed.height], "");
        let Block::Ring(RingBlock { ranks, .. }) = embed.block else {
            panic!("not a ring")
        };
        assert_eq!(ranks, 8);
        assert_fits(&r, 50);
    }

    #[test]
    fn malformed_ring_block_shows_the_error() {
        let r = render_with("```ring\nranks = \n```", 50, &Theme::color());
        assert!(r.embeds.is_empty());
        let error = Theme::color().error;
        let spans: Vec<&Span> = r.lines.iter().flat_map(|l| l.spans.iter()).collect();
        assert!(
            spans
                .iter()
                .any(|s| s.style == error && s.content.contains("malformed"))
        );
        assert!(plain_lines(&r)[0].starts_with("┌ ring"));
    }

    #[test]
    fn inline_code_and_ellipsis_for_short_texts() {
        let (b, c) = (
            Style::default(),
            Style::default().add_modifier(Modifier::BOLD),
        );
        let spans = inline_code("set `NCCL_DEBUG=INFO` then `x", b, c);
        let parts: Vec<(&str, bool)> = spans
            .iter()
            .map(|s| (s.content.as_ref(), s.style == c))
            .collect();
        assert_eq!(
            parts,
            [
                ("set ", false),
                ("NCCL_DEBUG=INFO", true),
                (" then ", false),
                ("`x", false)
            ]
        );
        assert_eq!(ellipsize("Tensor parallelism", 10), "Tensor pa…");
        assert_eq!(ellipsize("short", 10), "short");
        assert_eq!(str_width(&ellipsize("全角文字です", 5)), 5);
    }

    #[test]
    fn links_images_rules_and_html() {
        let md = "[NCCL](https://github.com/NVIDIA/nccl) and [next](ring.md) <https://x.io>\n\n\
                  ![a ring](ring.png)\n\n---\n\n<!-- hidden -->\n\nend";
        let lines = text_of(md, 80);
        assert_eq!(
            lines[0],
            "NCCL (https://github.com/NVIDIA/nccl) and →\u{a0}next https://x.io"
        );
        assert_eq!(lines[2], "[image: a ring]");
        assert_eq!(lines[4], "─".repeat(80));
        assert_eq!(lines[6], "end");
    }

    #[test]
    fn nesting_never_overflows() {
        let md = format!("{}deep text that goes on and on and on", "> ".repeat(40));
        let r = render_with(&md, 20, &Theme::color());
        assert_fits(&r, 20);
        let md = (0..30)
            .map(|i| format!("{}- item {i}\n", "  ".repeat(i)))
            .collect::<String>();
        let r = render_with(&md, 20, &Theme::color());
        assert_fits(&r, 20);
    }
}
