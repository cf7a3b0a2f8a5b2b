//! Laying parsed TeX out as Unicode: one line inline, fractions stacked over three lines for
//! display math.

use super::*;

/// Accumulates one line of output and applies TeX-like spacing: source white space is kept
/// (collapsed) except just inside brackets and before punctuation; relations are always spaced.
pub(super) struct Writer {
    pub(super) out: String,
    /// Inside scripts: no spaces at all.
    pub(super) tight: bool,
    /// Something was written (possibly flushed into a box since).
    pub(super) started: bool,
    /// The last atom was an operator word: space before a following letter.
    pub(super) op_pending: bool,
    /// White space seen since the last atom.
    pub(super) space_pending: bool,
    /// The last atom was an opening bracket.
    pub(super) after_open: bool,
}

impl Writer {
    pub(super) fn new(tight: bool) -> Self {
        Self {
            out: String::new(),
            tight,
            started: false,
            op_pending: false,
            space_pending: false,
            after_open: false,
        }
    }

    pub(super) fn push(&mut self, s: &str) {
        self.out.push_str(s);
        self.started |= !s.is_empty();
    }

    pub(super) fn push_space(&mut self) {
        if self.started && !self.out.ends_with(' ') {
            self.out.push(' ');
        }
    }

    pub(super) fn space(&mut self) {
        self.space_pending = !self.tight;
    }

    pub(super) fn atom(&mut self, s: &str, class: Class) {
        let source_space = self.space_pending && class != Class::Punct && !self.after_open;
        let op_space = self.op_pending && matches!(class, Class::Ord | Class::Op);
        if (source_space || op_space) && !s.starts_with(' ') {
            self.push_space();
        }
        self.space_pending = false;
        self.op_pending = class == Class::Op;
        self.after_open = class == Class::Open;
        self.push(s);
    }

    pub(super) fn rel(&mut self, s: &str) {
        if !self.tight {
            self.push_space();
        }
        self.push(s);
        if !self.tight {
            self.out.push(' ');
        }
        self.space_pending = false;
        self.op_pending = false;
        self.after_open = false;
    }

    /// Scripts and explicit spacing attach without source spacing.
    pub(super) fn attach(&mut self, s: &str) {
        self.space_pending = false;
        self.push(s);
    }

    pub(super) fn finish(self) -> String {
        self.out.trim().to_string()
    }
}

/// A rectangle of text for display math; `base` is the row that lines up with its neighbours.
pub(super) struct Boxed {
    pub(super) lines: Vec<String>,
    pub(super) base: usize,
    pub(super) width: usize,
    pub(super) frac: bool,
}

impl Boxed {
    pub(super) fn flat(s: String) -> Self {
        let width = s.width();
        Self {
            lines: vec![s],
            base: 0,
            width,
            frac: false,
        }
    }
}

pub(super) fn emit(items: &[Item], w: &mut Writer, mut boxes: Option<&mut Vec<Boxed>>) {
    for (i, item) in items.iter().enumerate() {
        match item {
            Item::Sym(s, Class::Rel) => w.rel(s),
            Item::Sym(s, Class::Bin) => {
                if w.tight || is_unary(items, i) {
                    w.atom(s, Class::Ord);
                } else if spaced(items, i) {
                    w.rel(s);
                } else {
                    w.atom(s, Class::Punct);
                }
            }
            Item::Sym(s, class) => w.atom(s, *class),
            Item::Space | Item::Break => w.space(),
            Item::Fixed(s) => {
                if !w.tight {
                    w.attach(s);
                }
            }
            Item::Group(g) => emit(g, w, boxes.as_deref_mut()),
            Item::Frac(n, d) => match boxes.as_deref_mut() {
                Some(stack) => push_frac_box(stack, w, n, d),
                None => {
                    w.atom(&frac_inline(n, d), Class::Ord);
                    if juxtaposed(items, i) {
                        w.atom("·", Class::Punct); // `(N−1)/N·S`, not `(N−1)/NS`
                    }
                }
            },
            Item::Sqrt(index, arg) => w.atom(&sqrt(index.as_deref(), arg), Class::Ord),
            Item::Script(sup, arg) => {
                let s = script(*sup, arg);
                w.attach(&s);
            }
            Item::Accent(mark, name, arg) => w.atom(&accent(*mark, name, arg), Class::Ord),
        }
    }
}

