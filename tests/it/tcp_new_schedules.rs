//! The schedules of all-to-all, the double binary tree and the two-level ring over real
//! sockets, ranks as threads on loopback: 2, 3 and 5 ranks (and 4 = 2 × 2, 6 = 2 × 3 for the two
//! levels), in place and out of place. All-to-all is checked exactly: every rank holds, in block
//! r, exactly the block rank r meant for it, element for element.

use std::net::SocketAddr;

use ringlab::collective::{Algorithm, Collective, Dtype, Op, Schedule, Spec};
use ringlab::comm::cpu::reduce::AlignedBuf;
use ringlab::comm::cpu::store::{StoreClient, StoreServer};
use ringlab::comm::cpu::tcp::{RankEnv, TcpComm, partners};
use ringlab::lab::bench::pattern::{self, Check};

/// Runs `body(rank, comm)` on `world` rank threads joined by real sockets for `shapes`;
/// returns every problem the ranks report.
fn on_ranks(
    world: usize,
    shapes: fn(usize) -> Vec<Spec>,
    body: fn(usize, usize, &mut TcpComm) -> Vec<String>,
) -> Vec<String> {
    let token = [world as u8 + 40; 16];
    let server = StoreServer::start("127.0.0.1:0".parse().expect("addr"), token).expect("store");
    let store: SocketAddr = server.addr();
    let handles: Vec<_> = (0..world)
        .map(|rank| {
            std::thread::spawn(move || {
                let mut sc =
                    StoreClient::connect(store, &token, rank as u32).expect("store client");
                let built: Vec<Schedule> = shapes(world)
                    .iter()
                    .map(|s| Schedule::build(&Spec { count: world, ..*s }).expect("shape"))
                    .collect();
                let refs: Vec<&Schedule> = built.iter().collect();
                let env = RankEnv {
                    rank,
                    world,
                    local_rank: rank,
                    local_world: world,
                    token,
                    store,
                    multi_node: false,
                    shm: true,
                };
                let mut comm =
                    TcpComm::init(&env, &mut sc, &partners(rank, &refs), |_| {}).expect("init");
                body(rank, world, &mut comm)
            })
        })
        .collect();
    handles
        .into_iter()
        .flat_map(|h| h.join().expect("rank thread"))
        .collect()
}

fn alltoall_specs(world: usize) -> Vec<Spec> {
    vec![Spec::new(
        Collective::AllToAll,
        Algorithm::Ring,
        world,
        world,
        8,
    )]
}

/// Unique i64 values: rank r's element i is r·10⁹ + i. After the all-to-all, rank j's block r
/// must equal rank r's block j, and the tail past N whole blocks must be j's own input (in
/// place) — checked element by element, in place and out of place.
fn alltoall_exact(rank: usize, world: usize, comm: &mut TcpComm) -> Vec<String> {
    let mut bad = Vec::new();
    let sent = |r: usize, i: usize| (r as i64) * 1_000_000_000 + i as i64;
    for count in [world, 7, 1001, 100_003] {
        let s = Schedule::build(&Spec::new(
            Collective::AllToAll,
            Algorithm::Ring,
            world,
            count,
            8,
        ))
        .expect("schedule");
        let b = count / world;
        let mine: Vec<i64> = (0..count).map(|i| sent(rank, i)).collect();
        let want: Vec<i64> = (0..count)
            .map(|i| {
                if i < b * world {
                    sent(i / b, rank * b + i % b)
                } else {
                    sent(rank, i)
                }
            })
            .collect();
        let mut buf = AlignedBuf::zeroed(count * 8);
        buf.bytes_mut().copy_from_slice(bytemuck::cast_slice(&mine));
        comm.run(&s, buf.bytes_mut(), Dtype::I64, Op::Sum)
            .expect("run");
        let got: Vec<i64> = bytemuck::cast_slice(buf.bytes()).to_vec();
        if got != want {
            let n = got.iter().zip(&want).filter(|(a, b)| a != b).count();
            bad.push(format!(
                "in place N={world} count={count} rank {rank}: {n} wrong"
            ));
        }
        let mut input = AlignedBuf::zeroed(count * 8);
        input
            .bytes_mut()
            .copy_from_slice(bytemuck::cast_slice(&mine));
        buf.bytes_mut().fill(0xA5);
        comm.run_from(&s, input.bytes(), buf.bytes_mut(), Dtype::I64, Op::Sum)
            .expect("run_from");
        let got: Vec<i64> = bytemuck::cast_slice(buf.bytes()).to_vec();
        if got[..b * world] != want[..b * world] {
            bad.push(format!(
                "out of place N={world} count={count} rank {rank}: blocks wrong"
            ));
        }
        if input.bytes() != bytemuck::cast_slice::<i64, u8>(&mine) {
            bad.push(format!(
                "out of place N={world} rank {rank}: the input changed"
            ));
        }
        // The crafted pattern in small types (what `ringlab bench --check` uses).
        for dtype in [Dtype::I8, Dtype::Bf16, Dtype::F32] {
            let check = Check {
                coll: Collective::AllToAll,
                op: Op::Sum,
                dtype,
                ranks: world,
                root: 0,
                rank,
            };
            let s = Schedule::build(&Spec::new(
                Collective::AllToAll,
                Algorithm::Ring,
                world,
                count,
                dtype.size(),
            ))
            .expect("schedule");
            let mut buf = AlignedBuf::zeroed(count * dtype.size());
            pattern::fill(buf.bytes_mut(), &check);
            comm.run(&s, buf.bytes_mut(), dtype, Op::Sum).expect("run");
            let wrong = pattern::wrong(buf.bytes(), &check);
            if wrong > 0 {
                bad.push(format!(
                    "{dtype:?} N={world} count={count} rank {rank}: {wrong} wrong"
                ));
            }
        }
    }
    bad
}

