//! Study stats: the streak, what is due over the next 7 days, mastery per lesson and drill
//! file, and review history whose items are no longer in the course (kept, never deleted).

use chrono::{DateTime, Duration, FixedOffset, Local, Utc};
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use crate::course::bank::Bank;
use crate::study::progress::Progress;
use crate::study::srs::{self, Mastery};
use crate::tui::app::{Action, App, Outcome, Screen};
use crate::tui::screens::lesson::text_width;

/// The course map opens this screen with `S` (its line in `screens!` names this).
pub const OPENER: crate::tui::screens::Opener = crate::tui::screens::Opener::new(
    &[crate::tui::keys::Key::Char('S')],
    "study stats",
    Some((4, "stats")),
    |app, _| Ok(StatsState::new(app).into()),
);

/// Everything the stats screen shows, computed once (also printed by `ringlab stats --json`).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Stats {
    pub streak_days: u32,
    pub reviews_total: usize,
    pub reviews_today: usize,
    pub due_now: usize,
    pub new_items: usize,
    /// Items coming due on each of the next 7 days, beyond those due now: day 0 is later today.
    pub forecast: Vec<usize>,
    pub decks: Vec<DeckStats>,
    /// Ids with review history that the course no longer has.
    pub orphans: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct DeckStats {
    pub id: String,
    pub title: String,
    pub drill: bool,
    pub total: usize,
    pub seen: usize,
    pub mastered: usize,
    pub due: usize,
}

impl Stats {
    pub fn compute(bank: &Bank, p: &Progress, now: DateTime<Utc>, tz: FixedOffset) -> Self {
        let today = srs::local_day(now, tz);
        let (due_now, new_items) = srs::due_counts(bank, p, now);
        let mastery = srs::mastery(bank, p, now);
        let known: std::collections::HashSet<&str> = bank.ids().collect();
        Stats {
            streak_days: srs::streak(p, now, tz),
            reviews_total: p.review_count(),
            reviews_today: p
                .items
                .values()
                .flat_map(|r| &r.reviews)
                .filter(|r| today.is_some() && srs::local_day(r.at, tz) == today)
                .count(),
            due_now,
            new_items,
            forecast: srs::forecast(bank, p, now, tz, 7),
            decks: bank
                .decks
                .iter()
                .zip(mastery)
                .map(|(d, m): (_, Mastery)| DeckStats {
                    id: d.id.clone(),
                    title: d.title.clone(),
                    drill: d.is_drill,
                    total: m.total,
                    seen: m.seen,
                    mastered: m.mastered,
                    due: m.due,
                })
                .collect(),
            orphans: p
                .orphans(|id| known.contains(id))
                .into_iter()
                .map(str::to_string)
                .collect(),
        }
    }
}

pub struct StatsState {
    pub stats: Stats,
    pub now: DateTime<Utc>,
    pub tz: FixedOffset,
    pub scroll: usize,
}

/// The local time zone's offset now.
pub fn local_offset() -> FixedOffset {
    *Local::now().offset()
}

impl StatsState {
    pub fn new(app: &App) -> Self {
        Self::at(app, Utc::now(), local_offset())
    }

    pub fn at(app: &App, now: DateTime<Utc>, tz: FixedOffset) -> Self {
        let bank = Bank::from_course(&app.course);
        StatsState {
            stats: Stats::compute(&bank, &app.progress, now, tz),
            now,
            tz,
            scroll: 0,
        }
    }
}

const OWN: crate::tui::keys::Context = crate::tui::keys::Context::Own("Study stats");

/// The stats screen's own verbs (`Action::Screen`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::FromRepr)]
#[repr(u8)]
pub enum Verb {
    /// Drill what is due.
    Drill,
}

impl Verb {
    pub const fn act(self) -> Action {
        Action::Screen(crate::tui::app::ScreenId::Stats, self as u8, 0)
    }
}

use crate::tui::keys::{Binding, DOWN, Key::Char, UP, bind};

#[rustfmt::skip]
pub const KEYS: &[Binding] = &[
    bind(OWN, &[Char('d'), Char('D')], "drill what is due", Verb::Drill.act(), Some((1, "drill what is due"))),
    bind(OWN, DOWN, "scroll", Action::Move(1), None),
    bind(OWN, UP, "scroll", Action::Move(-1), None),
];

