//! Waiters that keep queueing and withdrawing (tasks that poll a
//! `lock_async` or `acquire_async` once, as a `select!` loop does, and drop
//! it) must not hold an unlock or a release for as long as they go on, nor
//! keep a blocking waiter from its turn for ever.
//!
//! Four threads poll-and-drop futures in a tight loop while the main thread
//! takes and releases the primitive. Before the fix, an unlock popped the
//! withdrawn nodes as fast as the pollers pushed them and did not return
//! until they stopped (here, until the watchdog stopped them); in FIFO mode
//! the sweeps of withdrawn nodes moved a blocking waiter behind the pollers'
//! nodes again and again (a `lock` of seconds); and the semaphore's
//! deliverer kept compacting and never reached the blocking acquirer.
#![cfg(not(loom))]

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::task::{Context, Waker};
use std::time::{Duration, Instant};

use lockfree_sync::{Fairness, Mutex, Semaphore};

/// Far longer than an unlock, a release or a mutex's lock may take (they
/// take microseconds, or a time slice when preempted).
const PROMPT: Duration = Duration::from_millis(1000);
/// How long the main thread goes without progress before the watchdog
/// stops the pollers (the old behaviour then fails instead of hanging).
/// Longer than `PROMPT`: the semaphore's acquirer may wait for its single
/// deliverer to work through what four pollers queued (see the test).
const STALL: Duration = Duration::from_secs(4);
/// How long the main thread takes and releases.
const RUN: Duration = Duration::from_millis(700);
const POLLERS: usize = 4;

/// What [`churn`] measured: the longest call, and whether the watchdog had
/// to stop the pollers.
struct Churned {
    longest: Duration,
    stalled: bool,
}

/// Runs `poll_once` on [`POLLERS`] threads, in a loop, while this thread
/// runs `take_and_release` for [`RUN`].
fn churn(
    poll_once: impl Fn() + Send + Sync + 'static,
    mut take_and_release: impl FnMut(),
) -> Churned {
    let stop = Arc::new(AtomicBool::new(false));
    let stalled = Arc::new(AtomicBool::new(false));
    let progress = Arc::new(AtomicU64::new(0));
    let poll_once = Arc::new(poll_once);
    let pollers: Vec<_> = (0..POLLERS)
        .map(|_| {
            let (stop, poll_once) = (stop.clone(), poll_once.clone());
            std::thread::spawn(move || {
                while !stop.load(SeqCst) {
                    poll_once();
                }
            })
        })
        .collect();
    let watchdog = {
        let (stop, stalled, progress) = (stop.clone(), stalled.clone(), progress.clone());
        std::thread::spawn(move || {
            let mut seen = progress.load(SeqCst);
            let mut since = Instant::now();
            while !stop.load(SeqCst) {
                std::thread::sleep(Duration::from_millis(20));
                let now = progress.load(SeqCst);
                if now != seen {
                    (seen, since) = (now, Instant::now());
                } else if since.elapsed() > STALL {
                    stalled.store(true, SeqCst);
                    stop.store(true, SeqCst);
                }
            }
        })
    };
    let end = Instant::now() + RUN;
    let mut longest = Duration::ZERO;
    while Instant::now() < end && !stop.load(SeqCst) {
        let began = Instant::now();
        take_and_release();
        longest = longest.max(began.elapsed());
        progress.fetch_add(1, SeqCst);
    }
    stop.store(true, SeqCst);
    for p in pollers {
        p.join().unwrap();
    }
    watchdog.join().unwrap();
    Churned {
        longest,
        stalled: stalled.load(SeqCst),
    }
}

/// Polls `fut` once with a no-op waker, then drops it.
fn poll_and_drop<F: Future>(fut: F) {
    let mut fut = std::pin::pin!(fut);
    let _ = fut.as_mut().poll(&mut Context::from_waker(Waker::noop()));
}

