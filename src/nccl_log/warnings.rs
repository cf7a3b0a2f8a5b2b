//! NCCL's failure messages, as data: every `WARN(...)` format string in NCCL's `src/` at the
//! tags 2.4 to 2.28 (the latest patch of each minor), and the `INFO` lines that matter, one row
//! each in `warnings.toml` beside this file, with the releases that print it, the source
//! file:line at each tag, and what it means, its usual causes, the fix and how to confirm
//! (the row's own, else its family's). `scripts/nccl-warns/extract.py` regenerates the rows
//! from an NCCL checkout and keeps the hand-written fields.
//!
//! [`Table::name`] reads a message back: each format becomes a pattern (`%s` any text, `%d` a
//! number, …) and the most specific row that matches names it.

use std::collections::HashMap;
use std::sync::OnceLock;

use regex::Regex;
use serde::{Deserialize, Serialize};

use super::Level;

/// The table as shipped.
const TABLE: &str = include_str!("warnings.toml");

/// Whether a message is trouble (the doctor exits 1) or benign on a healthy system.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Note,
    Error,
}

/// A group of messages from one part of NCCL, with what they have in common.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Family {
    pub id: String,
    pub title: String,
    pub meaning: String,
    pub causes: Vec<String>,
    pub fix: String,
    pub confirm: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
enum RowLevel {
    #[serde(rename = "WARN")]
    Warn,
    #[serde(rename = "INFO")]
    Info,
}

/// One row as written in the file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRow {
    #[serde(default)]
    id: Option<String>,
    level: RowLevel,
    format: String,
    family: String,
    severity: Severity,
    releases: String,
    sites: Vec<String>,
    #[serde(default)]
    meaning: Option<String>,
    #[serde(default)]
    causes: Option<Vec<String>>,
    #[serde(default)]
    fix: Option<String>,
    #[serde(default)]
    confirm: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTable {
    family: Vec<Family>,
    msg: Vec<RawRow>,
}

/// One message of NCCL's, explained.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Row {
    /// A stable name for the rows the doctor checks by name (`duplicate-gpu`).
    pub id: Option<String>,
    pub level: Level,
    /// The printf format, as NCCL's source has it.
    pub format: String,
    pub family: String,
    pub severity: Severity,
    /// The minors that print this exact format: `2.4-2.28`, `2.4-2.9, 2.12-2.28`.
    pub releases: String,
    /// `2.28.9 init.cc:1234`, one per tag that prints it, newest first.
    pub sites: Vec<String>,
    pub meaning: String,
    pub causes: Vec<String>,
    pub fix: String,
    pub confirm: String,
    /// Characters of literal text in the format, spaces aside: how telling a whole match is.
    pub literal: usize,
    /// Length of the literal text before the first value: how telling a cut match is.
    pub lead_len: usize,
}

/// A row's format, compiled: the pattern and how specific it is.
#[derive(Debug)]
struct Pattern {
    /// The literal text before the first conversion: a cheap first test.
    lead: String,
    /// Between rows whose literal text is as long ([`Row::literal`]), the one with more typed
    /// conversions (`%d`, `%p`: each a constraint), then with fewer free ones (`%s`).
    typed: usize,
    free: usize,
    /// The newest release that prints the row (its first site): between rows NCCL prints
    /// alike (`%x` and `%lx`), the newer wording names the line.
    newest: (u32, u32, u32),
    /// The pattern, compiled the first time a line is tried against it (most rows never are).
    source: String,
    full: OnceLock<Option<Regex>>,
}

impl Pattern {
    fn is_match(&self, text: &str) -> bool {
        self.full
            .get_or_init(|| Regex::new(&self.source).ok())
            .as_ref()
            .is_some_and(|re| re.is_match(text))
    }
}

