//! Socket plumbing shared by the store and the data connections: connecting with NCCL's retry
//! policy, each retry logged the way NCCL logs it, and socket tuning for bandwidth.
//!
//! The policy and its lines are the imitated release's ([`log::profile`], see
//! [`crate::nccl_log::release`]):
//! - ≤ 2.23 (src/misc/socket.cc@v2.21.5-1): a refused connect is retried every 1 ms, 20 000
//!   times (about 20 s), logged `Call to connect returned Connection refused, retrying` once
//!   per 1000 attempts; a timed-out one 3 times; any other error ends at once.
//! - 2.24 and later (@v2.24.3-1, @v2.27.7-1): NCCL_SOCKET_RETRY_CNT tries (34), sleeping
//!   NCCL_SOCKET_RETRY_SLEEP_MSEC × k (100 ms) before try k, about a minute in all, each an
//!   INFO line `socketPollConnect: connect [to ADDR] returned …, retrying (k/34) after sleep
//!   for … msec` (the address from 2.27); then a WARN and ncclRemoteError.

use std::io;
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use crate::comm::emu::log::{self, Level};
use crate::nccl_log::{self, GaveUp, Msg, Profile, Retry, RetryPolicy, Site};

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

/// A line NCCL prints at that point: its level, its place (for a WARN) and the message.
pub type Said = (Level, Option<Site>, Msg);

/// What to do after a failed connect attempt: sleep and try again, or give up; with the log
/// lines NCCL prints at that point.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    Retry { sleep: Duration, log: Vec<Said> },
    GiveUp { log: Vec<Said> },
}

/// The retry policy of one release, and its counters for one connect.
#[derive(Debug, Clone)]
pub struct Retrier {
    profile: Profile,
    /// NCCL_SOCKET_RETRY_CNT (2.24+).
    tries: u64,
    /// NCCL_SOCKET_RETRY_SLEEP_MSEC (2.24+).
    sleep_ms: u64,
    /// 2.24+: failed attempts so far. ≤ 2.23: refused attempts so far.
    errors: u64,
    /// ≤ 2.23: timed-out attempts so far.
    timeouts: u64,
}

/// NCCL ≤ 2.23: refused connects retried this many times, 1 ms apart (RETRY_REFUSED_TIMES).
pub const LEGACY_REFUSED_TRIES: u64 = 20_000;
/// NCCL ≤ 2.23: timed-out connects retried this many times (RETRY_TIMEDOUT_TIMES).
pub const LEGACY_TIMEDOUT_TRIES: u64 = 3;
/// NCCL ≤ 2.23: the sleep between attempts (SLEEP_INT, 1000 µs).
pub const LEGACY_SLEEP: Duration = Duration::from_millis(1);

/// The function NCCL names in its retry lines: a non-blocking connect reports a refusal
/// through poll (src/misc/socket.cc socketPollConnect).
const POLL: &str = "socketPollConnect";
/// The function that reports an error connect() itself returns.
const START: &str = "socketStartConnect";

/// NCCL's way of writing a socket address: `10.0.0.1<29500>`.
pub fn nccl_addr(addr: SocketAddr) -> String {
    nccl_log::addr(addr)
}

impl Retrier {
    /// The policy of `profile`, with NCCL_SOCKET_RETRY_CNT and NCCL_SOCKET_RETRY_SLEEP_MSEC as
    /// given (2.24+ reads them; ≤ 2.23 has neither).
    pub fn new(profile: Profile, tries: u64, sleep_ms: u64) -> Self {
        Self {
            profile,
            tries,
            sleep_ms,
            errors: 0,
            timeouts: 0,
        }
    }

