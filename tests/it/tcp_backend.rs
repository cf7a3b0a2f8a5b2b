//! The TCP backend in-process: ranks as threads around a real store and real sockets, so the
//! test can stand between them. A stranger without the job token cannot inject data.

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use ringlab::collective::{Algorithm, Collective, Dtype, Op, Schedule, Spec};
use ringlab::comm::cpu::reduce::AlignedBuf;
use ringlab::comm::cpu::store::{StoreClient, StoreServer};
use ringlab::comm::cpu::tcp::{RankEnv, TcpComm, partners};
use ringlab::comm::cpu::wire::{Hello, Role};

fn env(rank: usize, world: usize, store: SocketAddr, token: [u8; 16]) -> RankEnv {
    RankEnv {
        rank,
        world,
        local_rank: rank,
        local_world: world,
        token,
        store,
        multi_node: false,
        shm: true,
    }
}

/// One rank of a ring all-reduce (f32 sum) of `count` copies of `value`; returns its result.
fn sum_of(
    store: SocketAddr,
    token: [u8; 16],
    rank: usize,
    world: usize,
    shape: &Schedule,
    count: usize,
    value: f32,
) -> Vec<f32> {
    let mut sc = StoreClient::connect(store, &token, rank as u32).expect("store client");
    let mut comm = TcpComm::init(
        &env(rank, world, store, token),
        &mut sc,
        &partners(rank, &[shape]),
        |_| {},
    )
    .expect("init");
    let mut buf = AlignedBuf::zeroed(count * 4);
    buf.bytes_mut()
        .copy_from_slice(bytemuck::cast_slice(&vec![value; count]));
    let s = Schedule::build(&Spec::new(
        Collective::AllReduce,
        Algorithm::Ring,
        world,
        count,
        4,
    ))
    .expect("s");
    comm.run(&s, buf.bytes_mut(), Dtype::F32, Op::Sum)
        .expect("run");
    bytemuck::cast_slice::<u8, f32>(buf.bytes()).to_vec()
}

#[test]
fn a_stranger_without_the_token_cannot_inject_data() {
    let token = [9u8; 16];
    let server = StoreServer::start("127.0.0.1:0".parse().expect("addr"), token).expect("store");
    let store = server.addr();
    let world = 2;
    let count = 1 << 16;
    let shape = Schedule::build(&Spec::new(
        Collective::AllReduce,
        Algorithm::Ring,
        world,
        world,
        1,
    ))
    .expect("shape");
    // Rank 0 accepts rank 1. Before rank 1 dials, a stranger dials rank 0 and sends a forged
    // hello (right rank, wrong token) followed by bytes that would poison the sum.
    let rank0 = {
        let shape = shape.clone();
        std::thread::spawn(move || sum_of(store, token, 0, world, &shape, count, 1.0))
    };
    let mut peek = StoreClient::connect(store, &token, 99).expect("peek");
    let addr0: SocketAddr = peek
        .get("addr/0", Duration::from_secs(10))
        .expect("addr/0")
        .parse()
        .expect("parse");
    let mut stranger = TcpStream::connect(addr0).expect("stranger connects");
    stranger
        .write_all(
            &Hello {
                token: [1u8; 16],
                role: Role::Peer,
                rank: 1,
            }
            .encode(),
        )
        .expect("hello");
    let _ = stranger.write_all(&vec![0x7fu8; 1 << 16]);
    std::thread::sleep(Duration::from_millis(100));
    let rank1 = std::thread::spawn(move || sum_of(store, token, 1, world, &shape, count, 2.0));
    let (a, b) = (rank0.join().expect("rank 0"), rank1.join().expect("rank 1"));
    assert!(a.iter().all(|&v| v == 3.0), "rank 0 result poisoned");
    assert!(b.iter().all(|&v| v == 3.0), "rank 1 result poisoned");
}

/// Over the network the socket closes; over shared memory the FIFO just goes quiet, and the
/// rank finds its partner gone by its connection: either way the error names rank and phase.
#[test]
fn a_peer_that_closes_mid_step_is_reported_with_rank_and_phase() {
    for shm in [true, false] {
        peer_closes_mid_step(shm);
    }
}

