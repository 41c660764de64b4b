//! Issue 12, bug 2: memory held after cancelled or timed-out waits (the
//! mutex's locks, the semaphore's acquires) must be bounded by the waiters
//! still present, not grow with the history of cancels. A counting global allocator measures the bytes a
//! test's thread keeps; wakers built here with `std::task::Wake` carry a
//! payload standing for a task's allocation, and their strong counts show
//! whether the semaphore still holds them.
#![cfg(not(loom))]

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use lockfree_sync::{Fairness, Mutex, Semaphore};
use sync_core::testing::{CountingAlloc, thread_live_bytes};

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

// The tests run one at a time (`sync_core::testing::one_at_a_time`), so
// that one's timing does not move another's. Each counts the bytes of the
// thread that measures (`thread_live_bytes`): the harness allocates on its
// own threads while a test runs.

/// A task's stand-in: 4 KiB that a waker keeps alive.
struct Task {
    _stack: [u8; 4096],
}

impl Wake for Task {
    fn wake(self: Arc<Self>) {}
}

/// `rounds` acquires on a semaphore whose head request waits for ever, each
/// queued behind it and then withdrawn: one in four a thread's timed wait,
/// the others a task's future polled once (with its own 4 KiB waker) and
/// dropped. Returns the bytes still live afterwards, beyond `before`.
fn cancel_behind_a_waiting_head(sem: &Semaphore, rounds: usize) -> isize {
    let before = thread_live_bytes();
    for i in 0..rounds {
        if i % 4 == 0 {
            let r = sem.try_acquire_for(Duration::from_micros(1));
            assert!(r.is_err(), "nothing is free");
            continue;
        }
        let task = Arc::new(Task { _stack: [0; 4096] });
        let waker = Waker::from(Arc::clone(&task));
        {
            let mut fut = pin!(sem.acquire_async());
            assert!(
                fut.as_mut()
                    .poll(&mut Context::from_waker(&waker))
                    .is_pending()
            );
        }
        drop(waker);
        assert_eq!(
            Arc::strong_count(&task),
            1,
            "a cancelled acquire still holds the task's waker"
        );
    }
    thread_live_bytes() - before
}

#[test]
fn cancelled_acquires_behind_a_waiting_head_hold_bounded_memory() {
    let sem = Semaphore::new(0);
    // The head: a request that nothing satisfies while the others come and
    // go (issue 12: "the semaphore does the same behind a waiting head").
    let _one = sync_core::testing::one_at_a_time();
    let noop = Waker::noop();
    let mut head = pin!(sem.acquire_many_async(2));
    assert!(
        head.as_mut()
            .poll(&mut Context::from_waker(noop))
            .is_pending()
    );
    // Warm up (thread handles), then measure growth.
    let _ = cancel_behind_a_waiting_head(&sem, 1_000);
    let grown_small = cancel_behind_a_waiting_head(&sem, 1_000);
    let grown_large = cancel_behind_a_waiting_head(&sem, 40_000);
    // Before the fix: ~4 KiB per cancelled task (its waker) plus a node per
    // cancel, i.e. over 100 MB here; with the waker dropped but nodes kept,
    // about 3 MB. Bounded means: no more than a few KiB, whatever the count.
    assert!(
        grown_large < 64 * 1024,
        "40,000 cancels behind a waiting head keep {grown_large} bytes \
         (1,000 keep {grown_small})"
    );
    // The head is still served, and nobody else is counted.
    sem.release(2);
    let Poll::Ready(Ok(p)) = head.as_mut().poll(&mut Context::from_waker(noop)) else {
        panic!("the head request was not served");
    };
    drop(p);
    assert_eq!(sem.available_permits(), 2);
}

#[test]
fn cancelled_acquires_on_an_empty_queue_hold_nothing() {
    let _one = sync_core::testing::one_at_a_time();
    let sem = Semaphore::new(0);
    let _ = cancel_behind_a_waiting_head(&sem, 1_000);
    let grown = cancel_behind_a_waiting_head(&sem, 20_000);
    assert!(grown < 16 * 1024, "20,000 cancels keep {grown} bytes");
    sem.release(1);
    assert_eq!(sem.available_permits(), 1, "no demand left behind");
}

