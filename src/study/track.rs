//! Tracks: an order through the course, step by step, with the minutes each step takes and
//! what is done. The whole course reads every lesson and takes its quiz; the interview sprint
//! is about two hours of what matters most in an interview.
//!
//! Minutes are computed where they can be: a lesson's from its words at
//! [`reading::ESTIMATE_WPM`], a quiz's from its items, a mock interview's from its questions.
//! Only a hang-lab scenario's is given (the time to diagnose it is not in any text).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::progress::{LessonMark, Progress};
use super::reading;
use crate::course::Course;

/// Minutes a quiz item takes (read, think, answer, read the explanation).
pub const MINUTES_PER_QUIZ_ITEM: f64 = 1.0;
/// Minutes a mock-interview question takes with its follow-ups, answered aloud.
pub const MINUTES_PER_MOCK_QUESTION: f64 = 2.5;

/// Which track the learner follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum TrackId {
    /// Every lesson in order, each followed by its quiz.
    #[default]
    Course,
    /// About two hours: the lessons, quizzes, lab and mock interview that matter most.
    Interview,
}

impl TrackId {
    pub const ALL: [TrackId; 2] = [TrackId::Course, TrackId::Interview];

    pub fn title(self) -> &'static str {
        match self {
            TrackId::Course => "The whole course",
            TrackId::Interview => "Interview sprint (about 2 hours)",
        }
    }
}

/// One step of a track.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Read a lesson (by id).
    Read(String),
    /// Pass a lesson's quiz (by lesson id).
    Quiz(String),
    /// Solve a hang-lab scenario (by name), in about this many minutes.
    Lab(String, u32),
    /// A mock interview.
    Mock,
}

impl Step {
    /// The lesson a step is about.
    pub fn lesson(&self) -> Option<&str> {
        match self {
            Step::Read(id) | Step::Quiz(id) => Some(id),
            Step::Lab(..) | Step::Mock => None,
        }
    }

    /// Both steps are of one lesson (reading it, its quiz), or the same step.
    fn same_place(&self, other: &Step) -> bool {
        match (self.lesson(), other.lesson()) {
            (Some(a), Some(b)) => a == b,
            _ => self == other,
        }
    }
}

/// The interview sprint, in order.
fn interview() -> Vec<Step> {
    let l = |id: &str| [Step::Read(id.into()), Step::Quiz(id.into())];
    let mut v = Vec::new();
    v.extend(l("collectives"));
    v.extend(l("ring-allreduce"));
    v.extend(l("tensor-parallelism"));
    v.extend(l("measuring-bandwidth"));
    v.push(Step::Quiz("debugging-hangs".into()));
    v.push(Step::Lab("docker0".into(), 10));
    v.push(Step::Mock);
    v
}

/// What a track needs to know of the course: each lesson's quiz item ids.
pub struct Planner<'a> {
    pub course: &'a Course,
    pub quizzes: &'a BTreeMap<String, Vec<String>>,
    pub progress: &'a Progress,
}

/// A step with its minutes and whether it is done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Planned {
    pub step: Step,
    pub minutes: u32,
    pub done: bool,
}

impl Planner<'_> {
    /// The steps of `track` that this course has (a step naming a lesson the course lacks is
    /// left out), with minutes and what is done.
    pub fn steps(&self, track: TrackId) -> Vec<Planned> {
        let steps = match track {
            TrackId::Course => self
                .course
                .lessons()
                .flat_map(|l| {
                    let id = l.meta.id.clone();
                    let quiz = !self.quiz_of(&id).is_empty();
                    std::iter::once(Step::Read(id.clone())).chain(quiz.then_some(Step::Quiz(id)))
                })
                .collect(),
            TrackId::Interview => interview(),
        };
        steps
            .into_iter()
            .filter_map(|step| {
                let minutes = self.minutes(&step)?;
                let done = self.done(&step);
                Some(Planned {
                    step,
                    minutes,
                    done,
                })
            })
            .collect()
    }

    fn quiz_of(&self, lesson: &str) -> &[String] {
        self.quizzes.get(lesson).map_or(&[], Vec::as_slice)
    }

    /// Minutes a step takes; None when the course lacks what it names.
    fn minutes(&self, step: &Step) -> Option<u32> {
        let minutes = |m: f64| (m.round() as u32).max(1);
        match step {
            Step::Read(id) => {
                let l = self.course.lessons().find(|l| &l.meta.id == id)?;
                Some(reading::minutes_for(prose_words(&l.body)))
            }
            Step::Quiz(id) => match self.quiz_of(id).len() {
                0 => None,
                n => Some(minutes(n as f64 * MINUTES_PER_QUIZ_ITEM)),
            },
            Step::Lab(_, m) => Some(*m),
            Step::Mock => Some(minutes(
                super::session::MOCK_QUESTIONS as f64 * MINUTES_PER_MOCK_QUESTION,
            )),
        }
    }

    pub fn done(&self, step: &Step) -> bool {
        let p = self.progress;
        match step {
            Step::Read(id) => matches!(
                p.lesson_state(id, self.quiz_of(id)),
                LessonMark::Read | LessonMark::Done
            ),
            Step::Quiz(id) => self.quiz_of(id).iter().all(|i| p.item_passed(i)),
            Step::Lab(name, _) => p.labs.get(name).is_some_and(|r| r.solved),
            Step::Mock => p
                .items
                .values()
                .any(|r| r.reviews.iter().any(|v| v.mode == "mock")),
        }
    }

    /// The next step of `track` not yet done: the first after `after` (where the learner just
    /// was), else the first of the track, never a step of the lesson the learner is leaving;
    /// None when every other step is done.
    pub fn next(&self, track: TrackId, after: Option<&Step>) -> Option<Planned> {
        let steps = self.steps(track);
        let from = after
            .and_then(|a| steps.iter().position(|p| &p.step == a))
            .map_or(0, |i| i + 1);
        steps[from..]
            .iter()
            .chain(&steps[..from])
            .find(|p| !p.done && !after.is_some_and(|a| a.same_place(&p.step)))
            .cloned()
    }
}

