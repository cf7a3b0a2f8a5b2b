//! Lessons: Markdown files with TOML front matter between `+++` lines.
//!
//! ```text
//! +++
//! id = "collectives"
//! title = "The collectives"
//! order = 1
//! prerequisites = []
//! minutes = 20
//! objectives = ["…"]
//! +++
//! # Markdown body…
//! ```
//!
//! Lessons ship inside the binary; `--lessons DIR` (or `RINGLAB_LESSONS`) loads a folder instead.

use std::path::{Path, PathBuf};

use include_dir::{Dir, include_dir};
use serde::Deserialize;

use super::block::offset_to_line_col;
use super::check::{Diagnostic, check_all};

static EMBEDDED: Dir<'_> = include_dir!("$CARGO_MANIFEST_DIR/lessons");

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LessonMeta {
    pub id: String,
    pub title: String,
    pub order: u32,
    #[serde(default)]
    pub prerequisites: Vec<String>,
    pub minutes: u32,
    #[serde(default)]
    pub objectives: Vec<String>,
}

/// One lesson file as text, before any parsing: where it came from and what it says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceFile {
    /// Path shown in messages, e.g. `lessons/01-collectives.md`.
    pub path: String,
    pub text: String,
}

/// A lesson whose front matter parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lesson {
    pub meta: LessonMeta,
    /// Path shown in messages.
    pub path: String,
    /// Markdown after the front matter.
    pub body: String,
    /// 1-based line of `body`'s first line within the file.
    pub body_line: usize,
}

/// One entry of the course map: a lesson, or a file that could not become one. Either way
/// the diagnostics that `ringlab check` would print for that file ride along.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub path: String,
    pub lesson: Option<Lesson>,
    pub diagnostics: Vec<Diagnostic>,
}

impl Entry {
    pub fn title(&self) -> &str {
        self.lesson.as_ref().map_or(&self.path, |l| &l.meta.title)
    }
    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(Diagnostic::is_error)
    }
}

/// Where the lessons came from, so the TUI can reload them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    Embedded,
    Dir(PathBuf),
}

#[derive(Debug, Clone)]
pub struct Course {
    pub origin: Origin,
    /// Lessons in course order, then broken files.
    pub entries: Vec<Entry>,
    /// Drill files (`lessons/drills/*.md`): interview questions as ```quiz blocks, no front
    /// matter. They are not lessons and never appear in the course map.
    pub drills: Vec<SourceFile>,
    /// What `ringlab check` says about the drill files (and item ids shared with lessons).
    pub drill_diagnostics: Vec<Diagnostic>,
}

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The reason is part of the message, not a separate source, so that a chain printed
    /// with its causes says it once.
    #[error("cannot read lessons from {path}: {err}")]
    Io { path: String, err: std::io::Error },
    #[error("{path}: no lessons (*.md) found")]
    Empty { path: String },
}

/// A front matter error: byte offset in the file and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrontMatterError {
    pub offset: usize,
    pub message: String,
}

/// Split `+++` front matter from the body and parse it.
pub fn parse_lesson(src: &SourceFile) -> Result<Lesson, FrontMatterError> {
    let text = src.text.strip_prefix('\u{feff}').unwrap_or(&src.text);
    let bom = src.text.len() - text.len();
    let Some(rest) = text.strip_prefix("+++") else {
        return Err(FrontMatterError {
            offset: bom,
            message: "missing front matter: a lesson starts with a `+++` line, TOML, and a closing `+++` line".into(),
        });
    };
    let rest = rest
        .strip_prefix("\r\n")
        .or_else(|| rest.strip_prefix('\n'))
        .ok_or(FrontMatterError {
            offset: bom + 3,
            message: "the opening `+++` must be alone on its line".into(),
        })?;
    let fm_start = text.len() - rest.len();
    let close = find_closing(rest).ok_or(FrontMatterError {
        offset: bom,
        message: "unclosed front matter: no closing `+++` line".into(),
    })?;
    let toml_text = &rest[..close];
    let meta: LessonMeta = toml::from_str(toml_text).map_err(|e| FrontMatterError {
        offset: bom + fm_start + e.span().map_or(0, |s| s.start),
        message: format!("bad front matter: {}", e.message()),
    })?;
    let after = &rest[close..];
    let after = after.strip_prefix("+++").unwrap_or(after);
    let body = after
        .strip_prefix("\r\n")
        .or_else(|| after.strip_prefix('\n'))
        .unwrap_or(after);
    let body_offset = text.len() - body.len();
    let body_line = offset_to_line_col(text, body_offset).0;
    Ok(Lesson {
        meta,
        path: src.path.clone(),
        body: body.to_string(),
        body_line,
    })
}

