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
    assert!(all.is_ok(), "fewer than {} permits", free + 1);
    all.unwrap().forget();
    assert_eq!(
        sem.__test_loom_state(),
        (0, 0),
        "(count, pending) left behind"
    );
    assert_eq!(sem.__test_loom_handover(), 0, "a handover left half-way");
    assert_eq!(
        sem.__test_loom_backlog(),
        0,
        "withdrawals and frees disagree"
    );
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
            thread::spawn(move || sem.acquire().unwrap().forget())
        };
        let r1 = releaser(&sem, 1);
        let r2 = releaser(&sem, 1);
        sem.acquire().unwrap().forget();
        acquirer.join().unwrap();
        r1.join().unwrap();
        r2.join().unwrap();
        assert_eq!(sem.available_permits(), 0);
        assert!(sem.try_acquire().is_err());
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
                let p = sem.acquire_many(2).unwrap();
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
        let held = sem.acquire().unwrap();
        let dropper = {
            let sem = Arc::clone(&sem);
            thread::spawn(move || {
                let mut fut = pin!(sem.acquire_many_async(2));
                let mut cx = Context::from_waker(Waker::noop());
                if let Poll::Ready(Ok(p)) = fut.as_mut().poll(&mut cx) {
                    drop(p);
                }
                // Dropped here: queued, or already granted.
            })
        };
        let blocker = {
            let sem = Arc::clone(&sem);
            thread::spawn(move || drop(sem.acquire().unwrap()))
        };
        sem.release(1); // a permit more: two in all
        drop(held);
        dropper.join().unwrap();
        blocker.join().unwrap();
        assert_eq!(sem.available_permits(), 2);
        assert_idle(&sem, 2);
    });
}

/// Two async acquires are queued, and two threads drop them while the
/// permit is released: the deliverer's passes find nothing to deliver to
/// them, so under loom it asks for help after one, and the second
/// cancelling thread may take the deliverer's role over. Whoever ends up
/// with it, the request queued behind theirs gets the permit, and nothing
/// stays owed, pending or half handed over.
#[test]
fn tired_deliverer_hands_its_role_to_a_cancelling_waiter() {
    model::check_with_bound(2, || {
        // Leaked, so that the futures can move to other threads.
        let sem: &'static Semaphore = Box::leak(Box::new(Semaphore::new(1)));
        let held = sem.acquire().unwrap();
        let d1 = model::queued_then_dropped_elsewhere(sem.acquire_async());
        let d2 = model::queued_then_dropped_elsewhere(sem.acquire_async());
        // Queued behind the two, and kept: the permit must reach it.
        let mut cx = Context::from_waker(Waker::noop());
        let mut live = Box::pin(sem.acquire_async());
        assert!(live.as_mut().poll(&mut cx).is_pending());
        drop(held);
        d1.join().unwrap();
        d2.join().unwrap();
        // Woken or not (the waker is a no-op), a poll finds the permit.
        match live.as_mut().poll(&mut cx) {
            Poll::Ready(Ok(permit)) => drop(permit),
            other => panic!("the live request was not served: {other:?}"),
        }
        assert_eq!(sem.available_permits(), 1);
        assert_idle(sem, 1);
    });
}

