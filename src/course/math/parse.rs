//! The TeX subset parsed into items: symbols, Greek, scripts, fractions, roots, `\text`,
//! accents and spacing; unknown commands kept by name.

use super::*;

/// How an atom spaces against its neighbours.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Class {
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
pub(super) enum Item {
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

pub(super) fn sym(s: &'static str, class: Class) -> Item {
    Item::Sym(Cow::Borrowed(s), class)
}

/// Nesting limit: deeper groups are kept as raw text so hostile input cannot overflow the stack.
pub(super) const MAX_DEPTH: usize = 24;

pub(super) struct TexParser {
    pub(super) chars: Vec<char>,
    pub(super) pos: usize,
    pub(super) depth: usize,
}

pub(super) fn parse(tex: &str) -> Vec<Item> {
    let mut p = TexParser {
        chars: tex.chars().collect(),
        pos: 0,
        depth: 0,
    };
    p.seq(false)
}

impl TexParser {
    pub(super) fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    pub(super) fn skip_ws(&mut self) {
        while self.peek().is_some_and(char::is_whitespace) {
            self.pos += 1;
        }
    }

    /// Items up to the end, or up to the `}` closing the current group.
    pub(super) fn seq(&mut self, in_group: bool) -> Vec<Item> {
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
    pub(super) fn item(&mut self) -> Option<Item> {
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
    pub(super) fn group(&mut self) -> Vec<Item> {
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
    pub(super) fn raw_group(&mut self) -> String {
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
    pub(super) fn arg(&mut self) -> Vec<Item> {
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
    pub(super) fn raw_arg(&mut self) -> String {
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
    pub(super) fn optional(&mut self) -> Option<String> {
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
    pub(super) fn command(&mut self) -> Option<Item> {
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

    pub(super) fn control_word(&mut self, name: &str) -> Option<Item> {
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
    pub(super) fn negated(&mut self) -> Option<Item> {
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
pub(super) fn control_symbol(c: char) -> Option<Item> {
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
pub(super) fn clean_text(raw: &str) -> String {
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

pub(super) fn double_struck(raw: &str) -> String {
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

pub(super) fn is_function(name: &str) -> bool {
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

/// Named symbols: Greek, operators, relations, arrows, delimiters (name, text, class; an
/// alias is a row of its own).
const SYMBOLS: &[(&str, &str, Class)] = {
    use Class::*;
    &[
        // / Named symbols: Greek, operators, relations, arrows, delimiters.
        // Greek, lower case
        ("alpha", "α", Ord),
        ("beta", "β", Ord),
        ("gamma", "γ", Ord),
        ("delta", "δ", Ord),
        ("epsilon", "ε", Ord),
        ("varepsilon", "ε", Ord),
        ("zeta", "ζ", Ord),
        ("eta", "η", Ord),
        ("theta", "θ", Ord),
        ("vartheta", "ϑ", Ord),
        ("iota", "ι", Ord),
        ("kappa", "κ", Ord),
        ("lambda", "λ", Ord),
        ("mu", "μ", Ord),
        ("nu", "ν", Ord),
        ("xi", "ξ", Ord),
        ("omicron", "ο", Ord),
        ("pi", "π", Ord),
        ("varpi", "ϖ", Ord),
        ("rho", "ρ", Ord),
        ("varrho", "ϱ", Ord),
        ("sigma", "σ", Ord),
        ("varsigma", "ς", Ord),
        ("tau", "τ", Ord),
        ("upsilon", "υ", Ord),
        ("phi", "φ", Ord),
        ("varphi", "φ", Ord),
        ("chi", "χ", Ord),
        ("psi", "ψ", Ord),
        ("omega", "ω", Ord),
        // Greek, upper case
        ("Gamma", "Γ", Ord),
        ("Delta", "Δ", Ord),
        ("Theta", "Θ", Ord),
        ("Lambda", "Λ", Ord),
        ("Xi", "Ξ", Ord),
        ("Pi", "Π", Ord),
        ("Sigma", "Σ", Ord),
        ("Upsilon", "Υ", Ord),
        ("Phi", "Φ", Ord),
        ("Psi", "Ψ", Ord),
        ("Omega", "Ω", Ord),
        // big operators
        ("sum", "∑", Op),
        ("prod", "∏", Op),
        ("coprod", "∐", Op),
        ("int", "∫", Op),
        ("iint", "∬", Op),
        ("oint", "∮", Op),
        ("bigcup", "⋃", Op),
        ("bigcap", "⋂", Op),
        ("bigoplus", "⊕", Op),
        ("bigotimes", "⊗", Op),
        // binary operators
        ("times", "×", Bin),
        ("cdot", "·", Bin),
        ("cdotp", "·", Bin),
        ("pm", "±", Bin),
        ("mp", "∓", Bin),
        ("div", "÷", Bin),
        ("ast", "∗", Bin),
        ("star", "⋆", Bin),
        ("circ", "∘", Bin),
        ("bullet", "•", Bin),
        ("oplus", "⊕", Bin),
        ("otimes", "⊗", Bin),
        ("cup", "∪", Bin),
        ("cap", "∩", Bin),
        ("setminus", "∖", Bin),
        ("wedge", "∧", Bin),
        ("land", "∧", Bin),
        ("vee", "∨", Bin),
        ("lor", "∨", Bin),
        // relations and arrows
        ("to", "→", Rel),
        ("rightarrow", "→", Rel),
        ("leftarrow", "←", Rel),
        ("gets", "←", Rel),
        ("leftrightarrow", "↔", Rel),
        ("Rightarrow", "⇒", Rel),
        ("Leftarrow", "⇐", Rel),
        ("Leftrightarrow", "⇔", Rel),
        ("implies", "⟹", Rel),
        ("Longrightarrow", "⟹", Rel),
        ("impliedby", "⟸", Rel),
        ("Longleftarrow", "⟸", Rel),
        ("iff", "⟺", Rel),
        ("Longleftrightarrow", "⟺", Rel),
        ("longrightarrow", "⟶", Rel),
        ("longleftarrow", "⟵", Rel),
        ("mapsto", "↦", Rel),
        ("uparrow", "↑", Rel),
        ("downarrow", "↓", Rel),
        ("approx", "≈", Rel),
        ("le", "≤", Rel),
        ("leq", "≤", Rel),
        ("leqslant", "≤", Rel),
        ("ge", "≥", Rel),
        ("geq", "≥", Rel),
        ("geqslant", "≥", Rel),
        ("ne", "≠", Rel),
        ("neq", "≠", Rel),
        ("lt", "<", Rel),
        ("gt", ">", Rel),
        ("equiv", "≡", Rel),
        ("sim", "∼", Rel),
        ("simeq", "≃", Rel),
        ("cong", "≅", Rel),
        ("propto", "∝", Rel),
        ("in", "∈", Rel),
        ("notin", "∉", Rel),
        ("ni", "∋", Rel),
        ("subset", "⊂", Rel),
        ("subseteq", "⊆", Rel),
        ("supset", "⊃", Rel),
        ("supseteq", "⊇", Rel),
        ("ll", "≪", Rel),
        ("gg", "≫", Rel),
        ("mid", "∣", Rel),
        ("parallel", "∥", Rel),
        ("perp", "⊥", Rel),
        ("coloneqq", "≔", Rel),
        ("coloneq", "≔", Rel),
        ("doteq", "≐", Rel),
        ("prec", "≺", Rel),
        ("succ", "≻", Rel),
        // delimiters
        ("lceil", "⌈", Open),
        ("rceil", "⌉", Punct),
        ("lfloor", "⌊", Open),
        ("rfloor", "⌋", Punct),
        ("langle", "⟨", Open),
        ("rangle", "⟩", Punct),
        ("lvert", "|", Ord),
        ("vert", "|", Ord),
        ("rvert", "|", Punct),
        ("lVert", "‖", Ord),
        ("Vert", "‖", Ord),
        ("rVert", "‖", Punct),
        ("lbrace", "{", Open),
        ("rbrace", "}", Punct),
        ("lbrack", "[", Open),
        ("rbrack", "]", Punct),
        ("colon", ":", Punct),
        // everything else
        ("infty", "∞", Ord),
        ("ldots", "…", Ord),
        ("dots", "…", Ord),
        ("cdots", "…", Ord),
        ("dotsc", "…", Ord),
        ("dotsb", "…", Ord),
        ("vdots", "⋮", Ord),
        ("ddots", "⋱", Ord),
        ("partial", "∂", Ord),
        ("nabla", "∇", Ord),
        ("forall", "∀", Ord),
        ("exists", "∃", Ord),
        ("neg", "¬", Ord),
        ("lnot", "¬", Ord),
        ("emptyset", "∅", Ord),
        ("varnothing", "∅", Ord),
        ("prime", "′", Ord),
        ("degree", "°", Ord),
        ("top", "⊤", Ord),
        ("bot", "⊥", Ord),
        ("hbar", "ℏ", Ord),
        ("ell", "ℓ", Ord),
        ("Re", "ℜ", Ord),
        ("Im", "ℑ", Ord),
        ("aleph", "ℵ", Ord),
        ("angle", "∠", Ord),
        ("triangle", "△", Ord),
        ("checkmark", "✓", Ord),
        ("backslash", "\\", Ord),
        ("S", "§", Ord),
    ]
};

/// A named symbol's text and class.
pub(super) fn symbol(name: &str) -> Option<(&'static str, Class)> {
    SYMBOLS
        .iter()
        .find(|(n, _, _)| *n == name)
        .map(|&(_, text, class)| (text, class))
}