    /// NCCL ≥ 2.24's schedule for `tries` and `sleep_ms`: the sleep before each try k is
    /// sleep_ms × k. Returns (the whole wait before NCCL gives up, tries made within `window`).
    /// Only tests ask (the hang lab's retries against its watchdog).
    #[cfg(test)]
    pub(crate) fn counted_schedule(tries: u64, sleep_ms: u64, window: Duration) -> (Duration, u64) {
        let total = Duration::from_millis(sleep_ms * tries * (tries + 1) / 2);
        let mut waited = 0u64;
        let within = (1..=tries)
            .take_while(|k| {
                waited += sleep_ms * k;
                Duration::from_millis(waited) <= window
            })
            .count() as u64;
        (total, within)
    }

    /// This process's policy: its profile and the two variables.
    pub fn from_env() -> Self {
        Self::new(
            log::profile(),
            env_num("NCCL_SOCKET_RETRY_CNT", 34),
            env_num("NCCL_SOCKET_RETRY_SLEEP_MSEC", 100),
        )
    }

    /// The attempt to `addr` failed with `e`.
    pub fn failed(&mut self, addr: SocketAddr, e: &io::Error) -> Step {
        use io::ErrorKind::*;
        let what = describe(e);
        let shown = nccl_addr(addr);
        let failed = |what: String| Step::GiveUp {
            log: vec![(
                Level::Warn,
                Some(Site::ConnectFailed),
                Msg::ConnectFailed {
                    func: START.into(),
                    addr: shown.clone(),
                    error: what,
                },
            )],
        };
        let gave_up = |site, attempts, timeouts, error: &str| Step::GiveUp {
            log: vec![(
                Level::Warn,
                Some(site),
                Msg::GaveUp(GaveUp {
                    func: POLL.into(),
                    addr: Some(shown.clone()),
                    error: Some(error.to_string()),
                    attempts,
                    timeouts,
                }),
            )],
        };
        if self.profile.retry_policy() == RetryPolicy::Legacy {
            let (count, limit, site, timeouts) = match e.kind() {
                ConnectionRefused => (
                    &mut self.errors,
                    LEGACY_REFUSED_TRIES,
                    Site::RetriesExceeded,
                    false,
                ),
                TimedOut => (
                    &mut self.timeouts,
                    LEGACY_TIMEDOUT_TRIES,
                    Site::TimeoutsExceeded,
                    true,
                ),
                _ => return failed(what),
            };
            *count += 1;
            if *count == limit {
                return gave_up(site, limit, timeouts, &what);
            }
            let log = if e.kind() == ConnectionRefused && *count % 1000 == 0 {
                vec![(
                    Level::Info,
                    None,
                    Msg::Retry(Retry {
                        func: None,
                        addr: None,
                        error: what,
                        count: None,
                        sleep_ms: None,
                    }),
                )]
            } else {
                Vec::new()
            };
            return Step::Retry {
                sleep: LEGACY_SLEEP,
                log,
            };
        }
        // 2.24-2.26: ETIMEDOUT, EHOSTUNREACH, ECONNREFUSED; 2.27 adds EINTR, EWOULDBLOCK,
        // EAGAIN (socketConnectCheck).
        let retryable = matches!(e.kind(), ConnectionRefused | TimedOut | HostUnreachable)
            || (self.profile.retry_policy() == RetryPolicy::CountedWithAddress
                && matches!(e.kind(), Interrupted | WouldBlock));
        if !retryable {
            return failed(what);
        }
        if self.errors >= self.tries {
            return gave_up(Site::RetriesExceeded, self.errors + 1, false, &what);
        }
        self.errors += 1;
        let (k, tries) = (self.errors, self.tries);
        let wait = self.sleep_ms * k;
        Step::Retry {
            sleep: Duration::from_millis(wait),
            log: vec![(
                Level::Info,
                None,
                Msg::Retry(Retry {
                    func: Some(POLL.into()),
                    addr: Some(shown),
                    error: what,
                    count: Some((k, tries)),
                    sleep_ms: Some(wait),
                }),
            )],
        }
    }
}

