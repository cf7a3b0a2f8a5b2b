//! Screens are registered here: one file each, dispatched from one place.

pub mod drill;
pub mod hang;
pub mod help;
pub mod home;
pub mod lab;
pub mod lesson;
pub mod planner;
pub mod quiz;
pub mod ring;
pub mod ring_draw;
pub mod stats;
pub mod tpcalc;

use ratatui::Frame;
use ratatui::layout::{Alignment, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::app::{App, MIN_HEIGHT, MIN_WIDTH, Screen};
use super::keys;

pub fn render(app: &App, frame: &mut Frame) {
    let area = frame.area();
    if app.too_small() {
        render_too_small(app, frame, area);
        return;
    }
    let body = Rect::new(area.x, area.y, area.width, area.height.saturating_sub(1));
    match app.stack.last() {
        Some(Screen::Lesson(s)) => lesson::render(s, app, frame, body),
        Some(Screen::Home(s)) => home::render(s, app, frame, body),
        Some(Screen::Ring(s)) => ring_draw::render(s, app, frame, body),
        Some(Screen::Lab(s)) => lab::render(s, app, frame, body),
        Some(Screen::Hang(s)) => hang::render(s, app, frame, body),
        Some(Screen::Quiz(s)) => quiz::render(s, app, frame, body),
        Some(Screen::Stats(s)) => stats::render(s, app, frame, body),
        Some(Screen::TpCalc(s)) => tpcalc::render(s, app, frame, body),
        Some(Screen::Planner(s)) => planner::render(s, app, frame, body),
        None => {}
    }
    if let Some(h) = &app.help {
        help::render(h, app, frame, body);
    }
    let bar = Rect::new(area.x, area.bottom().saturating_sub(1), area.width, 1);
    frame.render_widget(hint_bar(app, bar.width), bar);
}

fn render_too_small(app: &App, frame: &mut Frame, area: Rect) {
    let msg = format!(
        "terminal too small: need {MIN_WIDTH}x{MIN_HEIGHT}, have {}x{}",
        area.width, area.height
    );
    let y = area.y + area.height / 2;
    let line = Rect::new(
        area.x,
        y.min(area.bottom().saturating_sub(1)),
        area.width,
        1,
    );
    frame.render_widget(
        Paragraph::new(Line::styled(msg, app.theme.warn)).alignment(Alignment::Center),
        line,
    );
}

/// The always-visible key-hint bar, gathered from the key table of what has focus.
fn hint_bar(app: &App, width: u16) -> Paragraph<'static> {
    let t = &app.theme;
    if let Some(Screen::Lesson(l)) = app.stack.last()
        && l.search.editing
    {
        let mut spans = vec![Span::styled("/", t.key)];
        spans.extend(l.search.field.spans(Style::default(), t.dim));
        spans.push(Span::styled(
            "   Enter find · Esc cancel · Ctrl-U clear · Ctrl-W word",
            t.dim,
        ));
        return Paragraph::new(Line::from(spans));
    }
    if let Some(Screen::Quiz(q)) = app.stack.last()
        && q.session.accepts_input()
    {
        return Paragraph::new(quiz::input_hints(app));
    }
    let mut spans = Vec::new();
    if let Some(s) = &app.status {
        spans.push(Span::styled(format!("{s}  "), t.accent));
    }
    let w = |b: &keys::Binding| b.label.chars().count() + b.desc.chars().count() + 3;
    // Help and back are always shown; the screen's own keys fill the room before them.
    let hints: Vec<&keys::Binding> = keys::for_contexts(&app.contexts())
        .filter(|b| b.hint)
        .collect();
    let (global, local): (Vec<_>, Vec<_>) = hints
        .into_iter()
        .partition(|b| b.ctx == keys::Context::Global);
    let reserved: usize = global.iter().map(|b| w(b)).sum();
    let mut used: usize = spans.iter().map(|s| s.width()).sum::<usize>() + reserved;
    let mut shown = Vec::new();
    for b in local {
        if used + w(b) > width as usize {
            continue;
        }
        used += w(b);
        shown.push(b);
    }
    for b in shown.into_iter().chain(global) {
        spans.push(Span::styled(b.label, t.key));
        spans.push(Span::styled(format!(" {}  ", b.desc), t.dim));
    }
    Paragraph::new(Line::from(spans))
}
