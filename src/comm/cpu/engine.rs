//! The progress engine: one rank's part of a schedule, run as a dataflow instead of step by
//! step. Every send and receive of the whole schedule is an op with byte-exact dependencies on
//! earlier ops; an op moves as far as its dependencies allow. A chunk received (and reduced)
//! in one step is forwarded in the next while it is still arriving, as NCCL's ring does
//! (recvReduceSend / recvCopySend), so the ring is a pipeline, not a series of barriers, and
//! forwarded bytes leave from cache. The schedule still decides everything: who, what, when.

use std::io;
use std::ops::Range;

use crate::collective::{Op as RedOp, Schedule};
use crate::comm::cpu::reduce::ReduceFn;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dep {
    /// Wait until that op is complete.
    Full(usize),
    /// Same byte range, one step earlier: go as far as that op has got.
    Stream(usize),
    /// Wait until that send has copied its data aside (a same-step overwrite follows).
    Staged(usize),
}

#[derive(Debug, Clone)]
pub(crate) struct PlanOp {
    pub(crate) send: bool,
    pub(crate) peer: usize,
    pub(crate) step: usize,
    pub(crate) range: Range<usize>,
    pub(crate) reduce: bool,
    deps: Vec<Dep>,
    /// Offset in the send stage: this send's data is copied aside before a same-step receive
    /// overwrites it.
    pub(crate) stage_at: Option<usize>,
    /// Out of place: the parts of `range` this op reads from the input rather than the output
    /// (a send of bytes no receive has written yet; a reduction that is the first write).
    pub(crate) fresh: Vec<Range<usize>>,
    /// The call's header ([`crate::comm::cpu::header`]), first on its link: a send reads it from the
    /// send stage, a receive lands aside and is checked against this rank's own.
    pub(crate) header: bool,
}

/// One rank's ops for one schedule, with their dependencies (built once, reused every run).
#[derive(Debug, Clone)]
pub struct Plan {
    ops: Vec<PlanOp>,
    send_stage_len: usize,
    /// Where in the send stage the call's header waits to go out.
    header_at: usize,
    /// Peers this rank receives reductions from, each with its own staging window.
    reduce_peers: Vec<usize>,
    /// Out of place: bytes copied from the input before anything moves (no receive writes
    /// them, or two receives of one step reduce into them).
    upfront: Vec<Range<usize>>,
    /// Per peer, the ops in stream order: its sends, and its receives.
    sends: Vec<Vec<usize>>,
    recvs: Vec<Vec<usize>>,
}

fn overlaps(a: &Range<usize>, b: &Range<usize>) -> bool {
    a.start < b.end && b.start < a.end
}

fn covers(a: &Range<usize>, b: &Range<usize>) -> bool {
    a.start <= b.start && b.end <= a.end
}

impl Plan {
    pub fn build(schedule: &Schedule, rank: usize) -> Self {
        let es = schedule.spec().elem_size;
        let me = rank as u32;
        let mut ops: Vec<PlanOp> = Vec::new();
        for (k, step) in schedule.steps().iter().enumerate() {
            let first = ops.len();
            for t in step
                .transfers
                .iter()
                .filter(|t| t.len > 0 && (t.src == me || t.dst == me) && t.src != t.dst)
            {
                let send = t.src == me;
                // A send reads its source range, a receive writes its destination range (they
                // differ only for all-to-all).
                let r = if send { t.src_range() } else { t.dst_range() };
                ops.push(PlanOp {
                    send,
                    peer: if send { t.dst } else { t.src } as usize,
                    step: k,
                    range: r.start * es..r.end * es,
                    reduce: !send && t.reduce,
                    deps: Vec::new(),
                    stage_at: None,
                    fresh: Vec::new(),
                    header: false,
                });
            }
            // Same step: a send whose bytes a receive of this step overwrites is staged first.
            for i in first..ops.len() {
                if ops[i].send
                    && (first..ops.len())
                        .any(|j| !ops[j].send && overlaps(&ops[j].range, &ops[i].range))
                {
                    ops[i].stage_at = Some(0);
                }
            }
        }
        let mut stage = 0;
        for op in ops.iter_mut().filter(|o| o.stage_at.is_some()) {
            op.stage_at = Some(stage);
            stage += op.range.len();
        }
        for i in 0..ops.len() {
            let deps = deps_of(&ops, i);
            ops[i].deps = deps;
        }
        let upfront = plan_out_of_place(&mut ops, schedule.spec().count * es);
        let mut reduce_peers: Vec<usize> =
            ops.iter().filter(|o| o.reduce).map(|o| o.peer).collect();
        reduce_peers.sort_unstable();
        reduce_peers.dedup();
        let world = schedule.spec().ranks;
        let (mut sends, mut recvs) = (vec![Vec::new(); world], vec![Vec::new(); world]);
        for (i, o) in ops.iter().enumerate() {
            let lists = if o.send { &mut sends } else { &mut recvs };
            if let Some(l) = lists.get_mut(o.peer) {
                l.push(i);
            }
        }
        // Every link this call uses opens with its header, in the data's direction.
        for (lists, send) in [(&mut sends, true), (&mut recvs, false)] {
            for (peer, l) in lists.iter_mut().enumerate().filter(|(_, l)| !l.is_empty()) {
                l.insert(0, ops.len());
                ops.push(PlanOp {
                    send,
                    peer,
                    step: 0,
                    range: 0..crate::comm::cpu::header::LEN,
                    reduce: false,
                    deps: Vec::new(),
                    stage_at: send.then_some(stage),
                    fresh: Vec::new(),
                    header: true,
                });
            }
        }
        let header_at = stage;
        let stage = stage + crate::comm::cpu::header::LEN;
        Plan {
            ops,
            send_stage_len: stage,
            header_at,
            reduce_peers,
            upfront,
            sends,
            recvs,
        }
    }

