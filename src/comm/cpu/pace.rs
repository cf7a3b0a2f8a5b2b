//! A token bucket on a node's sends: the emulated mode's stand-in for `tc qdisc add dev VETH
//! root tbf rate R burst B latency L` on that node's link, so a shaped link slows a job the
//! same way with or without root. Linux's tbf (`net/sched/sch_tbf.c`) fills a bucket of `burst`
//! bytes at `rate` and lets a packet go when the bucket holds its length; here a send of any
//! length takes what the bucket holds (at most `burst` at a time) and waits for the rest.
//! Rates are written as `tc` writes them (iproute2 `tc/tc_util.c` `get_rate64`: `bit`, `kbit`,
//! `mbit`, `gbit`, `tbit` in bits per second, `bps`, `kbps`, … in bytes per second, and the
//! IEC `kibit`, `mibit`, …).

use std::time::{Duration, Instant};

/// A link's rate in bytes per second; in files and JSON, tc's words (`200Mbit`).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Rate {
    pub bytes_per_s: f64,
}

/// A rate that cannot be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RateError {
    #[error("rate {0:?}: a link that carries nothing is not slow but down; give a rate above 0")]
    Zero(String),
    #[error(
        "rate {0:?}: not a rate; write it as tc does: a number and a unit, e.g. 1gbit, 500mbit, \
         100kbit (bits per second) or 125mbps (bytes per second)"
    )]
    Unreadable(String),
}

impl Rate {
    /// GB/s (1e9 bytes per second), as the cost model's links.
    pub fn gbps(self) -> f64 {
        self.bytes_per_s / 1e9
    }
}

impl std::str::FromStr for Rate {
    type Err = RateError;
    fn from_str(s: &str) -> Result<Rate, RateError> {
        let t = s.trim().to_ascii_lowercase();
        let at = t
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(t.len());
        let (num, unit) = t.split_at(at);
        let n: f64 = num
            .parse()
            .map_err(|_| RateError::Unreadable(s.to_string()))?;
        let scale = unit_scale(unit).ok_or_else(|| RateError::Unreadable(s.to_string()))?;
        let bytes_per_s = n * scale;
        if !bytes_per_s.is_finite() {
            return Err(RateError::Unreadable(s.to_string()));
        }
        if bytes_per_s <= 0.0 {
            return Err(RateError::Zero(s.to_string()));
        }
        Ok(Rate { bytes_per_s })
    }
}

/// Bytes per second per unit, as `tc` reads them (no unit: bits per second).
fn unit_scale(unit: &str) -> Option<f64> {
    let (prefix, base) = if let Some(p) = unit.strip_suffix("bit") {
        (p, 1.0 / 8.0)
    } else if let Some(p) = unit.strip_suffix("bps") {
        (p, 1.0)
    } else if unit.is_empty() {
        ("", 1.0 / 8.0)
    } else {
        return None;
    };
    let mult = match prefix {
        "" => 1.0,
        "k" => 1e3,
        "m" => 1e6,
        "g" => 1e9,
        "t" => 1e12,
        "ki" => 1024.0,
        "mi" => 1024.0 * 1024.0,
        "gi" => 1024.0 * 1024.0 * 1024.0,
        "ti" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        _ => return None,
    };
    Some(mult * base)
}

impl TryFrom<String> for Rate {
    type Error = RateError;
    fn try_from(s: String) -> Result<Rate, RateError> {
        s.parse()
    }
}

impl From<Rate> for String {
    fn from(r: Rate) -> String {
        r.to_string()
    }
}

impl std::fmt::Display for Rate {
    /// As tc prints it: the largest decimal unit of bits that keeps a whole number.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let bits = self.bytes_per_s * 8.0;
        for (unit, scale) in [("Gbit", 1e9), ("Mbit", 1e6), ("Kbit", 1e3)] {
            if bits >= scale {
                return write!(f, "{}{unit}", trim(bits / scale));
            }
        }
        write!(f, "{}bit", trim(bits))
    }
}