/// A `−` or `+` with nothing to its left to operate on is a sign, not a binary operator.
pub(super) fn is_unary(items: &[Item], i: usize) -> bool {
    let before = items.get(..i).unwrap_or_default();
    match before.iter().rev().find(|it| !matches!(it, Item::Space)) {
        None | Some(Item::Fixed(_) | Item::Break) => true,
        Some(Item::Sym(s, class)) => match class {
            Class::Ord => false,
            Class::Punct => matches!(s.as_ref(), "," | ";" | ":"),
            Class::Op | Class::Bin | Class::Rel | Class::Open => true,
        },
        Some(_) => false,
    }
}

/// Whether item `i` is directly followed by something it multiplies.
pub(super) fn juxtaposed(items: &[Item], i: usize) -> bool {
    matches!(
        items.get(i + 1),
        Some(
            Item::Sym(_, Class::Ord | Class::Op | Class::Open)
                | Item::Frac(..)
                | Item::Sqrt(..)
                | Item::Accent(..)
                | Item::Group(_)
        )
    )
}

/// Whether the source put white space next to operator `i`.
pub(super) fn spaced(items: &[Item], i: usize) -> bool {
    let before = i.checked_sub(1).and_then(|p| items.get(p));
    matches!(before, Some(Item::Space)) || matches!(items.get(i + 1), Some(Item::Space))
}

pub(super) fn render_inline(items: &[Item], tight: bool) -> String {
    let mut w = Writer::new(tight);
    emit(items, &mut w, None);
    w.finish()
}

pub(super) fn frac_inline(num: &[Item], den: &[Item]) -> String {
    let (n, d) = (render_inline(num, false), render_inline(den, false));
    let n = if is_product(&n) { n } else { format!("({n})") };
    let d = if is_atomic(&d) { d } else { format!("({d})") };
    format!("{n}/{d}")
}

/// A numerator that needs no brackets before `/`: factors only, like `2(N−1)` or `x²`.
pub(super) fn is_product(s: &str) -> bool {
    let mut depth = 0i32;
    for c in s.chars() {
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth -= 1,
            ' ' | '+' | '−' | '±' | '∓' | '/' | '·' | '×' | '=' | '<' | '>' | '≤' | '≥' | '≈'
            | '≠' | '→' | ',' | '!'
                if depth == 0 =>
            {
                return false;
            }
            _ => {}
        }
    }
    depth == 0
}

/// A denominator that needs no brackets after `/`: a number, a name (`N`, `busbw`, `xᵢ²`),
/// or an already bracketed expression. `2N` is a product and gets brackets.
pub(super) fn is_atomic(s: &str) -> bool {
    let base = s.trim_end_matches(is_script_char);
    let number = base.chars().all(|c| c.is_ascii_digit() || c == '.');
    let name = base
        .chars()
        .all(|c| c.is_alphabetic() || matches!(c, '∞' | '∂'));
    (!base.is_empty() && (number || name)) || is_wrapped(s)
}

/// Characters produced by [`superscript`] and [`subscript`], and primes.
pub(super) fn is_script_char(c: char) -> bool {
    matches!(c,
        '¹' | '²' | '³' | '′' | 'ⁱ' | 'ⁿ' | 'ⱼ' | 'ⱽ' | '°'
        | '\u{2070}'..='\u{207E}'
        | '\u{2080}'..='\u{209C}'
        | '\u{02B0}'..='\u{02B8}'
        | '\u{02E1}'..='\u{02E3}'
        | '\u{1D2C}'..='\u{1D6A}'
        | '\u{1D9C}'..='\u{1DBF}')
}

/// `(…)` where the first bracket closes at the very end.
pub(super) fn is_wrapped(s: &str) -> bool {
    if !(s.starts_with('(') && s.ends_with(')')) {
        return false;
    }
    let mut depth = 0i32;
    let last = s.chars().count() - 1;
    for (i, c) in s.chars().enumerate() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            _ => {}
        }
        if depth == 0 && i < last {
            return false;
        }
    }
    depth == 0
}

pub(super) fn sqrt(index: Option<&str>, arg: &[Item]) -> String {
    let body = render_inline(arg, false);
    let root = match index.map(str::trim) {
        None | Some("") | Some("2") => Cow::Borrowed("√"),
        Some("3") => Cow::Borrowed("∛"),
        Some("4") => Cow::Borrowed("∜"),
        Some(i) => Cow::Owned(format!("{}√", script(true, &parse(i)))),
    };
    let bare = body.chars().count() == 1
        || (!body.is_empty() && body.chars().all(|c| c.is_ascii_digit()))
        || is_wrapped(&body);
    if bare {
        format!("{root}{body}")
    } else {
        format!("{root}({body})")
    }
}