/// How many live waiters the "served queue" tests sweep and then serve,
/// and how many withdrawals they make behind the next head.
const SERVED: usize = 20_000;
const WITHDRAWN_AFTER: usize = 15_000;

/// Polls and drops a future that queues behind a live head.
fn poll_and_drop<F: Future>(fut: F) {
    let mut fut = pin!(fut);
    assert!(
        fut.as_mut()
            .poll(&mut Context::from_waker(Waker::noop()))
            .is_pending()
    );
}

/// [`WITHDRAWN_AFTER`] futures made by `withdraw`, each polled and dropped
/// behind a live head, must leave at most 64 KiB behind: `what` names the
/// primitive in the failure message.
fn assert_withdrawals_swept<F: Future>(what: &str, mut withdraw: impl FnMut() -> F) {
    let before = thread_live_bytes();
    for _ in 0..WITHDRAWN_AFTER {
        poll_and_drop(withdraw());
    }
    let grown = thread_live_bytes() - before;
    assert!(
        grown < 64 * 1024,
        "{what}: {WITHDRAWN_AFTER} withdrawals behind one head keep {grown} bytes"
    );
}

/// A sweep that kept many live waiters sets how many withdrawn ones may
/// wait behind live ones before the next sweep. Once those waiters are
/// served, the count must follow: it used to stay, and withdrawals behind
/// the next head then kept their nodes (about 80 bytes each) until as many
/// had piled up as the sweep had once kept.
#[test]
fn withdrawn_acquires_are_swept_after_a_large_queue_was_served() {
    let _one = sync_core::testing::one_at_a_time();
    let sem = Semaphore::new(0);
    let mut live: Vec<_> = (0..SERVED).map(|_| Box::pin(sem.acquire_async())).collect();
    let mut cx = Context::from_waker(Waker::noop());
    for f in &mut live {
        assert!(f.as_mut().poll(&mut cx).is_pending());
    }
    // A withdrawal behind them: a sweep that keeps them all.
    poll_and_drop(sem.acquire_async());
    sem.add_permits(SERVED);
    let held: Vec<_> = live
        .iter_mut()
        .map(|f| match f.as_mut().poll(&mut cx) {
            Poll::Ready(permit) => permit.unwrap(),
            Poll::Pending => panic!("a waiter was not served"),
        })
        .collect();
    drop(live);
    let mut head = pin!(sem.acquire_async());
    assert!(head.as_mut().poll(&mut cx).is_pending());
    assert_withdrawals_swept("Semaphore", || sem.acquire_async());
    drop(held);
    assert!(matches!(head.as_mut().poll(&mut cx), Poll::Ready(Ok(_))));
    assert_eq!(sem.available_permits(), SERVED, "a permit went missing");
}

// ---- Mutex ----------------------------------------------------------------

/// The mutex's sweep, as `withdrawn_acquires_are_swept_after_a_large_queue_was_served`.
#[test]
fn withdrawn_locks_are_swept_after_a_large_queue_was_served() {
    let _one = sync_core::testing::one_at_a_time();
    for fairness in [Fairness::Barging, Fairness::Fifo] {
        let m = Mutex::with_fairness(0u64, fairness);
        let mut guard = m.lock();
        let mut live: Vec<_> = (0..SERVED).map(|_| Box::pin(m.lock_async())).collect();
        let mut cx = Context::from_waker(Waker::noop());
        for f in &mut live {
            assert!(f.as_mut().poll(&mut cx).is_pending());
        }
        // A withdrawal behind them: a sweep that keeps them all.
        poll_and_drop(m.lock_async());
        for f in &mut live {
            drop(guard);
            guard = match f.as_mut().poll(&mut cx) {
                Poll::Ready(g) => g,
                Poll::Pending => panic!("{fairness:?}: a waiter was not served"),
            };
            *guard += 1;
        }
        let mut head = pin!(m.lock_async());
        assert!(head.as_mut().poll(&mut cx).is_pending());
        assert_withdrawals_swept(&format!("{fairness:?}"), || m.lock_async());
        drop(guard);
        let Poll::Ready(g) = head.as_mut().poll(&mut cx) else {
            panic!("{fairness:?}: the head was not served");
        };
        assert_eq!(*g, SERVED as u64);
    }
}