fn peer_closes_mid_step(shm: bool) {
    let token = [5 + u8::from(shm); 16];
    let env = move |rank, world, store, token| RankEnv {
        shm,
        ..env(rank, world, store, token)
    };
    let server = StoreServer::start("127.0.0.1:0".parse().expect("addr"), token).expect("store");
    let store = server.addr();
    let shape = Schedule::build(&Spec::new(Collective::AllReduce, Algorithm::Ring, 2, 2, 1))
        .expect("shape");
    let s2 = shape.clone();
    let quitter = std::thread::spawn(move || {
        let mut sc = StoreClient::connect(store, &token, 1).expect("sc");
        let comm = TcpComm::init(
            &env(1, 2, store, token),
            &mut sc,
            &partners(1, &[&s2]),
            |_| {},
        )
        .expect("init");
        drop(comm); // leaves without taking part
    });
    let mut sc = StoreClient::connect(store, &token, 0).expect("sc");
    let mut comm = TcpComm::init(
        &env(0, 2, store, token),
        &mut sc,
        &partners(0, &[&shape]),
        |_| {},
    )
    .expect("init");
    quitter.join().expect("quitter");
    let count = 1 << 20;
    let mut buf = AlignedBuf::zeroed(count * 4);
    let s = Schedule::build(&Spec::new(
        Collective::AllReduce,
        Algorithm::Ring,
        2,
        count,
        4,
    ))
    .expect("s");
    let e = comm
        .run(&s, buf.bytes_mut(), Dtype::F32, Op::Sum)
        .expect_err("peer gone");
    let msg = e.to_string();
    assert!(
        msg.contains("rank 1") && msg.contains("reduce-scatter"),
        "shm {shm}: {msg}"
    );
    assert_eq!(
        comm.transport_set().name(),
        if shm { "P2P" } else { "NET" },
        "{msg}"
    );
}

/// Every collective × algorithm with a schedule; sendrecv and all-to-all have one schedule
/// whatever the algorithm, so the all-reduce-only algorithms add nothing there.
fn combos() -> impl Iterator<Item = (Collective, Algorithm)> {
    Collective::ALL.into_iter().flat_map(|c| {
        Algorithm::ALL
            .into_iter()
            .filter(move |a| {
                a.supports(c)
                    && (c == Collective::AllReduce
                        || !matches!(a, Algorithm::DoubleTree | Algorithm::TwoLevel))
            })
            .map(move |a| (c, a))
    })
}

