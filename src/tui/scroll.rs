//! A pane whose text can outgrow it: wrapped (each line keeping its indent), shown from a first
//! row the screen keeps, paged by the window's real height, with a last row that says which
//! rows are in view and how to move. One helper for every screen that scrolls a pane, so
//! `PgDn` means the same everywhere and no row is ever out of reach.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::Line;
use ratatui::widgets::{Paragraph, Wrap};

use crate::tui::theme::Theme;

/// Text laid out in an area: what a screen's update (to page) and render (to draw) both read.
pub struct Pane {
    text: Paragraph<'static>,
    area: Rect,
    /// Rows the text takes at the area's width.
    rows: u16,
}

impl Pane {
    /// `lines` wrapped to `area`'s width, each wrapped line keeping its indent.
    pub fn new(lines: Vec<Line<'static>>, area: Rect) -> Self {
        let lines = crate::tui::markdown::keep_indent(lines, area.width.max(1) as usize);
        let text = Paragraph::new(lines).wrap(Wrap { trim: false });
        let rows = u16::try_from(text.line_count(area.width.max(1))).unwrap_or(u16::MAX);
        Self { text, area, rows }
    }

    /// Rows the text takes.
    pub fn rows(&self) -> u16 {
        self.rows
    }

    /// Does every row fit without scrolling?
    pub fn fits(&self) -> bool {
        self.rows <= self.area.height
    }

    /// Rows of text in view: the area, less the position row when the text does not fit.
    pub fn view(&self) -> u16 {
        if self.fits() {
            self.area.height
        } else {
            self.area.height.saturating_sub(1).max(1)
        }
    }

    /// The furthest first row: the last window ends on the last row.
    pub fn max_top(&self) -> u16 {
        if self.fits() {
            0
        } else {
            self.rows.saturating_sub(self.view())
        }
    }

    /// The first row after `d` pages from `top`: a page is the window's height less one row
    /// kept in view for context, so paging down shows every row and loses no place.
    pub fn page(&self, top: u16, d: i32) -> u16 {
        let step = i32::from(self.view().saturating_sub(1).max(1));
        let to = i32::from(top.min(self.max_top())) + step.saturating_mul(d);
        to.clamp(0, i32::from(self.max_top())) as u16
    }

    /// Draw the text from row `top` (clamped); when it does not fit, the last row says
    /// "── `what` lines a–b of n · PgDn/PgUp scroll".
    pub fn render(self, top: u16, what: &str, t: &Theme, frame: &mut Frame) {
        if self.fits() {
            frame.render_widget(self.text, self.area);
            return;
        }
        let (view, rows) = (self.view(), self.rows);
        let top = top.min(self.max_top());
        let [text, bar] =
            Layout::vertical([Constraint::Length(view), Constraint::Length(1)]).areas(self.area);
        frame.render_widget(self.text.scroll((top, 0)), text);
        let (a, b) = (top + 1, (top + view).min(rows));
        // The longest wording that fits the pane's width.
        let said = [
            format!(" ── {what} lines {a}–{b} of {rows} · PgDn/PgUp scroll"),
            format!(" ── {what} {a}–{b} of {rows} · PgDn/PgUp"),
            format!(" {a}–{b} of {rows} · PgDn/PgUp"),
        ]
        .into_iter()
        .find(|x| unicode_width::UnicodeWidthStr::width(x.as_str()) <= usize::from(bar.width))
        .unwrap_or_else(|| format!(" {a}–{b}/{rows}"));
        frame.render_widget(Paragraph::new(Line::styled(said, t.dim)), bar);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pane(n: usize, height: u16) -> Pane {
        let lines = (0..n).map(|i| Line::raw(format!("line {i}"))).collect();
        Pane::new(lines, Rect::new(0, 0, 60, height))
    }

    #[test]
    fn paging_down_shows_every_row_and_stops_at_the_last() {
        for (n, h) in [(47, 5), (47, 15), (10, 3), (3, 10), (100, 2)] {
            let p = pane(n, h);
            let mut seen = vec![false; n];
            let mut top = 0;
            loop {
                let end = (top + p.view()).min(p.rows()) as usize;
                seen[top as usize..end].iter_mut().for_each(|s| *s = true);
                let next = p.page(top, 1);
                if next == top {
                    break;
                }
                assert!(
                    next - top < p.view().max(2),
                    "{n} rows in {h}: a page skips"
                );
                top = next;
            }
            assert!(seen.iter().all(|s| *s), "{n} rows in {h}: {seen:?}");
            assert_eq!(top, p.max_top(), "{n} rows in {h} ends on the last row");
            assert_eq!(p.page(top, -100), 0);
        }
    }

    #[test]
    fn the_last_row_says_where_the_view_is() {
        let mut term =
            ratatui::Terminal::new(ratatui::backend::TestBackend::new(60, 5)).expect("terminal");
        term.draw(|f| pane(12, 5).render(3, "story", &Theme::mono(), f))
            .expect("draw");
        let text = format!("{}", term.backend());
        assert!(text.contains("line 3"), "{text}");
        assert!(!text.contains("line 2"), "{text}");
        assert!(
            text.contains("story lines 4–7 of 12 · PgDn/PgUp scroll"),
            "{text}"
        );
    }
}
