//! Grading typed answers. Numbers may carry units and thousands separators
//! (`1.75e9`, `1.75 GB`, `1,750,000,000`, `16 KiB`); choices are letters or numbers
//! (`b`, `2`, `a c`, `3 1 2`, `c a b`); recall items are graded by the learner
//! (Again / Hard / Good / Easy). An empty answer is "not answered", never "wrong", and an
//! answer in the wrong unit is refused with a message instead of being marked wrong.

use super::quiz::{Answer, Instance, Item, Kind, Unit, format_number};

/// The outcome of one typed answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    Correct,
    Wrong,
    /// Nothing was typed.
    Unanswered,
    /// The input could not be read as an answer of this kind; the message says why. Not a
    /// wrong answer: the learner may try again.
    Invalid(String),
}

/// The learner's own grade for a recall item (FSRS's four buttons).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SelfGrade {
    Again,
    Hard,
    Good,
    Easy,
}

impl SelfGrade {
    pub const ALL: [SelfGrade; 4] = [
        SelfGrade::Again,
        SelfGrade::Hard,
        SelfGrade::Good,
        SelfGrade::Easy,
    ];

    pub fn name(self) -> &'static str {
        match self {
            SelfGrade::Again => "Again",
            SelfGrade::Hard => "Hard",
            SelfGrade::Good => "Good",
            SelfGrade::Easy => "Easy",
        }
    }

    /// 1..=4.
    pub fn number(self) -> u8 {
        match self {
            SelfGrade::Again => 1,
            SelfGrade::Hard => 2,
            SelfGrade::Good => 3,
            SelfGrade::Easy => 4,
        }
    }

    pub fn from_number(n: u8) -> Option<Self> {
        Self::ALL.get(usize::from(n).checked_sub(1)?).copied()
    }

    /// `1`..`4`, or the name (any case, a prefix of at least one letter).
    pub fn parse(input: &str) -> Option<Self> {
        let s = input.trim().to_lowercase();
        if s.is_empty() {
            return None;
        }
        if let Ok(n) = s.parse::<u8>() {
            return Self::from_number(n);
        }
        Self::ALL
            .into_iter()
            .find(|g| g.name().to_lowercase().starts_with(&s))
    }
}

/// What the learner typed, read as an answer to `item`, compared with `inst`'s answer.
pub fn grade(item: &Item, inst: &Instance, input: &str) -> Verdict {
    let s = input.trim();
    if s.is_empty() {
        return Verdict::Unanswered;
    }
    let n = item.choices.len();
    match (&inst.answer, item.kind) {
        (Answer::Choice(want), Kind::Single) => match parse_choices(s, n) {
            Ok(v) if v.len() == 1 => verdict(v[0] == *want),
            Ok(_) => Verdict::Invalid("choose one answer".into()),
            Err(e) => Verdict::Invalid(e),
        },
        (Answer::Choices(want), Kind::Multi) => match parse_choices(s, n) {
            Ok(mut v) => {
                v.sort_unstable();
                v.dedup();
                verdict(&v == want)
            }
            Err(e) => Verdict::Invalid(e),
        },
        (Answer::Order(want), Kind::Order) => match parse_choices(s, n) {
            Ok(v) => {
                let mut sorted = v.clone();
                sorted.sort_unstable();
                sorted.dedup();
                if v.len() != n || sorted.len() != n {
                    Verdict::Invalid(format!(
                        "give all {n} items, each once, first to last (e.g. {})",
                        example_order(n)
                    ))
                } else {
                    verdict(&v == want)
                }
            }
            Err(e) => Verdict::Invalid(e),
        },
        (Answer::Number(want), Kind::Numeric) => match parse_quantity(s, item.unit) {
            // A count, a size, a rate or a time is never negative: a sign is a slip, refused
            // rather than graded.
            Ok(x) if x < 0.0 && *want >= 0.0 => Verdict::Invalid(format!(
                "“{}” is negative; this answer is {}: answer with a positive number",
                s.trim(),
                numeric_kind(item.unit)
            )),
            Ok(x) => verdict(within(x, *want, item.tolerance)),
            Err(e) => Verdict::Invalid(e),
        },
        (Answer::Model(_), Kind::Recall) => {
            Verdict::Invalid("recall items are graded by you: compare with the model answer".into())
        }
        _ => Verdict::Invalid("this item's answer could not be computed".into()),
    }
}

