//! Property: whatever the Markdown and whatever the width (20..300), rendering never panics
//! and no rendered line is wider than the width.

use proptest::prelude::*;
use ringlab::tui::markdown::{RenderOptions, render};
use ringlab::tui::theme::Theme;

/// Markdown-ish building blocks, glued together in random order.
fn fragment() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("# Heading one\n".to_string()),
        Just("## Heading *two* with `code`\n".to_string()),
        Just("- item\n  - nested item\n    1. deep ordered\n".to_string()),
        Just("1. first\n2. second\n\n".to_string()),
        Just("- [ ] task\n- [x] done\n".to_string()),
        Just("> quote\n> > nested quote with **bold**\n".to_string()),
        Just("| a | b | c |\n|:--|:-:|--:|\n| 1 | 2 | 3 |\n".to_string()),
        Just("| x |\n|---|\n| a-very-long-cell-without-any-spaces-at-all-in-it |\n".to_string()),
        Just("```rust\nfn main() { println!(\"hi\"); }\n```\n".to_string()),
        Just(
            "```\n\tindented\twith tabs and a very long line that goes on and on and on\n```\n"
                .to_string()
        ),
        Just("```ring\nranks = 8\n```\n".to_string()),
        Just("```ring\nranks = \n```\n".to_string()),
        Just("```quiz\nid = \"q\"\ntype = \"mcq\"\nprompt = \"Why?\"\n```\n".to_string()),
        Just("    indented code block\n".to_string()),
        Just("$\\frac{N-1}{N}$ and $x^2_i$ ".to_string()),
        Just("$$\\sum_{i=1}^{N} \\frac{a_i}{b_i} = \\frac{1}{2}$$\n".to_string()),
        Just("\\[ \\frac{\\frac{a}{b}}{c} \\]\n".to_string()),
        Just("\\( \\alpha \\to \\beta \\)".to_string()),
        Just("[link](https://example.com/a/very/long/url/that/needs/breaking) ".to_string()),
        Just("[internal](other-lesson.md) ".to_string()),
        Just("![alt text](img.png) ".to_string()),
        Just("---\n".to_string()),
        Just("<div>html</div>\n".to_string()),
        Just("line with hard break  \nnext ".to_string()),
        Just("全角の文字列と絵文字😀👨‍👩‍👧‍👦☺️🇺🇸 ".to_string()),
        Just("e\u{301}\u{302}\u{303} combining ".to_string()),
        Just("\n\n".to_string()),
        "[a-z ]{0,40}",
        "[a-zA-Z0-9]{30,120}",
        "[\\PC]{0,30}",
        "[-*_`$#>|\\\\\\[\\](){} \n\t]{0,20}",
    ]
}

fn markdown() -> impl Strategy<Value = String> {
    prop::collection::vec(fragment(), 0..12).prop_map(|parts| parts.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn lines_never_exceed_the_width(md in markdown(), width in 20u16..300, mono: bool, raw_tex: bool) {
        let theme = if mono { Theme::mono() } else { Theme::color() };
        let rendered = render(&md, &RenderOptions { width, theme: &theme, raw_tex, slides: false });
        for (i, line) in rendered.lines.iter().enumerate() {
            prop_assert!(
                line.width() <= usize::from(width),
                "line {} is {} wide (max {}): {:?}", i, line.width(), width, line
            );
        }
        for embed in &rendered.embeds {
            prop_assert!(embed.line + embed.height <= rendered.lines.len());
        }
        for heading in &rendered.headings {
            prop_assert!(heading.line <= rendered.lines.len());
        }
    }

    #[test]
    fn arbitrary_text_never_panics(md in "\\PC{0,400}", width in 20u16..300) {
        let theme = Theme::color();
        let rendered = render(&md, &RenderOptions { width, theme: &theme, raw_tex: false, slides: false });
        for line in &rendered.lines {
            prop_assert!(line.width() <= usize::from(width));
        }
    }
}
