//! One study session as plain data: a queue of items, the current attempt, grading, wrong
//! items coming back, follow-up chains (mock interviews), an optional per-answer timer and an
//! optional session length. The quiz and drill screens draw it; nothing here knows terminals.
//! Time is always passed in, so tests are exact.

use std::collections::{HashMap, VecDeque};

use chrono::{DateTime, Duration, Utc};

use crate::course::bank::Bank;
use crate::course::grade::{self, SelfGrade, Verdict};
use crate::course::quiz::{Instance, Kind, SplitMix};

/// How the session was started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// One lesson's (or deck's) items, in order.
    Quiz,
    /// The due queue across the course.
    Drill,
    /// Interview practice: questions chained with their follow-ups.
    Mock,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Quiz => "quiz",
            Mode::Drill => "drill",
            Mode::Mock => "mock",
        }
    }
}

/// Where the current attempt stands.
#[derive(Debug, Clone, PartialEq)]
pub enum Phase {
    /// Waiting for a typed answer (recall: for Enter, to reveal the model answer).
    Asking,
    /// Recall: the model answer is shown; waiting for Again/Hard/Good/Easy.
    Reveal { timed_out: bool },
    /// Graded: feedback with the explanation and source.
    Feedback {
        verdict: Verdict,
        grade: SelfGrade,
        timed_out: bool,
    },
}

/// The item on screen.
#[derive(Debug, Clone, PartialEq)]
pub struct Current {
    /// Index into the bank.
    pub entry: usize,
    /// This attempt's prompt and answer, or why the item could not be instantiated.
    pub instance: Result<Instance, String>,
    pub input: String,
    pub phase: Phase,
    pub shown_at: DateTime<Utc>,
    /// A message about the last submission (invalid input, empty answer).
    pub note: Option<String>,
    /// This is the n-th time this item comes up in the session (1 = first).
    pub attempt: u32,
    /// Asked as a follow-up of this item.
    pub follow_up_of: Option<usize>,
}

/// A graded answer, for the caller to record (and save) right away.
#[derive(Debug, Clone, PartialEq)]
pub struct Graded {
    pub id: String,
    pub grade: SelfGrade,
    pub correct: Option<bool>,
    pub seconds: f64,
}

/// One line of the summary.
#[derive(Debug, Clone, PartialEq)]
pub struct Answered {
    pub entry: usize,
    pub grade: SelfGrade,
    pub correct: Option<bool>,
    pub attempt: u32,
}

/// Root questions in a mock interview (each followed by its follow-ups).
pub const MOCK_QUESTIONS: usize = 6;

/// How often a missed item may come back in one session.
pub const MAX_RETURNS: u32 = 2;
/// A missed item comes back after this many others.
pub const RETURN_GAP: usize = 3;

#[derive(Debug, Clone)]
pub struct Session {
    pub mode: Mode,
    pub title: String,
    pub queue: VecDeque<(usize, Option<usize>)>,
    pub current: Option<Current>,
    pub answered: Vec<Answered>,
    pub started: DateTime<Utc>,
    pub ends_at: Option<DateTime<Utc>>,
    /// Seconds allowed per answer.
    pub timer: Option<u32>,
    /// Seconds left on the current answer's timer (updated by [`Session::tick`]).
    pub time_left: Option<u32>,
    pub finished: bool,
    seen: HashMap<usize, u32>,
    rng: SplitMix,
}

impl Session {
    pub fn new(
        mode: Mode,
        title: impl Into<String>,
        items: Vec<usize>,
        now: DateTime<Utc>,
        seed: u64,
    ) -> Self {
        let mut s = Session {
            mode,
            title: title.into(),
            queue: items.into_iter().map(|i| (i, None)).collect(),
            current: None,
            answered: Vec::new(),
            started: now,
            ends_at: None,
            timer: None,
            time_left: None,
            finished: false,
            seen: HashMap::new(),
            rng: SplitMix(seed),
        };
        s.finished = s.queue.is_empty();
        s
    }