/// What a numeric answer measures, in words.
fn numeric_kind(unit: Option<Unit>) -> &'static str {
    match unit {
        Some(Unit::Bytes) => "a size",
        Some(Unit::GbPerS) => "a bandwidth",
        Some(Unit::Micros) => "a time",
        None => "a count",
    }
}

/// The input hint of a numeric item: examples in its own unit (a step count gets no bytes).
pub fn numeric_hint(unit: Option<Unit>) -> &'static str {
    match unit {
        Some(Unit::Bytes) => "a size, e.g. 1.75e9, 1.75 GB, 16 KiB",
        Some(Unit::GbPerS) => "a bandwidth in GB/s, e.g. 48.5 or 48.5 GB/s",
        Some(Unit::Micros) => "a time, e.g. 28 µs, 0.028 ms, 28",
        None => "a number, e.g. 14, 1,750, 0.23, 7/31 or 1.75e9",
    }
}

fn verdict(ok: bool) -> Verdict {
    if ok { Verdict::Correct } else { Verdict::Wrong }
}

/// "d c b a": every letter of `n` items, last first (an example of a whole order answer).
pub fn example_order(n: usize) -> String {
    (0..n)
        .rev()
        .map(|i| letter(i).to_string())
        .collect::<Vec<_>>()
        .join(" ")
}

/// `a`, `b`, … for choice indices.
pub fn letter(i: usize) -> char {
    char::from(b'a' + (i % 26) as u8)
}

/// True when `x` is within the relative tolerance of `want` (exact up to rounding noise when
/// the tolerance is 0; absolute when `want` is 0).
pub fn within(x: f64, want: f64, tolerance: f64) -> bool {
    let slack = tolerance.max(1e-9);
    if want == 0.0 {
        return x.abs() <= slack;
    }
    (x - want).abs() <= slack * want.abs()
}

/// Choice indices from letters (`a c`, `ac`, `A, C`) or 1-based numbers (`1 3`, `1,3`).
pub fn parse_choices(s: &str, n: usize) -> Result<Vec<usize>, String> {
    let last = letter(n.saturating_sub(1));
    let tokens: Vec<&str> = s
        .split(|c: char| c.is_whitespace() || c == ',' || c == ';')
        .filter(|t| !t.is_empty())
        .collect();
    let mut out = Vec::new();
    for t in tokens {
        let t = t.trim_end_matches([')', '.']);
        if let Ok(k) = t.parse::<usize>() {
            if k == 0 || k > n {
                return Err(format!(
                    "there is no choice {k}: choose 1 to {n} (or a to {last})"
                ));
            }
            out.push(k - 1);
        } else if t.chars().all(|c| c.is_ascii_alphabetic()) {
            for c in t.chars() {
                let i = (c.to_ascii_lowercase() as u8).wrapping_sub(b'a') as usize;
                if i >= n {
                    return Err(format!(
                        "there is no choice {c}: choose a to {last} (or 1 to {n})"
                    ));
                }
                out.push(i);
            }
        } else {
            return Err(format!(
                "“{t}” is not a choice: type letters a to {last} or numbers 1 to {n}"
            ));
        }
    }
    if out.is_empty() {
        return Err(format!("type letters a to {last} or numbers 1 to {n}"));
    }
    Ok(out)
}

use crate::units::{Family, split_quantity, unit_scale};

fn family_of(unit: Unit) -> Family {
    match unit {
        Unit::Bytes => Family::Bytes,
        Unit::GbPerS => Family::Rate,
        Unit::Micros => Family::Time,
    }
}

