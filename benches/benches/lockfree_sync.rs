//! criterion micro-benchmarks of `lockfree-sync` beside its peers: the
//! mutex's and the semaphore's uncontended, try and async forms, two-thread
//! contended pairs, and the channels' send + receive.
//!
//! `cargo bench -p sync-bench --bench lockfree_sync`; the paper's
//! multi-thread experiments are in `cargo xtask report --only lf/`.

mod common;

use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use lockfree_sync::{Fairness, Mutex, Semaphore, csp, mpsc};
use sync_bench::peers::BenchSemaphore;

/// A two-thread stream benchmark: `$make` builds a fresh channel per
/// measurement; one thread sends `iters` values, the other receives them.
macro_rules! stream {
    ($g:expr, $name:expr, $make:expr) => {
        $g.bench_function($name, |b| {
            b.iter_custom(|iters| {
                #[allow(unused_mut)]
                let (mut tx, mut rx) = $make;
                common::pair(
                    iters,
                    move |n| (0..n).for_each(|i| tx.send(i).unwrap()),
                    |n| {
                        (0..n).for_each(|_| {
                            black_box(rx.recv().unwrap());
                        })
                    },
                )
            })
        })
    };
}

fn mutex_uncontended(c: &mut Criterion) {
    let mut g = c.benchmark_group("lockfree_sync/mutex-uncontended");
    let ours = Mutex::new(0u64);
    g.bench_function("lockfree-sync", |b| b.iter(|| *ours.lock() += 1));
    let fifo = Mutex::with_fairness(0u64, Fairness::Fifo);
    g.bench_function("lockfree-sync-fifo", |b| b.iter(|| *fifo.lock() += 1));
    let pl = parking_lot::Mutex::new(0u64);
    g.bench_function("parking_lot", |b| b.iter(|| *pl.lock() += 1));
    let std = std::sync::Mutex::new(0u64);
    g.bench_function("std", |b| b.iter(|| *std.lock().unwrap() += 1));
    g.finish();
}

fn mutex_try(c: &mut Criterion) {
    let mut g = c.benchmark_group("lockfree_sync/mutex-try");
    let ours = Mutex::new(0u64);
    g.bench_function("lockfree-sync", |b| {
        b.iter(|| *ours.try_lock().expect("free") += 1)
    });
    let pl = parking_lot::Mutex::new(0u64);
    g.bench_function("parking_lot", |b| {
        b.iter(|| *pl.try_lock().expect("free") += 1)
    });
    let std = std::sync::Mutex::new(0u64);
    g.bench_function("std", |b| b.iter(|| *std.try_lock().expect("free") += 1));
    g.finish();
}

fn mutex_async(c: &mut Criterion) {
    let mut g = c.benchmark_group("lockfree_sync/mutex-async");
    let ours = Mutex::new(0u64);
    g.bench_function("lockfree-sync", |b| {
        b.iter(|| *common::poll_once(ours.lock_async()) += 1)
    });
    let tokio = tokio::sync::Mutex::new(0u64);
    g.bench_function("tokio", |b| {
        b.iter(|| *common::poll_once(tokio.lock()) += 1)
    });
    let al = async_lock::Mutex::new(0u64);
    g.bench_function("async-lock", |b| {
        b.iter(|| *common::poll_once(al.lock()) += 1)
    });
    g.finish();
}

fn mutex_contended(c: &mut Criterion) {
    let mut g = c.benchmark_group("lockfree_sync/mutex-contended-2");
    g.bench_function("lockfree-sync", |b| {
        b.iter_custom(common::contended::<Mutex<u64>>)
    });
    g.bench_function("lockfree-sync-fifo", |b| {
        b.iter_custom(common::contended::<sync_bench::peers::FifoMutex<u64>>)
    });
    g.bench_function("parking_lot", |b| {
        b.iter_custom(common::contended::<parking_lot::Mutex<u64>>)
    });
    g.bench_function("std", |b| {
        b.iter_custom(common::contended::<std::sync::Mutex<u64>>)
    });
    g.finish();
}

