//! Sizes, quantities and durations as people type and read them: the one reader of units in
//! ringlab. Quiz answers, `--bytes`, `-b/-e` and lesson blocks all go through [`split_quantity`]
//! and [`unit_scale`].
//!
//! Units follow the standards: KB, MB, GB, TB are decimal (10^3, 10^6, …) and KiB, MiB, GiB, TiB
//! binary (2^10, 2^20, …). A bare K, M, G or T (no "B") is binary, as in nccl-tests' `-b 64M`
//! (64·2^20 bytes). Numbers may carry an exponent (`1e6`, `1.75e9`) and thousands separators
//! (`1,048,576`, `1_048_576`, `1 048 576`). [`format_bytes`] prints binary units ("1 MiB").

const UNITS: [&str; 7] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];

/// What kind of quantity a unit measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// Bytes (base unit: B).
    Bytes,
    /// Bandwidth (base unit: GB/s).
    Rate,
    /// Time (base unit: µs).
    Time,
}

impl Family {
    pub fn describe(self) -> &'static str {
        match self {
            Family::Bytes => "a size in bytes (B, KB, MB, GB, KiB, MiB, GiB)",
            Family::Rate => "a bandwidth (GB/s, MB/s)",
            Family::Time => "a time (us, µs, ms, s, ns)",
        }
    }
}