/// The whole table, compiled.
#[derive(Debug)]
pub struct Table {
    pub families: Vec<Family>,
    pub rows: Vec<Row>,
    patterns: Vec<Pattern>,
    /// Rows by level and the first [`KEY`] characters of their lead: a line is tried only
    /// against rows its own start could belong to.
    index: HashMap<(Level, String), Vec<usize>>,
    /// Rows whose lead is shorter than that: tried against every line of their level.
    short: Vec<usize>,
}

/// How many leading characters index a row.
const KEY: usize = 6;

fn key(s: &str) -> Option<String> {
    let k: String = s.chars().take(KEY).collect();
    (k.chars().count() == KEY).then_some(k)
}

/// How a message was named.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Match {
    /// The whole line matches the row's format.
    Whole,
    /// The line is cut (or wrapped) and its text is the start of the row's format.
    Cut,
}

/// A regex for a printf format, anchored at the start; at the end too unless the format goes
/// on past a newline (the rest is on the log's next line). Also the literal text before the
/// first conversion and the count of literal characters.
pub fn format_regex(format: &str) -> (String, String, usize, (usize, usize)) {
    // A trailing newline (many WARNs end in `\n`) and trailing spaces print as nothing a
    // log keeps.
    let format = format.trim_end();
    let (first, more) = match format.split_once('\n') {
        Some((a, _)) => (a.trim_end(), true),
        None => (format, false),
    };
    let mut re = String::from("^");
    let mut lead: Option<String> = None;
    let mut literal = String::new();
    let mut count = 0;
    let (mut typed, mut free) = (0, 0);
    let mut chars = first.chars().peekable();
    let flush = |literal: &mut String, re: &mut String| {
        re.push_str(&regex::escape(literal.trim_end_matches(' ')));
        // Trailing spaces of a literal run: NCCL's log may have lost them.
        if literal.ends_with(' ') {
            re.push_str(" *");
        }
        literal.clear();
    };
    while let Some(c) = chars.next() {
        if c != '%' {
            literal.push(c);
            count += usize::from(!c.is_whitespace());
            continue;
        }
        if chars.peek() == Some(&'%') {
            chars.next();
            literal.push('%');
            count += 1;
            continue;
        }
        lead.get_or_insert_with(|| literal.clone());
        flush(&mut literal, &mut re);
        // flags, width, precision, length, conversion
        let mut spec = String::new();
        while let Some(&d) = chars.peek() {
            spec.push(d);
            chars.next();
            if d.is_ascii_alphabetic() && !matches!(d, 'l' | 'h' | 'z' | 'j' | 't' | 'L' | 'q') {
                break;
            }
        }
        let conv = spec.chars().last().unwrap_or('s');
        if matches!(conv, 's' | 'c') {
            free += 1;
        } else {
            typed += 1;
        }
        let pad = if spec.chars().any(|d| d.is_ascii_digit() || d == '*') {
            " *"
        } else {
            ""
        };
        re.push_str(pad);
        re.push_str(match conv {
            'd' | 'i' | 'u' => r"-?[0-9]+",
            'x' | 'X' => r"(?:0x)?[0-9a-fA-F]+",
            'o' => r"[0-7]+",
            'p' => r"(?:0x[0-9a-fA-F]+|\(nil\)|[0-9a-fA-F]+)",
            'f' | 'F' | 'g' | 'G' | 'e' | 'E' => r"(?:-?[0-9.]+(?:[eE][-+]?[0-9]+)?|-?nan|-?inf)",
            'c' => r".",
            _ => r".*?",
        });
    }
    let lead = lead.unwrap_or_else(|| literal.clone());
    flush(&mut literal, &mut re);
    if !more {
        re.push_str(r"\s*$");
    }
    (re, lead, count, (typed, free))
}

/// Why a warnings table does not read.
#[derive(Debug, thiserror::Error)]
pub enum TableError {
    #[error(transparent)]
    Toml(#[from] toml::de::Error),
    #[error("row `{row}`: no family `{family}`")]
    NoFamily { row: String, family: String },
}

impl Table {
    /// The table shipped in the binary.
    pub fn shipped() -> &'static Table {
        static T: OnceLock<Table> = OnceLock::new();
        T.get_or_init(|| {
            // The file is part of the binary and tested; a broken one is a build defect.
            Table::parse(TABLE).unwrap_or_else(|e| panic!("src/nccl_log/warnings.toml: {e}"))
        })
    }