/// Two threads drop queued requests while the permit is released, and
/// every cancel that finds the deliverer running waits for it to free the
/// nodes withdrawn up to its own (the backlog's limit lowered to nothing):
/// the wait ends, whoever delivers and whenever it retires or hands its
/// role over, and every node is freed.
#[test]
fn cancels_wait_for_a_deliverer_that_is_behind() {
    model::check_with_bound(2, || {
        let sem: &'static Semaphore = Box::leak(Box::new(Semaphore::new(1)));
        sem.__test_loom_backlog_limit(0);
        let held = sem.acquire().unwrap();
        let d1 = model::queued_then_dropped_elsewhere(sem.acquire_async());
        let d2 = model::queued_then_dropped_elsewhere(sem.acquire_async());
        drop(held);
        d1.join().unwrap();
        d2.join().unwrap();
        assert_eq!(sem.available_permits(), 1);
        assert_idle(sem, 1);
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
                    sem.acquire_async().await.unwrap().forget();
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
            thread::spawn(move || sem.acquire().unwrap().forget())
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
        let _p = g.sem.acquire().unwrap();
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
                if let Poll::Ready(Ok(_p)) = fut.as_mut().poll(&mut cx) {
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

/// Issue 12, bug 1: `Semaphore::new(2)`, main holds one permit, two threads
/// each `acquire_many(2)`, then main releases its permit. A request that
/// found a free permit when it was counted must not sit on it while a
/// request queued ahead of it waits for that very permit: both requests must
/// be served (loom reports a deadlock otherwise), and both permits are free
/// at the end.
#[test]
fn two_many_permit_requests_with_a_partial_hold_do_not_deadlock() {
    model::check_with_bound(2, || {
        let sem = Arc::new(Semaphore::new(2));
        let held = sem.acquire().unwrap();
        let spawn_big = |sem: &Arc<Semaphore>| {
            let sem = Arc::clone(sem);
            thread::spawn(move || {
                let p = sem.acquire_many(2).unwrap();
                assert_eq!(p.permits(), 2);
            })
        };
        let a = spawn_big(&sem);
        let b = spawn_big(&sem);
        drop(held);
        a.join().unwrap();
        b.join().unwrap();
        assert_eq!(sem.available_permits(), 2);
        assert_idle(&sem, 2);
    });
}

/// Issue 12, bug 3: a request above every permit in existence waits at the
/// head for ever, with a small request behind it (or ahead of it); `close`
/// must send both away (a blocked thread is reported by loom as a deadlock),
/// free the permit kept for the big one, and leave no deliverer behind.
#[test]
fn close_sends_every_waiter_away_even_an_impossible_request() {
    model::check_with_bound(2, || {
        let sem = Arc::new(Semaphore::new(1));
        let big = {
            let sem = Arc::clone(&sem);
            thread::spawn(move || sem.acquire_many(2).map(|p| p.permits()))
        };
        let small = {
            let sem = Arc::clone(&sem);
            thread::spawn(move || sem.acquire().map(|p| p.permits()))
        };
        sem.close();
        assert!(big.join().unwrap().is_err(), "two permits never exist");
        let _ = small.join().unwrap(); // served before the close, or not
        assert!(sem.is_closed());
        assert!(sem.acquire().is_err(), "an acquire after close");
        assert_eq!(sem.available_permits(), 1);
        let (count, pending) = sem.__test_loom_state();
        assert_eq!(count, 1);
        assert_eq!(pending & !0b100, 0, "pending {pending:#b} left behind");
    });
}

/// A close racing an async acquire that is being counted and queued, then
/// dropped: the future is sent away or withdrawn, never left waiting, and
/// no permit is lost.
#[test]
fn close_races_a_queueing_task() {
    model::check_with_bound(2, || {
        let sem = Arc::new(Semaphore::new(0));
        let task = {
            let sem = Arc::clone(&sem);
            thread::spawn(move || {
                sync_core::loom::future::block_on(async { sem.acquire_async().await.is_err() })
            })
        };
        let r = releaser(&sem, 1);
        sem.close();
        let closed_out = task.join().unwrap();
        r.join().unwrap();
        // Served before the close (and released) or sent away: either way
        // the permit is free again.
        let _ = closed_out;
        assert_eq!(sem.available_permits(), 1);
        let (count, pending) = sem.__test_loom_state();
        assert_eq!(count, 1);
        assert_eq!(pending & !0b100, 0, "pending {pending:#b} left behind");
    });
}

/// A timed acquire at the head races the release that serves it and times
/// out (loom lets the timeout win or lose): a blocking acquirer behind it
/// is served either way (the permit is neither stranded nor lost).
#[test]
fn timed_acquire_times_out_or_is_served_never_strands_the_permit() {
    model::check_with_bound(2, || {
        let sem = Arc::new(Semaphore::new(0));
        let timed = {
            let sem = Arc::clone(&sem);
            thread::spawn(move || {
                sem.try_acquire_many_for(2, std::time::Duration::from_millis(1))
                    .map(|p| p.permits())
            })
        };
        let blocker = {
            let sem = Arc::clone(&sem);
            thread::spawn(move || sem.acquire().unwrap().forget())
        };
        sem.release(1);
        sem.release(1);
        let _ = timed.join().unwrap();
        blocker.join().unwrap();
        assert_eq!(sem.available_permits(), 1);
        assert_idle(&sem, 1);
    });
}

/// A close racing a thread and a task that are being counted and queued on
/// an empty semaphore, with no release to come: each must be sent away
/// (loom reports a deadlock if one is left waiting), also when it was
/// counted after the close's drain had looked for the last time.
#[test]
fn close_races_a_queueing_thread_and_task() {
    model::check_with_bound(2, || {
        let sem = Arc::new(Semaphore::new(0));
        let thread_waiter = {
            let sem = Arc::clone(&sem);
            thread::spawn(move || sem.acquire().is_err())
        };
        let task = {
            let sem = Arc::clone(&sem);
            thread::spawn(move || {
                sync_core::loom::future::block_on(async { sem.acquire_async().await.is_err() })
            })
        };
        sem.close();
        assert!(thread_waiter.join().unwrap());
        assert!(task.join().unwrap());
        assert_eq!(
            sem.__test_loom_state(),
            (0, 0b100),
            "(count, pending) left behind"
        );
    });
}

/// Issue 12, bug 2: a withdrawn request behind a waiting head is folded and
/// freed by the sweep its cancel triggers (not when the head is served),
/// racing the releases that serve the head: no demand or permit is lost,
/// the head is served, and the queue is left consistent.
#[test]
fn cancel_behind_a_waiting_head_is_swept() {
    model::check_with_bound(2, || {
        let sem = Arc::new(Semaphore::new(0));
        let big = {
            let sem = Arc::clone(&sem);
            thread::spawn(move || sem.acquire_many(2).unwrap().permits())
        };
        let dropper = {
            let sem = Arc::clone(&sem);
            thread::spawn(move || {
                let mut fut = pin!(sem.acquire_async());
                let mut cx = Context::from_waker(Waker::noop());
                if let Poll::Ready(p) = fut.as_mut().poll(&mut cx) {
                    drop(p);
                }
            })
        };
        sem.release(2);
        assert_eq!(big.join().unwrap(), 2);
        dropper.join().unwrap();
        assert_eq!(sem.available_permits(), 2);
        assert_idle(&sem, 2);
    });
}

/// Task A's acquire of one permit, queued with a waker that panics when
/// woken, and a thread that releases two permits (A's panic may go on out
/// of that release instead, once it is done: caught there).
fn panicking_task_and_a_release_of_two(
    sem: &Arc<Semaphore>,
) -> (
    std::pin::Pin<Box<lockfree_sync::AcquireAsync<'_>>>,
    thread::JoinHandle<()>,
) {
    let mut a = Box::pin(sem.acquire_async());
    assert!(
        a.as_mut()
            .poll(&mut Context::from_waker(&model::panicking_waker()))
            .is_pending()
    );
    let sem = Arc::clone(sem);
    let releaser = thread::spawn(move || {
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| sem.release(2)));
    });
    (a, releaser)
}

/// Task A waits for one permit with a waker that panics; a thread releases
/// two while task B asks for two. B's request can find a released permit
/// before the releaser hands it on, run the delivery itself and wake A: A's
/// panic then goes on out of B's poll. B's request must be recorded before
/// it does: a later poll gets B's permits and a drop gives them back, so
/// that once every future is gone both permits are free again (before the
/// fix, B's counted request was left in the queue with nobody to withdraw
/// it, and its permits were lost).
#[test]
fn a_waker_panic_out_of_a_queueing_poll_loses_no_permit() {
    model::check_with_bound(2, || {
        let sem = Arc::new(Semaphore::new(0));
        let quiet = Waker::noop();
        let (a, releaser) = panicking_task_and_a_release_of_two(&sem);
        let mut b = Box::pin(sem.acquire_many_async(2));
        let polled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            matches!(
                b.as_mut().poll(&mut Context::from_waker(quiet)),
                Poll::Ready(Ok(_))
            )
        }));
        releaser.join().unwrap();
        // A gives its permit back (granted, or withdrawn): B's turn.
        drop(a);
        if !matches!(polled, Ok(true)) {
            if let Poll::Ready(r) = b.as_mut().poll(&mut Context::from_waker(quiet)) {
                assert!(r.is_ok(), "the semaphore is not closed");
            }
        }
        drop(b);
        assert_eq!(sem.available_permits(), 2, "a permit was lost");
        assert_idle(&sem, 2);
    });
}

/// The blocking form of the race above: a thread's `acquire_many(2)` runs
/// the delivery that wakes task A, whose waker panics. The thread withdraws
/// its request (or gives back what it was already handed) before the panic
/// goes on out of `acquire_many`, so no permit is lost.
#[test]
fn a_waker_panic_out_of_a_queueing_acquire_loses_no_permit() {
    model::check_with_bound(2, || {
        let sem = Arc::new(Semaphore::new(0));
        let (a, releaser) = panicking_task_and_a_release_of_two(&sem);
        let b = {
            let sem = Arc::clone(&sem);
            thread::spawn(move || {
                // Granted (and given back here), or A's panic.
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    drop(sem.acquire_many(2));
                }));
            })
        };
        releaser.join().unwrap();
        // A gives its permit back (granted, or withdrawn): B's turn, if B
        // still waits.
        drop(a);
        b.join().unwrap();
        assert_eq!(sem.available_permits(), 2, "a permit was lost");
        assert_idle(&sem, 2);
    });
}
