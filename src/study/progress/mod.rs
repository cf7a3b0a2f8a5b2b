//! Progress that is never lost: one human-readable JSON file with a schema version, written
//! atomically (temp file, fsync, rename, fsync the directory). A corrupt file, or one written
//! by a newer ringlab, is moved aside with a timestamp and never overwritten.
//!
//! Schema 2 adds, per quiz item id, the review history and the FSRS card state
//! ([`ItemRecord`]). A schema 1 file is migrated on load (and a copy of it kept as
//! `progress.json.schema1.bak`). Items are keyed by id, so an edited lesson keeps the history
//! of every id it still has; ids that disappeared are reported as orphans and kept.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

mod store;
#[cfg(test)]
mod tests;

pub use store::*;

pub const SCHEMA: u32 = 2;
pub const FILE_NAME: &str = "progress.json";

/// What an imported file may hold (`validate`): items (and lessons, and labs) per file,
/// reviews per item, bytes per id. A course has hundreds of items and a learner a few
/// reviews a day of each: these are far past any real history, and well short of a file the
/// loader would refuse ([`crate::files::MAX_PROGRESS_BYTES`]).
pub const MAX_ITEMS: usize = 100_000;
pub const MAX_REVIEWS_PER_ITEM: usize = 10_000;
pub const MAX_ID_BYTES: usize = 256;
/// A review's mode ("quiz", "drill", "mock") is a short word.
pub const MAX_MODE_BYTES: usize = 32;

/// A lesson counts as read when this much of it is read. Since reading is earned by time on
/// screen ([`crate::study::reading`]) a lesson's fraction stays under it until every section is
/// read; a file from before that (no `sections`) holds the furthest scroll position instead,
/// and keeps the mark it had (see the README, "Lesson reader").
pub const DONE_FRACTION: f64 = 0.95;
/// Sections a lesson may have in a progress file (far past any lesson's headings).
pub const MAX_SECTIONS: usize = 1_000;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LessonProgress {
    /// How much of the lesson is read (0..=1): words read on screen, each section full at
    /// [`crate::study::reading::SECTION_READ`]; in files from before that, the furthest
    /// fraction scrolled to.
    pub read: f64,
    pub first_opened: DateTime<Utc>,
    pub last_opened: DateTime<Utc>,
    /// Per section (the text before the first heading, then each heading's), the share of its
    /// words read on screen. Absent in older files.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sections: Vec<f64>,
    /// Where the reader left the lesson: it reopens there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub place: Option<Place>,
}

/// A place in a lesson: the section (heading index, from 0, and its title, checked on reopen:
/// an edited lesson may have moved it) and the line under that heading.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Place {
    pub section: usize,
    pub title: String,
    pub line: usize,
}

/// What the reader reports of a lesson: how much is read, per section, and where it is.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadingNote {
    pub read: f64,
    pub sections: Vec<f64>,
    pub place: Option<Place>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Progress {
    pub schema: u32,
    #[serde(default)]
    pub lessons: BTreeMap<String, LessonProgress>,
    /// Review history and spaced-repetition state per quiz item id.
    #[serde(default)]
    pub items: BTreeMap<String, ItemRecord>,
    /// Hang-lab scenarios: solved, hints seen, whether the solution was revealed.
    #[serde(default)]
    pub labs: BTreeMap<String, LabRecord>,
    /// The track the learner follows (the map's "Next:" comes from it); None: the whole course.
    /// A track this ringlab does not know (a newer one's) reads as none, never as corruption.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient_track"
    )]
    pub track: Option<crate::study::track::TrackId>,
    /// Where the labs were left: the hang lab's last scenario, the live lab's last fields. A
    /// value this ringlab cannot read (a newer one's) reads as nothing, never as corruption.
    #[serde(
        default,
        skip_serializing_if = "LabPlace::is_empty",
        deserialize_with = "lenient_place"
    )]
    pub lab_place: LabPlace,
}

