//! TeX math → Unicode for a terminal.
//!
//! Lessons write math as `$…$` / `$$…$$` (or `\(…\)` / `\[…\]`, rewritten by
//! [`rewrite_delimiters`] before Markdown parsing). [`inline`] turns a formula into one line of
//! Unicode (`\frac{N-1}{N}` → `(N−1)/N`, `x^2` → `x²`), [`display`] stacks fractions over three
//! lines, and [`unclosed`] finds math delimiters that are never closed.
//!
//! The TeX subset is small on purpose: symbols, Greek, scripts, fractions, roots, `\text`,
//! accents and spacing. Anything unknown is shown by name (`\foo` → `foo`); nothing panics.

use std::borrow::Cow;
use std::ops::Range;

use pulldown_cmark::{Event, Options, Parser, Tag};
use unicode_width::UnicodeWidthStr;

/// The pulldown-cmark options lessons are parsed with (shared with the terminal renderer).
pub fn markdown_options() -> Options {
    Options::ENABLE_TABLES
        | Options::ENABLE_STRIKETHROUGH
        | Options::ENABLE_MATH
        | Options::ENABLE_TASKLISTS
}

// ---------------------------------------------------------------------------------------------
// Delimiters in Markdown sources
// ---------------------------------------------------------------------------------------------

/// Byte ranges of inline code spans and fenced/indented code blocks, in document order.
fn code_ranges(src: &str) -> Vec<Range<usize>> {
    Parser::new_ext(src, markdown_options())
        .into_offset_iter()
        .filter(|(ev, _)| matches!(ev, Event::Code(_) | Event::Start(Tag::CodeBlock(_))))
        .map(|(_, range)| range)
        .collect()
}

/// Rewrite `\(...\)` to `$...$` and `\[...\]` to `$$...$$` outside code spans and code blocks,
/// so pulldown-cmark (which eats those backslashes) sees math.
///
/// Newlines are kept one for one, so line numbers stay valid. Spaces just inside the
/// delimiters are dropped (`\( x \)` → `$x$`), as pulldown-cmark wants `$x$`. An opener whose
/// closer is missing, or lies past a blank line or a code span, is left alone.
pub fn rewrite_delimiters(src: &str) -> String {
    if !src.contains("\\(") && !src.contains("\\[") {
        return src.to_string();
    }
    let mut out = String::with_capacity(src.len() + 16);
    let mut pos = 0;
    for range in code_ranges(src) {
        if range.start < pos {
            continue;
        }
        rewrite_segment(src.get(pos..range.start).unwrap_or(""), &mut out);
        out.push_str(src.get(range.clone()).unwrap_or(""));
        pos = range.end;
    }
    rewrite_segment(src.get(pos..).unwrap_or(""), &mut out);
    out
}

/// Rewrite the delimiters in a stretch of Markdown that holds no code.
fn rewrite_segment(seg: &str, out: &mut String) {
    let bytes = seg.as_bytes();
    let (mut i, mut copied) = (0, 0);
    while i + 1 < bytes.len() {
        if bytes[i] != b'\\' {
            i += 1;
            continue;
        }
        let display = match bytes[i + 1] {
            b'(' => false,
            b'[' => true,
            _ => {
                i += 2; // an escaped character, `\\` included
                continue;
            }
        };
        let body_start = i + 2;
        let closer = if display { b']' } else { b')' };
        let Some(len) = find_closer(&bytes[body_start..], closer) else {
            i += 2;
            continue;
        };
        let body = seg.get(body_start..body_start + len).unwrap_or("");
        if has_blank_line(body) {
            i += 2;
            continue;
        }
        let dollars = if display { "$$" } else { "$" };
        out.push_str(seg.get(copied..i).unwrap_or(""));
        out.push_str(dollars);
        out.push_str(body.trim_matches([' ', '\t']));
        out.push_str(dollars);
        i = body_start + len + 2;
        copied = i;
    }
    out.push_str(seg.get(copied..).unwrap_or(""));
}

/// Offset of the `\` of the first `\<closer>` in `bytes`, honouring TeX escapes like `\\`.
fn find_closer(bytes: &[u8], closer: u8) -> Option<usize> {
    let mut i = 0;
    while i + 1 < bytes.len() {
        if bytes[i] == b'\\' {
            if bytes[i + 1] == closer {
                return Some(i);
            }
            i += 2;
        } else {
            i += 1;
        }
    }
    None
}

/// Whether a whole line of `text` (not its partial first or last line) is blank.
fn has_blank_line(text: &str) -> bool {
    let inner_lines = text.matches('\n').count().saturating_sub(1);
    text.split('\n')
        .skip(1)
        .take(inner_lines)
        .any(|l| l.trim().is_empty())
}

/// An open math delimiter: where it is and which one.
#[derive(Clone, Copy)]
struct Open {
    line: usize,
    col: usize,
    delim: &'static str,
}

