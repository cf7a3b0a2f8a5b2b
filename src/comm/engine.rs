//! The progress engine: one rank's part of a schedule, run as a dataflow instead of step by
//! step. Every send and receive of the whole schedule is an op with byte-exact dependencies on
//! earlier ops; an op moves as far as its dependencies allow. A chunk received (and reduced)
//! in one step is forwarded in the next while it is still arriving, as NCCL's ring does
//! (recvReduceSend / recvCopySend), so the ring is a pipeline, not a series of barriers, and
//! forwarded bytes leave from cache. The schedule still decides everything: who, what, when.

use std::io;
use std::ops::Range;

use super::reduce::ReduceFn;
use crate::collective::{Op as RedOp, Schedule};

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
struct PlanOp {
    send: bool,
    peer: usize,
    step: usize,
    range: Range<usize>,
    reduce: bool,
    deps: Vec<Dep>,
    /// Offset in the send stage: this send's data is copied aside before a same-step receive
    /// overwrites it.
    stage_at: Option<usize>,
    /// Out of place: the parts of `range` this op reads from the input rather than the output
    /// (a send of bytes no receive has written yet; a reduction that is the first write).
    fresh: Vec<Range<usize>>,
    /// The call's header ([`super::header`]), first on its link: a send reads it from the
    /// send stage, a receive lands aside and is checked against this rank's own.
    header: bool,
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
                    range: 0..super::header::LEN,
                    reduce: false,
                    deps: Vec::new(),
                    stage_at: send.then_some(stage),
                    fresh: Vec::new(),
                    header: true,
                });
            }
        }
        let header_at = stage;
        let stage = stage + super::header::LEN;
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
        theirs: [u8; super::header::LEN],
    },
}

/// Per-run state of one op.
#[derive(Clone, Default)]
struct State {
    /// Send: bytes sent. Receive: bytes placed (copied, or reduced) into the buffer.
    done: usize,
    /// Receive: bytes read off the socket (for a reduction some wait in the staging window).
    got: usize,
    staged: bool,
}

impl State {
    /// A receive read `k` more bytes: a copy has placed them, a reduction holds them in its
    /// staging window until they are reduced.
    fn received(&mut self, k: usize, reduce: bool) {
        self.got += k;
        if !reduce {
            self.done = self.got;
        }
    }
}

/// How this rank reaches one peer: a TCP socket, or (same node) a pair of shared-memory
/// FIFOs. The schedule decides what moves; the link only where the bytes go.
#[derive(Clone, Copy)]
pub enum Link<'a> {
    None,
    Tcp(i32),
    Shm(&'a super::shm::Pipe),
}

pub struct Io<'a> {
    pub links: &'a [Link<'a>],
    /// This rank's doorbell, where shared-memory partners wake it.
    pub bell: Option<super::shm::Bell>,
    pub spin: bool,
    pub reduce: ReduceFn,
    pub op: RedOp,
    pub es: usize,
    /// The most bytes one send call hands the kernel ([`SEND_SLICE`] by default).
    pub send_slice: usize,
    /// Single copy: the regions this rank's buffers live in and who mapped them, and the
    /// partners' regions mapped here ([`super::p2p`]).
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
    pub theirs: &'a [Vec<super::p2p::PeerRegion>],
}

