//! Spaced repetition: FSRS scheduling through the `rs-fsrs` crate, the due queue across all
//! lessons and drills, the 7-day forecast, the study streak and mastery per deck.

use std::collections::BTreeSet;

use chrono::{DateTime, Duration, FixedOffset, NaiveDate, Utc};
use rs_fsrs::{Card, FSRS, Parameters, Rating, State};

use super::progress::{CardPhase, CardState, ItemRecord, Progress, Review};
use crate::course::bank::{Bank, Entry};
use crate::course::grade::SelfGrade;

/// New items introduced per drill session (the rest wait for the next one).
pub const NEW_PER_SESSION: usize = 10;

fn rating(g: SelfGrade) -> Rating {
    match g {
        SelfGrade::Again => Rating::Again,
        SelfGrade::Hard => Rating::Hard,
        SelfGrade::Good => Rating::Good,
        SelfGrade::Easy => Rating::Easy,
    }
}

fn to_card(c: &CardState) -> Card {
    Card {
        due: c.due,
        stability: c.stability,
        difficulty: c.difficulty,
        elapsed_days: c.elapsed_days,
        scheduled_days: c.scheduled_days,
        reps: i32::try_from(c.reps).unwrap_or(i32::MAX),
        lapses: i32::try_from(c.lapses).unwrap_or(i32::MAX),
        state: match c.phase {
            CardPhase::New => State::New,
            CardPhase::Learning => State::Learning,
            CardPhase::Review => State::Review,
            CardPhase::Relearning => State::Relearning,
        },
        last_review: c.last_review.unwrap_or(c.due),
    }
}

fn from_card(c: &Card) -> CardState {
    CardState {
        due: c.due,
        stability: c.stability,
        difficulty: c.difficulty,
        elapsed_days: c.elapsed_days,
        scheduled_days: c.scheduled_days,
        reps: u32::try_from(c.reps).unwrap_or(0),
        lapses: u32::try_from(c.lapses).unwrap_or(0),
        phase: match c.state {
            State::New => CardPhase::New,
            State::Learning => CardPhase::Learning,
            State::Review => CardPhase::Review,
            State::Relearning => CardPhase::Relearning,
        },
        last_review: Some(c.last_review),
    }
}

/// A card never reviewed, due now.
pub fn new_card(now: DateTime<Utc>) -> CardState {
    CardState::fresh(now)
}

/// The scheduler with FSRS's default parameters (short-term steps on, no fuzz).
pub fn scheduler() -> FSRS {
    FSRS::new(Parameters::default())
}

/// The card after answering it with `grade` at `now`, as FSRS schedules it. A card FSRS
/// cannot schedule from (see [`CardState::is_sound`]) starts again as new; the review history is
/// kept by the caller. The result is always sound.
pub fn review(card: &CardState, grade: SelfGrade, now: DateTime<Utc>) -> CardState {
    let start = if card.is_sound() {
        card.clone()
    } else {
        new_card(now)
    };
    let info = scheduler().next(to_card(&start), now, rating(grade));
    let next = from_card(&info.card);
    if next.is_sound() {
        next
    } else {
        let fresh = scheduler().next(to_card(&new_card(now)), now, rating(grade));
        from_card(&fresh.card)
    }
}

/// The local calendar day of `t`, or None where it falls outside what the calendar can hold
/// (a far-future date from an imported file must not crash anything).
pub fn local_day(t: DateTime<Utc>, tz: FixedOffset) -> Option<NaiveDate> {
    t.naive_utc().checked_add_offset(tz).map(|d| d.date())
}

/// How a typed answer maps to an FSRS grade: right is Good, wrong is Again.
pub fn grade_for(correct: bool) -> SelfGrade {
    if correct {
        SelfGrade::Good
    } else {
        SelfGrade::Again
    }
}

impl Progress {
    /// Record one graded answer for `id`: append it to the history and reschedule the card.
    pub fn record_review(
        &mut self,
        id: &str,
        grade: SelfGrade,
        correct: Option<bool>,
        mode: &str,
        seconds: Option<f64>,
        now: DateTime<Utc>,
    ) -> &ItemRecord {
        let rec = self
            .items
            .entry(id.to_string())
            .or_insert_with(|| ItemRecord {
                card: new_card(now),
                reviews: Vec::new(),
            });
        rec.card = review(&rec.card, grade, now);
        rec.reviews.push(Review {
            at: now,
            grade: grade.number(),
            correct,
            mode: mode.to_string(),
            seconds,
        });
        rec
    }
}

