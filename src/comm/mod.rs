//! Processes and bytes on the wire: the rendezvous store, NCCL-style interface selection and
//! logging, and the TCP backend that executes collective schedules between real processes.

pub mod engine;
pub mod ifaces;
pub mod log;
pub mod nccl;
pub mod ncclfind;
pub mod net;
pub mod reduce;
pub mod store;
pub mod tcp;
pub mod vnet;
pub mod wire;

use crate::collective::{Algorithm, Collective, Dtype, Op, Schedule, Spec};

/// One interface for collectives, whatever carries the bytes. Buffers hold `count` elements
/// of `dtype` on every rank (the whole array, also for all-gather and reduce-scatter).
pub trait Communicator {
    fn rank(&self) -> usize;
    fn world(&self) -> usize;
    /// Run `coll` with `algo` in place on `buf`.
    fn collective(
        &mut self,
        coll: Collective,
        algo: Algorithm,
        op: Op,
        root: usize,
        dtype: Dtype,
        buf: &mut [u8],
    ) -> Result<(), tcp::CommError>;

    fn all_reduce(
        &mut self,
        algo: Algorithm,
        op: Op,
        dtype: Dtype,
        buf: &mut [u8],
    ) -> Result<(), tcp::CommError> {
        self.collective(Collective::AllReduce, algo, op, 0, dtype, buf)
    }
    fn reduce_scatter(
        &mut self,
        algo: Algorithm,
        op: Op,
        dtype: Dtype,
        buf: &mut [u8],
    ) -> Result<(), tcp::CommError> {
        self.collective(Collective::ReduceScatter, algo, op, 0, dtype, buf)
    }
    fn all_gather(
        &mut self,
        algo: Algorithm,
        dtype: Dtype,
        buf: &mut [u8],
    ) -> Result<(), tcp::CommError> {
        self.collective(Collective::AllGather, algo, Op::Sum, 0, dtype, buf)
    }
    fn broadcast(
        &mut self,
        algo: Algorithm,
        root: usize,
        dtype: Dtype,
        buf: &mut [u8],
    ) -> Result<(), tcp::CommError> {
        self.collective(Collective::Broadcast, algo, Op::Sum, root, dtype, buf)
    }
    fn reduce(
        &mut self,
        algo: Algorithm,
        op: Op,
        root: usize,
        dtype: Dtype,
        buf: &mut [u8],
    ) -> Result<(), tcp::CommError> {
        self.collective(Collective::Reduce, algo, op, root, dtype, buf)
    }
    /// Rank r sends its buffer to r+1 and receives r−1's (nccl-tests' sendrecv).
    fn send_recv(&mut self, dtype: Dtype, buf: &mut [u8]) -> Result<(), tcp::CommError> {
        self.collective(
            Collective::SendRecv,
            Algorithm::Ring,
            Op::Sum,
            0,
            dtype,
            buf,
        )
    }
}

impl Communicator for tcp::TcpComm {
    fn rank(&self) -> usize {
        tcp::TcpComm::rank(self)
    }
    fn world(&self) -> usize {
        tcp::TcpComm::world(self)
    }
    fn collective(
        &mut self,
        coll: Collective,
        algo: Algorithm,
        op: Op,
        root: usize,
        dtype: Dtype,
        buf: &mut [u8],
    ) -> Result<(), tcp::CommError> {
        let es = dtype.size();
        let spec = Spec {
            root,
            ..Spec::new(coll, algo, self.world(), buf.len() / es, es)
        };
        let schedule = Schedule::build(&spec).map_err(|e| tcp::CommError::Io {
            rank: self.rank(),
            what: e.to_string(),
            source: std::io::Error::from(std::io::ErrorKind::InvalidInput),
        })?;
        self.run(&schedule, buf, dtype, op)
    }
}
