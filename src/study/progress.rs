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
use std::io::Write;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

pub const SCHEMA: u32 = 2;
pub const FILE_NAME: &str = "progress.json";

/// A lesson counts as read when the reader has seen this much of it.
pub const DONE_FRACTION: f64 = 0.95;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LessonProgress {
    /// Furthest fraction of the lesson seen (0..=1).
    pub read: f64,
    pub first_opened: DateTime<Utc>,
    pub last_opened: DateTime<Utc>,
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
    /// Items where this file's history was newer or equal (kept, with any new reviews added).
    pub kept: usize,
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

#[derive(Debug, thiserror::Error)]
pub enum ProgressError {
    #[error("cannot write progress to {path}: {source}")]
    Write {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot read progress from {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
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
            if newest(theirs) > newest(mine) {
                mine.card = theirs.card.clone();
                report.updated += 1;
            } else {
                report.kept += 1;
            }
            for r in &theirs.reviews {
                if !mine
                    .reviews
                    .iter()
                    .any(|m| m.at == r.at && m.grade == r.grade)
                {
                    mine.reviews.push(r.clone());
                }
            }
            mine.reviews.sort_by_key(|r| r.at);
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
        for l in self.lessons.values_mut() {
            l.read = if l.read.is_finite() {
                l.read.clamp(0.0, 1.0)
            } else {
                0.0
            };
        }
        reset
    }

    /// What is wrong with a file to import, naming each item: grades outside 1..=4, dates
    /// outside 2000..2200, numbers that are not finite or out of range.
    pub fn validate(&self) -> Result<(), String> {
        let mut bad = Vec::new();
        for (id, r) in &self.items {
            for rv in &r.reviews {
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
            if !l.read.is_finite() || !(0.0..=1.0).contains(&l.read) {
                bad.push(format!("lesson `{id}`: read {} is not 0..=1", l.read));
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

    /// Note that `fraction` of lesson `id` has been seen; returns true when that changed anything
    /// worth saving.
    pub fn note_reading(&mut self, id: &str, fraction: f64, now: DateTime<Utc>) -> bool {
        let fraction = fraction.clamp(0.0, 1.0);
        match self.lessons.get_mut(id) {
            Some(p) => {
                p.last_opened = now;
                if fraction > p.read + 1e-9 {
                    p.read = fraction;
                    return true;
                }
                false
            }
            None => {
                self.lessons.insert(
                    id.to_string(),
                    LessonProgress {
                        read: fraction,
                        first_opened: now,
                        last_opened: now,
                    },
                );
                true
            }
        }
    }
}

/// Where progress lives: `$RINGLAB_HOME`, else `$XDG_DATA_HOME/ringlab`, else
/// `~/.local/share/ringlab`.
pub fn data_dir() -> PathBuf {
    if let Some(h) = std::env::var_os("RINGLAB_HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(h);
    }
    if let Some(x) = std::env::var_os("XDG_DATA_HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(x).join("ringlab");
    }
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("."), PathBuf::from);
    home.join(".local/share/ringlab")
}

#[derive(Debug, Deserialize)]
struct SchemaOnly {
    schema: u32,
}

/// Load progress from `dir`. A missing file is a fresh start; a corrupt or newer one is
/// quarantined (renamed with a timestamp) and reported, never overwritten.
pub fn load(dir: &Path) -> Result<(Progress, Option<LoadNotice>), ProgressError> {
    remove_stale_temps(dir);
    let path = dir.join(FILE_NAME);
    if let Ok(m) = fs::metadata(&path)
        && m.len() > crate::files::MAX_PROGRESS_BYTES
    {
        return quarantine(
            &path,
            format!(
                "is {} bytes, over the {} a progress file may be",
                m.len(),
                crate::units::format_bytes(crate::files::MAX_PROGRESS_BYTES)
            ),
        );
    }
    let text = match fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok((Progress::default(), None));
        }
        Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
            return quarantine(&path, "is not UTF-8 text".into());
        }
        Err(source) => {
            return Err(ProgressError::Read {
                path: path.display().to_string(),
                source,
            });
        }
    };
    match serde_json::from_str::<SchemaOnly>(&text) {
        Ok(s) if s.schema > SCHEMA => {
            return quarantine(
                &path,
                format!(
                    "was written by a newer ringlab (schema {} > {SCHEMA})",
                    s.schema
                ),
            );
        }
        _ => {}
    }
    let value = match serde_json::from_str::<serde_json::Value>(&text) {
        Ok(v) => v,
        Err(e) => return quarantine(&path, format!("is corrupt ({e})")),
    };
    let (value, from) = match migrate(value) {
        Ok(m) => m,
        Err(e) => return quarantine(&path, format!("is corrupt ({e})")),
    };
    match serde_json::from_value::<Progress>(value) {
        Ok(p) if from < SCHEMA => {
            let backup = path.with_file_name(format!("{FILE_NAME}.schema{from}.bak"));
            let backup = (backup.exists() || fs::copy(&path, &backup).is_ok()).then_some(backup);
            Ok((p, Some(LoadNotice::Migrated { from, backup })))
        }
        Ok(p) => Ok((p, None)),
        Err(e) => quarantine(&path, format!("is corrupt ({e})")),
    }
}

/// Bring a parsed progress file up to [`SCHEMA`], one version at a time. Returns the upgraded
/// JSON and the schema it was written in.
pub fn migrate(mut v: serde_json::Value) -> Result<(serde_json::Value, u32), String> {
    let obj = v.as_object_mut().ok_or("not a JSON object")?;
    let from64 = obj
        .get("schema")
        .and_then(serde_json::Value::as_u64)
        .ok_or("no schema number")?;
    if from64 == 0 {
        return Err("schema 0 does not exist".into());
    }
    if from64 > u64::from(SCHEMA) {
        return Err(format!(
            "schema {from64} is not one this ringlab knows (it writes {SCHEMA})"
        ));
    }
    let from = from64 as u32;
    let mut at = from;
    while at < SCHEMA {
        match at {
            // 1 → 2: per-item review history and FSRS state arrive, empty.
            1 => {
                obj.entry("items")
                    .or_insert_with(|| serde_json::Value::Object(Default::default()));
            }
            _ => return Err(format!("no migration from schema {at}")),
        }
        at += 1;
        obj.insert("schema".into(), serde_json::Value::from(at));
    }
    Ok((v, from))
}

/// Read a progress file for import: it must be readable and of this or an older schema.
/// Unlike [`load`] it never moves the file.
pub fn read_file(path: &Path) -> Result<Progress, String> {
    let shown = path.display();
    let bytes =
        crate::files::read_bounded(path, crate::files::MAX_PROGRESS_BYTES, "progress file")?;
    let text = String::from_utf8(bytes).map_err(|_| format!("{shown} is not UTF-8 text"))?;
    let value: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("{shown} is not valid JSON ({e})"))?;
    if let Some(s) = value.get("schema").and_then(serde_json::Value::as_u64)
        && s > u64::from(SCHEMA)
    {
        return Err(format!(
            "{shown} was written by a newer ringlab (schema {s} > {SCHEMA}); update ringlab first"
        ));
    }
    let (value, _) = migrate(value).map_err(|e| format!("{shown} is not a progress file: {e}"))?;
    let p: Progress = serde_json::from_value(value)
        .map_err(|e| format!("{shown} is not a progress file: {e}"))?;
    p.validate()
        .map_err(|e| format!("{shown} was not imported: {e}"))?;
    Ok(p)
}

/// Write progress to any path, atomically (export).
pub fn write_file(path: &Path, progress: &Progress) -> Result<(), ProgressError> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = path
        .file_name()
        .map_or_else(|| FILE_NAME.into(), |n| n.to_string_lossy().into_owned());
    save_as(&dir, &name, progress)
}

