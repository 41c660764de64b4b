//! Soak tests: threads and tasks together, a million operations, invariants
//! checked as they go and at the end. Run with
//! `cargo xtask soak -p lockfree-sync` (release; `--minutes N` to go on
//! longer) and under AddressSanitizer with `cargo xtask asan -p lockfree-sync`.
#![cfg(not(loom))]

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::*};
use std::task::{Context, Waker};
use std::thread;

use lockfree_sync::{Fairness, Mutex, Semaphore};
use sync_core::testing::soak;

const THREADS: usize = 6;
const TASKS: usize = 24;

/// A tiny xorshift, so each worker cancels at its own random points.
fn rng(seed: u64) -> impl FnMut() -> u64 {
    let mut x = seed | 1;
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Mutual exclusion, checked with a non-atomic counter (the data itself),
/// by threads locking blockingly and tasks locking asynchronously, with
/// some lock futures dropped after one poll (queued, woken or handed the
/// lock). The count must come out exact, in both fairness modes.
#[test]
#[ignore = "soak: run with cargo xtask soak"]
fn mutual_exclusion_with_a_non_atomic_counter() {
    const PER_THREAD: u64 = 100_000;
    const PER_TASK: u64 = 20_000;
    for fairness in [Fairness::Barging, Fairness::Fifo] {
        soak(1, |_| {
            let m = Arc::new(Mutex::with_fairness(0u64, fairness));
            let inside = Arc::new(AtomicUsize::new(0));
            let by_tasks = Arc::new(AtomicUsize::new(0));
            let threads: Vec<_> = (0..THREADS)
                .map(|t| {
                    let (m, inside) = (Arc::clone(&m), Arc::clone(&inside));
                    thread::spawn(move || {
                        let mut next = rng(t as u64 + 1);
                        for _ in 0..PER_THREAD {
                            if next() % 8 == 0 {
                                // A cancelled async lock from a thread.
                                let mut fut = pin!(m.lock_async());
                                let _ = fut.as_mut().poll(&mut Context::from_waker(Waker::noop()));
                            }
                            let mut g = m.lock();
                            assert_eq!(inside.fetch_add(1, Relaxed), 0, "two holders");
                            *g += 1;
                            inside.fetch_sub(1, Relaxed);
                        }
                    })
                })
                .collect();
            runtime().block_on(async {
                let tasks: Vec<_> = (0..TASKS)
                    .map(|t| {
                        let (m, inside) = (Arc::clone(&m), Arc::clone(&inside));
                        let by_tasks = Arc::clone(&by_tasks);
                        tokio::spawn(async move {
                            let mut next = rng(t as u64 + 100);
                            for _ in 0..PER_TASK {
                                if next() % 8 == 0 {
                                    // Dropped while queued or just handed it.
                                    let _ = tokio::time::timeout(
                                        std::time::Duration::ZERO,
                                        m.lock_async(),
                                    )
                                    .await;
                                    continue;
                                }
                                let mut g = m.lock_async().await;
                                assert_eq!(inside.fetch_add(1, Relaxed), 0, "two holders");
                                *g += 1;
                                by_tasks.fetch_add(1, Relaxed);
                                if next() % 64 == 0 {
                                    tokio::task::yield_now().await;
                                }
                                inside.fetch_sub(1, Relaxed);
                            }
                        })
                    })
                    .collect();
                for t in tasks {
                    t.await.unwrap();
                }
            });
            for t in threads {
                t.join().unwrap();
            }
            let expected = THREADS * PER_THREAD as usize + by_tasks.load(Relaxed);
            assert_eq!(
                *m.lock() as usize,
                expected,
                "increments lost: mutual exclusion broke"
            );
            assert!(!m.is_locked());
        });
    }
}

/// The permits held at once never exceed the limit, with threads and tasks
/// acquiring one or several permits.
#[test]
#[ignore = "soak: run with cargo xtask soak"]
fn permits_held_never_exceed_the_limit() {
    const LIMIT: usize = 3;
    const PER_WORKER: usize = 50_000;
    soak(1, |_| {
        let sem = Arc::new(Semaphore::new(LIMIT));
        let held = Arc::new(AtomicUsize::new(0));
        let check = |held: &AtomicUsize, n: usize| {
            let now = held.fetch_add(n, AcqRel) + n;
            assert!(now <= LIMIT, "{now} permits held of {LIMIT}");
            held.fetch_sub(n, AcqRel);
        };
        let threads: Vec<_> = (0..THREADS)
            .map(|t| {
                let (sem, held) = (Arc::clone(&sem), Arc::clone(&held));
                thread::spawn(move || {
                    let mut next = rng(t as u64 + 7);
                    for _ in 0..PER_WORKER {
                        let n = 1 + (next() % 2) as usize;
                        let p = sem.acquire_many(n).unwrap();
                        check(&held, n);
                        drop(p);
                    }
                })
            })
            .collect();
        runtime().block_on(async {
            let tasks: Vec<_> = (0..TASKS)
                .map(|t| {
                    let (sem, held) = (Arc::clone(&sem), Arc::clone(&held));
                    tokio::spawn(async move {
                        let mut next = rng(t as u64 + 1000);
                        for _ in 0..PER_WORKER / 10 {
                            let n = 1 + (next() % 3) as usize;
                            let p = sem.acquire_many_async(n).await.unwrap();
                            check(&held, n);
                            if next() % 16 == 0 {
                                tokio::task::yield_now().await;
                            }
                            drop(p);
                        }
                    })
                })
                .collect();
            for t in tasks {
                t.await.unwrap();
            }
        });
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(sem.available_permits(), LIMIT);
    });
}

/// A million cancelled acquires, mixed with completed ones, from threads
/// (futures dropped after one poll) and tasks (timeouts): no permit is lost
/// or created.
#[test]
#[ignore = "soak: run with cargo xtask soak"]
fn no_permit_is_lost_to_a_million_cancelled_acquires() {
    const LIMIT: usize = 4;
    const CANCELS: usize = 1_000_000;
    soak(1, |_| {
        let sem = Arc::new(Semaphore::new(LIMIT));
        let cancelled = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..THREADS)
            .map(|t| {
                let (sem, cancelled) = (Arc::clone(&sem), Arc::clone(&cancelled));
                thread::spawn(move || {
                    let mut next = rng(t as u64 + 31);
                    while cancelled.load(Relaxed) < CANCELS {
                        let n = 1 + (next() % 3) as usize;
                        if next() % 3 == 0 {
                            let p = sem.acquire_many(n).unwrap();
                            drop(p);
                        } else if next() % 4 == 0 {
                            // A timed wait that may give up while queued.
                            let timeout = std::time::Duration::from_micros(next() % 50);
                            if sem.try_acquire_many_for(n, timeout).is_err() {
                                cancelled.fetch_add(1, Relaxed);
                            }
                        } else {
                            let mut fut = pin!(sem.acquire_many_async(n));
                            let r = fut.as_mut().poll(&mut Context::from_waker(Waker::noop()));
                            drop(r);
                            cancelled.fetch_add(1, Relaxed);
                        }
                    }
                })
            })
            .collect();
        runtime().block_on(async {
            let tasks: Vec<_> = (0..8)
                .map(|t| {
                    let (sem, cancelled) = (Arc::clone(&sem), Arc::clone(&cancelled));
                    tokio::spawn(async move {
                        let mut next = rng(t as u64 + 500);
                        while cancelled.load(Relaxed) < CANCELS {
                            let n = 1 + (next() % 3) as usize;
                            let acquire = sem.acquire_many_async(n);
                            match tokio::time::timeout(std::time::Duration::ZERO, acquire).await {
                                Ok(p) => drop(p.unwrap()),
                                Err(_) => {
                                    cancelled.fetch_add(1, Relaxed);
                                }
                            }
                            tokio::task::yield_now().await;
                        }
                    })
                })
                .collect();
            for t in tasks {
                t.await.unwrap();
            }
        });
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(sem.available_permits(), LIMIT, "permits lost or created");
        assert_eq!(sem.acquire_many(LIMIT).unwrap().permits(), LIMIT);
    });
}
