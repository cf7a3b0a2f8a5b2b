//! Width-aware Markdown → ratatui lines. STUB: owned by the markdown/math helper; replace wholesale.

use ratatui::text::Line;

use crate::course::Block;
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
}

pub fn render(markdown: &str, opts: &RenderOptions) -> Rendered {
    let _ = opts;
    Rendered {
        lines: markdown
            .lines()
            .map(|l| Line::from(l.to_string()))
            .collect(),
        ..Default::default()
    }
}