pub(super) fn accent(mark: char, name: &str, arg: &[Item]) -> String {
    let body = render_inline(arg, false);
    if body.chars().count() == 1 {
        format!("{body}{mark}")
    } else {
        format!("{name}({body})")
    }
}

/// A superscript (`sup`) or subscript in Unicode when every character has a form, else
/// `^x` / `^(…)`.
pub(super) fn script(sup: bool, arg: &[Item]) -> String {
    let body = render_inline(arg, true);
    let mark = if sup { '^' } else { '_' };
    // A word label (`T_{\text{ring}}`, `N_{nodes}`) is written `T_ring` whatever its letters:
    // Unicode has subscripts for some letters and not others, so `T_tree` and `T_ring` would
    // otherwise come out one as ₜᵣₑₑ and the other as _(ring).
    if body.chars().count() >= 2 && body.chars().all(char::is_alphabetic) {
        return format!("{mark}{body}");
    }
    let map = if sup { superscript } else { subscript };
    let mapped: Option<String> = body.chars().map(map).collect();
    match mapped {
        Some(m) if !m.is_empty() => m,
        _ => {
            if body.chars().count() == 1 {
                format!("{mark}{body}")
            } else {
                format!("{mark}({body})")
            }
        }
    }
}

pub(super) fn superscript(c: char) -> Option<char> {
    Some(match c {
        '0' => '⁰',
        '1' => '¹',
        '2' => '²',
        '3' => '³',
        '4' => '⁴',
        '5' => '⁵',
        '6' => '⁶',
        '7' => '⁷',
        '8' => '⁸',
        '9' => '⁹',
        '+' => '⁺',
        '−' | '-' => '⁻',
        '=' => '⁼',
        '(' => '⁽',
        ')' => '⁾',
        'a' => 'ᵃ',
        'b' => 'ᵇ',
        'c' => 'ᶜ',
        'd' => 'ᵈ',
        'e' => 'ᵉ',
        'f' => 'ᶠ',
        'g' => 'ᵍ',
        'h' => 'ʰ',
        'i' => 'ⁱ',
        'j' => 'ʲ',
        'k' => 'ᵏ',
        'l' => 'ˡ',
        'm' => 'ᵐ',
        'n' => 'ⁿ',
        'o' => 'ᵒ',
        'p' => 'ᵖ',
        'r' => 'ʳ',
        's' => 'ˢ',
        't' => 'ᵗ',
        'u' => 'ᵘ',
        'v' => 'ᵛ',
        'w' => 'ʷ',
        'x' => 'ˣ',
        'y' => 'ʸ',
        'z' => 'ᶻ',
        'A' => 'ᴬ',
        'B' => 'ᴮ',
        'D' => 'ᴰ',
        'E' => 'ᴱ',
        'G' => 'ᴳ',
        'H' => 'ᴴ',
        'I' => 'ᴵ',
        'J' => 'ᴶ',
        'K' => 'ᴷ',
        'L' => 'ᴸ',
        'M' => 'ᴹ',
        'N' => 'ᴺ',
        'O' => 'ᴼ',
        'P' => 'ᴾ',
        'R' => 'ᴿ',
        'T' | '⊤' => 'ᵀ',
        'U' => 'ᵁ',
        'V' => 'ⱽ',
        'W' => 'ᵂ',
        'β' => 'ᵝ',
        'γ' => 'ᵞ',
        'δ' => 'ᵟ',
        'θ' => 'ᶿ',
        'φ' => 'ᵠ',
        'χ' => 'ᵡ',
        '∘' => '°',
        '′' => '′',
        _ => return None,
    })
}

pub(super) fn subscript(c: char) -> Option<char> {
    Some(match c {
        '0' => '₀',
        '1' => '₁',
        '2' => '₂',
        '3' => '₃',
        '4' => '₄',
        '5' => '₅',
        '6' => '₆',
        '7' => '₇',
        '8' => '₈',
        '9' => '₉',
        '+' => '₊',
        '−' | '-' => '₋',
        '=' => '₌',
        '(' => '₍',
        ')' => '₎',
        'a' => 'ₐ',
        'e' => 'ₑ',
        'h' => 'ₕ',
        'i' => 'ᵢ',
        'j' => 'ⱼ',
        'k' => 'ₖ',
        'l' => 'ₗ',
        'm' => 'ₘ',
        'n' => 'ₙ',
        'o' => 'ₒ',
        'p' => 'ₚ',
        'r' => 'ᵣ',
        's' => 'ₛ',
        't' => 'ₜ',
        'u' => 'ᵤ',
        'v' => 'ᵥ',
        'x' => 'ₓ',
        'β' => 'ᵦ',
        'γ' => 'ᵧ',
        'ρ' => 'ᵨ',
        'φ' => 'ᵩ',
        'χ' => 'ᵪ',
        _ => return None,
    })
}

