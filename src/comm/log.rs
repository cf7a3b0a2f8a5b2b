//! Log lines shaped like NCCL's, so what a learner reads here is what they will read on a
//! cluster: `host:pid:tid [dev] NCCL INFO Bootstrap: Using eth0:10.0.0.1<0>`. `NCCL_DEBUG`
//! (VERSION, WARN, INFO, TRACE) sets the level, as in NCCL; lines go to stderr.

use std::io::Write;
use std::sync::OnceLock;

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
        msg
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
}