    pub fn send_stage_len(&self) -> usize {
        self.send_stage_len
    }

    pub fn reduce_peers(&self) -> usize {
        self.reduce_peers.len()
    }

    /// The step an op belongs to (for error messages).
    pub fn step_of(&self, op: usize) -> usize {
        self.ops.get(op).map_or(0, |o| o.step)
    }
}

/// Out of place, the output starts empty and the input is read where the output has nothing
/// yet, so no copy of the whole input comes first. The buffer is cut into atoms at every op
/// boundary (an op covers an atom wholly or not at all). For each atom, the first step with a
/// receive into it decides: sends up to that step read the input; a lone reduction in it
/// combines the input with what arrives; later ops read the output. An atom no receive writes,
/// or that two receives of its first step reduce into, is copied before anything runs.
/// Returns those copies.
fn plan_out_of_place(ops: &mut [PlanOp], len: usize) -> Vec<Range<usize>> {
    let mut cuts: Vec<usize> = ops
        .iter()
        .flat_map(|o| [o.range.start, o.range.end])
        .chain([0, len])
        .filter(|&c| c <= len)
        .collect();
    cuts.sort_unstable();
    cuts.dedup();
    let mut upfront: Vec<Range<usize>> = Vec::new();
    for w in cuts.windows(2) {
        let atom = w[0]..w[1];
        let writers: Vec<usize> = (0..ops.len())
            .filter(|&i| !ops[i].send && covers(&ops[i].range, &atom))
            .collect();
        let Some(first) = writers.iter().map(|&i| ops[i].step).min() else {
            push_range(&mut upfront, atom);
            continue;
        };
        let at_first: Vec<usize> = writers
            .into_iter()
            .filter(|&i| ops[i].step == first)
            .collect();
        if at_first.len() > 1 && at_first.iter().any(|&i| ops[i].reduce) {
            push_range(&mut upfront, atom);
            continue;
        }
        for o in ops.iter_mut() {
            let reads_input = if o.send {
                o.step <= first
            } else {
                o.reduce && o.step == first
            };
            if reads_input && covers(&o.range, &atom) {
                push_range(&mut o.fresh, atom.clone());
            }
        }
    }
    upfront
}

/// Append `r` to sorted, disjoint ranges, merging it with the last one when they touch.
fn push_range(v: &mut Vec<Range<usize>>, r: Range<usize>) {
    if r.is_empty() {
        return;
    }
    match v.last_mut() {
        Some(last) if last.end == r.start => last.end = r.end,
        _ => v.push(r),
    }
}

/// The longest run of bytes from `a` (up to `b`) that comes from one place: the input where
/// `fresh` says so, else the output. Returns the run's end and whether it is the input.
fn run_from_input(fresh: &[Range<usize>], a: usize, b: usize) -> (usize, bool) {
    for f in fresh {
        if a < f.start {
            return (b.min(f.start), false);
        }
        if a < f.end {
            return (b.min(f.end), true);
        }
    }
    (b, false)
}

/// `a..b` cut into those runs, in order: each with whether it comes from the input.
fn runs(fresh: &[Range<usize>], a: usize, b: usize) -> impl Iterator<Item = (Range<usize>, bool)> {
    let mut at = a;
    std::iter::from_fn(move || {
        (at < b).then(|| {
            let (end, from_input) = run_from_input(fresh, at, b);
            let r = at..end;
            at = end;
            (r, from_input)
        })
    })
}

