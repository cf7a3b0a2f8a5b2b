//! Screens are registered here: one file each, dispatched from one place.

pub mod class_quiz;
pub mod drill;
pub mod hang;
pub mod help;
pub mod home;
pub mod lab;
pub mod lesson;
pub mod notes_view;
pub mod planner;
pub mod present;
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
        Some(Screen::Present(s)) => {
            present::render(s, app, frame, body);
            if s.blank {
                // A blank screen is blank: no hint bar either.
                return;
            }
        }
        Some(Screen::ClassQuiz(s)) => class_quiz::render(s, app, frame, body),
        Some(Screen::Notes(s)) => notes_view::render(s, app, frame, body),
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
    let bar = |b: &keys::Binding| b.hint.map_or(b.desc, |(_, short)| short);
    let w = |b: &keys::Binding| b.label.chars().count() + bar(b).chars().count() + 3;
    // The screen's keys by priority; back and help always show, help as "more: ?" when some
    // keys did not fit (the overlay lists them all).
    let all: Vec<&keys::Binding> = keys::for_contexts(&app.contexts()).collect();
    let mut local: Vec<&keys::Binding> = all
        .iter()
        .copied()
        .filter(|b| b.ctx != keys::Context::Global && b.hint.is_some())
        .collect();
    local.sort_by_key(|b| b.hint.map_or(u8::MAX, |(p, _)| p));
    let global: Vec<&keys::Binding> = all
        .iter()
        .copied()
        .filter(|b| b.ctx == keys::Context::Global && b.hint.is_some())
        .collect();
    // "more: ?" is two columns wider than "? help".
    let reserved: usize = global.iter().map(|b| w(b)).sum::<usize>() + 2;
    let mut used: usize = spans.iter().map(|s| s.width()).sum::<usize>() + reserved;
    let mut shown = Vec::new();
    let mut folded = false;
    for b in local {
        if used + w(b) > width as usize {
            folded = true;
            continue;
        }
        used += w(b);
        shown.push(b);
    }
    for b in shown {
        spans.push(Span::styled(b.label, t.key));
        spans.push(Span::styled(format!(" {}  ", bar(b)), t.dim));
    }
    for b in global {
        if folded && b.action == super::app::Action::Help {
            spans.push(Span::styled("more: ", t.dim));
            spans.push(Span::styled("?", t.key));
            spans.push(Span::raw("  "));
        } else {
            spans.push(Span::styled(b.label, t.key));
            spans.push(Span::styled(format!(" {}  ", bar(b)), t.dim));
        }
    }
    Paragraph::new(Line::from(spans))
}
