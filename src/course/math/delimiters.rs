//! Math delimiters in Markdown sources: `\(…\)`/`\[…\]` rewritten to `$…$`/`$$…$$` outside code,
//! and delimiters that are never closed.

use super::*;

/// Byte ranges of inline code spans and fenced/indented code blocks, in document order.
pub(super) fn code_ranges(src: &str) -> Vec<Range<usize>> {
    Parser::new_ext(src, markdown_options())
        .into_offset_iter()
        .filter(|(ev, _)| matches!(ev, Event::Code(_) | Event::Start(Tag::CodeBlock(_))))
        .map(|(_, range)| range)
        .collect()
}

/// Rewrite `\(...\)` to `$...$` and `\[...\]` to `$$...$$` outside code spans and code blocks,
/// so pulldown-cmark (which eats those backslashes) sees math.
///
/// Newlines are kept one for one, so line numbers stay valid. Spaces just inside the
/// delimiters are dropped (`\( x \)` → `$x$`), as pulldown-cmark wants `$x$`. An opener whose
/// closer is missing, or lies past a blank line or a code span, is left alone.
pub fn rewrite_delimiters(src: &str) -> String {
    if !src.contains("\\(") && !src.contains("\\[") {
        return src.to_string();
    }
    let mut out = String::with_capacity(src.len() + 16);
    let mut pos = 0;
    for range in code_ranges(src) {
        if range.start < pos {
            continue;
        }
        rewrite_segment(src.get(pos..range.start).unwrap_or(""), &mut out);
        out.push_str(src.get(range.clone()).unwrap_or(""));
        pos = range.end;
    }
    rewrite_segment(src.get(pos..).unwrap_or(""), &mut out);
    out
}

/// Rewrite the delimiters in a stretch of Markdown that holds no code.
pub(super) fn rewrite_segment(seg: &str, out: &mut String) {
    let bytes = seg.as_bytes();
    let (mut i, mut copied) = (0, 0);
    while i + 1 < bytes.len() {
        if bytes[i] != b'\\' {
            i += 1;
            continue;
        }
        let display = match bytes[i + 1] {
            b'(' => false,
            b'[' => true,
            _ => {
                i += 2; // an escaped character, `\\` included
                continue;
            }
        };
        let body_start = i + 2;
        let closer = if display { b']' } else { b')' };
        let Some(len) = find_closer(&bytes[body_start..], closer) else {
            i += 2;
            continue;
        };
        let body = seg.get(body_start..body_start + len).unwrap_or("");
        if has_blank_line(body) {
            i += 2;
            continue;
        }
        let dollars = if display { "$$" } else { "$" };
        out.push_str(seg.get(copied..i).unwrap_or(""));
        out.push_str(dollars);
        out.push_str(body.trim_matches([' ', '\t']));
        out.push_str(dollars);
        i = body_start + len + 2;
        copied = i;
    }
    out.push_str(seg.get(copied..).unwrap_or(""));
}

/// Offset of the `\` of the first `\<closer>` in `bytes`, honouring TeX escapes like `\\`.
pub(super) fn find_closer(bytes: &[u8], closer: u8) -> Option<usize> {
    let mut i = 0;
    while i + 1 < bytes.len() {
        if bytes[i] == b'\\' {
            if bytes[i + 1] == closer {
                return Some(i);
            }
            i += 2;
        } else {
            i += 1;
        }
    }
    None
}

/// Whether a whole line of `text` (not its partial first or last line) is blank.
pub(super) fn has_blank_line(text: &str) -> bool {
    let inner_lines = text.matches('\n').count().saturating_sub(1);
    text.split('\n')
        .skip(1)
        .take(inner_lines)
        .any(|l| l.trim().is_empty())
}

/// An open math delimiter: where it is and which one.
#[derive(Clone, Copy)]
pub(super) struct Open {
    pub(super) line: usize,
    pub(super) col: usize,
    pub(super) delim: &'static str,
}

impl Open {
    pub(super) fn report(self) -> (usize, usize, String) {
        let kind = if matches!(self.delim, "$$" | "\\[") {
            "display"
        } else {
            "inline"
        };
        let message = format!("unclosed {kind} math `{}` (opened here)", self.delim);
        (self.line, self.col, message)
    }
}

/// Unclosed math delimiters in a Markdown source: (1-based line, 1-based col, message).
///
/// Rules, kept simple on purpose:
/// - code spans and code blocks are skipped; `\$` is an escaped dollar, not a delimiter;
/// - inline math (`$…$`, `\(…\)`) must close on the line it opens on, so `$5 and $6` is a pair
///   (math) while a lone `costs $5` is reported (write `\$5` for money);
/// - display math (`$$…$$`, `\[…\]`) may span lines but not a blank line;
/// - inside one kind of math, the other kind's delimiters are ignored.
pub fn unclosed(src: &str) -> Vec<(usize, usize, String)> {
    let code = code_ranges(src);
    let mut next_code = 0;
    let mut found = Vec::new();
    let mut display: Option<Open> = None;
    let mut line_start = 0;
    for (idx, line) in src.split('\n').enumerate() {
        let lineno = idx + 1;
        let mut inline: Option<Open> = None;
        let mut chars = line.char_indices().enumerate().peekable();
        let mut any_code = false;
        while let Some((ci, (bi, c))) = chars.next() {
            let at = line_start + bi;
            while code.get(next_code).is_some_and(|r| r.end <= at) {
                next_code += 1;
            }
            if code.get(next_code).is_some_and(|r| r.contains(&at)) {
                any_code = true;
                continue;
            }
            let next = chars.peek().map(|&(_, (_, n))| n);
            let open = |delim| Open {
                line: lineno,
                col: ci + 1,
                delim,
            };
            match (c, next) {
                ('\\', Some(n)) => {
                    chars.next();
                    match n {
                        '(' if inline.is_none() && display.is_none() => inline = Some(open("\\(")),
                        ')' if inline.is_some_and(|o| o.delim == "\\(") => inline = None,
                        '[' if inline.is_none() && display.is_none() => display = Some(open("\\[")),
                        ']' if display.is_some_and(|o| o.delim == "\\[") => display = None,
                        _ => {}
                    }
                }
                ('$', _) if inline.is_some_and(|o| o.delim == "$") => inline = None,
                ('$', Some('$')) => {
                    chars.next();
                    match display {
                        Some(o) if o.delim == "$$" => display = None,
                        None if inline.is_none() => display = Some(open("$$")),
                        _ => {}
                    }
                }
                ('$', _) if inline.is_none() && display.is_none() => inline = Some(open("$")),
                _ => {}
            }
        }
        found.extend(inline.map(Open::report));
        if line.trim().is_empty() && !any_code {
            found.extend(display.take().map(Open::report));
        }
        line_start += line.len() + 1;
    }
    found.extend(display.map(Open::report));
    found.sort_by_key(|f| (f.0, f.1));
    found
}