fn deps_of(ops: &[PlanOp], i: usize) -> Vec<Dep> {
    let x = &ops[i];
    let mut deps = Vec::new();
    // Same-step sends that this receive would overwrite must have copied their data aside.
    if !x.send {
        for (j, e) in ops.iter().enumerate() {
            if j != i && e.send && e.step == x.step && overlaps(&e.range, &x.range) {
                deps.push(Dep::Staged(j));
            }
        }
    }
    // Set when an earlier write covers the whole range: ops of that step still count (they
    // run concurrently with it), older ones are ordered by it.
    let mut stop_below: Option<usize> = None;
    for j in (0..i).rev() {
        let e = &ops[j];
        if stop_below.is_some_and(|k| e.step < k) {
            break;
        }
        if e.step == x.step || !overlaps(&e.range, &x.range) {
            continue;
        }
        let streamable = e.step + 1 == x.step
            && e.range == x.range
            && x.stage_at.is_none()
            && e.stage_at.is_none();
        match (x.send, e.send) {
            // Read after write: the bytes must be final before they leave.
            (true, false) => deps.push(if streamable {
                Dep::Stream(j)
            } else {
                Dep::Full(j)
            }),
            // Write after write (and the read a reduction does).
            (false, false) => deps.push(if streamable && !x.reduce && !e.reduce {
                Dep::Stream(j)
            } else {
                Dep::Full(j)
            }),
            // Write after read: do not overwrite what an earlier send has yet to send.
            (false, true) => deps.push(if e.stage_at.is_some() {
                Dep::Staged(j)
            } else if streamable {
                Dep::Stream(j)
            } else {
                Dep::Full(j)
            }),
            (true, true) => {}
        }
        // An earlier write that covers the whole range orders everything older than its step.
        if !e.send && covers(&e.range, &x.range) {
            stop_below = Some(e.step);
        }
    }
    deps
}

/// Why a run stopped: the op (for its step) and what happened with which peer.
pub enum EngineError {
    Closed {
        op: usize,
        peer: usize,
    },
    Io {
        op: usize,
        peer: usize,
        err: io::Error,
    },
    Stuck,
    /// A peer's header is not this rank's own: the bytes that came.
    Mismatch {
        peer: usize,
        theirs: [u8; crate::comm::cpu::header::LEN],
    },
}

impl EngineError {
    /// `op` with `peer` has no connection at all.
    pub(crate) fn not_connected(op: usize, peer: usize) -> Self {
        Self::Io {
            op,
            peer,
            err: io::ErrorKind::NotConnected.into(),
        }
    }
}

/// Per-run state of one op.
#[derive(Clone, Default)]
pub(crate) struct State {
    /// Send: bytes sent. Receive: bytes placed (copied, or reduced) into the buffer.
    pub(crate) done: usize,
    /// Receive: bytes read off the link (for a reduction some wait in the staging window).
    /// Single-copy send: bytes posted in descriptors.
    pub(crate) got: usize,
    pub(crate) staged: bool,
}

impl State {
    /// A receive read `k` more bytes: a copy has placed them, a reduction holds them in its
    /// staging window until they are reduced.
    pub(crate) fn received(&mut self, k: usize, reduce: bool) {
        self.got += k;
        if !reduce {
            self.done = self.got;
        }
    }
}

/// How this rank reaches one peer, each transport with its own progress ([`PeerLink`]): a TCP
/// socket (NET), the pair's shared-memory FIFOs (SHM), or the FIFOs with single copy for large
/// messages (P2P). The schedule decides what moves; the link only how the bytes go.
#[derive(Clone, Copy)]
pub enum Link<'a> {
    None,
    Tcp(crate::comm::cpu::transport::net::TcpLink),
    Fifo(crate::comm::cpu::transport::shm::FifoLink<'a>),
    P2p(crate::comm::cpu::transport::p2p::CmaLink<'a>),
}

/// One transport's progress on one peer: how a send moves the bytes that are ready, how a
/// receive takes the header and then the bytes the buffer has room for (NCCL's
/// `ncclTransportComm` carries the same: connect, then the proxy's progress). The engine
/// decides what is ready and when an op is complete; the link moves bytes and says, through
/// the [`Pass`], what it waits for.
pub trait PeerLink {
    /// Move op `i` (a send to `p`) forward: `ready` bytes of it may go. True when the op that
    /// follows may go on at once once this one is whole (the header, then the call's bytes).
    fn send(
        &self,
        run: &mut Run,
        pass: &mut Pass,
        p: usize,
        i: usize,
        ready: usize,
    ) -> Result<bool, EngineError>;
    /// Take more of op `i`, the header from `p`, into `run.heard[p]`: the bytes taken.
    fn recv_header(
        &self,
        run: &mut Run,
        pass: &mut Pass,
        p: usize,
        i: usize,
    ) -> Result<usize, EngineError>;
    /// Move op `i` (a receive from `p`) forward, as far as `lim` bytes of it.
    fn recv(
        &self,
        run: &mut Run,
        pass: &mut Pass,
        p: usize,
        i: usize,
        lim: usize,
    ) -> Result<(), EngineError>;
    /// Shared memory: bytes already in the partner's FIFO to this rank (it may have left).
    fn pending(&self) -> Option<usize> {
        None
    }
    /// Shared memory: the partner's TCP connection, which closes when it dies.
    fn liveness_fd(&self) -> Option<i32> {
        None
    }
    /// Single copy: what the partner had read of this rank's memory so far.
    fn acked(&self) -> u64 {
        0
    }
}

impl PeerLink for Link<'_> {
    fn send(
        &self,
        run: &mut Run,
        pass: &mut Pass,
        p: usize,
        i: usize,
        ready: usize,
    ) -> Result<bool, EngineError> {
        match self {
            Link::None if ready > run.st[i].done => Err(EngineError::not_connected(i, p)),
            Link::None => Ok(true),
            Link::Tcp(l) => l.send(run, pass, p, i, ready),
            Link::Fifo(l) => l.send(run, pass, p, i, ready),
            Link::P2p(l) => l.send(run, pass, p, i, ready),
        }
    }
    fn recv_header(
        &self,
        run: &mut Run,
        pass: &mut Pass,
        p: usize,
        i: usize,
    ) -> Result<usize, EngineError> {
        match self {
            Link::None => Err(EngineError::not_connected(i, p)),
            Link::Tcp(l) => l.recv_header(run, pass, p, i),
            Link::Fifo(l) => l.recv_header(run, pass, p, i),
            Link::P2p(l) => l.recv_header(run, pass, p, i),
        }
    }
    fn recv(
        &self,
        run: &mut Run,
        pass: &mut Pass,
        p: usize,
        i: usize,
        lim: usize,
    ) -> Result<(), EngineError> {
        match self {
            Link::None => Err(EngineError::not_connected(i, p)),
            Link::Tcp(l) => l.recv(run, pass, p, i, lim),
            Link::Fifo(l) => l.recv(run, pass, p, i, lim),
            Link::P2p(l) => l.recv(run, pass, p, i, lim),
        }
    }
    fn pending(&self) -> Option<usize> {
        match self {
            Link::Fifo(l) => l.pending(),
            Link::P2p(l) => l.pending(),
            _ => None,
        }
    }
    fn liveness_fd(&self) -> Option<i32> {
        match self {
            Link::Fifo(l) => l.liveness_fd(),
            Link::P2p(l) => l.liveness_fd(),
            _ => None,
        }
    }
    fn acked(&self) -> u64 {
        match self {
            Link::Fifo(l) => l.acked(),
            Link::P2p(l) => l.acked(),
            _ => 0,
        }
    }
}