/// Inline math as one line of Unicode: `\frac{N-1}{N}` → `(N−1)/N`.
pub fn inline(tex: &str) -> String {
    render_inline(&parse(tex), false)
}

/// Display math as one or more lines (fractions stacked), all of the same display width.
///
/// Top-level fractions become three rows (numerator, `─` bar, denominator) with the rest of
/// the expression on the bar's row; nested fractions stay inline. `\\` starts a new row.
/// Empty input gives no lines.
pub fn display(tex: &str) -> Vec<String> {
    let items = parse(tex);
    let mut lines: Vec<String> = items
        .split(|it| matches!(it, Item::Break))
        .flat_map(display_row)
        .collect();
    let width = lines.iter().map(|l| l.width()).max().unwrap_or(0);
    for line in &mut lines {
        pad(line, width - line.width());
    }
    trim_columns(&mut lines);
    lines
}

/// One row of display math; empty when the row renders to nothing.
pub(super) fn display_row(row: &[Item]) -> Vec<String> {
    let mut w = Writer::new(false);
    let mut boxes = Vec::new();
    emit(row, &mut w, Some(&mut boxes));
    let rest = w.out.trim_end().to_string();
    if !rest.is_empty() {
        boxes.push(Boxed::flat(rest));
    }
    if boxes.is_empty() {
        return Vec::new();
    }
    hcat(&boxes)
}

pub(super) fn push_frac_box(stack: &mut Vec<Boxed>, w: &mut Writer, num: &[Item], den: &[Item]) {
    if w.space_pending {
        w.push_space();
    }
    let before = std::mem::take(&mut w.out);
    if !before.is_empty() {
        stack.push(Boxed::flat(before));
    } else if stack.last().is_some_and(|b| b.frac) {
        stack.push(Boxed::flat(" ".to_string()));
    }
    let (n, d) = (render_inline(num, false), render_inline(den, false));
    let (nw, dw) = (n.width(), d.width());
    let width = nw.max(dw) + 2;
    stack.push(Boxed {
        lines: vec![
            centre(&n, nw, width),
            "─".repeat(width),
            centre(&d, dw, width),
        ],
        base: 1,
        width,
        frac: true,
    });
    w.started = true;
    w.op_pending = false;
    w.space_pending = false;
    w.after_open = false;
}

pub(super) fn centre(s: &str, s_width: usize, width: usize) -> String {
    let left = width.saturating_sub(s_width) / 2;
    let mut line = " ".repeat(left);
    line.push_str(s);
    pad(&mut line, width.saturating_sub(s_width + left));
    line
}

pub(super) fn pad(line: &mut String, n: usize) {
    line.extend(std::iter::repeat_n(' ', n));
}

/// Lay boxes side by side, aligned on their base rows; every line gets the same width.
pub(super) fn hcat(boxes: &[Boxed]) -> Vec<String> {
    let above = boxes.iter().map(|b| b.base).max().unwrap_or(0);
    let below = boxes
        .iter()
        .map(|b| b.lines.len().saturating_sub(b.base + 1))
        .max()
        .unwrap_or(0);
    let mut lines = vec![String::new(); above + 1 + below];
    for b in boxes {
        let offset = above - b.base;
        for (row, line) in lines.iter_mut().enumerate() {
            match row.checked_sub(offset).and_then(|r| b.lines.get(r)) {
                Some(text) => {
                    line.push_str(text);
                    pad(line, b.width.saturating_sub(text.width()));
                }
                None => pad(line, b.width),
            }
        }
    }
    lines
}

/// Remove blank columns shared by all lines on the left and right.
pub(super) fn trim_columns(lines: &mut [String]) {
    let lead = lines
        .iter()
        .map(|l| l.len() - l.trim_start_matches(' ').len())
        .min()
        .unwrap_or(0);
    let trail = lines
        .iter()
        .map(|l| l.len() - l.trim_end_matches(' ').len())
        .min()
        .unwrap_or(0);
    for line in lines.iter_mut() {
        line.truncate(line.len() - trail);
        line.drain(..lead);
    }
}
