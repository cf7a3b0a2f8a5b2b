//! The emulated NCCL's log: every line is written through [`crate::nccl_log`], as the release
//! this process imitates writes it (`host:pid:tid [dev] NCCL INFO Bootstrap: Using eth0:…`;
//! a WARN with its empty first line, its source place and, from 2.26, a timestamp).
//! `NCCL_DEBUG` (VERSION, WARN, INFO, TRACE) sets the level and `NCCL_DEBUG_SUBSYS` the
//! subsystems, as in NCCL; lines go to stderr.
//!
//! The release is `RINGLAB_NCCL_VERSION` (any 2.x.y from 2.7 to 2.28; it behaves as the
//! nearest [`Profile`]); `lab run --nccl-version` sets it for the ranks. Unset: 2.28.9.

use std::io::Write;
use std::sync::OnceLock;

pub use crate::nccl_log::Level;
use crate::nccl_log::{self, Msg, Profile, Release, ReleaseError, Site, Writer};

/// The variable that names the NCCL release ringlab's emulated NCCL imitates.
pub const VERSION_ENV: &str = "RINGLAB_NCCL_VERSION";
/// The host name a rank's lines carry on the emulated cluster (each node its own, as on a
/// real one); in a namespace node the node's own UTS namespace gives it.
pub const HOSTNAME_ENV: &str = "RINGLAB_HOSTNAME";

/// The release named in [`VERSION_ENV`] is not one.
#[derive(Debug, thiserror::Error)]
#[error("{VERSION_ENV}: {0}")]
pub struct BadReleaseEnv(pub ReleaseError);

/// The release this process imitates, from the environment: (asked, profile). A bad value
/// is an error naming the variable.
pub fn release_from_env() -> Result<(Release, Profile), BadReleaseEnv> {
    if let Ok(v) = std::env::var(VERSION_ENV)
        && !v.trim().is_empty()
    {
        let r = Release::parse(&v).map_err(BadReleaseEnv)?;
        return Ok((r, Profile::nearest(r)));
    }
    Ok((Profile::NEWEST.release, Profile::NEWEST))
}

/// This process's release and profile, read once. A bad value is reported once on stderr,
/// naming the variable, and the newest profile is used.
fn chosen() -> (Release, Profile) {
    static P: OnceLock<(Release, Profile)> = OnceLock::new();
    *P.get_or_init(|| {
        release_from_env().unwrap_or_else(|e| {
            let _ = writeln!(
                std::io::stderr().lock(),
                "ringlab: warning: {e}; imitating NCCL {}",
                Profile::NEWEST
            );
            (Profile::NEWEST.release, Profile::NEWEST)
        })
    })
}

/// The profile this process's emulated NCCL behaves as.
pub fn profile() -> Profile {
    chosen().1
}

/// The CUDA the emulated banner names (`+cuda12.8`): the driver API cudarc is bound to here
/// (Cargo.toml, feature cuda-12080). The emulation runs no CUDA.
const BANNER_CUDA: &str = "cuda12.8";

/// The banner each rank prints at init, where the release prints it: bare (`NCCL version …`,
/// NCCL_DEBUG=VERSION, and up to 2.21 at INFO too) or as an INFO line (2.22+).
pub fn banner() {
    let Some(l) = LOGGER.get() else { return };
    let Some(have) = l.level else { return };
    let msg = Msg::Version {
        version: format!("{}+{BANNER_CUDA}", chosen().0),
    };
    let level = if l.profile.banner_is_info_line() && have >= Level::Info {
        Level::Info
    } else {
        Level::Version
    };
    write(level, ("init.cc", 0), &msg);
}

/// NCCL_DEBUG's values (case-insensitive); anything else is None, as NCCL ignores it.
pub fn parse_level(s: &str) -> Option<Level> {
    match s.to_ascii_uppercase().as_str() {
        "VERSION" => Some(Level::Version),
        "WARN" => Some(Level::Warn),
        "INFO" => Some(Level::Info),
        "TRACE" => Some(Level::Trace),
        _ => None,
    }
}

/// The levels that carry a timestamp: NCCL_DEBUG_TIMESTAMP_LEVELS (names, `^` inverts, ALL),
/// by default WARN from 2.26 and none before (the variable came in 2.26: src/debug.cc).
fn stamped_levels(p: Profile, spec: Option<&str>) -> Vec<Level> {
    if !p.timestamps_warn() {
        return Vec::new();
    }
    let all = [Level::Version, Level::Warn, Level::Info, Level::Trace];
    let Some(spec) = spec else {
        return vec![Level::Warn];
    };
    let (invert, list) = match spec.strip_prefix('^') {
        Some(r) => (true, r),
        None => (false, spec),
    };
    let named: Vec<Level> = list
        .split(',')
        .flat_map(|n| {
            if n.trim().eq_ignore_ascii_case("ALL") {
                all.to_vec()
            } else {
                parse_level(n.trim()).into_iter().collect()
            }
        })
        .collect();
    all.into_iter()
        .filter(|l| named.contains(l) != invert)
        .collect()
}

