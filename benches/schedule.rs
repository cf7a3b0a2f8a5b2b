//! Building schedules: the target is ring all-reduce on 1024 ranks of 1 GiB f32 in under 10 ms.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use ringlab::collective::{Algorithm, Collective, Schedule, Spec, traffic};

fn build(c: &mut Criterion) {
    // As the binary does: steady-state allocation, not first-touch page faults.
    ringlab::tune_allocator();
    let count = (1usize << 30) / 4;
    for ranks in [8usize, 1024] {
        let spec = Spec::new(Collective::AllReduce, Algorithm::Ring, ranks, count, 4);
        c.bench_function(&format!("ring_allreduce_build_n{ranks}_1GiB_f32"), |b| {
            b.iter(|| Schedule::build(black_box(&spec)))
        });
    }
    let spec = Spec::new(Collective::AllReduce, Algorithm::Ring, 1024, count, 4);
    if let Ok(schedule) = Schedule::build(&spec) {
        c.bench_function("ring_allreduce_traffic_n1024", |b| {
            b.iter(|| traffic(black_box(&schedule)))
        });
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20);
    targets = build
}
/// The same build with glibc's default allocator settings: every iteration faults its 67 MB
/// in afresh (reported next to the tuned figure, not hidden).
fn build_cold(c: &mut Criterion) {
    let spec = Spec::new(
        Collective::AllReduce,
        Algorithm::Ring,
        1024,
        (1usize << 30) / 4,
        4,
    );
    c.bench_function("ring_allreduce_build_n1024_1GiB_f32_fresh_memory", |b| {
        b.iter_batched(
            || {
                // SAFETY: mallopt only adjusts glibc malloc parameters; trim now.
                unsafe { libc::malloc_trim(0) };
            },
            |_| Schedule::build(black_box(&spec)),
            criterion::BatchSize::PerIteration,
        )
    });
}

criterion_group! {
    name = cold;
    config = Criterion::default().sample_size(10);
    targets = build_cold
}
criterion_main!(cold, benches);