    pub fn with_limits(mut self, minutes: Option<u32>, timer: Option<u32>) -> Self {
        self.ends_at = minutes.map(|m| self.started + Duration::minutes(i64::from(m)));
        self.timer = timer.filter(|&t| t > 0);
        self
    }

    /// Show the next item, if any (call once after `new`, and after each graded item).
    pub fn advance(&mut self, bank: &Bank, now: DateTime<Utc>) {
        self.current = None;
        if self.ends_at.is_some_and(|end| now >= end) {
            self.finished = true;
            return;
        }
        let Some((entry, follow_up_of)) = self.queue.pop_front() else {
            self.finished = true;
            return;
        };
        let Some(e) = bank.entries.get(entry) else {
            return self.advance(bank, now);
        };
        let attempt = {
            let n = self.seen.entry(entry).or_insert(0);
            *n += 1;
            *n
        };
        let seed = self.rng.next_u64();
        self.current = Some(Current {
            entry,
            instance: e.item.instantiate(seed),
            input: String::new(),
            phase: Phase::Asking,
            shown_at: now,
            note: None,
            attempt,
            follow_up_of,
        });
        self.time_left = self.timer;
    }

    /// True while typed input goes to the answer line.
    pub fn accepts_input(&self) -> bool {
        matches!(self.current.as_ref().map(|c| &c.phase), Some(Phase::Asking))
    }

    /// Submit the typed answer. Returns a grade to record when the item was graded.
    pub fn submit(&mut self, bank: &Bank, now: DateTime<Utc>) -> Option<Graded> {
        let cur = self.current.as_mut()?;
        if cur.phase != Phase::Asking {
            return None;
        }
        let e = bank.entries.get(cur.entry)?;
        let inst = match &cur.instance {
            Ok(i) => i,
            Err(msg) => {
                cur.note = Some(format!("this item cannot be shown: {msg}"));
                return None;
            }
        };
        if e.item.kind == Kind::Recall || aloud(self.mode, cur, e) {
            cur.phase = Phase::Reveal { timed_out: false };
            cur.note = None;
            return None;
        }
        match grade::grade(&e.item, inst, &cur.input) {
            Verdict::Unanswered if cur.note.as_deref() != Some(EMPTY_NOTE) => {
                cur.note = Some(EMPTY_NOTE.into());
                None
            }
            Verdict::Invalid(msg) => {
                cur.note = Some(msg);
                None
            }
            v => {
                // A second empty Enter gives up: it counts as not known.
                let correct = v == Verdict::Correct;
                let g = crate::study::srs::grade_for(correct);
                Some(self.finish(bank, v, g, Some(correct), false, now))
            }
        }
    }

    /// Grade a revealed recall item.
    pub fn rate(&mut self, bank: &Bank, g: SelfGrade, now: DateTime<Utc>) -> Option<Graded> {
        let cur = self.current.as_ref()?;
        let Phase::Reveal { timed_out } = cur.phase else {
            return None;
        };
        Some(self.finish(bank, Verdict::Correct, g, None, timed_out, now))
    }

    fn finish(
        &mut self,
        bank: &Bank,
        verdict: Verdict,
        g: SelfGrade,
        correct: Option<bool>,
        timed_out: bool,
        now: DateTime<Utc>,
    ) -> Graded {
        let (entry, attempt, shown_at) = match self.current.as_mut() {
            Some(c) => {
                c.phase = Phase::Feedback {
                    verdict,
                    grade: g,
                    timed_out,
                };
                c.note = None;
                (c.entry, c.attempt, c.shown_at)
            }
            None => (0, 0, now),
        };
        self.time_left = None;
        self.answered.push(Answered {
            entry,
            grade: g,
            correct,
            attempt,
        });
        // Missed: bring it back a few items later (not in a mock interview: an interviewer
        // does not ask the same question again).
        if g == SelfGrade::Again && attempt <= MAX_RETURNS && self.mode != Mode::Mock {
            let at = RETURN_GAP.min(self.queue.len());
            self.queue.insert(at, (entry, None));
        }
        self.queue_follow_ups(bank, entry);
        Graded {
            id: bank
                .entries
                .get(entry)
                .map(|e| e.item.id.clone())
                .unwrap_or_default(),
            grade: g,
            correct,
            seconds: (now - shown_at).num_milliseconds().max(0) as f64 / 1000.0,
        }
    }