#[test]
fn alltoall_delivers_exactly_each_peers_block_on_2_3_5_ranks() {
    for world in [2, 3, 5] {
        let bad = on_ranks(world, alltoall_specs, alltoall_exact);
        assert!(bad.is_empty(), "{}", bad.join("\n"));
    }
}

/// The all-reduce specs a world runs: the double tree, the two-level ring with its default
/// nodes, and with every node size that divides the world.
fn allreduce_specs(world: usize) -> Vec<Spec> {
    let mut v = vec![Spec::new(
        Collective::AllReduce,
        Algorithm::DoubleTree,
        world,
        world,
        4,
    )];
    for g in (1..=world).filter(|g| world.is_multiple_of(*g)) {
        v.push(Spec {
            gpus_per_node: g,
            ..Spec::new(Collective::AllReduce, Algorithm::TwoLevel, world, world, 4)
        });
    }
    v
}

fn allreduce_checked(rank: usize, world: usize, comm: &mut TcpComm) -> Vec<String> {
    let mut bad = Vec::new();
    for spec in allreduce_specs(world) {
        for (op, dtype) in [
            (Op::Sum, Dtype::F32),
            (Op::Max, Dtype::I64),
            (Op::Avg, Dtype::Bf16),
        ] {
            for count in [7usize, 1001, 100_003] {
                let es = dtype.size();
                let s = Schedule::build(&Spec {
                    count,
                    elem_size: es,
                    ..spec
                })
                .expect("schedule");
                let check = Check {
                    coll: Collective::AllReduce,
                    op,
                    dtype,
                    ranks: world,
                    root: 0,
                    rank,
                };
                let what = format!(
                    "{} (G={}) {op} {dtype} N={world} count={count} rank {rank}",
                    spec.algo,
                    spec.node_size()
                );
                let mut buf = AlignedBuf::zeroed(count * es);
                pattern::fill(buf.bytes_mut(), &check);
                comm.run(&s, buf.bytes_mut(), dtype, op).expect("run");
                let wrong = pattern::wrong(buf.bytes(), &check);
                if wrong > 0 {
                    bad.push(format!("in place {what}: {wrong} wrong"));
                }
                let mut input = AlignedBuf::zeroed(count * es);
                pattern::fill(input.bytes_mut(), &check);
                buf.bytes_mut().fill(0xA5);
                comm.run_from(&s, input.bytes(), buf.bytes_mut(), dtype, op)
                    .expect("run_from");
                let wrong = pattern::wrong(buf.bytes(), &check);
                if wrong > 0 {
                    bad.push(format!("out of place {what}: {wrong} wrong"));
                }
            }
        }
    }
    bad
}

#[test]
fn double_tree_and_two_level_allreduce_check_clean_on_2_3_4_5_6_ranks() {
    for world in [2, 3, 4, 5, 6] {
        let bad = on_ranks(world, allreduce_specs, allreduce_checked);
        assert!(bad.is_empty(), "{}", bad.join("\n"));
    }
}