fn quarantine(
    path: &Path,
    reason: String,
) -> Result<(Progress, Option<LoadNotice>), ProgressError> {
    let stamp = Utc::now().format("%Y%m%dT%H%M%S%.3fZ");
    let moved_to = path.with_file_name(format!("{FILE_NAME}.quarantined-{stamp}"));
    fs::rename(path, &moved_to).map_err(|source| ProgressError::Write {
        path: moved_to.display().to_string(),
        source,
    })?;
    Ok((
        Progress::default(),
        Some(LoadNotice::Quarantined { reason, moved_to }),
    ))
}

/// What stands in the way of keeping progress in `dir`: a folder that cannot be read, is
/// read-only, or a file system that is full. Empty when saving should work.
pub fn storage_warnings(dir: &Path) -> Vec<String> {
    use std::os::unix::ffi::OsStrExt;
    let mut out = Vec::new();
    let shown = dir.display();
    if !dir.exists() {
        return out;
    }
    if let Err(e) = fs::read_dir(dir) {
        out.push(format!("cannot read the progress folder {shown}: {e}"));
    }
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return out;
    };
    // SAFETY: access and statvfs read a NUL-terminated path; st is a valid out pointer.
    unsafe {
        if libc::access(c.as_ptr(), libc::W_OK) != 0 {
            out.push(format!(
                "the progress folder {shown} is read-only ({}): progress will not be saved",
                std::io::Error::last_os_error()
            ));
        }
        let mut st: libc::statvfs = std::mem::zeroed();
        if libc::statvfs(c.as_ptr(), &mut st) == 0 {
            let free = st.f_bavail as u64 * st.f_frsize as u64;
            if free < 1 << 20 {
                out.push(format!(
                    "the file system of {shown} is full ({free} bytes free): progress will not be saved"
                ));
            }
        }
    }
    out
}