pub struct Io<'a> {
    pub links: &'a [Link<'a>],
    /// This rank's doorbell, where shared-memory partners wake it.
    pub bell: Option<crate::comm::cpu::shm::Bell>,
    pub spin: bool,
    pub reduce: ReduceFn,
    pub op: RedOp,
    pub es: usize,
    /// The most bytes one send call hands the kernel ([`SEND_SLICE`] by default).
    pub send_slice: usize,
    /// Single copy: the regions this rank's buffers live in and who mapped them, and the
    /// partners' regions mapped here ([`crate::comm::cpu::p2p`]).
    pub regions: Regions<'a>,
}

/// This rank's shared regions and its partners', for single-copy descriptors.
#[derive(Clone, Copy, Default)]
pub struct Regions<'a> {
    /// (id, address range here) of each of this rank's regions.
    pub mine: &'a [(u32, Range<usize>)],
    /// Per peer: the ids of this rank's regions it has mapped.
    pub mapped_by: &'a [Vec<u32>],
    /// Per peer: its regions mapped here.
    pub theirs: &'a [Vec<crate::comm::cpu::p2p::PeerRegion>],
}

impl Regions<'_> {
    /// Where `len` bytes at address `at` lie for peer `p`: in one of this rank's regions it
    /// has mapped, or (cross-memory attach) just at that address.
    pub(crate) fn desc(&self, p: usize, at: usize, len: usize) -> crate::comm::cpu::p2p::Desc {
        let mapped = self.mapped_by.get(p).map_or(&[][..], Vec::as_slice);
        self.mine
            .iter()
            .find(|(id, r)| r.start <= at && at + len <= r.end && mapped.contains(id))
            .map_or(
                crate::comm::cpu::p2p::Desc::Addr { addr: at, len },
                |(id, r)| crate::comm::cpu::p2p::Desc::Region {
                    id: *id,
                    off: at - r.start,
                    len,
                },
            )
    }
}

/// The most bytes one send call hands the kernel. A send of several MiB copies them all into
/// socket buffers before this rank reads or reduces anything, and by the time the peer copies
/// them out they have left the cache; slices this size alternate with the receives and keep
/// the bytes in flight in L2. Measured here (2 ranks, loopback, interleaved runs, medians,
/// busbw GB/s, unbounded vs 256 KiB): 16 MiB 2.38 vs 3.46, 64 MiB 1.70 vs 2.33, 256 MiB 1.75
/// vs 2.29; 192 KiB was as good, 384 KiB and up lost most of the gain.
pub const SEND_SLICE: usize = 256 << 10;

/// Bytes of staging per reducing peer: small enough to stay in L2 while it is reduced.
pub const STAGE_WINDOW: usize = 256 << 10;