    /// Mock interviews ask every follow-up next; drills ask inline follow-ups next.
    fn queue_follow_ups(&mut self, bank: &Bank, entry: usize) {
        let Some(e) = bank.entries.get(entry) else {
            return;
        };
        let ups: Vec<usize> = e
            .item
            .follow_ups
            .iter()
            .filter_map(|id| bank.index_of(id))
            .filter(|&i| match self.mode {
                Mode::Mock => true,
                Mode::Drill => bank.entries[i].inline_of.is_some(),
                Mode::Quiz => false,
            })
            .filter(|i| !self.seen.contains_key(i) && !self.queue.iter().any(|q| q.0 == *i))
            .collect();
        for (k, i) in ups.into_iter().enumerate() {
            self.queue.insert(k, (i, Some(entry)));
        }
    }

    /// Advance the clocks. Returns true when the answer timer ran out on this tick (the item
    /// is then revealed, or graded Again for typed items, and the caller should record it).
    pub fn tick(&mut self, bank: &Bank, now: DateTime<Utc>) -> Option<Graded> {
        let timer = self.timer?;
        let cur = self.current.as_mut()?;
        if cur.phase != Phase::Asking {
            return None;
        }
        let elapsed = (now - cur.shown_at).num_seconds().max(0) as u32;
        let left = timer.saturating_sub(elapsed);
        self.time_left = Some(left);
        if left > 0 {
            return None;
        }
        let recall = bank
            .entries
            .get(cur.entry)
            .is_some_and(|e| e.item.kind == Kind::Recall);
        if recall {
            cur.phase = Phase::Reveal { timed_out: true };
            None
        } else {
            Some(self.finish(
                bank,
                Verdict::Unanswered,
                SelfGrade::Again,
                Some(false),
                true,
                now,
            ))
        }
    }

    /// Time left in the session, if it has a length.
    pub fn remaining(&self, now: DateTime<Utc>) -> Option<Duration> {
        self.ends_at.map(|e| (e - now).max(Duration::zero()))
    }

    /// Distinct items answered right the first time, and items missed at least once.
    pub fn score(&self) -> (usize, usize) {
        let mut first_right = 0;
        let mut missed = std::collections::BTreeSet::new();
        for a in &self.answered {
            if a.grade == SelfGrade::Again {
                missed.insert(a.entry);
            } else if a.attempt == 1 {
                first_right += 1;
            }
        }
        (first_right, missed.len())
    }

    /// Items missed at least once, in the order first missed.
    pub fn missed(&self) -> Vec<usize> {
        let mut out = Vec::new();
        for a in &self.answered {
            if a.grade == SelfGrade::Again && !out.contains(&a.entry) {
                out.push(a.entry);
            }
        }
        out
    }

    /// The current item is asked aloud: a recall item, or a choice follow-up in a mock
    /// interview (its choices would give the answer away), answered and graded by the learner.
    pub fn asked_aloud(&self, bank: &Bank) -> bool {
        self.current.as_ref().is_some_and(|c| {
            bank.entries
                .get(c.entry)
                .is_some_and(|e| e.item.kind == Kind::Recall || aloud(self.mode, c, e))
        })
    }

    /// Position among the items asked again, while one is: "retry 2 of 3" (this one, of the
    /// retries answered, this and those still queued). None on a first attempt.
    pub fn retry_position(&self) -> Option<(usize, usize)> {
        let cur = self.current.as_ref().filter(|c| c.attempt > 1)?;
        let done = self.answered.iter().filter(|a| a.attempt > 1).count();
        let queued = self
            .queue
            .iter()
            .filter(|q| self.seen.contains_key(&q.0) && q.0 != cur.entry)
            .count();
        Some((done + 1, done + 1 + queued))
    }