/// Connect to `addr`, retrying like the NCCL release [`log::profile`] imitates.
/// `connect_timeout` bounds one attempt (a silently dropped SYN would otherwise wait for the
/// kernel's timeout, minutes).
pub fn connect_retry(addr: SocketAddr, connect_timeout: Duration) -> io::Result<TcpStream> {
    let mut retrier = Retrier::from_env();
    loop {
        match crate::comm::emu::vnet::connect_timeout(addr, connect_timeout) {
            Ok(s) => return Ok(s),
            Err(e) => match retrier.failed(addr, &e) {
                Step::Retry { sleep, log } => {
                    for (level, site, msg) in log {
                        log::nccl(level, site, &msg);
                    }
                    std::thread::sleep(sleep);
                }
                Step::GiveUp { log } => {
                    for (level, site, msg) in log {
                        log::nccl(level, site, &msg);
                    }
                    return Err(io::Error::new(
                        e.kind(),
                        format!("connect to {addr}: {}", describe(&e)),
                    ));
                }
            },
        }
    }
}

/// The errno text NCCL prints: "Connection refused", "Connection timed out", …
pub fn describe(e: &io::Error) -> String {
    use io::ErrorKind::*;
    match e.kind() {
        ConnectionRefused => "Connection refused".into(),
        TimedOut => "Connection timed out".into(),
        HostUnreachable => "No route to host".into(),
        NetworkUnreachable => "Network is unreachable".into(),
        ConnectionReset => "Connection reset by peer".into(),
        _ => e.to_string(),
    }
}

/// The congestion control the data connections use unless `RINGLAB_TCP_CC` names another
/// (`system` keeps the kernel's default). Mainline Linux defaults to CUBIC, but some
/// distributions and cloud images default to BBR, which paces every send
/// with a timer at its running estimate of the path's bandwidth; on loopback and on a lossless
/// fabric that estimate only throttles the stream (measured here, loopback, 2 ranks: 1 MiB
/// all-reduce 1.9 GB/s under BBR, 2.8 GB/s under reno with the same buffers). Reno does not
/// pace, and unprivileged processes may always choose it.
pub const TCP_CC: &str = "reno";

/// No Nagle delay, a congestion control that does not pace ([`TCP_CC`]), and socket buffers
/// left to the kernel's autotuning (a fixed size turns autotuning off, and a stock
/// net.core.wmem_max caps it near 208 KiB; measured here under reno, 1-4 MiB all-reduce ran
/// about 1.5x faster autotuned than with 256 KiB buffers, and no slower than with 4 MiB).
pub fn tune(s: &TcpStream) -> io::Result<()> {
    s.set_nodelay(true)?;
    use nix::sys::socket::{setsockopt, sockopt};
    let cc = std::env::var("RINGLAB_TCP_CC").unwrap_or_else(|_| TCP_CC.to_string());
    if !cc.is_empty() && cc != "system" {
        let want = std::ffi::OsString::from(&cc);
        if let Err(e) = setsockopt(s, sockopt::TcpCongestion, &want) {
            log::warn(&format!(
                "NET/Socket : cannot use congestion control `{cc}` (RINGLAB_TCP_CC): {}; keeping the system default",
                io::Error::from(e)
            ));
        }
    }
    // RINGLAB_SOCKBUF=N fixes both buffers at N bytes (for experiments); unset or 0 autotunes.
    let size = env_num("RINGLAB_SOCKBUF", 0) as libc::c_int as usize;
    if size == 0 {
        return Ok(());
    }
    // Best effort, as before: a refused size leaves the kernel's.
    let _ = setsockopt(s, sockopt::SndBuf, &size);
    let _ = setsockopt(s, sockopt::RcvBuf, &size);
    Ok(())
}

/// Connections that have not greeted yet, per source address: the one admission rule the
/// store and every rank's listener share. Up to `cap` may greet at once from one address (ranks
/// of one node share it with whatever else runs there); beyond that a newcomer closes the
/// longest-silent one, once that has been silent past [`GREETING_GRACE`] (a real peer greets
/// at once, so only strangers are ever that old).
pub struct Greeters {
    cap: usize,
    next: std::sync::atomic::AtomicU64,
    pending: std::sync::Mutex<
        std::collections::HashMap<std::net::IpAddr, std::collections::VecDeque<Waiting>>,
    >,
}

