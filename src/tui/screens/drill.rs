//! Drills: spaced repetition across every lesson and drill file. The due queue comes from FSRS
//! ([`crate::study::srs`]); `--timer SECS` gives each answer a countdown ("answer aloud in
//! 60 s"), `--minutes N` ends the session after N minutes, and `--mock` runs a mock interview
//! that chains each question's follow-ups. The screen itself is the quiz screen; this file
//! builds the session and draws the parts that differ (header, summary).

use chrono::{DateTime, Utc};
use ratatui::text::{Line, Span};

use crate::course::bank::Bank;
use crate::course::quiz::{Kind, SplitMix};
use crate::study::session::{Mode, Session};
use crate::study::srs;
use crate::tui::app::App;
use crate::tui::screens::quiz::{QuizState, seed};

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DrillOptions {
    pub mock: bool,
    pub minutes: Option<u32>,
    pub timer: Option<u32>,
}

pub use crate::study::session::MOCK_QUESTIONS;

pub fn open(app: &App, opts: &DrillOptions) -> QuizState {
    let now = Utc::now();
    open_at(app, opts, now, seed(now))
}

pub fn open_at(app: &App, opts: &DrillOptions, now: DateTime<Utc>, seed: u64) -> QuizState {
    let bank = Bank::from_course(&app.course);
    let (mode, title, items) = if opts.mock {
        (
            Mode::Mock,
            "Mock interview".to_string(),
            mock_items(&bank, seed),
        )
    } else {
        (
            Mode::Drill,
            "Drill".to_string(),
            srs::due_queue(&bank, &app.progress, now, srs::NEW_PER_SESSION),
        )
    };
    let session = Session::new(mode, title, items, now, seed).with_limits(opts.minutes, opts.timer);
    QuizState::new(session, bank, now)
}

/// Interview questions for a mock: recall items of the drill files that are nobody's
/// follow-up, shuffled; their follow-ups are chained in as the interview goes.
pub fn mock_items(bank: &Bank, seed: u64) -> Vec<usize> {
    let followed: std::collections::HashSet<&str> = bank
        .entries
        .iter()
        .flat_map(|e| e.item.follow_ups.iter().map(String::as_str))
        .collect();
    let mut roots: Vec<usize> = (0..bank.entries.len())
        .filter(|&i| {
            let e = &bank.entries[i];
            e.item.kind == Kind::Recall
                && e.inline_of.is_none()
                && bank.deck_of(e).is_some_and(|d| d.is_drill)
                && !followed.contains(e.item.id.as_str())
        })
        .collect();
    // Fisher–Yates with the session's seed.
    let mut rng = SplitMix(seed);
    for i in (1..roots.len()).rev() {
        let j = (rng.next_u64() % (i as u64 + 1)) as usize;
        roots.swap(i, j);
    }
    roots.truncate(MOCK_QUESTIONS);
    roots
}

/// Header text: left (what this is) and right (position, score, clocks).
pub fn header(s: &QuizState, app: &App) -> (String, String) {
    let ses = &s.session;
    let (right_first, missed) = ses.score();
    let (shown, total) = ses.position();
    let left = match ses.mode {
        Mode::Quiz => format!(" Quiz · {}", ses.title),
        // Live, by the one definition of due (srs::is_due): a missed item is due again in
        // minutes, and this session asks it again before it ends.
        Mode::Drill => {
            let (due, new) = srs::due_counts(&s.bank, &app.progress, s.now);
            format!(" Drill · {due} due now, {new} new")
        }
        Mode::Mock => " Mock interview".to_string(),
    };
    let mut right = match ses.retry_position() {
        _ if ses.finished => "done".to_string(),
        Some((k, n)) => format!("retry {k} of {n}"),
        None => format!("{shown} of {total}"),
    };
    right.push_str(&format!(" · ✓ {right_first} ✗ {missed}"));
    if let Some(rem) = ses.remaining(s.now) {
        let m = rem.num_seconds().max(0);
        right.push_str(&format!(" · {}:{:02} left", m / 60, m % 60));
    }
    right.push(' ');
    (left, right)
}

/// The end-of-session summary, its missed items wrapped in `width` columns under their mark.
pub fn summary_lines(s: &QuizState, app: &App, width: usize) -> Vec<Line<'static>> {
    let t = &app.theme;
    let ses = &s.session;
    let mut out = Vec::new();
    let (first, missed) = ses.score();
    let distinct = ses.position().0;
    let what = match ses.mode {
        Mode::Quiz => "Quiz complete",
        Mode::Drill => "Drill session complete",
        Mode::Mock => "Mock interview complete",
    };
    out.push(Line::styled(what, t.h1));
    out.push(Line::raw(""));
    if distinct == 0 {
        out.push(Line::raw(match ses.mode {
            Mode::Drill => {
                "Nothing is due. Come back later, or take a lesson's quiz (Q on the course map)."
            }
            _ => "No questions to ask.",
        }));
    } else {
        out.push(Line::from(vec![
            Span::styled(format!("{distinct}"), t.strong),
            Span::raw(" items · "),
            Span::styled(format!("{first}"), t.ok),
            Span::raw(" right the first time · "),
            Span::styled(format!("{missed}"), if missed > 0 { t.error } else { t.ok }),
            Span::raw(" missed"),
        ]));
        if ses.ends_at.is_some_and(|e| s.now >= e) && !ses.queue.is_empty() {
            out.push(Line::styled(
                format!(
                    "Time is up; {} item(s) wait for the next session.",
                    ses.queue.len()
                ),
                t.dim,
            ));
        }
    }
    let missed = ses.missed();
    if !missed.is_empty() {
        out.push(Line::raw(""));
        out.push(Line::styled("Worth another look", t.h2));
        for i in missed {
            let Some(e) = s.bank.entries.get(i) else {
                continue;
            };
            let place = match (&e.section, s.bank.deck_of(e)) {
                (Some(sec), Some(d)) => format!("{} § {}", d.title, sec.title),
                (None, Some(d)) => d.title.clone(),
                _ => e.path.clone(),
            };
            out.extend(crate::tui::markdown::hanging(
                Span::styled("  ✗ ", t.error),
                vec![
                    Span::raw(crate::course::quiz::short_prompt(&e.item.prompt, 56)),
                    Span::styled(format!("  ({place})"), t.dim),
                ],
                width,
            ));
        }
    }
    out.push(Line::raw(""));
    if let Some(step) = super::quiz::next_step(s, app) {
        out.push(Line::from(vec![
            Span::styled("Next: ", t.strong),
            Span::styled("n", t.key),
            Span::raw(format!(" opens {}", super::track::step_title(app, &step))),
        ]));
    }
    out.push(Line::styled(
        "Every answer is saved as you go. Enter or q goes back; S on the course map shows your stats.",
        t.dim,
    ));
    out
}