impl Regions<'_> {
    /// Where `len` bytes at address `at` lie for peer `p`: in one of this rank's regions it
    /// has mapped, or (cross-memory attach) just at that address.
    fn desc(&self, p: usize, at: usize, len: usize) -> super::p2p::Desc {
        let mapped = self.mapped_by.get(p).map_or(&[][..], Vec::as_slice);
        self.mine
            .iter()
            .find(|(id, r)| r.start <= at && at + len <= r.end && mapped.contains(id))
            .map_or(super::p2p::Desc::Addr { addr: at, len }, |(id, r)| {
                super::p2p::Desc::Region {
                    id: *id,
                    off: at - r.start,
                    len,
                }
            })
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

/// Run the plan on `buf`: in place, or out of place from `input` (as long as `buf`, never
/// written). `send_stage` holds `plan.send_stage_len()` bytes; `staging` holds
/// `plan.reduce_peers() × STAGE_WINDOW`. `header` opens every link this call uses; a peer
/// whose header differs stops the run ([`EngineError::Mismatch`]) before any of its bytes
/// are taken.
pub fn execute(
    plan: &Plan,
    io: &Io,
    header: &[u8; super::header::LEN],
    input: Option<&[u8]>,
    buf: &mut [u8],
    send_stage: &mut [u8],
    staging: &mut [u8],
) -> Result<(), EngineError> {
    send_stage[plan.header_at..plan.header_at + super::header::LEN].copy_from_slice(header);
    let mut heard = vec![[0u8; super::header::LEN]; io.links.len()];
    // Single copy: per partner, what it had read of this rank's memory before this call
    // (every earlier call's reads are acknowledged before that call returns), and how far
    // into its current descriptor this rank has read.
    let mut ack_base: Vec<u64> = io
        .links
        .iter()
        .map(|l| match l {
            Link::Shm(pipe) => pipe.tx.acked(),
            _ => 0,
        })
        .collect();
    let mut desc_off = vec![0usize; io.links.len()];
    // Both ends decide alike from the op's length (their plans agree: the header said so).
    let single = |o: &PlanOp| !o.header && o.range.len() >= super::cma::min();
    if let Some(src) = input {
        for r in &plan.upfront {
            buf[r.clone()].copy_from_slice(&src[r.clone()]);
        }
    }
    // Out of place, what an op reads from the input; in place, nothing.
    let fresh = |i: usize| -> &[Range<usize>] {
        if input.is_some() {
            &plan.ops[i].fresh
        } else {
            &[]
        }
    };
    let n = plan.ops.len();
    let mut st = vec![State::default(); n];
    for (s, o) in st.iter_mut().zip(&plan.ops) {
        s.staged = o.header && o.send;
    }
    let es = io.es.max(1);
    // Per peer: the ops in stream order (sends and receives separately).
    let peers = io.links.len().min(plan.sends.len());
    let (sends, recvs) = (&plan.sends, &plan.recvs);
    let (mut si, mut ri) = (vec![0usize; peers], vec![0usize; peers]);
    // Armed: this rank may sleep on its doorbell (and the count it saw when arming).
    let mut armed = Armed {
        bell: io.bell,
        seen: None,
    };
    let mut remaining = n;
    let mut pollfds: Vec<libc::pollfd> = Vec::new();
    let window = |peer: usize| {
        plan.reduce_peers
            .iter()
            .position(|&p| p == peer)
            .map_or(0, |k| k * STAGE_WINDOW)
    };
    // How far op i may go, given its dependencies (relative bytes).
    let limit = |st: &[State], i: usize| -> usize {
        let len = plan.ops[i].range.len();
        let mut lim = len;
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
    };
    let mut idle_since: Option<std::time::Instant> = None;
    // When the shared-memory partners were last checked for being alive.
    let mut checked = std::time::Instant::now();
    while remaining > 0 {
        let mut moved = false;
        // Set when a shared-memory op waits for its partner: the doorbell will say.
        let mut shm_wait = false;
        pollfds.clear();
        let mut active_recvs = 0;
        let mut active_sends = 0;
        'peers: for p in 0..peers {
            // The current send to p; a header sent whole is followed at once by the call's
            // first bytes (on TCP in the same segment: the header went with MSG_MORE).
            let mut again = true;
            while again {
                again = false;
                let Some(&i) = sends[p].get(si[p]) else {
                    continue 'peers;
                };
                let o = &plan.ops[i];
                let lim = limit(&st, i);
                if let Some(at) = o.stage_at
                    && !st[i].staged
                    && lim == o.range.len()
                {
                    for (r, from_input) in runs(fresh(i), o.range.start, o.range.end) {
                        let from: &[u8] = match input {
                            Some(src) if from_input => src,
                            _ => buf,
                        };
                        let off = at + r.start - o.range.start;
                        send_stage[off..off + r.len()].copy_from_slice(&from[r]);
                    }
                    st[i].staged = true;
                }
                let ready = if o.stage_at.is_some() {
                    if st[i].staged { o.range.len() } else { 0 }
                } else {
                    lim
                };
                if let Link::Shm(pipe) = io.links[p]
                    && pipe.cma_to
                    && single(o)
                {
                    // Post where the ready bytes lie; the send is done when the partner has
                    // read them all, and not before: until then they must not change.
                    let (len, posted) = (o.range.len(), st[i].got);
                    if ready > posted && (ready - posted >= super::cma::QUANTUM || ready == len) {
                        let (at, n) = match o.stage_at {
                            Some(at) => (send_stage[at + posted..].as_ptr(), ready - posted),
                            None => {
                                let a = o.range.start + posted;
                                let (b, from_input) =
                                    run_from_input(fresh(i), a, o.range.start + ready);
                                let from: &[u8] = match input {
                                    Some(src) if from_input => src,
                                    _ => buf,
                                };
                                (from[a..b].as_ptr(), b - a)
                            }
                        };
                        let n = n.min(super::cma::MAX_DESC);
                        let d = io.regions.desc(p, at as usize, n);
                        if pipe.tx.push_whole(&d.encode()) {
                            pipe.peer_bell.ring();
                            st[i].got += n;
                            moved = true;
                        }
                    }
                    let read = (pipe.tx.acked().wrapping_sub(ack_base[p]) as usize).min(len);
                    if read > st[i].done {
                        st[i].done = read;
                        moved = true;
                    }
                    if st[i].done == len {
                        ack_base[p] += len as u64;
                        si[p] += 1;
                        remaining -= 1;
                        moved = true;
                    } else {
                        active_sends += 1;
                        shm_wait = true;
                    }
                    continue 'peers;
                }
                if ready > st[i].done {
                    let fd = match io.links[p] {
                        Link::Tcp(fd) => Some(fd),
                        Link::Shm(_) => None,
                        Link::None => {
                            return Err(EngineError::Io {
                                op: i,
                                peer: p,
                                err: io::ErrorKind::NotConnected.into(),
                            });
                        }
                    };
                    let data = match o.stage_at {
                        Some(at) => &send_stage[at + st[i].done..at + ready],
                        None => {
                            let a = o.range.start + st[i].done;
                            let (b, from_input) =
                                run_from_input(fresh(i), a, o.range.start + ready);
                            match input {
                                Some(src) if from_input => &src[a..b],
                                _ => &buf[a..b],
                            }
                        }
                    };
                    let data = &data[..data.len().min(io.send_slice)];
                    let Some(fd) = fd else {
                        if let Link::Shm(pipe) = io.links[p] {
                            let k = pipe.tx.push(data);
                            if k > 0 {
                                pipe.peer_bell.ring();
                                st[i].done += k;
                                moved = true;
                            }
                            if st[i].done < ready {
                                active_sends += 1;
                                shm_wait = true;
                            }
                        }
                        if st[i].done == o.range.len() {
                            si[p] += 1;
                            remaining -= 1;
                            moved = true;
                        }
                        continue 'peers;
                    };
                    // The header goes out corked when the call's first bytes follow at once.
                    let more = o.header
                        && sends[p].get(si[p] + 1).is_some_and(|&j| {
                            let l = limit(&st, j);
                            if plan.ops[j].stage_at.is_some() {
                                l == plan.ops[j].range.len()
                            } else {
                                l > 0
                            }
                        });
                    // Better still, header and first bytes in one call (the next op reads the
                    // buffer directly; one staged aside goes by MSG_MORE above).
                    let next = sends[p]
                        .get(si[p] + 1)
                        .copied()
                        .filter(|&j| more && plan.ops[j].stage_at.is_none() && st[j].done == 0);
                    let second: &[u8] = match next {
                        Some(j) => {
                            let oj = &plan.ops[j];
                            let a = oj.range.start;
                            let (b, from_input) = run_from_input(fresh(j), a, a + limit(&st, j));
                            let from: &[u8] = match input {
                                Some(src) if from_input => src,
                                _ => buf,
                            };
                            &from[a..b.min(a + io.send_slice)]
                        }
                        None => &[],
                    };
                    let sent = if second.is_empty() {
                        sys_send_flags(fd, data, more)
                    } else {
                        sys_send_two(fd, data, second)
                    };
                    match sent {
                        Ok(n) => {
                            let k = n.min(data.len());
                            st[i].done += k;
                            if let Some(j) = next.filter(|_| n > k) {
                                st[j].done += n - k;
                            }
                            moved |= n > 0;
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                        Err(err) => {
                            return Err(EngineError::Io {
                                op: i,
                                peer: p,
                                err,
                            });
                        }
                    }
                    if st[i].done < ready {
                        active_sends += 1;
                        pollfds.push(libc::pollfd {
                            fd,
                            events: libc::POLLOUT,
                            revents: 0,
                        });
                    }
                }
                if st[i].done == o.range.len() {
                    si[p] += 1;
                    remaining -= 1;
                    moved = true;
                    again = o.header;
                }
            }
        }
        // Set once a receive has moved in this pass: that may have freed a send, which only
        // the next pass issues, so no receive after it may block.
        let mut received = false;
        for p in 0..peers {
            let Some(&i) = recvs[p].get(ri[p]) else {
                continue;
            };
            let o = &plan.ops[i];
            let len = o.range.len();
            if o.header {
                let slot = &mut heard[p][st[i].got..];
                let k = match io.links[p] {
                    Link::Shm(pipe) => {
                        let k = pipe.rx.pop_into(slot);
                        if k > 0 {
                            pipe.peer_bell.ring();
                        } else {
                            shm_wait = true;
                        }
                        k
                    }
                    Link::Tcp(fd) => {
                        // The call's first bytes usually came in the same segment: read them
                        // with the header, one system call (where they may land yet).
                        let next = recvs[p].get(ri[p] + 1).copied();
                        let (dst, extra_room): (&mut [u8], usize) = match next {
                            Some(j) if plan.ops[j].reduce => {
                                let w = window(p);
                                let room = (STAGE_WINDOW - (st[j].got - st[j].done))
                                    .min(plan.ops[j].range.len() - st[j].got);
                                let at = w + st[j].got - st[j].done;
                                match staging.get_mut(at..at + room) {
                                    Some(d) => (d, room),
                                    None => (&mut [], 0),
                                }
                            }
                            Some(j) => {
                                let room = limit(&st, j).saturating_sub(st[j].got);
                                let at = plan.ops[j].range.start + st[j].got;
                                (&mut buf[at..at + room], room)
                            }
                            None => (&mut [], 0),
                        };
                        // Nothing to send and one peer to hear from: spin, then block, as
                        // for the call's bytes below.
                        let only = !received
                            && active_sends == 0
                            && pollfds.is_empty()
                            && single_recv_peer(recvs, &ri);
                        let r = if only && io.spin {
                            recv_two_spin_then_block(fd, slot, dst)
                        } else {
                            sys_recv_two(fd, slot, dst, !only)
                        };
                        let n = took(r, fd, (i, p), &mut pollfds)?;
                        let k = n.min(len - st[i].got);
                        if let Some(j) = next.filter(|_| n > k && extra_room > 0) {
                            st[j].received(n - k, plan.ops[j].reduce);
                        }
                        k
                    }
                    Link::None => {
                        return Err(EngineError::Io {
                            op: i,
                            peer: p,
                            err: io::ErrorKind::NotConnected.into(),
                        });
                    }
                };
                st[i].got += k;
                st[i].done = st[i].got;
                if k > 0 {
                    moved = true;
                    received = true;
                } else {
                    active_recvs += 1;
                }
                if st[i].done == len {
                    if heard[p] != *header {
                        return Err(EngineError::Mismatch {
                            peer: p,
                            theirs: heard[p],
                        });
                    }
                    ri[p] += 1;
                    remaining -= 1;
                }
                continue;
            }
            let lim = limit(&st, i);
            if let Link::Shm(pipe) = io.links[p] {
                // Single copy for a large message from a partner whose memory this rank
                // reads; the FIFO for the rest.
                let k = match pipe.cma_from {
                    Some(pid) if single(o) => {
                        // A reduction by cross-memory attach lands in this peer's staging window
                        // (there is one only for peers this rank reduces from).
                        let w = window(p);
                        let win = match staging.get_mut(w..w + STAGE_WINDOW) {
                            Some(win) if o.reduce => win,
                            _ => &mut [],
                        };
                        let theirs = io.regions.theirs.get(p).map_or(&[][..], Vec::as_slice);
                        recv_cma(
                            pipe,
                            (pid, theirs),
                            o,
                            &mut st[i],
                            &mut desc_off[p],
                            lim,
                            io,
                            input,
                            fresh(i),
                            buf,
                            win,
                        )
                        .map_err(|err| match err.raw_os_error() {
                            Some(libc::ESRCH) => EngineError::Closed { op: i, peer: p },
                            _ => EngineError::Io {
                                op: i,
                                peer: p,
                                err,
                            },
                        })?
                    }
                    _ => recv_shm(pipe, o, &mut st[i], lim, io, input, fresh(i), buf),
                };
                if k > 0 {
                    pipe.peer_bell.ring();
                    moved = true;
                    received = true;
                } else if st[i].done < lim {
                    active_recvs += 1;
                    shm_wait = true;
                }
                if st[i].done == len {
                    ri[p] += 1;
                    remaining -= 1;
                    moved = true;
                }
                continue;
            }
            let Link::Tcp(fd) = io.links[p] else {
                return Err(EngineError::Io {
                    op: i,
                    peer: p,
                    err: io::ErrorKind::NotConnected.into(),
                });
            };
            let w = window(p);
            // Where the next bytes may land.
            let (target, room) = if o.reduce {
                let held = st[i].got - st[i].done;
                let room = (STAGE_WINDOW - held).min(len - st[i].got);
                (w + held, room)
            } else {
                (0, lim.saturating_sub(st[i].got))
            };
            if room > 0 {
                active_recvs += 1;
                let dst = if o.reduce {
                    &mut staging[target..target + room]
                } else {
                    &mut buf[o.range.start + st[i].got..o.range.start + st[i].got + room]
                };
                // Nothing to send and one peer to hear from: a (spinning, then) blocking read
                // saves a poll and a wake-up, which is most of a small message's latency. Not
                // after another receive moved in this pass: a send it freed (to this very peer,
                // perhaps, which may be blocked reading from us) goes out first.
                let only = !received
                    && active_sends == 0
                    && pollfds.is_empty()
                    && single_recv_peer(recvs, &ri);
                let r = match (only, io.spin) {
                    (true, true) => recv_spin_then_block(fd, dst),
                    (true, false) => sys_recv(fd, dst, false),
                    _ => sys_recv(fd, dst, true),
                };
                let k = took(r, fd, (i, p), &mut pollfds)?;
                if k > 0 {
                    st[i].received(k, o.reduce);
                    moved = true;
                    received = true;
                }
            }
            if o.reduce {
                // Reduce every whole element that has arrived, as far as the buffer allows.
                let held = st[i].got - st[i].done;
                let whole = (held / es * es).min(lim.saturating_sub(st[i].done) / es * es);
                if whole > 0 {
                    let win = &mut staging[w..w + held];
                    let at = o.range.start + st[i].done;
                    // Where this is the first write, the output starts as the input.
                    if let Some(src) = input {
                        for (r, _) in runs(fresh(i), at, at + whole).filter(|(_, f)| *f) {
                            buf[r.clone()].copy_from_slice(&src[r]);
                        }
                    }
                    (io.reduce)(io.op, &mut buf[at..at + whole], &win[..whole]);
                    win.copy_within(whole..held, 0);
                    st[i].done += whole;
                    moved = true;
                    received = true;
                }
            }
            if st[i].done == len {
                ri[p] += 1;
                remaining -= 1;
                moved = true;
            }
        }
        if moved || remaining == 0 {
            idle_since = None;
            armed.disarm();
            continue;
        }
        // Busy-poll a little before sleeping: on a VM a sleeping vCPU takes tens of µs to wake.
        if io.spin
            && idle_since
                .get_or_insert_with(std::time::Instant::now)
                .elapsed()
                < SPIN
        {
            std::hint::spin_loop();
            continue;
        }
        if pollfds.is_empty() && !shm_wait {
            // Nothing can move and nothing is waiting on the wire: the plan is inconsistent.
            let _ = (active_recvs, active_sends);
            return Err(EngineError::Stuck);
        }
        if shm_wait {
            // A partner on shared memory cannot close a socket to say it died: look now and
            // then (its TCP connection closes with it).
            if checked.elapsed() > LIVENESS {
                checked = std::time::Instant::now();
                // A partner that has left matters only while this rank still needs it: a send
                // still to go, or bytes still to come that its FIFO does not already hold (it
                // may have written everything and left, its part of the collective done).
                let needed = |p: usize| {
                    if si[p] < sends[p].len() {
                        return true;
                    }
                    let owed: usize = recvs[p][ri[p]..]
                        .iter()
                        .map(|&i| plan.ops[i].range.len() - st[i].got)
                        .sum();
                    match io.links[p] {
                        Link::Shm(pipe) => owed > pipe.rx.pending(),
                        _ => owed > 0,
                    }
                };
                if let Some(p) = dead_shm_peer(io.links, needed) {
                    // The earliest op still open with it: where this rank is held up.
                    let op = [sends[p].get(si[p]), recvs[p].get(ri[p])]
                        .into_iter()
                        .flatten()
                        .min()
                        .copied()
                        .unwrap_or(0);
                    return Err(EngineError::Closed { op, peer: p });
                }
            }
            match (io.bell, armed.seen) {
                // Arm, then look once more before sleeping.
                (Some(bell), None) => armed.seen = Some(bell.arm()),
                (Some(bell), Some(seen)) if pollfds.is_empty() => {
                    bell.wait(seen, LIVENESS);
                    armed.disarm();
                }
                _ => {
                    // Sockets and shared memory at once: poll briefly, then look again.
                    // SAFETY: pollfds is a valid array of pollfd for the call.
                    unsafe { libc::poll(pollfds.as_mut_ptr(), pollfds.len() as libc::nfds_t, 1) };
                }
            }
            continue;
        }
        // SAFETY: pollfds is a valid array of pollfd for the duration of the call.
        let rc = unsafe { libc::poll(pollfds.as_mut_ptr(), pollfds.len() as libc::nfds_t, 1000) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(EngineError::Io {
                    op: 0,
                    peer: 0,
                    err: e,
                });
            }
        }
    }
    Ok(())
}

