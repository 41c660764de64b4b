//! A waiter preempted between counting itself (in the mutex's lock word, in
//! the semaphore's `count`) and linking its node into the queue must not
//! make an unlock or a release wait for it: they leave the wake-up (or the
//! delivery) to that waiter, which makes it once it has linked.
//!
//! A real waiter is frozen at a random point of a loop that queues and
//! withdraws (a `lock_async` or `acquire_async` polled once, then
//! dropped), by a signal whose handler spins until the test releases it;
//! some of the freezes land between the count and the link. Before the fix,
//! an unlock or release made then spun, then yielded, until the waiter ran
//! again (here: until the watchdog released it, a second later). After the
//! trials, the primitive still works: nothing is left held.
#![cfg(all(not(loom), target_os = "linux"))]

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use lockfree_sync::{Fairness, Mutex, Semaphore};
use sync_core::testing::freeze;

/// Bumped by every trial, watched by the watchdog.
static TRIAL: AtomicU64 = AtomicU64::new(0);

/// Longer than an unlock may take while the waiter is frozen, and shorter
/// than the watchdog's release.
const PROMPT: Duration = Duration::from_millis(500);

/// 400 trials: `hold` takes the lock (or the permit) while a waiter
/// thread runs `queue_once` in a loop (queue, then withdraw: `true` if it
/// queued), the waiter is frozen at a random point, and the hold is
/// released: that release must return promptly. Returns the slowest one.
fn trials<G>(
    what: &str,
    mut queue_once: impl FnMut() -> bool + Send + 'static,
    hold: impl Fn() -> G,
) -> Duration {
    freeze::install();
    let stop = Arc::new(AtomicBool::new(false));
    let queued = Arc::new(AtomicU64::new(0));
    let waiter = {
        let (stop, queued) = (stop.clone(), queued.clone());
        freeze::Freezable::spawn(move || {
            while !stop.load(SeqCst) {
                if queue_once() {
                    queued.fetch_add(1, SeqCst);
                }
            }
        })
    };
    // Releases a frozen waiter that a release waits for (the old
    // behaviour), so that the test fails instead of hanging.
    let watchdog = freeze::Watchdog::start(&TRIAL, Duration::from_secs(1));
    let mut slowest = Duration::ZERO;
    for _ in 0..400 {
        TRIAL.fetch_add(1, SeqCst);
        let held = hold();
        // Let the waiter queue and withdraw a while against the hold.
        let before = queued.load(SeqCst);
        let until = Instant::now() + Duration::from_micros(100);
        while Instant::now() < until || queued.load(SeqCst) == before {
            std::hint::spin_loop();
        }
        waiter.freeze();
        let start = Instant::now();
        drop(held);
        let took = start.elapsed();
        slowest = slowest.max(took);
        assert!(
            took < PROMPT,
            "{what}: the release waited for a frozen waiter"
        );
        freeze::release();
    }
    stop.store(true, SeqCst);
    waiter.join();
    drop(watchdog);
    slowest
}

fn unlock_does_not_wait_for_a_frozen_waiter(fairness: Fairness) {
    let m = Arc::new(Mutex::with_fairness(0u64, fairness));
    let queue_once = {
        let m = m.clone();
        move || {
            // Counts itself and queues while the lock is held; the drop
            // withdraws it (or passes on what it was handed).
            let mut lock = Box::pin(m.lock_async());
            let mut cx = Context::from_waker(Waker::noop());
            match lock.as_mut().poll(&mut cx) {
                Poll::Ready(mut g) => {
                    *g += 1;
                    false
                }
                Poll::Pending => true,
            }
        }
    };
    let slowest = trials(&format!("{fairness:?} mutex"), queue_once, || m.lock());
    // The lock still works, and every withdrawn node has left the count.
    *m.lock() += 1;
    assert!(m.try_lock().is_some(), "{fairness:?}: the lock stayed held");
    eprintln!("{fairness:?}: slowest unlock {slowest:?}");
}

fn release_does_not_wait_for_a_frozen_waiter() {
    let sem = Arc::new(Semaphore::new(1));
    let queue_once = {
        let sem = sem.clone();
        move || {
            // Counted and queued while the permit is held; the drop
            // withdraws it (or gives back what was delivered to it). A
            // permit got at once is dropped at once.
            let mut acquire = Box::pin(sem.acquire_async());
            let mut cx = Context::from_waker(Waker::noop());
            acquire.as_mut().poll(&mut cx).is_pending()
        }
    };
    let slowest = trials("semaphore", queue_once, || sem.acquire().unwrap());
    // Every permit came back: withdrawn demand folded, deliveries to
    // withdrawn waiters returned.
    let permit = sem.acquire().unwrap();
    assert!(sem.try_acquire().is_err(), "a permit too many");
    drop(permit);
    assert_eq!(sem.available_permits(), 1, "a permit lost");
    eprintln!("semaphore: slowest release {slowest:?}");
}

/// One test for every primitive and mode: the freeze's handler state is
/// per binary (one frozen thread at a time).
#[test]
fn unlocks_and_releases_do_not_wait_for_a_frozen_waiter() {
    for fairness in [Fairness::Barging, Fairness::Fifo] {
        unlock_does_not_wait_for_a_frozen_waiter(fairness);
    }
    release_does_not_wait_for_a_frozen_waiter();
}
