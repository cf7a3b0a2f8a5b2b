//! The `?` overlay: every binding of the focused screen, from the same table as the hint bar.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph};

use crate::tui::app::App;
use crate::tui::keys::{self, Context};
use crate::tui::markdown;

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct HelpState {
    pub scroll: usize,
    /// The last messages (`m`) instead of the keys.
    pub messages: bool,
}

/// A notice that stays until a key dismisses it: boxed at the foot of `area`, whole.
pub fn render_notice(notice: &str, app: &App, frame: &mut Frame, area: Rect) {
    let t = &app.theme;
    let inner = area.width.saturating_sub(2) as usize;
    let lines = markdown::hanging(
        Span::styled("! ", t.warn),
        vec![Span::styled(notice.to_string(), t.warn)],
        inner,
    );
    let h = (lines.len() as u16 + 2).min(area.height);
    let r = Rect::new(area.x, area.bottom().saturating_sub(h), area.width, h);
    frame.render_widget(Clear, r);
    frame.render_widget(
        Paragraph::new(lines).block(
            Block::default()
                .borders(Borders::ALL)
                .border_style(t.warn)
                .title(Span::styled(" Notice ", t.title))
                .title_bottom(Span::styled(
                    " any key dismisses it (m shows it again) ",
                    t.accent,
                )),
        ),
        r,
    );
}

pub fn render(state: &HelpState, app: &App, frame: &mut Frame, area: Rect) {
    if state.messages {
        return render_messages(state, app, frame, area);
    }
    let t = &app.theme;
    // The screen underneath decides which bindings matter.
    let under: Vec<Context> = app
        .stack
        .last()
        .map_or_else(Vec::new, |s| s.view().help_contexts());
    let own = [
        crate::tui::screens::OPENER_KEYS,
        app.stack.last().map_or(&[][..], |s| s.keys()),
    ];
    let mut lines = Vec::new();
    let mut last = None;
    // The key column is as wide as its widest label (every key of a binding is listed).
    let col = keys::active(&own, &under)
        .map(|b| b.label().chars().count() + 1)
        .max()
        .unwrap_or(12)
        .clamp(12, 24);
    // As wide as the longest binding needs (a presenter's key list is long), up to the screen;
    // a description that still does not fit wraps under its own column.
    let widest = keys::active(&own, &under)
        .map(|b| 2 + col + b.desc.chars().count())
        .max()
        .unwrap_or(40);
    let w = area.width.min((widest as u16 + 2).max(60));
    let inner = w.saturating_sub(2) as usize;
    for b in keys::active(&own, &under) {
        if last != Some(b.ctx) {
            if last.is_some() {
                lines.push(Line::raw(""));
            }
            lines.push(Line::styled(b.ctx.title(), t.h2));
            last = Some(b.ctx);
        }
        lines.extend(markdown::hanging(
            Span::styled(format!("  {:<col$}", b.label()), t.key),
            vec![Span::raw(b.desc)],
            inner,
        ));
    }
    lines.push(Line::raw(""));
    lines.push(Line::styled(
        "Mouse wheel scrolls. Esc or ? closes this help.",
        t.dim,
    ));
    boxed(" Keys ", lines, w, state, app, frame, area);
}

/// The last messages, newest first, each whole (wrapped under its bullet).
fn render_messages(state: &HelpState, app: &App, frame: &mut Frame, area: Rect) {
    let t = &app.theme;
    let w = area.width.min(100);
    let inner = w.saturating_sub(2) as usize;
    let mut lines = Vec::new();
    if app.messages.is_empty() {
        lines.push(Line::styled("No messages yet.", t.dim));
    }
    for m in app.messages.iter().rev() {
        lines.extend(markdown::hanging(
            Span::styled("• ", t.accent),
            vec![Span::raw(m.clone())],
            inner,
        ));
    }
    lines.push(Line::raw(""));
    lines.push(Line::styled(
        "Newest first. j/k scroll. Esc or m closes.",
        t.dim,
    ));
    boxed(" Messages ", lines, w, state, app, frame, area);
}

/// `lines` in a box `w` wide, centred in `area`, scrolled by `state` (j/k).
fn boxed(
    title: &'static str,
    lines: Vec<Line<'static>>,
    w: u16,
    state: &HelpState,
    app: &App,
    frame: &mut Frame,
    area: Rect,
) {
    let t = &app.theme;
    let h = area.height.min(lines.len() as u16 + 2);
    let r = Rect::new(
        area.x + (area.width - w) / 2,
        area.y + (area.height - h) / 2,
        w,
        h,
    );
    let max_scroll = lines.len().saturating_sub(h.saturating_sub(2) as usize);
    let scroll = state.scroll.min(max_scroll);
    // Say so when keys are above or below the box: the overlay scrolls with j/k.
    let more = match (scroll > 0, scroll < max_scroll) {
        (false, true) => " ↓ more: j ",
        (true, true) => " ↑↓ more: k/j ",
        (true, false) => " ↑ more: k ",
        (false, false) => "",
    };
    frame.render_widget(Clear, r);
    frame.render_widget(
        Paragraph::new(lines).scroll((scroll as u16, 0)).block(
            Block::default()
                .borders(Borders::ALL)
                .border_style(t.border)
                .title(Span::styled(title, t.title))
                .title_bottom(Span::styled(more, t.accent)),
        ),
        r,
    );
}