const ATTEMPTS: usize = 20_000;

/// Polls [`ATTEMPTS`] lock futures once each on the held `m` (each queues)
/// and drops them (each withdraws).
fn queue_and_drop_lock_futures(m: &Mutex<u64>, waker: &Waker) {
    for _ in 0..ATTEMPTS {
        let mut fut = pin!(m.lock_async());
        assert!(
            fut.as_mut()
                .poll(&mut Context::from_waker(waker))
                .is_pending()
        );
    }
}

/// 20,000 lock futures polled once (queued) behind a held lock and dropped,
/// as `tokio::time::timeout` drops them: no task is kept alive, and the
/// bytes left are those of a handful of nodes, not 20,000.
#[test]
fn cancelled_lock_futures_leave_nothing_behind_while_the_lock_is_held() {
    let _one = sync_core::testing::one_at_a_time();
    for fairness in [Fairness::Barging, Fairness::Fifo] {
        let m = Mutex::with_fairness(0u64, fairness);
        let held = m.lock();
        let task = Arc::new(Task { _stack: [0; 4096] });
        let waker = Waker::from(Arc::clone(&task));
        let before = thread_live_bytes();
        queue_and_drop_lock_futures(&m, &waker);
        let kept = thread_live_bytes() - before;
        assert_eq!(Arc::strong_count(&task), 2, "cancelled waits keep the task");
        assert!(
            kept < 4096,
            "{fairness:?}: {ATTEMPTS} cancelled waits keep {kept} bytes"
        );
        drop(held);
        assert_eq!(*m.lock(), 0);
    }
}

/// The same with threads whose timed locks time out.
#[test]
fn timed_out_thread_locks_leave_nothing_behind() {
    let _one = sync_core::testing::one_at_a_time();
    let m = Mutex::new(0u64);
    let held = m.lock();
    std::thread::scope(|s| {
        s.spawn(|| {
            // Warm up the thread's own allocations first.
            assert!(m.try_lock_for(Duration::ZERO).is_none());
            let before = thread_live_bytes();
            for _ in 0..2_000 {
                assert!(m.try_lock_for(Duration::from_micros(1)).is_none());
            }
            let kept = thread_live_bytes() - before;
            assert!(kept < 4096, "2000 timed-out locks keep {kept} bytes");
        });
    });
    drop(held);
    assert_eq!(*m.lock(), 0);
}

/// A waiter that stays queued (a live task) does not stop the withdrawn
/// ones in front of it from being freed, and the unlock still wakes it.
#[test]
fn a_live_waiter_behind_cancelled_ones_is_still_woken() {
    let _one = sync_core::testing::one_at_a_time();
    let m = Mutex::new(0u64);
    let held = m.lock();
    let task = Arc::new(Task { _stack: [0; 4096] });
    let waker = Waker::from(Arc::clone(&task));
    for _ in 0..100 {
        let mut fut = pin!(m.lock_async());
        assert!(
            fut.as_mut()
                .poll(&mut Context::from_waker(&waker))
                .is_pending()
        );
    }
    let mut live = Box::pin(m.lock_async());
    assert!(
        live.as_mut()
            .poll(&mut Context::from_waker(&waker))
            .is_pending()
    );
    drop(held);
    match live.as_mut().poll(&mut Context::from_waker(&waker)) {
        Poll::Ready(mut g) => *g += 1,
        Poll::Pending => panic!("the live waiter was not woken by the unlock"),
    }
    assert_eq!(*m.lock(), 1);
}