/// Where the labs were left, so that each reopens as it was.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LabPlace {
    /// The hang lab's scenario last staged, by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hang: Option<String>,
    /// The live lab's fields when it last ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub live: Option<LiveFields>,
}

impl LabPlace {
    pub fn is_empty(&self) -> bool {
        self.hang.is_none() && self.live.is_none()
    }
}

/// The live lab's fields (the lab's form edits this very type, `tui::screens::lab::LabParams`),
/// as the learner last ran them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LiveFields {
    pub coll: crate::collective::Collective,
    pub algo: crate::collective::Algorithm,
    pub ranks: usize,
    pub dtype: crate::collective::Dtype,
    pub minbytes: u64,
    pub maxbytes: u64,
    /// tcp (any machine) or nccl (one rank per GPU).
    pub backend: crate::lab::Backend,
    /// Runs per size (`bench -R`): more than one shows each size's median and warns when the
    /// runs spread too wide to read (a busy machine).
    pub repeat: usize,
}

fn lenient_place<'de, D: serde::Deserializer<'de>>(d: D) -> Result<LabPlace, D::Error> {
    let v = Option::<serde_json::Value>::deserialize(d)?;
    Ok(v.and_then(|v| serde_json::from_value(v).ok())
        .unwrap_or_default())
}

fn lenient_track<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<crate::study::track::TrackId>, D::Error> {
    let v = Option::<serde_json::Value>::deserialize(d)?;
    Ok(v.and_then(|v| serde_json::from_value(v).ok()))
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LabRecord {
    pub solved: bool,
    /// Hint tiers revealed (the last tier is the solution).
    pub hints_seen: usize,
    pub revealed_solution: bool,
    #[serde(default)]
    pub attempts: u32,
}

impl Default for Progress {
    fn default() -> Self {
        Self {
            schema: SCHEMA,
            lessons: BTreeMap::new(),
            items: BTreeMap::new(),
            labs: BTreeMap::new(),
            track: None,
            lab_place: LabPlace::default(),
        }
    }
}

/// Where an FSRS card is in its life (mirrors `rs_fsrs::State`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CardPhase {
    #[default]
    New,
    Learning,
    Review,
    Relearning,
}

/// An item's FSRS memory state, stored in ringlab's own words so the file does not depend on
/// the scheduler crate's field names.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CardState {
    pub due: DateTime<Utc>,
    pub stability: f64,
    pub difficulty: f64,
    pub elapsed_days: i64,
    pub scheduled_days: i64,
    pub reps: u32,
    pub lapses: u32,
    pub phase: CardPhase,
    pub last_review: Option<DateTime<Utc>>,
}

impl CardState {
    /// Whether FSRS can schedule from this card: finite numbers, and a positive stability
    /// once reviewed (stability 0 in review makes FSRS produce NaN, which JSON cannot hold).
    pub fn is_sound(&self) -> bool {
        self.stability.is_finite()
            && self.difficulty.is_finite()
            && (self.phase == CardPhase::New || self.stability > 0.0)
    }

    /// A card never reviewed, due at `at`.
    pub fn fresh(at: DateTime<Utc>) -> Self {
        Self {
            due: at,
            stability: 0.0,
            difficulty: 0.0,
            elapsed_days: 0,
            scheduled_days: 0,
            reps: 0,
            lapses: 0,
            phase: CardPhase::New,
            last_review: None,
        }
    }
}

/// The dates a progress file may hold: a review before 2000 or after 2200 is not one this
/// program made, and far-future dates break calendar arithmetic.
pub fn sane_date(t: &DateTime<Utc>) -> bool {
    use chrono::TimeZone;
    let lo = Utc.with_ymd_and_hms(2000, 1, 1, 0, 0, 0).single();
    let hi = Utc.with_ymd_and_hms(2200, 1, 1, 0, 0, 0).single();
    lo.is_some_and(|lo| *t >= lo) && hi.is_some_and(|hi| *t < hi)
}