/// One call in progress: the plan, the buffers and every op's state, which each transport's
/// [`PeerLink`] moves forward.
pub struct Run<'a> {
    pub(crate) plan: &'a Plan,
    pub(crate) io: &'a Io<'a>,
    pub(crate) input: Option<&'a [u8]>,
    pub(crate) buf: &'a mut [u8],
    pub(crate) send_stage: &'a mut [u8],
    pub(crate) staging: &'a mut [u8],
    pub(crate) st: Vec<State>,
    /// Per peer: the header it sent (as far as it has come).
    pub(crate) heard: Vec<[u8; crate::comm::cpu::header::LEN]>,
    /// Single copy, per partner: what it had read of this rank's memory before the current
    /// send (every earlier call's reads are acknowledged before that call returns), and how
    /// far into its current descriptor this rank has read.
    pub(crate) ack_base: Vec<u64>,
    pub(crate) desc_off: Vec<usize>,
    /// Per peer: its current send and receive (positions in the plan's streams).
    pub(crate) si: Vec<usize>,
    pub(crate) ri: Vec<usize>,
    remaining: usize,
}

impl<'a> Run<'a> {
    /// Op `i` of the plan.
    pub(crate) fn op(&self, i: usize) -> &'a PlanOp {
        &self.plan.ops[i]
    }
    /// How far op `i` may go, given its dependencies (relative bytes).
    pub(crate) fn limit(&self, i: usize) -> usize {
        limit(self.plan, &self.st, i)
    }
    /// Out of place, what op `i` reads from the input; in place, nothing.
    pub(crate) fn fresh(&self, i: usize) -> &'a [Range<usize>] {
        if self.input.is_some() {
            &self.plan.ops[i].fresh
        } else {
            &[]
        }
    }
    /// Where peer `p`'s staging window starts (0 for a peer this rank does not reduce from).
    pub(crate) fn window(&self, p: usize) -> usize {
        self.plan
            .reduce_peers
            .iter()
            .position(|&q| q == p)
            .map_or(0, |k| k * STAGE_WINDOW)
    }
    /// Both ends decide alike from the op's length (their plans agree: the header said so).
    pub(crate) fn single(&self, o: &PlanOp) -> bool {
        !o.header && o.range.len() >= crate::comm::cpu::cma::min()
    }
    /// The bytes `a..b` of op `i`'s range as a send reads them: from the input where they are
    /// still fresh there, else from the buffer; `b` is cut where the source changes.
    pub(crate) fn source(&self, i: usize, a: usize, b: usize) -> &[u8] {
        let (b, from_input) = run_from_input(self.fresh(i), a, b);
        match self.input {
            Some(src) if from_input => &src[a..b],
            _ => &self.buf[a..b],
        }
    }
    /// The bytes of send `i` from `from` to `to` (relative): the send stage where it was
    /// copied aside, else [`Run::source`].
    pub(crate) fn send_bytes(&self, i: usize, from: usize, to: usize) -> &[u8] {
        let o = &self.plan.ops[i];
        match o.stage_at {
            Some(at) => &self.send_stage[at + from..at + to],
            None => self.source(i, o.range.start + from, o.range.start + to),
        }
    }
    /// Out of place, where a reduction is the first write of `at..at + n`: the output starts
    /// as the input there.
    pub(crate) fn first_write(&mut self, i: usize, at: usize, n: usize) {
        if let Some(src) = self.input {
            for (r, _) in runs(self.fresh(i), at, at + n).filter(|(_, f)| *f) {
                self.buf[r.clone()].copy_from_slice(&src[r]);
            }
        }
    }
    /// Only one peer still has receives for this rank.
    pub(crate) fn single_recv_peer(&self) -> bool {
        self.plan
            .recvs
            .iter()
            .zip(&self.ri)
            .filter(|(q, i)| **i < q.len())
            .count()
            == 1
    }
    /// Peer `p`'s next receive after the current one, if any.
    pub(crate) fn next_recv(&self, p: usize) -> Option<usize> {
        self.plan.recvs[p].get(self.ri[p] + 1).copied()
    }
    /// Peer `p`'s next send after the current one, if any.
    pub(crate) fn next_send(&self, p: usize) -> Option<usize> {
        self.plan.sends[p].get(self.si[p] + 1).copied()
    }
}

/// What one pass over the peers saw: whether anything moved, and what the rank would wait on.
#[derive(Default)]
pub struct Pass {
    pub(crate) moved: bool,
    /// A receive moved in this pass: that may have freed a send, which only the next pass
    /// issues, so no receive after it may block.
    pub(crate) received: bool,
    /// Sends with bytes ready that could not all go.
    pub(crate) active_sends: usize,
    /// A shared-memory op waits for its partner: the doorbell will say.
    pub(crate) shm_wait: bool,
    /// Sockets to poll (handed to poll(2) as they are, no copy), and beside each the op and
    /// peer it waits for.
    pub(crate) waits: Vec<libc::pollfd>,
    waiting_for: Vec<(usize, usize)>,
    /// A send waits for a shaped link's bucket ([`crate::comm::cpu::pace`]): this long at most.
    pub(crate) paced: Option<std::time::Duration>,
}