fn trim(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// The bucket: `burst` bytes at most, filled at `rate`.
#[derive(Debug, Clone)]
pub struct Pacer {
    rate: Rate,
    burst: f64,
    tokens: f64,
    last: Instant,
}

impl Pacer {
    /// A full bucket of `burst` bytes (at least one byte) at `rate`, as of `now`.
    pub fn new(rate: Rate, burst: usize, now: Instant) -> Pacer {
        let burst = burst.max(1) as f64;
        Pacer {
            rate,
            burst,
            tokens: burst,
            last: now,
        }
    }

    fn refill(&mut self, now: Instant) {
        let dt = now.saturating_duration_since(self.last).as_secs_f64();
        self.tokens = (self.tokens + dt * self.rate.bytes_per_s).min(self.burst);
        self.last = now;
    }

    /// How many of `want` bytes may go at `now` (taken from the bucket).
    pub fn take(&mut self, want: usize, now: Instant) -> usize {
        self.refill(now);
        let n = (self.tokens.floor() as usize).min(want);
        self.tokens -= n as f64;
        n
    }

    /// How long until `want` bytes (at most a burst) may go, as of `now`.
    pub fn wait(&mut self, want: usize, now: Instant) -> Duration {
        self.refill(now);
        let need = (want as f64).min(self.burst) - self.tokens;
        if need <= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(need / self.rate.bytes_per_s)
        }
    }
}

/// The variable that shapes a rank's links in the emulated cluster: `IFACE=RATE` pairs, comma
/// separated (`eth0=200mbit`). A rank whose chosen interface is named paces its NET sends at that
/// rate, as `tc … tbf` on that interface paces the namespace cluster's.
pub const SHAPE_ENV: &str = "RINGLAB_SHAPE";

/// The bucket's size: tc's `burst 64kb` as the lab stages it (iproute2 reads `kb` as KiB).
pub const BURST: usize = 64 << 10;

/// tc's words for [`BURST`], and the queue the namespace cluster's tbf holds: what `tc qdisc
/// replace … tbf` is given and what the emulated cluster's `tc qdisc show` stand-in prints.
pub const TBF_BURST: &str = "64kb";
pub const TBF_LATENCY: &str = "50ms";

/// One shaped interface: `eth0=200mbit`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Shape {
    pub iface: String,
    pub rate: Rate,
}

/// A [`SHAPE_ENV`] value that cannot be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ShapeError {
    #[error("{SHAPE_ENV}: `{0}` is not IFACE=RATE (e.g. eth0=200mbit)")]
    Pair(String),
    #[error("{SHAPE_ENV}: {0}")]
    Rate(#[from] RateError),
}

/// Read `eth0=200mbit,eth1=1gbit`.
pub fn parse_shapes(text: &str) -> Result<Vec<Shape>, ShapeError> {
    text.split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (iface, rate) = p
                .split_once('=')
                .filter(|(i, _)| !i.trim().is_empty())
                .ok_or_else(|| ShapeError::Pair(p.to_string()))?;
            Ok(Shape {
                iface: iface.trim().to_string(),
                rate: rate.parse()?,
            })
        })
        .collect()
}

/// [`SHAPE_ENV`] as one value, from shapes.
pub fn shapes_env(shapes: &[Shape]) -> String {
    shapes
        .iter()
        .map(|s| format!("{}={}", s.iface, s.rate))
        .collect::<Vec<_>>()
        .join(",")
}

/// The emulated bucket's size: tc's burst, or 20 ms of the rate where that is more. The
/// kernel's tbf is woken by a timer on time; a rank on a busy host can be woken milliseconds
/// late, and a bucket that overflowed meanwhile would lose the link's time (ringlab's choice:
/// the average rate holds, at the price of a larger first burst).
pub fn bucket(rate: Rate) -> usize {
    BURST.max((rate.bytes_per_s * 0.020) as usize)
}

static PACER: std::sync::OnceLock<std::sync::Mutex<Pacer>> = std::sync::OnceLock::new();

/// This process's NET sends leave through `iface`: where [`SHAPE_ENV`] shapes it, pace them
/// from now on. Returns the rate, if any.
pub fn activate(iface: &str) -> Result<Option<Rate>, ShapeError> {
    let Ok(v) = std::env::var(SHAPE_ENV) else {
        return Ok(None);
    };
    let rate = parse_shapes(&v)?
        .into_iter()
        .find(|s| s.iface == iface)
        .map(|s| s.rate);
    if let Some(r) = rate {
        let _ = PACER.set(std::sync::Mutex::new(Pacer::new(
            r,
            bucket(r),
            Instant::now(),
        )));
    }
    Ok(rate)
}