/// Issue: withdrawn waiters queued *behind a live one* were freed only once
/// the lock reached that live waiter (the reclaim swept the front of the
/// queue and stopped at the first live waiter), so memory grew with the
/// history of timeouts and cancels. A live task waits first in line while
/// the lock is held; 20,000 futures polled once (queued behind it) and
/// dropped, and 2,000 timed-out thread locks, must keep a bounded number of
/// bytes, and the live waiter still gets the lock.
#[test]
fn withdrawn_waiters_behind_a_live_one_hold_bounded_memory() {
    let _one = sync_core::testing::one_at_a_time();
    for fairness in [Fairness::Barging, Fairness::Fifo] {
        let m = Mutex::with_fairness(0u64, fairness);
        let held = m.lock();
        let task = Arc::new(Task { _stack: [0; 4096] });
        let waker = Waker::from(Arc::clone(&task));
        let mut first = Box::pin(m.lock_async());
        assert!(
            first
                .as_mut()
                .poll(&mut Context::from_waker(&waker))
                .is_pending()
        );
        let before = thread_live_bytes();
        queue_and_drop_lock_futures(&m, &waker);
        let kept = thread_live_bytes() - before;
        // Before the fix: a node per cancel, about 1.4 MB here.
        assert!(
            kept < 4096,
            "{fairness:?}: {ATTEMPTS} cancels behind a live waiter keep {kept} bytes"
        );
        std::thread::scope(|s| {
            s.spawn(|| {
                // Warm up the thread's own allocations first.
                assert!(m.try_lock_for(Duration::ZERO).is_none());
                let before = thread_live_bytes();
                for _ in 0..2_000 {
                    assert!(m.try_lock_for(Duration::from_micros(1)).is_none());
                }
                let kept = thread_live_bytes() - before;
                // Before the fix: a node per timeout, about 150 KB here.
                assert!(
                    kept < 4096,
                    "{fairness:?}: 2000 timeouts behind a live waiter keep {kept} bytes"
                );
            });
        });
        drop(held);
        match first.as_mut().poll(&mut Context::from_waker(&waker)) {
            Poll::Ready(mut g) => *g += 1,
            Poll::Pending => panic!("{fairness:?}: the live waiter was not woken"),
        }
        drop(first);
        assert_eq!(*m.lock(), 1);
    }
}

/// Lock futures queued behind a held lock and dropped, whose wakers panic
/// when dropped (withdrawing drops them): the withdrawal still reclaims
/// the node, so the bytes left do not grow with the number of such drops.
#[test]
fn lock_futures_whose_waker_drop_panics_leave_nothing_behind() {
    const DROPS: usize = 200;
    let _one = sync_core::testing::one_at_a_time();
    // The harness keeps each panic's message: that is not the mutex's.
    sync_core::testing::HostileWaker::quiet_panics();
    for fairness in [Fairness::Barging, Fairness::Fifo] {
        let m = Mutex::with_fairness(0u64, fairness);
        let held = m.lock();
        let hostile = sync_core::testing::HostileWaker::new();
        let waker = hostile.waker();
        let drop_one = || {
            let mut fut = Box::pin(m.lock_async());
            assert!(
                fut.as_mut()
                    .poll(&mut Context::from_waker(&waker))
                    .is_pending()
            );
            hostile.panic_on_drops(1);
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(fut)));
            assert!(r.is_err(), "the waker's panic goes on");
        };
        // Warm up what the first panic allocates for good.
        drop_one();
        let before = thread_live_bytes();
        for _ in 0..DROPS {
            drop_one();
        }
        let kept = thread_live_bytes() - before;
        assert!(
            kept < 1024,
            "{fairness:?}: {DROPS} withdrawn waits whose waker panicked keep {kept} bytes"
        );
        drop(held);
        assert_eq!(*m.lock(), 0);
    }
}