impl Open {
    fn report(self) -> (usize, usize, String) {
        let kind = if matches!(self.delim, "$$" | "\\[") {
            "display"
        } else {
            "inline"
        };
        let message = format!("unclosed {kind} math `{}` (opened here)", self.delim);
        (self.line, self.col, message)
    }
}

/// Unclosed math delimiters in a Markdown source: (1-based line, 1-based col, message).
///
/// Rules, kept simple on purpose:
/// - code spans and code blocks are skipped; `\$` is an escaped dollar, not a delimiter;
/// - inline math (`$…$`, `\(…\)`) must close on the line it opens on, so `$5 and $6` is a pair
///   (math) while a lone `costs $5` is reported (write `\$5` for money);
/// - display math (`$$…$$`, `\[…\]`) may span lines but not a blank line;
/// - inside one kind of math, the other kind's delimiters are ignored.
pub fn unclosed(src: &str) -> Vec<(usize, usize, String)> {
    let code = code_ranges(src);
    let mut next_code = 0;
    let mut found = Vec::new();
    let mut display: Option<Open> = None;
    let mut line_start = 0;
    for (idx, line) in src.split('\n').enumerate() {
        let lineno = idx + 1;
        let mut inline: Option<Open> = None;
        let mut chars = line.char_indices().enumerate().peekable();
        let mut any_code = false;
        while let Some((ci, (bi, c))) = chars.next() {
            let at = line_start + bi;
            while code.get(next_code).is_some_and(|r| r.end <= at) {
                next_code += 1;
            }
            if code.get(next_code).is_some_and(|r| r.contains(&at)) {
                any_code = true;
                continue;
            }
            let next = chars.peek().map(|&(_, (_, n))| n);
            let open = |delim| Open {
                line: lineno,
                col: ci + 1,
                delim,
            };
            match (c, next) {
                ('\\', Some(n)) => {
                    chars.next();
                    match n {
                        '(' if inline.is_none() && display.is_none() => inline = Some(open("\\(")),
                        ')' if inline.is_some_and(|o| o.delim == "\\(") => inline = None,
                        '[' if inline.is_none() && display.is_none() => display = Some(open("\\[")),
                        ']' if display.is_some_and(|o| o.delim == "\\[") => display = None,
                        _ => {}
                    }
                }
                ('$', _) if inline.is_some_and(|o| o.delim == "$") => inline = None,
                ('$', Some('$')) => {
                    chars.next();
                    match display {
                        Some(o) if o.delim == "$$" => display = None,
                        None if inline.is_none() => display = Some(open("$$")),
                        _ => {}
                    }
                }
                ('$', _) if inline.is_none() && display.is_none() => inline = Some(open("$")),
                _ => {}
            }
        }
        found.extend(inline.map(Open::report));
        if line.trim().is_empty() && !any_code {
            found.extend(display.take().map(Open::report));
        }
        line_start += line.len() + 1;
    }
    found.extend(display.map(Open::report));
    found.sort_by_key(|f| (f.0, f.1));
    found
}

// ---------------------------------------------------------------------------------------------
// TeX parsing
// ---------------------------------------------------------------------------------------------

/// How an atom spaces against its neighbours.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    /// Letters, digits, symbols.
    Ord,
    /// Operator words and big operators (`log`, `∑`): a space before a following atom.
    Op,
    /// Binary operators (`+`, `−`, `·`): spaced when the source spaces them.
    Bin,
    /// Relations (`=`, `≤`, `→`): always spaced outside scripts.
    Rel,
    /// Opening brackets: never get operator spacing.
    Open,
    /// Punctuation and closing brackets.
    Punct,
}