struct Logger {
    level: Option<Level>,
    mask: u64,
    stamped: Vec<Level>,
    writer: Writer,
    profile: Profile,
}

static LOGGER: OnceLock<Logger> = OnceLock::new();

/// This machine's host name as NCCL shows it (up to the first '.'), or the emulated node's.
pub fn hostname() -> String {
    if let Ok(h) = std::env::var(HOSTNAME_ENV)
        && !h.trim().is_empty()
    {
        return h.trim().to_string();
    }
    let Ok(full) = nix::unistd::gethostname() else {
        return "localhost".into();
    };
    let full = full.to_string_lossy();
    full.split('.').next().unwrap_or("localhost").to_string()
}

fn tid() -> u32 {
    nix::unistd::gettid().as_raw() as u32
}

/// Set up logging for this process from NCCL_DEBUG and NCCL_DEBUG_SUBSYS; `dev` is the local
/// rank (NCCL's `[dev]`).
pub fn init(dev: usize) {
    let p = profile();
    let level = std::env::var("NCCL_DEBUG")
        .ok()
        .and_then(|v| parse_level(&v));
    let mask = std::env::var("NCCL_DEBUG_SUBSYS")
        .ok()
        .map_or(p.default_subsys(), |s| nccl_log::subsys::parse(&s));
    let stamps = std::env::var("NCCL_DEBUG_TIMESTAMP_LEVELS").ok();
    let _ = LOGGER.set(Logger {
        level,
        mask,
        stamped: stamped_levels(p, stamps.as_deref()),
        writer: Writer {
            host: hostname(),
            pid: std::process::id(),
            tid: 0,
            dev: dev as i32,
        },
        profile: p,
    });
}

pub fn enabled(level: Level) -> bool {
    LOGGER
        .get()
        .is_some_and(|l| l.level.is_some_and(|have| have >= level))
}

fn write(level: Level, place: (&str, u32), msg: &Msg) {
    let Some(l) = LOGGER.get() else { return };
    if l.level.is_none_or(|have| have < level) {
        return;
    }
    if level >= Level::Info && msg.subsys(l.profile) & l.mask == 0 {
        return;
    }
    let ts = l
        .stamped
        .contains(&level)
        .then(|| chrono::Local::now().format("[%F %T]").to_string());
    let mut w = l.writer.clone();
    w.tid = tid();
    let mut line = w.line(l.profile, level, place, ts.as_deref(), msg);
    line.push('\n');
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

/// A line the emulated NCCL writes where NCCL does, its place (for a WARN) NCCL's own at the
/// profile's tag.
pub fn nccl(level: Level, site: Option<Site>, msg: &Msg) {
    let place = site.map_or(("init.cc", 0), |s| profile().site(s));
    write(level, place, msg);
}

/// ringlab's own place in its source, as NCCL gives `__FILE__:__LINE__` (`comm/tcp.rs:105`).
fn own_place(loc: &'static std::panic::Location<'static>) -> (&'static str, u32) {
    let file: &'static str = loc.file();
    (file.strip_prefix("src/").unwrap_or(file), loc.line())
}

/// An INFO line in NCCL's shape (`msg` typed through the grammar).
#[track_caller]
pub fn info_msg(msg: &Msg) {
    write(Level::Info, own_place(std::panic::Location::caller()), msg);
}

/// An INFO line of ringlab's own text.
#[track_caller]
pub fn info(text: &str) {
    write(
        Level::Info,
        own_place(std::panic::Location::caller()),
        &Msg::Other(text.to_string()),
    );
}

/// A WARN of ringlab's own, its place ringlab's source (`comm/tcp.rs:105`), as NCCL's WARN
/// carries its own file:line.
#[track_caller]
pub fn warn(text: &str) {
    write(
        Level::Warn,
        own_place(std::panic::Location::caller()),
        &Msg::Other(text.to_string()),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nccl_debug_levels_parse_like_nccl() {
        assert_eq!(parse_level("info"), Some(Level::Info));
        assert_eq!(parse_level("TRACE"), Some(Level::Trace));
        assert_eq!(parse_level("bogus"), None);
        assert!(Level::Trace > Level::Info && Level::Info > Level::Warn);
    }

    #[test]
    fn timestamps_follow_the_release_and_the_variable() {
        assert!(stamped_levels(Profile::V2_24, None).is_empty());
        assert_eq!(stamped_levels(Profile::NEWEST, None), vec![Level::Warn]);
        assert_eq!(
            stamped_levels(Profile::NEWEST, Some("INFO,WARN")),
            vec![Level::Warn, Level::Info]
        );
        assert_eq!(
            stamped_levels(Profile::NEWEST, Some("^WARN")),
            vec![Level::Version, Level::Info, Level::Trace]
        );
        assert!(stamped_levels(Profile::V2_24, Some("ALL")).is_empty());
    }

    #[test]
    fn own_places_are_relative_to_src() {
        let here = std::panic::Location::caller();
        let (file, line) = own_place(here);
        assert!(!file.starts_with("src/") && file.ends_with(".rs"), "{file}");
        assert!(line > 0);
    }
}