/// A unit suffix: its family and how many of the family's base unit (B, GB/s, µs) it is.
pub fn unit_scale(u: &str) -> Result<(Family, f64), String> {
    // Bits are a classic slip: "Gb" is a gigabit. Refuse rather than guess.
    let bits = |u: &str| {
        Err(format!(
            "“{u}” reads as bits; use bytes (capital B: GB, MB, KiB …)"
        ))
    };
    let key = u.replace('μ', "µ");
    if key.ends_with("bps") || key.ends_with("bit") || key.ends_with("bits") {
        return bits(u);
    }
    let lower = key.to_lowercase();
    let bin = |k: i32| (Family::Bytes, 1024f64.powi(k));
    let scale = match lower.as_str() {
        "b" | "byte" | "bytes" => (Family::Bytes, 1.0),
        "kb" => (Family::Bytes, 1e3),
        "mb" => (Family::Bytes, 1e6),
        "gb" => (Family::Bytes, 1e9),
        "tb" => (Family::Bytes, 1e12),
        // Binary, spelled out or bare as nccl-tests writes it.
        "kib" | "k" => bin(1),
        "mib" | "m" => bin(2),
        "gib" | "g" => bin(3),
        "tib" | "t" => bin(4),
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
                "unknown unit “{u}”: use B, KB, MB, GB, KiB, MiB, GiB (K, M, G alone are binary); GB/s; us, ms, s"
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

/// Splits a typed quantity into its number and its unit text (trimmed; empty when there is
/// none). Accepts exponents (`1.75e9`), thousands separators (`1,750,000,000`,
/// `1_750_000_000`, `1 750 000 000`, thin spaces) and surrounding whitespace.
pub fn split_quantity(input: &str) -> Result<(f64, String), String> {
    let s = input.trim();
    if s.is_empty() {
        return Err("no value".into());
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
            return split_quantity(&joined);
        }
    }
    let value = parse_number(num).ok_or_else(|| {
        format!("“{s}” is not a number (examples: 1.75e9, 1.75 GB, 1,750,000,000, 16 KiB)")
    })?;
    Ok((value, rest.trim().to_string()))
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

/// Parses a byte size with [`split_quantity`] and [`unit_scale`]: `1003`, `1e6`, `64K` (binary,
/// as nccl-tests), `1MB` (10^6), `1MiB` (2^20), `1,048,576`. Fractions round down to whole
/// bytes ("1.5K" = 1536, "0.3K" = 307). Rejects empty, negative, garbage, another kind of unit
/// and overflow with a message naming the input.
pub fn parse_size(input: &str) -> Result<u64, String> {
    let bad = |why: &str| {
        format!("invalid size \"{input}\": {why} (examples: 1003, 1e6, 64K, 1.5MiB, 256MB)")
    };
    if input.trim_start().starts_with('-') {
        return Err(bad("sizes cannot be negative"));
    }
    let (value, unit) = split_quantity(input).map_err(|_| bad("expected a number"))?;
    let scale = if unit.is_empty() {
        1.0
    } else {
        match unit_scale(&unit) {
            Ok((Family::Bytes, k)) => k,
            Ok((other, _)) => {
                return Err(bad(&format!(
                    "“{unit}” is {}, not a size",
                    other.describe()
                )));
            }
            // Only the units a size takes (unit_scale's own list names rates and times too).
            Err(e) if e.starts_with("unknown unit") => {
                return Err(bad(&format!(
                    "unknown unit “{unit}”: use B, KB, MB, GB, KiB, MiB, GiB (K, M, G alone are binary)"
                )));
            }
            Err(e) => return Err(bad(&e)),
        }
    };
    let bytes = value * scale;
    // 2^64 is exactly representable; anything at or above it does not fit.
    if !bytes.is_finite() || bytes >= 18_446_744_073_709_551_616.0 {
        return Err(bad("too large"));
    }
    if bytes < 0.0 {
        return Err(bad("sizes cannot be negative"));
    }
    Ok(bytes.floor() as u64)
}

/// A whole count as people write it: `2048`, `1e3`, `2,048`, `1_000_000`. Refuses a
/// fraction, a sign, a unit and garbage with a message naming the input.
pub fn parse_count(input: &str) -> Result<u64, String> {
    let bad = |why: &str| format!("invalid count \"{input}\": {why} (examples: 2048, 1e3, 1,000)");
    let t = input.trim();
    if t.starts_with(['-', '+']) {
        return Err(bad("a count has no sign"));
    }
    let x = parse_number(t).ok_or_else(|| bad("expected a whole number"))?;
    if x.fract() != 0.0 {
        return Err(bad("not a whole number"));
    }
    if x >= 18_446_744_073_709_551_616.0 {
        return Err(bad("too large"));
    }
    Ok(x as u64)
}

/// A count with its noun, plural unless one: "1 GPU", "16 GPUs", "1 node", "2 nodes".
pub fn count(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// Formats bytes in binary units: "1003 B", "1 MiB", "1.50 GiB" (two decimals unless exact).
pub fn format_bytes(bytes: u64) -> String {
    let unit = if bytes == 0 {
        0
    } else {
        (bytes.ilog2() / 10) as usize
    }
    .min(UNITS.len() - 1);
    if unit == 0 {
        return format!("{bytes} B");
    }
    let scale = 1u64 << (10 * unit);
    if bytes.is_multiple_of(scale) {
        format!("{} {}", bytes / scale, UNITS[unit])
    } else {
        format!("{:.2} {}", bytes as f64 / scale as f64, UNITS[unit])
    }
}

/// A size in the units it was likely written in: decimal (`14 GB`) for a round decimal size
/// that binary units would show with a fraction (`13.04 GiB`), binary (`64 MiB`) otherwise.
pub fn format_bytes_natural(bytes: u64) -> String {
    const DECIMAL: [&str; 5] = ["B", "KB", "MB", "GB", "TB"];
    let binary = format_bytes(bytes);
    if !binary.contains('.') || !bytes.is_multiple_of(1000) {
        return binary;
    }
    let mut unit = 0;
    while unit + 1 < DECIMAL.len() && bytes >= 1000u64.pow(unit as u32 + 1) {
        unit += 1;
    }
    let v = bytes as f64 / 1000f64.powi(unit as i32);
    let s = format!("{v:.2}");
    format!(
        "{} {}",
        s.trim_end_matches('0').trim_end_matches('.'),
        DECIMAL[unit]
    )
}

/// Formats seconds with three significant digits in ns, µs, ms or s: "850 ns", "12.3 µs",
/// "4.56 ms", "1.23 s". Negative or non-finite input gives "n/a".
pub fn format_seconds(seconds: f64) -> String {
    if !seconds.is_finite() || seconds < 0.0 {
        return "n/a".to_string();
    }
    if seconds == 0.0 {
        return "0 s".to_string();
    }
    let (value, unit) = if seconds < 1e-6 {
        (seconds * 1e9, "ns")
    } else if seconds < 1e-3 {
        (seconds * 1e6, "µs")
    } else if seconds < 1.0 {
        (seconds * 1e3, "ms")
    } else {
        (seconds, "s")
    };
    // Round first so 999.96 µs is not printed as "1000 µs".
    let decimals = if value >= 99.95 {
        0
    } else if value >= 9.995 {
        1
    } else {
        2
    };
    let text = format!("{value:.decimals$}");
    if text == "1000" && unit != "s" {
        return format_seconds(seconds * 1.001);
    }
    format!("{text} {unit}")
}

/// nccl-tests' sweep: from `min` multiplying by `factor` while ≤ `max`.
pub fn sweep(min: u64, max: u64, factor: u64) -> Result<Vec<u64>, String> {
    if min == 0 {
        return Err("-b/--minbytes must be at least 1".into());
    }
    if max < min {
        return Err(format!(
            "-e/--maxbytes ({max}) is smaller than -b/--minbytes ({min})"
        ));
    }
    if factor < 2 {
        return Err("-f/--stepfactor must be at least 2".into());
    }
    let mut v = Vec::new();
    let mut s = min;
    while s <= max {
        v.push(s);
        s = match s.checked_mul(factor) {
            Some(n) => n,
            None => break,
        };
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_nccl_tests_style_sizes() {
        assert_eq!(parse_count("1e3"), Ok(1000));
        assert_eq!(parse_count("2,048"), Ok(2048));
        assert!(parse_count("1.5").is_err_and(|e| e.contains("not a whole number")));
        assert!(parse_count("-1").is_err());
        assert!(parse_count("ten").is_err_and(|e| e.contains("\"ten\"")));
        assert_eq!(parse_size("1003"), Ok(1003));
        assert_eq!(parse_size("1K"), Ok(1024));
        assert_eq!(parse_size("64M"), Ok(64 << 20));
        assert_eq!(parse_size("1G"), Ok(1 << 30));
        assert_eq!(parse_size("1KiB"), Ok(1024));
        assert_eq!(parse_size("1MiB"), Ok(1 << 20));
        assert_eq!(parse_size("1.5M"), Ok(3 << 19));
        // Decimal with a B, binary with iB or bare (nccl-tests' -b 64M).
        assert_eq!(parse_size("256MB"), Ok(256_000_000));
        assert_eq!(parse_size("1MB"), Ok(1_000_000));
        assert_eq!(parse_size("1MiB"), Ok(1_048_576));
        assert_eq!(parse_size(" 8 kb "), Ok(8000));
        assert_eq!(parse_size("1e6"), Ok(1_000_000));
        assert_eq!(parse_size("1.5e3 KiB"), Ok(1_536_000));
        assert_eq!(parse_size("1,048,576"), Ok(1_048_576));
        assert_eq!(parse_size("2 GB"), Ok(2_000_000_000));
        assert_eq!(format_bytes_natural(14_000_000_000), "14 GB");
        assert_eq!(format_bytes_natural(16_000_000), "16 MB");
        assert_eq!(format_bytes_natural(1_500_000), "1.5 MB");
        assert_eq!(format_bytes_natural(67_108_864), "64 MiB");
        assert_eq!(format_bytes_natural(1_048_577), "1.00 MiB");
        assert_eq!(format_bytes_natural(4_096_000), "4.1 MB");
        assert_eq!(parse_size("0.3K"), Ok(307));
        assert_eq!(parse_size("12B"), Ok(12));
        assert_eq!(parse_size(".5K"), Ok(512));
    }

    #[test]
    fn rejects_garbage_naming_the_input() {
        for bad in [
            "",
            "-1",
            "-1K",
            "abc",
            "1X",
            "1..5",
            ".",
            "1.2.3",
            "99999999999999999999",
            "16777216T",
            "1e30",
            "3 ms",
            "1 Gb",
        ] {
            let e = parse_size(bad).unwrap_err();
            assert!(e.contains(&format!("\"{bad}\"")), "{bad}: {e}");
        }
        assert!(parse_size("-5").unwrap_err().contains("negative"));
    }

    #[test]
    fn formats_bytes_in_binary_units() {
        assert_eq!(format_bytes(0), "0 B");
        assert_eq!(format_bytes(1003), "1003 B");
        assert_eq!(format_bytes(1 << 20), "1 MiB");
        assert_eq!(format_bytes(3 << 29), "1.50 GiB");
        assert_eq!(format_bytes(1536), "1.50 KiB");
        assert_eq!(format_bytes(u64::MAX), "16.00 EiB");
    }

    #[test]
    fn formats_durations() {
        assert_eq!(format_seconds(850e-9), "850 ns");
        assert_eq!(format_seconds(12.34e-6), "12.3 µs");
        assert_eq!(format_seconds(4.561e-3), "4.56 ms");
        assert_eq!(format_seconds(1.234), "1.23 s");
        assert_eq!(format_seconds(0.0), "0 s");
        assert_eq!(format_seconds(999.97e-6), "1.00 ms");
        assert_eq!(format_seconds(f64::NAN), "n/a");
        assert_eq!(
            format_seconds(std::time::Duration::from_millis(250).as_secs_f64()),
            "250 ms"
        );
    }
}
