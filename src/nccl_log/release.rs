//! NCCL releases and the profiles ringlab models: which shape each release gives a log line,
//! how it retries a connect, which interfaces it prefers, where in its source each WARN sits.
//!
//! A profile is one tagged release read line by line in NVIDIA/nccl. Every other release
//! behaves as the newest profile not newer than it (the behaviours below change at a release,
//! never inside one), so `2.25.1` behaves as `2.24.3` and says so.
//!
//! What changes, and where it was read (all in NVIDIA/nccl):
//!
//! | what | ≤ 2.7 | 2.8–2.22 | 2.23 | 2.24–2.25 | 2.26 | 2.27 | 2.28 |
//! |---|---|---|---|---|---|---|---|
//! | bootstrap line (src/bootstrap.cc) | `Bootstrap : Using [0]eth0:…` | `Bootstrap : Using eth0:…` | same | `Bootstrap: Using eth0:…` | same | same | same |
//! | connect retry (src/misc/socket.cc; ≤2.7 src/include/socket.h) | 20 000 × 1 ms, INFO every 1000 | same | same | 34 tries, sleep 100 ms × k, INFO each, no address | same | with `connect to ADDR` | same |
//! | WARN timestamp (src/debug.cc, NCCL_DEBUG_TIMESTAMP_LEVELS) | no | no | no | no | `[%F %T] ` | same | same |
//! | default NCCL_DEBUG_SUBSYS (src/debug.cc; INIT to 2.16, INIT,ENV from 2.17: v2.16.2-1, v2.17.1-1) | INIT | INIT to 2.16, then INIT,ENV | INIT,BOOTSTRAP,ENV | same | same | same | same |
//! | interface filter (src/misc/socket.cc) | docker*, lo last | same | same | same | same | same | also virbr*; IFF_RUNNING only |
//! | banner at INFO (src/init.cc showVersion) | bare on stdout | bare to 2.21, an INFO line from 2.22 | INFO line | same | same | same | same |
//!
//! Every WARN line carries `__FILE__:__LINE__` (src/include/debug.h); [`Site`] gives each
//! message's place at each profile's tag.

use std::fmt;

/// An NCCL release: 2.minor.patch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Release {
    pub minor: u32,
    pub patch: u32,
}

impl fmt::Display for Release {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "2.{}.{}", self.minor, self.patch)
    }
}

/// The releases `--nccl-version` takes, in words (for error messages).
pub const SUPPORTED: &str = "2.7.0 to 2.28.x";

/// A version string that names no release ringlab can model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{value:?} is not an NCCL release ringlab models: give 2.MINOR or 2.MINOR.PATCH from {SUPPORTED} (for example 2.21.5 or 2.28.9)"
)]
pub struct ReleaseError {
    pub value: String,
}

impl Release {
    pub const fn new(minor: u32, patch: u32) -> Self {
        Self { minor, patch }
    }

    /// `2.21`, `2.21.5`, `v2.21.5-1`, `2.21.5+cuda12.4`: any 2.x.y from 2.7 to 2.28.
    pub fn parse(s: &str) -> Result<Self, ReleaseError> {
        let err = || ReleaseError {
            value: s.to_string(),
        };
        let t = s.trim();
        let t = t.strip_prefix('v').unwrap_or(t);
        let core = t.split(['-', '+']).next().unwrap_or("");
        let mut parts = core.split('.');
        if parts.next() != Some("2") {
            return Err(err());
        }
        let num = |p: Option<&str>| -> Result<Option<u32>, ReleaseError> {
            match p {
                None => Ok(None),
                Some(p)
                    if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) && p.len() <= 4 =>
                {
                    p.parse().map(Some).map_err(|_| err())
                }
                Some(_) => Err(err()),
            }
        };
        let minor = num(parts.next())?.ok_or_else(err)?;
        let patch = num(parts.next())?.unwrap_or(0);
        if parts.next().is_some() || !(7..=28).contains(&minor) {
            return Err(err());
        }
        Ok(Self { minor, patch })
    }
}