impl Pass {
    /// Wait for `fd` to become readable (POLLIN) or writable (POLLOUT), for op `op` with `peer`.
    pub(crate) fn wait_fd(&mut self, fd: i32, events: i16, op: usize, peer: usize) {
        self.waits.push(libc::pollfd {
            fd,
            events,
            revents: 0,
        });
        self.waiting_for.push((op, peer));
    }
    /// A send found its shaped link's bucket empty: wake when `want` bytes may go.
    pub(crate) fn pace_wait(
        &mut self,
        pacer: Option<&std::sync::Mutex<crate::comm::cpu::pace::Pacer>>,
        want: usize,
    ) {
        let Some(p) = pacer else { return };
        let d = p
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .wait(want, std::time::Instant::now())
            .max(std::time::Duration::from_micros(50));
        self.paced = Some(self.paced.map_or(d, |x| x.min(d)));
    }
    /// Nothing to send and one peer to hear from: a receive may block (spinning first).
    pub(crate) fn may_block(&self, run: &Run) -> bool {
        !self.received && self.active_sends == 0 && self.waits.is_empty() && run.single_recv_peer()
    }
}

/// How far op i may go, given its dependencies (relative bytes).
fn limit(plan: &Plan, st: &[State], i: usize) -> usize {
    let mut lim = plan.ops[i].range.len();
    for d in &plan.ops[i].deps {
        match *d {
            Dep::Full(j) if st[j].done < plan.ops[j].range.len() => return 0,
            Dep::Staged(j) if !st[j].staged && st[j].done < plan.ops[j].range.len() => {
                return 0;
            }
            Dep::Stream(j) => lim = lim.min(st[j].done),
            _ => {}
        }
    }
    lim
}

/// Run the plan on `buf`: in place, or out of place from `input` (as long as `buf`, never
/// written). `send_stage` holds `plan.send_stage_len()` bytes; `staging` holds
/// `plan.reduce_peers() × STAGE_WINDOW`. `header` opens every link this call uses; a peer
/// whose header differs stops the run ([`EngineError::Mismatch`]) before any of its bytes
/// are taken. Each pass moves every peer's current send and receive as far as its link
/// allows; when nothing moved the rank waits (spin, doorbell or poll) for what it waits on.
pub fn execute(
    plan: &Plan,
    io: &Io,
    header: &[u8; crate::comm::cpu::header::LEN],
    input: Option<&[u8]>,
    buf: &mut [u8],
    send_stage: &mut [u8],
    staging: &mut [u8],
) -> Result<(), EngineError> {
    send_stage[plan.header_at..plan.header_at + crate::comm::cpu::header::LEN]
        .copy_from_slice(header);
    if let Some(src) = input {
        for r in &plan.upfront {
            buf[r.clone()].copy_from_slice(&src[r.clone()]);
        }
    }
    let peers = io.links.len().min(plan.sends.len());
    let mut run = Run {
        plan,
        io,
        input,
        buf,
        send_stage,
        staging,
        st: plan
            .ops
            .iter()
            .map(|o| State {
                staged: o.header && o.send,
                ..State::default()
            })
            .collect(),
        heard: vec![[0u8; crate::comm::cpu::header::LEN]; io.links.len()],
        ack_base: io.links.iter().map(PeerLink::acked).collect(),
        desc_off: vec![0; io.links.len()],
        si: vec![0; peers],
        ri: vec![0; peers],
        remaining: plan.ops.len(),
    };
    let mut waiter = Waiter::new(io.bell);
    let mut pass = Pass::default();
    while run.remaining > 0 {
        pass.moved = false;
        pass.received = false;
        pass.active_sends = 0;
        pass.shm_wait = false;
        pass.paced = None;
        pass.waits.clear();
        pass.waiting_for.clear();
        for p in 0..peers {
            send_to(&mut run, &mut pass, p)?;
        }
        for p in 0..peers {
            recv_from(&mut run, &mut pass, header, p)?;
        }
        if pass.moved || run.remaining == 0 {
            waiter.moved();
            continue;
        }
        waiter.wait(&run, &mut pass)?;
    }
    Ok(())
}

/// Peer `p`'s current send, as far as it goes: staged aside when its plan says so and its bytes
/// are all there, then handed to the link; a header sent whole lets the call's first bytes
/// follow at once where the link says so.
fn send_to(run: &mut Run, pass: &mut Pass, p: usize) -> Result<(), EngineError> {
    while let Some(&i) = run.plan.sends[p].get(run.si[p]) {
        let o = run.op(i);
        let lim = run.limit(i);
        if let Some(at) = o.stage_at
            && !run.st[i].staged
            && lim == o.range.len()
        {
            for (r, from_input) in runs(run.fresh(i), o.range.start, o.range.end) {
                let off = at + r.start - o.range.start;
                let from: &[u8] = match run.input {
                    Some(src) if from_input => src,
                    _ => run.buf,
                };
                run.send_stage[off..off + r.len()].copy_from_slice(&from[r]);
            }
            run.st[i].staged = true;
        }
        let ready = match o.stage_at {
            Some(_) if run.st[i].staged => o.range.len(),
            Some(_) => 0,
            None => lim,
        };
        let chain = run.io.links[p].send(run, pass, p, i, ready)?;
        if run.st[i].done < o.range.len() {
            return Ok(());
        }
        run.si[p] += 1;
        run.remaining -= 1;
        pass.moved = true;
        if !(chain && o.header) {
            return Ok(());
        }
    }
    Ok(())
}

