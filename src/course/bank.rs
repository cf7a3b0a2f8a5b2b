//! Every quiz item of the course in one place: the ```` ```quiz ```` blocks of each lesson and
//! of each drill file (`lessons/drills/*.md`), with where they sit (file, line, and the section
//! heading they are under, so a quiz can open the lesson right there).

use pulldown_cmark::{CodeBlockKind, Event, Parser, Tag, TagEnd};

use super::block::{BlockKind, offset_to_line_col};
use super::check::markdown_options;
use super::lesson::{Course, SourceFile};
use super::quiz::{self, Item};

/// The heading a block sits under: its index among the body's headings and its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    pub index: usize,
    pub title: String,
}

/// One ```` ```quiz ```` block found in a Markdown body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockRef {
    /// Byte offset in the body of the block's first body line.
    pub offset: usize,
    pub text: String,
    pub section: Option<Section>,
}

/// The ```` ```quiz ```` blocks of a Markdown body, in order.
pub fn quiz_blocks(body: &str) -> Vec<BlockRef> {
    let mut out = Vec::new();
    let mut headings = 0usize;
    let mut heading: Option<String> = None;
    let mut section: Option<Section> = None;
    let mut fence: Option<(usize, Option<usize>, String)> = None;
    for (ev, range) in Parser::new_ext(body, markdown_options()).into_offset_iter() {
        match ev {
            Event::Start(Tag::Heading { .. }) => heading = Some(String::new()),
            Event::End(TagEnd::Heading(_)) => {
                if let Some(t) = heading.take() {
                    section = Some(Section {
                        index: headings,
                        title: t.trim().to_string(),
                    });
                    headings += 1;
                }
            }
            Event::Start(Tag::CodeBlock(CodeBlockKind::Fenced(info)))
                if BlockKind::from_info(&info) == Some(BlockKind::Quiz) =>
            {
                fence = Some((range.start, None, String::new()));
            }
            Event::Text(t) | Event::Code(t) | Event::InlineMath(t) | Event::DisplayMath(t) => {
                if let Some((_, start, text)) = fence.as_mut() {
                    start.get_or_insert(range.start);
                    text.push_str(&t);
                } else if let Some(h) = heading.as_mut() {
                    h.push_str(&t);
                }
            }
            Event::End(TagEnd::CodeBlock) => {
                if let Some((open, start, text)) = fence.take() {
                    out.push(BlockRef {
                        offset: start.unwrap_or(open),
                        text,
                        section: section.clone(),
                    });
                }
            }
            _ => {}
        }
    }
    out
}

/// A deck: a lesson's items or a drill file's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deck {
    /// The lesson id, or the drill file's stem (`interview`).
    pub id: String,
    pub title: String,
    pub is_drill: bool,
    /// Position in the course map for lessons.
    pub lesson_index: Option<usize>,
}

/// A quiz item and where it lives.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub item: Item,
    /// Index into [`Bank::decks`].
    pub deck: usize,
    pub path: String,
    /// 1-based file line of the block's first line of TOML.
    pub line: usize,
    pub section: Option<Section>,
    /// An inline follow-up of another item (asked after it, not on its own).
    pub inline_of: Option<String>,
}

/// All the items of a course.
#[derive(Debug, Clone, Default)]
pub struct Bank {
    pub decks: Vec<Deck>,
    pub entries: Vec<Entry>,
}

/// A drill file's deck id: its file stem.
pub fn drill_id(path: &str) -> String {
    std::path::Path::new(path)
        .file_stem()
        .map_or_else(|| path.to_string(), |s| s.to_string_lossy().into_owned())
}

/// A drill file's title: its first `#` heading, else its id.
pub fn drill_title(src: &SourceFile) -> String {
    src.text
        .lines()
        .find_map(|l| l.strip_prefix("# "))
        .map_or_else(|| drill_id(&src.path), |t| t.trim().to_string())
}

