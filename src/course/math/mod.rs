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

mod delimiters;
mod layout;
mod parse;

pub use delimiters::{rewrite_delimiters, unclosed};
pub use layout::{display, inline};
// The layout reads the parser's items.
use parse::*;

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
        // Word labels render one way, whichever letters Unicode has subscripts for.
        assert_eq!(inline(r"T_{\text{ring}}"), "T_ring");
        assert_eq!(inline(r"T_{\text{tree}}"), "T_tree");
        assert_eq!(inline("N_{nodes}"), "N_nodes");
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