/// A number with an optional unit, converted to `unit` (no unit: taken as `unit`), read by the
/// one unit reader ([`crate::units`]). A unit of another kind is an error naming both.
pub fn parse_quantity(input: &str, unit: Option<Unit>) -> Result<f64, String> {
    if input.trim().is_empty() {
        return Err("no answer".into());
    }
    if unit.is_none()
        && let Some(f) = fraction(input)
    {
        return f;
    }
    let (value, tail) = match split_quantity(input) {
        Err(_) if unit.is_none() => return Err(plain_number_refusal(input)),
        r => r?,
    };
    if tail.is_empty() {
        return Ok(value);
    }
    let Some(u) = unit else {
        return Err(plain_number_refusal(&tail));
    };
    let (family, scale) = unit_scale(&tail)?;
    if family_of(u) != family {
        return Err(format!(
            "“{tail}” is {}, but this answer is {}: answer in {}",
            family.describe(),
            family_of(u).describe(),
            u.shown()
        ));
    }
    Ok(value * scale)
}

/// `a/b` typed for a plain number (a fraction such as the pipeline bubble's 7/31): its value,
/// or why not; None where the input is not of that shape.
fn fraction(input: &str) -> Option<Result<f64, String>> {
    let (a, b) = input.split_once('/')?;
    let num = |s: &str| s.trim().replace(',', "").parse::<f64>().ok();
    let (a, b) = (num(a)?, num(b)?);
    Some(if b == 0.0 {
        Err("a fraction with 0 below the line has no value".into())
    } else {
        Ok(a / b)
    })
}

/// What to type where a plain number (a count, a fraction) is asked and `what` came with it.
fn plain_number_refusal(what: &str) -> String {
    format!(
        "this answer is a plain number: type it alone (14, 0.23, 7/31 or 1.75e9), without “{}”",
        what.trim()
    )
}

/// The expected answer, for feedback: `117440512 B (112 MiB)`, `b) chunk 0, to rank 3`, ….
pub fn describe_answer(item: &Item, inst: &Instance) -> String {
    let choice = |i: usize| {
        format!(
            "{}) {}",
            letter(i),
            item.choices.get(i).map_or("?", String::as_str)
        )
    };
    match &inst.answer {
        Answer::Choice(i) => choice(*i),
        Answer::Choices(v) => v.iter().map(|&i| choice(i)).collect::<Vec<_>>().join("; "),
        Answer::Order(v) => v
            .iter()
            .map(|&i| letter(i).to_string())
            .collect::<Vec<_>>()
            .join(" "),
        Answer::Number(x) => format_quantity(*x, item.unit),
        Answer::Computed(name) => format!("(computed by {name})"),
        Answer::Model(m) => m.clone(),
    }
}