/// The dataflow engine against the definition, in-process, many times: every collective ×
/// algorithm on 2, 3 and 4 ranks over shared memory and on 3 over the network, with counts
/// that do not divide, sum and max, small and large enough to fill socket buffers and wrap the
/// FIFOs, in place and out of place, and every dtype once. Races show up as wrong elements.
#[test]
fn the_engine_matches_the_definition_for_every_schedule() {
    use ringlab::lab::bench::pattern::{self, Check};
    // Shared memory (ranks of one node) on 2, 3 and 4 ranks, and the network path with SHM off.
    for (world, shm) in [(2usize, true), (3, true), (4, true), (3, false)] {
        let token = [world as u8 + if shm { 0 } else { 16 }; 16];
        let server =
            StoreServer::start("127.0.0.1:0".parse().expect("addr"), token).expect("store");
        let store = server.addr();
        let handles: Vec<_> = (0..world)
            .map(|rank| {
                std::thread::spawn(move || -> Vec<String> {
                    let mut sc = StoreClient::connect(store, &token, rank as u32).expect("sc");
                    let shapes: Vec<Schedule> = combos()
                        .map(|(c, a)| Schedule::build(&Spec::new(c, a, world, world, 1)).expect("shape"))
                        .collect();
                    let refs: Vec<&Schedule> = shapes.iter().collect();
                    let e = RankEnv { rank, world, local_rank: rank, local_world: world, token, store, multi_node: false, shm };
                    let mut comm = TcpComm::init(&e, &mut sc, &partners(rank, &refs), |_| {}).expect("init");
                    let mut bad = Vec::new();
                    let want = if shm { "P2P" } else { "NET" };
                    if comm.transport_set().name() != want {
                        bad.push(format!("rank {rank}: transport {} instead of {want}", comm.transport_set().name()));
                    }
                    // Every dtype once, small: a reduction of each element size straight from the FIFO.
                    for (coll, algo) in combos() {
                        for dtype in Dtype::ALL {
                            let count = 1001;
                            let spec = Spec::new(coll, algo, world, count, dtype.size());
                            let s = Schedule::build(&spec).expect("schedule");
                            let check = Check { coll, op: Op::Sum, dtype, ranks: world, root: 0, rank };
                            let mut buf = AlignedBuf::zeroed(count * dtype.size());
                            pattern::fill(buf.bytes_mut(), &check);
                            comm.run(&s, buf.bytes_mut(), dtype, Op::Sum).expect("run");
                            let wrong = pattern::wrong(buf.bytes(), &check);
                            if wrong > 0 {
                                bad.push(format!("{coll:?} {algo:?} Sum {dtype:?} N={world} count={count} rank {rank}: {wrong} wrong"));
                            }
                        }
                    }
                    for (coll, algo) in combos() {
                        {
                            for (op, dtype) in [(Op::Sum, Dtype::F32), (Op::Max, Dtype::I64)] {
                                for count in [7usize, 1001, 100_003] {
                                    let es = dtype.size();
                                    let spec = Spec::new(coll, algo, world, count, es);
                                    let s = Schedule::build(&spec).expect("schedule");
                                    let check = Check { coll, op, dtype, ranks: world, root: 0, rank };
                                    let mut buf = AlignedBuf::zeroed(count * es);
                                    for _ in 0..2 {
                                        pattern::fill(buf.bytes_mut(), &check);
                                        comm.run(&s, buf.bytes_mut(), dtype, op).expect("run");
                                        let wrong = pattern::wrong(buf.bytes(), &check);
                                        if wrong > 0 {
                                            bad.push(format!("{coll:?} {algo:?} {op:?} {dtype:?} N={world} count={count} rank {rank}: {wrong} wrong"));
                                        }
                                    }
                                    // Out of place, into an output full of junk: the input is
                                    // only read, and the output must not depend on its old bytes.
                                    let mut input = AlignedBuf::zeroed(count * es);
                                    pattern::fill(input.bytes_mut(), &check);
                                    let before = input.bytes().to_vec();
                                    for junk in [0xA5u8, 0x00] {
                                        buf.bytes_mut().fill(junk);
                                        comm.run_from(&s, input.bytes(), buf.bytes_mut(), dtype, op).expect("run_from");
                                        let wrong = pattern::wrong(buf.bytes(), &check);
                                        if wrong > 0 {
                                            bad.push(format!("out of place {coll:?} {algo:?} {op:?} {dtype:?} N={world} count={count} rank {rank}: {wrong} wrong"));
                                        }
                                        if input.bytes() != before.as_slice() {
                                            bad.push(format!("out of place {coll:?} {algo:?} N={world} count={count} rank {rank}: the input changed"));
                                        }
                                    }
                                }
                            }
                        }
                    }
                    bad
                })
            })
            .collect();
        let bad: Vec<String> = handles
            .into_iter()
            .flat_map(|h| h.join().expect("rank thread"))
            .collect();
        assert!(bad.is_empty(), "{}", bad.join("\n"));
    }
}