/// The advisory lock every read-merge-write of `dir`'s progress holds (flock on
/// `dir/.progress.lock`; released when the file closes, also when a process dies). None where
/// the file system has no locks (an NFS home without lockd): the save goes ahead unlocked, as
/// before locks existed, rather than never.
fn lock(dir: &Path) -> Result<Option<File>, ProgressError> {
    use std::os::fd::AsRawFd;
    let path = dir.join(".progress.lock");
    let err = |source| ProgressError::Write {
        path: path.display().to_string(),
        source,
    };
    fs::create_dir_all(dir).map_err(err)?;
    let f = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(err)?;
    loop {
        // SAFETY: flock on a descriptor this function owns.
        if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) } == 0 {
            return Ok(Some(f));
        }
        let e = std::io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::ENOLCK) | Some(libc::EOPNOTSUPP) => return Ok(None),
            _ => return Err(err(e)),
        }
    }
}

/// Save `progress` to `dir` without losing what another ringlab saved meanwhile: under the
/// lock, the file is read again and merged into `progress` by item (the newer review wins,
/// histories are united, as import does), cards that could not be scheduled are repaired,
/// and the result is written atomically. `progress` ends as what was written. Returns what
/// the re-read found worth telling (a file that had turned corrupt is moved aside, never
/// overwritten).
pub fn save(dir: &Path, progress: &mut Progress) -> Result<Option<LoadNotice>, ProgressError> {
    let _guard = lock(dir)?;
    let (disk, notice) = load(dir)?;
    progress.merge(&disk);
    progress.repair(Utc::now());
    save_as(dir, FILE_NAME, progress)?;
    Ok(notice.filter(|n| matches!(n, LoadNotice::Quarantined { .. })))
}

/// Where a chain of symlinks at `path` ends (relative targets resolved against each link's
/// folder; at most 40 hops, as the kernel allows).
fn resolve_links(path: &Path) -> PathBuf {
    let mut p = path.to_path_buf();
    for _ in 0..40 {
        match fs::read_link(&p) {
            Ok(t) => p = p.parent().map_or(t.clone(), |d| d.join(&t)),
            Err(_) => break,
        }
    }
    p
}

/// Leftover `.progress.json.tmp-PID` files of processes that no longer exist (a save killed
/// between write and rename).
fn remove_stale_temps(dir: &Path) {
    // A symlinked progress file is written next to its target: look there too.
    let target = resolve_links(&dir.join(FILE_NAME));
    let (tdir, tname) = match (target.parent(), target.file_name()) {
        (Some(d), Some(n)) => (d.to_path_buf(), n.to_string_lossy().into_owned()),
        _ => (dir.to_path_buf(), FILE_NAME.to_string()),
    };
    if tdir != dir || tname != FILE_NAME {
        remove_stale_temps_named(&tdir, &tname);
    }
    remove_stale_temps_named(dir, FILE_NAME);
}

