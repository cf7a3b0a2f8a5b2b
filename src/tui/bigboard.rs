//! Phase boards a class can read from the back of the room: while a presentation is running,
//! the lab and hang-lab boards set each rank's line in large type (tui-big-text, quadrant
//! pixels: a character becomes 4 columns by 4 rows) when the rows fit, and otherwise in normal
//! type with a blank line between ranks.

use ratatui::Frame;
use ratatui::layout::{Alignment, Rect};
use ratatui::style::Style;
use ratatui::text::Line;
use ratatui::widgets::Paragraph;
use tui_big_text::{BigText, PixelSize};

/// Columns and rows one character takes in large type.
pub const GLYPH_W: u16 = 4;
pub const GLYPH_H: u16 = 4;

/// Rows of large type fit `area` when every row is at most this many characters.
pub fn fits(rows: &[(String, Style)], area: Rect) -> bool {
    let longest = rows
        .iter()
        .map(|(text, _)| text.chars().count() as u16)
        .max()
        .unwrap_or(0);
    !rows.is_empty()
        && longest.saturating_mul(GLYPH_W) <= area.width
        && (rows.len() as u16).saturating_mul(GLYPH_H) <= area.height
}

/// Draw `rows` (one per rank: short text and its style) into `area`, large when they fit.
pub fn render(frame: &mut Frame, area: Rect, rows: &[(String, Style)]) {
    if fits(rows, area) {
        for (i, (text, style)) in rows.iter().enumerate() {
            let at = Rect::new(area.x, area.y + i as u16 * GLYPH_H, area.width, GLYPH_H);
            frame.render_widget(
                BigText::builder()
                    .pixel_size(PixelSize::Quadrant)
                    .style(*style)
                    .lines(vec![Line::from(text.clone())])
                    .alignment(Alignment::Left)
                    .build(),
                at,
            );
        }
        return;
    }
    let mut lines = Vec::new();
    for (text, style) in rows {
        lines.push(Line::styled(format!(" {text}"), *style));
        lines.push(Line::raw(""));
    }
    frame.render_widget(Paragraph::new(lines), area);
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;

    fn draw(rows: &[(String, Style)], w: u16, h: u16) -> String {
        let mut term = Terminal::new(TestBackend::new(w, h)).expect("terminal");
        term.draw(|f| render(f, f.area(), rows)).expect("draw");
        format!("{}", term.backend())
    }

    #[test]
    fn rows_that_fit_are_set_large_and_others_fall_back_to_spaced_lines() {
        let rows = vec![
            ("R0 done".to_string(), Style::default()),
            ("R1 all-reduce".to_string(), Style::default()),
        ];
        // 13 characters × 4 columns, 2 rows × 4 lines.
        assert!(fits(&rows, Rect::new(0, 0, 52, 8)));
        assert!(!fits(&rows, Rect::new(0, 0, 51, 8)));
        assert!(!fits(&rows, Rect::new(0, 0, 52, 7)));
        let big = draw(&rows, 60, 8);
        assert!(
            !big.contains("R1 all-reduce"),
            "large type is drawn with block pixels, not the letters: {big}"
        );
        assert!(
            big.chars()
                .any(|c| ('\u{2596}'..='\u{259f}').contains(&c) || c == '█'),
            "{big}"
        );
        let small = draw(&rows, 40, 8);
        assert!(small.contains("R1 all-reduce"), "{small}");
    }
}