#[test]
fn idle_strangers_on_a_ranks_port_do_not_stall_startup() {
    let token = [7u8; 16];
    let server = StoreServer::start("127.0.0.1:0".parse().expect("addr"), token).expect("store");
    let store = server.addr();
    let world = 2;
    let shape = Schedule::build(&Spec::new(
        Collective::AllReduce,
        Algorithm::Ring,
        world,
        world,
        1,
    ))
    .expect("shape");
    let started = std::time::Instant::now();
    let rank0 = {
        let shape = shape.clone();
        std::thread::spawn(move || sum_of(store, token, 0, world, &shape, 1024, 1.0))
    };
    let mut peek = StoreClient::connect(store, &token, 99).expect("peek");
    let addr0: SocketAddr = peek
        .get("addr/0", Duration::from_secs(10))
        .expect("addr/0")
        .parse()
        .expect("parse");
    // Twenty connections that never say a word: each used to hold rank 0's accept loop for
    // its 5 s greeting deadline, one after another. The first eight have been silent past the
    // grace period when the next twelve come: those eight are closed to make room.
    let mut idle: Vec<TcpStream> = (0..8)
        .filter_map(|_| TcpStream::connect(addr0).ok())
        .collect();
    // Silent past the grace is the scenario itself: time passing, not a stand-in for a condition.
    std::thread::sleep(ringlab::comm::cpu::net::GREETING_GRACE + Duration::from_millis(150));
    idle.extend((0..12).filter_map(|_| TcpStream::connect(addr0).ok()));
    // Over the per-address cap, the oldest silent ones are closed at once (an EOF or reset
    // stays once seen). The eight old ones must go; whether a young one also ages past the
    // grace before rank 0 looks depends on the runner's load, so it is not counted.
    let closed = |s: &TcpStream| {
        let mut s = s;
        let _ = s.set_read_timeout(Some(Duration::from_millis(10)));
        let mut b = [0u8; 1];
        match std::io::Read::read(&mut s, &mut b) {
            Ok(0) => true,
            Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
            Ok(_) => false,
        }
    };
    let cap = ringlab::comm::cpu::tcp::PENDING_PER_ADDRESS;
    let old = &idle[..cap.min(idle.len())];
    crate::common::wait_until(Duration::from_secs(60), || old.iter().all(closed));
    let open: Vec<usize> = (0..old.len()).filter(|&i| !closed(&old[i])).collect();
    assert!(
        old.len() == cap && open.is_empty(),
        "the {cap} long-silent connections over the cap are closed; still open: {open:?}"
    );
    // And twenty on the store: rank 1 still gets through.
    let idle_store: Vec<TcpStream> = (0..20)
        .filter_map(|_| TcpStream::connect(store).ok())
        .collect();
    std::thread::sleep(Duration::from_millis(100));
    let rank1 = std::thread::spawn(move || sum_of(store, token, 1, world, &shape, 1024, 2.0));
    let (a, b) = (rank0.join().expect("rank 0"), rank1.join().expect("rank 1"));
    assert!(a.iter().chain(&b).all(|&v| v == 3.0));
    drop(idle_store);
    // Served one after another, the eight silent strangers would hold startup for eight greeting
    // deadlines; the bound is the program's own deadline, not a guess at the runner's speed.
    assert!(
        started.elapsed() < ringlab::comm::cpu::tcp::GREETING_DEADLINE * 8,
        "startup waited on the strangers: {:?}",
        started.elapsed()
    );
    drop(idle);
}

/// The engine refuses a dtype whose element size is not the schedule's: a reduction would read
/// its elements cut apart.
#[test]
fn a_dtype_of_another_size_than_the_schedule_is_refused() {
    let token = [9u8; 16];
    let server = StoreServer::start("127.0.0.1:0".parse().expect("addr"), token).expect("store");
    let store = server.addr();
    let shape = Schedule::build(&Spec::new(Collective::AllReduce, Algorithm::Ring, 1, 1, 1))
        .expect("shape");
    let mut sc = StoreClient::connect(store, &token, 0).expect("store client");
    let mut comm = TcpComm::init(
        &env(0, 1, store, token),
        &mut sc,
        &partners(0, &[&shape]),
        |_| {},
    )
    .expect("init");
    let s = Schedule::build(&Spec::new(Collective::AllReduce, Algorithm::Ring, 1, 8, 4))
        .expect("f32 schedule");
    let mut buf = AlignedBuf::zeroed(32);
    let e = comm
        .run(&s, buf.bytes_mut(), Dtype::F16, Op::Sum)
        .expect_err("f16 on a 4-byte schedule");
    let text = e.to_string();
    assert!(
        text.contains("2 bytes") && text.contains("4-byte"),
        "{text}"
    );
    comm.run(&s, buf.bytes_mut(), Dtype::F32, Op::Sum)
        .expect("the matching dtype runs");
}