/// A modelled release: one tag of NVIDIA/nccl, read for every behaviour below.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Profile {
    pub release: Release,
}

/// The profiles, oldest first. Each is the tag its behaviours were read at.
pub const PROFILES: [Profile; 7] = [
    Profile::at(7, 8),
    Profile::at(21, 5),
    Profile::at(23, 4),
    Profile::at(24, 3),
    Profile::at(26, 6),
    Profile::at(27, 7),
    Profile::at(28, 9),
];

/// How a release retries a failed connect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryPolicy {
    /// ≤ 2.23: a refused connect retried 20 000 times 1 ms apart, a timed-out one 3 times;
    /// `Call to connect returned …, retrying` once per 1000 refusals.
    Legacy,
    /// 2.24–2.26: NCCL_SOCKET_RETRY_CNT (34) tries, sleeping NCCL_SOCKET_RETRY_SLEEP_MSEC × k,
    /// each logged `socketPollConnect: connect returned …, retrying (k/34) …`.
    Counted,
    /// 2.27+: as Counted, the line naming the address (`connect to ADDR<port> returned …`).
    CountedWithAddress,
}

/// The bootstrap line's shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BootstrapShape {
    /// ≤ 2.7: `Bootstrap : Using [0]eth0:10.0.0.1<0>`.
    Indexed,
    /// 2.8–2.23: `Bootstrap : Using eth0:10.0.0.1<0>`.
    Spaced,
    /// 2.24+: `Bootstrap: Using eth0:10.0.0.1<0>`.
    Tight,
}

/// A WARN message ringlab's emulation prints, for looking up its place in NCCL's source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Site {
    NoSocketInterface,
    /// The dialler gave up after refusals (≤ 2.23: `exceeded retries`), or after the counted
    /// tries (2.24+).
    RetriesExceeded,
    /// ≤ 2.23: gave up after timeouts (`exceeded timeouts`).
    TimeoutsExceeded,
    /// A connect error that is not retried.
    ConnectFailed,
    /// /dev/shm could not be grown to a segment's size.
    ShmFailed,
}

impl Profile {
    pub const fn at(minor: u32, patch: u32) -> Self {
        Self {
            release: Release::new(minor, patch),
        }
    }

    pub const V2_21: Profile = Profile::at(21, 5);
    pub const V2_24: Profile = Profile::at(24, 3);
    pub const V2_27: Profile = Profile::at(27, 7);
    /// The newest modelled, and the default where the machine has no NCCL.
    pub const NEWEST: Profile = Profile::at(28, 9);

    /// The profile `r` behaves as: the newest profile not newer than it (2.7.0–2.7.7 behave as
    /// 2.7.8, the oldest).
    pub fn nearest(r: Release) -> Profile {
        PROFILES
            .iter()
            .rev()
            .find(|p| p.release <= r)
            .copied()
            .unwrap_or(PROFILES[0])
    }

    /// From any version string `Release::parse` takes.
    pub fn parse(s: &str) -> Result<Profile, ReleaseError> {
        Release::parse(s).map(Profile::nearest)
    }

    pub fn minor(self) -> u32 {
        self.release.minor
    }

    /// The tag of NVIDIA/nccl this profile was read at: `v2.28.9-1`.
    pub fn tag(self) -> String {
        format!("v{}-1", self.release)
    }

    pub fn bootstrap_shape(self) -> BootstrapShape {
        match self.minor() {
            ..=7 => BootstrapShape::Indexed,
            8..=23 => BootstrapShape::Spaced,
            _ => BootstrapShape::Tight,
        }
    }

    pub fn retry_policy(self) -> RetryPolicy {
        match self.minor() {
            ..=23 => RetryPolicy::Legacy,
            24..=26 => RetryPolicy::Counted,
            _ => RetryPolicy::CountedWithAddress,
        }
    }

