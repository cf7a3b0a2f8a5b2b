//! Log lines shaped like NCCL's, so what a learner reads here is what they will read on a
//! cluster: `host:pid:tid [dev] NCCL INFO Bootstrap: Using eth0:10.0.0.1<0>`. `NCCL_DEBUG`
//! (VERSION, WARN, INFO, TRACE) sets the level, as in NCCL; lines go to stderr.
//!
//! Which NCCL release the lines and the socket behaviour imitate is [`Style`], chosen with
//! `RINGLAB_NCCL_STYLE` (`2.21`, `2.27`, `2.28`; default the newest, 2.28).

use std::borrow::Cow;
use std::io::Write;
use std::sync::OnceLock;

/// The variable that picks the NCCL release whose log lines and socket behaviour ringlab's
/// TCP backend imitates.
pub const STYLE_ENV: &str = "RINGLAB_NCCL_STYLE";

/// The NCCL release (2.minor) whose log shapes and socket behaviour to imitate. What changes
/// between releases, each checked in NVIDIA/nccl at the tags named:
/// - the bootstrap line: `Bootstrap : Using [0]eth0:…` up to 2.7 (src/bootstrap.cc@v2.7.8-1),
///   `Bootstrap : Using eth0:10.0.0.1<0>` 2.8–2.23 (@v2.8.3-1, @v2.23.4-1), `Bootstrap: Using …`
///   from 2.24 (@v2.24.3-1);
/// - connect retries ([`RetryForm`]): up to 2.23 a refused connect is retried 20 000 × 1 ms
///   and logged once per 1000 attempts (src/include/socket.h, src/misc/socket.cc@v2.21.5-1);
///   from 2.24, NCCL_SOCKET_RETRY_CNT (34) tries with a linearly growing sleep, logged each
///   time, without the address up to 2.26 and with it from 2.27 (src/misc/socket.cc@v2.24.3-1,
///   @v2.27.3-1);
/// - interface choice: from 2.28 virbr* is excluded by default and only running (IFF_RUNNING)
///   interfaces count (src/misc/socket.cc@v2.27.3-1 vs @v2.28.3-1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Style {
    minor: u32,
}

/// How a release retries and logs a failed connect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryForm {
    /// NCCL ≤ 2.23: `Call to connect returned Connection refused, retrying`.
    Legacy,
    /// NCCL 2.24–2.26: `socketPollConnect: connect returned …, retrying (k/34) …`.
    Counted,
    /// NCCL ≥ 2.27: `socketPollConnect: connect to ADDR returned …, retrying (k/34) …`.
    CountedWithAddress,
}

/// A `RINGLAB_NCCL_STYLE` value that names no NCCL release ringlab can imitate.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{STYLE_ENV}={value:?} is not an NCCL release ringlab can imitate: use 2.21, 2.27 or 2.28 (any 2.N from 2.8 on is accepted)"
)]
pub struct StyleError {
    pub value: String,
}

impl Style {
    /// The newest release modelled, and the default.
    pub const NEWEST: Style = Style { minor: 28 };
    pub const V2_21: Style = Style { minor: 21 };
    pub const V2_27: Style = Style { minor: 27 };

    /// `2.21`, `2.27`, `2.28`, or any `2.N`, `2.N.P`, `2.N.P-R` with N ≥ 8.
    pub fn parse(s: &str) -> Result<Self, StyleError> {
        let err = || StyleError {
            value: s.to_string(),
        };
        let t = s.trim();
        let t = t.strip_prefix('v').unwrap_or(t);
        let core = t.split(['-', '+']).next().unwrap_or("");
        let mut parts = core.split('.');
        let (Some("2"), Some(minor)) = (parts.next(), parts.next()) else {
            return Err(err());
        };
        let minor: u32 = minor.parse().map_err(|_| err())?;
        if parts.any(|p| p.parse::<u32>().is_err()) || !(8..=99).contains(&minor) {
            return Err(err());
        }
        Ok(Self { minor })
    }

    /// From `RINGLAB_NCCL_STYLE`: unset or empty is the newest; a bad value is an error that
    /// names the variable.
    pub fn from_env() -> Result<Self, StyleError> {
        match std::env::var(STYLE_ENV) {
            Ok(v) if !v.trim().is_empty() => Self::parse(&v),
            _ => Ok(Self::NEWEST),
        }
    }

    /// The minor version: 21 for NCCL 2.21.
    pub fn minor(self) -> u32 {
        self.minor
    }

    pub fn retry_form(self) -> RetryForm {
        match self.minor {
            ..=23 => RetryForm::Legacy,
            24..=26 => RetryForm::Counted,
            _ => RetryForm::CountedWithAddress,
        }
    }

    /// From 2.28: virbr* is excluded from the first choice and only running interfaces count.
    pub fn virbr_last_and_running_only(self) -> bool {
        self.minor >= 28
    }

    /// The bootstrap interface line, `shown` being `eth0:10.0.0.1<0>`.
    pub fn bootstrap_using(self, shown: &str) -> String {
        match self.minor {
            ..=7 => format!("Bootstrap : Using [0]{shown}"),
            8..=23 => format!("Bootstrap : Using {shown}"),
            _ => format!("Bootstrap: Using {shown}"),
        }
    }

    /// A message written in the newest form, as this release prints it: callers write
    /// `Bootstrap: Using …` and a 2.21 style shows `Bootstrap : Using …`.
    pub fn render(self, msg: &str) -> Cow<'_, str> {
        match msg.strip_prefix("Bootstrap: Using ") {
            Some(shown) if self != Self::NEWEST => Cow::Owned(self.bootstrap_using(shown)),
            _ => Cow::Borrowed(msg),
        }
    }
}

impl std::fmt::Display for Style {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "2.{}", self.minor)
    }
}