/// One call per rank, as that rank sees it.
#[derive(Clone, Copy)]
struct Call {
    coll: Collective,
    count: usize,
    dtype: Dtype,
}

/// Three ranks (threads) make one collective each, `call(rank)`, over shared memory or the
/// network; each returns its error text (None when its call succeeded). A rank that never
/// returns fails the test instead of hanging it.
fn three_calls(shm: bool, token: u8, call: fn(usize) -> Call) -> Vec<Option<String>> {
    let token = [token; 16];
    let server = StoreServer::start("127.0.0.1:0".parse().expect("addr"), token).expect("store");
    let store = server.addr();
    let world = 3;
    let shape = Schedule::build(&Spec::new(
        Collective::AllReduce,
        Algorithm::Ring,
        world,
        world,
        1,
    ))
    .expect("shape");
    let (tx, rx) = std::sync::mpsc::channel();
    for rank in 0..world {
        let (tx, shape) = (tx.clone(), shape.clone());
        std::thread::spawn(move || {
            let mut sc = StoreClient::connect(store, &token, rank as u32).expect("sc");
            let env = RankEnv {
                shm,
                ..env(rank, world, store, token)
            };
            let mut comm =
                TcpComm::init(&env, &mut sc, &partners(rank, &[&shape]), |_| {}).expect("init");
            let c = call(rank);
            let s = Schedule::build(&Spec::new(
                c.coll,
                Algorithm::Ring,
                world,
                c.count,
                c.dtype.size(),
            ))
            .expect("schedule");
            let mut buf = AlignedBuf::zeroed(c.count * c.dtype.size());
            let r = comm.run(&s, buf.bytes_mut(), c.dtype, Op::Sum);
            let _ = tx.send((rank, r.err().map(|e| e.to_string())));
        });
    }
    let mut out = vec![None; world];
    for _ in 0..world {
        let (rank, e) = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("every rank returns: a mismatch must not hang");
        out[rank] = e;
    }
    out
}

/// What differs, each rank's call, and the text that names rank 2's.
type Case = (&'static str, fn(usize) -> Call, &'static str);

/// Ranks that disagree on the size, the type or the collective fail at the first header,
/// with both calls named, on shared memory and on the network alike.
#[test]
fn ranks_that_disagree_fail_with_both_calls_named() {
    let cases: [Case; 3] = [
        (
            "size",
            |r| Call {
                coll: Collective::AllReduce,
                count: if r == 2 { 4096 } else { 1024 },
                dtype: Dtype::F32,
            },
            "of 4096 × f32",
        ),
        (
            "type",
            // The same bytes: only the header can tell.
            |r| Call {
                coll: Collective::AllReduce,
                count: if r == 2 { 512 } else { 1024 },
                dtype: if r == 2 { Dtype::F64 } else { Dtype::F32 },
            },
            "of 512 × f64",
        ),
        (
            "collective",
            |r| Call {
                coll: if r == 2 {
                    Collective::AllGather
                } else {
                    Collective::AllReduce
                },
                count: 3072,
                dtype: Dtype::F32,
            },
            "all-gather (ring) of 3072 × f32",
        ),
    ];
    for shm in [true, false] {
        for (k, (what, call, theirs)) in cases.iter().enumerate() {
            let errs = three_calls(shm, 40 + k as u8 + if shm { 10 } else { 0 }, *call);
            let ctx = format!("{what} (shm {shm}): {errs:?}");
            // Rank 2 sends to rank 0 in the ring: rank 0 reads its header and names both.
            let named = errs
                .iter()
                .flatten()
                .find(|e| e.contains("called different collectives"))
                .unwrap_or_else(|| panic!("no rank named the mismatch: {ctx}"));
            assert!(named.contains(theirs), "{ctx}");
            assert!(named.contains("rank 2 call #0"), "{ctx}");
            assert!(errs.iter().all(Option::is_some), "every rank fails: {ctx}");
        }
    }
}