#[test]
fn unlocks_and_locks_stay_prompt_while_futures_are_polled_and_dropped() {
    for fairness in [Fairness::Barging, Fairness::Fifo] {
        let m = Arc::new(Mutex::with_fairness(0u64, fairness));
        let mut unlock_longest = Duration::ZERO;
        let churned = {
            let m2 = m.clone();
            churn(
                move || poll_and_drop(m2.lock_async()),
                || {
                    let mut g = m.lock();
                    *g += 1;
                    let began = Instant::now();
                    drop(g);
                    unlock_longest = unlock_longest.max(began.elapsed());
                },
            )
        };
        assert!(
            !churned.stalled,
            "{fairness:?}: a lock or unlock never returned while futures were polled and dropped"
        );
        assert!(
            unlock_longest < PROMPT,
            "{fairness:?}: an unlock took {unlock_longest:?} while futures were polled and dropped"
        );
        assert!(
            churned.longest < PROMPT,
            "{fairness:?}: a lock and unlock took {:?} while futures were polled and dropped",
            churned.longest
        );
        assert!(
            m.try_lock().is_some(),
            "{fairness:?}: the lock was left held"
        );
    }
}

/// The semaphore's releases return promptly, and its blocking acquirer is
/// served. Not as promptly as the mutex's locker: the pollers queue nodes
/// faster than the one deliverer at a time folds them (the mutex's
/// withdrawing waiters free their own), so the acquirer may wait while
/// the deliverer works through the nodes queued ahead of it.
#[test]
fn releases_stay_prompt_and_acquires_end_while_futures_are_polled_and_dropped() {
    let s = Arc::new(Semaphore::new(1));
    let mut release_longest = Duration::ZERO;
    let churned = {
        let s2 = s.clone();
        churn(
            move || poll_and_drop(s2.acquire_async()),
            || {
                let permit = s.acquire().unwrap();
                let began = Instant::now();
                drop(permit);
                release_longest = release_longest.max(began.elapsed());
            },
        )
    };
    assert!(
        !churned.stalled,
        "an acquire or release never returned while futures were polled and dropped"
    );
    assert!(
        release_longest < PROMPT,
        "a release took {release_longest:?} while futures were polled and dropped"
    );
    assert_eq!(s.available_permits(), 1, "a permit went missing");
}

/// A close while threads poll and drop `acquire_many_async` (and threads
/// block in `acquire`): every blocked acquirer is sent away, and every
/// delivery ends, so the pollers stop when told to. A deliverer that had
/// stopped a bounded step with work left when the close came used to pass
/// again and again once the drain had
/// found nothing left, never retiring: its poller never returned (and a
/// debug build's count of its passes overflowed after billions of them).
#[test]
fn a_close_during_the_churn_ends_every_delivery() {
    let s = Arc::new(Semaphore::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let finished = Arc::new(AtomicU64::new(0));
    let pollers: Vec<_> = (0..POLLERS)
        .map(|i| {
            let (s, stop, finished) = (s.clone(), stop.clone(), finished.clone());
            std::thread::spawn(move || {
                let mut n = i;
                while !stop.load(SeqCst) {
                    n += 1;
                    poll_and_drop(s.acquire_many_async(1 + n % 3));
                }
                finished.fetch_add(1, SeqCst);
            })
        })
        .collect();
    let blocked: Vec<_> = (0..4)
        .map(|_| {
            let s = s.clone();
            std::thread::spawn(move || s.acquire().is_err())
        })
        .collect();
    std::thread::sleep(RUN);
    s.close();
    for b in blocked {
        assert!(
            b.join().unwrap(),
            "a blocked acquire got a permit nobody added"
        );
    }
    std::thread::sleep(Duration::from_millis(100));
    stop.store(true, SeqCst);
    let deadline = Instant::now() + STALL;
    while finished.load(SeqCst) < POLLERS as u64 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(
        finished.load(SeqCst),
        POLLERS as u64,
        "a poller's delivery did not end within {STALL:?} of the close"
    );
    for p in pollers {
        p.join().unwrap();
    }
    assert!(
        s.try_acquire().is_err(),
        "the closed semaphore gave a permit"
    );
}
