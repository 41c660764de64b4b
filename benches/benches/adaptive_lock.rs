//! criterion micro-benchmarks of `adaptive-lock` beside its peers: the
//! uncontended and try paths (where the monitor must cost nothing), and
//! two-thread contended pairs under the learned and the static policies.
//!
//! `cargo bench -p sync-bench --bench adaptive_lock`; the paper's
//! experiments are in `cargo xtask report --only adaptive/`.

mod common;

use adaptive_lock::AdaptiveMutex;
use criterion::{Criterion, criterion_group, criterion_main};
use sync_bench::workloads::adaptive::{
    Adaptive, BlockPolicy, LearnedPolicy, SimplePolicy, SpinPolicy,
};

fn uncontended(c: &mut Criterion) {
    let mut g = c.benchmark_group("adaptive_lock/uncontended");
    let ours = AdaptiveMutex::<u64>::new(0);
    g.bench_function("adaptive", |b| b.iter(|| *ours.lock() += 1));
    let pl = parking_lot::Mutex::new(0u64);
    g.bench_function("parking_lot", |b| b.iter(|| *pl.lock() += 1));
    let std = std::sync::Mutex::new(0u64);
    g.bench_function("std", |b| b.iter(|| *std.lock().unwrap() += 1));
    g.finish();

    let mut g = c.benchmark_group("adaptive_lock/try");
    g.bench_function("adaptive", |b| {
        b.iter(|| *ours.try_lock().expect("free") += 1)
    });
    g.bench_function("parking_lot", |b| {
        b.iter(|| *pl.try_lock().expect("free") += 1)
    });
    g.finish();
}

fn contended_pair(c: &mut Criterion) {
    let mut g = c.benchmark_group("adaptive_lock/contended-2");
    g.bench_function("adaptive", |b| {
        b.iter_custom(common::contended::<Adaptive<LearnedPolicy, u64>>)
    });
    g.bench_function("simple-adapt", |b| {
        b.iter_custom(common::contended::<Adaptive<SimplePolicy, u64>>)
    });
    g.bench_function("spin", |b| {
        b.iter_custom(common::contended::<Adaptive<SpinPolicy, u64>>)
    });
    g.bench_function("block", |b| {
        b.iter_custom(common::contended::<Adaptive<BlockPolicy, u64>>)
    });
    g.bench_function("parking_lot", |b| {
        b.iter_custom(common::contended::<parking_lot::Mutex<u64>>)
    });
    g.bench_function("std", |b| {
        b.iter_custom(common::contended::<std::sync::Mutex<u64>>)
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = common::config();
    targets = uncontended, contended_pair
}
criterion_main!(benches);