/// One graded answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Review {
    pub at: DateTime<Utc>,
    /// FSRS grade 1..=4: Again, Hard, Good, Easy.
    pub grade: u8,
    /// For auto-graded items: was the typed answer right? None for self-graded recall.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correct: Option<bool>,
    /// "quiz", "drill" or "mock".
    #[serde(default)]
    pub mode: String,
    /// Seconds from showing the item to the answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds: Option<f64>,
}

/// Everything ringlab remembers about one quiz item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ItemRecord {
    pub card: CardState,
    #[serde(default)]
    pub reviews: Vec<Review>,
}

impl ItemRecord {
    pub fn last_review(&self) -> Option<&Review> {
        self.reviews.iter().max_by_key(|r| r.at)
    }
}

/// What [`Progress::merge`] changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MergeReport {
    /// Items only the imported file knew.
    pub added: usize,
    /// Items whose imported history was newer (their card state now comes from it).
    pub updated: usize,
    /// Items where this file's history was newer (kept, with any new reviews added).
    pub kept: usize,
    /// Items both files hold alike (the same reviews and card: importing one's own export).
    pub unchanged: usize,
    pub lessons: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LessonMark {
    New,
    Started,
    /// Read to the end; its quiz not yet passed.
    Read,
    /// Read to the end and every item of its quiz passed.
    Done,
}

/// Why progress was not read or written. Each message says the OS error once (no error
/// chain below it: `{:#}` would repeat it).
#[derive(Debug, thiserror::Error)]
pub enum ProgressError {
    #[error("cannot write progress to {path}: {error}")]
    Write { path: String, error: std::io::Error },
    #[error("cannot read progress from {path}: {error}")]
    Read { path: String, error: std::io::Error },
    /// A link or an existing file at a name the user gave (export).
    #[error("{0}")]
    Name(crate::files::WriteError),
    #[error(
        "progress would be {len} bytes, over the {} a progress file may be (the next start \
         would set it aside): not written to {path}, which is unchanged",
        crate::units::format_bytes(crate::files::MAX_PROGRESS_BYTES)
    )]
    TooBig { path: String, len: u64 },
}

impl ProgressError {
    /// A failed private write, in this error's words.
    pub fn from_write(e: crate::files::WriteError) -> Self {
        match e {
            crate::files::WriteError::Failed { path, error } => Self::Write {
                path: path.display().to_string(),
                error,
            },
            e => Self::Name(e),
        }
    }
}

/// What loading found, for the app to tell the learner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoadNotice {
    /// The file was unreadable as progress and was moved aside to this path.
    Quarantined { reason: String, moved_to: PathBuf },
    /// The file had an older schema and was upgraded in memory; the original was copied to
    /// `backup` (it is rewritten in the new schema at the next save).
    Migrated { from: u32, backup: Option<PathBuf> },
}

impl std::fmt::Display for LoadNotice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Quarantined { reason, moved_to } => write!(
                f,
                "progress file {reason}; kept it as {} and started fresh",
                moved_to.display()
            ),
            Self::Migrated { from, backup } => {
                write!(f, "progress file upgraded from schema {from} to {SCHEMA}")?;
                match backup {
                    Some(b) => write!(f, " (the old file is kept as {})", b.display()),
                    None => Ok(()),
                }
            }
        }
    }
}