/// Peer `p`'s current receive, as far as it goes: the header (checked against this rank's
/// own once whole), or the call's bytes as far as the dependencies allow.
fn recv_from(
    run: &mut Run,
    pass: &mut Pass,
    header: &[u8; crate::comm::cpu::header::LEN],
    p: usize,
) -> Result<(), EngineError> {
    let Some(&i) = run.plan.recvs[p].get(run.ri[p]) else {
        return Ok(());
    };
    let o = run.op(i);
    let len = o.range.len();
    if o.header {
        let k = run.io.links[p].recv_header(run, pass, p, i)?;
        run.st[i].got += k;
        run.st[i].done = run.st[i].got;
        if k > 0 {
            pass.moved = true;
            pass.received = true;
        }
        if run.st[i].done == len {
            if run.heard[p] != *header {
                return Err(EngineError::Mismatch {
                    peer: p,
                    theirs: run.heard[p],
                });
            }
            run.ri[p] += 1;
            run.remaining -= 1;
        }
        return Ok(());
    }
    let lim = run.limit(i);
    run.io.links[p].recv(run, pass, p, i, lim)?;
    if run.st[i].done == len {
        run.ri[p] += 1;
        run.remaining -= 1;
        pass.moved = true;
    }
    Ok(())
}

/// How a rank waits when a pass moved nothing: it busy-polls a little first (on a VM a
/// sleeping vCPU takes tens of µs to wake), then sleeps on its doorbell (shared memory), on its
/// sockets, or on both in turn, and now and then checks that its shared-memory partners are
/// still there.
struct Waiter {
    idle_since: Option<std::time::Instant>,
    /// When the shared-memory partners were last checked for being alive.
    checked: std::time::Instant,
    armed: Armed,
}

impl Waiter {
    fn new(bell: Option<crate::comm::cpu::shm::Bell>) -> Self {
        Self {
            idle_since: None,
            checked: std::time::Instant::now(),
            armed: Armed { bell, seen: None },
        }
    }

    fn moved(&mut self) {
        self.idle_since = None;
        self.armed.disarm();
    }

    fn wait(&mut self, run: &Run, pass: &mut Pass) -> Result<(), EngineError> {
        if run.io.spin
            && self
                .idle_since
                .get_or_insert_with(std::time::Instant::now)
                .elapsed()
                < SPIN
        {
            std::hint::spin_loop();
            return Ok(());
        }
        if let Some(d) = pass.paced {
            // A shaped link's bucket refills: sleep until it holds a send's bytes, or until a
            // socket has something sooner.
            let ms = d.as_millis().clamp(1, 1000) as i32;
            if pass.waits.is_empty() {
                std::thread::sleep(d.min(std::time::Duration::from_secs(1)));
                return Ok(());
            }
            return poll(pass, ms);
        }
        if pass.waits.is_empty() && !pass.shm_wait {
            // Nothing can move and nothing is waiting on the wire: the plan is inconsistent.
            return Err(EngineError::Stuck);
        }
        if pass.shm_wait {
            self.check_partners(run)?;
            match (run.io.bell, self.armed.seen) {
                // Arm, then look once more before sleeping.
                (Some(bell), None) => self.armed.seen = Some(bell.arm()),
                (Some(bell), Some(seen)) if pass.waits.is_empty() => {
                    bell.wait(seen, LIVENESS);
                    self.armed.disarm();
                }
                // Sockets and shared memory at once: poll briefly, then look again.
                _ => {
                    poll(pass, 1)?;
                }
            }
            return Ok(());
        }
        poll(pass, 1000)
    }

    /// A partner on shared memory cannot close a socket to say it died: look now and then (its
    /// TCP connection closes with it). One that has left matters only while this rank still
    /// needs it: a send still to go, or bytes still to come that its FIFO does not already hold
    /// (it may have written everything and left, its part of the collective done).
    fn check_partners(&mut self, run: &Run) -> Result<(), EngineError> {
        if self.checked.elapsed() <= LIVENESS {
            return Ok(());
        }
        self.checked = std::time::Instant::now();
        let (plan, links) = (run.plan, run.io.links);
        let needed = |p: usize| {
            if run.si[p] < plan.sends[p].len() {
                return true;
            }
            let owed: usize = plan.recvs[p][run.ri[p]..]
                .iter()
                .map(|&i| plan.ops[i].range.len() - run.st[i].got)
                .sum();
            owed > links[p].pending().unwrap_or(0)
        };
        match dead_shm_peer(links, needed) {
            Some(p) => {
                // The earliest op still open with it: where this rank is held up.
                let op = [plan.sends[p].get(run.si[p]), plan.recvs[p].get(run.ri[p])]
                    .into_iter()
                    .flatten()
                    .min()
                    .copied()
                    .unwrap_or(0);
                Err(EngineError::Closed { op, peer: p })
            }
            None => Ok(()),
        }
    }
}