    /// From 2.26 WARN lines start with `[%F %T] ` by default (NCCL_DEBUG_TIMESTAMP_LEVELS).
    pub fn timestamps_warn(self) -> bool {
        self.minor() >= 26
    }

    /// From 2.28: virbr* is excluded from the first choice and only running interfaces count.
    pub fn virbr_last_and_running_only(self) -> bool {
        self.minor() >= 28
    }

    /// The default NCCL_DEBUG_SUBSYS mask.
    pub fn default_subsys(self) -> u64 {
        use super::subsys::*;
        match self.minor() {
            ..=16 => INIT,
            17..=22 => INIT | ENV,
            _ => INIT | BOOTSTRAP | ENV,
        }
    }

    /// The default NCCL_DEBUG_SUBSYS, in NCCL's words (the tests hold it to the mask).
    #[cfg(test)]
    pub fn default_subsys_names(self) -> &'static str {
        match self.minor() {
            ..=16 => "INIT",
            17..=22 => "INIT,ENV",
            _ => "INIT,BOOTSTRAP,ENV",
        }
    }

    /// From 2.22 ring, tree and NVLS connections are made at the first collective that uses
    /// them (`NCCL_RUNTIME_CONNECT`, default 1, where every rank has cuMem), so their
    /// `Channel … via …` lines come after `Init COMPLETE`; up to 2.21 they come during init
    /// (src/init.cc at v2.22.3-1, `comm->runtimeConn`, against v2.21.5-1).
    pub fn runtime_connect(self) -> bool {
        self.minor() >= 22
    }

    /// Up to 2.21 the banner is printed bare, on stdout (printf); from 2.22 at NCCL_DEBUG=INFO
    /// it is an INFO line like the others (src/init.cc showVersion at v2.21.5-1 vs v2.22.3-1).
    pub fn banner_is_info_line(self) -> bool {
        self.minor() >= 22
    }

    /// Where `site` is in this profile's source: (file under src/, line).
    pub fn site(self, site: Site) -> (&'static str, u32) {
        // Columns: the profiles, oldest first (v2.7.8-1 … v2.28.9-1), read with
        // `git show TAG:FILE | grep -n`.
        const SOCKET: &str = "misc/socket.cc";
        let i = PROFILES.iter().position(|p| *p == self).unwrap_or(6);
        match site {
            Site::NoSocketInterface => ("bootstrap.cc", [32, 48, 111, 112, 112, 115, 114][i]),
            Site::RetriesExceeded | Site::ConnectFailed if i == 0 => ("include/socket.h", 403),
            Site::RetriesExceeded => (SOCKET, [403, 516, 518, 543, 544, 578, 582][i]),
            Site::TimeoutsExceeded => (
                if i == 0 { "include/socket.h" } else { SOCKET },
                [403, 525, 527, 543, 544, 578, 582][i],
            ),
            Site::ConnectFailed => (SOCKET, [403, 484, 485, 555, 556, 592, 596][i]),
            Site::ShmFailed if i == 0 => ("include/shm.h", 48),
            Site::ShmFailed => ("misc/shmutils.cc", [48, 72, 87, 87, 87, 87, 87][i]),
        }
    }

    /// This profile, and the asked release when it is not the profile's own:
    /// `NCCL 2.25.1, behaving as 2.24.3 (the newest release ringlab models up to it)`.
    pub fn describe(self, asked: Release) -> String {
        if asked == self.release {
            format!("NCCL {asked}")
        } else {
            format!(
                "NCCL {asked}, behaving as {} (the newest release ringlab models up to it)",
                self.release
            )
        }
    }
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.release.fmt(f)
    }
}

/// An NCCL release range by minor version, as the doctor infers it from a line's shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Releases {
    pub lo: u32,
    pub hi: u32,
}

impl Releases {
    pub const OPEN: u32 = u32::MAX;
    pub const fn new(lo: u32, hi: u32) -> Self {
        Self { lo, hi }
    }
    pub fn meet(self, o: Self) -> Option<Self> {
        let r = Self::new(self.lo.max(o.lo), self.hi.min(o.hi));
        (r.lo <= r.hi).then_some(r)
    }
    pub fn contains(self, minor: u32) -> bool {
        (self.lo..=self.hi).contains(&minor)
    }
}