impl Progress {
    /// Merge another progress file into this one. Per item the review histories are united,
    /// and the card state of whichever side reviewed it last wins; per lesson the furthest
    /// reading wins.
    pub fn merge(&mut self, other: &Progress) -> MergeReport {
        let mut report = MergeReport::default();
        self.track = self.track.or(other.track);
        // Where the labs were left: this side's, else the other's.
        let theirs = other.lab_place.clone();
        self.lab_place.hang = self.lab_place.hang.take().or(theirs.hang);
        self.lab_place.live = self.lab_place.live.or(theirs.live);
        for (name, theirs) in &other.labs {
            let mine = self.labs.entry(name.clone()).or_default();
            mine.solved |= theirs.solved;
            mine.revealed_solution |= theirs.revealed_solution;
            mine.hints_seen = mine.hints_seen.max(theirs.hints_seen);
            mine.attempts = mine.attempts.max(theirs.attempts);
        }
        for (id, theirs) in &other.lessons {
            match self.lessons.get_mut(id) {
                None => {
                    self.lessons.insert(id.clone(), theirs.clone());
                    report.lessons += 1;
                }
                Some(mine) => {
                    if theirs.read > mine.read || theirs.last_opened > mine.last_opened {
                        report.lessons += 1;
                    }
                    mine.read = mine.read.max(theirs.read);
                    max_into(&mut mine.sections, &theirs.sections);
                    if theirs.last_opened > mine.last_opened && theirs.place.is_some() {
                        mine.place = theirs.place.clone();
                    }
                    mine.first_opened = mine.first_opened.min(theirs.first_opened);
                    mine.last_opened = mine.last_opened.max(theirs.last_opened);
                }
            }
        }
        for (id, theirs) in &other.items {
            let Some(mine) = self.items.get_mut(id) else {
                self.items.insert(id.clone(), theirs.clone());
                report.added += 1;
                continue;
            };
            let newest = |r: &ItemRecord| r.last_review().map(|x| x.at);
            let theirs_newer = newest(theirs) > newest(mine);
            let same_card = mine.card == theirs.card;
            if theirs_newer {
                mine.card = theirs.card.clone();
            }
            // By (time, grade), in a set: items may hold thousands of reviews.
            let mut seen: std::collections::HashSet<(DateTime<Utc>, u8)> =
                mine.reviews.iter().map(|m| (m.at, m.grade)).collect();
            let before = mine.reviews.len();
            for r in &theirs.reviews {
                if seen.insert((r.at, r.grade)) {
                    mine.reviews.push(r.clone());
                }
            }
            let added = mine.reviews.len() > before;
            mine.reviews.sort_by_key(|r| r.at);
            match (theirs_newer, added || !same_card) {
                (true, _) => report.updated += 1,
                (false, true) => report.kept += 1,
                (false, false) => report.unchanged += 1,
            }
        }
        report
    }

    /// Make every number JSON can hold and FSRS can schedule from: a card that is not
    /// [`CardState::is_sound`] starts again as new (its review history is kept), a reading
    /// fraction that is not a finite 0..=1 is clamped. Returns the ids of the cards reset.
    pub fn repair(&mut self, now: DateTime<Utc>) -> Vec<String> {
        let mut reset = Vec::new();
        for (id, r) in &mut self.items {
            if !r.card.is_sound() {
                r.card = CardState::fresh(now);
                reset.push(id.clone());
            }
            for rv in &mut r.reviews {
                if rv.seconds.is_some_and(|s| !s.is_finite()) {
                    rv.seconds = None;
                }
            }
        }
        let unit = |x: f64| {
            if x.is_finite() {
                x.clamp(0.0, 1.0)
            } else {
                0.0
            }
        };
        for l in self.lessons.values_mut() {
            l.read = unit(l.read);
            l.sections.truncate(MAX_SECTIONS);
            for s in &mut l.sections {
                *s = unit(*s);
            }
        }
        reset
    }