#[derive(Debug, Clone, PartialEq)]
enum Item {
    Sym(Cow<'static, str>, Class),
    /// Collapsible white space.
    Space,
    /// Explicit spacing such as `\quad`.
    Fixed(&'static str),
    Group(Vec<Item>),
    Frac(Vec<Item>, Vec<Item>),
    Sqrt(Option<String>, Vec<Item>),
    /// Superscript (`true`) or subscript attached to the previous item.
    Script(bool, Vec<Item>),
    /// A combining accent, with a name to fall back on for multi-character arguments.
    Accent(char, &'static str, Vec<Item>),
    /// `\\`: a new row in display math.
    Break,
}

fn sym(s: &'static str, class: Class) -> Item {
    Item::Sym(Cow::Borrowed(s), class)
}

/// Nesting limit: deeper groups are kept as raw text so hostile input cannot overflow the stack.
const MAX_DEPTH: usize = 24;

struct TexParser {
    chars: Vec<char>,
    pos: usize,
    depth: usize,
}

fn parse(tex: &str) -> Vec<Item> {
    let mut p = TexParser {
        chars: tex.chars().collect(),
        pos: 0,
        depth: 0,
    };
    p.seq(false)
}

impl TexParser {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn skip_ws(&mut self) {
        while self.peek().is_some_and(char::is_whitespace) {
            self.pos += 1;
        }
    }

    /// Items up to the end, or up to the `}` closing the current group.
    fn seq(&mut self, in_group: bool) -> Vec<Item> {
        let mut items = Vec::new();
        while let Some(c) = self.peek() {
            if c == '}' {
                self.pos += 1;
                if in_group {
                    break;
                }
                continue;
            }
            if let Some(item) = self.item() {
                items.push(item);
            }
        }
        items
    }

    /// One item; consumes at least one character when any is left.
    fn item(&mut self) -> Option<Item> {
        let c = self.peek()?;
        self.pos += 1;
        let item = match c {
            '{' => Item::Group(self.group()),
            '}' => return None,
            '^' | '_' => Item::Script(c == '^', self.arg()),
            '\\' => return self.command(),
            '&' | '~' => Item::Space,
            c if c.is_whitespace() => {
                self.skip_ws();
                Item::Space
            }
            '-' => sym("−", Class::Bin),
            '+' => sym("+", Class::Bin),
            '*' => sym("∗", Class::Bin),
            '/' => sym("/", Class::Ord),
            '=' => sym("=", Class::Rel),
            '<' => sym("<", Class::Rel),
            '>' => sym(">", Class::Rel),
            '\'' => sym("′", Class::Ord),
            '(' | '[' => Item::Sym(Cow::Owned(c.to_string()), Class::Open),
            ')' | ']' | ',' | ';' | '.' | '!' | '?' | ':' => {
                Item::Sym(Cow::Owned(c.to_string()), Class::Punct)
            }
            c if c.is_control() => Item::Space,
            c => Item::Sym(Cow::Owned(c.to_string()), Class::Ord),
        };
        Some(item)
    }

    /// The body of a `{…}` group whose `{` was just consumed.
    fn group(&mut self) -> Vec<Item> {
        if self.depth >= MAX_DEPTH {
            let raw = self.raw_group();
            return vec![Item::Sym(Cow::Owned(raw), Class::Ord)];
        }
        self.depth += 1;
        let items = self.seq(true);
        self.depth -= 1;
        items
    }

    /// Raw text up to the `}` matching an already consumed `{`.
    fn raw_group(&mut self) -> String {
        let mut depth = 0usize;
        let mut text = String::new();
        while let Some(c) = self.peek() {
            self.pos += 1;
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => break,
                '}' => depth -= 1,
                _ => {}
            }
            text.push(c);
        }
        text
    }

    /// A command argument: a `{group}` or a single item.
    fn arg(&mut self) -> Vec<Item> {
        self.skip_ws();
        match self.peek() {
            None | Some('}') => Vec::new(),
            Some('{') => {
                self.pos += 1;
                self.group()
            }
            Some(_) if self.depth >= MAX_DEPTH => Vec::new(),
            Some(_) => {
                self.depth += 1;
                let item = self.item();
                self.depth -= 1;
                item.into_iter().collect()
            }
        }
    }

    /// A raw-text argument (`\text{…}`): the group's text, or one character.
    fn raw_arg(&mut self) -> String {
        self.skip_ws();
        match self.peek() {
            Some('{') => {
                self.pos += 1;
                self.raw_group()
            }
            Some('}') | None => String::new(),
            Some(c) => {
                self.pos += 1;
                c.to_string()
            }
        }
    }

    /// An optional `[…]` argument.
    fn optional(&mut self) -> Option<String> {
        if self.peek() != Some('[') {
            return None;
        }
        self.pos += 1;
        let mut text = String::new();
        while let Some(c) = self.peek() {
            self.pos += 1;
            if c == ']' {
                break;
            }
            text.push(c);
        }
        Some(text)
    }

    /// A command whose `\` was just consumed.
    fn command(&mut self) -> Option<Item> {
        let Some(c) = self.peek() else {
            return Some(sym("\\", Class::Ord));
        };
        if !c.is_ascii_alphabetic() {
            self.pos += 1;
            return control_symbol(c);
        }
        let start = self.pos;
        while self.peek().is_some_and(|c| c.is_ascii_alphabetic()) {
            self.pos += 1;
        }
        let name: String = self
            .chars
            .get(start..self.pos)
            .unwrap_or_default()
            .iter()
            .collect();
        if self.peek() == Some('*') {
            self.pos += 1; // \operatorname*, \begin{align*} …
        }
        self.skip_ws(); // TeX drops the space after a control word
        self.control_word(&name)
    }

    fn control_word(&mut self, name: &str) -> Option<Item> {
        if let Some((s, class)) = symbol(name) {
            return Some(sym(s, class));
        }
        if is_function(name) {
            return Some(Item::Sym(Cow::Owned(name.to_string()), Class::Op));
        }
        let item = match name {
            "frac" | "dfrac" | "tfrac" | "cfrac" => {
                let num = self.arg();
                Item::Frac(num, self.arg())
            }
            "binom" | "dbinom" | "tbinom" | "choose" => {
                let n = self.arg();
                let k = self.arg();
                Item::Group(vec![
                    sym("C(", Class::Open),
                    Item::Group(n),
                    sym(",", Class::Punct),
                    Item::Group(k),
                    sym(")", Class::Punct),
                ])
            }
            "sqrt" => {
                let index = self.optional();
                Item::Sqrt(index, self.arg())
            }
            "text" | "textrm" | "textnormal" | "textit" | "textbf" | "texttt" | "textsf"
            | "mbox" | "hbox" => Item::Sym(Cow::Owned(clean_text(&self.raw_arg())), Class::Ord),
            "operatorname" => Item::Sym(Cow::Owned(clean_text(&self.raw_arg())), Class::Op),
            "mathbb" => Item::Sym(Cow::Owned(double_struck(&self.raw_arg())), Class::Ord),
            "mathrm" | "mathit" | "mathbf" | "mathsf" | "mathtt" | "mathcal" | "mathscr"
            | "mathfrak" | "mathnormal" | "boldsymbol" | "bm" | "underline" | "underbrace"
            | "overbrace" | "boxed" => Item::Group(self.arg()),
            "hat" | "widehat" => Item::Accent('\u{302}', "hat", self.arg()),
            "bar" | "overline" => Item::Accent('\u{304}', "bar", self.arg()),
            "tilde" | "widetilde" => Item::Accent('\u{303}', "tilde", self.arg()),
            "vec" | "overrightarrow" => Item::Accent('\u{20D7}', "vec", self.arg()),
            "dot" => Item::Accent('\u{307}', "dot", self.arg()),
            "ddot" => Item::Accent('\u{308}', "ddot", self.arg()),
            "pmod" => Item::Group(vec![
                sym(" (mod ", Class::Open),
                Item::Group(self.arg()),
                sym(")", Class::Punct),
            ]),
            "left" | "right" | "middle" | "big" | "Big" | "bigg" | "Bigg" | "bigl" | "bigr"
            | "Bigl" | "Bigr" | "biggl" | "biggr" | "Biggl" | "Biggr" | "bigm" | "Bigm" => {
                if self.peek() == Some('.') {
                    self.pos += 1;
                }
                return None;
            }
            "begin" | "end" => {
                self.raw_arg();
                return None;
            }
            "phantom" | "hphantom" | "vphantom" => {
                self.arg();
                return None;
            }
            "displaystyle" | "textstyle" | "scriptstyle" | "limits" | "nolimits" | "nonumber"
            | "notag" | "negthinspace" | "negmedspace" | "allowbreak" => return None,
            "quad" => Item::Fixed("  "),
            "qquad" => Item::Fixed("    "),
            "enspace" | "thinspace" | "medspace" | "thickspace" => Item::Space,
            "not" => return self.negated(),
            _ => Item::Sym(Cow::Owned(name.to_string()), Class::Ord),
        };
        Some(item)
    }

    /// `\not` followed by a relation.
    fn negated(&mut self) -> Option<Item> {
        self.skip_ws();
        match self.item()? {
            Item::Sym(s, class) => {
                let negated = match s.as_ref() {
                    "=" => Cow::Borrowed("≠"),
                    "∈" => Cow::Borrowed("∉"),
                    "⊂" => Cow::Borrowed("⊄"),
                    "≡" => Cow::Borrowed("≢"),
                    other => Cow::Owned(format!("{other}\u{338}")),
                };
                Some(Item::Sym(negated, class))
            }
            other => Some(other),
        }
    }
}

/// `\` followed by a non-letter.
fn control_symbol(c: char) -> Option<Item> {
    Some(match c {
        ',' | ':' | ';' | ' ' | '>' => Item::Space,
        '!' | '/' => return None,
        '\\' => Item::Break,
        '{' => sym("{", Class::Open),
        '}' => sym("}", Class::Punct),
        '|' => sym("‖", Class::Ord),
        c => Item::Sym(Cow::Owned(c.to_string()), Class::Ord),
    })
}

/// Text from `\text{…}`: control characters dropped, TeX escapes undone.
fn clean_text(raw: &str) -> String {
    raw.replace("\\{", "{")
        .replace("\\}", "}")
        .replace("\\_", "_")
        .replace("\\%", "%")
        .replace("\\$", "$")
        .replace("\\&", "&")
        .chars()
        .map(|c| if c.is_whitespace() { ' ' } else { c })
        .filter(|c| !c.is_control())
        .collect()
}

fn double_struck(raw: &str) -> String {
    raw.chars()
        .map(|c| match c {
            'R' => 'ℝ',
            'N' => 'ℕ',
            'Z' => 'ℤ',
            'Q' => 'ℚ',
            'C' => 'ℂ',
            'P' => 'ℙ',
            'E' => '𝔼',
            '1' => '𝟙',
            c => c,
        })
        .filter(|c| !c.is_control())
        .collect()
}

fn is_function(name: &str) -> bool {
    matches!(
        name,
        "log"
            | "ln"
            | "lg"
            | "exp"
            | "max"
            | "min"
            | "sup"
            | "inf"
            | "lim"
            | "liminf"
            | "limsup"
            | "sin"
            | "cos"
            | "tan"
            | "cot"
            | "sec"
            | "csc"
            | "sinh"
            | "cosh"
            | "tanh"
            | "arcsin"
            | "arccos"
            | "arctan"
            | "arg"
            | "argmax"
            | "argmin"
            | "det"
            | "dim"
            | "gcd"
            | "lcm"
            | "deg"
            | "ker"
            | "hom"
            | "Pr"
            | "bmod"
            | "mod"
    )
}

/// Named symbols: Greek, operators, relations, arrows, delimiters.
fn symbol(name: &str) -> Option<(&'static str, Class)> {
    use Class::*;
    let found = match name {
        // Greek, lower case
        "alpha" => ("α", Ord),
        "beta" => ("β", Ord),
        "gamma" => ("γ", Ord),
        "delta" => ("δ", Ord),
        "epsilon" | "varepsilon" => ("ε", Ord),
        "zeta" => ("ζ", Ord),
        "eta" => ("η", Ord),
        "theta" => ("θ", Ord),
        "vartheta" => ("ϑ", Ord),
        "iota" => ("ι", Ord),
        "kappa" => ("κ", Ord),
        "lambda" => ("λ", Ord),
        "mu" => ("μ", Ord),
        "nu" => ("ν", Ord),
        "xi" => ("ξ", Ord),
        "omicron" => ("ο", Ord),
        "pi" => ("π", Ord),
        "varpi" => ("ϖ", Ord),
        "rho" => ("ρ", Ord),
        "varrho" => ("ϱ", Ord),
        "sigma" => ("σ", Ord),
        "varsigma" => ("ς", Ord),
        "tau" => ("τ", Ord),
        "upsilon" => ("υ", Ord),
        "phi" | "varphi" => ("φ", Ord),
        "chi" => ("χ", Ord),
        "psi" => ("ψ", Ord),
        "omega" => ("ω", Ord),
        // Greek, upper case
        "Gamma" => ("Γ", Ord),
        "Delta" => ("Δ", Ord),
        "Theta" => ("Θ", Ord),
        "Lambda" => ("Λ", Ord),
        "Xi" => ("Ξ", Ord),
        "Pi" => ("Π", Ord),
        "Sigma" => ("Σ", Ord),
        "Upsilon" => ("Υ", Ord),
        "Phi" => ("Φ", Ord),
        "Psi" => ("Ψ", Ord),
        "Omega" => ("Ω", Ord),
        // big operators
        "sum" => ("∑", Op),
        "prod" => ("∏", Op),
        "coprod" => ("∐", Op),
        "int" => ("∫", Op),
        "iint" => ("∬", Op),
        "oint" => ("∮", Op),
        "bigcup" => ("⋃", Op),
        "bigcap" => ("⋂", Op),
        "bigoplus" => ("⊕", Op),
        "bigotimes" => ("⊗", Op),
        // binary operators
        "times" => ("×", Bin),
        "cdot" | "cdotp" => ("·", Bin),
        "pm" => ("±", Bin),
        "mp" => ("∓", Bin),
        "div" => ("÷", Bin),
        "ast" => ("∗", Bin),
        "star" => ("⋆", Bin),
        "circ" => ("∘", Bin),
        "bullet" => ("•", Bin),
        "oplus" => ("⊕", Bin),
        "otimes" => ("⊗", Bin),
        "cup" => ("∪", Bin),
        "cap" => ("∩", Bin),
        "setminus" => ("∖", Bin),
        "wedge" | "land" => ("∧", Bin),
        "vee" | "lor" => ("∨", Bin),
        // relations and arrows
        "to" | "rightarrow" => ("→", Rel),
        "leftarrow" | "gets" => ("←", Rel),
        "leftrightarrow" => ("↔", Rel),
        "Rightarrow" => ("⇒", Rel),
        "Leftarrow" => ("⇐", Rel),
        "Leftrightarrow" => ("⇔", Rel),
        "implies" | "Longrightarrow" => ("⟹", Rel),
        "impliedby" | "Longleftarrow" => ("⟸", Rel),
        "iff" | "Longleftrightarrow" => ("⟺", Rel),
        "longrightarrow" => ("⟶", Rel),
        "longleftarrow" => ("⟵", Rel),
        "mapsto" => ("↦", Rel),
        "uparrow" => ("↑", Rel),
        "downarrow" => ("↓", Rel),
        "approx" => ("≈", Rel),
        "le" | "leq" | "leqslant" => ("≤", Rel),
        "ge" | "geq" | "geqslant" => ("≥", Rel),
        "ne" | "neq" => ("≠", Rel),
        "lt" => ("<", Rel),
        "gt" => (">", Rel),
        "equiv" => ("≡", Rel),
        "sim" => ("∼", Rel),
        "simeq" => ("≃", Rel),
        "cong" => ("≅", Rel),
        "propto" => ("∝", Rel),
        "in" => ("∈", Rel),
        "notin" => ("∉", Rel),
        "ni" => ("∋", Rel),
        "subset" => ("⊂", Rel),
        "subseteq" => ("⊆", Rel),
        "supset" => ("⊃", Rel),
        "supseteq" => ("⊇", Rel),
        "ll" => ("≪", Rel),
        "gg" => ("≫", Rel),
        "mid" => ("∣", Rel),
        "parallel" => ("∥", Rel),
        "perp" => ("⊥", Rel),
        "coloneqq" | "coloneq" => ("≔", Rel),
        "doteq" => ("≐", Rel),
        "prec" => ("≺", Rel),
        "succ" => ("≻", Rel),
        // delimiters
        "lceil" => ("⌈", Open),
        "rceil" => ("⌉", Punct),
        "lfloor" => ("⌊", Open),
        "rfloor" => ("⌋", Punct),
        "langle" => ("⟨", Open),
        "rangle" => ("⟩", Punct),
        "lvert" | "vert" => ("|", Ord),
        "rvert" => ("|", Punct),
        "lVert" | "Vert" => ("‖", Ord),
        "rVert" => ("‖", Punct),
        "lbrace" => ("{", Open),
        "rbrace" => ("}", Punct),
        "lbrack" => ("[", Open),
        "rbrack" => ("]", Punct),
        "colon" => (":", Punct),
        // everything else
        "infty" => ("∞", Ord),
        "ldots" | "dots" | "cdots" | "dotsc" | "dotsb" => ("…", Ord),
        "vdots" => ("⋮", Ord),
        "ddots" => ("⋱", Ord),
        "partial" => ("∂", Ord),
        "nabla" => ("∇", Ord),
        "forall" => ("∀", Ord),
        "exists" => ("∃", Ord),
        "neg" | "lnot" => ("¬", Ord),
        "emptyset" | "varnothing" => ("∅", Ord),
        "prime" => ("′", Ord),
        "degree" => ("°", Ord),
        "top" => ("⊤", Ord),
        "bot" => ("⊥", Ord),
        "hbar" => ("ℏ", Ord),
        "ell" => ("ℓ", Ord),
        "Re" => ("ℜ", Ord),
        "Im" => ("ℑ", Ord),
        "aleph" => ("ℵ", Ord),
        "angle" => ("∠", Ord),
        "triangle" => ("△", Ord),
        "checkmark" => ("✓", Ord),
        "backslash" => ("\\", Ord),
        "S" => ("§", Ord),
        _ => return None,
    };
    Some(found)
}

// ---------------------------------------------------------------------------------------------
// Rendering
// ---------------------------------------------------------------------------------------------

/// Accumulates one line of output and applies TeX-like spacing: source white space is kept
/// (collapsed) except just inside brackets and before punctuation; relations are always spaced.
struct Writer {
    out: String,
    /// Inside scripts: no spaces at all.
    tight: bool,
    /// Something was written (possibly flushed into a box since).
    started: bool,
    /// The last atom was an operator word: space before a following letter.
    op_pending: bool,
    /// White space seen since the last atom.
    space_pending: bool,
    /// The last atom was an opening bracket.
    after_open: bool,
}

impl Writer {
    fn new(tight: bool) -> Self {
        Self {
            out: String::new(),
            tight,
            started: false,
            op_pending: false,
            space_pending: false,
            after_open: false,
        }
    }

    fn push(&mut self, s: &str) {
        self.out.push_str(s);
        self.started |= !s.is_empty();
    }

    fn push_space(&mut self) {
        if self.started && !self.out.ends_with(' ') {
            self.out.push(' ');
        }
    }

    fn space(&mut self) {
        self.space_pending = !self.tight;
    }

    fn atom(&mut self, s: &str, class: Class) {
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

    fn rel(&mut self, s: &str) {
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
    fn attach(&mut self, s: &str) {
        self.space_pending = false;
        self.push(s);
    }

    fn finish(self) -> String {
        self.out.trim().to_string()
    }
}

/// A rectangle of text for display math; `base` is the row that lines up with its neighbours.
struct Boxed {
    lines: Vec<String>,
    base: usize,
    width: usize,
    frac: bool,
}

impl Boxed {
    fn flat(s: String) -> Self {
        let width = s.width();
        Self {
            lines: vec![s],
            base: 0,
            width,
            frac: false,
        }
    }
}

fn emit(items: &[Item], w: &mut Writer, mut boxes: Option<&mut Vec<Boxed>>) {
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
fn is_unary(items: &[Item], i: usize) -> bool {
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
fn juxtaposed(items: &[Item], i: usize) -> bool {
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
fn spaced(items: &[Item], i: usize) -> bool {
    let before = i.checked_sub(1).and_then(|p| items.get(p));
    matches!(before, Some(Item::Space)) || matches!(items.get(i + 1), Some(Item::Space))
}

fn render_inline(items: &[Item], tight: bool) -> String {
    let mut w = Writer::new(tight);
    emit(items, &mut w, None);
    w.finish()
}

fn frac_inline(num: &[Item], den: &[Item]) -> String {
    let (n, d) = (render_inline(num, false), render_inline(den, false));
    let n = if is_product(&n) { n } else { format!("({n})") };
    let d = if is_atomic(&d) { d } else { format!("({d})") };
    format!("{n}/{d}")
}

/// A numerator that needs no brackets before `/`: factors only, like `2(N−1)` or `x²`.
fn is_product(s: &str) -> bool {
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
fn is_atomic(s: &str) -> bool {
    let base = s.trim_end_matches(is_script_char);
    let number = base.chars().all(|c| c.is_ascii_digit() || c == '.');
    let name = base
        .chars()
        .all(|c| c.is_alphabetic() || matches!(c, '∞' | '∂'));
    (!base.is_empty() && (number || name)) || is_wrapped(s)
}

/// Characters produced by [`superscript`] and [`subscript`], and primes.
fn is_script_char(c: char) -> bool {
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
fn is_wrapped(s: &str) -> bool {
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

fn sqrt(index: Option<&str>, arg: &[Item]) -> String {
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

fn accent(mark: char, name: &str, arg: &[Item]) -> String {
    let body = render_inline(arg, false);
    if body.chars().count() == 1 {
        format!("{body}{mark}")
    } else {
        format!("{name}({body})")
    }
}

/// A superscript (`sup`) or subscript in Unicode when every character has a form, else
/// `^x` / `^(…)`.
fn script(sup: bool, arg: &[Item]) -> String {
    let body = render_inline(arg, true);
    let map = if sup { superscript } else { subscript };
    let mapped: Option<String> = body.chars().map(map).collect();
    match mapped {
        Some(m) if !m.is_empty() => m,
        _ => {
            let mark = if sup { '^' } else { '_' };
            if body.chars().count() == 1 {
                format!("{mark}{body}")
            } else {
                format!("{mark}({body})")
            }
        }
    }
}

fn superscript(c: char) -> Option<char> {
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

fn subscript(c: char) -> Option<char> {
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
fn display_row(row: &[Item]) -> Vec<String> {
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

fn push_frac_box(stack: &mut Vec<Boxed>, w: &mut Writer, num: &[Item], den: &[Item]) {
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

fn centre(s: &str, s_width: usize, width: usize) -> String {
    let left = width.saturating_sub(s_width) / 2;
    let mut line = " ".repeat(left);
    line.push_str(s);
    pad(&mut line, width.saturating_sub(s_width + left));
    line
}

fn pad(line: &mut String, n: usize) {
    line.extend(std::iter::repeat_n(' ', n));
}

/// Lay boxes side by side, aligned on their base rows; every line gets the same width.
fn hcat(boxes: &[Boxed]) -> Vec<String> {
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
fn trim_columns(lines: &mut [String]) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fraction_inline() {
        assert_eq!(inline(r"\frac{N-1}{N}"), "(N−1)/N");
        assert_eq!(inline(r"\frac{1}{2}"), "1/2");
        assert_eq!(inline(r"2\cdot\frac{N-1}{N}\cdot M"), "2·(N−1)/N·M");
        assert_eq!(inline(r"\frac{(a+b)}{2}"), "(a+b)/2");
        assert_eq!(inline(r"2\frac{N-1}{N}S"), "2(N−1)/N·S");
        assert_eq!(inline(r"\frac{2(N-1)}{N}"), "2(N−1)/N");
        assert_eq!(inline(r"\frac{a}{2N}"), "a/(2N)");
        assert_eq!(inline(r"(r-1) \text{ mod } N"), "(r−1) mod N");
    }

    #[test]
    fn fraction_stacked() {
        let lines = display(r"2\cdot\frac{N-1}{N}\cdot M");
        assert_eq!(lines, vec!["   N−1   ", "2·─────·M", "    N    "]);
        let w = lines[0].width();
        assert!(lines.iter().all(|l| l.width() == w));
    }

    #[test]
    fn display_keeps_plain_formulas_on_one_line() {
        assert_eq!(display(r"T = \alpha + \beta n"), vec!["T = α + βn"]);
        assert_eq!(display(r"a \\ b = c"), vec!["a    ", "b = c"]);
        assert!(display("").is_empty());
    }

    #[test]
    fn display_nested_fraction_falls_back_inside() {
        let lines = display(r"x = \frac{1}{\frac{a}{b}}");
        assert_eq!(lines.len(), 3);
        assert!(lines[2].contains("a/b"), "{lines:?}");
        assert!(lines[1].starts_with("x = ─"), "{lines:?}");
    }

    #[test]
    fn scripts() {
        assert_eq!(inline("x^2"), "x²");
        assert_eq!(inline("a_i"), "aᵢ");
        assert_eq!(inline("p_{n}"), "pₙ");
        assert_eq!(inline("x^{N-1}"), "xᴺ⁻¹");
        assert_eq!(inline("x^q"), "x^q");
        assert_eq!(inline(r"e^{-\alpha t}"), "e^(−αt)");
        assert_eq!(inline("a_{i,j}"), "a_(i,j)");
    }

    #[test]
    fn sums_and_functions() {
        assert_eq!(inline(r"\sum_{i=1}^{N} x_i"), "∑ᵢ₌₁ᴺ xᵢ");
        assert_eq!(inline(r"\prod_i p_i"), "∏ᵢ pᵢ");
        assert_eq!(inline(r"\log_2 N"), "log₂ N");
        assert_eq!(inline(r"O(\log N)"), "O(log N)");
        assert_eq!(inline(r"\max(a, b)"), "max(a, b)");
    }

    #[test]
    fn greek_and_symbols() {
        assert_eq!(inline(r"\alpha\beta\gamma\Delta\Omega"), "αβγΔΩ");
        assert_eq!(inline(r"a \times b"), "a × b");
        assert_eq!(inline(r"n \to \infty"), "n → ∞");
        assert_eq!(inline(r"x \leftarrow y"), "x ← y");
        assert_eq!(inline(r"a\le b \ne c \approx d"), "a ≤ b ≠ c ≈ d");
        assert_eq!(inline(r"x_1, \ldots, x_n"), "x₁, …, xₙ");
        assert_eq!(inline(r"\lceil n/2 \rceil"), "⌈n/2⌉");
        assert_eq!(inline(r"\sqrt{N}"), "√N");
        assert_eq!(inline(r"\sqrt{a+b}"), "√(a+b)");
        assert_eq!(inline(r"\left( a \right)"), "(a)");
        assert_eq!(inline(r"\{1, 2\}"), "{1, 2}");
        assert_eq!(inline("a - b"), "a − b");
        assert_eq!(inline("-1"), "−1");
        assert_eq!(inline(r"a = -b"), "a = −b");
    }

    #[test]
    fn text_and_unknown() {
        assert_eq!(inline(r"\text{bus bw} = \frac{S}{t}"), "bus bw = S/t");
        assert_eq!(inline(r"\mathrm{GB}/\mathrm{s}"), "GB/s");
        assert_eq!(inline(r"\operatorname{argmax}_i x"), "argmaxᵢ x");
        assert_eq!(inline(r"\foo x"), "foox");
        assert_eq!(inline(r"a \quad b"), "a  b");
    }

    #[test]
    fn hostile_tex_does_not_panic() {
        for tex in [
            r"\frac",
            r"\frac{",
            "}}}{{{",
            r"\sqrt[",
            r"x^",
            r"\",
            r"\left",
            r"\text{",
            &"{".repeat(500),
            &r"\frac".repeat(500),
            &"x^".repeat(500),
        ] {
            let _ = inline(tex);
            let lines = display(tex);
            if let Some(first) = lines.first() {
                assert!(lines.iter().all(|l| l.width() == first.width()));
            }
        }
    }

    #[test]
    fn rewrite_keeps_code_and_lines() {
        let src = "a \\(x+1\\) b\n\n\\[\n\\frac{1}{2}\n\\]\n\n`\\(code\\)`\n\n```\n\\(fenced\\)\n```\n\n    \\(indented\\)\n";
        let out = rewrite_delimiters(src);
        assert_eq!(out.lines().count(), src.lines().count());
        assert!(
            out.starts_with("a $x+1$ b\n\n$$\n\\frac{1}{2}\n$$\n"),
            "{out}"
        );
        assert!(out.contains("`\\(code\\)`"));
        assert!(out.contains("\\(fenced\\)"));
        assert!(out.contains("    \\(indented\\)"));
        assert_eq!(rewrite_delimiters(r"\\(not math\\)"), r"\\(not math\\)");
        assert_eq!(rewrite_delimiters(r"\( x \)"), "$x$");
        assert_eq!(rewrite_delimiters(r"no \( closer"), r"no \( closer");
    }

    #[test]
    fn unclosed_detection() {
        assert!(unclosed("$a$ and $$b$$ and \\(c\\) and \\[d\\]").is_empty());
        assert!(unclosed("costs \\$5").is_empty());
        assert!(unclosed("$5 and $6").is_empty());
        assert!(unclosed("`$` and\n```\n$\n```\n").is_empty());
        assert!(unclosed("$$\na\n$$\n").is_empty());

        let found = unclosed("ok\ncosts $5 today");
        assert_eq!(found.len(), 1);
        assert_eq!((found[0].0, found[0].1), (2, 7));
        assert_eq!(found[0].2, "unclosed inline math `$` (opened here)");

        let found = unclosed("é \\(x\n");
        assert_eq!((found[0].0, found[0].1), (1, 3));
        assert!(found[0].2.contains("`\\(`"));

        let found = unclosed("$$\na\n\nb");
        assert_eq!((found[0].0, found[0].1), (1, 1));
        assert!(found[0].2.contains("display"));

        let found = unclosed("text \\[ x");
        assert_eq!(found.len(), 1);
        assert!(found[0].2.contains("`\\[`"));
    }
}
