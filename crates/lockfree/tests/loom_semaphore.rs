//! Loom models of lockfree-sync's Semaphore: the paper's algorithm 2 with a
//! negative counter, concurrent releasers, many-permit requests and
//! cancelled async acquires. Run with `cargo xtask loom -p lockfree-sync`.
#![cfg(loom)]

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use lockfree_sync::Semaphore;
use sync_core::model;
use sync_core::sync::{Arc, thread};

/// Every thread is done: `free` permits must be there, no more, no less.
/// Cancelled requests behind a live one may still be counted (they are
/// folded lazily, when a release reaches them), so one more release must
/// fold them all and leave exactly `free + 1` permits, no delivery pending
/// and no deliverer's role held.
fn assert_idle(sem: &Semaphore, free: usize) {
    sem.release(1);
    let all = sem.try_acquire_many(free + 1);
    assert!(all.is_some(), "fewer than {} permits", free + 1);
    all.unwrap().forget();
    assert_eq!(sem.loom_state(), (0, 0), "(count, pending) left behind");
}

fn releaser(sem: &Arc<Semaphore>, n: usize) -> thread::JoinHandle<()> {
    let sem = Arc::clone(sem);
    thread::spawn(move || sem.release(n))
}

/// Two releasers race two blocking acquirers on an empty semaphore: both
/// acquirers get a permit (no lost wakeup: loom reports a deadlock), the
/// releasers never wait for each other, and no permit is created or lost.
#[test]
fn two_releasers_race_acquirers() {
    model::check_with_bound(2, || {
        let sem = Arc::new(Semaphore::new(0));
        let acquirer = {
            let sem = Arc::clone(&sem);
            thread::spawn(move || sem.acquire().forget())
        };
        let r1 = releaser(&sem, 1);
        let r2 = releaser(&sem, 1);
        sem.acquire().forget();
        acquirer.join().unwrap();
        r1.join().unwrap();
        r2.join().unwrap();
        assert_eq!(sem.available_permits(), 0);
        assert!(sem.try_acquire().is_none());
        assert_idle(&sem, 0);
    });
}

/// A request for two permits takes the one that is free and waits at the
/// head of the queue for the rest, which two concurrent releases supply one
/// by one (the first is kept in `pending` until the second arrives).
#[test]
fn many_permit_request_waits_at_the_head() {
    model::check_with_bound(2, || {
        let sem = Arc::new(Semaphore::new(1));
        let big = {
            let sem = Arc::clone(&sem);
            thread::spawn(move || {
                let p = sem.acquire_many(2);
                assert_eq!(p.permits(), 2);
            })
        };
        let r1 = releaser(&sem, 1);
        let r2 = releaser(&sem, 1);
        big.join().unwrap();
        r1.join().unwrap();
        r2.join().unwrap();
        assert_eq!(sem.available_permits(), 3);
        assert_idle(&sem, 3);
    });
}

/// An async acquire polled once (queued, perhaps holding a partial permit)
/// and then dropped, racing the releases that deliver to it: every permit
/// comes back, and a blocking acquirer queued behind it is served.
#[test]
fn async_acquire_dropped_while_queued_or_after_delivery() {
    model::check_with_bound(2, || {
        let sem = Arc::new(Semaphore::new(1));
        let held = sem.acquire();
        let dropper = {
            let sem = Arc::clone(&sem);
            thread::spawn(move || {
                let mut fut = pin!(sem.acquire_many_async(2));
                let mut cx = Context::from_waker(Waker::noop());
                if let Poll::Ready(p) = fut.as_mut().poll(&mut cx) {
                    drop(p);
                }
                // Dropped here: queued, or already granted.
            })
        };
        let blocker = {
            let sem = Arc::clone(&sem);
            thread::spawn(move || drop(sem.acquire()))
        };
        sem.release(1); // a permit more: two in all
        drop(held);
        dropper.join().unwrap();
        blocker.join().unwrap();
        assert_eq!(sem.available_permits(), 2);
        assert_idle(&sem, 2);
    });
}

/// An async acquire driven by loom's executor while a thread releases: the
/// task's waker is woken and the permit arrives.
#[test]
fn async_acquire_completes() {
    model::check_with_bound(2, || {
        let sem = Arc::new(Semaphore::new(0));
        let task = {
            let sem = Arc::clone(&sem);
            thread::spawn(move || {
                sync_core::loom::future::block_on(async {
                    sem.acquire_async().await.forget();
                })
            })
        };
        let r = releaser(&sem, 1);
        task.join().unwrap();
        r.join().unwrap();
        assert_eq!(sem.available_permits(), 0);
        assert_idle(&sem, 0);
    });
}

/// The head request, waiting for two permits, is dropped while a releaser
/// delivers one to it and a blocking acquirer queues behind it; nobody
/// releases again. The permit must reach the acquirer (loom reports a
/// deadlock if it is stranded), also when the deliverer had looked at the
/// head just before the cancel and is about to retire.
#[test]
fn dropped_head_request_does_not_strand_its_pending_permits() {
    model::check_with_bound(2, || {
        let sem = Arc::new(Semaphore::new(0));
        let dropper = {
            let sem = Arc::clone(&sem);
            thread::spawn(move || {
                let mut fut = pin!(sem.acquire_many_async(2));
                let mut cx = Context::from_waker(Waker::noop());
                let _ = fut.as_mut().poll(&mut cx);
            })
        };
        let r = releaser(&sem, 1);
        let acquirer = {
            let sem = Arc::clone(&sem);
            thread::spawn(move || sem.acquire().forget())
        };
        dropper.join().unwrap();
        r.join().unwrap();
        acquirer.join().unwrap();
        assert_eq!(sem.available_permits(), 0);
        assert_idle(&sem, 0);
    });
}

/// A semaphore of one permit guards data (a loom cell: loom reports a data
/// race if a permit passed by handoff, by a fold or by the counter does not
/// order the accesses), between two blocking acquirers and an async acquire
/// dropped at any point.
#[test]
fn one_permit_guards_data() {
    use sync_core::sync::cell::UnsafeCell;
    struct Guarded {
        sem: Semaphore,
        data: UnsafeCell<usize>,
    }
    // SAFETY: `data` is only touched while holding the semaphore's only
    // permit (which is what this model checks).
    unsafe impl Sync for Guarded {}
    fn add(g: &Guarded, n: usize) {
        let _p = g.sem.acquire();
        // SAFETY: we hold the only permit.
        g.data.with_mut(|d| unsafe { *d += n });
    }
    model::check_with_bound(2, || {
        let g = Arc::new(Guarded {
            sem: Semaphore::new(1),
            data: UnsafeCell::new(0),
        });
        let a = {
            let g = Arc::clone(&g);
            thread::spawn(move || add(&g, 1))
        };
        let dropper = {
            let g = Arc::clone(&g);
            thread::spawn(move || {
                let mut fut = pin!(g.sem.acquire_async());
                let mut cx = Context::from_waker(Waker::noop());
                if let Poll::Ready(_p) = fut.as_mut().poll(&mut cx) {
                    // SAFETY: we hold the only permit.
                    g.data.with_mut(|d| unsafe { *d += 100 });
                }
            })
        };
        add(&g, 10);
        a.join().unwrap();
        dropper.join().unwrap();
        // SAFETY: every other thread is done.
        let n = g.data.with(|d| unsafe { *d });
        assert!(n == 11 || n == 111, "data {n}");
        assert_idle(&g.sem, 1);
    });
}