/// Offset (within `rest`) of a line that is exactly `+++`.
fn find_closing(rest: &str) -> Option<usize> {
    let mut pos = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end_matches(['\n', '\r']) == "+++" {
            return Some(pos);
        }
        pos += line.len();
    }
    None
}

impl Course {
    /// The lessons built into the binary.
    pub fn embedded() -> Self {
        Self::with_drills(
            Origin::Embedded,
            embedded_sources(),
            embedded_drill_sources(),
        )
    }

    /// Lessons from a folder (top-level `*.md` files), and drills from its `drills/` folder.
    pub fn from_dir(dir: &Path) -> Result<Self, LoadError> {
        // A file that cannot be read is skipped, saying so, and the rest load (L7); `check`
        // reports it as an error.
        let mut files = Vec::new();
        for f in read_dir_each(dir)? {
            match f {
                Ok(f) => files.push(f),
                Err(e) => eprintln!("ringlab: skipped a lesson file: {e}"),
            }
        }
        if files.is_empty() {
            return Err(LoadError::Empty {
                path: dir.display().to_string(),
            });
        }
        let drills = read_drill_sources(dir)?;
        Ok(Self::with_drills(
            Origin::Dir(dir.to_path_buf()),
            files,
            drills,
        ))
    }

    /// Load again from where this course came from.
    pub fn reload(&self) -> Result<Self, LoadError> {
        match &self.origin {
            Origin::Embedded => Ok(Self::embedded()),
            Origin::Dir(d) => Self::from_dir(d),
        }
    }

    pub fn from_sources(origin: Origin, files: Vec<SourceFile>) -> Self {
        Self::with_drills(origin, files, Vec::new())
    }

    /// Lessons and drill files, checked together (item ids are unique across both).
    pub fn with_drills(origin: Origin, files: Vec<SourceFile>, drills: Vec<SourceFile>) -> Self {
        let diagnostics = check_all(&files, &drills);
        let drill_diagnostics = diagnostics
            .iter()
            .filter(|d| drills.iter().any(|f| f.path == d.file))
            .cloned()
            .collect();
        let mut entries: Vec<Entry> = files
            .iter()
            .map(|f| Entry {
                path: f.path.clone(),
                lesson: parse_lesson(f).ok(),
                diagnostics: diagnostics
                    .iter()
                    .filter(|d| d.file == f.path)
                    .cloned()
                    .collect(),
            })
            .collect();
        entries.sort_by(|a, b| {
            let key = |e: &Entry| {
                (
                    e.lesson.is_none(),
                    e.lesson.as_ref().map_or(u32::MAX, |l| l.meta.order),
                    e.path.clone(),
                )
            };
            key(a).cmp(&key(b))
        });
        Self {
            origin,
            entries,
            drills,
            drill_diagnostics,
        }
    }

    pub fn lessons(&self) -> impl Iterator<Item = &Lesson> {
        self.entries.iter().filter_map(|e| e.lesson.as_ref())
    }

    pub fn position_of(&self, id: &str) -> Option<usize> {
        self.entries
            .iter()
            .position(|e| e.lesson.as_ref().is_some_and(|l| l.meta.id == id))
    }