    /// What is wrong with a file to import, naming each item: grades outside 1..=4, dates
    /// outside 2000..2200, numbers that are not finite or out of range; more than
    /// [`MAX_ITEMS`] items (lessons, labs), [`MAX_REVIEWS_PER_ITEM`] reviews of one item, an id
    /// over [`MAX_ID_BYTES`] bytes or with control characters.
    pub fn validate(&self) -> Result<(), String> {
        let mut bad = Vec::new();
        for (what, n) in [
            ("items", self.items.len()),
            ("lessons", self.lessons.len()),
            ("labs", self.labs.len()),
        ] {
            if n > MAX_ITEMS {
                bad.push(format!(
                    "{n} {what}, over the {MAX_ITEMS} a progress file may hold"
                ));
            }
        }
        let ids = self
            .items
            .keys()
            .map(|id| ("item", id))
            .chain(self.lessons.keys().map(|id| ("lesson", id)))
            .chain(self.labs.keys().map(|id| ("lab", id)));
        for (what, id) in ids {
            if id.len() > MAX_ID_BYTES {
                bad.push(format!(
                    "{what} `{}`: an id of {} bytes (ids are at most {MAX_ID_BYTES})",
                    shown_id(id),
                    id.len()
                ));
            }
            if id.chars().any(char::is_control) {
                bad.push(format!(
                    "{what} `{}`: the id has control characters",
                    shown_id(id)
                ));
            }
        }
        for (id, r) in &self.items {
            let id = shown_id(id);
            if r.reviews.len() > MAX_REVIEWS_PER_ITEM {
                bad.push(format!(
                    "item `{id}`: {} reviews, over the {MAX_REVIEWS_PER_ITEM} an item may have",
                    r.reviews.len()
                ));
            }
            for rv in &r.reviews {
                if rv.mode.len() > MAX_MODE_BYTES || rv.mode.chars().any(char::is_control) {
                    bad.push(format!(
                        "item `{id}`: a review's mode `{}` is not a mode",
                        shown_id(&rv.mode)
                    ));
                }
                if !(1..=4).contains(&rv.grade) {
                    bad.push(format!(
                        "item `{id}`: grade {} (grades are 1..=4: again, hard, good, easy)",
                        rv.grade
                    ));
                }
                if !sane_date(&rv.at) {
                    bad.push(format!(
                        "item `{id}`: a review dated {} (outside 2000..2200)",
                        rv.at
                    ));
                }
                if rv.seconds.is_some_and(|s| !s.is_finite() || s < 0.0) {
                    bad.push(format!("item `{id}`: a review took {:?} s", rv.seconds));
                }
            }
            let c = &r.card;
            if !sane_date(&c.due) || c.last_review.is_some_and(|t| !sane_date(&t)) {
                bad.push(format!(
                    "item `{id}`: card dates (due {}) outside 2000..2200",
                    c.due
                ));
            }
            if !c.is_sound() || c.stability < 0.0 || c.difficulty < 0.0 {
                bad.push(format!(
                    "item `{id}`: card stability {} / difficulty {} cannot be scheduled",
                    c.stability, c.difficulty
                ));
            }
        }
        for (id, l) in &self.lessons {
            let id = shown_id(id);
            if !l.read.is_finite() || !(0.0..=1.0).contains(&l.read) {
                bad.push(format!("lesson `{id}`: read {} is not 0..=1", l.read));
            }
            if l.sections.len() > MAX_SECTIONS
                || l.sections
                    .iter()
                    .any(|s| !s.is_finite() || !(0.0..=1.0).contains(s))
            {
                bad.push(format!(
                    "lesson `{id}`: sections must be at most {MAX_SECTIONS} shares of 0..=1"
                ));
            }
            if l.place.as_ref().is_some_and(|p| {
                p.title.len() > MAX_ID_BYTES || p.title.chars().any(char::is_control)
            }) {
                bad.push(format!("lesson `{id}`: the place's title is not a heading"));
            }
            if !sane_date(&l.first_opened) || !sane_date(&l.last_opened) {
                bad.push(format!("lesson `{id}`: dates outside 2000..2200"));
            }
        }
        if bad.is_empty() {
            return Ok(());
        }
        let n = bad.len();
        bad.truncate(5);
        Err(format!(
            "{n} problem(s): {}{}",
            bad.join("; "),
            if n > 5 { "; …" } else { "" }
        ))
    }