/// A number in its unit, with a binary-unit gloss for large byte counts.
pub fn format_quantity(x: f64, unit: Option<Unit>) -> String {
    match unit {
        None => format_number(x),
        Some(Unit::Bytes) if x >= 1024.0 && x.fract() == 0.0 => format!(
            "{} B ({})",
            format_number(x),
            crate::units::format_bytes(x as u64)
        ),
        Some(u) => format!("{} {}", format_number(x), u.shown()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A plain-number answer takes a fraction as typed (the pipeline bubble's 7/31), and a word
    /// after a count is refused with what to type, not a list of byte units.
    #[test]
    fn a_fraction_is_a_number_and_a_counts_word_says_what_to_type() {
        let v = parse_quantity("7/31", None).expect("a fraction");
        assert!((v - 7.0 / 31.0).abs() < 1e-12, "{v}");
        assert_eq!(parse_quantity(" 1,000 / 4 ", None), Ok(250.0));
        let e = parse_quantity("1/0", None).expect_err("no value");
        assert!(e.contains("0 below the line"), "{e}");
        for typed in ["56 steps", "56steps", "7/x"] {
            let e = parse_quantity(typed, None).expect_err(typed);
            assert!(
                e.contains("plain number") && !e.contains("KiB"),
                "{typed}: {e}"
            );
        }
        // A unit is still a unit where one is asked for.
        assert!(parse_quantity("7/31", Some(Unit::Bytes)).is_err());
        assert_eq!(parse_quantity("1 KiB", Some(Unit::Bytes)), Ok(1024.0));
    }

    #[test]
    fn numbers_in_every_spelling() {
        let b = Some(Unit::Bytes);
        for s in [
            "1.75e9",
            "1.75E9",
            "1.75 GB",
            "1.75GB",
            "1,750,000,000",
            "1_750_000_000",
            "  1750000000  ",
            "1750 MB",
            "1 750 000 000",
        ] {
            assert_eq!(parse_quantity(s, b), Ok(1.75e9), "{s}");
        }
        assert_eq!(parse_quantity("16 KiB", b), Ok(16384.0));
        assert_eq!(parse_quantity("1.5 MiB", b), Ok(1572864.0));
    }

    #[test]
    fn wrong_unit_is_refused_with_a_message() {
        let e = parse_quantity("3 ms", Some(Unit::Bytes)).expect_err("wrong family");
        assert!(e.contains("time") && e.contains("bytes"), "{e}");
        let e = parse_quantity("1.75 Gb", Some(Unit::Bytes)).expect_err("bits");
        assert!(e.contains("bits"), "{e}");
        let e = parse_quantity("2 furlongs", Some(Unit::Bytes)).expect_err("unknown");
        assert!(e.contains("unknown unit"), "{e}");
        assert!(parse_quantity("1,75", Some(Unit::Bytes)).is_err());
        assert!(parse_quantity("abc", None).is_err());
    }

    #[test]
    fn times_and_rates_convert() {
        let us = Some(Unit::Micros);
        assert_eq!(parse_quantity("2 ms", us), Ok(2000.0));
        assert_eq!(parse_quantity("14 µs", us), Ok(14.0));
        assert_eq!(parse_quantity("14 μs", us), Ok(14.0));
        assert_eq!(parse_quantity("14us", us), Ok(14.0));
        assert_eq!(parse_quantity("0.5 s", us), Ok(500000.0));
        assert_eq!(parse_quantity("367 GB/s", Some(Unit::GbPerS)), Ok(367.0));
        assert_eq!(parse_quantity("367000 MB/s", Some(Unit::GbPerS)), Ok(367.0));
    }

    #[test]
    fn choices_by_letter_or_number() {
        assert_eq!(parse_choices("b", 4), Ok(vec![1]));
        assert_eq!(parse_choices("B)", 4), Ok(vec![1]));
        assert_eq!(parse_choices("2", 4), Ok(vec![1]));
        assert_eq!(parse_choices("a c", 4), Ok(vec![0, 2]));
        assert_eq!(parse_choices("a,c", 4), Ok(vec![0, 2]));
        assert_eq!(parse_choices("ac", 4), Ok(vec![0, 2]));
        assert_eq!(parse_choices("3 1 2", 3), Ok(vec![2, 0, 1]));
        assert_eq!(parse_choices("c a b", 3), Ok(vec![2, 0, 1]));
        assert!(parse_choices("e", 4).is_err());
        assert!(parse_choices("5", 4).is_err());
        assert!(parse_choices("0", 4).is_err());
        assert!(parse_choices("?", 4).is_err());
    }

    #[test]
    fn self_grades_parse() {
        assert_eq!(SelfGrade::parse("1"), Some(SelfGrade::Again));
        assert_eq!(SelfGrade::parse(" good "), Some(SelfGrade::Good));
        assert_eq!(SelfGrade::parse("E"), Some(SelfGrade::Easy));
        assert_eq!(SelfGrade::parse("5"), None);
        assert_eq!(SelfGrade::parse(""), None);
    }

    #[test]
    fn tolerance_is_relative() {
        assert!(within(101.0, 100.0, 0.01));
        assert!(!within(101.5, 100.0, 0.01));
        assert!(within(100.0, 100.0, 0.0));
        assert!(!within(100.5, 100.0, 0.0));
        assert!(within(0.0, 0.0, 0.0));
    }
}