pub fn update(s: &mut StatsState, app: &mut App, action: Action) -> Outcome {
    if let Some((Verb::Drill, _)) = action.verb(crate::tui::app::ScreenId::Stats, Verb::from_repr) {
        let d = super::drill::open(app, &super::drill::DrillOptions::default());
        return Outcome::Push(Screen::Quiz(Box::new(d)));
    }
    match action {
        Action::Back => return Outcome::Pop,
        // Clamped to the last screenful, so k after a long j goes back at once.
        Action::Move(d) => {
            let (_, total, shown) = fit(s, app, app.body_area());
            s.scroll = s
                .scroll
                .saturating_add_signed(d as isize)
                .min(total.saturating_sub(shown));
        }
        Action::Reload | Action::Resize(..) => *s = StatsState::at(app, s.now, s.tz),
        _ => {}
    }
    Outcome::Stay
}

/// The forecast's label column: its longest label ("later today", 11) and a space before the bar.
const LABEL_W: usize = 12;

fn bar(n: usize, max: usize, width: usize) -> String {
    if max == 0 {
        return " ".repeat(width);
    }
    let filled = (n * width).div_ceil(max).min(width);
    format!("{}{}", "█".repeat(filled), " ".repeat(width - filled))
}

fn meter(part: usize, total: usize, width: usize) -> String {
    let filled = (part * width).checked_div(total).unwrap_or(0).min(width);
    format!("{}{}", "█".repeat(filled), "░".repeat(width - filled))
}

pub fn lines(s: &StatsState, app: &App, width: usize) -> Vec<Line<'static>> {
    let t = &app.theme;
    let st = &s.stats;
    let mut out = Vec::new();
    out.push(Line::from(vec![
        Span::styled("Streak ", t.strong),
        Span::styled(
            format!(
                "{} day{}",
                st.streak_days,
                if st.streak_days == 1 { "" } else { "s" }
            ),
            t.accent,
        ),
        Span::raw(format!(
            "   Reviews {} ({} today)   Due now {}   New {}",
            st.reviews_total, st.reviews_today, st.due_now, st.new_items
        )),
    ]));
    out.push(Line::raw(""));
    out.push(Line::styled("Due in the next 7 days", t.h2));
    let max = st
        .forecast
        .iter()
        .copied()
        .chain([st.due_now])
        .max()
        .unwrap_or(0);
    out.push(Line::from(vec![
        Span::raw(format!("  {:<LABEL_W$}", "now")),
        Span::styled(bar(st.due_now, max, 20), t.accent),
        Span::raw(format!(" {}", st.due_now)),
    ]));
    let today = srs::local_day(s.now, s.tz).unwrap_or_default();
    for (k, n) in st.forecast.iter().enumerate() {
        let day = today
            .checked_add_signed(Duration::days(k as i64))
            .unwrap_or(today);
        let label = match k {
            0 => "later today".to_string(),
            1 => "tomorrow".to_string(),
            _ => day.format("%a %d").to_string(),
        };
        out.push(Line::from(vec![
            Span::raw(format!("  {label:<LABEL_W$}")),
            Span::styled(bar(*n, max, 20), t.accent),
            Span::raw(format!(" {n}")),
        ]));
    }
    out.push(Line::raw(""));
    // The definition beside the figure: a quiz passed once (the map's "Quiz: k of n passed")
    // is not yet mastered.
    out.push(Line::from(vec![
        Span::styled("Mastery", t.h2),
        Span::styled(
            "  in review and last answered Good or Easy (passed once: not yet)",
            t.dim,
        ),
    ]));
    let name_w = width.saturating_sub(40).clamp(12, 40);
    for d in &st.decks {
        // A title longer than its column ends with an ellipsis, padded by its display width.
        let full = if d.drill {
            format!("drills: {}", d.title)
        } else {
            d.title.clone()
        };
        let title = crate::tui::markdown::ellipsize(&full, name_w);
        let pad = name_w.saturating_sub(unicode_width::UnicodeWidthStr::width(title.as_str()));
        out.push(Line::from(vec![
            Span::raw(format!("  {title}{} ", " ".repeat(pad))),
            Span::styled(meter(d.mastered, d.total, 10), t.ok),
            Span::raw(format!(" {:>2}/{:<2}", d.mastered, d.total)),
            Span::styled(format!("  {} seen, {} due", d.seen, d.due), t.dim),
        ]));
    }
    if !st.orphans.is_empty() {
        out.push(Line::raw(""));
        out.push(Line::styled(
            format!(
                "{} item(s) with history are no longer in the course (kept): {}",
                st.orphans.len(),
                st.orphans.join(", ")
            ),
            t.warn,
        ));
    }
    out
}