impl fmt::Display for Releases {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.lo, self.hi) {
            (lo, hi) if lo == hi => write!(f, "NCCL 2.{lo}"),
            (0, hi) => write!(f, "NCCL 2.{hi} or earlier"),
            (lo, Self::OPEN) => write!(f, "NCCL 2.{lo} or later"),
            (lo, hi) => write!(f, "NCCL 2.{lo}-2.{hi}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_and_bad_ones_name_the_range() {
        assert_eq!(Release::parse("2.21.5"), Ok(Release::new(21, 5)));
        assert_eq!(Release::parse("v2.26.6-1"), Ok(Release::new(26, 6)));
        assert_eq!(Release::parse("2.21.5+cuda12.4"), Ok(Release::new(21, 5)));
        assert_eq!(Release::parse(" 2.27 "), Ok(Release::new(27, 0)));
        for bad in [
            "", "abc", "3.0", "2", "2.x", "2.6.1", "2.29.1", "2.21.5.1", "2.21.x", "2.100",
        ] {
            let e = Release::parse(bad).expect_err(bad).to_string();
            assert!(e.contains(SUPPORTED), "{e}");
        }
    }

    #[test]
    fn a_release_behaves_as_the_newest_profile_not_newer_than_it() {
        let p = |s: &str| Profile::parse(s).unwrap().release;
        assert_eq!(p("2.21.5"), Release::new(21, 5));
        assert_eq!(p("2.22.3"), Release::new(21, 5));
        assert_eq!(p("2.25.1"), Release::new(24, 3));
        assert_eq!(p("2.28.3"), Release::new(27, 7));
        assert_eq!(p("2.28.9"), Release::new(28, 9));
        assert_eq!(p("2.28.20"), Release::new(28, 9));
        assert_eq!(p("2.7.1"), Release::new(7, 8));
        let asked = Release::new(25, 1);
        let d = Profile::nearest(asked).describe(asked);
        assert!(d.contains("2.25.1") && d.contains("2.24.3"), "{d}");
    }

    #[test]
    fn each_behaviour_changes_where_the_source_does() {
        let m = |minor| Profile::nearest(Release::new(minor, 99));
        assert_eq!(m(7).bootstrap_shape(), BootstrapShape::Indexed);
        assert_eq!(m(23).bootstrap_shape(), BootstrapShape::Spaced);
        assert_eq!(m(24).bootstrap_shape(), BootstrapShape::Tight);
        assert_eq!(m(23).retry_policy(), RetryPolicy::Legacy);
        assert_eq!(m(26).retry_policy(), RetryPolicy::Counted);
        assert_eq!(m(27).retry_policy(), RetryPolicy::CountedWithAddress);
        assert!(!m(25).timestamps_warn() && m(26).timestamps_warn());
        assert!(!m(27).virbr_last_and_running_only() && m(28).virbr_last_and_running_only());
        assert_eq!(m(22).default_subsys_names(), "INIT,ENV");
        // INIT alone to 2.16, INIT,ENV from 2.17 (src/debug.cc at v2.16.2-1 and v2.17.1-1).
        assert_eq!(Profile::at(17, 1).default_subsys_names(), "INIT,ENV");
        assert_eq!(Profile::at(16, 2).default_subsys_names(), "INIT");
        assert_eq!(m(23).default_subsys_names(), "INIT,BOOTSTRAP,ENV");
        assert_eq!(
            Profile::NEWEST.site(Site::RetriesExceeded),
            ("misc/socket.cc", 582)
        );
        assert_eq!(
            Profile::V2_21.site(Site::ShmFailed),
            ("misc/shmutils.cc", 72)
        );
        assert_eq!(Profile::NEWEST.tag(), "v2.28.9-1");
    }
}
