//! The Mutex's timed and owned faces: `try_lock_for`/`try_lock_until` (and
//! lock_api's `RawMutexTimed`), `lock_arc`/`try_lock_arc`/`lock_arc_async`.
#![cfg(not(loom))]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::*};
use std::thread;
use std::time::{Duration, Instant};

use lockfree_sync::{ArcMutexGuard, Fairness, LockApiMutex, Mutex};

const MODES: [Fairness; 2] = [Fairness::Barging, Fairness::Fifo];

#[test]
fn a_timed_lock_of_a_held_mutex_gives_up_after_its_deadline() {
    for fairness in MODES {
        let m = Mutex::with_fairness(0, fairness);
        let _held = m.lock();
        thread::scope(|s| {
            s.spawn(|| {
                let start = Instant::now();
                assert!(m.try_lock_for(Duration::from_millis(3)).is_none());
                assert!(start.elapsed() >= Duration::from_millis(3), "gave up early");
                let deadline = Instant::now() + Duration::from_millis(2);
                assert!(m.try_lock_until(deadline).is_none());
                assert!(Instant::now() >= deadline);
            });
        });
    }
}

#[test]
fn a_timed_lock_gets_the_lock_released_before_its_deadline() {
    for fairness in MODES {
        let m = Mutex::with_fairness(0, fairness);
        let held = m.lock();
        thread::scope(|s| {
            let waiter = s.spawn(|| {
                *m.try_lock_for(Duration::from_secs(600))
                    .expect("the lock was released long before the deadline") += 1;
            });
            thread::sleep(Duration::from_millis(5));
            drop(held);
            waiter.join().unwrap();
        });
        assert_eq!(*m.lock(), 1);
    }
}

/// A waiter that times out leaves the queue without taking a wakeup with it:
/// the unlock still reaches the waiter queued behind it.
#[test]
fn a_timed_out_waiter_does_not_swallow_the_next_waiters_wakeup() {
    for fairness in MODES {
        let m = Arc::new(Mutex::with_fairness(0, fairness));
        let held = m.lock();
        let timed = {
            let m = Arc::clone(&m);
            thread::spawn(move || m.try_lock_for(Duration::from_millis(20)).is_some())
        };
        thread::sleep(Duration::from_millis(2));
        let blocked = {
            let m = Arc::clone(&m);
            thread::spawn(move || *m.lock() += 1)
        };
        assert!(!timed.join().unwrap(), "the lock was held all along");
        drop(held);
        blocked.join().unwrap();
        assert_eq!(*m.lock(), 1);
    }
}

/// A 1 ms timed lock fires on time while every core is busy and another
/// waiter keeps the lock contended: the deadline is checked while spinning
/// too. (A liveness bound, generous for a loaded CI machine; the old
/// symptom it guards against was a wait of hundreds of milliseconds or
/// forever.)
/// A task woken to compete that does not run (its executor is busy, or its
/// future was leaked) must not keep later unlocks from waking a queued
/// thread: the thread gets the free lock long before its deadline.
#[test]
fn a_woken_task_that_never_runs_does_not_hold_back_a_queued_thread() {
    use std::future::Future;
    use std::task::{Context, Waker};

    for leak in [true, false] {
        let m = Arc::new(Mutex::new(0));
        let held = m.lock();
        let mut fut = Box::pin(m.lock_async());
        let mut cx = Context::from_waker(Waker::noop());
        assert!(fut.as_mut().poll(&mut cx).is_pending());
        // The future is queued; this unlock wakes it, and it never runs.
        let unpolled = if leak {
            std::mem::forget(fut);
            None
        } else {
            Some(fut)
        };
        drop(held);
        let held = m.try_lock().expect("the woken task holds nothing");
        let (got, got_it) = std::sync::mpsc::channel();
        let waiter = {
            let m = Arc::clone(&m);
            // A deadline far past the wait below: a thread left asleep
            // waits it out, and the test fails first.
            thread::spawn(move || {
                let _ = got.send(m.try_lock_for(Duration::from_secs(600)).is_some());
            })
        };
        // Let the thread queue behind the held lock (if it has not yet, it
        // finds the lock free: the test passes without checking anything).
        thread::sleep(Duration::from_millis(100));
        drop(held); // must wake the queued thread
        assert_eq!(
            got_it.recv_timeout(Duration::from_secs(10)),
            Ok(true),
            "the queued thread was not woken while the lock was free (leak: {leak})"
        );
        waiter.join().unwrap();
        drop(unpolled);
        assert!(m.try_lock().is_some(), "the lock was left held");
    }
}