/// A doorbell this rank has armed, disarmed when work turns up or the run ends (however).
struct Armed {
    bell: Option<super::shm::Bell>,
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
    let mut fds: Vec<(usize, libc::pollfd)> = links
        .iter()
        .enumerate()
        .filter_map(|(p, l)| match l {
            Link::Shm(pipe) if needed(p) => Some((
                p,
                libc::pollfd {
                    fd: pipe.fd,
                    events: libc::POLLRDHUP,
                    revents: 0,
                },
            )),
            _ => None,
        })
        .collect();
    let mut raw: Vec<libc::pollfd> = fds.iter().map(|(_, f)| *f).collect();
    // SAFETY: raw is a valid array of pollfd for the call; timeout 0 does not block.
    let rc = unsafe { libc::poll(raw.as_mut_ptr(), raw.len() as libc::nfds_t, 0) };
    if rc <= 0 {
        return None;
    }
    for (k, f) in raw.iter().enumerate() {
        fds[k].1.revents = f.revents;
    }
    fds.iter()
        .find(|(_, f)| f.revents & (libc::POLLRDHUP | libc::POLLHUP | libc::POLLERR) != 0)
        .map(|(p, _)| *p)
}

/// One pass of a receive from a shared-memory partner: a copy lands straight in the buffer;
/// a reduction reads the partner's bytes where they lie in the FIFO and adds them into the
/// buffer, with no staging copy. Returns the bytes taken from the FIFO.
#[allow(clippy::too_many_arguments)]
fn recv_shm(
    pipe: &super::shm::Pipe,
    o: &PlanOp,
    st: &mut State,
    lim: usize,
    io: &Io,
    input: Option<&[u8]>,
    fresh: &[Range<usize>],
    buf: &mut [u8],
) -> usize {
    let es = io.es.max(1);
    // A slice at a time, so the sender gets room back while its bytes are still in cache.
    let lim = lim.min(st.done.saturating_add(io.send_slice.max(es)));
    if !o.reduce {
        let room = lim.saturating_sub(st.got);
        if room == 0 {
            return 0;
        }
        let at = o.range.start + st.got;
        let k = pipe.rx.pop_into(&mut buf[at..at + room]);
        st.got += k;
        st.done = st.got;
        return k;
    }
    // Whole elements only. Ops of other element sizes went before on this FIFO, so an element
    // may straddle its wrap: that one is put together aside.
    let room = lim.saturating_sub(st.done) / es * es;
    let (a, b) = pipe.rx.peek(room);
    let whole = (a.len() + b.len()) / es * es;
    if whole == 0 {
        return 0;
    }
    let at = o.range.start + st.done;
    if let Some(src) = input {
        for (r, _) in runs(fresh, at, at + whole).filter(|(_, f)| *f) {
            buf[r.clone()].copy_from_slice(&src[r]);
        }
    }
    let fa = a.len().min(whole) / es * es;
    (io.reduce)(io.op, &mut buf[at..at + fa], &a[..fa]);
    let mut from_b = 0;
    if whole > fa && a.len() > fa {
        // The straddling element: its head ends `a`, its tail starts `b`.
        let mut one = [0u8; 16];
        let head = a.len() - fa;
        one[..head].copy_from_slice(&a[fa..]);
        one[head..es].copy_from_slice(&b[..es - head]);
        (io.reduce)(io.op, &mut buf[at + fa..at + fa + es], &one[..es]);
        from_b = es - head;
    }
    let done_a = (fa + if a.len() > fa && whole > fa { es } else { 0 }).min(whole);
    if whole > done_a {
        (io.reduce)(
            io.op,
            &mut buf[at + done_a..at + whole],
            &b[from_b..from_b + whole - done_a],
        );
    }
    pipe.rx.consume(whole);
    st.done += whole;
    st.got = st.done;
    whole
}

