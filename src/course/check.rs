//! Content checks behind `ringlab check` and the TUI's error panels. Every problem carries a
//! `file:line:col` position: bad or missing front matter, duplicate ids, unknown prerequisites,
//! prerequisite cycles, malformed fenced blocks, broken internal links, unclosed math.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::path::Path;

use pulldown_cmark::{CodeBlockKind, Event, HeadingLevel, Options, Parser, Tag, TagEnd};

use super::block::{Block, BlockKind, offset_to_line_col};
use super::lesson::{Lesson, SourceFile, parse_lesson};
use super::math;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    Error,
    Warning,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    pub file: String,
    pub line: usize,
    pub col: usize,
    pub severity: Severity,
    pub message: String,
}

impl Diagnostic {
    pub(crate) fn error(
        file: &str,
        (line, col): (usize, usize),
        message: impl Into<String>,
    ) -> Self {
        Self {
            file: file.to_string(),
            line,
            col,
            severity: Severity::Error,
            message: message.into(),
        }
    }
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sev = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        write!(
            f,
            "{}:{}:{}: {sev}: {}",
            self.file, self.line, self.col, self.message
        )
    }
}

/// Markdown options shared by the checker and the renderer.
pub fn markdown_options() -> Options {
    Options::ENABLE_TABLES
        | Options::ENABLE_STRIKETHROUGH
        | Options::ENABLE_MATH
        | Options::ENABLE_TASKLISTS
        | Options::ENABLE_HEADING_ATTRIBUTES
}

/// GitHub-style heading anchor: lowercase, spaces to `-`, punctuation dropped.
pub fn slug(title: &str) -> String {
    title
        .trim()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c.to_ascii_lowercase()),
            _ => None,
        })
        .collect()
}

/// Check a set of lesson files together (ids, prerequisites and links cross files).
pub fn check_sources(files: &[SourceFile]) -> Vec<Diagnostic> {
    check_all(files, &[])
}

/// Check lesson files and drill files (`lessons/drills/*.md`) together: everything
/// [`check_sources`] does, the drill files' blocks, links and math, and quiz item ids unique
/// across all of them, with every `follow_ups` id naming an item.
pub fn check_all(files: &[SourceFile], drills: &[SourceFile]) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    let mut lessons: Vec<(&SourceFile, Lesson)> = Vec::new();
    for f in files {
        match parse_lesson(f) {
            Ok(l) => lessons.push((f, l)),
            Err(e) => out.push(Diagnostic::error(
                &f.path,
                offset_to_line_col(&f.text, e.offset),
                e.message,
            )),
        }
    }
    let anchors: HashMap<String, HashSet<String>> = lessons
        .iter()
        .map(|(f, l)| (file_name(&f.path), headings(&l.body)))
        .collect();
    for (f, l) in &lessons {
        check_body(f, l, &anchors, &mut out);
    }
    let drill_lessons: Vec<(&SourceFile, Lesson)> = drills
        .iter()
        .map(|f| (f, super::quizcheck::as_lesson(f)))
        .collect();
    for (f, l) in &drill_lessons {
        check_body(f, l, &anchors, &mut out);
    }
    super::quizcheck::check_item_ids(&lessons, &drill_lessons, &mut out);
    check_ids_and_prerequisites(&lessons, &mut out);
    out.sort_by(|a, b| (&a.file, a.line, a.col).cmp(&(&b.file, b.line, b.col)));
    out
}

fn file_name(path: &str) -> String {
    Path::new(path)
        .file_name()
        .map_or_else(|| path.to_string(), |n| n.to_string_lossy().into_owned())
}

fn headings(body: &str) -> HashSet<String> {
    let mut set = HashSet::new();
    let mut current: Option<String> = None;
    for ev in Parser::new_ext(body, markdown_options()) {
        match ev {
            Event::Start(Tag::Heading { .. }) => current = Some(String::new()),
            Event::End(TagEnd::Heading(_)) => {
                if let Some(t) = current.take() {
                    set.insert(slug(&t));
                }
            }
            Event::Text(t) | Event::Code(t) | Event::InlineMath(t) => {
                if let Some(c) = current.as_mut() {
                    c.push_str(&t);
                }
            }
            _ => {}
        }
    }
    set
}

/// Position in the file of a byte offset in the body.
fn body_pos(l: &Lesson, offset: usize) -> (usize, usize) {
    let (line, col) = offset_to_line_col(&l.body, offset);
    (line + l.body_line - 1, col)
}

fn check_body(
    f: &SourceFile,
    l: &Lesson,
    anchors: &HashMap<String, HashSet<String>>,
    out: &mut Vec<Diagnostic>,
) {
    let body = &l.body;
    let mut fence: Option<(BlockKind, std::ops::Range<usize>, String, Option<usize>)> = None;
    for (ev, range) in Parser::new_ext(body, markdown_options()).into_offset_iter() {
        match ev {
            Event::Start(Tag::CodeBlock(CodeBlockKind::Fenced(info))) => {
                if !fence_is_closed(&body[range.clone()]) {
                    out.push(Diagnostic::error(
                        &f.path,
                        body_pos(l, range.start),
                        "unclosed fenced block: no closing ``` line",
                    ));
                }
                if let Some(kind) = BlockKind::from_info(&info) {
                    fence = Some((kind, range, String::new(), None));
                }
            }
            Event::Text(t) => {
                if let Some((_, _, text, start)) = fence.as_mut() {
                    start.get_or_insert(range.start);
                    text.push_str(&t);
                }
            }
            Event::End(TagEnd::CodeBlock) => {
                if let Some((kind, range, text, start)) = fence.take()
                    && let Err(e) = Block::parse(kind, &text)
                {
                    let first = start.unwrap_or(range.start);
                    let (line, _) = body_pos(l, first);
                    out.push(Diagnostic::error(
                        &f.path,
                        (line + e.line - 1, e.col),
                        e.message,
                    ));
                }
            }
            Event::Start(Tag::Link { dest_url, .. }) => {
                if let Some(msg) = broken_link(f, &dest_url, anchors) {
                    out.push(Diagnostic::error(&f.path, body_pos(l, range.start), msg));
                }
            }
            Event::Start(Tag::Heading {
                level: HeadingLevel::H1,
                ..
            }) => {}
            _ => {}
        }
    }
    for (line, col, msg) in math::unclosed(body) {
        out.push(Diagnostic::error(
            &f.path,
            (line + l.body_line - 1, col),
            msg,
        ));
    }
}