/// The pacer of this process's NET sends, once [`activate`] found its interface shaped.
pub fn active() -> Option<&'static std::sync::Mutex<Pacer>> {
    PACER.get()
}

impl Pacer {
    /// Put back `n` bytes taken but not sent (the socket took fewer).
    pub fn give_back(&mut self, n: usize) {
        self.tokens = (self.tokens + n as f64).min(self.burst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_read_as_tc_reads_them_and_zero_or_nonsense_is_refused() {
        let r = |s: &str| s.parse::<Rate>().map(|r| r.bytes_per_s);
        assert_eq!(r("1gbit"), Ok(125e6));
        assert_eq!(r("500Mbit"), Ok(62.5e6));
        assert_eq!(r("125mbps"), Ok(125e6));
        assert_eq!(r("8000"), Ok(1000.0));
        assert_eq!(r("1mibit"), Ok(1024.0 * 1024.0 / 8.0));
        assert!(matches!(r("0gbit"), Err(RateError::Zero(_))));
        assert!(matches!(r("fast"), Err(RateError::Unreadable(_))));
        assert!(matches!(r("10furlongs"), Err(RateError::Unreadable(_))));
        let e = "0mbit".parse::<Rate>().expect_err("zero");
        assert!(e.to_string().contains("give a rate above 0"), "{e}");
        assert_eq!(
            "1gbit".parse::<Rate>().map(|r| r.to_string()),
            Ok("1Gbit".into())
        );
        assert_eq!(
            "250mbit".parse::<Rate>().map(|r| r.to_string()),
            Ok("250Mbit".into())
        );
    }

    /// Over a simulated second of sends in 64 KiB pieces, the bucket lets through its rate
    /// plus the one burst it started full with, never more.
    #[test]
    fn a_second_of_sends_moves_the_rate_plus_one_burst() {
        let t0 = Instant::now();
        let rate: Rate = "800mbit".parse().expect("rate");
        let burst = 256 << 10;
        let mut p = Pacer::new(rate, burst, t0);
        let (mut now, mut sent) = (t0, 0usize);
        while now < t0 + Duration::from_secs(1) {
            let n = p.take(64 << 10, now);
            sent += n;
            if n == 0 {
                now += p.wait(64 << 10, now).max(Duration::from_micros(1));
            }
        }
        let expected = rate.bytes_per_s + burst as f64;
        assert!((sent as f64) <= expected, "{sent} > {expected}");
        assert!((sent as f64) > 0.99 * rate.bytes_per_s, "{sent}");
        assert_eq!(p.wait(1, now + Duration::from_secs(1)), Duration::ZERO);
    }

    #[test]
    fn shapes_read_and_write_back_and_bad_pairs_are_named() {
        let s = parse_shapes("eth0=200mbit, eth1=1gbit").expect("shapes");
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].iface, "eth0");
        assert_eq!(s[0].rate.bytes_per_s, 25e6);
        assert_eq!(shapes_env(&s), "eth0=200Mbit,eth1=1Gbit");
        assert_eq!(parse_shapes(&shapes_env(&s)), Ok(s));
        assert_eq!(parse_shapes("eth0"), Err(ShapeError::Pair("eth0".into())));
        let e = parse_shapes("eth0=0mbit").expect_err("zero");
        assert!(e.to_string().contains("above 0"), "{e}");
        assert_eq!(parse_shapes(""), Ok(Vec::new()));
    }

    #[test]
    fn bytes_taken_and_not_sent_go_back_to_the_bucket() {
        let t0 = Instant::now();
        let mut p = Pacer::new("8mbit".parse().expect("rate"), 1000, t0);
        assert_eq!(p.take(600, t0), 600);
        p.give_back(200);
        assert_eq!(p.take(1000, t0), 600);
        p.give_back(5000);
        assert_eq!(p.take(5000, t0), 1000, "never more than a burst");
    }
}
