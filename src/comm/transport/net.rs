//! NET: the partner's TCP socket carries its bytes (NCCL's net transport over its Socket
//! plugin). It connects any pair, so it is last in the table; the socket itself was dialled
//! during rendezvous ([`super::super::tcp::TcpComm::init`]).

use super::{Connector, Decline, PeerInfo, Transport};
use crate::comm::tcp::{RankEnv, channel, connected};
use crate::nccl_log::Msg;

pub struct Net;

impl Connector for Net {
    fn kind(&self) -> Transport {
        Transport::NET
    }
    fn can_connect(&self, _: &PeerInfo, _: &PeerInfo) -> Result<(), Decline> {
        Ok(())
    }
}

/// The pair's two channel lines, as NCCL prints a net connection: `[send] via NET/Socket/0`
/// from this rank and `[receive]` into it.
pub(crate) fn connect(env: &RankEnv, peer: usize, theirs: &PeerInfo, deferred: &mut Vec<Msg>) {
    let (rank, dev) = (env.rank, env.local_rank);
    connected(
        deferred,
        channel(rank, dev, peer, theirs.dev, Some("send"), "NET/Socket/0"),
    );
    connected(
        deferred,
        channel(peer, theirs.dev, rank, dev, Some("receive"), "NET/Socket/0"),
    );
}