#[test]
fn a_one_millisecond_timeout_fires_under_cpu_load() {
    let m = Arc::new(Mutex::new(0u64));
    let stop = Arc::new(AtomicBool::new(false));
    let busy: Vec<_> = (0..4)
        .map(|_| {
            let (m, stop) = (Arc::clone(&m), Arc::clone(&stop));
            thread::spawn(move || {
                while !stop.load(Relaxed) {
                    let mut g = m.lock();
                    for _ in 0..10_000 {
                        *g = std::hint::black_box(*g + 1);
                    }
                }
            })
        })
        .collect();
    let mut worst = Duration::ZERO;
    for _ in 0..20 {
        let start = Instant::now();
        let got = m.try_lock_for(Duration::from_millis(1));
        worst = worst.max(start.elapsed());
        drop(got);
    }
    stop.store(true, Relaxed);
    for b in busy {
        b.join().unwrap();
    }
    assert!(
        worst < Duration::from_millis(500),
        "a 1 ms timeout took {worst:?}"
    );
}

#[test]
fn lock_api_timed_locks_work_through_the_alias() {
    let m = Arc::new(LockApiMutex::new(1));
    let held = m.lock();
    let m2 = Arc::clone(&m);
    let t = thread::spawn(move || m2.try_lock_for(Duration::from_millis(2)).is_none());
    assert!(t.join().unwrap());
    drop(held);
    *m.try_lock_until(Instant::now() + Duration::from_secs(1))
        .unwrap() += 1;
    assert_eq!(*m.lock(), 2);
}

#[test]
fn an_arc_guard_moves_to_another_thread_and_unlocks_there() {
    let m = Arc::new(Mutex::new(Vec::new()));
    let mut g: ArcMutexGuard<Vec<i32>> = m.lock_arc();
    g.push(1);
    assert!(m.try_lock_arc().is_none());
    thread::spawn(move || {
        let mut g = g;
        g.push(2);
    })
    .join()
    .unwrap();
    assert_eq!(*m.try_lock_arc().unwrap(), [1, 2]);
}

#[test]
fn owned_lock_futures_are_static_and_cancel_safe() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let m = Arc::new(Mutex::new(0));
        let held = Arc::clone(&m).lock_arc_async().await;
        // A timed-out owned lock (dropped while queued) loses nothing.
        let timed_out =
            tokio::time::timeout(Duration::from_millis(2), Arc::clone(&m).lock_arc_async()).await;
        assert!(timed_out.is_err());
        let tasks: Vec<_> = (0..8)
            .map(|_| {
                let m = Arc::clone(&m);
                tokio::spawn(async move {
                    let mut g = m.lock_arc_async().await;
                    tokio::task::yield_now().await;
                    *g += 1;
                })
            })
            .collect();
        drop(held);
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(*m.lock_arc_async().await, 8);
    });
    // And on a second executor.
    let m = Arc::new(Mutex::new(1));
    futures::executor::block_on(async {
        *Arc::clone(&m).lock_arc_async().await += 1;
    });
    assert_eq!(*m.lock(), 2);
}

/// The bound of the barging mode's concurrency restriction: a thread that
/// relocks at once, in a tight loop, keeps the lock while the others sleep
/// (only the woken waiter circulates), but cannot keep a queued waiter out
/// for ever: once a waiter has waited `STARVATION`, the lock is handed to
/// the waiters in FIFO order. Eight waiters on two cores each get the lock
/// within a generous bound.
#[test]
fn a_hog_that_relocks_at_once_does_not_starve_queued_waiters() {
    let m = Arc::new(Mutex::new(0u64));
    let stop = Arc::new(AtomicBool::new(false));
    let hog = {
        let (m, stop) = (Arc::clone(&m), Arc::clone(&stop));
        thread::spawn(move || {
            while !stop.load(Relaxed) {
                *m.lock() += 1;
            }
        })
    };
    while *m.lock() == 0 {
        thread::yield_now();
    }
    let waiters: Vec<_> = (0..8)
        .map(|_| {
            let m = Arc::clone(&m);
            thread::spawn(move || {
                sync_core::testing::within("a waiter beside a hog", Duration::from_secs(5), || {
                    *m.lock() += 1
                });
            })
        })
        .collect();
    for w in waiters {
        w.join().unwrap();
    }
    stop.store(true, Relaxed);
    hog.join().unwrap();
}