/// The one definition of due: a seen item whose FSRS card's due time has come. Items never
/// seen are new, not due. Inline follow-ups are never due on their own: they are asked with
/// the item they follow (see [`scheduled`]).
pub fn is_due(r: &ItemRecord, now: DateTime<Utc>) -> bool {
    r.card.due <= now
}

/// Items the drill schedules by themselves: all but inline follow-ups. Every count of due and
/// new items goes over these.
pub fn scheduled(bank: &Bank) -> impl Iterator<Item = (usize, &Entry)> {
    bank.entries
        .iter()
        .enumerate()
        .filter(|(_, e)| e.inline_of.is_none())
}

/// Bank indices to drill now: items whose card is due (most overdue first), then up to
/// `new_limit` never-seen items in course order. Inline follow-ups come with their parent.
pub fn due_queue(bank: &Bank, p: &Progress, now: DateTime<Utc>, new_limit: usize) -> Vec<usize> {
    let mut due: Vec<(DateTime<Utc>, usize)> = Vec::new();
    let mut fresh = Vec::new();
    for (i, e) in scheduled(bank) {
        match p.items.get(&e.item.id) {
            Some(r) if is_due(r, now) => due.push((r.card.due, i)),
            Some(_) => {}
            None => fresh.push(i),
        }
    }
    due.sort();
    let queue = due
        .into_iter()
        .map(|(_, i)| i)
        .chain(fresh.into_iter().take(new_limit))
        .collect();
    spread(queue, TEMPLATE_GAP, |i| {
        match &bank.entries[i].item.answer {
            crate::course::quiz::Answer::Computed(name) => Some(name.as_str()),
            _ => None,
        }
    })
}

/// Items drawn from one template (one `answer_from`) are at least this many apart in a drill:
/// "TP decode bytes per token" twice in three items reads as the same question.
pub const TEMPLATE_GAP: usize = 3;

/// `queue` in its order as far as it goes, but an item whose key (its template) one of the
/// last `gap - 1` items has waits for the first place where none has; when every item left
/// would wait, the first goes anyway.
pub fn spread<'a>(
    mut queue: Vec<usize>,
    gap: usize,
    key: impl Fn(usize) -> Option<&'a str>,
) -> Vec<usize> {
    let mut out: Vec<usize> = Vec::with_capacity(queue.len());
    while !queue.is_empty() {
        let recent: Vec<&str> = out
            .iter()
            .rev()
            .take(gap.saturating_sub(1))
            .filter_map(|&i| key(i))
            .collect();
        let at = queue
            .iter()
            .position(|&i| key(i).is_none_or(|k| !recent.contains(&k)))
            .unwrap_or(0);
        out.push(queue.remove(at));
    }
    out
}

/// Items due now (seen before) and never seen, across the bank.
pub fn due_counts(bank: &Bank, p: &Progress, now: DateTime<Utc>) -> (usize, usize) {
    let mut due = 0;
    let mut new = 0;
    for (_, e) in scheduled(bank) {
        match p.items.get(&e.item.id) {
            Some(r) if is_due(r, now) => due += 1,
            Some(_) => {}
            None => new += 1,
        }
    }
    (due, new)
}

/// Items coming due on each of the next `days` local days, not counting those due now (see
/// [`due_counts`]): day 0 is "later today". Only scheduled items of the current course count.
pub fn forecast(
    bank: &Bank,
    p: &Progress,
    now: DateTime<Utc>,
    tz: FixedOffset,
    days: usize,
) -> Vec<usize> {
    let Some(today) = local_day(now, tz) else {
        return vec![0; days];
    };
    let mut out = vec![0; days];
    for (_, e) in scheduled(bank) {
        let Some(r) = p.items.get(&e.item.id).filter(|r| !is_due(r, now)) else {
            continue;
        };
        let Some(d) = local_day(r.card.due, tz) else {
            continue;
        };
        let k = (d - today).num_days().max(0) as usize;
        if let Some(slot) = out.get_mut(k) {
            *slot += 1;
        }
    }
    out
}

/// Local days with at least one review.
pub fn study_days(p: &Progress, tz: FixedOffset) -> BTreeSet<NaiveDate> {
    p.items
        .values()
        .flat_map(|r| &r.reviews)
        .filter_map(|r| local_day(r.at, tz))
        .collect()
}