    /// Read a table from its TOML text: every row's family must exist.
    pub fn parse(text: &str) -> Result<Table, TableError> {
        let raw: RawTable = toml::from_str(text)?;
        let mut rows = Vec::with_capacity(raw.msg.len());
        let mut patterns = Vec::with_capacity(raw.msg.len());
        for r in raw.msg {
            let fam = raw
                .family
                .iter()
                .find(|f| f.id == r.family)
                .ok_or_else(|| TableError::NoFamily {
                    row: r.format.clone(),
                    family: r.family.clone(),
                })?;
            let (source, lead, literal, (typed, free)) = format_regex(&r.format);
            let lead_len = lead.trim_end().len();
            let newest = r
                .sites
                .first()
                .and_then(|site| site.split_whitespace().next())
                .map(|v| {
                    let mut n = v.split('.').map(|x| x.parse().unwrap_or(0));
                    (
                        n.next().unwrap_or(0),
                        n.next().unwrap_or(0),
                        n.next().unwrap_or(0),
                    )
                })
                .unwrap_or_default();
            patterns.push(Pattern {
                lead,
                typed,
                free,
                newest,
                source,
                full: OnceLock::new(),
            });
            rows.push(Row {
                id: r.id,
                level: match r.level {
                    RowLevel::Warn => Level::Warn,
                    RowLevel::Info => Level::Info,
                },
                meaning: r.meaning.unwrap_or_else(|| fam.meaning.clone()),
                causes: r.causes.unwrap_or_else(|| fam.causes.clone()),
                fix: r.fix.unwrap_or_else(|| fam.fix.clone()),
                confirm: r.confirm.unwrap_or_else(|| fam.confirm.clone()),
                format: r.format,
                family: r.family,
                severity: r.severity,
                releases: r.releases,
                sites: r.sites,
                literal,
                lead_len,
            });
        }
        let mut index: HashMap<(Level, String), Vec<usize>> = HashMap::new();
        let mut short = Vec::new();
        for (i, (r, p)) in rows.iter().zip(&patterns).enumerate() {
            match key(&p.lead) {
                Some(k) => index.entry((r.level, k)).or_default().push(i),
                None => short.push(i),
            }
        }
        Ok(Table {
            families: raw.family,
            rows,
            patterns,
            index,
            short,
        })
    }

    /// The row with this id.
    pub fn by_id(&self, id: &str) -> Option<&Row> {
        self.rows.iter().find(|r| r.id.as_deref() == Some(id))
    }

    /// The family a row belongs to.
    pub fn family(&self, row: &Row) -> Option<&Family> {
        self.families.iter().find(|f| f.id == row.family)
    }

