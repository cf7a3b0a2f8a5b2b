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
    /// For slides (presenter mode): live blocks worded for a projector.
    pub slides: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeadingRef {
    /// Index into `Rendered::lines`.
    pub line: usize,
    pub level: u8,
    pub title: String,
    /// Rows the heading takes: its wrapped title and the rule under a level 1 or 2 heading.
    pub rows: usize,
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

/// Styled text word-wrapped to `width` columns under a hanging indent: the first line starts
/// with `lead` (a choice letter, a bullet) and the lines after it with as many spaces, so the
/// text keeps its column when it wraps (quiz choices, summaries).
pub fn hanging(lead: Span<'static>, body: Vec<Span<'static>>, width: usize) -> Vec<Line<'static>> {
    let indent = lead.width();
    let frags: Vec<Frag> = body
        .into_iter()
        .map(|s| Frag::Text(s.content.into_owned(), s.style))
        .collect();
    let mut rows = wrap(&frags, width.saturating_sub(indent).max(1));
    if rows.is_empty() {
        rows.push(Vec::new());
    }
    rows.into_iter()
        .enumerate()
        .map(|(i, mut spans)| {
            let head = if i == 0 {
                lead.clone()
            } else {
                Span::raw(" ".repeat(indent))
            };
            spans.insert(0, head);
            Line::from(spans)
        })
        .collect()
}