/// Threads that poll `acquire_async` once and drop it, faster than the
/// deliverer folds their nodes, while the only permit is held throughout:
/// once they have stopped, their nodes are freed, not left queued until
/// the next release (a deliverer that stopped after a bounded step, with
/// more to do, once left hundreds of megabytes there).
#[test]
fn withdrawn_acquires_are_freed_once_the_churn_stops_while_the_permit_is_held() {
    let _one = sync_core::testing::one_at_a_time();
    let sem = Arc::new(Semaphore::new(1));
    let held = sem.acquire().unwrap();
    let before = sync_core::testing::live_bytes();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let pollers: Vec<_> = (0..3)
        .map(|_| {
            let (sem, stop) = (Arc::clone(&sem), Arc::clone(&stop));
            std::thread::spawn(move || {
                let waker = Waker::noop();
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let mut fut = pin!(sem.acquire_async());
                    let _ = fut.as_mut().poll(&mut Context::from_waker(waker));
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for p in pollers {
        p.join().unwrap();
    }
    let left = sync_core::testing::live_bytes() - before;
    assert!(
        left < 64 * 1024,
        "{left} bytes still live after the withdrawals, with the permit held"
    );
    drop(held);
    assert_eq!(sem.available_permits(), 1);
}

/// Runs `poll_once` on four threads, in a loop, for `run`, while this
/// thread samples the bytes live in the process: returns the most it saw
/// beyond what was live before. Four pollers outnumber this machine's
/// cores, so they can queue withdrawn nodes faster than the one dequeuer
/// (the semaphore's deliverer, the mutex's `WAKING` holder) frees them.
fn peak_live_while_polled_and_dropped(
    run: Duration,
    poll_once: impl Fn() + Send + Sync + 'static,
) -> isize {
    use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
    let before = sync_core::testing::live_bytes();
    let stop = Arc::new(AtomicBool::new(false));
    let poll_once = Arc::new(poll_once);
    let pollers: Vec<_> = (0..4)
        .map(|_| {
            let (stop, poll_once) = (Arc::clone(&stop), Arc::clone(&poll_once));
            std::thread::spawn(move || {
                while !stop.load(Relaxed) {
                    poll_once();
                }
            })
        })
        .collect();
    let end = std::time::Instant::now() + run;
    let mut peak = 0;
    while std::time::Instant::now() < end {
        peak = peak.max(sync_core::testing::live_bytes() - before);
        std::thread::sleep(Duration::from_millis(2));
    }
    stop.store(true, Relaxed);
    for p in pollers {
        p.join().unwrap();
    }
    peak
}

/// A generous bound on the bytes live at the peak of a churn: the
/// withdrawn nodes that may wait for their dequeuer (about a thousand,
/// `lockfree_sync`'s backlog limit, plus one per poller and as many as the
/// live waiters, none here) take a few hundred kilobytes, and the peaks
/// measured were 1.5-3 MB. Without the limit, 600 ms of churn left 50-70 MB
/// live, growing for as long as it lasted.
const CHURN_PEAK: isize = 16 << 20;

/// Threads that poll `acquire_async` once and drop it, without pause,
/// while the only permit is held throughout: the nodes the deliverer has
/// not freed yet stay bounded for as long as they go on (a cancel that
/// finds it far behind waits for it), rather than growing with the
/// length of the churn.
#[test]
fn withdrawn_acquires_stay_bounded_while_the_churn_lasts() {
    let _one = sync_core::testing::one_at_a_time();
    let sem = Arc::new(Semaphore::new(1));
    let held = sem.acquire().unwrap();
    let peak = peak_live_while_polled_and_dropped(Duration::from_millis(600), {
        let sem = Arc::clone(&sem);
        move || {
            let mut fut = pin!(sem.acquire_async());
            let _ = fut.as_mut().poll(&mut Context::from_waker(Waker::noop()));
        }
    });
    assert!(
        peak < CHURN_PEAK,
        "{peak} bytes live at the peak of the churn, with the permit held"
    );
    drop(held);
    assert_eq!(sem.available_permits(), 1);
}

/// The same for `lock_async`, in both modes, with the lock held
/// throughout.
#[test]
fn withdrawn_locks_stay_bounded_while_the_churn_lasts() {
    let _one = sync_core::testing::one_at_a_time();
    for fairness in [Fairness::Fifo, Fairness::Barging] {
        let m = Arc::new(Mutex::with_fairness(0u64, fairness));
        let held = m.lock();
        let peak = peak_live_while_polled_and_dropped(Duration::from_millis(600), {
            let m = Arc::clone(&m);
            move || {
                let mut fut = pin!(m.lock_async());
                let _ = fut.as_mut().poll(&mut Context::from_waker(Waker::noop()));
            }
        });
        assert!(
            peak < CHURN_PEAK,
            "{fairness:?}: {peak} bytes live at the peak of the churn, with the lock held"
        );
        drop(held);
        assert!(m.try_lock().is_some());
    }
}
