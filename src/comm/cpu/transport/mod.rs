//! Transports as NCCL has them: a table tried in order, the first that can connect a pair wins
//! (NVIDIA/nccl `src/transport.cc`, `ncclTransports[]` and `selectTransport`). ringlab's three,
//! each in its own file:
//!
//! - [`p2p`]: single copy between ranks of one node, the receiver reading the sender's buffer
//!   with cross-memory attach ([`crate::comm::cpu::cma`]), as NCCL's P2P transport reads a peer GPU's
//!   buffer; small messages still go through the shared-memory FIFO;
//! - [`shm`]: shared-memory FIFOs between ranks of one node ([`crate::comm::cpu::shm`]);
//! - [`net`]: TCP sockets, to other nodes or everywhere with `NCCL_SHM_DISABLE=1`.
//!
//! A rank tells each partner who it is ([`PeerInfo`], NCCL's peer info), both walk
//! [`TRANSPORTS`] and take the first whose [`Connector::can_connect`] says yes; then each
//! transport connects its pairs: NET has its socket already, SHM maps segments, and P2P is
//! confirmed only when each side has read the other's memory. Each pair's line is logged in
//! NCCL's channel form (`via P2P/CMA`, `via SHM/direct/direct`, `via NET/Socket/0`).

pub mod net;
pub mod p2p;
pub mod shm;

use std::net::TcpStream;

use crate::comm::cpu::tcp::{CommError, RankEnv, SETUP_WAIT, swap_frames};
use crate::comm::emu::log;
use crate::nccl_log::Msg;

/// Which transport carries a peer's bytes: NCCL's one type ([`crate::nccl_log::Transport`]);
/// the CPU backend's network is TCP sockets ([`Transport::NET`]).
pub use crate::nccl_log::Transport;

/// The transports a rank, or a whole job, used: a set shown in NCCL's order joined by `+`
/// (`P2P`, `SHM+NET`, `-` for none). Events, rows and reports carry this type; only JSON
/// carries the words.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Transports([bool; Transport::ALL.len()]);

impl Transports {
    /// The set of one transport.
    pub fn only(t: Transport) -> Self {
        let mut s = Self::default();
        s.0[t.kind_index()] = true;
        s
    }
    pub fn contains(self, t: Transport) -> bool {
        self.0[t.kind_index()]
    }
    pub fn is_empty(self) -> bool {
        !self.0.iter().any(|&b| b)
    }
    /// Both sets' transports.
    pub fn union(self, other: Self) -> Self {
        let mut s = self;
        for (a, b) in s.0.iter_mut().zip(other.0) {
            *a |= b;
        }
        s
    }
    /// Its transports, in NCCL's order.
    pub fn iter(self) -> impl Iterator<Item = Transport> {
        Transport::ALL
            .into_iter()
            .filter(move |&t| self.contains(t))
    }
    /// `P2P+NET`; `-` when empty.
    pub fn name(self) -> String {
        let parts: Vec<&str> = self.iter().map(Transport::name).collect();
        if parts.is_empty() {
            "-".into()
        } else {
            parts.join("+")
        }
    }
    /// Read `P2P+NET` (or `-`) back; an unknown word is an error naming it.
    pub fn parse(text: &str) -> Result<Self, UnknownTransport> {
        if text == "-" {
            return Ok(Self::default());
        }
        text.split('+').try_fold(Self::default(), |s, part| {
            Transport::ALL
                .into_iter()
                .find(|t| t.name() == part)
                .map(|t| s.union(Self::only(t)))
                .ok_or_else(|| UnknownTransport(part.to_string()))
        })
    }
}

/// A word of a transport set that names no transport.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a transport (P2P, SHM, NET)")]
pub struct UnknownTransport(pub String);

impl FromIterator<Transport> for Transports {
    fn from_iter<I: IntoIterator<Item = Transport>>(it: I) -> Self {
        it.into_iter()
            .fold(Self::default(), |s, t| s.union(Self::only(t)))
    }
}

impl std::fmt::Display for Transports {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name())
    }
}

impl serde::Serialize for Transports {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.name())
    }
}

impl<'de> serde::Deserialize<'de> for Transports {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Self::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// What a rank tells each partner before they choose the transport between them (NCCL's
/// `ncclPeerInfo`: host, shared-memory device, process).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct PeerInfo {
    pub locality: crate::comm::cpu::shm::Locality,
    /// Single copy allowed on this side (not NCCL_P2P_DISABLE=1).
    #[serde(default)]
    pub p2p: bool,
    /// NCCL's `[dev]` in its log lines: the local rank.
    pub dev: usize,
    /// For single copy: this process, and a word of known value in it to probe.
    pub pid: u32,
    pub probe_addr: usize,
    pub probe_value: u64,
    /// The abstract Unix socket this rank listens on for its node's partners
    /// ([`crate::comm::cpu::fdpass`]); empty: none (no shared memory with this rank).
    #[serde(default)]
    pub sock: String,
}