/// One pass of a single-copy receive: take the partner's next descriptor from the FIFO and
/// read as much of it as the buffer allows now: out of the partner's region mapped here
/// (copied, or reduced straight from it), or with cross-memory attach (into the buffer, or
/// through this peer's staging window for a reduction). Acknowledges what it read; the
/// descriptor leaves the FIFO once read whole. Returns the bytes read.
#[allow(clippy::too_many_arguments)]
fn recv_cma(
    pipe: &super::shm::Pipe,
    (pid, theirs): (libc::pid_t, &[super::p2p::PeerRegion]),
    o: &PlanOp,
    st: &mut State,
    off: &mut usize,
    lim: usize,
    io: &Io,
    input: Option<&[u8]>,
    fresh: &[Range<usize>],
    buf: &mut [u8],
    win: &mut [u8],
) -> io::Result<usize> {
    use super::p2p::{DESC, Desc};
    let bad = |what: String| io::Error::new(io::ErrorKind::InvalidData, what);
    let (a, b) = pipe.rx.peek(DESC);
    if a.len() + b.len() < DESC {
        return Ok(0);
    }
    let mut raw = [0u8; DESC];
    raw[..a.len()].copy_from_slice(a);
    raw[a.len()..].copy_from_slice(b);
    let d = Desc::decode(&raw).ok_or_else(|| bad(format!("not a descriptor: {raw:02x?}")))?;
    let len = o.range.len();
    if d.is_empty() || *off >= d.len() || d.len() - *off > len - st.got {
        return Err(bad(format!(
            "a descriptor of {} bytes for a message with {} to go",
            d.len(),
            len - st.got
        )));
    }
    let d = d.skip(*off);
    // The partner's bytes where they lie, when its region is mapped here.
    let mapped = |k: usize| -> io::Result<Option<&[u8]>> {
        match d {
            Desc::Addr { .. } => Ok(None),
            Desc::Region { id, off, .. } => theirs
                .iter()
                .find(|r| r.id == id)
                .and_then(|r| r.get(off, k))
                .map(Some)
                .ok_or_else(|| bad(format!("region {id} bytes {off}+{k} are not mapped here"))),
        }
    };
    let k = if o.reduce {
        let es = io.es.max(1);
        let mut k = d.len().min(lim.saturating_sub(st.done));
        if mapped(0)?.is_none() {
            k = k.min(win.len());
        }
        let k = k / es * es;
        if k == 0 {
            return Ok(0);
        }
        let at = o.range.start + st.done;
        if let Some(src) = input {
            for (r, _) in runs(fresh, at, at + k).filter(|(_, f)| *f) {
                buf[r.clone()].copy_from_slice(&src[r]);
            }
        }
        let src: &[u8] = match (mapped(k)?, d) {
            (Some(s), _) => s,
            (None, Desc::Addr { addr, .. }) => {
                super::cma::read(pid, &mut win[..k], addr)?;
                &win[..k]
            }
            (None, Desc::Region { .. }) => return Err(bad("unmapped region".into())),
        };
        (io.reduce)(io.op, &mut buf[at..at + k], src);
        st.done += k;
        st.got = st.done;
        k
    } else {
        let k = d.len().min(lim.saturating_sub(st.got));
        if k == 0 {
            return Ok(0);
        }
        let at = o.range.start + st.got;
        match (mapped(k)?, d) {
            (Some(s), _) => buf[at..at + k].copy_from_slice(s),
            (None, Desc::Addr { addr, .. }) => super::cma::read(pid, &mut buf[at..at + k], addr)?,
            (None, Desc::Region { .. }) => return Err(bad("unmapped region".into())),
        }
        st.got += k;
        st.done = st.got;
        k
    };
    *off += k;
    pipe.rx.ack(k);
    if k == d.len() {
        pipe.rx.consume(DESC);
        *off = 0;
    }
    Ok(k)
}