/// A connection still greeting: its id, a handle to close it, since when.
type Waiting = (u64, TcpStream, std::time::Instant);

/// How long a connection may stay silent before a newer one from its address may close it.
pub const GREETING_GRACE: Duration = Duration::from_millis(250);

impl Greeters {
    pub fn new(cap: usize) -> Self {
        Self {
            cap,
            next: std::sync::atomic::AtomicU64::new(0),
            pending: Default::default(),
        }
    }

    /// Take `conn` in (closing the longest-silent one from its address if over the cap);
    /// returns its ticket for [`Greeters::greeted`], or why it could not be taken in.
    pub fn admit(&self, conn: &TcpStream) -> io::Result<Ticket> {
        // Another user on this host is refused before it can say a word (H3).
        crate::comm::cpu::owner::check(conn)?;
        let ip = conn.peer_addr()?.ip();
        let handle = conn.try_clone()?;
        let id = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut p = self
            .pending
            .lock()
            .map_err(|_| io::Error::other("greeting table poisoned"))?;
        let q = p.entry(ip).or_default();
        if q.len() >= self.cap
            && q.front()
                .is_some_and(|(_, _, t)| t.elapsed() > GREETING_GRACE)
            && let Some((_, old, _)) = q.pop_front()
        {
            let _ = old.shutdown(std::net::Shutdown::Both);
        }
        q.push_back((id, handle, std::time::Instant::now()));
        Ok(Ticket { ip, id })
    }

    /// The connection of `t` has greeted (or failed to): forget it. False when it had been
    /// closed meanwhile as the longest-silent, so what it said must not be used.
    pub fn greeted(&self, t: Ticket) -> bool {
        let Ok(mut p) = self.pending.lock() else {
            return false;
        };
        let Some(q) = p.get_mut(&t.ip) else {
            return false;
        };
        let ours = q.iter().any(|(i, _, _)| *i == t.id);
        q.retain(|(i, _, _)| *i != t.id);
        ours
    }
}

/// A connection taken in by [`Greeters::admit`].
#[derive(Debug, Clone, Copy)]
pub struct Ticket {
    ip: std::net::IpAddr,
    id: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// The congestion control a connected socket uses.
    fn congestion_control(s: &TcpStream) -> io::Result<String> {
        use nix::sys::socket::{getsockopt, sockopt};
        let name = getsockopt(s, sockopt::TcpCongestion)?;
        Ok(name.to_string_lossy().trim_end_matches('\0').to_string())
    }