/// Consecutive days with reviews up to today; a streak still counts until the end of the day
/// after its last review.
pub fn streak(p: &Progress, now: DateTime<Utc>, tz: FixedOffset) -> u32 {
    let days = study_days(p, tz);
    let Some(today) = local_day(now, tz) else {
        return 0;
    };
    let mut d = if days.contains(&today) {
        Some(today)
    } else {
        today.checked_sub_signed(Duration::days(1))
    };
    let mut n = 0;
    while let Some(day) = d.filter(|x| days.contains(x)) {
        n += 1;
        d = day.checked_sub_signed(Duration::days(1));
    }
    n
}

/// How well a deck is known.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Mastery {
    pub total: usize,
    /// Reviewed at least once.
    pub seen: usize,
    /// In FSRS's review phase with the last answer Good or Easy.
    pub mastered: usize,
    pub due: usize,
}

/// Mastery of each deck of the bank, in deck order.
pub fn mastery(bank: &Bank, p: &Progress, now: DateTime<Utc>) -> Vec<Mastery> {
    let mut out = vec![Mastery::default(); bank.decks.len()];
    for e in &bank.entries {
        let Some(m) = out.get_mut(e.deck) else {
            continue;
        };
        m.total += 1;
        if let Some(r) = p.items.get(&e.item.id) {
            m.seen += 1;
            if r.card.phase == CardPhase::Review
                && r.last_review()
                    .is_some_and(|x| x.grade >= SelfGrade::Good.number())
            {
                m.mastered += 1;
            }
            if is_due(r, now) && e.inline_of.is_none() {
                m.due += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> DateTime<Utc> {
        s.parse().expect("time")
    }

    #[test]
    fn due_dates_move_as_fsrs_says_for_each_grade() {
        let now = t("2025-03-01T12:00:00Z");
        let card = new_card(now);
        for g in SelfGrade::ALL {
            let ours = review(&card, g, now);
            let theirs = scheduler().next(to_card(&card), now, rating(g)).card;
            assert_eq!(ours.due, theirs.due, "{g:?}");
            assert_eq!(ours.stability, theirs.stability, "{g:?}");
        }
        // FSRS's short-term steps for a new card: 1, 5 and 10 minutes, Easy straight to days.
        assert_eq!(
            review(&card, SelfGrade::Again, now).due,
            now + Duration::minutes(1)
        );
        assert_eq!(
            review(&card, SelfGrade::Hard, now).due,
            now + Duration::minutes(5)
        );
        assert_eq!(
            review(&card, SelfGrade::Good, now).due,
            now + Duration::minutes(10)
        );
        let easy = review(&card, SelfGrade::Easy, now);
        assert!(easy.due >= now + Duration::days(1), "{:?}", easy.due);
        assert_eq!(easy.phase, CardPhase::Review);
        // A learned card: better grades push it further out, Again brings it back soon.
        let learned = review(
            &review(&card, SelfGrade::Good, now),
            SelfGrade::Good,
            now + Duration::minutes(10),
        );
        let later = now + Duration::days(learned.scheduled_days);
        let dues: Vec<_> = SelfGrade::ALL
            .iter()
            .map(|&g| review(&learned, g, later).due)
            .collect();
        assert!(dues.windows(2).all(|w| w[0] <= w[1]), "{dues:?}");
        assert!(dues[0] < later + Duration::days(1));
        assert!(dues[3] > dues[0]);
    }

    #[test]
    fn record_review_appends_history() {
        let mut p = Progress::default();
        let now = t("2025-03-01T12:00:00Z");
        p.record_review("x", SelfGrade::Good, Some(true), "quiz", Some(4.0), now);
        p.record_review(
            "x",
            SelfGrade::Again,
            Some(false),
            "quiz",
            None,
            now + Duration::minutes(11),
        );
        let r = &p.items["x"];
        assert_eq!(r.reviews.len(), 2);
        assert_eq!(r.reviews[1].grade, 1);
        assert_eq!(r.card.reps, 2);
    }

    /// Right after missing items, every count agrees: they are not due now (FSRS brings them
    /// back in minutes), they are due later today, and an hour on they are due now everywhere:
    /// the drill's queue, its header, the stats line, the forecast and the mastery table.
    #[test]
    fn due_means_the_same_in_every_count() {
        let bank = Bank::from_course(&crate::course::Course::embedded());
        let tz = FixedOffset::east_opt(0).expect("tz");
        let now = t("2025-03-01T12:00:00Z");
        let mut p = Progress::default();
        let missed: Vec<String> = scheduled(&bank)
            .take(7)
            .map(|(_, e)| e.item.id.clone())
            .collect();
        for id in &missed {
            p.record_review(id, SelfGrade::Again, Some(false), "drill", None, now);
        }
        let total_new = scheduled(&bank).count() - 7;
        assert_eq!(due_counts(&bank, &p, now), (0, total_new));
        assert_eq!(forecast(&bank, &p, now, tz, 7)[0], 7, "later today");
        let later = now + Duration::hours(1);
        assert_eq!(due_counts(&bank, &p, later), (7, total_new));
        assert_eq!(forecast(&bank, &p, later, tz, 7)[0], 0, "now, not later");
        let queue = due_queue(&bank, &p, later, 0);
        assert_eq!(queue.len(), 7);
        let by_deck: usize = mastery(&bank, &p, later).iter().map(|m| m.due).sum();
        assert_eq!(by_deck, 7);
    }

    #[test]
    fn streak_counts_consecutive_local_days() {
        let tz = FixedOffset::east_opt(0).expect("tz");
        let mut p = Progress::default();
        for d in ["2025-03-01", "2025-03-02", "2025-03-03", "2025-02-27"] {
            p.record_review(
                d,
                SelfGrade::Good,
                None,
                "drill",
                None,
                t(&format!("{d}T10:00:00Z")),
            );
        }
        assert_eq!(streak(&p, t("2025-03-03T20:00:00Z"), tz), 3);
        assert_eq!(
            streak(&p, t("2025-03-04T08:00:00Z"), tz),
            3,
            "alive until tonight"
        );
        assert_eq!(streak(&p, t("2025-03-05T08:00:00Z"), tz), 0);
    }

    #[test]
    fn dates_at_the_end_of_the_calendar_do_not_panic() {
        let mut p = Progress::default();
        let far = DateTime::<Utc>::MAX_UTC;
        p.items.insert(
            "far".into(),
            ItemRecord {
                card: CardState {
                    due: far,
                    ..new_card(far)
                },
                reviews: vec![Review {
                    at: far,
                    grade: 3,
                    correct: None,
                    mode: "drill".into(),
                    seconds: None,
                }],
            },
        );
        let tz = FixedOffset::east_opt(3600).expect("tz");
        assert!(study_days(&p, tz).is_empty());
        assert_eq!(streak(&p, Utc::now(), tz), 0);
        assert_eq!(streak(&p, far, tz), 0);
    }

    #[test]
    fn one_templates_draws_are_spread_apart() {
        let keys = [Some("tp"), Some("tp"), None, Some("ring"), Some("tp"), None];
        let out = spread((0..6).collect(), 3, |i| keys[i]);
        assert_eq!(out, vec![0, 2, 3, 1, 5, 4]);
        // Nothing to spread them with: the order stays.
        let keys = [Some("tp"), Some("tp")];
        assert_eq!(spread(vec![0, 1], 3, |i| keys[i]), vec![0, 1]);
    }

    /// The whole course as one drill: no template comes twice within [`TEMPLATE_GAP`] items
    /// (lessons 2 and 3 and the interview deck each have a "TP decode bytes" item).
    #[test]
    fn a_drill_never_asks_one_template_twice_in_a_row() {
        let bank = Bank::from_course(&crate::course::Course::embedded());
        let q = due_queue(&bank, &Progress::default(), Utc::now(), usize::MAX);
        let template = |i: usize| match &bank.entries[i].item.answer {
            crate::course::quiz::Answer::Computed(n) => Some(n.clone()),
            _ => None,
        };
        let tp = q
            .iter()
            .filter(|&&i| template(i).as_deref() == Some("tp_decode_bytes_per_token"))
            .count();
        assert!(tp >= 2, "the course has {tp} TP decode items");
        for w in q.windows(TEMPLATE_GAP) {
            let keys: Vec<String> = w.iter().filter_map(|&i| template(i)).collect();
            let mut unique = keys.clone();
            unique.sort();
            unique.dedup();
            assert_eq!(unique.len(), keys.len(), "one template twice in {keys:?}");
        }
    }
}