fn semaphore_uncontended(c: &mut Criterion) {
    let mut g = c.benchmark_group("lockfree_sync/semaphore-acquire");
    let ours = Semaphore::new(4);
    g.bench_function("lockfree-sync", |b| {
        b.iter(|| drop(ours.acquire().expect("open")))
    });
    let al = async_lock::Semaphore::new(4);
    g.bench_function("async-lock", |b| b.iter(|| drop(al.acquire_blocking())));
    g.finish();

    let mut g = c.benchmark_group("lockfree_sync/semaphore-try");
    g.bench_function("lockfree-sync", |b| {
        b.iter(|| drop(ours.try_acquire().expect("free")))
    });
    let tokio = tokio::sync::Semaphore::new(4);
    g.bench_function("tokio", |b| {
        b.iter(|| drop(tokio.try_acquire().expect("free")))
    });
    g.bench_function("async-lock", |b| {
        b.iter(|| drop(al.try_acquire().expect("free")))
    });
    g.finish();

    let mut g = c.benchmark_group("lockfree_sync/semaphore-async");
    g.bench_function("lockfree-sync", |b| {
        b.iter(|| drop(common::poll_once(ours.acquire_async()).expect("open")))
    });
    g.bench_function("tokio", |b| {
        b.iter(|| drop(common::poll_once(tokio.acquire()).expect("open")))
    });
    g.bench_function("async-lock", |b| {
        b.iter(|| drop(common::poll_once(al.acquire())))
    });
    g.finish();
}

/// Two threads each take the one permit and give it back `iters` times.
fn sem_contended<S: BenchSemaphore>(iters: u64) -> std::time::Duration {
    let s = Arc::new(S::new(1));
    let s2 = Arc::clone(&s);
    let work = |s: &S, n: u64| {
        for _ in 0..n {
            s.with_permit(|| black_box(()));
        }
    };
    common::pair(iters, move |n| work(&s2, n), |n| work(&s, n))
}

fn semaphore_contended(c: &mut Criterion) {
    let mut g = c.benchmark_group("lockfree_sync/semaphore-contended-2");
    g.bench_function("lockfree-sync", |b| {
        b.iter_custom(sem_contended::<Semaphore>)
    });
    g.bench_function("tokio", |b| {
        b.iter_custom(sem_contended::<tokio::sync::Semaphore>)
    });
    g.bench_function("async-lock", |b| {
        b.iter_custom(sem_contended::<async_lock::Semaphore>)
    });
    g.finish();
}

fn mpsc_same_thread(c: &mut Criterion) {
    let mut g = c.benchmark_group("lockfree_sync/mpsc-send-recv");
    let (tx, rx) = mpsc::channel::<u64>();
    g.bench_function("lockfree-sync", |b| {
        b.iter(|| {
            tx.send(black_box(1)).unwrap();
            rx.try_recv().unwrap()
        })
    });
    let (tx, rx) = crossbeam_channel::unbounded::<u64>();
    g.bench_function("crossbeam", |b| {
        b.iter(|| {
            tx.send(black_box(1)).unwrap();
            rx.try_recv().unwrap()
        })
    });
    let (tx, rx) = std::sync::mpsc::channel::<u64>();
    g.bench_function("std", |b| {
        b.iter(|| {
            tx.send(black_box(1)).unwrap();
            rx.try_recv().unwrap()
        })
    });
    let (tx, rx) = flume::unbounded::<u64>();
    g.bench_function("flume", |b| {
        b.iter(|| {
            tx.send(black_box(1)).unwrap();
            rx.try_recv().unwrap()
        })
    });
    g.finish();
}

/// One thread sends `iters` values, the other receives them.
fn mpsc_stream(c: &mut Criterion) {
    let mut g = c.benchmark_group("lockfree_sync/mpsc-stream-2");
    stream!(g, "lockfree-sync", mpsc::channel::<u64>());
    stream!(g, "crossbeam", crossbeam_channel::unbounded::<u64>());
    stream!(g, "std", std::sync::mpsc::channel::<u64>());
    stream!(g, "flume", flume::unbounded::<u64>());
    g.finish();
}

/// One thread sends `iters` values through a rendezvous channel (no
/// buffer), the other receives them: one iteration is one meeting.
fn rendezvous(c: &mut Criterion) {
    let mut g = c.benchmark_group("lockfree_sync/rendezvous-2");
    stream!(g, "lockfree-sync", csp::channel::<u64>());
    stream!(g, "crossbeam", crossbeam_channel::bounded::<u64>(0));
    stream!(g, "std", std::sync::mpsc::sync_channel::<u64>(0));
    g.finish();
}

criterion_group! {
    name = benches;
    config = common::config();
    targets = mutex_uncontended, mutex_try, mutex_async, mutex_contended,
        semaphore_uncontended, semaphore_contended, mpsc_same_thread, mpsc_stream,
        rendezvous
}
criterion_main!(benches);