    /// Name a message of `level` (the text after `NCCL WARN `): the most specific row whose
    /// format matches it whole; else, for a line cut short, the row whose literal start the
    /// text begins with (at least 16 characters of it).
    pub fn name(&self, level: Level, text: &str) -> Option<(&Row, Match)> {
        let text = text.trim();
        let indexed = key(text)
            .and_then(|k| self.index.get(&(level, k)))
            .map_or(&[][..], Vec::as_slice);
        // A row with no literal text at all (`WARN("%s", msg)`: 2.28.9 misc/strongstream.cc
        // prints a message built elsewhere) would name every line: it names none.
        let candidates = || {
            indexed
                .iter()
                .chain(&self.short)
                .map(|&i| (&self.rows[i], &self.patterns[i]))
                .filter(move |(r, p)| r.level == level && (r.literal > 0 || p.typed > 0))
        };
        let whole = candidates()
            .filter(|(_, p)| text.starts_with(&p.lead) && p.is_match(text))
            .max_by_key(|(r, p)| (r.literal, p.typed, std::cmp::Reverse(p.free), p.newest));
        if let Some((r, _)) = whole {
            return Some((r, Match::Whole));
        }
        candidates()
            .filter(|(_, p)| {
                let lead = p.lead.trim_end();
                lead.len() >= 16
                    && (text.starts_with(lead) || (lead.starts_with(text) && text.len() >= 16))
            })
            .max_by_key(|(_, p)| p.lead.len())
            .map(|(r, _)| (r, Match::Cut))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: &str = r#"
[[family]]
id = "init"
title = "Initialisation"
meaning = "m"
causes = ["c"]
fix = "f"
confirm = "k"

[[msg]]
id = "duplicate-gpu"
level = "WARN"
format = "Duplicate GPU detected : rank %d and rank %d both on CUDA device %lx"
family = "init"
severity = "error"
releases = "2.4-2.28"
sites = ["2.28.9 init.cc:1"]
fix = "one GPU per rank"

[[msg]]
level = "WARN"
format = "Cuda failure '%s'"
family = "init"
severity = "error"
releases = "2.4-2.28"
sites = ["2.28.9 include/checks.h:1"]

[[msg]]
level = "WARN"
format = "Cuda failure %d '%s'"
family = "init"
severity = "error"
releases = "2.19-2.28"
sites = ["2.28.9 include/checks.h:2"]

[[msg]]
level = "INFO"
format = "%s:%d -> %d"
family = "init"
severity = "note"
releases = "2.4-2.28"
sites = ["2.28.9 include/checks.h:3"]
"#;

    #[test]
    fn a_formatted_message_reads_back_to_its_row() {
        let t = Table::parse(SMALL).expect("parses");
        let (row, how) = t
            .name(
                Level::Warn,
                "Duplicate GPU detected : rank 0 and rank 1 both on CUDA device 3b000",
            )
            .expect("named");
        assert_eq!(row.id.as_deref(), Some("duplicate-gpu"));
        assert_eq!(how, Match::Whole);
        assert_eq!(row.fix, "one GPU per rank");
        assert_eq!(row.meaning, "m", "the family's meaning fills in");
        let (row, _) = t
            .name(Level::Warn, "Cuda failure 2 'out of memory'")
            .expect("named");
        assert_eq!(
            row.format, "Cuda failure %d '%s'",
            "the more specific row wins"
        );
        assert!(t.name(Level::Info, "init.cc:1234 -> 2").is_some());
        assert!(
            t.name(Level::Warn, "init.cc:1234 -> 2").is_none(),
            "by level"
        );
        assert!(t.name(Level::Warn, "Something else entirely").is_none());
    }

    #[test]
    fn a_cut_line_is_named_by_its_start() {
        let t = Table::parse(SMALL).expect("parses");
        let (row, how) = t
            .name(Level::Warn, "Duplicate GPU detected : rank 0 and ra")
            .expect("named");
        assert_eq!(row.id.as_deref(), Some("duplicate-gpu"));
        assert_eq!(how, Match::Cut);
    }

    #[test]
    fn a_row_without_its_family_is_refused() {
        let bad = SMALL.replace(
            "family = \"init\"\nseverity = \"note\"",
            "family = \"nope\"\nseverity = \"note\"",
        );
        assert!(
            Table::parse(&bad)
                .unwrap_err()
                .to_string()
                .contains("no family `nope`")
        );
    }

    #[test]
    fn printf_conversions_become_patterns() {
        let (re, lead, n, conv) = format_regex("NET/IB : %s:%d%% %5.2f %p %zu\nmore");
        assert_eq!(conv, (4, 1));
        let re = Regex::new(&re).expect("compiles");
        assert!(re.is_match("NET/IB : mlx5_0:1%  3.50 0x7f00 12 extra on the next line"));
        assert_eq!(lead, "NET/IB : ");
        assert!(n > 8);
    }

    /// The WARN calls of NCCL 2.28.9's `src/` (file:line, format), as the extractor listed
    /// them: `scripts/nccl-warns/extract.py`.
    const WARNS_2_28_9: &str = include_str!("warns-v2.28.9.txt");

    /// `\n` and `\t` in the list stand for the characters.
    fn unescape(s: &str) -> String {
        s.replace("\\n", "\n").replace("\\t", "\t")
    }

    /// A message as NCCL would print it: each conversion filled with a plain value.
    fn printed(format: &str) -> String {
        let (first, _) = format.split_once('\n').unwrap_or((format, ""));
        let mut out = String::new();
        let mut chars = first.chars().peekable();
        while let Some(c) = chars.next() {
            if c != '%' {
                out.push(c);
                continue;
            }
            if chars.peek() == Some(&'%') {
                chars.next();
                out.push('%');
                continue;
            }
            let mut conv = 's';
            while let Some(&d) = chars.peek() {
                chars.next();
                if d.is_ascii_alphabetic() && !matches!(d, 'l' | 'h' | 'z' | 'j' | 't' | 'L' | 'q')
                {
                    conv = d;
                    break;
                }
            }
            out.push_str(match conv {
                'd' | 'i' | 'u' => "42",
                'x' | 'X' => "3b000",
                'p' => "0x7f3a2c000000",
                'f' | 'g' | 'e' => "1.5",
                'c' => "q",
                _ => "q9",
            });
        }
        out
    }

    #[test]
    fn every_warn_of_nccl_2_28_9_is_in_the_table_and_reads_back() {
        let t = Table::shipped();
        let mut missing = Vec::new();
        let mut misread = Vec::new();
        let mut n = 0;
        for line in WARNS_2_28_9.lines().filter(|l| !l.trim().is_empty()) {
            n += 1;
            let (site, format) = line.split_once('\t').expect("file:line<TAB>format");
            let format = unescape(format);
            let want = format!("2.28.9 {site}");
            let Some(row) = t
                .rows
                .iter()
                .find(|r| r.level == Level::Warn && r.format == format && r.sites.contains(&want))
            else {
                missing.push(line.to_string());
                continue;
            };
            let text = printed(&row.format);
            let pattern = |f: &str| format_regex(f).0;
            let (_, _, literal, (typed, _)) = format_regex(&row.format);
            if literal == 0 && typed == 0 {
                // Nothing but `%s`: in the table, named by nothing (see `Table::name`).
                assert!(t.name(Level::Warn, &text).is_none(), "{}", row.format);
                continue;
            }
            match t.name(Level::Warn, &text) {
                // Read back to this row, or to one NCCL prints the same way (`%d` and `%ld`,
                // a trailing `\n`): the two patterns are one.
                Some((r, Match::Whole)) if pattern(&r.format) == pattern(&row.format) => {}
                other => misread.push(format!(
                    "{site}: {text:?} -> {:?}",
                    other.map(|(r, m)| (&r.format, m))
                )),
            }
        }
        assert!(n > 400, "{n} WARN sites listed");
        assert!(
            missing.is_empty(),
            "not in the table:\n{}",
            missing.join("\n")
        );
        assert!(misread.is_empty(), "not read back:\n{}", misread.join("\n"));
    }

    #[test]
    fn the_shipped_table_has_every_family_and_an_explanation_per_row() {
        let t = Table::shipped();
        for p in &t.patterns {
            assert!(Regex::new(&p.source).is_ok(), "{}", p.source);
        }
        assert!(t.rows.len() > 700, "{} rows", t.rows.len());
        for r in &t.rows {
            assert!(t.family(r).is_some(), "{}", r.format);
            assert!(!r.meaning.is_empty() && !r.fix.is_empty(), "{}", r.format);
            assert!(
                !r.sites.is_empty() && !r.releases.is_empty(),
                "{}",
                r.format
            );
        }
        let ids: Vec<&str> = t.rows.iter().filter_map(|r| r.id.as_deref()).collect();
        let unique: std::collections::BTreeSet<&str> = ids.iter().copied().collect();
        assert_eq!(ids.len(), unique.len(), "ids are unique");
    }
}