impl PeerInfo {
    /// This rank, as the environment allows it (logging NCCL's `NCCL_SHM_DISABLE set by
    /// environment to 1.` lines for what is switched off).
    pub fn here(env: &RankEnv) -> Self {
        let locality = crate::comm::cpu::shm::Locality::here(env.shm);
        if !locality.shm {
            log::info_msg(&Msg::EnvSet {
                name: "NCCL_SHM_DISABLE".into(),
                value: "1.".into(),
            });
        }
        let p2p = !crate::comm::cpu::cma::disabled_by_env();
        if !p2p {
            log::info_msg(&Msg::EnvSet {
                name: "NCCL_P2P_DISABLE".into(),
                value: "1.".into(),
            });
        }
        let probe = crate::comm::cpu::cma::probe();
        Self {
            locality,
            p2p,
            dev: env.local_rank,
            pid: std::process::id(),
            probe_addr: probe.addr,
            probe_value: probe.value,
            sock: String::new(),
        }
    }
}

/// Why a transport cannot join a pair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decline {
    /// It does not apply (another node, switched off): nothing to say.
    Quietly,
    /// It applies but failed: said at INFO, as NCCL says why it falls back.
    Because(String),
}

/// One transport of the table: whether it can join this rank and a partner (NCCL's
/// `canConnect`). Each transport's file holds its connector, its connect and its
/// [`PeerLink`](crate::comm::cpu::engine::PeerLink) (how it moves the bytes); [`connect`] picks which.
pub trait Connector: Sync {
    fn kind(&self) -> Transport;
    fn can_connect(&self, me: &PeerInfo, peer: &PeerInfo) -> Result<(), Decline>;
}

/// The table, in NCCL's order: the first that can connect a pair carries it.
pub static TRANSPORTS: [&dyn Connector; 3] = [&p2p::P2p, &shm::Shm, &net::Net];

/// The transport for the pair (`me`, `peer`): the first of [`TRANSPORTS`] that can connect
/// it, with what each one before it said. NET connects anything.
pub fn select(me: &PeerInfo, peer: &PeerInfo) -> (Transport, Vec<(Transport, String)>) {
    let mut said = Vec::new();
    for t in TRANSPORTS {
        match t.can_connect(me, peer) {
            Ok(()) => return (t.kind(), said),
            Err(Decline::Because(why)) => said.push((t.kind(), why)),
            Err(Decline::Quietly) => {}
        }
    }
    (Transport::NET, said)
}

/// Per rank: the Unix-domain connection to a partner of this node (None: not one), over
/// which memory is handed as descriptors ([`crate::comm::cpu::fdpass`]).
pub type UnixLinks = Vec<Option<std::os::unix::net::UnixStream>>;

/// What [`connect`] returns: the shared-memory links (None without a local partner), per rank
/// its transport (None: not a partner), and per rank the Unix connection to a local partner.
pub(super) type Connected = (Option<shm::Links>, Vec<Option<Transport>>, UnixLinks);