    #[test]
    fn tuned_sockets_use_a_congestion_control_that_does_not_pace() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (b, _) = l.accept().unwrap();
        // Untuned, the socket has the kernel's default (BBR on some machines, cubic on others).
        let before = congestion_control(&a).unwrap();
        assert!(!before.is_empty());
        for s in [&a, &b] {
            tune(s).unwrap();
            assert_eq!(congestion_control(s).unwrap(), TCP_CC);
            assert!(s.nodelay().unwrap());
        }
    }

    fn refused() -> io::Error {
        io::Error::from(io::ErrorKind::ConnectionRefused)
    }

    fn addr() -> SocketAddr {
        "172.17.0.1:43215".parse().unwrap()
    }

    type Lines = Vec<(Level, String)>;

    /// Feed `e` until the retrier gives up: (attempts, total sleep, every log line, the last),
    /// each line as `p` prints it.
    fn run(mut r: Retrier, e: impl Fn() -> io::Error) -> (u64, Duration, Lines, Lines) {
        let p = r.profile;
        let text = |log: Vec<Said>| -> Lines {
            log.into_iter().map(|(l, _, m)| (l, m.format(p))).collect()
        };
        let (mut n, mut slept, mut lines) = (0, Duration::ZERO, Vec::new());
        loop {
            n += 1;
            match r.failed(addr(), &e()) {
                Step::Retry { sleep, log } => {
                    slept += sleep;
                    lines.extend(text(log));
                }
                Step::GiveUp { log } => return (n, slept, lines, text(log)),
            }
            assert!(n < 100_000, "never gives up");
        }
    }

    #[test]
    fn nccl_2_21_retries_refused_20000_times_1ms_apart_logging_every_1000th() {
        let (n, slept, lines, last) = run(Retrier::new(Profile::V2_21, 34, 100), refused);
        assert_eq!(n, 20_000);
        assert_eq!(slept, Duration::from_millis(19_999));
        assert_eq!(lines.len(), 19, "{lines:?}");
        assert!(lines.iter().all(|(l, m)| *l == Level::Info
            && m == "Call to connect returned Connection refused, retrying"));
        assert_eq!(
            last,
            [(
                Level::Warn,
                "socketPollConnect: exceeded retries (20000)".to_string()
            )]
        );
        // NCCL_SOCKET_RETRY_CNT does not exist before 2.24.
        assert_eq!(run(Retrier::new(Profile::V2_21, 1, 1), refused).0, 20_000);
    }

    #[test]
    fn nccl_2_21_retries_a_timeout_3_times_and_fails_other_errors_at_once() {
        let timed_out = || io::Error::from(io::ErrorKind::TimedOut);
        let (n, _, lines, last) = run(Retrier::new(Profile::V2_21, 34, 100), timed_out);
        assert_eq!(n, 3);
        assert!(lines.is_empty());
        assert_eq!(last[0].1, "socketPollConnect: exceeded timeouts (3)");
        let unreachable = || io::Error::from(io::ErrorKind::HostUnreachable);
        let (n, _, _, last) = run(Retrier::new(Profile::V2_21, 34, 100), unreachable);
        assert_eq!(n, 1);
        assert_eq!(
            last[0].1,
            "socketStartConnect: Connect to 172.17.0.1<43215> failed : No route to host"
        );
    }

    #[test]
    fn nccl_2_27_retries_34_times_with_growing_sleep_naming_the_address() {
        let (n, slept, lines, last) = run(Retrier::new(Profile::V2_27, 34, 100), refused);
        assert_eq!(n, 35);
        assert_eq!(slept, Duration::from_millis(59_500));
        assert_eq!(lines.len(), 34);
        assert_eq!(
            lines[2],
            (
                Level::Info,
                "socketPollConnect: connect to 172.17.0.1<43215> returned Connection refused, \
                 retrying (3/34) after sleep for 300 msec"
                    .to_string()
            )
        );
        assert_eq!(
            last[0].1,
            "socketPollConnect: connect to 172.17.0.1<43215> returned Connection refused, \
             exceeded error retry count after 35 attempts"
        );
    }

    #[test]
    fn nccl_2_24_to_2_26_lines_carry_no_address() {
        let style = Profile::parse("2.25").unwrap();
        let (n, _, lines, last) = run(Retrier::new(style, 34, 100), refused);
        assert_eq!(n, 35);
        assert_eq!(
            lines[0].1,
            "socketPollConnect: connect returned Connection refused, retrying (1/34) after sleep for 100 msec"
        );
        assert!(
            last[0].1.ends_with("exceeded error retry count (35)"),
            "{last:?}"
        );
    }

    #[test]
    fn nccl_2_28_writes_each_retry_once_as_an_info_line_with_the_address() {
        let (n, slept, lines, last) = run(Retrier::new(Profile::NEWEST, 3, 10), refused);
        assert_eq!((n, slept), (4, Duration::from_millis(60)));
        assert_eq!(
            lines,
            (1..=3)
                .map(|k| (
                    Level::Info,
                    format!(
                        "socketPollConnect: connect to 172.17.0.1<43215> returned Connection refused, \
                         retrying ({k}/3) after sleep for {} msec",
                        10 * k
                    )
                ))
                .collect::<Vec<_>>()
        );
        assert_eq!(
            last,
            [(
                Level::Warn,
                "socketPollConnect: connect to 172.17.0.1<43215> returned Connection refused, \
                 exceeded error retry count after 4 attempts"
                    .to_string()
            )]
        );
    }
}