/// Words of a lesson's text, its quiz blocks left out (they are the quiz's minutes).
pub fn prose_words(body: &str) -> u64 {
    let mut in_quiz = false;
    let mut n = 0u64;
    for line in body.lines() {
        let fence = line.trim_start().starts_with("```");
        if fence && !in_quiz && line.trim_start().trim_start_matches('`').trim() == "quiz" {
            in_quiz = true;
        } else if fence && in_quiz {
            in_quiz = false;
        } else if !in_quiz {
            n += u64::from(reading::words(line));
        }
    }
    n
}

/// "1 h 35 min", "40 min".
pub fn duration(minutes: u32) -> String {
    match (minutes / 60, minutes % 60) {
        (0, m) => format!("{m} min"),
        (h, 0) => format!("{h} h"),
        (h, m) => format!("{h} h {m} min"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn planner_parts() -> (Course, BTreeMap<String, Vec<String>>) {
        let course = Course::embedded();
        let quizzes = crate::course::bank::Bank::from_course(&course).lesson_quizzes();
        (course, quizzes)
    }

    #[test]
    fn the_interview_sprint_is_about_two_hours_of_steps_the_course_has() {
        let (course, quizzes) = planner_parts();
        let progress = Progress::default();
        let p = Planner {
            course: &course,
            quizzes: &quizzes,
            progress: &progress,
        };
        let steps = p.steps(TrackId::Interview);
        assert_eq!(
            steps.len(),
            interview().len(),
            "every step is in the course"
        );
        let total: u32 = steps.iter().map(|s| s.minutes).sum();
        assert!((100..=140).contains(&total), "{total} minutes");
        // A lesson's minutes come from its words.
        let ring = course
            .lessons()
            .find(|l| l.meta.id == "ring-allreduce")
            .expect("lesson");
        assert_eq!(
            steps[2].minutes,
            reading::minutes_for(prose_words(&ring.body))
        );
        assert_eq!(steps[3].minutes, quizzes["ring-allreduce"].len() as u32);
    }

    #[test]
    fn next_is_the_first_step_not_done_after_where_the_learner_was() {
        let (course, quizzes) = planner_parts();
        let mut progress = Progress::default();
        let now = chrono::Utc::now();
        progress.note_reading("collectives", 1.0, now);
        let p = Planner {
            course: &course,
            quizzes: &quizzes,
            progress: &progress,
        };
        let next = |after: Option<&Step>| p.next(TrackId::Course, after).map(|s| s.step);
        assert_eq!(next(None), Some(Step::Quiz("collectives".into())));
        // After the quiz (even one not passed yet), the path goes on to the next lesson.
        assert_eq!(
            next(Some(&Step::Quiz("collectives".into()))),
            Some(Step::Read("ring-allreduce".into()))
        );
        // Leaving the last lesson, the path goes back to the first step not done, never to
        // the lesson being left.
        let last = course.lessons().last().expect("lessons").meta.id.clone();
        assert_eq!(
            next(Some(&Step::Read(last))),
            Some(Step::Quiz("collectives".into()))
        );
    }

    #[test]
    fn quiz_blocks_are_not_reading() {
        let body = "# T\n\nfour words are here\n\n```quiz\nid = \"x\"\nprompt = \"a b c\"\n```\n";
        assert_eq!(prose_words(body), 5);
        assert_eq!(duration(95), "1 h 35 min");
        assert_eq!(duration(40), "40 min");
    }
}