/// This process's style, read once from `RINGLAB_NCCL_STYLE`. A bad value is reported once on
/// stderr, naming the variable, and the newest style is used.
pub fn style() -> Style {
    static STYLE: OnceLock<Style> = OnceLock::new();
    *STYLE.get_or_init(|| {
        Style::from_env().unwrap_or_else(|e| {
            let _ = writeln!(
                std::io::stderr().lock(),
                "ringlab: warning: {e}; imitating NCCL {}",
                Style::NEWEST
            );
            Style::NEWEST
        })
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    None,
    Version,
    Warn,
    Info,
    Trace,
}

impl Level {
    /// NCCL_DEBUG's values (case-insensitive); anything else is None, as NCCL ignores it.
    pub fn parse(s: &str) -> Self {
        match s.to_ascii_uppercase().as_str() {
            "VERSION" => Self::Version,
            "WARN" => Self::Warn,
            "INFO" => Self::Info,
            "TRACE" => Self::Trace,
            _ => Self::None,
        }
    }
    fn tag(self) -> &'static str {
        match self {
            Self::Warn => "WARN",
            Self::Trace => "TRACE",
            _ => "INFO",
        }
    }
}

struct Logger {
    level: Level,
    prefix: String,
    dev: usize,
}

static LOGGER: OnceLock<Logger> = OnceLock::new();

pub fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most buf.len() bytes into buf.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "localhost".into();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

fn tid() -> i64 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::syscall(libc::SYS_gettid) }
}

/// Set up logging for this process from NCCL_DEBUG; `dev` is the local rank (NCCL's `[dev]`).
pub fn init(dev: usize) {
    let level = std::env::var("NCCL_DEBUG").map_or(Level::None, |v| Level::parse(&v));
    let _ = LOGGER.set(Logger {
        level,
        prefix: format!("{}:{}", hostname(), std::process::id()),
        dev,
    });
}

pub fn enabled(level: Level) -> bool {
    LOGGER.get().is_some_and(|l| l.level >= level)
}

/// One log line, NCCL-shaped, when `level` is enabled.
pub fn log(level: Level, msg: &str) {
    let Some(l) = LOGGER.get() else { return };
    if l.level < level {
        return;
    }
    let line = format!(
        "{}:{} [{}] NCCL {} {}\n",
        l.prefix,
        tid(),
        l.dev,
        level.tag(),
        style().render(msg)
    );
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

pub fn info(msg: &str) {
    log(Level::Info, msg);
}
pub fn warn(msg: &str) {
    log(Level::Warn, msg);
}
pub fn trace(msg: &str) {
    log(Level::Trace, msg);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nccl_debug_levels_parse_like_nccl() {
        assert_eq!(Level::parse("info"), Level::Info);
        assert_eq!(Level::parse("TRACE"), Level::Trace);
        assert_eq!(Level::parse("bogus"), Level::None);
        assert!(Level::Trace > Level::Info && Level::Info > Level::Warn);
    }

    #[test]
    fn style_parses_the_releases_and_rejects_the_rest() {
        assert_eq!(Style::parse("2.21"), Ok(Style::V2_21));
        assert_eq!(Style::parse(" 2.27 "), Ok(Style::V2_27));
        assert_eq!(Style::parse("2.28"), Ok(Style::NEWEST));
        assert_eq!(Style::parse("2.21.5").map(Style::minor), Ok(21));
        assert_eq!(Style::parse("v2.26.6-1").map(Style::minor), Ok(26));
        assert_eq!(Style::parse("2.21.5+cuda12.4").map(Style::minor), Ok(21));
        for bad in ["", "newest", "2", "2.x", "3.1", "2.7", "2.21.x", "2.100"] {
            let e = Style::parse(bad).expect_err(bad);
            let msg = e.to_string();
            assert!(msg.contains("RINGLAB_NCCL_STYLE"), "{msg}");
            assert!(msg.contains("2.21, 2.27 or 2.28"), "{msg}");
        }
    }

    #[test]
    fn style_picks_the_forms_of_its_release() {
        assert_eq!(Style::V2_21.retry_form(), RetryForm::Legacy);
        assert_eq!(
            Style::parse("2.23").unwrap().retry_form(),
            RetryForm::Legacy
        );
        assert_eq!(
            Style::parse("2.24").unwrap().retry_form(),
            RetryForm::Counted
        );
        assert_eq!(
            Style::parse("2.26").unwrap().retry_form(),
            RetryForm::Counted
        );
        assert_eq!(Style::V2_27.retry_form(), RetryForm::CountedWithAddress);
        assert_eq!(Style::NEWEST.retry_form(), RetryForm::CountedWithAddress);
        assert!(!Style::V2_27.virbr_last_and_running_only());
        assert!(Style::NEWEST.virbr_last_and_running_only());
    }

    #[test]
    fn bootstrap_line_follows_the_release() {
        let shown = "eth0:10.0.0.1<0>";
        let msg = format!("Bootstrap: Using {shown}");
        assert_eq!(
            Style::V2_21.render(&msg),
            "Bootstrap : Using eth0:10.0.0.1<0>"
        );
        assert_eq!(
            Style::parse("2.8").unwrap().render(&msg),
            "Bootstrap : Using eth0:10.0.0.1<0>"
        );
        assert_eq!(
            Style::parse("2.24").unwrap().render(&msg),
            "Bootstrap: Using eth0:10.0.0.1<0>"
        );
        assert_eq!(Style::V2_27.render(&msg), msg);
        // The default keeps today's lines byte for byte.
        assert!(matches!(Style::NEWEST.render(&msg), Cow::Borrowed(m) if m == msg));
        assert_eq!(
            Style::V2_21.render("Using network Socket"),
            "Using network Socket"
        );
    }
}
