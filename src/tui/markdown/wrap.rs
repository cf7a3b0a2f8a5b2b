//! Text measurement and wrapping: display widths, greedy word wrap over styled fragments,
//! and the last-resort cut that keeps every line within its width.

use super::*;

pub(super) fn str_width(s: &str) -> usize {
    UnicodeWidthStr::width(s)
}

/// Byte length and width of the longest prefix of `s` that fits in `max` columns. A character
/// is never split from the zero-width marks (or ZWJ-joined characters) that follow it. With
/// `force`, at least one such cluster is taken even if it does not fit.
pub(super) fn fit_prefix(s: &str, max: usize, force: bool) -> (usize, usize) {
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
pub(super) fn sanitize(text: &str) -> Cow<'_, str> {
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
pub(super) enum Frag {
    Text(String, Style),
    Break,
}

pub(super) fn plain_text(frags: &[Frag]) -> String {
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
pub(super) struct LineBuf {
    pub(super) spans: Vec<Span<'static>>,
    pub(super) width: usize,
}

impl LineBuf {
    pub(super) fn push(&mut self, text: &str, style: Style, width: usize) {
        match self.spans.last_mut() {
            Some(last) if last.style == style => last.content.to_mut().push_str(text),
            _ => self.spans.push(Span::styled(text.to_string(), style)),
        }
        self.width += width;
    }
}

/// Greedy word wrapper over styled fragments. Words may span several styles; only `' '`
/// breaks (math uses no-break spaces to stay in one piece).
pub(super) struct Wrapper<'t> {
    pub(super) width: usize,
    pub(super) lines: Vec<Vec<Span<'static>>>,
    pub(super) line: LineBuf,
    pub(super) word: Vec<(&'t str, Style)>,
    pub(super) word_width: usize,
    pub(super) space: Option<Style>,
}

/// Wrap fragments to at most `width` columns per line.
pub(super) fn wrap(frags: &[Frag], width: usize) -> Vec<Vec<Span<'static>>> {
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
pub(super) const MIN_FILL: usize = 8;

impl<'t> Wrapper<'t> {
    pub(super) fn text(&mut self, text: &'t str, style: Style) {
        let mut rest = text;
        while let Some(i) = rest.find(' ') {
            self.word_piece(rest.get(..i).unwrap_or(""), style);
            self.flush_word();
            self.space = Some(style);
            rest = rest.get(i + 1..).unwrap_or("");
        }
        self.word_piece(rest, style);
    }

    pub(super) fn word_piece(&mut self, piece: &'t str, style: Style) {
        if !piece.is_empty() {
            self.word.push((piece, style));
            self.word_width += str_width(piece);
        }
    }

    pub(super) fn flush_word(&mut self) {
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
    pub(super) fn push_breaking(&mut self, text: &str, style: Style) {
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

    /// Push a piece of a code line: like [`Self::push_breaking`], but a row ends after a
    /// space rather than inside a word where the piece has one ("# one GPU per process" moves
    /// "process" down whole), and a piece that starts a word moves down whole when it would
    /// be cut and fits a row of its own.
    pub(super) fn push_code(&mut self, text: &str, style: Style) {
        let mut rest = text;
        while !rest.is_empty() {
            let free = self.width.saturating_sub(self.line.width);
            let (mut len, mut w) = fit_prefix(rest, free, self.line.width == 0);
            if len == 0 {
                self.new_line();
                continue;
            }
            if len < rest.len() {
                let head = rest.get(..len).unwrap_or("");
                let cut_in_word = !head.ends_with(' ') && !rest[len..].starts_with(' ');
                if cut_in_word {
                    match head.rfind(' ') {
                        Some(p) if p > 0 => {
                            len = p + 1;
                            w = str_width(&rest[..len]);
                        }
                        _ if self.line.width > 0
                            && str_width(rest.split(' ').next().unwrap_or(rest)) <= self.width =>
                        {
                            self.new_line();
                            continue;
                        }
                        _ => {}
                    }
                }
            }
            self.line.push(rest.get(..len).unwrap_or(""), style, w);
            rest = rest.get(len..).unwrap_or("");
        }
    }

    pub(super) fn new_line(&mut self) {
        let line = std::mem::take(&mut self.line);
        self.lines.push(line.spans);
    }

    pub(super) fn hard_break(&mut self) {
        self.flush_word();
        self.new_line();
        self.space = None;
    }

    pub(super) fn finish(mut self) -> Vec<Vec<Span<'static>>> {
        self.flush_word();
        if !self.line.spans.is_empty() {
            self.new_line();
        }
        self.lines
    }
}

/// Cut spans to at most `max` columns.
pub(super) fn truncate_spans(spans: Vec<Span<'static>>, max: usize) -> Vec<Span<'static>> {
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
pub(super) fn fit_line(line: Line<'static>, width: usize) -> Line<'static> {
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

pub(super) fn pad_to(spans: &mut Vec<Span<'static>>, used: usize, width: usize) {
    if width > used {
        spans.push(Span::raw(" ".repeat(width - used)));
    }
}

pub(super) fn spans_width(spans: &[Span<'_>]) -> usize {
    spans.iter().map(Span::width).sum()
}
