//! Checks that span quiz items across files: ids unique across the lessons and the drill
//! files, and every `follow_ups` id naming an item. (A block's own problems, such as a missing
//! answer, a numeric item without tolerance, an answer not among the choices or an unknown
//! template parameter, are reported where every fenced block is: [`super::block::Block::parse`].)

use std::collections::{HashMap, HashSet};

use super::bank::{drill_id, drill_title, quiz_blocks};
use super::block::offset_to_line_col;
use super::check::Diagnostic;
use super::lesson::{Lesson, LessonMeta, SourceFile};
use super::quiz;

/// A drill file seen as a lesson body (no front matter), so the usual body checks apply.
pub fn as_lesson(f: &SourceFile) -> Lesson {
    Lesson {
        meta: LessonMeta {
            id: drill_id(&f.path),
            title: drill_title(f),
            order: 0,
            prerequisites: Vec::new(),
            minutes: 0,
            objectives: Vec::new(),
        },
        path: f.path.clone(),
        body: f.text.clone(),
        body_line: 1,
    }
}

/// File position of the `id = …` line of a block starting at body offset `offset`.
fn id_pos(l: &Lesson, offset: usize, text: &str) -> (usize, usize) {
    let first = offset_to_line_col(&l.body, offset).0 + l.body_line - 1;
    let line = text
        .lines()
        .position(|t| {
            let t = t.trim_start();
            t.starts_with("id") && t[2..].trim_start().starts_with('=')
        })
        .unwrap_or(0);
    (first + line, 1)
}

pub fn check_item_ids(
    lessons: &[(&SourceFile, Lesson)],
    drills: &[(&SourceFile, Lesson)],
    out: &mut Vec<Diagnostic>,
) {
    let mut first: HashMap<String, String> = HashMap::new();
    let mut all: HashSet<String> = HashSet::new();
    let mut follow: Vec<(String, (usize, usize), String)> = Vec::new();
    for (f, l) in lessons.iter().chain(drills) {
        for b in quiz_blocks(&l.body) {
            let Ok(item) = quiz::parse(&b.text) else {
                continue;
            };
            let pos = id_pos(l, b.offset, &b.text);
            let ids =
                std::iter::once(item.id.clone()).chain(item.inline.iter().map(|i| i.id.clone()));
            for id in ids {
                let here = format!("{}:{}", f.path, pos.0);
                match first.get(&id) {
                    Some(prev) => out.push(Diagnostic::error(
                        &f.path,
                        pos,
                        format!("duplicate quiz item id `{id}` (also at {prev})"),
                    )),
                    None => {
                        first.insert(id.clone(), here);
                    }
                }
                all.insert(id);
            }
            for fu in &item.follow_ups {
                follow.push((f.path.clone(), pos, fu.clone()));
            }
        }
    }
    for (file, pos, id) in follow {
        if !all.contains(&id) {
            out.push(Diagnostic::error(
                &file,
                pos,
                format!("follow-up `{id}` is not a quiz item in the course or the drills"),
            ));
        }
    }
}