impl Bank {
    /// Items of every lesson (course order) and every drill file. Blocks that do not parse
    /// are left out (`ringlab check` and the lesson's error panel report them).
    pub fn from_course(course: &Course) -> Self {
        let mut bank = Bank::default();
        for (i, e) in course.entries.iter().enumerate() {
            let Some(l) = &e.lesson else { continue };
            bank.decks.push(Deck {
                id: l.meta.id.clone(),
                title: l.meta.title.clone(),
                is_drill: false,
                lesson_index: Some(i),
            });
            let deck = bank.decks.len() - 1;
            bank.add_body(deck, &l.path, &l.body, l.body_line);
        }
        for d in &course.drills {
            bank.decks.push(Deck {
                id: drill_id(&d.path),
                title: drill_title(d),
                is_drill: true,
                lesson_index: None,
            });
            let deck = bank.decks.len() - 1;
            bank.add_body(deck, &d.path, &d.text, 1);
        }
        bank
    }

    /// Each lesson's quiz: lesson id → the ids of the items its quiz asks on their own
    /// (inline follow-ups ride with their item).
    pub fn lesson_quizzes(&self) -> std::collections::BTreeMap<String, Vec<String>> {
        let mut out = std::collections::BTreeMap::<String, Vec<String>>::new();
        for e in self.entries.iter().filter(|e| e.inline_of.is_none()) {
            if let Some(d) = self.decks.get(e.deck).filter(|d| !d.is_drill) {
                out.entry(d.id.clone()).or_default().push(e.item.id.clone());
            }
        }
        out
    }

    fn add_body(&mut self, deck: usize, path: &str, body: &str, body_line: usize) {
        for b in quiz_blocks(body) {
            let Ok(mut item) = quiz::parse(&b.text) else {
                continue;
            };
            let line = offset_to_line_col(body, b.offset).0 + body_line - 1;
            let inline = std::mem::take(&mut item.inline);
            let parent = item.id.clone();
            self.entries.push(Entry {
                item,
                deck,
                path: path.to_string(),
                line,
                section: b.section.clone(),
                inline_of: None,
            });
            for it in inline {
                self.entries.push(Entry {
                    item: it,
                    deck,
                    path: path.to_string(),
                    line,
                    section: b.section.clone(),
                    inline_of: Some(parent.clone()),
                });
            }
        }
    }

    pub fn get(&self, id: &str) -> Option<&Entry> {
        self.entries.iter().find(|e| e.item.id == id)
    }

    pub fn index_of(&self, id: &str) -> Option<usize> {
        self.entries.iter().position(|e| e.item.id == id)
    }

    pub fn deck_of(&self, e: &Entry) -> Option<&Deck> {
        self.decks.get(e.deck)
    }

    /// The deck with this id (lesson id or drill file stem).
    pub fn deck_index(&self, id: &str) -> Option<usize> {
        self.decks.iter().position(|d| d.id == id)
    }

    /// Indices of the entries of deck `deck`, in file order.
    pub fn in_deck(&self, deck: usize) -> Vec<usize> {
        (0..self.entries.len())
            .filter(|&i| self.entries[i].deck == deck)
            .collect()
    }

    /// Every item id.
    pub fn ids(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|e| e.item.id.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_know_their_section() {
        let body = "intro\n\n## First\n\n```quiz\nid = \"a\"\n```\n\n## Second `x`\n\n```quiz\nid = \"b\"\n```\n";
        let b = quiz_blocks(body);
        assert_eq!(b.len(), 2);
        assert_eq!(b[0].section.as_ref().map(|s| s.index), Some(0));
        assert_eq!(
            b[1].section,
            Some(Section {
                index: 1,
                title: "Second x".into()
            })
        );
        assert_eq!(offset_to_line_col(body, b[0].offset).0, 6);
        assert_eq!(b[0].text, "id = \"a\"\n");
    }

    #[test]
    fn the_shipped_course_has_items_with_sections() {
        let bank = Bank::from_course(&Course::embedded());
        assert!(bank.entries.len() >= 10, "{}", bank.entries.len());
        assert!(bank.decks.iter().any(|d| d.is_drill));
        let e = bank.get("ring-allreduce-busbw").expect("item");
        assert!(e.section.is_some());
        assert!(e.line > 1);
    }
}