/// Poll the pass's sockets for up to `ms`; a failed poll names the first op and peer it waited
/// for.
fn poll(pass: &mut Pass, ms: i32) -> Result<(), EngineError> {
    let fds = &mut pass.waits;
    // SAFETY: fds is a valid array of pollfd for the duration of the call.
    let rc = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
    if rc < 0 {
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            let (op, peer) = pass.waiting_for.first().copied().unwrap_or((0, 0));
            return Err(EngineError::Io { op, peer, err });
        }
    }
    Ok(())
}

/// A doorbell this rank has armed, disarmed when work turns up or the run ends (however).
struct Armed {
    bell: Option<crate::comm::cpu::shm::Bell>,
    seen: Option<u32>,
}

impl Armed {
    fn disarm(&mut self) {
        if self.seen.take().is_some()
            && let Some(b) = self.bell
        {
            b.disarm();
        }
    }
}

impl Drop for Armed {
    fn drop(&mut self) {
        self.disarm();
    }
}

/// How often a rank waiting on shared memory checks that its partners are still there.
const LIVENESS: std::time::Duration = std::time::Duration::from_millis(100);

/// A shared-memory partner this rank still `needed` whose TCP connection has closed (it exited
/// or was killed).
fn dead_shm_peer(links: &[Link], needed: impl Fn(usize) -> bool) -> Option<usize> {
    let watched: Vec<(usize, i32)> = links
        .iter()
        .enumerate()
        .filter_map(|(p, l)| l.liveness_fd().filter(|_| needed(p)).map(|fd| (p, fd)))
        .collect();
    let mut raw: Vec<libc::pollfd> = watched
        .iter()
        .map(|&(_, fd)| libc::pollfd {
            fd,
            events: libc::POLLRDHUP,
            revents: 0,
        })
        .collect();
    // SAFETY: raw is a valid array of pollfd for the call; timeout 0 does not block.
    let rc = unsafe { libc::poll(raw.as_mut_ptr(), raw.len() as libc::nfds_t, 0) };
    if rc <= 0 {
        return None;
    }
    raw.iter()
        .zip(&watched)
        .find(|(f, _)| f.revents & (libc::POLLRDHUP | libc::POLLHUP | libc::POLLERR) != 0)
        .map(|(_, &(p, _))| p)
}

/// How long a rank busy-polls before it sleeps in the kernel. On a VM a sleeping vCPU can
/// take hundreds of µs to wake; if one rank sleeps its peer waits, gives up and sleeps too,
/// and every operation pays two wake-ups. Spinning longer than a wake-up breaks that cycle.
/// Spinning happens only when every local rank has a core of its own.
pub(crate) const SPIN: std::time::Duration = std::time::Duration::from_micros(2000);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::{Algorithm, Collective, Spec};

    fn plan(coll: Collective, algo: Algorithm, world: usize, rank: usize) -> Plan {
        let s = Schedule::build(&Spec::new(coll, algo, world, 1000, 4)).expect("schedule");
        Plan::build(&s, rank)
    }

    /// A ring all-reduce out of place copies nothing up front: every byte of the output is
    /// written by a receive, and the first sends and reductions read the input directly.
    #[test]
    fn ring_all_reduce_out_of_place_copies_nothing_first() {
        for world in [2, 3, 5] {
            for rank in 0..world {
                let p = plan(Collective::AllReduce, Algorithm::Ring, world, rank);
                assert!(
                    p.upfront.is_empty(),
                    "N={world} rank {rank}: {:?}",
                    p.upfront
                );
                let first = p.ops.iter().find(|o| o.send).expect("a send");
                assert_eq!(first.fresh, vec![first.range.clone()]);
                // Each reduce-scatter step adds this rank's own input to what arrives; the
                // all-gather reads only what the reduce-scatter wrote.
                assert!(
                    p.ops
                        .iter()
                        .filter(|o| o.reduce)
                        .all(|o| o.fresh == vec![o.range.clone()])
                );
                assert!(
                    p.ops
                        .iter()
                        .filter(|o| o.step >= world - 1)
                        .all(|o| o.fresh.is_empty())
                );
            }
        }
    }

    /// The broadcast root never receives: its whole output is the input, copied up front; a
    /// naive all-reduce root reduces every peer's data in one step, so it copies first too.
    #[test]
    fn bytes_no_receive_writes_or_reduced_twice_in_one_step_are_copied_first() {
        let root = plan(Collective::Broadcast, Algorithm::Ring, 3, 0);
        assert_eq!(root.upfront, vec![0..4000]);
        let naive = plan(Collective::AllReduce, Algorithm::Naive, 3, 0);
        assert!(!naive.upfront.is_empty());
        assert!(
            naive
                .ops
                .iter()
                .filter(|o| o.reduce)
                .all(|o| o.fresh.is_empty())
        );
    }
}