/// The stats for `area` as one wrapped paragraph, its rows in all, and how many of them the
/// area shows (one row fewer than it has when they do not all fit: that row says what is
/// below). The lines are built once, for both the count and the drawing.
fn fit(s: &StatsState, app: &App, area: Rect) -> (Paragraph<'static>, usize, usize) {
    let width = text_width(area.width);
    let par =
        Paragraph::new(lines(s, app, width as usize)).wrap(ratatui::widgets::Wrap { trim: false });
    let total = par.line_count(width.min(area.width));
    let rows = area.height.saturating_sub(2) as usize;
    let shown = if total > rows {
        rows.saturating_sub(1)
    } else {
        rows
    };
    (par, total, shown)
}

pub fn render(s: &StatsState, app: &App, frame: &mut Frame, area: Rect) {
    let t = &app.theme;
    frame.render_widget(
        Paragraph::new(Line::styled(" Study stats", t.title)),
        Rect::new(area.x, area.y, area.width, 1),
    );
    let width = text_width(area.width);
    let x = area.x + area.width.saturating_sub(width) / 2;
    let w = width.min(area.width);
    let (par, total, shown) = fit(s, app, area);
    // What is below the screen says so (j scrolls), and the scroll stops at the end.
    let more = (total > shown).then(|| {
        let top = s.scroll.min(total - shown);
        (top, total - shown - top)
    });
    let top = more.map_or(0, |(top, _)| top);
    frame.render_widget(
        par.scroll((top.min(u16::MAX as usize) as u16, 0)),
        Rect::new(x, area.y + 2, w, shown as u16),
    );
    if let Some((top, below)) = more {
        let text = match (top > 0, below > 0) {
            (_, true) => format!("  ↓ {}: j", crate::units::count(below, "more line")),
            (true, false) => "  ↑ k scrolls back".to_string(),
            (false, false) => String::new(),
        };
        frame.render_widget(
            Paragraph::new(Line::styled(text, t.dim)),
            Rect::new(x, area.y + 2 + shown as u16, w, 1),
        );
    }
}

impl crate::tui::screens::View for StatsState {
    fn update(&mut self, app: &mut App, action: Action) -> Outcome {
        update(self, app, action)
    }

    fn render(&self, app: &App, frame: &mut ratatui::Frame, area: ratatui::layout::Rect) {
        render(self, app, frame, area)
    }

    fn contexts(&self) -> Vec<crate::tui::keys::Context> {
        vec![OWN]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_deck_title_ends_in_an_ellipsis_and_keeps_the_meters_aligned() {
        let deck = |title: &str, drill| DeckStats {
            id: title.into(),
            title: title.into(),
            drill,
            total: 4,
            seen: 2,
            mastered: 1,
            due: 1,
        };
        let s = StatsState {
            stats: Stats {
                streak_days: 0,
                reviews_total: 0,
                reviews_today: 0,
                due_now: 1,
                new_items: 0,
                forecast: vec![0; 7],
                decks: vec![
                    deck("Short", false),
                    deck(
                        "Debugging multi-GPU hangs: NCCL_SOCKET_IFNAME, watchdogs, flight recorders",
                        true,
                    ),
                ],
                orphans: Vec::new(),
            },
            now: Utc::now(),
            tz: FixedOffset::east_opt(0).expect("utc"),
            scroll: 0,
        };
        let app = App::new(
            crate::course::Course::embedded(),
            crate::tui::theme::Theme::color(),
        );
        let text: Vec<String> = lines(&s, &app, 72)
            .iter()
            .map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect())
            .collect();
        let row = |needle: &str| {
            text.iter()
                .find(|l| l.contains(needle))
                .unwrap_or_else(|| panic!("no {needle:?} in {text:#?}"))
                .clone()
        };
        let long = row("drills: Debugging");
        assert!(long.contains("… "), "{long}");
        // Columns, not bytes (the ellipsis is one column and three bytes).
        let meter_at = |l: &str| l.chars().position(|c| c == '█').expect("a meter");
        assert_eq!(meter_at(&long), meter_at(&row("Short")), "{long}");
        // The forecast's bars start a space after their longest label.
        assert!(row("later today").contains("later today "), "{text:#?}");
        let now = text
            .iter()
            .find(|l| l.trim_start().starts_with("now "))
            .expect("the forecast's now row");
        assert_eq!(meter_at(now), 2 + LABEL_W, "{now}");
    }
}
