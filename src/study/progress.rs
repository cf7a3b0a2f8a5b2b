//! Progress that is never lost: one human-readable JSON file with a schema version, written
//! atomically (temp file, fsync, rename, fsync the directory). A corrupt file, or one written
//! by a newer ringlab, is moved aside with a timestamp and never overwritten.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

pub const SCHEMA: u32 = 1;
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
}

impl Default for Progress {
    fn default() -> Self {
        Self {
            schema: SCHEMA,
            lessons: BTreeMap::new(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LessonMark {
    New,
    Started,
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
}

impl std::fmt::Display for LoadNotice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Quarantined { reason, moved_to } => write!(
                f,
                "progress file {reason}; kept it as {} and started fresh",
                moved_to.display()
            ),
        }
    }
}

impl Progress {
    pub fn lesson_state(&self, id: &str) -> LessonMark {
        match self.lessons.get(id) {
            None => LessonMark::New,
            Some(p) if p.read >= DONE_FRACTION => LessonMark::Done,
            Some(_) => LessonMark::Started,
        }
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
    let path = dir.join(FILE_NAME);
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
    match serde_json::from_str::<Progress>(&text) {
        Ok(p) => Ok((p, None)),
        Err(e) => quarantine(&path, format!("is corrupt ({e})")),
    }
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

/// Write atomically: a reader sees the old file or the new one, never a mix or nothing.
pub fn save(dir: &Path, progress: &Progress) -> Result<(), ProgressError> {
    let path = dir.join(FILE_NAME);
    let err = |source| ProgressError::Write {
        path: path.display().to_string(),
        source,
    };
    fs::create_dir_all(dir).map_err(err)?;
    let json = serde_json::to_string_pretty(progress).map_err(|e| err(std::io::Error::other(e)))?;
    let tmp = dir.join(format!(".{FILE_NAME}.tmp-{}", std::process::id()));
    let result = (|| {
        let mut f = File::create(&tmp)?;
        f.write_all(json.as_bytes())?;
        f.write_all(b"\n")?;
        f.sync_all()?;
        fs::rename(&tmp, &path)?;
        File::open(dir)?.sync_all()
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result.map_err(err)
}

#[cfg(test)]
mod tests {
    use super::*;

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
        save(dir.path(), &p).expect("save");
        let (q, notice) = load(dir.path()).expect("load");
        assert_eq!(notice, None);
        assert_eq!(q, p);
        assert_eq!(q.lesson_state("collectives"), LessonMark::Started);
        assert_eq!(q.lesson_state("ring"), LessonMark::Done);
        assert_eq!(q.lesson_state("tp"), LessonMark::New);
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
}