    pub fn ids(&self) -> Vec<&str> {
        self.lessons().map(|l| l.meta.id.as_str()).collect()
    }
}

/// The lesson files built into the binary, sorted by path.
pub fn embedded_sources() -> Vec<SourceFile> {
    md_sources(&EMBEDDED)
}

/// The drill files built into the binary (`lessons/drills/*.md`), sorted by path.
pub fn embedded_drill_sources() -> Vec<SourceFile> {
    EMBEDDED
        .get_dir("drills")
        .map(md_sources)
        .unwrap_or_default()
}

/// The `*.md` files directly in an embedded folder, sorted by path.
fn md_sources(dir: &Dir<'_>) -> Vec<SourceFile> {
    let mut files: Vec<SourceFile> = dir
        .files()
        .filter(|f| f.path().extension().is_some_and(|e| e == "md"))
        .map(|f| SourceFile {
            path: format!("lessons/{}", f.path().display()),
            text: String::from_utf8_lossy(f.contents()).into_owned(),
        })
        .collect();
    files.sort_by(|a, b| a.path.cmp(&b.path));
    files
}

/// The drill files of a lessons folder: `DIR/drills/*.md` (none when there is no such folder).
pub fn read_drill_sources(dir: &Path) -> Result<Vec<SourceFile>, LoadError> {
    let drills = dir.join(DRILLS_DIR);
    if !drills.is_dir() {
        return Ok(Vec::new());
    }
    read_dir_sources(&drills)
}

/// The folder inside a lessons folder that holds drill files.
pub const DRILLS_DIR: &str = "drills";

/// Top-level `*.md` files of a folder, sorted by name; the first that cannot be read is the
/// error.
pub fn read_dir_sources(dir: &Path) -> Result<Vec<SourceFile>, LoadError> {
    read_dir_each(dir)?.into_iter().collect()
}

/// Top-level `*.md` files of a folder, sorted by name, each read or its error: one file that
/// cannot be read (too large, unreadable) stops none of the others (finding L7).
pub fn read_dir_each(dir: &Path) -> Result<Vec<Result<SourceFile, LoadError>>, LoadError> {
    let io = |err| LoadError::Io {
        path: dir.display().to_string(),
        err,
    };
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(io)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "md"))
        .collect();
    paths.sort();
    Ok(paths.iter().map(|p| read_source(p)).collect())
}

pub fn read_source(path: &Path) -> Result<SourceFile, LoadError> {
    let bytes = crate::files::read_bounded(path, crate::files::MAX_LESSON_BYTES, "lesson file")
        .map_err(|e| {
            // read_bounded names the file; the variant names it too.
            let shown = format!("cannot read {}: ", path.display());
            LoadError::Io {
                path: path.display().to_string(),
                err: std::io::Error::other(e.strip_prefix(&shown).unwrap_or(&e).to_string()),
            }
        })?;
    Ok(SourceFile {
        path: path.display().to_string(),
        text: String::from_utf8_lossy(&bytes).into_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn src(text: &str) -> SourceFile {
        SourceFile {
            path: "x.md".into(),
            text: text.into(),
        }
    }

    #[test]
    fn front_matter_splits_from_body() {
        let l = parse_lesson(&src(
            "+++\nid = \"a\"\ntitle = \"A\"\norder = 1\nminutes = 5\n+++\n# Hi\n",
        ))
        .expect("parses");
        assert_eq!(l.meta.id, "a");
        assert_eq!(l.body, "# Hi\n");
        assert_eq!(l.body_line, 7);
    }

    #[test]
    fn missing_front_matter_is_an_error_at_1_1() {
        let e = parse_lesson(&src("# Hi\n")).expect_err("must fail");
        assert_eq!(e.offset, 0);
        assert!(e.message.contains("missing front matter"));
    }

    #[test]
    fn embedded_course_has_the_first_lesson() {
        let c = Course::embedded();
        assert!(c.position_of("collectives").is_some(), "{:?}", c.ids());
    }
}