fn remove_stale_temps_named(dir: &Path, name: &str) {
    let Ok(rd) = fs::read_dir(dir) else {
        return;
    };
    let prefix = format!(".{name}.tmp-");
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix(&prefix)
            .and_then(|p| p.parse::<i32>().ok())
        else {
            continue;
        };
        // SAFETY: kill with signal 0 only asks whether the process exists.
        let gone = pid > 0
            && unsafe { libc::kill(pid, 0) } != 0
            && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
        if gone {
            let _ = fs::remove_file(e.path());
        }
    }
}

/// Write atomically: a reader sees the old file or the new one, never a mix or nothing. A
/// symlinked file is written through: the link stays and its target gets the new contents.
fn save_as(dir: &Path, name: &str, progress: &Progress) -> Result<(), ProgressError> {
    let mut path = dir.join(name);
    let err = |path: &Path, source| ProgressError::Write {
        path: path.display().to_string(),
        source,
    };
    fs::create_dir_all(dir).map_err(|e| err(&path, e))?;
    path = resolve_links(&path);
    let (dir, name) = match (path.parent(), path.file_name()) {
        (Some(d), Some(n)) => (d.to_path_buf(), n.to_string_lossy().into_owned()),
        _ => (dir.to_path_buf(), name.to_string()),
    };
    let json =
        serde_json::to_string_pretty(progress).map_err(|e| err(&path, std::io::Error::other(e)))?;
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let result = (|| {
        let mut f = File::create(&tmp)?;
        f.write_all(json.as_bytes())?;
        f.write_all(b"\n")?;
        f.sync_all()?;
        fs::rename(&tmp, &path)?;
        File::open(&dir)?.sync_all()
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result.map_err(|e| err(&path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Done means read to the end and the quiz passed: paging to the end alone is "read".
    #[test]
    fn a_lesson_is_done_when_read_and_its_quiz_passed() {
        use crate::course::grade::SelfGrade;
        let mut p = Progress::default();
        let now = Utc::now();
        let quiz = vec!["q1".to_string(), "q2".to_string()];
        assert_eq!(p.lesson_state("ring", &quiz), LessonMark::New);
        p.note_reading("ring", 1.0, now);
        assert_eq!(p.lesson_state("ring", &quiz), LessonMark::Read);
        p.record_review("q1", SelfGrade::Good, Some(true), "quiz", None, now);
        p.record_review("q2", SelfGrade::Again, Some(false), "quiz", None, now);
        assert_eq!(
            p.lesson_state("ring", &quiz),
            LessonMark::Read,
            "q2 was wrong"
        );
        let later = now + chrono::Duration::minutes(5);
        p.record_review("q2", SelfGrade::Good, Some(true), "quiz", None, later);
        assert_eq!(p.lesson_state("ring", &quiz), LessonMark::Done);
        // A self-graded recall item passes at Good or Easy, not at Hard.
        p.record_review("q1", SelfGrade::Hard, None, "quiz", None, later);
        assert_eq!(p.lesson_state("ring", &quiz), LessonMark::Read);
        // No quiz: read is done.
        assert_eq!(p.lesson_state("ring", &[]), LessonMark::Done);
    }

    #[test]
    fn round_trip_and_marks() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut p = Progress::default();
        let now = Utc::now();
        assert!(p.note_reading("collectives", 0.5, now));
        assert!(
            !p.note_reading("collectives", 0.4, now),
            "reading less is no news"
        );
        p.note_reading("ring", 1.0, now);
        save(dir.path(), &mut p).expect("save");
        let (q, notice) = load(dir.path()).expect("load");
        assert_eq!(notice, None);
        assert_eq!(q, p);
        assert_eq!(q.lesson_state("collectives", &[]), LessonMark::Started);
        assert_eq!(q.lesson_state("ring", &[]), LessonMark::Done);
        assert_eq!(q.lesson_state("tp", &[]), LessonMark::New);
    }

    #[test]
    fn corrupt_progress_file_is_quarantined_not_overwritten() {
        let dir = tempfile::tempdir().expect("tempdir");
        fs::write(dir.path().join(FILE_NAME), "{ not json").expect("write");
        let (p, notice) = load(dir.path()).expect("load");
        assert_eq!(p, Progress::default());
        let Some(LoadNotice::Quarantined { moved_to, reason }) = notice else {
            panic!("expected quarantine")
        };
        assert!(reason.contains("corrupt"));
        assert_eq!(fs::read_to_string(moved_to).expect("kept"), "{ not json");
        assert!(!dir.path().join(FILE_NAME).exists());
    }

    #[test]
    fn newer_schema_is_quarantined() {
        let dir = tempfile::tempdir().expect("tempdir");
        fs::write(
            dir.path().join(FILE_NAME),
            r#"{"schema": 99, "lessons": {}}"#,
        )
        .expect("write");
        let (_, notice) = load(dir.path()).expect("load");
        assert!(
            matches!(notice, Some(LoadNotice::Quarantined { reason, .. }) if reason.contains("newer"))
        );
    }

    #[test]
    fn empty_progress_file_is_quarantined() {
        let dir = tempfile::tempdir().expect("tempdir");
        fs::write(dir.path().join(FILE_NAME), "").expect("write");
        let (p, notice) = load(dir.path()).expect("load");
        assert_eq!(p, Progress::default());
        assert!(matches!(notice, Some(LoadNotice::Quarantined { .. })));
    }

    #[test]
    fn schema_1_file_is_migrated_keeping_lessons_and_a_backup() {
        let dir = tempfile::tempdir().expect("tempdir");
        let v1 = r#"{
  "schema": 1,
  "lessons": {
    "collectives": {
      "read": 0.5,
      "first_opened": "2025-01-02T03:04:05Z",
      "last_opened": "2025-01-03T03:04:05Z"
    }
  }
}"#;
        fs::write(dir.path().join(FILE_NAME), v1).expect("write");
        let (mut p, notice) = load(dir.path()).expect("load");
        assert_eq!(p.schema, SCHEMA);
        assert_eq!(p.lesson_state("collectives", &[]), LessonMark::Started);
        assert!(p.items.is_empty());
        let Some(LoadNotice::Migrated {
            from: 1,
            backup: Some(b),
        }) = notice
        else {
            panic!("expected a migration notice, got {notice:?}")
        };
        assert_eq!(fs::read_to_string(b).expect("backup"), v1);
        // Saved again, it loads as schema 2 with no notice.
        save(dir.path(), &mut p).expect("save");
        let (q, notice) = load(dir.path()).expect("load");
        assert_eq!((q, notice), (p, None));
    }

    fn record(at: &str, grade: u8, due: &str) -> ItemRecord {
        let at: DateTime<Utc> = at.parse().expect("time");
        ItemRecord {
            card: CardState {
                due: due.parse().expect("time"),
                stability: 1.0,
                difficulty: 5.0,
                elapsed_days: 0,
                scheduled_days: 1,
                reps: 1,
                lapses: 0,
                phase: CardPhase::Review,
                last_review: Some(at),
            },
            reviews: vec![Review {
                at,
                grade,
                correct: None,
                mode: "drill".into(),
                seconds: None,
            }],
        }
    }

    #[test]
    fn merge_keeps_the_newer_review_per_item() {
        let mut mine = Progress::default();
        mine.items.insert(
            "a".into(),
            record("2025-01-01T00:00:00Z", 3, "2025-01-05T00:00:00Z"),
        );
        mine.items.insert(
            "b".into(),
            record("2025-02-01T00:00:00Z", 4, "2025-03-01T00:00:00Z"),
        );
        let mut theirs = Progress::default();
        theirs.items.insert(
            "a".into(),
            record("2025-01-10T00:00:00Z", 1, "2025-01-10T00:01:00Z"),
        );
        theirs.items.insert(
            "b".into(),
            record("2025-01-15T00:00:00Z", 3, "2025-01-20T00:00:00Z"),
        );
        theirs.items.insert(
            "c".into(),
            record("2025-01-15T00:00:00Z", 3, "2025-01-20T00:00:00Z"),
        );
        let r = mine.merge(&theirs);
        assert_eq!((r.added, r.updated, r.kept), (1, 1, 1));
        let a = &mine.items["a"];
        assert_eq!(
            a.card.due,
            "2025-01-10T00:01:00Z".parse::<DateTime<Utc>>().expect("t")
        );
        assert_eq!(a.reviews.len(), 2);
        assert!(a.reviews[0].at < a.reviews[1].at, "history stays in order");
        assert_eq!(
            mine.items["b"].card.due,
            "2025-03-01T00:00:00Z".parse::<DateTime<Utc>>().expect("t")
        );
        // Merging the same file twice changes nothing more.
        let before = mine.clone();
        mine.merge(&theirs);
        assert_eq!(mine, before);
    }

    #[test]
    fn orphans_are_ids_the_course_no_longer_has() {
        let mut p = Progress::default();
        p.items.insert(
            "kept".into(),
            record("2025-01-01T00:00:00Z", 3, "2025-01-05T00:00:00Z"),
        );
        p.items.insert(
            "gone".into(),
            record("2025-01-01T00:00:00Z", 3, "2025-01-05T00:00:00Z"),
        );
        assert_eq!(p.orphans(|id| id == "kept"), vec!["gone"]);
    }

    #[test]
    fn import_refuses_a_newer_file_without_moving_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let f = dir.path().join("other.json");
        fs::write(&f, r#"{"schema": 99}"#).expect("write");
        let e = read_file(&f).expect_err("newer");
        assert!(e.contains("newer"), "{e}");
        assert!(f.exists());
    }

    #[test]
    fn a_card_fsrs_cannot_schedule_is_repaired_and_the_file_stays_readable() {
        let dir = tempfile::tempdir().expect("tmp");
        let mut p = Progress::default();
        let mut r = record("2026-11-01T10:00:00Z", 3, "2026-11-02T10:00:00Z");
        r.card.stability = 0.0; // in review: FSRS would divide by it
        p.items.insert("x".into(), r);
        p.lessons.insert(
            "l".into(),
            LessonProgress {
                read: f64::NAN,
                first_opened: Utc::now(),
                last_opened: Utc::now(),
            },
        );
        let now: DateTime<Utc> = "2026-11-03T10:00:00Z".parse().expect("time");
        p.record_review(
            "x",
            crate::course::grade::SelfGrade::Good,
            None,
            "drill",
            None,
            now,
        );
        assert!(p.items["x"].card.is_sound(), "{:?}", p.items["x"].card);
        assert_eq!(p.items["x"].reviews.len(), 2, "history kept");
        // A card broken some other way is reset on save, and the file loads again.
        p.items.get_mut("x").expect("x").card.difficulty = f64::INFINITY;
        save(dir.path(), &mut p).expect("save");
        let text = fs::read_to_string(dir.path().join(FILE_NAME)).expect("read");
        for field in ["stability", "difficulty", "read"] {
            assert!(
                !text.contains(&format!("\"{field}\": null")),
                "no non-finite {field} saved as null:\n{text}"
            );
        }
        let (back, notice) = load(dir.path()).expect("load");
        assert!(notice.is_none(), "not quarantined: {notice:?}");
        assert_eq!(back.items["x"].card.phase, CardPhase::New);
        assert_eq!(back.items["x"].reviews.len(), 2);
        assert_eq!(back.lessons["l"].read, 0.0);
    }

    #[test]
    fn imports_with_impossible_grades_or_dates_are_refused_naming_the_item() {
        let dir = tempfile::tempdir().expect("tmp");
        let file = dir.path().join("in.json");
        let mut p = Progress::default();
        p.items.insert(
            "good-one".into(),
            record("2026-11-01T10:00:00Z", 3, "2026-11-02T10:00:00Z"),
        );
        p.items.insert(
            "grade-255".into(),
            record("2026-11-01T10:00:00Z", 255, "2026-11-02T10:00:00Z"),
        );
        write_file(&file, &p).expect("write");
        let e = read_file(&file).expect_err("grade 255");
        assert!(e.contains("`grade-255`") && e.contains("grade 255"), "{e}");
        let mut p = Progress::default();
        p.items.insert(
            "far".into(),
            record("9999-01-01T00:00:00Z", 3, "9999-01-02T00:00:00Z"),
        );
        write_file(&file, &p).expect("write");
        let e = read_file(&file).expect_err("year 9999");
        assert!(e.contains("`far`") && e.contains("2000..2200"), "{e}");
        // A FIFO is refused, not read forever.
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().expect("utf-8")).expect("c");
        // SAFETY: mkfifo with a valid path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = read_file(&fifo).expect_err("fifo");
        assert!(e.contains("not a regular file"), "{e}");
    }

    #[test]
    fn a_schema_beyond_u32_is_not_read_as_schema_1() {
        let dir = tempfile::tempdir().expect("tmp");
        fs::write(
            dir.path().join(FILE_NAME),
            r#"{"schema": 4294967297, "lessons": {}}"#,
        )
        .expect("write");
        let (p, notice) = load(dir.path()).expect("load");
        assert_eq!(p, Progress::default());
        match notice {
            Some(LoadNotice::Quarantined { reason, .. }) => {
                assert!(reason.contains("4294967297"), "{reason}")
            }
            other => panic!("quarantined expected, got {other:?}"),
        }
    }

    #[test]
    fn stale_temp_files_of_dead_processes_are_removed_at_load() {
        let dir = tempfile::tempdir().expect("tmp");
        // A pid that cannot exist (above the kernel's pid_max limit of 2^22).
        let dead = dir.path().join(format!(".{FILE_NAME}.tmp-{}", 1 << 23));
        let mine = dir
            .path()
            .join(format!(".{FILE_NAME}.tmp-{}", std::process::id()));
        fs::write(&dead, "{").expect("write");
        fs::write(&mine, "{").expect("write");
        load(dir.path()).expect("load");
        assert!(!dead.exists(), "a dead writer's temp file is removed");
        assert!(mine.exists(), "a live process's is not");
    }

    #[test]
    fn a_symlinked_progress_file_is_written_through() {
        let dir = tempfile::tempdir().expect("tmp");
        let real_dir = dir.path().join("sync");
        fs::create_dir_all(&real_dir).expect("mkdir");
        let home = dir.path().join("home");
        fs::create_dir_all(&home).expect("mkdir");
        std::os::unix::fs::symlink(real_dir.join("progress.json"), home.join(FILE_NAME))
            .expect("link");
        let mut p = Progress::default();
        p.items.insert(
            "x".into(),
            record("2026-11-01T10:00:00Z", 3, "2026-11-02T10:00:00Z"),
        );
        save(&home, &mut p).expect("save");
        assert!(
            fs::symlink_metadata(home.join(FILE_NAME))
                .expect("meta")
                .file_type()
                .is_symlink(),
            "the link is kept"
        );
        let (back, _) = load(&home).expect("load");
        assert!(back.items.contains_key("x"));
        assert!(real_dir.join("progress.json").exists());
    }

    #[test]
    fn a_save_merges_what_another_process_saved_meanwhile() {
        let dir = tempfile::tempdir().expect("tmp");
        let mut a = Progress::default();
        let mut b = Progress::default();
        a.items.insert(
            "a".into(),
            record("2026-11-01T10:00:00Z", 3, "2026-11-02T10:00:00Z"),
        );
        b.items.insert(
            "b".into(),
            record("2026-11-01T11:00:00Z", 1, "2026-11-01T11:10:00Z"),
        );
        save(dir.path(), &mut a).expect("a");
        save(dir.path(), &mut b).expect("b");
        let (back, _) = load(dir.path()).expect("load");
        assert!(back.items.contains_key("a") && back.items.contains_key("b"));
        assert!(b.items.contains_key("a"), "the saver's copy now has it too");
    }
}