/// What one receive from a socket took: its bytes; 0 when it would block (the socket joins the
/// poll); the peer's end of the stream, or any other error, stops the run at `(op, peer)`.
fn took(
    r: io::Result<usize>,
    fd: i32,
    (op, peer): (usize, usize),
    pollfds: &mut Vec<libc::pollfd>,
) -> Result<usize, EngineError> {
    match r {
        Ok(0) => Err(EngineError::Closed { op, peer }),
        Ok(k) => Ok(k),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
            pollfds.push(libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            });
            Ok(0)
        }
        Err(err) => Err(EngineError::Io { op, peer, err }),
    }
}

fn single_recv_peer(recvs: &[Vec<usize>], ri: &[usize]) -> bool {
    recvs.iter().zip(ri).filter(|(q, i)| **i < q.len()).count() == 1
}

/// How long a rank busy-polls before it sleeps in the kernel. On a VM a sleeping vCPU can
/// take hundreds of µs to wake; if one rank sleeps its peer waits, gives up and sleeps too,
/// and every operation pays two wake-ups. Spinning longer than a wake-up breaks that cycle.
/// Spinning happens only when every local rank has a core of its own.
const SPIN: std::time::Duration = std::time::Duration::from_micros(2000);

/// Spin briefly on a nonblocking receive, then block.
fn recv_spin_then_block(fd: i32, data: &mut [u8]) -> io::Result<usize> {
    let start = std::time::Instant::now();
    let mut k = 0u32;
    loop {
        match sys_recv(fd, data, true) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            other => return other,
        }
        k += 1;
        if k.is_multiple_of(16) && start.elapsed() > SPIN {
            return sys_recv(fd, data, false);
        }
        std::hint::spin_loop();
    }
}