/// Lesson 07's table of connect retries is what the emulation does: for each row, every
/// modelled release in its range is driven through [`Retrier`] until it gives up, and the row
/// must hold the retry line it logs, the give-up line, and the total time it slept.
#[cfg(test)]
mod lesson_07 {
    use super::*;
    use crate::nccl_log::{Level, PROFILES};

    const LESSON: &str = include_str!("../../../lessons/07-debugging-hangs.md");

    struct Run {
        retry: Vec<String>,
        gave_up: String,
        slept: Duration,
    }

    fn refused_until_it_gives_up(p: Profile) -> Run {
        let mut r = Retrier::new(p, 34, 100);
        let e = io::Error::from(io::ErrorKind::ConnectionRefused);
        let addr: SocketAddr = "172.17.0.1:43215".parse().expect("addr");
        let (mut retry, mut slept) = (Vec::new(), Duration::ZERO);
        for _ in 0..100_000 {
            match r.failed(addr, &e) {
                Step::Retry { sleep, log } => {
                    slept += sleep;
                    for (level, _, m) in log {
                        assert_eq!(level, Level::Info, "{p}: a retry is an INFO line");
                        retry.push(m.format(p));
                    }
                }
                Step::GiveUp { log } => {
                    let (level, _, m) = log.into_iter().next().expect("a give-up line");
                    assert_eq!(level, Level::Warn, "{p}: giving up is a WARN");
                    return Run {
                        retry,
                        gave_up: m.format(p),
                        slept,
                    };
                }
            }
        }
        panic!("{p} never gave up");
    }

    #[test]
    fn the_retry_table_is_what_each_release_prints() {
        for (row, lo, hi, after) in [
            ("| 2.23 and earlier |", 8, 23, "about 20 s"),
            ("| 2.24 to 2.26 |", 24, 26, "59.5 s"),
            ("| 2.27 and later |", 27, 99, "59.5 s"),
        ] {
            let line = LESSON
                .lines()
                .find(|l| l.starts_with(row))
                .unwrap_or_else(|| panic!("lesson 07 has no row {row}"));
            let profiles: Vec<Profile> = PROFILES
                .iter()
                .copied()
                .filter(|p| (lo..=hi).contains(&p.minor()))
                .collect();
            assert!(!profiles.is_empty(), "{row}");
            for p in profiles {
                let run = refused_until_it_gives_up(p);
                // The third retry's line (≤ 2.23: every line is the same, one per 1000).
                let third = run
                    .retry
                    .get(2)
                    .unwrap_or_else(|| panic!("{p}: {:?}", run.retry));
                assert!(
                    line.contains(&format!("`{third}`")),
                    "{p}: {third:?} not in\n{line}"
                );
                assert!(
                    line.contains(&format!("`{}`", run.gave_up)),
                    "{p}: {:?} not in\n{line}",
                    run.gave_up
                );
                let s = run.slept.as_secs_f64();
                let said = if after.starts_with("about") {
                    format!("about {:.0} s", s)
                } else {
                    format!("{s:.1} s")
                };
                assert_eq!(said, after, "{p}: slept {s} s");
                assert!(line.trim_end().ends_with(&format!("| {after} |")), "{line}");
                if lo <= 23 {
                    assert_eq!(run.retry.len(), 19, "{p}: one line per 1000 of 20 000");
                    assert!(line.contains("once per 1000 attempts"), "{line}");
                } else {
                    assert_eq!(run.retry.len(), 34, "{p}");
                }
            }
        }
    }
}