/// Lines wrapped to `width` where they are longer, each keeping its own indent: a wrapped row
/// continues under the text after the leading spaces and a leading mark ("✓ ", "✗ ", "! ",
/// "- ", "• ", "hint: "), not at column 0 (log lines, evidence, verdicts). A line's own style
/// is carried onto its spans.
pub fn keep_indent(lines: Vec<Line<'static>>, width: usize) -> Vec<Line<'static>> {
    const MARKS: [&str; 6] = ["✓ ", "✗ ", "! ", "- ", "• ", "hint: "];
    let mut out = Vec::with_capacity(lines.len());
    for line in lines {
        // An aligned row (a table's columns, two spaces or more inside it) is left whole:
        // wrapping would collapse its columns.
        let text: String = line.spans.iter().map(|s| s.content.as_ref()).collect();
        let aligned = text.trim().contains("  ");
        if line.width() <= width || width < 8 || aligned {
            out.push(line);
            continue;
        }
        let base = line.style;
        let mut spans: Vec<Span<'static>> = line
            .spans
            .into_iter()
            .map(|s| Span::styled(s.content, base.patch(s.style)))
            .collect();
        let Some(first) = spans.first_mut() else {
            out.push(Line::default());
            continue;
        };
        let text = first.content.to_string();
        let body = text.trim_start_matches(' ');
        let mut lead = " ".repeat(text.len() - body.len());
        // A numbered item ("12. ") hangs under its text too.
        let numbered = body
            .split_once(". ")
            .filter(|(n, _)| !n.is_empty() && n.len() <= 3 && n.chars().all(|c| c.is_ascii_digit()))
            .map(|(n, _)| n.len() + 2);
        let rest = match (MARKS.iter().find(|m| body.starts_with(*m)), numbered) {
            (Some(m), _) => {
                lead.push_str(m);
                &body[m.len()..]
            }
            (None, Some(k)) => {
                lead.push_str(&body[..k]);
                &body[k..]
            }
            (None, None) => body,
        };
        let lead_span = Span::styled(lead, first.style);
        *first = Span::styled(rest.to_string(), first.style);
        // A lead as wide as the line would leave no room: wrap without one.
        if lead_span.width() * 2 > width {
            out.extend(hanging(
                Span::raw(""),
                {
                    let mut v = vec![lead_span];
                    v.extend(spans);
                    v
                },
                width,
            ));
        } else {
            out.extend(hanging(lead_span, spans, width));
        }
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

mod highlight;
mod render;
mod wrap;

use highlight::*;
pub use highlight::{defer_highlighting, highlighting_ready, preload_highlighting};
pub use render::LINK_MARK;
use render::*;
use wrap::*;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keep_indent_wraps_under_the_text_after_the_indent_and_mark() {
        let lines = vec![
            Line::raw("    [rank 1] INFO socketPollConnect: connect to 172.17.0.1<45947> returned"),
            Line::raw(" ✓ PASS with the fix: the all-reduce of ones gave the world size"),
            Line::raw(" 2. All-gather, N−1 steps: the finished chunks travel on"),
            Line::raw(" short"),
        ];
        let text: Vec<String> = keep_indent(lines, 40)
            .iter()
            .map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect())
            .collect();
        assert_eq!(
            text,
            [
                "    [rank 1] INFO socketPollConnect:",
                "    connect to 172.17.0.1<45947>",
                "    returned",
                " ✓ PASS with the fix: the all-reduce of",
                "   ones gave the world size",
                " 2. All-gather, N−1 steps: the finished",
                "    chunks travel on",
                " short",
            ]
        );
    }
    use crate::course::block::RingBlock;

    fn render_with(md: &str, width: u16, theme: &Theme) -> Rendered {
        render(
            md,
            &RenderOptions {
                width,
                theme,
                raw_tex: false,
                slides: false,
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
                title: "Ring all-reduce".into(),
                rows: 2,
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

    /// A narrow table shrinks its widest columns down to their longest word, not through it
    /// ("reduce-scatt" / "er" was the bug).
    #[test]
    fn a_narrow_table_keeps_its_words_whole() {
        let md = "| collective | input | output | user | bytes |\n|---|---|---|---|---|\n\
                  | reduce-scatter | full buffer | rank r: piece r | FSDP grads | (n−1)/n |\n\
                  | all-gather | piece r | full buffer on every rank | FSDP params | (n−1)/n |\n";
        let r = render_with(md, 60, &Theme::color());
        assert_fits(&r, 60);
        let text = plain_lines(&r).join("\n");
        assert!(text.contains("reduce-scatter"), "{text}");
        for word in ["full", "buffer", "piece", "every", "params", "(n−1)/n"] {
            assert!(text.contains(word), "{word} cut:\n{text}");
        }
    }

    /// A code row ends after a space where it can: a comment's word moves down whole.
    #[test]
    fn code_lines_wrap_after_a_space_not_inside_a_word() {
        let md = "```python\ntorch.cuda.set_device(device)   # one GPU per process\n```";
        for theme in [Theme::color(), Theme::mono()] {
            let r = render_with(md, 54, &theme);
            assert_fits(&r, 54);
            let lines = plain_lines(&r);
            assert_eq!(
                lines[0].trim_end(),
                "  │ torch.cuda.set_device(device)   # one GPU per",
                "{lines:?}"
            );
            assert_eq!(lines[1].trim_end(), "  ┆ process", "{lines:?}");
        }
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
                slides: false,
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

    #[test]
    fn hanging_text_wraps_under_its_first_word() {
        let lines = hanging(
            Span::raw("  b) "),
            vec![
                Span::raw("NCCL picks the first interface that is "),
                Span::styled(
                    "not lo or docker0",
                    Style::default().add_modifier(Modifier::BOLD),
                ),
            ],
            24,
        );
        let text: Vec<String> = lines
            .iter()
            .map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect())
            .collect();
        assert!(text.len() >= 3, "{text:#?}");
        assert!(text[0].starts_with("  b) NCCL"), "{text:#?}");
        for l in &text[1..] {
            // Continuation lines start in the text's column, five spaces in.
            assert!(
                l.starts_with("     ") && !l[5..].starts_with(' '),
                "{text:#?}"
            );
        }
        assert!(lines.iter().all(|l| l.width() <= 24), "{text:#?}");
        // The styled words keep their style.
        assert!(lines.iter().flat_map(|l| &l.spans).any(
            |s| s.content.contains("docker0") && s.style.add_modifier.contains(Modifier::BOLD)
        ));
    }
}