/// One nonblocking send (a full socket buffer is `WouldBlock`).
pub(super) fn sys_send(fd: i32, data: &[u8]) -> io::Result<usize> {
    sys_send_flags(fd, data, false)
}

/// [`sys_send`], with `more`: more bytes follow at once, so the kernel may hold these for the
/// same segment (MSG_MORE).
fn sys_send_flags(fd: i32, data: &[u8], more: bool) -> io::Result<usize> {
    let more = if more { libc::MSG_MORE } else { 0 };
    // SAFETY: data is a valid readable slice; MSG_NOSIGNAL turns SIGPIPE into EPIPE.
    let n = unsafe {
        libc::send(
            fd,
            data.as_ptr().cast(),
            data.len(),
            libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL | more,
        )
    };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// One nonblocking send of `a` then `b` (writev); a full socket buffer is `WouldBlock`.
fn sys_send_two(fd: i32, a: &[u8], b: &[u8]) -> io::Result<usize> {
    let iov = [
        libc::iovec {
            iov_base: a.as_ptr().cast_mut().cast(),
            iov_len: a.len(),
        },
        libc::iovec {
            iov_base: b.as_ptr().cast_mut().cast(),
            iov_len: b.len(),
        },
    ];
    // SAFETY: msghdr is a plain C struct for which all zero bytes is a valid value.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov.as_ptr().cast_mut();
    msg.msg_iovlen = 2;
    // SAFETY: both iovecs describe readable slices borrowed for the call (sendmsg does not
    // write through them); MSG_NOSIGNAL turns SIGPIPE into EPIPE.
    let n = unsafe { libc::sendmsg(fd, &msg, libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// [`recv_spin_then_block`] into `a`, then `b`.
fn recv_two_spin_then_block(fd: i32, a: &mut [u8], b: &mut [u8]) -> io::Result<usize> {
    let start = std::time::Instant::now();
    let mut k = 0u32;
    loop {
        match sys_recv_two(fd, a, b, true) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            other => return other,
        }
        k += 1;
        if k.is_multiple_of(16) && start.elapsed() > SPIN {
            return sys_recv_two(fd, a, b, false);
        }
        std::hint::spin_loop();
    }
}

/// One receive into `a`, then `b` (readv), nonblocking or not, retried on EINTR.
fn sys_recv_two(fd: i32, a: &mut [u8], b: &mut [u8], nonblocking: bool) -> io::Result<usize> {
    let iov = [
        libc::iovec {
            iov_base: a.as_mut_ptr().cast(),
            iov_len: a.len(),
        },
        libc::iovec {
            iov_base: b.as_mut_ptr().cast(),
            iov_len: b.len(),
        },
    ];
    // SAFETY: msghdr is a plain C struct for which all zero bytes is a valid value (no name,
    // no control data, no flags).
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov.as_ptr().cast_mut();
    msg.msg_iovlen = 2;
    loop {
        // SAFETY: both iovecs describe writable slices borrowed for the call; msg points at
        // them and at nothing else.
        let flags = if nonblocking { libc::MSG_DONTWAIT } else { 0 };
        let n = unsafe { libc::recvmsg(fd, &mut msg, flags) };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// One receive, nonblocking or not, retried on EINTR.
pub(super) fn sys_recv(fd: i32, data: &mut [u8], nonblocking: bool) -> io::Result<usize> {
    let flags = if nonblocking { libc::MSG_DONTWAIT } else { 0 };
    loop {
        // SAFETY: data is a valid writable slice of data.len() bytes.
        let n = unsafe { libc::recv(fd, data.as_mut_ptr().cast(), data.len(), flags) };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

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