/// A fenced block's source text ends with a fence line at least as long as the opener.
fn fence_is_closed(src: &str) -> bool {
    let first = src.lines().next().unwrap_or("").trim_start();
    let ch = first.chars().next().unwrap_or('`');
    let n = first.chars().take_while(|&c| c == ch).count();
    let mut lines = src.trim_end_matches(['\n', '\r']).lines();
    lines.next();
    lines.last().is_some_and(|last| {
        let t = last.trim();
        t.chars().take_while(|&c| c == ch).count() >= n && t.chars().all(|c| c == ch)
    })
}

fn broken_link(
    f: &SourceFile,
    dest: &str,
    anchors: &HashMap<String, HashSet<String>>,
) -> Option<String> {
    if dest.contains("://") || dest.starts_with("mailto:") || dest.is_empty() {
        return None;
    }
    let (file, anchor) = match dest.split_once('#') {
        Some((file, anchor)) => (file, Some(anchor)),
        None => (dest, None),
    };
    let target = if file.is_empty() {
        file_name(&f.path)
    } else {
        if !file.ends_with(".md") {
            return None;
        }
        file_name(file)
    };
    let Some(slugs) = anchors.get(&target) else {
        let on_disk = Path::new(&f.path)
            .parent()
            .is_some_and(|dir| dir.join(file).is_file());
        return (!on_disk).then(|| format!("broken link: no lesson file `{file}`"));
    };
    match anchor {
        Some(a) if !slugs.contains(a) => {
            Some(format!("broken link: `{target}` has no section `#{a}`"))
        }
        _ => None,
    }
}

/// (line, col) of `key =` inside the front matter, or 1:1.
fn key_pos(text: &str, key: &str) -> (usize, usize) {
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let t = line.trim_start();
        if t.starts_with(key) && t[key.len()..].trim_start().starts_with('=') {
            return offset_to_line_col(text, offset + (line.len() - t.len()));
        }
        if offset > 0 && line.trim_end() == "+++" {
            break;
        }
        offset += line.len();
    }
    (1, 1)
}

fn check_ids_and_prerequisites(lessons: &[(&SourceFile, Lesson)], out: &mut Vec<Diagnostic>) {
    let mut first: HashMap<&str, &str> = HashMap::new();
    for (f, l) in lessons {
        if let Some(prev) = first.get(l.meta.id.as_str()) {
            out.push(Diagnostic::error(
                &f.path,
                key_pos(&f.text, "id"),
                format!("duplicate lesson id `{}` (also in {prev})", l.meta.id),
            ));
        } else {
            first.insert(&l.meta.id, &f.path);
        }
    }
    let graph: HashMap<&str, &Vec<String>> = lessons
        .iter()
        .map(|(_, l)| (l.meta.id.as_str(), &l.meta.prerequisites))
        .collect();
    for (f, l) in lessons {
        for p in &l.meta.prerequisites {
            if !graph.contains_key(p.as_str()) {
                out.push(Diagnostic::error(
                    &f.path,
                    key_pos(&f.text, "prerequisites"),
                    format!("unknown prerequisite `{p}`"),
                ));
            }
        }
        if let Some(cycle) = cycle_from(&l.meta.id, &graph) {
            out.push(Diagnostic::error(
                &f.path,
                key_pos(&f.text, "prerequisites"),
                format!("prerequisite cycle: {}", cycle.join(" → ")),
            ));
        }
    }
}

/// A path of prerequisites from `start` back to itself, if any.
fn cycle_from<'a>(
    start: &'a str,
    graph: &HashMap<&'a str, &'a Vec<String>>,
) -> Option<Vec<&'a str>> {
    fn dfs<'a>(
        node: &'a str,
        start: &'a str,
        graph: &HashMap<&'a str, &'a Vec<String>>,
        path: &mut Vec<&'a str>,
        seen: &mut HashSet<&'a str>,
    ) -> bool {
        let Some(next) = graph.get(node) else {
            return false;
        };
        for p in next.iter() {
            if p == start {
                path.push(start);
                return true;
            }
            if seen.insert(p.as_str()) {
                path.push(p.as_str());
                if dfs(p.as_str(), start, graph, path, seen) {
                    return true;
                }
                path.pop();
            }
        }
        false
    }
    let mut path = vec![start];
    let mut seen = HashSet::new();
    dfs(start, start, graph, &mut path, &mut seen).then_some(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slug_is_github_style() {
        assert_eq!(slug("Ring all-reduce: why 2M?"), "ring-all-reduce-why-2m");
    }

    #[test]
    fn fence_closed_detection() {
        assert!(fence_is_closed("```ring\nranks = 4\n```\n"));
        assert!(!fence_is_closed("```ring\nranks = 4\n"));
        assert!(fence_is_closed("````\n```\n````"));
    }
}