/// Choose each partner's transport from the table and connect them all: a collective call
/// of every rank with partners.
///
/// Partners that may share memory (same host and /dev/shm, both allowing it) first connect
/// over a Unix-domain socket ([`crate::comm::cpu::fdpass::pair_up`]); from then on a partner's process is
/// the one the kernel names at the other end of that socket (`SO_PEERCRED`), not the pid its
/// hello claims, and a partner of another user is refused.
pub(super) fn connect(
    env: &RankEnv,
    peers: &mut [Option<TcpStream>],
    partners: &[usize],
    deferred: &mut Vec<Msg>,
) -> Result<Connected, CommError> {
    let rank = env.rank;
    let setup = |what: String| CommError::Setup { rank, what };
    let mut transports: Vec<Option<Transport>> = vec![None; env.world];
    let mut unix: UnixLinks = (0..env.world).map(|_| None).collect();
    if partners.is_empty() {
        return Ok((None, transports, unix));
    }
    let mut me = PeerInfo::here(env);
    let listener = if me.locality.shm {
        match crate::comm::cpu::fdpass::Listener::bind() {
            Ok(l) => {
                me.sock = l.name().to_string();
                Some(l)
            }
            Err(e) => {
                log::info(&format!(
                    "SHM unavailable (no Unix socket for local partners: {e}): using NET"
                ));
                me.locality.shm = false;
                None
            }
        }
    } else {
        None
    };
    let hello = serde_json::to_vec(&me).map_err(|e| setup(e.to_string()))?;
    let replies = swap_frames(rank, peers, partners, &hello, "transport hello", SETUP_WAIT)?;
    let mut infos = Vec::with_capacity(partners.len());
    for (&p, r) in partners.iter().zip(&replies) {
        let mut theirs: PeerInfo = serde_json::from_slice(r)
            .map_err(|e| setup(format!("rank {p}'s transport hello: {e}")))?;
        if theirs.sock.is_empty() {
            theirs.locality.shm = false;
        }
        infos.push((p, theirs));
    }
    if let Some(listener) = &listener {
        let near: Vec<(usize, String)> = infos
            .iter()
            .filter(|(_, t)| me.locality.shm_with(&t.locality))
            .map(|(p, t)| (*p, t.sock.clone()))
            .collect();
        let deadline = std::time::Instant::now() + SETUP_WAIT;
        let paired = crate::comm::cpu::fdpass::pair_up(rank, listener, &near, deadline)
            .map_err(|e| setup(format!("connecting to this node's partners: {e}")))?;
        for (p, stream, cred) in paired {
            if let Some((_, info)) = infos.iter_mut().find(|(q, _)| *q == p) {
                let pid = u32::try_from(cred.pid).unwrap_or(0);
                if info.pid != pid {
                    log::info(&format!(
                        "rank {p} said it is process {}, the kernel says {pid}: using {pid}",
                        info.pid
                    ));
                }
                info.pid = pid;
            }
            unix[p] = Some(stream);
        }
    }
    let mut local = Vec::new();
    for (p, theirs) in infos {
        let (t, said) = select(&me, &theirs);
        for (tried, why) in said {
            log::info(&format!(
                "{} to rank {p} unavailable ({why}): using {}",
                tried.name(),
                t.name()
            ));
        }
        transports[p] = Some(t);
        match t {
            Transport::Net(_) => {
                unix[p] = None;
                net::connect(env, p, &theirs, deferred);
            }
            Transport::P2p | Transport::Shm => local.push(shm::Partner {
                rank: p,
                info: theirs,
                p2p: t == Transport::P2p,
            }),
        }
    }
    if local.is_empty() {
        return Ok((None, transports, unix));
    }
    let links = shm::connect(env, peers, &unix, &local, &mut transports, deferred)?;
    Ok((Some(links), transports, unix))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transport_sets_read_back_what_they_show_in_nccl_order() {
        let set: Transports = [Transport::NET, Transport::P2p, Transport::NET]
            .into_iter()
            .collect();
        assert_eq!(set.name(), "P2P+NET");
        assert_eq!(Transports::parse("P2P+NET"), Ok(set));
        assert_eq!(Transports::default().name(), "-");
        assert_eq!(Transports::parse("-"), Ok(Transports::default()));
        let json = serde_json::to_string(&set).expect("json");
        assert_eq!(json, "\"P2P+NET\"");
        assert_eq!(
            serde_json::from_str::<Transports>(&json).expect("back"),
            set
        );
        let err = Transports::parse("SHM+IB")
            .expect_err("IB is not one of ringlab's")
            .to_string();
        assert!(err.contains("`IB`"), "{err}");
        assert!(serde_json::from_str::<Transports>("\"P2P+XX\"").is_err());
        assert!(set.contains(Transport::P2p) && !set.contains(Transport::Shm));
        for (k, t) in Transport::ALL.into_iter().enumerate() {
            assert_eq!(t.kind_index(), k, "{t:?}");
        }
    }

    fn info(host: &str, p2p: bool, shm: bool) -> PeerInfo {
        let probe = crate::comm::cpu::cma::probe();
        PeerInfo {
            locality: crate::comm::cpu::shm::Locality {
                host: host.into(),
                shm_dev: 7,
                shm,
            },
            p2p,
            dev: 0,
            pid: std::process::id(),
            probe_addr: probe.addr,
            probe_value: probe.value,
            sock: String::new(),
        }
    }

    #[test]
    fn the_first_transport_that_can_connect_a_pair_wins() {
        let here = info("a", true, true);
        // The same process stands in for the partner: its memory is readable.
        assert_eq!(select(&here, &here).0, Transport::P2p);
        // P2P switched off on either side: SHM, quietly.
        let no_p2p = info("a", false, true);
        assert_eq!(select(&here, &no_p2p), (Transport::Shm, vec![]));
        assert_eq!(select(&no_p2p, &here), (Transport::Shm, vec![]));
        // SHM switched off: NET.
        let no_shm = info("a", true, false);
        assert_eq!(select(&here, &no_shm), (Transport::NET, vec![]));
        // Another host: NET.
        assert_eq!(select(&here, &info("b", true, true)).0, Transport::NET);
        // A partner whose memory cannot be read: SHM, and P2P says why.
        let gone = PeerInfo {
            pid: u32::MAX >> 2,
            ..here.clone()
        };
        let (t, said) = select(&here, &gone);
        assert_eq!(t, Transport::Shm);
        assert_eq!(said.len(), 1, "{said:?}");
        assert_eq!(said[0].0, Transport::P2p);
        assert!(said[0].1.contains("process_vm_readv"), "{said:?}");
        let kinds: Vec<Transport> = TRANSPORTS.iter().map(|t| t.kind()).collect();
        assert_eq!(kinds, Transport::ALL, "the table is in NCCL's order");
    }
}
