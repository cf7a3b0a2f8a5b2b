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
            Ok(x) => verdict(within(x, *want, item.tolerance)),
            Err(e) => Verdict::Invalid(e),
        },
        (Answer::Model(_), Kind::Recall) => {
            Verdict::Invalid("recall items are graded by you: compare with the model answer".into())
        }
        _ => Verdict::Invalid("this item's answer could not be computed".into()),
    }
}

fn verdict(ok: bool) -> Verdict {
    if ok { Verdict::Correct } else { Verdict::Wrong }
}

fn example_order(n: usize) -> String {
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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Family {
    Bytes,
    Rate,
    Time,
}

impl Family {
    fn of(unit: Unit) -> Self {
        match unit {
            Unit::Bytes => Family::Bytes,
            Unit::GbPerS => Family::Rate,
            Unit::Micros => Family::Time,
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Family::Bytes => "a size in bytes (B, KB, MB, GB, KiB, MiB, GiB)",
            Family::Rate => "a bandwidth (GB/s, MB/s)",
            Family::Time => "a time (us, µs, ms, s, ns)",
        }
    }
}

/// A unit suffix: its family and how many of the family's base unit (B, GB/s, us) it is.
fn unit_scale(u: &str) -> Result<(Family, f64), String> {
    // Bits are a classic slip: "Gb" is a gigabit. Refuse rather than guess.
    let bits = |u: &str| {
        Err(format!(
            "“{u}” reads as bits; answer in bytes (capital B: GB, MB, KiB …)"
        ))
    };
    let key = u.replace('μ', "µ");
    if key.ends_with("bps") || key.ends_with("bit") || key.ends_with("bits") {
        return bits(u);
    }
    let lower = key.to_lowercase();
    let scale = match lower.as_str() {
        "b" | "byte" | "bytes" => (Family::Bytes, 1.0),
        "kb" => (Family::Bytes, 1e3),
        "mb" => (Family::Bytes, 1e6),
        "gb" => (Family::Bytes, 1e9),
        "tb" => (Family::Bytes, 1e12),
        "kib" => (Family::Bytes, 1024.0),
        "mib" => (Family::Bytes, 1024.0 * 1024.0),
        "gib" => (Family::Bytes, 1024.0 * 1024.0 * 1024.0),
        "tib" => (Family::Bytes, 1024f64.powi(4)),
        "b/s" => (Family::Rate, 1e-9),
        "kb/s" => (Family::Rate, 1e-6),
        "mb/s" => (Family::Rate, 1e-3),
        "gb/s" | "gbps" => (Family::Rate, 1.0),
        "tb/s" => (Family::Rate, 1e3),
        "ns" => (Family::Time, 1e-3),
        "us" | "µs" | "usec" => (Family::Time, 1.0),
        "ms" | "msec" => (Family::Time, 1e3),
        "s" | "sec" | "secs" | "seconds" => (Family::Time, 1e6),
        _ => {
            return Err(format!(
                "unknown unit “{u}”: use B, KB, MB, GB, KiB, MiB, GiB; GB/s; us, ms, s"
            ));
        }
    };
    // A lowercase b after a capital prefix (Gb, Mb/s) is bits.
    if scale.0 != Family::Time {
        let first = key.split('/').next().unwrap_or("");
        if first.len() >= 2 && first.ends_with('b') && first.chars().any(|c| c.is_uppercase()) {
            return bits(u);
        }
    }
    Ok(scale)
}

/// A number with an optional unit, converted to `unit` (no unit: taken as `unit`). Accepts
/// exponents (`1.75e9`), thousands separators (`1,750,000,000`, `1_750_000_000`, thin
/// spaces) and surrounding whitespace. A unit of another kind is an error naming both.
pub fn parse_quantity(input: &str, unit: Option<Unit>) -> Result<f64, String> {
    let s = input.trim();
    if s.is_empty() {
        return Err("no answer".into());
    }
    // Split the numeric head from the unit tail.
    let bytes = s.as_bytes();
    let mut end = 0;
    let mut seen_e = false;
    while end < bytes.len() {
        let c = bytes[end] as char;
        let prev = if end > 0 { bytes[end - 1] as char } else { ' ' };
        let ok = c.is_ascii_digit()
            || c == '.'
            || c == ','
            || c == '_'
            || ((c == '-' || c == '+') && (end == 0 || prev == 'e' || prev == 'E'))
            || ((c == 'e' || c == 'E')
                && !seen_e
                && end > 0
                && bytes
                    .get(end + 1)
                    .is_some_and(|n| n.is_ascii_digit() || *n == b'-' || *n == b'+'));
        if !ok {
            break;
        }
        if c == 'e' || c == 'E' {
            seen_e = true;
        }
        end += 1;
    }
    let (num, rest) = s.split_at(end);
    let rest = rest.trim_start_matches([' ', '\u{2009}', '\u{202f}', '\u{a0}']);
    // A digit right after a space is a space used as thousands separator ("1 750 000").
    if rest.starts_with(|c: char| c.is_ascii_digit()) {
        let joined: String = s
            .chars()
            .filter(|c| !c.is_whitespace() && *c != '\u{2009}' && *c != '\u{202f}')
            .collect();
        if joined != s {
            return parse_quantity(&joined, unit);
        }
    }
    let value = parse_number(num).ok_or_else(|| {
        format!("“{s}” is not a number (examples: 1.75e9, 1.75 GB, 1,750,000,000, 16 KiB)")
    })?;
    let tail = rest.trim();
    if tail.is_empty() {
        return Ok(value);
    }
    let (family, scale) = unit_scale(tail)?;
    match unit {
        None => Err(format!(
            "this answer is a plain number; drop the unit “{tail}”"
        )),
        Some(u) if Family::of(u) != family => Err(format!(
            "“{tail}” is {}, but this answer is {}: answer in {}",
            family.describe(),
            Family::of(u).describe(),
            u.symbol()
        )),
        Some(_) => Ok(value * scale),
    }
}

/// A plain number with optional thousands separators (`,` or `_`, in groups of three).
fn parse_number(s: &str) -> Option<f64> {
    if s.is_empty() {
        return None;
    }
    let (mantissa, exp) = match s.find(['e', 'E']) {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let (int_part, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits = if int_part.contains([',', '_']) {
        let sign = int_part.starts_with(['-', '+']);
        let body = if sign { &int_part[1..] } else { int_part };
        let groups: Vec<&str> = body.split([',', '_']).collect();
        let well_formed = groups.first().is_some_and(|g| (1..=3).contains(&g.len()))
            && groups[1..].iter().all(|g| g.len() == 3)
            && groups.iter().all(|g| g.chars().all(|c| c.is_ascii_digit()));
        if !well_formed {
            return None;
        }
        format!(
            "{}{}",
            if sign { &int_part[..1] } else { "" },
            groups.concat()
        )
    } else {
        int_part.to_string()
    };
    if frac.contains([',', '_']) {
        return None;
    }
    let mut text = digits;
    if !frac.is_empty() || mantissa.contains('.') {
        text.push('.');
        text.push_str(frac);
    }
    if let Some(e) = exp {
        text.push('e');
        text.push_str(e);
    }
    text.parse::<f64>().ok().filter(|x| x.is_finite())
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
        Some(u) => format!("{} {}", format_number(x), u.symbol()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
