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

fn releaser(sem: &Arc<Semaphore>, n: usize) -> thread::JoinHandle<()> {
    let sem = Arc::clone(sem);
    thread::spawn(move || sem.release(n))
}

/// Two releasers race two blocking acquirers on an empty semaphore: both
/// acquirers get a permit (no lost wakeup: loom reports a deadlock), the
/// releasers never wait for each other, and no permit is created or lost.
#[test]
fn two_releasers_race_acquirers() {
    model::check_with_bound(1, || {
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
    });
}