    /// Ids with history that `known` does not recognise (items removed or renamed in the course).
    pub fn orphans(&self, known: impl Fn(&str) -> bool) -> Vec<&str> {
        self.items
            .keys()
            .map(String::as_str)
            .filter(|id| !known(id))
            .collect()
    }

    /// Total graded answers on record.
    pub fn review_count(&self) -> usize {
        self.items.values().map(|r| r.reviews.len()).sum()
    }

    /// Where a lesson stands: done means read to the end *and* its quiz passed (`quiz`: the
    /// lesson's quiz item ids; a lesson without a quiz is done when read).
    pub fn lesson_state(&self, id: &str, quiz: &[String]) -> LessonMark {
        match self.lessons.get(id) {
            None => LessonMark::New,
            Some(p) if p.read >= DONE_FRACTION => {
                if quiz.iter().all(|i| self.item_passed(i)) {
                    LessonMark::Done
                } else {
                    LessonMark::Read
                }
            }
            Some(_) => LessonMark::Started,
        }
    }

    /// An item whose last answer was right (auto-graded) or graded Good or Easy (recall).
    pub fn item_passed(&self, id: &str) -> bool {
        self.items
            .get(id)
            .and_then(ItemRecord::last_review)
            .is_some_and(|r| r.correct.unwrap_or(r.grade >= 3))
    }

    /// Note that `fraction` of lesson `id` is read; returns true when that changed anything
    /// worth saving.
    pub fn note_reading(&mut self, id: &str, fraction: f64, now: DateTime<Utc>) -> bool {
        let note = ReadingNote {
            read: fraction,
            sections: Vec::new(),
            place: None,
        };
        self.note_lesson(id, &note, now)
    }

    /// Note what the reader reports of lesson `id`: the reading only ever grows (per section
    /// and in all), the place is where the reader is now. True when the reading grew (worth
    /// saving at once).
    pub fn note_lesson(&mut self, id: &str, note: &ReadingNote, now: DateTime<Utc>) -> bool {
        let fraction = if note.read.is_finite() {
            note.read.clamp(0.0, 1.0)
        } else {
            0.0
        };
        let p = self
            .lessons
            .entry(id.to_string())
            .or_insert_with(|| LessonProgress {
                read: -1.0,
                first_opened: now,
                last_opened: now,
                sections: Vec::new(),
                place: None,
            });
        p.last_opened = now;
        if note.place.is_some() {
            p.place = note.place.clone();
        }
        let before = p.sections.clone();
        max_into(&mut p.sections, &note.sections);
        let grew = fraction > p.read + 1e-9 || p.sections != before;
        p.read = p.read.max(fraction);
        grew
    }

    /// How much of a lesson is read (0..=1), None when never opened.
    pub fn read_fraction(&self, id: &str) -> Option<f64> {
        self.lessons.get(id).map(|p| p.read)
    }

    /// Where the reader left lesson `id`.
    pub fn place(&self, id: &str) -> Option<&Place> {
        self.lessons.get(id).and_then(|p| p.place.as_ref())
    }
}

/// Each share the larger of the two (a lesson that grew sections takes the longer list).
fn max_into(mine: &mut Vec<f64>, theirs: &[f64]) {
    if mine.len() < theirs.len() {
        mine.resize(theirs.len(), 0.0);
    }
    for (m, t) in mine.iter_mut().zip(theirs) {
        if t.is_finite() {
            *m = m.max(t.clamp(0.0, 1.0));
        }
    }
}

/// An id as an error message shows it: control characters escaped (`\x1b`), at most 40
/// characters (then `…`).
fn shown_id(id: &str) -> String {
    let mut out: String = id
        .chars()
        .take(40)
        .map(|c| {
            if c.is_control() {
                format!("\\x{:02x}", c as u32)
            } else {
                c.to_string()
            }
        })
        .collect();
    if id.chars().nth(40).is_some() {
        out.push('…');
    }
    out
}
