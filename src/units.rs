//! Sizes and durations as people type and read them.
//!
//! [`parse_size`] follows nccl-tests' `-b/-e` convention: every suffix is binary, so "1K" = 1024,
//! "64M" = 64·2^20, and "1KB", "1kB", "1KiB" all mean 1024 too (ringlab never uses decimal SI
//! for buffer sizes). [`format_bytes`] prints binary units ("1 MiB", "1.50 GiB").

use std::time::Duration;

const UNITS: [&str; 7] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];

/// Parses a byte size: a number, optionally with a fraction, then an optional suffix K, M, G, T
/// (each optionally followed by "B" or "iB", any case) or "B". Fractions round down to whole
/// bytes ("1.5K" = 1536, "0.3K" = 307). Rejects empty, negative, garbage and overflow with a
/// message naming the input.
pub fn parse_size(input: &str) -> Result<u64, String> {
    let s = input.trim();
    let bad = |why: &str| {
        format!("invalid size \"{input}\": {why} (examples: 1003, 64K, 1.5M, 256MB, 1GiB)")
    };
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (number, suffix) = s.split_at(split);
    if number.is_empty() {
        return Err(bad(if s.starts_with('-') {
            "sizes cannot be negative"
        } else {
            "expected a number"
        }));
    }
    let shift = match suffix.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => return Err(bad("unknown unit; use B, K, M, G or T")),
    };
    let (whole, frac) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && frac.is_empty() || frac.contains('.') {
        return Err(bad("expected a number"));
    }
    let too_big = || bad("too large");
    let whole: u64 = if whole.is_empty() {
        0
    } else {
        whole.parse().map_err(|_| too_big())?
    };
    let mut bytes = whole.checked_mul(1u64 << shift).ok_or_else(too_big)?;
    // Fraction: digits / 10^k × 2^shift, rounded down, in exact integer arithmetic.
    let digits = &frac[..frac.len().min(18)];
    if !digits.is_empty() {
        let num: u128 = digits.parse().map_err(|_| bad("expected a number"))?;
        let den = 10u128.pow(digits.len() as u32);
        let part = (num << shift) / den;
        bytes = bytes.checked_add(part as u64).ok_or_else(too_big)?;
    }
    Ok(bytes)
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

/// [`format_seconds`] for a [`Duration`].
pub fn format_duration(d: Duration) -> String {
    format_seconds(d.as_secs_f64())
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
        assert_eq!(parse_size("1003"), Ok(1003));
        assert_eq!(parse_size("1K"), Ok(1024));
        assert_eq!(parse_size("64M"), Ok(64 << 20));
        assert_eq!(parse_size("1G"), Ok(1 << 30));
        assert_eq!(parse_size("1KiB"), Ok(1024));
        assert_eq!(parse_size("1MiB"), Ok(1 << 20));
        assert_eq!(parse_size("1.5M"), Ok(3 << 19));
        assert_eq!(parse_size("256MB"), Ok(256 << 20));
        assert_eq!(parse_size(" 8 kb "), Ok(8192));
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
        assert_eq!(format_duration(Duration::from_millis(250)), "250 ms");
    }
}