    /// Position for "3 of 9": distinct items shown so far, and distinct items in the session
    /// (shown or still queued). A missed item asked again moves neither number (the item
    /// line says "again"); a follow-up joins the total when it is queued.
    pub fn position(&self) -> (usize, usize) {
        let shown = self.seen.len();
        let queued: std::collections::HashSet<usize> = self
            .queue
            .iter()
            .map(|q| q.0)
            .filter(|i| !self.seen.contains_key(i))
            .collect();
        (shown, shown + queued.len())
    }
}

/// A choice follow-up in a mock interview is asked without its choices, as an interviewer
/// would: the right one, often the longest, gave the answer away.
fn aloud(mode: Mode, cur: &Current, e: &crate::course::bank::Entry) -> bool {
    mode == Mode::Mock
        && cur.follow_up_of.is_some()
        && matches!(e.item.kind, Kind::Single | Kind::Multi | Kind::Order)
}

pub const EMPTY_NOTE: &str = "no answer yet: type one and press Enter (Enter again gives up)";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::course::lesson::{Course, Origin, SourceFile};

    fn bank() -> Bank {
        let lesson = SourceFile {
            path: "l.md".into(),
            text: "+++\nid = \"l\"\ntitle = \"L\"\norder = 1\nminutes = 1\n+++\n## S\n\n```quiz\nid = \"n\"\ntype = \"numeric\"\nprompt = \"2+2?\"\nanswer = 4\ntolerance = 0\n```\n\n```quiz\nid = \"r\"\ntype = \"recall\"\nprompt = \"why?\"\nanswer = \"because\"\nfollow_ups = [\"n\", { prompt = \"and?\", answer = \"so\" }]\n```\n".into(),
        };
        Bank::from_course(&Course::from_sources(Origin::Embedded, vec![lesson]))
    }

    fn t0() -> DateTime<Utc> {
        "2025-03-01T12:00:00Z".parse().expect("time")
    }

    #[test]
    fn wrong_answers_come_back_and_right_ones_do_not() {
        let b = bank();
        let mut s = Session::new(Mode::Quiz, "t", vec![0], t0(), 1);
        s.advance(&b, t0());
        s.current.as_mut().expect("item").input = "5".into();
        let g = s.submit(&b, t0()).expect("graded");
        assert_eq!((g.grade, g.correct), (SelfGrade::Again, Some(false)));
        s.advance(&b, t0());
        let c = s.current.as_mut().expect("back again");
        assert_eq!((c.entry, c.attempt), (0, 2));
        // The item asked again moves neither number of "1 of 1".
        assert_eq!(s.position(), (1, 1));
        let c = s.current.as_mut().expect("back again");
        c.input = " 4 ".into();
        assert_eq!(s.submit(&b, t0()).map(|g| g.correct), Some(Some(true)));
        s.advance(&b, t0());
        assert!(s.finished);
        assert_eq!(s.position(), (1, 1));
        assert_eq!(s.score(), (0, 1));
        assert_eq!(s.missed(), vec![0]);
    }

    /// Items asked again advance a counter of their own ("retry 2 of 2"), where "3 of 9"
    /// would stand still.
    #[test]
    fn retries_count_visibly() {
        let b = bank();
        let mut s = Session::new(Mode::Quiz, "t", vec![0, 2], t0(), 1);
        s.advance(&b, t0());
        assert_eq!(s.retry_position(), None, "a first attempt");
        let miss = |s: &mut Session, answer: &str| {
            s.current.as_mut().expect("item").input = answer.into();
            s.submit(&b, t0()).expect("graded");
            s.advance(&b, t0());
        };
        miss(&mut s, "5");
        // The recall item: reveal and grade it Again.
        s.submit(&b, t0());
        s.rate(&b, SelfGrade::Again, t0());
        s.advance(&b, t0());
        let first = s.retry_position();
        assert_eq!(
            first,
            Some((1, 2)),
            "{:?}",
            s.current.as_ref().map(|c| c.entry)
        );
        miss(&mut s, "5");
        assert_eq!(
            s.retry_position(),
            Some((2, 3)),
            "the missed retry is queued again"
        );
    }

    /// A mock interview asks a choice follow-up aloud (its choices gave the answer away) and
    /// never asks a missed question again.
    #[test]
    fn a_mock_asks_choice_follow_ups_aloud_and_nothing_twice() {
        let lesson = SourceFile {
            path: "m.md".into(),
            text: "+++\nid = \"m\"\ntitle = \"M\"\norder = 1\nminutes = 1\n+++\n## S\n\n```quiz\nid = \"root\"\ntype = \"recall\"\nprompt = \"why?\"\nanswer = \"because\"\nfollow_ups = [\"pick\"]\n```\n\n```quiz\nid = \"pick\"\ntype = \"single\"\nprompt = \"which?\"\nchoices = [\"short\", \"the long and detailed right answer\"]\nanswer = 1\n```\n".into(),
        };
        let b = Bank::from_course(&Course::from_sources(Origin::Embedded, vec![lesson]));
        let root = b.index_of("root").expect("root");
        let mut s = Session::new(Mode::Mock, "m", vec![root], t0(), 1);
        s.advance(&b, t0());
        s.submit(&b, t0());
        s.rate(&b, SelfGrade::Again, t0()).expect("graded");
        s.advance(&b, t0());
        let c = s.current.as_ref().expect("the follow-up");
        assert_eq!(Some(c.entry), b.index_of("pick"));
        assert!(s.asked_aloud(&b));
        // Enter reveals the answer to grade oneself, as for a recall item.
        assert_eq!(s.submit(&b, t0()), None);
        let g = s.rate(&b, SelfGrade::Good, t0()).expect("self-graded");
        assert_eq!(g.correct, None);
        s.advance(&b, t0());
        assert!(s.finished, "the missed question is not asked again");
    }

    #[test]
    fn empty_and_invalid_answers_are_not_graded() {
        let b = bank();
        let mut s = Session::new(Mode::Quiz, "t", vec![0], t0(), 1);
        s.advance(&b, t0());
        assert_eq!(s.submit(&b, t0()), None);
        assert_eq!(
            s.current.as_ref().and_then(|c| c.note.as_deref()),
            Some(EMPTY_NOTE)
        );
        s.current.as_mut().expect("item").input = "4 ms".into();
        assert_eq!(
            s.submit(&b, t0()),
            None,
            "a unit on a plain number is refused"
        );
        assert!(s.accepts_input());
    }

    #[test]
    fn mock_chains_follow_ups() {
        let b = bank();
        let r = b.index_of("r").expect("r");
        let mut s = Session::new(Mode::Mock, "t", vec![r], t0(), 1);
        s.advance(&b, t0());
        s.submit(&b, t0());
        assert!(matches!(
            s.current.as_ref().map(|c| &c.phase),
            Some(Phase::Reveal { .. })
        ));
        s.rate(&b, SelfGrade::Good, t0()).expect("graded");
        s.advance(&b, t0());
        assert_eq!(s.current.as_ref().map(|c| c.entry), b.index_of("n"));
        assert_eq!(s.current.as_ref().and_then(|c| c.follow_up_of), Some(r));
        assert_eq!(s.queue.front().map(|q| q.0), b.index_of("r.1"));
    }

    #[test]
    fn timer_runs_out_and_session_length_ends_it() {
        let b = bank();
        let r = b.index_of("r").expect("r");
        let mut s =
            Session::new(Mode::Drill, "t", vec![0, r], t0(), 1).with_limits(Some(2), Some(60));
        s.advance(&b, t0());
        assert_eq!(s.tick(&b, t0() + Duration::seconds(30)), None);
        assert_eq!(s.time_left, Some(30));
        let g = s.tick(&b, t0() + Duration::seconds(61)).expect("timed out");
        assert_eq!(g.grade, SelfGrade::Again);
        s.advance(&b, t0() + Duration::seconds(90));
        assert!(!s.finished);
        s.current = None;
        s.advance(&b, t0() + Duration::seconds(61 + 60));
        assert!(s.finished, "two minutes are up");
    }
}
